import { randomUUID } from 'node:crypto'
import type { IncomingHttpHeaders } from 'node:http'

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/

/** A caller's X-Request-Id is kept when it is sane, so traces can span services; else a new one. */
export function requestIdOf(headers: IncomingHttpHeaders): string {
  const given = headers['x-request-id']
  return typeof given === 'string' && REQUEST_ID.test(given) ? given : randomUUID()
}

/**
 * Every answer: no MIME sniffing (an error echoing input must never be read as HTML). Every
 * answer outside /docs (the API, /metrics, unknown paths): `no-store`, since most API answers
 * carry key material, secrets or tenant data, and one rule for all cannot miss a route added
 * later. /docs: a CSP that allows only the page's own scripts and styles (swagger-ui has no
 * inline script) and no framing.
 */
const NOSNIFF = { 'x-content-type-options': 'nosniff' }
export const API_HEADERS: Readonly<Record<string, string>> = { ...NOSNIFF, 'cache-control': 'no-store' }
export const DOCS_CSP =
  "default-src 'self'; script-src 'self'; script-src-attr 'none'; style-src 'self' 'unsafe-inline'; " +
  "img-src 'self' data:; font-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'self'; " +
  "form-action 'self'; frame-ancestors 'none'"
const DOCS_HEADERS = { ...NOSNIFF, 'content-security-policy': DOCS_CSP, 'x-frame-options': 'DENY' }

export const securityHeaders = (url: string): Readonly<Record<string, string>> =>
  url.startsWith('/docs') ? DOCS_HEADERS : API_HEADERS
