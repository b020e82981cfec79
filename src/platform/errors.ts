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

/** PostgreSQL SQLSTATE for unique_violation. */
export const UNIQUE_VIOLATION = '23505'

/** PostgreSQL SQLSTATE for foreign_key_violation. */
export const FOREIGN_KEY_VIOLATION = '23503'

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
