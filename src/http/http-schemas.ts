import { type TSchema, Type } from 'typebox'
import { invalidField } from '../platform/errors.ts'
import { BOUNDED_JSON_KEYWORD, type JsonBounds, LOWERCASE_KEYWORD, PATTERN_MESSAGE } from './validation.ts'

/** The one error body of the API: `{error, message, ...details}`. */
const ErrorSchema = Type.Object(
  {
    error: Type.String({ description: 'Stable snake_case error code' }),
    message: Type.String({ description: 'Human-readable explanation' }),
  },
  {
    $id: 'ErrorResponse',
    additionalProperties: true,
    title: 'Error',
    examples: [{ error: 'not_found', message: 'Key not found' }],
  },
)

const ERROR_DESCRIPTIONS: Record<number, string> = {
  400: 'Invalid request (validation_failed, invalid_json, ...)',
  401: 'Missing, unknown, expired or revoked API key or access token (unauthorized)',
  403: 'The caller lacks the scope (insufficient_scope) or the role (forbidden)',
  404: 'Not found, or belongs to another tenant',
  409: 'Conflict with the current state',
  413: 'Body too large (payload_too_large)',
  415: 'Content-Type is not one the route takes (unsupported_media_type)',
  429: 'Too many requests (rate_limited); Retry-After says when to try again',
  503: 'A dependency needed to perform and audit the operation is unavailable',
}

/** A 400: the error body with the fields that failed and why. */
const ValidationErrorSchema = Type.Object(
  {
    error: Type.String({ description: 'validation_failed, invalid_json, ...' }),
    message: Type.String({ description: 'Human-readable explanation' }),
    fields: Type.Optional(
      Type.Array(
        Type.Object(
          {
            path: Type.String({ description: 'Where, e.g. body/keyType' }),
            message: Type.String({ description: 'What is wrong, and what is allowed' }),
          },
          { additionalProperties: true },
        ),
      ),
    ),
  },
  {
    $id: 'ValidationError',
    additionalProperties: true,
    title: 'ValidationError',
    examples: [
      {
        error: 'validation_failed',
        message: 'body/name must NOT have fewer than 1 characters',
        fields: [{ path: 'body/name', message: 'must NOT have fewer than 1 characters' }],
      },
    ],
  },
)

/** Error responses a route can give, for its schema (serialization and the OpenAPI document). */
export function errorResponses(...statuses: number[]): Record<number, TSchema> {
  const out: Record<number, TSchema> = {}
  for (const status of [400, 401, ...statuses]) {
    const schema = status === 400 ? ValidationErrorSchema : ErrorSchema
    out[status] = { ...schema, description: ERROR_DESCRIPTIONS[status] ?? 'Error' }
  }
  return out
}

/**
 * Names a schema for the OpenAPI document: `components.schemas.<id>`, referenced by `$ref` where
 * it is used (http/openapi.ts). Sets `$id` in place, so the definition stays as it is.
 */
export function nameSchema(schema: TSchema, id: string): void {
  ;(schema as { $id?: string }).$id = id
}

/** The canonical hyphenated form only: ajv's `uuid` format also takes `urn:uuid:` prefixes. */
export const Uuid = (description: string) =>
  Type.String({
    format: 'uuid',
    pattern: '^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$',
    // Either case is accepted; routes see the canonical lower case (validation.ts).
    [LOWERCASE_KEYWORD]: true,
    description,
  })

export const Timestamp = (description: string) => Type.String({ format: 'date-time', description })

/**
 * The Date of a validated `date-time` string. RFC 3339 allows values JavaScript and PostgreSQL
 * cannot hold (a leap second, year 0): those are a 400, not a failure further down.
 */
export function toDate(value: string, field: string): Date {
  const date = new Date(value)
  const year = date.getUTCFullYear()
  if (Number.isNaN(date.getTime()) || year < 1 || year > 9999) {
    throw invalidField(field, 'is not a representable timestamp')
  }
  return date
}

/**
 * A bounded string: every string in a request has a length limit. NUL is refused because
 * PostgreSQL text cannot hold it, and so are unpaired UTF-16 surrogates (`"\\udfff"` in JSON):
 * they have no UTF-8 form, so the text column would store U+FFFD while the jsonb of the audit
 * record refuses the escape outright (the write, and so the request, would fail with 503).
 * Ajv compiles patterns with the `u` flag, where a surrogate range matches lone surrogates only.
 */
export const Text = (maxLength: number, description: string, minLength = 0) =>
  Type.String({
    minLength,
    maxLength,
    pattern: '^[^\\u0000\\ud800-\\udfff]*$',
    [PATTERN_MESSAGE]: 'must not contain NUL or an unpaired UTF-16 surrogate',
    description,
  })

/** Printable text: no control characters in names and labels, which end up in UIs and logs. */
export const Printable = (maxLength: number, description: string) =>
  Type.String({
    minLength: 1,
    maxLength,
    pattern: '^[^\\u0000-\\u001f\\u007f\\ud800-\\udfff]+$',
    [PATTERN_MESSAGE]: 'must not contain control characters or an unpaired UTF-16 surrogate',
    description,
  })

export const IdParams = Type.Object({ id: Uuid('Resource id') }, { additionalProperties: false })

export const PageQuery = {
  limit: Type.Integer({ minimum: 1, maximum: 1000, default: 100, description: 'Items per page' }),
  offset: Type.Integer({ minimum: 0, maximum: 1_000_000, default: 0, description: 'Items to skip' }),
}

/**
 * The bounds of a free-form JSON object in a request (one whose properties the schema does not
 * list, such as a JWK): every such object must carry them (validation.ts BOUNDED_JSON_KEYWORD),
 * so a 10,000-level or million-key value is a 400 naming the bound, not a failure further on.
 */
export const boundedJson = (bounds: JsonBounds) => ({ [BOUNDED_JSON_KEYWORD]: bounds })
