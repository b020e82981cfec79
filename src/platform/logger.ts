import { type Logger, pino } from 'pino'

/**
 * Paths that could carry a credential or key material, wherever they appear in a log object.
 * Handlers never log bodies, but a mistake must still not leak.
 */
const REDACTED_PATHS = [
  'req.headers["x-api-key"]',
  'req.headers.authorization',
  'req.headers.cookie',
  'res.headers["set-cookie"]',
  '*.apiKey',
  '*.key',
  '*.secret',
  '*.password',
  '*.plaintext',
  '*.token',
  '*.masterKey',
  'headers["x-api-key"]',
  'headers.authorization',
]

/**
 * Query parameters whose values are credentials or stand in for one: one-time link tokens
 * (invitations, sign-up, password reset), authorization codes and PKCE verifiers, tokens and token
 * hints, client secrets and assertions, passwords and one-time codes, SAML messages and the
 * state a client or IdP round-trips. Lower case; names are compared decoded and case-insensitively.
 */
const SECRET_QUERY_PARAMETERS: ReadonlySet<string> = new Set([
  'token',
  'code',
  'code_verifier',
  'state',
  'id_token',
  'id_token_hint',
  'access_token',
  'refresh_token',
  'logout_token',
  'login_hint_token',
  'client_secret',
  'client_assertion',
  'assertion',
  'subject_token',
  'device_code',
  'user_code',
  'password',
  'otp',
  'ticket',
  'secret',
  'api_key',
  'apikey',
  'samlresponse',
  'samlrequest',
  'relaystate',
])

const REDACTED = '[redacted]'

const parameterName = (raw: string): string => {
  if (!raw.includes('%') && !raw.includes('+')) return raw.toLowerCase()
  try {
    return decodeURIComponent(raw.replaceAll('+', ' ')).toLowerCase()
  } catch {
    return raw.toLowerCase()
  }
}

/**
 * The URL with the value of every secret query parameter replaced by `[redacted]` (the name stays,
 * so a log still shows which link or flow it was). A URL without a query is returned as it is.
 */
export function redactUrl(url: string): string {
  const query = url.indexOf('?')
  if (query === -1) return url
  const hash = url.indexOf('#', query)
  const end = hash === -1 ? url.length : hash
  const pairs = url.slice(query + 1, end).split('&')
  let changed = false
  for (let i = 0; i < pairs.length; i++) {
    const pair = pairs[i]!
    const eq = pair.indexOf('=')
    if (eq === -1) continue
    const raw = pair.slice(0, eq)
    if (!SECRET_QUERY_PARAMETERS.has(parameterName(raw))) continue
    pairs[i] = `${raw}=${REDACTED}`
    changed = true
  }
  return changed ? `${url.slice(0, query + 1)}${pairs.join('&')}${url.slice(end)}` : url
}

/** A secret parameter inside free text (an error message or stack quoting a URL). */
const SECRET_IN_TEXT = new RegExp(`([?&](?:${[...SECRET_QUERY_PARAMETERS].join('|')})=)[^&#\\s"'<>]*`, 'gi')
const redactText = (text: string): string =>
  text.includes('=') ? text.replace(SECRET_IN_TEXT, `$1${REDACTED}`) : text

/**
 * Serializers by log key, so no log line can carry a secret query parameter: `url` (the access
 * log and any other line naming a URL), `req` (Fastify's error lines, which log the request; it
 * would otherwise use its own serializer, with the raw URL), and `err` (messages and stacks that
 * quote a URL).
 */
const serializers = {
  url: (url: unknown) => (typeof url === 'string' ? redactUrl(url) : url),
  req: (req: {
    method?: string
    url?: string
    host?: string
    ip?: string
    socket?: { remotePort?: number }
  }) => ({
    method: req.method,
    url: typeof req.url === 'string' ? redactUrl(req.url) : req.url,
    host: req.host,
    remoteAddress: req.ip,
    remotePort: req.socket?.remotePort,
  }),
  err: (err: unknown) => {
    const out = pino.stdSerializers.err(err as Error) as unknown as Record<string, unknown>
    if (!out || typeof out !== 'object') return out
    for (const key of ['message', 'stack', 'url']) {
      const value = out[key]
      if (typeof value === 'string') out[key] = redactText(value)
    }
    return out
  },
}

/** `destination` 2 sends the log to stderr (command-line tools keep stdout for results). */
export function createLogger(level: string, name: string, destination: 1 | 2 = 1): Logger {
  return pino(
    {
      name,
      level,
      redact: { paths: REDACTED_PATHS, censor: REDACTED },
      serializers,
      base: { pid: process.pid },
      timestamp: pino.stdTimeFunctions.isoTime,
    },
    pino.destination({ fd: destination, sync: destination === 2 }),
  )
}

type LogMethod = 'trace' | 'debug' | 'info' | 'warn' | 'error' | 'fatal'

/**
 * Fastify gives every request a child logger carrying its request id. A pino child costs
 * ~1.5 µs (its bindings are serialised when it is made), and on the data plane nothing logs
 * for a request that succeeds (the access line is at debug level): this one makes the pino child
 * only when something is logged at an enabled level, with the same bindings and options.
 */
export class LazyChildLogger {
  readonly #parent: Logger
  readonly #bindings: Record<string, unknown>
  readonly #options: Record<string, unknown>
  #child: Logger | undefined

  constructor(parent: Logger, bindings: Record<string, unknown>, options: Record<string, unknown>) {
    this.#parent = parent
    this.#bindings = bindings
    this.#options = options
  }

  #logger(): Logger {
    this.#child ??= this.#parent.child(this.#bindings, this.#options)
    return this.#child
  }

  #log(method: LogMethod, args: unknown[]): void {
    // A per-request level (route option logLevel) is the child's own; then always build it.
    if (
      this.#child === undefined &&
      this.#options['level'] === undefined &&
      !this.#parent.isLevelEnabled(method)
    )
      return
    ;(this.#logger()[method] as (...a: unknown[]) => void)(...args)
  }

  get level(): string {
    return this.#child?.level ?? (this.#options['level'] as string | undefined) ?? this.#parent.level
  }
  set level(level: string) {
    this.#logger().level = level
  }
  isLevelEnabled(level: string): boolean {
    return this.#child || this.#options['level'] !== undefined
      ? this.#logger().isLevelEnabled(level)
      : this.#parent.isLevelEnabled(level)
  }
  trace(...args: unknown[]): void {
    this.#log('trace', args)
  }
  debug(...args: unknown[]): void {
    this.#log('debug', args)
  }
  info(...args: unknown[]): void {
    this.#log('info', args)
  }
  warn(...args: unknown[]): void {
    this.#log('warn', args)
  }
  error(...args: unknown[]): void {
    this.#log('error', args)
  }
  fatal(...args: unknown[]): void {
    this.#log('fatal', args)
  }
  silent(): void {}
  child(bindings: Record<string, unknown>, options?: Record<string, unknown>): Logger {
    return this.#logger().child(bindings, options)
  }
}
