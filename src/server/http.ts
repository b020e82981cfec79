import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import swagger from '@fastify/swagger'
import swaggerUi from '@fastify/swagger-ui'
import type { FastifyPluginAsyncTypebox, TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import Fastify, {
  type FastifyBaseLogger,
  type FastifyInstance,
  type FastifyReply,
  LogController,
} from 'fastify'
import type { Logger } from 'pino'
import { access } from '../auth/access.ts'
import { API_PREFIX, createAuthorizer, registerAuthentication } from '../auth/auth-hook.ts'
import type { DataPlaneAdapter } from '../config.ts'
import { mountOnFastify, SERIALIZER_OPTIONS } from '../http/data-route.ts'
import { installErrorHandlers } from '../http/error-handler.ts'
import { createNodeDataPlane, type DataPlane } from '../http/node-data-plane.ts'
import { documentTransform, type Json, routeTransform } from '../http/openapi.ts'
import { requestIdOf, securityHeaders } from '../http/response-headers.ts'
import { createValidatorCompiler } from '../http/validation.ts'
import { instrumentRequests } from '../metrics/http-metrics.ts'
import type { ServiceMetrics } from '../metrics/service-metrics.ts'
import { LazyChildLogger } from '../platform/logger.ts'
import type { Module } from '../platform/module.ts'
import type { PageSettings } from '../web/layout.ts'
import { pageSurface } from '../web/page-surface.ts'

/** What the JSON API's authentication hook is given (auth/auth-hook.ts). */
type AuthenticationDeps = Parameters<typeof registerAuthentication>[1]

/** What the HTTP application is built from: the modules, and what every surface shares. */
export interface HttpDeps {
  logger: Logger
  metrics: Pick<ServiceMetrics, 'http'>
  /** Who calls the JSON API: API keys, team members' access tokens, partners. */
  authentication: AuthenticationDeps
  /** The pages' CSP and the page kit's settings (web/). */
  pageSettings: PageSettings
  version: string
  bodyLimitBytes: number
  /** One info line per request (otherwise at debug level). */
  accessLog: boolean
  /** Who answers the modules' data-plane routes: node:http before Fastify, or Fastify itself. */
  dataPlane: DataPlaneAdapter
  /** Every module, in order: surfaces at the root, then the pages, then the JSON API. */
  modules: readonly Module[]
}

/** Fastify's defaults, which a server of our own (the data plane's) must be given itself. */
const KEEP_ALIVE_TIMEOUT_MS = 72_000

export async function buildHttp(deps: HttpDeps): Promise<FastifyInstance> {
  // The data plane's node:http adapter answers its routes before Fastify sees them, on the same
  // server (http/node-data-plane.ts); it is made once the routes are known, below.
  let dataPlane: DataPlane | undefined
  const serverFactory = (handler: (req: IncomingMessage, res: ServerResponse) => void) => {
    const server = createServer((req, res) => {
      if (!dataPlane?.handle(req, res)) handler(req, res)
    })
    server.keepAliveTimeout = KEEP_ALIVE_TIMEOUT_MS
    server.requestTimeout = 0
    server.setTimeout(0)
    return server
  }
  const app = Fastify({
    ...(deps.dataPlane === 'node' ? { serverFactory } : {}),
    loggerInstance: deps.logger as FastifyBaseLogger,
    bodyLimit: deps.bodyLimitBytes,
    // A caller's X-Request-Id is kept when it is sane, so traces can span services.
    genReqId: (req) => requestIdOf(req.headers),
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
    serializerOpts: SERIALIZER_OPTIONS,
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
    // Named components, examples, servers and client hints (http/openapi.ts).
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

  // Each surface has its own parsers, error format and authentication.
  for (const module of deps.modules) if (module.surface) await app.register(module.surface)
  await app.register(
    pageSurface({
      logger: deps.logger,
      pageSettings: deps.pageSettings,
      pages: deps.modules.flatMap((module) => (module.pages ? [module.pages] : [])),
    }),
  )
  await app.register(
    apiSurface(deps, () => app.swagger()),
    { prefix: API_PREFIX },
  )
  if (deps.dataPlane === 'node') {
    const node = createNodeDataPlane({
      routes: deps.modules.flatMap((module) => module.dataPlane ?? []),
      prefix: API_PREFIX,
      authorize: createAuthorizer(deps.authentication),
      logger: deps.logger,
      http: deps.metrics.http,
      accessLog: deps.accessLog,
      defaultBodyLimit: deps.bodyLimitBytes,
    })
    // While the service closes, Fastify answers every request (503 with Connection: close).
    app.addHook('preClose', (done) => {
      node.close()
      done()
    })
    dataPlane = node
    deps.metrics.http.dataPlane('node', node.answered)
  } else {
    deps.metrics.http.dataPlane('fastify')
  }
  deps.logger.info({ dataPlane: deps.dataPlane }, `data plane served by the ${deps.dataPlane} adapter`)
  return app
}

/**
 * The JSON API under /api/v1, a surface of its own: JSON errors `{error, message}`, JSON and
 * octet-stream bodies only, and callers authenticated by `X-Api-Key` or, for team members,
 * `Authorization: Bearer`, against what each route declares (auth/access.ts). Its 404s are
 * answered after authentication, so strangers cannot probe which routes exist.
 */
function apiSurface(deps: HttpDeps, openApiDocument: () => unknown): FastifyPluginAsyncTypebox {
  return async (api) => {
    installErrorHandlers(api)
    registerAuthentication(api, deps.authentication)
    for (const module of deps.modules) {
      if (module.routes) await api.register(module.routes)
      if (module.dataPlane) await api.register(mountOnFastify(module.dataPlane))
    }
    api.get('/openapi.json', { config: { access: access.public() }, schema: { hide: true } }, async () =>
      openApiDocument(),
    )
  }
}
