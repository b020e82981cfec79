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
