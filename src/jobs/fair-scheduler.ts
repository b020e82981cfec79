/**
 * Runs tasks fairly across tenants under one concurrency limit (issue 15, defect 10): each
 * tenant has its own FIFO queue, free slots go to the tenants round-robin, and no tenant holds
 * more than `perTenantLimit` slots at once, so a tenant whose receivers hang keeps at most that
 * many slots busy and every other tenant's next task starts at the next free slot instead of
 * behind the whole backlog.
 *
 * The webhook deliveries' consumer hands each attempt over here (src/webhooks/webhooks-jobs.ts). The queues live in
 * memory only: what is due lives in PostgreSQL (the outbox), and the webhook sweep sends again
 * any delivery whose attempt did not happen, so a task lost with its process is not lost.
 */
export interface FairScheduler {
  /**
   * Queues `run` behind the tenant's earlier tasks. A task whose key is already queued or
   * running is dropped (a job delivered twice, or re-sent by the sweep while it waits): false.
   */
  submit(tenant: string, key: string, run: () => Promise<void>): boolean
  /** Resolves when fewer than `maxQueued` tasks wait (backpressure for whoever submits). */
  whenRoom(): Promise<void>
  /** Stops starting tasks, drops the queued ones, and waits for the running ones. */
  stop(): Promise<void>
  readonly queued: number
  readonly running: number
}

interface Task {
  key: string
  run: () => Promise<void>
}

interface TenantQueue {
  tasks: Task[]
  running: number
}

export function createFairScheduler(options: {
  concurrency: number
  perTenantLimit: number
  /** Tasks waiting in all queues at most before whenRoom() waits. */
  maxQueued: number
  onError(error: unknown): void
}): FairScheduler {
  const tenants = new Map<string, TenantQueue>()
  /** Tenants with queued tasks, in round-robin order: the next slot goes to the first eligible one. */
  const ring: string[] = []
  const keys = new Set<string>()
  let queued = 0
  let running = 0
  let stopped = false
  const idleWaiters: (() => void)[] = []
  const roomWaiters: (() => void)[] = []

  function pump(): void {
    while (!stopped && running < options.concurrency) {
      const index = ring.findIndex((tenant) => tenants.get(tenant)!.running < options.perTenantLimit)
      if (index < 0) return
      const tenant = ring[index]!
      const queue = tenants.get(tenant)!
      const task = queue.tasks.shift()!
      // The tenant goes to the back of the ring (or leaves it when it has nothing more queued).
      ring.splice(index, 1)
      if (queue.tasks.length > 0) ring.push(tenant)
      queued--
      queue.running++
      running++
      wakeRoomWaiters()
      void start(tenant, queue, task)
    }
  }

  async function start(tenant: string, queue: TenantQueue, task: Task): Promise<void> {
    try {
      await task.run()
    } catch (error) {
      options.onError(error)
    } finally {
      keys.delete(task.key)
      queue.running--
      running--
      if (queue.running === 0 && queue.tasks.length === 0) tenants.delete(tenant)
      pump()
      if (running === 0) for (const wake of idleWaiters.splice(0)) wake()
    }
  }

  function wakeRoomWaiters(): void {
    while (roomWaiters.length > 0 && (queued < options.maxQueued || stopped)) roomWaiters.shift()!()
  }

  return {
    submit(tenant, key, run) {
      if (stopped || keys.has(key)) return false
      keys.add(key)
      let queue = tenants.get(tenant)
      if (!queue) {
        queue = { tasks: [], running: 0 }
        tenants.set(tenant, queue)
      }
      if (queue.tasks.length === 0) ring.push(tenant)
      queue.tasks.push({ key, run })
      queued++
      pump()
      return true
    },
    whenRoom() {
      if (queued < options.maxQueued || stopped) return Promise.resolve()
      return new Promise((resolve) => roomWaiters.push(resolve))
    },
    async stop() {
      stopped = true
      for (const [tenant, queue] of tenants) {
        for (const task of queue.tasks) keys.delete(task.key)
        queue.tasks = []
        if (queue.running === 0) tenants.delete(tenant)
      }
      ring.length = 0
      queued = 0
      wakeRoomWaiters()
      if (running > 0) await new Promise<void>((resolve) => idleWaiters.push(resolve))
    },
    get queued() {
      return queued
    },
    get running() {
      return running
    },
  }
}
