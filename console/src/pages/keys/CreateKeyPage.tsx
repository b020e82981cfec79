import { useMutation, useQueryClient } from '@tanstack/react-query'
import { Link, useNavigate } from '@tanstack/react-router'
import { useForm, useWatch } from 'react-hook-form'
import { ApiError, api, must } from '../../api/client.ts'
import { needsScope, useWorkspace } from '../../auth/workspace.tsx'
import { ErrorAlert } from '../../ui/Alert.tsx'
import { Button } from '../../ui/Button.tsx'
import { EquivalentRequest } from '../../ui/EquivalentRequest.tsx'
import { PageHeader } from '../../ui/Page.tsx'
import { emptyKeyForm, KeyAttributeFields, type KeyFormValues, keyBody } from './key-form.tsx'
import { setFlash } from './keys-model.ts'

/** /keys/new: generate a key (POST /api/v1/keys), then open it. */
export function CreateKeyPage() {
  const { can } = useWorkspace()
  const navigate = useNavigate()
  const queryClient = useQueryClient()
  const { control, handleSubmit, setValue, setError } = useForm<KeyFormValues>({
    defaultValues: emptyKeyForm(),
  })
  const values = useWatch({ control }) as KeyFormValues
  const create = useMutation({
    mutationFn: async (body: ReturnType<typeof keyBody>) => must(await api.POST('/api/v1/keys', { body })),
    onSuccess: async (key) => {
      queryClient.setQueryData(['keys', 'detail', key.id], key)
      await queryClient.invalidateQueries({ queryKey: ['keys', 'list'] })
      setFlash(key.id, `Key ${key.name} created (${key.algorithm}, version 1).`)
      await navigate({ to: '/keys/$keyId', params: { keyId: key.id } })
    },
    onError: (error) => {
      if (error instanceof ApiError && error.code === 'key_name_taken')
        setError('name', { message: error.message })
    },
  })
  const denied = can('keys:write') ? undefined : needsScope('keys:write')
  return (
    <div className="keys-page">
      <PageHeader
        title="Create a key"
        description="The service generates the key material and keeps it sealed; the key is Active at once."
        actions={<Link to="/keys">Back to keys</Link>}
      />
      <form noValidate onSubmit={handleSubmit((form) => create.mutate(keyBody(form)))} className="keys-form">
        <KeyAttributeFields control={control} setValue={setValue} />
        <ErrorAlert error={create.error} title="The key was not created" />
        <div className="row keys-form-actions">
          <Button type="submit" variant="primary" isDisabled={create.isPending} disabledReason={denied}>
            {create.isPending ? 'Creating…' : 'Create key'}
          </Button>
          <Link to="/keys">Cancel</Link>
        </div>
      </form>
      <EquivalentRequest method="POST" path="/api/v1/keys" body={keyBody(values)} />
    </div>
  )
}
