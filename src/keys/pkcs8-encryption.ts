import { createCipheriv, pbkdf2Sync, randomBytes } from 'node:crypto'

/**
 * Password-based encryption of PKCS#8 keys (RFC 8018 PBES2, RFC 5958 EncryptedPrivateKeyInfo).
 *
 * Import: the caller picks the KDF cost, and OpenSSL pays it before the password is even checked
 * (2^31-1 PBKDF2 iterations are about 15 CPU-minutes). `encryptedKeyCost` reads the parameters
 * from the DER first so that a cost past the bounds below is refused without being paid.
 *
 * Export: node's KeyObject.export with a passphrase uses PBKDF2 with 2,048 iterations. Here the
 * structure is built directly with PBKDF2-HMAC-SHA256 at 600,000 iterations (OWASP 2023) and
 * AES-256-CBC, which OpenSSL, node and our own import all open. (scrypt at OWASP's N=2^17, r=8
 * needs 128 MiB, past the 32 MiB OpenSSL allows a PKCS#8 KDF, so openssl could not open it.)
 */

/** PBKDF2 (and PBES1 / PKCS#12 PBE) iteration counts above this are refused (20 M take 7-10 s). */
const MAX_KDF_ITERATIONS = 10_000_000
/** scrypt: 128·N·r bytes of memory at most; OpenSSL refuses more for a PKCS#8 KDF anyway. */
const MAX_SCRYPT_MEMORY_BYTES = 32 * 1024 * 1024
/** scrypt: the work is p times the N·r memory-hard mix. */
const MAX_SCRYPT_PARALLELISM = 16

const EXPORT_PBKDF2_ITERATIONS = 600_000
export const MIN_EXPORT_PASSWORD_LENGTH = 12

export type KdfCost =
  | { kdf: 'PBKDF2' | 'PBES1' | 'PKCS12-PBE'; iterations: bigint }
  | { kdf: 'scrypt'; n: bigint; r: bigint; p: bigint }
  | { kdf: 'unknown'; oid: string }

/** A malformed or unacceptable structure; the caller turns it into its own error type. */
export class EncryptedKeyError extends Error {
  readonly code: string
  constructor(code: string, message: string) {
    super(message)
    this.code = code
  }
}

// DER object identifiers (content octets, hex).
const OID = {
  pbes2: '2a864886f70d01050d',
  pbkdf2: '2a864886f70d01050c',
  scrypt: '2b06010401da47040b',
  hmacWithSha256: '2a864886f70d0209',
  aes256Cbc: '60864801650304012a',
} as const
const PBES1_PREFIX = '2a864886f70d0105'
const PKCS12_PBE_PREFIX = '2a864886f70d010c01'

interface Tlv {
  tag: number
  /** The content octets. */
  content: Buffer
  /** Offset just past this element in the buffer it was read from. */
  next: number
}

/** One DER element. Indefinite lengths (BER) are refused: they could hide a structure from this reader. */
function readTlv(buf: Buffer, offset: number): Tlv | null {
  if (offset + 2 > buf.length) return null
  const tag = buf[offset]!
  let length = buf[offset + 1]!
  let at = offset + 2
  if (length === 0x80) {
    throw new EncryptedKeyError('invalid_key_material', 'keyMaterial must be DER (definite lengths only)')
  }
  if (length > 0x80) {
    const bytes = length & 0x7f
    if (bytes > 4 || at + bytes > buf.length) return null
    length = 0
    for (let i = 0; i < bytes; i++) length = length * 256 + buf[at + i]!
    at += bytes
  }
  if (at + length > buf.length) return null
  return { tag, content: buf.subarray(at, at + length), next: at + length }
}

/** The elements of a constructed value's content. */
function children(content: Buffer): Tlv[] | null {
  const out: Tlv[] = []
  let at = 0
  while (at < content.length) {
    const tlv = readTlv(content, at)
    if (!tlv) return null
    out.push(tlv)
    at = tlv.next
  }
  return out
}

