import { verify as verifySignature } from 'node:crypto'
import type { AccessTokenVerifier } from '../../auth/bearer-authenticator.ts'
import type { Sql } from '../../data/database.ts'
import type { InvalidationBus } from '../../data/invalidation-bus.ts'
import { createReadThroughCache } from '../../data/read-through-cache.ts'
import type { Clock } from '../../platform/clock.ts'
import {
  isTenantApiClient,
  PARTNER_PORTAL_CLIENT_ID,
  PARTNER_PORTAL_RESOURCE,
  tenantOfResource,
} from './oidc-provider.ts'
import { grantExists } from './oidc-store.ts'
import { SIGNING_ALG, type SigningKeys } from './signing-keys.ts'

const GRANT_TOPIC = 'oidc-grant'
const SEGMENT = /^[A-Za-z0-9_-]+$/
/** Allowed clock difference between processes for exp/iat/nbf. */
const LEEWAY_SECONDS = 5

/**
 * Verifies the console's and the command line's access tokens for the main API: an ES256 JWT (`typ: at+jwt`) signed by a
 * published version of the provider's key, from this issuer, for a tenant's resource
 * (`aud = urn:kms:tenant:<id>`), unexpired, and of a grant that still exists. Grants are cached
 * per process and dropped in every process over the bus when revoked (sign-out, token
 * revocation), so a revoked session stops working everywhere within the bus's delay.
 */
export function createAccessTokenVerifier(deps: {
  sql: Sql
  bus: InvalidationBus
  signingKeys: SigningKeys
  issuer: () => string
  clock: Clock
  grantCacheTtlMs: number
}): AccessTokenVerifier & {
  grantRevoked(grantId: string): Promise<void>
  /** The partner portal's tokens (`aud = urn:kms:partner-portal`): the account and grant. */
  verifyPartnerPortal(token: string): Promise<{ accountId: string; grantId: string } | undefined>
} {
  const grants = createReadThroughCache<boolean>({ ttlMs: deps.grantCacheTtlMs, maxEntries: 50_000 })
  deps.bus.subscribe(GRANT_TOPIC, (grantId) => grants.dropGroup(grantId))
  deps.bus.onResync(() => grants.clear())

  const decode = (segment: string): Record<string, unknown> | undefined => {
    try {
      const value = JSON.parse(Buffer.from(segment, 'base64url').toString('utf8')) as unknown
      return value && typeof value === 'object' && !Array.isArray(value)
        ? (value as Record<string, unknown>)
        : undefined
    } catch {
      return undefined
    }
  }

  /** A token of a client `ofClient` accepts, checked whole: signature, issuer, lifetime, a live grant. */
  async function check(
    token: string,
    ofClient: (clientId: unknown) => boolean,
  ): Promise<{ sub: string; aud: string; gid: string } | undefined> {
    const parts = token.split('.')
    if (parts.length !== 3 || !parts.every((part) => SEGMENT.test(part))) return undefined
    const [headerText, payloadText, signatureText] = parts as [string, string, string]
    const header = decode(headerText)
    if (
      !header ||
      header['alg'] !== SIGNING_ALG ||
      header['typ'] !== 'at+jwt' ||
      typeof header['kid'] !== 'string'
    )
      return undefined
    const keys = await deps.signingKeys.current()
    const key = keys.published.find((candidate) => candidate.kid === header['kid'])
    if (!key) return undefined
    const signature = Buffer.from(signatureText, 'base64url')
    if (signature.length !== 64) return undefined
    const signed = Buffer.from(`${headerText}.${payloadText}`, 'ascii')
    if (!verifySignature('sha256', signed, { key: key.publicKey, dsaEncoding: 'ieee-p1363' }, signature))
      return undefined
    const claims = decode(payloadText)
    if (!claims) return undefined
    const now = Math.floor(deps.clock.now().getTime() / 1000)
    const { iss, aud, exp, nbf, sub, gid } = claims
    if (iss !== deps.issuer() || !ofClient(claims['client_id'])) return undefined
    if (typeof exp !== 'number' || exp + LEEWAY_SECONDS <= now) return undefined
    if (typeof nbf === 'number' && nbf - LEEWAY_SECONDS > now) return undefined
    if (typeof aud !== 'string' || typeof sub !== 'string' || typeof gid !== 'string' || gid.length > 128)
      return undefined
    if (!(await grants.get(gid, '', () => grantExists(deps.sql, gid)))) return undefined
    return { sub, aud, gid }
  }

  return {
    async grantRevoked(grantId) {
      await deps.bus.publish(GRANT_TOPIC, grantId)
    },
    async verify(token) {
      const checked = await check(token, isTenantApiClient)
      const tenantId = checked && tenantOfResource(checked.aud)
      return checked && tenantId ? { accountId: checked.sub, tenantId, grantId: checked.gid } : undefined
    },
    async verifyPartnerPortal(token) {
      const checked = await check(token, (clientId) => clientId === PARTNER_PORTAL_CLIENT_ID)
      return checked?.aud === PARTNER_PORTAL_RESOURCE
        ? { accountId: checked.sub, grantId: checked.gid }
        : undefined
    },
  }
}
