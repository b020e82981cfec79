import {
  constants,
  createCipheriv,
  createPrivateKey,
  createPublicKey,
  type KeyObject,
  publicEncrypt,
  randomBytes,
} from 'node:crypto'
import { setTimeout as sleep } from 'node:timers/promises'
import type { protos } from '@google-cloud/kms'
import type { AlgorithmName, KeyType } from '../../keys/algorithms.ts'
import { onOfficialHost } from '../custom-endpoints.ts'
import {
  CloudFieldError,
  type CloudProviderAdapter,
  CloudProviderError,
  type ConnectionContext,
  checkHeldKey,
  cloudErrorOfOutbound,
  type EndpointField,
  type ExportMaterial,
  type PushResult,
} from '../provider.ts'
import {
  type Exchange,
  type ExchangeJournal,
  type GcpAccount,
  type KmsSession,
  openKmsSession,
} from './gcp-transport.ts'

/**
 * Google Cloud KMS (API v1, through @google-cloud/kms in its REST transport; gcp-transport.ts).
 *
 * A connection is a service account key (its client email and RSA private key); a target is a
 * crypto key name in an existing key ring (key rings cannot be deleted at Google, so the adapter
 * never creates one). A push follows Cloud KMS's import protocol:
 * 1. the crypto key is created, import-only and without a first version, with the purpose and
 *    algorithm of the version (or, if it exists already, checked to have them);
 * 2. an import job is created in the key ring and waited for until ACTIVE; its RSA public key
 *    wraps the material (RSA_OAEP_3072_SHA256_AES_256: a fresh AES-256 key under RSA-OAEP-SHA256,
 *    then the PKCS#8 DER under that key with AES-KWP, RFC 5649);
 * 3. the wrapped key is imported as a new version of the crypto key, which is how Cloud KMS
 *    rotates: a rotation's push adds version n+1 next to the previous ones (asymmetric keys have no
 *    primary version, so nothing moves; workloads name the version, the push result gives it);
 * 4. the version's public key, read back, must be the service's.
 *
 * Safe to run again after a failure: the crypto key is found again, a new import job is made
 * (jobs expire by themselves after three days and cannot be deleted), and an import whose answer
 * was lost leaves one more version holding the same key, which is harmless.
 *
 * The service account needs, on the key ring: cloudkms.cryptoKeys.create and .get,
 * cloudkms.importJobs.create, .get and .useToImport, cloudkms.cryptoKeyVersions.create, .get and
 * .viewPublicKey (e.g. roles/cloudkms.admin with roles/cloudkms.importer and
 * roles/cloudkms.publicKeyViewer); for the connection test, cloudkms.keyRings.list.
 */

const GCP_ALGORITHMS = ['RSA-2048', 'RSA-3072', 'RSA-4096'] as const satisfies readonly AlgorithmName[]
type GcpAlgorithm = (typeof GCP_ALGORITHMS)[number]

const MODULUS_BITS: Record<GcpAlgorithm, number> = { 'RSA-2048': 2048, 'RSA-3072': 3072, 'RSA-4096': 4096 }
// Cloud KMS names: PSS with SHA-256 (salt length 32) and OAEP with SHA-256, the service's own
// defaults for RSA (src/keys/algorithms.ts).
const SIGNING_ALGORITHM: Record<GcpAlgorithm, string> = {
  'RSA-2048': 'RSA_SIGN_PSS_2048_SHA256',
  'RSA-3072': 'RSA_SIGN_PSS_3072_SHA256',
  'RSA-4096': 'RSA_SIGN_PSS_4096_SHA256',
}
const DECRYPTION_ALGORITHM: Record<GcpAlgorithm, string> = {
  'RSA-2048': 'RSA_DECRYPT_OAEP_2048_SHA256',
  'RSA-3072': 'RSA_DECRYPT_OAEP_3072_SHA256',
  'RSA-4096': 'RSA_DECRYPT_OAEP_4096_SHA256',
}

