import { useMutation, useQueryClient } from '@tanstack/react-query'
import { useForm } from 'react-hook-form'
import { api, must, type Schemas } from '../../api/client.ts'
import type { Role } from '../../auth/workspace.tsx'
import { ErrorAlert } from '../../ui/Alert.tsx'
import { Button } from '../../ui/Button.tsx'
import { EquivalentRequest } from '../../ui/EquivalentRequest.tsx'
import type { Option } from '../../ui/Field.tsx'
import { FormSelectInput, FormTextInput } from '../../ui/FormFields.tsx'

interface Values {
  email: string
  role: Role
}

/** Inviting a person: their address and the role they get when they accept. */
export function InviteForm(props: {
  roles: Option[]
  close(): void
  onInvited(invitation: Schemas['Invitation']): void
}) {
  const queryClient = useQueryClient()
  const { control, handleSubmit, watch } = useForm<Values>({
    defaultValues: { email: '', role: 'tenant:developer' },
  })
  const values = watch()
  const invite = useMutation({
    mutationFn: async (body: Schemas['CreateInvitation']) =>
      must(await api.POST('/api/v1/team/invitations', { body })),
    onSuccess: async (invitation) => {
      props.onInvited(invitation)
      props.close()
      await queryClient.invalidateQueries({ queryKey: ['team', 'invitations'] })
    },
  })
  const body = { email: values.email.trim(), role: values.role }
  return (
    <form
      className="stack admin-form"
      noValidate
      onSubmit={handleSubmit((submitted) =>
        invite.mutate({ email: submitted.email.trim(), role: submitted.role }),
      )}
    >
      <p className="muted admin-help">
        They receive an e-mail with a link that works once, for 7 days, to join this tenant.
      </p>
      <FormTextInput
        control={control}
        name="email"
        rules={{
          validate: (email) =>
            /^[^\s@]+@[^\s@]+$/.test(email.trim())
              ? true
              : 'Enter an e-mail address, such as ada@example.com',
        }}
        label="E-mail address"
        type="email"
        autoComplete="off"
        isRequired
        maxLength={254}
      />
      <FormSelectInput
        control={control}
        name="role"
        label="Role"
        description="What they may do once they join; you can change it later."
        options={props.roles}
      />
      <ErrorAlert error={invite.error} title="The invitation was not made" />
      <div className="admin-dialog-actions">
        <Button variant="quiet" onPress={props.close}>
          Cancel
        </Button>
        <Button type="submit" variant="primary" isDisabled={invite.isPending}>
          {invite.isPending ? 'Inviting…' : 'Send invitation'}
        </Button>
      </div>
      <EquivalentRequest method="POST" path="/api/v1/team/invitations" body={body} />
    </form>
  )
}
