import { type KeyObject, X509Certificate } from 'node:crypto'
import { Errors } from '@scaleway/sdk-client'
import type {
  Key,
  KeyAlgorithmAsymmetricEncryption,
  KeyAlgorithmAsymmetricSigning,
  API as KeyManagerApi,
  KeyUsage,
} from '@scaleway/sdk-key-manager/v1alpha1'
import type { AlgorithmName } from '../../keys/algorithms.ts'
import { OutboundError } from '../../outbound/outbound-client.ts'
import { onOfficialHost } from '../custom-endpoints.ts'
import {
  CloudFieldError,
  type CloudProviderAdapter,
  CloudProviderError,
  type ConnectionContext,
  checkHeldKey,
  cloudErrorOfOutbound,
  type ExportMaterial,
  type PushResult,
} from '../provider.ts'
import { createKeyManagerApi, type ScalewayConnection } from './scaleway-transport.ts'

/**
 * Scaleway Key Manager (API v1alpha1, through @scaleway/sdk-key-manager).
 *
 * Import: a key is created with `origin: 'external'` and the usage matching the algorithm (it
 * waits in state `pending_key_material`), then `importKeyMaterial` gives it the private key,
 * base64 of its PKCS#8 DER (the API's `bytes` fields travel as base64 in JSON). No salt is sent:
 * the SDK documents it as strengthening low-entropy material for key derivation, and a private
 * key must be taken as it is.
 *
 * Rotation: a new Scaleway key per version. The API offers no way to import a second material
 * into an external key: `rotateKey` has Scaleway generate the new material itself (no export
 * then), and `deleteKeyMaterial` + a new import would destroy the previous version (its
 * signatures would stop verifying) and leave a window with no usable key. So each version gets
 * its own key, found again by its tags when a push is retried; the previous key stays enabled
 * and the push result names both.
 */

// Spec 2.2 ("Scaleway-type KMS: RSA-2048 and larger, ECDSA, Ed25519") decides what the service
// offers. The SDK this was written against (1.5.0) lists no P-521 and no Ed25519 usage: those
// are sent under the API's naming pattern, and a Scaleway that refuses them answers 400, which
// is recorded as cloud_import_refused like any other refused import.
const SIGNING: Partial<Record<AlgorithmName, string>> = {
  'RSA-2048': 'rsa_pss_2048_sha256',
  'RSA-3072': 'rsa_pss_3072_sha256',
  'RSA-4096': 'rsa_pss_4096_sha256',
  'EC-P256': 'ec_p256_sha256',
  'EC-P384': 'ec_p384_sha384',
  'EC-P521': 'ec_p521_sha512',
  Ed25519: 'ed25519',
}
const ENCRYPTION: Partial<Record<AlgorithmName, string>> = {
  'RSA-2048': 'rsa_oaep_2048_sha256',
  'RSA-3072': 'rsa_oaep_3072_sha256',
  'RSA-4096': 'rsa_oaep_4096_sha256',
}

const REGION = /^[a-z]{2}-[a-z]{3}$/
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i
// The SDK's own patterns: it refuses anything else, quoting the value (the secret too).
const ACCESS_KEY = /^SCW[A-Z0-9]{17}$/i
const KEY_NAME = /^[A-Za-z0-9][A-Za-z0-9 ._-]{0,99}$/
const DEFAULT_API_URL = 'https://api.scaleway.com'
const MAX_DESCRIPTION = 255
const MAX_CA_PEM = 16 * 1024
const LOOPBACK_HOSTS = new Set(['localhost', '[::1]'])

export const scalewayProvider: CloudProviderAdapter = {
  provider: 'scaleway',
  supportedAlgorithms: ['RSA-2048', 'RSA-3072', 'RSA-4096', 'EC-P256', 'EC-P384', 'EC-P521', 'Ed25519'],
  parseSettings,
  parseCredentials,
  parseTarget,
  endpoints(part, fields) {
    const { apiUrl } = fields
    if (part !== 'settings' || typeof apiUrl !== 'string') return []
    // The default is stored with the settings: only another origin is custom.
    const official = onOfficialHost(apiUrl, (host) => host === new URL(DEFAULT_API_URL).hostname)
    return [{ field: 'settings.apiUrl', url: apiUrl, official }]
  },
  async testConnection(connection) {
    const scaleway = scalewayConnection(connection)
    const api = createKeyManagerApi(connection, scaleway)
    await call('test', () =>
      api.listKeys({
        region: scaleway.region,
        projectId: scaleway.projectId,
        pageSize: 1,
        scheduledForDeletion: false,
      }),
    )
  },
  push,
}

