import {
  constants,
  createHash,
  createHmac,
  type KeyObject,
  privateEncrypt,
  publicDecrypt,
  sign,
  timingSafeEqual,
  verify,
} from 'node:crypto'
import { p256, p384, p521 } from '@noble/curves/nist.js'
import type { NodeKeySpec } from '../keys/algorithms.ts'
import { AppError, invalidField } from '../platform/errors.ts'

/**
 * Signature schemes (DESIGN "Signing algorithms"): RSA signs with RSASSA-PSS/SHA-256 (salt
 * length 32, the digest length) unless PKCS#1 v1.5 is asked for; ECDSA with the curve's SHA-2,
 * DER-encoded unless IEEE P1363 (r || s) is asked for; Ed25519, ML-DSA and SLH-DSA sign the
 * message itself (pure mode; ML-DSA and SLH-DSA with the caller's context string, empty by
 * default). Pure functions of their inputs, so the crypto pool's worker threads run them unchanged.
 */
type RsaPadding = 'PSS' | 'PKCS1'
type SignatureFormat = 'DER' | 'P1363'
/** RAW: the message itself; DIGEST: the caller already hashed it (RSA and ECDSA only). */
type MessageType = 'RAW' | 'DIGEST'

export interface SignatureOptions {
  messageType: MessageType
  rsaPadding: RsaPadding
  signatureFormat: SignatureFormat
  /**
   * RSA-PSS salt length in bytes, for signing and verifying alike. Absent: the digest length
   * (32), which is what the service signs with; verification accepts no other length unless
   * the caller names it (RFC 8017 leaves the length to the application: accepting any makes
   * verification weaker than the signer intended).
   */
  saltLength?: number | undefined
  /**
   * The context string of pure ML-DSA (FIPS 204 §5.2) and SLH-DSA (FIPS 205 §10.2), 0 to 255
   * bytes; absent: the empty context. A Uint8Array once it has crossed to a worker thread.
   */
  context?: Uint8Array | undefined
}

/** The longest context string FIPS 204 and FIPS 205 allow. */
export const MAX_SIGNATURE_CONTEXT_BYTES = 255

/** The service's PSS salt length: the SHA-256 digest length. */
const PSS_SALT_BYTES = 32

/** The longest PSS salt an RSA key of this size allows: emLen - hLen - 2 (RFC 8017 §9.1.1). */
function maxPssSaltBytes(modulusBits: number): number {
  return Math.ceil((modulusBits - 1) / 8) - 32 - 2
}

const saltOf = (options: SignatureOptions) => options.saltLength ?? PSS_SALT_BYTES
const SHA256_DIGEST_INFO = Buffer.from('3031300d060960864801650304020105000420', 'hex')

type Curve = typeof p256
const EC_SCHEMES: Record<string, { hash: 'sha256' | 'sha384' | 'sha512'; curve: Curve }> = {
  'P-256': { hash: 'sha256', curve: p256 },
  'P-384': { hash: 'sha384', curve: p384 },
  'P-521': { hash: 'sha512', curve: p521 as unknown as Curve },
}
const DIGEST_BYTES = { sha256: 32, sha384: 48, sha512: 64 } as const

/** The hash the scheme applies to a RAW message, or null for the pure schemes. */
function schemeHash(spec: NodeKeySpec): 'sha256' | 'sha384' | 'sha512' | null {
  if (spec.kind === 'rsa') return 'sha256'
  if (spec.kind === 'ec') return EC_SCHEMES[spec.namedCurve]!.hash
  return null
}

/** A human-readable name of the scheme actually used, returned with each signature. */
export function schemeName(spec: NodeKeySpec, options: SignatureOptions): string {
  if (spec.kind === 'rsa')
    return options.rsaPadding === 'PSS' ? 'RSASSA-PSS-SHA256' : 'RSASSA-PKCS1-v1_5-SHA256'
  if (spec.kind === 'ec') {
    return `ECDSA-${schemeHash(spec)!.toUpperCase()}-${options.signatureFormat}`
  }
  return PURE_SCHEME_NAMES[spec.kind] ?? spec.kind
}

