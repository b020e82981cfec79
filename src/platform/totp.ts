import { createHmac, timingSafeEqual } from 'node:crypto'

/**
 * Time-based one-time passwords (RFC 6238 over RFC 4226's HOTP, T0 = 0) with HMAC-SHA1, -SHA256
 * or -SHA512, any number of digits and any period; seeds in Base32 (RFC 4648), the form
 * authenticator set-up screens and otpauth:// URIs show. Shared by the accounts' second factor
 * (src/identity/accounts) and the seeds stored with secrets (src/secrets).
 */
export const TOTP_ALGORITHMS = ['SHA1', 'SHA256', 'SHA512'] as const
export type TotpAlgorithm = (typeof TOTP_ALGORITHMS)[number]

export interface TotpSettings {
  /** The seed's raw bytes. */
  seed: Uint8Array
  algorithm: TotpAlgorithm
  digits: number
  /** Seconds per code. */
  period: number
}

/** A seed, code or URI that cannot be used; the message says why. */
export class TotpInputError extends Error {}

const BASE32_ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567'

/** Unpadded upper-case Base32. */
export function base32Encode(bytes: Uint8Array): string {
  let bits = 0
  let value = 0
  let out = ''
  for (const byte of bytes) {
    value = (value << 8) | byte
    bits += 8
    while (bits >= 5) {
      out += BASE32_ALPHABET[(value >>> (bits - 5)) & 31]
      bits -= 5
    }
  }
  if (bits > 0) out += BASE32_ALPHABET[(value << (5 - bits)) & 31]
  return out
}

/** Case-insensitive; spaces, hyphens and trailing padding are ignored, as authenticators do. */
export function decodeBase32(text: string): Buffer {
  const clean = text.replace(/[\s-]/g, '').replace(/=+$/, '').toUpperCase()
  if (clean.length === 0) throw new TotpInputError('the seed is empty')
  const out: number[] = []
  let buffer = 0
  let bits = 0
  for (const char of clean) {
    const index = BASE32_ALPHABET.indexOf(char)
    if (index < 0) throw new TotpInputError('the seed is not Base32 (A-Z, 2-7)')
    buffer = ((buffer << 5) | index) & 0xffff
    bits += 5
    if (bits >= 8) {
      bits -= 8
      out.push((buffer >> bits) & 0xff)
    }
  }
  return Buffer.from(out)
}

/** The time step containing `epochMs`: floor(unix seconds / period). */
const totpStep = (period: number, epochMs: number): number => Math.floor(epochMs / 1000 / period)

/** RFC 4226 HOTP of one counter (for TOTP, the time step). */
export function hotp(settings: Omit<TotpSettings, 'period'>, counter: number): string {
  const { seed, algorithm, digits } = settings
  const message = Buffer.alloc(8)
  message.writeBigUInt64BE(BigInt(counter))
  const mac = createHmac(algorithm.toLowerCase(), seed).update(message).digest()
  const offset = mac[mac.length - 1]! & 0x0f
  const binary = mac.readUInt32BE(offset) & 0x7fffffff
  return String(binary % 10 ** digits).padStart(digits, '0')
}

export interface TotpCode {
  code: string
  /** The time step: floor(unix seconds / period). */
  counter: number
  validFrom: Date
  validUntil: Date
}

/** The code of the time step containing `at`, and when that step starts and ends. */
export function totpCode(settings: TotpSettings, at: Date): TotpCode {
  const { period } = settings
  const counter = totpStep(period, at.getTime())
  return {
    code: hotp(settings, counter),
    counter,
    validFrom: new Date(counter * period * 1000),
    validUntil: new Date((counter + 1) * period * 1000),
  }
}

/**
 * The time step the code belongs to (the current one, or up to `skewSteps` before or after, for
 * clock drift), or undefined. Every candidate is compared, in constant time, so timing says
 * nothing of which matched.
 */
export function matchTotp(
  settings: TotpSettings,
  code: string,
  epochMs: number,
  skewSteps: number,
): number | undefined {
  if (code.length !== settings.digits || !/^\d+$/.test(code)) return undefined
  const now = totpStep(settings.period, epochMs)
  let matched: number | undefined
  for (let delta = -skewSteps; delta <= skewSteps; delta++) {
    const step = now + delta
    if (timingSafeEqual(Buffer.from(hotp(settings, step)), Buffer.from(code)) && matched === undefined)
      matched = step
  }
  return matched
}

/** The otpauth://totp/ URI authenticator apps read (Key Uri Format), labelled "issuer:account". */
export function otpauthUri(settings: TotpSettings, account: string, issuer: string): string {
  const label = encodeURIComponent(`${issuer}:${account}`)
  const params = new URLSearchParams({
    secret: base32Encode(settings.seed),
    issuer,
    algorithm: settings.algorithm,
    digits: String(settings.digits),
    period: String(settings.period),
  })
  return `otpauth://totp/${label}?${params}`
}