const SEQUENCE = 0x30
const INTEGER = 0x02
const OCTET_STRING = 0x04
const OBJECT_ID = 0x06

function integer(tlv: Tlv | undefined, what: string): bigint {
  if (!tlv || tlv.tag !== INTEGER || tlv.content.length === 0) {
    throw new EncryptedKeyError(
      'invalid_key_material',
      `keyMaterial: the ${what} of the encrypted key is malformed`,
    )
  }
  // Negative values (high bit set) are nonsense for a cost; OpenSSL would refuse them too.
  if (tlv.content[0]! & 0x80) return -1n
  return BigInt(`0x${tlv.content.toString('hex')}`)
}

function malformed(): EncryptedKeyError {
  return new EncryptedKeyError(
    'invalid_key_material',
    'keyMaterial: the encrypted key structure is malformed',
  )
}

/**
 * The key-derivation cost of an EncryptedPrivateKeyInfo, or null when `der` does not have its
 * shape (SEQUENCE { SEQUENCE { OID, ... }, OCTET STRING }); a plain PrivateKeyInfo, PKCS#1 or
 * SEC1 key starts with an INTEGER instead.
 */
export function encryptedKeyCost(der: Buffer): KdfCost | null {
  const outer = readTlv(der, 0)
  if (!outer || outer.tag !== SEQUENCE) return null
  const parts = children(outer.content)
  if (parts?.length !== 2 || parts[0]!.tag !== SEQUENCE || parts[1]!.tag !== OCTET_STRING) return null
  const algorithm = children(parts[0]!.content)
  if (!algorithm || algorithm[0]?.tag !== OBJECT_ID) return null
  const oid = algorithm[0].content.toString('hex')
  const params = algorithm[1]
  if (oid === OID.pbes2) {
    const pbes2 = params?.tag === SEQUENCE ? children(params.content) : null
    const kdf = pbes2?.[0]?.tag === SEQUENCE ? children(pbes2[0].content) : null
    if (!kdf || kdf[0]?.tag !== OBJECT_ID || kdf[1]?.tag !== SEQUENCE) throw malformed()
    const kdfOid = kdf[0].content.toString('hex')
    const kdfParams = children(kdf[1].content)
    if (!kdfParams) throw malformed()
    if (kdfOid === OID.pbkdf2) {
      return { kdf: 'PBKDF2', iterations: integer(kdfParams[1], 'PBKDF2 iteration count') }
    }
    if (kdfOid === OID.scrypt) {
      return {
        kdf: 'scrypt',
        n: integer(kdfParams[1], 'scrypt N'),
        r: integer(kdfParams[2], 'scrypt r'),
        p: integer(kdfParams[3], 'scrypt p'),
      }
    }
    return { kdf: 'unknown', oid: kdfOid }
  }
  const pbeKind = oid.startsWith(PKCS12_PBE_PREFIX)
    ? 'PKCS12-PBE'
    : oid.startsWith(PBES1_PREFIX)
      ? 'PBES1'
      : null
  if (pbeKind) {
    // PBEParameter / pkcs-12PbeParams: SEQUENCE { salt OCTET STRING, iterations INTEGER }.
    const pbe = params?.tag === SEQUENCE ? children(params.content) : null
    if (!pbe) throw malformed()
    return { kdf: pbeKind, iterations: integer(pbe[1], 'iteration count') }
  }
  return { kdf: 'unknown', oid }
}

