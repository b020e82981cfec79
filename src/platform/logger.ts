import { type Logger, pino } from 'pino'

/**
 * Paths that could carry a credential or key material, wherever they appear in a log object.
 * Handlers never log bodies, but a mistake must still not leak.
 */
export const REDACTED_PATHS = [
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

/** `destination` 2 sends the log to stderr (command-line tools keep stdout for results). */
export function createLogger(level: string, name: string, destination: 1 | 2 = 1): Logger {
  return pino(
    {
      name,
      level,
      redact: { paths: REDACTED_PATHS, censor: '[redacted]' },
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
