import { randomInt } from 'node:crypto'
import type { AuditCompanion } from '../audit/audit-store.ts'

/** Shards of a counter: concurrent writes of one tenant seldom wait on the same row. */
export const METER_SHARDS = 64

/**
 * The usage meter (docs/billing.md "Usage"): every successful cryptographic operation adds to
 * usage_counters in the statement that writes its audit record, so the count is exactly the
 * audited operations, as durable as they are, at no extra round trip. The kind is the audit
 * action without `crypto.`; a batch counts its items under its operation (`encrypt_batch` of 50
 * items adds 50 to `encrypt`). Rows are inserted in key order, so two writes never deadlock.
 */
export const usageMeter: AuditCompanion = (db) => db`, metered AS (
      INSERT INTO usage_counters (tenant_id, period, kind, shard, count)
      SELECT tenant_id, to_char(occurred_at AT TIME ZONE 'UTC', 'YYYY-MM'),
             regexp_replace(substr(action, 8), '_batch$', ''), ${randomInt(METER_SHARDS)},
             sum(CASE WHEN action LIKE '%\\_batch' THEN COALESCE((details->>'items')::bigint, 0) ELSE 1 END)
      FROM records
      WHERE outcome = 'success' AND action LIKE 'crypto.%'
      GROUP BY 1, 2, 3
      ORDER BY 1, 2, 3
      ON CONFLICT (tenant_id, period, kind, shard) DO UPDATE SET count = usage_counters.count + EXCLUDED.count
    )`
