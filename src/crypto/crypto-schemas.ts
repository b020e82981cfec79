import { Type } from 'typebox'
import { KeyRef } from '../keys/alias-schemas.ts'
import { decodeBase64Field } from '../platform/base64.ts'
import { AppError } from '../platform/errors.ts'
import { fromCompact, type SealedEnvelope, toCompact } from './envelope.ts'

/**
 * Spec 8: encrypt requests carry up to 10 MB; a decrypt request carries what encrypt returned
 * (the ciphertext as long as the plaintext, plus up to ~2 KiB of envelope), so it gets 64 KiB
 * more. Batches: 10 MB of items, and for decryption room for 1,000 envelopes' overhead (an
 * ML-KEM-1024 envelope adds about 2.3 KB of JSON and Base64). Body schemas announce a route's
 * own limit as `x-body-limit-bytes` in the OpenAPI document (the default limit applies elsewhere).
 */
export const CRYPTO_BODY_LIMIT_BYTES = 10 * 1024 * 1024
export const DECRYPT_BODY_LIMIT_BYTES = CRYPTO_BODY_LIMIT_BYTES + 64 * 1024
export const DECRYPT_BATCH_BODY_LIMIT_BYTES = CRYPTO_BODY_LIMIT_BYTES + 3 * 1024 * 1024
/** The largest plaintext one encrypt takes, in either transport: 10 MiB. */
export const MAX_PLAINTEXT_BYTES = CRYPTO_BODY_LIMIT_BYTES
/** The largest compact envelope one binary decrypt takes. */
export const MAX_ENVELOPE_BYTES = DECRYPT_BODY_LIMIT_BYTES

/** Characters of the padded standard Base64 of `bytes` bytes. */
export const base64Length = (bytes: number) => Math.ceil(bytes / 3) * 4

/**
 * JSON carries bytes as Base64, a third larger: a 10 MiB plaintext is 13,981,016 characters.
 * The JSON limits are the Base64 of the binary limits plus 64 KiB for the other fields (a context
 * of 8,192 characters written as \u escapes is 48 KiB).
 */
export const ENCRYPT_JSON_BODY_LIMIT_BYTES = base64Length(MAX_PLAINTEXT_BYTES) + 64 * 1024
export const DECRYPT_JSON_BODY_LIMIT_BYTES = base64Length(MAX_ENVELOPE_BYTES) + 64 * 1024

/** Key material to wrap: generous for any private key of table 2.1 in any encoding. */
export const MAX_WRAP_BYTES = 64 * 1024

/**
 * A standard Base64 field (decoded and checked by decodeBase64Field, without a backtracking
 * pattern). The OpenAPI 3.0 document drops `contentEncoding`, so `x-content-encoding` says it there.
 */
export const Base64 = (description: string, maxLength = CRYPTO_BODY_LIMIT_BYTES, minLength = 0) =>
  Type.String({
    maxLength,
    ...(minLength ? { minLength } : {}),
    contentEncoding: 'base64',
    'x-content-encoding': 'base64',
    description,
  })

/**
 * A Base64 string the service produces. `format: 'unsafe'` tells the serializer
 * (fast-json-stringify) to skip its escape scan, which Base64 never needs and which cost 9% of
 * the CPU of a 1 MB encrypt; app.ts drops the marker from the OpenAPI document.
 */
export const Base64Output = (description: string) =>
  Type.String({ format: 'unsafe', contentEncoding: 'base64', 'x-content-encoding': 'base64', description })

/** The encryption context, a string or a map (one schema, one canonical form): encryption-context.ts. */
export { Context, contextBytes, MAX_CONTEXT_CHARS } from './encryption-context.ts'

export const KeyVersion = (description: string) =>
  Type.Integer({ minimum: 1, maximum: 2_147_483_647, description })

export const Mode = Type.Optional(
  Type.Enum(['standard', 'legacy'], {
    default: 'standard',
    description:
      'standard (recommended): the envelope parts as separate fields. legacy: the whole envelope as one ' +
      'Base64 string in `ciphertext`, for clients of older single-string formats; not recommended for new ' +
      'integrations (docs/envelope-format.md)',
  }),
)

/** The envelope parts as /encrypt returns them and /decrypt takes them back. */
export const EnvelopeFields = {
  ciphertext: Base64Output('AES-256-GCM ciphertext, Base64 (legacy mode: the whole compact envelope)'),
  encapsulatedKey: Type.Optional(
    Base64Output(
      'Header (format, scheme, key id, key version) and the protected DEK (ML-KEM or X-Wing ciphertext, RSA-OAEP- or AES-GCM-sealed DEK), Base64 (absent in legacy mode)',
    ),
  ),
  nonce: Type.Optional(Base64Output('AES-GCM nonce (12 bytes), Base64 (absent in legacy mode)')),
  tag: Type.Optional(Base64Output('AES-GCM authentication tag (16 bytes), Base64 (absent in legacy mode)')),
}

