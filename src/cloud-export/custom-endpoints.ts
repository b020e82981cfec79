import { isLoopbackHost } from '../platform/urls.ts'

/**
 * Custom cloud endpoints (docs/cloud-export.md, "Endpoints"): a connection or target may name a
 * URL other than the provider's own public hosts (an AWS VPC endpoint, a private Key Vault, a
 * sovereign or on-premises cloud) only when the operator listed its origin in
 * KMS_CLOUD_EXPORT_CUSTOM_ENDPOINTS. Whoever answers at an endpoint receives the wrapped or plain
 * private key and chooses the key it is wrapped to, so where keys go is the operator's decision,
 * not each tenant's.
 */

/**
 * One entry of KMS_CLOUD_EXPORT_CUSTOM_ENDPOINTS as the origin it allows, or undefined when it is
 * not an origin: https (plain http only on loopback, for a stand-in on this machine, as the
 * providers' own field checks allow), no credentials, path, query or fragment.
 */
export function customEndpointOrigin(entry: string): string | undefined {
  const url = URL.parse(entry)
  if (!url) return undefined
  const loopback = isLoopbackHost(url.hostname) || /^127\.\d+\.\d+\.\d+$/.test(url.hostname)
  if (url.protocol !== 'https:' && !(url.protocol === 'http:' && loopback)) return undefined
  if (url.username || url.password || url.pathname !== '/' || url.search || url.hash) return undefined
  if (entry.includes('?') || entry.includes('#')) return undefined
  return url.origin
}

/** The origin of a URL a provider's field holds (the field checks made it absolute), or the text itself. */
export function originOf(url: string): string {
  return URL.parse(url)?.origin ?? url
}

/**
 * Whether `url` is one of a provider's own public hosts: https on the default port, and a host
 * name the provider's rule accepts. Anything else (another port, plain http, an address) is custom.
 */
export function onOfficialHost(url: unknown, isOfficialHost: (hostname: string) => boolean): boolean {
  const parsed = typeof url === 'string' ? URL.parse(url) : null
  return parsed?.protocol === 'https:' && parsed.port === '' && isOfficialHost(parsed.hostname)
}
