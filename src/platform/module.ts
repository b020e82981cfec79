import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { FastifyInstance, FastifyPluginAsync } from 'fastify'
import type { DataRoute } from '../http/data-route.ts'

/**
 * What a domain adds to a process, declared in its own `module.ts`: the routes it serves, the
 * pages it shows, the background work it does. `src/server/` composes the modules in one list:
 * `http.ts` mounts every module's routes and pages, `jobs.ts` runs every module's jobs. Nothing
 * else names a domain, so a new domain touches its own folder, one constructor in
 * `server/compose.ts` and one line in the module list (docs/architecture.md).
 */
export interface Module {
  /** The domain's name, as its folder is named (logs, the order of the list). */
  name: string
  /**
   * JSON API routes under /api/v1: the API surface's JSON errors, body parsers and
   * authentication apply; each route declares its access (auth/access.ts).
   */
  routes?: FastifyPluginAsyncTypebox
  /**
   * The hot JSON API routes, declared once (http/data-route.ts) and served by the data plane's
   * adapter (node:http, or Fastify), under the API surface's errors and authentication.
   */
  dataPlane?: readonly DataRoute[]
  /** HTML pages on the sign-in surface (web/: its CSP, CSRF, error pages and language). */
  pages?: (app: FastifyInstance) => Promise<void>
  /** A surface of its own at the root, with its own error format (the OpenID provider, SAML). */
  surface?: FastifyPluginAsync
  /** Background work, run by job processes (jobs/). */
  jobs?: ModuleJobs
}

/** Queues the job processes run; work that waits on other services has a queue of its own. */
export type SweepQueue = 'maintenance' | 'integrations'

/**
 * Periodic work over what PostgreSQL says is due: safe to run twice, late, or in several
 * processes at once (each claims its rows). Its result is logged when it did something.
 */
export interface Sweep {
  /** Unique across modules: the BullMQ job scheduler's name and the metrics' job label. */
  name: string
  queue: SweepQueue
  /**
   * `sweepId` names this run in audit records (`job:<id>`); `jobs` queues follow-up work on the
   * job process's own connection (it waits for Redis to come back).
   */
  run(sweepId: string, jobs: JobQueue): Promise<SweepResult>
}

/** What a sweep did: logged (with `message`) when `worked` says it did anything. */
interface SweepResult {
  worked: boolean
  message?: string
  details?: Record<string, unknown>
}

/** An e-mail (or SMS) this module sends through the mail queue, one job per message. */
export interface MailKind<Payload extends object = object> {
  /** The job name on the mail queue. */
  kind: string
  /** Sends it; `final` is the job's last attempt (the failure is then recorded). */
  deliver(payload: Payload, final: boolean): Promise<unknown>
  /**
   * Messages queued longer than `graceMs` whose job is gone (Redis restarted empty): the mail
   * sweep queues them again under the same job id.
   */
  overdue?(graceMs: number): Promise<Array<QueuedJob<Payload>>>
}

/** One job: its payload and the id that makes adding it twice while it waits a no-op. */
export interface QueuedJob<Payload extends object = object> {
  payload: Payload
  id: string
}

/** A queue a module consumes itself (webhook deliveries: its own fair scheduling). */
export interface QueueConsumer {
  queue: string
  /** Jobs handled at once by one process. */
  concurrency: number
  /** `jobs` as a sweep's: follow-up jobs (the next attempt). */
  handle(name: string, payload: unknown, jobs: JobQueue): Promise<unknown>
  /** Called when the job process stops, after the queue stopped taking jobs. */
  stop?(): Promise<void>
}

export interface ModuleJobs {
  sweeps?: readonly Sweep[]
  mail?: readonly MailKind[]
  consumers?: readonly QueueConsumer[]
}

/** Adds jobs to a queue (jobs/job-queue.ts); what every module is given to queue its work. */
export interface JobQueue {
  enqueue(
    queue: string,
    name: string,
    payload: object,
    options: { id: string; delayMs?: number; attempts?: number },
  ): Promise<void>
}

/** The mail queue as the modules that send mail see it: one job per message, `id` once. */
export interface MailQueue {
  enqueue(kind: string, payload: object, id: string): Promise<void>
}

const anyAboveZero = (details: Record<string, unknown>) =>
  Object.values(details).some((value) => typeof value === 'number' && value > 0)

/**
 * A sweep from its work: `work` says what it did, as counts; the job runner logs it with
 * `message` when `worked` says so (by default: when any count is above zero).
 */
export function sweep(
  name: string,
  queue: SweepQueue,
  message: string,
  work: (sweepId: string, jobs: JobQueue) => Promise<object>,
  worked: (details: Record<string, unknown>) => boolean = anyAboveZero,
): Sweep {
  return {
    name,
    queue,
    async run(sweepId, jobs) {
      const details = { ...(await work(sweepId, jobs)) } as Record<string, unknown>
      return { worked: worked(details), message, details }
    },
  }
}
