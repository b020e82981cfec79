import { randomUUID } from 'node:crypto'
import type { AuditLog } from '../audit/audit-log.ts'
import type { Actor } from '../auth/request-context.ts'
import type { Sql } from '../data/database.ts'
import { createFairScheduler } from '../jobs/fair-scheduler.ts'
import type { KeyView } from '../keys/key-service.ts'
import type { Clock } from '../platform/clock.ts'
import { AppError, notFound } from '../platform/errors.ts'
import { isUuid } from '../platform/ids.ts'
import { cutText } from '../platform/text.ts'
import { assembleFindings, type Finding, insightCriteria } from './insights.ts'
import {
  addKeyUses,
  advanceJob,
  claimJob,
  decideSuggestions,
  failBatch,
  getJob,
  getSuggestion,
  type InsightRows,
  insertJob,
  insertSuggestions,
  type JobRow,
  keyInsightQuery,
  listSuggestions,
  releaseJob,
  runInsightQuery,
  type SuggestionRow,
  tenantInsightQuery,
} from './intelligence-store.ts'
import { KEY_USE_FEED, keyUsesOf } from './key-use-meter.ts'
import type { KeyFacts, TagEngine } from './tag-engine.ts'

/** Spec section 8: bulk suggestions run in batches of 10 keys. */
const SUGGESTION_BATCH_SIZE = 10
/** A tenant's keys a bulk job (or one key's suggestions) looks at, at most. */
const MAX_KEYS = 10_000
/** A worker holds a job this long per claim; a worker that died lets go after it. */
const JOB_LEASE_MS = 2 * 60_000
/**
 * Attempts at one batch before the job fails with the last error as its reason (issue 31): a
 * batch that cannot be stored (it failed on every claim before) no longer holds the sweep, and a
 * passing fault (the database restarting) is retried after RETRY_DELAY_MS, then twice that.
 */
export const MAX_BATCH_ATTEMPTS = 3
const RETRY_DELAY_MS = 30_000
/** Stored reasons, in code points (the column's CHECK): cut on whole characters (src/platform/text.ts). */
const MAX_STORED_REASON = 300
const MAX_JOB_ERROR = 300
/**
 * Reports computed at once per process, and per tenant: each holds a database connection for
 * its statement, so a burst of reports (one tenant's or many) never takes the pool from the
 * other requests; waiting reports are served round-robin across tenants.
 */
const REPORT_CONCURRENCY = 2
/**
 * One report statement's bound. The pool's bound is sized for the short writes of the request
 * path; a report reads every key of the tenant (bench/RESULTS.md "Issue 31": 100,000 keys).
 */
const REPORT_STATEMENT_TIMEOUT_MS = 30_000

interface SuggestionView {
  id: string
  keyId: string
  label: string
  reason: string
  engine: 'builtin' | 'model'
  status: SuggestionRow['status']
  jobId: string | null
  createdAt: string
  decidedAt: string | null
  decidedBy: string | null
}

interface JobView {
  id: string
  status: JobRow['status']
  totalKeys: number
  processedKeys: number
  batchSize: number
  batchesTotal: number
  batchesDone: number
  suggestionsCreated: number
  engine: string | null
  createdAt: string
  finishedAt: string | null
  /** Why a failed job failed (the last attempt's error while it is retried). */
  error: string | null
}

interface InsightsView {
  generatedAt: string
  summary: { critical: number; warning: number; info: number }
  findings: Finding[]
}

/**
 * What intelligence needs of the keys module. The insights report reads keys and rotation
 * policies through its read model instead (the view `intelligence_key_facts`, migration 0031),
 * so it runs in SQL.
 */
export interface IntelligenceDirectories {
  keys: {
    get(actor: Actor, id: string): Promise<KeyView>
    snapshot(tenantId: string, limit: number): Promise<KeyView[]>
    addLabels(actor: Actor, id: string, labels: readonly string[]): Promise<KeyView>
  }
}

