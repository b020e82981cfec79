import type { Queryable } from '../data/database.ts'

/**
 * The audit feed's SQL (migration 0032): its consumers' positions (audit_feed_cursors), the
 * record-id-to-time map (audit_time_map), and the reads of audit_log that other modules fold.
 * Only the audit module touches these tables and audit_log.
 */

/**
 * The mark a fold step starts with: the last record id drawn so far, then a transaction id
 * assigned after that read (this transaction's). Every write that drew an id up to `last` had its
 * transaction id before drawing it (insertAuditEntries), so an older one than `xid`: once no
 * transaction older than `xid` runs, every record up to `last` is committed or never will be.
 * Two statements, in this order: in one, the order of the two reads is not defined.
 */
export async function readFeedMark(tx: Queryable): Promise<{ last: bigint; xid: string }> {
  const [seq] = await tx<{ last: string }[]>`
    SELECT coalesce(pg_sequence_last_value(pg_get_serial_sequence('audit_log', 'id')::regclass), 0)::text AS last`
  const [own] = await tx<{ xid: string }[]>`SELECT pg_current_xact_id()::text AS xid`
  return { last: BigInt(seq!.last), xid: own!.xid }
}

interface CursorRow {
  position: string
  settled: string
  pending_position: string | null
  pending_xid: string | null
}

/**
 * The consumer's cursor, locked until the transaction ends (a second sweep of the same consumer
 * waits, then reads what the first committed); made at position 0 when missing.
 */
export async function lockFeedCursor(tx: Queryable, consumer: string): Promise<CursorRow> {
  const select = () => tx<CursorRow[]>`
    SELECT position::text, settled::text, pending_position::text, pending_xid::text
    FROM audit_feed_cursors WHERE consumer = ${consumer} FOR UPDATE`
  const [row] = await select()
  if (row) return row
  await tx`INSERT INTO audit_feed_cursors (consumer) VALUES (${consumer}) ON CONFLICT (consumer) DO NOTHING`
  return (await select())[0]!
}

/**
 * Whether a mark's transaction id is settled: no transaction older than it runs. Its own
 * statement, after the cursor is locked, so its snapshot is taken after the mark's transaction
 * committed: in one history the mark's xid is then below the snapshot's xmax. One at or above it
 * comes from another history, a database restored from a dump, where every transaction of the
 * dumped database has ended (and new ids are drawn above the dump's sequence): settled too.
 */
export async function isMarkSettled(tx: Queryable, xid: string): Promise<boolean> {
  const [row] = await tx<{ settled: boolean }[]>`
    SELECT pg_snapshot_xmin(s) >= ${xid}::xid8 OR ${xid}::xid8 >= pg_snapshot_xmax(s) AS settled
    FROM (SELECT pg_current_snapshot() AS s) AS now`
  return row!.settled
}

export async function moveFeedCursor(
  tx: Queryable,
  consumer: string,
  cursor: { position: bigint; settled: bigint; pending: { position: bigint; xid: string } | null },
): Promise<void> {
  await tx`
    UPDATE audit_feed_cursors SET position = ${String(cursor.position)}, settled = ${String(cursor.settled)},
      pending_position = ${cursor.pending ? String(cursor.pending.position) : null},
      pending_xid = ${cursor.pending?.xid ?? null}::xid8
    WHERE consumer = ${consumer}`
}

/** The consumer's position as the caller's snapshot sees it (0 before its first fold). */
const positionOf = (db: Queryable, consumer: string) =>
  db`coalesce((SELECT position FROM audit_feed_cursors WHERE consumer = ${consumer}), 0)`

/** Records with ids in (after, upTo], or above the consumer's position for one tenant. */
type Slice = { after: bigint; upTo: bigint } | { tenantId: string; consumer: string }

const inSlice = (db: Queryable, slice: Slice) =>
  'tenantId' in slice
    ? db`tenant_id = ${slice.tenantId} AND id > ${positionOf(db, slice.consumer)}`
    : db`id > ${String(slice.after)} AND id <= ${String(slice.upTo)}`

export interface OperationCountRow {
  tenant_id: string
  /** YYYY-MM, UTC. */
  period: string
  action: string
  /** Successful records. */
  records: string
  /** The sum of their `details.items` (batches), where it is a positive number. */
  items: string
}

/**
 * Successful records of actions starting with `actionPrefix`, per tenant, UTC month and action,
 * with the sum of their `details.items`; for one tenant, only records at or after `from` and
 * before `to`.
 */
