import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query'
import { Controller, useForm } from 'react-hook-form'
import { api, must, type Schemas } from '../../api/client.ts'
import { useWorkspace } from '../../auth/workspace.tsx'
import { ErrorAlert } from '../../ui/Alert.tsx'
import { Button } from '../../ui/Button.tsx'
import { EquivalentRequest } from '../../ui/EquivalentRequest.tsx'
import { CheckboxInput, type Option } from '../../ui/Field.tsx'
import { FormSelectInput, FormTextInput } from '../../ui/FormFields.tsx'
import { Loading } from '../../ui/Page.tsx'
import { SCOPE_GROUPS, type Scope } from './scopes.ts'

export type CreatedApiKey = Schemas['ApiKeyView'] & { key: string }

interface Values {
  name: string
  scopes: Scope[]
  expiry: string
  date: string
}

const DAY_MS = 86_400_000
const PRESETS = [
  { days: 7, label: 'In 7 days' },
  { days: 30, label: 'In 30 days' },
  { days: 90, label: 'In 90 days' },
  { days: 365, label: 'In 1 year' },
]

/** The expiry choices the tenant's API-key policy allows (no "Never" under a maximum lifetime). */
function expiryOptions(maxDays: number | null): Option[] {
  const presets = PRESETS.filter((preset) => maxDays === null || preset.days <= maxDays).map((preset) => ({
    id: String(preset.days),
    label: preset.label,
  }))
  if (maxDays !== null && !PRESETS.some((preset) => preset.days === maxDays))
    presets.push({ id: String(maxDays), label: `In ${maxDays} days (the longest the policy allows)` })
  return [
    ...presets,
    { id: 'date', label: 'On a date…', description: 'At the end of the day you choose' },
    ...(maxDays === null
      ? [{ id: 'never', label: 'Never', description: 'Not recommended: the key works until revoked' }]
      : []),
  ]
}

const localDate = (time: number) => {
  const date = new Date(time)
  const pad = (n: number) => String(n).padStart(2, '0')
  return `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())}`
}

/** The expiry the form's choice means, now; undefined for "never" or a date not chosen yet. */
function expiresAtOf(values: Values): string | undefined {
  if (values.expiry === 'never') return undefined
  if (values.expiry === 'date') {
    if (!/^\d{4}-\d{2}-\d{2}$/.test(values.date)) return undefined
    const end = new Date(`${values.date}T23:59:59`)
    return Number.isNaN(end.getTime()) ? undefined : end.toISOString()
  }
  return new Date(Date.now() + Number(values.expiry) * DAY_MS).toISOString()
}

const bodyOf = (values: Values): Schemas['CreateApiKeyRequest'] => {
  const expiresAt = expiresAtOf(values)
  return { name: values.name.trim(), scopes: values.scopes, ...(expiresAt ? { expiresAt } : {}) }
}

/**
 * Creating an API key: a name, scopes by area (only those the caller holds: a caller cannot
 * grant more than it has), and an expiry within the tenant's API-key policy.
 */
export function CreateApiKeyForm(props: { onCreated(key: CreatedApiKey): void; close(): void }) {
  const policy = useQuery({
    queryKey: ['api-keys', 'policy'],
    queryFn: async () => must(await api.GET('/api/v1/settings/security')).apiKeyPolicy,
  })
  if (policy.isPending) return <Loading what="the API-key policy" />
  if (policy.isError) return <ErrorAlert error={policy.error} title="The API-key policy could not be read" />
  return <Form maxDays={policy.data.maxLifetimeDays} {...props} />
}

