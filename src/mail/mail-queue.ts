import { Queue } from 'bullmq'
import { Redis } from 'ioredis'
import type { Logger } from 'pino'

export const MAIL_QUEUE = 'mail'
export const INVITATION_EMAIL_JOB = 'invitation-email'
/** A one-time link of an account (password reset, account set-up). */
export const ACCOUNT_LINK_EMAIL_JOB = 'account-link-email'

export interface AccountLinkEmailJob {
  linkId: string
}

/** A sign-in code, by e-mail or SMS: the same queue, off the request path. */
export const ONE_TIME_CODE_JOB = 'one-time-code'
export interface OneTimeCodeJob {
  otpId: string
}

/** The decision on an access request (approved or rejected), to the end-user who asked. */
export const ACCESS_DECISION_JOB = 'access-decision-email'
export interface AccessDecisionJob {
  requestId: string
}

/** The operator's decision on a partner who signed up (src/partners). */
export const PARTNER_DECISION_JOB = 'partner-decision-email'
export interface PartnerDecisionJob {
  partnerId: string
}

/** A sign-up's confirmation link (src/signup). */
export const SIGNUP_EMAIL_JOB = 'signup-email'
export interface SignupEmailJob {
  signupId: string
}

/** The link of a sign-up on an application's pages (src/endusers): using it creates the end-user. */
export const ENDUSER_SIGNUP_EMAIL_JOB = 'enduser-signup-email'
export interface EndUserSignUpEmailJob {
  requestId: string
}

export interface InvitationEmailJob {
  invitationId: string
  sendCount: number
}

/** Hands outbound e-mail to the job process (BullMQ), so no request waits for SMTP. */
export interface MailQueue {
  enqueueInvitation(job: InvitationEmailJob): Promise<void>
  enqueueAccountLink(job: AccountLinkEmailJob): Promise<void>
  enqueueCode(job: OneTimeCodeJob): Promise<void>
  enqueueAccessDecision(job: AccessDecisionJob): Promise<void>
  enqueueSignup(job: SignupEmailJob): Promise<void>
  enqueueEndUserSignUp(job: EndUserSignUpEmailJob): Promise<void>
  enqueuePartnerDecision(job: PartnerDecisionJob): Promise<void>
  close(): Promise<void>
}

/**
 * The queue is opened on first use: most API processes of a quiet deployment never send mail.
 * The invitation row is the outbox: a job lost before or after it reached Redis is found by the
 * job process's sweep (queued too long) and sent again; a send is identified by
 * (invitation, send count), so it runs once.
 */
export function createMailQueue(deps: {
  redisUrl: string
  /** `<KMS_REDIS_PREFIX>jobs:<namespace>`, as the job runner's. */
  prefix: () => Promise<string>
  attempts: number
  logger: Logger
}): MailQueue {
  let queue: Promise<{ queue: Queue; connection: Redis }> | undefined
  const open = () => {
    queue ??= deps.prefix().then((prefix) => {
      const connection = new Redis(deps.redisUrl, {
        maxRetriesPerRequest: 1,
        connectionName: 'kms-mail-queue',
      })
      connection.on('error', (err) =>
        deps.logger.warn({ err: { message: err.message } }, 'mail queue: Redis error'),
      )
      const q = new Queue(MAIL_QUEUE, { connection, prefix })
      q.on('error', () => {})
      return { queue: q, connection }
    })
    return queue
  }
  return {
    async enqueueInvitation(job) {
      const { queue: q } = await open()
      await q.add(
        INVITATION_EMAIL_JOB,
        job,
        mailJobOptions(`${job.invitationId}.${job.sendCount}`, deps.attempts),
      )
    },
    async enqueueCode(job) {
      const { queue: q } = await open()
      await q.add(ONE_TIME_CODE_JOB, job, mailJobOptions(`otp.${job.otpId}`, deps.attempts))
    },
    async enqueueAccessDecision(job) {
      const { queue: q } = await open()
      await q.add(ACCESS_DECISION_JOB, job, mailJobOptions(`access.${job.requestId}`, deps.attempts))
    },
    async enqueueAccountLink(job) {
      const { queue: q } = await open()
      await q.add(ACCOUNT_LINK_EMAIL_JOB, job, mailJobOptions(`link.${job.linkId}`, deps.attempts))
    },
    async enqueuePartnerDecision(job) {
      const { queue: q } = await open()
      await q.add(
        PARTNER_DECISION_JOB,
        job,
        mailJobOptions(`partner-decision.${job.partnerId}`, deps.attempts),
      )
    },
    async enqueueSignup(job) {
      const { queue: q } = await open()
      await q.add(SIGNUP_EMAIL_JOB, job, mailJobOptions(`signup.${job.signupId}`, deps.attempts))
    },
    async enqueueEndUserSignUp(job) {
      const { queue: q } = await open()
      await q.add(
        ENDUSER_SIGNUP_EMAIL_JOB,
        job,
        mailJobOptions(`enduser-signup.${job.requestId}`, deps.attempts),
      )
    },
    async close() {
      if (!queue) return
      const { queue: q, connection } = await queue
      await q.close()
      connection.disconnect()
    },
  }
}

/** One send per job id; BullMQ retries a failed send `attempts` times with backoff. */
export function mailJobOptions(jobId: string, attempts: number) {
  return {
    jobId,
    attempts,
    backoff: { type: 'exponential' as const, delay: 2000 },
    removeOnComplete: true,
    removeOnFail: 1000,
  }
}
