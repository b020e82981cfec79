import type { IncomingHttpHeaders } from 'node:http'
import type { FastifyInstance, RouteHandlerMethod } from 'fastify'
import type { Static, TSchema } from 'typebox'
import type { Access } from '../auth/access.ts'
import type { CallerRequest } from '../auth/request-context.ts'

/**
 * The data plane's routes (encrypt, decrypt, batches, sign, verify, MAC, data keys, wrap and
 * unwrap) are declared once, as plain objects, and served by either HTTP adapter: mounted on
 * Fastify like any route (which also puts them in the OpenAPI document), or answered by the
 * node:http adapter (http/node-data-plane.ts) before Fastify sees the request, without its
 * per-request cost. Both adapters use the same schemas (compiled by the same validator compiler),
 * the same access declaration and authorizer (auth/auth-hook.ts), the same error mapping
 * (http/error-handler.ts) and the same metrics; the handler is the same function.
 */
export const BINARY = 'application/octet-stream'

/**
 * fast-json-stringify's options, for Fastify's serializers and the node adapter's alike.
 * `format: 'unsafe'` on answer strings is a hint to it (crypto-schemas.ts Base64Output); its own
 * ajv, used for unions, must know the format or it logs a line per use.
 */
export const SERIALIZER_OPTIONS: { ajv: { formats: { unsafe: true } } } = {
  ajv: { formats: { unsafe: true } },
}

/** What a data-plane handler reads of its request: a Fastify request satisfies it as it is. */
export interface DataRequest<Body = unknown, Params = unknown, Headers = IncomingHttpHeaders>
  extends CallerRequest {
  body: Body
  params: Params
  headers: Headers
}

/** What a data-plane handler may set on its answer besides the body it returns. */
export interface DataReply {
  type(contentType: string): DataReply
  header(name: string, value: string): DataReply
}

/** The route's schema: validation and serialization, and its OpenAPI entry. */
export interface DataRouteSchema {
  tags: string[]
  summary: string
  description?: string
  operationId: string
  headers?: TSchema
  params?: TSchema
  /** A schema, or per media type (`jsonOrBinary`: JSON validated, raw bytes taken as they are). */
  body: TSchema | { content: Record<string, { schema: object }> }
  /** `200` is what the adapters serialize; the others document the errors. */
  response: Record<number, unknown>
}

type BodyOf<S extends DataRouteSchema> = S['body'] extends TSchema ? Static<S['body']> : unknown
type ParamsOf<S extends DataRouteSchema> = S['params'] extends TSchema ? Static<S['params']> : unknown
/** The headers the schema names, as validated, beside the others. */
type HeadersOf<S extends DataRouteSchema> = S['headers'] extends TSchema
  ? Static<S['headers']> & IncomingHttpHeaders
  : IncomingHttpHeaders

export interface DataRoute<S extends DataRouteSchema = DataRouteSchema> {
  method: 'POST'
  /** Below /api/v1, with `:name` path parameters (`/keys/:keyId/mac`). */
  url: string
  access: Access
  /** The body limit in bytes (default: the service's). */
  bodyLimit?: number
  /** Takes `application/octet-stream` bodies (a Buffer) as well as JSON. */
  binary?: boolean
  schema: S
  /** Returns the JSON answer (serialized by the 200 schema) or a Buffer of raw bytes. */
  handler(request: DataRequest<BodyOf<S>, ParamsOf<S>, HeadersOf<S>>, reply: DataReply): Promise<unknown>
}

/** A route declaration, typed by its schema. */
export const dataRoute = <S extends DataRouteSchema>(route: DataRoute<S>): DataRoute =>
  route as unknown as DataRoute

/**
 * The Fastify adapter: each declaration becomes a Fastify route. Raw bytes are parsed only for
 * the routes that take them (a plugin of their own): elsewhere an octet-stream body stays a 415.
 */
export function mountOnFastify(routes: readonly DataRoute[]) {
  const mount = (app: FastifyInstance, declared: readonly DataRoute[]) => {
    for (const route of declared) {
      app.route({
        method: route.method,
        url: route.url,
        ...(route.bodyLimit !== undefined ? { bodyLimit: route.bodyLimit } : {}),
        config: { access: route.access },
        schema: route.schema,
        // A Fastify request and reply are a DataRequest and a DataReply.
        handler: route.handler as unknown as RouteHandlerMethod,
      })
    }
  }
  return async (app: FastifyInstance) => {
    await app.register(async (binary) => {
      binary.addContentTypeParser(BINARY, { parseAs: 'buffer' }, (_request, body, done) => done(null, body))
      mount(
        binary,
        routes.filter((route) => route.binary),
      )
    })
    await app.register(async (json) =>
      mount(
        json,
        routes.filter((route) => !route.binary),
      ),
    )
  }
}
