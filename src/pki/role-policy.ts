import { isIP } from 'node:net'
import { AppError } from '../platform/errors.ts'
import { CA_LIMITS, type EXT_KEY_USAGES, type KEY_USAGES, ROLE_KEY_ALGORITHMS } from './pki-schemas.ts'

/**
 * A role: what one CA may certify when asked through it (HashiCorp Vault's PKI roles). Everything
 * a role does not allow is refused with a 400 whose code names the rule (docs/pki.md "Roles").
 */
export interface RoleSettings {
  allowedDomains: string[]
  allowBareDomains: boolean
  allowSubdomains: boolean
  allowWildcardCertificates: boolean
  allowIpSans: boolean
  allowAnyName: boolean
  enforceHostnames: boolean
  allowedKeyAlgorithms: Array<(typeof ROLE_KEY_ALGORITHMS)[number]>
  keyUsage: Array<(typeof KEY_USAGES)[number]>
  extKeyUsage: Array<(typeof EXT_KEY_USAGES)[number]>
  ttlSeconds: number
  maxTtlSeconds: number
  notAfterBehavior: 'error' | 'truncate'
  noStore: boolean
}

/** Everything off that can be (Vault's defaults): a role allows nothing until its domains are set. */
export const DEFAULT_ROLE: RoleSettings = {
  allowedDomains: [],
  allowBareDomains: false,
  allowSubdomains: false,
  allowWildcardCertificates: false,
  allowIpSans: false,
  allowAnyName: false,
  enforceHostnames: true,
  allowedKeyAlgorithms: [...ROLE_KEY_ALGORITHMS],
  keyUsage: ['digitalSignature', 'keyEncipherment'],
  extKeyUsage: ['serverAuth'],
  ttlSeconds: CA_LIMITS.leafTtlDefault,
  maxTtlSeconds: CA_LIMITS.leafMaxTtlDefault,
  notAfterBehavior: 'error',
  noStore: false,
}

/** The settings of a role after a create or an update; 400 when the TTL passes the max TTL. */
export function roleSettings(base: RoleSettings, changes: Partial<RoleSettings>): RoleSettings {
  const defined = Object.fromEntries(Object.entries(changes).filter(([, v]) => v !== undefined))
  const settings: RoleSettings = { ...base, ...defined }
  settings.allowedDomains = [...new Set(settings.allowedDomains.map((d) => d.toLowerCase()))]
  for (const domain of settings.allowedDomains) {
    if (!isHostname(domain))
      throw new AppError(400, 'validation_failed', `allowedDomains: "${domain}" is not a hostname`, {
        fields: [{ path: 'allowedDomains', message: `"${domain}" is not a hostname` }],
      })
  }
  if (settings.ttlSeconds > settings.maxTtlSeconds) {
    throw new AppError(
      400,
      'validation_failed',
      `ttlSeconds (${settings.ttlSeconds}) must not exceed maxTtlSeconds (${settings.maxTtlSeconds})`,
      {
        fields: [
          { path: 'ttlSeconds', message: `must not exceed maxTtlSeconds (${settings.maxTtlSeconds})` },
        ],
      },
    )
  }
  return settings
}

const refused = (code: string, message: string, field: string) =>
  new AppError(400, code, message, { rule: code, field })

const LABEL = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/

/** RFC 1123 host names: labels of letters, digits and inner hyphens, 253 characters at most. */
function isHostname(name: string): boolean {
  return name.length <= 253 && name.split('.').every((label) => LABEL.test(label))
}

/** The names a leaf would carry, checked against the role (and the CA's name constraints). */
export interface LeafNames {
  commonName: string | null
  dnsNames: string[]
  ipAddresses: string[]
}

/**
 * Checks every name against the role, lower-cases DNS names and puts IP addresses in their
 * canonical form. A common name is checked as a DNS name (Vault's default): a certificate whose
 * CN escapes the role would be trusted by clients that still read the CN.
 */
export function checkNames(role: RoleSettings, names: LeafNames): LeafNames {
  const dnsNames = [...new Set(names.dnsNames.map((n) => n.toLowerCase()))]
  const commonName = names.commonName
  if (!commonName && dnsNames.length === 0 && names.ipAddresses.length === 0)
    throw refused('no_names', 'A certificate needs a commonName, dnsNames or ipAddresses', 'commonName')
  if (commonName) checkDnsName(role, commonName.toLowerCase(), 'commonName')
  for (const name of dnsNames) checkDnsName(role, name, 'dnsNames')
  // The common name goes in the SAN too (Vault's default): TLS clients read names from the SAN only.
  const cn = commonName?.toLowerCase()
  if (cn && !dnsNames.includes(cn)) dnsNames.unshift(cn)
  const ipAddresses: string[] = []
  for (const ip of new Set(names.ipAddresses)) {
    if (!role.allowIpSans)
      throw refused('ip_sans_not_allowed', `The role does not allow IP address SANs (${ip})`, 'ipAddresses')
    if (isIP(ip) === 0) throw refused('invalid_ip_address', `"${ip}" is not an IP address`, 'ipAddresses')
    ipAddresses.push(ip.toLowerCase())
  }
  return { commonName, dnsNames, ipAddresses }
}

function checkDnsName(role: RoleSettings, name: string, field: string): void {
  const wildcard = name.startsWith('*.')
  const base = wildcard ? name.slice(2) : name
  if (wildcard && !role.allowWildcardCertificates)
    throw refused('wildcard_not_allowed', `The role does not allow wildcard names (${name})`, field)
  if (base.includes('*'))
    throw refused('invalid_hostname', `"${name}": a wildcard may only be the whole leftmost label`, field)
  if (role.enforceHostnames && !isHostname(base))
    throw refused(
      'invalid_hostname',
      `"${name}" is not a valid hostname (the role enforces hostnames)`,
      field,
    )
  if (role.allowAnyName) return
  for (const domain of role.allowedDomains) {
    if (!wildcard && base === domain) {
      if (role.allowBareDomains) return
      throw refused(
        'bare_domain_not_allowed',
        `The role does not allow the bare domain ${domain} (allowBareDomains)`,
        field,
      )
    }
    if (wildcard ? base === domain || base.endsWith(`.${domain}`) : base.endsWith(`.${domain}`)) {
      if (role.allowSubdomains) return
      throw refused(
        'subdomains_not_allowed',
        `The role does not allow subdomains of ${domain} (${name}; allowSubdomains)`,
        field,
      )
    }
  }
  throw refused(
    'name_not_allowed',
    `"${name}" is outside the role's allowed domains (${role.allowedDomains.join(', ') || 'none'})`,
    field,
  )
}

/** The leaf's lifetime: the request's TTL (or the role's) within the role's max TTL. */
export function leafLifetime(role: RoleSettings, requested: number | undefined): number {
  const ttl = requested ?? role.ttlSeconds
  if (ttl > role.maxTtlSeconds)
    throw refused(
      'ttl_exceeds_max',
      `ttlSeconds ${ttl} exceeds the role's maxTtlSeconds (${role.maxTtlSeconds})`,
      'ttlSeconds',
    )
  return ttl
}

/** Whether the role admits a leaf key of this algorithm. */
export function checkKeyAlgorithm(role: RoleSettings, algorithm: string, field: string): void {
  if (!(role.allowedKeyAlgorithms as readonly string[]).includes(algorithm))
    throw refused(
      'key_algorithm_not_allowed',
      `The role does not allow ${algorithm} keys (allowed: ${role.allowedKeyAlgorithms.join(', ')})`,
      field,
    )
}
