import { webBytes } from '../bytes.ts'
import { canonicalContext, type EncryptionContext } from './context.ts'
import {
  type AesKey,
  DATA_KEY_BYTES,
  DEFAULT_FRAME_LENGTH,
  DEFAULT_MAX_ENCRYPTED_DATA_KEYS,
  deriveMessageKeys,
  encodeHeaderBody,
  FINAL_FRAME_MARKER,
  frameAad,
  frameIv,
  IV_BYTES,
  MAX_FRAME_LENGTH,
  MAX_SEQUENCE_NUMBER,
  MESSAGE_ID_BYTES,
  MIN_FRAME_LENGTH,
} from './format.ts'
import type { Keyring } from './keyring.ts'
import { framesInFlightOf, OrderedWindow, OutputBatch } from './window.ts'

export interface EncryptOptions {
  /** Bound into the message and, by the service keyring, into the data key; default none. */
  context?: EncryptionContext
  /** Plaintext bytes per frame: 128 .. 1 048 576, default 4096. */
  frameLength?: number
  /**
   * The plaintext's size, when known: a caching keyring counts it against its byte bound (a
   * stream of unstated size never uses a cached data key). The stream fails if it carries more
   * or fewer bytes.
   */
  plaintextLength?: number
  /** Frames encrypted at once; default 16. */
  framesInFlight?: number
}

const MAX_U16 = 0xffff

function checkFrameLength(frameLength: number | undefined): number {
  const value = frameLength ?? DEFAULT_FRAME_LENGTH
  if (!Number.isInteger(value) || value < MIN_FRAME_LENGTH || value > MAX_FRAME_LENGTH)
    throw new TypeError(
      `frameLength must be an integer from ${MIN_FRAME_LENGTH} to ${MAX_FRAME_LENGTH} (is ${frameLength})`,
    )
  return value
}

function checkPlaintextLength(value: number | undefined): void {
  if (value !== undefined && (!Number.isSafeInteger(value) || value < 0))
    throw new TypeError(`plaintextLength must be a non-negative integer (is ${value})`)
}

const randomMessageId = () => crypto.getRandomValues(new Uint8Array(MESSAGE_ID_BYTES))

/** Seals one frame (WebCrypto copies the plaintext at the call, so a view of the caller's chunk is safe). */
function sealFrame(
  key: AesKey,
  messageId: Uint8Array,
  sequenceNumber: number,
  final: boolean,
  plaintext: Uint8Array,
): Promise<Uint8Array> {
  const iv = frameIv(sequenceNumber)
  const sealing = crypto.subtle.encrypt(
    { name: 'AES-GCM', iv, additionalData: frameAad(messageId, final, sequenceNumber, plaintext.length) },
    key,
    webBytes(plaintext),
  )
  return sealing.then((sealed) => {
    const prefix = final ? 4 + 4 + IV_BYTES + 4 : 4 + IV_BYTES
    const out = new Uint8Array(prefix + sealed.byteLength)
    const view = new DataView(out.buffer)
    let offset = 0
    if (final) {
      view.setUint32(0, FINAL_FRAME_MARKER)
      offset = 4
    }
    view.setUint32(offset, sequenceNumber)
    out.set(iv, offset + 4)
    if (final) view.setUint32(offset + 4 + IV_BYTES, plaintext.length)
    out.set(new Uint8Array(sealed), prefix)
    return out
  })
}

/**
 * encryptStream with the message id chosen by the caller: for the published test vectors
 * (scripts/make-sdk-vectors.ts), which must be reproducible. Not part of the SDK's API.
 */
