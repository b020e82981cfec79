import type { PrincipalKind } from './principal.ts'
import type { TenantRole } from './roles.ts'
import type { Scope } from './scopes.ts'

/**
 * What a route demands of its caller, declared on the route itself (`config: { access }`) and
 * enforced by one hook (auth/auth-hook.ts). A route under /api/v1 without a declaration stops the
 * start. Nothing depends on the order in which routes or rules are written.
 */
export type Access =
  /** No credential: health, the OpenAPI document. */
  | { readonly kind: 'public' }
  /** Any admitted caller of the tenant, whatever its scopes (`GET /tenant`). */
  | { readonly kind: 'authenticated'; readonly callers: readonly PrincipalKind[] }
  /** Any one of these scopes suffices. */
  | { readonly kind: 'scoped'; readonly callers: readonly PrincipalKind[]; readonly anyOf: readonly Scope[] }
  /**
   * A person with one of these roles in the tenant. API keys are refused whatever their scopes
   * (spec section 5.3): `403 forbidden`.
   */
  | { readonly kind: 'role'; readonly callers: readonly ['member']; readonly roles: readonly TenantRole[] }
  /**
   * A partner: its API key (`Authorization: Bearer kmsp_…`) or, where `via` says, a person signed
   * in to the partner portal (an access token of the portal client). Tenants' keys and members'
   * tokens are 401 here, and partner credentials are 401 everywhere else (docs/partners.md).
   */
  | { readonly kind: 'partner'; readonly via: readonly ('apiKey' | 'session')[] }

const MACHINES_AND_PEOPLE: readonly PrincipalKind[] = ['apiKey', 'member']

export const access = {
  public: (): Access => ({ kind: 'public' }),
  /** API keys and team members alike. */
  authenticated: (): Access => ({ kind: 'authenticated', callers: MACHINES_AND_PEOPLE }),
  /** API keys with the scope; team members whose role grants it. */
  scope: (...anyOf: readonly [Scope, ...Scope[]]): Access => ({
    kind: 'scoped',
    callers: MACHINES_AND_PEOPLE,
    anyOf,
  }),
  /** Partner API keys and portal sessions (/api/v1/partners/*). */
  partner: (): Access => ({ kind: 'partner', via: ['apiKey', 'session'] }),
  /** A person signed in to the partner portal only (managing API keys): a partner key is 403. */
  partnerPortal: (): Access => ({ kind: 'partner', via: ['session'] }),
  /** Team members only, with one of the roles. */
  role: (...roles: readonly [TenantRole, ...TenantRole[]]): Access => ({
    kind: 'role',
    callers: ['member'],
    roles,
  }),
}

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Required on every route under /api/v1 (auth/auth-hook.ts checks at start-up). */
    access?: Access
  }
}
