import type { Queryable, Sql, Tx } from '../data/database.ts'
import {
  actorUses,
  isMarkSettled,
  lockFeedCursor,
  mapRecordTimes,
  moveFeedCursor,
  operationCounts,
  readFeedMark,
  resourceUses,
  TIME_MAP_RANGE_IDS,
} from './audit-feed-store.ts'

/**
 * The audit feed (docs/audit.md "What other modules fold from the records"): other modules keep
 * what they derive from the audit records (billing's usage, intelligence's key last use) by
 * folding the records, in their sweeps, instead of writing it with every audit write.
 *
 * Each consumer has a position: every record up to it is folded, none above, and the position
 * moves in the transaction that writes what was folded (the consumer's `apply`), so a fold is
 * committed whole or not at all: a crash, or a rollback, folds nothing and the next sweep folds
 * the same records again. Record ids are drawn when a record is inserted and its transaction
 * commits later, so a record may appear below ids already visible: the position only moves past
 * ids that are settled, no transaction that could still commit one of them running. A sweep
 * marks the last id drawn and a transaction id assigned after it; every write that drew an id up
 * to the mark is older than that transaction id (the audit insert takes its transaction id before
 * its first record id), so once no older transaction runs, the mark is settled. The sweep tries
 * once more right away (usually settled: audit writes are short), otherwise the next sweep does.
 *
 * Readers that must be exact now (a usage report) add what is above the position, read in the
 * same REPEATABLE READ snapshot as the consumer's folded values (`unfolded`).
 */

/** Successful operations of a tenant in a UTC month, per action. */
export interface OperationCount {
  tenantId: string
  /** YYYY-MM. */
  period: string
  action: string
  records: number
  /** The sum of the records' positive `details.items` (a batch's items). */
  items: number
}

/** The latest attempt and success on a resource. */
export interface ResourceUse {
  tenantId: string
  resource: string
  lastAttemptAt: Date
  lastSuccessAt: Date | null
}

/** The latest record by an actor. */
export interface ActorUse {
  tenantId: string
  actor: string
  lastAt: Date
}

interface Folding<Row> {
  /**
   * Folds what is settled and not folded yet: `apply` writes the consumer's own tables in the
   * transaction that moves its position (once per chunk of ids, with that chunk's rows; not
   * called for a chunk with none). Answers the rows applied. Safe to run twice at once (the
   * second waits for the first's position) and after a crash.
   */
  fold(apply: (tx: Tx, rows: Row[]) => Promise<void>): Promise<number>
}

interface OperationCounts extends Folding<OperationCount> {
  /**
   * The tenant's counts not folded yet, of records at or after `from` and before `to`. Inside the
   * caller's REPEATABLE READ transaction, with the consumer's folded values read in it: together
   * they are exactly the records committed as of that snapshot.
   */
  unfolded(tx: Queryable, tenantId: string, range: { from: Date; to: Date }): Promise<OperationCount[]>
}

interface ResourceUses extends Folding<ResourceUse> {
  /** As OperationCounts.unfolded: the tenant's uses not folded yet, of one resource or of all. */
  unfolded(tx: Queryable, tenantId: string, resource?: string): Promise<ResourceUse[]>
}

interface ActorUses extends Folding<ActorUse> {
  /** As OperationCounts.unfolded: the tenant's records not folded yet, of one actor or of all. */
  unfolded(tx: Queryable, tenantId: string, actor?: string): Promise<ActorUse[]>
}

export interface AuditFeed {
  /** Successful records of actions starting with `actionPrefix`, counted per tenant, month and action. */
  operationCounts(options: { consumer: string; actionPrefix: string }): OperationCounts
  /** Records of actions starting with `actionPrefix` on resources starting with `resourcePrefix`. */
  resourceUses(options: { consumer: string; actionPrefix: string; resourcePrefix: string }): ResourceUses
  /** Records of any action and outcome by actors starting with `actorPrefix` (API keys' last use). */
  actorUses(options: { consumer: string; actorPrefix: string }): ActorUses
  /**
   * The audit module's own sweep: maps the settled records' ids to their times, with which
   * GET /audit turns a time range into id bounds (audit-store.ts). Answers the records mapped.
   */
  foldTimeMap(): Promise<number>
}

/** Ids folded per transaction: bounds a fold's transaction (the first after a long pause). */
const CHUNK_IDS = 100_000n
/** Transactions per fold at most; the next sweep goes on. */
const MAX_STEPS = 1000

const min = (a: bigint, b: bigint) => (a < b ? a : b)

/**
 * One transaction of a fold: settles the pending mark if it can, marks the last id drawn if
 * nothing is pending, and folds the next chunk of settled ids. `fold` reads and applies the
 * records in (after, upTo]; answers what it applied.
 */
