import {
  createPrivateKey,
  createPublicKey,
  decapsulate,
  encapsulate,
  generateKeyPairSync,
  type JsonWebKey,
  type KeyObject,
  randomBytes,
  sign,
  timingSafeEqual,
  verify,
} from 'node:crypto'
import { isStrictBase64 } from '../platform/base64.ts'
import { type Algorithm, type AlgorithmName, algorithmByName } from './algorithms.ts'
import {
  checkKdfCost,
  EncryptedKeyError,
  encryptedKeyCost,
  encryptPkcs8,
  MIN_EXPORT_PASSWORD_LENGTH,
  toPem,
} from './pkcs8-encryption.ts'

/**
 * Key material as stored (sealed) and exported. Pure functions over node:crypto, so the crypto
 * worker pool can run them off the event loop. Errors carry fixed messages: key material or a
 * password never reaches an error, and so never a log or a response.
 */

/** A version's material: PKCS#8 DER of the private key (or the HMAC secret) and the SPKI DER public key. */
export interface KeyMaterial {
  secret: Buffer
  publicKey: Buffer | null
}

export const IMPORT_FORMATS = ['PEM', 'PKCS#8', 'JWK', 'DER', 'RAW'] as const
export type ImportFormat = (typeof IMPORT_FORMATS)[number]
export const PUBLIC_FORMATS = ['PEM', 'DER', 'RAW', 'JWK'] as const
export type PublicFormat = (typeof PUBLIC_FORMATS)[number]
export const PRIVATE_FORMATS = ['PEM', 'DER', 'JWK', 'RAW'] as const
export type PrivateFormat = (typeof PRIVATE_FORMATS)[number]

/** A refusal the caller caused, with a stable code; the HTTP layer answers it with 400. */
export class KeyMaterialError extends Error {
  readonly code: string
  constructor(code: string, message: string) {
    super(message)
    this.code = code
  }
}

export function generateMaterial(name: AlgorithmName): KeyMaterial {
  const algorithm = algorithmByName(name)
  const spec = algorithm.spec
  if (spec.kind === 'hmac') return { secret: randomBytes(spec.secretBytes), publicKey: null }
  // biome-ignore lint/suspicious/noExplicitAny: generateKeyPairSync's overloads do not cover a computed type name
  const generate = generateKeyPairSync as (type: string, options: object) => any
  const options =
    spec.kind === 'rsa'
      ? { modulusLength: spec.modulusLength, publicExponent: 0x10001 }
      : spec.kind === 'ec'
        ? { namedCurve: spec.namedCurve }
        : {}
  const { privateKey } = generate(spec.kind, options) as { privateKey: KeyObject }
  return fromPrivateKey(privateKey)
}

function fromPrivateKey(privateKey: KeyObject): KeyMaterial {
  return {
    secret: privateKey.export({ format: 'der', type: 'pkcs8' }),
    publicKey: createPublicKey(privateKey).export({ format: 'der', type: 'spki' }),
  }
}

// ---------------------------------------------------------------------------------------------
// Import
// ---------------------------------------------------------------------------------------------

export interface ImportRequest {
  algorithm: AlgorithmName
  format: ImportFormat
  /** PEM text, Base64 of DER or raw bytes, or a JWK object. */
  material: string | Record<string, unknown>
  password?: string | undefined
}

function decodeBase64(text: string, what: string): Buffer {
  const compact = text.replace(/\s+/g, '')
  if (compact.length === 0 || !isStrictBase64(compact)) {
    throw new KeyMaterialError('invalid_key_material', `${what} must be standard Base64`)
  }
  return Buffer.from(compact, 'base64')
}

function asText(material: ImportRequest['material'], format: ImportFormat): string {
  if (typeof material !== 'string') {
    throw new KeyMaterialError('invalid_key_material', `keyMaterial must be a string for format ${format}`)
  }
  return material
}

const PEM_LABEL = /-----BEGIN ([A-Z0-9 ]+)-----/

