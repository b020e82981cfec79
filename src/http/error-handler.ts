import type { FastifyError, FastifyInstance } from 'fastify'
import {
  AppError,
  databaseUnavailable,
  isDatabaseUnavailable,
  UNAVAILABLE_RETRY_AFTER_SECONDS,
} from '../platform/errors.ts'
import { drainInBackground } from './drain-request.ts'
import { PATTERN_MESSAGE } from './validation.ts'

/** Fastify's own client errors, as this API's codes. Messages are fixed: they never echo input. */
const FASTIFY_CLIENT_ERRORS: Record<string, { status: number; code: string; message: string }> = {
  FST_ERR_CTP_INVALID_MEDIA_TYPE: {
    status: 415,
    code: 'unsupported_media_type',
    message:
      'Content-Type must be application/json (/encrypt and /decrypt also take application/octet-stream)',
  },
  FST_ERR_CTP_BODY_TOO_LARGE: {
    status: 413,
    code: 'payload_too_large',
    message: 'The request body is too large',
  },
  FST_ERR_CTP_EMPTY_JSON_BODY: {
    status: 400,
    code: 'invalid_json',
    message: 'The body is empty but Content-Type is application/json',
  },
  FST_ERR_CTP_INVALID_JSON_BODY: { status: 400, code: 'invalid_json', message: 'The body is not valid JSON' },
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: {
    status: 400,
    code: 'bad_request',
    message: 'Content-Length does not match the body',
  },
  FST_ERR_BAD_URL: { status: 400, code: 'bad_request', message: 'The URL is malformed' },
  FST_ERR_ASYNC_CONSTRAINT: { status: 400, code: 'bad_request', message: 'The request cannot be routed' },
}

interface ValidationIssue {
  keyword?: string
  instancePath?: string
  schemaPath?: string
  message?: string
  params?: Record<string, unknown>
  /** The schema object holding the failing keyword (ajv's `verbose`, validation.ts). */
  parentSchema?: Record<string, unknown>
}

interface FieldError {
  path: string
  message: string
  /** For an enumeration (enum, a union of literals, a const): every value the field takes. */
  allowedValues?: unknown[]
}

/** The values an enumeration schema allows, or undefined when it is not one. */
function enumeration(schema: Record<string, unknown> | undefined): unknown[] | undefined {
  if (!schema) return undefined
  if (Array.isArray(schema['enum'])) return schema['enum']
  if ('const' in schema) return [schema['const']]
  const branches = schema['anyOf'] ?? schema['oneOf']
  if (!Array.isArray(branches)) return undefined
  const values: unknown[] = []
  for (const branch of branches) {
    const own = enumeration(branch as Record<string, unknown>)
    if (!own) return undefined
    values.push(...own)
  }
  return values
}

const listValues = (values: unknown[]) =>
  values.map((v) => (typeof v === 'string' ? v : JSON.stringify(v))).join(', ')

function isUuidSchema(schema: Record<string, unknown> | undefined): boolean {
  return schema?.['format'] === 'uuid'
}

/**
 * One entry per failing field, saying what is allowed: an enumeration lists its values, an id
 * says it must be a UUID (not the pattern), a missing property is named. ajv reports a union's
 * failure once per branch and then once for the union; that becomes one entry.
 */
