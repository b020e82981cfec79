import { Type } from 'typebox'
import { TENANT_ROLES } from '../auth/roles.ts'
import { nameSchema, Timestamp, Uuid } from '../http/http-schemas.ts'

const Role = Type.Enum(TENANT_ROLES, { description: 'A role in the tenant (docs/identity.md "The model")' })
const Email = Type.String({ minLength: 3, maxLength: 254, description: 'An e-mail address' })

export const MemberSchema = Type.Object(
  {
    accountId: Uuid('The member’s account'),
    email: Type.String(),
    displayName: Type.Union([Type.String(), Type.Null()]),
    role: Role,
    createdAt: Timestamp('When the person became a member'),
  },
  { additionalProperties: false },
)
nameSchema(MemberSchema, 'TeamMember')

export const MeSchema = Type.Object(
  {
    accountId: Uuid('The signed-in person’s account'),
    email: Type.String(),
    displayName: Type.Union([Type.String(), Type.Null()]),
    tenantId: Uuid('The tenant this access token is for'),
    memberships: Type.Array(
      Type.Object(
        {
          tenantId: Uuid('A tenant the person belongs to'),
          tenantName: Type.String(),
          role: Role,
          resource: Type.String({
            description: 'The resource indicator to ask the provider for, for a token of this tenant',
            examples: ['urn:kms:tenant:0b6f3c7e-8d2a-4c1e-9f5b-2a7d4e6c8b10'],
          }),
        },
        { additionalProperties: false },
      ),
      { description: 'Every tenant the person is a member of, oldest membership first' },
    ),
  },
  { additionalProperties: false },
)
nameSchema(MeSchema, 'Me')

export const MemberListSchema = Type.Object(
  { data: Type.Array(MemberSchema), total: Type.Integer() },
  { additionalProperties: false },
)
nameSchema(MemberListSchema, 'TeamMemberList')

export const MemberParams = Type.Object(
  { accountId: Uuid('The member’s account') },
  { additionalProperties: false },
)

export const ChangeRoleBody = Type.Object(
  { role: Role },
  { additionalProperties: false, examples: [{ role: 'tenant:developer' }] },
)
nameSchema(ChangeRoleBody, 'ChangeMemberRole')

export const CreateInvitationBody = Type.Object(
  { email: Email, role: Role },
  { additionalProperties: false, examples: [{ email: 'grace@example.com', role: 'tenant:developer' }] },
)
nameSchema(CreateInvitationBody, 'CreateInvitation')

export const InvitationSchema = Type.Object(
  {
    invitationId: Uuid('The invitation'),
    email: Type.String(),
    role: Role,
    expiresAt: Timestamp('When the link stops working'),
    emailDispatchStatus: Type.Enum(['queued', 'sent', 'failed'], {
      description: 'queued until the job process has sent the e-mail; sent or failed after',
    }),
    emailDispatchError: Type.Union([Type.String(), Type.Null()], {
      description:
        'Why the last send failed: smtp_not_configured, smtp_refused, smtp_timeout, smtp_unreachable, smtp_auth_failed, smtp_failed',
    }),
    status: Type.Enum(['pending', 'accepted', 'revoked', 'expired']),
    createdAt: Timestamp('When the invitation was made'),
  },
  { additionalProperties: false },
)
nameSchema(InvitationSchema, 'Invitation')

export const InvitationListSchema = Type.Object(
  { data: Type.Array(InvitationSchema), total: Type.Integer() },
  { additionalProperties: false },
)
nameSchema(InvitationListSchema, 'InvitationList')
