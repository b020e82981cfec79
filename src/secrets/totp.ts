import { createHmac } from 'node:crypto'

/**
 * Time-based one-time passwords (RFC 6238 over RFC 4226's HOTP): the settings a secret stores
 * and the code for a moment. Seeds arrive as Base32 (RFC 4648), the form authenticator set-up
 * screens and otpauth:// URIs show.
 */
export const TOTP_ALGORITHMS = ['SHA1', 'SHA256', 'SHA512'] as const
export type TotpAlgorithm = (typeof TOTP_ALGORITHMS)[number]

export interface TotpSettings {
  /** The seed's raw bytes. */
  seed: Buffer
  algorithm: TotpAlgorithm
  digits: number
  /** Seconds per code. */
  period: number
}

export const TOTP_LIMITS = {
  /** RFC 4226 asks for 128 bits and recommends 160; 80-bit seeds are still common in the wild. */
  minSeedBytes: 10,
  maxSeedBytes: 128,
  digits: [6, 7, 8],
  minPeriod: 15,
  maxPeriod: 300,
} as const

export class TotpInputError extends Error {}

const BASE32_ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567'

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

export interface TotpInput {
  secret?: string | undefined
  uri?: string | undefined
  algorithm?: TotpAlgorithm | undefined
  digits?: number | undefined
  period?: number | undefined
}

function parseUri(uri: string): TotpInput {
  let url: URL
  try {
    url = new URL(uri)
  } catch {
    throw new TotpInputError('uri is not an otpauth:// URI')
  }
  // Hosts of non-special schemes keep their case: OTPAUTH://TOTP/ is the same URI.
  if (url.protocol !== 'otpauth:' || url.hostname.toLowerCase() !== 'totp') {
    throw new TotpInputError('uri must be an otpauth://totp/ URI')
  }
  const number = (name: string) => {
    const raw = url.searchParams.get(name)
    if (raw === null) return undefined
    if (!/^\d{1,4}$/.test(raw)) throw new TotpInputError(`the URI's ${name} is not a number`)
    return Number(raw)
  }
  const algorithm = url.searchParams.get('algorithm')?.toUpperCase()
  if (algorithm !== undefined && !(TOTP_ALGORITHMS as readonly string[]).includes(algorithm)) {
    throw new TotpInputError(`the URI's algorithm must be one of ${TOTP_ALGORITHMS.join(', ')}`)
  }
  const secret = url.searchParams.get('secret')
  if (!secret) throw new TotpInputError('the URI has no secret parameter')
  return {
    secret,
    algorithm: algorithm as TotpAlgorithm | undefined,
    digits: number('digits'),
    period: number('period'),
  }
}

/** Settings from a request: a Base32 seed with options, or an otpauth:// URI (explicit options win). */
export function parseTotpInput(input: TotpInput): TotpSettings {
  if ((input.secret === undefined) === (input.uri === undefined)) {
    throw new TotpInputError('give either secret (Base32) or uri (otpauth://totp/...), not both')
  }
  const fromUri = input.uri === undefined ? {} : parseUri(input.uri)
  const seed = decodeBase32((input.secret ?? fromUri.secret) as string)
  const algorithm = input.algorithm ?? fromUri.algorithm ?? 'SHA1'
  const digits = input.digits ?? fromUri.digits ?? 6
  const period = input.period ?? fromUri.period ?? 30
  if (seed.length < TOTP_LIMITS.minSeedBytes || seed.length > TOTP_LIMITS.maxSeedBytes) {
    throw new TotpInputError(
      `the seed must be ${TOTP_LIMITS.minSeedBytes} to ${TOTP_LIMITS.maxSeedBytes} bytes, got ${seed.length}`,
    )
  }
  if (!(TOTP_LIMITS.digits as readonly number[]).includes(digits)) {
    throw new TotpInputError(`digits must be one of ${TOTP_LIMITS.digits.join(', ')}`)
  }
  if (period < TOTP_LIMITS.minPeriod || period > TOTP_LIMITS.maxPeriod) {
    throw new TotpInputError(`period must be ${TOTP_LIMITS.minPeriod} to ${TOTP_LIMITS.maxPeriod} seconds`)
  }
  return { seed, algorithm, digits, period }
}

/** The stored form (sealed as JSON): the seed as Base64. */
export function serializeTotp(settings: TotpSettings): Buffer {
  const { seed, algorithm, digits, period } = settings
  return Buffer.from(JSON.stringify({ seed: seed.toString('base64'), algorithm, digits, period }))
}

export function deserializeTotp(bytes: Buffer): TotpSettings {
  const parsed = JSON.parse(bytes.toString('utf8')) as {
    seed: string
    algorithm: TotpAlgorithm
    digits: number
    period: number
  }
  return { ...parsed, seed: Buffer.from(parsed.seed, 'base64') }
}

export interface TotpCode {
  code: string
  /** The time step: floor(unix seconds / period). */
  counter: number
  validFrom: Date
  validUntil: Date
}

/** RFC 4226 HOTP of the time step containing `at` (RFC 6238 with T0 = 0). */
export function totpCode(settings: TotpSettings, at: Date): TotpCode {
  const { seed, algorithm, digits, period } = settings
  const counter = Math.floor(at.getTime() / 1000 / period)
  const message = Buffer.alloc(8)
  message.writeBigUInt64BE(BigInt(counter))
  const mac = createHmac(algorithm.toLowerCase(), seed).update(message).digest()
  const offset = mac[mac.length - 1]! & 0x0f
  const binary = mac.readUInt32BE(offset) & 0x7fffffff
  const code = String(binary % 10 ** digits).padStart(digits, '0')
  return {
    code,
    counter,
    validFrom: new Date(counter * period * 1000),
    validUntil: new Date((counter + 1) * period * 1000),
  }
}
