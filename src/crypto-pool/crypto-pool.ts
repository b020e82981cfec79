import type { KeyObject } from 'node:crypto'
import { availableParallelism } from 'node:os'
import { Piscina } from 'piscina'
import { type EnvelopeKey, fromCompact, type SealedEnvelope } from '../crypto/envelope.ts'
import { type OpenItem, type SealItem, unpackBuffers } from '../crypto/envelope-batch.ts'
import type { ReEncryptItem } from '../crypto/re-encrypt-many.ts'
import type { SignatureOptions } from '../crypto/signing.ts'
import type { AlgorithmName, NodeKeySpec } from '../keys/algorithms.ts'
import {
  checkImportCost,
  type ImportRequest,
  type KeyMaterial,
  KeyMaterialError,
  type PrivateExport,
  type PrivateFormat,
} from '../keys/key-material.ts'
import { AppError } from '../platform/errors.ts'
import { createFairQueue } from './fair-queue.ts'
import type { CryptoTask, TaskResult } from './tasks.ts'

type TaskOutcome = 'ok' | 'error' | 'timeout'

/**
 * Worker threads for crypto too slow for the event loop: key generation (RSA-4096 takes
 * hundreds of milliseconds, SLH-DSA ~100 ms), import (parsing may run a password KDF and
 * always runs a pairwise consistency test), SLH-DSA signatures (~0.25 s each), pure-JS ECDSA
 * over a given digest, password-protected export and batch chunks. Threads start on demand and
 * leave when idle.
 *
 * Every call names the tenant it works for: tasks wait in per-tenant queues served round-robin,
 * so that one tenant's flood cannot starve the others (fair-queue.ts), and every task runs under
 * a deadline past which its thread is terminated.
 */
export interface CryptoPool {
  generateKey(tenantId: string, algorithm: AlgorithmName): Promise<KeyMaterial>
  /** Throws KeyMaterialError for material that does not fit the request (or costs too much to open). */
  importKey(tenantId: string, request: ImportRequest): Promise<KeyMaterial>
  /** Password-protected PKCS#8 export: the KDF takes a good part of a second by design. */
  exportPrivate(
    tenantId: string,
    request: { secret: Buffer; algorithm: AlgorithmName; format: PrivateFormat; password: string },
  ): Promise<PrivateExport>
  sign(
    tenantId: string,
    request: {
      spec: NodeKeySpec
      key: KeyObject
      message: Buffer
      options: SignatureOptions
      random: Buffer
    },
  ): Promise<Buffer>
  verify(
    tenantId: string,
    request: {
      spec: NodeKeySpec
      key: KeyObject
      message: Buffer
      signature: Buffer
      options: SignatureOptions
    },
  ): Promise<boolean>
  /** The index of the first key (version) under which the signature verifies, -1 for none. */
  verifyAny(
    tenantId: string,
    request: {
      spec: NodeKeySpec
      keys: KeyObject[]
      message: Buffer
      signature: Buffer
      options: SignatureOptions
    },
  ): Promise<number>
  /** The index of the first secret key whose HMAC (`hash`) of the data, cut to `length`, is the MAC; -1 for none. */
  macAny(
    tenantId: string,
    request: { hash: string; keys: KeyObject[]; data: Buffer; mac: Buffer; length: number },
  ): Promise<number>
  sealMany(tenantId: string, keys: EnvelopeKey[], items: SealItem[]): Promise<SealedEnvelope[]>
  /** Null for each item that does not open. */
  openMany(tenantId: string, keys: EnvelopeKey[], items: OpenItem[]): Promise<(Buffer | null)[]>
  /** Each item opened and sealed again (re-encrypt-many.ts); null for each item that does not open. */
  reEncryptMany(
    tenantId: string,
    keys: EnvelopeKey[],
    items: ReEncryptItem[],
  ): Promise<(SealedEnvelope | null)[]>
  /** Worker threads the pool may run: batches are split into at least this many chunks. */
  threads: number
  /** Tasks the worker threads have finished (ok, failed or stopped) since the pool started. */
  completedTasks(): number
  /** Tasks waiting in the tenants' queues, tasks on a thread, tasks finished. */
  stats(): { queued: number; running: number; completed: number }
  destroy(): Promise<void>
}

export interface CryptoPoolOptions {
  maxThreads?: number
  idleTimeoutMs?: number
  /** Tasks waiting across all tenants past which a call is refused with 503 crypto_busy. */
  maxQueue?: number
  /** Tasks one tenant may have waiting past which its calls are refused with 429 crypto_busy. */
  tenantMaxQueue?: number
  /** Deadline of one task once on a thread: past it the thread is terminated (503 crypto_task_timeout). */
  taskTimeoutMs?: number
  /** How long after its last call a tenant still keeps a thread reserved for it (fair-queue.ts). */
  activeWindowMs?: number
  /** Monotonic milliseconds (injected for tests). */
  now?: () => number
  /** Called once per task that reached a thread, for metrics. */
  onTaskDone?: (kind: string, durationMs: number, outcome: TaskOutcome) => void
}

const asBuffer = (bytes: Uint8Array) => Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)

/**
 * Tasks of a few milliseconds at most, which may wait behind one another on a thread
 * (fair-queue.ts): signatures and verifications other than SLH-DSA (~0.25 s).
 */
function isShort(task: CryptoTask): boolean {
  return (task.kind === 'sign' || task.kind === 'verify') && task.spec.kind !== 'slh-dsa-sha2-128s'
}