// ---------------------------------------------------------------------------------------------
// Fields

function parseSettings(input: Record<string, unknown>): Record<string, unknown> {
  refuseUnknown('settings', input, ['region', 'projectId', 'apiUrl', 'caCertificate'])
  const region = requireString('settings.region', input.region)
  if (!REGION.test(region)) {
    throw new CloudFieldError('settings.region', 'must be a Scaleway region such as fr-par, nl-ams or pl-waw')
  }
  const projectId = requireString('settings.projectId', input.projectId)
  if (!UUID.test(projectId))
    throw new CloudFieldError('settings.projectId', 'must be a Scaleway project id (a UUID)')
  const caCertificate = parseCaCertificate(input.caCertificate)
  return {
    region,
    projectId: projectId.toLowerCase(),
    apiUrl: parseApiUrl(input.apiUrl),
    ...(caCertificate ? { caCertificate } : {}),
  }
}

/** An origin only (the SDK appends the API paths); plain http only to this machine. */
function parseApiUrl(value: unknown): string {
  if (value === undefined || value === null || value === '') return DEFAULT_API_URL
  const text = requireString('settings.apiUrl', value)
  let url: URL
  try {
    url = new URL(text)
  } catch {
    throw new CloudFieldError('settings.apiUrl', 'must be an absolute URL')
  }
  const loopback = LOOPBACK_HOSTS.has(url.hostname) || /^127\.\d+\.\d+\.\d+$/.test(url.hostname)
  // The secret key travels in a header: over plain http it would cross the network readable.
  if (url.protocol !== 'https:' && !(url.protocol === 'http:' && loopback)) {
    throw new CloudFieldError('settings.apiUrl', 'must be an https URL')
  }
  if (url.username || url.password || url.search || url.hash || url.pathname !== '/' || text.length > 2048) {
    throw new CloudFieldError('settings.apiUrl', 'must be a bare origin such as https://api.scaleway.com')
  }
  return url.origin
}

function parseCaCertificate(value: unknown): string | undefined {
  if (value === undefined || value === null || value === '') return undefined
  const pem = requireString('settings.caCertificate', value)
  try {
    if (pem.length > MAX_CA_PEM) throw new Error('too long')
    new X509Certificate(pem)
  } catch {
    throw new CloudFieldError('settings.caCertificate', 'must be one PEM certificate')
  }
  return pem
}

function parseCredentials(input: Record<string, unknown>): Record<string, unknown> {
  refuseUnknown('credentials', input, ['accessKey', 'secretKey'])
  // Messages never quote what was given: these fields are secrets, or sit next to them.
  const accessKey = requireString('credentials.accessKey', input.accessKey)
  if (!ACCESS_KEY.test(accessKey)) {
    throw new CloudFieldError(
      'credentials.accessKey',
      'must be a Scaleway access key (SCW and 17 letters or digits)',
    )
  }
  const secretKey = requireString('credentials.secretKey', input.secretKey)
  if (!UUID.test(secretKey))
    throw new CloudFieldError('credentials.secretKey', 'must be a Scaleway secret key (a UUID)')
  return { accessKey, secretKey }
}

function parseTarget(input: Record<string, unknown>): Record<string, unknown> {
  refuseUnknown('target', input, ['keyName', 'description'])
  const keyName = requireString('target.keyName', input.keyName)
  if (!KEY_NAME.test(keyName)) {
    throw new CloudFieldError(
      'target.keyName',
      'must be 1 to 100 letters, digits, spaces, dots, dashes or underscores, starting with a letter or digit',
    )
  }
  if (input.description === undefined || input.description === null) return { keyName }
  const description = requireString('target.description', input.description)
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what is refused
  if (description.length > MAX_DESCRIPTION || /[\u0000-\u001f\u007f]/.test(description)) {
    throw new CloudFieldError(
      'target.description',
      `must be at most ${MAX_DESCRIPTION} characters on one line`,
    )
  }
  return { keyName, description }
}

function refuseUnknown(scope: string, input: Record<string, unknown>, known: readonly string[]): void {
  // A secret put in the wrong place would otherwise be stored unsealed with the settings.
  for (const name of Object.keys(input)) {
    if (!known.includes(name)) throw new CloudFieldError(`${scope}.${name}`, 'is not a Scaleway field')
  }
}

