import { type Job, Queue, Worker } from 'bullmq'
import { Redis } from 'ioredis'
import type { Logger } from 'pino'
import type { JobsConfig } from '../config.ts'
import type { MailKind, ModuleJobs, QueueConsumer, Sweep, SweepQueue } from '../platform/module.ts'
import { createJobQueue, MAIL_QUEUE } from './job-queue.ts'

/**
 * Background work on BullMQ (docs/jobs.md), for the modules that declare it (`ModuleJobs`):
 * BullMQ decides *when* work runs; PostgreSQL holds *what* is due, so every job is a sweep or an
 * attempt that is safe to run twice, late, or in several processes at once.
 * - each module's sweeps run every `config.sweepMs` on their queue: `maintenance` (one at a
 *   time) or `integrations` (work that waits on other services: a slow cloud or model never holds
 *   up the other sweeps; two at a time). They are BullMQ job schedulers, upserted at start and
 *   again whenever the connection to Redis is re-established, so a Redis that restarted empty
 *   gets them back;
 * - `mail`: one e-mail (or SMS) per job, handed to the module's `MailKind` by the job's name;
 *   BullMQ retries a failed send (the job's `attempts`), the last attempt is `final`;
 * - `mail-sweep` (maintenance): a message queued longer than the grace whose job is gone (Redis
 *   restarted empty) is queued again under the same job id, with one attempt;
 * - each module's own queues (`QueueConsumer`: webhook deliveries and their fair scheduler).
 * This file names no domain: the modules bring their jobs (src/<domain>/<domain>-jobs.ts).
 */
export interface JobRunner {
  /** Stops taking jobs and waits for the running ones to finish. */
  stop(): Promise<void>
}

export interface JobRunnerDeps {
  redisUrl: string
  /** Prefix of every Redis key (KMS_REDIS_PREFIX). */
  prefix: string
  /** The deployment's own part of the queue keys (job-namespace.ts): queues are `<prefix>jobs:<namespace>`. */
  namespace: string
  config: JobsConfig
  logger: Logger
  /** Every module's jobs (`Module.jobs`). */
  modules: readonly ModuleJobs[]
  /** How long stop() waits for running jobs before closing the workers regardless. */
  closeTimeoutMs: number
  /** Told of every finished job: queue, job name, outcome and run time (metrics). */
  onJobDone?: (
    queue: string,
    job: string,
    outcome: 'completed' | 'failed',
    seconds: number | undefined,
  ) => void
}

const MAINTENANCE = 'maintenance'
const INTEGRATIONS = 'integrations'
/** The sweep of lost mail jobs (on maintenance). */
const MAIL_SWEEP = 'mail-sweep'
const SWEEP_QUEUES: Record<SweepQueue, { concurrency: number }> = {
  // One sweep at a time: they take rows of the same tables.
  maintenance: { concurrency: 1 },
  // One tick of each integration sweep at a time, side by side.
  integrations: { concurrency: 2 },
}
const MAIL_CONCURRENCY = 4
const schedulerOpts = { removeOnComplete: true, removeOnFail: 100 }

/** The modules' declarations, checked: every name is unique, no queue is taken twice. */
function collect(modules: readonly ModuleJobs[]) {
  const sweeps = new Map<string, Sweep>()
  const kinds = new Map<string, MailKind>()
  const consumers = new Map<string, QueueConsumer>()
  for (const jobs of modules) {
    for (const sweep of jobs.sweeps ?? []) {
      if (sweeps.has(sweep.name) || sweep.name === MAIL_SWEEP)
        throw new Error(`jobs: two sweeps are named ${sweep.name}`)
      if (!(sweep.queue in SWEEP_QUEUES))
        throw new Error(`jobs: sweep ${sweep.name} has no queue ${sweep.queue}`)
      sweeps.set(sweep.name, sweep)
    }
    for (const kind of jobs.mail ?? []) {
      if (kinds.has(kind.kind)) throw new Error(`jobs: two mail kinds are named ${kind.kind}`)
      kinds.set(kind.kind, kind)
    }
    for (const consumer of jobs.consumers ?? []) {
      if (consumers.has(consumer.queue) || consumer.queue in SWEEP_QUEUES || consumer.queue === MAIL_QUEUE)
        throw new Error(`jobs: queue ${consumer.queue} is consumed twice`)
      consumers.set(consumer.queue, consumer)
    }
  }
  return { sweeps, kinds, consumers }
}

