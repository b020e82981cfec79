import { randomUUID } from 'node:crypto'
import type { AuditLog } from '../audit/audit-log.ts'
import type { Actor } from '../auth/request-context.ts'
import type { KeyView } from '../keys/key-service.ts'
import type { Clock } from '../platform/clock.ts'
import type { Sql } from '../platform/database.ts'
import { AppError, notFound } from '../platform/errors.ts'
import { isUuid } from '../platform/ids.ts'
import { type Finding, findInsights, type InsightKey } from './insights.ts'
import {
  advanceJob,
  claimJob,
  decideSuggestions,
  foldKeyUse,
  getJob,
  getSuggestion,
  insertJob,
  insertSuggestions,
  type JobRow,
  lastUseOf,
  listSuggestions,
  releaseJob,
  type SuggestionRow,
} from './intelligence-store.ts'
import type { KeyFacts, TagEngine } from './tag-engine.ts'

/** Spec section 8: bulk suggestions run in batches of 10 keys. */
export const SUGGESTION_BATCH_SIZE = 10
/** A tenant's keys a report or a bulk job looks at, at most. */
const MAX_KEYS = 10_000
/** A worker holds a job this long per claim; a worker that died lets go after it. */
const JOB_LEASE_MS = 2 * 60_000

export interface SuggestionView {
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

export interface JobView {
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
}

export interface InsightsView {
  generatedAt: string
  summary: { critical: number; warning: number; info: number }
  findings: Finding[]
}

/** What intelligence needs of the keys and rotation modules. */
export interface IntelligenceDirectories {
  keys: {
    get(actor: Actor, id: string): Promise<KeyView>
    snapshot(tenantId: string, limit: number): Promise<KeyView[]>
    addLabels(actor: Actor, id: string, labels: readonly string[]): Promise<KeyView>
  }
  rotation: { policiesOf(tenantId: string): Promise<Array<{ keyId: string; pausedAt: Date | null }>> }
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
   * The job process: works on running jobs, batch by batch, each batch committed with its
   * suggestions; `maxBatches` bounds one call (a worker that stops mid-run leaves the rest).
   */
  runJobs(options?: { maxBatches?: number }): Promise<{ batches: number }>
  /** The lifecycle sweep: folds the key-use meter's rows. */
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
          reason: suggestion.reason.slice(0, 300) || 'suggested',
          engine: suggestion.engine ?? deps.engine.name,
          job_id: jobId,
          created_at: clock.now(),
        })
    }
    return rows
  }

  async function report(actor: Actor, keyId?: string): Promise<InsightsView> {
    const now = clock.now()
    const [keys, uses, policies] = await Promise.all([
      directories.keys.snapshot(actor.tenantId, MAX_KEYS),
      lastUseOf(sql, actor.tenantId),
      directories.rotation.policiesOf(actor.tenantId),
    ])
    const lastAttempt = new Map(uses.map((u) => [u.key_id, u.last_attempt_at]))
    const policyByKey = new Map(policies.map((p) => [p.keyId, p]))
    const insightKeys: InsightKey[] = keys.map((k) => ({
      id: k.id,
      name: k.name,
      keyType: k.keyType,
      algorithm: k.algorithm,
      description: k.description,
      labels: k.labels,
      state: k.state,
      createdAt: new Date(k.createdAt),
      expiresAt: k.expiresAt ? new Date(k.expiresAt) : null,
    }))
    let findings = findInsights({
      keys: insightKeys,
      lastAttemptOf: (id) => lastAttempt.get(id),
      policyOf: (id) => policyByKey.get(id),
      now,
    })
    if (keyId)
      findings = findings
        .filter((f) => f.keys.some((k) => k.id === keyId))
        .map((f) => ({ ...f, count: 1, keys: f.keys.filter((k) => k.id === keyId) }))
    const summary = { critical: 0, warning: 0, info: 0 }
    for (const finding of findings) summary[finding.severity] += finding.count
    return { generatedAt: now.toISOString(), summary, findings }
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
      await directories.keys.get(actor, keyId)
      return report(actor, keyId)
    },
    async suggestForKey(actor, keyId) {
      const key = await directories.keys.get(actor, keyId)
      const all = await directories.keys.snapshot(actor.tenantId, MAX_KEYS)
      const created = await insertSuggestions(sql, await suggestionsFor([key], all, null, actor.tenantId))
      await audit.record({
        ...actor,
        action: 'tag_suggestions.suggest',
        resource: `key:${keyId}`,
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
      const max = options.maxBatches ?? Number.POSITIVE_INFINITY
      while (batches < max) {
        const now = clock.now()
        const leaseUntil = new Date(now.getTime() + JOB_LEASE_MS)
        const job = await claimJob(sql, now, leaseUntil)
        if (!job) break
        try {
          // The tenant's keys once per claim (the "similar keys" context), not once per batch.
          const all = await directories.keys.snapshot(job.tenant_id, MAX_KEYS)
          while (batches < max) {
            const start = job.batches_done * job.batch_size
            const ids = new Set(job.key_ids.slice(start, start + job.batch_size))
            const batchKeys = all.filter((k) => ids.has(k.id) && k.state === 'Active')
            // The engine runs outside any transaction (a model may take seconds).
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
            if (!advanced) break
            batches++
            Object.assign(job, advanced)
            if (advanced.status !== 'running') break
          }
        } finally {
          if (job.status === 'running') await releaseJob(sql, job.id, leaseUntil)
        }
        if (job.status === 'running') break
      }
      return { batches }
    },
    foldKeyUse: () => foldKeyUse(sql),
  }
}

class LeaseLost extends Error {}

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
  }
}
