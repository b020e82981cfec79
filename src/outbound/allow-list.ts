import { inPrefix, parseIp } from './ip-address.ts'

/**
 * The operator's exceptions to the address policy (KMS_OUTBOUND_ALLOW): host names, matched
 * exactly as the URL names them (case and a trailing dot aside), and CIDR ranges, matched against
 * the resolved address. An IP literal is a one-address range. Nothing is allowed by default.
 */
export interface AllowList {
  /** Whether the URL host (without brackets) is one the operator named. */
  allowsHost(host: string): boolean
  /** Whether the address (canonical text) lies in a range the operator named. */
  allowsAddress(address: string): boolean
  /** The entries, as given (for logs). */
  readonly entries: readonly string[]
}

export class AllowListError extends Error {}

const HOST_NAME =
  /^(?=.{1,253}$)([a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?)(\.[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?)*$/

export const normaliseHost = (host: string) => {
  const bare = host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host
  return bare.toLowerCase().replace(/\.$/, '')
}

/** Parses entries; throws AllowListError naming the first bad one. */
export function createAllowList(entries: readonly string[]): AllowList {
  const hosts = new Set<string>()
  const ranges: { prefix: Uint8Array; bits: number }[] = []
  for (const raw of entries) {
    const entry = raw.trim()
    if (entry === '') continue
    const slash = entry.indexOf('/')
    const address = parseIp(slash < 0 ? entry : entry.slice(0, slash))
    if (address) {
      const max = address.version === 4 ? 32 : 128
      const bitsText = slash < 0 ? String(max) : entry.slice(slash + 1)
      const bits = Number(bitsText)
      if (!/^\d{1,3}$/.test(bitsText) || bits > max) {
        throw new AllowListError(`"${entry}" is not a valid CIDR range (prefix length 0-${max})`)
      }
      ranges.push({ prefix: address.bytes, bits })
      continue
    }
    const host = normaliseHost(entry)
    if (slash >= 0 || !HOST_NAME.test(host)) {
      throw new AllowListError(`"${entry}" is neither a host name nor an IP address or CIDR range`)
    }
    hosts.add(host)
  }
  return {
    entries: [...entries],
    allowsHost: (host) => hosts.has(normaliseHost(host)),
    allowsAddress(text) {
      const address = parseIp(text)
      return address !== undefined && ranges.some((r) => inPrefix(address.bytes, r.prefix, r.bits))
    },
  }
}

/** Both lists' entries: the entropy sources add their own hosts to the operator's list. */
export function mergeAllowLists(a: AllowList, b: AllowList): AllowList {
  return {
    entries: [...a.entries, ...b.entries],
    allowsHost: (host) => a.allowsHost(host) || b.allowsHost(host),
    allowsAddress: (address) => a.allowsAddress(address) || b.allowsAddress(address),
  }
}
