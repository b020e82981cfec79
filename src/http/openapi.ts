import { isDeepStrictEqual } from 'node:util'

/**
 * Shapes the OpenAPI document @fastify/swagger builds from the TypeBox route schemas, which stay
 * the single source of truth. What this adds:
 *
 * - Named components. A schema that carries `$id` (KeyView, ErrorResponse, EncryptRequest, ...)
 *   is emitted once under `components.schemas.<$id>` and referenced with `$ref` wherever a route
 *   uses it. @fastify/swagger drops `$id` at the root of a body or response schema and names the
 *   nested ones `def-N`, so `routeTransform` renames `$id` to `x-schema-id` in the copy it hands
 *   to the generator and `documentTransform` does the hoisting itself, the same way at any depth.
 * - `examples[0]` of a body or response schema becomes the media type's `example`, which
 *   Swagger UI's "Try it out" starts from and linters validate against the schema; raw media
 *   types (application/octet-stream) are `type: string, format: binary`.
 * - `servers`: the API is served from the document's own origin.
 * - Hints for clients: an enum without `type` (TypeBox 1.x `Type.Enum`) gets the type of its
 *   values, and the serializer-only `format: 'unsafe'` (crypto-schemas.ts) is dropped.
 */

const SCHEMA_ID = 'x-schema-id'
const COMPONENT_PREFIX = '#/components/schemas/'

export type Json = Record<string, unknown>

const isObject = (value: unknown): value is Json =>
  value !== null && typeof value === 'object' && !Array.isArray(value)

/** A copy with `$id` renamed to `x-schema-id`; the route's own schema object is left untouched. */
function markNamed(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(markNamed)
  if (!isObject(value)) return value
  const out: Json = {}
  for (const [key, field] of Object.entries(value)) {
    if (key === '$id' && typeof field === 'string' && !field.startsWith('#')) out[SCHEMA_ID] = field
    else out[key] = markNamed(field)
  }
  return out
}

/** @fastify/swagger's `transform`: runs once per route when the document is built. */
export function routeTransform({ schema, url }: { schema: unknown; url: string }): {
  schema: Json
  url: string
} {
  return { schema: markNamed(schema) as Json, url }
}

/** Post-order rewrite: children first, so a named schema inside a named schema is a `$ref` in both. */
function rewrite(value: unknown, visit: (node: Json) => Json): unknown {
  if (Array.isArray(value)) return value.map((item) => rewrite(item, visit))
  if (!isObject(value)) return value
  const out: Json = {}
  for (const [key, field] of Object.entries(value)) {
    // Examples are data, not schemas: a property called `format` or `$id` in one stays as is.
    out[key] = key === 'example' || key === 'examples' ? field : rewrite(field, visit)
  }
  return visit(out)
}

function clientHints(node: Json): Json {
  const out = { ...node }
  if (out['format'] === 'unsafe') delete out['format']
  const values = out['enum']
  if (out['type'] === undefined && Array.isArray(values) && values.length > 0) {
    const types = new Set(values.map((v) => (v === null ? 'null' : typeof v)))
    if (types.size === 1 && (types.has('string') || types.has('number') || types.has('boolean'))) {
      out['type'] = [...types][0]
    }
  }
  return out
}

/** What each error status of the API answers (src/platform/errors.ts, error-handler.ts). */
const ERROR_EXAMPLES: Record<string, Json> = {
  '401': {
    error: 'unauthorized',
    message: 'A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required',
  },
  '403': {
    error: 'insufficient_scope',
    message: 'This API key lacks the scope keys:write',
    requiredScope: 'keys:write',
  },
  '404': { error: 'key_not_found', message: 'Key not found' },
  '409': {
    error: 'key_state_conflict',
    message: 'A key in state Revoked cannot be used to encrypt',
    state: 'Revoked',
  },
  '413': {
    error: 'payload_too_large',
    message: 'The request body exceeds the limit of 1048576 bytes',
    limitBytes: 1048576,
  },
  '415': {
    error: 'unsupported_media_type',
    message:
      'Content-Type must be application/json (/encrypt and /decrypt also take application/octet-stream)',
  },
  '429': {
    error: 'crypto_busy',
    message: 'Too many cryptographic operations of this tenant are waiting (64); retry shortly',
    retryAfterSeconds: 1,
  },
  '503': {
    error: 'audit_unavailable',
    message: 'The audit log cannot be written; the operation was not performed',
  },
}

