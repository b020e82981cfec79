import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify'
import { esc } from '../web/layout.ts'
import type { ConsoleFiles } from './console-files.ts'

/**
 * The console's Content Security Policy: its own scripts and styles only (Vite emits no inline
 * script), API calls to this origin only, never framed. React sets inline styles through the
 * CSSOM, which `style-src` does not govern; no `style` attribute is in the served HTML.
 */
export const CONSOLE_CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; font-src 'self'; " +
  "connect-src 'self'; manifest-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

const HEADERS = {
  'content-security-policy': CONSOLE_CSP,
  'x-frame-options': 'DENY',
  'referrer-policy': 'no-referrer',
  'cross-origin-opener-policy': 'same-origin',
}
/** Hashed file names (Vite's `assets/name-<hash>.ext`) never change content: cached for a year. */
const IMMUTABLE = 'public, max-age=31536000, immutable'
/** index.html names the current hashed files: always revalidated, so a new build is seen at once. */
const REVALIDATE = 'no-cache'
/** A path the console's files may have: no dot segments, no backslash, a bounded length. */
const FILE_PATH = /^(?:[A-Za-z0-9_-][A-Za-z0-9._-]*\/){0,4}[A-Za-z0-9_-][A-Za-z0-9._-]*$/

const NOT_BUILT = `<!DOCTYPE html><html lang="en"><meta charset="utf-8"><title>Console not built</title>
<h1>The console is not built</h1><p>Run <code>npm run console:build</code> (or <code>npm start</code>, which builds it), then reload.</p></html>`

function notFoundPage(path: string): string {
  return `<!DOCTYPE html><html lang="en"><meta charset="utf-8"><title>Not found</title>
<h1>Not found</h1><p>The console has no file <code>${esc(path.slice(0, 200))}</code>. <a href="/console/">Open the console</a>.</p></html>`
}

/**
 * GET /console/*: the built files. A hashed asset is `immutable`; any other path under /console/
 * that is not a file is a route of the single-page application, answered with index.html
 * (`no-cache`), so a deep link or a reload of any page works. A missing asset (an old hashed
 * name after a new build) is a 404 page, never index.html, so a stale tab fails visibly.
 */
export function consoleRoutes(deps: { files: ConsoleFiles }): FastifyPluginAsync {
  return async (app) => {
    const sendFile = (
      request: FastifyRequest,
      reply: FastifyReply,
      file: NonNullable<ConsoleFiles['index']>,
      cache: string,
    ) => {
      reply.headers(HEADERS).header('cache-control', cache).header('etag', file.etag)
      if (request.headers['if-none-match'] === file.etag) return reply.code(304).send()
      return reply.type(file.contentType).send(file.body)
    }
    const serve = async (request: FastifyRequest<{ Params: { '*'?: string } }>, reply: FastifyReply) => {
      const path = request.params['*'] ?? ''
      const file = FILE_PATH.test(path) ? deps.files.file(path) : undefined
      if (file) return sendFile(request, reply, file, path.startsWith('assets/') ? IMMUTABLE : REVALIDATE)
      if (path.startsWith('assets/'))
        return reply.code(404).headers(HEADERS).type('text/html; charset=utf-8').send(notFoundPage(path))
      const index = deps.files.index
      if (!index)
        return reply
          .code(503)
          .headers(HEADERS)
          .header('retry-after', '30')
          .type('text/html; charset=utf-8')
          .send(NOT_BUILT)
      return sendFile(request, reply, index, REVALIDATE)
    }
    app.get('/console', { schema: { hide: true } }, (_request, reply) => reply.redirect('/console/', 308))
    app.get('/console/*', { schema: { hide: true } }, serve)
  }
}
