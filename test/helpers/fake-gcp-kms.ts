import {
  constants,
  createDecipheriv,
  createHash,
  createPrivateKey,
  createPublicKey,
  generateKeyPair,
  type KeyObject,
  privateDecrypt,
  randomBytes,
  verify,
} from 'node:crypto'
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { promisify } from 'node:util'

/**
 * A local stand-in for Google Cloud KMS (REST API v1, as the SDK's REST transport calls it) and
 * Google's OAuth token endpoint, on 127.0.0.1:
 * - POST /token: the JWT-bearer grant, the assertion checked as Google does (RS256 signature by
 *   the test service account's key, iss, aud, scope, iat/exp); anything else is invalid_grant;
 * - /v1/...: key rings (given at start), crypto keys, import jobs, the import itself and the
 *   version's public key, signing and decryption, each behind the bearer token issued above.
 *
 * The import unwraps as Google documents RSA_OAEP_*_SHA256_AES_256 (and the SHA-1 variants):
 * RSA-OAEP with the job's own private key gives an AES-256 key, AES-KWP (RFC 5649) under it gives
 * the PKCS#8 DER, which must be a key of the version's algorithm. Enums are answered as numbers
 * when the request asks `$alt=json;enum-encoding=int` (the SDK always does), as names otherwise,
 * and read in either form. Errors have Google's shape: {"error":{"code","message","status"}}.
 */

export interface FakeGcpKms {
  /** The API origin (settings.apiEndpoint). */
  url: string
  /** The token endpoint (settings.tokenUri). */
  tokenUri: string
  /** The one service account the token endpoint knows. */
  serviceAccount: { clientEmail: string; privateKey: string }
  /** Every imported version, by name. */
  versions(): Map<string, { algorithm: string; privateKey: KeyObject }>
  /** Requests received (token endpoint included). */
  requestCount(): number
  /** While down, every request is answered 503 UNAVAILABLE; `'kms'`: the API only, tokens are still granted. */
  setDown(down: boolean, scope?: 'all' | 'kms'): void
  /** While set, every API call is refused 403 PERMISSION_DENIED (an account without the IAM role). */
  setPermissionDenied(denied: boolean): void
  stop(): Promise<void>
}

export interface FakeGcpKmsOptions {
  /** Existing key rings, as resource names (projects/p/locations/l/keyRings/r). */
  keyRings: string[]
}

const KMS_SCOPES = new Set([
  'https://www.googleapis.com/auth/cloudkms',
  'https://www.googleapis.com/auth/cloud-platform',
])
const JWT_BEARER_GRANT = 'urn:ietf:params:oauth:grant-type:jwt-bearer'
const ID = /^[a-zA-Z0-9_-]{1,63}$/
const AES_KWP_IV = Buffer.from('A65959A6', 'hex')
const PSS_SALT_BYTES = 32

// The enum values of google/cloud/kms/v1/resources.proto that the fake speaks.
const PURPOSE = { ASYMMETRIC_SIGN: 5, ASYMMETRIC_DECRYPT: 6 } as const
const PROTECTION_LEVEL = { SOFTWARE: 1, HSM: 2 } as const
const VERSION_STATE = { ENABLED: 1 } as const
const IMPORT_JOB_STATE = { PENDING_GENERATION: 1, ACTIVE: 2 } as const
const IMPORT_METHOD = {
  RSA_OAEP_3072_SHA1_AES_256: 1,
  RSA_OAEP_4096_SHA1_AES_256: 2,
  RSA_OAEP_3072_SHA256_AES_256: 3,
  RSA_OAEP_4096_SHA256_AES_256: 4,
} as const
const ALGORITHM = {
  RSA_SIGN_PSS_2048_SHA256: 2,
  RSA_SIGN_PSS_3072_SHA256: 3,
  RSA_SIGN_PSS_4096_SHA256: 4,
  RSA_DECRYPT_OAEP_2048_SHA256: 8,
  RSA_DECRYPT_OAEP_3072_SHA256: 9,
  RSA_DECRYPT_OAEP_4096_SHA256: 10,
} as const
type EnumTable = Record<string, number>
type AlgorithmName = keyof typeof ALGORITHM
/** An enum value as the request asked for it: its number or its name. */
type EnumOut = (table: EnumTable, name: string) => string | number | undefined

