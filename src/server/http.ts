import { randomUUID } from 'node:crypto'
import swagger from '@fastify/swagger'
import swaggerUi from '@fastify/swagger-ui'
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import Fastify, {
  type FastifyBaseLogger,
  type FastifyInstance,
  type FastifyReply,
  LogController,
} from 'fastify'
import type { Logger } from 'pino'
import { API_PREFIX } from '../auth/auth-hook.ts'
import type { BearerAuthenticator } from '../auth/bearer-authenticator.ts'
import type { EntropyStatus } from '../entropy/entropy-chain.ts'
import { samlSurface } from '../federation/saml-surface.ts'
import { metricsRoutes } from '../health/metrics-routes.ts'
import { installErrorHandlers } from '../http/error-handler.ts'
import { documentTransform, type Json, routeTransform } from '../http/openapi.ts'
import { createValidatorCompiler } from '../http/validation.ts'
import type { Identity } from '../identity/identity-service.ts'
import { identitySurface } from '../identity/oidc/identity-surface.ts'
import { instrumentRequests } from '../metrics/http-metrics.ts'
import { LazyChildLogger } from '../platform/logger.ts'
import { apiSurface } from './api-surface.ts'
import type { Services } from './compose.ts'

/** The process's services the routes use, and what only a serving process has. */
export type AppDeps = Pick<
  Services,
  | 'logger'
  | 'sql'
  | 'redis'
  | 'authenticator'
  | 'audit'
  | 'apiKeys'
  | 'tenants'
  | 'keys'
  | 'crypto'
  | 'signing'
  | 'batches'
  | 'rotation'
  | 'webhooks'
  | 'folders'
  | 'secrets'
  | 'metrics'
  | 'accounts'
  | 'team'
  | 'settings'
  | 'applications'
  | 'endusers'
  | 'roles'
  | 'accessPolicies'
  | 'federation'
  | 'billing'
  | 'partners'
  | 'partnerCredentials'
  | 'signups'
  | 'cloudExports'
  | 'intelligence'
> & {
  version: string
  /** KMS_REDIS_PREFIX: keys the API writes to Redis (the partner rate limit) start with it. */
  redisPrefix: string
  /** KMS_SIGNUP_RATE_PER_HOUR: sign-up requests per client IP and hour (API and pages together). */
  signupRatePerHour: number
  bodyLimitBytes: number
  /** One info line per request (otherwise at debug level). */
  accessLog: boolean
  entropyStatus: () => EntropyStatus
  /** The text GET /metrics answers: this process's metrics, or the cluster's. */
  scrape: () => Promise<string>
  /** `Authorization: Bearer` for team members; absent, only API keys authenticate. */
  bearer?: BearerAuthenticator
  /** The OpenID provider and its pages; absent, the service has no sign-in. */
  identity?: Identity
  /** Page routes other domains add to the sign-in surface (the accept-invitation page). */
  identityPages?: Array<(app: FastifyInstance) => Promise<void>>
}

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/