/** The wrapping Cloud KMS applies to the import: RSA-OAEP-SHA256 with a 3072-bit job key, then AES-KWP. */
const IMPORT_METHOD = 'RSA_OAEP_3072_SHA256_AES_256'
const IMPORT_JOB_KEY_BITS = 3072
/** RFC 5649's alternative initial value: OpenSSL's id-aes256-wrap-pad takes it as the IV. */
const AES_KWP_IV = Buffer.from('A65959A6', 'hex')
/** Protection levels an import job can match (the job must have the crypto key's level). */
const IMPORTABLE_PROTECTION = new Set(['SOFTWARE', 'HSM'])

const DEFAULT_API_ENDPOINT = 'https://cloudkms.googleapis.com'
const DEFAULT_TOKEN_URI = 'https://oauth2.googleapis.com/token'
const DEFAULT_TEST_LOCATION = 'global'

/** Key ring, crypto key and import job ids: Cloud KMS's own rule. */
const RESOURCE_ID = /^[a-zA-Z0-9_-]{1,63}$/
/** A project id (optionally domain-scoped, `example.com:my-project`) or a project number. */
const PROJECT = /^(?:[a-z0-9][a-z0-9.-]{0,61}[a-z0-9]:)?[a-z][a-z0-9-]{4,28}[a-z0-9]$|^[0-9]{1,20}$/
/** `global`, a region (`europe-west1`) or a multi-region (`europe`, `nam-eur-asia1`). */
const LOCATION = /^[a-z][a-z0-9-]{0,62}$/
const CLIENT_EMAIL =
  /^[a-z0-9][a-z0-9._%+-]{0,63}@[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)+$/i
const MAX_PRIVATE_KEY_PEM = 16 * 1024
const MAX_URL = 2048
const LOOPBACK_HOSTS = new Set(['localhost', '[::1]'])

/** Waits between polls of a job or version that is not ready yet: about 7 s in all, then the push fails retryably. */
const POLL_DELAYS_MS = [100, 200, 400, 800, 1000, 1000, 1000, 1000, 1000, 1000]
/** Each SDK call is sent once: a failed push is retried by the export's own schedule, not inside one call. */
const ONCE = { retry: null }

// ---------------------------------------------------------------------------------------------
// Fields

interface GcpSettings {
  apiEndpoint?: string
  tokenUri?: string
  /** Where the connection test lists key rings; without it the test is the token grant alone. */
  project?: string
  location?: string
}

interface GcpCredentials {
  clientEmail: string
  /** The PEM as given (a service account key's `private_key`). */
  privateKey: string
  tokenUri?: string
}

interface GcpTarget {
  project: string
  location: string
  keyRing: string
  cryptoKey: string
}

function parseSettings(input: Record<string, unknown>): Record<string, unknown> {
  // `caCertificate` belongs to the service (it trusts it through outbound.withExtraCa before the
  // adapter runs); stored settings carry it, so it is passed over here, not refused.
  refuseUnknown('settings', input, ['apiEndpoint', 'tokenUri', 'project', 'location', 'caCertificate'])
  const settings: GcpSettings = {}
  if (input.apiEndpoint !== undefined)
    settings.apiEndpoint = endpointUrl('settings.apiEndpoint', input.apiEndpoint, 'origin')
  if (input.tokenUri !== undefined)
    settings.tokenUri = endpointUrl('settings.tokenUri', input.tokenUri, 'url')
  if (input.project !== undefined) settings.project = projectId('settings.project', input.project)
  if (input.location !== undefined) {
    if (settings.project === undefined)
      throw new CloudFieldError('settings.location', 'needs settings.project')
    settings.location = locationId('settings.location', input.location)
  }
  return { ...settings }
}

function parseCredentials(input: Record<string, unknown>): Record<string, unknown> {
  refuseUnknown('credentials', input, ['clientEmail', 'privateKey', 'tokenUri'])
  // Messages never quote what was given: these fields are secrets, or sit next to them.
  const clientEmail = input.clientEmail
  if (typeof clientEmail !== 'string' || clientEmail.length > 320 || !CLIENT_EMAIL.test(clientEmail)) {
    throw new CloudFieldError(
      'credentials.clientEmail',
      "must be the service account's email (client_email of its key)",
    )
  }
  readPrivateKey(input.privateKey)
  const credentials: GcpCredentials = { clientEmail, privateKey: input.privateKey as string }
  if (input.tokenUri !== undefined)
    credentials.tokenUri = endpointUrl('credentials.tokenUri', input.tokenUri, 'url')
  return { ...credentials }
}

