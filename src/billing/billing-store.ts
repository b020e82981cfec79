import type { Queryable } from '../data/database.ts'

/**
 * billing_plans, subscriptions (migration 0016) and usage_totals (0032). Only the billing module
 * touches them. (usage_counters, the previous release's meter, is no longer read: 0032.)
 */
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
  input: { tenantId: string; by: string; at: Date },
): Promise<SubscriptionRow> {
  const { tenantId } = input
  await db`
    INSERT INTO subscriptions (tenant_id, plan_id, status, created_at, updated_at, updated_by)
    VALUES (${tenantId}, 'free', 'active', ${input.at}, ${input.at}, ${input.by})
    ON CONFLICT (tenant_id) DO NOTHING`
  const [row] = await db<
    SubscriptionRow[]
  >`SELECT * FROM subscriptions WHERE tenant_id = ${tenantId} FOR UPDATE`
  return row!
}

export async function setPlan(
  db: Queryable,
  input: { tenantId: string; planId: string; by: string; at: Date },
): Promise<SubscriptionRow> {
  const [row] = await db<SubscriptionRow[]>`
    UPDATE subscriptions SET plan_id = ${input.planId}, status = 'active', updated_at = ${input.at},
      updated_by = ${input.by}
    WHERE tenant_id = ${input.tenantId}
    RETURNING *`
  return row!
}

/** Operations folded per month and kind, for the months from `from` to `to` (YYYY-MM). */
export async function usageByMonth(
  db: Queryable,
  tenantId: string,
  from: string,
  to: string,
): Promise<Array<{ period: string; kind: string; count: string }>> {
  return db<Array<{ period: string; kind: string; count: string }>>`
    SELECT period, kind, count::text AS count FROM usage_totals
    WHERE tenant_id = ${tenantId} AND period BETWEEN ${from} AND ${to}
    ORDER BY period, kind`
}

/**
 * Adds folded operations to the totals (one row per tenant, month and kind in `rows`). Only the
 * billing sweep writes here, in the transaction that moves its feed position (usage-meter.ts).
 */
export async function addUsage(
  db: Queryable,
  rows: ReadonlyArray<{ tenant_id: string; period: string; kind: string; count: number }>,
): Promise<void> {
  if (rows.length === 0) return
  await db`
    INSERT INTO usage_totals (tenant_id, period, kind, count)
    SELECT tenant_id, period, kind, count
    FROM jsonb_to_recordset(${db.json(rows as never)}::jsonb) AS u(tenant_id uuid, period text, kind text, count bigint)
    ON CONFLICT (tenant_id, period, kind) DO UPDATE SET count = usage_totals.count + EXCLUDED.count`
}

export interface InvoiceRow {
  id: string
  tenant_id: string
  period: string
  plan_id: string
  amount_minor: string
  currency: string
  status: 'open' | 'paid' | 'void'
  issued_at: Date
  paid_at: Date | null
  paid_by: string | null
}

const INVOICE_COLUMNS = (db: Queryable) =>
  db`id, tenant_id, period, plan_id, amount_minor::text, currency, status, issued_at, paid_at, paid_by`

/**
 * Issues the invoices of `period` for every tenant on a paid plan that it already held when the
 * period ended, at the plan's current price; an invoice that exists already is left as it is.
 * Answers those issued now.
 */
export async function issueInvoices(
  db: Queryable,
  input: { period: string; periodEnd: Date; issuedAt: Date; newId: () => string; limit: number },
): Promise<InvoiceRow[]> {
  const due = await db<{ tenant_id: string; plan_id: string; amount_minor: string; currency: string }[]>`
    SELECT s.tenant_id, s.plan_id, p.monthly_price_minor::text AS amount_minor, p.currency
    FROM subscriptions s JOIN billing_plans p ON p.id = s.plan_id
    WHERE p.monthly_price_minor > 0 AND s.status <> 'canceled' AND s.updated_at < ${input.periodEnd}
      AND NOT EXISTS (SELECT 1 FROM invoices i WHERE i.tenant_id = s.tenant_id AND i.period = ${input.period})
    ORDER BY s.tenant_id LIMIT ${input.limit}`
  if (due.length === 0) return []
  const rows = due.map((d) => ({ ...d, id: input.newId() }))
  return db<InvoiceRow[]>`
    INSERT INTO invoices (id, tenant_id, period, plan_id, amount_minor, currency, status, issued_at)
    SELECT id, tenant_id, ${input.period}, plan_id, amount_minor, currency, 'open', ${input.issuedAt}
    FROM jsonb_to_recordset(${db.json(rows)}::jsonb)
      AS r(id uuid, tenant_id uuid, plan_id text, amount_minor bigint, currency text)
    ON CONFLICT (tenant_id, period) DO NOTHING
    RETURNING ${INVOICE_COLUMNS(db)}`
}

export async function listInvoices(
  db: Queryable,
  tenantId: string,
  page: { limit: number; offset: number },
): Promise<{ rows: InvoiceRow[]; total: number }> {
  const rows = await db<InvoiceRow[]>`
    SELECT ${INVOICE_COLUMNS(db)} FROM invoices WHERE tenant_id = ${tenantId}
    ORDER BY period DESC LIMIT ${page.limit} OFFSET ${page.offset}`
  const [counted] = await db<{ total: number }[]>`
    SELECT count(*)::int AS total FROM invoices WHERE tenant_id = ${tenantId}`
  return { rows, total: counted!.total }
}

export async function getInvoice(db: Queryable, id: string, options: { lock?: boolean } = {}) {
  const [row] = await db<InvoiceRow[]>`
    SELECT ${INVOICE_COLUMNS(db)} FROM invoices WHERE id = ${id} ${options.lock ? db`FOR UPDATE` : db``}`
  return row
}

export async function markInvoicePaid(
  db: Queryable,
  input: { id: string; paidAt: Date; paidBy: string },
): Promise<InvoiceRow | undefined> {
  const [row] = await db<InvoiceRow[]>`
    UPDATE invoices SET status = 'paid', paid_at = ${input.paidAt}, paid_by = ${input.paidBy}
    WHERE id = ${input.id} AND status = 'open'
    RETURNING ${INVOICE_COLUMNS(db)}`
  return row
}

/** Whether the tenant had a paid invoice before this one (the first paid invoice converts a referral). */
export async function paidInvoicesOf(db: Queryable, tenantId: string): Promise<number> {
  const [row] = await db<{ total: number }[]>`
    SELECT count(*)::int AS total FROM invoices WHERE tenant_id = ${tenantId} AND status = 'paid'`
  return row!.total
}

/** false: the provider's event was handled before (a redelivery). */
export async function recordPaymentEvent(db: Queryable, provider: string, eventId: string): Promise<boolean> {
  const rows = await db`
    INSERT INTO payment_events (provider, event_id) VALUES (${provider}, ${eventId})
    ON CONFLICT DO NOTHING RETURNING event_id`
  return rows.length > 0
}

/** Invoices paid within [from, to): the partner programme's commission base. */
export async function paidBetween(
  db: Queryable,
  from: Date,
  to: Date,
): Promise<Array<{ tenant_id: string; amount_minor: string; currency: string }>> {
  return db<Array<{ tenant_id: string; amount_minor: string; currency: string }>>`
    SELECT tenant_id, amount_minor::text, currency FROM invoices
    WHERE status = 'paid' AND paid_at >= ${from} AND paid_at < ${to}
    ORDER BY tenant_id, period`
}