export interface IntelligenceService {
  insights(actor: Actor): Promise<InsightsView>
  /** The findings that name this key. */
  keyInsights(actor: Actor, keyId: string): Promise<InsightsView>
  /** Suggestions for one key now (stored pending; a label suggested before is not again). */
  suggestForKey(actor: Actor, keyId: string): Promise<{ data: SuggestionView[] }>
  /** A background job over every active key, in batches of 10 (202). */
  startJob(actor: Actor): Promise<JobView>
  getJob(actor: Actor, id: string): Promise<JobView>
  list(
    actor: Actor,
    filter: { keyId?: string; status?: SuggestionRow['status'] },
    page: { limit: number; offset: number },
  ): Promise<{ data: SuggestionView[]; total: number }>
  /** Accepting adds the label to the key; only a pending suggestion of the caller's tenant. */
  decide(actor: Actor, id: string, decision: 'accept' | 'reject'): Promise<SuggestionView>
  /** Every pending suggestion of the tenant (or of one key). */
  decideAll(
    actor: Actor,
    decision: 'accept' | 'reject',
    keyId?: string,
  ): Promise<{ decided: number; data: SuggestionView[] }>
  /**
   * The job process: works on running jobs, one batch per claim, the claims taken round-robin
   * across tenants; each batch committed with its suggestions. `maxBatches` bounds one call (a
   * worker that stops mid-run leaves the rest). A batch that throws is counted in `failed` and
   * retried later, up to MAX_BATCH_ATTEMPTS, then its job fails; the call goes on with others.
   */
  runJobs(options?: { maxBatches?: number }): Promise<{ batches: number; failed: number }>
  /**
   * The key-use sweep: folds the uses of keys audited since the last fold into key_last_use
   * (key-use-meter.ts, through the audit feed); the number of (tenant, resource) uses folded.
   */
  foldKeyUse(): Promise<number>
}

