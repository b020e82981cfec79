import type { Schemas } from '../../api/client.ts'

export type SecuritySettings = Schemas['SecuritySettings']
export type SecurityPatch = Schemas['SecuritySettingsPatch']
type MfaMethod = keyof SecuritySettings['mfaMethods']
type PasswordFlag = 'requireUppercase' | 'requireLowercase' | 'requireDigit' | 'requireSymbol'
type Lifetime = keyof SecuritySettings['sessionLifetimes']

export const MFA_METHODS: ReadonlyArray<{ id: MfaMethod; label: string; help: string }> = [
  {
    id: 'totp',
    label: 'Authenticator app (TOTP)',
    help: 'A 6-digit code from an app; when required, a person without one enrols it at sign-in.',
  },
  { id: 'emailOtp', label: 'E-mailed code', help: 'A code sent to the account’s e-mail address.' },
  {
    id: 'smsOtp',
    label: 'SMS code',
    help: 'A code sent by SMS to a verified number; needs the operator’s SMS provider.',
  },
]

export const PASSWORD_FLAGS: ReadonlyArray<{ id: PasswordFlag; label: string }> = [
  { id: 'requireUppercase', label: 'An upper-case letter' },
  { id: 'requireLowercase', label: 'A lower-case letter' },
  { id: 'requireDigit', label: 'A digit' },
  { id: 'requireSymbol', label: 'A symbol' },
]

/** The number fields, with the API's bounds (docs/settings.md). */
export const BOUNDS = {
  minLength: { min: 8, max: 128 },
  accessTokenSeconds: { min: 60, max: 3600 },
  refreshTokenSeconds: { min: 300, max: 2_592_000 },
  idleSignOutSeconds: { min: 300, max: 604_800 },
  maxLifetimeDays: { min: 1, max: 3650 },
} as const

export const LIFETIMES: ReadonlyArray<{ id: Lifetime; label: string; help: string }> = [
  {
    id: 'accessTokenSeconds',
    label: 'Access token lifetime (seconds)',
    help: 'Tokens issued after the change. 60 to 3600.',
  },
  {
    id: 'refreshTokenSeconds',
    label: 'Refresh token lifetime (seconds)',
    help: 'How long a sign-in lasts without a new password. 300 to 2,592,000 (30 days).',
  },
  {
    id: 'idleSignOutSeconds',
    label: 'Idle sign-out (seconds)',
    help: 'Stored; not applied yet. 300 to 604,800 (7 days).',
  },
]

/** The form's values: numbers as typed (text), checked against BOUNDS. */
export interface Values {
  mfa: Record<MfaMethod, { enabled: boolean; required: boolean }>
  minLength: string
  flags: Record<PasswordFlag, boolean>
  lifetimes: Record<Lifetime, string>
  limitApiKeys: boolean
  maxLifetimeDays: string
}

export function toValues(settings: SecuritySettings): Values {
  const policy = settings.passwordPolicy
  const lifetimes = settings.sessionLifetimes
  return {
    mfa: {
      totp: { ...settings.mfaMethods.totp },
      emailOtp: { ...settings.mfaMethods.emailOtp },
      smsOtp: { ...settings.mfaMethods.smsOtp },
    },
    minLength: String(policy.minLength),
    flags: {
      requireUppercase: policy.requireUppercase,
      requireLowercase: policy.requireLowercase,
      requireDigit: policy.requireDigit,
      requireSymbol: policy.requireSymbol,
    },
    lifetimes: {
      accessTokenSeconds: String(lifetimes.accessTokenSeconds),
      refreshTokenSeconds: String(lifetimes.refreshTokenSeconds),
      idleSignOutSeconds: String(lifetimes.idleSignOutSeconds),
    },
    limitApiKeys: settings.apiKeyPolicy.maxLifetimeDays !== null,
    maxLifetimeDays: String(settings.apiKeyPolicy.maxLifetimeDays ?? 365),
  }
}

