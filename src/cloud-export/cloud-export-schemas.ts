import { Type } from 'typebox'
import { boundedJson, nameSchema, Printable, Timestamp, Uuid } from '../http/http-schemas.ts'
import { KeyRef } from '../keys/alias-schemas.ts'
import { CLOUD_PROVIDERS } from './provider.ts'

const Provider = Type.Enum(CLOUD_PROVIDERS, { description: 'The cloud KMS: aws, azure, gcp or scaleway' })

/**
 * A provider's flat fields (docs/cloud-export.md lists each provider's): names to strings,
 * numbers or booleans, at most 20, so no caller chooses a depth or a size.
 */
const Fields = (description: string) =>
  Type.Record(
    Type.String({ minLength: 1, maxLength: 64, pattern: '^[A-Za-z][A-Za-z0-9_]*$' }),
    Type.Union([Type.String({ maxLength: 16_384 }), Type.Number(), Type.Boolean()]),
    // Flat by its schema; the bound says so to the validator too (depth 1 values, 20 members).
    { maxProperties: 20, description, ...boundedJson({ depth: 2, members: 20, chars: 20 * 16_448 }) },
  )

export const ConnectionSchema = Type.Object(
  {
    id: Type.String(),
    name: Type.String(),
    provider: Provider,
    settings: Type.Record(Type.String(), Type.Unknown(), {
      description: 'The non-secret fields as stored; credentials are never returned',
    }),
    createdAt: Timestamp('Created'),
    updatedAt: Timestamp('Last changed'),
    credentialsUpdatedAt: Timestamp('When the credentials were last set'),
  },
  { additionalProperties: false },
)
nameSchema(ConnectionSchema, 'CloudConnection')

export const ConnectionListSchema = Type.Object(
  { data: Type.Array(ConnectionSchema), total: Type.Integer() },
  { additionalProperties: false },
)
nameSchema(ConnectionListSchema, 'CloudConnectionList')

export const CreateConnectionBody = Type.Object(
  {
    name: Printable(100, 'A name for people, unique in the tenant'),
    provider: Provider,
    settings: Fields('Non-secret fields: region, ids, endpoint, caCertificate (docs/cloud-export.md)'),
    credentials: Fields('Secret fields: sealed by the tenant KEK, never returned'),
  },
  {
    additionalProperties: false,
    examples: [
      {
        name: 'production AWS',
        provider: 'aws',
        settings: { region: 'eu-west-1' },
        credentials: {
          accessKeyId: 'AKIAEXAMPLEEXAMPLE12',
          secretAccessKey: 'example-secret-access-key-000000000000000',
        },
      },
    ],
  },
)
nameSchema(CreateConnectionBody, 'CreateCloudConnection')

export const RotateCredentialsBody = Type.Object(
  { credentials: Fields('The new secret fields') },
  {
    additionalProperties: false,
    examples: [
      {
        credentials: {
          accessKeyId: 'AKIAEXAMPLEEXAMPLE34',
          secretAccessKey: 'example-rotated-secret-access-key-0000000',
        },
      },
    ],
  },
)
nameSchema(RotateCredentialsBody, 'RotateCloudCredentials')

export const ConnectionTestSchema = Type.Object(
  {
    status: Type.Enum(['ok', 'failed']),
    error: Type.Union([
      Type.Object({ code: Type.String(), message: Type.String() }, { additionalProperties: false }),
      Type.Null(),
    ]),
  },
  { additionalProperties: false },
)
nameSchema(ConnectionTestSchema, 'CloudConnectionTest')

export const ExportSchema = Type.Object(
  {
    id: Type.String(),
    keyId: Type.String(),
    connectionId: Type.String(),
    provider: Provider,
    target: Type.Record(Type.String(), Type.Unknown(), { description: 'Where the key goes at the provider' }),
    syncStatus: Type.Enum(['pending', 'synced', 'failed'], {
      description:
        'pending: a push is due or retrying; synced: desiredVersion is at the cloud; failed: retries ran out or the cloud refused',
    }),
    desiredVersion: Type.Integer({ description: 'The key version that should be at the cloud' }),
    attempts: Type.Integer({ description: 'Attempts of the current sync' }),
    nextAttemptAt: Type.Union([Timestamp('When the next attempt is due'), Type.Null()]),
    lastAttemptAt: Type.Union([Timestamp('The last attempt'), Type.Null()]),
    lastSyncAt: Type.Union([Timestamp('The last successful push'), Type.Null()]),
    lastSyncVersion: Type.Union([Type.Integer(), Type.Null()]),
    lastSyncError: Type.Union([
      Type.Object({ code: Type.String(), message: Type.String() }, { additionalProperties: false }),
      Type.Null(),
    ]),
    providerKeyId: Type.Union([
      Type.String({
        description:
          'What holds the key at the cloud (AWS key ARN, Azure key id, GCP key version, Scaleway key id)',
      }),
      Type.Null(),
    ]),
    createdAt: Timestamp('Created'),
  },
  { additionalProperties: false },
)
nameSchema(ExportSchema, 'CloudExport')

export const ExportListSchema = Type.Object(
  { data: Type.Array(ExportSchema), total: Type.Integer() },
  { additionalProperties: false },
)
nameSchema(ExportListSchema, 'CloudExportList')

export const CreateExportBody = Type.Object(
  {
    connectionId: Uuid('The cloud connection'),
    target: Fields(
      'Where at the provider (docs/cloud-export.md): e.g. AWS alias, Azure vaultUrl and keyName',
    ),
  },
  {
    additionalProperties: false,
    examples: [
      { connectionId: '0b6f3c1e-2f4a-4c69-9d1e-6f0d2a9b7c11', target: { alias: 'alias/payments-signing' } },
    ],
  },
)
nameSchema(CreateExportBody, 'CreateCloudExport')

export const KeyExportParams = Type.Object(
  { keyId: KeyRef('The key'), exportId: Uuid('The cloud export') },
  { additionalProperties: false },
)
export const KeyParams = Type.Object({ keyId: KeyRef('The key') }, { additionalProperties: false })
