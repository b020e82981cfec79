import { createHash } from 'node:crypto'
import type { EntropyClient, EntropyProtocol } from './entropy-client.ts'
import { createEntropyPool, type EntropyPool } from './entropy-pool.ts'
import { createCsprngSource, type RandomSource } from './random-source.ts'
import {
  EntropyFetchFailure,
  EntropyRejection,
  FAILURE_REASONS,
  type FailureReason,
  REJECTION_REASONS,
  type RejectionReason,
} from './source-errors.ts'

export type RemoteSourceName = 'qrng-primary' | 'qrng-secondary'
export type EntropySourceName = RemoteSourceName | 'system-csprng'
/** `starting`: configured, first batch not in yet; it serves nothing until `up`. */
type RemoteSourceState = 'starting' | 'up' | 'down'

export interface RemoteSourceStatus {
  name: RemoteSourceName
  protocol: EntropyProtocol
  state: RemoteSourceState
  /** The reason of the latest failure or rejection, kept after recovery for the operator. */
  lastError: FailureReason | RejectionReason | undefined
  consecutiveFailures: number
  poolBytes: number
  poolCapacity: number
  bytesServed: number
  batchesAccepted: number
  fetchFailures: Record<FailureReason, number>
  rejections: Record<RejectionReason, number>
}

export interface EntropyStatus {
  /** The source a nonce-sized request would be served from now. */
  source: EntropySourceName
  sources: RemoteSourceStatus[]
  /** Bytes served with no remote contribution (no source up, or its pool too low). */
  csprngBytesServed: number
}

export interface EntropyChain extends RandomSource {
  source(): EntropySourceName
  status(): EntropyStatus
  /** Stops the refill timer, aborts in-flight fetches, wipes the pools. bytes() keeps working on the CSPRNG. */
  close(): void
}

/** The structured-log calls the chain makes; a pino Logger fits. Never given bytes, URLs or credentials. */
export interface EntropyLogger {
  info(fields: object, message: string): void
  warn(fields: object, message: string): void
  debug(fields: object, message: string): void
}

export interface EntropyChainOptions {
  primary?: EntropyClient | undefined
  secondary?: EntropyClient | undefined
  logger: EntropyLogger
  /** Capacity of each remote source's pool; refilled when it falls below half. */
  poolBytes?: number
  /** Refill tick: each source starts at most one fetch per tick. */
  refillIntervalMs?: number
  /** Backoff after the first failure; doubles per consecutive failure up to `retryMaxMs`. */
  retryMs?: number
  retryMaxMs?: number
  csprng?: RandomSource
  /** Monotonic milliseconds, for the backoff. */
  now?: () => number
  /** In [0, 1); spreads the retries of many processes. */
  jitter?: () => number
}

const DEFAULT_POOL_BYTES = 32 * 1024
const DEFAULT_REFILL_INTERVAL_MS = 1000
const DEFAULT_RETRY_MS = 5000
const DEFAULT_RETRY_MAX_MS = 60_000
/** What `source()` asks about: the most frequent request is a 12-byte AES-GCM nonce. */
const NONCE_BYTES = 12
const CONDITIONING_DOMAIN = Buffer.from('kms/entropy/condition/v1\0')

interface RemoteSource {
  name: RemoteSourceName
  client: EntropyClient
  pool: EntropyPool
  state: RemoteSourceState
  lastError: FailureReason | RejectionReason | undefined
  consecutiveFailures: number
  retryAt: number
  inFlight: AbortController | undefined
  batchIndex: number
  bytesServed: number
  batchesAccepted: number
  fetchFailures: Record<FailureReason, number>
  rejections: Record<RejectionReason, number>
}

const zeroCounts = <K extends string>(keys: readonly K[]) =>
  Object.fromEntries(keys.map((k) => [k, 0])) as Record<K, number>

/**
 * Runs a validated batch through SHAKE256 (off the request path, once per batch). The XOF acts
 * as an extractor: a biased but still partly random source yields uniform-looking bytes. The
 * source name and batch index make every batch's stream distinct even if a source replays an
 * older batch that the previous-batch check cannot see.
 */
function condition(name: RemoteSourceName, batchIndex: number, batch: Buffer): Buffer {
  const index = Buffer.alloc(8)
  index.writeUIntBE(batchIndex, 2, 6)
  const out = createHash('shake256', { outputLength: batch.length })
    .update(CONDITIONING_DOMAIN)
    .update(name)
    .update(index)
    .update(batch)
    .digest()
  batch.fill(0)
  return out
}

/**
 * Primary QRNG → secondary QRNG → system CSPRNG, behind the synchronous RandomSource interface.
 *
 * Every output is `L XOR C`: L fresh bytes from the pooled system CSPRNG (always drawn), C the
 * same number of conditioned remote bytes taken once from the first pool that is up and holds
 * enough. L is independent of C (C is fixed before L is drawn and L never leaves the process),
 * so the output is exactly as unpredictable as L whatever a hostile source sends, and repeats
 * only if L repeats; an honest source still rescues a broken L. Requests never touch the
 * network: pools are refilled by a background timer, and a failed source is skipped until a
 * backoff retry succeeds.
 */
