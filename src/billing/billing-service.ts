import { randomUUID } from 'node:crypto'
import type { AuditLog } from '../audit/audit-log.ts'
import type { Actor } from '../auth/request-context.ts'
import type { Sql } from '../data/database.ts'
import type { Clock } from '../platform/clock.ts'
import { AppError, invalidField, notFound } from '../platform/errors.ts'
import { isUuid } from '../platform/ids.ts'
import {
  addUsage,
  getInvoice,
  getPlan,
  getSubscription,
  type InvoiceRow,
  issueInvoices,
  listInvoices,
  listPlans,
  lockSubscription,
  markInvoicePaid,
  type PlanRow,
  paidBetween,
  paidInvoicesOf,
  recordPaymentEvent,
  setPlan,
  usageByMonth,
} from './billing-store.ts'
import type { PaymentWebhook } from './payment-webhook.ts'
import { USAGE_FEED, usageOf } from './usage-meter.ts'

/** The operation kinds the meter counts (the audit actions of src/crypto without `crypto.`). */
export const OPERATION_KINDS = [
  'encrypt',
  'decrypt',
  'sign',
  'verify',
  'mac',
  'mac_verify',
  'generate_data_key',
  'wrap',
  'unwrap',
  're_encrypt',
  'certificate_issue',
  'certificate_revoke',
  'ssh_certificate_issue',
  'ssh_certificate_revoke',
] as const

/** A usage report spans at most two years of months. */
const MAX_USAGE_MONTHS = 24

interface Quotas {
  operationsPerMonth: number | null
  keys: number | null
  secrets: number | null
  endUsers: number | null
}

interface PlanView {
  id: string
  name: string
  /** Minor units (cents): exact. */
  monthlyPriceMinor: number
  /** The same price in major units, two decimals. */
  monthlyPrice: number
  currency: string
  quotas: Quotas
}

interface SubscriptionView {
  plan: PlanView
  status: 'active' | 'past_due' | 'canceled'
  /** Calendar months, UTC: the period is the current month. */
  currentPeriod: { start: string; end: string }
  nextInvoice: { date: string; amount: number; amountMinor: number; currency: string }
}

interface MonthUsage {
  period: string
  operations: Record<(typeof OPERATION_KINDS)[number], number>
  totalOperations: number
  /** The plan's monthly operations quota (null: none). */
  operationsQuota: number | null
}

interface UsageReport {
  data: MonthUsage[]
  /** What the tenant holds now, against the plan's quotas. */
  current: { keys: number; secrets: number; endUsers: number }
  quotas: Quotas
}

interface InvoiceView {
  id: string
  period: string
  planId: string
  amount: number
  amountMinor: number
  currency: string
  status: 'open' | 'paid' | 'void'
  issuedAt: string
  paidAt: string | null
}

/** Told after commit when an invoice is paid (the partner programme converts referrals on the first). */
interface InvoicePaid {
  tenantId: string
  invoice: InvoiceView
  /** The tenant's first paid invoice. */
  first: boolean
}

/** Live counts from the modules that own them. */
export interface UsageSources {
  keysInUse(tenantId: string): Promise<number>
  secretsInUse(tenantId: string): Promise<number>
  endUsers(tenantId: string): Promise<number>
}

