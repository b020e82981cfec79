import type { FastifyInstance } from 'fastify'
import type { Logger } from 'pino'
import { installFormHandling, pageError } from './form-surface.ts'
import { IDENTITY_CSS, type PageSettings, pageHeaders } from './layout.ts'

/** A page's form is a few fields; anything larger is not one. */
const FORM_LIMIT_BYTES = 16 * 1024
const MAX_FIELDS = 20

/**
 * The HTML pages of every module (sign-in, one-time links, invitations, sign-up), one surface
 * beside the JSON API: it parses only url-encoded forms, answers every error as an HTML page
 * (never JSON, never a 5xx for bad input) and sends the pages' security headers on every answer.
 */
export function pageSurface(deps: {
  logger: Logger
  pageSettings: PageSettings
  /** The modules' page routes, registered in this order. */
  pages: ReadonlyArray<(app: FastifyInstance) => Promise<void>>
}) {
  return async (app: FastifyInstance) => {
    // Pages are not part of the JSON API's OpenAPI document.
    app.addHook('onRoute', (route) => {
      route.schema = { ...(route.schema ?? {}), hide: true }
    })
    const send = installFormHandling(app, {
      pageSettings: deps.pageSettings,
      bodyLimit: FORM_LIMIT_BYTES,
      maxFields: MAX_FIELDS,
      failure: 'sign-in page failed',
      tooLarge: 'The form is too large.',
      notAForm: 'Forms must be sent as application/x-www-form-urlencoded.',
    })
    // Bodies with a POST route must be forms; an empty or missing body is a malformed form.
    app.addHook('preValidation', async (request) => {
      if (request.method === 'POST' && (request.body === undefined || request.body === null)) {
        throw pageError(400, 'The form is malformed.')
      }
    })
    // Every answer of this surface, redirects included, carries the pages' security headers.
    const { 'content-type': _html, ...securityHeaders } = pageHeaders(deps.pageSettings)
    app.addHook('onRequest', (_request, reply, done) => {
      reply.headers(securityHeaders)
      done()
    })
    app.get('/assets/identity.css', async (_request, reply) =>
      reply
        .header('content-type', 'text/css; charset=utf-8')
        .header('cache-control', 'public, max-age=3600')
        .send(IDENTITY_CSS),
    )
    for (const pages of deps.pages) await app.register(pages)
    // Anything else under the pages' paths (another method, a step that does not exist): a page too.
    for (const url of ['/sign-in/*', '/invitations/*', '/signup/*', '/partners/*']) {
      app.all(url, async (request, reply) => send(request, reply, 404, 'This page does not exist.'))
    }
    // The one-time links' pages answer GET and POST; another method gets a page as well, not JSON.
    for (const url of ['/forgot-password', '/reset-password', '/set-up-account', '/confirm-sign-up']) {
      app.route({
        method: ['PUT', 'PATCH', 'DELETE'],
        url,
        handler: async (request, reply) =>
          send(request, reply, 405, 'This page does not accept that method.'),
      })
    }
  }
}
