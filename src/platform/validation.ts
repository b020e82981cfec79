import { Ajv, type Options } from 'ajv'
import addFormatsModule from 'ajv-formats'
import type { FastifySchemaCompiler } from 'fastify'

type DataContext = { parentData: unknown; parentDataProperty: string | number }

/**
 * A schema keyword that lower-cases a valid string in place. Identifiers such as UUIDs are
 * case-insensitive on input but stored and compared (and bound into AADs) in one form; folding
 * them at validation means no code path can meet the client's spelling.
 */
export const LOWERCASE_KEYWORD = 'x-lowercase'

// ajv-formats is CommonJS; its default export arrives wrapped under native ESM.
const addFormats = ((addFormatsModule as unknown as { default?: unknown }).default ?? addFormatsModule) as (
  ajv: Ajv,
) => Ajv

function makeAjv(options: Options): Ajv {
  const ajv = new Ajv({
    allErrors: false,
    // Unknown fields are an error, never silently dropped.
    removeAdditional: false,
    useDefaults: true,
    strict: false,
    // maxLength counts UTF-16 code units (String.length) instead of walking the string for
    // surrogate pairs: 14% of a 1 MB encrypt's CPU went to that walk. Only stricter, never looser.
    unicode: false,
    ...options,
  })
  addFormats(ajv)
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