export function createIntelligenceService(deps: {
  sql: Sql
  clock: Clock
  audit: AuditLog
  directories: IntelligenceDirectories
  engine: TagEngine
}): IntelligenceService {
  const { sql, clock, audit, directories } = deps
  const keyUses = audit.feed.resourceUses(KEY_USE_FEED)

  const facts = (key: KeyView): KeyFacts => ({
    id: key.id,
    name: key.name,
    algorithm: key.algorithm,
    keyType: key.keyType,
    description: key.description,
    labels: key.labels,
  })

  async function suggestionsFor(keys: KeyView[], all: KeyView[], jobId: string | null, tenantId: string) {
    const others = all.map(facts)
    const rows = []
    for (const key of keys) {
      const context = { otherKeys: others.filter((k) => k.id !== key.id) }
      for (const suggestion of await deps.engine.suggest(facts(key), context))
        rows.push({
          id: randomUUID(),
          tenant_id: tenantId,
          key_id: key.id,
          label: suggestion.label,
          // Whole characters: half an emoji failed the batch's insert (issue 31, defect 5).
          reason: cutText(suggestion.reason, MAX_STORED_REASON) || 'suggested',
          engine: suggestion.engine ?? deps.engine.name,
          job_id: jobId,
          created_at: clock.now(),
        })
    }
    return rows
  }

  /**
   * Reports run through a fair scheduler (REPORT_CONCURRENCY), and callers asking for the same
   * report while it is computed share it: four concurrent calls of a tenant cost one statement.
   */
  const reports = createFairScheduler({
    concurrency: REPORT_CONCURRENCY,
    perTenantLimit: 1,
    maxQueued: Number.POSITIVE_INFINITY,
    onError: () => {},
  })
  const inFlight = new Map<string, Promise<InsightRows>>()

  function shared(tenantId: string, keyId: string | undefined, compute: () => Promise<InsightRows>) {
    const id = `${tenantId}|${keyId ?? '*'}`
    const running = inFlight.get(id)
    if (running) return running
    const promise = new Promise<InsightRows>((resolve, reject) => {
      const run = () => compute().then(resolve, reject)
      // Refused only while a task of that id is still leaving the scheduler: never leave a caller waiting.
      if (!reports.submit(tenantId, id, run)) void run()
    }).finally(() => inFlight.delete(id))
    inFlight.set(id, promise)
    return promise
  }

  /**
   * The tenant's report, or one key's: computed by one SQL statement (intelligence-store.ts)
   * whose answer is bounded; this process only shapes it.
   */
  async function report(actor: Actor, keyId?: string): Promise<InsightsView> {
    const now = clock.now()
    const criteria = insightCriteria(now)
    const rows = await shared(actor.tenantId, keyId, () =>
      runInsightQuery(
        sql,
        { statementTimeoutMs: REPORT_STATEMENT_TIMEOUT_MS, tenantWide: !keyId },
        async (tx) => {
          // The uses not folded into key_last_use yet, in the report's snapshot.
          const uses = await keyUses.unfolded(tx, actor.tenantId, keyId ? `key:${keyId}` : undefined)
          const unfolded = keyUsesOf(uses).map((use) => ({
            key_id: use.key_id,
            attempted_at: use.attempted_at,
          }))
          return keyId
            ? keyInsightQuery(tx, actor.tenantId, keyId, criteria, unfolded)
            : tenantInsightQuery(tx, actor.tenantId, criteria, unfolded)
        },
      ),
    )
    const findings = assembleFindings(rows)
    const summary = { critical: 0, warning: 0, info: 0 }
    for (const finding of findings) summary[finding.severity] += finding.count
    return { generatedAt: now.toISOString(), summary, findings }
  }

  /**
   * The claimed job's next batch: suggestions made outside any transaction (a model may take
   * seconds), then stored with the job's progress under the lease. False when the lease was lost
   * (nothing of the batch is kept); the job row is updated in place.
   */
  async function runBatch(
    job: JobRow,
    leaseUntil: Date,
    snapshotOf: (tenantId: string) => Promise<KeyView[]>,
  ): Promise<boolean> {
    const all = await snapshotOf(job.tenant_id)
    const start = job.batches_done * job.batch_size
    const ids = new Set(job.key_ids.slice(start, start + job.batch_size))
    const batchKeys = all.filter((k) => ids.has(k.id) && k.state === 'Active')
    const rows = await suggestionsFor(batchKeys, all, job.id, job.tenant_id)
    const done = job.batches_done + 1
    const finished = done * job.batch_size >= job.key_ids.length ? clock.now() : null
    const advanced = await sql
      .begin(async (tx) => {
        const created = await insertSuggestions(tx, rows)
        const row = await advanceJob(tx, {
          id: job.id,
          leaseUntil,
          batchesDone: job.batches_done,
          created: created.length,
          engine: deps.engine.name,
          finished,
        })
        // Lost the lease (or the batch was counted): nothing of this batch is kept.
        if (!row) throw new LeaseLost()
        return row
      })
      .catch((err: unknown) => {
        if (err instanceof LeaseLost) return undefined
        throw err
      })
    if (!advanced) return false
    Object.assign(job, advanced)
    // The job goes on at its next claim; release the lease so any worker may take it.
    if (advanced.status === 'running') await releaseJob(sql, job.id, leaseUntil)
    return true
  }

  async function recordDecisions(actor: Actor, rows: SuggestionRow[], decision: 'accept' | 'reject') {
    for (const row of rows)
      await audit.record({
        ...actor,
        action: `tag_suggestions.${decision}`,
        resource: `key:${row.key_id}`,
        outcome: 'success',
        details: { suggestionId: row.id, label: row.label },
      })
  }

  /** Accepted suggestions' labels go onto their keys, one key at a time (the key's own lock). */
  async function applyLabels(actor: Actor, rows: SuggestionRow[]) {
    const byKey = new Map<string, string[]>()
    for (const row of rows) byKey.set(row.key_id, [...(byKey.get(row.key_id) ?? []), row.label])
    for (const [keyId, labels] of byKey) await directories.keys.addLabels(actor, keyId, labels)
  }

  return {
    insights: (actor) => report(actor),
    async keyInsights(actor, keyId) {
      // The key service resolves an alias and applies an API key's restriction.
      const key = await directories.keys.get(actor, keyId)
      return report(actor, key.id)
    },
    async suggestForKey(actor, keyId) {
      const key = await directories.keys.get(actor, keyId)
      const all = await directories.keys.snapshot(actor.tenantId, MAX_KEYS)
      const created = await insertSuggestions(sql, await suggestionsFor([key], all, null, actor.tenantId))
      await audit.record({
        ...actor,
        action: 'tag_suggestions.suggest',
        resource: `key:${key.id}`,
        outcome: 'success',
        details: { created: created.length, engine: deps.engine.name },
      })
      return { data: created.map(toSuggestionView) }
    },
    async startJob(actor) {
      const keys = (await directories.keys.snapshot(actor.tenantId, MAX_KEYS)).filter(
        (k) => k.state === 'Active',
      )
      const job = await sql.begin(async (tx) => {
        const row = await insertJob(tx, {
          id: randomUUID(),
          tenant_id: actor.tenantId,
          key_ids: keys.map((k) => k.id),
          batch_size: SUGGESTION_BATCH_SIZE,
          created_at: clock.now(),
          created_by: actor.actor,
        })
        await audit.recordInTransaction(tx, {
          ...actor,
          action: 'tag_suggestions.job_start',
          resource: `tag_suggestion_job:${row.id}`,
          outcome: 'success',
          details: { keys: keys.length },
        })
        return row
      })
      return toJobView(job)
    },
    async getJob(actor, id) {
      const row = isUuid(id) ? await getJob(sql, actor.tenantId, id) : undefined
      if (!row) throw notFound('suggestion_job_not_found', 'Suggestion job')
      return toJobView(row)
    },
    async list(actor, filter, page) {
      if (filter.keyId) await directories.keys.get(actor, filter.keyId)
      const { rows, total } = await listSuggestions(sql, actor.tenantId, filter, page)
      return { data: rows.map(toSuggestionView), total }
    },
    async decide(actor, id, decision) {
      const current = isUuid(id) ? await getSuggestion(sql, actor.tenantId, id) : undefined
      if (!current) throw notFound('suggestion_not_found', 'Tag suggestion')
      if (current.status !== 'pending')
        throw new AppError(409, 'suggestion_decided', `The suggestion was ${current.status} already`, {
          status: current.status,
        })
      // The label first: a refused label (too many, a revoked key's state) leaves the suggestion pending.
      if (decision === 'accept') await applyLabels(actor, [current])
      const [row] = await decideSuggestions(
        sql,
        actor.tenantId,
        { id },
        { status: decision === 'accept' ? 'accepted' : 'rejected', at: clock.now(), by: actor.actor },
      )
      if (!row) throw new AppError(409, 'suggestion_decided', 'The suggestion was decided meanwhile')
      await recordDecisions(actor, [row], decision)
      return toSuggestionView(row)
    },
    async decideAll(actor, decision, keyId) {
      if (keyId) await directories.keys.get(actor, keyId)
      const at = clock.now()
      if (decision === 'reject') {
        const rows = await decideSuggestions(sql, actor.tenantId, keyId ? { keyId } : {}, {
          status: 'rejected',
          at,
          by: actor.actor,
        })
        await recordDecisions(actor, rows, decision)
        return { decided: rows.length, data: rows.map(toSuggestionView) }
      }
      // Accepting: key by key, the labels first and then exactly those suggestions, so a key
      // that refuses its labels (too many) keeps its suggestions pending and the others go on.
      const pending = (
        await listSuggestions(
          sql,
          actor.tenantId,
          { status: 'pending', ...(keyId ? { keyId } : {}) },
          {
            limit: 100_000,
            offset: 0,
          },
        )
      ).rows
      const byKey = new Map<string, SuggestionRow[]>()
      for (const row of pending) byKey.set(row.key_id, [...(byKey.get(row.key_id) ?? []), row])
      const decided: SuggestionRow[] = []
      for (const [id, rows] of byKey) {
        try {
          await directories.keys.addLabels(
            actor,
            id,
            rows.map((r) => r.label),
          )
        } catch (err) {
          if (err instanceof AppError && err.statusCode < 500) continue
          throw err
        }
        decided.push(
          ...(await decideSuggestions(
            sql,
            actor.tenantId,
            { ids: rows.map((r) => r.id) },
            { status: 'accepted', at, by: actor.actor },
          )),
        )
      }
      await recordDecisions(actor, decided, decision)
      return { decided: decided.length, data: decided.map(toSuggestionView) }
    },
    async runJobs(options = {}) {
      let batches = 0
      let failed = 0
      const max = options.maxBatches ?? Number.POSITIVE_INFINITY
      // The tenant's keys (the "similar keys" context) once per call, not once per batch.
      const snapshots = new Map<string, Promise<KeyView[]>>()
      const snapshotOf = (tenantId: string) => {
        let keys = snapshots.get(tenantId)
        if (!keys) {
          keys = directories.keys.snapshot(tenantId, MAX_KEYS)
          snapshots.set(tenantId, keys)
        }
        return keys
      }
      // One batch per claim: the next claim goes to the tenant served longest ago (claimJob).
      for (let claims = 0; claims < max; claims++) {
        const now = clock.now()
        const leaseUntil = new Date(now.getTime() + JOB_LEASE_MS)
        const job = await claimJob(sql, now, leaseUntil)
        if (!job) break
        let outcome: 'done' | 'failed' | 'lost'
        try {
          outcome = (await runBatch(job, leaseUntil, snapshotOf)) ? 'done' : 'lost'
        } catch (err) {
          // Any failure of this batch (the engine, the insert): counted against the job, which
          // waits and is retried, or fails at the bound; the sweep goes on with other jobs.
          snapshots.delete(job.tenant_id)
          const attempts = job.batch_failures + 1
          await failBatch(sql, {
            id: job.id,
            leaseUntil,
            batchesDone: job.batches_done,
            maxFailures: MAX_BATCH_ATTEMPTS,
            error: cutText(
              `batch ${job.batches_done + 1} failed (attempt ${attempts} of ${MAX_BATCH_ATTEMPTS}): ${errorText(err)}`,
              MAX_JOB_ERROR,
            ),
            now: clock.now(),
            retryAt: new Date(clock.now().getTime() + RETRY_DELAY_MS * attempts),
          })
          outcome = 'failed'
        }
        if (outcome === 'done') batches++
        else if (outcome === 'failed') failed++
        else await releaseJob(sql, job.id, leaseUntil)
      }
      return { batches, failed }
    },
    foldKeyUse: () => keyUses.fold((tx, uses) => addKeyUses(tx, keyUsesOf(uses))),
  }
}

