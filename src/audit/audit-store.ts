import type { Queryable } from '../data/database.ts'

type AuditOutcome = 'success' | 'failure' | 'denied'

/** One audit record. Never carries a secret: callers pass identifiers and outcomes only. */
export interface AuditEntry {
  tenantId: string
  /** `apikey:<id>`, `cli`, `system` ... */
  actor: string
  /** `<module>.<verb>`, e.g. `apikeys.create`. */
  action: string
  resource?: string | null
  keyVersion?: number | null
  outcome: AuditOutcome
  requestId?: string | null
  clientIp?: string | null
  details?: Record<string, string | number | boolean | null> | null
  occurredAt?: Date
}

export interface AuditRow {
  id: string
  tenant_id: string
  occurred_at: Date
  actor: string
  action: string
  resource: string | null
  key_version: number | null
  outcome: AuditOutcome
  request_id: string | null
  client_ip: string | null
  details: Record<string, unknown> | null
}

/**
 * One statement for any number of records: the batch travels as one JSON document that
 * PostgreSQL unpacks (jsonb_to_recordset). The statement is prepared once per connection, where
 * a multi-row VALUES list is a new statement, with its own parse and describe round trip, for
 * every batch size the group commit produces; and JSON.stringify is native, where postgres.js
 * would serialise every value of every column in JavaScript.
 *
 * It writes the records and nothing else: what other modules derive from them (usage, key last
 * use) they fold from audit_log in their sweeps (audit-feed.ts). The condition, evaluated once
 * before the first row (a one-time filter: it names no column), gives the transaction its id
 * before the first record id is drawn, which is what lets the feed tell when every record up to
 * an id is settled.
 */
export async function insertAuditEntries(db: Queryable, entries: readonly AuditEntry[]): Promise<void> {
  if (entries.length === 0) return
  const now = new Date()
  const records = entries.map((e) => ({
    tenant_id: e.tenantId,
    occurred_at: e.occurredAt ?? now,
    actor: e.actor,
    action: e.action,
    resource: e.resource ?? null,
    key_version: e.keyVersion ?? null,
    outcome: e.outcome,
    request_id: e.requestId ?? null,
    client_ip: e.clientIp ?? null,
    details: e.details ?? null,
  }))
  await db`
    INSERT INTO audit_log (tenant_id, occurred_at, actor, action, resource, key_version, outcome,
                           request_id, client_ip, details)
    SELECT tenant_id, occurred_at, actor, action, resource, key_version, outcome, request_id, client_ip,
           details
    FROM jsonb_to_recordset(${db.json(records)}::jsonb) AS r(
      tenant_id uuid, occurred_at timestamptz, actor text, action text, resource text,
      key_version integer, outcome text, request_id text, client_ip text, details jsonb)
    WHERE pg_current_xact_id() IS NOT NULL`
}

export interface AuditFilter {
  action?: string | undefined
  resource?: string | undefined
  outcome?: AuditOutcome | undefined
  from?: Date | undefined
  to?: Date | undefined
  /** Records with an id below this one (newest first). */
  before?: string | undefined
  limit: number
}

/**
 * The tenant's records matching the filter, newest first. Served by the (tenant_id, id DESC)
 * index: ids increase with time, and a time range is turned into id bounds by the time map
 * (audit_time_map, folded by the audit sweep: audit-feed.ts), which holds for folded records
 * whatever order their times were written in. Records above the map (not folded yet) are read
 * as well, so the answer never depends on the sweep having run; the time conditions themselves
 * are applied to every record read.
 */
export async function listAuditEntries(
  db: Queryable,
  tenantId: string,
  filter: AuditFilter,
): Promise<AuditRow[]> {
  const conditions = [db`tenant_id = ${tenantId}`]
  if (filter.action) conditions.push(db`action = ${filter.action}`)
  if (filter.resource) conditions.push(db`resource = ${filter.resource}`)
  if (filter.outcome) conditions.push(db`outcome = ${filter.outcome}`)
  if (filter.from) conditions.push(db`occurred_at >= ${filter.from}`)
  if (filter.to) conditions.push(db`occurred_at < ${filter.to}`)
  if (filter.before) conditions.push(db`id < ${filter.before}`)
  const where = conditions.reduce((acc, c) => db`${acc} AND ${c}`)
  const columns = db`r.id::text AS id, r.tenant_id, r.occurred_at, r.actor, r.action, r.resource, r.key_version,
    r.outcome, r.request_id, r.client_ip, r.details`
  // Ordered by the bigint column, not by the text alias of the same name.
  if (!filter.from && !filter.to)
    return db<AuditRow[]>`
      SELECT ${columns} FROM audit_log r WHERE ${where} ORDER BY r.id DESC LIMIT ${filter.limit}`
  // Every mapped record up to `lo` is earlier than `from`; every mapped record above `hi` is at
  // or after `to`; records above `mapped` are not mapped yet. Read apart, each newest first, so
  // each is one range of the index.
  const lo = filter.from
    ? db`coalesce((SELECT id_to FROM audit_time_map WHERE max_at_upto < ${filter.from}
        ORDER BY max_at_upto DESC, id_to DESC LIMIT 1), 0)`
    : db`0`
  const hi = filter.to
    ? db`coalesce((SELECT id_to FROM audit_time_map WHERE suffix_min < ${filter.to}
        ORDER BY suffix_min DESC, id_to DESC LIMIT 1), 0)`
    : db`coalesce((SELECT max(id_to) FROM audit_time_map), 0)`
  return db<AuditRow[]>`
    WITH bounds AS MATERIALIZED (
      SELECT ${lo} AS lo, ${hi} AS hi, coalesce((SELECT max(id_to) FROM audit_time_map), 0) AS mapped
    )
    SELECT ${columns} FROM (
      (SELECT * FROM audit_log WHERE ${where} AND id > (SELECT mapped FROM bounds)
       ORDER BY id DESC LIMIT ${filter.limit})
      UNION ALL
      (SELECT * FROM audit_log WHERE ${where} AND id > (SELECT lo FROM bounds) AND id <= (SELECT hi FROM bounds)
       ORDER BY id DESC LIMIT ${filter.limit})
    ) AS r ORDER BY r.id DESC LIMIT ${filter.limit}`
}
