import { type Job, Queue, Worker } from 'bullmq'
import { Redis } from 'ioredis'
import type { Logger } from 'pino'
import type { AccessPolicyService } from '../access-policies/access-policy-service.ts'
import type { BillingService } from '../billing/billing-service.ts'
import type { CloudExportService } from '../cloud-export/cloud-export-service.ts'
import type { JobsConfig } from '../config.ts'
import type { EndUserService } from '../endusers/enduser-service.ts'
import type { FederationService } from '../federation/saml-service.ts'
import type { Identity } from '../identity/identity-service.ts'
import type { IntelligenceService } from '../intelligence/intelligence-service.ts'
import type { KeyService } from '../keys/key-service.ts'
import {
  ACCESS_DECISION_JOB,
  ACCOUNT_LINK_EMAIL_JOB,
  type AccessDecisionJob,
  type AccountLinkEmailJob,
  ENDUSER_SIGNUP_EMAIL_JOB,
  type EndUserSignUpEmailJob,
  INVITATION_EMAIL_JOB,
  type InvitationEmailJob,
  MAIL_QUEUE,
  mailJobOptions,
  ONE_TIME_CODE_JOB,
  type OneTimeCodeJob,
  PARTNER_DECISION_JOB,
  type PartnerDecisionJob,
  SIGNUP_EMAIL_JOB,
  type SignupEmailJob,
} from '../mail/mail-queue.ts'
import type { PartnerService } from '../partners/partner-service.ts'
import type { RotationService } from '../rotation/rotation-service.ts'
import type { SecretService } from '../secrets/secret-service.ts'
import type { SignupService } from '../signup/signup-service.ts'
import type { TeamService } from '../team/team-service.ts'
import type { NextAttempt, WebhookService } from '../webhooks/webhook-service.ts'
import { createFairScheduler } from './fair-scheduler.ts'

/**
 * Background work on BullMQ (docs/jobs.md). BullMQ decides *when* work runs; PostgreSQL holds
 * *what* is due, so every job is a sweep or an attempt that is safe to run twice, late, or in
 * several processes at once:
 * - `rotation-sweep`: rotates each key whose policy is due, once (row lock + re-check);
 * - `lifecycle-sweep`: marks keys past their expiry, destroys keys past their deletion date,
 *   purges secrets deleted longer ago than their restore window;
 * - `webhook-sweep`: re-sends delivery jobs lost with Redis (the outbox is in PostgreSQL);
 * - `deliver`: one attempt of one webhook delivery, claimed in PostgreSQL before it is made.
 *   The job hands the attempt to a fair scheduler (fair-scheduler.ts) and completes: attempts
 *   run `concurrency` at a time, round-robin across tenants, at most `tenantConcurrency` per
 *   tenant, so one tenant's slow receivers cannot delay another tenant's deliveries;
 * - `cloud-export-sweep` (queue `integrations`): pushes the cloud KMS exports that are due,
 *   each claimed with a lease in PostgreSQL, retried by the export's own backoff;
 * - `tag-suggestion-sweep` (queue `integrations`): works on bulk tag-suggestion jobs, batch by
 *   batch, each batch committed with its progress under the job's lease.
 * The sweeps are BullMQ job schedulers, upserted at start and again whenever the connection
 * to Redis is re-established, so a Redis that restarted empty gets them back.
 */
export interface JobRunner {
  /** Stops taking jobs and waits for the running ones to finish. */
  stop(): Promise<void>
}