export interface BillingService {
  plans(): Promise<PlanView[]>
  subscription(actor: Actor): Promise<SubscriptionView>
  /** An owner (API) or an operator (CLI) moves the tenant to another plan. */
  changePlan(actor: Actor, planId: string): Promise<SubscriptionView>
  /** Months `from`..`to` (YYYY-MM, UTC), oldest first; both default to the current month. */
  usage(actor: Actor, range: { from?: string | undefined; to?: string | undefined }): Promise<UsageReport>
  /**
   * The job process: folds the operations audited since the last fold into the totals
   * (usage-meter.ts, through the audit feed); the number of (tenant, month, action) counts folded.
   */
  foldUsage(): Promise<number>
  /** The monthly job (and the CLI): invoices of `period` (default: last month), once per tenant. */
  issueInvoices(period?: string): Promise<{ period: string; issued: number }>
  listInvoices(
    actor: Actor,
    page: { limit: number; offset: number },
  ): Promise<{ data: InvoiceView[]; total: number }>
  /** The CLI. 404 `invoice_not_found`; 409 `invoice_not_open`. */
  markPaid(invoiceId: string, by: 'cli'): Promise<InvoiceView>
  /** The payment provider's webhook: verified, handled once per event. */
  paymentWebhook(
    provider: string,
    rawBody: string,
    headers: Record<string, string | string[] | undefined>,
  ): Promise<{ received: true; handled: boolean }>
  /** Invoices paid within the month (the partner programme's commission base), per tenant. */
  paidIn(period: string): Promise<Array<{ tenantId: string; amountMinor: bigint; currency: string }>>
  /** Subscribes to paid invoices (after commit). */
  onInvoicePaid(listener: (event: InvoicePaid) => Promise<void>): void
}

const PERIOD = /^([0-9]{4})-(0[1-9]|1[0-2])$/
const periodOf = (date: Date) => date.toISOString().slice(0, 7)
const monthStart = (date: Date) => new Date(Date.UTC(date.getUTCFullYear(), date.getUTCMonth(), 1))
const nextMonth = (date: Date) => new Date(Date.UTC(date.getUTCFullYear(), date.getUTCMonth() + 1, 1))
/** Minor units to a number with two decimals (exact for any price below 2^53 cents). */
const major = (minor: bigint) => Number(minor) / 100

const invoiceView = (row: InvoiceRow): InvoiceView => {
  const minor = BigInt(row.amount_minor)
  return {
    id: row.id,
    period: row.period,
    planId: row.plan_id,
    amount: major(minor),
    amountMinor: Number(minor),
    currency: row.currency,
    status: row.status,
    issuedAt: row.issued_at.toISOString(),
    paidAt: row.paid_at?.toISOString() ?? null,
  }
}

const planView = (row: PlanRow): PlanView => {
  const minor = BigInt(row.monthly_price_minor)
  return {
    id: row.id,
    name: row.name,
    monthlyPriceMinor: Number(minor),
    monthlyPrice: major(minor),
    currency: row.currency,
    quotas: row.quotas,
  }
}

function parsePeriod(value: string, field: string): Date {
  const match = PERIOD.exec(value)
  if (!match) throw invalidField(field, 'must be a month as YYYY-MM (01 to 12)')
  return new Date(Date.UTC(Number(match[1]), Number(match[2]) - 1, 1))
}

/**
 * Plans, subscriptions and usage (docs/billing.md). Usage is the audited operations: the billing
 * sweep folds them from the audit feed into usage_totals (usage-meter.ts), and a report adds
 * those not folded yet, read in the same snapshot.
 */
