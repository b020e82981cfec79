import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query'
import { type ReactNode, useState } from 'react'
import { api, must, type Schemas } from '../../api/client.ts'
import { needsRole, ROLE_NAMES, type Role, useWorkspace } from '../../auth/workspace.tsx'
import { ErrorAlert, Notice } from '../../ui/Alert.tsx'
import { Button } from '../../ui/Button.tsx'
import { DialogButton } from '../../ui/Dialog.tsx'
import { EquivalentRequest } from '../../ui/EquivalentRequest.tsx'
import { type Option, SelectInput } from '../../ui/Field.tsx'
import { Empty, Loading, PageHeader } from '../../ui/Page.tsx'
import { ConfirmButton, Time } from '../api-keys/shared.tsx'
import { InviteForm } from './InviteForm.tsx'

type Member = Schemas['TeamMember']
type Invitation = Schemas['Invitation']

const ROLE_ORDER: readonly Role[] = ['tenant:viewer', 'tenant:developer', 'tenant:admin', 'tenant:owner']
const ROLE_HELP: Record<Role, string> = {
  'tenant:viewer': 'Reads everything but the audit log',
  'tenant:developer': 'Also writes keys, secrets and applications, and runs cryptographic operations',
  'tenant:admin': 'Every scope, plus the team and the tenant’s settings',
  'tenant:owner': 'An admin who can also grant and take the owner role',
}

/** The roles the caller may give: only owners grant the owner role. */
function roleOptions(callerIsOwner: boolean): Option[] {
  return ROLE_ORDER.filter((role) => callerIsOwner || role !== 'tenant:owner').map((role) => ({
    id: role,
    label: ROLE_NAMES[role],
    description: ROLE_HELP[role],
  }))
}

const INVITATION_STATUS: Record<Invitation['status'], ReactNode> = {
  pending: <span className="badge badge-accent">Pending</span>,
  accepted: <span className="badge badge-success">Accepted</span>,
  revoked: <span className="badge badge-danger">Revoked</span>,
  expired: <span className="badge badge-warning">Expired</span>,
}

const DISPATCH_STATUS: Record<Invitation['emailDispatchStatus'], ReactNode> = {
  queued: <span className="badge">Queued</span>,
  sent: <span className="badge badge-success">Sent</span>,
  failed: <span className="badge badge-danger">Failed</span>,
}

const DISPATCH_ERRORS: Record<string, string> = {
  smtp_not_configured: 'the service has no mail server configured',
  smtp_refused: 'the mail server refused the message',
  smtp_timeout: 'the mail server did not answer in time',
  smtp_unreachable: 'the mail server could not be reached',
  smtp_auth_failed: 'the mail server refused the service’s credentials',
  smtp_failed: 'the mail server failed',
}

const OWNER_ONLY = 'Only Owner members can change or remove an owner'

