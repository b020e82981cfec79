import { Ajv, type Options } from 'ajv'
import addFormatsModule from 'ajv-formats'
import type { FastifySchemaCompiler } from 'fastify'

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