/**
 * The example of a media type: the first `examples` entry of its (named or inline) schema; and
 * a raw media type's schema says it is bytes.
 */
function describeMedia(doc: Json): void {
  const paths = isObject(doc['paths']) ? doc['paths'] : {}
  for (const item of Object.values(paths)) {
    if (!isObject(item)) continue
    for (const operation of Object.values(item)) {
      if (!isObject(operation)) continue
      const bodies: [string, unknown][] = [['request', operation['requestBody']]]
      if (isObject(operation['responses'])) bodies.push(...Object.entries(operation['responses']))
      for (const [status, body] of bodies) {
        if (!isObject(body) || !isObject(body['content'])) continue
        for (const [type, media] of Object.entries(body['content'])) {
          const schema = isObject(media) ? media['schema'] : undefined
          if (!isObject(media) || !isObject(schema)) continue
          // Raw bodies (application/octet-stream) carry no schema at run time (Ajv would refuse a
          // Buffer as a string); the document says what they are, or generators type them unknown.
          if (!type.includes('json') && schema['type'] === undefined) {
            media['schema'] = { type: 'string', format: 'binary', ...schema }
          }
          // Error answers share one schema; the example shows what this status really carries. It
          // replaces the example @fastify/swagger already copied from the shared schema's
          // `examples` (one for every status: 401, 403, 409, ... all read "Key not found").
          const errorExample = ERROR_EXAMPLES[status]
          if (errorExample !== undefined && schema[SCHEMA_ID] === 'ErrorResponse') {
            media['example'] = errorExample
            continue
          }
          if (media['example'] !== undefined) continue
          const examples = schema['examples']
          if (Array.isArray(examples) && examples.length > 0) media['example'] = examples[0]
        }
      }
    }
  }
}

/**
 * Moves every schema marked with a name into `components.schemas` and leaves a `$ref` behind,
 * with the use's own description beside it (OpenAPI 3.1 allows it). Uses may differ only in their
 * description: two different schemas under one name are a programming error, so the document
 * fails to build, and the OpenAPI tests with it.
 */
function hoistNamed(doc: Json): Json {
  const components = isObject(doc['components']) ? doc['components'] : {}
  const schemas: Json = isObject(components['schemas']) ? { ...components['schemas'] } : {}
  const hoisted = new Map<string, { shape: Json; descriptions: Set<string | undefined> }>()
  const rewritten = rewrite(doc, (node) => {
    const named = clientHints(node)
    const name = named[SCHEMA_ID]
    if (typeof name !== 'string') return named
    delete named[SCHEMA_ID]
    const { description, ...shape } = named
    const known = hoisted.get(name)
    if (known === undefined) hoisted.set(name, { shape, descriptions: new Set([description as string]) })
    else if (isDeepStrictEqual(known.shape, shape)) known.descriptions.add(description as string)
    else throw new Error(`Two different schemas are named ${name} in the OpenAPI document`)
    // A use's description (for a response, the status's meaning) stays beside the reference.
    return description === undefined
      ? { $ref: `${COMPONENT_PREFIX}${name}` }
      : { $ref: `${COMPONENT_PREFIX}${name}`, description }
  }) as Json
  for (const [name, { shape, descriptions }] of hoisted) {
    // The component carries a description only when every use has the same one.
    const [only] = descriptions
    schemas[name] = descriptions.size === 1 && only !== undefined ? { ...shape, description: only } : shape
  }
  return { ...rewritten, components: { ...components, schemas } }
}

/** @fastify/swagger's `transformObject`: the finished document, once per process (it is cached). */
export function documentTransform(document: Json): Json {
  // Examples are read from the schemas before they become `$ref`s.
  describeMedia(document)
  const out = hoistNamed(document)
  return { ...out, servers: [{ url: '/', description: 'This service (the paths carry the /api/v1 prefix)' }] }
}
