import type { KeyObject } from 'node:crypto'
import { availableParallelism } from 'node:os'
import { Piscina } from 'piscina'
import { fromCompact, type SealedEnvelope } from '../crypto/envelope.ts'
import { type OpenItem, type SealItem, unpackBuffers } from '../crypto/envelope-batch.ts'
import type { SignatureOptions } from '../crypto/signing.ts'
import type { AlgorithmName, NodeKeySpec } from '../keys/algorithms.ts'
import { type ImportRequest, type KeyMaterial, KeyMaterialError } from '../keys/key-material.ts'
import { AppError } from '../platform/errors.ts'
import type { CryptoTask, TaskResult } from './tasks.ts'

/**
 * Worker threads for crypto too slow for the event loop: key generation (RSA-4096 takes
 * hundreds of milliseconds, SLH-DSA ~100 ms), import (parsing may run a password KDF and
 * always runs a pairwise consistency test), SLH-DSA signatures (~0.25 s each), pure-JS ECDSA
 * over a given digest, and batch chunks. Threads start on demand and leave when idle.
 */
export interface CryptoPool {
  generateKey(algorithm: AlgorithmName): Promise<KeyMaterial>
  /** Throws KeyMaterialError for material that does not fit the request. */
  importKey(request: ImportRequest): Promise<KeyMaterial>
  sign(request: {
    spec: NodeKeySpec
    key: KeyObject
    message: Buffer
    options: SignatureOptions
    random: Buffer
  }): Promise<Buffer>
  verify(request: {
    spec: NodeKeySpec
    key: KeyObject
    message: Buffer
    signature: Buffer
    options: SignatureOptions
  }): Promise<boolean>
  sealMany(keys: KeyObject[], items: SealItem[]): Promise<SealedEnvelope[]>
  /** Null for each item that does not open. */
  openMany(keys: KeyObject[], items: OpenItem[]): Promise<(Buffer | null)[]>
  /** Worker threads the pool may run: batches are split into at least this many chunks. */
  threads: number
  /** Tasks the worker threads have finished since the pool started. */
  completedTasks(): number
  /** Tasks waiting for a thread, running on one, and finished since the pool started (metrics). */
  stats(): { queued: number; running: number; completed: number }
  destroy(): Promise<void>
}

const asBuffer = (bytes: Uint8Array) => Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)

export function createCryptoPool(
  options: {
    maxThreads?: number
    idleTimeoutMs?: number
    maxQueue?: number
    /** Told of every task when it settles: its kind, time from submission, and outcome (metrics). */
    onTaskDone?: (kind: string, durationMs: number, outcome: 'ok' | 'error' | 'timeout') => void
  } = {},
): CryptoPool {
  const threads = options.maxThreads ?? Math.max(1, availableParallelism())
  const pool = new Piscina<CryptoTask, TaskResult>({
    filename: new URL('./worker.ts', import.meta.url).href,
    minThreads: 0,
    maxThreads: threads,
    idleTimeout: options.idleTimeoutMs ?? 30_000,
    // Backpressure: past this many waiting tasks a request is refused at once rather than
    // waiting minutes behind a flood of RSA-4096 generations.
    maxQueue: options.maxQueue ?? 256,
  })

  // Submitted and not yet settled: queued ones are in Piscina's queue, the rest are running.
  let submitted = 0
  async function run<T extends TaskResult>(task: CryptoTask): Promise<T> {
    const started = performance.now()
    let outcome: 'ok' | 'error' = 'error'
    submitted++
    try {
      const result = (await pool.run(task)) as T
      outcome = 'ok'
      return result
    } catch (error) {
      if (pool.queueSize >= pool.options.maxQueue) {
        throw new AppError(503, 'crypto_busy', 'The service is busy with heavy cryptography; retry shortly', {
          retryAfterSeconds: 1,
        })
      }
      throw error
    } finally {
      submitted--
      options.onTaskDone?.(task.kind, performance.now() - started, outcome)
    }
  }

  async function material(task: CryptoTask): Promise<KeyMaterial> {
    const result = await run<Extract<TaskResult, { secret: Uint8Array } | { ok: false }>>(task)
    if (!result.ok) throw new KeyMaterialError(result.code, result.message)
    return {
      secret: asBuffer(result.secret),
      publicKey: result.publicKey ? asBuffer(result.publicKey) : null,
    }
  }

  return {
    threads,
    generateKey: (algorithm) => material({ kind: 'generateKey', algorithm }),
    importKey: (request) => material({ kind: 'importKey', request }),
    async sign(request) {
      const result = await run<{ ok: true; signature: Uint8Array }>({ kind: 'sign', ...request })
      return asBuffer(result.signature)
    },
    async verify(request) {
      return (await run<{ ok: true; valid: boolean }>({ kind: 'verify', ...request })).valid
    },
    async sealMany(keys, items) {
      const result = await run<Extract<TaskResult, { packed: Uint8Array }>>({ kind: 'sealMany', keys, items })
      return unpackBuffers(result).map((compact) => fromCompact(compact!)!)
    },
    async openMany(keys, items) {
      return unpackBuffers(
        await run<Extract<TaskResult, { packed: Uint8Array }>>({ kind: 'openMany', keys, items }),
      )
    },
    completedTasks: () => pool.completed,
    stats: () => ({
      queued: pool.queueSize,
      running: Math.max(0, submitted - pool.queueSize),
      completed: pool.completed,
    }),
    destroy: () => pool.destroy(),
  }
}
