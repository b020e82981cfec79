import { isIP } from 'node:net'

/**
 * IP addresses as bytes, and what kind of destination each is (docs/decisions.md, "Hardening:
 * outbound requests"). Written out by hand rather than with net.BlockList so that every range,
 * and every way an IPv4 address hides inside an IPv6 one, is visible and tested in one place.
 */

export interface IpAddress {
  version: 4 | 6
  /** 4 or 16 bytes, network order. */
  bytes: Uint8Array
  /** The canonical text (IPv6 compressed, lower case, no brackets). */
  text: string
}

/**
 * Why an address is not a public destination; `null` for a public unicast address. The words
 * read after "a" or "an" in an error message.
 */
type AddressKind =
  | 'unspecified'
  | 'loopback'
  | 'private'
  | 'carrier-grade NAT (shared)'
  | 'link-local'
  | 'unique-local'
  | 'site-local'
  | 'multicast'
  | 'broadcast'
  | 'documentation'
  | 'benchmarking'
  | 'reserved'

/** `text` as an address (brackets of a URL host allowed), or undefined if it is not one. */
export function parseIp(text: string): IpAddress | undefined {
  const bare = text.startsWith('[') && text.endsWith(']') ? text.slice(1, -1) : text
  const version = isIP(bare)
  if (version === 4) {
    const bytes = Uint8Array.from(bare.split('.').map(Number))
    return { version: 4, bytes, text: bytes.join('.') }
  }
  if (version === 6) {
    // A zone (fe80::1%eth0) names an interface of this machine: never a remote destination.
    if (bare.includes('%')) return undefined
    const bytes = ipv6Bytes(bare)
    return { version: 6, bytes, text: ipv6Text(bytes) }
  }
  return undefined
}

function ipv6Bytes(text: string): Uint8Array {
  const bytes = new Uint8Array(16)
  let head = text
  let tailV4: number[] = []
  const lastColon = text.lastIndexOf(':')
  if (text.slice(lastColon + 1).includes('.')) {
    tailV4 = text
      .slice(lastColon + 1)
      .split('.')
      .map(Number)
    head = `${text.slice(0, lastColon + 1)}0:0`
  }
  const [left, right] = head.includes('::') ? head.split('::') : [head, undefined]
  const groups = (s: string | undefined) => (s ? s.split(':').map((g) => Number.parseInt(g, 16)) : [])
  const leftGroups = groups(left)
  const rightGroups = groups(right)
  const all =
    right === undefined
      ? leftGroups
      : [...leftGroups, ...new Array(8 - leftGroups.length - rightGroups.length).fill(0), ...rightGroups]
  all.forEach((group, i) => {
    bytes[i * 2] = group >> 8
    bytes[i * 2 + 1] = group & 0xff
  })
  if (tailV4.length === 4) bytes.set(tailV4, 12)
  return bytes
}

function ipv6Text(bytes: Uint8Array): string {
  const groups: number[] = []
  for (let i = 0; i < 16; i += 2) groups.push((bytes[i]! << 8) | bytes[i + 1]!)
  // RFC 5952: the longest run of two or more zero groups (the first of equal runs) becomes "::".
  let best = -1
  let bestLength = 1
  for (let i = 0; i < 8; ) {
    if (groups[i] !== 0) {
      i++
      continue
    }
    let j = i
    while (j < 8 && groups[j] === 0) j++
    if (j - i > bestLength) {
      best = i
      bestLength = j - i
    }
    i = j
  }
  const hex = groups.map((g) => g.toString(16))
  if (best < 0) return hex.join(':')
  return `${hex.slice(0, best).join(':')}::${hex.slice(best + bestLength).join(':')}`
}

/** Whether the first `bits` bits of `bytes` equal those of `prefix`. */
export function inPrefix(bytes: Uint8Array, prefix: Uint8Array, bits: number): boolean {
  if (bytes.length !== prefix.length) return false
  const whole = Math.floor(bits / 8)
  for (let i = 0; i < whole; i++) if (bytes[i] !== prefix[i]) return false
  const rest = bits % 8
  if (rest === 0) return true
  const mask = (0xff << (8 - rest)) & 0xff
  return (bytes[whole]! & mask) === (prefix[whole]! & mask)
}

interface Range {
  prefix: Uint8Array
  bits: number
  kind: AddressKind
}

const range = (cidr: string, kind: AddressKind): Range => {
  const [address, bits] = cidr.split('/')
  return { prefix: parseIp(address!)!.bytes, bits: Number(bits), kind }
}

