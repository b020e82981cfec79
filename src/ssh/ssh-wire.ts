import { createHash, createPublicKey, type KeyObject } from 'node:crypto'
import { AppError } from '../platform/errors.ts'

/**
 * The SSH wire encoding (RFC 4251 section 5: uint32, uint64, string, mpint) and OpenSSH public
 * keys: the `authorized_keys` line a client sends (`ssh-ed25519 AAAA... comment`) and the blob of
 * a key the service holds. Written over node:crypto alone. A client's key is checked (an EC point
 * must lie on its curve, which node:crypto checks; Ed25519 and RSA keys by their sizes, as OpenSSH
 * does) and re-encoded from its parts, so what goes into a certificate is the canonical encoding
 * whatever the client sent.
 */

/** Appends wire values; `toBuffer` joins them. */
export class SshWriter {
  private readonly parts: Buffer[] = []

  byte(value: number): this {
    this.parts.push(Buffer.of(value))
    return this
  }

  uint32(value: number): this {
    const out = Buffer.alloc(4)
    out.writeUInt32BE(value)
    this.parts.push(out)
    return this
  }

  uint64(value: bigint): this {
    const out = Buffer.alloc(8)
    out.writeBigUInt64BE(value)
    this.parts.push(out)
    return this
  }

  /** A length-prefixed byte string (text as UTF-8). */
  string(value: Buffer | string): this {
    const bytes = typeof value === 'string' ? Buffer.from(value, 'utf8') : value
    this.uint32(bytes.length)
    this.parts.push(bytes)
    return this
  }

  /** A non-negative integer given as its unsigned big-endian magnitude (leading zeros allowed). */
  mpint(magnitude: Buffer): this {
    return this.string(mpintBytes(magnitude))
  }

  /** Bytes already encoded (a key's fields after its type name). */
  raw(bytes: Buffer): this {
    this.parts.push(bytes)
    return this
  }

  toBuffer(): Buffer {
    return Buffer.concat(this.parts)
  }
}

/** The two's-complement body of an mpint: no leading zero bytes but one before a high bit. */
function mpintBytes(magnitude: Buffer): Buffer {
  let start = 0
  while (start < magnitude.length && magnitude[start] === 0) start++
  const trimmed = magnitude.subarray(start)
  if (trimmed.length === 0) return Buffer.alloc(0)
  return (trimmed[0]! & 0x80) !== 0 ? Buffer.concat([Buffer.of(0), trimmed]) : Buffer.from(trimmed)
}

/** Why bytes are not a well-formed encoding; the caller turns it into its own answer. */
class WireError extends Error {}

/** Reads wire values; every read checks the bytes left, so no input reads past its end. */
export class SshReader {
  private offset = 0
  private readonly bytes: Buffer

  constructor(bytes: Buffer) {
    this.bytes = bytes
  }

  private take(length: number): Buffer {
    if (length > this.bytes.length - this.offset) throw new WireError('is truncated')
    const out = this.bytes.subarray(this.offset, this.offset + length)
    this.offset += length
    return out
  }

  byte(): number {
    return this.take(1)[0]!
  }

  uint32(): number {
    return this.take(4).readUInt32BE()
  }

  uint64(): bigint {
    return this.take(8).readBigUInt64BE()
  }

  string(): Buffer {
    return this.take(this.uint32())
  }

  text(): string {
    return this.string().toString('latin1')
  }

  /** A non-negative mpint's magnitude, without leading zeros; a negative one is refused. */
  mpint(): Buffer {
    const body = this.string()
    if (body.length > 0 && (body[0]! & 0x80) !== 0) throw new WireError('holds a negative integer')
    let start = 0
    while (start < body.length && body[start] === 0) start++
    return body.subarray(start)
  }

  get remaining(): number {
    return this.bytes.length - this.offset
  }

  end(): void {
    if (this.remaining !== 0) throw new WireError('has bytes after its last field')
  }
}

/** The public-key types a certificate can be issued for, as OpenSSH names them. */
const SUBJECT_KEY_TYPES = [
  'ssh-ed25519',
  'ecdsa-sha2-nistp256',
  'ecdsa-sha2-nistp384',
  'ecdsa-sha2-nistp521',
  'ssh-rsa',
] as const
export type SshKeyType = (typeof SUBJECT_KEY_TYPES)[number]

/** The longest `authorized_keys` line taken: an RSA-16384 key with a comment fits. */
export const MAX_PUBLIC_KEY_LINE = 8192
/** RSA moduli below this are refused (NIST SP 800-131A); above OpenSSH's own limit too. */
const MIN_RSA_BITS = 2048
const MAX_RSA_BITS = 16384

