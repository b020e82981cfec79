import type { Logger } from 'pino'
import type { Queryable, Sql } from '../platform/database.ts'
import { AppError } from '../platform/errors.ts'
import { type AuditEntry, insertAuditEntries } from './audit-store.ts'

export class AuditUnavailableError extends AppError {
  constructor() {
    super(503, 'audit_unavailable', 'The audit log cannot be written; the operation was not performed')
  }
}

function isDataError(error: unknown): boolean {
  const code = (error as { code?: unknown }).code
  return typeof code === 'string' && (code.startsWith('22') || code.startsWith('23'))
}

export interface AuditLog {
  /**
   * Resolves once the record is durable. Records arriving while a write is in flight are
   * written together in the next one (group commit), so a busy process makes few, large writes.
   */
  record(entry: AuditEntry): Promise<void>
  /** Writes the record inside the caller's transaction: the change and its record commit together. */
  recordInTransaction(tx: Queryable, entry: AuditEntry): Promise<void>
  /** Waits for every pending record (graceful shutdown). */
  flush(): Promise<void>
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
}): AuditLog {
  const maxBatch = deps.maxBatch ?? 1000
  let queue: Pending[] = []
  let writing: Promise<void> | undefined

  async function writeBatch(batch: Pending[]): Promise<void> {
    let timer: NodeJS.Timeout | undefined
    try {
      await Promise.race([
        insertAuditEntries(
          deps.sql,
          batch.map((p) => p.entry),
        ),
        new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(new Error('audit write timed out')), deps.timeoutMs)
        }),
      ])
      for (const p of batch) p.resolve()
    } catch (err) {
      clearTimeout(timer)
      // A record the database refuses (SQLSTATE class 22/23) must not take the rest of the batch,
      // other tenants' operations included, down with it: write them one by one.
      if (batch.length > 1 && isDataError(err)) {
        for (const p of batch) await writeBatch([p])
        return
      }
      deps.logger.error(
        { err: { message: (err as Error).message }, records: batch.length },
        'audit write failed',
      )
      for (const p of batch) p.reject(new AuditUnavailableError())
    } finally {
      clearTimeout(timer)
    }
  }

  async function drain(): Promise<void> {
    while (queue.length > 0) {
      const batch = queue.slice(0, maxBatch)
      queue = queue.slice(batch.length)
      await writeBatch(batch)
    }
    writing = undefined
  }

  function schedule(): void {
    if (writing) return
    // setImmediate lets every request handled in this turn of the event loop join the batch.
    writing = new Promise((resolve) => setImmediate(resolve)).then(drain)
  }

  return {
    record(entry) {
      return new Promise<void>((resolve, reject) => {
        queue.push({ entry, resolve, reject })
        schedule()
      })
    },
    async recordInTransaction(tx, entry) {
      try {
        await insertAuditEntries(tx, [entry])
      } catch (err) {
        deps.logger.error({ err: { message: (err as Error).message } }, 'audit write failed')
        throw new AuditUnavailableError()
      }
    },
    async flush() {
      while (writing) await writing
    },
  }
}
