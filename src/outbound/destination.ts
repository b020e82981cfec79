import { lookup } from 'node:dns/promises'
import { type AllowList, normaliseHost } from './allow-list.ts'
import { classify, describeRefusal, type IpAddress, parseIp } from './ip-address.ts'

/** Every address a host name resolves to (dns.lookup semantics: /etc/hosts, then DNS). */
export type Resolver = (host: string) => Promise<{ address: string; family: number }[]>

export const systemResolver: Resolver = (host) => lookup(host, { all: true, verbatim: true })

/** Why a URL is not a destination this service may call; `reason` completes "<url> ...". */
export class DestinationRefused extends Error {
  readonly code = 'destination_not_allowed'
  readonly reason: string
  constructor(reason: string) {
    super(`destination not allowed: ${reason}`)
    this.reason = reason
  }
}

/** The host did not resolve. `definite`: the name does not exist (not a passing DNS failure). */
export class DestinationUnresolved extends Error {
  readonly code = 'destination_unresolved'
  readonly host: string
  readonly definite: boolean
  constructor(host: string, definite: boolean) {
    super(`${host} could not be resolved`)
    this.host = host
    this.definite = definite
  }
}

export interface CheckedDestination {
  url: URL
  /**
   * The address the connection must go to: checked here, never resolved again. Absent only
   * when validating a host the operator allowed by name (its addresses need no check).
   */
  address: IpAddress | undefined
  /** The operator allowed this host or every address it resolved to (KMS_OUTBOUND_ALLOW). */
  operatorAllowed: boolean
}

const DEFINITE_DNS_ERRORS = new Set(['ENOTFOUND', 'ENODATA', 'EAI_NONAME', 'EAI_NODATA'])

/**
 * Resolves the URL's host once and checks every address it gives: a host allowed by name may
 * resolve anywhere; otherwise each address must be in an allowed range or public unicast. One
 * refused address refuses the host (a name that answers both a public and a private address
 * is exactly what a rebinding attack sets up).
 */
export async function checkDestination(
  url: URL,
  allow: AllowList,
  resolve: Resolver,
  /** validate: a URL being saved; a host allowed by name is then not resolved at all. */
  mode: 'connect' | 'validate' = 'connect',
): Promise<CheckedDestination> {
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new DestinationRefused(`the scheme ${url.protocol} is not http or https`)
  }
  const host = url.hostname
  const literal = parseIp(host)
  if (host.includes('%') || (host.startsWith('[') && !literal)) {
    throw new DestinationRefused(`${host} is not a routable address`)
  }
  const byName = !literal && allow.allowsHost(host)
  // RFC 6761: localhost and its subdomains are this machine, whatever a resolver says of them.
  const name = normaliseHost(host)
  if (!byName && (name === 'localhost' || name.endsWith('.localhost'))) {
    throw new DestinationRefused(`${host} is a loopback name (localhost)`)
  }
  if (byName && mode === 'validate') return { url, address: undefined, operatorAllowed: true }
  let addresses: IpAddress[]
  if (literal) addresses = [literal]
  else {
    let answers: { address: string }[]
    try {
      answers = await resolve(host)
    } catch (error) {
      const code = (error as { code?: string }).code ?? ''
      throw new DestinationUnresolved(host, DEFINITE_DNS_ERRORS.has(code))
    }
    addresses = answers.map((a) => parseIp(a.address)).filter((a): a is IpAddress => a !== undefined)
    if (addresses.length === 0) throw new DestinationUnresolved(host, true)
  }
  let operatorAllowed = true
  for (const address of addresses) {
    if (byName || allow.allowsAddress(address.text)) continue
    operatorAllowed = false
    const classification = classify(address)
    if (classification.kind !== null) {
      const via = literal ? 'the host is ' : `${host} resolves to `
      throw new DestinationRefused(`${via}${describeRefusal(address, classification)}`)
    }
  }
  return { url, address: addresses[0]!, operatorAllowed }
}