function describeValidation(context: string | undefined, issues: ValidationIssue[]): FieldError[] {
  const root = context ?? 'body'
  const unions = issues.filter((i) => i.keyword === 'anyOf' || i.keyword === 'oneOf')
  const insideUnion = (issue: ValidationIssue) =>
    unions.some((u) => u !== issue && issue.schemaPath?.startsWith(`${u.schemaPath}/`))
  const fields: FieldError[] = []
  for (const issue of issues) {
    if (insideUnion(issue)) continue
    const at = `${root}${issue.instancePath ?? ''}`
    const extra = issue.params?.['additionalProperty']
    if (extra !== undefined) {
      fields.push({ path: `${at}/${String(extra)}`, message: 'is not an allowed field' })
      continue
    }
    const missing = issue.params?.['missingProperty']
    if (issue.keyword === 'required' && missing !== undefined) {
      fields.push({ path: `${at}/${String(missing)}`, message: 'is required' })
      continue
    }
    if ((issue.keyword === 'pattern' || issue.keyword === 'format') && isUuidSchema(issue.parentSchema)) {
      fields.push({ path: at, message: 'must be a UUID' })
      continue
    }
    const patternMessage = issue.keyword === 'pattern' ? issue.parentSchema?.[PATTERN_MESSAGE] : undefined
    if (typeof patternMessage === 'string') {
      fields.push({ path: at, message: patternMessage })
      continue
    }
    const allowed =
      issue.keyword === 'enum' ||
      issue.keyword === 'const' ||
      issue.keyword === 'anyOf' ||
      issue.keyword === 'oneOf'
        ? enumeration(issue.parentSchema)
        : undefined
    if (allowed) {
      fields.push({
        path: at,
        message:
          allowed.length === 1 ? `must be ${listValues(allowed)}` : `must be one of: ${listValues(allowed)}`,
        allowedValues: allowed,
      })
      continue
    }
    if (issue.keyword === 'anyOf' || issue.keyword === 'oneOf') {
      fields.push({ path: at, message: describeUnion(issue, issues) })
      continue
    }
    fields.push({ path: at, message: issue.message ?? 'is invalid' })
  }
  return fields.slice(0, 20)
}

/**
 * A union of different shapes (a timestamp or null, PEM text or a JWK): the branch whose type
 * matched says why it failed; when none matched, the types it takes.
 */
function describeUnion(union: ValidationIssue, issues: ValidationIssue[]): string {
  const branches = issues.filter((i) => i.schemaPath?.startsWith(`${union.schemaPath}/`))
  const reason = branches.find((i) => i.keyword !== 'type')
  if (reason) {
    const deeper =
      reason.instancePath !== union.instancePath
        ? reason.instancePath?.slice(union.instancePath?.length ?? 0)
        : ''
    const at = deeper ? `${deeper} ` : ''
    if ((reason.keyword === 'format' || reason.keyword === 'pattern') && isUuidSchema(reason.parentSchema))
      return `${at}must be a UUID`
    const allowed = reason.keyword === 'enum' ? enumeration(reason.parentSchema) : undefined
    if (allowed) {
      const others = branches.filter((i) => i.keyword === 'type').map((i) => String(i.params?.['type']))
      return `${at}must be one of: ${listValues(allowed)}${others.length > 0 ? ` (or ${others.join(' or ')})` : ''}`
    }
    return `${at}${reason.message ?? 'is invalid'}`
  }
  const types = branches.map((i) => String(i.params?.['type'])).filter((t) => t !== 'undefined')
  return types.length > 0 ? `must be ${[...new Set(types)].join(' or ')}` : (union.message ?? 'is invalid')
}

/** What an error is answered with, whichever HTTP adapter serves the route (http/data-route.ts). */
export interface ErrorAnswer {
  status: number
  headers: Record<string, string>
  body: Record<string, unknown>
  /**
   * The rest of the body may still be on its way: closing now would reset the connection and
   * lose this answer, so the body is drained after it instead (drain-request.ts).
   */
  drainBody?: boolean
}

/** Where the answer's reasons are logged: the request's logger. */
interface ErrorLog {
  warn(object: object, message: string): void
  error(object: object, message: string): void
}

const UNAUTHORIZED_CHALLENGE = 'ApiKey realm="kms", header="X-Api-Key", Bearer realm="kms"'

/**
 * The one mapping from a thrown error to the API's answer: Fastify's error handler and the
 * data plane's node:http adapter both use it, so an error reads the same through either.
 */
