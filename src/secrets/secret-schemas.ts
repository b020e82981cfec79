import { type Static, Type } from 'typebox'
import { nameSchema, Printable, Text, Timestamp, Uuid } from '../http/http-schemas.ts'
import { PATTERN_MESSAGE } from '../http/validation.ts'
import { TOTP_ALGORITHMS } from '../platform/totp.ts'
import { TOTP_LIMITS } from './totp.ts'

/**
 * Spec 2.5's fields selectable with `include`. `metadata` selects every field but the content
 * ones (notes, customFields); `all` selects everything and the value.
 */
export const INCLUDE_FIELDS = [
  'customFields',
  'notes',
  'labels',
  'description',
  'expiresAt',
  'folderId',
  'isActive',
  'isFavorite',
  'hasTotp',
  'isTravelSafe',
  'createdAt',
  'updatedAt',
  'createdBy',
  'updatedBy',
] as const
export type IncludeField = (typeof INCLUDE_FIELDS)[number]

const CONTENT_FIELDS: readonly IncludeField[] = ['customFields', 'notes']
export const METADATA_FIELDS: readonly IncludeField[] = INCLUDE_FIELDS.filter(
  (f) => !CONTENT_FIELDS.includes(f),
)

const CUSTOM_FIELD_TYPES = ['text', 'number', 'boolean', 'url', 'email', 'date'] as const
export type CustomFieldType = (typeof CUSTOM_FIELD_TYPES)[number]

const SECRET_LIMITS = {
  valueChars: 65_536,
  notesChars: 10_000,
  customFields: 50,
  customValueChars: 4096,
} as const

const SecretName = Printable(200, 'Unique within its folder among secrets not deleted')
const Labels = Type.Array(Printable(64, 'A label'), { maxItems: 50, description: 'Tags (a set)' })
const CustomFieldValue = Type.Union(
  [Text(SECRET_LIMITS.customValueChars, 'Text'), Type.Number(), Type.Boolean()],
  {
    description: 'A string for text, url, email and date (YYYY-MM-DD); a number; a boolean',
  },
)

const CustomFieldInput = Type.Object(
  {
    name: Printable(100, 'Unique within the secret'),
    type: Type.Enum(CUSTOM_FIELD_TYPES, { default: 'text' }),
    value: CustomFieldValue,
    sensitive: Type.Boolean({
      default: false,
      description: 'Sealed at rest like the value, and shown only with include=all',
    }),
  },
  { additionalProperties: false },
)
export type CustomFieldInput = Static<typeof CustomFieldInput>

const CustomFieldView = Type.Object({
  name: Type.String(),
  type: Type.Enum(CUSTOM_FIELD_TYPES),
  sensitive: Type.Boolean(),
  value: Type.Union([CustomFieldValue, Type.Null()], {
    description: 'null for a sensitive field unless include=all',
  }),
})

const TotpInput = Type.Object(
  {
    secret: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 512,
        pattern: '^[A-Za-z2-7= -]+$',
        description: 'The Base32 seed',
      }),
    ),
    uri: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 2048,
        pattern: '^[oO][tT][pP][aA][uU][tT][hH]://',
        description: 'An otpauth://totp/ URI instead of secret',
      }),
    ),
    algorithm: Type.Optional(Type.Enum(TOTP_ALGORITHMS, { description: 'Default SHA1' })),
    digits: Type.Optional(Type.Integer({ minimum: 6, maximum: 8, description: 'Default 6' })),
    period: Type.Optional(
      Type.Integer({
        minimum: TOTP_LIMITS.minPeriod,
        maximum: TOTP_LIMITS.maxPeriod,
        description: 'Seconds; default 30',
      }),
    ),
  },
  { additionalProperties: false, description: 'A TOTP seed (RFC 6238); give secret or uri' },
)

const secretAttributes = {
  description: Type.Optional(Text(1000, 'Free text, stored in clear')),
  notes: Type.Optional(
    Type.Union([Text(SECRET_LIMITS.notesChars, 'Sealed at rest'), Type.Null()], {
      description: 'null clears',
    }),
  ),
  labels: Type.Optional(Labels),
  customFields: Type.Optional(
    Type.Array(CustomFieldInput, {
      maxItems: SECRET_LIMITS.customFields,
      description: 'Replaces every custom field',
    }),
  ),
  folderId: Type.Optional(Type.Union([Uuid('Folder'), Type.Null()], { description: 'null: top level' })),
  expiresAt: Type.Optional(Type.Union([Timestamp('Expiry (informational)'), Type.Null()])),
  isActive: Type.Optional(Type.Boolean({ description: 'An inactive secret refuses value reads' })),
  isFavorite: Type.Optional(Type.Boolean()),
  isTravelSafe: Type.Optional(Type.Boolean()),
  totp: Type.Optional(Type.Union([TotpInput, Type.Null()], { description: 'null removes the seed' })),
}