export function encryptStreamWithMessageId(
  keyring: Keyring,
  options: EncryptOptions,
  messageIdOf: () => Uint8Array,
): TransformStream<Uint8Array, Uint8Array> {
  const frameLength = checkFrameLength(options.frameLength)
  checkPlaintextLength(options.plaintextLength)
  const window = new OrderedWindow<Uint8Array>(framesInFlightOf(options.framesInFlight))
  const context = options.context ?? {}
  // Refused here, naming the option, rather than by the service or half-way through the stream.
  canonicalContext(context)
  let started: Promise<{ key: AesKey; messageId: Uint8Array }> | undefined
  let sequenceNumber = 0
  let received = 0
  /** The frame being filled. */
  let current = new Uint8Array(frameLength)
  let filled = 0
  /** A full frame kept back until it is known whether more data follows (then it is not the final one). */
  let held: Uint8Array | undefined

  async function start(controller: TransformStreamDefaultController<Uint8Array>) {
    const material = await keyring.generateDataKey(context, { plaintextLength: options.plaintextLength })
    const edks = material.encryptedDataKeys
    if (material.dataKey.length !== DATA_KEY_BYTES)
      throw new TypeError(`The keyring gave a data key of ${material.dataKey.length} bytes (must be 32)`)
    if (edks.length < 1 || edks.length > DEFAULT_MAX_ENCRYPTED_DATA_KEYS)
      throw new TypeError(`The keyring gave ${edks.length} encrypted data keys (1 .. 10 fit a message)`)
    for (const edk of edks)
      if (edk.encryptedDataKey.length > MAX_U16 || edk.providerInfo.length > MAX_U16 / 3)
        throw new TypeError('An encrypted data key is too long for the header (at most 65535 bytes)')
    const messageId = messageIdOf()
    const keys = await deriveMessageKeys(material.dataKey, messageId, 'encrypt')
    material.dataKey.fill(0)
    const body = encodeHeaderBody({
      messageId,
      context,
      encryptedDataKeys: edks,
      frameLength,
      commitment: keys.commitment,
    })
    const tag = await crypto.subtle.encrypt(
      { name: 'AES-GCM', iv: new Uint8Array(IV_BYTES), additionalData: body },
      keys.key,
      new Uint8Array(0),
    )
    controller.enqueue(body)
    controller.enqueue(new Uint8Array(tag))
    return { key: keys.key, messageId }
  }

  async function emit(output: OutputBatch, frame: Uint8Array, final: boolean): Promise<void> {
    const { key, messageId } = await started!
    sequenceNumber++
    if (sequenceNumber > MAX_SEQUENCE_NUMBER) throw new RangeError('The message exceeds 2^32 - 2 frames')
    await window.add(sealFrame(key, messageId, sequenceNumber, final, frame), output.add)
  }

  return new TransformStream<Uint8Array, Uint8Array>({
    async transform(chunk, controller) {
      started ??= start(controller)
      await started
      received += chunk.length
      if (options.plaintextLength !== undefined && received > options.plaintextLength)
        throw new RangeError(`The plaintext is longer than plaintextLength (${options.plaintextLength})`)
      const output = new OutputBatch(controller)
      let offset = 0
      while (offset < chunk.length) {
        if (held) {
          await emit(output, held, false)
          held = undefined
        }
        if (filled === 0 && chunk.length - offset >= frameLength) {
          // A whole frame inside the chunk: no copy.
          held = chunk.subarray(offset, offset + frameLength)
          offset += frameLength
          continue
        }
        const take = Math.min(frameLength - filled, chunk.length - offset)
        current.set(chunk.subarray(offset, offset + take), filled)
        filled += take
        offset += take
        if (filled === frameLength) {
          held = current
          current = new Uint8Array(frameLength)
          filled = 0
        }
      }
      // The caller owns its chunk again once this returns: keep a copy of a frame still held.
      if (held && held.buffer === chunk.buffer) held = held.slice()
      output.flush()
    },
    async flush(controller) {
      started ??= start(controller)
      await started
      if (options.plaintextLength !== undefined && received !== options.plaintextLength)
        throw new RangeError(
          `The plaintext has ${received} bytes, but plaintextLength said ${options.plaintextLength}`,
        )
      const output = new OutputBatch(controller)
      if (held && filled > 0) await emit(output, held, false)
      await emit(output, filled > 0 || !held ? current.subarray(0, filled) : held, true)
      await window.drain(output.add)
      output.flush()
    },
  })
}

/**
 * Encrypts a stream of plaintext bytes into a message (docs/sdk-message-format.md): the header
 * once the keyring gave a data key, then each frame as it fills, in order, with up to
 * framesInFlight frames being encrypted at once.
 */
export function encryptStream(
  keyring: Keyring,
  options: EncryptOptions = {},
): TransformStream<Uint8Array, Uint8Array> {
  return encryptStreamWithMessageId(keyring, options, randomMessageId)
}
