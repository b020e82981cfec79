import { BlockList, isIPv6 } from 'node:net'
import { AppError } from '../platform/errors.ts'
import type { LeafNames } from './role-policy.ts'

/** A CA's name constraints as stored (pki-schemas NameConstraints). */
export interface NameConstraints {
  permittedDnsDomains?: string[]
  excludedDnsDomains?: string[]
  permittedIpRanges?: string[]
  excludedIpRanges?: string[]
}

const violation = (message: string, field: string) =>
  new AppError(400, 'name_constraint_violation', message, { rule: 'name_constraint_violation', field })

/** RFC 5280 §4.2.1.10: a dNSName constraint is satisfied by the name itself and its subdomains. */
const withinDomain = (name: string, domain: string) => {
  const d = domain.toLowerCase().replace(/^\./, '')
  return name === d || name.endsWith(`.${d}`)
}

function blockList(ranges: readonly string[]): BlockList {
  const list = new BlockList()
  for (const range of ranges) {
    const [address, bits] = range.split('/') as [string, string]
    list.addSubnet(address, Number(bits), isIPv6(address) ? 'ipv6' : 'ipv4')
  }
  return list
}

/**
 * Refuses a leaf whose names its CA chain's name constraints exclude (each CA's, the issuing CA
 * first): relying parties would refuse the certificate anyway (openssl: "permitted subtree
 * violation"), so the service says so at issuance with a 400 rather than sign a dead
 * certificate. The common name is checked as a DNS name, as role-policy checks it.
 */
export function checkNameConstraints(chain: readonly (NameConstraints | null)[], names: LeafNames): void {
  const dnsNames = [...(names.commonName ? [names.commonName.toLowerCase()] : []), ...names.dnsNames]
  for (const constraints of chain) {
    if (!constraints) continue
    const { permittedDnsDomains: permitted = [], excludedDnsDomains: excluded = [] } = constraints
    for (const name of dnsNames) {
      const base = name.startsWith('*.') ? name.slice(2) : name
      const field = name === names.commonName?.toLowerCase() ? 'commonName' : 'dnsNames'
      if (permitted.length > 0 && !permitted.some((domain) => withinDomain(base, domain)))
        throw violation(
          `"${name}" is outside the CA's permitted DNS domains (${permitted.join(', ')})`,
          field,
        )
      const hit = excluded.find((domain) => withinDomain(base, domain))
      if (hit) throw violation(`"${name}" is in the CA's excluded DNS domain ${hit}`, field)
    }
    const permittedIps = constraints.permittedIpRanges ?? []
    const excludedIps = constraints.excludedIpRanges ?? []
    if (names.ipAddresses.length === 0 || (permittedIps.length === 0 && excludedIps.length === 0)) continue
    const allowed = blockList(permittedIps)
    const denied = blockList(excludedIps)
    for (const ip of names.ipAddresses) {
      const family = isIPv6(ip) ? 'ipv6' : 'ipv4'
      if (permittedIps.length > 0 && !allowed.check(ip, family))
        throw violation(
          `${ip} is outside the CA's permitted IP ranges (${permittedIps.join(', ')})`,
          'ipAddresses',
        )
      if (denied.check(ip, family)) throw violation(`${ip} is in the CA's excluded IP ranges`, 'ipAddresses')
    }
  }
}
