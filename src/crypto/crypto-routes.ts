import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from 'typebox'
import { actorOf } from '../auth/request-context.ts'
import { decodeBase64Field } from '../platform/base64.ts'
import { errorResponses, Uuid } from '../platform/http-schemas.ts'
import {
  Base64,
  Base64Output,
  Context,
  CRYPTO_BODY_LIMIT_BYTES,
  contextBytes,
  DECRYPT_BODY_LIMIT_BYTES,
  EnvelopeFields,
  envelopeFromParts,
  envelopeToParts,
  KeyVersion,
  Mode,
} from './crypto-schemas.ts'
import type { CryptoService } from './crypto-service.ts'

const TAGS = ['Cryptographic operations']

const EncryptBody = Type.Object(
  {
    keyId: Type.Optional(Uuid('Encryption key (default: the tenant default Encryption key)')),
    plaintext: Base64('Data to encrypt, Base64'),
    context: Context,
    mode: Mode,
  },
  { additionalProperties: false, 'x-body-limit-bytes': CRYPTO_BODY_LIMIT_BYTES },
)

const EncryptResponse = Type.Object({
  ...EnvelopeFields,
  keyId: Uuid('The key used'),
  keyVersion: Type.Integer({ description: 'The key version used (also inside the envelope)' }),
  mode: Type.Optional(Type.Literal('legacy')),
})

const DecryptBody = Type.Object(
  {
    keyId: Type.Optional(Uuid('The key that encrypted (optional: the envelope names it)')),
    keyVersion: Type.Optional(KeyVersion('Cross-check of the version the envelope names')),
    ciphertext: Base64('From the encrypt response', DECRYPT_BODY_LIMIT_BYTES),
    encapsulatedKey: Type.Optional(Base64('From the encrypt response (standard mode)', 16_384)),
    nonce: Type.Optional(Base64('From the encrypt response (standard mode)', 64)),
    tag: Type.Optional(Base64('From the encrypt response (standard mode)', 64)),
    context: Context,
    mode: Mode,
  },
  { additionalProperties: false, 'x-body-limit-bytes': DECRYPT_BODY_LIMIT_BYTES },
)

const DecryptResponse = Type.Object({
  plaintext: Base64Output('Base64'),
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
        const { keyId, plaintext, context, mode } = request.body
        const result = await crypto.encrypt(actorOf(request), {
          keyId,
          plaintext: decodeBase64Field(plaintext, 'body/plaintext'),
          context: contextBytes(context),
        })
        return { ...envelopeToParts(result, mode), keyId: result.keyId, keyVersion: result.keyVersion }
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
          envelope: envelopeFromParts(body, 'body'),
          context: contextBytes(body.context),
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