/** Throws EncryptedKeyError when opening a key of this cost would cost more than the bounds allow. */
export function checkKdfCost(cost: KdfCost): void {
  const refuse = (message: string) => new EncryptedKeyError('kdf_cost_too_high', `keyMaterial: ${message}`)
  switch (cost.kdf) {
    case 'PBKDF2':
    case 'PBES1':
    case 'PKCS12-PBE':
      if (cost.iterations < 1n || cost.iterations > BigInt(MAX_KDF_ITERATIONS)) {
        throw refuse(
          `the ${cost.kdf} iteration count ${cost.iterations} is outside the allowed range 1 to ${MAX_KDF_ITERATIONS}`,
        )
      }
      return
    case 'scrypt': {
      const { n, r, p } = cost
      if (n < 2n || (n & (n - 1n)) !== 0n || r < 1n || p < 1n) {
        throw refuse('the scrypt parameters are invalid (N a power of two above 1, r and p at least 1)')
      }
      if (128n * n * r > BigInt(MAX_SCRYPT_MEMORY_BYTES)) {
        throw refuse(
          `scrypt N=${n}, r=${r} needs ${128n * n * r} bytes of memory (128·N·r); the bound is ${MAX_SCRYPT_MEMORY_BYTES}`,
        )
      }
      if (p > BigInt(MAX_SCRYPT_PARALLELISM)) {
        throw refuse(`the scrypt parallelization p=${p} exceeds the bound of ${MAX_SCRYPT_PARALLELISM}`)
      }
      return
    }
    case 'unknown':
      throw new EncryptedKeyError(
        'unsupported_key_encryption',
        'keyMaterial: the encrypted key uses a scheme other than PBES2 (PBKDF2 or scrypt), PBES1 or PKCS#12 PBE',
      )
  }
}

// ---------------------------------------------------------------------------------------------
// Export: DER encoding
// ---------------------------------------------------------------------------------------------

function encodeLength(length: number): Buffer {
  if (length < 0x80) return Buffer.of(length)
  const bytes: number[] = []
  for (let n = length; n > 0; n = Math.floor(n / 256)) bytes.unshift(n & 0xff)
  return Buffer.from([0x80 | bytes.length, ...bytes])
}

const der = (tag: number, ...content: Buffer[]) => {
  const body = Buffer.concat(content)
  return Buffer.concat([Buffer.of(tag), encodeLength(body.length), body])
}
const oid = (hex: string) => der(OBJECT_ID, Buffer.from(hex, 'hex'))
const octets = (bytes: Buffer) => der(OCTET_STRING, bytes)
function derInteger(value: number): Buffer {
  let hex = value.toString(16)
  if (hex.length % 2) hex = `0${hex}`
  const bytes = Buffer.from(hex, 'hex')
  return der(INTEGER, bytes[0]! & 0x80 ? Buffer.concat([Buffer.of(0), bytes]) : bytes)
}

/**
 * EncryptedPrivateKeyInfo of a PKCS#8 DER key: PBES2 with PBKDF2-HMAC-SHA256 (600,000
 * iterations, 16-byte salt) and AES-256-CBC (16-byte IV, PKCS#7 padding).
 */
export function encryptPkcs8(pkcs8: Buffer, password: string): Buffer {
  const salt = randomBytes(16)
  const iv = randomBytes(16)
  const key = pbkdf2Sync(Buffer.from(password, 'utf8'), salt, EXPORT_PBKDF2_ITERATIONS, 32, 'sha256')
  try {
    const cipher = createCipheriv('aes-256-cbc', key, iv)
    const encrypted = Buffer.concat([cipher.update(pkcs8), cipher.final()])
    const kdf = der(
      SEQUENCE,
      oid(OID.pbkdf2),
      der(
        SEQUENCE,
        octets(salt),
        derInteger(EXPORT_PBKDF2_ITERATIONS),
        derInteger(32),
        der(SEQUENCE, oid(OID.hmacWithSha256), Buffer.of(0x05, 0x00)),
      ),
    )
    const scheme = der(SEQUENCE, oid(OID.aes256Cbc), octets(iv))
    return der(SEQUENCE, der(SEQUENCE, oid(OID.pbes2), der(SEQUENCE, kdf, scheme)), octets(encrypted))
  } finally {
    key.fill(0)
  }
}

/** PEM text of a DER structure under `label`, 64 characters a line (RFC 7468). */
export function toPem(derBytes: Buffer, label: string): string {
  const lines = derBytes.toString('base64').match(/.{1,64}/g) ?? []
  return `-----BEGIN ${label}-----\n${lines.join('\n')}\n-----END ${label}-----\n`
}
