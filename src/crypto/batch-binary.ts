import { AppError } from '../platform/errors.ts'
import type { ItemFailure } from './batch-service.ts'
import { MAX_CONTEXT_CHARS } from './crypto-schemas.ts'

/**
 * The binary batch transport (docs/envelope-format.md, "Binary batches"): the JSON batch spends
 * most of its main-thread time in Base64 and in 1.6 MB of JSON per 1,000 ML-KEM envelopes
 * (bench/RESULTS.md, "Batches"); this framing carries the same items as raw bytes.
 *
 *   request:  count u32, then per item  data length u32, data, context length u16, context
 *   response: count u32, then per item  0x00, key id (16 bytes), key version u32, length u32, bytes
 *                                   or  0x01, length u16, UTF-8 JSON {"error": ..., "message": ...}
 *
 * All integers big-endian. For encrypt the data is the plaintext and the result bytes the compact
 * envelope; for decrypt the data is the compact envelope and the result bytes the plaintext.
 */
const BATCH_ITEM_OK = 0x00
const BATCH_ITEM_FAILED = 0x01

const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true })

export interface BinaryBatchItem {
  data: Buffer
  context: Buffer
}

const malformed = (path: string, message: string) =>
  new AppError(400, 'validation_failed', `${path} ${message}`, { fields: [{ path, message }] })

/**
 * The items of a binary batch body. Any framing problem is a 400 naming the item and field: the
 * whole body is refused, as a JSON body that does not parse is.
 *
 * Each field is copied out of the body rather than viewed in it: the items go to the crypto
 * pool's threads by structured clone, and views into the one large body buffer made a 1,000-item
 * decrypt batch cost 135 ms of CPU against 74 ms with small copies (docs/decisions.md,
 * "Performance: binary batches").
 */
export function parseBinaryBatch(
  body: Buffer,
  limits: { maxItems: number; maxDataBytes: number; dataName: string },
): BinaryBatchItem[] {
  if (body.length < 4) throw malformed('body', 'must start with the item count (4 bytes, big-endian)')
  const count = body.readUInt32BE(0)
  if (count < 1 || count > limits.maxItems) {
    throw malformed('body/count', `must be between 1 and ${limits.maxItems} (was ${count})`)
  }
  const items: BinaryBatchItem[] = new Array(count)
  let at = 4
  for (let i = 0; i < count; i++) {
    const path = `body/items/${i}`
    if (at + 4 > body.length)
      throw malformed(`${path}/${limits.dataName}`, 'is missing (the body ends early)')
    const dataLength = body.readUInt32BE(at)
    if (dataLength > limits.maxDataBytes) {
      throw malformed(`${path}/${limits.dataName}`, `must be at most ${limits.maxDataBytes} bytes`)
    }
    at += 4
    if (at + dataLength > body.length) {
      throw malformed(`${path}/${limits.dataName}`, `declares ${dataLength} bytes but the body ends early`)
    }
    const data = Buffer.from(body.subarray(at, at + dataLength))
    at += dataLength
    if (at + 2 > body.length) throw malformed(`${path}/context`, 'length is missing (the body ends early)')
    const contextLength = body.readUInt16BE(at)
    at += 2
    if (at + contextLength > body.length) {
      throw malformed(`${path}/context`, `declares ${contextLength} bytes but the body ends early`)
    }
    const context = Buffer.from(body.subarray(at, at + contextLength))
    at += contextLength
    if (contextLength > 0) checkContext(context, `${path}/context`)
    items[i] = { data, context }
  }
  if (at !== body.length) throw malformed('body', `has ${body.length - at} bytes after the last item`)
  return items
}

function checkContext(context: Buffer, path: string): void {
  let chars: number
  try {
    chars = utf8.decode(context).length
  } catch {
    throw malformed(path, 'must be UTF-8')
  }
  if (chars > MAX_CONTEXT_CHARS) throw malformed(path, `must be at most ${MAX_CONTEXT_CHARS} characters`)
}

export type BinaryResult = { ok: true; keyId: string; keyVersion: number; bytes: Buffer } | ItemFailure

/** One buffer for the whole response: sizes first, then each item written once. */
export function serializeBinaryBatch(results: readonly BinaryResult[]): Buffer {
  const failures: (Buffer | null)[] = new Array(results.length)
  let size = 4
  for (const [i, result] of results.entries()) {
    if (result.ok) {
      size += 1 + 16 + 4 + 4 + result.bytes.length
      failures[i] = null
    } else {
      const json = Buffer.from(JSON.stringify({ error: result.error, message: result.message }), 'utf8')
      failures[i] = json
      size += 1 + 2 + json.length
    }
  }
  const out = Buffer.allocUnsafe(size)
  out.writeUInt32BE(results.length, 0)
  let at = 4
  for (const [i, result] of results.entries()) {
    if (result.ok) {
      out[at++] = BATCH_ITEM_OK
      at += out.write(result.keyId.replaceAll('-', ''), at, 16, 'hex')
      at = out.writeUInt32BE(result.keyVersion, at)
      at = out.writeUInt32BE(result.bytes.length, at)
      at += result.bytes.copy(out, at)
    } else {
      const json = failures[i]!
      out[at++] = BATCH_ITEM_FAILED
      at = out.writeUInt16BE(json.length, at)
      at += json.copy(out, at)
    }
  }
  return out
}
