import {
  type CipherGCMTypes,
  constants,
  createCipheriv,
  createDecipheriv,
  createHmac,
  createSecretKey,
  decapsulate,
  encapsulate,
  KeyObject,
  privateDecrypt,
  publicEncrypt,
} from 'node:crypto'
import {
  XWING,
  type XWingPrivateKey,
  type XWingPublicKey,
  xwingDecapsulate,
  xwingEncapsulate,
} from './xwing.ts'

/**
 * The envelope format of /encrypt and /decrypt, version 1 (docs/envelope-format.md is the
 * normative description; keep the two in step).
 *
 * encapsulatedKey = header (22 bytes) || protected DEK
 *   header = 0x01 (format version)
 *            || scheme (0x01 ML-KEM, 0x02 RSA-OAEP-SHA256, 0x03 AES-GCM, 0x04 X-Wing)
 *            || key id (16 bytes, the UUID) || key version (uint32 big-endian)
 *   protected DEK = ML-KEM ciphertext, or X-Wing ciphertext (1120 bytes), or the RSA-OAEP-SHA256
 *     encryption of the 32-byte DEK, or (AES keys) DEK nonce (12 bytes)
 *     || AES-GCM(key, DEK nonce, AAD = "kms/envelope/v1/dek" || header, the 32-byte DEK)
 *     || its tag (16 bytes): 60 bytes
 * DEK (ML-KEM, X-Wing) = HKDF-Expand-SHA256(PRK = shared secret,
 *   info = "kms/envelope/v1/dek" || header, 32)
 *   (one HMAC: the ML-KEM and X-Wing shared secrets are already uniform, RFC 5869 §3.3)
 * AAD = purpose label || header || context (UTF-8; empty when absent); the label is
 *   "kms/envelope/v1" for /encrypt and "kms/wrap/v1" for wrapped keys and data keys, so one
 *   purpose's output never opens as the other's
 * ciphertext, tag = AES-256-GCM(DEK, nonce (12 bytes), AAD, plaintext)
 * compact form (legacy mode, wrapped keys, data keys) = uint16 BE length of encapsulatedKey
 *   || encapsulatedKey || nonce || tag || ciphertext
 */
const ENVELOPE_VERSION = 1
export const HEADER_BYTES = 22
export const NONCE_BYTES = 12
const TAG_BYTES = 16
const DEK_BYTES = 32
export const MAX_KEY_VERSION = 2_147_483_647

const SCHEME = { mlKem: 0x01, rsaOaep: 0x02, aesGcm: 0x03, xWing: 0x04 } as const
type Scheme = (typeof SCHEME)[keyof typeof SCHEME]

export type EnvelopePurpose = 'encrypt' | 'wrap'
const AAD_LABELS: Record<EnvelopePurpose, Buffer> = {
  encrypt: Buffer.from('kms/envelope/v1'),
  wrap: Buffer.from('kms/wrap/v1'),
}
const DEK_INFO_LABEL = Buffer.from('kms/envelope/v1/dek')

export interface EnvelopeHeader {
  scheme: Scheme
  keyId: string
  keyVersion: number
}

function encodeHeader(header: EnvelopeHeader): Buffer {
  const out = Buffer.alloc(HEADER_BYTES)
  out[0] = ENVELOPE_VERSION
  out[1] = header.scheme
  Buffer.from(header.keyId.replaceAll('-', ''), 'hex').copy(out, 2)
  out.writeUInt32BE(header.keyVersion, 18)
  return out
}

