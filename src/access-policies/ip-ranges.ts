import { BlockList, isIPv4, isIPv6 } from 'node:net'

/**
 * Source-IP conditions of access policies: CIDR ranges, IPv4 (`203.0.113.0/24`) and IPv6
 * (`2001:db8::/32`); a bare address is its own /32 or /128. Matching is node:net's BlockList,
 * which also matches an IPv4-mapped IPv6 address (`::ffff:203.0.113.7`) against IPv4 ranges.
 */
export interface IpRange {
  address: string
  prefix: number
  family: 'ipv4' | 'ipv6'
}

/** The range, or an explanation of what is wrong with it. */
export function parseIpRange(text: string): IpRange | string {
  const [address = '', prefixText, ...rest] = text.trim().split('/')
  if (rest.length > 0) return 'must be an address or address/prefix'
  const family = isIPv4(address) ? 'ipv4' : isIPv6(address) ? 'ipv6' : undefined
  if (!family) return 'must start with an IPv4 or IPv6 address'
  const max = family === 'ipv4' ? 32 : 128
  if (prefixText !== undefined && !/^[0-9]{1,3}$/.test(prefixText))
    return `prefix must be a number from 0 to ${max}`
  const prefix = prefixText === undefined ? max : Number(prefixText)
  if (prefix > max) return `prefix must be a number from 0 to ${max}`
  return { address: family === 'ipv6' ? address.toLowerCase() : address, prefix, family }
}

export const formatIpRange = (range: IpRange): string => `${range.address}/${range.prefix}`

/** A matcher for a list of ranges; entries that do not parse (never stored) are ignored. */
export function ipMatcher(ranges: readonly string[]): (ip: string | null) => boolean {
  const list = new BlockList()
  for (const text of ranges) {
    const range = parseIpRange(text)
    if (typeof range !== 'string') list.addSubnet(range.address, range.prefix, range.family)
  }
  return (ip) => {
    if (!ip) return false
    const family = isIPv4(ip) ? 'ipv4' : isIPv6(ip) ? 'ipv6' : undefined
    return family !== undefined && list.check(ip, family)
  }
}