const PURE_SCHEME_NAMES: Partial<Record<NodeKeySpec['kind'], string>> = {
  'ml-dsa-44': 'ML-DSA-44',
  'ml-dsa-65': 'ML-DSA-65',
  'ml-dsa-87': 'ML-DSA-87',
  'slh-dsa-sha2-128s': 'SLH-DSA-SHA2-128s',
  ed25519: 'Ed25519',
}

/** The schemes that take a context string: pure ML-DSA and SLH-DSA. */
const takesContext = (spec: NodeKeySpec) =>
  spec.kind.startsWith('ml-dsa-') || spec.kind.startsWith('slh-dsa-')

/**
 * Refuses options the key cannot take: pre-hashed input, a salt length, a context string.
 * Callers check before signing or verifying (on the main thread: an error thrown in a worker
 * thread loses its class on the way back).
 */
export function checkOptions(spec: NodeKeySpec, options: SignatureOptions, message: Buffer): void {
  if (options.context !== undefined) {
    if (!takesContext(spec)) {
      throw invalidField(
        'body/signatureContext',
        spec.kind === 'ed25519'
          ? 'is not for Ed25519 keys: Ed25519 (RFC 8032, pure) has no context string (Ed25519ctx is another scheme, not offered); contexts are for ML-DSA and SLH-DSA keys'
          : `is not for ${spec.kind === 'rsa' ? 'RSA' : 'ECDSA'} keys: contexts are for ML-DSA and SLH-DSA keys`,
      )
    }
    if (options.context.length > MAX_SIGNATURE_CONTEXT_BYTES) {
      throw invalidField(
        'body/signatureContext',
        `must be at most ${MAX_SIGNATURE_CONTEXT_BYTES} bytes (FIPS 204 §5.2), got ${options.context.length}`,
      )
    }
  }
  if (options.saltLength !== undefined) {
    if (spec.kind !== 'rsa' || options.rsaPadding !== 'PSS') {
      throw new AppError(
        400,
        'validation_failed',
        'body/saltLength applies to RSA keys with rsaPadding PSS only',
      )
    }
    const max = maxPssSaltBytes(spec.modulusLength)
    if (options.saltLength > max) {
      throw new AppError(
        400,
        'validation_failed',
        `body/saltLength must be between 0 and ${max} for a ${spec.modulusLength}-bit RSA key`,
      )
    }
  }
  if (options.messageType !== 'DIGEST') return
  const hash = schemeHash(spec)
  if (!hash) {
    throw new AppError(
      400,
      'digest_not_supported',
      'Pre-hashed input is only for RSA and ECDSA keys; this algorithm signs the message itself',
    )
  }
  if (message.length !== DIGEST_BYTES[hash]) {
    throw new AppError(
      400,
      'invalid_digest',
      `A ${hash.toUpperCase()} digest of ${DIGEST_BYTES[hash]} bytes is expected, got ${message.length} bytes`,
    )
  }
}

function rsaOptions(key: KeyObject, padding: RsaPadding, saltLength: number) {
  return padding === 'PSS'
    ? { key, padding: constants.RSA_PKCS1_PSS_PADDING, saltLength }
    : { key, padding: constants.RSA_PKCS1_PADDING }
}

