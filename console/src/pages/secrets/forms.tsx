import { useMutation, useQueryClient } from '@tanstack/react-query'
import { useState } from 'react'
import { Controller, useForm } from 'react-hook-form'
import { api, must, type Schemas } from '../../api/client.ts'
import { ErrorAlert } from '../../ui/Alert.tsx'
import { Button } from '../../ui/Button.tsx'
import { EquivalentRequest } from '../../ui/EquivalentRequest.tsx'
import { CheckboxInput, SelectInput, TextInput } from '../../ui/Field.tsx'
import { FormSelectInput, FormTextInput } from '../../ui/FormFields.tsx'
import {
  type Folder,
  folderOptions,
  HIDDEN_VALUE,
  parseLabels,
  type Secret,
  SecretValueInput,
  TOP_LEVEL,
  useFolders,
} from './shared.tsx'

const labelsRule = (text: string) =>
  parseLabels(text).every((label) => label.length <= 64) || 'Each label has at most 64 characters'

// A new secret

interface CreateValues {
  name: string
  value: string
  description: string
  folderId: string
  labels: string
  notes: string
  totp: string
}

/** The seed as the API takes it: an otpauth:// URI, or the Base32 seed itself. */
const totpOf = (seed: string) => (/^otpauth:\/\//i.test(seed) ? { uri: seed } : { secret: seed })

/** The create body; `reveal` false stands in for the value and the seed (the shown request). */
function createBody(values: CreateValues, reveal: boolean): Schemas['CreateSecretRequest'] {
  const labels = parseLabels(values.labels)
  const seed = values.totp.trim()
  return {
    name: values.name.trim(),
    value: reveal ? values.value : HIDDEN_VALUE,
    ...(values.description.trim() !== '' ? { description: values.description.trim() } : {}),
    ...(values.folderId !== TOP_LEVEL ? { folderId: values.folderId } : {}),
    ...(labels.length > 0 ? { labels } : {}),
    ...(values.notes !== '' ? { notes: values.notes } : {}),
    ...(seed !== '' ? { totp: reveal ? totpOf(seed) : { secret: HIDDEN_VALUE } } : {}),
  }
}

export function CreateSecretForm(props: {
  folderId: string | undefined
  onCreated(secret: Secret): void
  onCancel(): void
}) {
  const folders = useFolders()
  const queryClient = useQueryClient()
  const [shown, setShown] = useState(false)
  const { control, handleSubmit, watch } = useForm<CreateValues>({
    defaultValues: {
      name: '',
      value: '',
      description: '',
      folderId: props.folderId ?? TOP_LEVEL,
      labels: '',
      notes: '',
      totp: '',
    },
  })
  const values = watch()
  const create = useMutation({
    mutationFn: async (body: Schemas['CreateSecretRequest']) =>
      must(await api.POST('/api/v1/secrets', { body })),
    onSuccess: async (secret) => {
      await queryClient.invalidateQueries({ queryKey: ['secrets', 'list'] })
      props.onCreated(secret)
    },
  })
  return (
    <form
      className="stack secrets-form"
      aria-label="New secret"
      onSubmit={handleSubmit((submitted) => create.mutate(createBody(submitted, true)))}
    >
      <FormTextInput
        control={control}
        name="name"
        rules={{
          validate: (name) => name.trim() !== '' || 'Give the secret a name',
          maxLength: { value: 200, message: 'At most 200 characters' },
        }}
        label="Name"
        description="Unique within its folder, e.g. orders-db-password."
      />
      <Controller
        control={control}
        name="value"
        rules={{ maxLength: { value: 65_536, message: 'At most 65,536 characters' } }}
        render={({ field, fieldState }) => (
          <SecretValueInput
            label="Value"
            value={field.value}
            onChange={field.onChange}
            shown={shown}
            onShown={setShown}
            error={fieldState.error?.message}
          />
        )}
      />
      <FormSelectInput
        control={control}
        name="folderId"
        label="Folder"
        options={folderOptions(folders.data)}
      />
      <FormTextInput
        control={control}
        name="description"
        label="Description (optional)"
        description="Stored in clear and searchable: never put the secret here."
      />
      <FormTextInput
        control={control}
        name="labels"
        rules={{ validate: labelsRule }}
        label="Labels (optional)"
        description="Separated by commas, e.g. prod, database."
      />
      <FormTextInput
        control={control}
        name="notes"
        label="Notes (optional)"
        description="Sealed at rest like the value."
        multiline
        rows={2}
      />
      <FormTextInput
        control={control}
        name="totp"
        rules={{
          validate: (seed) =>
            seed.trim() === '' ||
            /^otpauth:\/\//i.test(seed.trim()) ||
            /^[A-Za-z2-7= -]+$/.test(seed.trim()) ||
            'A Base32 seed (letters A–Z, digits 2–7) or an otpauth:// URI',
        }}
        label="One-time code seed (optional)"
        description="A TOTP seed (Base32) or otpauth:// URI: the console then shows the current code. The seed is never shown again."
        type={shown ? 'text' : 'password'}
        autoComplete="off"
      />
      <ErrorAlert error={create.error} title="The secret was not created" />
      <div className="row">
        <Button type="submit" variant="primary" isDisabled={create.isPending}>
          {create.isPending ? 'Creating…' : 'Create secret'}
        </Button>
        <Button variant="quiet" onPress={props.onCancel}>
          Cancel
        </Button>
      </div>
      <EquivalentRequest method="POST" path="/api/v1/secrets" body={createBody(values, shown)} />
    </form>
  )
}

// A new folder

export function CreateFolderForm(props: {
  parentId: string | undefined
  onCreated(folder: Folder): void
  onCancel(): void
}) {
  const folders = useFolders()
  const queryClient = useQueryClient()
  const [name, setName] = useState('')
  const [parentId, setParentId] = useState(props.parentId ?? TOP_LEVEL)
  const [touched, setTouched] = useState(false)
  const body: Schemas['CreateFolderRequest'] = {
    name: name.trim(),
    parentId: parentId === TOP_LEVEL ? null : parentId,
  }
  const nameError =
    touched && body.name === ''
      ? 'Give the folder a name'
      : body.name.includes('/')
        ? 'A folder name cannot contain /'
        : undefined
  const create = useMutation({
    mutationFn: async (request: Schemas['CreateFolderRequest']) =>
      must(await api.POST('/api/v1/folders', { body: request })),
    onSuccess: async (folder) => {
      await queryClient.invalidateQueries({ queryKey: ['secrets', 'folders'] })
      props.onCreated(folder)
    },
  })
  return (
    <form
      className="stack secrets-form"
      aria-label="New folder"
      onSubmit={(event) => {
        event.preventDefault()
        setTouched(true)
        if (body.name !== '' && !body.name.includes('/')) create.mutate(body)
      }}
    >
      <TextInput
        label="Name"
        description="Unique among its siblings, e.g. production."
        value={name}
        onChange={setName}
        error={nameError}
      />
      <SelectInput
        label="Inside"
        value={parentId}
        options={folderOptions(folders.data)}
        onChange={setParentId}
      />
      <ErrorAlert error={create.error} title="The folder was not created" />
      <div className="row">
        <Button type="submit" variant="primary" isDisabled={create.isPending}>
          {create.isPending ? 'Creating…' : 'Create folder'}
        </Button>
        <Button variant="quiet" onPress={props.onCancel}>
          Cancel
        </Button>
      </div>
      <EquivalentRequest method="POST" path="/api/v1/folders" body={body} />
    </form>
  )
}

// The details of a secret

interface EditValues {
  name: string
  description: string
  folderId: string
  labels: string
  isActive: boolean
  isFavorite: boolean
}

const editValuesOf = (secret: Secret): EditValues => ({
  name: secret.name,
  description: secret.description ?? '',
  folderId: secret.folderId ?? TOP_LEVEL,
  labels: (secret.labels ?? []).join(', '),
  isActive: secret.isActive ?? true,
  isFavorite: secret.isFavorite ?? false,
})

/** Only what changed: a PATCH names the fields it changes (and the audit record lists them). */
function changes(before: EditValues, after: EditValues): Schemas['UpdateSecretRequest'] {
  const body: Schemas['UpdateSecretRequest'] = {}
  if (after.name.trim() !== before.name) body.name = after.name.trim()
  if (after.description.trim() !== before.description) body.description = after.description.trim()
  if (after.folderId !== before.folderId) body.folderId = after.folderId === TOP_LEVEL ? null : after.folderId
  const labels = parseLabels(after.labels)
  if (labels.join(',') !== parseLabels(before.labels).join(',')) body.labels = labels
  if (after.isActive !== before.isActive) body.isActive = after.isActive
  if (after.isFavorite !== before.isFavorite) body.isFavorite = after.isFavorite
  return body
}

export function EditSecretForm(props: { secret: Secret; onSaved(): void; onCancel(): void }) {
  const folders = useFolders()
  const queryClient = useQueryClient()
  const initial = editValuesOf(props.secret)
  const { control, handleSubmit, watch } = useForm<EditValues>({ defaultValues: initial })
  const body = changes(initial, watch())
  const unchanged = Object.keys(body).length === 0
  const save = useMutation({
    mutationFn: async (request: Schemas['UpdateSecretRequest']) =>
      must(
        await api.PATCH('/api/v1/secrets/{id}', { params: { path: { id: props.secret.id } }, body: request }),
      ),
    onSuccess: async () => {
      await queryClient.invalidateQueries({ queryKey: ['secrets'] })
      props.onSaved()
    },
  })
  return (
    <form
      className="stack secrets-form"
      aria-label="Edit details"
      onSubmit={handleSubmit((submitted) => {
        const request = changes(initial, submitted)
        if (Object.keys(request).length > 0) save.mutate(request)
      })}
    >
      <FormTextInput
        control={control}
        name="name"
        rules={{
          validate: (name) => name.trim() !== '' || 'A secret needs a name',
          maxLength: { value: 200, message: 'At most 200 characters' },
        }}
        label="Name"
      />
      <FormTextInput
        control={control}
        name="description"
        label="Description"
        description="Stored in clear and searchable."
      />
      <FormSelectInput
        control={control}
        name="folderId"
        label="Folder"
        options={folderOptions(folders.data)}
      />
      <FormTextInput
        control={control}
        name="labels"
        rules={{ validate: labelsRule }}
        label="Labels"
        description="Separated by commas."
      />
      <Controller
        control={control}
        name="isActive"
        render={({ field }) => (
          <CheckboxInput
            label="Active (an inactive secret refuses every read of its value)"
            isSelected={field.value}
            onChange={field.onChange}
          />
        )}
      />
      <Controller
        control={control}
        name="isFavorite"
        render={({ field }) => (
          <CheckboxInput label="Favourite" isSelected={field.value} onChange={field.onChange} />
        )}
      />
      <ErrorAlert error={save.error} title="The changes were not saved" />
      <div className="row">
        <Button type="submit" variant="primary" isDisabled={save.isPending || unchanged}>
          {save.isPending ? 'Saving…' : 'Save changes'}
        </Button>
        <Button variant="quiet" onPress={props.onCancel}>
          Cancel
        </Button>
      </div>
      <EquivalentRequest method="PATCH" path={`/api/v1/secrets/${props.secret.id}`} body={body} />
    </form>
  )
}

// A new version of the value

export function NewVersionForm(props: {
  secret: Secret
  disabledReason: string | undefined
  onSaved(secret: Secret): void
}) {
  const queryClient = useQueryClient()
  const [value, setValue] = useState('')
  const [shown, setShown] = useState(false)
  const save = useMutation({
    mutationFn: async (request: Schemas['UpdateSecretRequest']) =>
      must(
        await api.PATCH('/api/v1/secrets/{id}', { params: { path: { id: props.secret.id } }, body: request }),
      ),
    onSuccess: async (secret) => {
      setValue('')
      setShown(false)
      await queryClient.invalidateQueries({ queryKey: ['secrets'] })
      props.onSaved(secret)
    },
  })
  return (
    <form
      className="stack secrets-form"
      aria-label="New version"
      onSubmit={(event) => {
        event.preventDefault()
        save.mutate({ value })
      }}
    >
      <SecretValueInput
        label="New value"
        value={value}
        onChange={setValue}
        shown={shown}
        onShown={setShown}
        description="Saved as a new version; the previous values stay in the versions below. Hidden while you type."
      />
      <ErrorAlert error={save.error} title="The new value was not saved" />
      <div className="row">
        <Button
          type="submit"
          variant="primary"
          disabledReason={props.disabledReason}
          isDisabled={save.isPending}
        >
          {save.isPending ? 'Saving…' : 'Save new version'}
        </Button>
      </div>
      <EquivalentRequest
        method="PATCH"
        path={`/api/v1/secrets/${props.secret.id}`}
        body={{ value: shown ? value : HIDDEN_VALUE }}
      />
    </form>
  )
}