export function TeamPage() {
  const { me, hasRole } = useWorkspace()
  const queryClient = useQueryClient()
  const [done, setDone] = useState<ReactNode>(null)
  const [failed, setFailed] = useState<unknown>(null)
  const canManage = hasRole('tenant:owner', 'tenant:admin')
  const isOwner = hasRole('tenant:owner')
  const cannotManage = canManage ? undefined : needsRole('tenant:owner', 'tenant:admin')

  const members = useQuery({
    queryKey: ['team', 'members'],
    queryFn: async () => must(await api.GET('/api/v1/team/members')).data,
  })
  const invitations = useQuery({
    queryKey: ['team', 'invitations'],
    queryFn: async () => must(await api.GET('/api/v1/team/invitations')).data,
    // While an e-mail waits for the job process, its delivery is looked at again.
    refetchInterval: (query) =>
      query.state.data?.some((i) => i.status === 'pending' && i.emailDispatchStatus === 'queued')
        ? 2000
        : false,
  })
  const refresh = (what: 'members' | 'invitations') =>
    queryClient.invalidateQueries({ queryKey: ['team', what] })
  const report = (message: ReactNode) => {
    setFailed(null)
    setDone(message)
  }

  const resend = useMutation({
    mutationFn: async (invitation: Invitation) =>
      must(
        await api.POST('/api/v1/team/invitations/{id}/resend', {
          params: { path: { id: invitation.invitationId } },
        }),
      ),
    onMutate: () => {
      setDone(null)
      setFailed(null)
    },
    onSuccess: async (invitation) => {
      report(
        <>
          A new invitation e-mail to <strong>{invitation.email}</strong> is queued; the link sent before no
          longer works.
        </>,
      )
      await refresh('invitations')
    },
    onError: setFailed,
  })

  return (
    <>
      <PageHeader
        title="Team"
        description="The people who administer this tenant in the console, and their roles."
        actions={
          <DialogButton
            label="Invite member"
            title="Invite a member"
            variant="primary"
            isDismissable={false}
            disabledReason={cannotManage}
          >
            {(close) => (
              <InviteForm
                close={close}
                roles={roleOptions(isOwner)}
                onInvited={(invitation) =>
                  report(
                    <>
                      <strong>{invitation.email}</strong> is invited as {ROLE_NAMES[invitation.role]}. The
                      e-mail is sent in the background: its delivery shows under Invitations.
                    </>,
                  )
                }
              />
            )}
          </DialogButton>
        }
      />
      {!canManage && (
        <Notice>
          You can see the team and its invitations but not change them.{' '}
          {needsRole('tenant:owner', 'tenant:admin')}.
        </Notice>
      )}
      {done && <Notice tone="success">{done}</Notice>}
      <ErrorAlert error={failed} />

      <section aria-labelledby="team-members-title">
        <h2 id="team-members-title">Members</h2>
        {members.isPending ? (
          <Loading what="members" />
        ) : members.isError ? (
          <ErrorAlert error={members.error} title="The members could not be read" />
        ) : (
          <table className="table">
            <caption className="visually-hidden">Members of the tenant and their roles</caption>
            <thead>
              <tr>
                <th scope="col">Member</th>
                <th scope="col">Role</th>
                <th scope="col">Member since</th>
                {canManage && (
                  <th scope="col">
                    <span className="visually-hidden">Actions</span>
                  </th>
                )}
              </tr>
            </thead>
            <tbody>
              {members.data.map((member) => {
                const self = member.accountId === me.accountId
                const name = member.displayName ?? member.email
                const ownerReason = member.role === 'tenant:owner' && !isOwner ? OWNER_ONLY : undefined
                return (
                  <tr key={member.accountId}>
                    <td>
                      <strong>{name}</strong> {self && <span className="badge">You</span>}
                      {member.displayName && <div className="muted">{member.email}</div>}
                    </td>
                    <td>{ROLE_NAMES[member.role]}</td>
                    <td>
                      <Time value={member.createdAt} />
                    </td>
                    {canManage && (
                      <td>
                        <div className="team-actions">
                          <ChangeRoleButton
                            member={member}
                            roles={roleOptions(isOwner)}
                            disabledReason={ownerReason}
                            onChanged={async (changed) => {
                              report(
                                <>
                                  {changed.displayName ?? changed.email} is now {ROLE_NAMES[changed.role]}.
                                  {self &&
                                    ' Your own role changed: reload the console to see what you may do now.'}
                                </>,
                              )
                              await refresh('members')
                            }}
                          />
                          <ConfirmButton
                            label="Remove"
                            accessibleLabel={`Remove ${name}`}
                            title={`Remove ${name} from the team?`}
                            confirmLabel="Remove member"
                            disabledReason={ownerReason}
                            onConfirm={async () => {
                              must(
                                await api.DELETE('/api/v1/team/members/{accountId}', {
                                  params: { path: { accountId: member.accountId } },
                                }),
                              )
                              report(<>{name} is no longer a member of this tenant.</>)
                              await refresh('members')
                            }}
                          >
                            <p>
                              Their access ends at once: every token they hold for this tenant stops working
                              and their console sessions for it end. They can be invited again later.
                            </p>
                            {self && (
                              <p>
                                <strong>This is you:</strong> you will lose access to this tenant.
                              </p>
                            )}
                          </ConfirmButton>
                        </div>
                      </td>
                    )}
                  </tr>
                )
              })}
            </tbody>
          </table>
        )}
      </section>

      <section aria-labelledby="team-invitations-title">
        <h2 id="team-invitations-title">Invitations</h2>
        <p className="muted">
          An invitation is an e-mailed link that works once, for 7 days; the invitee sets or confirms a
          password and joins with the role.
        </p>
        {invitations.isPending ? (
          <Loading what="invitations" />
        ) : invitations.isError ? (
          <ErrorAlert error={invitations.error} title="The invitations could not be read" />
        ) : invitations.data.length === 0 ? (
          <Empty>No invitations yet. Invite a member to give someone access to this tenant.</Empty>
        ) : (
          <table className="table">
            <caption className="visually-hidden">Invitations, newest first</caption>
            <thead>
              <tr>
                <th scope="col">E-mail address</th>
                <th scope="col">Role</th>
                <th scope="col">Status</th>
                <th scope="col">E-mail delivery</th>
                <th scope="col">Link expires</th>
                {canManage && (
                  <th scope="col">
                    <span className="visually-hidden">Actions</span>
                  </th>
                )}
              </tr>
            </thead>
            <tbody>
              {invitations.data.map((invitation) => {
                const ownerReason =
                  invitation.role === 'tenant:owner' && !isOwner
                    ? 'Only Owner members can manage an owner invitation'
                    : undefined
                return (
                  <tr key={invitation.invitationId}>
                    <td>
                      {invitation.email}
                      <div className="muted team-small">
                        Invited <Time value={invitation.createdAt} />
                      </div>
                    </td>
                    <td>{ROLE_NAMES[invitation.role]}</td>
                    <td>{INVITATION_STATUS[invitation.status]}</td>
                    <td>
                      {DISPATCH_STATUS[invitation.emailDispatchStatus]}
                      {invitation.emailDispatchStatus === 'failed' && invitation.emailDispatchError && (
                        <div className="team-small">
                          {DISPATCH_ERRORS[invitation.emailDispatchError] ?? 'the send failed'} (
                          <code>{invitation.emailDispatchError}</code>)
                        </div>
                      )}
                    </td>
                    <td>
                      <Time value={invitation.expiresAt} />
                    </td>
                    {canManage && (
                      <td>
                        {invitation.status === 'pending' && (
                          <div className="team-actions">
                            <Button
                              variant="secondary"
                              aria-label={`Resend the invitation to ${invitation.email}`}
                              disabledReason={ownerReason}
                              isDisabled={resend.isPending}
                              onPress={() => resend.mutate(invitation)}
                            >
                              Resend
                            </Button>
                            <ConfirmButton
                              label="Revoke"
                              accessibleLabel={`Revoke the invitation to ${invitation.email}`}
                              title={`Revoke the invitation to ${invitation.email}?`}
                              confirmLabel="Revoke invitation"
                              disabledReason={ownerReason}
                              onConfirm={async () => {
                                must(
                                  await api.DELETE('/api/v1/team/invitations/{id}', {
                                    params: { path: { id: invitation.invitationId } },
                                  }),
                                )
                                report(
                                  <>
                                    The invitation to {invitation.email} is revoked: its link no longer works.
                                  </>,
                                )
                                await refresh('invitations')
                              }}
                            >
                              <p>Its link stops working at once. You can invite the address again later.</p>
                            </ConfirmButton>
                          </div>
                        )}
                      </td>
                    )}
                  </tr>
                )
              })}
            </tbody>
          </table>
        )}
      </section>
    </>
  )
}

