import { Type } from 'typebox'
import { boundedJson, nameSchema, Printable, Text, Timestamp, Uuid } from '../http/http-schemas.ts'
import { AlgorithmSchema, KeyTypeSchema } from './algorithms.ts'
import { KeyRef } from './alias-schemas.ts'
import { IMPORT_FORMATS, PRIVATE_FORMATS, PUBLIC_FORMATS } from './key-material.ts'
import { DELETION_WINDOW_DAYS } from './key-service.ts'
import { KEY_STATES } from './key-state.ts'
import { KEY_SORTS } from './key-store.ts'

const KeyName = Printable(200, 'Unique within the tenant')
const Description = Text(1000, 'Free text')
const Labels = Type.Array(Printable(64, 'A label'), { maxItems: 50, description: 'Tags (a set)' })

const KeyStateSchema = Type.Enum(KEY_STATES, { description: 'Lifecycle state (spec section 3)' })

export const KeyIdParams = Type.Object({ keyId: KeyRef('The key') }, { additionalProperties: false })

export const KeySchema = Type.Object(
  {
    id: Uuid('Key id'),
    name: Type.String(),
    description: Type.String(),
    keyType: KeyTypeSchema,
    algorithm: AlgorithmSchema,
    isPostQuantum: Type.Boolean(),
    isActive: Type.Boolean({ description: 'True when state is Active' }),
    isDefault: Type.Boolean({ description: 'The tenant default key of its type' }),
    isFavorite: Type.Boolean(),
    labels: Type.Array(Type.String()),
    state: KeyStateSchema,
    version: Type.Integer({ description: 'Current version; each rotation adds one' }),
    origin: Type.Enum(['Generated', 'Imported'] as const),
    exportable: Type.Boolean({
      description: 'Whether the private key may be exported (keys:export); fixed at creation or import',
    }),
    publicOnly: Type.Boolean({
      description:
        'Imported without its private key: verify and encrypt work; sign, decrypt, unwrap, private export and rotation answer 409 public_key_only',
    }),
    reservedFor: Type.Union([Type.Enum(['pki', 'ssh'] as const), Type.Null()], {
      description:
        'The certificate authority kind the key signs for, through it alone (/sign answers 409 key_reserved); null: an ordinary key',
    }),
    aliases: Type.Array(Type.String(), {
      description: 'Its aliases (alias/<name>), usable wherever the key id is; in alias order',
    }),
    createdAt: Timestamp('Creation time'),
    updatedAt: Timestamp('Last change of the record'),
    expiresAt: Type.Union([Timestamp('Expiry; null means none'), Type.Null()]),
    lastRotatedAt: Type.Union([Timestamp('Last rotation'), Type.Null()]),
    nextRotationAt: Type.Union([
      Timestamp('When the rotation policy rotates the key next (null: no policy, or paused)'),
      Type.Null(),
    ]),
    scheduledDeletionDate: Type.Union([Timestamp('When the material is destroyed'), Type.Null()]),
  },
  { $id: 'KeyView', title: 'Key' },
)

const keyAttributes = {
  name: KeyName,
  keyType: KeyTypeSchema,
  algorithm: Type.Optional(AlgorithmSchema),
  description: Type.Optional(Description),
  labels: Type.Optional(Labels),
  expiresAt: Type.Optional(Timestamp('Expiry (optional; absent means none)')),
  isDefault: Type.Optional(
    Type.Boolean({
      description: 'Make this the default key of its type (needs encryption:write besides keys:write)',
    }),
  ),
  exportable: Type.Optional(
    Type.Boolean({
      default: false,
      description: 'Allow private-key export (keys:export); cannot be changed later',
    }),
  ),
}

export const CreateKeyBody = Type.Object(keyAttributes, {
  $id: 'CreateKeyRequest',
  additionalProperties: false,
  examples: [
    { name: 'orders-encryption', keyType: 'Encryption', algorithm: 'ML-KEM-768', labels: ['orders', 'prod'] },
  ],
})

const JwkObject = Type.Object(
  { kty: Text(16, 'JWK key type', 1) },
  {
    additionalProperties: true,
    maxProperties: 32,
    // A JWK is flat but for `oth` (RSA primes) and `x5c`: three levels suffice.
    ...boundedJson({ depth: 4, members: 512, chars: 256 * 1024 }),
    description: 'A private JWK (RFC 7517): at most 4 levels deep, 512 keys and items, 262144 characters',
  },
)