/** A whole number typed in a field, or undefined. */
const integer = (text: string) => (/^\s*\d+\s*$/.test(text) ? Number(text) : undefined)

/** "Whole number from min to max", or true. */
export const within = (bounds: { min: number; max: number }) => (text: string) => {
  const value = integer(text)
  return value !== undefined && value >= bounds.min && value <= bounds.max
    ? true
    : `Enter a whole number from ${bounds.min} to ${bounds.max}`
}

/**
 * The PATCH body for what the form changed (docs/settings.md: what is left out keeps its value);
 * empty when nothing changed. Fields that do not hold a valid number yet are left out.
 */
export function patchOf(values: Values, settings: SecuritySettings): SecurityPatch {
  const patch: SecurityPatch = {}
  for (const method of MFA_METHODS) {
    const now = values.mfa[method.id]
    const was = settings.mfaMethods[method.id]
    const change = {
      ...(now.enabled !== was.enabled ? { enabled: now.enabled } : {}),
      ...(now.required !== was.required ? { required: now.required } : {}),
    }
    if (Object.keys(change).length > 0) patch.mfaMethods = { ...patch.mfaMethods, [method.id]: change }
  }
  const password: NonNullable<SecurityPatch['passwordPolicy']> = {}
  const minLength = integer(values.minLength)
  if (minLength !== undefined && minLength !== settings.passwordPolicy.minLength)
    password.minLength = minLength
  for (const flag of PASSWORD_FLAGS)
    if (values.flags[flag.id] !== settings.passwordPolicy[flag.id]) password[flag.id] = values.flags[flag.id]
  if (Object.keys(password).length > 0) patch.passwordPolicy = password
  const lifetimes: NonNullable<SecurityPatch['sessionLifetimes']> = {}
  for (const lifetime of LIFETIMES) {
    const value = integer(values.lifetimes[lifetime.id])
    if (value !== undefined && value !== settings.sessionLifetimes[lifetime.id])
      lifetimes[lifetime.id] = value
  }
  if (Object.keys(lifetimes).length > 0) patch.sessionLifetimes = lifetimes
  const maxDays = values.limitApiKeys ? (integer(values.maxLifetimeDays) ?? undefined) : null
  if (maxDays !== undefined && maxDays !== settings.apiKeyPolicy.maxLifetimeDays)
    patch.apiKeyPolicy = { maxLifetimeDays: maxDays }
  return patch
}

const LABELS: Record<string, string> = {
  ...Object.fromEntries(MFA_METHODS.map((method) => [`mfaMethods.${method.id}`, method.label])),
  'passwordPolicy.minLength': 'minimum password length',
  ...Object.fromEntries(
    PASSWORD_FLAGS.map((flag) => [`passwordPolicy.${flag.id}`, flag.label.toLowerCase()]),
  ),
  'sessionLifetimes.accessTokenSeconds': 'access token lifetime',
  'sessionLifetimes.refreshTokenSeconds': 'refresh token lifetime',
  'sessionLifetimes.idleSignOutSeconds': 'idle sign-out',
  'apiKeyPolicy.maxLifetimeDays': 'longest API-key lifetime',
}

/** What a patch changes, in words ("access token lifetime, SMS code"). */
export function changedLabels(patch: SecurityPatch): string[] {
  const labels = new Set<string>()
  for (const [group, fields] of Object.entries(patch))
    for (const field of Object.keys(fields ?? {})) {
      const label = LABELS[`${group}.${field}`]
      if (label) labels.add(label)
    }
  return [...labels]
}

/** Seconds in words: 900 → "15 minutes", 1209600 → "14 days". */
export function duration(seconds: number): string {
  const units: Array<[number, string]> = [
    [86_400, 'day'],
    [3600, 'hour'],
    [60, 'minute'],
  ]
  for (const [size, name] of units)
    if (seconds >= size && seconds % size === 0) {
      const count = seconds / size
      return `${count} ${name}${count === 1 ? '' : 's'}`
    }
  return `${seconds} seconds`
}