/** Node/OpenSSL's parse errors, as this API's codes (never their text, which could quote input). */
function parseFailure(error: unknown, format: string, encrypted: boolean): KeyMaterialError {
  const code = (error as { code?: string }).code ?? ''
  if (code === 'ERR_MISSING_PASSPHRASE' || code === 'ERR_OSSL_CRYPTO_INTERRUPTED_OR_CANCELLED') {
    return new KeyMaterialError('password_required', 'The private key is encrypted; give its password')
  }
  // With a password, any failure is most likely the password: about 1 wrong password in 256 gets
  // past the CBC padding check and only fails when the garbage it decrypts to is parsed.
  if (encrypted) {
    return new KeyMaterialError(
      'incorrect_password',
      'The password does not decrypt the private key (or the encrypted key is damaged)',
    )
  }
  return new KeyMaterialError('invalid_key_material', `The key material is not a valid ${format} private key`)
}

function parsePem(text: string, format: ImportFormat, password: string | undefined): KeyObject {
  const label = PEM_LABEL.exec(text)?.[1]
  if (!label) throw new KeyMaterialError('invalid_key_material', `The key material is not ${format} text`)
  if (label.includes('PUBLIC KEY') || label === 'CERTIFICATE') {
    throw new KeyMaterialError('private_key_required', 'Import needs a private key, not a public key')
  }
  if (format === 'PKCS#8' && label !== 'PRIVATE KEY' && label !== 'ENCRYPTED PRIVATE KEY') {
    throw new KeyMaterialError('invalid_key_material', `A PKCS#8 key is labelled PRIVATE KEY, not ${label}`)
  }
  try {
    return createPrivateKey({
      key: text,
      format: 'pem',
      ...(password !== undefined ? { passphrase: password } : {}),
    })
  } catch (error) {
    // PKCS#8 says ENCRYPTED PRIVATE KEY; legacy OpenSSL PEM says Proc-Type: 4,ENCRYPTED.
    throw parseFailure(error, format, password !== undefined && text.includes('ENCRYPTED'))
  }
}

function parseDer(der: Buffer, format: ImportFormat, password: string | undefined): KeyObject {
  const passphrase = password !== undefined ? { passphrase: password } : {}
  // PKCS#8 first; plain DER may also be the traditional PKCS#1 (RSA) or SEC1 (EC) structure.
  const types = format === 'PKCS#8' ? (['pkcs8'] as const) : (['pkcs8', 'pkcs1', 'sec1'] as const)
  let first: unknown
  for (const type of types) {
    try {
      return createPrivateKey({ key: der, format: 'der', type, ...passphrase })
    } catch (error) {
      first ??= error
    }
  }
  throw parseFailure(first, format, password !== undefined && isEncryptedPkcs8(der))
}

/** PKCS#5 (PBES1/PBES2) and PKCS#12 PBE algorithm OID prefixes, DER-encoded. */
const PBE_OID_PREFIXES = [Buffer.from('2a864886f70d0105', 'hex'), Buffer.from('2a864886f70d010c01', 'hex')]

/** An EncryptedPrivateKeyInfo names its PBE scheme in the first bytes. */
function isEncryptedPkcs8(der: Buffer): boolean {
  const head = der.subarray(0, 32)
  return PBE_OID_PREFIXES.some((prefix) => head.includes(prefix))
}

const RAW_PRIVATE: Partial<Record<string, { format: 'raw-seed' | 'raw-private'; bytes: number }>> = {
  'ml-kem-512': { format: 'raw-seed', bytes: 64 },
  'ml-kem-768': { format: 'raw-seed', bytes: 64 },
  'ml-kem-1024': { format: 'raw-seed', bytes: 64 },
  'ml-dsa-44': { format: 'raw-seed', bytes: 32 },
  'ml-dsa-65': { format: 'raw-seed', bytes: 32 },
  'ml-dsa-87': { format: 'raw-seed', bytes: 32 },
  'slh-dsa-sha2-128s': { format: 'raw-private', bytes: 64 },
  ed25519: { format: 'raw-private', bytes: 32 },
}

const EC_SCALAR_BYTES: Record<string, number> = { 'P-256': 32, 'P-384': 48, 'P-521': 66 }

