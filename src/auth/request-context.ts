import type { FastifyRequest } from 'fastify'
import { unauthorized } from '../platform/errors.ts'
import { missingScopes } from './access.ts'
import type { KeyRestriction } from './key-restriction.ts'
import { actorIdOf, type PartnerPrincipal, type Principal, type TenantPrincipal } from './principal.ts'
import type { Scope } from './scopes.ts'

declare module 'fastify' {
  interface FastifyRequest {
    /**
     * Set by the authentication hook on every non-public /api/v1 request: a tenant's caller, or on
     * partner routes (access kind `partner`) the partner.
     */
    principal: Principal | null
  }
}

/** Who did it, for audit records and `created_by` columns. */
export interface Actor {
  tenantId: string
  actor: string
  requestId: string | null
  clientIp: string | null
  /**
   * The keys and operations the caller's API key is restricted to (the key resolver enforces
   * it); null or absent: unrestricted (team members, the CLI, the service's own jobs).
   */
  keyRestriction?: KeyRestriction | null
}

/**
 * What a handler reads of its request to know who calls: a Fastify request, or the data plane's
 * own (http/data-route.ts).
 */
export interface CallerRequest {
  principal: Principal | null
  id: string
  ip: string
}

/** The tenant's caller, on a route that admits tenants' callers (every route but the partners'). */
export function principalOf(request: CallerRequest): TenantPrincipal {
  const principal = request.principal
  if (!principal || principal.kind === 'partner') throw unauthorized()
  return principal
}

/** The partner, on a partner route (access kind `partner`). */
export function partnerOf(request: CallerRequest): PartnerPrincipal {
  const principal = request.principal
  if (principal?.kind !== 'partner') throw unauthorized()
  return principal
}

/**
 * The scopes the caller lacks for one of the conditions its route declares (auth/access.ts
 * `withConditions`); none: allowed. A condition the route does not declare is a programming error,
 * never an allowance.
 */
export function missingScopesFor(request: FastifyRequest, condition: string): Scope[] {
  const declared = request.routeOptions.config.access
  const rule = declared?.kind === 'scoped' ? declared.conditions?.[condition] : undefined
  if (!rule)
    throw new Error(
      `route ${request.routeOptions.url ?? request.url} declares no access condition ${condition}`,
    )
  return missingScopes(rule, principalOf(request).scopes)
}

export function actorOf(request: CallerRequest): Actor {
  const principal = principalOf(request)
  return {
    tenantId: principal.tenantId,
    actor: actorIdOf(principal),
    requestId: request.id,
    clientIp: request.ip,
    keyRestriction: principal.kind === 'apiKey' ? principal.keyRestriction : null,
  }
}
