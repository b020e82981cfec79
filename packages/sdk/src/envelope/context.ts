import { utf8 } from '../bytes.ts'
import { EnvelopeError } from './errors.ts'

/** The encryption context of a message: a map of string to string, bound as its canonical JSON. */
export type EncryptionContext = Readonly<Record<string, string>>

/** The service's limits on a map context (src/crypto/encryption-context.ts): the same bytes must bind there. */
const MAX_CONTEXT_PAIRS = 64
const MAX_CONTEXT_KEY_CHARS = 256
const MAX_CONTEXT_CHARS = 8192

/**
 * The canonical form of a map context, exactly the service's: `{"k":"v",...}`, keys in UTF-16
 * code unit order, each string as JSON.stringify writes it, no whitespace (RFC 8785 for a map
 * of strings); '' for an empty map. Throws a TypeError naming `field` past the service's limits.
 */
export function canonicalContext(context: EncryptionContext, field = 'context'): string {
  if (typeof context !== 'object' || context === null || Array.isArray(context))
    throw new TypeError(`${field} must be a map of string to string`)
  const keys = Object.keys(context)
  if (keys.length === 0) return ''
  if (keys.length > MAX_CONTEXT_PAIRS)
    throw new TypeError(`${field} must have at most ${MAX_CONTEXT_PAIRS} pairs (has ${keys.length})`)
  keys.sort()
  const pairs: string[] = []
  for (const key of keys) {
    const value = context[key]
    if (key.length < 1 || key.length > MAX_CONTEXT_KEY_CHARS)
      throw new TypeError(
        `${field} keys must be 1 to ${MAX_CONTEXT_KEY_CHARS} characters (one has ${key.length})`,
      )
    if (typeof value !== 'string') throw new TypeError(`${field} values must be strings (${key} is not)`)
    if (!key.isWellFormed() || !value.isWellFormed())
      throw new TypeError(`${field} keys and values must be well-formed Unicode (no lone surrogates)`)
    pairs.push(`${JSON.stringify(key)}:${JSON.stringify(value)}`)
  }
  const canonical = `{${pairs.join(',')}}`
  if (canonical.length > MAX_CONTEXT_CHARS)
    throw new TypeError(`${field} must be at most ${MAX_CONTEXT_CHARS} characters in canonical form`)
  return canonical
}

export const contextBytes = (context: EncryptionContext, field?: string) =>
  utf8(canonicalContext(context, field))

const strictUtf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true })

/**
 * The context a header carries: it must be the canonical form of a map within the limits, so
 * that one context has one encoding (and the service binds the same bytes).
 */
export function parseContextBytes(bytes: Uint8Array): EncryptionContext {
  if (bytes.length === 0) return {}
  const malformed = (why: string) => new EnvelopeError('malformed_header', `The encryption context ${why}`)
  let parsed: unknown
  try {
    parsed = JSON.parse(strictUtf8.decode(bytes))
  } catch {
    throw malformed('is not UTF-8 JSON')
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw malformed('is not a map')
  const context = Object.assign(Object.create(null) as Record<string, string>, parsed)
  let canonical: string
  try {
    canonical = canonicalContext(context)
  } catch (error) {
    throw malformed(`is not a valid map: ${(error as Error).message}`)
  }
  const again = utf8(canonical)
  if (again.length !== bytes.length || !again.every((b, i) => b === bytes[i]))
    throw malformed('is not in canonical form')
  return { ...context }
}

/** context_mismatch unless every pair the caller expects is in the message's context. */
export function checkExpectedContext(
  actual: EncryptionContext,
  expected: EncryptionContext | undefined,
): void {
  if (!expected) return
  const missing = Object.keys(expected).filter(
    (key) => !Object.hasOwn(actual, key) || actual[key] !== expected[key],
  )
  if (missing.length > 0)
    throw new EnvelopeError(
      'context_mismatch',
      `The message's encryption context does not hold the expected pairs (keys: ${missing.slice(0, 10).join(', ')})`,
    )
}
