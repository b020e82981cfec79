import type { IncomingHttpHeaders } from 'node:http'
import type { FastifyInstance, FastifyRequest } from 'fastify'
import type { AuditLog } from '../audit/audit-log.ts'
import { AppError, forbidden, insufficientScope, unauthorized } from '../platform/errors.ts'
import { type Access, access as accessOf, missingScopes, type ScopeRule } from './access.ts'
import type { BearerAuthenticator } from './bearer-authenticator.ts'
import {
  type ApiKeyPrincipal,
  actorIdOf,
  type PartnerPrincipal,
  type Principal,
  type TenantPrincipal,
} from './principal.ts'
import { isScope } from './scopes.ts'

export const API_PREFIX = '/api/v1'

/**
 * A path under /api/v1 that no route matched needs a valid credential before its 404, so that
 * strangers cannot probe which routes exist.
 */
const UNROUTED = accessOf.authenticated()

const isApiPath = (url: string) =>
  url === API_PREFIX || url.startsWith(`${API_PREFIX}/`) || url.startsWith(`${API_PREFIX}?`)

function accessOfRequest(request: FastifyRequest): Access | undefined {
  const declared = request.routeOptions.config.access
  if (declared) return declared
  return isApiPath(request.url) ? UNROUTED : undefined
}

/** What authorization reads of a request, whichever HTTP adapter carries it (http/data-route.ts). */
export interface AuthorizationRequest {
  headers: IncomingHttpHeaders
  method: string
  /** The route's template, or the path (without its query) when no route matched. */
  route: string
  id: string
  ip: string
  principal: Principal | null
}

/** A Fastify request as authorization reads it. */
export const authorizationRequestOf = (request: FastifyRequest): AuthorizationRequest => ({
  headers: request.headers,
  method: request.method,
  route: request.routeOptions.url ?? request.url.split('?')[0]!.slice(0, 200),
  id: request.id,
  ip: request.ip,
  principal: request.principal,
})

/**
 * A refused attempt to change state is worth a record (outcome `denied`). Nothing ran, so a
 * failure to write it is logged by the audit log and not turned into a 503.
 */
export async function recordDenied(
  audit: AuditLog,
  request: AuthorizationRequest,
  required: string,
): Promise<void> {
  const principal = request.principal
  if (!principal || principal.kind === 'partner' || request.method === 'GET' || request.method === 'HEAD')
    return
  await audit
    .record({
      tenantId: principal.tenantId,
      actor: actorIdOf(principal),
      action: 'authorization.denied',
      resource: `${request.method} ${request.route}`,
      outcome: 'denied',
      requestId: request.id,
      clientIp: request.ip,
      details: principal.kind === 'apiKey' ? { requiredScope: required } : { required, role: principal.role },
    })
    .catch(() => {})
}

const BEARER = /^Bearer +([A-Za-z0-9\-._~+/]+=*) *$/i

/**
 * The credential, in the spec's order (section 5.1): an `X-Api-Key` header is evaluated before
 * every other handler; without one, `Authorization: Bearer` for team members. A credential that
 * is present but wrong is never retried as the other kind.
 */
async function authenticate(
  request: AuthorizationRequest,
  deps: { authenticator: ApiKeyAuthenticator; bearer: BearerAuthenticator | undefined },
): Promise<TenantPrincipal | undefined> {
  const apiKey = request.headers['x-api-key']
  if (apiKey !== undefined)
    return typeof apiKey === 'string' ? deps.authenticator.authenticate(apiKey) : undefined
  const token = deps.bearer ? bearerOf(request) : undefined
  return token ? deps.bearer!.authenticate(token) : undefined
}

const bearerOf = (request: AuthorizationRequest): string | undefined => {
  const authorization = request.headers.authorization
  return authorization === undefined ? undefined : BEARER.exec(authorization)?.[1]
}

/** Partner credentials (src/partners): the partner an API key or a portal access token belongs to. */
/** API keys (src/api-keys): the principal of a presented key, undefined when it is not a live key. */
interface ApiKeyAuthenticator {
  authenticate(presented: string): Promise<ApiKeyPrincipal | undefined>
}

export interface PartnerAuthenticator {
  authenticate(presented: string): Promise<PartnerPrincipal | undefined>
}

/**
 * Why a scope rule cannot be enforced as written, or undefined: a rule that names no scope would
 * admit every caller, and a scope the service does not know could never be held.
 */
function flawOf(rule: ScopeRule): string | undefined {
  const scopes = [...rule.anyOf, ...rule.allOf]
  if (scopes.length === 0) return 'names no scope'
  const unknown = scopes.find((scope) => !isScope(scope))
  return unknown === undefined ? undefined : `names the unknown scope ${unknown}`
}

