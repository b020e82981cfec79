import { Type } from 'typebox'
import { nameSchema, PageQuery, Text, Timestamp, Uuid } from '../http/http-schemas.ts'
import { ROLE_LIMITS } from './role-service.ts'

/** RFC 6749 scope-token characters: a role name or permission fits in a token's claims and scopes. */
const Token = (maxLength: number, description: string) =>
  Type.String({
    minLength: 1,
    maxLength,
    pattern: '^[\\x21\\x23-\\x5b\\x5d-\\x7e]+$',
    description: `${description} (printable ASCII without spaces, quotes or backslashes)`,
  })

export const RoleSchema = Type.Object(
  {
    id: Uuid('The role'),
    applicationId: Uuid('The application the role belongs to'),
    name: Type.String(),
    description: Type.String(),
    permissions: Type.Array(Type.String()),
    createdAt: Timestamp('Created'),
    updatedAt: Timestamp('Last changed'),
  },
  { additionalProperties: false },
)
nameSchema(RoleSchema, 'Role')

export const RoleListSchema = Type.Object(
  { data: Type.Array(RoleSchema), total: Type.Integer() },
  { additionalProperties: false },
)
nameSchema(RoleListSchema, 'RoleList')

export const EndUserRolesSchema = Type.Object(
  { data: Type.Array(RoleSchema) },
  { additionalProperties: false },
)
nameSchema(EndUserRolesSchema, 'EndUserRoles')

const Permissions = Type.Array(Token(ROLE_LIMITS.permissionChars, 'A permission'), {
  maxItems: ROLE_LIMITS.permissions,
  description: 'Permissions as strings, for the application to interpret',
})

export const CreateRoleBody = Type.Object(
  {
    applicationId: Uuid('The application'),
    name: Token(ROLE_LIMITS.nameChars, 'Unique within the application; the value in the tokens’ roles claim'),
    description: Type.Optional(Text(ROLE_LIMITS.descriptionChars, 'What the role is for')),
    permissions: Type.Optional(Permissions),
  },
  {
    additionalProperties: false,
    examples: [
      {
        applicationId: '0b6f3c1e-2f4a-4c69-9d1e-6f0d2a9b7c11',
        name: 'editor',
        description: 'Edits documents',
        permissions: ['documents:read', 'documents:write'],
      },
    ],
  },
)
nameSchema(CreateRoleBody, 'CreateRole')

export const UpdateRoleBody = Type.Object(
  {
    name: Token(ROLE_LIMITS.nameChars, 'Unique within the application'),
    description: Type.Optional(Text(ROLE_LIMITS.descriptionChars, 'Replaces the stored one (absent: empty)')),
    permissions: Type.Optional(Permissions),
  },
  {
    additionalProperties: false,
    examples: [{ name: 'editor', description: 'Edits documents', permissions: ['documents:write'] }],
  },
)
nameSchema(UpdateRoleBody, 'UpdateRole')

export const RoleListQuery = Type.Object(
  { ...PageQuery, applicationId: Type.Optional(Uuid('Only this application’s roles')) },
  { additionalProperties: false },
)

export const EndUserRoleParams = Type.Object(
  { id: Uuid('The end-user'), roleId: Uuid('The role') },
  { additionalProperties: false },
)
