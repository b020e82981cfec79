import { _, Ajv, type KeywordCxt, type Options, str } from 'ajv'
import addFormatsModule from 'ajv-formats'
import type { FastifySchemaCompiler } from 'fastify'

type DataContext = { parentData: unknown; parentDataProperty: string | number }

/**
 * A schema keyword that lower-cases a valid string in place. Identifiers such as UUIDs are
 * case-insensitive on input but stored and compared (and bound into AADs) in one form; folding
 * them at validation means no code path can meet the client's spelling.
 */
export const LOWERCASE_KEYWORD = 'x-lowercase'

/** What a 400 says when a string fails its pattern, instead of quoting the regular expression. */
export const PATTERN_MESSAGE = 'x-pattern-message'

/**
 * A schema keyword bounding a free-form JSON value (an object whose properties the schema does
 * not list, such as a JWK): its nesting depth, its number of object keys and array items, and
 * the UTF-16 length of its strings and keys together. Without it a 10,000-level object passes
 * validation and fails later (a RangeError in structured cloning to the crypto pool: a 500).
 */
export const BOUNDED_JSON_KEYWORD = 'x-bounded-json'

export interface JsonBounds {
  /** Deepest nesting: the value itself is depth 1, `{a: {}}` depth 2. */
  depth: number
  /** Object keys and array items, counted over the whole value. */
  members: number
  /** UTF-16 code units of every string and key. */
  chars: number
}

// ajv-formats is CommonJS; its default export arrives wrapped under native ESM.
const addFormats = ((addFormatsModule as unknown as { default?: unknown }).default ?? addFormatsModule) as (
  ajv: Ajv,
) => Ajv

/** Why a value breaks the bounds, or undefined. Iterative: the depth it checks is the attacker's. */
function exceedsBounds(value: unknown, bounds: JsonBounds): string | undefined {
  let members = 0
  let chars = 0
  const stack: Array<{ value: unknown; depth: number }> = [{ value, depth: 1 }]
  while (stack.length > 0) {
    const { value: node, depth } = stack.pop()!
    if (typeof node === 'string') {
      chars += node.length
    } else if (node !== null && typeof node === 'object') {
      if (depth > bounds.depth) return `must be nested at most ${bounds.depth} levels deep`
      const entries = Array.isArray(node) ? node : Object.keys(node)
      members += entries.length
      if (members > bounds.members) return `must have at most ${bounds.members} keys and items in all`
      if (Array.isArray(node)) {
        for (const item of node) stack.push({ value: item, depth: depth + 1 })
      } else {
        for (const key of entries as string[]) {
          chars += key.length
          stack.push({ value: (node as Record<string, unknown>)[key], depth: depth + 1 })
        }
      }
    }
    if (chars > bounds.chars) return `must have at most ${bounds.chars} characters of keys and strings`
  }
  return undefined
}

function makeAjv(options: Options): Ajv {
  const ajv = new Ajv({
    allErrors: false,
    // Unknown fields are an error, never silently dropped.
    removeAdditional: false,
    useDefaults: true,
    strict: false,
    // Errors carry their schema, so the error handler can say what is allowed (enumerations,
    // UUIDs). Only the error path reads it.
    verbose: true,
    // Serializer hint on response schemas (crypto-schemas.ts Base64Output); never on input.
    formats: { unsafe: true },
    ...options,
  })
  addFormats(ajv)
  // maxLength and minLength count UTF-16 code units (String.length) instead of walking the string
  // for surrogate pairs: 14% of a 1 MB encrypt's CPU went to that walk. Only stricter, never
  // looser. ajv's own `unicode: false` option does this but is deprecated (and prints a line that
  // is not JSON at every start), so the two keywords are redefined with the same errors.
  ajv.removeKeyword('maxLength')
  ajv.removeKeyword('minLength')
  ajv.addKeyword({
    keyword: ['maxLength', 'minLength'],
    type: 'string',
    schemaType: 'number',
    error: {
      message: ({ keyword, schemaCode }) =>
        str`must NOT have ${keyword === 'maxLength' ? 'more' : 'fewer'} than ${schemaCode} characters`,
      params: ({ schemaCode }) => _`{limit: ${schemaCode}}`,
    },
    code(cxt: KeywordCxt) {
      const { keyword, data, schemaCode } = cxt
      cxt.fail(
        keyword === 'maxLength' ? _`${data}.length > ${schemaCode}` : _`${data}.length < ${schemaCode}`,
      )
    },
  })
  ajv.addKeyword({
    keyword: LOWERCASE_KEYWORD,
    type: 'string',
    schemaType: 'boolean',
    modifying: true,
    validate: (enabled: boolean, data: string, _schema: unknown, context?: DataContext) => {
      if (enabled && context && context.parentDataProperty !== undefined) {
        ;(context.parentData as Record<string | number, unknown>)[context.parentDataProperty] =
          data.toLowerCase()
      }
      return true
    },
  })
  const boundedJson = (bounds: JsonBounds, data: unknown): boolean => {
    const reason = exceedsBounds(data, bounds)
    if (reason === undefined) return true
    boundedJson.errors = [{ keyword: BOUNDED_JSON_KEYWORD, message: reason, params: { ...bounds } }]
    return false
  }
  boundedJson.errors = [] as Array<{ keyword: string; message: string; params: Record<string, unknown> }>
  ajv.addKeyword({ keyword: BOUNDED_JSON_KEYWORD, schemaType: 'object', errors: true, validate: boundedJson })
  return ajv
}

/**
 * Bodies are validated as sent (a string is never turned into a number); query strings and
 * path parameters are text by nature, so their numbers and booleans are coerced.
 */
export function createValidatorCompiler(): FastifySchemaCompiler<unknown> {
  const strict = makeAjv({ coerceTypes: false })
  const coercing = makeAjv({ coerceTypes: 'array' })
  return ({ schema, httpPart }) => {
    const ajv = httpPart === 'body' ? strict : coercing
    return ajv.compile(schema as object)
  }
}
