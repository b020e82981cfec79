import { Type } from 'typebox'
import { boundedJson } from '../http/http-schemas.ts'
import { invalidField } from '../platform/errors.ts'

/**
 * The encryption context (additional authenticated data) of encrypt, decrypt, batches, data keys,
 * wrap, unwrap and re-encrypt: a string, as ever, or a map of string to string, AWS KMS style
 * (docs/crypto-operations.md, "Encryption context").
 *
 * A map binds as its canonical form, a string: the JSON of the map with its keys sorted by UTF-16
 * code units and no whitespace, which for a map of strings is exactly RFC 8785 (JCS). The bytes
 * bound into the envelope are the UTF-8 of that string, so the map `{"b":"2","a":"1"}` and the
 * string `{"a":"1","b":"2"}` are one context and either opens what the other sealed. An empty map
 * is no context, as an absent or empty string is.
 */

/** Characters (UTF-16 code units) of a context string or of a map's canonical form, in JSON and binary alike. */
export const MAX_CONTEXT_CHARS = 8192
/** Pairs of a map context (AWS KMS's limit on its encryption context is about the same size). */
const MAX_CONTEXT_PAIRS = 64
/** Characters of a key of a map context. */
const MAX_CONTEXT_KEY_CHARS = 256

const ContextString = Type.String({
  maxLength: MAX_CONTEXT_CHARS,
  description: 'The context as a string (UTF-8 in the envelope)',
})

/**
 * The map form: an object whose values are strings (`additionalProperties`, rather than
 * TypeBox's `patternProperties` form of a record). The key lengths are checked by
 * canonicalContext, whose 400 says "keys must be 1 to 256 characters" where a `propertyNames`
 * schema's would read like the length of the whole context.
 */
const ContextMap = Type.Unsafe<Record<string, string>>({
  type: 'object',
  additionalProperties: { type: 'string', maxLength: MAX_CONTEXT_CHARS },
  maxProperties: MAX_CONTEXT_PAIRS,
  // A flat map: what the bounds of a free-form request object say of it (http/validation.ts).
  ...boundedJson({ depth: 1, members: MAX_CONTEXT_PAIRS, chars: MAX_CONTEXT_CHARS }),
  description:
    `The context as a map of string to string: at most ${MAX_CONTEXT_PAIRS} pairs, keys of 1 to ` +
    `${MAX_CONTEXT_KEY_CHARS} characters, well-formed Unicode, at most ${MAX_CONTEXT_CHARS} characters in ` +
    'canonical form (keys sorted by UTF-16 code units, no whitespace: RFC 8785), which is what binds',
})

/** The one schema of a `context` field. */
export const Context = Type.Optional(
  Type.Union([ContextString, ContextMap], {
    description:
      'Additional authenticated data: a string, or a map of string to string bound as its canonical JSON ' +
      '(so the map {"b":"2","a":"1"} and the string {"a":"1","b":"2"} are the same context). The same ' +
      'context is needed to decrypt',
  }),
)

/** A `context` field as validated: absent, a string or a map. */
export type EncryptionContext = string | Readonly<Record<string, string>> | undefined

const EMPTY = ''

/**
 * The canonical form of a map context (RFC 8785 for a map of strings): `{"k":"v",...}` with the
 * keys in UTF-16 code unit order (what Array.prototype.sort compares) and each key and value
 * written as JSON.stringify writes strings, which is what JCS prescribes. Throws a 400 naming
 * `path` for a map past the limits, a key outside 1-256 characters, or a lone surrogate (JCS
 * needs I-JSON: a lone surrogate would be written as a \u escape no UTF-8 string context has).
 * An empty map is no context.
 */
function canonicalContext(map: Readonly<Record<string, string>>, path: string): string {
  const keys = Object.keys(map)
  if (keys.length === 0) return EMPTY
  if (keys.length > MAX_CONTEXT_PAIRS) {
    throw invalidField(path, `must have at most ${MAX_CONTEXT_PAIRS} pairs (has ${keys.length})`)
  }
  keys.sort()
  let out = '{'
  for (const [i, key] of keys.entries()) {
    const value = map[key]
    if (key.length < 1 || key.length > MAX_CONTEXT_KEY_CHARS) {
      throw invalidField(
        path,
        `keys must be 1 to ${MAX_CONTEXT_KEY_CHARS} characters (one has ${key.length})`,
      )
    }
    if (typeof value !== 'string') throw invalidField(path, 'values must be strings')
    if (!key.isWellFormed() || !value.isWellFormed()) {
      throw invalidField(path, 'keys and values must be well-formed Unicode (no lone surrogates)')
    }
    if (i > 0) out += ','
    out += `${JSON.stringify(key)}:${JSON.stringify(value)}`
    if (out.length > MAX_CONTEXT_CHARS) break
  }
  out += '}'
  if (out.length > MAX_CONTEXT_CHARS) {
    throw invalidField(path, `must be at most ${MAX_CONTEXT_CHARS} characters in canonical form`)
  }
  return out
}

const utf8 = (text: string) => Buffer.from(text, 'utf8')

/**
 * The bytes a context binds: a string's UTF-8 as it always was (the hot path: one type check
 * more, nothing parsed or copied), a map's canonical form in UTF-8, none for an absent context.
 */
export function contextBytes(context: EncryptionContext, path: string): Buffer {
  if (typeof context === 'string') return utf8(context)
  if (context === undefined) return Buffer.alloc(0)
  return utf8(canonicalContext(context, path))
}

/** contextBytes for item `i` of a batch body; the path is built only for a map's errors. */
export function itemContextBytes(context: EncryptionContext, i: number): Buffer {
  if (typeof context === 'string') return utf8(context)
  return contextBytes(context, `body/items/${i}/context`)
}
