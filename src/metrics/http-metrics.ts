import type {
  FastifyError,
  FastifyInstance,
  FastifyReply,
  FastifyRequest,
  onResponseHookHandler,
} from 'fastify'
import { AppError, isDatabaseUnavailable } from '../platform/errors.ts'
import { type HttpMetrics, UNMATCHED_ROUTE } from './service-metrics.ts'

declare module 'fastify' {
  interface FastifyContextConfig {
    /**
     * The route label of each request, for a wildcard route that serves endpoints of its own (the
     * OpenID provider's `/oidc/*`): one of a fixed set of templates, never the raw URL.
     */
    metricsRoute?: (url: string) => string
  }
}

/**
 * Request counts, durations and errors by route template (never the raw URL: bounded label
 * values). Each route gets its own onResponse hook, bound at registration to the route's
 * template, so a request pays one callback (no promise), a map read and two additions; the
 * error code is looked up only for answers of 400 and above.
 */
export function instrumentRequests(app: FastifyInstance, http: HttpMetrics) {
  // The API error code of a failed request, taken from the thrown error (the error path only).
  const errorCodes = new WeakMap<FastifyReply, string>()
  app.addHook('onError', (_request, reply, error, done) => {
    errorCodes.set(reply, errorCodeOf(error))
    done()
  })

  const recorder = (route: string) => {
    const record = http.route(route)
    return (request: FastifyRequest, reply: FastifyReply) => {
      const status = reply.statusCode
      record(request.method, status, reply.elapsedTime)
      if (status >= 400)
        http.error(route, request.method, status, errorCodes.get(reply) ?? defaultCode(status))
    }
  }

  // A route serving several endpoints of its own names each request's label; recorders are kept
  // per label, which the route draws from a fixed set.
  const labelled = (labelOf: (url: string) => string) => {
    const recorders = new Map<string, ReturnType<typeof recorder>>()
    return (request: FastifyRequest, reply: FastifyReply) => {
      const label = labelOf(request.url)
      let record = recorders.get(label)
      if (!record) {
        record = recorder(label)
        recorders.set(label, record)
      }
      record(request, reply)
    }
  }

  app.addHook('onRoute', (route) => {
    const labelOf = route.config?.metricsRoute
    const record = labelOf ? labelled(labelOf) : recorder(route.url)
    const hook: onResponseHookHandler = (request, reply, done) => {
      record(request, reply)
      done()
    }
    const existing = route.onResponse
    route.onResponse =
      existing === undefined ? [hook] : [...(Array.isArray(existing) ? existing : [existing]), hook]
  })

  // Requests no route matched never reach a route's hooks; the app's own onResponse hook calls this.
  const unmatched = recorder(UNMATCHED_ROUTE)
  return { unmatched }
}

/** The API error code an error is answered with: the label of `kms_http_errors_total`. */
export function errorCodeOf(error: FastifyError | Error): string {
  if (error instanceof AppError) return error.code
  // Answered 503 database_unavailable by the error handler (http/error-handler.ts).
  if (isDatabaseUnavailable(error)) return 'database_unavailable'
  const fastify = error as FastifyError
  if (fastify.validation) return 'validation_failed'
  // Fastify's own client errors (FST_ERR_CTP_BODY_TOO_LARGE ...): a fixed set.
  if (typeof fastify.code === 'string' && fastify.code.startsWith('FST_')) return fastify.code.toLowerCase()
  return fastify.statusCode !== undefined && fastify.statusCode < 500 ? 'bad_request' : 'internal_error'
}

/** An error answer sent without a thrown error (the router's 404). */
function defaultCode(status: number): string {
  return status === 404 ? 'not_found' : status >= 500 ? 'internal_error' : 'bad_request'
}
