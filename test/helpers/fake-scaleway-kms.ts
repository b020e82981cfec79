import {
  constants,
  createHash,
  createPrivateKey,
  createPublicKey,
  type KeyObject,
  privateDecrypt,
  privateEncrypt,
  randomBytes,
  randomUUID,
  sign,
} from 'node:crypto'
import http, { type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { p256, p384, p521 } from '@noble/curves/nist.js'

/**
 * A local Scaleway Key Manager (API v1alpha1) as @scaleway/sdk-key-manager speaks to it: the
 * same paths, snake_case JSON, `X-Auth-Token` authentication and Scaleway's error bodies (which
 * the SDK parses into its typed errors). It holds external keys only: create (state
 * pending_key_material), import of the private key (base64 PKCS#8 DER, parsed with node:crypto and
 * checked against the key's algorithm), get, list, public key, and sign (over a digest, as the
 * real API: RSA-PSS with a salt as long as the hash, PKCS#1 v1.5, ECDSA in DER). Ed25519 and
 * P-521, which the spec's "Scaleway-type KMS" offers beyond SDK 1.5.0's enums, sign the `digest`
 * field as the message (Ed25519 signs messages, not digests).
 */

type UsageKind = 'asymmetric_signing' | 'asymmetric_encryption'
type HashName = 'sha256' | 'sha384' | 'sha512'

interface AlgorithmSpec {
  usage: UsageKind
  /** Whether a parsed private key is of this algorithm. */
  fits(key: KeyObject): boolean
  /** Signs a digest (Ed25519: the message); absent for encryption keys. */
  sign?(key: KeyObject, digest: Buffer): Buffer
  hash?: HashName
}

const HASH_BYTES: Record<HashName, number> = { sha256: 32, sha384: 48, sha512: 64 }

const rsaOf = (bits: number) => (key: KeyObject) =>
  key.asymmetricKeyType === 'rsa' && key.asymmetricKeyDetails?.modulusLength === bits
const curveOf = (curve: string) => (key: KeyObject) =>
  key.asymmetricKeyType === 'ec' && key.asymmetricKeyDetails?.namedCurve === curve

const ALGORITHMS: Record<string, AlgorithmSpec> = {
  ...Object.fromEntries(
    [2048, 3072, 4096].flatMap((bits) => [
      [
        `rsa_pss_${bits}_sha256`,
        { usage: 'asymmetric_signing', fits: rsaOf(bits), hash: 'sha256', sign: signRsaPss('sha256') },
      ],
      [
        `rsa_pkcs1_${bits}_sha256`,
        { usage: 'asymmetric_signing', fits: rsaOf(bits), hash: 'sha256', sign: signRsaPkcs1 },
      ],
      [`rsa_oaep_${bits}_sha256`, { usage: 'asymmetric_encryption', fits: rsaOf(bits) }],
    ]),
  ),
  ec_p256_sha256: {
    usage: 'asymmetric_signing',
    fits: curveOf('prime256v1'),
    hash: 'sha256',
    sign: signEcdsa(p256),
  },
  ec_p384_sha384: {
    usage: 'asymmetric_signing',
    fits: curveOf('secp384r1'),
    hash: 'sha384',
    sign: signEcdsa(p384),
  },
  ec_p521_sha512: {
    usage: 'asymmetric_signing',
    fits: curveOf('secp521r1'),
    hash: 'sha512',
    sign: signEcdsa(p521),
  },
  ed25519: {
    usage: 'asymmetric_signing',
    fits: (key) => key.asymmetricKeyType === 'ed25519',
    sign: (key, message) => sign(null, message, key),
  },
}

export interface FakeScalewayKey {
  id: string
  projectId: string
  region: string
  name: string
  description: string
  tags: string[]
  origin: 'external'
  usage: UsageKind
  /** The usage's algorithm, e.g. rsa_pss_2048_sha256. */
  algorithm: string
  state: 'pending_key_material' | 'enabled'
  createdAt: Date
  updatedAt: Date
  /** The imported material, as node:crypto parsed it. */
  privateKey?: KeyObject
  publicKey?: KeyObject
  /** How many materials were imported into this key (one at most: a second import is refused). */
  imports: number
}

export interface FakeScalewayKms {
  /** The API origin, for the connection's apiUrl. */
  url: string
  keys(): ReadonlyMap<string, FakeScalewayKey>
  /** `METHOD path` of every request received, in order (no bodies, no headers). */
  requests(): readonly string[]
  /** While down, every request gets a 503. */
  setDown(down: boolean): void
  /** The next request to this action (e.g. `import-key-material`, `create`) gets a 503. */
  failNext(action: string): void
  stop(): Promise<void>
}

export interface FakeScalewayOptions {
  secretKey: string
  /** The one project the secret key may use (others: 403 permissions_denied). */
  projectId: string
}

const KEYS_PATH = /^\/key-manager\/v1alpha1\/regions\/([^/]+)\/keys(?:\/([^/]+)(?:\/([a-z-]+))?)?$/
const REGIONS = new Set(['fr-par', 'nl-ams', 'pl-waw'])
const MAX_BODY = 1024 * 1024

class ApiError extends Error {
  readonly status: number
  readonly body: Record<string, unknown>
  constructor(status: number, body: Record<string, unknown>) {
    super(String(body.message))
    this.status = status
    this.body = body
  }
}

const invalidArgument = (argument: string, help: string) =>
  new ApiError(400, {
    type: 'invalid_arguments',
    message: 'invalid argument(s)',
    details: [{ argument_name: argument, reason: 'constraint', help_message: help }],
  })
const preconditionFailed = (help: string) =>
  new ApiError(412, {
    type: 'precondition_failed',
    message: 'precondition failed',
    precondition: 'unknown_precondition',
    help_message: help,
  })
const notFound = (resource: string, id: string) =>
  new ApiError(404, { type: 'not_found', message: 'resource is not found', resource, resource_id: id })

export async function startFakeScalewayKms(options: FakeScalewayOptions): Promise<FakeScalewayKms> {
  const keys = new Map<string, FakeScalewayKey>()
  const log: string[] = []
  const failing = new Set<string>()
  let down = false

  async function handle(req: IncomingMessage): Promise<{ status: number; body: unknown }> {
    const url = new URL(req.url ?? '/', 'http://fake')
    log.push(`${req.method} ${url.pathname}`)
    if (down) throw new ApiError(503, { message: 'service unavailable' })
    if (req.headers['x-auth-token'] !== options.secretKey) {
      throw new ApiError(401, {
        type: 'denied_authentication',
        message: 'authentication is denied',
        method: 'api_key',
        reason: 'not_found',
      })
    }
    const match = KEYS_PATH.exec(url.pathname)
    if (!match)
      throw new ApiError(404, {
        type: 'not_found',
        message: 'route not found',
        resource: 'route',
        resource_id: url.pathname,
      })
    const [, region = '', keyId, action] = match
    if (!REGIONS.has(region)) throw invalidArgument('region', `unknown region ${region}`)
    const actionName = action ?? (keyId ? 'key' : req.method === 'POST' ? 'create' : 'list')
    if (failing.delete(actionName)) throw new ApiError(503, { message: 'service unavailable' })

    if (!keyId) {
      if (req.method === 'POST') return { status: 200, body: toJson(createKey(region, await readJson(req))) }
      if (req.method === 'GET') return { status: 200, body: listKeys(region, url.searchParams) }
    } else {
      const key = keys.get(keyId)
      if (!key || key.region !== region) throw notFound('key', keyId)
      if (!action && req.method === 'GET') return { status: 200, body: toJson(key) }
      if (action === 'import-key-material' && req.method === 'POST') {
        return { status: 200, body: toJson(importKeyMaterial(key, await readJson(req))) }
      }
      if (action === 'public-key' && req.method === 'GET') return { status: 200, body: publicKeyOf(key) }
      if (action === 'sign' && req.method === 'POST')
        return { status: 200, body: signDigest(key, await readJson(req)) }
      if (action === 'rotate' && req.method === 'POST') {
        // Rotation has Key Manager generate new material: nothing an external key can take.
        throw preconditionFailed('keys with an external origin cannot be rotated')
      }
    }
    throw new ApiError(405, { message: 'method not allowed' })
  }

  function checkProject(projectId: unknown): string {
    if (typeof projectId !== 'string' || projectId === '') throw invalidArgument('project_id', 'is required')
    if (projectId !== options.projectId) {
      throw new ApiError(403, {
        type: 'permissions_denied',
        message: 'insufficient permissions',
        details: [{ resource: 'key_manager', action: 'read' }],
      })
    }
    return projectId
  }

  function createKey(region: string, body: Record<string, unknown>): FakeScalewayKey {
    const projectId = checkProject(body.project_id)
    const usage = body.usage as Record<string, unknown> | undefined
    const entries = Object.entries(usage ?? {}).filter(([, v]) => v !== undefined && v !== null)
    if (entries.length !== 1) throw invalidArgument('usage', 'exactly one usage must be set')
    const [kind, algorithm] = entries[0] as [string, unknown]
    const spec = typeof algorithm === 'string' ? ALGORITHMS[algorithm] : undefined
    if (!spec || spec.usage !== kind)
      throw invalidArgument(`usage.${kind}`, 'unknown algorithm for this usage')
    if (body.origin !== 'external') throw invalidArgument('origin', 'this fake holds external keys only')
    const tags = body.tags ?? []
    if (!Array.isArray(tags) || !tags.every((t) => typeof t === 'string'))
      throw invalidArgument('tags', 'must be strings')
    const now = new Date()
    const key: FakeScalewayKey = {
      id: randomUUID(),
      projectId,
      region,
      name:
        typeof body.name === 'string' && body.name !== ''
          ? body.name
          : `key-${randomBytes(4).toString('hex')}`,
      description: typeof body.description === 'string' ? body.description : '',
      tags,
      origin: 'external',
      usage: spec.usage,
      algorithm: algorithm as string,
      state: 'pending_key_material',
      createdAt: now,
      updatedAt: now,
      imports: 0,
    }
    keys.set(key.id, key)
    return key
  }

  function listKeys(region: string, query: URLSearchParams) {
    if (!query.get('project_id') && !query.get('organization_id')) {
      throw invalidArgument('project_id', 'project_id or organization_id is required')
    }
    if (query.get('project_id')) checkProject(query.get('project_id'))
    const name = query.get('name')
    const tags = query.getAll('tags')
    const usage = query.get('usage')
    const pageSize = Math.min(Number(query.get('page_size') ?? 20), 100)
    const page = Math.max(Number(query.get('page') ?? 1), 1)
    const order = query.get('order_by') ?? 'created_at_asc'
    const found = [...keys.values()]
      .filter(
        (k) =>
          k.region === region &&
          (!query.get('project_id') || k.projectId === query.get('project_id')) &&
          (!name || k.name.includes(name)) &&
          tags.every((t) => k.tags.includes(t)) &&
          (!usage || k.usage === usage),
      )
      .sort((a, b) => a.createdAt.getTime() - b.createdAt.getTime())
    if (order === 'created_at_desc') found.reverse()
    return {
      keys: found.slice((page - 1) * pageSize, page * pageSize).map(toJson),
      total_count: found.length,
    }
  }

  function importKeyMaterial(key: FakeScalewayKey, body: Record<string, unknown>): FakeScalewayKey {
    if (key.state !== 'pending_key_material')
      throw preconditionFailed('key material has already been imported')
    if (body.salt !== undefined && body.salt !== null) {
      throw invalidArgument('salt', 'a salt only applies to symmetric key material')
    }
    const der = decodeBase64('key_material', body.key_material)
    let privateKey: KeyObject
    try {
      privateKey = createPrivateKey({ key: der, format: 'der', type: 'pkcs8' })
    } catch {
      throw invalidArgument('key_material', 'is not a PKCS#8 DER private key')
    } finally {
      der.fill(0)
    }
    if (!ALGORITHMS[key.algorithm]!.fits(privateKey)) {
      throw invalidArgument('key_material', `does not match the key algorithm ${key.algorithm}`)
    }
    key.privateKey = privateKey
    key.publicKey = createPublicKey(privateKey)
    key.state = 'enabled'
    key.imports += 1
    key.updatedAt = new Date()
    return key
  }

  function publicKeyOf(key: FakeScalewayKey) {
    if (key.state !== 'enabled' || !key.publicKey) throw preconditionFailed('the key has no key material')
    return { pem: key.publicKey.export({ format: 'pem', type: 'spki' }).toString() }
  }

  function signDigest(key: FakeScalewayKey, body: Record<string, unknown>) {
    const spec = ALGORITHMS[key.algorithm]!
    if (!spec.sign) throw preconditionFailed('the key usage must be asymmetric_signing')
    if (key.state !== 'enabled' || !key.privateKey) throw preconditionFailed('the key has no key material')
    const digest = decodeBase64('digest', body.digest)
    if (spec.hash && digest.length !== HASH_BYTES[spec.hash]) {
      throw invalidArgument('digest', `must be a ${spec.hash} digest`)
    }
    return { key_id: key.id, signature: spec.sign(key.privateKey, digest).toString('base64') }
  }

  const server = http.createServer((req, res) => {
    handle(req).then(
      ({ status, body }) => answer(res, status, body),
      (error: unknown) =>
        error instanceof ApiError
          ? answer(res, error.status, error.body)
          : answer(res, 500, { message: 'internal error', type: 'internal' }),
    )
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo

  return {
    url: `http://127.0.0.1:${port}`,
    keys: () => keys,
    requests: () => log,
    setDown: (value) => {
      down = value
    },
    failNext: (action) => failing.add(action),
    stop: () =>
      new Promise((resolve, reject) => {
        server.closeAllConnections()
        server.close((error) => (error ? reject(error) : resolve()))
      }),
  }
}

function toJson(key: FakeScalewayKey) {
  return {
    id: key.id,
    project_id: key.projectId,
    name: key.name,
    usage: { [key.usage]: key.algorithm },
    state: key.state,
    rotation_count: 0,
    created_at: key.createdAt.toISOString(),
    updated_at: key.updatedAt.toISOString(),
    protected: true,
    locked: false,
    description: key.description,
    tags: key.tags,
    rotated_at: null,
    rotation_policy: null,
    origin: key.origin,
    deletion_requested_at: null,
    region: key.region,
  }
}

function answer(res: ServerResponse, status: number, body: unknown) {
  // Exactly this content type: the SDK parses JSON only when it reads `application/json`.
  res.writeHead(status, { 'content-type': 'application/json' })
  res.end(JSON.stringify(body))
}

async function readJson(req: IncomingMessage): Promise<Record<string, unknown>> {
  const chunks: Buffer[] = []
  let length = 0
  for await (const chunk of req as AsyncIterable<Buffer>) {
    length += chunk.length
    if (length > MAX_BODY) throw new ApiError(413, { message: 'request body too large' })
    chunks.push(chunk)
  }
  const raw = Buffer.concat(chunks)
  try {
    const parsed: unknown = JSON.parse(raw.toString('utf8') || '{}')
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed))
      throw new Error('not an object')
    return parsed as Record<string, unknown>
  } catch {
    throw new ApiError(400, { message: 'invalid JSON body', type: 'invalid_request_error' })
  } finally {
    // An import body holds key material.
    raw.fill(0)
    for (const c of chunks) c.fill(0)
  }
}

/** The API's `bytes` fields: standard base64, refused unless canonical. */
function decodeBase64(argument: string, value: unknown): Buffer {
  if (typeof value !== 'string' || value === '') throw invalidArgument(argument, 'is required')
  const bytes = Buffer.from(value, 'base64')
  if (bytes.toString('base64') !== value) {
    bytes.fill(0)
    throw invalidArgument(argument, 'must be base64')
  }
  return bytes
}

// ---------------------------------------------------------------------------------------------
// Signing a digest (node:crypto only signs messages it hashes itself)

/** EMSA-PSS (RFC 8017 9.1.1) with MGF1 and a salt as long as the hash, then the raw RSA operation. */
function signRsaPss(hash: HashName) {
  return (key: KeyObject, digest: Buffer): Buffer => {
    const hLen = HASH_BYTES[hash]
    const modBits = key.asymmetricKeyDetails!.modulusLength!
    const emBits = modBits - 1
    const emLen = Math.ceil(emBits / 8)
    const salt = randomBytes(hLen)
    const h = createHash(hash)
      .update(Buffer.concat([Buffer.alloc(8), digest, salt]))
      .digest()
    const db = Buffer.concat([Buffer.alloc(emLen - 2 * hLen - 2), Buffer.from([1]), salt])
    const mask = mgf1(hash, h, emLen - hLen - 1)
    for (let i = 0; i < db.length; i++) db[i]! ^= mask[i]!
    db[0]! &= 0xff >> (8 * emLen - emBits)
    const em = Buffer.concat([db, h, Buffer.from([0xbc])])
    const k = Math.ceil(modBits / 8)
    const block = Buffer.concat([Buffer.alloc(k - em.length), em])
    return privateDecrypt({ key, padding: constants.RSA_NO_PADDING }, block)
  }
}

function mgf1(hash: HashName, seed: Buffer, length: number): Buffer {
  const blocks: Buffer[] = []
  for (let counter = 0; blocks.length * HASH_BYTES[hash] < length; counter++) {
    const c = Buffer.alloc(4)
    c.writeUInt32BE(counter)
    blocks.push(createHash(hash).update(seed).update(c).digest())
  }
  return Buffer.concat(blocks).subarray(0, length)
}

/** EMSA-PKCS1-v1_5 over SHA-256: the DigestInfo, then private-key type-1 padding. */
function signRsaPkcs1(key: KeyObject, digest: Buffer): Buffer {
  const sha256DigestInfo = Buffer.from('3031300d060960864801650304020105000420', 'hex')
  return privateEncrypt(
    { key, padding: constants.RSA_PKCS1_PADDING },
    Buffer.concat([sha256DigestInfo, digest]),
  )
}

function signEcdsa(curve: typeof p256) {
  return (key: KeyObject, digest: Buffer): Buffer => {
    const secret = Buffer.from(key.export({ format: 'jwk' }).d!, 'base64url')
    try {
      return Buffer.from(curve.sign(digest, secret, { prehash: false, format: 'der' }))
    } finally {
      secret.fill(0)
    }
  }
}
