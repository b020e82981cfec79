import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query'
import { useState } from 'react'
import { ApiError, api, must, type Schemas } from '../../api/client.ts'
import { ErrorAlert, Notice } from '../../ui/Alert.tsx'
import { Button } from '../../ui/Button.tsx'
import { DialogButton } from '../../ui/Dialog.tsx'
import { EquivalentRequest } from '../../ui/EquivalentRequest.tsx'
import { SelectInput, TextInput } from '../../ui/Field.tsx'
import { Loading } from '../../ui/Page.tsx'
import { ConfirmBody, useNotice, useWriteBlock } from './key-actions.tsx'
import { formatDateTime, type Key } from './keys-model.ts'

type Policy = Schemas['RotationPolicyView']
type Frequency = Policy['frequency']

/** Spec 2.3: each frequency and its interval. */
const FREQUENCIES: ReadonlyArray<{ id: Frequency; label: string; description: string }> = [
  { id: 'Daily', label: 'Daily', description: 'Every 24 hours' },
  { id: 'Weekly', label: 'Weekly', description: 'Every 7 days' },
  { id: 'Monthly', label: 'Monthly', description: 'Every 30 days' },
  { id: 'Quarterly', label: 'Quarterly', description: 'Every 90 days' },
  { id: 'Yearly', label: 'Yearly', description: 'Every 365 days' },
]

function webhookProblem(url: string): string | undefined {
  if (!url.trim()) return undefined
  try {
    const parsed = new URL(url.trim())
    if (parsed.protocol !== 'https:' && parsed.protocol !== 'http:') return 'Use an http:// or https:// URL'
    if (parsed.username || parsed.password) return 'The URL must not contain a user name or password'
    return undefined
  } catch {
    return 'Enter an absolute URL, e.g. https://hooks.example.com/kms'
  }
}

function PolicyForm(props: { keyRecord: Key; policy: Policy | null; onSaved(message: string): void }) {
  const { keyRecord: key, policy } = props
  const queryClient = useQueryClient()
  const blocked = useWriteBlock(key)
  const [frequency, setFrequency] = useState<Frequency>(policy?.frequency ?? 'Quarterly')
  const [webhookUrl, setWebhookUrl] = useState(policy?.webhookUrl ?? '')
  const [touched, setTouched] = useState(false)
  const problem = webhookProblem(webhookUrl)
  const body: Schemas['RotationPolicyRequest'] = {
    frequency,
    webhookUrl: webhookUrl.trim() ? webhookUrl.trim() : null,
  }
  const save = useMutation({
    mutationFn: async () =>
      must(
        await api.POST('/api/v1/keys/{keyId}/rotation-policy', { params: { path: { keyId: key.id } }, body }),
      ),
    onSuccess: async (saved) => {
      queryClient.setQueryData(['keys', 'policy', key.id], saved)
      await queryClient.invalidateQueries({ queryKey: ['keys', 'detail', key.id] })
      props.onSaved(
        `Rotation policy saved: ${saved.frequency.toLowerCase()}, next rotation ${formatDateTime(saved.nextRotationAt)}.`,
      )
    },
  })
  const stateBlock = key.state === 'Active' ? undefined : `Only an Active key can have a rotation policy set`
  return (
    <form
      noValidate
      className="stack keys-policy-form"
      onSubmit={(event) => {
        event.preventDefault()
        setTouched(true)
        if (!problem) save.mutate()
      }}
    >
      <h3>{policy ? 'Change the policy' : 'Set a policy'}</h3>
      <div className="row">
        <SelectInput
          label="Frequency"
          value={frequency}
          options={FREQUENCIES}
          onChange={(value) => setFrequency(value as Frequency)}
          isDisabled={blocked !== undefined}
          description="A new version is created at each interval."
        />
        <TextInput
          label="Webhook URL"
          value={webhookUrl}
          onChange={setWebhookUrl}
          onBlur={() => setTouched(true)}
          isDisabled={blocked !== undefined}
          placeholder="https://hooks.example.com/kms"
          error={touched ? problem : undefined}
          className="keys-webhook"
          description="Optional: receives a signed key.rotated event (X-Service-Signature) at each rotation."
        />
      </div>
      <ErrorAlert error={save.error} title="The policy was not saved" />
      <div>
        <Button
          type="submit"
          variant="primary"
          isDisabled={save.isPending}
          disabledReason={blocked ?? stateBlock}
        >
          {save.isPending ? 'Saving…' : policy ? 'Save policy' : 'Set policy'}
        </Button>
      </div>
      <EquivalentRequest method="POST" path={`/api/v1/keys/${key.id}/rotation-policy`} body={body} />
    </form>
  )
}

