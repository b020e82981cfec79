import type { AuditCompanion } from '../audit/audit-store.ts'

const CRYPTO = 'crypto.'
const BATCH = '_batch'

/**
 * The usage meter (docs/billing.md "Usage"): the successful cryptographic operations of an audit
 * batch, counted per tenant, UTC month and kind in JavaScript, are appended to usage_counters by
 * the statement that writes their audit records: exactly the audited operations, as durable as
 * they are, at no extra round trip. Appending (no upsert) keeps the write to one heap row and one
 * index entry per tenant and kind, with no row lock for concurrent writes to wait on; the billing
 * sweep folds the rows of past writes together. The kind is the action without `crypto.`; a
 * batch counts its items under its operation (`encrypt_batch` of 50 items adds 50 to `encrypt`).
 */
export const usageMeter: AuditCompanion = (db, records) => {
  let counts: Map<string, { tenant_id: string; period: string; kind: string; count: number }> | undefined
  for (const record of records) {
    if (record.outcome !== 'success' || !record.action.startsWith(CRYPTO)) continue
    const batch = record.action.endsWith(BATCH)
    const kind = record.action.slice(CRYPTO.length, batch ? -BATCH.length : undefined)
    const items = batch ? Number(record.details?.['items'] ?? 0) : 1
    if (!(items > 0)) continue
    const period = record.occurred_at.toISOString().slice(0, 7)
    const key = `${record.tenant_id}|${period}|${kind}`
    counts ??= new Map()
    const entry = counts.get(key)
    if (entry) entry.count += items
    else counts.set(key, { tenant_id: record.tenant_id, period, kind, count: items })
  }
  if (!counts) return undefined
  return db`metered AS (
      INSERT INTO usage_counters (tenant_id, period, kind, count)
      SELECT tenant_id, period, kind, count
      FROM jsonb_to_recordset(${db.json([...counts.values()])}::jsonb) AS m(tenant_id uuid, period text, kind text, count bigint)
    )`
}