function requireString(field: string, value: unknown): string {
  if (typeof value !== 'string' || value === '') throw new CloudFieldError(field, 'is required')
  return value
}

/** The connection as parseSettings / parseCredentials left it. */
function scalewayConnection(connection: ConnectionContext): ScalewayConnection {
  const { settings, credentials } = connection
  const fields = {
    region: settings.region,
    projectId: settings.projectId,
    apiUrl: settings.apiUrl ?? DEFAULT_API_URL,
    accessKey: credentials.accessKey,
    secretKey: credentials.secretKey,
  }
  if (!Object.values(fields).every((v) => typeof v === 'string')) {
    throw new CloudProviderError(
      'cloud_configuration_invalid',
      'the Scaleway connection is incomplete',
      false,
    )
  }
  const caCertificate = typeof settings.caCertificate === 'string' ? settings.caCertificate : undefined
  return {
    ...(fields as Omit<ScalewayConnection, 'caCertificate'>),
    ...(caCertificate ? { caCertificate } : {}),
  }
}

// ---------------------------------------------------------------------------------------------
// Push

async function push(
  connection: ConnectionContext,
  target: Record<string, unknown>,
  material: ExportMaterial,
  previous: PushResult | null,
): Promise<PushResult> {
  const usage = usageFor(material)
  const scaleway = scalewayConnection(connection)
  const api = createKeyManagerApi(connection, scaleway)
  const keyName = String(target.keyName)
  const tags = versionTags(material)

  // A retry (after a lost answer, or a failure between create and import) finds the key it made.
  let key =
    (await findVersionKey(api, scaleway, keyName, tags, usage)) ??
    (await call('create', () =>
      api.createKey({
        region: scaleway.region,
        projectId: scaleway.projectId,
        name: keyName,
        description:
          typeof target.description === 'string'
            ? target.description
            : `Key ${material.keyId} version ${material.version}, exported by the key management service`,
        tags,
        usage,
        origin: 'external',
        unprotected: false,
      }),
    ))
  if (key.state === 'pending_key_material') key = await importMaterial(api, scaleway, key.id, material)
  else if (key.state !== 'enabled') {
    throw new CloudProviderError(
      'cloud_key_unusable',
      `the Scaleway key ${key.id} for this version is ${key.state}`,
      false,
    )
  }
  await assertHoldsKey(api, scaleway, key.id, material.publicKey)

  // The key the previous version lives in (kept across a repeated push of the same version).
  const carried = typeof previous?.state.previousKeyId === 'string' ? previous.state.previousKeyId : undefined
  const previousKeyId = previous && previous.providerKeyId !== key.id ? previous.providerKeyId : carried
  return {
    providerKeyId: key.id,
    state: {
      keyId: key.id,
      region: scaleway.region,
      version: material.version,
      ...(previousKeyId ? { previousKeyId } : {}),
    },
  }
}

function usageFor(material: ExportMaterial): KeyUsage {
  if (material.keyType === 'Signing' && SIGNING[material.algorithm]) {
    return { asymmetricSigning: SIGNING[material.algorithm] as KeyAlgorithmAsymmetricSigning }
  }
  if (material.keyType === 'Encryption' && ENCRYPTION[material.algorithm]) {
    return { asymmetricEncryption: ENCRYPTION[material.algorithm] as KeyAlgorithmAsymmetricEncryption }
  }
  throw new CloudProviderError(
    'cloud_algorithm_unsupported',
    `Scaleway Key Manager does not take ${material.algorithm} ${material.keyType} keys`,
    false,
  )
}

/** What ties a Scaleway key to one version of one of the service's keys. */
const versionTags = (material: ExportMaterial) => [
  `kms-key:${material.keyId}`,
  `kms-version:${material.version}`,
]

const sameUsage = (a: KeyUsage | undefined, b: KeyUsage) =>
  a?.asymmetricSigning === b.asymmetricSigning &&
  a?.asymmetricEncryption === b.asymmetricEncryption &&
  a?.symmetricEncryption === b.symmetricEncryption

