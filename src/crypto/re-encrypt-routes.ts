import { type Static, Type } from 'typebox'
import { access } from '../auth/access.ts'
import { actorOf } from '../auth/request-context.ts'
import { type DataRoute, dataRoute } from '../http/data-route.ts'
import { errorResponses, nameSchema } from '../http/http-schemas.ts'
import { KeyRef } from '../keys/alias-schemas.ts'
import { AppError } from '../platform/errors.ts'
import { MAX_BATCH_ITEMS } from './batch-service.ts'
import { DECRYPT_BATCH_BODY_LIMIT_BYTES, EXAMPLE_ENVELOPE } from './crypto-schemas.ts'
import {
  type AnswerForm,
  RE_ENCRYPT_BODY_LIMIT_BYTES,
  ReEncryptBatchItem,
  ReEncryptBatchResult,
  ReEncryptBody,
  ReEncryptResponse,
  readReEncrypt,
  reEncryptAnswer,
} from './re-encrypt-schemas.ts'
import type { ReEncryptInput, ReEncryptService } from './re-encrypt-service.ts'

const TAGS = ['Cryptographic operations']

const RE_ENCRYPT_BATCH_BODY_LIMIT_BYTES = DECRYPT_BATCH_BODY_LIMIT_BYTES + 1024 * 1024

const ReEncryptBatchBody = Type.Object(
  {
    items: Type.Array(ReEncryptBatchItem, { minItems: 1, maxItems: MAX_BATCH_ITEMS }),
    destinationKeyId: Type.Optional(
      KeyRef('The key of every item that names none (default: the tenant default Encryption key)'),
    ),
    mode: Type.Optional(
      Type.Enum(['standard', 'legacy'], {
        default: 'standard',
        description: 'The mode of the /encrypt answers given, for items that name none',
      }),
    ),
  },
  {
    $id: 'ReEncryptBatchRequest',
    additionalProperties: false,
    'x-body-limit-bytes': RE_ENCRYPT_BATCH_BODY_LIMIT_BYTES,
    examples: [{ items: [EXAMPLE_ENVELOPE], destinationKeyId: '0b6f3c1e-4a4f-4b8e-9a51-2f0c1d7e9a10' }],
  },
)

const ReEncryptBatchResponse = Type.Object({
  results: Type.Array(
    Type.Union([
      ReEncryptBatchResult,
      Type.Object({
        ok: Type.Literal(false),
        error: Type.String({ description: 'The error code a single request would have had' }),
        message: Type.String(),
      }),
    ]),
    { description: 'One result per item, in request order' },
  ),
})
nameSchema(ReEncryptBatchResponse, 'ReEncryptBatchResponse')

const DESCRIPTION =
  'The body is an answer of /encrypt (standard or legacy mode), of /keys/{keyId}/wrap (wrappedKey) or of ' +
  'a data-key endpoint (encryptedDek), passed as it came, with its `context` (a string or a map) and ' +
  '`destinationKeyId` (default: the tenant default Encryption key) and `destinationContext` (default: the ' +
  'same context). The answer is what /encrypt, wrap or the data-key endpoint would have answered for the ' +
  'destination key (so /decrypt or unwrap takes it), plus sourceKeyId and sourceKeyVersion. The plaintext ' +
  'never leaves the service. The source key may be in any state that decrypts (Active, Expired, Revoked, ' +
  'Pending Deletion); the destination must be Active. Any mismatch of the source is decryption_failed.'

export function reEncryptRoutes(service: ReEncryptService): DataRoute[] {
  return [
    dataRoute({
      method: 'POST',
      url: '/re-encrypt',
      access: access.scope('encryption:write'),
      bodyLimit: RE_ENCRYPT_BODY_LIMIT_BYTES,
      schema: {
        tags: TAGS,
        summary: 'Re-encrypt an envelope under another key (or the current version), without the plaintext',
        description: DESCRIPTION,
        operationId: 'reEncrypt',
        body: ReEncryptBody,
        response: { 200: ReEncryptResponse, ...errorResponses(403, 404, 409, 413) },
      },
      handler: async (request) => {
        const { input, form } = readReEncrypt(request.body, 'body')
        return reEncryptAnswer(await service.reEncrypt(actorOf(request), input), form)
      },
    }),

    dataRoute({
      method: 'POST',
      url: '/re-encrypt/batch',
      access: access.scope('encryption:write'),
      bodyLimit: RE_ENCRYPT_BATCH_BODY_LIMIT_BYTES,
      schema: {
        tags: TAGS,
        summary:
          'Re-encrypt up to 1,000 independent items; each result is {ok: true, ...} or {ok: false, error, message}',
        description:
          `Each item as the body of POST /re-encrypt. ${'`destinationKeyId`'} of the batch applies to the items ` +
          'that name none; an item that cannot be read fails alone, as any other.',
        operationId: 'reEncryptBatch',
        body: ReEncryptBatchBody,
        response: { 200: ReEncryptBatchResponse, ...errorResponses(403, 413) },
      },
      handler: async (request) => {
        const body = request.body as Static<typeof ReEncryptBatchBody>
        const forms: (AnswerForm | undefined)[] = []
        const inputs = body.items.map((item, i): ReEncryptInput | AppError => {
          try {
            const read = readReEncrypt(item, `body/items/${i}`, {
              mode: item.mode ?? body.mode,
              destinationKeyId: body.destinationKeyId,
            })
            forms.push(read.form)
            return read.input
          } catch (error) {
            forms.push(undefined)
            if (error instanceof AppError) return error
            throw error
          }
        })
        const results = await service.reEncryptBatch(actorOf(request), inputs)
        return {
          results: results.map((r, i) =>
            r.ok ? { ok: true as const, ...reEncryptAnswer(r, forms[i]!) } : r,
          ),
        }
      },
    }),
  ]
}
