import type { IncomingMessage, ServerResponse } from 'node:http'
import { performance } from 'node:perf_hooks'
import type { ValidateFunction } from 'ajv'
import fastJsonStringify from 'fast-json-stringify'
import type { Logger } from 'pino'
import secureJson from 'secure-json-parse'
import type { TSchema } from 'typebox'
import type { AuthorizationRequest, Authorize } from '../auth/auth-hook.ts'
import type { Principal } from '../auth/principal.ts'
import { errorCodeOf } from '../metrics/http-metrics.ts'
import type { HttpMetrics } from '../metrics/service-metrics.ts'
import { BINARY, type DataReply, type DataRequest, type DataRoute, SERIALIZER_OPTIONS } from './data-route.ts'
import { drainInBackground } from './drain-request.ts'
import { errorAnswer } from './error-handler.ts'
import { API_HEADERS, requestIdOf } from './response-headers.ts'
import { createValidatorCompiler } from './validation.ts'

/**
 * The node:http adapter of the data plane (http/data-route.ts): the same route declarations as
 * the Fastify adapter, answered on the same server before Fastify sees the request. It takes
 * only what it answers the same way: a POST to a declared path whose body is JSON (or raw bytes
 * where the route takes them) within the route's limit. Anything else (another media type, an
 * encoded path, a declared length over the limit, a closing server) is handed to Fastify
 * untouched, whose answer (404, 415, 413, 503) is then the only one there is.
 */
export interface DataPlane {
  /** Answers the request and returns true; or returns false, having read nothing, for Fastify to answer. */
  handle(req: IncomingMessage, res: ServerResponse): boolean
  /** From now on every request goes to Fastify, which answers 503 while the service closes. */
  close(): void
  /** Requests this adapter took (the rest of its routes' requests went to Fastify). */
  answered(): number
}

export interface NodeDataPlaneDeps {
  routes: readonly DataRoute[]
  /** The JSON API's prefix, `/api/v1`. */
  prefix: string
  authorize: Authorize
  logger: Logger
  http: HttpMetrics
  /** One info line per request (otherwise at debug level), as the Fastify side logs. */
  accessLog: boolean
  /** The body limit of a route that declares none. */
  defaultBodyLimit: number
}

interface CompiledRoute {
  route: DataRoute
  /** The route's template with the prefix: the metrics label and the denied record's resource. */
  template: string
  /** The template's segments; `null` where a path parameter stands, named in `paramNames`. */
  segments: (string | null)[]
  paramNames: string[]
  bodyLimit: number
  validateBody: ValidateFunction | undefined
  validateParams: ValidateFunction | undefined
  validateHeaders: ValidateFunction | undefined
  serialize: (value: unknown) => string
  record: ReturnType<HttpMetrics['route']>
}

/** Fastify's router takes parameters of up to this length (server/http.ts `maxParamLength`). */
const MAX_PARAM_LENGTH = 16_384
const JSON_MEDIA = 'application/json'
const JSON_CONTENT_TYPE = 'application/json; charset=utf-8'
/** Fastify's JSON parser refuses `__proto__` and `constructor.prototype` keys (its defaults). */
const JSON_OPTIONS = { protoAction: 'error', constructorAction: 'error' } as const

/** One of Fastify's own client errors, by its code: the error mapping answers both alike. */
const clientError = (code: string, statusCode: number) => Object.assign(new Error(code), { code, statusCode })

/** The request ended before its body did: there is no one to answer. */
const ABORTED = Symbol('aborted')

type Media = 'json' | 'binary'

/** The body's media type when it is one this adapter parses for the route, else undefined. */
function mediaOf(contentType: string | undefined, binary: boolean): Media | undefined {
  if (contentType === undefined) return undefined
  const semicolon = contentType.indexOf(';')
  const type = (semicolon === -1 ? contentType : contentType.slice(0, semicolon)).trim().toLowerCase()
  if (semicolon !== -1) {
    // Only the charset JSON is read in; any other parameter is for Fastify to judge.
    const parameter = contentType
      .slice(semicolon + 1)
      .trim()
      .toLowerCase()
      .replaceAll(' ', '')
    if (parameter !== 'charset=utf-8') return undefined
  }
  if (type === JSON_MEDIA) return 'json'
  if (type === BINARY && binary && semicolon === -1) return 'binary'
  return undefined
}