function parseRaw(bytes: Buffer, algorithm: Algorithm): KeyObject {
  const spec = algorithm.spec
  if (spec.kind === 'rsa') {
    throw new KeyMaterialError(
      'format_not_supported',
      'RSA keys have no RAW form; use PEM, PKCS#8, DER or JWK',
    )
  }
  if (spec.kind === 'ec') {
    const expected = EC_SCALAR_BYTES[spec.namedCurve]
    if (bytes.length !== expected) {
      throw new KeyMaterialError(
        'key_size_mismatch',
        `A RAW ${algorithm.name} private key is ${expected} bytes, not ${bytes.length}`,
      )
    }
    try {
      return createPrivateKey({
        key: bytes,
        format: 'raw-private',
        asymmetricKeyType: 'ec',
        namedCurve: spec.namedCurve,
      } as never)
    } catch (error) {
      throw parseFailure(error, 'RAW', false)
    }
  }
  const raw = RAW_PRIVATE[spec.kind]
  if (!raw) throw new KeyMaterialError('format_not_supported', `RAW is not supported for ${algorithm.name}`)
  if (bytes.length !== raw.bytes) {
    const what = raw.format === 'raw-seed' ? 'seed' : 'private key'
    throw new KeyMaterialError(
      'key_size_mismatch',
      `A RAW ${algorithm.name} ${what} is ${raw.bytes} bytes, not ${bytes.length}`,
    )
  }
  try {
    return createPrivateKey({ key: bytes, format: raw.format, asymmetricKeyType: spec.kind } as never)
  } catch (error) {
    throw parseFailure(error, 'RAW', false)
  }
}

function parseJwk(jwk: Record<string, unknown>): KeyObject {
  const hasPrivatePart = 'd' in jwk || 'priv' in jwk
  if (!hasPrivatePart) {
    throw new KeyMaterialError('private_key_required', 'Import needs a private JWK (with d or priv)')
  }
  let key: KeyObject
  try {
    key = createPrivateKey({ key: jwk as JsonWebKey, format: 'jwk' })
  } catch (error) {
    throw parseFailure(error, 'JWK', false)
  }
  // Node rebuilds Ed25519 and post-quantum keys from the private part alone and ignores x/pub:
  // a JWK whose public half belongs to another key must not slip through.
  const derived = createPublicKey(key).export({ format: 'jwk' }) as Record<string, unknown>
  for (const field of ['x', 'y', 'n', 'e', 'pub']) {
    const given = jwk[field]
    if (given === undefined) continue
    const same =
      typeof given === 'string' &&
      typeof derived[field] === 'string' &&
      Buffer.from(given, 'base64url').equals(Buffer.from(derived[field] as string, 'base64url'))
    if (!same) {
      throw new KeyMaterialError(
        'invalid_key_material',
        "The JWK's public part does not match its private key",
      )
    }
  }
  return key
}

function importHmacSecret(request: ImportRequest, algorithm: Algorithm): Buffer {
  const spec = algorithm.spec
  if (spec.kind !== 'hmac') throw new Error('not an HMAC algorithm')
  let secret: Buffer
  if (request.format === 'RAW') {
    secret = decodeBase64(asText(request.material, 'RAW'), 'keyMaterial')
  } else if (request.format === 'JWK') {
    const jwk = request.material
    if (typeof jwk !== 'object' || jwk['kty'] !== 'oct' || typeof jwk['k'] !== 'string') {
      throw new KeyMaterialError('invalid_key_material', 'An HMAC JWK has kty "oct" and the secret in k')
    }
    const given = jwk['alg']
    if (given !== undefined && given !== algorithm.jwkAlg.HMAC) {
      throw new KeyMaterialError(
        'algorithm_mismatch',
        `The JWK is for ${String(given)}, not ${algorithm.name}`,
      )
    }
    if (!/^[A-Za-z0-9_-]+$/.test(jwk['k'])) {
      throw new KeyMaterialError('invalid_key_material', 'The JWK secret k is not base64url')
    }
    secret = Buffer.from(jwk['k'], 'base64url')
  } else {
    throw new KeyMaterialError('format_not_supported', 'HMAC secrets are imported as RAW (Base64) or JWK')
  }
  // RFC 2104: shorter than the hash output weakens the MAC; longer than a block is hashed down anyway.
  if (secret.length < spec.secretBytes || secret.length > spec.blockBytes) {
    throw new KeyMaterialError(
      'key_size_mismatch',
      `An ${algorithm.name} secret is ${spec.secretBytes} to ${spec.blockBytes} bytes, not ${secret.length}`,
    )
  }
  return secret
}