export async function buildApp(deps: AppDeps): Promise<FastifyInstance> {
  const app = Fastify({
    loggerInstance: deps.logger as FastifyBaseLogger,
    bodyLimit: deps.bodyLimitBytes,
    // A caller's X-Request-Id is kept when it is sane, so traces can span services.
    genReqId: (req) => {
      const given = req.headers['x-request-id']
      return typeof given === 'string' && REQUEST_ID.test(given) ? given : randomUUID()
    },
    requestIdHeader: false,
    // One access-log line per request (the onResponse hook below) instead of Fastify's two.
    logController: new LogController({ disableRequestLogging: true }),
    // The request's child logger is made when the request logs something (platform/logger.ts).
    childLoggerFactory: (logger, bindings, options) =>
      new LazyChildLogger(
        logger as Logger,
        bindings,
        options as Record<string, unknown>,
      ) as unknown as FastifyBaseLogger,
    // `format: 'unsafe'` on response strings is a hint to fast-json-stringify (crypto-schemas.ts
    // Base64Output); its own ajv, used for unions, must know the format or it logs a line per use.
    serializerOpts: { ajv: { formats: { unsafe: true } } },
    return503OnClosing: true,
    forceCloseConnections: 'idle',
    // Long path parameters reach schema validation (400 after authentication) instead of
    // the router's 414, which would answer before authentication.
    routerOptions: { maxParamLength: 16_384 },
    // Malformed URLs never reach the routes; answer them in the API's own format.
    frameworkErrors: (_error, request, reply) => {
      const raw = reply as unknown as FastifyReply
      raw
        .code(400)
        .headers(securityHeaders(request.url))
        .header('x-request-id', request.id)
        .send({ error: 'bad_request', message: 'The URL is malformed' })
    },
  }).withTypeProvider<TypeBoxTypeProvider>()

  app.setValidatorCompiler(createValidatorCompiler())
  // JSON only: Fastify's built-in text/plain parser would let a text body reach the routes.
  app.removeContentTypeParser('text/plain')
  installErrorHandlers(app)
  // Before any route is registered: each route gets its own metrics hook.
  const requestMetrics = instrumentRequests(app, deps.metrics.http)
  // Callback hooks: an async hook costs a promise per request on the hottest path.
  app.addHook('onRequest', (request, reply, done) => {
    reply.header('x-request-id', request.id)
    reply.headers(securityHeaders(request.url))
    done()
  })
  // Every cryptographic operation and change already has its audit record; the access log line
  // costs about 7% of a process's CPU on the encrypt path, so it is at debug level unless
  // KMS_ACCESS_LOG asks for it at info (bench/RESULTS.md).
  const accessLogLevel = deps.accessLog ? 'info' : 'debug'
  const accessLogged = deps.logger.isLevelEnabled(accessLogLevel)
  app.addHook('onResponse', (request, reply, done) => {
    if (accessLogged) {
      // `url` keeps its query, but the logger's serializer blanks the values of secret parameters
      // (the one-time link's `token`, an authorization `code`, ...: platform/logger.ts).
      request.log[accessLogLevel](
        {
          method: request.method,
          url: request.url,
          statusCode: reply.statusCode,
          responseTimeMs: Math.round(reply.elapsedTime * 100) / 100,
        },
        'request completed',
      )
    }
    // Routed requests are counted by their route's own hook (instrumentRequests).
    if (request.is404) requestMetrics.unmatched(request, reply)
    done()
  })

  await app.register(swagger, {
    // Named components, examples, servers and client hints (platform/openapi.ts).
    transform: routeTransform,
    transformObject: (document) =>
      documentTransform(
        ('openapiObject' in document ? document.openapiObject : document.swaggerObject) as Json,
      ),
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Key management, encryption and tenant administration API',
        version: deps.version,
        description:
          'All paths are under /api/v1. Authenticate with the X-Api-Key header, or as a signed-in team ' +
          'member with an access token from the service’s OpenID provider (Authorization: Bearer).',
      },
      components: {
        securitySchemes: {
          ApiKey: { type: 'apiKey', in: 'header', name: 'X-Api-Key' },
          AccessToken: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT' },
          PartnerApiKey: {
            type: 'http',
            scheme: 'bearer',
            description: 'A partner API key (kmsp_…): /api/v1/partners/* only',
          },
          PartnerAccessToken: {
            type: 'http',
            scheme: 'bearer',
            bearerFormat: 'JWT',
            description:
              'A partner portal session: an access token of the kms-partner-portal client for the resource urn:kms:partner-portal',
          },
        },
      },
      security: [{ ApiKey: [] }, { AccessToken: [] }],
    },
  })
  await app.register(swaggerUi, { routePrefix: '/docs' })

  await app.register(metricsRoutes(deps))
  if (deps.identity) {
    await app.register(
      identitySurface({
        logger: deps.logger,
        oidc: deps.identity.oidc,
        clients: deps.identity.clients,
        endUsers: deps.endusers,
        links: deps.identity.links,
        cors: deps.identity.cors,
        passwordPolicyOf: async (tenantId) => (await deps.settings.getSecurity(tenantId)).passwordPolicy,
        endSessionsOf: (accountId) => deps.identity!.endSessionsOf(accountId),
        accounts: deps.accounts,
        csrf: deps.identity.csrf,
        pageSettings: deps.identity.pageSettings,
        gate: deps.identity.gate,
        signIns: deps.identity.signIns,
        ...(deps.identity.branding ? { branding: deps.identity.branding } : {}),
        codes: deps.identity.codes,
        accessPolicy: deps.accessPolicies,
        federation: deps.federation,
        issuerName: 'KMS',
        extraPages: deps.identityPages ?? [],
      }),
    )
    await app.register(samlSurface({ federation: deps.federation, pageSettings: deps.identity.pageSettings }))
  }
  // The surfaces: each its own parsers, error format and authentication.
  await app.register(
    apiSurface(deps, () => app.swagger()),
    { prefix: API_PREFIX },
  )
  return app
}

/**
 * Every answer: no MIME sniffing (an error echoing input must never be read as HTML). Every
 * answer outside /docs (the API, /metrics, unknown paths): `no-store`, since most API answers
 * carry key material, secrets or tenant data, and one rule for all cannot miss a route added
 * later. /docs: a CSP that allows only the page's own scripts and styles (swagger-ui has no
 * inline script) and no framing.
 */
const NOSNIFF = { 'x-content-type-options': 'nosniff' }
const API_HEADERS = { ...NOSNIFF, 'cache-control': 'no-store' }
export const DOCS_CSP =
  "default-src 'self'; script-src 'self'; script-src-attr 'none'; style-src 'self' 'unsafe-inline'; " +
  "img-src 'self' data:; font-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'self'; " +
  "form-action 'self'; frame-ancestors 'none'"
const DOCS_HEADERS = { ...NOSNIFF, 'content-security-policy': DOCS_CSP, 'x-frame-options': 'DENY' }

const securityHeaders = (url: string): Record<string, string> =>
  url.startsWith('/docs') ? DOCS_HEADERS : API_HEADERS
