import {
  constants,
  createCipheriv,
  createPublicKey,
  type KeyObject,
  publicEncrypt,
  randomBytes,
} from 'node:crypto'
import {
  AlreadyExistsException,
  CreateAliasCommand,
  CreateKeyCommand,
  GetParametersForImportCommand,
  ImportKeyMaterialCommand,
  type KeySpec,
  type KeyUsageType,
  type KMSClient,
  ListAliasesCommand,
  NotFoundException,
  ScheduleKeyDeletionCommand,
  UpdateAliasCommand,
} from '@aws-sdk/client-kms'
import type { AlgorithmName } from '../../keys/algorithms.ts'
import { isLoopbackHost } from '../../platform/urls.ts'
import { onOfficialHost } from '../custom-endpoints.ts'
import {
  CloudFieldError,
  type CloudProviderAdapter,
  CloudProviderError,
  type ConnectionContext,
  type ExportMaterial,
  type PushResult,
} from '../provider.ts'
import { type AwsConnection, callAws, createKmsClient, toCloudProviderError } from './aws-transport.ts'

/**
 * AWS KMS (docs/cloud-export.md). A key version becomes an AWS KMS key with imported material
 * ("BYOK", Origin EXTERNAL), reached by the export's alias. AWS cannot give an imported
 * asymmetric key new material, so every version is a new AWS key and a rotation moves the alias.
 *
 * IAM permissions the tenant's credentials need: kms:ListAliases (connection test),
 * kms:CreateKey, kms:GetParametersForImport, kms:ImportKeyMaterial, kms:CreateAlias and
 * kms:UpdateAlias (on the alias and on the keys); kms:ScheduleKeyDeletion lets a failed push
 * remove the half-made key it leaves (see `abandon`), and is optional.
 */

interface AwsSettings {
  region: string
  endpoint?: string
}

interface AwsCredentials {
  accessKeyId: string
  secretAccessKey: string
  sessionToken?: string
}

interface AwsTarget {
  alias: string
  description?: string
}

/** What a push leaves for the next one (PushResult.state). */
interface AwsPushState {
  keyId: string
  alias: string
  version: number
}

/** us-east-1, eu-central-2, us-gov-west-1, cn-north-1, us-isob-east-1, eusc-de-east-1 ... */
const REGION = /^[a-z]{2,4}(-[a-z]{2,10}){1,3}-\d{1,2}$/
/** AWS's access key id: IAM documents 16 to 128 word characters. */
const ACCESS_KEY_ID = /^\w{16,128}$/
/** Printable ASCII without spaces: what AWS secrets and session tokens are made of. */
const PRINTABLE = /^[\x21-\x7e]+$/
/** AWS's alias rule: `alias/` then letters, digits, `/`, `_` and `-`, 256 characters in all. */
const ALIAS = /^alias\/[A-Za-z0-9/_-]{1,250}$/
const MAX_ENDPOINT = 2048
const MAX_SECRET = 256
const MAX_SESSION_TOKEN = 8192
const MAX_DESCRIPTION = 1024

const SETTINGS_FIELDS = ['region', 'endpoint']
const CREDENTIAL_FIELDS = ['accessKeyId', 'secretAccessKey', 'sessionToken']
const TARGET_FIELDS = ['alias', 'description']

/** Spec 2.2, AWS-type KMS: RSA-2048 and larger, ECDSA, Ed25519. */
const KEY_SPECS = {
  'RSA-2048': 'RSA_2048',
  'RSA-3072': 'RSA_3072',
  'RSA-4096': 'RSA_4096',
  'EC-P256': 'ECC_NIST_P256',
  'EC-P384': 'ECC_NIST_P384',
  'EC-P521': 'ECC_NIST_P521',
  Ed25519: 'ECC_NIST_EDWARDS25519',
} as const satisfies Partial<Record<AlgorithmName, KeySpec>>
type SupportedAlgorithm = keyof typeof KEY_SPECS

