import type { Logger } from 'pino'
import type { JobsConfig } from '../config.ts'
import { createFairScheduler } from '../jobs/fair-scheduler.ts'
import type { JobQueue, ModuleJobs } from '../platform/module.ts'
import type { NextAttempt, WebhookService } from './webhook-service.ts'

/** The queue of webhook delivery attempts, consumed by this module (fair across tenants). */
const WEBHOOKS_QUEUE = 'webhooks'
/** One attempt of one delivery: the job's name on the webhooks queue. */
const DELIVER_JOB = 'deliver'
/**
 * Attempts a job process holds in memory at most; beyond it, jobs stay in Redis until room
 * frees. Large enough that a flood of one tenant is taken in and the next tenant's job behind it
 * still reaches the scheduler; a few hundred bytes each.
 */
const MAX_QUEUED_ATTEMPTS = 50_000
/** Hand-overs are quick; the attempts' own limit is the fair scheduler's. */
const HANDOVER_CONCURRENCY = 8

/** Queues delivery attempts: what the rotation sweep, the webhook sweep and an attempt schedule. */
export interface DeliveryScheduler {
  schedule(attempts: readonly NextAttempt[]): Promise<void>
}

export function createDeliveryScheduler(jobs: JobQueue): DeliveryScheduler {
  return {
    async schedule(attempts) {
      for (const next of attempts) {
        // One job id per attempt: adding it twice while it waits is a no-op.
        await jobs.enqueue(
          WEBHOOKS_QUEUE,
          DELIVER_JOB,
          { deliveryId: next.deliveryId, queue: next.queue, attempt: next.attempt },
          { id: `${next.deliveryId}.${next.attempt}`, delayMs: next.delayMs, attempts: 1 },
        )
      }
    },
  }
}

interface DeliverJob {
  deliveryId: string
  /** Jobs queued by earlier releases carry `tenantId`, or nothing (then the delivery is its own queue). */
  queue?: string
  tenantId?: string
  attempt: number
}

/**
 * - `webhook-sweep` (maintenance): a delivery job normally runs within moments of its due time;
 *   one overdue by several sweeps was lost (Redis restarted empty) and is sent again;
 * - the `webhooks` queue: a `deliver` job (one attempt of one delivery, claimed in PostgreSQL
 *   before it is made) hands the attempt to a fair scheduler (src/jobs/fair-scheduler.ts) and
 *   completes: attempts run `concurrency` at a time, round-robin across tenants, at most
 *   `tenantConcurrency` per tenant, so one tenant's slow receivers cannot delay another tenant's
 *   deliveries. The attempt's own run time is reported to `onAttemptDone` (job `attempt`).
 */
export function webhooksJobs(deps: {
  webhooks: Pick<WebhookService, 'attempt' | 'overdue'>
  config: Pick<JobsConfig, 'sweepMs' | 'concurrency' | 'tenantConcurrency'>
  logger: Pick<Logger, 'warn'>
  /** Told of every attempt made (the `deliver` job completes at hand-off): metrics. */
  onAttemptDone?: (
    queue: string,
    job: string,
    outcome: 'completed' | 'failed',
    seconds: number | undefined,
  ) => void
}): ModuleJobs {
  const { webhooks, config, logger } = deps
  const fair = createFairScheduler({
    concurrency: config.concurrency,
    perTenantLimit: config.tenantConcurrency,
    maxQueued: MAX_QUEUED_ATTEMPTS,
    onError: (err) =>
      logger.warn({ job: DELIVER_JOB, err: { message: (err as Error).message } }, 'webhook attempt failed'),
  })
  return {
    sweeps: [
      {
        name: 'webhook-sweep',
        queue: 'maintenance',
        async run(_sweepId, jobs) {
          const lost = await webhooks.overdue(Math.max(5000, 3 * config.sweepMs))
          await createDeliveryScheduler(jobs).schedule(lost)
          return {
            worked: lost.length > 0,
            message: 'webhook sweep: lost deliveries sent again',
            details: { resent: lost.length },
          }
        },
      },
    ],
    consumers: [
      {
        queue: WEBHOOKS_QUEUE,
        concurrency: HANDOVER_CONCURRENCY,
        async handle(_name, payload, jobs) {
          const job = payload as DeliverJob
          const { deliveryId, attempt } = job
          await fair.whenRoom()
          fair.submit(job.queue ?? job.tenantId ?? deliveryId, `${deliveryId}.${attempt}`, async () => {
            // The job completes at hand-off, so the attempt itself is counted here.
            const started = performance.now()
            let outcome: 'completed' | 'failed' = 'failed'
            try {
              const next = await webhooks.attempt(deliveryId, attempt)
              if (next) await createDeliveryScheduler(jobs).schedule([next])
              outcome = 'completed'
            } finally {
              deps.onAttemptDone?.(WEBHOOKS_QUEUE, 'attempt', outcome, (performance.now() - started) / 1000)
            }
          })
          return null
        },
        // Attempts still queued in memory are dropped: their deliveries are pending in
        // PostgreSQL and the webhook sweep of a running job process sends them again.
        stop: () => fair.stop(),
      },
    ],
  }
}