function parseTarget(input: Record<string, unknown>): Record<string, unknown> {
  refuseUnknown('target', input, ['project', 'location', 'keyRing', 'cryptoKey'])
  const target: GcpTarget = {
    project: projectId('target.project', input.project),
    location: locationId('target.location', input.location),
    keyRing: resourceId('target.keyRing', input.keyRing),
    cryptoKey: resourceId('target.cryptoKey', input.cryptoKey),
  }
  return { ...target }
}

/** The service account's private key; the messages say what is expected, never what was given. */
function readPrivateKey(value: unknown): KeyObject {
  const refuse = (rule: string) => new CloudFieldError('credentials.privateKey', rule)
  if (typeof value !== 'string' || value.length > MAX_PRIVATE_KEY_PEM || !value.includes('-----BEGIN')) {
    throw refuse(
      "must be the PEM private key of a service account key (its private_key, '-----BEGIN PRIVATE KEY-----')",
    )
  }
  let key: KeyObject
  try {
    key = createPrivateKey({ key: value, format: 'pem' })
  } catch {
    throw refuse('must be an unencrypted PEM private key that can be read')
  }
  if (key.asymmetricKeyType !== 'rsa' || (key.asymmetricKeyDetails?.modulusLength ?? 0) < 2048) {
    throw refuse('must be an RSA key of at least 2048 bits (Google service account keys are)')
  }
  return key
}

function refuseUnknown(scope: string, input: Record<string, unknown>, known: readonly string[]): void {
  // A secret put in the wrong place would otherwise be stored unsealed with the settings.
  for (const name of Object.keys(input)) {
    if (!known.includes(name))
      throw new CloudFieldError(`${scope}.${name}`, 'is not a field of Google Cloud KMS')
  }
}

function projectId(field: string, value: unknown): string {
  if (typeof value !== 'string' || !PROJECT.test(value)) {
    throw new CloudFieldError(
      field,
      'must be a Google Cloud project id (6-30 lowercase letters, digits, hyphens) or number',
    )
  }
  return value
}

function locationId(field: string, value: unknown): string {
  if (typeof value !== 'string' || !LOCATION.test(value)) {
    throw new CloudFieldError(field, 'must be a Cloud KMS location such as global, europe-west1 or us')
  }
  return value
}

function resourceId(field: string, value: unknown): string {
  if (typeof value !== 'string' || !RESOURCE_ID.test(value)) {
    throw new CloudFieldError(field, 'must be 1-63 letters, digits, underscores or hyphens (Cloud KMS ids)')
  }
  return value
}

/**
 * An https URL (an origin only for the API endpoint: the SDK appends its paths). Plain http only
 * to this machine: the bearer token and the signed assertion would otherwise cross the network
 * readable.
 */
function endpointUrl(field: string, value: unknown, shape: 'origin' | 'url'): string {
  const expected =
    shape === 'origin' ? 'an https origin such as https://cloudkms.googleapis.com' : 'an https URL'
  if (typeof value !== 'string' || value.length > MAX_URL)
    throw new CloudFieldError(field, `must be ${expected}`)
  const url = URL.parse(value)
  if (!url) throw new CloudFieldError(field, `must be ${expected}`)
  const loopback = LOOPBACK_HOSTS.has(url.hostname) || /^127\.\d+\.\d+\.\d+$/.test(url.hostname)
  if (url.protocol !== 'https:' && !(url.protocol === 'http:' && loopback)) {
    throw new CloudFieldError(field, `must be ${expected}`)
  }
  if (url.username || url.password || url.search || url.hash || value.includes('?') || value.includes('#')) {
    throw new CloudFieldError(field, `must be ${expected}, without credentials, query or fragment`)
  }
  if (shape === 'origin') {
    if (url.pathname !== '/') throw new CloudFieldError(field, `must be ${expected}, without a path`)
    return url.origin
  }
  return url.href
}

