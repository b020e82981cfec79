import type { FastifyInstance, FastifyRequest } from 'fastify'
import type { AuditLog } from '../audit/audit-log.ts'
import { insufficientScope, unauthorized } from '../platform/errors.ts'
import type { Authenticator, Principal } from './authenticator.ts'
import { hasRule, type Requirement, requirementFor, type Scope } from './scopes.ts'

export const API_PREFIX = '/api/v1'

/** The path relative to /api/v1 that decides the scope: the route's pattern when one matched. */
function policyPath(request: FastifyRequest): string | undefined {
  const path = request.routeOptions.url ?? request.url.split('?')[0]!
  if (path !== API_PREFIX && !path.startsWith(`${API_PREFIX}/`)) return undefined
  return path.slice(API_PREFIX.length)
}

/**
 * The requirement of a request: its route's, found at start-up; for a path no route matched
 * (authenticated first, so that strangers cannot probe which routes exist), from the policy.
 * Undefined outside /api/v1.
 */
function requirementOf(request: FastifyRequest): Requirement | undefined {
  const ofRoute = (request.routeOptions.config as { requirements?: Record<string, Requirement> })
    .requirements?.[request.method]
  if (ofRoute) return ofRoute
  const path = policyPath(request)
  return path === undefined ? undefined : requirementFor(request.method, concrete(path))
}

/** Route patterns use `:param`; the policy is written against concrete paths. */
const concrete = (routeUrl: string) => routeUrl.replace(/:[^/]+/g, 'x')

function allowed(requirement: Requirement, principal: Principal): boolean {
  return (
    requirement.kind !== 'scoped' || requirement.anyOf.some((scope) => principal.scopes.has(scope as Scope))
  )
}

/**
 * A refused attempt to change state is worth a record (outcome `denied`). Nothing ran, so a
 * failure to write it is logged by the audit log and not turned into a 503.
 */
export async function recordDenied(
  audit: AuditLog,
  request: FastifyRequest,
  requiredScope: string,
): Promise<void> {
  const principal = request.principal
  if (!principal || request.method === 'GET' || request.method === 'HEAD') return
  await audit
    .record({
      tenantId: principal.tenantId,
      actor: `apikey:${principal.apiKeyId}`,
      action: 'authorization.denied',
      resource: `${request.method} ${request.routeOptions.url ?? request.url.split('?')[0]!.slice(0, 200)}`,
      outcome: 'denied',
      requestId: request.id,
      clientIp: request.ip,
      details: { requiredScope },
    })
    .catch(() => {})
}

/**
 * X-Api-Key authentication runs before every other check, on every /api/v1 path that is not
 * public, including paths with no route (so route existence is not revealed to strangers).
 * Then the scope the policy table demands for the path and method.
 */
export function registerAuthentication(
  app: FastifyInstance,
  deps: { authenticator: Authenticator; audit: AuditLog },
): void {
  app.decorateRequest('principal', null)

  // Deny by default: a route the scope policy does not cover stops the start. Each route's
  // requirement is looked up here, once, and kept in its config for the hook below.
  app.addHook('onRoute', (route) => {
    if (!route.url.startsWith(`${API_PREFIX}/`)) return
    const path = concrete(route.url.slice(API_PREFIX.length))
    if (!hasRule(path))
      throw new Error(`route ${route.url} has no rule in the scope policy (src/auth/scopes.ts)`)
    const methods = Array.isArray(route.method) ? route.method : [route.method]
    const requirements: Record<string, Requirement> = {}
    for (const method of methods) requirements[method] = requirementFor(method, path)
    route.config = { ...route.config, requirements } as typeof route.config
  })

  app.addHook('onRequest', async (request) => {
    const requirement = requirementOf(request)
    if (requirement === undefined || requirement.kind === 'public') return

    const presented = request.headers['x-api-key']
    const principal =
      typeof presented === 'string' ? await deps.authenticator.authenticate(presented) : undefined
    if (!principal) throw unauthorized()
    request.principal = principal

    if (!allowed(requirement, principal)) {
      const required = requirement.kind === 'scoped' ? (requirement.anyOf[0] ?? 'none') : 'none'
      await recordDenied(deps.audit, request, required)
      throw insufficientScope(required)
    }
  })
}