export function createSignature(
  spec: NodeKeySpec,
  privateKey: KeyObject,
  message: Buffer,
  options: SignatureOptions,
  /** Fresh random bytes (the PSS salt of a pre-hashed RSA signature). */
  random: (length: number) => Buffer,
): Buffer {
  const digest = options.messageType === 'DIGEST'
  if (spec.kind === 'rsa') {
    if (!digest) return sign('sha256', message, rsaOptions(privateKey, options.rsaPadding, saltOf(options)))
    // node:crypto signs messages only: the encoding of a given digest is done here and the
    // raw RSA private operation applied to it (RFC 8017 §9.1.1 and §9.2).
    const modulusBits = privateKey.asymmetricKeyDetails!.modulusLength!
    const encoded =
      options.rsaPadding === 'PSS'
        ? encodePss(message, modulusBits - 1, random(saltOf(options)))
        : Buffer.concat([SHA256_DIGEST_INFO, message])
    const padding = options.rsaPadding === 'PSS' ? constants.RSA_NO_PADDING : constants.RSA_PKCS1_PADDING
    return privateEncrypt({ key: privateKey, padding }, encoded)
  }
  if (spec.kind === 'ec') {
    const { hash, curve } = EC_SCHEMES[spec.namedCurve]!
    if (!digest) {
      return sign(hash, message, {
        key: privateKey,
        dsaEncoding: options.signatureFormat === 'DER' ? 'der' : 'ieee-p1363',
      })
    }
    // node:crypto has no ECDSA over a given digest; @noble/curves (audited) signs it.
    const scalar = Buffer.from(privateKey.export({ format: 'jwk' }).d!, 'base64url')
    try {
      const signature = curve.sign(message, scalar, {
        prehash: false,
        format: options.signatureFormat === 'DER' ? 'der' : 'compact',
      })
      return Buffer.from(signature)
    } finally {
      scalar.fill(0)
    }
  }
  return sign(null, message, options.context ? { key: privateKey, context: options.context } : privateKey)
}

/** False for any signature that does not verify, including malformed ones: never throws for them. */
export function verifySignature(
  spec: NodeKeySpec,
  publicKey: KeyObject,
  message: Buffer,
  signature: Buffer,
  options: SignatureOptions,
): boolean {
  const digest = options.messageType === 'DIGEST'
  try {
    if (spec.kind === 'rsa') {
      if (!digest) {
        return verify(
          'sha256',
          message,
          rsaOptions(publicKey, options.rsaPadding, saltOf(options)),
          signature,
        )
      }
      const modulusBits = publicKey.asymmetricKeyDetails!.modulusLength!
      if (signature.length !== Math.ceil(modulusBits / 8)) return false
      if (options.rsaPadding === 'PKCS1') {
        const recovered = publicDecrypt({ key: publicKey, padding: constants.RSA_PKCS1_PADDING }, signature)
        const expected = Buffer.concat([SHA256_DIGEST_INFO, message])
        return recovered.length === expected.length && timingSafeEqual(recovered, expected)
      }
      const encoded = publicDecrypt({ key: publicKey, padding: constants.RSA_NO_PADDING }, signature)
      return verifyPss(message, encoded, modulusBits - 1, saltOf(options))
    }
    if (spec.kind === 'ec') {
      const { hash, curve } = EC_SCHEMES[spec.namedCurve]!
      const format = options.signatureFormat === 'DER' ? 'der' : 'ieee-p1363'
      if (!digest) return verify(hash, message, { key: publicKey, dsaEncoding: format }, signature)
      const point = publicKey.export({ format: 'der', type: 'spki' })
      const raw = curve.Point.fromBytes(spkiPoint(point, curve)).toBytes(false)
      return curve.verify(signature, message, raw, {
        prehash: false,
        lowS: false,
        format: options.signatureFormat === 'DER' ? 'der' : 'compact',
      })
    }
    return verify(
      null,
      message,
      options.context ? { key: publicKey, context: options.context } : publicKey,
      signature,
    )
  } catch {
    return false
  }
}

/**
 * The index of the first of `publicKeys` (key versions, newest first) under which the signature
 * verifies, or -1: verification without a key version tries each in turn.
 */