/** Google's OAuth token hosts: today's (`oauth2.googleapis.com`) and those older key files name. */
const GOOGLE_TOKEN_HOSTS = new Set(['oauth2.googleapis.com', 'www.googleapis.com', 'accounts.google.com'])
/** Cloud KMS's global API host, and its regional ones (`cloudkms.<location>.rep.googleapis.com`). */
const isKmsApiHost = (host: string) =>
  host === 'cloudkms.googleapis.com' || /^cloudkms\.[a-z0-9-]+\.rep\.googleapis\.com$/.test(host)

/** The API endpoint and token URIs a connection names; a Private Service Connect name is custom. */
function endpoints(
  part: 'settings' | 'credentials' | 'target',
  fields: Record<string, unknown>,
): EndpointField[] {
  const found: EndpointField[] = []
  const { apiEndpoint, tokenUri } = fields
  if (part === 'settings' && typeof apiEndpoint === 'string')
    found.push({
      field: 'settings.apiEndpoint',
      url: apiEndpoint,
      official: onOfficialHost(apiEndpoint, isKmsApiHost),
    })
  if (part !== 'target' && typeof tokenUri === 'string')
    found.push({
      field: `${part}.tokenUri`,
      url: tokenUri,
      official: onOfficialHost(tokenUri, (host) => GOOGLE_TOKEN_HOSTS.has(host)),
    })
  return found
}

/** The connection as parse* left it, with the defaults applied. */
function gcpConnection(connection: ConnectionContext): { settings: GcpSettings; account: GcpAccount } {
  const settings = asStored('cloud_configuration_invalid', () =>
    parseSettings(connection.settings),
  ) as GcpSettings
  const credentials = asStored('cloud_configuration_invalid', () =>
    parseCredentials(connection.credentials),
  ) as unknown as GcpCredentials
  return {
    settings,
    account: {
      apiEndpoint: settings.apiEndpoint ?? DEFAULT_API_ENDPOINT,
      // The connection may point at another token endpoint; otherwise the key's own token_uri.
      tokenUri: settings.tokenUri ?? credentials.tokenUri ?? DEFAULT_TOKEN_URI,
      clientEmail: credentials.clientEmail,
      privateKey: readPrivateKey(credentials.privateKey),
    },
  }
}

/** Stored fields that no longer pass are the connection's (or the export's) fault, not a passing failure. */
function asStored<T>(code: 'cloud_configuration_invalid', read: () => T): T {
  try {
    return read()
  } catch (error) {
    if (error instanceof CloudFieldError) {
      throw new CloudProviderError(code, `the Google Cloud KMS ${error.message}`, false)
    }
    throw error
  }
}

// ---------------------------------------------------------------------------------------------
// Push

interface KeySpec {
  purpose: 'ASYMMETRIC_SIGN' | 'ASYMMETRIC_DECRYPT'
  algorithm: string
}

interface ImportJob {
  name: string
  wrappingKey: KeyObject
}

async function push(
  connection: ConnectionContext,
  targetInput: Record<string, unknown>,
  material: ExportMaterial,
  _previous: PushResult | null,
): Promise<PushResult> {
  const spec = keySpecOf(material)
  const { account } = gcpConnection(connection)
  const target = asStored('cloud_configuration_invalid', () =>
    parseTarget(targetInput),
  ) as unknown as GcpTarget
  const keyRing = `projects/${target.project}/locations/${target.location}/keyRings/${target.keyRing}`
  const session = openKmsSession(connection.outbound, connection.timeoutMs, account)
  try {
    // `previous` is not needed: the crypto key is the target's, and Cloud KMS numbers versions.
    const cryptoKey = await ensureCryptoKey(session, keyRing, target.cryptoKey, spec)
    const importJob = await createImportJob(session, keyRing, cryptoKey.protectionLevel)
    const imported = await importVersion(session, cryptoKey.name, importJob, spec, material.privateKey)
    const version = await waitUntilEnabled(session, imported, cryptoKey.name)
    await assertHoldsKey(session, version, material.publicKey)
    return {
      providerKeyId: version,
      state: {
        cryptoKey: cryptoKey.name,
        importJob: importJob.name,
        version: version.slice(version.lastIndexOf('/') + 1),
      },
    }
  } finally {
    await session.close()
  }
}

