import { hash } from 'node:crypto'
import { createAllowList } from '../outbound/allow-list.ts'
import { createOutboundClient, type OutboundClient } from '../outbound/outbound-client.ts'
import type { Credential } from './credential.ts'
import { rejection } from './source-errors.ts'

export const ENTROPY_PROTOCOLS = ['anu-aqn', 'qrypt'] as const
export type EntropyProtocol = (typeof ENTROPY_PROTOCOLS)[number]

/** One remote quantum source speaking one protocol. */
export interface EntropyClient {
  readonly protocol: EntropyProtocol
  /** Largest batch one request may ask for. */
  readonly maxBatchBytes: number
  /** Batches are a whole number of these (Qrypt serves 1 KiB blocks). */
  readonly batchUnitBytes: number
  /**
   * Exactly `bytes` validated bytes, or an EntropySourceError. Never retries: the chain owns
   * timing, backoff and failover.
   */
  fetch(bytes: number, signal: AbortSignal): Promise<Buffer>
}

export interface EntropyClientOptions {
  url: string
  credential: Credential
  timeoutMs: number
  /**
   * The service's outbound client. The source's own host is added to what it allows: the
   * operator named it (KMS_ENTROPY_*_URL), so an on-premises appliance at a private address
   * works; nothing a tenant supplies ever gets that. Absent: a client allowing that host alone.
   */
  http?: OutboundClient
}

/** The outbound client a source uses: the given one (or none) plus exactly the source's host. */
export function sourceHttpClient(options: Pick<EntropyClientOptions, 'url' | 'http'>): OutboundClient {
  const own = createAllowList([new URL(options.url).hostname])
  return options.http ? options.http.withAllowed(own) : createOutboundClient({ allow: own })
}

/** Degenerate-block checks run per KiB, so one good block cannot hide 63 zero blocks behind it. */
const CHECK_BLOCK_BYTES = 1024
/** Below this an honest block is all-zero or constant too often (2 bytes: 1 in 256) to refuse it. */
const MIN_CHECKED_BYTES = 16

function checkBlock(block: Buffer): void {
  if (block.length < MIN_CHECKED_BYTES) return
  const first = block[0]
  if (block.every((b) => b === 0)) throw rejection('all_zero')
  if (block.every((b) => b === first)) throw rejection('constant')
}

/**
 * Checks every protocol shares once a batch is decoded. A repeated batch is compared by digest,
 * so no past entropy stays in memory. Only accepted batches become "the previous batch".
 */
export function createBatchChecks() {
  let previous: Buffer | undefined
  return {
    accept(batch: Buffer): void {
      for (let offset = 0; offset < batch.length; offset += CHECK_BLOCK_BYTES) {
        checkBlock(batch.subarray(offset, offset + CHECK_BLOCK_BYTES))
      }
      const digest = hash('sha256', batch, 'buffer')
      if (previous?.equals(digest)) throw rejection('repeated')
      previous = digest
    },
  }
}

export function requireBatchSize(client: EntropyClient, bytes: number): void {
  if (
    !Number.isSafeInteger(bytes) ||
    bytes < client.batchUnitBytes ||
    bytes > client.maxBatchBytes ||
    bytes % client.batchUnitBytes !== 0
  ) {
    throw new RangeError(
      `${client.protocol} batch must be a multiple of ${client.batchUnitBytes} up to ${client.maxBatchBytes}`,
    )
  }
}