function describe(key: KeyObject): string {
  const details = key.asymmetricKeyDetails ?? {}
  switch (key.asymmetricKeyType) {
    case 'rsa':
      return `an RSA-${details.modulusLength} key`
    case 'ec':
      return `an EC key on ${details.namedCurve}`
    default:
      return `an ${key.asymmetricKeyType} key`
  }
}

/** The parsed key must be exactly the declared algorithm: type, size and curve. */
function checkMatches(key: KeyObject, algorithm: Algorithm): void {
  const spec = algorithm.spec
  const details = key.asymmetricKeyDetails ?? {}
  const mismatch = () =>
    new KeyMaterialError('algorithm_mismatch', `The key material is ${describe(key)}, not ${algorithm.name}`)
  if (key.asymmetricKeyType !== spec.kind) {
    // An RSA-PSS-restricted key (type rsa-pss) lands here too: it can neither encrypt nor sign PKCS#1.
    throw mismatch()
  }
  if (spec.kind === 'rsa') {
    if (details.modulusLength !== spec.modulusLength) {
      throw new KeyMaterialError(
        'key_size_mismatch',
        `The key is ${describe(key).slice(3)}, not the ${spec.modulusLength}-bit key ${algorithm.name} needs`,
      )
    }
    if (details.publicExponent !== 0x10001n) {
      throw new KeyMaterialError('unsupported_key_parameters', 'RSA keys must use the public exponent 65537')
    }
  }
  if (spec.kind === 'ec' && details.namedCurve !== spec.opensslCurve) throw mismatch()
}

/** Pairwise consistency test (FIPS 140-3 style): a key whose halves disagree is refused. */
function checkConsistent(privateKey: KeyObject, algorithm: Algorithm): void {
  const publicKey = createPublicKey(privateKey)
  const spec = algorithm.spec
  let consistent: boolean
  if (spec.kind.startsWith('ml-kem')) {
    const { sharedKey, ciphertext } = encapsulate(publicKey)
    const recovered = decapsulate(privateKey, ciphertext)
    consistent = timingSafeEqual(sharedKey, recovered)
  } else {
    const message = Buffer.from('kms pairwise consistency test')
    const digest = spec.kind === 'rsa' || spec.kind === 'ec' ? 'sha256' : null
    consistent = verify(digest, message, publicKey, sign(digest, message, privateKey))
  }
  if (!consistent) {
    throw new KeyMaterialError('invalid_key_material', 'The private key fails its consistency check')
  }
}

const PEM_BEGIN = /^-----BEGIN ([A-Z0-9 ]+)-----/
const MAX_PEM_BLOCKS = 16

/**
 * The PEM blocks of a text, by one forward scan: a regular expression with a lazy body would
 * rescan to the end for each BEGIN without an END (quadratic in a 1 MB body, on the event loop).
 */
function pemBlocks(text: string): { label: string; body: string }[] {
  const blocks: { label: string; body: string }[] = []
  let at = text.indexOf('-----BEGIN ')
  while (at >= 0 && blocks.length <= MAX_PEM_BLOCKS) {
    const begin = PEM_BEGIN.exec(text.slice(at, at + 100))
    const end = text.indexOf('-----END ', at)
    if (end < 0) break
    if (begin) blocks.push({ label: begin[1]!, body: text.slice(at + begin[0].length, end) })
    at = text.indexOf('-----BEGIN ', end)
  }
  return blocks
}

