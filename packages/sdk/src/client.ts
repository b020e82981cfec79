import createClient, { type Client } from 'openapi-fetch'
import { KmsError, parseRetryAfter } from './errors.ts'
import type { paths } from './schema.ts'

const SDK_VERSION = '0.1.0'
const DEFAULT_TIMEOUT_MS = 30_000
const DEFAULT_RETRIES = 3
const DEFAULT_MAX_RETRY_DELAY_MS = 60_000
/** Backoff without Retry-After: 200 ms, 400 ms, 800 ms, ... (at most 5 s), half of it jitter. */
const BACKOFF_BASE_MS = 200
const BACKOFF_CAP_MS = 5_000
/** Statuses that say "not done, ask again later": the only ones retried. */
const RETRIED_STATUSES = new Set([429, 503])
/** The statuses fetch would follow (Fetch standard "redirect status"). */
const REDIRECT_STATUSES = new Set([301, 302, 303, 307, 308])
/** Statuses whose Response must not have a body. */
const NULL_BODY_STATUSES = new Set([101, 103, 204, 205, 304])

export interface KmsClientOptions {
  /** The service's origin, e.g. http://127.0.0.1:8080 (the document's paths start at /api/v1). */
  baseUrl: string
  /** An API key, sent as X-Api-Key. Give this or `token`. */
  apiKey?: string
  /** An access token, sent as `Authorization: Bearer`: a string, or a function asked before every attempt (so it can refresh). */
  token?: string | (() => string | Promise<string>)
  /** Per attempt, covering the answer's whole body; default 30 000. */
  timeoutMs?: number
  /** Further attempts after a 429 or 503 (never after anything else); default 3. */
  retries?: number
  /**
   * The longest wait before a retry; default 60 000. A Retry-After beyond it is not waited for:
   * the 429/503 is the answer (its KmsError carries retryAfterSeconds).
   */
  maxRetryDelayMs?: number
  /** Default globalThis.fetch. */
  fetch?: (request: Request) => Promise<Response>
  /** Added to the SDK's User-Agent (set outside browsers only: a browser sets its own). */
  userAgent?: string
  /**
   * Sees every prepared request (credentials set) before it is sent; a Response it returns is
   * the answer and nothing is sent (e.g. `kms --output-curl-string` captures the request).
   */
  intercept?: (request: Request) => Response | undefined | Promise<Response | undefined>
  /** For tests: how a retry waits (default setTimeout), and the clock Retry-After dates are read by. */
  sleep?: (ms: number, signal: AbortSignal) => Promise<void>
  now?: () => number
}

export interface KmsClient {
  /** The typed API: `client.api.POST('/api/v1/keys/{keyId}/data-key', { params, body })`. */
  readonly api: Client<paths, 'application/json'>
  readonly baseUrl: string
  /**
   * Sends a Request (absolute URL) with the client's credentials, timeout and retries, for what
   * the typed API does not suit (binary bodies). Resolves to any HTTP answer; rejects with a
   * KmsError (status 0) when there is none.
   */
  send(request: Request): Promise<Response>
}

function checkOptions(options: KmsClientOptions): void {
  let url: URL
  try {
    url = new URL(options.baseUrl)
  } catch {
    throw new TypeError('baseUrl must be an absolute http(s) URL, e.g. http://127.0.0.1:8080')
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw new TypeError(`baseUrl must be an http or https URL (is ${url.protocol})`)
  if (options.apiKey !== undefined && options.token !== undefined)
    throw new TypeError('give apiKey or token, not both')
  const positive = (name: string, value: number | undefined, min: number, max: number) => {
    if (value !== undefined && (!Number.isInteger(value) || value < min || value > max))
      throw new TypeError(`${name} must be an integer from ${min} to ${max} (is ${value})`)
  }
  positive('timeoutMs', options.timeoutMs, 1, 3_600_000)
  positive('retries', options.retries, 0, 10)
  positive('maxRetryDelayMs', options.maxRetryDelayMs, 0, 3_600_000)
}

const defaultSleep = (ms: number, signal: AbortSignal) =>
  new Promise<void>((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason)
    const timer = setTimeout(done, ms)
    function done() {
      signal.removeEventListener('abort', aborted)
      resolve()
    }
    function aborted() {
      clearTimeout(timer)
      reject(signal.reason)
    }
    signal.addEventListener('abort', aborted, { once: true })
  })

/** A browser sets its own User-Agent (and would preflight ours); Node, Deno and Bun take one. */
const isBrowser = () => /^Mozilla\//.test(globalThis.navigator?.userAgent ?? '')