async function findVersionKey(
  api: KeyManagerApi,
  scaleway: ScalewayConnection,
  keyName: string,
  tags: string[],
  usage: KeyUsage,
): Promise<Key | undefined> {
  const page = await call('find', () =>
    api.listKeys({
      region: scaleway.region,
      projectId: scaleway.projectId,
      name: keyName,
      tags,
      orderBy: 'created_at_asc',
      pageSize: 20,
      scheduledForDeletion: false,
    }),
  )
  // The filters are applied again here: how the API matches names and tags is not documented.
  const ours = page.keys.filter(
    (k) =>
      k.name === keyName &&
      k.origin === 'external' &&
      tags.every((t) => k.tags?.includes(t)) &&
      sameUsage(k.usage, usage),
  )
  return (
    ours.find((k) => k.state === 'enabled') ?? ours.find((k) => k.state === 'pending_key_material') ?? ours[0]
  )
}

async function importMaterial(
  api: KeyManagerApi,
  scaleway: ScalewayConnection,
  keyId: string,
  material: ExportMaterial,
): Promise<Key> {
  const der = material.privateKey.export({ format: 'der', type: 'pkcs8' })
  try {
    // The base64 string cannot be wiped (strings are immutable); the DER bytes are.
    const keyMaterial = der.toString('base64')
    return await call('import', () => api.importKeyMaterial({ region: scaleway.region, keyId, keyMaterial }))
  } finally {
    der.fill(0)
  }
}

/** Proves the key at Scaleway is this version (a tag match alone could be someone else's key). */
async function assertHoldsKey(
  api: KeyManagerApi,
  scaleway: ScalewayConnection,
  keyId: string,
  publicKey: KeyObject,
): Promise<void> {
  const { pem } = await call('read', () => api.getPublicKey({ region: scaleway.region, keyId }))
  checkHeldKey(pem, publicKey, `the Scaleway key ${keyId}`)
}

// ---------------------------------------------------------------------------------------------
// Errors

type Step = 'test' | 'find' | 'create' | 'import' | 'read'

async function call<T>(step: Step, run: () => Promise<T>): Promise<T> {
  try {
    return await run()
  } catch (error) {
    throw toCloudError(step, error)
  }
}

/**
 * Only the status, Scaleway's error type and the names of refused arguments are kept: the rest of
 * an answer is the remote's own text, not to be stored or shown as it is.
 */
function toCloudError(step: Step, error: unknown): CloudProviderError {
  if (error instanceof CloudProviderError) return error
  if (error instanceof OutboundError) return cloudErrorOfOutbound('Scaleway Key Manager', error.code)
  if (!(error instanceof Errors.ScalewayError)) {
    return new CloudProviderError(
      'cloud_unexpected_response',
      'Scaleway Key Manager gave an unreadable answer',
      false,
    )
  }
  const status = error.status
  const detail = `HTTP ${status}${describeRefusal(error)}`
  if (status === 401 || status === 403) {
    return new CloudProviderError(
      'cloud_credentials_refused',
      `Scaleway refused the credentials (${detail})`,
      false,
    )
  }
  if (status === 429 || status >= 500) {
    return new CloudProviderError(
      'cloud_unavailable',
      `Scaleway Key Manager is unavailable (${detail})`,
      true,
    )
  }
  if ((step === 'create' || step === 'import') && [400, 409, 412, 422].includes(status)) {
    const what = step === 'create' ? 'a key of this algorithm' : 'the key material'
    return new CloudProviderError(
      'cloud_import_refused',
      `Scaleway Key Manager refused ${what} (${detail})`,
      false,
    )
  }
  if (status === 404) {
    return new CloudProviderError(
      'cloud_not_found',
      `Scaleway Key Manager found nothing there (${detail})`,
      false,
    )
  }
  if (status < 400) {
    return new CloudProviderError(
      'cloud_unexpected_response',
      `Scaleway Key Manager answered ${detail}`,
      false,
    )
  }
  return new CloudProviderError(
    'cloud_request_refused',
    `Scaleway Key Manager refused the request (${detail})`,
    false,
  )
}

const SAFE_WORD = /^[a-z][a-z0-9_.[\]-]{0,63}$/i

function describeRefusal(error: InstanceType<typeof Errors.ScalewayError>): string {
  const body = error.body as { type?: unknown } | string
  const type =
    typeof body === 'object' && typeof body.type === 'string' && SAFE_WORD.test(body.type) ? body.type : ''
  const argumentNames =
    error instanceof Errors.InvalidArgumentsError
      ? error.details.map((d) => d.argumentName).filter((name) => SAFE_WORD.test(name))
      : []
  const parts = [type, argumentNames.length ? `arguments ${argumentNames.join(', ')}` : ''].filter(Boolean)
  return parts.length ? `, ${parts.join(': ')}` : ''
}