/** Spec 2.3: the key's rotation policy (view, set, pause or resume, remove) with its webhook. */
export function RotationPolicySection(props: { keyRecord: Key }) {
  const { keyRecord: key } = props
  const queryClient = useQueryClient()
  const blocked = useWriteBlock(key)
  const [notice, setNotice] = useNotice()
  const policy = useQuery({
    queryKey: ['keys', 'policy', key.id],
    queryFn: async () => {
      try {
        return must(
          await api.GET('/api/v1/keys/{keyId}/rotation-policy', { params: { path: { keyId: key.id } } }),
        )
      } catch (error) {
        if (error instanceof ApiError && error.code === 'rotation_policy_not_found') return null
        throw error
      }
    },
  })
  const toggle = useMutation({
    mutationFn: async (action: 'pause' | 'resume') =>
      must(
        action === 'pause'
          ? await api.POST('/api/v1/keys/{keyId}/rotation-policy/pause', {
              params: { path: { keyId: key.id } },
            })
          : await api.POST('/api/v1/keys/{keyId}/rotation-policy/resume', {
              params: { path: { keyId: key.id } },
            }),
      ),
    onSuccess: async (saved) => {
      queryClient.setQueryData(['keys', 'policy', key.id], saved)
      await queryClient.invalidateQueries({ queryKey: ['keys', 'detail', key.id] })
      setNotice(
        saved.paused
          ? 'Rotation policy paused: no rotation until you resume it.'
          : 'Rotation policy resumed.',
      )
    },
  })
  const current = policy.data
  return (
    <section className="section keys-section" aria-labelledby="keys-rotation">
      <h2 id="keys-rotation">Rotation policy</h2>
      {notice && <Notice tone="success">{notice}</Notice>}
      <ErrorAlert error={policy.error} title="The rotation policy could not be read" />
      <ErrorAlert error={toggle.error} />
      {policy.isPending ? (
        <Loading what="the rotation policy" />
      ) : current === null ? (
        <p className="muted">No policy: the key is rotated only by hand.</p>
      ) : current ? (
        <>
          <dl className="dl">
            <dt>Frequency</dt>
            <dd>
              {current.frequency} (every {Math.round(current.intervalSeconds / 86_400)} days)
            </dd>
            <dt>Webhook URL</dt>
            <dd>{current.webhookUrl ? <span className="mono">{current.webhookUrl}</span> : 'None'}</dd>
            <dt>Status</dt>
            <dd>
              {current.paused ? (
                <span className="badge badge-warning">Paused since {formatDateTime(current.pausedAt)}</span>
              ) : (
                <span className="badge badge-success">Running</span>
              )}
            </dd>
            <dt>Next rotation</dt>
            <dd>{current.paused ? 'None while paused' : formatDateTime(current.nextRotationAt)}</dd>
            <dt>Last rotation</dt>
            <dd>{formatDateTime(current.lastRotatedAt)}</dd>
          </dl>
          <div className="row keys-policy-actions">
            <Button
              isDisabled={toggle.isPending}
              disabledReason={blocked}
              onPress={() => toggle.mutate(current.paused ? 'resume' : 'pause')}
            >
              {current.paused ? 'Resume policy' : 'Pause policy'}
            </Button>
            <DialogButton
              label="Remove policy…"
              title="Remove the rotation policy?"
              variant="danger"
              disabledReason={blocked}
            >
              {(close) => (
                <ConfirmBody
                  close={close}
                  confirmLabel="Remove policy"
                  variant="danger"
                  request={{ method: 'DELETE', path: `/api/v1/keys/${key.id}/rotation-policy` }}
                  onConfirm={async () => {
                    must(
                      await api.DELETE('/api/v1/keys/{keyId}/rotation-policy', {
                        params: { path: { keyId: key.id } },
                      }),
                    )
                    queryClient.setQueryData(['keys', 'policy', key.id], null)
                    await queryClient.invalidateQueries({ queryKey: ['keys', 'detail', key.id] })
                    setNotice('Rotation policy removed: the key is rotated only by hand now.')
                  }}
                >
                  <p>
                    {key.name} will no longer be rotated {current.frequency.toLowerCase()}
                    {current.webhookUrl ? ' and the webhook will no longer be notified' : ''}. Existing
                    versions stay.
                  </p>
                </ConfirmBody>
              )}
            </DialogButton>
          </div>
        </>
      ) : null}
      {policy.data !== undefined && (
        <PolicyForm
          key={policy.data ? policy.data.updatedAt : 'none'}
          keyRecord={key}
          policy={policy.data}
          onSaved={setNotice}
        />
      )}
    </section>
  )
}
