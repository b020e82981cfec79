import { availableParallelism } from 'node:os'
import { Piscina } from 'piscina'
import type { AlgorithmName } from '../keys/algorithms.ts'
import { type ImportRequest, type KeyMaterial, KeyMaterialError } from '../keys/key-material.ts'
import { AppError } from '../platform/errors.ts'
import type { CryptoTask, MaterialResult } from './tasks.ts'

/**
 * Worker threads for crypto too slow for the event loop: key generation (RSA-4096 takes
 * hundreds of milliseconds, SLH-DSA ~100 ms) and import, whose parsing may run a password KDF
 * and always runs a pairwise consistency test. Threads start on demand and leave when idle.
 */
export interface CryptoPool {
  generateKey(algorithm: AlgorithmName): Promise<KeyMaterial>
  /** Throws KeyMaterialError for material that does not fit the request. */
  importKey(request: ImportRequest): Promise<KeyMaterial>
  /** Tasks the worker threads have finished since the pool started. */
  completedTasks(): number
  destroy(): Promise<void>
}

export function createCryptoPool(
  options: { maxThreads?: number; idleTimeoutMs?: number; maxQueue?: number } = {},
): CryptoPool {
  const pool = new Piscina<CryptoTask, MaterialResult>({
    filename: new URL('./worker.ts', import.meta.url).href,
    minThreads: 0,
    maxThreads: options.maxThreads ?? Math.max(1, availableParallelism()),
    idleTimeout: options.idleTimeoutMs ?? 30_000,
    // Backpressure: past this many waiting tasks a request is refused at once rather than
    // waiting minutes behind a flood of RSA-4096 generations.
    maxQueue: options.maxQueue ?? 256,
  })

  async function run(task: CryptoTask): Promise<KeyMaterial> {
    let result: MaterialResult
    try {
      result = await pool.run(task)
    } catch (error) {
      if (pool.queueSize >= pool.options.maxQueue) {
        throw new AppError(503, 'crypto_busy', 'The service is busy generating keys; retry shortly', {
          retryAfterSeconds: 1,
        })
      }
      throw error
    }
    if (!result.ok) throw new KeyMaterialError(result.code, result.message)
    return {
      secret: Buffer.from(result.secret.buffer, result.secret.byteOffset, result.secret.byteLength),
      publicKey: result.publicKey
        ? Buffer.from(result.publicKey.buffer, result.publicKey.byteOffset, result.publicKey.byteLength)
        : null,
    }
  }

  return {
    generateKey: (algorithm) => run({ kind: 'generateKey', algorithm }),
    importKey: (request) => run({ kind: 'importKey', request }),
    completedTasks: () => pool.completed,
    destroy: () => pool.destroy(),
  }
}
