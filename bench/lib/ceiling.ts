import { availableParallelism } from 'node:os'
import { performance } from 'node:perf_hooks'
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads'
import { type CeilingWork, prepare } from './ceiling-work.ts'

/**
 * Runs a ceiling workload on every core at once (one worker thread per core) for a fixed
 * time and reports the sum of operations per second. Each thread warms up first so that the
 * figure is the steady state, as the service's is.
 */

interface Job {
  work: CeilingWork
  warmupMs: number
  durationMs: number
}

interface ThreadResult {
  operations: number
  elapsedMs: number
}

function runJob(job: Job): ThreadResult {
  const operate = prepare(job.work)
  const warmupEnd = performance.now() + job.warmupMs
  while (performance.now() < warmupEnd) operate()
  const started = performance.now()
  const end = started + job.durationMs
  let operations = 0
  // Check the time every few operations: performance.now() is cheap but not free.
  while (true) {
    for (let i = 0; i < 8; i++) operate()
    operations += 8
    const now = performance.now()
    if (now >= end) return { operations, elapsedMs: now - started }
  }
}

if (!isMainThread && parentPort && (workerData as { ceilingJob?: Job })?.ceilingJob) {
  parentPort.postMessage(runJob((workerData as { ceilingJob: Job }).ceilingJob))
}

export interface CeilingResult {
  /** Operations per second over all threads. */
  opsPerSecond: number
  threads: number
}

export async function measureCeiling(
  work: CeilingWork,
  options: { durationMs: number; warmupMs?: number; threads?: number },
): Promise<CeilingResult> {
  const threads = options.threads ?? availableParallelism()
  const job: Job = { work, warmupMs: options.warmupMs ?? 300, durationMs: options.durationMs }
  const results = await Promise.all(
    Array.from(
      { length: threads },
      () =>
        new Promise<ThreadResult>((resolve, reject) => {
          const worker = new Worker(new URL(import.meta.url), { workerData: { ceilingJob: job } })
          worker.once('message', (result: ThreadResult) => {
            resolve(result)
            void worker.terminate()
          })
          worker.once('error', reject)
        }),
    ),
  )
  const opsPerSecond = results.reduce((sum, r) => sum + (r.operations * 1000) / r.elapsedMs, 0)
  return { opsPerSecond, threads }
}