interface ApiRequest {
  /** The resource path after /v1/. */
  path: string
  query: URLSearchParams
  input: Record<string, unknown>
  enumOut: EnumOut
}

/** Each algorithm's purpose and modulus (all hash with SHA-256). */
const ALGORITHM_SHAPE: Record<AlgorithmName, { purpose: keyof typeof PURPOSE; bits: number }> = {
  RSA_SIGN_PSS_2048_SHA256: { purpose: 'ASYMMETRIC_SIGN', bits: 2048 },
  RSA_SIGN_PSS_3072_SHA256: { purpose: 'ASYMMETRIC_SIGN', bits: 3072 },
  RSA_SIGN_PSS_4096_SHA256: { purpose: 'ASYMMETRIC_SIGN', bits: 4096 },
  RSA_DECRYPT_OAEP_2048_SHA256: { purpose: 'ASYMMETRIC_DECRYPT', bits: 2048 },
  RSA_DECRYPT_OAEP_3072_SHA256: { purpose: 'ASYMMETRIC_DECRYPT', bits: 3072 },
  RSA_DECRYPT_OAEP_4096_SHA256: { purpose: 'ASYMMETRIC_DECRYPT', bits: 4096 },
}

interface CryptoKey {
  purpose: keyof typeof PURPOSE
  algorithm: AlgorithmName
  protectionLevel: keyof typeof PROTECTION_LEVEL
  importOnly: boolean
  createTime: string
}

interface ImportJob {
  importMethod: keyof typeof IMPORT_METHOD
  protectionLevel: keyof typeof PROTECTION_LEVEL
  state: keyof typeof IMPORT_JOB_STATE
  privateKey: KeyObject
  publicKeyPem: string
  createTime: string
}

interface Version {
  algorithm: AlgorithmName
  protectionLevel: keyof typeof PROTECTION_LEVEL
  importJob: string
  privateKey: KeyObject
  createTime: string
}

/** A refusal in Google's shape. */
class ApiError extends Error {
  readonly httpStatus: number
  readonly status: string
  constructor(httpStatus: number, status: string, message: string) {
    super(message)
    this.httpStatus = httpStatus
    this.status = status
  }
}

const generateRsa = promisify(generateKeyPair)