/** RFC 6890 and the IANA IPv4 special-purpose registry: everything that is not public unicast. */
const IPV4_RANGES: Range[] = [
  range('255.255.255.255/32', 'broadcast'),
  range('0.0.0.0/8', 'unspecified'),
  range('10.0.0.0/8', 'private'),
  range('100.64.0.0/10', 'carrier-grade NAT (shared)'),
  range('127.0.0.0/8', 'loopback'),
  range('169.254.0.0/16', 'link-local'),
  range('172.16.0.0/12', 'private'),
  range('192.0.0.0/24', 'reserved'),
  range('192.0.2.0/24', 'documentation'),
  range('192.88.99.0/24', 'reserved'),
  range('192.168.0.0/16', 'private'),
  range('198.18.0.0/15', 'benchmarking'),
  range('198.51.100.0/24', 'documentation'),
  range('203.0.113.0/24', 'documentation'),
  range('224.0.0.0/4', 'multicast'),
  range('240.0.0.0/4', 'reserved'),
]

/** IPv6 ranges that are not public unicast; everything outside 2000::/3 is refused as well. */
const IPV6_RANGES: Range[] = [
  range('::/128', 'unspecified'),
  range('::1/128', 'loopback'),
  range('100::/64', 'reserved'),
  range('64:ff9b:1::/48', 'reserved'),
  // 2001::/23 holds Teredo (2001::/32, an IPv4 address in disguise), ORCHID, benchmarking.
  range('2001::/23', 'reserved'),
  range('2001:db8::/32', 'documentation'),
  range('3fff::/20', 'documentation'),
  range('fc00::/7', 'unique-local'),
  range('fe80::/10', 'link-local'),
  range('fec0::/10', 'site-local'),
  range('ff00::/8', 'multicast'),
]
const GLOBAL_UNICAST = range('2000::/3', 'reserved')
const IPV4_MAPPED = range('::ffff:0:0/96', 'reserved')
const IPV4_COMPATIBLE = range('::/96', 'reserved')
const NAT64 = range('64:ff9b::/96', 'reserved')
const SIX_TO_FOUR = range('2002::/16', 'reserved')

function kindOf(bytes: Uint8Array, ranges: Range[]): AddressKind | null {
  for (const r of ranges) if (inPrefix(bytes, r.prefix, r.bits)) return r.kind
  return null
}

export interface Classification {
  /** null: a public unicast address. */
  kind: AddressKind | null
  /** For an IPv6 address that carries an IPv4 one (mapped, compatible, NAT64, 6to4): that address. */
  embedded?: IpAddress
  /** How it is embedded, for the message. */
  embedding?: 'IPv4-mapped' | 'IPv4-compatible' | 'NAT64' | '6to4'
}

const v4 = (bytes: Uint8Array): IpAddress => ({
  version: 4,
  bytes: Uint8Array.from(bytes),
  text: Array.from(bytes).join('.'),
})

/**
 * What kind of destination `address` is. IPv6 forms that carry an IPv4 address are judged by
 * it; IPv4-mapped and IPv4-compatible ones are refused even for a public IPv4 address, since a
 * real receiver is reached by its IPv4 address, never through them.
 */
export function classify(address: IpAddress): Classification {
  const { bytes } = address
  if (address.version === 4) return { kind: kindOf(bytes, IPV4_RANGES) }
  if (inPrefix(bytes, IPV4_MAPPED.prefix, IPV4_MAPPED.bits)) {
    const embedded = v4(bytes.subarray(12))
    return { kind: kindOf(embedded.bytes, IPV4_RANGES) ?? 'reserved', embedded, embedding: 'IPv4-mapped' }
  }
  const direct = kindOf(bytes, IPV6_RANGES)
  if (direct) return { kind: direct }
  if (inPrefix(bytes, IPV4_COMPATIBLE.prefix, IPV4_COMPATIBLE.bits)) {
    const embedded = v4(bytes.subarray(12))
    return { kind: kindOf(embedded.bytes, IPV4_RANGES) ?? 'reserved', embedded, embedding: 'IPv4-compatible' }
  }
  if (inPrefix(bytes, NAT64.prefix, NAT64.bits)) {
    const embedded = v4(bytes.subarray(12))
    return { kind: kindOf(embedded.bytes, IPV4_RANGES), embedded, embedding: 'NAT64' }
  }
  if (inPrefix(bytes, SIX_TO_FOUR.prefix, SIX_TO_FOUR.bits)) {
    const embedded = v4(bytes.subarray(2, 6))
    return { kind: kindOf(embedded.bytes, IPV4_RANGES), embedded, embedding: '6to4' }
  }
  if (!inPrefix(bytes, GLOBAL_UNICAST.prefix, GLOBAL_UNICAST.bits)) return { kind: 'reserved' }
  return { kind: null }
}

/** "127.0.0.1, a loopback address" / "::ffff:a00:1, an IPv4-mapped private address (10.0.0.1)". */
export function describeRefusal(address: IpAddress, c: Classification): string {
  const kind = c.embedding ? `${c.embedding} ${c.kind}` : (c.kind ?? 'public')
  const article = /^(a|e|i|o|IPv4|unspec)/.test(kind) ? 'an' : 'a'
  const embedded = c.embedded ? ` (${c.embedded.text})` : ''
  return `${address.text}, ${article} ${kind} address${embedded}`
}
