import { Type } from 'typebox'
import { nameSchema, PageQuery, Printable, Timestamp } from '../http/http-schemas.ts'

const ReferralSchema = Type.Object(
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

const CommissionSchema = Type.Object(
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
      description:
        'Where events are POSTed (http or https, no credentials): a public address, checked when saved and at every delivery',
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

export const PartnerSchema = Type.Object(
  {
    id: Type.String(),
    name: Type.String(),
    email: Type.String(),
    status: Type.Enum(['pending', 'active', 'suspended', 'rejected'], {
      description: 'pending: signed up, waiting for an operator; active: approved (or made by an operator)',
    }),
    createdAt: Timestamp('Created'),
    decidedAt: Type.Union([Timestamp('When an operator approved or rejected the sign-up'), Type.Null()]),
    decisionEmailStatus: Type.Union([
      Type.Enum(['queued', 'sent', 'failed'], {
        description: 'The decision e-mail to a partner who signed up',
      }),
      Type.Null(),
    ]),
  },
  { additionalProperties: false },
)
nameSchema(PartnerSchema, 'Partner')

export const PartnerKeySchema = Type.Object(
  {
    id: Type.String(),
    name: Type.String(),
    prefix: Type.String({
      description: 'The key’s first characters (kmsp_ and its lookup id), to recognise it',
    }),
    createdAt: Timestamp('Created'),
    createdBy: Type.String({ description: 'partneruser:<account id>, or the operator' }),
    revokedAt: Type.Union([Timestamp('Revoked'), Type.Null()]),
  },
  { additionalProperties: false },
)
nameSchema(PartnerKeySchema, 'PartnerApiKey')

export const CreatedPartnerKeySchema = Type.Object(
  {
    ...PartnerKeySchema.properties,
    key: Type.String({ description: 'The key itself: shown this once, only its hash is kept' }),
  },
  { additionalProperties: false },
)
nameSchema(CreatedPartnerKeySchema, 'CreatedPartnerApiKey')

export const PartnerKeyListSchema = Type.Object(
  { data: Type.Array(PartnerKeySchema) },
  { additionalProperties: false },
)
nameSchema(PartnerKeyListSchema, 'PartnerApiKeyList')

export const CreatePartnerKeyBody = Type.Object(
  { name: Printable(100, 'What the key is for') },
  { additionalProperties: false, examples: [{ name: 'CRM sync' }] },
)
nameSchema(CreatePartnerKeyBody, 'CreatePartnerApiKey')

const PartnerAuditEventSchema = Type.Object(
  {
    id: Type.String(),
    occurredAt: Timestamp('When'),
    actor: Type.String({ description: 'partnerkey:<id>, partneruser:<account id>, or the operator' }),
    action: Type.String({ examples: ['partner.api_key.create'] }),
    resource: Type.String(),
    details: Type.Record(Type.String(), Type.Unknown()),
  },
  { additionalProperties: false },
)
nameSchema(PartnerAuditEventSchema, 'PartnerAuditEvent')

export const PartnerAuditListSchema = Type.Object(
  { data: Type.Array(PartnerAuditEventSchema), total: Type.Integer() },
  { additionalProperties: false },
)
nameSchema(PartnerAuditListSchema, 'PartnerAuditList')