export async function startJobRunner(deps: JobRunnerDeps): Promise<JobRunner> {
  const { config, logger } = deps
  const { sweeps, kinds, consumers } = collect(deps.modules)
  const overdueKinds = [...kinds.values()].filter((kind) => kind.overdue)
  // BullMQ needs commands to wait for a reconnection instead of failing after 20 retries.
  const connection = new Redis(deps.redisUrl, { maxRetriesPerRequest: null, connectionName: 'kms-jobs' })
  connection.on('error', (err) => logger.warn({ err: { message: err.message } }, 'jobs: Redis error'))
  const options = { connection, prefix: `${deps.prefix}jobs:${deps.namespace}` }
  const queues = {
    maintenance: new Queue(MAINTENANCE, options),
    integrations: new Queue(INTEGRATIONS, options),
  } satisfies Record<SweepQueue, Queue>
  // The queues report the shared connection's errors, which the connection already logs.
  for (const queue of Object.values(queues)) queue.on('error', () => {})
  /**
   * What the sweeps and consumers queue their follow-up jobs with (webhook attempts): this
   * runner's own connection, whose commands wait for Redis to come back, so a sweep queues what
   * it did rather than failing while Redis restarts.
   */
  const producer = createJobQueue({
    redisUrl: deps.redisUrl,
    prefix: async () => options.prefix,
    logger,
    connection,
  })

  /** The schedulers each queue should have: its modules' sweeps (and the mail sweep). */
  const scheduled: Record<SweepQueue, string[]> = { maintenance: [], integrations: [] }
  for (const sweep of sweeps.values()) scheduled[sweep.queue].push(sweep.name)
  if (overdueKinds.length > 0) scheduled.maintenance.push(MAIL_SWEEP)

  const upsertSchedulers = async () => {
    for (const [queueName, names] of Object.entries(scheduled) as [SweepQueue, string[]][]) {
      const queue = queues[queueName]
      for (const name of names)
        await queue.upsertJobScheduler(name, { every: config.sweepMs }, { name, opts: schedulerOpts })
      // A sweep no module declares any more (renamed or retired by an upgrade, as the
      // `lifecycle-sweep` of earlier releases) stops being scheduled.
      for (const existing of await queue.getJobSchedulers()) {
        const id = existing.key
        if (!names.includes(id)) await queue.removeJobScheduler(id)
      }
    }
  }

  // A message queued longer than this whose job is gone was lost (Redis restarted empty).
  const mailGraceMs = Math.max(60_000, 3 * config.sweepMs)
  const mailSweep = async () => {
    const resent: Record<string, number> = {}
    for (const kind of overdueKinds) {
      const lost = await kind.overdue!(mailGraceMs)
      // The same job id as the first enqueue: a job that is in fact still there is not doubled.
      for (const job of lost)
        await producer.enqueue(MAIL_QUEUE, kind.kind, job.payload, { id: job.id, attempts: 1 })
      if (lost.length > 0) resent[kind.kind] = lost.length
    }
    if (Object.keys(resent).length > 0) logger.info({ resent }, 'mail sweep: lost messages queued again')
    return { resent }
  }

  const runSweep = async (job: Job) => {
    if (job.name === MAIL_SWEEP) return mailSweep()
    const sweep = sweeps.get(job.name)
    // A job of a sweep no module declares (an earlier release's scheduler, until it is removed).
    if (!sweep) return null
    const result = await sweep.run(`job:${job.id}`, producer)
    if (result.worked) logger.info({ ...result.details }, result.message ?? sweep.name)
    return result.details ?? null
  }

  const workers: Worker[] = []
  for (const queueName of Object.keys(SWEEP_QUEUES) as SweepQueue[])
    workers.push(new Worker(queueName, runSweep, { ...options, ...SWEEP_QUEUES[queueName] }))

  // One e-mail per job; BullMQ retries a failed send (the job's `attempts`), and the module
  // records the last failure (`final`).
  if (kinds.size > 0)
    workers.push(
      new Worker(
        MAIL_QUEUE,
        async (job: Job<object>) => {
          const kind = kinds.get(job.name)
          if (!kind) return null
          const final = job.attemptsMade + 1 >= (job.opts.attempts ?? 1)
          return kind.deliver(job.data, final)
        },
        { ...options, concurrency: MAIL_CONCURRENCY },
      ),
    )

  const consuming: Array<{ consumer: QueueConsumer; worker: Worker }> = []
  for (const consumer of consumers.values()) {
    const worker = new Worker(consumer.queue, (job: Job) => consumer.handle(job.name, job.data, producer), {
      ...options,
      concurrency: consumer.concurrency,
    })
    consuming.push({ consumer, worker })
    workers.push(worker)
  }

  const runTime = (job: Job | undefined) =>
    job?.processedOn !== undefined && job.finishedOn !== undefined
      ? (job.finishedOn - job.processedOn) / 1000
      : undefined
  for (const worker of workers) {
    worker.on('completed', (job) => deps.onJobDone?.(worker.name, job.name, 'completed', runTime(job)))
    worker.on('failed', (job, err) => {
      logger.warn({ job: job?.name, err: { message: err.message } }, 'job failed')
      deps.onJobDone?.(worker.name, job?.name ?? 'unknown', 'failed', runTime(job))
    })
    worker.on('error', (err) => logger.warn({ err: { message: err.message } }, 'jobs: worker error'))
  }

  let stopped = false
  const reschedule = () => {
    if (stopped) return
    upsertSchedulers().catch((err: Error) =>
      logger.warn({ err: { message: err.message } }, 'jobs: schedulers not set yet'),
    )
  }
  connection.on('ready', reschedule)
  if (connection.status === 'ready') reschedule()
  logger.info(
    {
      sweepMs: config.sweepMs,
      concurrency: config.concurrency,
      queues: options.prefix,
      sweeps: [...scheduled.maintenance, ...scheduled.integrations],
      mail: [...kinds.keys()],
      consumers: [...consumers.keys()],
    },
    'background jobs started',
  )

  return {
    async stop() {
      stopped = true
      connection.off('ready', reschedule)
      // Waiting for running jobs needs Redis: without it (or past the deadline) BullMQ's close
      // never settles, so the workers are closed at once; a job cut short is retried, and every
      // job is safe to run again (see above).
      const graceful =
        connection.status === 'ready'
          ? Promise.all(workers.map((worker) => worker.close())).then(() => true)
          : Promise.resolve(false)
      let timer: NodeJS.Timeout | undefined
      const deadline = new Promise<false>((resolve) => {
        timer = setTimeout(() => resolve(false), deps.closeTimeoutMs)
      })
      // The workers take no more jobs (closing): the consumers stop their own work (webhook
      // attempts still queued in memory are dropped; their deliveries are pending in PostgreSQL
      // and the webhook sweep of a running job process sends them again).
      const consumersStopped = Promise.all(
        consuming.map(({ consumer }) =>
          (consumer.stop?.() ?? Promise.resolve()).catch((err: Error) =>
            logger.warn(
              { queue: consumer.queue, err: { message: err.message } },
              'jobs: consumer stop failed',
            ),
          ),
        ),
      )
      const finished = await Promise.race([
        Promise.all([graceful, consumersStopped]).then(([done]) => done),
        deadline,
      ])
      clearTimeout(timer)
      if (!finished) {
        logger.warn('jobs: closing without waiting for running jobs (Redis unavailable or deadline passed)')
        await Promise.all(workers.map((worker) => worker.close(true)))
      }
      await Promise.all([...Object.values(queues), producer].map((queue) => queue.close()))
      connection.disconnect()
    },
  }
}
