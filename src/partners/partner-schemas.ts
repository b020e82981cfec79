import { Type } from 'typebox'
import { nameSchema, PageQuery, Printable, Timestamp } from '../platform/http-schemas.ts'

export const ReferralSchema = Type.Object(
  {
    id: Type.String(),
    tenantId: Type.String(),
    status: Type.Enum(['active', 'converted', 'churned'], {
      description: 'active: signed up through a code; converted: its first invoice is paid; churned: left',
    }),
    createdAt: Timestamp('Signed up'),
  },
  { additionalProperties: false },
)
nameSchema(ReferralSchema, 'Referral')

export const ReferralListSchema = Type.Object(
  { data: Type.Array(ReferralSchema), total: Type.Integer() },
  { additionalProperties: false },
)
nameSchema(ReferralListSchema, 'ReferralList')

export const ReferralListQuery = Type.Object({ ...PageQuery }, { additionalProperties: false })

export const CommissionSchema = Type.Object(
  {
    referralId: Type.String(),
    amount: Type.Number({ description: 'Two decimals' }),
    currency: Type.String(),
    status: Type.Enum(['calculated', 'paid']),
    period: Type.String({ description: 'YYYY-MM' }),
  },
  { additionalProperties: false },
)
nameSchema(CommissionSchema, 'Commission')

export const CommissionListSchema = Type.Object(
  {
    data: Type.Array(CommissionSchema),
    totalAmount: Type.Number({
      description: 'The sum of the amounts, summed exactly in minor units; two decimals',
    }),
  },
  { additionalProperties: false },
)
nameSchema(CommissionListSchema, 'CommissionList')

export const CommissionQuery = Type.Object(
  {
    period: Type.String({
      pattern: '^[0-9]{4}-(0[1-9]|1[0-2])$',
      description: 'The month (YYYY-MM)',
      examples: ['2026-11'],
    }),
  },
  { additionalProperties: false },
)

export const CreateCodeBody = Type.Object(
  { label: Printable(100, 'What the code is for (a campaign, a page)') },
  { additionalProperties: false, examples: [{ label: 'Newsletter November' }] },
)
nameSchema(CreateCodeBody, 'CreateReferralCode')

export const ReferralCodeSchema = Type.Object(
  {
    code: Type.String(),
    url: Type.String({ description: 'The sign-up URL carrying the code (?ref=CODE)' }),
    createdAt: Timestamp('Created'),
  },
  { additionalProperties: false },
)
nameSchema(ReferralCodeSchema, 'ReferralCode')

export const EndpointSchema = Type.Object(
  { id: Type.String(), url: Type.String(), createdAt: Timestamp('Registered') },
  { additionalProperties: false },
)
nameSchema(EndpointSchema, 'PartnerWebhookEndpoint')

export const EndpointListSchema = Type.Object(
  { data: Type.Array(EndpointSchema) },
  { additionalProperties: false },
)
nameSchema(EndpointListSchema, 'PartnerWebhookEndpointList')

export const CreateEndpointBody = Type.Object(
  {
    url: Type.String({
      minLength: 1,
      maxLength: 2048,
      description: 'Where events are POSTed (http or https)',
    }),
  },
  { additionalProperties: false, examples: [{ url: 'https://partner.example/kms-events' }] },
)
nameSchema(CreateEndpointBody, 'CreatePartnerWebhookEndpoint')

export const WebhookSecretSchema = Type.Object(
  {
    secret: Type.String({
      description: 'Verifies X-Service-Signature: sha256=<hex HMAC-SHA256 of the raw body>',
    }),
  },
  { additionalProperties: false },
)
nameSchema(WebhookSecretSchema, 'PartnerWebhookSecret')
