import type { TenantRole } from './roles.ts'
import type { Scope } from './scopes.ts'

/**
 * Who is calling, established before any other check (docs/identity.md "Callers"). A tagged union:
 * every kind carries the tenant the call acts on and the scopes it holds there; routes declare
 * which kinds they admit (auth/access.ts).
 */
export type Principal = ApiKeyPrincipal | MemberPrincipal

/** A tenant's machine: `X-Api-Key`. Scopes are the key's own. */
export interface ApiKeyPrincipal {
  readonly kind: 'apiKey'
  readonly tenantId: string
  readonly apiKeyId: string
  readonly scopes: ReadonlySet<Scope>
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

export type PrincipalKind = Principal['kind']
export const PRINCIPAL_KINDS: readonly PrincipalKind[] = ['apiKey', 'member']

/** The actor of audit records and `created_by` columns: `apikey:<id>`, `member:<accountId>`. */
export function actorIdOf(principal: Principal): string {
  switch (principal.kind) {
    case 'apiKey':
      return `apikey:${principal.apiKeyId}`
    case 'member':
      return `member:${principal.accountId}`
  }
}