export const ImportKeyBody = Type.Object(
  {
    ...keyAttributes,
    format: Type.Enum(IMPORT_FORMATS, { description: 'Format of keyMaterial (spec 2.2)' }),
    keyMaterial: Type.Union([Text(200_000, 'PEM text, or Base64 of DER / raw bytes', 1), JwkObject]),
    password: Type.Optional(Text(1024, 'Password of an encrypted PKCS#8 key', 1)),
    publicOnly: Type.Optional(
      Type.Boolean({
        default: false,
        description:
          'keyMaterial is a public key (PEM "PUBLIC KEY", DER SPKI, a JWK without d, or RAW: the Ed25519, ML-DSA, ML-KEM, SLH-DSA or X-Wing public encoding, an EC SEC 1 point, RSA PKCS#1): the key can verify and encrypt, never sign or decrypt',
      }),
    ),
  },
  {
    $id: 'ImportKeyRequest',
    additionalProperties: false,
    examples: [
      {
        name: 'partner-signing',
        keyType: 'Signing',
        algorithm: 'Ed25519',
        format: 'JWK',
        keyMaterial: {
          kty: 'OKP',
          crv: 'Ed25519',
          d: 'QTXT_xhCAP6KKu6oLNNfbrrugTlMqWSlAEJc-RNXFSw',
          x: 'P-0K8OTBl-n8-uaLEwLseeKA5VaL6NpjFGt4HcmtWAc',
        },
      },
    ],
  },
)

export const UpdateKeyBody = Type.Object(
  {
    name: Type.Optional(KeyName),
    description: Type.Optional(Description),
    labels: Type.Optional(Labels),
    expiresAt: Type.Optional(
      Type.Union([Timestamp('New expiry'), Type.Null()], { description: 'null clears it' }),
    ),
    isDefault: Type.Optional(
      Type.Boolean({ description: 'Changing the default needs encryption:write besides keys:write' }),
    ),
    isFavorite: Type.Optional(Type.Boolean()),
  },
  // exportable is not here: it is fixed when the key is created or imported.
  {
    $id: 'UpdateKeyRequest',
    additionalProperties: false,
    minProperties: 1,
    examples: [{ description: 'Encrypts order exports', labels: ['orders'], isFavorite: true }],
  },
)

const oneOrMany = <T extends ReturnType<typeof Type.String>>(item: T, description: string) =>
  Type.Optional(Type.Array(item, { maxItems: 50, description: `${description} (repeat to select several)` }))

export const ListKeysQuery = Type.Object(
  {
    status: oneOrMany(KeyStateSchema as never, 'Only keys in these states'),
    keyType: oneOrMany(KeyTypeSchema as never, 'Only keys of these types'),
    algorithm: oneOrMany(AlgorithmSchema as never, 'Only keys of these algorithms'),
    label: oneOrMany(Printable(64, 'A label') as never, 'Keys carrying any of these labels'),
    search: Type.Optional(Text(200, 'Case-insensitive text in name or description', 1)),
    favorite: Type.Optional(Type.Boolean({ description: 'Only favourites (true) or only the others' })),
    sort: Type.Enum(KEY_SORTS, {
      default: 'createdAt',
      description: 'Sort column (favourites always first)',
    }),
    order: Type.Enum(['asc', 'desc'] as const, { default: 'desc' }),
    limit: Type.Integer({ minimum: 1, maximum: 1000, default: 50 }),
    cursor: Type.Optional(
      Type.String({
        maxLength: 2048,
        pattern: '^[A-Za-z0-9_-]+$',
        description: 'nextCursor of the previous page',
      }),
    ),
  },
  { additionalProperties: false },
)

export const KeyListSchema = Type.Object(
  {
    data: Type.Array(KeySchema),
    total: Type.Integer({ description: 'Keys matching the filters, counted up to 1,000' }),
    totalIsExact: Type.Boolean({
      description: 'False when more than 1,000 keys match: total is then a lower bound',
    }),
    nextCursor: Type.Union([Type.String(), Type.Null()], { description: 'Pass as cursor for the next page' }),
    alert: Type.Optional(
      Type.Object(
        {
          expiringSoon: Type.Integer({ description: 'Active keys expiring within windowDays' }),
          windowDays: Type.Integer(),
          message: Type.String(),
        },
        { description: 'Present when active keys expire within 30 days' },
      ),
    ),
  },
  { $id: 'KeyList' },
)

