import { randomBytes } from 'node:crypto'
import { hotp, matchTotp as matchCode, type TotpSettings, otpauthUri as uriOf } from '../../platform/totp.ts'

export { base32Encode } from '../../platform/totp.ts'

/**
 * The accounts' second factor: RFC 6238 TOTP (src/platform/totp.ts) with the parameters every
 * authenticator app supports: HMAC-SHA1, 30 s, 6 digits.
 */
export const TOTP = { periodSeconds: 30, digits: 6, secretBytes: 20, skewSteps: 1 } as const

const settingsOf = (secret: Uint8Array): TotpSettings => ({
  seed: secret,
  algorithm: 'SHA1',
  digits: TOTP.digits,
  period: TOTP.periodSeconds,
})

export const newTotpSecret = (): Buffer => randomBytes(TOTP.secretBytes)

export const totpCode = (secret: Uint8Array, step: number): string => hotp(settingsOf(secret), step)

/**
 * The time step the code belongs to (now, one before or one after, for clock drift), or
 * undefined. Every candidate is compared, in constant time, so timing says nothing of which matched.
 */
export const matchTotp = (secret: Uint8Array, code: string, epochMs: number): number | undefined =>
  matchCode(settingsOf(secret), code, epochMs, TOTP.skewSteps)

export const otpauthUri = (secret: Uint8Array, account: string, issuer: string): string =>
  uriOf(settingsOf(secret), account, issuer)