export function errorAnswer(
  thrown: FastifyError | AppError | Error,
  context: { log: ErrorLog; bodyLimit: number | undefined },
): ErrorAnswer {
  // The database unreachable, shutting down, out of connections or timing out: the request may
  // succeed in a moment. Never a 500 (the service is not at fault), always with Retry-After.
  let error = thrown as FastifyError | AppError
  if (!(error instanceof AppError) && isDatabaseUnavailable(error)) {
    context.log.warn(
      { err: { message: error.message, code: error.code } },
      'the database is unavailable: 503 database_unavailable',
    )
    error = databaseUnavailable()
  }
  if (error instanceof AppError) {
    // A 5xx's cause, when it has one, is for the operator (which master key is missing): logged, never sent.
    if (error.statusCode >= 500 && error === thrown)
      context.log.warn(
        { code: error.code, ...(error.cause instanceof Error ? { cause: error.cause.message } : {}) },
        error.message,
      )
    const headers: Record<string, string> = {}
    if (error.statusCode === 401) headers['www-authenticate'] = UNAUTHORIZED_CHALLENGE
    // Every 503 says when to ask again: its own delay, else the passing-trouble default.
    const retryAfter = error.details?.['retryAfterSeconds']
    if (typeof retryAfter === 'number') headers['retry-after'] = String(retryAfter)
    else if (error.statusCode === 503) headers['retry-after'] = String(UNAVAILABLE_RETRY_AFTER_SECONDS)
    return {
      status: error.statusCode,
      headers,
      body: { error: error.code, message: error.message, ...error.details },
    }
  }
  const answer = (status: number, body: Record<string, unknown>): ErrorAnswer => ({
    status,
    headers: {},
    body,
  })
  if (error.validation) {
    const fields = describeValidation(error.validationContext, error.validation as ValidationIssue[])
    return answer(400, {
      error: 'validation_failed',
      message: fields.map((f) => `${f.path} ${f.message}`).join('; '),
      fields,
    })
  }
  if (error.code === 'FST_ERR_CTP_BODY_TOO_LARGE') {
    const limit = context.bodyLimit
    return {
      ...answer(413, {
        error: 'payload_too_large',
        message: `The request body exceeds the limit of ${limit} bytes`,
        limitBytes: limit,
      }),
      drainBody: true,
    }
  }
  const known = error.code ? FASTIFY_CLIENT_ERRORS[error.code] : undefined
  if (known) return answer(known.status, { error: known.code, message: known.message })
  // A JSON syntax error from the body parser carries status 400 but its message quotes the body.
  if (error instanceof SyntaxError || (error.statusCode === 400 && error.message.includes('JSON'))) {
    return answer(400, { error: 'invalid_json', message: 'The body is not valid JSON' })
  }
  if (error.statusCode && error.statusCode >= 400 && error.statusCode < 500) {
    return answer(error.statusCode, { error: 'bad_request', message: 'The request is malformed' })
  }
  // Defence in depth: a PostgreSQL data exception (class 22) means input the schemas let
  // through but the database cannot hold; it is the caller's error, not the service's.
  const sqlState = (error as { code?: unknown }).code
  if (typeof sqlState === 'string' && /^22[0-9A-Z]{3}$/.test(sqlState)) {
    context.log.warn({ sqlState }, 'input rejected by the database')
    return answer(400, { error: 'validation_failed', message: 'A value is not acceptable' })
  }
  context.log.error({ err: error }, 'unhandled error')
  return answer(500, { error: 'internal_error', message: 'Internal error' })
}

export function installErrorHandlers(app: FastifyInstance): void {
  app.setErrorHandler((thrown: FastifyError | AppError, request, reply) => {
    const answer = errorAnswer(thrown, { log: request.log, bodyLimit: request.routeOptions.bodyLimit })
    if (answer.drainBody) {
      reply.removeHeader('connection')
      drainInBackground(request.raw)
    }
    return reply.code(answer.status).headers(answer.headers).send(answer.body)
  })

  app.setNotFoundHandler((request, reply) => {
    reply.code(404).send({
      error: 'not_found',
      message: `No route ${request.method} ${request.url.split('?')[0]!.slice(0, 200)}`,
    })
  })
}