/** How node:crypto describes a private key of each supported algorithm (checked before any AWS call). */
const NODE_SHAPES: Record<SupportedAlgorithm, { type: string; bits?: number; curve?: string }> = {
  'RSA-2048': { type: 'rsa', bits: 2048 },
  'RSA-3072': { type: 'rsa', bits: 3072 },
  'RSA-4096': { type: 'rsa', bits: 4096 },
  'EC-P256': { type: 'ec', curve: 'prime256v1' },
  'EC-P384': { type: 'ec', curve: 'secp384r1' },
  'EC-P521': { type: 'ec', curve: 'secp521r1' },
  Ed25519: { type: 'ed25519' },
}

/** RFC 5649's alternative initial value, the 4 bytes node:crypto takes for AES key wrap with padding. */
const KWP_IV = Buffer.from('A65959A6', 'hex')
const WRAPPING_KEY_BITS = 4096

export const awsProvider: CloudProviderAdapter = {
  provider: 'aws',
  supportedAlgorithms: Object.keys(KEY_SPECS) as SupportedAlgorithm[],

  parseSettings(input) {
    refuseUnknownFields('settings', 'AWS connection settings', input, SETTINGS_FIELDS)
    return { ...readSettings(input) }
  },

  parseCredentials(input) {
    refuseUnknownFields('credentials', 'AWS credentials', input, CREDENTIAL_FIELDS)
    return { ...readCredentials(input) }
  },

  parseTarget(input) {
    refuseUnknownFields('target', 'an AWS export target', input, TARGET_FIELDS)
    return { ...readTarget(input) }
  },

  endpoints(part, fields) {
    const { endpoint, region } = fields
    if (part !== 'settings' || typeof endpoint !== 'string') return []
    const official =
      typeof region === 'string' && onOfficialHost(endpoint, (host) => kmsHosts(region).includes(host))
    return [{ field: 'settings.endpoint', url: endpoint, official }]
  },

  async testConnection(connection) {
    await withKms(connection, async (kms, secrets) => {
      await callAws('ListAliases', secrets, () => kms.send(new ListAliasesCommand({ Limit: 1 })))
    })
  },

  async push(connection, target, material, previous) {
    const algorithm = supportedAlgorithm(material)
    const { alias, description } = stored(() => readTarget(target))
    const keyUsage = keyUsageOf(algorithm, material)
    checkMaterial(algorithm, material.privateKey)
    return withKms(connection, async (kms, secrets) => {
      const created = await callAws('CreateKey', secrets, () =>
        kms.send(
          new CreateKeyCommand({
            Origin: 'EXTERNAL',
            KeySpec: KEY_SPECS[algorithm],
            KeyUsage: keyUsage,
            Description: describeKey(material, description),
          }),
        ),
      )
      const keyId = created.KeyMetadata?.KeyId
      const arn = created.KeyMetadata?.Arn
      if (!keyId || !arn)
        throw new CloudProviderError(
          'cloud_unexpected_response',
          'AWS KMS CreateKey returned no key id',
          true,
        )
      try {
        await importMaterial(kms, secrets, keyId, material.privateKey)
      } catch (error) {
        await abandon(kms, keyId)
        throw error
      }
      try {
        await pointAlias(kms, secrets, alias, keyId, previousAlias(previous) === alias)
      } catch (error) {
        // Nothing points at the new key: it would stay behind holding the private key, and each
        // retry would make another one.
        await abandon(kms, keyId)
        throw error
      }
      // The keys of earlier versions are left as they are, enabled: workloads may still verify
      // signatures or decrypt with them. Retiring them is the tenant's decision, made at AWS.
      const state: AwsPushState = { keyId, alias, version: material.version }
      return { providerKeyId: arn, state: { ...state } }
    })
  },
}

/** A KMS client for one call of the adapter, its connection's secrets (to strike from messages). */
async function withKms<T>(
  connection: ConnectionContext,
  use: (kms: KMSClient, secrets: readonly string[]) => Promise<T>,
): Promise<T> {
  const settings = stored(() => readSettings(connection.settings))
  const credentials = stored(() => readCredentials(connection.credentials))
  const aws: AwsConnection = {
    region: settings.region,
    endpoint: settings.endpoint,
    accessKeyId: credentials.accessKeyId,
    secretAccessKey: credentials.secretAccessKey,
    sessionToken: credentials.sessionToken,
  }
  const secrets = [credentials.accessKeyId, credentials.secretAccessKey, credentials.sessionToken ?? '']
  const kms = createKmsClient(aws, connection.outbound, connection.timeoutMs)
  try {
    return await use(kms, secrets)
  } finally {
    kms.destroy()
  }
}