/** Undefined when the bytes are not a version-1 header this service could have written. */
export function decodeHeader(bytes: Buffer): EnvelopeHeader | undefined {
  if (bytes.length < HEADER_BYTES || bytes[0] !== ENVELOPE_VERSION) return undefined
  const scheme = bytes[1]
  if (
    scheme !== SCHEME.mlKem &&
    scheme !== SCHEME.rsaOaep &&
    scheme !== SCHEME.aesGcm &&
    scheme !== SCHEME.xWing
  )
    return undefined
  const hex = bytes.subarray(2, 18).toString('hex')
  const keyId = `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`
  const keyVersion = bytes.readUInt32BE(18)
  // Versions are PostgreSQL integers: 1 to 2^31 - 1.
  if (keyVersion < 1 || keyVersion > MAX_KEY_VERSION) return undefined
  return { scheme, keyId, keyVersion }
}

function aad(purpose: EnvelopePurpose, header: Buffer, context: Buffer): Buffer {
  return Buffer.concat([AAD_LABELS[purpose], header, context])
}

/**
 * Secret keys reach node:crypto as KeyObjects, never as Buffers: handed a Buffer, Node 24 first
 * asks whether it is a KeyObject or a CryptoKey by catching two exceptions, which costs about
 * 25 µs per call on the machines measured, while createSecretKey costs 2 µs (bench/RESULTS.md).
 * The Buffer copies are zeroed at once; the KeyObjects' copies go with the garbage collector.
 */
function secretKey(bytes: Buffer): KeyObject {
  try {
    return createSecretKey(bytes)
  } finally {
    bytes.fill(0)
  }
}

function dekFromSharedSecret(sharedSecret: Buffer, header: Buffer): KeyObject {
  const dek = createHmac('sha256', secretKey(sharedSecret))
    .update(DEK_INFO_LABEL)
    .update(header)
    .update(Buffer.of(0x01))
    .digest()
  return secretKey(dek)
}

/** GCM's final() adds nothing: skipping the concatenation saves a copy of the whole message. */
export const joined = (body: Buffer, tail: Buffer) => (tail.length === 0 ? body : Buffer.concat([body, tail]))

const OAEP = { padding: constants.RSA_PKCS1_OAEP_PADDING, oaepHash: 'sha256' } as const

const AES_CIPHERS: Record<number, CipherGCMTypes> = {
  16: 'aes-128-gcm',
  24: 'aes-192-gcm',
  32: 'aes-256-gcm',
}

/** node:crypto's name of the AES-GCM cipher for a secret key of this size. */
export function aesGcmCipher(key: KeyObject): CipherGCMTypes {
  const cipher = AES_CIPHERS[key.symmetricKeySize ?? 0]
  if (!cipher) throw new Error('not an AES key')
  return cipher
}

/** The DEK sealed under an AES key: its own nonce, the header as AAD. */
function sealDekWithAes(key: KeyObject, dek: Buffer, header: Buffer, nonce: Buffer): Buffer {
  const cipher = createCipheriv(aesGcmCipher(key), key, nonce)
  cipher.setAAD(Buffer.concat([DEK_INFO_LABEL, header]))
  const sealed = cipher.update(dek)
  cipher.final()
  return Buffer.concat([nonce, sealed, cipher.getAuthTag()])
}

const AES_PROTECTED_DEK_BYTES = NONCE_BYTES + DEK_BYTES + TAG_BYTES

function openDekWithAes(key: KeyObject, protectedDek: Buffer, header: Buffer): Buffer {
  if (protectedDek.length !== AES_PROTECTED_DEK_BYTES) throw new EnvelopeError()
  const decipher = createDecipheriv(aesGcmCipher(key), key, protectedDek.subarray(0, NONCE_BYTES))
  decipher.setAAD(Buffer.concat([DEK_INFO_LABEL, header]))
  decipher.setAuthTag(protectedDek.subarray(NONCE_BYTES + DEK_BYTES))
  const dek = decipher.update(protectedDek.subarray(NONCE_BYTES, NONCE_BYTES + DEK_BYTES))
  decipher.final()
  return dek
}

/**
 * A key that seals or opens envelopes: a KeyObject, or an X-Wing key (src/crypto/xwing.ts), which
 * OpenSSL cannot hold as one KeyObject. Batches carry them in one list (envelope-batch.ts).
 */