export function createEntropyChain(options: EntropyChainOptions): EntropyChain {
  const logger = options.logger
  const poolBytes = options.poolBytes ?? DEFAULT_POOL_BYTES
  const refillIntervalMs = options.refillIntervalMs ?? DEFAULT_REFILL_INTERVAL_MS
  const retryMs = options.retryMs ?? DEFAULT_RETRY_MS
  const retryMaxMs = Math.max(options.retryMaxMs ?? DEFAULT_RETRY_MAX_MS, retryMs)
  const csprng = options.csprng ?? createCsprngSource()
  const now = options.now ?? (() => performance.now())
  const jitter = options.jitter ?? Math.random
  const lowWater = Math.floor(poolBytes / 2)

  const remotes: RemoteSource[] = []
  const add = (name: RemoteSourceName, client: EntropyClient | undefined) => {
    if (!client) return
    remotes.push({
      name,
      client,
      pool: createEntropyPool(poolBytes),
      state: 'starting',
      lastError: undefined,
      consecutiveFailures: 0,
      retryAt: 0,
      inFlight: undefined,
      batchIndex: 0,
      bytesServed: 0,
      batchesAccepted: 0,
      fetchFailures: zeroCounts(FAILURE_REASONS),
      rejections: zeroCounts(REJECTION_REASONS),
    })
  }
  add('qrng-primary', options.primary)
  add('qrng-secondary', options.secondary)

  let csprngBytesServed = 0
  let closed = false

  function batchSize(remote: RemoteSource): number {
    const { maxBatchBytes, batchUnitBytes } = remote.client
    const room = Math.min(remote.pool.free(), maxBatchBytes)
    return Math.floor(room / batchUnitBytes) * batchUnitBytes
  }

  function markUp(remote: RemoteSource): void {
    if (remote.state !== 'up') {
      logger.info({ source: remote.name, protocol: remote.client.protocol }, 'entropy source up')
    }
    remote.state = 'up'
    remote.consecutiveFailures = 0
  }

  function markDown(remote: RemoteSource, reason: FailureReason | RejectionReason): void {
    remote.consecutiveFailures++
    remote.lastError = reason
    const exponential = retryMs * 2 ** Math.min(remote.consecutiveFailures - 1, 30)
    const backoff = Math.min(retryMaxMs, exponential) * (0.8 + 0.4 * jitter())
    remote.retryAt = now() + backoff
    // What a failing source delivered before is not trusted any further.
    remote.pool.clear()
    const fields = {
      source: remote.name,
      protocol: remote.client.protocol,
      reason,
      consecutiveFailures: remote.consecutiveFailures,
      retryInMs: Math.round(backoff),
    }
    if (remote.state === 'down') logger.debug(fields, 'entropy source still down')
    else logger.warn(fields, 'entropy source down, failing over')
    remote.state = 'down'
  }

  async function refill(remote: RemoteSource, bytes: number): Promise<void> {
    const controller = new AbortController()
    remote.inFlight = controller
    try {
      const batch = await remote.client.fetch(bytes, controller.signal)
      if (closed) {
        batch.fill(0)
        return
      }
      remote.pool.add(condition(remote.name, remote.batchIndex++, batch))
      remote.batchesAccepted++
      markUp(remote)
    } catch (error) {
      if (closed) return
      let reason: FailureReason | RejectionReason
      if (error instanceof EntropyRejection) {
        reason = error.reason
        remote.rejections[reason]++
      } else {
        reason = error instanceof EntropyFetchFailure ? error.reason : 'unexpected'
        remote.fetchFailures[reason]++
      }
      markDown(remote, reason)
    } finally {
      remote.inFlight = undefined
    }
  }

  function tick(): void {
    if (closed) return
    const at = now()
    for (const remote of remotes) {
      if (remote.inFlight) continue
      if (remote.state === 'down' && at < remote.retryAt) continue
      if (remote.state === 'up' && remote.pool.available() >= lowWater) continue
      const bytes = batchSize(remote)
      if (bytes > 0) void refill(remote, bytes)
    }
  }

  const timer = remotes.length > 0 ? setInterval(tick, refillIntervalMs) : undefined
  timer?.unref()
  tick()

  function servingSource(bytes: number): RemoteSource | undefined {
    return remotes.find((r) => r.state === 'up' && r.pool.available() >= bytes)
  }

  return {
    bytes(length) {
      if (!Number.isSafeInteger(length) || length < 0)
        throw new RangeError('length must be a non-negative integer')
      const out = csprng.bytes(length)
      if (length === 0) return out
      for (const remote of remotes) {
        if (remote.state === 'up' && remote.pool.xorInto(out)) {
          remote.bytesServed += length
          return out
        }
      }
      csprngBytesServed += length
      return out
    },
    source: () => servingSource(NONCE_BYTES)?.name ?? 'system-csprng',
    status() {
      return {
        source: servingSource(NONCE_BYTES)?.name ?? 'system-csprng',
        csprngBytesServed,
        sources: remotes.map((r) => ({
          name: r.name,
          protocol: r.client.protocol,
          state: r.state,
          lastError: r.lastError,
          consecutiveFailures: r.consecutiveFailures,
          poolBytes: r.pool.available(),
          poolCapacity: r.pool.capacity,
          bytesServed: r.bytesServed,
          batchesAccepted: r.batchesAccepted,
          fetchFailures: { ...r.fetchFailures },
          rejections: { ...r.rejections },
        })),
      }
    },
    close() {
      if (closed) return
      closed = true
      if (timer) clearInterval(timer)
      for (const remote of remotes) {
        remote.inFlight?.abort()
        remote.pool.clear()
        remote.state = 'down'
      }
    },
  }
}