/**
 * Reads a stored connection or target. They were validated when saved, so a refusal here means
 * the stored value no longer fits (a rule changed): retrying cannot help, editing it can.
 */
function stored<T>(read: () => T): T {
  try {
    return read()
  } catch (error) {
    if (error instanceof CloudFieldError)
      throw new CloudProviderError('cloud_configuration_invalid', error.message, false)
    throw error
  }
}

/** Steps b to d of AWS's import: parameters, wrapping, import. */
async function importMaterial(
  kms: KMSClient,
  secrets: readonly string[],
  keyId: string,
  privateKey: KeyObject,
) {
  const parameters = await callAws('GetParametersForImport', secrets, () =>
    kms.send(
      new GetParametersForImportCommand({
        KeyId: keyId,
        WrappingAlgorithm: 'RSA_AES_KEY_WRAP_SHA_256',
        WrappingKeySpec: 'RSA_4096',
      }),
    ),
  )
  if (!parameters.PublicKey || !parameters.ImportToken)
    throw new CloudProviderError(
      'cloud_unexpected_response',
      'AWS KMS GetParametersForImport returned no wrapping key',
      true,
    )
  const encryptedKeyMaterial = wrapKeyMaterial(privateKey, parameters.PublicKey)
  const importToken = parameters.ImportToken
  await callAws('ImportKeyMaterial', secrets, () =>
    kms.send(
      new ImportKeyMaterialCommand({
        KeyId: keyId,
        ImportToken: importToken,
        EncryptedKeyMaterial: encryptedKeyMaterial,
        ExpirationModel: 'KEY_MATERIAL_DOES_NOT_EXPIRE',
      }),
    ),
  )
}

/**
 * RSA_AES_KEY_WRAP_SHA_256 as AWS specifies it: the PKCS#8 DER of the private key wrapped with
 * AES key wrap with padding (RFC 5649) under a fresh AES-256 key, that key encrypted with
 * RSA-OAEP (SHA-256, MGF1-SHA-256) under AWS's wrapping key; the result is the encrypted AES key
 * followed by the wrapped material. The AES key and the DER are zeroed once used.
 */
function wrapKeyMaterial(privateKey: KeyObject, wrappingPublicKeyDer: Uint8Array): Buffer {
  const wrappingKey = readWrappingKey(wrappingPublicKeyDer)
  const aesKey = randomBytes(32)
  const pkcs8 = privateKey.export({ format: 'der', type: 'pkcs8' })
  try {
    const cipher = createCipheriv('id-aes256-wrap-pad', aesKey, KWP_IV)
    const wrapped = Buffer.concat([cipher.update(pkcs8), cipher.final()])
    const encryptedAesKey = publicEncrypt(
      { key: wrappingKey, padding: constants.RSA_PKCS1_OAEP_PADDING, oaepHash: 'sha256' },
      aesKey,
    )
    return Buffer.concat([encryptedAesKey, wrapped])
  } finally {
    aesKey.fill(0)
    pkcs8.fill(0)
  }
}

/** AWS's wrapping key, which must be the RSA-4096 key asked for: the import is sized by it. */
function readWrappingKey(der: Uint8Array): KeyObject {
  let key: KeyObject
  try {
    key = createPublicKey({ key: Buffer.from(der), format: 'der', type: 'spki' })
  } catch {
    throw new CloudProviderError(
      'cloud_unexpected_response',
      'AWS KMS returned a wrapping key that cannot be read',
      true,
    )
  }
  if (key.asymmetricKeyType !== 'rsa' || key.asymmetricKeyDetails?.modulusLength !== WRAPPING_KEY_BITS)
    throw new CloudProviderError(
      'cloud_unexpected_response',
      'AWS KMS returned a wrapping key that is not RSA-4096',
      true,
    )
  return key
}

