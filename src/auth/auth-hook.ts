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

  // Deny by default: a route the scope policy does not cover stops the start.
  app.addHook('onRoute', (route) => {
    if (!route.url.startsWith(`${API_PREFIX}/`)) return
    const path = concrete(route.url.slice(API_PREFIX.length))
    if (!hasRule(path))
      throw new Error(`route ${route.url} has no rule in the scope policy (src/auth/scopes.ts)`)
  })

  app.addHook('onRequest', async (request) => {
    const path = policyPath(request)
    if (path === undefined) return
    const requirement = requirementFor(request.method, concrete(path))
    if (requirement.kind === 'public') return

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