/** Why a declaration cannot be enforced as written (fail closed: the start stops), or undefined. */
function flawOfAccess(declared: Access): string | undefined {
  if (declared.kind !== 'scoped') return undefined
  const flaw = flawOf(declared)
  if (flaw) return `its scope rule ${flaw}`
  for (const [name, rule] of Object.entries(declared.conditions ?? {})) {
    const conditionFlaw = flawOf(rule)
    if (conditionFlaw) return `its condition ${name} ${conditionFlaw}`
  }
  return undefined
}

/** What authorization needs: the credentials of each kind of caller, and the audit log for refusals. */
export interface AuthorizationDeps {
  authenticator: ApiKeyAuthenticator
  bearer?: BearerAuthenticator
  audit: AuditLog
  /** Partner API keys, for routes of access kind `partner`. */
  partners?: PartnerAuthenticator
}

/**
 * Enforces what a route declares (auth/access.ts): the kinds of caller it admits, and the scopes
 * or role it needs. Sets and returns the request's one `principal` (a tenant's caller or a
 * partner; null on a public route), or throws the 401 or 403. Every HTTP adapter calls this one
 * function (the Fastify hook below, the data plane's node:http adapter).
 */
export type Authorize = (access: Access, request: AuthorizationRequest) => Promise<Principal | null>

export function createAuthorizer(deps: AuthorizationDeps): Authorize {
  const credentials = { authenticator: deps.authenticator, bearer: deps.bearer }
  return async (access, request) => {
    if (access.kind === 'public') return null
    if (access.kind === 'partner') {
      // Only a partner's credential: an X-Api-Key (a tenant's) or any other Bearer credential is 401.
      const token = request.headers['x-api-key'] === undefined ? bearerOf(request) : undefined
      const partner = token && deps.partners ? await deps.partners.authenticate(token) : undefined
      if (!partner) throw unauthorized()
      request.principal = partner
      // Keys are for machines; what changes the partner's credentials is a person's.
      if (!access.via.includes(partner.keyId ? 'apiKey' : 'session'))
        throw new AppError(
          403,
          'partner_session_required',
          'Only a person signed in to the partner portal may do this; partner API keys may not',
        )
      return partner
    }

    const principal = await authenticate(request, credentials)
    if (!principal) throw unauthorized()
    request.principal = principal

    switch (access.kind) {
      case 'authenticated':
        if (!access.callers.includes(principal.kind)) throw unauthorized()
        return principal
      case 'scoped': {
        if (!access.callers.includes(principal.kind)) throw unauthorized()
        // Any one of `anyOf` and every one of `allOf`: the refusal names the first scope missing.
        const [missing] = missingScopes(access, principal.scopes)
        if (missing === undefined) return principal
        await recordDenied(deps.audit, request, missing)
        throw insufficientScope(missing, principal.kind)
      }
      case 'role':
        // API keys are refused whatever their scopes (spec section 5.3), as `forbidden`.
        if (principal.kind === 'member' && access.roles.includes(principal.role)) return principal
        await recordDenied(deps.audit, request, access.roles.join(' or '))
        throw forbidden(access.roles)
    }
  }
}

/** Why a route's declaration stops the start, or undefined (fail closed: deny by default). */
function flawOfRoute(routeName: string, declared: Access | undefined): string | undefined {
  if (!declared) return `route ${routeName} declares no config.access (src/auth/access.ts)`
  const flaw = flawOfAccess(declared)
  return flaw ? `route ${routeName}: ${flaw} (src/auth/access.ts)` : undefined
}

/**
 * One hook enforces what each route declares (`config.access`, auth/access.ts) through
 * `createAuthorizer`. A route under /api/v1 that declares nothing, or a scope rule that cannot be
 * enforced, stops the start (deny by default).
 */
export function registerAuthentication(app: FastifyInstance, deps: AuthorizationDeps): void {
  app.decorateRequest('principal', null)
  const authorize = createAuthorizer(deps)

  app.addHook('onRoute', (route) => {
    if (!isApiPath(route.url)) return
    const declared = (route.config as { access?: Access } | undefined)?.access
    const flaw = flawOfRoute(`${[route.method].flat().join(',')} ${route.url}`, declared)
    if (flaw) throw new Error(flaw)
    // The OpenAPI document says who may call: a role route takes a member's access token only.
    if (declared!.kind === 'role' && route.schema) {
      const schema = route.schema as { security?: unknown; description?: string }
      schema.security = [{ AccessToken: [] }]
      const roles = `Signed-in team members with the role ${declared!.roles.join(' or ')}; API keys are refused (403 forbidden).`
      schema.description = schema.description ? `${schema.description}\n\n${roles}` : roles
    }
  })

  app.addHook('onRequest', async (request) => {
    const access = accessOfRequest(request)
    if (access === undefined || access.kind === 'public') return
    const context = authorizationRequestOf(request)
    try {
      await authorize(access, context)
    } finally {
      request.principal = context.principal
    }
  })
}
