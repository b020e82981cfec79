import { Queue } from 'bullmq'
import { Redis } from 'ioredis'
import type { Logger } from 'pino'
import type { JobQueue, MailQueue } from '../platform/module.ts'

/** The mail queue's name: one job per message, delivered by the job runner (job-runner.ts). */
export const MAIL_QUEUE = 'mail'

/** A `JobQueue` that can be closed with its process. */
export interface JobQueueClient extends JobQueue {
  close(): Promise<void>
}

/**
 * Adds jobs to the deployment's queues (docs/jobs.md), for every process: the API processes'
 * e-mails, the job processes' webhook attempts. Each queue is opened on first use (most API
 * processes of a quiet deployment never send mail), all of them on one Redis connection. A job
 * id makes adding it twice while it waits a no-op; what the job stands for is in PostgreSQL, so
 * a job lost before or after it reached Redis is found by its module's sweep and queued again.
 *
 * Options every job gets: done jobs are removed, the last 1000 failed ones kept; a job with
 * several attempts is retried with exponential backoff from 2 s (the contract's `JobQueue` has no
 * backoff option: this is the one every retried job uses).
 */
/**
 * BullMQ's options for a job: its id (adding it twice while it waits is a no-op), its attempts
 * with exponential backoff from 2 s when there are several, its delay; done jobs are removed, the
 * last 1000 failed ones kept.
 */
function jobOptionsOf(options: Parameters<JobQueue['enqueue']>[3]) {
  const attempts = options.attempts ?? 1
  return {
    jobId: options.id,
    attempts,
    ...(attempts > 1 ? { backoff: { type: 'exponential' as const, delay: 2000 } } : {}),
    ...(options.delayMs !== undefined && options.delayMs > 0 ? { delay: options.delayMs } : {}),
    removeOnComplete: true,
    removeOnFail: 1000,
  }
}

export function createJobQueue(deps: {
  redisUrl: string
  /** `<KMS_REDIS_PREFIX>jobs:<namespace>` (job-namespace.ts), as the job runner's queues. */
  prefix: () => Promise<string>
  logger: Logger
  /**
   * A connection to use instead of one of its own (the job runner's, whose commands wait for
   * Redis to return); left open by close().
   */
  connection?: Redis
}): JobQueueClient {
  let opened: Promise<{ prefix: string; connection: Redis }> | undefined
  const queues = new Map<string, Promise<Queue>>()
  let closed = false

  const connect = () => {
    opened ??= deps.prefix().then((prefix) => {
      if (deps.connection) return { prefix, connection: deps.connection }
      // Fails a command quickly when Redis is away (the caller's request must not hang on it).
      const connection = new Redis(deps.redisUrl, {
        maxRetriesPerRequest: 1,
        connectionName: 'kms-job-queue',
      })
      connection.on('error', (err) =>
        deps.logger.warn({ err: { message: err.message } }, 'job queue: Redis error'),
      )
      return { prefix, connection }
    })
    // A failed prefix (the database was away) is asked again next time.
    opened.catch(() => {
      opened = undefined
    })
    return opened
  }

  const queueOf = (name: string) => {
    let queue = queues.get(name)
    if (!queue) {
      queue = connect().then(({ prefix, connection }) => {
        const q = new Queue(name, { connection, prefix })
        // The shared connection's errors, which the connection already logs.
        q.on('error', () => {})
        return q
      })
      queues.set(name, queue)
      queue.catch(() => queues.delete(name))
    }
    return queue
  }

  return {
    async enqueue(queue, name, payload, options) {
      if (closed) throw new Error('job queue closed')
      const q = await queueOf(queue)
      await q.add(name, payload, jobOptionsOf(options))
    },
    async close() {
      closed = true
      const open = await Promise.allSettled(queues.values())
      await Promise.all(open.map((q) => (q.status === 'fulfilled' ? q.value.close() : undefined)))
      queues.clear()
      if (!opened || deps.connection) return
      const connection = await opened.then(
        (o) => o.connection,
        () => undefined,
      )
      connection?.disconnect()
    },
  }
}

/**
 * The mail queue as the modules that send mail see it (`MailQueue`): one job per message on the
 * `mail` queue, named by its kind, `attempts` sends at most with exponential backoff from 2 s.
 * The message's row is its outbox: the job runner's mail sweep queues a lost one again.
 */
export function mailQueueOn(jobs: JobQueue, attempts: number): MailQueue {
  return {
    enqueue: (kind, payload, id) => jobs.enqueue(MAIL_QUEUE, kind, payload, { id, attempts }),
  }
}
