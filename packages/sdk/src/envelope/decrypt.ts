import { ByteQueue, constantTimeEqual, webBytes } from '../bytes.ts'
import { checkExpectedContext, type EncryptionContext } from './context.ts'
import { EnvelopeError } from './errors.ts'
import {
  type AesKey,
  DEFAULT_MAX_ENCRYPTED_DATA_KEYS,
  decodeHeader,
  deriveMessageKeys,
  type EncryptedDataKey,
  FINAL_FRAME_MARKER,
  frameAad,
  frameIv,
  IV_BYTES,
  type MessageHeader,
  TAG_BYTES,
} from './format.ts'
import type { Keyring } from './keyring.ts'
import { framesInFlightOf, OrderedWindow, OutputBatch } from './window.ts'

export interface DecryptOptions {
  /** Pairs the message's context must hold (context_mismatch otherwise); it may hold more. */
  expectedContext?: EncryptionContext
  /** Encrypted data keys a header may carry (too_many_encrypted_data_keys beyond); default 10. */
  maxEncryptedDataKeys?: number
  /** Frames decrypted at once; default 16. */
  framesInFlight?: number
}

/** What a message's header says, once it authenticated. */
export interface DecryptedHeader {
  messageId: Uint8Array
  context: EncryptionContext
  encryptedDataKeys: readonly EncryptedDataKey[]
  frameLength: number
}

export interface DecryptStream extends TransformStream<Uint8Array, Uint8Array> {
  /** Resolves once the header authenticated (before any plaintext); rejects as the stream errors. */
  readonly header: Promise<DecryptedHeader>
}

const u32At = (bytes: Uint8Array, offset: number) =>
  new DataView(bytes.buffer, bytes.byteOffset + offset, 4).getUint32(0)

const REGULAR_PREFIX = 4 + IV_BYTES
/** marker, sequence number, IV, content length. */
const FINAL_PREFIX = 4 + 4 + IV_BYTES + 4

/** The data key, the commitment checked (constant time) before the derived key is used, then the header tag. */
async function openHeader(keyring: Keyring, header: MessageHeader, options: DecryptOptions) {
  checkExpectedContext(header.context, options.expectedContext)
  const dataKey = await keyring.decryptDataKey(header.encryptedDataKeys, header.context)
  const keys = await deriveMessageKeys(dataKey, header.messageId, 'decrypt')
  dataKey.fill(0)
  if (!constantTimeEqual(keys.commitment, header.commitment))
    throw new EnvelopeError('commitment_mismatch', "The data key does not match the message's key commitment")
  try {
    await crypto.subtle.decrypt(
      { name: 'AES-GCM', iv: new Uint8Array(IV_BYTES), additionalData: webBytes(header.authenticated) },
      keys.key,
      webBytes(header.tag),
    )
  } catch {
    throw new EnvelopeError('header_authentication_failed', 'The message header failed authentication')
  }
  return keys.key
}

function openFrame(
  key: AesKey,
  messageId: Uint8Array,
  sequenceNumber: number,
  final: boolean,
  sealed: Uint8Array,
): Promise<Uint8Array> {
  const contentLength = sealed.length - TAG_BYTES
  return crypto.subtle
    .decrypt(
      {
        name: 'AES-GCM',
        iv: frameIv(sequenceNumber),
        additionalData: frameAad(messageId, final, sequenceNumber, contentLength),
      },
      key,
      webBytes(sealed),
    )
    .then(
      (plaintext) => new Uint8Array(plaintext),
      () => {
        throw new EnvelopeError(
          'frame_authentication_failed',
          `Frame ${sequenceNumber}${final ? ' (the final frame)' : ''} failed authentication`,
          { sequenceNumber },
        )
      },
    )
}

const ZERO_IV_PREFIX = new Uint8Array(8)

function checkIv(iv: Uint8Array, sequenceNumber: number): void {
  if (!constantTimeEqual(iv.subarray(0, 8), ZERO_IV_PREFIX) || u32At(iv, 8) !== sequenceNumber)
    throw new EnvelopeError(
      'frame_authentication_failed',
      `Frame ${sequenceNumber} has an IV other than its sequence number's`,
      { sequenceNumber },
    )
}

/**
 * Decrypts a message stream: the header is read and authenticated (no plaintext before), then
 * frames are decrypted up to framesInFlight at once and released in order, each only after its
 * tag verified. On any error the stream errors and releases nothing more.
 */
