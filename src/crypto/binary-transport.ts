import { Type } from 'typebox'
import { BINARY, type DataReply } from '../http/data-route.ts'
import { KeyRef } from '../keys/alias-schemas.ts'
import { AppError, invalidField } from '../platform/errors.ts'
import { MAX_KEY_VERSION } from './envelope.ts'

/**
 * The binary transport of /encrypt and /decrypt (docs/crypto-operations.md, "Binary bodies"):
 * the request and response bodies are raw bytes, and what the JSON body would name travels in
 * headers. It exists for throughput: a 1 MB JSON encrypt spends most of its CPU parsing,
 * Base64-decoding and re-encoding, against 2% in AES-GCM itself (bench/RESULTS.md).
 */

/** The UTF-16 length a JSON context may have; a header context decodes to the same limit. */
const CONTEXT_MAX_CHARS = 8192

const KeyIdHeader = (description: string) => Type.Optional(KeyRef(`Binary bodies only: ${description}`))
const ContextHeader = Type.Optional(
  Type.String({
    // Base64 of 8,192 characters of UTF-8 at 3 bytes each: 4 Base64 characters per character.
    maxLength: 4 * CONTEXT_MAX_CHARS,
    description:
      'Binary bodies only: the context (additional authenticated data) as standard Base64 of its UTF-8 bytes ' +
      '(a map context: of its canonical JSON, docs/crypto-operations.md "Encryption context")',
  }),
)

export const EncryptHeaders = Type.Object({
  'x-key-id': KeyIdHeader('the Encryption key (default: the tenant default Encryption key)'),
  'x-encryption-context': ContextHeader,
})

export const DecryptHeaders = Type.Object({
  'x-key-id': KeyIdHeader('cross-check of the key the envelope names'),
  // A string, not an integer: the coercion query strings get would also take "0x1" or "1e0".
  'x-key-version': Type.Optional(
    Type.String({
      pattern: '^[1-9][0-9]{0,9}$',
      description: 'Binary bodies only: cross-check of the envelope key version (a decimal integer)',
    }),
  ),
  'x-encryption-context': ContextHeader,
})

/** A body or 200 response in either media type: JSON validated by `json`, raw bytes by nothing. */
export const jsonOrBinary = (json: object, binaryDescription: string) => ({
  content: {
    'application/json': { schema: json },
    [BINARY]: { schema: { description: binaryDescription } },
  },
})

/**
 * A JSON body names keyId, keyVersion and context itself: the route's binary headers beside it
 * would be ambiguous, so they are refused rather than ignored.
 */
export function rejectBinaryHeaders(
  schema: typeof EncryptHeaders | typeof DecryptHeaders,
  headers: Record<string, unknown>,
): void {
  // Every JSON encrypt and decrypt passes here: the common case allocates nothing.
  let any = false
  for (const name in schema.properties) any ||= headers[name] !== undefined
  if (!any) return
  const present = Object.keys(schema.properties).filter((name) => headers[name] !== undefined)
  throw new AppError(
    400,
    'validation_failed',
    `${present.join(', ')}: for ${BINARY} bodies only; a JSON body names keyId, keyVersion and context itself`,
    { fields: present.map((name) => ({ path: `headers/${name}`, message: 'is for binary bodies only' })) },
  )
}

// ignoreBOM: a leading U+FEFF is a character of the context and counts, as it does in JSON.
const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true })

/** The context's bytes, which must be UTF-8 as a JSON context is (so either transport opens the other's). */
export function binaryContext(header: string | undefined): Buffer {
  if (header === undefined) return Buffer.alloc(0)
  const bytes = Buffer.from(header, 'base64')
  let valid = bytes.toString('base64') === header
  if (valid) {
    try {
      valid = utf8.decode(bytes).length <= CONTEXT_MAX_CHARS
    } catch {
      valid = false
    }
  }
  if (!valid) {
    throw new AppError(
      400,
      'validation_failed',
      `headers/x-encryption-context must be standard Base64 of at most ${CONTEXT_MAX_CHARS} characters of UTF-8`,
      { fields: [{ path: 'headers/x-encryption-context', message: 'must be standard Base64 of UTF-8' }] },
    )
  }
  return bytes
}

/** The X-Key-Version cross-check as a number; beyond the largest version it is a 400 as in JSON. */
export function binaryKeyVersion(header: string | undefined): number | undefined {
  if (header === undefined) return undefined
  const version = Number(header)
  if (version > MAX_KEY_VERSION) {
    throw invalidField('headers/x-key-version', `must be <= ${MAX_KEY_VERSION}`)
  }
  return version
}

/** Raw bytes back, naming the key and version in headers. */
export function sendBinary(reply: DataReply, bytes: Buffer, keyId: string, keyVersion: number): Buffer {
  reply.type(BINARY).header('x-key-id', keyId).header('x-key-version', String(keyVersion))
  return bytes
}
