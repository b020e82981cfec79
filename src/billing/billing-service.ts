import type { AuditLog } from '../audit/audit-log.ts'
import type { Actor } from '../auth/request-context.ts'
import type { Clock } from '../platform/clock.ts'
import type { Sql } from '../platform/database.ts'
import { AppError, invalidField } from '../platform/errors.ts'
import {
  foldUsageRows,
  getPlan,
  getSubscription,
  listPlans,
  lockSubscription,
  type PlanRow,
  setPlan,
  usageByMonth,
} from './billing-store.ts'

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
] as const

/** A usage report spans at most two years of months. */
export const MAX_USAGE_MONTHS = 24

export interface Quotas {
  operationsPerMonth: number | null
  keys: number | null
  secrets: number | null
  endUsers: number | null
}

export interface PlanView {
  id: string
  name: string
  /** Minor units (cents): exact. */
  monthlyPriceMinor: number
  /** The same price in major units, two decimals. */
  monthlyPrice: number
  currency: string
  quotas: Quotas
}

export interface SubscriptionView {
  plan: PlanView
  status: 'active' | 'past_due' | 'canceled'
  /** Calendar months, UTC: the period is the current month. */
  currentPeriod: { start: string; end: string }
  nextInvoice: { date: string; amount: number; amountMinor: number; currency: string }
}

export interface MonthUsage {
  period: string
  operations: Record<(typeof OPERATION_KINDS)[number], number>
  totalOperations: number
  /** The plan's monthly operations quota (null: none). */
  operationsQuota: number | null
}

export interface UsageReport {
  data: MonthUsage[]
  /** What the tenant holds now, against the plan's quotas. */
  current: { keys: number; secrets: number; endUsers: number }
  quotas: Quotas
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
  /** The job process: folds the meter's appended rows (usage-meter.ts); the number of groups folded. */
  foldUsage(): Promise<number>
}

const PERIOD = /^([0-9]{4})-(0[1-9]|1[0-2])$/
const periodOf = (date: Date) => date.toISOString().slice(0, 7)
const monthStart = (date: Date) => new Date(Date.UTC(date.getUTCFullYear(), date.getUTCMonth(), 1))
const nextMonth = (date: Date) => new Date(Date.UTC(date.getUTCFullYear(), date.getUTCMonth() + 1, 1))
/** Minor units to a number with two decimals (exact for any price below 2^53 cents). */
const major = (minor: bigint) => Number(minor) / 100

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
 * Plans, subscriptions and usage (docs/billing.md). Usage comes from the meter that the audit
 * write keeps (src/billing/usage-meter.ts), never from scanning the audit log.
 */
export function createBillingService(deps: {
  sql: Sql
  audit: AuditLog
  clock: Clock
  sources: UsageSources
}): BillingService {
  const { sql, audit, clock } = deps

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
        const current = await lockSubscription(tx, actor.tenantId, actor.actor)
        if (current.plan_id === planId && current.status === 'active') return current
        const changed = await setPlan(tx, { tenantId: actor.tenantId, planId, by: actor.actor })
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
    async foldUsage() {
      let folded = 0
      for (let round = 0; round < 100; round++) {
        const groups = await foldUsageRows(sql, 1000)
        folded += groups
        if (groups < 1000) break
      }
      return folded
    },
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
        usageByMonth(sql, actor.tenantId, months[0]!, months.at(-1)!),
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
          if (row.kind in operations) operations[row.kind as keyof typeof operations] = Number(count)
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
