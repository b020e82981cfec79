import { type Static, Type } from 'typebox'
import { access } from '../auth/access.ts'
import { actorOf } from '../auth/request-context.ts'
import { type DataRoute, dataRoute } from '../http/data-route.ts'
import { errorResponses, Uuid } from '../http/http-schemas.ts'
import { KeyRef } from '../keys/alias-schemas.ts'
import { decodeBase64Field } from '../platform/base64.ts'
import { AppError, invalidField } from '../platform/errors.ts'
import {
  binaryContext,
  binaryKeyVersion,
  DecryptHeaders,
  EncryptHeaders,
  jsonOrBinary,
  rejectBinaryHeaders,
  sendBinary,
} from './binary-transport.ts'
import {
  Base64,
  Base64Output,
  base64Length,
  Context,
  compactEnvelope,
  contextBytes,
  DECRYPT_JSON_BODY_LIMIT_BYTES,
  ENCRYPT_JSON_BODY_LIMIT_BYTES,
  EnvelopeFields,
  EXAMPLE_ENVELOPE,
  envelopeFromParts,
  envelopeToParts,
  KeyVersion,
  MAX_ENVELOPE_BYTES,
  MAX_PLAINTEXT_BYTES,
  Mode,
} from './crypto-schemas.ts'
import type { CryptoService } from './crypto-service.ts'
import { toCompact } from './envelope.ts'
import { SourceKeyFields } from './re-encrypt-schemas.ts'

const TAGS = ['Cryptographic operations']
const RESPONSE_MEDIA = 'JSON for a JSON request; raw bytes, with X-Key-Id and X-Key-Version, for a binary one'

const EncryptBody = Type.Object(
  {
    keyId: Type.Optional(KeyRef('Encryption key (default: the tenant default Encryption key)')),
    plaintext: Base64(
      `Data to encrypt, Base64: up to ${MAX_PLAINTEXT_BYTES} bytes (10 MiB) of plaintext, ` +
        `${base64Length(MAX_PLAINTEXT_BYTES)} characters`,
      base64Length(MAX_PLAINTEXT_BYTES),
    ),
    context: Context,
    mode: Mode,
  },
  {
    $id: 'EncryptRequest',
    additionalProperties: false,
    'x-body-limit-bytes': ENCRYPT_JSON_BODY_LIMIT_BYTES,
    examples: [{ plaintext: 'SGVsbG8sIHdvcmxkIQ==', context: 'order=1042' }],
  },
)

const EncryptResponse = Type.Object(
  {
    ...EnvelopeFields,
    keyId: Uuid('The key used'),
    keyVersion: Type.Integer({ description: 'The key version used (also inside the envelope)' }),
    mode: Type.Optional(Type.Literal('legacy')),
  },
  { $id: 'EncryptResponse' },
)

const DecryptBody = Type.Object(
  {
    keyId: Type.Optional(KeyRef('The key that encrypted (optional: the envelope names it)')),
    keyVersion: Type.Optional(KeyVersion('Cross-check of the version the envelope names')),
    ciphertext: Base64('From the encrypt response', base64Length(MAX_ENVELOPE_BYTES)),
    encapsulatedKey: Type.Optional(Base64('From the encrypt response (standard mode)', 16_384)),
    nonce: Type.Optional(Base64('From the encrypt response (standard mode)', 64)),
    tag: Type.Optional(Base64('From the encrypt response (standard mode)', 64)),
    context: Context,
    mode: Mode,
    ...SourceKeyFields,
  },
  {
    $id: 'DecryptRequest',
    additionalProperties: false,
    'x-body-limit-bytes': DECRYPT_JSON_BODY_LIMIT_BYTES,
    examples: [EXAMPLE_ENVELOPE],
  },
)

const DecryptResponse = Type.Object(
  {
    plaintext: Base64Output('Base64'),
    keyId: Uuid('The key that decrypted'),
    keyVersion: Type.Integer(),
  },
  { $id: 'DecryptResponse' },
)

/** The route's limit fits JSON's Base64; raw bytes have the smaller limit of what they stand for. */
const binaryTooLarge = (limit: number) =>
  new AppError(413, 'payload_too_large', `The request body exceeds the limit of ${limit} bytes`, {
    limitBytes: limit,
  })