/** The DER structures in the material that OpenSSL may parse as a private key. */
function derCandidates(request: ImportRequest): { der: Buffer; encryptedLabel: boolean }[] {
  if (typeof request.material !== 'string') return []
  const text = request.material
  if (request.format === 'PEM' || PEM_LABEL.test(text)) {
    // Every block, whatever its label: OpenSSL's decoders are not bound to the label we expect.
    const candidates: { der: Buffer; encryptedLabel: boolean }[] = []
    const blocks = pemBlocks(text)
    // One key is one block; a pile of them is not a key, and each would cost a parse here.
    if (blocks.length > MAX_PEM_BLOCKS) {
      throw new KeyMaterialError(
        'invalid_key_material',
        `keyMaterial holds more than ${MAX_PEM_BLOCKS} PEM blocks`,
      )
    }
    for (const block of blocks) {
      const encryptedLabel = block.label === 'ENCRYPTED PRIVATE KEY'
      if (block.body.includes(':')) {
        // Header lines (Proc-Type, DEK-Info): legacy PEM encryption, one MD5 round, and a body
        // that is ciphertext, not DER. Under this label it would wrap a PBES2 key whose cost
        // could not be read before decryption.
        if (encryptedLabel) {
          throw new KeyMaterialError(
            'invalid_key_material',
            'keyMaterial: an ENCRYPTED PRIVATE KEY block has no PEM headers',
          )
        }
        continue
      }
      // Node's Base64 decoder skips the line breaks.
      candidates.push({ der: Buffer.from(block.body, 'base64'), encryptedLabel })
    }
    return candidates
  }
  if (request.format === 'PKCS#8' || request.format === 'DER') {
    return [{ der: decodeBase64(text, 'keyMaterial'), encryptedLabel: false }]
  }
  return []
}

/**
 * Refuses an encrypted PKCS#8 key whose key-derivation cost is past the bounds
 * (pkcs8-encryption.ts), before any KDF runs. Cheap: the pool calls it on the event loop.
 */
export function checkImportCost(request: ImportRequest): void {
  if (algorithmByName(request.algorithm).spec.kind === 'hmac') return
  try {
    for (const { der, encryptedLabel } of derCandidates(request)) {
      const cost = encryptedKeyCost(der)
      if (cost) checkKdfCost(cost)
      else if (encryptedLabel) {
        throw new KeyMaterialError(
          'invalid_key_material',
          'keyMaterial: the encrypted key structure is malformed',
        )
      }
    }
  } catch (error) {
    if (error instanceof EncryptedKeyError) throw new KeyMaterialError(error.code, error.message)
    throw error
  }
}

export function importMaterial(request: ImportRequest): KeyMaterial {
  const algorithm = algorithmByName(request.algorithm)
  if (algorithm.spec.kind === 'hmac') return { secret: importHmacSecret(request, algorithm), publicKey: null }
  // Again here, for any caller that did not go through the pool.
  checkImportCost(request)
  let key: KeyObject
  switch (request.format) {
    case 'PEM':
      key = parsePem(asText(request.material, 'PEM'), 'PEM', request.password)
      break
    case 'PKCS#8': {
      const text = asText(request.material, 'PKCS#8')
      key = PEM_LABEL.test(text)
        ? parsePem(text, 'PKCS#8', request.password)
        : parseDer(decodeBase64(text, 'keyMaterial'), 'PKCS#8', request.password)
      break
    }
    case 'DER':
      key = parseDer(decodeBase64(asText(request.material, 'DER'), 'keyMaterial'), 'DER', request.password)
      break
    case 'JWK':
      if (typeof request.material !== 'object') {
        throw new KeyMaterialError('invalid_key_material', 'keyMaterial must be a JWK object for format JWK')
      }
      key = parseJwk(request.material)
      break
    case 'RAW':
      key = parseRaw(decodeBase64(asText(request.material, 'RAW'), 'keyMaterial'), algorithm)
      break
  }
  checkMatches(key, algorithm)
  checkConsistent(key, algorithm)
  return fromPrivateKey(key)
}

// ---------------------------------------------------------------------------------------------
// Export
// ---------------------------------------------------------------------------------------------

export type PublicExport =
  | { format: 'JWK'; jwk: Record<string, unknown> }
  | { format: Exclude<PublicFormat, 'JWK'>; bytes: Buffer; text: string }

function publicKeyObject(spki: Buffer): KeyObject {
  return createPublicKey({ key: spki, format: 'der', type: 'spki' })
}

/**
 * The same public key in each format. RAW is the content of the SPKI subjectPublicKey field:
 * the point or key bytes, and for RSA the PKCS#1 RSAPublicKey structure.
 */