function Form(props: { maxDays: number | null; onCreated(key: CreatedApiKey): void; close(): void }) {
  const { can } = useWorkspace()
  const queryClient = useQueryClient()
  const options = expiryOptions(props.maxDays)
  const defaultExpiry = options.some((option) => option.id === '90') ? '90' : (options[0]?.id ?? 'date')
  const { control, handleSubmit, watch } = useForm<Values>({
    defaultValues: { name: '', scopes: [], expiry: defaultExpiry, date: '' },
  })
  const values = watch()
  const grantable = SCOPE_GROUPS.map((group) => ({
    ...group,
    scopes: group.scopes.filter((entry) => can(entry.scope)),
  })).filter((group) => group.scopes.length > 0)
  const offered = grantable.flatMap((group) => group.scopes.map((entry) => entry.scope))
  const withheld = SCOPE_GROUPS.flatMap((group) => group.scopes).length - offered.length
  const create = useMutation({
    mutationFn: async (body: Schemas['CreateApiKeyRequest']) =>
      must(await api.POST('/api/v1/api-keys', { body })),
    onSuccess: async (created) => {
      props.onCreated(created)
      props.close()
      await queryClient.invalidateQueries({ queryKey: ['api-keys', 'list'] })
    },
  })
  const latest = props.maxDays === null ? undefined : localDate(Date.now() + props.maxDays * DAY_MS)
  const today = localDate(Date.now())

  return (
    <form
      className="stack admin-form"
      noValidate
      onSubmit={handleSubmit((submitted) => create.mutate(bodyOf(submitted)))}
    >
      <FormTextInput
        control={control}
        name="name"
        rules={{ validate: (name) => (name.trim().length > 0 ? true : 'Give the key a name') }}
        label="Name"
        description="A label to recognise the key by, such as the program that uses it (ci-deploy)."
        isRequired
        maxLength={200}
      />
      <div className="row">
        <FormSelectInput
          control={control}
          name="expiry"
          label="Expires"
          description={
            props.maxDays === null
              ? 'After this the key stops working.'
              : `The tenant's API-key policy: keys live at most ${props.maxDays} days.`
          }
          options={options}
        />
        {values.expiry === 'date' && (
          <FormTextInput
            control={control}
            name="date"
            rules={{
              validate: (date) => {
                if (!/^\d{4}-\d{2}-\d{2}$/.test(date)) return 'Choose the day the key stops working'
                if (date < today) return 'Choose a day from today on'
                if (latest && date > latest) return `The policy allows ${latest} at the latest`
                return true
              },
            }}
            label="Expiry date"
            type="date"
            description={latest ? `At the latest ${latest}.` : 'The key works until the end of that day.'}
            isRequired
          />
        )}
      </div>
      <Controller
        control={control}
        name="scopes"
        rules={{ validate: (scopes) => (scopes.length > 0 ? true : 'Choose at least one scope') }}
        render={({ field, fieldState }) => (
          <fieldset className="admin-scopes" aria-describedby="api-keys-scopes-help">
            <legend>Scopes</legend>
            <p id="api-keys-scopes-help" className="muted admin-help">
              What the key may do. Grant only what its program needs.
              {withheld > 0 &&
                ` ${withheld} scope${withheld === 1 ? '' : 's'} your role does not hold ${withheld === 1 ? 'is' : 'are'} not offered: a key cannot hold more than its creator.`}
            </p>
            <div className="row">
              <Button
                variant="quiet"
                onPress={() => field.onChange(offered.filter((scope) => scope.endsWith(':read')))}
              >
                Select every read scope
              </Button>
              <Button variant="quiet" onPress={() => field.onChange([])}>
                Clear
              </Button>
            </div>
            <div className="api-keys-scope-groups">
              {grantable.map((group) => (
                <fieldset key={group.area} className="api-keys-scope-group">
                  <legend>{group.area}</legend>
                  {group.scopes.map((entry) => (
                    <CheckboxInput
                      key={entry.scope}
                      name="scopes"
                      value={entry.scope}
                      isSelected={field.value.includes(entry.scope)}
                      onChange={(selected) =>
                        field.onChange(
                          selected
                            ? [...field.value, entry.scope]
                            : field.value.filter((scope) => scope !== entry.scope),
                        )
                      }
                      label={
                        <span className="api-keys-scope">
                          <code>{entry.scope}</code>
                          <span className="api-keys-scope-allows">{entry.allows}</span>
                        </span>
                      }
                    />
                  ))}
                </fieldset>
              ))}
            </div>
            {fieldState.error && (
              <p className="admin-field-error" role="alert">
                {fieldState.error.message}
              </p>
            )}
          </fieldset>
        )}
      />
      <ErrorAlert error={create.error} title="The key was not created" />
      <div className="admin-dialog-actions">
        <Button variant="quiet" onPress={props.close}>
          Cancel
        </Button>
        <Button type="submit" variant="primary" isDisabled={create.isPending}>
          {create.isPending ? 'Creating…' : 'Create key'}
        </Button>
      </div>
      <EquivalentRequest method="POST" path="/api/v1/api-keys" body={bodyOf(values)} />
    </form>
  )
}