const aborted = () =>
  new KmsError({ status: 0, code: 'aborted', message: 'The request was aborted by the caller' })

/**
 * A redirect answered instead of the API. A browser's manual mode hides the answer (status 0,
 * no Location); elsewhere the status and where it pointed (its origin only) are told.
 */
function unexpectedRedirect(response: Response): KmsError {
  let target = ''
  try {
    const location = response.headers.get('location')
    if (location) target = ` to ${new URL(location, response.url || undefined).origin}`
  } catch {}
  return new KmsError({
    status: response.type === 'opaqueredirect' ? 0 : response.status,
    code: 'unexpected_redirect',
    message:
      `The service answered with a redirect${response.status ? ` (${response.status})` : ''}${target}; ` +
      'the SDK does not follow redirects, so that the credentials and the body go nowhere else: set baseUrl to the address that serves the API',
  })
}

export function createKmsClient(options: KmsClientOptions): KmsClient {
  checkOptions(options)
  const baseUrl = new URL(options.baseUrl).origin
  const fetchImpl = options.fetch ?? ((request: Request) => globalThis.fetch(request))
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS
  const retries = options.retries ?? DEFAULT_RETRIES
  const maxRetryDelayMs = options.maxRetryDelayMs ?? DEFAULT_MAX_RETRY_DELAY_MS
  const sleep = options.sleep ?? defaultSleep
  const now = options.now ?? Date.now
  const userAgent = `kms-sdk-typescript/${SDK_VERSION}${options.userAgent ? ` ${options.userAgent}` : ''}`

  async function credentials(headers: Headers): Promise<void> {
    if (options.apiKey !== undefined) headers.set('x-api-key', options.apiKey)
    const token = typeof options.token === 'function' ? await options.token() : options.token
    if (token !== undefined) headers.set('authorization', `Bearer ${token}`)
    if (!isBrowser()) headers.set('user-agent', userAgent)
  }

  /** One attempt: the whole answer read within the timeout, as a Response openapi-fetch can parse. */
  async function attempt(template: Request): Promise<Response> {
    const timeout = AbortSignal.timeout(timeoutMs)
    // Never followed: fetch drops Authorization on a redirect to another origin but keeps X-Api-Key
    // and the body (a plaintext, a secret), so a redirect would hand them to whoever it names.
    const request = new Request(template.clone(), {
      signal: AbortSignal.any([template.signal, timeout]),
      redirect: 'manual',
    })
    await credentials(request.headers)
    const intercepted = await options.intercept?.(request)
    if (intercepted) return intercepted
    try {
      const response = await fetchImpl(request)
      if (response.type === 'opaqueredirect' || REDIRECT_STATUSES.has(response.status)) {
        await response.body?.cancel().catch(() => {})
        throw unexpectedRedirect(response)
      }
      const body = NULL_BODY_STATUSES.has(response.status) ? null : await response.arrayBuffer()
      return new Response(body, {
        status: response.status,
        statusText: response.statusText,
        headers: response.headers,
      })
    } catch (error) {
      if (error instanceof KmsError) throw error
      if (template.signal.aborted) throw aborted()
      if (timeout.aborted)
        throw new KmsError({
          status: 0,
          code: 'timeout',
          message: `No answer from ${baseUrl} within ${timeoutMs} ms`,
        })
      // The cause's own words (ECONNREFUSED, a TLS failure), never the request: it holds the credentials.
      const reason = error instanceof Error ? (error.cause instanceof Error ? error.cause : error) : undefined
      throw new KmsError({
        status: 0,
        code: 'unavailable',
        message: `Could not reach ${baseUrl}${reason ? `: ${reason.message}` : ''}`,
      })
    }
  }

  function retryDelayMs(response: Response, retry: number): number {
    const seconds = parseRetryAfter(response.headers.get('retry-after'), now())
    if (seconds !== undefined) return seconds * 1000
    const ceiling = Math.min(BACKOFF_CAP_MS, BACKOFF_BASE_MS * 2 ** retry)
    return ceiling / 2 + Math.random() * (ceiling / 2)
  }

  async function send(template: Request): Promise<Response> {
    for (let retry = 0; ; retry++) {
      const response = await attempt(template)
      if (!RETRIED_STATUSES.has(response.status) || retry >= retries) return response
      const delay = retryDelayMs(response, retry)
      if (delay > maxRetryDelayMs) return response
      try {
        await sleep(delay, template.signal)
      } catch {
        throw aborted()
      }
    }
  }

  const api = createClient<paths, 'application/json'>({ baseUrl, fetch: send })
  return { api, baseUrl, send }
}