export type EnvelopeKey = KeyObject | XWingPublicKey | XWingPrivateKey

const isXWingPublic = (key: EnvelopeKey): key is XWingPublicKey =>
  !(key instanceof KeyObject) && 'bytes' in key
const isXWingPrivate = (key: EnvelopeKey): key is XWingPrivateKey =>
  !(key instanceof KeyObject) && 'publicKey' in key

/**
 * The scheme and the key that seal envelopes for a key version of this kind: the public key of a
 * key pair (X-Wing's pair of halves), the secret key of an AES key. Undefined when the version
 * lacks that key.
 */
export function sealingKey(
  kind: string,
  opened: {
    publicKey: KeyObject | null
    secretKey: KeyObject | null
    xwing?: { publicKey: XWingPublicKey } | undefined
  },
): { scheme: Scheme; key: KeyObject | XWingPublicKey } | undefined {
  if (kind === 'x-wing')
    return opened.xwing ? { scheme: SCHEME.xWing, key: opened.xwing.publicKey } : undefined
  if (kind === 'aes-gcm')
    return opened.secretKey ? { scheme: SCHEME.aesGcm, key: opened.secretKey } : undefined
  if (!opened.publicKey) return undefined
  return { scheme: kind === 'rsa' ? SCHEME.rsaOaep : SCHEME.mlKem, key: opened.publicKey }
}

/**
 * Random bytes a seal needs besides the nonce: the DEK (RSA), the DEK and its nonce (AES), the
 * X25519 ephemeral secret (X-Wing; ML-KEM's coins come from OpenSSL).
 */
export function extraRandomBytes(scheme: number): number {
  return scheme === SCHEME.rsaOaep
    ? DEK_BYTES
    : scheme === SCHEME.aesGcm
      ? DEK_BYTES + NONCE_BYTES
      : scheme === SCHEME.xWing
        ? XWING.x25519Bytes
        : 0
}

export interface SealedEnvelope {
  ciphertext: Buffer
  encapsulatedKey: Buffer
  nonce: Buffer
  tag: Buffer
}

export interface SealInput {
  purpose: EnvelopePurpose
  header: EnvelopeHeader
  /** The public key (ML-KEM, RSA, X-Wing), or the secret key (AES). */
  key: EnvelopeKey
  plaintext: Buffer
  context: Buffer
  /**
   * Fresh random bytes: the nonce, the DEK (and its nonce) for RSA and AES, the X25519
   * ephemeral secret for X-Wing.
   */
  random(length: number): Buffer
}

export function sealEnvelope(input: SealInput): SealedEnvelope {
  const header = encodeHeader(input.header)
  let dek: KeyObject
  let protectedDek: Buffer
  const key = input.key
  if (input.header.scheme === SCHEME.xWing) {
    if (!isXWingPublic(key)) throw new Error('an X-Wing envelope is sealed with an X-Wing public key')
    const { sharedKey, ciphertext } = xwingEncapsulate(key, input.random)
    dek = dekFromSharedSecret(sharedKey, header)
    protectedDek = ciphertext
  } else if (!(key instanceof KeyObject)) {
    throw new Error('an X-Wing key seals X-Wing envelopes only')
  } else if (input.header.scheme === SCHEME.mlKem) {
    const { sharedKey, ciphertext } = encapsulate(key)
    dek = dekFromSharedSecret(sharedKey, header)
    protectedDek = ciphertext
  } else if (input.header.scheme === SCHEME.aesGcm) {
    const dekBytes = input.random(DEK_BYTES)
    protectedDek = sealDekWithAes(key, dekBytes, header, input.random(NONCE_BYTES))
    dek = secretKey(dekBytes)
  } else {
    const dekBytes = input.random(DEK_BYTES)
    protectedDek = publicEncrypt({ key, ...OAEP }, dekBytes)
    dek = secretKey(dekBytes)
  }
  const nonce = input.random(NONCE_BYTES)
  const cipher = createCipheriv('aes-256-gcm', dek, nonce)
  cipher.setAAD(aad(input.purpose, header, input.context))
  const ciphertext = joined(cipher.update(input.plaintext), cipher.final())
  return {
    ciphertext,
    encapsulatedKey: Buffer.concat([header, protectedDek]),
    nonce,
    tag: cipher.getAuthTag(),
  }
}

