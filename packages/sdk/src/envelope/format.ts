import { ByteWriter, concatBytes, utf8, webBytes } from '../bytes.ts'
import { contextBytes, type EncryptionContext, parseContextBytes } from './context.ts'
import { EnvelopeError } from './errors.ts'

/** Message format version 1 (docs/sdk-message-format.md). All integers big-endian. */
const VERSION = 0x01
/** AES-256-GCM, HKDF-SHA-512 key derivation, key commitment, no signature. */
const ALGORITHM_ID = 0x0001
const CONTENT_TYPE_FRAMED = 0x02
export const MESSAGE_ID_BYTES = 32
export const DATA_KEY_BYTES = 32
const COMMITMENT_BYTES = 32
export const TAG_BYTES = 16
export const IV_BYTES = 12
export const DEFAULT_FRAME_LENGTH = 4096
export const MIN_FRAME_LENGTH = 128
export const MAX_FRAME_LENGTH = 1_048_576
export const DEFAULT_MAX_ENCRYPTED_DATA_KEYS = 10
/** The final frame's first field, where a regular frame has its sequence number. */
export const FINAL_FRAME_MARKER = 0xffffffff
/** Sequence numbers run 1 .. 2^32 - 2 (the marker is not one). */
export const MAX_SEQUENCE_NUMBER = 0xfffffffe
export const PROVIDER_ID_KMS = 'kms'

export interface EncryptedDataKey {
  /** `kms` for the service's keys. */
  providerId: string
  /** The wrapping key's id (a UUID). */
  providerInfo: string
  /** The service's compact envelope (the base64-decoded `encryptedDek` or `wrappedKey`). */
  encryptedDataKey: Uint8Array
}

export interface MessageHeader {
  messageId: Uint8Array
  context: EncryptionContext
  encryptedDataKeys: EncryptedDataKey[]
  frameLength: number
  commitment: Uint8Array
  /** Every header byte from version to commitment: the header tag's AAD. */
  authenticated: Uint8Array
  tag: Uint8Array
}

/** Header bytes up to the commitment (the tag is appended once the derived key exists). */
export function encodeHeaderBody(input: {
  messageId: Uint8Array
  context: EncryptionContext
  encryptedDataKeys: readonly EncryptedDataKey[]
  frameLength: number
  commitment: Uint8Array
}): Uint8Array<ArrayBuffer> {
  const writer = new ByteWriter()
    .u8(VERSION)
    .u16(ALGORITHM_ID)
    .bytes(input.messageId)
    .lengthPrefixed(contextBytes(input.context))
    .u16(input.encryptedDataKeys.length)
  for (const edk of input.encryptedDataKeys) {
    writer
      .lengthPrefixed(utf8(edk.providerId))
      .lengthPrefixed(utf8(edk.providerInfo))
      .lengthPrefixed(edk.encryptedDataKey)
  }
  return writer.u8(CONTENT_TYPE_FRAMED).u32(input.frameLength).bytes(input.commitment).finish()
}

const strictUtf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true })

/** Thrown by the reader when the bytes so far end inside the header: wait for more. */
class NeedMore {}
const NEED_MORE = new NeedMore()

class HeaderReader {
  offset = 0
  private readonly bytes: Uint8Array

  constructor(bytes: Uint8Array) {
    this.bytes = bytes
  }

  private take(n: number): Uint8Array {
    if (this.offset + n > this.bytes.length) throw NEED_MORE
    const out = this.bytes.subarray(this.offset, this.offset + n)
    this.offset += n
    return out
  }

  u8(): number {
    return this.take(1)[0]!
  }

  u16(): number {
    const b = this.take(2)
    return (b[0]! << 8) | b[1]!
  }

  u32(): number {
    const b = this.take(4)
    return new DataView(b.buffer, b.byteOffset, 4).getUint32(0)
  }

  lengthPrefixed(): Uint8Array {
    return this.take(this.u16())
  }

  text(what: string): string {
    const bytes = this.lengthPrefixed()
    try {
      return strictUtf8.decode(bytes)
    } catch {
      throw new EnvelopeError('malformed_header', `The header's ${what} is not UTF-8`)
    }
  }

  copy(n: number): Uint8Array {
    return this.take(n).slice()
  }
}

/**
 * Reads a header from the start of `bytes`: the header and its length in bytes, or undefined
 * when `bytes` ends inside it. Each field is checked as soon as it is there, so an unknown
 * version or too many keys fail before the rest arrives.
 */