/** A member's role, changed in a dialog; the API's refusal (the last owner, ...) stays in it. */
function ChangeRoleButton(props: {
  member: Member
  roles: Option[]
  disabledReason: string | undefined
  onChanged(member: Member): Promise<void>
}) {
  const [role, setRole] = useState<Role>(props.member.role)
  const name = props.member.displayName ?? props.member.email
  const path = `/api/v1/team/members/${props.member.accountId}`
  return (
    <ConfirmButton
      label="Change role"
      accessibleLabel={`Change role of ${name}`}
      title={`Change the role of ${name}`}
      confirmLabel="Save role"
      variant="quiet"
      disabledReason={props.disabledReason}
      onConfirm={async () => {
        const changed = must(
          await api.PATCH('/api/v1/team/members/{accountId}', {
            params: { path: { accountId: props.member.accountId } },
            body: { role },
          }),
        )
        await props.onChanged(changed)
      }}
    >
      <p>Now {ROLE_NAMES[props.member.role]}. The change applies to their next request, in every session.</p>
      <SelectInput
        label="New role"
        options={props.roles}
        value={role}
        onChange={(value) => setRole(value as Role)}
      />
      <EquivalentRequest method="PATCH" path={path} body={{ role }} />
    </ConfirmButton>
  )
}