export async function startFakeGcpKms(options: FakeGcpKmsOptions): Promise<FakeGcpKms> {
  const account = await generateRsa('rsa', { modulusLength: 2048 })
  const clientEmail = 'kms-exporter@fake-project.iam.gserviceaccount.com'
  const keyRings = new Set(options.keyRings)
  const cryptoKeys = new Map<string, CryptoKey>()
  const importJobs = new Map<string, ImportJob>()
  const versions = new Map<string, Version>()
  const tokens = new Set<string>()
  let down: 'all' | 'kms' | false = false
  let permissionDenied = false
  let requests = 0
  let tokenUri = ''

  const server = createServer((req, res) => {
    requests++
    readBody(req)
      .then((body) => route(req, body))
      .then(
        ({ status, json }) => send(res, status, json),
        (error: unknown) => {
          const refusal =
            error instanceof ApiError ? error : new ApiError(500, 'INTERNAL', 'Internal error encountered.')
          send(res, refusal.httpStatus, {
            error: { code: refusal.httpStatus, message: refusal.message, status: refusal.status },
          })
        },
      )
  })

  async function route(req: IncomingMessage, body: Buffer): Promise<{ status: number; json: unknown }> {
    const unavailable = new ApiError(503, 'UNAVAILABLE', 'The service is currently unavailable.')
    if (down === 'all') throw unavailable
    const url = new URL(req.url ?? '/', 'http://fake')
    const method = req.method ?? 'GET'
    if (url.pathname === '/token' && method === 'POST') return grantToken(body)
    if (down === 'kms') throw unavailable
    if (!url.pathname.startsWith('/v1/')) throw new ApiError(404, 'NOT_FOUND', 'Not found.')
    const token = /^Bearer (.+)$/.exec(req.headers.authorization ?? '')?.[1]
    if (!token || !tokens.has(token)) {
      throw new ApiError(401, 'UNAUTHENTICATED', 'Request had invalid authentication credentials.')
    }
    if (permissionDenied) {
      throw new ApiError(
        403,
        'PERMISSION_DENIED',
        "Permission 'cloudkms.cryptoKeys.create' denied on resource.",
      )
    }
    const request: ApiRequest = {
      path: decodeURIComponent(url.pathname.slice('/v1/'.length)),
      query: url.searchParams,
      input: body.length > 0 ? (JSON.parse(body.toString('utf8')) as Record<string, unknown>) : {},
      enumOut:
        url.searchParams.get('$alt') === 'json;enum-encoding=int'
          ? (table, name) => table[name]
          : (_, name) => name,
    }
    for (const [routeMethod, pattern, handle] of routes) {
      const match = routeMethod === method ? pattern.exec(request.path) : null
      if (match) return ok(await handle(request, match[1] ?? request.path))
    }
    throw new ApiError(404, 'NOT_FOUND', 'The requested URL was not found on this server.')
  }

  const KEY_RING = 'projects/[^/]+/locations/[^/]+/keyRings/[^/]+'
  const VERSION = `${KEY_RING}/cryptoKeys/[^/]+/cryptoKeyVersions/[0-9]+`
  /** Each REST method the SDK calls: the HTTP method, the path (group 1: the resource acted on), the handler. */
  const routes: [string, RegExp, (request: ApiRequest, resource: string) => unknown][] = [
    ['GET', /^(projects\/[^/]+\/locations\/[^/]+)\/keyRings$/, (_, location) => listKeyRings(location)],
    [
      'POST',
      new RegExp(`^(${KEY_RING})/cryptoKeys$`),
      (r, keyRing) => cryptoKeyJson(createCryptoKey(keyRing, r.query, r.input), r.enumOut),
    ],
    ['GET', new RegExp(`^${KEY_RING}/cryptoKeys/[^/]+$`), (r, name) => cryptoKeyJson(name, r.enumOut)],
    [
      'POST',
      new RegExp(`^(${KEY_RING})/importJobs$`),
      async (r, keyRing) => importJobJson(await createImportJob(keyRing, r.query, r.input), r.enumOut),
    ],
    ['GET', new RegExp(`^${KEY_RING}/importJobs/[^/]+$`), (r, name) => getImportJob(name, r.enumOut)],
    [
      'POST',
      new RegExp(`^(${KEY_RING}/cryptoKeys/[^/]+)/cryptoKeyVersions:import$`),
      (r, cryptoKey) => versionJson(importVersion(cryptoKey, r.input), r.enumOut),
    ],
    ['GET', new RegExp(`^${VERSION}$`), (r, name) => versionJson(name, r.enumOut)],
    ['GET', new RegExp(`^(${VERSION})/publicKey$`), (r, name) => publicKeyJson(name, r.enumOut)],
    ['POST', new RegExp(`^(${VERSION}):asymmetricSign$`), (r, name) => asymmetricSign(name, r.input)],
    ['POST', new RegExp(`^(${VERSION}):asymmetricDecrypt$`), (r, name) => asymmetricDecrypt(name, r.input)],
  ]

  function listKeyRings(location: string) {
    const rings = [...keyRings].filter((name) => name.startsWith(`${location}/keyRings/`))
    return { keyRings: rings.map((name) => ({ name, createTime: EPOCH })), totalSize: rings.length }
  }

  function getImportJob(name: string, e: EnumOut) {
    const job = importJobs.get(name)
    if (!job) throw new ApiError(404, 'NOT_FOUND', `ImportJob ${name} not found.`)
    // Generation takes a moment at Google: the job turns ACTIVE by the time it is read again.
    job.state = 'ACTIVE'
    return importJobJson(name, e)
  }

  function publicKeyJson(name: string, e: EnumOut) {
    const version = versionOf(name)
    return {
      name,
      pem: createPublicKeyPem(version.privateKey),
      algorithm: e(ALGORITHM, version.algorithm),
      protectionLevel: e(PROTECTION_LEVEL, version.protectionLevel),
    }
  }

  // -------------------------------------------------------------------------------------------
  // OAuth

  function grantToken(body: Buffer): { status: number; json: unknown } {
    const form = new URLSearchParams(body.toString('utf8'))
    const refuse = (description: string) => ({
      status: 400,
      json: { error: 'invalid_grant', error_description: description },
    })
    if (form.get('grant_type') !== JWT_BEARER_GRANT) {
      return {
        status: 400,
        json: { error: 'unsupported_grant_type', error_description: 'Invalid grant_type.' },
      }
    }
    const parts = (form.get('assertion') ?? '').split('.')
    if (parts.length !== 3) return refuse('Invalid JWT.')
    const [header, payload, signature] = parts as [string, string, string]
    const decoded = (part: string) => {
      try {
        return JSON.parse(Buffer.from(part, 'base64url').toString('utf8')) as Record<string, unknown>
      } catch {
        return undefined
      }
    }
    if (decoded(header)?.['alg'] !== 'RS256') return refuse('Invalid JWT: unsupported algorithm.')
    const signed = verify(
      'sha256',
      Buffer.from(`${header}.${payload}`),
      account.publicKey,
      Buffer.from(signature, 'base64url'),
    )
    if (!signed) return refuse('Invalid JWT Signature.')
    const claims = decoded(payload) ?? {}
    const now = Math.floor(Date.now() / 1000)
    const { iss, aud, scope, iat, exp } = claims
    if (iss !== clientEmail) return refuse('Invalid JWT: unknown issuer.')
    if (aud !== tokenUri) return refuse('Invalid JWT: audience is not the token endpoint.')
    if (
      typeof iat !== 'number' ||
      typeof exp !== 'number' ||
      iat > now + 60 ||
      exp <= now ||
      exp - iat > 3600
    ) {
      return refuse(
        'Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe.',
      )
    }
    if (typeof scope !== 'string' || !scope.split(' ').some((s) => KMS_SCOPES.has(s))) {
      return { status: 400, json: { error: 'invalid_scope', error_description: 'Invalid OAuth scope.' } }
    }
    const accessToken = `ya29.fake-${randomBytes(24).toString('base64url')}`
    tokens.add(accessToken)
    return ok({ access_token: accessToken, expires_in: 3599, token_type: 'Bearer' })
  }

  // -------------------------------------------------------------------------------------------
  // Crypto keys and import jobs

  function createCryptoKey(keyRing: string, query: URLSearchParams, input: Record<string, unknown>): string {
    requireKeyRing(keyRing)
    const id = query.get('cryptoKeyId') ?? ''
    if (!ID.test(id)) throw new ApiError(400, 'INVALID_ARGUMENT', 'Invalid crypto key id.')
    const purpose = enumIn(PURPOSE, input['purpose'])
    const template = isRecord(input['versionTemplate']) ? input['versionTemplate'] : {}
    const algorithm = enumIn(ALGORITHM, template['algorithm'])
    const protectionLevel = enumIn(PROTECTION_LEVEL, template['protectionLevel'] ?? 'SOFTWARE')
    if (!purpose || !algorithm || !protectionLevel || ALGORITHM_SHAPE[algorithm].purpose !== purpose) {
      throw new ApiError(400, 'INVALID_ARGUMENT', 'The purpose and algorithm of the crypto key do not agree.')
    }
    const skip = query.get('skipInitialVersionCreation') === 'true'
    const importOnly = input['importOnly'] === true
    if (importOnly && !skip) {
      throw new ApiError(
        400,
        'INVALID_ARGUMENT',
        'Import-only crypto keys need skip_initial_version_creation.',
      )
    }
    if (!skip)
      throw new ApiError(400, 'INVALID_ARGUMENT', 'The fake only creates keys without a first version.')
    const name = `${keyRing}/cryptoKeys/${id}`
    if (cryptoKeys.has(name)) throw new ApiError(409, 'ALREADY_EXISTS', `CryptoKey ${name} already exists.`)
    cryptoKeys.set(name, {
      purpose,
      algorithm,
      protectionLevel,
      importOnly,
      createTime: new Date().toISOString(),
    })
    return name
  }

  async function createImportJob(
    keyRing: string,
    query: URLSearchParams,
    input: Record<string, unknown>,
  ): Promise<string> {
    requireKeyRing(keyRing)
    const id = query.get('importJobId') ?? ''
    if (!ID.test(id)) throw new ApiError(400, 'INVALID_ARGUMENT', 'Invalid import job id.')
    const importMethod = enumIn(IMPORT_METHOD, input['importMethod'])
    const protectionLevel = enumIn(PROTECTION_LEVEL, input['protectionLevel'])
    if (!importMethod || !protectionLevel)
      throw new ApiError(400, 'INVALID_ARGUMENT', 'Invalid import method or protection level.')
    const name = `${keyRing}/importJobs/${id}`
    if (importJobs.has(name)) throw new ApiError(409, 'ALREADY_EXISTS', `ImportJob ${name} already exists.`)
    const bits = importMethod.includes('_4096_') ? 4096 : 3072
    const pair = await generateRsa('rsa', { modulusLength: bits })
    importJobs.set(name, {
      importMethod,
      protectionLevel,
      state: 'PENDING_GENERATION',
      privateKey: pair.privateKey,
      publicKeyPem: String(pair.publicKey.export({ format: 'pem', type: 'spki' })),
      createTime: new Date().toISOString(),
    })
    return name
  }

  function requireKeyRing(name: string) {
    if (!keyRings.has(name)) throw new ApiError(404, 'NOT_FOUND', `KeyRing ${name} not found.`)
  }

  // -------------------------------------------------------------------------------------------
  // Import

  function importVersion(cryptoKeyName: string, input: Record<string, unknown>): string {
    const key = cryptoKeys.get(cryptoKeyName)
    if (!key) throw new ApiError(404, 'NOT_FOUND', `CryptoKey ${cryptoKeyName} not found.`)
    const algorithm = enumIn(ALGORITHM, input['algorithm'])
    if (!algorithm || ALGORITHM_SHAPE[algorithm].purpose !== key.purpose) {
      throw new ApiError(
        400,
        'INVALID_ARGUMENT',
        'The algorithm does not match the purpose of the crypto key.',
      )
    }
    const jobName = typeof input['importJob'] === 'string' ? input['importJob'] : ''
    const job = importJobs.get(jobName)
    if (!job) throw new ApiError(404, 'NOT_FOUND', `ImportJob ${jobName} not found.`)
    if (job.state !== 'ACTIVE')
      throw new ApiError(400, 'FAILED_PRECONDITION', 'The import job is not active.')
    if (job.protectionLevel !== key.protectionLevel) {
      throw new ApiError(
        400,
        'FAILED_PRECONDITION',
        'The import job and the crypto key have different protection levels.',
      )
    }
    const wrapped =
      typeof input['wrappedKey'] === 'string' ? Buffer.from(input['wrappedKey'], 'base64') : undefined
    if (!wrapped) throw new ApiError(400, 'INVALID_ARGUMENT', 'wrapped_key is required.')
    const privateKey = unwrap(job, wrapped)
    if (
      privateKey.asymmetricKeyType !== 'rsa' ||
      privateKey.asymmetricKeyDetails?.modulusLength !== ALGORITHM_SHAPE[algorithm].bits
    ) {
      throw new ApiError(400, 'INVALID_ARGUMENT', 'The imported key does not match the algorithm.')
    }
    const number =
      [...versions.keys()].filter((name) => name.startsWith(`${cryptoKeyName}/cryptoKeyVersions/`)).length + 1
    const name = `${cryptoKeyName}/cryptoKeyVersions/${number}`
    versions.set(name, {
      algorithm,
      protectionLevel: key.protectionLevel,
      importJob: jobName,
      privateKey,
      createTime: new Date().toISOString(),
    })
    return name
  }

  /** RSA-OAEP for the AES key, AES-KWP for the PKCS#8 DER: what Google does with an import. */
  function unwrap(job: ImportJob, wrapped: Buffer): KeyObject {
    const rsaBytes = (job.privateKey.asymmetricKeyDetails?.modulusLength ?? 0) / 8
    const hash = job.importMethod.includes('_SHA1_') ? 'sha1' : 'sha256'
    try {
      const aesKey = privateDecrypt(
        { key: job.privateKey, padding: constants.RSA_PKCS1_OAEP_PADDING, oaepHash: hash },
        wrapped.subarray(0, rsaBytes),
      )
      if (aesKey.length !== 32) throw new Error('not an AES-256 key')
      const kwp = createDecipheriv('id-aes256-wrap-pad', aesKey, AES_KWP_IV)
      const der = Buffer.concat([kwp.update(wrapped.subarray(rsaBytes)), kwp.final()])
      return createPrivateKey({ key: der, format: 'der', type: 'pkcs8' })
    } catch {
      throw new ApiError(400, 'INVALID_ARGUMENT', 'The wrapped key could not be unwrapped.')
    }
  }

  // -------------------------------------------------------------------------------------------
  // Using a version

  function asymmetricSign(name: string, input: Record<string, unknown>) {
    const version = versionOf(name)
    if (ALGORITHM_SHAPE[version.algorithm].purpose !== 'ASYMMETRIC_SIGN') {
      throw new ApiError(400, 'FAILED_PRECONDITION', 'The key version is not a signing key.')
    }
    const digest =
      isRecord(input['digest']) && typeof input['digest']['sha256'] === 'string'
        ? Buffer.from(input['digest']['sha256'], 'base64')
        : undefined
    if (digest?.length !== 32) throw new ApiError(400, 'INVALID_ARGUMENT', 'A SHA-256 digest is required.')
    return {
      name,
      signature: signPss(version.privateKey, digest).toString('base64'),
      verifiedDigestCrc32c: false,
    }
  }

  function asymmetricDecrypt(name: string, input: Record<string, unknown>) {
    const version = versionOf(name)
    if (ALGORITHM_SHAPE[version.algorithm].purpose !== 'ASYMMETRIC_DECRYPT') {
      throw new ApiError(400, 'FAILED_PRECONDITION', 'The key version is not a decryption key.')
    }
    const ciphertext =
      typeof input['ciphertext'] === 'string' ? Buffer.from(input['ciphertext'], 'base64') : Buffer.alloc(0)
    try {
      const plaintext = privateDecrypt(
        { key: version.privateKey, padding: constants.RSA_PKCS1_OAEP_PADDING, oaepHash: 'sha256' },
        ciphertext,
      )
      return { plaintext: plaintext.toString('base64'), verifiedCiphertextCrc32c: false }
    } catch {
      throw new ApiError(400, 'INVALID_ARGUMENT', 'Decryption failed.')
    }
  }

  function versionOf(name: string): Version {
    const version = versions.get(name)
    if (!version) throw new ApiError(404, 'NOT_FOUND', `CryptoKeyVersion ${name} not found.`)
    return version
  }

  // -------------------------------------------------------------------------------------------
  // Resources as JSON

  function cryptoKeyJson(name: string, e: EnumOut) {
    const key = cryptoKeys.get(name)
    if (!key) throw new ApiError(404, 'NOT_FOUND', `CryptoKey ${name} not found.`)
    return {
      name,
      purpose: e(PURPOSE, key.purpose),
      createTime: key.createTime,
      versionTemplate: {
        protectionLevel: e(PROTECTION_LEVEL, key.protectionLevel),
        algorithm: e(ALGORITHM, key.algorithm),
      },
      importOnly: key.importOnly,
      destroyScheduledDuration: '2592000s',
    }
  }

  function importJobJson(name: string, e: EnumOut) {
    const job = importJobs.get(name)!
    return {
      name,
      importMethod: e(IMPORT_METHOD, job.importMethod),
      protectionLevel: e(PROTECTION_LEVEL, job.protectionLevel),
      createTime: job.createTime,
      state: e(IMPORT_JOB_STATE, job.state),
      ...(job.state === 'ACTIVE' ? { publicKey: { pem: job.publicKeyPem } } : {}),
    }
  }

  function versionJson(name: string, e: EnumOut) {
    const version = versionOf(name)
    return {
      name,
      state: e(VERSION_STATE, 'ENABLED'),
      protectionLevel: e(PROTECTION_LEVEL, version.protectionLevel),
      algorithm: e(ALGORITHM, version.algorithm),
      createTime: version.createTime,
      importJob: version.importJob,
      importTime: version.createTime,
    }
  }

  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  tokenUri = `${url}/token`
  return {
    url,
    tokenUri,
    serviceAccount: {
      clientEmail,
      privateKey: String(account.privateKey.export({ format: 'pem', type: 'pkcs8' })),
    },
    versions: () =>
      new Map([...versions].map(([name, v]) => [name, { algorithm: v.algorithm, privateKey: v.privateKey }])),
    requestCount: () => requests,
    setDown(value, scope = 'all') {
      down = value ? scope : false
    },
    setPermissionDenied(value) {
      permissionDenied = value
    },
    stop: () =>
      new Promise<void>((resolve, reject) => {
        server.closeAllConnections()
        server.close((error) => (error ? reject(error) : resolve()))
      }),
  }
}