export function decryptStream(keyring: Keyring, options: DecryptOptions = {}): DecryptStream {
  const maxEncryptedDataKeys = options.maxEncryptedDataKeys ?? DEFAULT_MAX_ENCRYPTED_DATA_KEYS
  if (!Number.isInteger(maxEncryptedDataKeys) || maxEncryptedDataKeys < 1 || maxEncryptedDataKeys > 0xffff)
    throw new TypeError(
      `maxEncryptedDataKeys must be an integer from 1 to 65535 (is ${maxEncryptedDataKeys})`,
    )
  const window = new OrderedWindow<Uint8Array>(framesInFlightOf(options.framesInFlight))
  // The longest header these limits allow: the reader never looks at more bytes than that at once.
  const maxHeaderBytes =
    1 + 2 + 32 + 2 + 0xffff + 2 + maxEncryptedDataKeys * 3 * (2 + 0xffff) + 1 + 4 + 32 + 16
  const queue = new ByteQueue()
  const headerKnown = Promise.withResolvers<DecryptedHeader>()
  // Whoever does not read `header` learns of the failure from the stream itself.
  headerKnown.promise.catch(() => {})
  let state: 'header' | 'frames' | 'done' = 'header'
  let header: MessageHeader | undefined
  let key: AesKey | undefined
  let expected = 1

  async function readHeader(): Promise<void> {
    const decoded = decodeHeader(queue.peek(Math.min(queue.length, maxHeaderBytes)), { maxEncryptedDataKeys })
    if (!decoded) return
    queue.take(decoded.length)
    header = decoded.header
    key = await openHeader(keyring, header, options)
    headerKnown.resolve({
      messageId: header.messageId,
      context: header.context,
      encryptedDataKeys: header.encryptedDataKeys,
      frameLength: header.frameLength,
    })
    state = 'frames'
  }

  /** The next whole frame in the queue, or undefined until it has arrived. */
  function nextFrame(): { sequenceNumber: number; final: boolean; sealed: Uint8Array } | undefined {
    const frameLength = header!.frameLength
    if (queue.length < 4) return undefined
    const first = u32At(queue.peek(4), 0)
    const final = first === FINAL_FRAME_MARKER
    if (!final && first !== expected)
      throw new EnvelopeError('frame_out_of_order', `Frame ${first} came where frame ${expected} was due`, {
        sequenceNumber: first,
        expectedSequenceNumber: expected,
      })
    if (!final) {
      if (queue.length < REGULAR_PREFIX + frameLength + TAG_BYTES) return undefined
      const frame = queue.take(REGULAR_PREFIX + frameLength + TAG_BYTES)
      checkIv(frame.subarray(4, 4 + IV_BYTES), expected)
      return { sequenceNumber: expected, final, sealed: frame.subarray(REGULAR_PREFIX) }
    }
    if (queue.length < FINAL_PREFIX) return undefined
    const prefix = queue.peek(FINAL_PREFIX)
    const sequenceNumber = u32At(prefix, 4)
    if (sequenceNumber !== expected)
      throw new EnvelopeError(
        'frame_out_of_order',
        `The final frame says it is frame ${sequenceNumber} where frame ${expected} was due`,
        { sequenceNumber, expectedSequenceNumber: expected },
      )
    const contentLength = u32At(prefix, 4 + 4 + IV_BYTES)
    if (contentLength > frameLength)
      throw new EnvelopeError(
        'frame_authentication_failed',
        `The final frame claims ${contentLength} bytes, more than the frame length ${frameLength}`,
        { sequenceNumber },
      )
    if (queue.length < FINAL_PREFIX + contentLength + TAG_BYTES) return undefined
    const frame = queue.take(FINAL_PREFIX + contentLength + TAG_BYTES)
    checkIv(frame.subarray(8, 8 + IV_BYTES), sequenceNumber)
    return { sequenceNumber, final, sealed: frame.subarray(FINAL_PREFIX) }
  }

  async function readFrames(output: OutputBatch): Promise<void> {
    for (let frame = nextFrame(); frame; frame = state === 'frames' ? nextFrame() : undefined) {
      if (frame.final) state = 'done'
      else expected++
      const job = openFrame(key!, header!.messageId, frame.sequenceNumber, frame.final, frame.sealed)
      await window.add(job, output.add)
    }
  }

  function checkTrailing(): void {
    if (state === 'done' && queue.length > 0)
      throw new EnvelopeError('trailing_data', 'The stream goes on after the final frame')
  }

  const stream = new TransformStream<Uint8Array, Uint8Array>({
    async transform(chunk, controller) {
      // Verified frames wait here until the chunk is done: an error on the way releases none of them.
      const output = new OutputBatch(controller)
      try {
        queue.push(chunk)
        if (state === 'header') await readHeader()
        if (state === 'frames') await readFrames(output)
        checkTrailing()
        output.flush()
      } catch (error) {
        headerKnown.reject(error)
        throw error
      }
    },
    async flush(controller) {
      try {
        if (state !== 'done')
          throw new EnvelopeError(
            'truncated',
            state === 'header'
              ? 'The stream ends inside the message header'
              : 'The stream ends before the final frame',
          )
        const output = new OutputBatch(controller)
        await window.drain(output.add)
        output.flush()
      } catch (error) {
        headerKnown.reject(error)
        throw error
      }
    },
  })
  return Object.assign(stream, { header: headerKnown.promise })
}