const CURVES = {
  'ecdsa-sha2-nistp256': { identifier: 'nistp256', crv: 'P-256', coordinate: 32 },
  'ecdsa-sha2-nistp384': { identifier: 'nistp384', crv: 'P-384', coordinate: 48 },
  'ecdsa-sha2-nistp521': { identifier: 'nistp521', crv: 'P-521', coordinate: 66 },
} as const
type EcdsaType = keyof typeof CURVES

/** A public key in OpenSSH's form. */
export interface SshPublicKey {
  type: SshKeyType
  /** The fields after the type name, canonically encoded (what a certificate carries). */
  body: Buffer
  /** string(type) || body: the key blob of `authorized_keys`, fingerprints and signatures. */
  blob: Buffer
  /** `SHA256:<base64>` as ssh-keygen -l prints it. */
  fingerprint: string
  /** RSA modulus bits; the curve's or Ed25519's size otherwise. */
  bits: number
}

/** A client's public key line: the key and the line's comment (printable text only, else none). */
export interface ParsedPublicKeyLine {
  key: SshPublicKey
  comment: string | null
}

const ALLOWED_TEXT = `${SUBJECT_KEY_TYPES.join(', ')} (RSA of ${MIN_RSA_BITS} bits or more)`

/** 400 naming the field, what is wrong, and the key types taken. */
function invalidPublicKey(field: string, problem: string): AppError {
  const message = `${problem}; allowed: an OpenSSH public key line (type, Base64 key, optional comment) of type ${ALLOWED_TEXT}`
  return new AppError(400, 'validation_failed', `${field} ${message}`, {
    fields: [{ path: field, message }],
    allowedKeyTypes: [...SUBJECT_KEY_TYPES],
  })
}

export function sshFingerprint(blob: Buffer): string {
  return `SHA256:${createHash('sha256').update(blob).digest('base64').replace(/=+$/, '')}`
}

function publicKeyOf(type: SshKeyType, body: Buffer, bits: number): SshPublicKey {
  const blob = new SshWriter().string(type).raw(body).toBuffer()
  return { type, body, blob, fingerprint: sshFingerprint(blob), bits }
}

const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/
const PRINTABLE_COMMENT = /^[\x20-\x7e]{1,255}$/

/**
 * Parses one `authorized_keys`-style line (`<type> <base64> [comment]`, what a `.pub` file holds)
 * and checks the key: its blob names the same type, decodes completely, and node:crypto accepts
 * it. Certificates, DSA, security keys (sk-*) and every other type are refused by name.
 */
export function parsePublicKeyLine(line: string, field: string): ParsedPublicKeyLine {
  if (line.length > MAX_PUBLIC_KEY_LINE)
    throw invalidPublicKey(field, `is longer than ${MAX_PUBLIC_KEY_LINE} characters`)
  const parts = line.trim().split(/[ \t]+/)
  const type = parts[0] ?? ''
  const encoded = parts[1]
  const comment = parts.slice(2).join(' ')
  if (type.includes('-cert-v01@openssh.com'))
    throw invalidPublicKey(field, 'is a certificate: pass the public key it certifies')
  if (type.startsWith('sk-')) throw invalidPublicKey(field, 'is a security-key (sk-*) key')
  if (type === 'ssh-dss') throw invalidPublicKey(field, 'is a DSA key')
  if (!(SUBJECT_KEY_TYPES as readonly string[]).includes(type))
    throw invalidPublicKey(field, 'does not start with a key type taken')
  if (!encoded || encoded.length % 4 !== 0 || !BASE64.test(encoded))
    throw invalidPublicKey(field, 'has no valid Base64 key after its type')
  const blob = Buffer.from(encoded, 'base64')
  let key: SshPublicKey
  try {
    key = parsePublicKeyBlob(blob, type as SshKeyType)
  } catch (error) {
    if (error instanceof WireError) throw invalidPublicKey(field, `holds a key blob that ${error.message}`)
    throw error
  }
  return { key, comment: PRINTABLE_COMMENT.test(comment) ? comment : null }
}

