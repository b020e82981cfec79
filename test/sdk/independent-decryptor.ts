import { gcm } from '@noble/ciphers/aes.js'
import { hkdf } from '@noble/hashes/hkdf.js'
import { sha512 } from '@noble/hashes/sha2.js'

/**
 * A decryptor of the SDK's message format v1 written from docs/sdk-message-format.md alone, on
 * @noble/ciphers and @noble/hashes: none of the SDK's code. Whole messages only; it fails with
 * the format's error codes, checking in the order the format gives.
 */

export class FormatError extends Error {
  readonly code: string
  constructor(code: string, message = code) {
    super(message)
    this.code = code
  }
}

export interface Edk {
  providerId: string
  providerInfo: string
  encryptedDataKey: Uint8Array
}

const te = new TextEncoder()
const td = new TextDecoder('utf-8', { fatal: true })
const cat = (...parts: Uint8Array[]) => {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0))
  let o = 0
  for (const p of parts) {
    out.set(p, o)
    o += p.length
  }
  return out
}
const u32 = (n: number) => {
  const b = new Uint8Array(4)
  new DataView(b.buffer).setUint32(0, n)
  return b
}
const u64 = (n: number) => {
  const b = new Uint8Array(8)
  new DataView(b.buffer).setBigUint64(0, BigInt(n))
  return b
}
const equal = (a: Uint8Array, b: Uint8Array) => {
  if (a.length !== b.length) return false
  let d = 0
  for (let i = 0; i < a.length; i++) d |= a[i]! ^ b[i]!
  return d === 0
}

export function independentDecrypt(
  message: Uint8Array,
  dataKeyFor: (edk: Edk) => Uint8Array | undefined,
  options: { maxEncryptedDataKeys?: number; expectedContext?: Record<string, string> } = {},
): { plaintext: Uint8Array; context: Record<string, string> } {
  const view = new DataView(message.buffer, message.byteOffset, message.byteLength)
  let at = 0
  const need = (n: number, code = 'truncated') => {
    if (at + n > message.length) throw new FormatError(code)
  }
  const read = (n: number) => {
    need(n)
    const out = message.subarray(at, at + n)
    at += n
    return out
  }
  const r8 = () => read(1)[0]!
  const r16 = () => {
    need(2)
    at += 2
    return view.getUint16(at - 2)
  }
  const r32 = () => {
    need(4)
    at += 4
    return view.getUint32(at - 4)
  }
  const rVar = () => read(r16())

  // Header
  if (r8() !== 1) throw new FormatError('unsupported_version')
  const algorithm = r16()
  if (algorithm !== 0x0001) throw new FormatError('unsupported_algorithm')
  const messageId = read(32)
  const contextBytes = rVar()
  let context: Record<string, string> = {}
  if (contextBytes.length > 0) {
    try {
      context = JSON.parse(td.decode(contextBytes))
    } catch {
      throw new FormatError('malformed_header')
    }
    const keys = Object.keys(context).sort()
    const canonical = `{${keys.map((k) => `${JSON.stringify(k)}:${JSON.stringify(context[k])}`).join(',')}}`
    if (!equal(te.encode(canonical), contextBytes)) throw new FormatError('malformed_header')
  }
  const count = r16()
  if (count === 0) throw new FormatError('malformed_header')
  if (count > (options.maxEncryptedDataKeys ?? 10)) throw new FormatError('too_many_encrypted_data_keys')
  const edks: Edk[] = []
  for (let i = 0; i < count; i++) {
    const providerId = td.decode(rVar())
    const providerInfo = td.decode(rVar())
    edks.push({ providerId, providerInfo, encryptedDataKey: rVar().slice() })
  }
  if (r8() !== 0x02) throw new FormatError('malformed_header')
  const frameLength = r32()
  if (frameLength < 128 || frameLength > 1_048_576) throw new FormatError('malformed_header')
  const commitment = read(32)
  const headerAad = message.subarray(0, at)
  const headerTag = read(16)

  for (const [k, v] of Object.entries(options.expectedContext ?? {}))
    if (context[k] !== v) throw new FormatError('context_mismatch')
  let dataKey: Uint8Array | undefined
  for (const edk of edks) {
    dataKey = dataKeyFor(edk)
    if (dataKey) break
  }
  if (!dataKey) throw new FormatError('no_decryptable_data_key')
  const derived = hkdf(sha512, dataKey, messageId, cat(Uint8Array.of(0x00, 0x01), te.encode('DERIVEKEY')), 32)
  const expectedCommitment = hkdf(sha512, dataKey, messageId, te.encode('COMMITKEY'), 32)
  if (!equal(expectedCommitment, commitment)) throw new FormatError('commitment_mismatch')
  try {
    gcm(derived, new Uint8Array(12), headerAad).decrypt(headerTag)
  } catch {
    throw new FormatError('header_authentication_failed')
  }

  // Body
  const out: Uint8Array[] = []
  for (let sequence = 1; ; sequence++) {
    const first = r32()
    const final = first === 0xffffffff
    const number = final ? r32() : first
    if (number !== sequence) throw new FormatError('frame_out_of_order')
    const iv = read(12)
    if (!equal(iv, cat(new Uint8Array(8), u32(sequence))))
      throw new FormatError('frame_authentication_failed')
    const length = final ? r32() : frameLength
    if (length > frameLength) throw new FormatError('frame_authentication_failed')
    const sealed = read(length + 16)
    const aad = cat(messageId, te.encode(final ? 'KMS final frame' : 'KMS frame'), u32(sequence), u64(length))
    try {
      out.push(gcm(derived, iv, aad).decrypt(sealed))
    } catch {
      throw new FormatError('frame_authentication_failed', `frame ${sequence}`)
    }
    if (final) break
  }
  if (at !== message.length) throw new FormatError('trailing_data')
  return { plaintext: cat(...out), context }
}