export function cryptoRoutes(crypto: CryptoService): DataRoute[] {
  return [
    dataRoute({
      method: 'POST',
      url: '/encrypt',
      access: access.scope('encryption:write', 'encrypt:invoke'),
      binary: true,
      bodyLimit: ENCRYPT_JSON_BODY_LIMIT_BYTES,
      schema: {
        tags: TAGS,
        summary: 'Envelope-encrypt: per-operation DEK, AES-256-GCM, DEK protected by ML-KEM or RSA-OAEP',
        description:
          'JSON, or raw bytes with Content-Type application/octet-stream: the plaintext in, the compact ' +
          'envelope out (docs/envelope-format.md), the key in X-Key-Id and the context in X-Encryption-Context. ' +
          `Plaintexts of up to ${MAX_PLAINTEXT_BYTES} bytes (10 MiB) in either transport: a binary body of up to ` +
          `${MAX_PLAINTEXT_BYTES} bytes, a JSON body of up to ${ENCRYPT_JSON_BODY_LIMIT_BYTES} bytes (the plaintext ` +
          'as Base64 is a third larger); a larger body is a 413 naming the limit.',
        operationId: 'encrypt',
        headers: EncryptHeaders,
        body: jsonOrBinary(EncryptBody, 'The plaintext, up to 10 MiB'),
        response: {
          200: {
            description: RESPONSE_MEDIA,
            ...jsonOrBinary(EncryptResponse, 'The compact envelope'),
          },
          ...errorResponses(403, 404, 409, 413, 415),
        },
      },
      handler: async (request, reply) => {
        const actor = actorOf(request)
        const headers = request.headers
        if (Buffer.isBuffer(request.body)) {
          if (request.body.length > MAX_PLAINTEXT_BYTES) throw binaryTooLarge(MAX_PLAINTEXT_BYTES)
          const result = await crypto.encrypt(actor, {
            keyId: headers['x-key-id'],
            plaintext: request.body,
            context: binaryContext(headers['x-encryption-context']),
          })
          return sendBinary(reply, toCompact(result), result.keyId, result.keyVersion)
        }
        rejectBinaryHeaders(EncryptHeaders, headers)
        const { keyId, plaintext, context, mode } = request.body as Static<typeof EncryptBody>
        const bytes = decodeBase64Field(plaintext, 'body/plaintext')
        // The Base64 length bound lets through up to two bytes more than the limit.
        if (bytes.length > MAX_PLAINTEXT_BYTES) {
          throw invalidField('body/plaintext', `must decode to at most ${MAX_PLAINTEXT_BYTES} bytes (10 MiB)`)
        }
        const result = await crypto.encrypt(actor, {
          keyId,
          plaintext: bytes,
          context: contextBytes(context, 'body/context'),
        })
        return { ...envelopeToParts(result, mode), keyId: result.keyId, keyVersion: result.keyVersion }
      },
    }),

    dataRoute({
      method: 'POST',
      url: '/decrypt',
      access: access.scope('encryption:write', 'encrypt:invoke'),
      binary: true,
      bodyLimit: DECRYPT_JSON_BODY_LIMIT_BYTES,
      schema: {
        tags: TAGS,
        summary: 'Decrypt an encrypt response; any mismatch is one error, decryption_failed',
        description:
          'JSON, or raw bytes with Content-Type application/octet-stream: the compact envelope in ' +
          '(what a binary encrypt returned, or a legacy-mode ciphertext decoded), the plaintext out; ' +
          'X-Key-Id and X-Key-Version are optional cross-checks, X-Encryption-Context the context. ' +
          `Envelopes of up to ${MAX_ENVELOPE_BYTES} bytes: a binary body of up to ${MAX_ENVELOPE_BYTES} bytes, ` +
          `a JSON body of up to ${DECRYPT_JSON_BODY_LIMIT_BYTES} bytes.`,
        operationId: 'decrypt',
        headers: DecryptHeaders,
        body: jsonOrBinary(DecryptBody, 'The compact envelope'),
        response: {
          200: { description: RESPONSE_MEDIA, ...jsonOrBinary(DecryptResponse, 'The plaintext') },
          ...errorResponses(403, 409, 413, 415),
        },
      },
      handler: async (request, reply) => {
        const actor = actorOf(request)
        const headers = request.headers
        if (Buffer.isBuffer(request.body)) {
          if (request.body.length > MAX_ENVELOPE_BYTES) throw binaryTooLarge(MAX_ENVELOPE_BYTES)
          const result = await crypto.decrypt(actor, {
            keyId: headers['x-key-id'],
            keyVersion: binaryKeyVersion(headers['x-key-version']),
            envelope: compactEnvelope(request.body),
            context: binaryContext(headers['x-encryption-context']),
          })
          return sendBinary(reply, result.plaintext, result.keyId, result.keyVersion)
        }
        rejectBinaryHeaders(DecryptHeaders, headers)
        const body = request.body as Static<typeof DecryptBody>
        const result = await crypto.decrypt(actor, {
          keyId: body.keyId,
          keyVersion: body.keyVersion,
          envelope: envelopeFromParts(body, 'body'),
          context: contextBytes(body.context, 'body/context'),
        })
        return {
          plaintext: result.plaintext.toString('base64'),
          keyId: result.keyId,
          keyVersion: result.keyVersion,
        }
      },
    }),
  ]
}
