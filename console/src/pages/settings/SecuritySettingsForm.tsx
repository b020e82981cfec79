import { useMutation, useQueryClient } from '@tanstack/react-query'
import { useState } from 'react'
import { Controller, useForm } from 'react-hook-form'
import { api, must } from '../../api/client.ts'
import { ErrorAlert, Notice } from '../../ui/Alert.tsx'
import { Button } from '../../ui/Button.tsx'
import { EquivalentRequest } from '../../ui/EquivalentRequest.tsx'
import { CheckboxInput, TextInput } from '../../ui/Field.tsx'
import { FormTextInput } from '../../ui/FormFields.tsx'
import {
  BOUNDS,
  changedLabels,
  duration,
  LIFETIMES,
  MFA_METHODS,
  PASSWORD_FLAGS,
  patchOf,
  type SecurityPatch,
  type SecuritySettings,
  toValues,
  type Values,
  within,
} from './settings-model.ts'

const PATH = '/api/v1/settings/security'

/** What a lifetime field's number means, in words, while it is typed. */
const spelled = (text: string) => (/^\d+$/.test(text.trim()) ? ` Now: ${duration(Number(text))}.` : '')

/** The settings, editable (owners and admins): the save sends only what changed. */
export function SecuritySettingsForm({ settings }: { settings: SecuritySettings }) {
  const queryClient = useQueryClient()
  const [saved, setSaved] = useState<string[] | null>(null)
  const { control, handleSubmit, watch, reset, setValue } = useForm<Values>({
    defaultValues: toValues(settings),
  })
  const values = watch()
  const patch = patchOf(values, settings)
  const changed = Object.keys(patch).length > 0
  const save = useMutation({
    mutationFn: async (body: SecurityPatch) => must(await api.PATCH(PATH, { body })),
    onMutate: () => setSaved(null),
    onSuccess: async (answer, body) => {
      queryClient.setQueryData(['settings', 'security'], answer)
      reset(toValues(answer))
      setSaved(changedLabels(body))
      await queryClient.invalidateQueries({ queryKey: ['api-keys', 'policy'] })
    },
  })

  return (
    <form
      noValidate
      className="settings-form"
      onSubmit={handleSubmit((submitted) => {
        const body = patchOf(submitted, settings)
        if (Object.keys(body).length > 0) save.mutate(body)
      })}
    >
      <section className="section settings-section" aria-labelledby="settings-mfa-title">
        <h2 id="settings-mfa-title">Multi-factor authentication</h2>
        <p className="muted admin-help">
          Asked at sign-in after the password, from members and from end-users of applications that have no
          methods of their own. A required method needs to be enabled.
        </p>
        <div className="settings-mfa">
          {MFA_METHODS.map((method) => (
            <fieldset key={method.id} className="settings-method">
              <legend>{method.label}</legend>
              <p className="muted settings-method-help">{method.help}</p>
              <Controller
                control={control}
                name={`mfa.${method.id}.enabled`}
                render={({ field }) => (
                  <CheckboxInput
                    label="Enabled"
                    isSelected={field.value}
                    onChange={(enabled) => {
                      field.onChange(enabled)
                      if (!enabled) setValue(`mfa.${method.id}.required`, false)
                    }}
                  />
                )}
              />
              <Controller
                control={control}
                name={`mfa.${method.id}.required`}
                render={({ field }) => (
                  <CheckboxInput
                    label="Required at every sign-in"
                    isSelected={field.value}
                    isDisabled={!values.mfa[method.id].enabled}
                    onChange={field.onChange}
                  />
                )}
              />
            </fieldset>
          ))}
        </div>
      </section>

      <section className="section settings-section" aria-labelledby="settings-password-title">
        <h2 id="settings-password-title">Password policy</h2>
        <p className="muted admin-help">
          Passwords end-users choose on this tenant’s set-up and reset pages. Team accounts always need 12
          characters or more.
        </p>
        <div className="row settings-row">
          <FormTextInput
            control={control}
            name="minLength"
            rules={{ validate: within(BOUNDS.minLength) }}
            label="Minimum length"
            type="number"
            description="8 to 128 characters."
          />
          <fieldset className="settings-flags">
            <legend>A password must contain</legend>
            {PASSWORD_FLAGS.map((flag) => (
              <Controller
                key={flag.id}
                control={control}
                name={`flags.${flag.id}`}
                render={({ field }) => (
                  <CheckboxInput label={flag.label} isSelected={field.value} onChange={field.onChange} />
                )}
              />
            ))}
          </fieldset>
        </div>
      </section>

      <section className="section settings-section" aria-labelledby="settings-sessions-title">
        <h2 id="settings-sessions-title">Session lifetimes</h2>
        <div className="row settings-row">
          {LIFETIMES.map((lifetime) => (
            <Controller
              key={lifetime.id}
              control={control}
              name={`lifetimes.${lifetime.id}`}
              rules={{ validate: within(BOUNDS[lifetime.id]) }}
              render={({ field, fieldState }) => (
                <TextInput
                  label={lifetime.label}
                  type="number"
                  className="settings-number"
                  description={`${lifetime.help}${spelled(field.value)}`}
                  value={field.value}
                  onChange={field.onChange}
                  onBlur={field.onBlur}
                  error={fieldState.error?.message}
                />
              )}
            />
          ))}
        </div>
      </section>

      <section className="section settings-section" aria-labelledby="settings-api-keys-title">
        <h2 id="settings-api-keys-title">API-key policy</h2>
        <div className="stack">
          <Controller
            control={control}
            name="limitApiKeys"
            render={({ field }) => (
              <CheckboxInput
                label="Limit the lifetime of new API keys"
                isSelected={field.value}
                onChange={field.onChange}
              />
            )}
          />
          {values.limitApiKeys && (
            <FormTextInput
              control={control}
              name="maxLifetimeDays"
              rules={{
                validate: (text, all) => (all.limitApiKeys ? within(BOUNDS.maxLifetimeDays)(text) : true),
              }}
              label="Longest lifetime (days)"
              type="number"
              className="settings-number"
              description="1 to 3650. New keys must expire within it; existing keys keep their expiry."
            />
          )}
        </div>
      </section>

      {saved && (
        <Notice tone="success">Settings saved{saved.length > 0 ? `: ${saved.join(', ')}` : ''}.</Notice>
      )}
      <ErrorAlert error={save.error} title="The settings were not saved" />
      <div className="settings-actions">
        <Button
          type="submit"
          variant="primary"
          isDisabled={save.isPending}
          disabledReason={changed ? undefined : 'Nothing has changed yet'}
        >
          {save.isPending ? 'Saving…' : 'Save changes'}
        </Button>
        <Button variant="quiet" isDisabled={!changed} onPress={() => reset(toValues(settings))}>
          Discard changes
        </Button>
      </div>
      <EquivalentRequest method="PATCH" path={PATH} body={patch} />
    </form>
  )
}
