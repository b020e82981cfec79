import type postgres from 'postgres'
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
 */
/**
 * A clause another module adds to an audit write, in the same statement (the usage meter,
 * src/billing/usage-meter.ts): a `WITH name AS (...)` data-modifying CTE made from the batch, or
 * nothing when the batch holds nothing for it. What it writes commits with the records, in the
 * same round trip.
 */
export type AuditCompanion = (
  db: Queryable,
  records: ReadonlyArray<{
    tenant_id: string
    occurred_at: Date
    action: string
    resource: string | null
    outcome: AuditOutcome
    details: AuditEntry['details']
  }>,
) => postgres.PendingQuery<postgres.Row[]> | undefined

export async function insertAuditEntries(
  db: Queryable,
  entries: readonly AuditEntry[],
  companions: readonly AuditCompanion[] = [],
): Promise<void> {
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
  // Each companion adds one `name AS (data-modifying statement)` to the WITH of the insert.
  const clauses = companions.flatMap((companion) => companion(db, records) ?? [])
  const withClause =
    clauses.length === 0
      ? db``
      : clauses.slice(1).reduce((all, clause) => db`${all}, ${clause}`, db`WITH ${clauses[0]!}`)
  await db`
    ${withClause}
    INSERT INTO audit_log (tenant_id, occurred_at, actor, action, resource, key_version, outcome,
                           request_id, client_ip, details)
    SELECT tenant_id, occurred_at, actor, action, resource, key_version, outcome, request_id, client_ip,
           details
    FROM jsonb_to_recordset(${db.json(records)}::jsonb) AS r(
      tenant_id uuid, occurred_at timestamptz, actor text, action text, resource text,
      key_version integer, outcome text, request_id text, client_ip text, details jsonb)`
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
  // Ordered by the bigint column, not by the text alias of the same name.
  return db<AuditRow[]>`
    SELECT id::text AS id, tenant_id, occurred_at, actor, action, resource, key_version, outcome,
           request_id, client_ip, details
    FROM audit_log WHERE ${where} ORDER BY audit_log.id DESC LIMIT ${filter.limit}`
}