export function createBillingService(deps: {
  sql: Sql
  audit: AuditLog
  clock: Clock
  sources: UsageSources
  /** The payment providers whose webhooks are configured (docs/billing.md). */
  webhooks?: PaymentWebhook[]
}): BillingService {
  const { sql, audit, clock } = deps
  const usageFeed = audit.feed.operationCounts(USAGE_FEED)
  const paidListeners: Array<(event: InvoicePaid) => Promise<void>> = []

  /** Marks an open invoice paid, audited in the same transaction; listeners are told after commit. */
  async function pay(invoiceId: string, paidBy: string, event?: { provider: string; id: string }) {
    const now = clock.now()
    const outcome = await sql.begin(async (tx) => {
      if (event && !(await recordPaymentEvent(tx, event.provider, event.id)))
        return { duplicate: true as const }
      const current = await getInvoice(tx, invoiceId, { lock: true })
      if (!current) throw notFound('invoice_not_found', 'Invoice')
      if (current.status !== 'open')
        throw new AppError(409, 'invoice_not_open', `The invoice is ${current.status}`)
      const earlier = await paidInvoicesOf(tx, current.tenant_id)
      const paid = (await markInvoicePaid(tx, { id: invoiceId, paidAt: now, paidBy }))!
      await audit.recordInTransaction(tx, {
        tenantId: current.tenant_id,
        actor: paidBy === 'cli' ? 'cli' : `system:${event?.provider ?? 'payments'}`,
        action: 'billing.invoice.paid',
        resource: `invoice:${invoiceId}`,
        outcome: 'success',
        details: { period: current.period, amountMinor: Number(current.amount_minor), paidBy },
      })
      return { duplicate: false as const, paid, first: earlier === 0 }
    })
    if (outcome.duplicate) return undefined
    const view = invoiceView(outcome.paid)
    // The payment is committed whatever a listener does; the partner programme's monthly job
    // also converts, so a listener that failed here loses nothing.
    for (const listener of paidListeners)
      await listener({ tenantId: outcome.paid.tenant_id, invoice: view, first: outcome.first }).catch(
        () => {},
      )
    return view
  }

  async function planOf(tenantId: string): Promise<{ plan: PlanRow; status: SubscriptionView['status'] }> {
    const subscription = await getSubscription(sql, tenantId)
    const plan = await getPlan(sql, subscription?.plan_id ?? 'free')
    if (!plan) throw new Error(`plan ${subscription?.plan_id} is missing`)
    return { plan, status: subscription?.status ?? 'active' }
  }

  function subscriptionView(plan: PlanRow, status: SubscriptionView['status']): SubscriptionView {
    const now = clock.now()
    const end = nextMonth(now)
    const view = planView(plan)
    return {
      plan: view,
      status,
      currentPeriod: { start: monthStart(now).toISOString(), end: end.toISOString() },
      nextInvoice: {
        date: end.toISOString(),
        amount: view.monthlyPrice,
        amountMinor: view.monthlyPriceMinor,
        currency: view.currency,
      },
    }
  }

  return {
    async plans() {
      return (await listPlans(sql)).map(planView)
    },
    async subscription(actor) {
      const { plan, status } = await planOf(actor.tenantId)
      return subscriptionView(plan, status)
    },
    async changePlan(actor, planId) {
      const plan = await getPlan(sql, planId)
      if (!plan) {
        const known = (await listPlans(sql)).map((p) => p.id)
        throw invalidField('body/planId', `must be one of ${known.join(', ')}`)
      }
      const row = await sql.begin(async (tx) => {
        const at = clock.now()
        const current = await lockSubscription(tx, { tenantId: actor.tenantId, by: actor.actor, at })
        if (current.plan_id === planId && current.status === 'active') return current
        const changed = await setPlan(tx, { tenantId: actor.tenantId, planId, by: actor.actor, at })
        await audit.recordInTransaction(tx, {
          ...actor,
          action: 'billing.plan.change',
          resource: `tenant:${actor.tenantId}`,
          outcome: 'success',
          details: { from: current.plan_id, to: planId },
        })
        return changed
      })
      return subscriptionView(plan, row.status)
    },
    async issueInvoices(period) {
      const now = clock.now()
      const target = period ?? periodOf(new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() - 1, 1)))
      const periodEnd = nextMonth(parsePeriod(target, 'period'))
      if (periodEnd > now) throw invalidField('period', 'must be a month that has ended')
      let issued = 0
      for (;;) {
        const rows = await sql.begin(async (tx) => {
          const made = await issueInvoices(tx, {
            period: target,
            periodEnd,
            issuedAt: now,
            newId: randomUUID,
            limit: 500,
          })
          for (const row of made)
            await audit.recordInTransaction(tx, {
              tenantId: row.tenant_id,
              actor: 'system:invoices',
              action: 'billing.invoice.issue',
              resource: `invoice:${row.id}`,
              outcome: 'success',
              details: { period: row.period, planId: row.plan_id, amountMinor: Number(row.amount_minor) },
            })
          return made
        })
        issued += rows.length
        if (rows.length === 0) break
      }
      return { period: target, issued }
    },
    async listInvoices(actor, page) {
      const { rows, total } = await listInvoices(sql, actor.tenantId, page)
      return { data: rows.map(invoiceView), total }
    },
    async markPaid(invoiceId, by) {
      if (!isUuid(invoiceId)) throw notFound('invoice_not_found', 'Invoice')
      return (await pay(invoiceId, by))!
    },
    async paymentWebhook(provider, rawBody, headers) {
      const webhook = deps.webhooks?.find((w) => w.provider === provider)
      if (!webhook)
        throw new AppError(
          404,
          'payment_provider_not_configured',
          `No webhook secret is configured for ${provider}`,
        )
      const event = webhook.verify(rawBody, headers, clock.now())
      // Other event types are acknowledged (the provider stops retrying) and ignored.
      if (event.type !== 'invoice.paid' || !event.invoiceId || !isUuid(event.invoiceId))
        return { received: true, handled: false }
      try {
        const paid = await pay(event.invoiceId, `${provider}:${event.id}`, { provider, id: event.id })
        return { received: true, handled: paid !== undefined }
      } catch (err) {
        // Paid already (by the CLI), or not ours: acknowledged, so the provider stops retrying.
        if (err instanceof AppError && (err.code === 'invoice_not_open' || err.code === 'invoice_not_found'))
          return { received: true, handled: false }
        throw err
      }
    },
    async paidIn(period) {
      const start = parsePeriod(period, 'period')
      return (await paidBetween(sql, start, nextMonth(start))).map((row) => ({
        tenantId: row.tenant_id,
        amountMinor: BigInt(row.amount_minor),
        currency: row.currency,
      }))
    },
    onInvoicePaid(listener) {
      paidListeners.push(listener)
    },
    foldUsage: () => usageFeed.fold((tx, counts) => addUsage(tx, usageOf(counts))),
    async usage(actor, range) {
      const current = periodOf(clock.now())
      const from = parsePeriod(
        range.from ?? range.to ?? current,
        range.from ? 'querystring/from' : 'querystring/to',
      )
      const to = parsePeriod(
        range.to ?? range.from ?? current,
        range.to ? 'querystring/to' : 'querystring/from',
      )
      if (from > to) throw invalidField('querystring/from', 'must not be after to')
      const months: string[] = []
      for (let month = from; month <= to; month = nextMonth(month)) {
        months.push(periodOf(month))
        if (months.length > MAX_USAGE_MONTHS)
          throw new AppError(400, 'range_too_long', `A report spans at most ${MAX_USAGE_MONTHS} months`)
      }
      const [{ plan }, rows, keys, secrets, endUsers] = await Promise.all([
        planOf(actor.tenantId),
        // The folded totals and the operations not folded yet, in one snapshot: the fold moves its
        // position and the totals in one transaction, so together they are exactly the operations
        // committed as of the snapshot, neither missing nor counting twice what a fold moves.
        sql.begin('isolation level repeatable read read only', async (tx) => {
          const folded = await usageByMonth(tx, actor.tenantId, months[0]!, months.at(-1)!)
          const unfolded = await usageFeed.unfolded(tx, actor.tenantId, { from, to: nextMonth(to) })
          return [...folded, ...usageOf(unfolded)]
        }),
        deps.sources.keysInUse(actor.tenantId),
        deps.sources.secretsInUse(actor.tenantId),
        deps.sources.endUsers(actor.tenantId),
      ])
      const data = months.map((period) => {
        const operations = Object.fromEntries(
          OPERATION_KINDS.map((kind) => [kind, 0]),
        ) as MonthUsage['operations']
        let total = 0n
        for (const row of rows) {
          if (row.period !== period) continue
          const count = BigInt(row.count)
          total += count
          if (row.kind in operations) operations[row.kind as keyof typeof operations] += Number(count)
        }
        return {
          period,
          operations,
          totalOperations: Number(total),
          operationsQuota: plan.quotas.operationsPerMonth,
        }
      })
      return { data, current: { keys, secrets, endUsers }, quotas: plan.quotas }
    },
  }
}
