import type { KeyRestriction } from './key-restriction.ts'
import type { TenantRole } from './roles.ts'
import type { Scope } from './scopes.ts'

/**
 * Who is calling, established before any other check, and the one thing the authentication hook
 * puts on a request (`request.principal`). A tagged union: a tenant's callers (its API keys and
 * its team members) act on that tenant with the scopes they hold there; a partner acts on its own
 * partner account only. Routes declare which kinds they admit (auth/access.ts).
 */
export type Principal = TenantPrincipal | PartnerPrincipal

/** A caller of a tenant: it carries the tenant the call acts on and the scopes it holds there. */
export type TenantPrincipal = ApiKeyPrincipal | MemberPrincipal

/** A tenant's machine: `X-Api-Key`. Scopes are the key's own. */
export interface ApiKeyPrincipal {
  readonly kind: 'apiKey'
  readonly tenantId: string
  readonly apiKeyId: string
  readonly scopes: ReadonlySet<Scope>
  /**
   * The keys and operations the API key is restricted to (set when it was created, never
   * changed), within its scopes; null: whatever its scopes allow.
   */
  readonly keyRestriction: KeyRestriction | null
}

/**
 * A person administering a tenant: `Authorization: Bearer <access token>` issued by the service's
 * own OpenID provider to the console, for one tenant. Scopes come from the member's role in that
 * tenant as it is now (not as it was when the token was issued).
 */
export interface MemberPrincipal {
  readonly kind: 'member'
  readonly tenantId: string
  /** The team-realm account (one per person, any number of tenant memberships). */
  readonly accountId: string
  readonly role: TenantRole
  readonly scopes: ReadonlySet<Scope>
  /** The provider's grant the token belongs to: revoking it ends the session. */
  readonly grantId: string
}

/**
 * A partner (/api/v1/partners/*): `Authorization: Bearer` with one of its API keys (`kmsp_…`), or
 * an access token of the partner portal client for a person of the partner. Exactly one of
 * `keyId` and `accountId` is set. A partner acts on no tenant, so it holds no scope: a check of
 * scopes written for any principal refuses it.
 */
export interface PartnerPrincipal {
  readonly kind: 'partner'
  readonly partnerId: string
  /** The partner API key used; null for a portal session. */
  readonly keyId: string | null
  /** The partner-realm account signed in to the portal; null for an API key. */
  readonly accountId: string | null
  /** Always empty. */
  readonly scopes: ReadonlySet<Scope>
}

export type TenantPrincipalKind = TenantPrincipal['kind']

const NO_SCOPES: ReadonlySet<Scope> = new Set()

/** A partner's principal: through its API key (`keyId`) or a portal session (`accountId`). */
export function partnerPrincipal(
  partnerId: string,
  via: { keyId: string; accountId?: undefined } | { keyId?: undefined; accountId: string },
): PartnerPrincipal {
  return {
    kind: 'partner',
    partnerId,
    keyId: via.keyId ?? null,
    accountId: via.accountId ?? null,
    scopes: NO_SCOPES,
  }
}

/**
 * The actor of audit records and `created_by` columns: `apikey:<id>`, `member:<accountId>`, and
 * for a partner `partnerkey:<id>` or `partneruser:<accountId>` (its audit trail's actors).
 */
export function actorIdOf(principal: Principal): string {
  switch (principal.kind) {
    case 'apiKey':
      return `apikey:${principal.apiKeyId}`
    case 'member':
      return `member:${principal.accountId}`
    case 'partner':
      return principal.keyId ? `partnerkey:${principal.keyId}` : `partneruser:${principal.accountId}`
  }
}
