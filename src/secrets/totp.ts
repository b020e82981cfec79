import {
  decodeBase32,
  TOTP_ALGORITHMS,
  type TotpAlgorithm,
  TotpInputError,
  type TotpSettings,
} from '../platform/totp.ts'

/**
 * The TOTP seeds secrets store (RFC 6238, src/platform/totp.ts): the settings a request may give,
 * as a Base32 seed with options or an otpauth:// URI, and their stored form.
 */
export const TOTP_LIMITS = {
  /** RFC 4226 asks for 128 bits and recommends 160; 80-bit seeds are still common in the wild. */
  minSeedBytes: 10,
  maxSeedBytes: 128,
  digits: [6, 7, 8],
  minPeriod: 15,
  maxPeriod: 300,
} as const

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
  return Buffer.from(
    JSON.stringify({ seed: Buffer.from(seed).toString('base64'), algorithm, digits, period }),
  )
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
