import { randomBytes } from 'node:crypto'

/**
 * A minimal DER writer for tests that hand-craft ASN.1 structures (encrypted PKCS#8 with chosen
 * KDF parameters) which no tool would produce, e.g. 2^31-1 PBKDF2 iterations.
 */
function length(n: number): Buffer {
  if (n < 0x80) return Buffer.of(n)
  const bytes: number[] = []
  for (let v = n; v > 0; v = Math.floor(v / 256)) bytes.unshift(v & 0xff)
  return Buffer.from([0x80 | bytes.length, ...bytes])
}

export const tlv = (tag: number, ...content: Buffer[]) => {
  const body = Buffer.concat(content)
  return Buffer.concat([Buffer.of(tag), length(body.length), body])
}
export const seq = (...content: Buffer[]) => tlv(0x30, ...content)
export const octets = (bytes: Buffer) => tlv(0x04, bytes)
export const oid = (hex: string) => tlv(0x06, Buffer.from(hex, 'hex'))
/** The DER content of a dotted OID (X.690 §8.19), as hex for `oid`: first two arcs as 40a + b, then base 128. */
export function oidContent(dotted: string): string {
  const [a, b, ...rest] = dotted.split('.').map(Number) as [number, number, ...number[]]
  const bytes: number[] = []
  for (const arc of [40 * a + b, ...rest]) {
    const digits: number[] = []
    for (let v = arc; ; v = Math.floor(v / 128)) {
      digits.unshift((v % 128) | (digits.length > 0 ? 0x80 : 0))
      if (v < 128) break
    }
    bytes.push(...digits)
  }
  return Buffer.from(bytes).toString('hex')
}
export function int(value: bigint | number): Buffer {
  let hex = BigInt(value).toString(16)
  if (hex.length % 2) hex = `0${hex}`
  const bytes = Buffer.from(hex, 'hex')
  return tlv(0x02, bytes[0]! & 0x80 ? Buffer.concat([Buffer.of(0), bytes]) : bytes)
}

export const OIDS = {
  pbes2: '2a864886f70d01050d',
  pbkdf2: '2a864886f70d01050c',
  scrypt: '2b06010401da47040b',
  hmacWithSha256: '2a864886f70d0209',
  hmacWithSha512: '2a864886f70d020b',
  aes256Cbc: '60864801650304012a',
  /** pbeWithSHA1And3-KeyTripleDES-CBC (PKCS#12). */
  pkcs12Sha1TripleDes: '2a864886f70d010c0103',
  /** pbeWithMD5AndDES-CBC (PBES1). */
  pbes1Md5Des: '2a864886f70d010503',
}

const aes = () => seq(oid(OIDS.aes256Cbc), octets(randomBytes(16)))
const encryptedInfo = (algorithm: Buffer) => seq(algorithm, octets(randomBytes(64)))

/** EncryptedPrivateKeyInfo, PBES2 with PBKDF2-HMAC-SHA256; the ciphertext is random bytes. */
export function pbkdf2Encrypted(iterations: bigint | number, prf: 'sha256' | 'sha512' = 'sha256'): Buffer {
  const prfOid = prf === 'sha512' ? OIDS.hmacWithSha512 : OIDS.hmacWithSha256
  const kdf = seq(
    oid(OIDS.pbkdf2),
    seq(octets(randomBytes(16)), int(iterations), seq(oid(prfOid), Buffer.of(5, 0))),
  )
  return encryptedInfo(seq(oid(OIDS.pbes2), seq(kdf, aes())))
}

/** EncryptedPrivateKeyInfo, PBES2 with scrypt; the ciphertext is random bytes. */
export function scryptEncrypted(n: bigint | number, r: number, p: number): Buffer {
  const kdf = seq(oid(OIDS.scrypt), seq(octets(randomBytes(16)), int(n), int(r), int(p)))
  return encryptedInfo(seq(oid(OIDS.pbes2), seq(kdf, aes())))
}

/** EncryptedPrivateKeyInfo with a PBES1 or PKCS#12 scheme (salt, iterations). */
export function legacyPbeEncrypted(schemeOid: string, iterations: bigint | number): Buffer {
  return encryptedInfo(seq(oid(schemeOid), seq(octets(randomBytes(8)), int(iterations))))
}

export const toPem = (der: Buffer, label: string) =>
  `-----BEGIN ${label}-----\n${der.toString('base64').replace(/(.{64})/g, '$1\n')}\n-----END ${label}-----\n`

/** One DER element read by the tests (independent of the service's own DER code). */
export interface Tlv {
  tag: number
  raw: Buffer
  content: Buffer
}

/** The element at `at` (definite lengths only); throws when it runs past its container. */
export function readTlv(bytes: Buffer, at = 0): Tlv {
  const tag = bytes[at]!
  let length = bytes[at + 1]!
  let header = 2
  if (length & 0x80) {
    const count = length & 0x7f
    length = 0
    for (let i = 0; i < count; i++) length = length * 256 + bytes[at + 2 + i]!
    header += count
  }
  const raw = bytes.subarray(at, at + header + length)
  if (raw.length !== header + length) throw new Error('a TLV runs past its container')
  return { tag, raw, content: raw.subarray(header) }
}

/** The elements inside a constructed one. */
export function children(node: Tlv): Tlv[] {
  const out: Tlv[] = []
  for (let at = 0; at < node.content.length; at += out[out.length - 1]!.raw.length)
    out.push(readTlv(node.content, at))
  return out
}

export const pemToDer = (pem: string) =>
  Buffer.from(pem.replace(/-----[A-Z0-9 ]+-----/g, '').replace(/\s+/g, ''), 'base64')