export const DeleteKeyQuery = Type.Object(
  {
    pendingWindowDays: Type.Integer({
      minimum: DELETION_WINDOW_DAYS.min,
      maximum: DELETION_WINDOW_DAYS.max,
      default: DELETION_WINDOW_DAYS.default,
      description: 'Days before the material is destroyed; cancel-deletion works until then',
    }),
  },
  { additionalProperties: false },
)

export const KeyVersionsSchema = Type.Object(
  {
    data: Type.Array(
      Type.Object({
        version: Type.Integer(),
        createdAt: Timestamp('When the version was created'),
        state: KeyStateSchema,
        isCurrent: Type.Boolean({ description: 'The version new operations use' }),
      }),
    ),
  },
  { $id: 'KeyVersionList' },
)

export const PUBLIC_INCLUDE_FIELDS = [
  'name',
  'description',
  'keyType',
  'isPostQuantum',
  'isActive',
  'isDefault',
  'isFavorite',
  'createdAt',
  'expiresAt',
  'lastRotatedAt',
  'labels',
  'state',
  'scheduledDeletionDate',
] as const

const PublicFormatSchema = Type.Enum(PUBLIC_FORMATS, { default: 'PEM', description: 'Encoding (spec 2.2)' })
const VersionQuery = Type.Integer({
  minimum: 1,
  maximum: 2_147_483_647,
  description: 'Key version (default: current)',
})

export const PublicKeyQuery = Type.Object(
  {
    format: PublicFormatSchema,
    include: Type.Optional(
      Type.String({
        maxLength: 500,
        pattern: '^[A-Za-z,]*$',
        description: `Comma-separated extra fields: ${PUBLIC_INCLUDE_FIELDS.join(', ')}; metadata or all for every one`,
      }),
    ),
    version: Type.Optional(VersionQuery),
  },
  { additionalProperties: false },
)

export const PublicKeyDownloadQuery = Type.Object(
  { format: PublicFormatSchema, version: Type.Optional(VersionQuery) },
  { additionalProperties: false },
)

const includedFields = Object.fromEntries(
  PUBLIC_INCLUDE_FIELDS.map((field) => [field, Type.Optional(KeySchema.properties[field])]),
)

export const PublicKeySchema = Type.Object(
  {
    publicKey: Type.String({ description: 'PEM text, or Base64 of the DER or RAW bytes' }),
    algorithm: AlgorithmSchema,
    version: Type.Integer(),
    format: Type.Enum(['PEM', 'DER', 'RAW'] as const),
    ...includedFields,
  },
  { $id: 'PublicKeyView', title: 'PublicKey' },
)

export const JwkSchema = Type.Object(
  { kty: Type.String(), kid: Type.String(), use: Type.String() },
  {
    $id: 'PublicJwk',
    additionalProperties: true,
    title: 'JWK',
    description: 'A public JWK (RFC 7517); kty AKP for ML-KEM/ML-DSA/SLH-DSA',
  },
)

export const ExportPrivateBody = Type.Object(
  {
    confirm: Text(200, "The key's name, repeated to confirm the export", 1),
    format: Type.Enum(PRIVATE_FORMATS, { default: 'PEM', description: 'PEM and DER are PKCS#8' }),
    password: Type.Optional(
      Text(
        1024,
        'Encrypts the PKCS#8 output (PEM and DER): PBES2, PBKDF2-HMAC-SHA256 with 600,000 iterations, AES-256-CBC. At least 12 characters',
        12,
      ),
    ),
    version: Type.Optional(VersionQuery),
  },
  {
    $id: 'ExportPrivateKeyRequest',
    additionalProperties: false,
    examples: [{ confirm: 'partner-signing', format: 'PEM', password: 'correct-horse-battery-staple' }],
  },
)

export const PrivateKeySchema = Type.Object({
  keyId: Uuid('Key id'),
  algorithm: AlgorithmSchema,
  version: Type.Integer(),
  format: Type.Enum(PRIVATE_FORMATS),
  encrypted: Type.Boolean({ description: 'True when the PKCS#8 output is password-protected' }),
  privateKey: Type.Union([Type.String(), Type.Object({}, { additionalProperties: true })]),
})
nameSchema(PrivateKeySchema, 'PrivateKeyExport')