function readBody(req: IncomingMessage, limit: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = []
    let received = 0
    const cleanup = () => {
      req.off('data', onData)
      req.off('end', onEnd)
      req.off('error', onAbort)
      req.off('close', onClose)
    }
    function onData(chunk: Buffer) {
      received += chunk.length
      if (received > limit) {
        cleanup()
        reject(clientError('FST_ERR_CTP_BODY_TOO_LARGE', 413))
        return
      }
      chunks.push(chunk)
    }
    function onEnd() {
      cleanup()
      const declared = Number(req.headers['content-length'])
      if (!Number.isNaN(declared) && declared !== received) {
        reject(clientError('FST_ERR_CTP_INVALID_CONTENT_LENGTH', 400))
        return
      }
      // A copy, as Fastify makes: the handler may keep the bytes past this read.
      resolve(chunks.length === 1 ? Buffer.from(chunks[0]!) : Buffer.concat(chunks, received))
    }
    function onAbort() {
      cleanup()
      reject(ABORTED)
    }
    function onClose() {
      if (!req.complete) onAbort()
    }
    req.on('data', onData)
    req.on('end', onEnd)
    req.on('error', onAbort)
    req.on('close', onClose)
  })
}

function parseJson(body: Buffer): unknown {
  if (body.length === 0) throw clientError('FST_ERR_CTP_EMPTY_JSON_BODY', 400)
  try {
    return secureJson.parse(body.toString('utf8'), null, JSON_OPTIONS)
  } catch {
    throw clientError('FST_ERR_CTP_INVALID_JSON_BODY', 400)
  }
}

/** ajv's errors as Fastify carries them to the error handler (`validation`, `validationContext`). */
function validated(validate: ValidateFunction | undefined, data: unknown, context: string): void {
  if (validate === undefined || validate(data)) return
  throw Object.assign(new Error(`${context} is invalid`), {
    validation: validate.errors,
    validationContext: context,
    statusCode: 400,
  })
}

/** The JSON schema of a body or answer: the schema itself, or its `application/json` entry. */
function jsonSchemaOf(schema: unknown): object | undefined {
  if (schema === undefined) return undefined
  const content = (schema as { content?: Record<string, { schema: object }> }).content
  return content ? content[JSON_MEDIA]?.schema : (schema as object)
}

/** Fastify matches header schemas against lower-cased names: so does this adapter. */
function lowerCasedHeaders(schema: TSchema): object {
  const properties = (schema as { properties?: Record<string, unknown> }).properties ?? {}
  return {
    ...schema,
    properties: Object.fromEntries(Object.entries(properties).map(([name, s]) => [name.toLowerCase(), s])),
  }
}