async function foldStep(
  sql: Sql,
  consumer: string,
  chunkIds: bigint,
  fold: (tx: Tx, after: bigint, upTo: bigint) => Promise<number>,
): Promise<{ applied: number; moreSettled: boolean; marked: boolean }> {
  // Read committed: each statement sees what committed before it (the settling check below).
  return sql.begin('isolation level read committed', async (tx) => {
    const mark = await readFeedMark(tx)
    const cursor = await lockFeedCursor(tx, consumer)
    const position = BigInt(cursor.position)
    let settled = BigInt(cursor.settled)
    let pending =
      cursor.pending_position === null
        ? null
        : { position: BigInt(cursor.pending_position), xid: cursor.pending_xid! }
    if (pending && (await isMarkSettled(tx, pending.xid))) {
      if (pending.position > settled) settled = pending.position
      pending = null
    }
    let marked = false
    if (!pending && mark.last > settled) {
      pending = { position: mark.last, xid: mark.xid }
      marked = true
    }
    const upTo = min(settled, position + chunkIds)
    const applied = upTo > position ? await fold(tx, position, upTo) : 0
    await moveFeedCursor(tx, consumer, { position: upTo, settled, pending })
    return { applied, moreSettled: upTo < settled, marked }
  })
}

/**
 * Folds chunk after chunk while settled ids remain; a mark made on the way is given one more
 * step once the chunks are done (settled unless a transaction older than it still runs).
 */
async function foldAll(
  sql: Sql,
  consumer: string,
  chunkIds: bigint,
  fold: (tx: Tx, after: bigint, upTo: bigint) => Promise<number>,
): Promise<number> {
  let applied = 0
  let marked = false
  let retried = false
  for (let step = 0; step < MAX_STEPS; step++) {
    const result = await foldStep(sql, consumer, chunkIds, fold)
    applied += result.applied
    marked ||= result.marked
    if (result.moreSettled) continue
    if (marked && !retried) {
      retried = true
      continue
    }
    break
  }
  return applied
}

const toOperationCount = (row: Awaited<ReturnType<typeof operationCounts>>[number]): OperationCount => ({
  tenantId: row.tenant_id,
  period: row.period,
  action: row.action,
  records: Number(row.records),
  items: Number(row.items),
})

const toResourceUse = (row: Awaited<ReturnType<typeof resourceUses>>[number]): ResourceUse => ({
  tenantId: row.tenant_id,
  resource: row.resource,
  lastAttemptAt: row.last_attempt_at,
  lastSuccessAt: row.last_success_at,
})

const toActorUse = (row: Awaited<ReturnType<typeof actorUses>>[number]): ActorUse => ({
  tenantId: row.tenant_id,
  actor: row.actor,
  lastAt: row.last_at,
})

export function createAuditFeed(deps: { sql: Sql }): AuditFeed {
  const { sql } = deps
  return {
    operationCounts({ consumer, actionPrefix }) {
      return {
        fold: (apply) =>
          foldAll(sql, consumer, CHUNK_IDS, async (tx, after, upTo) => {
            const rows = (await operationCounts(tx, { after, upTo }, actionPrefix)).map(toOperationCount)
            if (rows.length > 0) await apply(tx, rows)
            return rows.length
          }),
        unfolded: async (tx, tenantId, range) =>
          (await operationCounts(tx, { tenantId, consumer }, actionPrefix, range)).map(toOperationCount),
      }
    },
    resourceUses({ consumer, ...prefixes }) {
      return {
        fold: (apply) =>
          foldAll(sql, consumer, CHUNK_IDS, async (tx, after, upTo) => {
            const rows = (await resourceUses(tx, { after, upTo }, prefixes)).map(toResourceUse)
            if (rows.length > 0) await apply(tx, rows)
            return rows.length
          }),
        unfolded: async (tx, tenantId, resource) =>
          (await resourceUses(tx, { tenantId, consumer }, prefixes, resource)).map(toResourceUse),
      }
    },
    actorUses({ consumer, actorPrefix }) {
      return {
        fold: (apply) =>
          foldAll(sql, consumer, CHUNK_IDS, async (tx, after, upTo) => {
            const rows = (await actorUses(tx, { after, upTo }, actorPrefix)).map(toActorUse)
            if (rows.length > 0) await apply(tx, rows)
            return rows.length
          }),
        unfolded: async (tx, tenantId, actor) =>
          (await actorUses(tx, { tenantId, consumer }, actorPrefix, actor)).map(toActorUse),
      }
    },
    foldTimeMap: () =>
      foldAll(sql, TIME_MAP_CONSUMER, TIME_MAP_RANGE_IDS, (tx, after, upTo) =>
        mapRecordTimes(tx, after, upTo),
      ),
  }
}

/** The time map's consumer (seeded by migration 0032). */
const TIME_MAP_CONSUMER = 'audit.time_map'
