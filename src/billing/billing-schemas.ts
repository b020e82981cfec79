import { Type } from 'typebox'
import { nameSchema, Timestamp } from '../http/http-schemas.ts'
import { OPERATION_KINDS } from './billing-service.ts'

const Limit = (what: string) =>
  Type.Union([Type.Integer(), Type.Null()], { description: `${what}; null: no limit` })

const QuotasSchema = Type.Object(
  {
    operationsPerMonth: Limit('Cryptographic operations per calendar month'),
    keys: Limit('Keys held (not destroyed)'),
    secrets: Limit('Secrets held (not deleted)'),
    endUsers: Limit('End-users'),
  },
  { additionalProperties: false },
)
nameSchema(QuotasSchema, 'PlanQuotas')

const PlanSchema = Type.Object(
  {
    id: Type.String(),
    name: Type.String(),
    monthlyPriceMinor: Type.Integer({ description: 'Price per month in minor units (cents)' }),
    monthlyPrice: Type.Number({ description: 'The same price in major units, two decimals' }),
    currency: Type.String({ description: 'ISO 4217' }),
    quotas: QuotasSchema,
  },
  { additionalProperties: false },
)
nameSchema(PlanSchema, 'Plan')

export const PlanListSchema = Type.Object({ data: Type.Array(PlanSchema) }, { additionalProperties: false })
nameSchema(PlanListSchema, 'PlanList')

export const SubscriptionSchema = Type.Object(
  {
    plan: PlanSchema,
    status: Type.Enum(['active', 'past_due', 'canceled']),
    currentPeriod: Type.Object(
      { start: Timestamp('First instant of the period (UTC)'), end: Timestamp('First instant after it') },
      { additionalProperties: false },
    ),
    nextInvoice: Type.Object(
      {
        date: Timestamp('When the next invoice is issued'),
        amount: Type.Number({ description: 'Two decimals' }),
        amountMinor: Type.Integer({ description: 'Minor units' }),
        currency: Type.String(),
      },
      { additionalProperties: false },
    ),
  },
  { additionalProperties: false },
)
nameSchema(SubscriptionSchema, 'Subscription')

export const ChangePlanBody = Type.Object(
  { planId: Type.String({ minLength: 1, maxLength: 32, description: 'A plan id of GET /billing/plans' }) },
  { additionalProperties: false, examples: [{ planId: 'pro' }] },
)
nameSchema(ChangePlanBody, 'ChangePlan')

const Month = (description: string) =>
  Type.String({ pattern: '^[0-9]{4}-(0[1-9]|1[0-2])$', description: `${description} (YYYY-MM, UTC)` })

export const UsageQuery = Type.Object(
  {
    from: Type.Optional(Month('First month (default: `to`, else the current month)')),
    to: Type.Optional(Month('Last month (default: `from`, else the current month)')),
  },
  { additionalProperties: false },
)

export const UsageSchema = Type.Object(
  {
    data: Type.Array(
      Type.Object(
        {
          period: Type.String({ description: 'YYYY-MM' }),
          operations: Type.Object(
            Object.fromEntries(OPERATION_KINDS.map((kind) => [kind, Type.Integer()])) as Record<
              (typeof OPERATION_KINDS)[number],
              ReturnType<typeof Type.Integer>
            >,
            {
              additionalProperties: false,
              description: 'Successful operations by kind; a batch counts its items',
            },
          ),
          totalOperations: Type.Integer(),
          operationsQuota: Type.Union([Type.Integer(), Type.Null()]),
        },
        { additionalProperties: false },
      ),
    ),
    current: Type.Object(
      { keys: Type.Integer(), secrets: Type.Integer(), endUsers: Type.Integer() },
      { additionalProperties: false, description: 'Held now' },
    ),
    quotas: QuotasSchema,
  },
  { additionalProperties: false },
)
nameSchema(UsageSchema, 'Usage')

const InvoiceSchema = Type.Object(
  {
    id: Type.String(),
    period: Type.String({ description: 'The month billed (YYYY-MM, UTC)' }),
    planId: Type.String(),
    amount: Type.Number({ description: 'Two decimals' }),
    amountMinor: Type.Integer(),
    currency: Type.String(),
    status: Type.Enum(['open', 'paid', 'void']),
    issuedAt: Timestamp('Issued'),
    paidAt: Type.Union([Timestamp('Paid'), Type.Null()]),
  },
  { additionalProperties: false },
)
nameSchema(InvoiceSchema, 'Invoice')

export const InvoiceListSchema = Type.Object(
  { data: Type.Array(InvoiceSchema), total: Type.Integer() },
  { additionalProperties: false },
)
nameSchema(InvoiceListSchema, 'InvoiceList')

export const WebhookAnswerSchema = Type.Object(
  {
    received: Type.Literal(true),
    handled: Type.Boolean({
      description: 'false: an event of another type, a redelivery, or an invoice not open',
    }),
  },
  { additionalProperties: false },
)
nameSchema(WebhookAnswerSchema, 'PaymentWebhookAnswer')
