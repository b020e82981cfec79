import { Type } from 'typebox'
import { access } from '../auth/access.ts'
import { actorOf } from '../auth/request-context.ts'
import { type DataRoute, dataRoute } from '../http/data-route.ts'
import { errorResponses, Uuid } from '../http/http-schemas.ts'
import { KeyRef } from '../keys/alias-schemas.ts'
import { decodeBase64Field } from '../platform/base64.ts'
import { Base64, Base64Output, base64Length, KeyIdParams, KeyVersion } from './crypto-schemas.ts'
import { RAW_IV_BYTES, RAW_TAG_BYTES, type RawAesService } from './raw-aes-service.ts'

const TAGS = ['Encryption']
/** As Google Cloud KMS's raw encryption: up to 64 KiB of plaintext and of AAD per call. */
const MAX_RAW_BYTES = 64 * 1024

const Aad = Type.Optional(
  Base64(
    'Additional authenticated data, Base64 (up to 65,536 bytes); absent: none',
    base64Length(MAX_RAW_BYTES),
  ),
)

const RawEncryptBody = Type.Object(
  {
    plaintext: Base64('The plaintext, Base64 (up to 65,536 bytes)', base64Length(MAX_RAW_BYTES)),
    aad: Aad,
  },
  {
    $id: 'RawEncryptRequest',
    additionalProperties: false,
    examples: [{ plaintext: 'SGVsbG8sIHdvcmxkIQ==', aad: 'b3JkZXI9MTA0Mg==' }],
  },
)

const RawEncryptResponse = Type.Object(
  {
    ciphertext: Base64Output('AES-GCM ciphertext, as long as the plaintext'),
    iv: Base64Output('The 12-byte IV the service drew'),
    tag: Base64Output('The 16-byte authentication tag'),
    keyId: Uuid('Key id'),
    keyVersion: Type.Integer({ description: 'The key version used' }),
  },
  { $id: 'RawEncryptResponse' },
)

const RawDecryptBody = Type.Object(
  {
    ciphertext: Base64('The ciphertext, Base64 (up to 65,536 bytes)', base64Length(MAX_RAW_BYTES)),
    iv: Base64(
      `The IV, Base64: ${RAW_IV_BYTES.min} to ${RAW_IV_BYTES.max} bytes (12 is GCM's standard length)`,
      base64Length(RAW_IV_BYTES.max),
      1,
    ),
    tag: Base64('The 16-byte authentication tag, Base64', base64Length(RAW_TAG_BYTES), 1),
    aad: Aad,
    keyVersion: Type.Optional(
      KeyVersion('The key version that encrypted (from raw-encrypt); absent: the current one'),
    ),
    keyId: Type.Optional(KeyRef('From the raw-encrypt answer: must be the key of the path')),
  },
  {
    $id: 'RawDecryptRequest',
    additionalProperties: false,
    examples: [
      {
        ciphertext: 'W2nHoYQHMdCSPZ5bvg==',
        iv: 'N5eRqKZpkNhw1NCY',
        tag: 'WnQ1CCTxpDMQ5+3hc3o7jw==',
        aad: 'b3JkZXI9MTA0Mg==',
        keyVersion: 1,
      },
    ],
  },
)

const RawDecryptResponse = Type.Object(
  {
    plaintext: Base64Output('The plaintext'),
    keyId: Uuid('Key id'),
    keyVersion: Type.Integer({ description: 'The key version used' }),
  },
  { $id: 'RawDecryptResponse' },
)

export function rawAesRoutes(raw: RawAesService): DataRoute[] {
  return [
    dataRoute({
      method: 'POST',
      url: '/keys/:keyId/raw-encrypt',
      access: access.scope('encryption:write'),
      schema: {
        tags: TAGS,
        summary: 'AES-GCM encryption without an envelope, with an AES key (interoperability)',
        description:
          'The caller gets the ciphertext, the service-drawn 12-byte IV and the tag separately, for systems that decrypt AES-GCM themselves with the same imported key. Prefer /encrypt, whose envelope names its key and version.',
        operationId: 'rawEncrypt',
        params: KeyIdParams,
        body: RawEncryptBody,
        response: { 200: RawEncryptResponse, ...errorResponses(403, 404, 409) },
      },
      handler: async (request) => {
        const result = await raw.encrypt(actorOf(request), {
          keyId: request.params.keyId,
          plaintext: decodeBase64Field(request.body.plaintext, 'body/plaintext'),
          aad:
            request.body.aad === undefined
              ? Buffer.alloc(0)
              : decodeBase64Field(request.body.aad, 'body/aad'),
        })
        return {
          ciphertext: result.ciphertext.toString('base64'),
          iv: result.iv.toString('base64'),
          tag: result.tag.toString('base64'),
          keyId: result.keyId,
          keyVersion: result.keyVersion,
        }
      },
    }),

    dataRoute({
      method: 'POST',
      url: '/keys/:keyId/raw-decrypt',
      access: access.scope('encryption:write'),
      schema: {
        tags: TAGS,
        summary: 'AES-GCM decryption of a ciphertext, IV, tag and AAD given apart, with an AES key',
        description:
          'Any authentication failure (another key, IV, tag or AAD, a flipped bit) is the one 400 decryption_failed.',
        operationId: 'rawDecrypt',
        params: KeyIdParams,
        body: RawDecryptBody,
        response: { 200: RawDecryptResponse, ...errorResponses(403, 404, 409) },
      },
      handler: async (request) => {
        const body = request.body
        const result = await raw.decrypt(actorOf(request), {
          keyId: request.params.keyId,
          bodyKeyId: body.keyId,
          keyVersion: body.keyVersion,
          ciphertext: decodeBase64Field(body.ciphertext, 'body/ciphertext'),
          iv: decodeBase64Field(body.iv, 'body/iv'),
          tag: decodeBase64Field(body.tag, 'body/tag'),
          aad: body.aad === undefined ? Buffer.alloc(0) : decodeBase64Field(body.aad, 'body/aad'),
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
