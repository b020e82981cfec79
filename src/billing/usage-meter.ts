import type { OperationCount } from '../audit/audit-feed.ts'

const CRYPTO = 'crypto.'
const BATCH = '_batch'

/** The audit feed's consumer that is the usage meter (its position is seeded by migration 0032). */
export const USAGE_FEED = { consumer: 'billing.usage', actionPrefix: CRYPTO }

export interface UsageRow {
  tenant_id: string
  period: string
  kind: string
  count: number
}

/**
 * The usage meter (docs/billing.md "Usage"): successful cryptographic operations per tenant, UTC
 * month and kind, from the audit feed's counts of successful `crypto.*` records. The kind is the
 * action without `crypto.`; a batch counts its items under its operation (`encrypt_batch` of 50
 * items adds 50 to `encrypt`). One row per tenant, month and kind.
 */
export function usageOf(counts: readonly OperationCount[]): UsageRow[] {
  const rows = new Map<string, UsageRow>()
  for (const count of counts) {
    const batch = count.action.endsWith(BATCH)
    const kind = count.action.slice(CRYPTO.length, batch ? -BATCH.length : undefined)
    const operations = batch ? count.items : count.records
    if (!(operations > 0)) continue
    const key = `${count.tenantId}|${count.period}|${kind}`
    const row = rows.get(key)
    if (row) row.count += operations
    else rows.set(key, { tenant_id: count.tenantId, period: count.period, kind, count: operations })
  }
  return [...rows.values()]
}