class LeaseLost extends Error {}

/** An error as a job's reason: its message only (a driver's detail may quote the batch's data). */
const errorText = (err: unknown) =>
  err instanceof Error ? `${err.name === 'Error' ? '' : `${err.name}: `}${err.message}` : 'unknown error'

const toSuggestionView = (row: SuggestionRow): SuggestionView => ({
  id: row.id,
  keyId: row.key_id,
  label: row.label,
  reason: row.reason,
  engine: row.engine,
  status: row.status,
  jobId: row.job_id,
  createdAt: row.created_at.toISOString(),
  decidedAt: row.decided_at?.toISOString() ?? null,
  decidedBy: row.decided_by,
})

const toJobView = (row: JobRow): JobView => {
  const total = row.key_ids.length
  return {
    id: row.id,
    status: row.status,
    totalKeys: total,
    processedKeys: Math.min(total, row.batches_done * row.batch_size),
    batchSize: row.batch_size,
    batchesTotal: Math.ceil(total / row.batch_size),
    batchesDone: Math.min(row.batches_done, Math.ceil(total / row.batch_size)),
    suggestionsCreated: row.suggestions_created,
    engine: row.engine,
    createdAt: row.created_at.toISOString(),
    finishedAt: row.finished_at?.toISOString() ?? null,
    error: row.error,
  }
}
