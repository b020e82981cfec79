import { AppError } from '../platform/errors.ts'

/**
 * Fair scheduling of crypto-pool tasks across tenants (issue 15, defect 3). Piscina serves one
 * FIFO queue: 60 SLH-DSA signatures of one tenant put every other tenant's key generation
 * behind ~15 s of work. Here each tenant has its own FIFO queue, the queues are served
 * round-robin, and no more tasks are handed to Piscina than it has threads, so the order is ours.
 *
 * Round-robin alone is not enough with few threads: with 2 threads, a flooding tenant holds
 * both, and a newcomer waits for one of its tasks to end (0.25-0.4 s for SLH-DSA, seconds for
 * RSA-4096 generation). So while another tenant is active (has tasks waiting or running, or
 * called within `activeWindowMs`), a tenant runs at most threads-1 tasks: one thread stays free
 * for the others. A tenant alone may use every thread (single-tenant throughput is unchanged).
 *
 * Short tasks (a few milliseconds: ML-DSA and RSA signatures, ECDSA over a digest) may be
 * stacked two per thread while no long task runs: the thread takes its next task the moment it
 * finishes one, instead of sleeping until the event loop (busy with HTTP and the audit, and
 * sharing the cores with the threads) has taken the result and handed over the next. Measured
 * with ML-DSA-65 signing: the threads sat idle 40% of the time between tasks (bench/RESULTS.md).
 * A task that arrives behind a stacked one waits at most one short task longer; long tasks
 * (key generation, SLH-DSA, KDFs) are never stacked and never stacked behind.
 *
 * Queues are bounded: a tenant with `tenantMaxQueue` tasks waiting gets 429 crypto_busy, and
 * when all tenants together have `maxQueue` waiting everyone gets 503 crypto_busy, both with
 * Retry-After.
 */
export interface FairQueue<T, R> {
  submit(tenantId: string, task: T): Promise<R>
  queued(): number
  running(): number
  /** Refuses what is still waiting (shutdown). */
  close(): void
}

interface Job<T, R> {
  task: T
  resolve: (result: R) => void
  reject: (error: unknown) => void
}

export function createFairQueue<T, R>(options: {
  threads: number
  maxQueue: number
  tenantMaxQueue: number
  activeWindowMs: number
  now: () => number
  execute: (task: T) => Promise<R>
  /** Tasks short enough to wait behind one another on a thread (see above); none by default. */
  isShort?: (task: T) => boolean
}): FairQueue<T, R> {
  const { threads } = options
  const isShort = options.isShort ?? (() => false)
  /** Tasks per thread while only short tasks run. */
  const STACK = 2
  /** Tenants with waiting tasks, in round-robin order (a Map keeps insertion order). */
  const queues = new Map<string, Job<T, R>[]>()
  const runningByTenant = new Map<string, number>()
  /** When each tenant last submitted a task: a tenant calling in a sequence stays "active". */
  const lastCall = new Map<string, number>()
  let queuedTotal = 0
  let runningTotal = 0
  /** Long tasks (not short) handed to the threads, and waiting for one. */
  let runningLong = 0
  let waitingLong = 0
  let recheck: NodeJS.Timeout | undefined

  const busy = (status: number, message: string) =>
    new AppError(status, 'crypto_busy', message, { retryAfterSeconds: 1 })

  /** Whether a tenant other than `tenantId` is active now. */
  function othersActive(tenantId: string, at: number): boolean {
    for (const [other, calledAt] of lastCall) {
      if (other === tenantId) continue
      if (at - calledAt < options.activeWindowMs || queues.has(other) || runningByTenant.has(other))
        return true
      // Forget tenants idle past the window, so that the map stays as small as the active set.
      lastCall.delete(other)
    }
    return false
  }

  function limitFor(tenantId: string, at: number): number {
    if (threads < 2) return threads
    return othersActive(tenantId, at) ? threads - 1 : threads
  }

  /** Whether the head task of a tenant's queue may go to a thread now. */
  function mayStart(tenantId: string, job: Job<T, R>, at: number): boolean {
    // A long task running or waiting stops the stacking: it must find a thread with nothing queued.
    const stack = runningLong === 0 && waitingLong === 0 && isShort(job.task) ? STACK : 1
    return (
      runningTotal < threads * stack && (runningByTenant.get(tenantId) ?? 0) < limitFor(tenantId, at) * stack
    )
  }

  function dispatch(): void {
    while (runningTotal < threads * STACK && queues.size > 0) {
      const at = options.now()
      let chosen: string | undefined
      for (const [tenantId, queue] of queues) {
        if (mayStart(tenantId, queue[0]!, at)) {
          chosen = tenantId
          break
        }
      }
      if (chosen === undefined) {
        // A thread is free but held for tenants that were active a moment ago: look again once
        // the window has passed, so that the waiting tasks do not wait for an unrelated event.
        // (With every thread busy, the next task to finish dispatches again.)
        if (runningTotal < threads && !recheck) {
          recheck = setTimeout(() => {
            recheck = undefined
            dispatch()
          }, options.activeWindowMs)
          recheck.unref()
        }
        return
      }
      const queue = queues.get(chosen)!
      const job = queue.shift()!
      queuedTotal--
      // Round-robin: the tenant served goes to the back of the line.
      queues.delete(chosen)
      if (queue.length > 0) queues.set(chosen, queue)
      start(chosen, job)
    }
  }

  function start(tenantId: string, job: Job<T, R>): void {
    const long = !isShort(job.task)
    runningTotal++
    if (long) {
      runningLong++
      waitingLong--
    }
    runningByTenant.set(tenantId, (runningByTenant.get(tenantId) ?? 0) + 1)
    options
      .execute(job.task)
      .then(job.resolve, job.reject)
      .finally(() => {
        runningTotal--
        if (long) runningLong--
        const left = (runningByTenant.get(tenantId) ?? 1) - 1
        if (left > 0) runningByTenant.set(tenantId, left)
        else runningByTenant.delete(tenantId)
        // Its last task just ended: the tenant stays active for the window from now.
        lastCall.set(tenantId, options.now())
        dispatch()
      })
  }

  return {
    submit(tenantId, task) {
      const queue = queues.get(tenantId)
      if (queue && queue.length >= options.tenantMaxQueue) {
        return Promise.reject(
          busy(
            429,
            `Too many cryptographic operations of this tenant are waiting (${options.tenantMaxQueue}); retry shortly`,
          ),
        )
      }
      if (queuedTotal >= options.maxQueue) {
        return Promise.reject(busy(503, 'The service is busy with heavy cryptography; retry shortly'))
      }
      lastCall.delete(tenantId)
      lastCall.set(tenantId, options.now())
      return new Promise<R>((resolve, reject) => {
        const job = { task, resolve, reject }
        if (!isShort(task)) waitingLong++
        if (queue) queue.push(job)
        else queues.set(tenantId, [job])
        queuedTotal++
        dispatch()
      })
    },
    queued: () => queuedTotal,
    running: () => runningTotal,
    close() {
      clearTimeout(recheck)
      for (const queue of queues.values()) {
        for (const job of queue)
          job.reject(new AppError(503, 'shutting_down', 'The service is shutting down'))
      }
      queues.clear()
      queuedTotal = 0
      waitingLong = 0
    },
  }
}
