import { isIP } from 'node:net'
import { type AppError, invalidField } from '../platform/errors.ts'
import type { CertType, PermitExtension } from './ssh-certificate.ts'

/**
 * What a certificate may say, beyond what the request schema checks: the validity bounds of each
 * certificate type, the principals, and the critical options' values (docs/ssh.md).
 */

const HOUR = 3600
const DAY = 24 * HOUR

/**
 * Validity of certificates in seconds: each CA has a default and a maximum, within these bounds.
 * Short-lived user certificates are the point of an SSH CA (a day at most: revocation is the
 * exception); host certificates last longer, as host keys change rarely.
 */
export const VALIDITY_LIMITS: Record<CertType, { default: number; max: number }> = {
  user: { default: 16 * HOUR, max: 24 * HOUR },
  host: { default: 30 * DAY, max: 70 * DAY },
}
/** The shortest validity a CA or a request may ask for. */
export const MIN_VALIDITY_SECONDS = 60
/** Certificates start this long before they are issued, for clocks a little behind (step-ca does the same). */
export const BACKDATE_SECONDS = 5 * 60

/** Extensions of a user certificate when the request names none: an interactive shell only. */
export const DEFAULT_USER_EXTENSIONS: readonly PermitExtension[] = ['permit-pty']

export const PRINCIPAL_LIMITS = { items: 256, chars: 255 } as const
// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what it refuses
const PRINCIPAL = /^[^,\s\u0000-\u001f\u007f]+$/u

/** Checks a CA's validity settings against each other and the type's bounds. */
export function checkValiditySettings(
  type: CertType,
  settings: { defaultValiditySeconds: number; maxValiditySeconds: number },
  path: string,
): void {
  const limit = VALIDITY_LIMITS[type].max
  if (settings.maxValiditySeconds > limit)
    throw invalidField(`${path}/maxValiditySeconds`, `must be at most ${limit} for a ${type} CA`)
  if (settings.defaultValiditySeconds > settings.maxValiditySeconds)
    throw invalidField(
      `${path}/defaultValiditySeconds`,
      `must be at most the CA's maxValiditySeconds (${settings.maxValiditySeconds})`,
    )
}

/**
 * Principals: at least one (an empty list means any principal to sshd), at most 256, each 1-255
 * characters without commas, whitespace or control characters, none twice.
 */
export function checkPrincipals(principals: readonly string[], path: string): void {
  if (principals.length === 0)
    throw invalidField(
      path,
      'must name at least one principal: a certificate without principals is valid for any user or host',
    )
  if (principals.length > PRINCIPAL_LIMITS.items)
    throw invalidField(path, `must name at most ${PRINCIPAL_LIMITS.items} principals`)
  const seen = new Set<string>()
  principals.forEach((principal, index) => {
    if (principal.length === 0 || principal.length > PRINCIPAL_LIMITS.chars || !PRINCIPAL.test(principal))
      throw invalidField(
        `${path}/${index}`,
        `must be 1 to ${PRINCIPAL_LIMITS.chars} characters without commas, whitespace or control characters`,
      )
    if (seen.has(principal)) throw invalidField(`${path}/${index}`, 'repeats another principal')
    seen.add(principal)
  })
}

const MAX_SOURCE_ADDRESSES = 64
const CIDR = /^([0-9A-Fa-f.:]+)(?:\/(\d{1,3}))?$/

/**
 * `source-address`: comma-separated addresses or CIDR blocks (OpenSSH's addr_match_cidr_list),
 * with no bits set past the prefix (sshd refuses `10.1.2.3/8`), no names and no wildcards.
 */
export function checkSourceAddress(value: string, path: string): void {
  const entries = value.split(',')
  if (entries.length > MAX_SOURCE_ADDRESSES)
    throw invalidField(path, `must list at most ${MAX_SOURCE_ADDRESSES} address blocks`)
  entries.forEach((entry, index) => {
    const fail: (why: string) => never = (why) => {
      throw invalidField(
        path,
        `must be comma-separated CIDR blocks such as 10.0.0.0/8,2001:db8::/32: entry ${index + 1} ${why}`,
      )
    }
    const match = CIDR.exec(entry)
    const family = match ? isIP(match[1]!) : 0
    if (!match || family === 0) fail('is not an IPv4 or IPv6 address or block')
    const width = family === 4 ? 32 : 128
    const prefix = match[2] === undefined ? width : Number(match[2])
    if (prefix > width) fail(`has a prefix longer than ${width} bits`)
    const bytes = family === 4 ? Buffer.from(match[1]!.split('.').map(Number)) : ipv6Bytes(match[1]!)
    if (!hostBitsClear(bytes, prefix)) fail('has address bits set past its prefix length')
  })
}

function hostBitsClear(bytes: Buffer, prefix: number): boolean {
  for (let bit = prefix; bit < bytes.length * 8; bit++) {
    if ((bytes[bit >> 3]! >> (7 - (bit & 7))) & 1) return false
  }
  return true
}

/** The 16 bytes of an IPv6 address node:net has already accepted (`::`, an IPv4 tail). */
function ipv6Bytes(text: string): Buffer {
  let head = text
  const tail: number[] = []
  const lastColon = text.lastIndexOf(':')
  const last = text.slice(lastColon + 1)
  if (last.includes('.')) {
    const [a = 0, b = 0, c = 0, d = 0] = last.split('.').map(Number)
    tail.push((a << 8) | b, (c << 8) | d)
    // Keep a `::` before the IPv4 part; drop a single separating colon.
    head = text.slice(0, lastColon + 1)
    if (!head.endsWith('::')) head = head.slice(0, -1)
  }
  const [left = '', right] = head.split('::')
  const front = left ? left.split(':') : []
  const back = right ? right.split(':') : []
  const words =
    right === undefined
      ? front
      : [...front, ...Array<string>(8 - tail.length - front.length - back.length).fill('0'), ...back]
  const out = Buffer.alloc(16)
  ;[...words.map((word) => Number.parseInt(word, 16)), ...tail].forEach((word, i) => {
    out.writeUInt16BE(word, i * 2)
  })
  return out
}

/** Host certificates carry no critical options and no extensions (PROTOCOL.certkeys defines none). */
export function refuseHostOptions(
  body: { criticalOptions?: object | undefined; extensions?: readonly string[] | undefined },
  path: string,
): void {
  if (body.criticalOptions !== undefined && Object.keys(body.criticalOptions).length > 0)
    throw invalidField(`${path}/criticalOptions`, 'must be absent for a host certificate')
  if (body.extensions !== undefined && body.extensions.length > 0)
    throw invalidField(`${path}/extensions`, 'must be absent or empty for a host certificate')
}

/** 400 for a requested validity outside the CA's bounds. */
export function validityTooLong(max: number, path: string): AppError {
  return invalidField(path, `must be at most ${max} seconds (the CA's maxValiditySeconds)`)
}
