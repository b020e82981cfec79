import type { ServerResponse } from 'node:http'
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import type { Logger } from 'pino'
import { UNAVAILABLE_RETRY_AFTER_SECONDS } from '../../platform/errors.ts'
import { type PageSettings, pageHeaders } from '../../web/layout.ts'
import type { CorsAllowlist } from './cors-allowlist.ts'
import { OIDC_ROUTES, type OidcRuntime } from './oidc-provider.ts'

/**
 * The OpenID provider (oidc-provider, a Koa application) beside the JSON API: it gets the raw
 * request and answers it itself. Not part of the JSON API's OpenAPI document (the provider
 * publishes its own discovery document).
 */
export function providerSurface(deps: {
  oidc: OidcRuntime
  cors: CorsAllowlist
  pageSettings: PageSettings
  logger: Logger
}) {
  return async (app: FastifyInstance) => {
    app.addHook('onRoute', (route) => {
      route.schema = { ...(route.schema ?? {}), hide: true }
    })
    await app.register(providerRoutes(deps.oidc, deps.cors, deps.pageSettings, deps.logger))
  }
}

const PUBLIC_METADATA = new Set(['/.well-known/openid-configuration', OIDC_ROUTES.jwks])

/**
 * Spec 4.4: discovery and the JWKS answer `Access-Control-Allow-Origin: *` (public documents, no
 * credentials); the provider would echo the caller's origin, so its header is replaced.
 */
function anyOrigin(res: ServerResponse): void {
  const setHeader = res.setHeader.bind(res)
  res.setHeader = ((name: string, value: number | string | readonly string[]) => {
    const lower = name.toLowerCase()
    if (lower === 'access-control-allow-credentials') return res
    return setHeader(name, lower === 'access-control-allow-origin' ? '*' : value)
  }) as typeof res.setHeader
  setHeader('access-control-allow-origin', '*')
}

/** The provider's endpoints a browser calls cross-origin with a client: spec 4.4's allow-list applies. */
const CLIENT_CORS = new Set<string>([
  OIDC_ROUTES.token,
  OIDC_ROUTES.userinfo,
  OIDC_ROUTES.revocation,
  OIDC_ROUTES.introspection,
])

/**
 * An origin no tenant (nor the console) allows gets no CORS header on any answer. The provider
 * sets them before it knows the client and checks the client's allow-list (clientBasedCORS) only
 * once it does, so its early errors (`/oidc/me` with a bad token, an unknown client) would
 * otherwise echo any origin.
 */
function withoutCors(res: ServerResponse): void {
  const setHeader = res.setHeader.bind(res)
  res.setHeader = ((name: string, value: number | string | readonly string[]) =>
    name.toLowerCase().startsWith('access-control-') ? res : setHeader(name, value)) as typeof res.setHeader
}

/**
 * The metrics' route label of a request to `/oidc/*` (http-metrics.ts): the provider's own route
 * templates, a fixed set; anything else under `/oidc/` stays `/oidc/*`.
 */
const PROVIDER_PATHS = new Set<string>([
  OIDC_ROUTES.authorization,
  OIDC_ROUTES.token,
  OIDC_ROUTES.userinfo,
  OIDC_ROUTES.end_session,
  `${OIDC_ROUTES.end_session}/confirm`,
  `${OIDC_ROUTES.end_session}/success`,
  OIDC_ROUTES.revocation,
  OIDC_ROUTES.introspection,
])
const RESUME = new RegExp(`^${OIDC_ROUTES.authorization}/[^/]+$`)
function providerRouteOf(url: string): string {
  const path = url.split('?', 1)[0] ?? ''
  if (PROVIDER_PATHS.has(path)) return path
  if (RESUME.test(path)) return `${OIDC_ROUTES.authorization}/:uid`
  return '/oidc/*'
}

function providerRoutes(oidc: OidcRuntime, cors: CorsAllowlist, pageSettings: PageSettings, logger: Logger) {
  return async (app: FastifyInstance) => {
    // The provider reads its own bodies from the raw request.
    app.removeAllContentTypeParsers()
    app.addContentTypeParser('*', (_request, _payload, done) => done(null, undefined))
    const headers = pageHeaders(pageSettings)
    const handler = async (request: FastifyRequest, reply: FastifyReply) => {
      reply.hijack()
      const res = reply.raw
      // The provider's HTML pages (sign-out, errors) get the sign-in pages' headers; its JSON
      // answers are unaffected by them. The provider sets its own content type and caching.
      res.setHeader('content-security-policy', headers['content-security-policy']!)
      res.setHeader('x-frame-options', 'DENY')
      res.setHeader('x-content-type-options', 'nosniff')
      res.setHeader('x-request-id', request.id)
      const path = request.url.split('?', 1)[0] ?? ''
      const origin = request.headers.origin
      if (PUBLIC_METADATA.has(request.routeOptions.url ?? '')) anyOrigin(res)
      else if (origin && CLIENT_CORS.has(path)) {
        try {
          await cors.ready()
        } catch (err) {
          logger.error({ err: { message: (err as Error).message } }, 'CORS allow-list unavailable')
        }
        // A preflight names no client: it passes for an origin some tenant (or the console)
        // allows; the request itself is then checked against its client's tenant (clientBasedCORS).
        if (!cors.allowsAnywhere(origin)) {
          if (request.method === 'OPTIONS' && request.headers['access-control-request-method']) {
            res.statusCode = 403
            res.setHeader('vary', 'Origin')
            res.setHeader('content-type', 'application/json')
            res.end(JSON.stringify({ error: 'invalid_request', error_description: 'origin not allowed' }))
            return
          }
          withoutCors(res)
        }
      }
      try {
        await oidc.handle(request.raw, res)
      } catch (err) {
        logger.error({ err: { message: (err as Error).message } }, 'OpenID provider failed')
        if (!res.headersSent) {
          res.statusCode = 503
          // Passing (the database or the signing key): the client is told when to ask again.
          res.setHeader('retry-after', String(UNAVAILABLE_RETRY_AFTER_SECONDS))
          res.setHeader('content-type', 'application/json')
          res.end(
            JSON.stringify({
              error: 'identity_unavailable',
              message: 'The OpenID provider is not available',
            }),
          )
        } else res.end()
      }
    }
    const methods = ['GET', 'POST', 'OPTIONS', 'HEAD'] as const
    app.route({ method: [...methods], url: '/.well-known/openid-configuration', handler })
    app.route({ method: [...methods], url: OIDC_ROUTES.jwks, handler })
    app.route({ method: [...methods], url: '/oidc/*', handler, config: { metricsRoute: providerRouteOf } })
  }
}