/**
 * Makes `alias` name the new key. `likelyExists` (the last push used this alias) picks the call
 * tried first; the other follows when AWS says the alias is, or is not, there, so a first push
 * onto an existing alias and a rotation whose alias was deleted meanwhile both end well.
 */
async function pointAlias(
  kms: KMSClient,
  secrets: readonly string[],
  alias: string,
  keyId: string,
  likelyExists: boolean,
) {
  const input = { AliasName: alias, TargetKeyId: keyId }
  const create = () => kms.send(new CreateAliasCommand(input))
  const update = () => kms.send(new UpdateAliasCommand(input))
  const [first, second, firstName, secondName, fallBackOn] = likelyExists
    ? ([update, create, 'UpdateAlias', 'CreateAlias', NotFoundException] as const)
    : ([create, update, 'CreateAlias', 'UpdateAlias', AlreadyExistsException] as const)
  try {
    await first()
  } catch (error) {
    if (!(error instanceof fallBackOn)) throw toCloudProviderError(firstName, error, secrets)
    await callAws(secondName, secrets, second)
  }
}

/**
 * A push that failed before the alias moved leaves a key no one uses: nothing names it and, had
 * its material arrived after all, no workload knows it. It is scheduled for deletion (7 days,
 * AWS's minimum) so retries do not pile up keys. Best effort: during an outage this fails too,
 * and the credentials may lack kms:ScheduleKeyDeletion; the push's own error is what counts.
 */
async function abandon(kms: KMSClient, keyId: string) {
  try {
    await kms.send(new ScheduleKeyDeletionCommand({ KeyId: keyId, PendingWindowInDays: 7 }))
  } catch {
    // See above: the push's error is reported, not this one.
  }
}

function supportedAlgorithm(material: ExportMaterial): SupportedAlgorithm {
  if (!Object.hasOwn(KEY_SPECS, material.algorithm))
    throw new CloudProviderError(
      'cloud_algorithm_unsupported',
      `AWS KMS cannot import ${material.algorithm} keys`,
      false,
    )
  return material.algorithm as SupportedAlgorithm
}

function keyUsageOf(algorithm: SupportedAlgorithm, material: ExportMaterial): KeyUsageType {
  if (material.keyType === 'Signing') return 'SIGN_VERIFY'
  if (material.keyType === 'Encryption' && algorithm.startsWith('RSA-')) return 'ENCRYPT_DECRYPT'
  throw new CloudProviderError(
    'cloud_algorithm_unsupported',
    `AWS KMS cannot import ${algorithm} keys for ${material.keyType}`,
    false,
  )
}

/** Refuses material that does not match its algorithm here, before a key is made at AWS for it. */
function checkMaterial(algorithm: SupportedAlgorithm, privateKey: KeyObject) {
  const shape = NODE_SHAPES[algorithm]
  const details = privateKey.asymmetricKeyDetails
  const matches =
    privateKey.type === 'private' &&
    privateKey.asymmetricKeyType === shape.type &&
    (shape.bits === undefined || details?.modulusLength === shape.bits) &&
    (shape.curve === undefined || details?.namedCurve === shape.curve)
  if (!matches)
    throw new CloudProviderError(
      'cloud_import_refused',
      `The key material is not a ${algorithm} private key`,
      false,
    )
}

function describeKey(material: ExportMaterial, description: string | undefined): string {
  const origin = `key ${material.keyId} version ${material.version}, imported by kms-service`
  return description === undefined ? origin : `${description} (${origin})`
}

/** The alias the last push moved, if it recorded one. */
function previousAlias(previous: PushResult | null): string | undefined {
  const alias = previous?.state['alias']
  return typeof alias === 'string' ? alias : undefined
}

// Field validation. `read*` checks the known fields (and ignores others: stored settings carry
// the service's own `caCertificate`); `parse*` also refuses fields AWS connections do not have,
// so a secret put among the settings by mistake is refused rather than stored in the clear.

function readSettings(input: Record<string, unknown>): AwsSettings {
  const region = input['region']
  if (typeof region !== 'string' || region.length > 32 || !REGION.test(region))
    throw new CloudFieldError('settings.region', 'must be an AWS region such as eu-west-1')
  const endpoint = input['endpoint']
  if (endpoint === undefined) return { region }
  return { region, endpoint: readEndpoint(endpoint) }
}