/** The request's envelope parts, Base64-decoded; in legacy mode the compact string stands for all. */
export interface EnvelopeParts {
  mode?: 'standard' | 'legacy' | undefined
  ciphertext: string
  encapsulatedKey?: string | undefined
  nonce?: string | undefined
  tag?: string | undefined
}

export const WrappedKey = (description: string) => Base64(description, 2 * MAX_WRAP_BYTES)

/** Throws validation_failed when the mode's required parts are missing or the other mode's are present. */
function checkEnvelopeParts(parts: EnvelopeParts, path: string): void {
  const separate = (['encapsulatedKey', 'nonce', 'tag'] as const).filter((f) => parts[f] !== undefined)
  const legacy = parts.mode === 'legacy'
  const wrong = legacy
    ? separate
    : (['encapsulatedKey', 'nonce', 'tag'] as const).filter((f) => parts[f] === undefined)
  if (wrong.length === 0) return
  throw new AppError(
    400,
    'validation_failed',
    legacy
      ? 'In legacy mode the whole envelope is in ciphertext: encapsulatedKey, nonce and tag must be absent'
      : 'encapsulatedKey, nonce and tag are required (or set mode to legacy)',
    {
      fields: wrong.map((f) => ({
        path: `${path}/${f}`,
        message: legacy ? 'must be absent in legacy mode' : 'is required',
      })),
    },
  )
}

const UNREADABLE: SealedEnvelope = {
  ciphertext: Buffer.alloc(0),
  encapsulatedKey: Buffer.alloc(0),
  nonce: Buffer.alloc(0),
  tag: Buffer.alloc(0),
}

/** A compact envelope; bytes too short for its parts give one that will not open. */
export const compactEnvelope = (bytes: Buffer): SealedEnvelope => fromCompact(bytes) ?? UNREADABLE

/**
 * The envelope of a decrypt request. A compact string too short for its parts is not a
 * validation error but an envelope that will not open: the same decryption_failed as any other.
 */
export function envelopeFromParts(parts: EnvelopeParts, path: string): SealedEnvelope {
  checkEnvelopeParts(parts, path)
  if (parts.mode === 'legacy') {
    return compactEnvelope(decodeBase64Field(parts.ciphertext, `${path}/ciphertext`))
  }
  return {
    ciphertext: decodeBase64Field(parts.ciphertext, `${path}/ciphertext`),
    encapsulatedKey: decodeBase64Field(parts.encapsulatedKey!, `${path}/encapsulatedKey`),
    nonce: decodeBase64Field(parts.nonce!, `${path}/nonce`),
    tag: decodeBase64Field(parts.tag!, `${path}/tag`),
  }
}

export function envelopeToParts(envelope: SealedEnvelope, mode: 'standard' | 'legacy' | undefined) {
  if (mode === 'legacy') return { ciphertext: toCompact(envelope).toString('base64'), mode }
  return {
    ciphertext: envelope.ciphertext.toString('base64'),
    encapsulatedKey: envelope.encapsulatedKey.toString('base64'),
    nonce: envelope.nonce.toString('base64'),
    tag: envelope.tag.toString('base64'),
  }
}

export const KeyIdParams = Type.Object({ keyId: KeyRef('The key') }, { additionalProperties: false })

/**
 * An ML-KEM-768 envelope as /encrypt answers it (context `order=1042`): the example of the
 * decrypt bodies in the OpenAPI document, single and batch. It decrypts under no key of a new
 * tenant; the examples show the shape, which the OpenAPI tests check the service accepts.
 */
export const EXAMPLE_ENVELOPE = {
  ciphertext: 'zGpaiBsXHk2wXnvXZ2dsQYnAzA==',
  encapsulatedKey:
    '19pfFL9heZ3BOpFeZ/lUJceJHOtSVmhLD31C8lrpEkys+WfH1L2ayYm+SZM0eHIyxusoxAvsKwKOqO7s9S2Lgx6TR+DqC4hWNCr0WpxJDHFkPtlrgFkygUOWXEl2LKIZlYDjFT2QA9cd5sVuPKmMwasx1p8b87hL',
  nonce: 'PpIRzfRMZHEkdhJe',
  tag: 'zCsEOOdfx+U8CiOosO0elQ==',
  context: 'order=1042',
}
