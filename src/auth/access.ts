import type { TenantPrincipalKind } from './principal.ts'
import type { TenantRole } from './roles.ts'
import type { Scope } from './scopes.ts'

/**
 * Scopes a caller must hold: one at least of `anyOf` (unless it is empty) and every one of
 * `allOf`. A rule names at least one scope (checked at start-up).
 */
export interface ScopeRule {
  readonly anyOf: readonly Scope[]
  readonly allOf: readonly Scope[]
}

/**
 * What a route demands of its caller, declared on the route itself (`config: { access }`) and
 * enforced by one hook (auth/auth-hook.ts). A route under /api/v1 without a declaration stops the
 * start. Nothing depends on the order in which routes or rules are written.
 */
export type Access =
  /** No credential: health, the OpenAPI document. */
  | { readonly kind: 'public' }
  /** Any admitted caller of the tenant, whatever its scopes (`GET /tenant`). */
  | { readonly kind: 'authenticated'; readonly callers: readonly TenantPrincipalKind[] }
  | ScopedAccess
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

/**
 * The scopes of a rule (`anyOf`, `allOf`), checked before the handler runs: `403
 * insufficient_scope` naming the first scope missing. `conditions` are the rules of what only some
 * requests of the route ask for, which only the handler can tell from the request's data (making a
 * key the tenant's default): declared here with the rest, checked at start-up, and answered by
 * `missingScopesFor(request, name)` (auth/request-context.ts) for the service to apply where the
 * data says the condition holds.
 */
export interface ScopedAccess extends ScopeRule {
  readonly kind: 'scoped'
  readonly callers: readonly TenantPrincipalKind[]
  readonly conditions?: Readonly<Record<string, ScopeRule>>
}

/**
 * The scopes of `rule` that `held` lacks, in the order a refusal names them (the first `anyOf`
 * scope when none of them is held, then the `allOf` scopes missing); none: the rule is met.
 */
export function missingScopes(rule: ScopeRule, held: ReadonlySet<Scope>): Scope[] {
  const missing: Scope[] = []
  const first = rule.anyOf[0]
  if (first !== undefined && !rule.anyOf.some((scope) => held.has(scope))) missing.push(first)
  for (const scope of rule.allOf) if (!held.has(scope) && !missing.includes(scope)) missing.push(scope)
  return missing
}

const MACHINES_AND_PEOPLE: readonly TenantPrincipalKind[] = ['apiKey', 'member']

type Scopes = readonly [Scope, ...Scope[]]

export const access = {
  public: (): Access => ({ kind: 'public' }),
  /** API keys and team members alike. */
  authenticated: (): Access => ({ kind: 'authenticated', callers: MACHINES_AND_PEOPLE }),
  /** API keys with one of the scopes; team members whose role grants one. */
  scope: (...anyOf: Scopes): ScopedAccess => ({
    kind: 'scoped',
    callers: MACHINES_AND_PEOPLE,
    anyOf,
    allOf: [],
  }),
  /** API keys with every one of the scopes; team members whose role grants them all. */
  allScopes: (...allOf: Scopes): ScopedAccess => ({
    kind: 'scoped',
    callers: MACHINES_AND_PEOPLE,
    anyOf: [],
    allOf,
  }),
  /**
   * `route`, and for what only some of its requests ask, each named condition's scopes, every one
   * of them (ScopedAccess `conditions`).
   */
  withConditions: (route: ScopedAccess, conditions: Readonly<Record<string, Scopes>>): ScopedAccess => ({
    ...route,
    conditions: Object.fromEntries(
      Object.entries(conditions).map(([name, allOf]) => [name, { anyOf: [], allOf }]),
    ),
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
