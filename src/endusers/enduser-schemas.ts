import { Type } from 'typebox'
import { nameSchema, PageQuery, Printable, Timestamp, Uuid } from '../http/http-schemas.ts'
import { ENDUSER_STATUSES } from './enduser-service.ts'

const Status = Type.Enum(ENDUSER_STATUSES, { description: 'active: may sign in; blocked: may not' })
const Email = Type.String({ minLength: 3, maxLength: 254, description: 'An e-mail address' })

export const EndUserSchema = Type.Object(
  {
    id: Uuid('The end-user (also the id of their account in the tenant’s realm)'),
    email: Type.String(),
    displayName: Type.Union([Type.String(), Type.Null()]),
    status: Status,
    blockedAt: Type.Union([Timestamp('When the user was blocked'), Type.Null()]),
    source: Type.Enum(['api', 'app_creator', 'sign_up', 'federation'], {
      description:
        'api: created with create-without-password; app_creator: the team member who registered an application; sign_up: the sign-in pages; federation: first signed in through a SAML identity provider',
    }),
    applicationIds: Type.Array(Type.String(), {
      description: 'Applications whose end-user list holds the user',
    }),
    hasPassword: Type.Boolean({ description: 'false until the set-up link is used' }),
    createdAt: Timestamp('Created'),
    updatedAt: Timestamp('Last changed'),
  },
  { additionalProperties: false },
)
nameSchema(EndUserSchema, 'EndUser')

export const EndUserListSchema = Type.Object(
  { data: Type.Array(EndUserSchema), total: Type.Integer() },
  { additionalProperties: false },
)
nameSchema(EndUserListSchema, 'EndUserList')

export const LinkDispatchSchema = Type.Object(
  {
    userId: Uuid('The end-user the link is for'),
    emailDispatchStatus: Type.Literal('queued', {
      description: 'The e-mail is sent in the background; the link is never in this answer',
    }),
    linkExpiresAt: Timestamp('When the link stops working'),
  },
  { additionalProperties: false },
)
nameSchema(LinkDispatchSchema, 'LinkDispatch')

export const CreatedEndUserSchema = Type.Object(
  { ...EndUserSchema.properties, setupLink: LinkDispatchSchema },
  { additionalProperties: false },
)
nameSchema(CreatedEndUserSchema, 'CreatedEndUser')

export const EndUserListQuery = Type.Object(
  {
    ...PageQuery,
    applicationId: Type.Optional(Uuid('Only users in this application’s list')),
    status: Type.Optional(Status),
    search: Type.Optional(Printable(254, 'A part of the e-mail address or the name (case-insensitive)')),
  },
  { additionalProperties: false },
)

export const CreateEndUserBody = Type.Object(
  {
    email: Email,
    displayName: Type.Optional(Printable(200, 'A name to show')),
    applicationId: Type.Optional(
      Uuid('The application the user is for: added to its list; its id is in the set-up link'),
    ),
  },
  { additionalProperties: false, examples: [{ email: 'ada@example.com', displayName: 'Ada' }] },
)
nameSchema(CreateEndUserBody, 'CreateEndUser')

export const SendResetBody = Type.Object(
  { applicationId: Type.Optional(Uuid('The application the reset link names')) },
  { additionalProperties: false, examples: [{ applicationId: '0b6f3c1e-2f4a-4c69-9d1e-6f0d2a9b7c11' }] },
)
nameSchema(SendResetBody, 'SendPasswordReset')
