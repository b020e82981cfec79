import { Type } from 'typebox'
import { nameSchema, Printable, Timestamp } from '../http/http-schemas.ts'

const Email = Type.String({
  minLength: 3,
  maxLength: 254,
  description: 'An e-mail address: the link goes there',
})

export const TenantSignupBody = Type.Object(
  {
    organizationName: Printable(200, 'The new tenant’s name'),
    email: Email,
    referralCode: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 64,
        description:
          'A partner’s referral code (the sign-up URL’s ?ref=): the tenant is attributed to that partner',
      }),
    ),
  },
  {
    additionalProperties: false,
    examples: [{ organizationName: 'Acme Robotics', email: 'ada@acme.example' }],
  },
)
nameSchema(TenantSignupBody, 'TenantSignup')

export const PartnerSignupBody = Type.Object(
  { organizationName: Printable(200, 'The partner’s company name'), email: Email },
  {
    additionalProperties: false,
    examples: [{ organizationName: 'Integrators Ltd', email: 'lin@integrators.example' }],
  },
)
nameSchema(PartnerSignupBody, 'PartnerSignup')

export const SignupRequestedSchema = Type.Object(
  {
    email: Type.String({ description: 'Where the confirmation link was sent' }),
    expiresAt: Timestamp('The link works once, until then'),
  },
  { additionalProperties: false },
)
nameSchema(SignupRequestedSchema, 'SignupRequested')