/** Signing keys sign with PSS, encryption keys decrypt with OAEP; HMAC keys have no place at Cloud KMS here. */
const KEY_SPEC_OF: Partial<Record<KeyType, (algorithm: GcpAlgorithm) => KeySpec>> = {
  Signing: (algorithm) => ({ purpose: 'ASYMMETRIC_SIGN', algorithm: SIGNING_ALGORITHM[algorithm] }),
  Encryption: (algorithm) => ({ purpose: 'ASYMMETRIC_DECRYPT', algorithm: DECRYPTION_ALGORITHM[algorithm] }),
}

/** The purpose and Cloud KMS algorithm of the version, refused before anything is made at Google. */
function keySpecOf(material: ExportMaterial): KeySpec {
  const algorithm = GCP_ALGORITHMS.find((name) => name === material.algorithm)
  const specOf = KEY_SPEC_OF[material.keyType]
  if (!algorithm || !specOf) {
    throw new CloudProviderError(
      'cloud_algorithm_unsupported',
      `Google Cloud KMS does not take ${material.algorithm} ${material.keyType} keys`,
      false,
    )
  }
  const { privateKey } = material
  if (
    privateKey.type !== 'private' ||
    privateKey.asymmetricKeyType !== 'rsa' ||
    privateKey.asymmetricKeyDetails?.modulusLength !== MODULUS_BITS[algorithm]
  ) {
    throw new CloudProviderError(
      'cloud_import_refused',
      `the key material is not a ${algorithm} private key`,
      false,
    )
  }
  return specOf(algorithm)
}

/**
 * The crypto key the versions go into: created on the first push, found (and checked) on the
 * next ones. An existing key keeps its protection level; the import job is made to match it.
 */
async function ensureCryptoKey(
  session: KmsSession,
  keyRing: string,
  cryptoKeyId: string,
  spec: KeySpec,
): Promise<{ name: string; protectionLevel: string }> {
  const name = `${keyRing}/cryptoKeys/${cryptoKeyId}`
  let key: protos.google.cloud.kms.v1.ICryptoKey
  try {
    ;[key] = await call(session, 'create the crypto key', () =>
      session.client.createCryptoKey(
        {
          parent: keyRing,
          cryptoKeyId,
          // Versions arrive by import only: Google never generates key material in it.
          skipInitialVersionCreation: true,
          cryptoKey: {
            purpose: spec.purpose,
            importOnly: true,
            versionTemplate: { algorithm: spec.algorithm, protectionLevel: 'SOFTWARE' },
          } as protos.google.cloud.kms.v1.ICryptoKey,
        },
        ONCE,
      ),
    )
  } catch (error) {
    if (!(error instanceof CloudProviderError && error.code === 'cloud_already_exists')) throw error
    ;[key] = await call(session, 'read the crypto key', () => session.client.getCryptoKey({ name }, ONCE))
  }
  if (key.name !== name) {
    throw new CloudProviderError(
      'cloud_unexpected_response',
      'Cloud KMS answered with another crypto key',
      false,
    )
  }
  const purpose = String(key.purpose)
  const algorithm = String(key.versionTemplate?.algorithm)
  const protectionLevel = String(key.versionTemplate?.protectionLevel)
  if (
    purpose !== spec.purpose ||
    algorithm !== spec.algorithm ||
    !IMPORTABLE_PROTECTION.has(protectionLevel)
  ) {
    throw new CloudProviderError(
      'cloud_key_mismatch',
      `the crypto key exists with purpose ${safeWord(purpose)}, algorithm ${safeWord(algorithm)} and protection ${safeWord(protectionLevel)}; this version needs ${spec.purpose}, ${spec.algorithm}, SOFTWARE or HSM`,
      false,
    )
  }
  return { name, protectionLevel }
}