export async function operationCounts(
  db: Queryable,
  slice: Slice,
  actionPrefix: string,
  range?: { from: Date; to: Date },
): Promise<OperationCountRow[]> {
  return db<OperationCountRow[]>`
    SELECT tenant_id, to_char(occurred_at AT TIME ZONE 'UTC', 'YYYY-MM') AS period, action,
      count(*)::text AS records,
      coalesce(sum(CASE WHEN jsonb_typeof(details -> 'items') = 'number' AND (details ->> 'items')::numeric > 0
        THEN (details ->> 'items')::numeric END), 0)::text AS items
    FROM audit_log
    WHERE ${inSlice(db, slice)} AND outcome = 'success' AND starts_with(action, ${actionPrefix})
      ${range ? db`AND occurred_at >= ${range.from} AND occurred_at < ${range.to}` : db``}
    GROUP BY tenant_id, period, action`
}

export interface ResourceUseRow {
  tenant_id: string
  resource: string
  last_attempt_at: Date
  last_success_at: Date | null
}

/**
 * Records of actions starting with `actionPrefix` on resources starting with `resourcePrefix`,
 * whatever their outcome (a refused operation is an attempt): per tenant and resource, the
 * latest attempt and the latest success; for one tenant, of one resource or of all.
 */
export async function resourceUses(
  db: Queryable,
  slice: Slice,
  prefixes: { actionPrefix: string; resourcePrefix: string },
  resource?: string,
): Promise<ResourceUseRow[]> {
  return db<ResourceUseRow[]>`
    SELECT tenant_id, resource, max(occurred_at) AS last_attempt_at,
      max(occurred_at) FILTER (WHERE outcome = 'success') AS last_success_at
    FROM audit_log
    WHERE ${inSlice(db, slice)} AND starts_with(action, ${prefixes.actionPrefix})
      AND starts_with(resource, ${prefixes.resourcePrefix}) ${resource ? db`AND resource = ${resource}` : db``}
    GROUP BY tenant_id, resource`
}

export interface ActorUseRow {
  tenant_id: string
  actor: string
  last_at: Date
}

/**
 * Records by actors starting with `actorPrefix`, whatever their action and outcome: per tenant
 * and actor, the latest; for one tenant, of one actor or of all.
 */
export async function actorUses(
  db: Queryable,
  slice: Slice,
  actorPrefix: string,
  actor?: string,
): Promise<ActorUseRow[]> {
  return db<ActorUseRow[]>`
    SELECT tenant_id, actor, max(occurred_at) AS last_at
    FROM audit_log
    WHERE ${inSlice(db, slice)} AND starts_with(actor, ${actorPrefix}) ${actor ? db`AND actor = ${actor}` : db``}
    GROUP BY tenant_id, actor`
}

/** Ids per range of the time map: a smaller range makes a time bound closer to the truth. */
export const TIME_MAP_RANGE_IDS = 10_000n

/**
 * Adds the records in (after, upTo] to the time map: the range extends the last one while that
 * stays within TIME_MAP_RANGE_IDS ids, or starts a new one. Ranges with no record (ids drawn by
 * writes that failed) add nothing. Answers the records mapped.
 */
export async function mapRecordTimes(db: Queryable, after: bigint, upTo: bigint): Promise<number> {
  const [range] = await db<{ records: number; min_at: Date | null; max_at: Date | null }[]>`
    SELECT count(*)::int AS records, min(occurred_at) AS min_at, max(occurred_at) AS max_at
    FROM audit_log WHERE id > ${String(after)} AND id <= ${String(upTo)}`
  if (!range?.min_at || !range.max_at) return 0
  const [last] = await db<{ id_to: string; id_from: string }[]>`
    SELECT id_to::text, id_from::text FROM audit_time_map ORDER BY id_to DESC LIMIT 1`
  // Every earlier range whose later records include one earlier than this range's earliest.
  await db`UPDATE audit_time_map SET suffix_min = ${range.min_at} WHERE suffix_min > ${range.min_at}`
  if (last && upTo - BigInt(last.id_from) <= TIME_MAP_RANGE_IDS) {
    await db`
      UPDATE audit_time_map SET id_to = ${String(upTo)},
        max_at_upto = GREATEST(max_at_upto, ${range.max_at}), suffix_min = LEAST(suffix_min, ${range.min_at})
      WHERE id_to = ${last.id_to}`
  } else {
    await db`
      INSERT INTO audit_time_map (id_to, id_from, max_at_upto, suffix_min)
      SELECT ${String(upTo)}, ${last?.id_to ?? '0'},
        GREATEST(${range.max_at}::timestamptz, (SELECT max_at_upto FROM audit_time_map ORDER BY id_to DESC LIMIT 1)),
        ${range.min_at}`
  }
  return range.records
}
