/**
 * Every error the API answers with is an AppError: a status, a stable snake_case code
 * clients can branch on, and a message for humans. Anything else becomes a 500 with no detail.
 */
export class AppError extends Error {
  readonly statusCode: number
  readonly code: string
  readonly details: Record<string, unknown> | undefined

  constructor(statusCode: number, code: string, message: string, details?: Record<string, unknown>) {
    super(message)
    this.statusCode = statusCode
    this.code = code
    this.details = details
  }
}

export const unauthorized = () =>
  new AppError(
    401,
    'unauthorized',
    'A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required',
  )

export const insufficientScope = (required: string, caller: 'apiKey' | 'member' = 'apiKey') =>
  new AppError(
    403,
    'insufficient_scope',
    caller === 'apiKey'
      ? `This API key lacks the scope ${required}`
      : `Your role in this tenant does not grant the scope ${required}`,
    { requiredScope: required },
  )

/** A route for people with an administrative role (spec section 5.3): refused to API keys whatever their scopes. */
export const forbidden = (allowedRoles: readonly string[]) =>
  new AppError(
    403,
    'forbidden',
    `Only a signed-in team member with the role ${allowedRoles.join(' or ')} may do this`,
    {
      allowedRoles,
    },
  )

export const notFound = (code: string, what: string) => new AppError(404, code, `${what} not found`)

export const serviceUnavailable = (code: string, message: string) => new AppError(503, code, message)

/**
 * Seconds a client is asked to wait (Retry-After) after a 503 that a passing condition caused: the
 * database reconnecting, an audit write that failed. Long enough for a reconnect to be tried,
 * short enough that a client does not wait long once the database is back.
 */
export const UNAVAILABLE_RETRY_AFTER_SECONDS = 2

/** The answer to a request the database could not serve for now: 503 with Retry-After. */
export const databaseUnavailable = () =>
  new AppError(503, 'database_unavailable', 'The database is unavailable; retry shortly', {
    retryAfterSeconds: UNAVAILABLE_RETRY_AFTER_SECONDS,
  })

/**
 * Set on the errors of queries made through connectDatabase (database.ts), so that a network
 * error is told apart from another client's (Redis, an outbound call) with the same code.
 */
const FROM_DATABASE = Symbol.for('kms.database-error')

export function markDatabaseError(error: unknown): void {
  if (typeof error !== 'object' || error === null || FROM_DATABASE in error) return
  try {
    Object.defineProperty(error, FROM_DATABASE, { value: true })
  } catch {
    // A frozen error stays unmarked; postgres.js's own decoration (below) still identifies it.
  }
}

function fromDatabase(error: object): boolean {
  // postgres.js adds `query` and `parameters` to the errors of its queries (connection.js queryError).
  return FROM_DATABASE in error || ('query' in error && 'parameters' in error)
}

/**
 * The connection to the database is gone or never came: a socket error, postgres.js's own
 * connection errors, or PostgreSQL ending the session (admin shutdown, crash, starting up, class
 * 08 connection exception). Everything a transaction did on it is lost with it.
 */
const CONNECTION_LOST_CODES = new Set([
  'ECONNRESET',
  'ECONNREFUSED',
  'ECONNABORTED',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENETDOWN',
  'ENOTFOUND',
  'EAI_AGAIN',
  'CONNECTION_CLOSED',
  'CONNECTION_ENDED',
  'CONNECTION_DESTROYED',
  'CONNECT_TIMEOUT',
  // admin_shutdown, crash_shutdown, cannot_connect_now
  '57P01',
  '57P02',
  '57P03',
])

/** SQLSTATEs of a database that is there but cannot serve for now. */
const BUSY_CODES = new Set([
  // query_canceled: the statement timeout (or a cancel) ended it
  '57014',
  // lock_not_available: lock_timeout passed
  '55P03',
])

function codeOf(error: unknown): string | undefined {
  const code = typeof error === 'object' && error !== null ? (error as { code?: unknown }).code : undefined
  return typeof code === 'string' ? code : undefined
}

/** The error means the connection it came on is gone (see CONNECTION_LOST_CODES); no origin check. */
export function isConnectionLost(error: unknown): boolean {
  const code = codeOf(error)
  return code !== undefined && (CONNECTION_LOST_CODES.has(code) || code.startsWith('08'))
}

/**
 * A database error that says nothing about the request and will pass: the connection lost or
 * refused, the server shutting down or out of connections (class 53: insufficient resources), a
 * statement or lock timeout. The answer is 503 database_unavailable with Retry-After, never 500.
 */
export function isDatabaseUnavailable(error: unknown): boolean {
  if (typeof error !== 'object' || error === null || !fromDatabase(error)) return false
  const code = codeOf(error)
  if (code === undefined) return false
  return isConnectionLost(error) || BUSY_CODES.has(code) || code.startsWith('53')
}

/** PostgreSQL SQLSTATE for unique_violation. */
const UNIQUE_VIOLATION = '23505'

/** PostgreSQL SQLSTATE for foreign_key_violation. */
const FOREIGN_KEY_VIOLATION = '23503'

function isViolation(error: unknown, sqlState: string, constraint?: string): boolean {
  if (typeof error !== 'object' || error === null) return false
  const e = error as { code?: unknown; constraint_name?: unknown }
  return e.code === sqlState && (constraint === undefined || e.constraint_name === constraint)
}

export const isUniqueViolation = (error: unknown, constraint?: string) =>
  isViolation(error, UNIQUE_VIOLATION, constraint)

/** A row that a concurrent transaction removed, or that still has dependants. */
export const isForeignKeyViolation = (error: unknown, constraint?: string) =>
  isViolation(error, FOREIGN_KEY_VIOLATION, constraint)

/** A 400 naming the one request field at fault, in the shape schema validation failures have. */
export const invalidField = (path: string, message: string) =>
  new AppError(400, 'validation_failed', `${path} ${message}`, { fields: [{ path, message }] })