/**
 * AWS KMS's own hosts in a region: the standard and FIPS endpoints, in the aws and aws-cn
 * partitions and under the dual-stack domain. A VPC endpoint's or another partition's name is
 * custom (the operator allows it).
 */
function kmsHosts(region: string): string[] {
  return [
    `kms.${region}.amazonaws.com`,
    `kms-fips.${region}.amazonaws.com`,
    `kms.${region}.amazonaws.com.cn`,
    `kms.${region}.api.aws`,
    `kms-fips.${region}.api.aws`,
  ]
}

function readEndpoint(value: unknown): string {
  const refuse = () =>
    new CloudFieldError(
      'settings.endpoint',
      'must be an absolute https URL (http only on loopback) without credentials, query or fragment',
    )
  if (typeof value !== 'string' || value.length > MAX_ENDPOINT) throw refuse()
  let url: URL
  try {
    url = new URL(value)
  } catch {
    throw refuse()
  }
  // Plain http only to this machine: on a network, whoever answers GetParametersForImport would
  // choose the key the private key is wrapped to (and see the session token).
  if (
    (url.protocol !== 'https:' && !(url.protocol === 'http:' && isLoopbackHost(url.hostname))) ||
    url.username !== '' ||
    url.password !== '' ||
    url.search !== '' ||
    url.hash !== '' ||
    value.includes('?') ||
    value.includes('#')
  )
    throw refuse()
  return url.href
}

function readCredentials(input: Record<string, unknown>): AwsCredentials {
  const { accessKeyId, secretAccessKey, sessionToken } = input
  if (typeof accessKeyId !== 'string' || !ACCESS_KEY_ID.test(accessKeyId))
    throw new CloudFieldError(
      'credentials.accessKeyId',
      'must be an AWS access key id (16 to 128 letters and digits)',
    )
  if (
    typeof secretAccessKey !== 'string' ||
    secretAccessKey.length > MAX_SECRET ||
    !PRINTABLE.test(secretAccessKey)
  )
    throw new CloudFieldError(
      'credentials.secretAccessKey',
      `must be an AWS secret access key (1 to ${MAX_SECRET} printable characters, no spaces)`,
    )
  if (sessionToken === undefined) return { accessKeyId, secretAccessKey }
  if (
    typeof sessionToken !== 'string' ||
    sessionToken.length > MAX_SESSION_TOKEN ||
    !PRINTABLE.test(sessionToken)
  )
    throw new CloudFieldError(
      'credentials.sessionToken',
      `must be an AWS session token (1 to ${MAX_SESSION_TOKEN} printable characters, no spaces)`,
    )
  return { accessKeyId, secretAccessKey, sessionToken }
}

function readTarget(input: Record<string, unknown>): AwsTarget {
  const { alias, description } = input
  if (typeof alias !== 'string' || !ALIAS.test(alias))
    throw new CloudFieldError(
      'target.alias',
      'must be alias/ followed by up to 250 letters, digits, slashes, underscores or dashes',
    )
  // AWS keeps alias/aws/ for the keys it manages itself.
  if (alias.toLowerCase().startsWith('alias/aws/'))
    throw new CloudFieldError('target.alias', 'must not begin with alias/aws/, which AWS reserves')
  if (description === undefined) return { alias }
  if (typeof description !== 'string' || description.length > MAX_DESCRIPTION)
    throw new CloudFieldError(
      'target.description',
      `must be a string of at most ${MAX_DESCRIPTION} characters`,
    )
  return { alias, description }
}

function refuseUnknownFields(
  kind: string,
  what: string,
  input: Record<string, unknown>,
  known: readonly string[],
) {
  for (const name of Object.keys(input)) {
    if (known.includes(name)) continue
    // A field's name is echoed only when it looks like one (a pasted secret is not repeated).
    const shown = /^[A-Za-z][A-Za-z0-9_]{0,39}$/.test(name) ? `${kind}.${name}` : kind
    throw new CloudFieldError(shown, `is not a field of ${what} (known: ${known.join(', ')})`)
  }
}
