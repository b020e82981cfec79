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
import {
  isXWingSpki,
  XWING,
  XWingError,
  type XWingPrivateKey,
  xwingDecapsulate,
  xwingEncapsulate,
  xwingGenerateKey,
  xwingKeyFromSeed,
  xwingPkcs8,
  xwingPublicKey,
  xwingPublicKeyFromSpki,
  xwingSeedFromPkcs8,
  xwingSpki,
} from '../crypto/xwing.ts'
import { isStrictBase64 } from '../platform/base64.ts'
import { type Algorithm, type AlgorithmName, algorithmByName, isSymmetric } from './algorithms.ts'
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

/**
 * A version's material: PKCS#8 DER of the private key (or the HMAC or AES secret) and the SPKI DER
 * public key. A public-key-only import has no secret.
 */
export interface KeyMaterial {
  secret: Buffer | null
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
  if (isSymmetric(spec)) return { secret: randomBytes(spec.secretBytes), publicKey: null }
  if (spec.kind === 'x-wing') return xwingGenerateMaterial()
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
  /** The material is a public key (SPKI, public JWK, raw public encoding): no private key is kept. */
  publicOnly?: boolean | undefined
}

function decodeBase64(text: string, what: string): Buffer {
  const compact = text.replace(/\s+/g, '')
  if (compact.length === 0 || !isStrictBase64(compact)) {
    throw new KeyMaterialError('invalid_key_material', `${what} must be standard Base64`)
  }
  return Buffer.from(compact, 'base64')
}