export function exportPublic(
  spki: Buffer,
  algorithm: Algorithm,
  keyType: string,
  format: PublicFormat,
  kid: string,
): PublicExport {
  const key = publicKeyObject(spki)
  switch (format) {
    case 'PEM': {
      const text = key.export({ format: 'pem', type: 'spki' }) as string
      return { format, bytes: Buffer.from(text), text }
    }
    case 'DER':
      return { format, bytes: spki, text: spki.toString('base64') }
    case 'RAW': {
      const raw =
        algorithm.spec.kind === 'rsa'
          ? key.export({ format: 'der', type: 'pkcs1' })
          : key.export({ format: 'raw-public' } as never)
      return { format, bytes: raw as Buffer, text: (raw as Buffer).toString('base64') }
    }
    case 'JWK': {
      const jwk = key.export({ format: 'jwk' }) as Record<string, unknown>
      const alg = algorithm.jwkAlg[keyType as keyof typeof algorithm.jwkAlg]
      return {
        format,
        jwk: {
          ...jwk,
          kid,
          use: keyType === 'Encryption' ? 'enc' : 'sig',
          ...(jwk['alg'] === undefined && alg ? { alg } : {}),
        },
      }
    }
  }
}

export interface PrivateExport {
  /** PEM text, Base64 of DER or raw bytes, or a JWK. */
  value: string | Record<string, unknown>
  encrypted: boolean
}

export function exportPrivate(
  secret: Buffer,
  algorithm: Algorithm,
  format: PrivateFormat,
  password: string | undefined,
): PrivateExport {
  const spec = algorithm.spec
  if (password !== undefined && password.length < MIN_EXPORT_PASSWORD_LENGTH) {
    throw new KeyMaterialError(
      'validation_failed',
      `body/password must be at least ${MIN_EXPORT_PASSWORD_LENGTH} characters`,
    )
  }
  if (password !== undefined && format !== 'PEM' && format !== 'DER') {
    throw new KeyMaterialError(
      'format_not_supported',
      'Password protection applies to PEM and DER (PKCS#8) only',
    )
  }
  if (spec.kind === 'hmac') {
    if (format === 'RAW') return { value: secret.toString('base64'), encrypted: false }
    if (format === 'JWK') {
      return {
        value: { kty: 'oct', k: secret.toString('base64url'), alg: algorithm.jwkAlg.HMAC },
        encrypted: false,
      }
    }
    throw new KeyMaterialError('format_not_supported', 'HMAC secrets are exported as RAW or JWK')
  }
  const key = createPrivateKey({ key: secret, format: 'der', type: 'pkcs8' })
  if (password !== undefined) {
    // Not KeyObject.export's passphrase: that derives the key with 2,048 PBKDF2 iterations.
    const encrypted = encryptPkcs8(key.export({ format: 'der', type: 'pkcs8' }), password)
    return {
      value: format === 'PEM' ? toPem(encrypted, 'ENCRYPTED PRIVATE KEY') : encrypted.toString('base64'),
      encrypted: true,
    }
  }
  switch (format) {
    case 'PEM':
      return { value: key.export({ format: 'pem', type: 'pkcs8' }) as string, encrypted: false }
    case 'DER':
      return {
        value: (key.export({ format: 'der', type: 'pkcs8' }) as Buffer).toString('base64'),
        encrypted: false,
      }
    case 'JWK':
      return { value: key.export({ format: 'jwk' }) as Record<string, unknown>, encrypted: false }
    case 'RAW': {
      if (spec.kind === 'rsa') {
        throw new KeyMaterialError('format_not_supported', 'RSA keys have no RAW form; use PEM, DER or JWK')
      }
      const rawFormat = spec.kind === 'ec' ? 'raw-private' : (RAW_PRIVATE[spec.kind]?.format ?? 'raw-private')
      try {
        return {
          value: (key.export({ format: rawFormat } as never) as Buffer).toString('base64'),
          encrypted: false,
        }
      } catch {
        throw new KeyMaterialError(
          'format_not_supported',
          'This key was imported without its seed; use PEM, DER or JWK',
        )
      }
    }
  }
}
