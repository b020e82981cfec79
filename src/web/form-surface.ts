import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { isDatabaseUnavailable, UNAVAILABLE_RETRY_AFTER_SECONDS } from '../platform/errors.ts'
import { type PageSettings, pageContext, pageHeaders, renderErrorPage } from './layout.ts'

export function pageError(statusCode: number, message: string): Error & { statusCode: number } {
  return Object.assign(new Error(message), { statusCode })
}

/** Sends an HTML error page in the request's language, with the pages' headers. */
export type ErrorPageSender = (
  request: FastifyRequest,
  reply: FastifyReply,
  status: number,
  message: string,
) => FastifyReply

/**
 * What every HTML surface that takes browser forms needs (the sign-in pages, the SAML ACS): only
 * url-encoded forms, at most `maxFields` fields and no repeated one, parsed into a plain record;
 * every error an HTML page with a 4xx (a 500 page only for a real failure, which is logged). The
 * words for the surface's own 413 and 415 come from the caller.
 */
export function installFormHandling(
  app: FastifyInstance,
  options: {
    pageSettings: PageSettings
    bodyLimit: number
    maxFields: number
    /** The log line of a 500. */
    failure: string
    tooLarge: string
    notAForm: string
  },
): ErrorPageSender {
  app.removeAllContentTypeParsers()
  app.addContentTypeParser(
    'application/x-www-form-urlencoded',
    { parseAs: 'string', bodyLimit: options.bodyLimit },
    (_request, body, done) => {
      const form: Record<string, string> = Object.create(null)
      let count = 0
      for (const [name, value] of new URLSearchParams(body as string)) {
        if (++count > options.maxFields || name in form)
          return done(pageError(400, 'The form is malformed.'), undefined)
        form[name] = value
      }
      done(null, form)
    },
  )
  const send: ErrorPageSender = (request, reply, status, message) =>
    reply
      .code(status)
      .headers(pageHeaders(options.pageSettings))
      .send(renderErrorPage(pageContext(undefined, request.headers['accept-language']), message))
  app.setErrorHandler((error: Error & { statusCode?: number }, request, reply) => {
    // The database unavailable for now (or another passing 503): a page saying to try again, and
    // Retry-After, not a 500 (platform/errors.ts isDatabaseUnavailable).
    if (isDatabaseUnavailable(error) || error.statusCode === 503) {
      request.log.warn({ err: { message: error.message } }, 'page unavailable for now: 503')
      reply.header('retry-after', String(UNAVAILABLE_RETRY_AFTER_SECONDS))
      return send(request, reply, 503, 'The service is unavailable for a moment. Try again shortly.')
    }
    const status =
      error.statusCode && error.statusCode >= 400 && error.statusCode < 500 ? error.statusCode : 500
    if (status === 500) request.log.error({ err: { message: error.message } }, options.failure)
    const message =
      status === 413
        ? options.tooLarge
        : status === 415
          ? options.notAForm
          : status === 500
            ? 'Something went wrong on our side. Try again.'
            : error.message
    return send(request, reply, status, message)
  })
  return send
}
