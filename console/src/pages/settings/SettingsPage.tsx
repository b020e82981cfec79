import { useQuery } from '@tanstack/react-query'
import { api, must } from '../../api/client.ts'
import { needsRole, useWorkspace } from '../../auth/workspace.tsx'
import { ErrorAlert, Notice } from '../../ui/Alert.tsx'
import { Loading, PageHeader } from '../../ui/Page.tsx'
import { SecuritySettingsForm } from './SecuritySettingsForm.tsx'
import { duration, MFA_METHODS, type SecuritySettings } from './settings-model.ts'

/**
 * The tenant's security settings (GET/PATCH /api/v1/settings/security, docs/settings.md): every
 * member reads them; owners and admins change them.
 */
export function SettingsPage() {
  const { hasRole } = useWorkspace()
  const canEdit = hasRole('tenant:owner', 'tenant:admin')
  const settings = useQuery({
    queryKey: ['settings', 'security'],
    queryFn: async () => must(await api.GET('/api/v1/settings/security')),
  })
  return (
    <>
      <PageHeader
        title="Tenant settings"
        description="Security settings for everyone who signs in for this tenant: members in the console and the end-users of its applications."
      />
      {!canEdit && (
        <Notice>
          You can read these settings but not change them. {needsRole('tenant:owner', 'tenant:admin')}.
        </Notice>
      )}
      {settings.isPending ? (
        <Loading what="the security settings" />
      ) : settings.isError ? (
        <ErrorAlert error={settings.error} title="The security settings could not be read" />
      ) : canEdit ? (
        <SecuritySettingsForm settings={settings.data} />
      ) : (
        <SettingsSummary settings={settings.data} />
      )}
    </>
  )
}

const yesNo = (value: boolean) => (value ? 'Yes' : 'No')

/** The settings as text, for members who may not change them. */
function SettingsSummary({ settings }: { settings: SecuritySettings }) {
  const lifetimes = settings.sessionLifetimes
  const policy = settings.passwordPolicy
  return (
    <>
      <section className="section settings-section" aria-labelledby="settings-mfa-title">
        <h2 id="settings-mfa-title">Multi-factor authentication</h2>
        <dl className="dl">
          {MFA_METHODS.map((method) => {
            const state = settings.mfaMethods[method.id]
            return [
              <dt key={`${method.id}-t`}>{method.label}</dt>,
              <dd key={`${method.id}-d`}>
                {state.required ? 'Required' : state.enabled ? 'Enabled, not required' : 'Disabled'}
              </dd>,
            ]
          })}
        </dl>
      </section>
      <section className="section settings-section" aria-labelledby="settings-password-title">
        <h2 id="settings-password-title">Password policy</h2>
        <dl className="dl">
          <dt>Minimum length</dt>
          <dd>{policy.minLength} characters</dd>
          <dt>Upper-case letter required</dt>
          <dd>{yesNo(policy.requireUppercase)}</dd>
          <dt>Lower-case letter required</dt>
          <dd>{yesNo(policy.requireLowercase)}</dd>
          <dt>Digit required</dt>
          <dd>{yesNo(policy.requireDigit)}</dd>
          <dt>Symbol required</dt>
          <dd>{yesNo(policy.requireSymbol)}</dd>
        </dl>
      </section>
      <section className="section settings-section" aria-labelledby="settings-sessions-title">
        <h2 id="settings-sessions-title">Session lifetimes</h2>
        <dl className="dl">
          <dt>Access token</dt>
          <dd>{duration(lifetimes.accessTokenSeconds)}</dd>
          <dt>Refresh token</dt>
          <dd>{duration(lifetimes.refreshTokenSeconds)}</dd>
          <dt>Idle sign-out</dt>
          <dd>{duration(lifetimes.idleSignOutSeconds)}</dd>
        </dl>
      </section>
      <section className="section settings-section" aria-labelledby="settings-api-keys-title">
        <h2 id="settings-api-keys-title">API-key policy</h2>
        <dl className="dl">
          <dt>Longest lifetime of a new key</dt>
          <dd>
            {settings.apiKeyPolicy.maxLifetimeDays === null
              ? 'No maximum'
              : `${settings.apiKeyPolicy.maxLifetimeDays} days`}
          </dd>
        </dl>
      </section>
    </>
  )
}