const SecretValue = Text(SECRET_LIMITS.valueChars, 'The secret value (UTF-8 text)')

export const CreateSecretBody = Type.Object(
  { name: SecretName, value: SecretValue, ...secretAttributes },
  {
    $id: 'CreateSecretRequest',
    additionalProperties: false,
    examples: [
      {
        name: 'orders-db-password',
        value: 'correct-horse-battery-staple',
        description: 'PostgreSQL password of the orders service',
        labels: ['prod'],
      },
    ],
  },
)
export type CreateSecretBody = Static<typeof CreateSecretBody>

export const UpdateSecretBody = Type.Object(
  { name: Type.Optional(SecretName), value: Type.Optional(SecretValue), ...secretAttributes },
  {
    $id: 'UpdateSecretRequest',
    additionalProperties: false,
    minProperties: 1,
    examples: [{ value: 'staple-battery-horse-correct', notes: 'Rotated after the 2026 audit' }],
  },
)
export type UpdateSecretBody = Static<typeof UpdateSecretBody>

const Include = Type.Optional(
  Type.String({
    maxLength: 500,
    pattern: '^[A-Za-z, ]*$',
    description: `Comma-separated fields: ${INCLUDE_FIELDS.join(', ')}; metadata for every metadata field; all for everything including the value`,
  }),
)

export const SecretIdParams = Type.Object({ id: Uuid('Secret id') }, { additionalProperties: false })
export const SecretVersionParams = Type.Object(
  { id: Uuid('Secret id'), version: Type.Integer({ minimum: 1, maximum: 2_147_483_647 }) },
  { additionalProperties: false },
)

export const GetSecretQuery = Type.Object({ include: Include }, { additionalProperties: false })
export const GetVersionQuery = Type.Object(
  {
    include: Type.Optional(
      Type.String({ maxLength: 500, pattern: '^[A-Za-z, ]*$', description: 'all: include the value' }),
    ),
  },
  { additionalProperties: false },
)

export const ListSecretsQuery = Type.Object(
  {
    include: Include,
    folderId: Type.Optional(
      Type.Union([Uuid('Only secrets directly in this folder'), Type.Literal('root')], {
        description: 'A folder id, or root for secrets in no folder',
      }),
    ),
    label: Type.Optional(
      Type.Array(Printable(64, 'A label'), {
        maxItems: 50,
        description: 'Secrets carrying any of these labels (repeat)',
      }),
    ),
    favorite: Type.Optional(Type.Boolean()),
    active: Type.Optional(Type.Boolean()),
    search: Type.Optional(Text(200, 'Case-insensitive text in name or description', 1)),
    deleted: Type.Boolean({
      default: false,
      description: 'true: the deleted secrets that can still be restored',
    }),
    limit: Type.Integer({ minimum: 1, maximum: 1000, default: 50 }),
    offset: Type.Integer({ minimum: 0, maximum: 1_000_000, default: 0 }),
  },
  { additionalProperties: false },
)
export type ListSecretsQuery = Static<typeof ListSecretsQuery>

export const DeleteSecretQuery = Type.Object(
  { permanent: Type.Boolean({ default: false, description: 'true: purge now, with every version' }) },
  { additionalProperties: false },
)

const optional = <T extends Parameters<typeof Type.Optional>[0]>(schema: T) => Type.Optional(schema)

export const SecretSchema = Type.Object(
  {
    id: Uuid('Secret id'),
    name: Type.String(),
    version: Type.Integer({ description: 'Current value version' }),
    value: optional(Type.String({ description: 'With include=all' })),
    customFields: optional(Type.Array(CustomFieldView)),
    notes: optional(Type.Union([Type.String(), Type.Null()])),
    labels: optional(Type.Array(Type.String())),
    description: optional(Type.String()),
    expiresAt: optional(Type.Union([Timestamp('Expiry'), Type.Null()])),
    folderId: optional(Type.Union([Uuid('Folder'), Type.Null()])),
    isActive: optional(Type.Boolean()),
    isFavorite: optional(Type.Boolean()),
    hasTotp: optional(Type.Boolean()),
    isTravelSafe: optional(Type.Boolean()),
    createdAt: optional(Timestamp('Creation')),
    updatedAt: optional(Timestamp('Last change')),
    createdBy: optional(Type.String()),
    updatedBy: optional(Type.String()),
    deletedAt: optional(Timestamp('In the list of deleted secrets: when it was deleted')),
    purgeAt: optional(Timestamp('In the list of deleted secrets: when it is purged for good')),
  },
  {
    $id: 'SecretView',
    title: 'Secret',
    description: 'id, name and version always; the rest as include selects',
  },
)