/** A new import job in the key ring, once Cloud KMS has generated its wrapping key. */
async function createImportJob(
  session: KmsSession,
  keyRing: string,
  protectionLevel: string,
): Promise<ImportJob> {
  const importJobId = `kms-export-${Date.now().toString(36)}-${randomBytes(6).toString('hex')}`
  const [job] = await call(session, 'create an import job', () =>
    session.client.createImportJob(
      {
        parent: keyRing,
        importJobId,
        importJob: { importMethod: IMPORT_METHOD, protectionLevel } as protos.google.cloud.kms.v1.IImportJob,
      },
      ONCE,
    ),
  )
  const name = `${keyRing}/importJobs/${importJobId}`
  const active = await pollUntil(
    job,
    async () =>
      (await call(session, 'read the import job', () => session.client.getImportJob({ name }, ONCE)))[0],
    (current) => {
      if (current.name !== name) {
        throw new CloudProviderError(
          'cloud_unexpected_response',
          'Cloud KMS answered with another import job',
          false,
        )
      }
      const state = String(current.state)
      // EXPIRED (or unknown): the next attempt makes a new job.
      if (state !== 'ACTIVE' && state !== 'PENDING_GENERATION') {
        throw new CloudProviderError(
          'cloud_unavailable',
          `the Cloud KMS import job is ${safeWord(state)}`,
          true,
        )
      }
      return state === 'ACTIVE'
    },
    () =>
      new CloudProviderError(
        'cloud_unavailable',
        'the Cloud KMS import job did not become active in time',
        true,
      ),
  )
  return { name, wrappingKey: wrappingKeyOf(active) }
}

/** The job's public key, which must be what its import method says (RSA of IMPORT_JOB_KEY_BITS). */
function wrappingKeyOf(job: protos.google.cloud.kms.v1.IImportJob): KeyObject {
  try {
    const key = createPublicKey(String(job.publicKey?.pem))
    if (
      String(job.importMethod) === IMPORT_METHOD &&
      key.asymmetricKeyDetails?.modulusLength === IMPORT_JOB_KEY_BITS
    ) {
      return key
    }
  } catch {
    // Reported below, like a key of the wrong kind.
  }
  throw new CloudProviderError(
    'cloud_unexpected_response',
    `the Cloud KMS import job has no ${IMPORT_JOB_KEY_BITS}-bit RSA wrapping key for ${IMPORT_METHOD}`,
    false,
  )
}

async function importVersion(
  session: KmsSession,
  cryptoKey: string,
  job: ImportJob,
  spec: KeySpec,
  privateKey: KeyObject,
): Promise<protos.google.cloud.kms.v1.ICryptoKeyVersion> {
  const wrappedKey = wrapForImport(privateKey, job.wrappingKey)
  try {
    const [version] = await call(session, 'import the key', () =>
      session.client.importCryptoKeyVersion(
        {
          parent: cryptoKey,
          algorithm: spec.algorithm,
          importJob: job.name,
          wrappedKey,
        } as protos.google.cloud.kms.v1.IImportCryptoKeyVersionRequest,
        ONCE,
      ),
    )
    return version
  } finally {
    wrappedKey.fill(0)
  }
}

/**
 * Google's wrapping for RSA_OAEP_*_SHA256_AES_256: a fresh AES-256 key encrypted with RSA-OAEP
 * (SHA-256, MGF1-SHA-256, empty label) under the import job's key, followed by the PKCS#8 DER of
 * the private key wrapped with AES-KWP (RFC 5649) under that AES key.
 */
function wrapForImport(privateKey: KeyObject, wrappingKey: KeyObject): Buffer {
  const der = privateKey.export({ format: 'der', type: 'pkcs8' })
  const aesKey = randomBytes(32)
  let wrappedDer: Buffer | undefined
  try {
    const encryptedAesKey = publicEncrypt(
      { key: wrappingKey, padding: constants.RSA_PKCS1_OAEP_PADDING, oaepHash: 'sha256' },
      aesKey,
    )
    const kwp = createCipheriv('id-aes256-wrap-pad', aesKey, AES_KWP_IV)
    wrappedDer = Buffer.concat([kwp.update(der), kwp.final()])
    return Buffer.concat([encryptedAesKey, wrappedDer])
  } finally {
    aesKey.fill(0)
    der.fill(0)
    wrappedDer?.fill(0)
  }
}

