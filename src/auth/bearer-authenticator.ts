import type { MemberPrincipal } from './principal.ts'
import { scopesOfRole, type TenantRole } from './roles.ts'

/** What an access token proves, once its signature, issuer, audience, lifetime and session are checked. */
interface VerifiedAccessToken {
  accountId: string
  tenantId: string
  grantId: string
}

/** Implemented by the identity module (src/identity/oidc/access-token-verifier.ts). */
export interface AccessTokenVerifier {
  verify(token: string): Promise<VerifiedAccessToken | undefined>
}

/** Implemented by the team module: the member's role in the tenant as it is now. */
export interface MembershipRoles {
  roleOf(tenantId: string, accountId: string): Promise<TenantRole | undefined>
  /** Every tenant the account is a member of, oldest membership first. */
  tenantsOf(accountId: string): Promise<Array<{ tenantId: string; role: TenantRole }>>
}

export interface BearerAuthenticator {
  authenticate(token: string): Promise<MemberPrincipal | undefined>
}

/** Bounds what is parsed and verified: a JWT the provider issues is far shorter. */
const MAX_TOKEN_LENGTH = 8192

/**
 * `Authorization: Bearer <access token>` for team members. The token says who and for which
 * tenant; the role, and so the scopes, are read as they are now (cached per process, dropped in
 * every process over the invalidation bus when a membership changes), so removing a member or
 * changing a role takes effect without waiting for the token to expire.
 */
export function createBearerAuthenticator(deps: {
  verifier: AccessTokenVerifier
  memberships: MembershipRoles
}): BearerAuthenticator {
  return {
    async authenticate(token) {
      if (token.length === 0 || token.length > MAX_TOKEN_LENGTH) return undefined
      const verified = await deps.verifier.verify(token)
      if (!verified) return undefined
      const role = await deps.memberships.roleOf(verified.tenantId, verified.accountId)
      if (!role) return undefined
      return {
        kind: 'member',
        tenantId: verified.tenantId,
        accountId: verified.accountId,
        grantId: verified.grantId,
        role,
        scopes: scopesOfRole(role),
      }
    },
  }
}
