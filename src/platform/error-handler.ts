import type { FastifyError, FastifyInstance } from 'fastify'
import { AppError } from './errors.ts'

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
  instancePath?: string
  message?: string
  params?: Record<string, unknown>
}

function describeValidation(context: string | undefined, issues: ValidationIssue[]) {
  return issues.slice(0, 20).map((issue) => {
    const extra = issue.params?.['additionalProperty']
    const path = `${context ?? 'body'}${issue.instancePath ?? ''}${extra ? `/${String(extra)}` : ''}`
    return { path, message: extra ? 'is not an allowed field' : (issue.message ?? 'is invalid') }
  })
}

export function installErrorHandlers(app: FastifyInstance): void {
  app.setErrorHandler((error: FastifyError | AppError, request, reply) => {
    if (error instanceof AppError) {
      if (error.statusCode >= 500) request.log.warn({ code: error.code }, error.message)
      if (error.statusCode === 401) reply.header('www-authenticate', 'ApiKey realm="kms", header="X-Api-Key"')
      const retryAfter = error.details?.['retryAfterSeconds']
      if (typeof retryAfter === 'number') reply.header('retry-after', String(retryAfter))
      return reply
        .code(error.statusCode)
        .send({ error: error.code, message: error.message, ...error.details })
    }
    if (error.validation) {
      const fields = describeValidation(error.validationContext, error.validation as ValidationIssue[])
      return reply.code(400).send({
        error: 'validation_failed',
        message: fields.map((f) => `${f.path} ${f.message}`).join('; '),
        fields,
      })
    }
    const known = error.code ? FASTIFY_CLIENT_ERRORS[error.code] : undefined
    if (known) return reply.code(known.status).send({ error: known.code, message: known.message })
    // A JSON syntax error from the body parser carries status 400 but its message quotes the body.
    if (error instanceof SyntaxError || (error.statusCode === 400 && error.message.includes('JSON'))) {
      return reply.code(400).send({ error: 'invalid_json', message: 'The body is not valid JSON' })
    }
    if (error.statusCode && error.statusCode >= 400 && error.statusCode < 500) {
      return reply.code(error.statusCode).send({ error: 'bad_request', message: 'The request is malformed' })
    }
    // Defence in depth: a PostgreSQL data exception (class 22) means input the schemas let
    // through but the database cannot hold; it is the caller's error, not the service's.
    const sqlState = (error as { code?: unknown }).code
    if (typeof sqlState === 'string' && /^22[0-9A-Z]{3}$/.test(sqlState)) {
      request.log.warn({ sqlState }, 'input rejected by the database')
      return reply.code(400).send({ error: 'validation_failed', message: 'A value is not acceptable' })
    }
    request.log.error({ err: error }, 'unhandled error')
    return reply.code(500).send({ error: 'internal_error', message: 'Internal error' })
  })

  app.setNotFoundHandler((request, reply) => {
    reply.code(404).send({
      error: 'not_found',
      message: `No route ${request.method} ${request.url.split('?')[0]!.slice(0, 200)}`,
    })
  })
}
