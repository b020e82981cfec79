import { useQuery } from '@tanstack/react-query'
import { api, must, type Schemas } from '../../api/client.ts'
import { CheckboxInput, type Option, TextInput } from '../../ui/Field.tsx'

export type Secret = Schemas['SecretView']
export type Folder = Schemas['FolderView']

/** Every folder of the tenant, by path (the API lists them in path order, up to 1,000). */
export function useFolders() {
  return useQuery({
    queryKey: ['secrets', 'folders'],
    queryFn: async () =>
      must(await api.GET('/api/v1/folders', { params: { query: { limit: 1000, offset: 0 } } })).data,
  })
}

export const TOP_LEVEL = 'root'

/** The folder choices of a form: the top level, then every folder by its path. */
export function folderOptions(folders: readonly Folder[] | undefined): Option[] {
  return [
    { id: TOP_LEVEL, label: 'Top level', description: 'In no folder' },
    ...(folders ?? []).map((folder) => ({ id: folder.id, label: folder.path })),
  ]
}

/** Where a secret is, for a person: its folder's path, or "Top level". */
export function folderName(folders: readonly Folder[] | undefined, folderId: string | null | undefined) {
  if (!folderId) return 'Top level'
  return folders?.find((folder) => folder.id === folderId)?.path ?? 'A folder'
}

/**
 * The secret's current value, read only when the person asks for it (reveal or copy): the API
 * records each read in the audit log.
 */
export async function readValue(secretId: string): Promise<string> {
  const secret = must(
    await api.GET('/api/v1/secrets/{id}', { params: { path: { id: secretId }, query: { include: 'all' } } }),
  )
  return secret.value ?? ''
}

/** Labels typed as a comma-separated list: trimmed, empty ones dropped, each once. */
export const parseLabels = (text: string) => [
  ...new Set(
    text
      .split(',')
      .map((label) => label.trim())
      .filter((label) => label !== ''),
  ),
]

export const formatTime = (value: string | null | undefined) =>
  value ? new Date(value).toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'short' }) : '—'

/** Stands for a value the person has not asked to see, in a shown request body. */
export const HIDDEN_VALUE = '<hidden: tick “Show the value” to see it>'

/**
 * A secret value being typed: masked (one line) unless the person asks to see it, then a
 * multi-line text area (for certificates and keys).
 */
export function SecretValueInput(props: {
  label: string
  value: string
  onChange(value: string): void
  shown: boolean
  onShown(shown: boolean): void
  error?: string | undefined
  description?: string
}) {
  return (
    <div className="stack secrets-value-input">
      {props.shown ? (
        <TextInput
          label={props.label}
          multiline
          rows={4}
          value={props.value}
          onChange={props.onChange}
          error={props.error}
          description={props.description}
          autoComplete="off"
        />
      ) : (
        // Masked by the stylesheet, not type="password": browsers offer to save a password
        // field's value as this site's login, and a secret is no login.
        <TextInput
          label={props.label}
          className="secrets-masked"
          autoComplete="off"
          value={props.value}
          onChange={props.onChange}
          error={props.error}
          description={
            props.description ??
            'Hidden while you type. For a value of several lines (a certificate, a key), show it first.'
          }
        />
      )}
      <CheckboxInput label="Show the value" isSelected={props.shown} onChange={props.onShown} />
    </div>
  )
}