/** Imports of software keys are done at once; HSM imports take a moment (PENDING_IMPORT). */
async function waitUntilEnabled(
  session: KmsSession,
  imported: protos.google.cloud.kms.v1.ICryptoKeyVersion,
  cryptoKey: string,
): Promise<string> {
  const name = String(imported.name)
  if (!new RegExp(`^${escapeRegExp(cryptoKey)}/cryptoKeyVersions/[0-9]{1,20}$`).test(name)) {
    throw new CloudProviderError(
      'cloud_unexpected_response',
      'Cloud KMS answered the import without a version of this crypto key',
      false,
    )
  }
  await pollUntil(
    imported,
    async () =>
      (
        await call(session, 'read the imported version', () =>
          session.client.getCryptoKeyVersion({ name }, ONCE),
        )
      )[0],
    (version) => {
      const state = String(version.state)
      if (state === 'IMPORT_FAILED') {
        throw new CloudProviderError(
          'cloud_import_refused',
          'Cloud KMS could not import the key (IMPORT_FAILED)',
          false,
        )
      }
      if (state !== 'ENABLED' && state !== 'PENDING_IMPORT') {
        throw new CloudProviderError(
          'cloud_key_unusable',
          `the imported Cloud KMS key version is ${safeWord(state)}`,
          false,
        )
      }
      return state === 'ENABLED'
    },
    // The import may still complete; a retry imports once more (one more version holding the key).
    () => new CloudProviderError('cloud_unavailable', 'the Cloud KMS import did not complete in time', true),
  )
  return name
}

/**
 * Reads a resource again, after growing waits, until `ready` says so (it throws for a state that
 * will not become ready); bounded by POLL_DELAYS_MS.
 */
async function pollUntil<T>(
  first: T,
  readAgain: () => Promise<T>,
  ready: (value: T) => boolean,
  timedOut: () => CloudProviderError,
): Promise<T> {
  let value = first
  for (const delay of POLL_DELAYS_MS) {
    if (ready(value)) return value
    await sleep(delay)
    value = await readAgain()
  }
  if (ready(value)) return value
  throw timedOut()
}

/** Proves the version at Google is this key (the import is Google's word, the public key its proof). */
async function assertHoldsKey(session: KmsSession, version: string, publicKey: KeyObject): Promise<void> {
  const [answer] = await call(session, 'read the public key', () =>
    session.client.getPublicKey({ name: version }, ONCE),
  )
  checkHeldKey(answer.pem, publicKey, 'the imported Cloud KMS key version')
}

// ---------------------------------------------------------------------------------------------
// Connection test

/**
 * A connection names no key ring (targets do). The token grant proves the client email and the
 * key (a deleted or disabled key is refused by Google); when the settings name a project, one
 * page of its key rings in `location` (default `global`) also proves that the Cloud KMS API is
 * enabled there and the service account may read it. Import rights show only at the first push.
 */
async function testConnection(connection: ConnectionContext): Promise<void> {
  const { settings, account } = gcpConnection(connection)
  const session = openKmsSession(connection.outbound, connection.timeoutMs, account)
  try {
    await call(session, 'obtain an access token', () => session.auth.getAccessToken())
    if (settings.project === undefined) return
    const parent = `projects/${settings.project}/locations/${settings.location ?? DEFAULT_TEST_LOCATION}`
    await call(session, 'list key rings', () =>
      session.client.listKeyRings({ parent, pageSize: 1 }, { ...ONCE, autoPaginate: false }),
    )
  } finally {
    await session.close()
  }
}

// ---------------------------------------------------------------------------------------------
// Failures