export function verifyingKeyIndex(
  spec: NodeKeySpec,
  publicKeys: readonly KeyObject[],
  message: Buffer,
  signature: Buffer,
  options: SignatureOptions,
): number {
  return publicKeys.findIndex((key) => verifySignature(spec, key, message, signature, options))
}

/**
 * The index of the first of `secretKeys` whose HMAC of `data`, cut to `length` bytes, is `mac`,
 * or -1. The length of a MAC is public (the algorithm or the caller's truncation fixes it); its
 * bytes are compared in constant time.
 */
/** The shortest truncated MAC accepted: 128 bits (RFC 2104 §5 asks for at least half the output and 80 bits). */
export const MIN_MAC_BYTES = 16

export function matchingMacIndex(
  hash: string,
  secretKeys: readonly KeyObject[],
  data: Buffer,
  mac: Buffer,
  length: number,
): number {
  if (mac.length !== length) return -1
  return secretKeys.findIndex((key) => {
    const expected = createHmac(hash, key).update(data).digest()
    return expected.length >= length && timingSafeEqual(expected.subarray(0, length), mac)
  })
}

/** The uncompressed point at the end of an EC SubjectPublicKeyInfo. */
function spkiPoint(spki: Buffer, curve: Curve): Uint8Array {
  const pointBytes = 1 + 2 * curve.Point.Fn.BYTES
  return spki.subarray(spki.length - pointBytes)
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

function pssHash(mHash: Buffer, salt: Buffer): Buffer {
  return createHash('sha256').update(Buffer.alloc(8)).update(mHash).update(salt).digest()
}

/** EMSA-PSS-ENCODE (RFC 8017 §9.1.1) with SHA-256 and MGF1-SHA-256. */
function encodePss(mHash: Buffer, emBits: number, salt: Buffer): Buffer {
  const emLen = Math.ceil(emBits / 8)
  const h = pssHash(mHash, salt)
  const db = Buffer.alloc(emLen - 32 - 1)
  db[db.length - salt.length - 1] = 0x01
  salt.copy(db, db.length - salt.length)
  const mask = mgf1(h, db.length)
  for (let i = 0; i < db.length; i++) db[i]! ^= mask[i]!
  db[0]! &= 0xff >> (8 * emLen - emBits)
  const encoded = Buffer.concat([db, h, Buffer.of(0xbc)])
  // The RSA input is as long as the modulus; emLen is one byte shorter when emBits % 8 == 0.
  const modulusBytes = Math.ceil((emBits + 1) / 8)
  return encoded.length === modulusBytes ? encoded : Buffer.concat([Buffer.alloc(1), encoded])
}

/** EMSA-PSS-VERIFY (RFC 8017 §9.1.2) with a known salt length. */
function verifyPss(mHash: Buffer, message: Buffer, emBits: number, saltLength: number): boolean {
  const emLen = Math.ceil(emBits / 8)
  const em = message.subarray(message.length - emLen)
  if (message.length > emLen && message[0] !== 0) return false
  if (em[em.length - 1] !== 0xbc) return false
  const maskedDb = em.subarray(0, emLen - 32 - 1)
  const h = em.subarray(emLen - 32 - 1, emLen - 1)
  const topBits = 0xff << (8 - (8 * emLen - emBits))
  if ((maskedDb[0]! & topBits & 0xff) !== 0) return false
  const mask = mgf1(h, maskedDb.length)
  const db = Buffer.alloc(maskedDb.length)
  for (let i = 0; i < db.length; i++) db[i] = maskedDb[i]! ^ mask[i]!
  db[0]! &= 0xff >> (8 * emLen - emBits)
  // Step 10: PS is exactly emLen - hLen - sLen - 2 zero bytes, then 0x01, then the salt.
  const separator = db.length - saltLength - 1
  if (separator < 0 || db[separator] !== 0x01 || db.subarray(0, separator).some((b) => b !== 0)) return false
  const salt = db.subarray(separator + 1)
  return timingSafeEqual(pssHash(mHash, salt), h)
}
