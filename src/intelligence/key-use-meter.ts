import type { AuditCompanion } from '../audit/audit-store.ts'

const CRYPTO = 'crypto.'
const KEY = 'key:'
/** Only a well-formed id is metered: a malformed one must never fail the audit write it rides on. */
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i

/**
 * The key-use meter (docs/insights.md "Last use"): each audit write of cryptographic operations
 * appends, in the same statement, one row per key it touched with the latest attempt and the
 * latest success in that write. Nothing is written per operation and nothing waits on a row lock
 * (rows are appended, then folded by the lifecycle sweep); an operation that was refused (an
 * expired key) counts as an attempt, which is what "still in use after expiry" needs.
 */
export const keyUseMeter: AuditCompanion = (db, records) => {
  let uses:
    | Map<string, { tenant_id: string; key_id: string; attempted_at: Date; succeeded_at: Date | null }>
    | undefined
  for (const record of records) {
    if (!record.action.startsWith(CRYPTO) || !record.resource?.startsWith(KEY)) continue
    const keyId = record.resource.slice(KEY.length)
    if (!UUID.test(keyId)) continue
    const id = `${record.tenant_id}|${keyId}`
    uses ??= new Map()
    const use = uses.get(id)
    const succeeded = record.outcome === 'success' ? record.occurred_at : null
    if (!use)
      uses.set(id, {
        tenant_id: record.tenant_id,
        key_id: keyId,
        attempted_at: record.occurred_at,
        succeeded_at: succeeded,
      })
    else {
      if (record.occurred_at > use.attempted_at) use.attempted_at = record.occurred_at
      if (succeeded && (!use.succeeded_at || succeeded > use.succeeded_at)) use.succeeded_at = succeeded
    }
  }
  if (!uses) return undefined
  return db`used AS (
      INSERT INTO key_use_events (tenant_id, key_id, attempted_at, succeeded_at)
      SELECT tenant_id, key_id, attempted_at, succeeded_at
      FROM jsonb_to_recordset(${db.json([...uses.values()] as never)}::jsonb)
        AS u(tenant_id uuid, key_id uuid, attempted_at timestamptz, succeeded_at timestamptz)
    )`
}
