import type { components } from './schema.ts'

/** The service's error codes as its OpenAPI document types them (`ErrorResponse.error`). */
export type ServiceErrorCode = components['schemas']['ErrorResponse']['error']

/**
 * Codes the SDK gives when there is no answer from the service (status 0): `unavailable` (the
 * connection failed), `timeout` (an attempt took longer than timeoutMs), `aborted` (the caller's
 * signal), `invalid_response` (an answer that is not the API's JSON where JSON was due); and
 * `unexpected_redirect` (the answer was a redirect, never followed: status is the 3xx, or 0 in a
 * browser, which hides it).
 */
export type ClientErrorCode =
  | 'unavailable'
  | 'timeout'
  | 'aborted'
  | 'invalid_response'
  | 'unexpected_redirect'

/** One entry of a 400's `fields`: where, and what is allowed. */
export interface FieldError {
  path: string
  message: string
  allowedValues?: unknown[]
}

interface KmsErrorInit {
  status: number
  code: ServiceErrorCode | ClientErrorCode
  message: string
  fields?: FieldError[] | undefined
  retryAfterSeconds?: number | undefined
  requestId?: string | undefined
  details?: Record<string, unknown> | undefined
}

/**
 * An error answer of the service (`{error, message, ...details}`) or the lack of one (status 0).
 * Its message is the service's message or the SDK's own words: never a credential (the client
 * never writes its API key or token into one).
 */
export class KmsError extends Error {
  override readonly name = 'KmsError'
  readonly status: number
  readonly code: ServiceErrorCode | ClientErrorCode
  /** A 400's failing fields (empty otherwise). */
  readonly fields: readonly FieldError[]
  /** From the answer's Retry-After (429, 503), in seconds. */
  readonly retryAfterSeconds: number | undefined
  /** The service's X-Request-Id, to quote to its operator. */
  readonly requestId: string | undefined
  /** The error body's other members (e.g. limitBytes of a 413). */
  readonly details: Readonly<Record<string, unknown>>

  constructor(init: KmsErrorInit) {
    super(init.message)
    this.status = init.status
    this.code = init.code
    this.fields = init.fields ?? []
    this.retryAfterSeconds = init.retryAfterSeconds
    this.requestId = init.requestId
    this.details = init.details ?? {}
  }
}

/**
 * Retry-After as seconds: a delay in seconds or an HTTP date (relative to `nowMs`); undefined
 * when absent or unreadable. A date in the past is 0.
 */
export function parseRetryAfter(value: string | null, nowMs: number): number | undefined {
  if (value === null) return undefined
  const text = value.trim()
  if (/^\d+$/.test(text)) return Number(text)
  const date = Date.parse(text)
  if (Number.isNaN(date)) return undefined
  return Math.max(0, Math.ceil((date - nowMs) / 1000))
}

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value)

function fieldErrors(value: unknown): FieldError[] | undefined {
  if (!Array.isArray(value)) return undefined
  return value.filter(
    (f): f is FieldError => isRecord(f) && typeof f['path'] === 'string' && typeof f['message'] === 'string',
  )
}

/**
 * The KmsError of an error answer. `body` is what openapi-fetch made of it: the parsed JSON, or
 * the text when it was not JSON (a proxy's HTML page), or undefined for an empty body.
 */
export function errorFromResponse(response: Response, body: unknown, nowMs = Date.now()): KmsError {
  const status = response.status
  const requestId = response.headers.get('x-request-id') ?? undefined
  const headerRetry = parseRetryAfter(response.headers.get('retry-after'), nowMs)
  if (!isRecord(body) || typeof body['error'] !== 'string') {
    return new KmsError({
      status,
      code: status === 429 ? 'rate_limited' : status === 503 ? 'unavailable' : `http_${status}`,
      message: `The service answered ${status} without the API's error body`,
      retryAfterSeconds: headerRetry,
      requestId,
    })
  }
  const { error, message, fields, ...details } = body
  const bodyRetry = details['retryAfterSeconds']
  return new KmsError({
    status,
    code: error,
    message: typeof message === 'string' ? message : `The service answered ${status} (${error})`,
    fields: fieldErrors(fields),
    retryAfterSeconds: headerRetry ?? (typeof bodyRetry === 'number' ? bodyRetry : undefined),
    requestId,
    details,
  })
}

/** What an openapi-fetch call resolves to (either member absent for a 204). */
interface FetchResult {
  data?: unknown
  error?: unknown
  response: Response
}

/**
 * The data of an openapi-fetch answer, or its KmsError thrown:
 * `const key = await dataOf(client.api.POST('/api/v1/keys', { body }))`.
 * A 2xx without a body (204) gives undefined.
 */
export async function dataOf<R extends FetchResult>(
  result: R | Promise<R>,
): Promise<Exclude<R['data'], undefined>> {
  const { data, error, response } = await result
  if (response.ok) return data as Exclude<R['data'], undefined>
  throw errorFromResponse(response, error)
}
