import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from 'typebox'
import { actorOf } from '../auth/request-context.ts'
import { decodeBase64Field } from '../platform/base64.ts'
import { errorResponses, Uuid } from '../platform/http-schemas.ts'
import type { CryptoService } from './crypto-service.ts'

const TAGS = ['Cryptographic operations']
/**
 * Spec 8: encrypt requests carry up to 10 MB; a decrypt request carries what encrypt returned
 * (the ciphertext as long as the plaintext, plus up to ~2 KiB of envelope), so it gets 64 KiB more. Body schemas announce a route's own limit as
 * `x-body-limit-bytes` in the OpenAPI document (the default limit applies elsewhere).
 */
export const CRYPTO_BODY_LIMIT_BYTES = 10 * 1024 * 1024
export const DECRYPT_BODY_LIMIT_BYTES = CRYPTO_BODY_LIMIT_BYTES + 64 * 1024

const Base64 = (description: string, maxLength = CRYPTO_BODY_LIMIT_BYTES) =>
  Type.String({ maxLength, contentEncoding: 'base64', description })
const Context = Type.Optional(
  Type.String({
    maxLength: 8192,
    description: 'Additional authenticated data (UTF-8); the same value is needed to decrypt',
  }),
)

const EncryptBody = Type.Object(
  {
    keyId: Type.Optional(Uuid('Encryption key (default: the tenant default Encryption key)')),
    plaintext: Base64('Data to encrypt, Base64'),
    context: Context,
  },
  { additionalProperties: false, 'x-body-limit-bytes': CRYPTO_BODY_LIMIT_BYTES },
)

const EnvelopeFields = {
  ciphertext: Type.String({ description: 'AES-256-GCM ciphertext, Base64' }),
  encapsulatedKey: Type.String({
    description:
      'Header (format, scheme, key id, key version) and the ML-KEM ciphertext or RSA-OAEP-wrapped DEK, Base64',
  }),
  nonce: Type.String({ description: 'AES-GCM nonce (12 bytes), Base64' }),
  tag: Type.String({ description: 'AES-GCM authentication tag (16 bytes), Base64' }),
}

const EncryptResponse = Type.Object({
  ...EnvelopeFields,
  keyId: Uuid('The key used'),
  keyVersion: Type.Integer({ description: 'The key version used (also inside encapsulatedKey)' }),
})

const DecryptBody = Type.Object(
  {
    keyId: Type.Optional(Uuid('The key that encrypted (optional: encapsulatedKey names it)')),
    keyVersion: Type.Optional(
      Type.Integer({ minimum: 1, maximum: 2_147_483_647, description: 'Ignored if absent' }),
    ),
    ciphertext: Base64('From the encrypt response', DECRYPT_BODY_LIMIT_BYTES),
    encapsulatedKey: Base64('From the encrypt response', 16_384),
    nonce: Base64('From the encrypt response', 64),
    tag: Base64('From the encrypt response', 64),
    context: Context,
  },
  { additionalProperties: false, 'x-body-limit-bytes': DECRYPT_BODY_LIMIT_BYTES },
)

const DecryptResponse = Type.Object({
  plaintext: Type.String({ description: 'Base64' }),
  keyId: Uuid('The key that decrypted'),
  keyVersion: Type.Integer(),
})

export function cryptoRoutes(crypto: CryptoService): FastifyPluginAsyncTypebox {
  return async (app) => {
    app.post(
      '/encrypt',
      {
        bodyLimit: CRYPTO_BODY_LIMIT_BYTES,
        schema: {
          tags: TAGS,
          summary: 'Envelope-encrypt: per-operation DEK, AES-256-GCM, DEK protected by ML-KEM or RSA-OAEP',
          operationId: 'encrypt',
          body: EncryptBody,
          response: { 200: EncryptResponse, ...errorResponses(403, 404, 409, 413) },
        },
      },
      async (request) => {
        const { keyId, plaintext, context } = request.body
        const result = await crypto.encrypt(actorOf(request), {
          keyId,
          plaintext: decodeBase64Field(plaintext, 'body/plaintext'),
          context: Buffer.from(context ?? '', 'utf8'),
        })
        return {
          ciphertext: result.ciphertext.toString('base64'),
          encapsulatedKey: result.encapsulatedKey.toString('base64'),
          nonce: result.nonce.toString('base64'),
          tag: result.tag.toString('base64'),
          keyId: result.keyId,
          keyVersion: result.keyVersion,
        }
      },
    )

    app.post(
      '/decrypt',
      {
        bodyLimit: DECRYPT_BODY_LIMIT_BYTES,
        schema: {
          tags: TAGS,
          summary: 'Decrypt an encrypt response; any mismatch is one error, decryption_failed',
          operationId: 'decrypt',
          body: DecryptBody,
          response: { 200: DecryptResponse, ...errorResponses(403, 409, 413) },
        },
      },
      async (request, reply) => {
        const body = request.body
        const result = await crypto.decrypt(actorOf(request), {
          keyId: body.keyId,
          keyVersion: body.keyVersion,
          ciphertext: decodeBase64Field(body.ciphertext, 'body/ciphertext'),
          encapsulatedKey: decodeBase64Field(body.encapsulatedKey, 'body/encapsulatedKey'),
          nonce: decodeBase64Field(body.nonce, 'body/nonce'),
          tag: decodeBase64Field(body.tag, 'body/tag'),
          context: Buffer.from(body.context ?? '', 'utf8'),
        })
        reply.header('cache-control', 'no-store')
        return {
          plaintext: result.plaintext.toString('base64'),
          keyId: result.keyId,
          keyVersion: result.keyVersion,
        }
      },
    )
  }
}
