import {
  createBatchChecks,
  type EntropyClient,
  type EntropyClientOptions,
  requireBatchSize,
  sourceHttpClient,
} from './entropy-client.ts'
import { endpoint, getJson, isRecord, lenientCount } from './http-json.ts'
import { rejection } from './source-errors.ts'

/** AQN's documented maximum `length` for one request. */
const AQN_MAX_LENGTH = 1024

/**
 * ANU Quantum Numbers: `GET {url}/?length=N&type=uint8` with `x-api-key`; 200 answers
 * `{type:"uint8", length:N, data:[N integers 0-255], success:true}`. Only uint8 is asked for:
 * it is byte-exact, where the hex types document their block size inconsistently.
 */
export function createAqnClient(options: EntropyClientOptions): EntropyClient {
  const base = new URL(options.url)
  const http = sourceHttpClient(options)
  const checks = createBatchChecks()
  const client: EntropyClient = {
    protocol: 'anu-aqn',
    maxBatchBytes: AQN_MAX_LENGTH,
    batchUnitBytes: 1,
    async fetch(bytes, signal) {
      requireBatchSize(client, bytes)
      const body = await getJson(http, {
        url: endpoint(base, '/', { length: String(bytes), type: 'uint8' }),
        headers: { accept: 'application/json', 'x-api-key': options.credential.reveal() },
        timeoutMs: options.timeoutMs,
        // Up to three digits, a comma and some whitespace per value, plus the envelope.
        maxBodyBytes: 4096 + bytes * 8,
        signal,
      })
      return parseAqn(body, bytes, checks)
    },
  }
  return client
}

function parseAqn(body: unknown, bytes: number, checks: ReturnType<typeof createBatchChecks>): Buffer {
  if (!isRecord(body)) throw rejection('invalid_json')
  if (body['success'] !== true) throw rejection('not_success')
  if (body['type'] !== 'uint8') throw rejection('wrong_type')
  const data = body['data']
  if (!Array.isArray(data)) throw rejection('invalid_data')
  if (data.length < bytes) throw rejection('short')
  if (data.length > bytes) throw rejection('oversized')
  const out = Buffer.alloc(bytes)
  try {
    for (let i = 0; i < bytes; i++) {
      const value: unknown = data[i]
      if (typeof value !== 'number' || !Number.isInteger(value) || value < 0 || value > 255) {
        throw rejection('invalid_data')
      }
      out[i] = value
    }
    if (lenientCount(body['length']) !== bytes) throw rejection('length_mismatch')
    checks.accept(out)
    return out
  } catch (error) {
    out.fill(0)
    throw error
  }
}