/** Runs one exchange with Google; a failure becomes a CloudProviderError saying which step failed. */
async function call<T>(session: KmsSession, step: string, run: () => Promise<T>): Promise<T> {
  session.journal.last = undefined
  try {
    return await run()
  } catch (error) {
    throw explain(step, error, session.journal)
  }
}

/**
 * Explains a failure from the last exchange the transport saw. The SDK's own errors are not used:
 * they carry the server's text; this message holds only a status, Google's error code and the
 * transport's reason.
 */
function explain(step: string, error: unknown, journal: ExchangeJournal): CloudProviderError {
  const known = findCause(error, (e): e is CloudProviderError => e instanceof CloudProviderError)
  if (known) return known
  const last = journal.last
  const where = last?.service === 'oauth' ? "Google's token endpoint" : 'Cloud KMS'
  if (last?.failure) {
    return cloudErrorOfOutbound(`${where} (${step})`, last.failure.code)
  }
  if (last?.status === undefined) {
    // Nothing was sent: the SDK refused the call itself.
    const name = error instanceof Error && /^[A-Za-z]{1,64}$/.test(error.name) ? error.name : 'an error'
    return new CloudProviderError(
      'cloud_request_failed',
      `the Cloud KMS SDK failed to ${step} with ${name}`,
      false,
    )
  }
  if (last.status < 200 || last.status >= 300) return fromStatus(step, last, last.status)
  return new CloudProviderError(
    'cloud_unexpected_response',
    `${where} gave an unreadable answer to ${step}`,
    false,
  )
}

function fromStatus(step: string, exchange: Exchange, status: number): CloudProviderError {
  const detail = `HTTP ${status}${exchange.errorCode ? `, ${exchange.errorCode}` : ''}`
  const where = exchange.service === 'oauth' ? "Google's token endpoint" : 'Cloud KMS'
  if (status === 408 || status === 429 || status >= 500) {
    return new CloudProviderError('cloud_unavailable', `${where} is unavailable (${detail})`, true)
  }
  if (status < 400)
    return new CloudProviderError('cloud_unexpected_response', `${where} redirected (${detail})`, false)
  if (exchange.service === 'oauth') {
    // Every refusal of the grant: an unknown, deleted or disabled key (invalid_grant), a wrong email.
    return new CloudProviderError(
      'cloud_credentials_refused',
      `Google refused the service account key (${detail})`,
      false,
    )
  }
  if (status === 401 || status === 403) {
    return new CloudProviderError(
      'cloud_credentials_refused',
      `Cloud KMS refused the service account's token or permissions to ${step} (${detail})`,
      false,
    )
  }
  if (status === 404) {
    return new CloudProviderError(
      'cloud_not_found',
      `Cloud KMS found no such project, location or key ring to ${step} (${detail})`,
      false,
    )
  }
  if (status === 409)
    return new CloudProviderError('cloud_already_exists', `Cloud KMS: it exists already (${detail})`, false)
  if (step === 'import the key' || step === 'create the crypto key' || step === 'create an import job') {
    return new CloudProviderError('cloud_import_refused', `Cloud KMS refused to ${step} (${detail})`, false)
  }
  return new CloudProviderError('cloud_request_refused', `Cloud KMS refused to ${step} (${detail})`, false)
}

function findCause<T>(error: unknown, match: (e: unknown) => e is T): T | undefined {
  for (let e: unknown = error, depth = 0; e !== undefined && depth < 8; depth++) {
    if (match(e)) return e
    e = e instanceof Error ? e.cause : undefined
  }
  return undefined
}

/** An enum name from Google's answer, shown only if it looks like one. */
const safeWord = (value: string) => (/^[A-Z0-9_]{1,64}$/.test(value) ? value : 'unknown')

const escapeRegExp = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')

// ---------------------------------------------------------------------------------------------
// The adapter

export const gcpProvider: CloudProviderAdapter = {
  provider: 'gcp',
  // Spec 2.2: "GCP-type cloud KMS: RSA-2048, RSA-3072, RSA-4096".
  supportedAlgorithms: GCP_ALGORITHMS,
  parseSettings,
  parseCredentials,
  parseTarget,
  endpoints,
  testConnection,
  push,
}