export function createNodeDataPlane(deps: NodeDataPlaneDeps): DataPlane {
  const compile = createValidatorCompiler()
  const compiled: CompiledRoute[] = deps.routes.map((route) => {
    const template = `${deps.prefix}${route.url}`
    const segments = template.split('/').map((segment) => (segment.startsWith(':') ? null : segment))
    const bodySchema = jsonSchemaOf(route.schema.body)
    const responseSchema = jsonSchemaOf(route.schema.response[200])
    if (!responseSchema) throw new Error(`data route ${template} declares no 200 answer`)
    const validatorOf = (schema: object, httpPart: 'body' | 'params' | 'headers') =>
      compile({ schema, httpPart, url: template, method: 'POST' }) as ValidateFunction
    return {
      route,
      template,
      segments,
      paramNames: template
        .split('/')
        .filter((segment) => segment.startsWith(':'))
        .map((segment) => segment.slice(1)),
      bodyLimit: route.bodyLimit ?? deps.defaultBodyLimit,
      validateBody: bodySchema ? validatorOf(bodySchema, 'body') : undefined,
      validateParams: route.schema.params ? validatorOf(route.schema.params, 'params') : undefined,
      validateHeaders: route.schema.headers
        ? validatorOf(lowerCasedHeaders(route.schema.headers), 'headers')
        : undefined,
      // The serializer Fastify compiles from the same schema, with the same options.
      serialize: fastJsonStringify(
        responseSchema as Parameters<typeof fastJsonStringify>[0],
        SERIALIZER_OPTIONS,
      ) as (value: unknown) => string,
      record: deps.http.route(template),
    }
  })
  const exact = new Map<string, CompiledRoute>()
  const withParams: CompiledRoute[] = []
  for (const route of compiled) {
    if (route.paramNames.length === 0) exact.set(route.template, route)
    else withParams.push(route)
  }

  function match(path: string): { route: CompiledRoute; params: Record<string, string> } | undefined {
    const route = exact.get(path)
    if (route) return { route, params: {} }
    if (withParams.length === 0) return undefined
    const segments = path.split('/')
    for (const candidate of withParams) {
      if (candidate.segments.length !== segments.length) continue
      const params: Record<string, string> = {}
      let names = 0
      let matched = true
      for (let i = 0; i < segments.length && matched; i++) {
        const expected = candidate.segments[i]
        const segment = segments[i]!
        if (expected === null) {
          matched = segment.length > 0 && segment.length <= MAX_PARAM_LENGTH
          params[candidate.paramNames[names++]!] = segment
        } else {
          matched = expected === segment
        }
      }
      if (matched) return { route: candidate, params }
    }
    return undefined
  }

  const accessLogLevel = deps.accessLog ? 'info' : 'debug'
  const accessLogged = deps.logger.isLevelEnabled(accessLogLevel)
  let closing = false
  let answered = 0

  function send(
    res: ServerResponse,
    id: string,
    status: number,
    contentType: string,
    payload: string | Buffer,
    extra: Record<string, string> | undefined,
  ): void {
    if (res.destroyed) return
    res.statusCode = status
    res.setHeader('x-request-id', id)
    for (const name in API_HEADERS) res.setHeader(name, API_HEADERS[name]!)
    if (extra) for (const name in extra) res.setHeader(name, extra[name]!)
    res.setHeader('content-type', contentType)
    res.setHeader('content-length', typeof payload === 'string' ? Buffer.byteLength(payload) : payload.length)
    res.end(payload)
  }

  async function serve(
    route: CompiledRoute,
    params: Record<string, string>,
    media: Media,
    req: IncomingMessage,
    res: ServerResponse,
    path: string,
  ): Promise<void> {
    const started = performance.now()
    const id = requestIdOf(req.headers)
    const request: DataRequest<unknown, Record<string, string>> & AuthorizationRequest = {
      body: undefined,
      params,
      headers: req.headers,
      id,
      ip: req.socket.remoteAddress ?? '',
      principal: null as Principal | null,
      method: 'POST',
      route: route.template,
    }
    let replyHeaders: Record<string, string> | undefined
    let replyType: string | undefined
    const reply: DataReply = {
      type(contentType) {
        replyType = contentType
        return reply
      },
      header(name, value) {
        replyHeaders ??= {}
        replyHeaders[name.toLowerCase()] = value
        return reply
      },
    }
    let status = 200
    let errorCode: string | undefined
    let parsing = false
    try {
      await deps.authorize(route.route.access, request)
      parsing = true
      const body = await readBody(req, route.bodyLimit)
      request.body = media === 'binary' ? body : parseJson(body)
      parsing = false
      // Fastify's order: path parameters, body, headers.
      validated(route.validateParams, params, 'params')
      if (media === 'json') validated(route.validateBody, request.body, 'body')
      validated(route.validateHeaders, req.headers, 'headers')
      const result = await route.route.handler(request, reply)
      if (Buffer.isBuffer(result)) send(res, id, 200, replyType ?? BINARY, result, replyHeaders)
      else send(res, id, 200, JSON_CONTENT_TYPE, route.serialize(result), replyHeaders)
    } catch (thrown) {
      if (thrown === ABORTED) {
        res.destroy()
        return
      }
      const error = thrown as Error
      const log = deps.logger.child({ reqId: id })
      const answer = errorAnswer(error, { log, bodyLimit: route.bodyLimit })
      if (answer.drainBody) drainInBackground(req)
      // As Fastify does: after a body it could not read, the client may still be sending, so the
      // connection ends with this answer (a body over the limit is drained instead).
      else if (parsing) answer.headers['connection'] = 'close'
      status = answer.status
      errorCode = errorCodeOf(error)
      send(res, id, status, JSON_CONTENT_TYPE, JSON.stringify(answer.body), answer.headers)
    }
    const elapsedMs = performance.now() - started
    route.record('POST', status, elapsedMs)
    if (errorCode !== undefined) deps.http.error(route.template, 'POST', status, errorCode)
    if (accessLogged) {
      deps.logger[accessLogLevel](
        {
          reqId: id,
          method: 'POST',
          url: path,
          statusCode: status,
          responseTimeMs: Math.round(elapsedMs * 100) / 100,
        },
        'request completed',
      )
    }
  }

  return {
    handle(req, res) {
      if (closing || req.method !== 'POST') return false
      const url = req.url ?? ''
      const query = url.indexOf('?')
      const path = query === -1 ? url : url.slice(0, query)
      // Fastify's router decodes percent-encoded paths and ends a path at `#`: left to it.
      if (path.includes('%') || path.includes('#')) return false
      const found = match(path)
      if (!found) return false
      const media = mediaOf(req.headers['content-type'], found.route.route.binary === true)
      if (!media) return false
      const declared = req.headers['content-length']
      if (declared !== undefined && !(Number(declared) <= found.route.bodyLimit)) return false
      answered++
      void serve(found.route, found.params, media, req, res, url)
      return true
    },
    close() {
      closing = true
    },
    answered: () => answered,
  }
}