const EPOCH = '1970-01-01T00:00:00Z'

const ok = (json: unknown) => ({ status: 200, json })

function send(res: ServerResponse, status: number, json: unknown) {
  const body = JSON.stringify(json)
  res.writeHead(status, {
    'content-type': 'application/json; charset=UTF-8',
    'content-length': Buffer.byteLength(body),
  })
  res.end(body)
}

function readBody(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = []
    req.on('data', (chunk: Buffer) => chunks.push(chunk))
    req.once('end', () => resolve(Buffer.concat(chunks)))
    req.once('error', reject)
  })
}

/** An enum field as the SDK sends it (a number) or as JSON clients write it (a name). */
function enumIn<T extends EnumTable>(table: T, value: unknown): (keyof T & string) | undefined {
  if (typeof value === 'string' && Object.hasOwn(table, value)) return value
  if (typeof value === 'number') return Object.keys(table).find((name) => table[name] === value)
  return undefined
}

/** The SPKI PEM of a private key's public half (what getPublicKey returns). */
function createPublicKeyPem(privateKey: KeyObject): string {
  return String(createPublicKey(privateKey).export({ format: 'pem', type: 'spki' }))
}

/**
 * RSASSA-PSS over a digest the caller made (RFC 8017 9.1.1, SHA-256, MGF1-SHA-256, salt of the
 * digest's length, as Cloud KMS's RSA_SIGN_PSS_*_SHA256): node:crypto signs messages, not digests,
 * so the encoding is done here and the RSA private operation is a raw (unpadded) one.
 */
