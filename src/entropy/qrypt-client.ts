import { isStrictBase64 } from '../platform/base64.ts'
import {
  createBatchChecks,
  type EntropyClient,
  type EntropyClientOptions,
  requireBatchSize,
  sourceHttpClient,
} from './entropy-client.ts'
import { endpoint, getJson, isRecord, lenientCount } from './http-json.ts'
import { rejection } from './source-errors.ts'

/** Every element of `random` decodes to exactly this many bytes (docs.qrypt.com/eaas). */
const QRYPT_BLOCK_BYTES = 1024
/** The service allows 512 KiB a request; the pool never needs that much at once. */
const QRYPT_MAX_BLOCKS = 64

/**
 * Qrypt Entropy-as-a-Service: `GET {url}/api/v1/quantum-entropy?size=K` with
 * `Authorization: Bearer <token>` and `Accept: application/json`; 200 answers
 * `{random:[K base64 strings of 1024 bytes each], size:K}`.
 */
export function createQryptClient(options: EntropyClientOptions): EntropyClient {
  const base = new URL(options.url)
  const http = sourceHttpClient(options)
  const checks = createBatchChecks()
  const client: EntropyClient = {
    protocol: 'qrypt',
    maxBatchBytes: QRYPT_MAX_BLOCKS * QRYPT_BLOCK_BYTES,
    batchUnitBytes: QRYPT_BLOCK_BYTES,
    async fetch(bytes, signal) {
      requireBatchSize(client, bytes)
      const blocks = bytes / QRYPT_BLOCK_BYTES
      const body = await getJson(http, {
        url: endpoint(base, '/api/v1/quantum-entropy', { size: String(blocks) }),
        headers: { accept: 'application/json', authorization: `Bearer ${options.credential.reveal()}` },
        timeoutMs: options.timeoutMs,
        // 1368 base64 characters per block plus quotes, separators and some whitespace.
        maxBodyBytes: 4096 + blocks * 1500,
        signal,
      })
      return parseQrypt(body, blocks, checks)
    },
  }
  return client
}

function parseQrypt(body: unknown, blocks: number, checks: ReturnType<typeof createBatchChecks>): Buffer {
  if (!isRecord(body)) throw rejection('invalid_json')
  const random = body['random']
  if (!Array.isArray(random)) throw rejection('invalid_data')
  if (random.length < blocks) throw rejection('short')
  if (random.length > blocks) throw rejection('oversized')
  if (lenientCount(body['size']) !== blocks) throw rejection('size_mismatch')
  const out = Buffer.alloc(blocks * QRYPT_BLOCK_BYTES)
  try {
    for (let i = 0; i < blocks; i++) {
      const text: unknown = random[i]
      if (typeof text !== 'string') throw rejection('invalid_data')
      if (!isStrictBase64(text)) throw rejection('invalid_base64')
      const block = Buffer.from(text, 'base64')
      try {
        // Node's decoder skips what it cannot read; only the canonical encoding round-trips.
        if (block.toString('base64') !== text) throw rejection('invalid_base64')
        if (block.length !== QRYPT_BLOCK_BYTES) throw rejection('block_size')
        block.copy(out, i * QRYPT_BLOCK_BYTES)
      } finally {
        block.fill(0)
      }
    }
    checks.accept(out)
    return out
  } catch (error) {
    out.fill(0)
    throw error
  }
}