export const SecretListSchema = Type.Object({
  data: Type.Array(SecretSchema),
  total: Type.Integer({ description: 'Secrets matching the filters' }),
  limit: Type.Integer(),
  offset: Type.Integer(),
})
nameSchema(SecretListSchema, 'SecretList')

export const SecretVersionSchema = Type.Object({
  version: Type.Integer(),
  createdAt: Timestamp('When this value was set'),
  createdBy: Type.String(),
  isCurrent: Type.Boolean(),
  value: optional(Type.String({ description: 'With include=all' })),
})
nameSchema(SecretVersionSchema, 'SecretVersion')

export const SecretVersionListSchema = Type.Object({ data: Type.Array(SecretVersionSchema) })
nameSchema(SecretVersionListSchema, 'SecretVersionList')

export const TotpCodeSchema = Type.Object({
  code: Type.String(),
  algorithm: Type.Enum(TOTP_ALGORITHMS),
  digits: Type.Integer(),
  period: Type.Integer(),
  validFrom: Timestamp('Start of the code time step'),
  validUntil: Timestamp('End of the code time step'),
  remainingSeconds: Type.Integer(),
})
nameSchema(TotpCodeSchema, 'TotpCode')

// Folders

export const FolderSchema = Type.Object(
  {
    id: Uuid('Folder id'),
    name: Type.String(),
    parentId: Type.Union([Uuid('Parent folder'), Type.Null()]),
    path: Type.String({ description: 'Names from the top, joined by /' }),
    createdAt: Timestamp('Creation'),
    updatedAt: Timestamp('Last change'),
    createdBy: Type.String(),
    updatedBy: Type.String(),
  },
  { $id: 'FolderView', title: 'Folder' },
)

const FolderName = Type.String({
  minLength: 1,
  maxLength: 200,
  // No control characters, no unpaired surrogates (http/http-schemas.ts Text), no /.
  pattern: '^[^\\u0000-\\u001f\\u007f\\ud800-\\udfff/]+$',
  [PATTERN_MESSAGE]: 'must not contain /, control characters or an unpaired UTF-16 surrogate',
  description: 'Unique among its siblings; no /',
})

export const CreateFolderBody = Type.Object(
  { name: FolderName, parentId: Type.Optional(Type.Union([Uuid('Parent folder'), Type.Null()])) },
  {
    $id: 'CreateFolderRequest',
    additionalProperties: false,
    examples: [{ name: 'production', parentId: null }],
  },
)
export const UpdateFolderBody = Type.Object(
  {
    name: Type.Optional(FolderName),
    parentId: Type.Optional(
      Type.Union([Uuid('New parent'), Type.Null()], { description: 'null: top level' }),
    ),
  },
  { $id: 'UpdateFolderRequest', additionalProperties: false, minProperties: 1, examples: [{ name: 'prod' }] },
)
export const ListFoldersQuery = Type.Object(
  {
    parentId: Type.Optional(Type.Union([Uuid('Only the children of this folder'), Type.Literal('root')])),
    limit: Type.Integer({ minimum: 1, maximum: 1000, default: 100 }),
    offset: Type.Integer({ minimum: 0, maximum: 1_000_000, default: 0 }),
  },
  { additionalProperties: false },
)
export const FolderListSchema = Type.Object({
  data: Type.Array(FolderSchema),
  total: Type.Integer(),
  limit: Type.Integer(),
  offset: Type.Integer(),
})
nameSchema(FolderListSchema, 'FolderList')

export const MoveSecretsBody = Type.Object(
  {
    secretIds: Type.Array(Uuid('Secret'), { minItems: 1, maxItems: 1000, uniqueItems: true }),
    folderId: Type.Union([Uuid('Destination folder'), Type.Null()], { description: 'null: top level' }),
  },
  {
    $id: 'MoveSecretsRequest',
    additionalProperties: false,
    examples: [{ secretIds: ['3f0c9a8e-5b1d-4c2a-9e7f-1a2b3c4d5e6f'], folderId: null }],
  },
)