function signPss(privateKey: KeyObject, digest: Buffer): Buffer {
  const modulusBits = privateKey.asymmetricKeyDetails?.modulusLength ?? 0
  const emBits = modulusBits - 1
  const emLength = Math.ceil(emBits / 8)
  const salt = randomBytes(PSS_SALT_BYTES)
  const h = createHash('sha256').update(Buffer.alloc(8)).update(digest).update(salt).digest()
  const db = Buffer.concat([Buffer.alloc(emLength - PSS_SALT_BYTES - h.length - 2), Buffer.from([1]), salt])
  const mask = mgf1(h, db.length)
  for (let i = 0; i < db.length; i++) db[i] = db[i]! ^ mask[i]!
  db[0] = db[0]! & (0xff >> (8 * emLength - emBits))
  const em = Buffer.concat([db, h, Buffer.from([0xbc])])
  const k = modulusBits / 8
  const block = Buffer.concat([Buffer.alloc(k - em.length), em])
  return privateDecrypt({ key: privateKey, padding: constants.RSA_NO_PADDING }, block)
}

function mgf1(seed: Buffer, length: number): Buffer {
  const blocks: Buffer[] = []
  for (let counter = 0; blocks.length * 32 < length; counter++) {
    const c = Buffer.alloc(4)
    c.writeUInt32BE(counter)
    blocks.push(createHash('sha256').update(seed).update(c).digest())
  }
  return Buffer.concat(blocks).subarray(0, length)
}

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value)
