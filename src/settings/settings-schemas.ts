import { type TSchema, Type } from 'typebox'
import { nameSchema } from '../http/http-schemas.ts'

/** The fields of each group, with their bounds (docs/settings.md). */
const MFA_METHOD = {
  enabled: Type.Boolean({ description: 'Members and end-users may use the method' }),
  required: Type.Boolean({ description: 'Sign-in demands it (it must be enabled)' }),
}
const PASSWORD_POLICY = {
  minLength: Type.Integer({
    minimum: 8,
    maximum: 128,
    description: 'Shortest password (8 to 128; default 12)',
  }),
  requireUppercase: Type.Boolean(),
  requireLowercase: Type.Boolean(),
  requireDigit: Type.Boolean(),
  requireSymbol: Type.Boolean(),
}
const SESSION_LIFETIMES = {
  accessTokenSeconds: Type.Integer({
    minimum: 60,
    maximum: 3600,
    description: 'Access token lifetime (60 to 3600; default 900)',
  }),
  refreshTokenSeconds: Type.Integer({
    minimum: 300,
    maximum: 2_592_000,
    description: 'Refresh token lifetime (300 s to 30 days; default 14 days)',
  }),
  idleSignOutSeconds: Type.Integer({
    minimum: 300,
    maximum: 604_800,
    description: 'Idle time before a session ends (300 s to 7 days; default 1 day)',
  }),
}
const API_KEY_POLICY = {
  maxLifetimeDays: Type.Union([Type.Integer({ minimum: 1, maximum: 3650 }), Type.Null()], {
    description: 'Longest lifetime of a new API key in days (1 to 3650); null: no maximum (default)',
  }),
}

const closed = <P extends Record<string, TSchema>>(properties: P, description?: string) =>
  Type.Object(properties, { additionalProperties: false, ...(description ? { description } : {}) })
/** Every field optional, at least one given. */
const partialOf = <P extends Record<string, TSchema>>(properties: P, description?: string) =>
  Type.Partial(Type.Object(properties), {
    additionalProperties: false,
    minProperties: 1,
    ...(description ? { description } : {}),
  })

/** All three methods, each in full: an application's replace the tenant's with no merge (spec 2.6). */
export const MfaMethodsSchema = closed(
  { totp: closed(MFA_METHOD), emailOtp: closed(MFA_METHOD), smsOtp: closed(MFA_METHOD) },
  'TOTP, e-mail OTP, SMS OTP (SMS OTP off for new tenants)',
)
nameSchema(MfaMethodsSchema, 'MfaMethods')

export const SecuritySettingsSchema = Type.Object(
  {
    mfaMethods: MfaMethodsSchema,
    passwordPolicy: closed(
      PASSWORD_POLICY,
      'What a password of the tenant’s realm must have; at most 256 characters always',
    ),
    sessionLifetimes: closed(SESSION_LIFETIMES, 'Lifetimes of what a sign-in gives'),
    apiKeyPolicy: closed(API_KEY_POLICY, 'Rules for new API keys'),
  },
  { additionalProperties: false },
)
nameSchema(SecuritySettingsSchema, 'SecuritySettings')

export const SecuritySettingsPatchBody = Type.Object(
  {
    mfaMethods: Type.Optional(
      partialOf({
        totp: partialOf(MFA_METHOD),
        emailOtp: partialOf(MFA_METHOD),
        smsOtp: partialOf(MFA_METHOD),
      }),
    ),
    passwordPolicy: Type.Optional(partialOf(PASSWORD_POLICY)),
    sessionLifetimes: Type.Optional(partialOf(SESSION_LIFETIMES)),
    apiKeyPolicy: Type.Optional(partialOf(API_KEY_POLICY)),
  },
  {
    additionalProperties: false,
    minProperties: 1,
    description: 'Only what is given changes: groups and fields left out keep their values',
    examples: [
      {
        mfaMethods: { totp: { enabled: true, required: true } },
        sessionLifetimes: { accessTokenSeconds: 600 },
      },
    ],
  },
)
nameSchema(SecuritySettingsPatchBody, 'SecuritySettingsPatch')