/** A key blob of the expected type; WireError when it is not one. */
function parsePublicKeyBlob(blob: Buffer, expected: SshKeyType): SshPublicKey {
  const reader = new SshReader(blob)
  const named = reader.text()
  if (named !== expected) throw new WireError(`names another type than ${expected}`)
  if (expected === 'ssh-ed25519') {
    const point = reader.string()
    reader.end()
    // Any 32 bytes are an Ed25519 public key to OpenSSH (and to node:crypto): nothing to check.
    if (point.length !== 32) throw new WireError('has an Ed25519 key that is not 32 bytes')
    return publicKeyOf(expected, new SshWriter().string(point).toBuffer(), 256)
  }
  if (expected === 'ssh-rsa') {
    const e = reader.mpint()
    const n = reader.mpint()
    reader.end()
    const bits = bitLength(n)
    if (bits < MIN_RSA_BITS) throw new WireError(`has an RSA modulus of ${bits} bits, under ${MIN_RSA_BITS}`)
    if (bits > MAX_RSA_BITS) throw new WireError(`has an RSA modulus over ${MAX_RSA_BITS} bits`)
    if ((n[n.length - 1]! & 1) === 0) throw new WireError('has an even RSA modulus')
    if (e.length > 8 || (e[e.length - 1]! & 1) === 0 || bitLength(e) < 2)
      throw new WireError('has an RSA public exponent that is not an odd number of 2 to 64 bits')
    return publicKeyOf(expected, new SshWriter().mpint(e).mpint(n).toBuffer(), bits)
  }
  const curve = CURVES[expected as EcdsaType]
  const identifier = reader.text()
  const point = reader.string()
  reader.end()
  if (identifier !== curve.identifier) throw new WireError(`names another curve than ${curve.identifier}`)
  if (point.length !== 1 + 2 * curve.coordinate || point[0] !== 0x04)
    throw new WireError(`has an EC point that is not an uncompressed ${curve.crv} point`)
  const x = point.subarray(1, 1 + curve.coordinate)
  const y = point.subarray(1 + curve.coordinate)
  checkedByNode(() =>
    createPublicKey({
      key: { kty: 'EC', crv: curve.crv, x: x.toString('base64url'), y: y.toString('base64url') },
      format: 'jwk',
    }),
  )
  return publicKeyOf(
    expected,
    new SshWriter().string(curve.identifier).string(point).toBuffer(),
    curve.coordinate === 66 ? 521 : curve.coordinate * 8,
  )
}

function checkedByNode(make: () => KeyObject): void {
  try {
    make()
  } catch {
    throw new WireError('holds a key node:crypto refuses (not a point of the curve, or a bad modulus)')
  }
}

function bitLength(magnitude: Buffer): number {
  if (magnitude.length === 0) return 0
  return (magnitude.length - 1) * 8 + (32 - Math.clz32(magnitude[0]!))
}

/**
 * The OpenSSH form of a key the service holds (a CA's key): Ed25519, ECDSA on P-256/384/521, RSA.
 * Other algorithms have no SSH encoding: the caller has refused them before.
 */
export function sshPublicKeyOf(keyObject: KeyObject): SshPublicKey {
  const jwk = keyObject.export({ format: 'jwk' })
  if (jwk.kty === 'OKP' && jwk.crv === 'Ed25519') {
    return publicKeyOf(
      'ssh-ed25519',
      new SshWriter().string(Buffer.from(jwk.x!, 'base64url')).toBuffer(),
      256,
    )
  }
  if (jwk.kty === 'EC') {
    const entry = Object.entries(CURVES).find(([, c]) => c.crv === jwk.crv)
    if (!entry) throw new Error(`no SSH encoding for the curve ${jwk.crv}`)
    const [type, curve] = entry as [EcdsaType, (typeof CURVES)[EcdsaType]]
    const point = Buffer.concat([
      Buffer.of(4),
      leftPad(Buffer.from(jwk.x!, 'base64url'), curve.coordinate),
      leftPad(Buffer.from(jwk.y!, 'base64url'), curve.coordinate),
    ])
    return publicKeyOf(
      type,
      new SshWriter().string(curve.identifier).string(point).toBuffer(),
      curve.coordinate === 66 ? 521 : curve.coordinate * 8,
    )
  }
  if (jwk.kty === 'RSA') {
    const n = Buffer.from(jwk.n!, 'base64url')
    const e = Buffer.from(jwk.e!, 'base64url')
    return publicKeyOf('ssh-rsa', new SshWriter().mpint(e).mpint(n).toBuffer(), bitLength(n))
  }
  throw new Error(`no SSH encoding for a ${jwk.kty} key`)
}

function leftPad(bytes: Buffer, length: number): Buffer {
  if (bytes.length >= length) return bytes
  return Buffer.concat([Buffer.alloc(length - bytes.length), bytes])
}

/** `<type> <base64>[ comment]`: a line of `authorized_keys`, TrustedUserCAKeys or a `.pub` file. */
export function publicKeyLine(type: string, blob: Buffer, comment?: string | null): string {
  return `${type} ${blob.toString('base64')}${comment ? ` ${comment}` : ''}`
}