function asJwk(material: ImportRequest['material']): Record<string, unknown> {
  if (typeof material !== 'object') {
    throw new KeyMaterialError('invalid_key_material', 'keyMaterial must be a JWK object for format JWK')
  }
  return material
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
    throw new KeyMaterialError(
      'private_key_required',
      'Import needs a private key, not a public key (to import a public key alone, set publicOnly: true)',
    )
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
  // A public key (SPKI) where a private one is expected: say so, as PEM and JWK do.
  let isSpki = false
  try {
    createPublicKey({ key: der, format: 'der', type: 'spki' })
    isSpki = true
  } catch {}
  if (isSpki) {
    throw new KeyMaterialError(
      'private_key_required',
      'Import needs a private key, not a public key (to import a public key alone, set publicOnly: true)',
    )
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
    throw new KeyMaterialError(
      'private_key_required',
      'Import needs a private JWK (with d or priv); to import a public key alone, set publicOnly: true',
    )
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

/** Imported HMAC secrets: 128 bits at least (NIST SP 800-107), and bounded; longer than a block is hashed (RFC 2104). */
const HMAC_IMPORT_BYTES = { min: 16, max: 1024 } as const

function importSecret(request: ImportRequest, algorithm: Algorithm): Buffer {
  const spec = algorithm.spec
  if (!isSymmetric(spec)) throw new Error('not a symmetric algorithm')
  const kind = spec.kind === 'hmac' ? 'HMAC' : 'AES'
  const jwkAlg = spec.kind === 'hmac' ? algorithm.jwkAlg.HMAC : algorithm.jwkAlg.Encryption
  if (request.publicOnly) {
    throw new KeyMaterialError(
      'no_public_key',
      `${algorithm.name} keys are symmetric: there is no public key`,
    )
  }
  let secret: Buffer
  if (request.format === 'RAW') {
    secret = decodeBase64(asText(request.material, 'RAW'), 'keyMaterial')
  } else if (request.format === 'JWK') {
    const jwk = request.material
    if (typeof jwk !== 'object' || jwk['kty'] !== 'oct' || typeof jwk['k'] !== 'string') {
      throw new KeyMaterialError('invalid_key_material', `An ${kind} JWK has kty "oct" and the secret in k`)
    }
    const given = jwk['alg']
    if (given !== undefined && given !== jwkAlg) {
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
    throw new KeyMaterialError('format_not_supported', `${kind} secrets are imported as RAW (Base64) or JWK`)
  }
  const [min, max] =
    spec.kind === 'hmac'
      ? [HMAC_IMPORT_BYTES.min, HMAC_IMPORT_BYTES.max]
      : [spec.secretBytes, spec.secretBytes]
  if (secret.length < min || secret.length > max) {
    const sizes = min === max ? `${min} bytes` : `${min} to ${max} bytes`
    throw new KeyMaterialError(
      'key_size_mismatch',
      `An ${algorithm.name} secret is ${sizes}, not ${secret.length}`,
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
  const spec = algorithmByName(request.algorithm).spec
  // X-Wing keys are never decrypted on import (xwingImport refuses them): no KDF to bound.
  if (isSymmetric(spec) || spec.kind === 'x-wing' || request.publicOnly) return
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
  if (isSymmetric(algorithm.spec)) return { secret: importSecret(request, algorithm), publicKey: null }
  if (algorithm.spec.kind === 'x-wing') {
    return request.publicOnly ? xwingImportPublic(request) : xwingImport(request)
  }
  if (request.publicOnly) return importPublicMaterial(request, algorithm)
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
      key = parseJwk(asJwk(request.material))
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
// Public-key-only import
// ---------------------------------------------------------------------------------------------

/** Raw public encodings: FIPS 203/204/205 and RFC 8032 byte strings, of a fixed length. */
const RAW_PUBLIC_BYTES: Partial<Record<string, number>> = {
  'ml-kem-512': 800,
  'ml-kem-768': 1184,
  'ml-kem-1024': 1568,
  'ml-dsa-44': 1312,
  'ml-dsa-65': 1952,
  'ml-dsa-87': 2592,
  'slh-dsa-sha2-128s': 32,
  ed25519: 32,
}

const EC_FIELD_BYTES: Record<string, number> = { 'P-256': 32, 'P-384': 48, 'P-521': 66 }

const publicParseFailure = (format: string) =>
  new KeyMaterialError('invalid_key_material', `The key material is not a valid ${format} public key`)

const privateGiven = () =>
  new KeyMaterialError(
    'public_key_expected',
    'publicOnly imports take a public key; this is a private key (import it without publicOnly, or send its public part)',
  )

function parsePublicPem(text: string): KeyObject {
  const blocks = pemBlocks(text)
  if (blocks.length !== 1) {
    throw new KeyMaterialError('invalid_key_material', 'keyMaterial must hold exactly one PEM block')
  }
  const label = blocks[0]!.label
  if (label.includes('PRIVATE KEY')) throw privateGiven()
  if (label !== 'PUBLIC KEY' && label !== 'RSA PUBLIC KEY') {
    throw new KeyMaterialError(
      'invalid_key_material',
      `A public key is labelled PUBLIC KEY (or RSA PUBLIC KEY), not ${label}`,
    )
  }
  try {
    return createPublicKey({ key: text, format: 'pem' })
  } catch {
    throw publicParseFailure('PEM')
  }
}

function parsePublicDer(der: Buffer): KeyObject {
  // SPKI, or the PKCS#1 RSAPublicKey; never a private structure. Given type pkcs1, createPublicKey
  // also reads a private key (PKCS#8, PKCS#1, SEC 1) and derives its public key: those are
  // recognised first and refused.
  try {
    return createPublicKey({ key: der, format: 'der', type: 'spki' })
  } catch {}
  for (const type of ['pkcs8', 'pkcs1', 'sec1'] as const) {
    let parsed = false
    try {
      createPrivateKey({ key: der, format: 'der', type })
      parsed = true
    } catch {}
    if (parsed) throw privateGiven()
  }
  try {
    return createPublicKey({ key: der, format: 'der', type: 'pkcs1' })
  } catch {}
  throw publicParseFailure('DER (SPKI)')
}

function parsePublicJwk(jwk: Record<string, unknown>): KeyObject {
  if ('d' in jwk || 'priv' in jwk || 'p' in jwk) throw privateGiven()
  try {
    return createPublicKey({ key: jwk as JsonWebKey, format: 'jwk' })
  } catch {
    throw publicParseFailure('JWK')
  }
}

function parsePublicRaw(bytes: Buffer, algorithm: Algorithm): KeyObject {
  const spec = algorithm.spec
  if (spec.kind === 'rsa') return parsePublicDer(bytes)
  if (spec.kind === 'ec') {
    const field = EC_FIELD_BYTES[spec.namedCurve]!
    // SEC 1 section 2.3.3: 0x04 || X || Y, or compressed 0x02/0x03 || X.
    if (bytes.length !== 1 + 2 * field && bytes.length !== 1 + field) {
      throw new KeyMaterialError(
        'key_size_mismatch',
        `A RAW ${algorithm.name} public key is a SEC 1 point of ${1 + 2 * field} (uncompressed) or ${1 + field} (compressed) bytes, not ${bytes.length}`,
      )
    }
    try {
      return createPublicKey({
        key: bytes,
        format: 'raw-public',
        asymmetricKeyType: 'ec',
        namedCurve: spec.namedCurve,
      } as never)
    } catch {
      throw publicParseFailure('RAW')
    }
  }
  const expected = RAW_PUBLIC_BYTES[spec.kind]
  if (expected === undefined) {
    throw new KeyMaterialError('format_not_supported', `RAW is not supported for ${algorithm.name}`)
  }
  if (bytes.length !== expected) {
    throw new KeyMaterialError(
      'key_size_mismatch',
      `A RAW ${algorithm.name} public key is ${expected} bytes, not ${bytes.length}`,
    )
  }
  try {
    return createPublicKey({ key: bytes, format: 'raw-public', asymmetricKeyType: spec.kind } as never)
  } catch {
    // OpenSSL checks what FIPS 203 section 7.2 asks of an encapsulation key (every coefficient
    // below q) and refuses an EC point off its curve.
    throw publicParseFailure('RAW')
  }
}

/** A public key alone: parsed, checked against the declared algorithm, kept as SPKI DER. */
function importPublicMaterial(request: ImportRequest, algorithm: Algorithm): KeyMaterial {
  let key: KeyObject
  switch (request.format) {
    case 'PEM':
    case 'PKCS#8': {
      if (request.format === 'PKCS#8') {
        throw new KeyMaterialError(
          'format_not_supported',
          'PKCS#8 holds private keys; a public key is PEM, DER, JWK or RAW',
        )
      }
      key = parsePublicPem(asText(request.material, 'PEM'))
      break
    }
    case 'DER':
      key = parsePublicDer(decodeBase64(asText(request.material, 'DER'), 'keyMaterial'))
      break
    case 'JWK':
      key = parsePublicJwk(asJwk(request.material))
      break
    case 'RAW':
      key = parsePublicRaw(decodeBase64(asText(request.material, 'RAW'), 'keyMaterial'), algorithm)
      break
  }
  checkMatches(key, algorithm)
  return { secret: null, publicKey: key.export({ format: 'der', type: 'spki' }) }
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
  if (algorithm.spec.kind === 'x-wing') return xwingExportPublic(spki, format)
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
  if (isSymmetric(spec)) {
    if (format === 'RAW') return { value: secret.toString('base64'), encrypted: false }
    const alg = spec.kind === 'hmac' ? algorithm.jwkAlg.HMAC : algorithm.jwkAlg.Encryption
    if (format === 'JWK') {
      return { value: { kty: 'oct', k: secret.toString('base64url'), alg }, encrypted: false }
    }
    throw new KeyMaterialError(
      'format_not_supported',
      `${spec.kind === 'hmac' ? 'HMAC' : 'AES'} secrets are exported as RAW or JWK`,
    )
  }
  if (spec.kind === 'x-wing') return xwingExportPrivate(secret, format, password)
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

// ---------------------------------------------------------------------------------------------
// X-Wing (src/crypto/xwing.ts, draft-connolly-cfrg-xwing-kem). OpenSSL does not know id-XWing,
// so these keys never reach createPrivateKey or createPublicKey as PKCS#8 or SPKI: the stored
// forms are the draft's (PKCS#8 of the 32-byte seed, SPKI of the 1216-byte public key), built
// and read by xwing.ts. No JWK form (no JOSE registration), no password-protected import.
// ---------------------------------------------------------------------------------------------

function xwingMaterial(seed: Buffer, key: XWingPrivateKey): KeyMaterial {
  return { secret: xwingPkcs8(seed), publicKey: xwingSpki(key.publicKey.bytes) }
}

function xwingGenerateMaterial(): KeyMaterial {
  const { seed, privateKey } = xwingGenerateKey()
  try {
    return xwingMaterial(seed, privateKey)
  } finally {
    seed.fill(0)
  }
}

const xwingNoJwk = () =>
  new KeyMaterialError(
    'format_not_supported',
    'X-Wing keys have no JWK form (no JOSE registration); use PEM, DER or RAW',
  )

const xwingNoPassword = () =>
  new KeyMaterialError(
    'format_not_supported',
    'Encrypted X-Wing private keys are not imported: decrypt it and import the PKCS#8 key (PEM, PKCS#8 or DER) or its RAW seed',
  )

/** The DER of the one PEM block of `text`, with its label. */
function xwingPemDer(text: string): { label: string; der: Buffer } {
  const blocks = pemBlocks(text)
  if (blocks.length !== 1) {
    throw new KeyMaterialError('invalid_key_material', 'keyMaterial must hold exactly one PEM block')
  }
  const { label, body } = blocks[0]!
  if (body.includes(':')) {
    throw new KeyMaterialError('invalid_key_material', 'An X-Wing PEM block has no PEM headers')
  }
  return { label, der: decodeBase64(body, 'The PEM body') }
}

/** What OpenSSL makes of DER that is not an X-Wing structure, to name it in the refusal. */
function otherKey(der: Buffer, kind: 'private' | 'public'): KeyObject | undefined {
  try {
    return kind === 'private'
      ? createPrivateKey({ key: der, format: 'der', type: 'pkcs8' })
      : createPublicKey({ key: der, format: 'der', type: 'spki' })
  } catch {
    return undefined
  }
}

const xwingMismatch = (key: KeyObject) =>
  new KeyMaterialError('algorithm_mismatch', `The key material is ${describe(key)}, not X-Wing`)

/** The seed of an X-Wing PKCS#8 DER; anything else refused with what it is. */
function xwingSeedOf(der: Buffer): Buffer {
  try {
    return xwingSeedFromPkcs8(der)
  } catch {}
  if (isXWingSpki(der) || otherKey(der, 'public')) {
    throw new KeyMaterialError(
      'private_key_required',
      'Import needs a private key, not a public key (to import a public key alone, set publicOnly: true)',
    )
  }
  if (encryptedKeyCostOrNull(der)) throw xwingNoPassword()
  const other = otherKey(der, 'private')
  if (other) throw xwingMismatch(other)
  throw new KeyMaterialError(
    'invalid_key_material',
    'The key material is not an X-Wing PKCS#8 private key (id-XWing 1.3.6.1.4.1.62253.25722, the 32-byte seed)',
  )
}

function encryptedKeyCostOrNull(der: Buffer): boolean {
  try {
    return encryptedKeyCost(der) !== null
  } catch {
    return isEncryptedPkcs8(der)
  }
}

/** A private X-Wing key: PEM/PKCS#8/DER (PKCS#8 of the seed, as the draft stores it) or RAW (the seed). */
function xwingImport(request: ImportRequest): KeyMaterial {
  if (request.password !== undefined) throw xwingNoPassword()
  let seed: Buffer
  if (request.format === 'JWK') throw xwingNoJwk()
  if (request.format === 'RAW') {
    seed = decodeBase64(asText(request.material, 'RAW'), 'keyMaterial')
    if (seed.length !== XWING.seedBytes) {
      throw new KeyMaterialError(
        'key_size_mismatch',
        `A RAW X-Wing private key is its ${XWING.seedBytes}-byte seed, not ${seed.length} bytes`,
      )
    }
  } else {
    const text = asText(request.material, request.format)
    if (request.format === 'PEM' || PEM_LABEL.test(text)) {
      const { label, der } = xwingPemDer(text)
      if (label.includes('PUBLIC KEY') || label === 'CERTIFICATE') {
        throw new KeyMaterialError(
          'private_key_required',
          'Import needs a private key, not a public key (to import a public key alone, set publicOnly: true)',
        )
      }
      if (label === 'ENCRYPTED PRIVATE KEY') throw xwingNoPassword()
      if (label !== 'PRIVATE KEY') {
        throw new KeyMaterialError(
          'invalid_key_material',
          `An X-Wing private key is PKCS#8, labelled PRIVATE KEY, not ${label}`,
        )
      }
      seed = xwingSeedOf(der)
    } else {
      seed = xwingSeedOf(decodeBase64(text, 'keyMaterial'))
    }
  }
  try {
    const key = xwingKeyFromSeed(seed)
    // The pairwise consistency test of every import: one encapsulation and its decapsulation.
    const { sharedKey, ciphertext } = xwingEncapsulate(key.publicKey)
    if (!timingSafeEqual(sharedKey, xwingDecapsulate(key, ciphertext))) {
      throw new KeyMaterialError('invalid_key_material', 'The private key fails its consistency check')
    }
    return xwingMaterial(seed, key)
  } finally {
    seed.fill(0)
  }
}

/** A public X-Wing key alone: PEM or DER SPKI (id-XWing), or RAW (the 1216-byte encoding). */
function xwingImportPublic(request: ImportRequest): KeyMaterial {
  let bytes: Buffer
  switch (request.format) {
    case 'JWK':
      throw xwingNoJwk()
    case 'PKCS#8':
      throw new KeyMaterialError(
        'format_not_supported',
        'PKCS#8 holds private keys; a public key is PEM, DER or RAW',
      )
    case 'RAW':
      bytes = decodeBase64(asText(request.material, 'RAW'), 'keyMaterial')
      if (bytes.length !== XWING.publicKeyBytes) {
        throw new KeyMaterialError(
          'key_size_mismatch',
          `A RAW X-Wing public key is ${XWING.publicKeyBytes} bytes, not ${bytes.length}`,
        )
      }
      break
    case 'PEM':
    case 'DER': {
      const text = asText(request.material, request.format)
      let der: Buffer
      if (request.format === 'PEM') {
        const block = xwingPemDer(text)
        if (block.label.includes('PRIVATE KEY')) throw privateGiven()
        if (block.label !== 'PUBLIC KEY') {
          throw new KeyMaterialError(
            'invalid_key_material',
            `An X-Wing public key is labelled PUBLIC KEY, not ${block.label}`,
          )
        }
        der = block.der
      } else {
        der = decodeBase64(text, 'keyMaterial')
      }
      if (!isXWingSpki(der)) {
        let isPrivate = false
        try {
          xwingSeedFromPkcs8(der)
          isPrivate = true
        } catch {}
        if (isPrivate || otherKey(der, 'private')) throw privateGiven()
        const other = otherKey(der, 'public')
        if (other) throw xwingMismatch(other)
        throw publicParseFailure(`${request.format} (X-Wing SPKI)`)
      }
      bytes = xwingPublicKeyFromSpki(der)
      break
    }
  }
  try {
    // Refuses an ML-KEM half that fails FIPS 203's check and an X25519 half of low order.
    return { secret: null, publicKey: xwingSpki(xwingPublicKey(bytes).bytes) }
  } catch (error) {
    if (error instanceof XWingError) throw new KeyMaterialError('invalid_key_material', error.message)
    throw error
  }
}

function xwingExportPublic(spki: Buffer, format: PublicFormat): PublicExport {
  switch (format) {
    case 'PEM': {
      const text = toPem(spki, 'PUBLIC KEY')
      return { format, bytes: Buffer.from(text), text }
    }
    case 'DER':
      return { format, bytes: spki, text: spki.toString('base64') }
    case 'RAW': {
      const raw = xwingPublicKeyFromSpki(spki)
      return { format, bytes: raw, text: raw.toString('base64') }
    }
    case 'JWK':
      throw xwingNoJwk()
  }
}

/** PKCS#8 (PEM, DER; with a password, PBES2 as every other key) or RAW (the 32-byte seed). */
function xwingExportPrivate(
  pkcs8: Buffer,
  format: PrivateFormat,
  password: string | undefined,
): PrivateExport {
  if (format === 'JWK') throw xwingNoJwk()
  if (password !== undefined) {
    const encrypted = encryptPkcs8(pkcs8, password)
    return {
      value: format === 'PEM' ? toPem(encrypted, 'ENCRYPTED PRIVATE KEY') : encrypted.toString('base64'),
      encrypted: true,
    }
  }
  switch (format) {
    case 'PEM':
      return { value: toPem(pkcs8, 'PRIVATE KEY'), encrypted: false }
    case 'DER':
      return { value: pkcs8.toString('base64'), encrypted: false }
    case 'RAW': {
      const seed = xwingSeedFromPkcs8(pkcs8)
      try {
        return { value: seed.toString('base64'), encrypted: false }
      } finally {
        seed.fill(0)
      }
    }
  }
}