export function decodeHeader(
  bytes: Uint8Array,
  limits: { maxEncryptedDataKeys: number },
): { header: MessageHeader; length: number } | undefined {
  const reader = new HeaderReader(bytes)
  try {
    const version = reader.u8()
    if (version !== VERSION)
      throw new EnvelopeError(
        'unsupported_version',
        `Unknown message format version ${version} (this SDK reads 1)`,
      )
    const algorithm = reader.u16()
    if (algorithm !== ALGORITHM_ID)
      throw new EnvelopeError(
        'unsupported_algorithm',
        `Unknown algorithm id 0x${algorithm.toString(16).padStart(4, '0')} (this SDK reads 0x0001)`,
      )
    const messageId = reader.copy(MESSAGE_ID_BYTES)
    const context = parseContextBytes(reader.lengthPrefixed())
    const count = reader.u16()
    if (count === 0) throw new EnvelopeError('malformed_header', 'The header has no encrypted data key')
    if (count > limits.maxEncryptedDataKeys)
      throw new EnvelopeError(
        'too_many_encrypted_data_keys',
        `The header has ${count} encrypted data keys; at most ${limits.maxEncryptedDataKeys} are read`,
      )
    const encryptedDataKeys: EncryptedDataKey[] = []
    for (let i = 0; i < count; i++) {
      const providerId = reader.text('provider id')
      const providerInfo = reader.text('provider info')
      const encryptedDataKey = reader.lengthPrefixed().slice()
      encryptedDataKeys.push({ providerId, providerInfo, encryptedDataKey })
    }
    const contentType = reader.u8()
    if (contentType !== CONTENT_TYPE_FRAMED)
      throw new EnvelopeError('malformed_header', `Unknown content type ${contentType} (only 2, framed)`)
    const frameLength = reader.u32()
    if (frameLength < MIN_FRAME_LENGTH || frameLength > MAX_FRAME_LENGTH)
      throw new EnvelopeError(
        'malformed_header',
        `The frame length ${frameLength} is outside ${MIN_FRAME_LENGTH} .. ${MAX_FRAME_LENGTH}`,
      )
    const commitment = reader.copy(COMMITMENT_BYTES)
    const authenticated = bytes.slice(0, reader.offset)
    const tag = reader.copy(TAG_BYTES)
    return {
      header: { messageId, context, encryptedDataKeys, frameLength, commitment, authenticated, tag },
      length: reader.offset,
    }
  } catch (error) {
    if (error === NEED_MORE) return undefined
    throw error
  }
}

/** IV of frame `sequenceNumber`: 8 zero bytes, then the number. */
export function frameIv(sequenceNumber: number): Uint8Array<ArrayBuffer> {
  const iv = new Uint8Array(IV_BYTES)
  new DataView(iv.buffer).setUint32(8, sequenceNumber)
  return iv
}

const REGULAR_LABEL = utf8('KMS frame')
const FINAL_LABEL = utf8('KMS final frame')

/** messageId ‖ label ‖ u32(sequence number) ‖ u64(content length). */
export function frameAad(
  messageId: Uint8Array,
  final: boolean,
  sequenceNumber: number,
  contentLength: number,
): Uint8Array<ArrayBuffer> {
  const tail = new Uint8Array(12)
  const view = new DataView(tail.buffer)
  view.setUint32(0, sequenceNumber)
  view.setBigUint64(4, BigInt(contentLength))
  return concatBytes([messageId, final ? FINAL_LABEL : REGULAR_LABEL, tail])
}

/** WebCrypto's key type, named through the API so it reads the same under the DOM's and Node's type libraries. */
export type AesKey = Awaited<ReturnType<typeof crypto.subtle.importKey>>

export interface MessageKeys {
  /** The AES-256-GCM key of the header tag and the frames. */
  key: AesKey
  commitment: Uint8Array
}

const DERIVE_INFO = concatBytes([Uint8Array.of(ALGORITHM_ID >> 8, ALGORITHM_ID & 0xff), utf8('DERIVEKEY')])
const COMMIT_INFO = utf8('COMMITKEY')

/**
 * derived key = HKDF-SHA-512(data key, salt = message id, info = u16(algorithm) ‖ "DERIVEKEY"),
 * commitment = HKDF-SHA-512(data key, salt = message id, info = "COMMITKEY"), 32 bytes each.
 */
export async function deriveMessageKeys(
  dataKey: Uint8Array,
  messageId: Uint8Array,
  usage: 'encrypt' | 'decrypt',
): Promise<MessageKeys> {
  if (dataKey.length !== DATA_KEY_BYTES)
    throw new TypeError(`The data key must be ${DATA_KEY_BYTES} bytes (is ${dataKey.length})`)
  const ikm = await crypto.subtle.importKey('raw', webBytes(dataKey), 'HKDF', false, ['deriveBits'])
  const hkdf = (info: Uint8Array<ArrayBuffer>) =>
    crypto.subtle.deriveBits({ name: 'HKDF', hash: 'SHA-512', salt: webBytes(messageId), info }, ikm, 256)
  const [derived, commitment] = await Promise.all([hkdf(DERIVE_INFO), hkdf(COMMIT_INFO)])
  const key = await crypto.subtle.importKey('raw', derived, { name: 'AES-GCM' }, false, [usage])
  return { key, commitment: new Uint8Array(commitment) }
}