export function createCryptoPool(options: CryptoPoolOptions = {}): CryptoPool {
  const threads = options.maxThreads ?? Math.max(1, availableParallelism())
  const taskTimeoutMs = options.taskTimeoutMs ?? 30_000
  const now = options.now ?? (() => performance.now())
  const pool = new Piscina<CryptoTask, TaskResult>({
    filename: new URL('./worker.ts', import.meta.url).href,
    minThreads: 0,
    maxThreads: threads,
    idleTimeout: options.idleTimeoutMs ?? 30_000,
    // The fair queue stacks short tasks two per thread (fair-queue.ts); Piscina must hand both
    // to the thread rather than keep the second in its own queue.
    concurrentTasksPerWorker: 2,
    // Piscina's default wakes a sleeping thread with Atomics.notify for every task; on the
    // machines measured that cost the event loop ~115 µs per task against ~80 µs for a message
    // event, and the threads were idle more often (bench/RESULTS.md).
    atomics: 'disabled',
  })
  let completed = 0

  /** One task on a thread, under its deadline. */
  async function execute(task: CryptoTask): Promise<TaskResult> {
    const abort = new AbortController()
    let timedOut = false
    const timer = setTimeout(() => {
      timedOut = true
      // Piscina terminates the thread running an aborted task and starts a fresh one on demand:
      // a runaway KDF or generation cannot hold a thread past its deadline.
      abort.abort()
    }, taskTimeoutMs)
    const started = now()
    let outcome: TaskOutcome = 'error'
    try {
      const result = await pool.run(task, { signal: abort.signal })
      outcome = 'ok'
      return result
    } catch (error) {
      if (timedOut) {
        outcome = 'timeout'
        throw new AppError(
          503,
          'crypto_task_timeout',
          `The cryptographic operation exceeded its deadline of ${taskTimeoutMs} ms and was stopped`,
          { retryAfterSeconds: 1 },
        )
      }
      throw error
    } finally {
      clearTimeout(timer)
      completed++
      options.onTaskDone?.(task.kind, now() - started, outcome)
    }
  }

  const queue = createFairQueue<CryptoTask, TaskResult>({
    threads,
    maxQueue: options.maxQueue ?? 256,
    tenantMaxQueue: options.tenantMaxQueue ?? 64,
    activeWindowMs: options.activeWindowMs ?? 1000,
    now,
    execute,
    isShort,
  })

  function run<T extends TaskResult>(tenantId: string, task: CryptoTask): Promise<T> {
    return queue.submit(tenantId, task) as Promise<T>
  }

  async function material(tenantId: string, task: CryptoTask): Promise<KeyMaterial> {
    const result = await run<Extract<TaskResult, { secret: Uint8Array | null } | { ok: false }>>(
      tenantId,
      task,
    )
    if (!result.ok) throw new KeyMaterialError(result.code, result.message)
    return {
      secret: result.secret ? asBuffer(result.secret) : null,
      publicKey: result.publicKey ? asBuffer(result.publicKey) : null,
    }
  }

  return {
    threads,
    generateKey: (tenantId, algorithm) => material(tenantId, { kind: 'generateKey', algorithm }),
    async importKey(tenantId, request) {
      // On the event loop, before any thread: a KDF cost past the bounds is refused without
      // being paid (parsing the parameters is a few microseconds).
      checkImportCost(request)
      return material(tenantId, { kind: 'importKey', request })
    },
    async exportPrivate(tenantId, request) {
      const result = await run<Extract<TaskResult, { value: unknown } | { ok: false }>>(tenantId, {
        kind: 'exportPrivate',
        ...request,
      })
      if (!result.ok) throw new KeyMaterialError(result.code, result.message)
      return { value: result.value, encrypted: result.encrypted }
    },
    async sign(tenantId, request) {
      const result = await run<{ ok: true; signature: Uint8Array }>(tenantId, { kind: 'sign', ...request })
      return asBuffer(result.signature)
    },
    async verify(tenantId, request) {
      return (await run<{ ok: true; valid: boolean }>(tenantId, { kind: 'verify', ...request })).valid
    },
    async verifyAny(tenantId, request) {
      return (await run<{ ok: true; index: number }>(tenantId, { kind: 'verifyAny', ...request })).index
    },
    async macAny(tenantId, request) {
      return (await run<{ ok: true; index: number }>(tenantId, { kind: 'macAny', ...request })).index
    },
    async sealMany(tenantId, keys, items) {
      const result = await run<Extract<TaskResult, { packed: Uint8Array }>>(tenantId, {
        kind: 'sealMany',
        keys,
        items,
      })
      return unpackBuffers(result).map((compact) => fromCompact(compact!)!)
    },
    async openMany(tenantId, keys, items) {
      return unpackBuffers(
        await run<Extract<TaskResult, { packed: Uint8Array }>>(tenantId, { kind: 'openMany', keys, items }),
      )
    },
    async reEncryptMany(tenantId, keys, items) {
      const result = await run<Extract<TaskResult, { packed: Uint8Array }>>(tenantId, {
        kind: 'reEncryptMany',
        keys,
        items,
      })
      return unpackBuffers(result).map((compact) => (compact ? fromCompact(compact)! : null))
    },
    completedTasks: () => completed,
    stats: () => ({ queued: queue.queued(), running: queue.running(), completed }),
    async destroy() {
      queue.close()
      await pool.destroy()
    },
  }
}