/** Any failure to open: deliberately one kind, whatever the cause. */
export class EnvelopeError extends Error {
  constructor() {
    super('the envelope cannot be opened')
  }
}

export interface OpenInput {
  purpose: EnvelopePurpose
  envelope: SealedEnvelope
  /** The private key (ML-KEM, RSA, X-Wing), or the secret key (AES). */
  privateKey: EnvelopeKey
  context: Buffer
}

export function openEnvelope(input: OpenInput): Buffer {
  const { envelope } = input
  const header = envelope.encapsulatedKey.subarray(0, HEADER_BYTES)
  const parsed = decodeHeader(header)
  if (!parsed || envelope.nonce.length !== NONCE_BYTES || envelope.tag.length !== TAG_BYTES) {
    throw new EnvelopeError()
  }
  const protectedDek = envelope.encapsulatedKey.subarray(HEADER_BYTES)
  const key = input.privateKey
  // Scheme 0x04 with an X-Wing key and only with one: a scheme byte changed either way is refused
  // here (besides failing the AEAD, which binds the header).
  if ((parsed.scheme === SCHEME.xWing) !== isXWingPrivate(key)) throw new EnvelopeError()
  let dek: KeyObject
  try {
    if (isXWingPrivate(key)) {
      dek = dekFromSharedSecret(xwingDecapsulate(key, protectedDek), header)
    } else if (!(key instanceof KeyObject)) {
      throw new EnvelopeError()
    } else if (parsed.scheme === SCHEME.mlKem) {
      dek = dekFromSharedSecret(decapsulate(key, protectedDek), header)
    } else if (parsed.scheme === SCHEME.aesGcm) {
      dek = secretKey(openDekWithAes(key, protectedDek, header))
    } else {
      const dekBytes = privateDecrypt({ key, ...OAEP }, protectedDek)
      if (dekBytes.length !== DEK_BYTES) throw new EnvelopeError()
      dek = secretKey(dekBytes)
    }
  } catch {
    throw new EnvelopeError()
  }
  try {
    const decipher = createDecipheriv('aes-256-gcm', dek, envelope.nonce)
    decipher.setAAD(aad(input.purpose, header, input.context))
    decipher.setAuthTag(envelope.tag)
    return joined(decipher.update(envelope.ciphertext), decipher.final())
  } catch {
    throw new EnvelopeError()
  }
}

/** The envelope as one byte string (see the format comment above). */
export function toCompact(envelope: SealedEnvelope): Buffer {
  const length = Buffer.alloc(2)
  length.writeUInt16BE(envelope.encapsulatedKey.length)
  return Buffer.concat([length, envelope.encapsulatedKey, envelope.nonce, envelope.tag, envelope.ciphertext])
}

/** Undefined when the bytes cannot be a compact envelope (too short for its declared parts). */
export function fromCompact(bytes: Buffer): SealedEnvelope | undefined {
  if (bytes.length < 2) return undefined
  const keyLength = bytes.readUInt16BE(0)
  const nonceAt = 2 + keyLength
  const tagAt = nonceAt + NONCE_BYTES
  const ciphertextAt = tagAt + TAG_BYTES
  if (keyLength < HEADER_BYTES || bytes.length < ciphertextAt) return undefined
  return {
    encapsulatedKey: bytes.subarray(2, nonceAt),
    nonce: bytes.subarray(nonceAt, tagAt),
    tag: bytes.subarray(tagAt, ciphertextAt),
    ciphertext: bytes.subarray(ciphertextAt),
  }
}
