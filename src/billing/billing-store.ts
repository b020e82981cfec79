import type { Queryable } from '../platform/database.ts'

/** billing_plans, subscriptions and usage_counters (migration 0016). Only the billing module touches them. */
export interface PlanRow {
  id: string
  name: string
  monthly_price_minor: string
  currency: string
  quotas: {
    operationsPerMonth: number | null
    keys: number | null
    secrets: number | null
    endUsers: number | null
  }
  position: number
}

export interface SubscriptionRow {
  tenant_id: string
  plan_id: string
  status: 'active' | 'past_due' | 'canceled'
  created_at: Date
  updated_at: Date
  updated_by: string
}

export async function listPlans(db: Queryable): Promise<PlanRow[]> {
  return db<
    PlanRow[]
  >`SELECT id, name, monthly_price_minor::text, currency, quotas, position FROM billing_plans ORDER BY position, id`
}

export async function getPlan(db: Queryable, id: string): Promise<PlanRow | undefined> {
  const [row] = await db<PlanRow[]>`
    SELECT id, name, monthly_price_minor::text, currency, quotas, position FROM billing_plans WHERE id = ${id}`
  return row
}

export async function getSubscription(db: Queryable, tenantId: string): Promise<SubscriptionRow | undefined> {
  const [row] = await db<SubscriptionRow[]>`SELECT * FROM subscriptions WHERE tenant_id = ${tenantId}`
  return row
}

/** The tenant's subscription, locked for a change (the row is made on the Free plan when missing). */
export async function lockSubscription(
  db: Queryable,
  tenantId: string,
  by: string,
): Promise<SubscriptionRow> {
  await db`
    INSERT INTO subscriptions (tenant_id, plan_id, status, updated_by) VALUES (${tenantId}, 'free', 'active', ${by})
    ON CONFLICT (tenant_id) DO NOTHING`
  const [row] = await db<
    SubscriptionRow[]
  >`SELECT * FROM subscriptions WHERE tenant_id = ${tenantId} FOR UPDATE`
  return row!
}

export async function setPlan(
  db: Queryable,
  input: { tenantId: string; planId: string; by: string },
): Promise<SubscriptionRow> {
  const [row] = await db<SubscriptionRow[]>`
    UPDATE subscriptions SET plan_id = ${input.planId}, status = 'active', updated_at = now(), updated_by = ${input.by}
    WHERE tenant_id = ${input.tenantId}
    RETURNING *`
  return row!
}

/** Operations per month and kind (the shards summed) for the months from `from` to `to` (YYYY-MM). */
export async function usageByMonth(
  db: Queryable,
  tenantId: string,
  from: string,
  to: string,
): Promise<Array<{ period: string; kind: string; count: string }>> {
  return db<Array<{ period: string; kind: string; count: string }>>`
    SELECT period, kind, sum(count)::text AS count FROM usage_counters
    WHERE tenant_id = ${tenantId} AND period BETWEEN ${from} AND ${to}
    GROUP BY period, kind ORDER BY period, kind`
}

/**
 * Folds the meter's rows: each (tenant, month, kind) with several rows becomes one row holding
 * their sum, for up to `groups` groups. Exact under concurrent writes and a second sweep: the
 * DELETE takes only the rows its snapshot sees (rows appended meanwhile stay as they are), and a
 * row another sweep deleted first is skipped, so no count is lost or taken twice.
 */
export async function foldUsageRows(db: Queryable, groups: number): Promise<number> {
  const rows = await db`
    WITH moved AS (
      DELETE FROM usage_counters
      WHERE (tenant_id, period, kind) IN (
        SELECT tenant_id, period, kind FROM usage_counters
        GROUP BY tenant_id, period, kind HAVING count(*) > 1 LIMIT ${groups})
      RETURNING tenant_id, period, kind, count
    )
    INSERT INTO usage_counters (tenant_id, period, kind, count)
    SELECT tenant_id, period, kind, sum(count) FROM moved GROUP BY tenant_id, period, kind
    RETURNING tenant_id`
  return rows.length
}