export interface JobDeps {
  redisUrl: string
  /** Prefix of every Redis key (KMS_REDIS_PREFIX). */
  prefix: string
  /** The deployment's own part of the queue keys (job-namespace.ts): queues are `<prefix>jobs:<namespace>`. */
  namespace: string
  config: JobsConfig
  logger: Logger
  rotation: Pick<RotationService, 'rotateDue'>
  keys: Pick<KeyService, 'expireDue' | 'destroyDue'>
  secrets: Pick<SecretService, 'purgeDue'>
  webhooks: Pick<WebhookService, 'attempt' | 'overdue'>
  /** Invitation e-mails: one send per job, and the sends whose job was lost. */
  team: Pick<TeamService, 'deliverInvitation' | 'overdueInvitations'>
  /** The provider's expired rows, sign-in throttle windows, the token signing key's rotation. */
  identity: Pick<Identity, 'sweep' | 'links' | 'codes'>
  /** The e-mail telling an end-user of the decision on their access request. */
  accessPolicies: Pick<AccessPolicyService, 'deliverDecision'>
  /** The usage meter's rows, folded (lifecycle sweep). */
  billing: Pick<BillingService, 'foldUsage' | 'issueInvoices'>
  /** Last month's partner commissions, once per referral (lifecycle sweep). */
  partners: Pick<PartnerService, 'calculateCommissions' | 'deliverDecision'>
  /** Sign-ups' confirmation e-mails, and those whose job was lost. */
  signups: Pick<SignupService, 'deliver' | 'overdue'>
  /** Sign-up links of applications' pages, and those whose job was lost. */
  endusers: Pick<EndUserService, 'deliverSignUp' | 'overdueSignUps'>
  /** Cloud KMS exports due for a push (their own queue and sweep). */
  cloudExports: Pick<CloudExportService, 'syncDue'>
  /** Bulk tag-suggestion jobs (the integrations queue) and the key-use meter's fold (lifecycle). */
  intelligence: Pick<IntelligenceService, 'runJobs' | 'foldKeyUse'>
  /** SAML requests and assertion ids past their time. */
  federation: Pick<FederationService, 'sweep'>
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
const WEBHOOKS = 'webhooks'
/**
 * Work that waits on other services (cloud KMS pushes, a language model's tag suggestions): a
 * queue of its own, so a slow cloud or model never holds up the other sweeps.
 */
const INTEGRATIONS = 'integrations'
const CLOUD_EXPORT_SWEEP = 'cloud-export-sweep'
const TAG_SUGGESTION_SWEEP = 'tag-suggestion-sweep'
/** Batches one tag-suggestion tick works through at most (the next tick goes on). */
const SUGGESTION_BATCHES_PER_TICK = 20
const SWEEPS = ['rotation-sweep', 'lifecycle-sweep', 'webhook-sweep', 'identity-sweep'] as const
/**
 * Attempts a job process holds in memory at most; beyond it, jobs stay in Redis until room
 * frees. Large enough that a flood of one tenant is taken in and the next tenant's job behind it
 * still reaches the scheduler; a few hundred bytes each.
 */
const MAX_QUEUED_ATTEMPTS = 50_000
const HANDOVER_CONCURRENCY = 8

export async function startJobRunner(deps: JobDeps): Promise<JobRunner> {
  const { config, logger } = deps
  // BullMQ needs commands to wait for a reconnection instead of failing after 20 retries.
  const connection = new Redis(deps.redisUrl, { maxRetriesPerRequest: null, connectionName: 'kms-jobs' })
  connection.on('error', (err) => logger.warn({ err: { message: err.message } }, 'jobs: Redis error'))
  const options = { connection, prefix: `${deps.prefix}jobs:${deps.namespace}` }
  const maintenance = new Queue(MAINTENANCE, options)
  const cloudQueue = new Queue(INTEGRATIONS, options)
  cloudQueue.on('error', () => {})
  const deliveries = new Queue(WEBHOOKS, options)
  const mail = new Queue(MAIL_QUEUE, options)
  mail.on('error', () => {})
  // The queues report the shared connection's errors, which the connection already logs.
  maintenance.on('error', () => {})
  deliveries.on('error', () => {})

  const schedule = async (attempts: readonly NextAttempt[]) => {
    for (const next of attempts) {
      // One job id per attempt: adding it twice while it waits is a no-op.
      await deliveries.add(
        'deliver',
        { deliveryId: next.deliveryId, queue: next.queue, attempt: next.attempt },
        {
          jobId: `${next.deliveryId}.${next.attempt}`,
          delay: next.delayMs,
          attempts: 1,
          removeOnComplete: true,
          removeOnFail: 1000,
        },
      )
    }
  }

  const upsertSchedulers = async () => {
    for (const name of SWEEPS) {
      await maintenance.upsertJobScheduler(
        name,
        { every: config.sweepMs },
        { name, opts: { removeOnComplete: true, removeOnFail: 100 } },
      )
    }
    for (const name of [CLOUD_EXPORT_SWEEP, TAG_SUGGESTION_SWEEP])
      await cloudQueue.upsertJobScheduler(
        name,
        { every: config.sweepMs },
        { name, opts: { removeOnComplete: true, removeOnFail: 100 } },
      )
  }

  // Each tick pushes what is due (claimed in PostgreSQL with a lease, so two job processes never
  // push one export at once); failures are retried with backoff by the export's own schedule.
  const cloudWorker = new Worker(
    INTEGRATIONS,
    async (job: Job) => {
      if (job.name === TAG_SUGGESTION_SWEEP) {
        const result = await deps.intelligence.runJobs({ maxBatches: SUGGESTION_BATCHES_PER_TICK })
        // A failed batch is retried later (or fails its job): said, and the tick goes on.
        if (result.failed > 0) logger.warn(result, 'tag suggestion sweep: batches failed')
        else if (result.batches > 0) logger.info(result, 'tag suggestion sweep')
        return result
      }
      const result = await deps.cloudExports.syncDue()
      if (result.attempted > 0) logger.info(result, 'cloud export sweep')
      return result
    },
    // One tick of each sweep at a time, side by side.
    { ...options, concurrency: 2 },
  )

  const maintenanceWorker = new Worker(
    MAINTENANCE,
    async (job: Job) => {
      const sweepId = `job:${job.id}`
      if (job.name === 'rotation-sweep') {
        const result = await deps.rotation.rotateDue(sweepId)
        if (result.rotated > 0 || result.skipped > 0)
          logger.info({ ...result, deliveries: result.deliveries.length }, 'rotation sweep')
        await schedule(result.deliveries)
        return { rotated: result.rotated, skipped: result.skipped }
      }
      if (job.name === 'lifecycle-sweep') {
        const expired = await deps.keys.expireDue(sweepId)
        const destroyed = await deps.keys.destroyDue(sweepId)
        const purgedSecrets = await deps.secrets.purgeDue(sweepId)
        const foldedUsage = await deps.billing.foldUsage()
        const foldedKeyUse = await deps.intelligence.foldKeyUse()
        // Last month's invoices: issued once per tenant (the unique key), whichever sweep gets there.
        const invoices = await deps.billing.issueInvoices()
        if (invoices.issued > 0) logger.info(invoices, 'invoices issued')
        const commissions = await deps.partners.calculateCommissions()
        if (commissions.calculated > 0) logger.info(commissions, 'commissions calculated')
        if (expired > 0 || destroyed > 0 || purgedSecrets > 0) {
          logger.info({ expired, destroyed, purgedSecrets }, 'lifecycle sweep')
        }
        return {
          expired,
          destroyed,
          purgedSecrets,
          foldedUsage,
          foldedKeyUse,
          invoicesIssued: invoices.issued,
          commissions: commissions.calculated,
        }
      }
      if (job.name === 'identity-sweep') {
        const swept = { ...(await deps.identity.sweep()), samlRows: await deps.federation.sweep() }
        // A queued invitation e-mail whose job was lost (Redis restarted empty) is sent again.
        const grace = Math.max(60_000, 3 * config.sweepMs)
        const lost = await deps.team.overdueInvitations(grace)
        for (const send of lost) {
          await mail.add(
            INVITATION_EMAIL_JOB,
            send,
            mailJobOptions(`${send.invitationId}.${send.sendCount}`, 1),
          )
        }
        // Likewise a reset or set-up link's e-mail.
        const lostLinks = await deps.identity.links.overdue(grace)
        for (const linkId of lostLinks) {
          await mail.add(ACCOUNT_LINK_EMAIL_JOB, { linkId }, mailJobOptions(`link.${linkId}`, 1))
        }
        // And a sign-up's confirmation.
        const lostSignups = await deps.signups.overdue(grace)
        for (const signupId of lostSignups) {
          await mail.add(SIGNUP_EMAIL_JOB, { signupId }, mailJobOptions(`signup.${signupId}`, 1))
        }
        // And an application's sign-up link.
        const lostEndUserSignUps = await deps.endusers.overdueSignUps(grace)
        for (const requestId of lostEndUserSignUps) {
          await mail.add(
            ENDUSER_SIGNUP_EMAIL_JOB,
            { requestId },
            mailJobOptions(`enduser-signup.${requestId}`, 1),
          )
        }
        const resent = {
          resentInvitations: lost.length,
          resentLinks: lostLinks.length,
          resentSignups: lostSignups.length + lostEndUserSignUps.length,
        }
        if (
          swept.expiredModels > 0 ||
          swept.rotatedToVersion !== null ||
          lost.length + lostLinks.length + resent.resentSignups > 0
        ) {
          logger.info({ ...swept, ...resent }, 'identity sweep')
        }
        return { ...swept, ...resent }
      }
      if (job.name === 'webhook-sweep') {
        // A delivery job normally runs within moments of its due time; one overdue by several
        // sweeps was lost (Redis restarted empty) and is sent again.
        const lost = await deps.webhooks.overdue(Math.max(5000, 3 * config.sweepMs))
        await schedule(lost)
        return { resent: lost.length }
      }
      return null
    },
    { ...options, concurrency: 1 },
  )
  const fair = createFairScheduler({
    concurrency: config.concurrency,
    perTenantLimit: config.tenantConcurrency,
    maxQueued: MAX_QUEUED_ATTEMPTS,
    onError: (err) =>
      logger.warn({ job: 'deliver', err: { message: (err as Error).message } }, 'webhook attempt failed'),
  })
  const deliveryWorker = new Worker(
    WEBHOOKS,
    async (job: Job<{ deliveryId: string; queue?: string; tenantId?: string; attempt: number }>) => {
      const { deliveryId, attempt } = job.data
      await fair.whenRoom()
      // Jobs queued by earlier releases carry `tenantId`, or nothing (then the delivery is its own queue).
      fair.submit(job.data.queue ?? job.data.tenantId ?? deliveryId, `${deliveryId}.${attempt}`, async () => {
        // The BullMQ job completes at hand-off, so the attempt itself is counted here.
        const started = performance.now()
        let outcome: 'completed' | 'failed' = 'failed'
        try {
          const next = await deps.webhooks.attempt(deliveryId, attempt)
          if (next) await schedule([next])
          outcome = 'completed'
        } finally {
          deps.onJobDone?.(WEBHOOKS, 'attempt', outcome, (performance.now() - started) / 1000)
        }
      })
    },
    // Hand-overs are quick; the attempts' own limit is the scheduler's.
    { ...options, concurrency: HANDOVER_CONCURRENCY },
  )
  // One e-mail (an invitation, a reset or set-up link) per job; BullMQ retries a failed send (the job's `attempts`), and the
  // last failure is recorded on the invitation and in the audit log.
  const mailWorker = new Worker(
    MAIL_QUEUE,
    async (
      job: Job<
        | InvitationEmailJob
        | AccountLinkEmailJob
        | OneTimeCodeJob
        | AccessDecisionJob
        | SignupEmailJob
        | EndUserSignUpEmailJob
        | PartnerDecisionJob
      >,
    ) => {
      const final = job.attemptsMade + 1 >= (job.opts.attempts ?? 1)
      if (job.name === INVITATION_EMAIL_JOB)
        return deps.team.deliverInvitation(job.data as InvitationEmailJob, final)
      if (job.name === ACCOUNT_LINK_EMAIL_JOB)
        return deps.identity.links.deliver((job.data as AccountLinkEmailJob).linkId, final)
      if (job.name === ONE_TIME_CODE_JOB)
        return deps.identity.codes.deliver((job.data as OneTimeCodeJob).otpId, final)
      if (job.name === ACCESS_DECISION_JOB)
        return deps.accessPolicies.deliverDecision((job.data as AccessDecisionJob).requestId, final)
      if (job.name === SIGNUP_EMAIL_JOB)
        return deps.signups.deliver((job.data as SignupEmailJob).signupId, final)
      if (job.name === ENDUSER_SIGNUP_EMAIL_JOB)
        return deps.endusers.deliverSignUp((job.data as EndUserSignUpEmailJob).requestId, final)
      if (job.name === PARTNER_DECISION_JOB)
        return deps.partners.deliverDecision((job.data as PartnerDecisionJob).partnerId, final)
      return null
    },
    { ...options, concurrency: 4 },
  )
  const runTime = (job: Job | undefined) =>
    job?.processedOn !== undefined && job.finishedOn !== undefined
      ? (job.finishedOn - job.processedOn) / 1000
      : undefined
  for (const worker of [maintenanceWorker, deliveryWorker, mailWorker, cloudWorker]) {
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
    { sweepMs: config.sweepMs, concurrency: config.concurrency, queues: options.prefix },
    'background jobs started',
  )

  return {
    async stop() {
      stopped = true
      connection.off('ready', reschedule)
      // Waiting for running jobs needs Redis: without it (or past the deadline) BullMQ's close
      // never settles, so the workers are closed at once; a job cut short is retried, and every
      // job is safe to run again (see above).
      const workers = [maintenanceWorker, deliveryWorker, mailWorker, cloudWorker]
      const graceful =
        connection.status === 'ready'
          ? Promise.all(workers.map((worker) => worker.close())).then(() => true)
          : Promise.resolve(false)
      let timer: NodeJS.Timeout | undefined
      const deadline = new Promise<false>((resolve) => {
        timer = setTimeout(() => resolve(false), deps.closeTimeoutMs)
      })
      // Attempts still queued in memory are dropped: their deliveries are pending in PostgreSQL
      // and the webhook sweep of a running job process sends them again.
      const attempts = fair.stop()
      const finished = await Promise.race([
        Promise.all([graceful, attempts]).then(([done]) => done),
        deadline,
      ])
      clearTimeout(timer)
      if (!finished) {
        logger.warn('jobs: closing without waiting for running jobs (Redis unavailable or deadline passed)')
        await Promise.all(workers.map((worker) => worker.close(true)))
      }
      await Promise.all([maintenance.close(), deliveries.close(), mail.close(), cloudQueue.close()])
      connection.disconnect()
    },
  }
}
