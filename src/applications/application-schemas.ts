import { type TSchema, Type } from 'typebox'
import { LoginPanelSchema } from '../branding/login-panel.ts'
import { nameSchema, Printable, Timestamp, Uuid } from '../http/http-schemas.ts'
import { MfaMethodsSchema } from '../settings/settings-schemas.ts'
import { APPLICATION_LIMITS, APPLICATION_TYPES } from './application-service.ts'

const Uri = Type.String({
  minLength: 1,
  maxLength: APPLICATION_LIMITS.uriChars,
  description: 'An absolute URI without a fragment',
})
const Uris = (description: string) => Type.Array(Uri, { maxItems: APPLICATION_LIMITS.uris, description })
const ApplicationType = Type.Enum(APPLICATION_TYPES, {
  description:
    'spa and native: public clients (PKCE, no secret); traditional and machine_to_machine: confidential (a secret, shown once); machine_to_machine has no redirect URIs',
})
const Name = Printable(200, 'A name for people')

const ApplicationBrandingSchema = Type.Object(
  { loginPanel: LoginPanelSchema },
  { additionalProperties: false, description: 'The sign-in pages’ panel for this application' },
)
nameSchema(ApplicationBrandingSchema, 'ApplicationBranding')
const MfaSetting = (description: string) => Type.Union([MfaMethodsSchema, Type.Null()], { description })
const BrandingSetting = (description: string) =>
  Type.Union([ApplicationBrandingSchema, Type.Null()], { description })

export const ApplicationSchema = Type.Object(
  {
    id: Uuid('The application'),
    name: Type.String(),
    applicationType: ApplicationType,
    clientId: Type.String({ description: 'The OAuth client_id' }),
    hasClientSecret: Type.Boolean(),
    clientSecretRotatedAt: Type.Union([Timestamp('When the current secret was made'), Type.Null()]),
    redirectUris: Type.Array(Type.String()),
    postLogoutRedirectUris: Type.Array(Type.String()),
    resources: Type.Array(Type.String(), {
      description: 'RFC 8707 resource indicators the application may ask tokens for',
    }),
    mfaMethods: MfaSetting(
      'The application’s MFA methods, replacing the tenant’s in full; null: the tenant’s',
    ),
    branding: BrandingSetting('null: the tenant’s panel, then the defaults'),
    signUpEnabled: Type.Boolean({ description: 'People may create their own account on its sign-in pages' }),
    createdAt: Timestamp('Created'),
    updatedAt: Timestamp('Last changed'),
  },
  { additionalProperties: false },
)
nameSchema(ApplicationSchema, 'Application')

export const ApplicationWithSecretSchema = Type.Object(
  {
    ...ApplicationSchema.properties,
    clientSecret: Type.Optional(
      Type.String({ description: 'Shown this once (confidential types); store it now' }),
    ),
  },
  { additionalProperties: false },
)
nameSchema(ApplicationWithSecretSchema, 'ApplicationWithSecret')

export const ApplicationListSchema = Type.Object(
  { data: Type.Array(ApplicationSchema), total: Type.Integer() },
  { additionalProperties: false },
)
nameSchema(ApplicationListSchema, 'ApplicationList')

export const CreateApplicationBody = Type.Object(
  {
    name: Name,
    applicationType: ApplicationType,
    redirectUris: Type.Optional(
      Uris(
        'Where the provider may send the browser back: at least one, except for machine_to_machine (none; absent is fine)',
      ),
    ),
    postLogoutRedirectUris: Type.Optional(Uris('Where the browser may go after sign-out')),
    resources: Type.Optional(Uris('RFC 8707 resource indicators (absolute URIs)')),
    mfaMethods: Type.Optional(MfaSetting('Absent or null: the tenant’s MFA methods apply')),
    branding: Type.Optional(BrandingSetting('Absent or null: the tenant’s panel applies')),
    signUpEnabled: Type.Optional(
      Type.Boolean({ description: 'Offer “create an account” on the sign-in page (default false)' }),
    ),
  },
  {
    additionalProperties: false,
    examples: [
      {
        name: 'Dashboard',
        applicationType: 'spa',
        redirectUris: ['https://app.example.com/callback'],
        resources: ['https://api.example.com'],
      },
    ],
  },
)
nameSchema(CreateApplicationBody, 'CreateApplication')

/**
 * The read answer's fields no PUT can change. They may be sent back as read (a GET's answer, put
 * back unchanged, is a valid PUT); a different value is 409 read_only_field naming it.
 */
const ReadOnly = <T extends TSchema>(schema: T) =>
  Type.Optional({
    ...schema,
    description: 'Read-only: absent, or as read (a different value is 409 read_only_field)',
  })

export const UpdateApplicationBody = Type.Object(
  {
    name: Name,
    redirectUris: Type.Optional(
      Uris('Replaces the stored list (absent: none; only machine_to_machine has none)'),
    ),
    postLogoutRedirectUris: Type.Optional(Uris('Replaces the stored list (absent: none)')),
    resources: Type.Optional(Uris('Absent: the stored resources stay; an empty array clears them')),
    mfaMethods: Type.Optional(MfaSetting('Absent: kept; null: the tenant’s apply again')),
    branding: Type.Optional(BrandingSetting('Absent: kept; null: removed')),
    signUpEnabled: Type.Optional(Type.Boolean({ description: 'Absent: kept' })),
    id: ReadOnly(ApplicationSchema.properties.id),
    applicationType: ReadOnly(ApplicationSchema.properties.applicationType),
    clientId: ReadOnly(ApplicationSchema.properties.clientId),
    hasClientSecret: ReadOnly(ApplicationSchema.properties.hasClientSecret),
    clientSecretRotatedAt: ReadOnly(ApplicationSchema.properties.clientSecretRotatedAt),
    createdAt: ReadOnly(ApplicationSchema.properties.createdAt),
    updatedAt: ReadOnly(ApplicationSchema.properties.updatedAt),
  },
  {
    additionalProperties: false,
    description:
      'The application type, ids, secret state and timestamps cannot change: the fields of a read answer may be sent back as read',
    examples: [{ name: 'Dashboard', redirectUris: ['https://app.example.com/callback'], resources: [] }],
  },
)
nameSchema(UpdateApplicationBody, 'UpdateApplication')
