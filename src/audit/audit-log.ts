import type { Logger } from 'pino'
import type { Queryable, Sql } from '../data/database.ts'
import { AppError, UNAVAILABLE_RETRY_AFTER_SECONDS } from '../platform/errors.ts'
import { type AuditFeed, createAuditFeed } from './audit-feed.ts'
import {
  type AuditEntry,
  type AuditFilter,
  type AuditRow,
  insertAuditEntries,
  listAuditEntries,
} from './audit-store.ts'

export class AuditUnavailableError extends AppError {
  constructor() {
    // A failed audit write is the database's passing trouble: the client is told when to retry.
    super(503, 'audit_unavailable', 'The audit log cannot be written; the operation was not performed', {
      retryAfterSeconds: UNAVAILABLE_RETRY_AFTER_SECONDS,
    })
  }
}

function isDataError(error: unknown): boolean {
  const code = (error as { code?: unknown }).code
  return typeof code === 'string' && (code.startsWith('22') || code.startsWith('23'))
}

export interface AuditLog {
  /**
   * Resolves once the record is durable. Records made in the same turn of the event loop are
   * written together, and while the maximum number of writes is in flight new records wait and
   * join the next write (group commit): a busy process makes few, large writes.
   */
  record(entry: AuditEntry): Promise<void>
  /** Writes the record inside the caller's transaction: the change and its record commit together. */
  recordInTransaction(tx: Queryable, entry: AuditEntry): Promise<void>
  /** Waits for every pending record (graceful shutdown). */
  flush(): Promise<void>
  /** Records waiting for a write, and records in the writes in flight (metrics). */
  stats(): { queued: number; writing: number }
  /** A tenant's records matching the filter, newest first (GET /api/v1/audit). */
  list(tenantId: string, filter: AuditFilter): Promise<AuditRow[]>
  /** What other modules fold from the records in their sweeps (usage, key last use: audit-feed.ts). */
  feed: AuditFeed
}

/** Told of every record and every group-commit write (src/metrics/service-metrics.ts). */
export interface AuditObserver {
  recorded(entry: AuditEntry): void
  written(seconds: number, records: number, ok: boolean): void
}

interface Pending {
  entry: AuditEntry
  resolve(): void
  reject(error: Error): void
}

export function createAuditLog(deps: {
  sql: Sql
  logger: Logger
  timeoutMs: number
  maxBatch?: number
  /**
   * Writes in flight at once. Each operation waits for the commit of its record, and a commit
   * waits for the WAL flush (milliseconds on ordinary disks): with a single write in flight an
   * operation waited for the write before its own too, so a process's throughput was bounded by
   * its connection count divided by two flushes (bench/RESULTS.md).
   */
  maxConcurrentWrites?: number | (() => number)
  observer?: AuditObserver
}): AuditLog {
  const maxBatch = deps.maxBatch ?? 1000
  const limit = deps.maxConcurrentWrites ?? 4
  const maxConcurrentWrites = typeof limit === 'number' ? () => limit : limit
  let queue: Pending[] = []
  let inFlight = 0
  let writing = 0
  let scheduled = false
  let idleWaiters: (() => void)[] = []
  async function writeBatch(batch: Pending[]): Promise<void> {
    const started = performance.now()
    try {
      const insert = insertAuditEntries(
        deps.sql,
        batch.map((p) => p.entry),
      )
      if (!(await settlesWithin(insert, deps.timeoutMs))) {
        // Past the bound the INSERT may still be waiting (for a connection, or a lock) and could
        // commit later: a record would then appear for an operation that was refused. The
        // statement's own statement_timeout (the same bound) ends it soon, so wait once more
        // for its real outcome; only a database that does not answer at all leaves it unknown.
        if (!(await settlesWithin(insert, deps.timeoutMs))) throw new Error('audit write timed out')
      }
      await insert
      deps.observer?.written((performance.now() - started) / 1000, batch.length, true)
      for (const p of batch) p.resolve()
    } catch (err) {
      // A record the database refuses (SQLSTATE class 22/23) must not take the rest of the batch,
      // other tenants' operations included, down with it: write them one by one.
      if (batch.length > 1 && isDataError(err)) {
        for (const p of batch) await writeBatch([p])
        return
      }
      deps.observer?.written((performance.now() - started) / 1000, batch.length, false)
      deps.logger.error(
        { err: { message: (err as Error).message }, records: batch.length },
        'audit write failed',
      )
      for (const p of batch) p.reject(new AuditUnavailableError())
    }
  }

  function startWrite(): void {
    scheduled = false
    while (queue.length > 0 && inFlight < maxConcurrentWrites()) {
      const batch = queue.length <= maxBatch ? queue : queue.slice(0, maxBatch)
      queue = queue.length <= maxBatch ? [] : queue.slice(maxBatch)
      inFlight++
      writing += batch.length
      void writeBatch(batch).finally(() => {
        inFlight--
        writing -= batch.length
        schedule()
        if (inFlight === 0 && queue.length === 0) {
          const waiters = idleWaiters
          idleWaiters = []
          for (const wake of waiters) wake()
        }
      })
    }
  }

  function schedule(): void {
    if (scheduled || queue.length === 0 || inFlight >= maxConcurrentWrites()) return
    scheduled = true
    // setImmediate lets every request handled in this turn of the event loop join the batch.
    setImmediate(startWrite)
  }

  return {
    list: (tenantId, filter) => listAuditEntries(deps.sql, tenantId, filter),
    feed: createAuditFeed({ sql: deps.sql }),
    record(entry) {
      deps.observer?.recorded(entry)
      return new Promise<void>((resolve, reject) => {
        queue.push({ entry, resolve, reject })
        schedule()
      })
    },
    async recordInTransaction(tx, entry) {
      deps.observer?.recorded(entry)
      try {
        await insertAuditEntries(tx, [entry])
      } catch (err) {
        deps.logger.error({ err: { message: (err as Error).message } }, 'audit write failed')
        throw new AuditUnavailableError()
      }
    },
    async flush() {
      if (inFlight === 0 && queue.length === 0) return
      await new Promise<void>((resolve) => idleWaiters.push(resolve))
    },
    stats: () => ({ queued: queue.length, writing }),
  }
}

/** True when `promise` settles (either way) within `ms`; never rejects. */
async function settlesWithin(promise: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined
  const settled = promise.then(
    () => true,
    () => true,
  )
  const late = new Promise<false>((resolve) => {
    timer = setTimeout(() => resolve(false), ms)
  })
  try {
    return await Promise.race([settled, late])
  } finally {
    clearTimeout(timer)
  }
}
