import { type Static, Type } from 'typebox'
import { access } from '../auth/access.ts'
import { actorOf } from '../auth/request-context.ts'
import { BINARY, type DataRoute, dataRoute } from '../http/data-route.ts'
import { errorResponses, nameSchema, Uuid } from '../http/http-schemas.ts'
import { KeyRef } from '../keys/alias-schemas.ts'
import { decodeBase64Field } from '../platform/base64.ts'
import { AppError } from '../platform/errors.ts'
import { parseBinaryBatch, serializeBinaryBatch } from './batch-binary.ts'
import { type BatchService, type EncryptItem, MAX_BATCH_ITEMS } from './batch-service.ts'
import { jsonOrBinary } from './binary-transport.ts'
import {
  Base64,
  Base64Output,
  Context,
  CRYPTO_BODY_LIMIT_BYTES,
  compactEnvelope,
  DECRYPT_BATCH_BODY_LIMIT_BYTES,
  DECRYPT_BODY_LIMIT_BYTES,
  EnvelopeFields,
  EXAMPLE_ENVELOPE,
  envelopeFromParts,
  envelopeToParts,
  KeyVersion,
  MAX_ENVELOPE_BYTES,
  MAX_PLAINTEXT_BYTES,
  Mode,
} from './crypto-schemas.ts'
import type { OpenRequest } from './crypto-service.ts'
import { itemContextBytes } from './encryption-context.ts'
import { toCompact } from './envelope.ts'
import { SourceKeyFields } from './re-encrypt-schemas.ts'

const TAGS = ['Cryptographic operations']

const ItemError = Type.Object({
  ok: Type.Literal(false),
  error: Type.String({ description: 'The error code a single request would have had' }),
  message: Type.String(),
})

const EncryptBatchBody = Type.Object(
  {
    items: Type.Array(
      Type.Object(
        {
          keyId: Type.Optional(KeyRef('Encryption key (default: the tenant default Encryption key)')),
          plaintext: Base64('Data to encrypt, Base64'),
          context: Context,
        },
        { additionalProperties: false },
      ),
      { minItems: 1, maxItems: MAX_BATCH_ITEMS },
    ),
    mode: Mode,
  },
  {
    $id: 'EncryptBatchRequest',
    additionalProperties: false,
    'x-body-limit-bytes': CRYPTO_BODY_LIMIT_BYTES,
    examples: [
      { items: [{ plaintext: 'SGVsbG8sIHdvcmxkIQ==', context: 'order=1042' }, { plaintext: 'd29ybGQ=' }] },
    ],
  },
)

const EncryptBatchResponse = Type.Object({
  results: Type.Array(
    Type.Union([
      Type.Object({
        ok: Type.Literal(true),
        ...EnvelopeFields,
        keyId: Uuid('The key used'),
        keyVersion: Type.Integer(),
        mode: Type.Optional(Type.Literal('legacy')),
      }),
      ItemError,
    ]),
    { description: 'One result per item, in request order' },
  ),
})
nameSchema(EncryptBatchResponse, 'EncryptBatchResponse')

const DecryptBatchItem = Type.Object(
  {
    keyId: Type.Optional(KeyRef('The key that encrypted (optional: the envelope names it)')),
    keyVersion: Type.Optional(KeyVersion('Cross-check of the version the envelope names')),
    ciphertext: Base64('From the encrypt response', DECRYPT_BODY_LIMIT_BYTES),
    encapsulatedKey: Type.Optional(Base64('From the encrypt response (standard mode)', 16_384)),
    nonce: Type.Optional(Base64('From the encrypt response (standard mode)', 64)),
    tag: Type.Optional(Base64('From the encrypt response (standard mode)', 64)),
    context: Context,
    // An encrypt/batch result passes back as it came: its `ok` is ignored, its `mode` applies.
    ok: Type.Optional(Type.Literal(true)),
    ...SourceKeyFields,
    mode: Type.Optional(
      Type.Enum(['standard', 'legacy'], { description: 'Overrides the batch mode for this item' }),
    ),
  },
  { additionalProperties: false },
)

const DecryptBatchBody = Type.Object(
  {
    items: Type.Array(DecryptBatchItem, { minItems: 1, maxItems: MAX_BATCH_ITEMS }),
    mode: Mode,
  },
  {
    $id: 'DecryptBatchRequest',
    additionalProperties: false,
    'x-body-limit-bytes': DECRYPT_BATCH_BODY_LIMIT_BYTES,
    examples: [
      {
        items: [EXAMPLE_ENVELOPE],
      },
    ],
  },
)

const DecryptBatchResponse = Type.Object({
  results: Type.Array(
    Type.Union([
      Type.Object({
        ok: Type.Literal(true),
        plaintext: Base64Output('Base64'),
        keyId: Uuid('The key that decrypted'),
        keyVersion: Type.Integer(),
      }),
      ItemError,
    ]),
    { description: 'One result per item, in request order' },
  ),
})
nameSchema(DecryptBatchResponse, 'DecryptBatchResponse')

const BatchHeaders = Type.Object({
  'x-key-id': Type.Optional(
    KeyRef('Binary encrypt batches only: the Encryption key of every item (default: the tenant default)'),
  ),
})

const BINARY_BATCH =
  `Or ${BINARY}: the binary batch framing of docs/envelope-format.md ("Binary batches"), answered ` +
  'in the same framing; it carries the items as raw bytes instead of Base64 in JSON.'

/** A JSON body names its keys itself; X-Key-Id beside it would be ambiguous. */
/** X-Key-Id is for binary encrypt batches only: elsewhere the items or envelopes name the keys. */
function rejectKeyHeader(headers: { 'x-key-id'?: string | undefined }, message: string, why: string): void {
  if (headers['x-key-id'] === undefined) return
  throw new AppError(400, 'validation_failed', `x-key-id: ${message}`, {
    fields: [{ path: 'headers/x-key-id', message: why }],
  })
}

/** An item that cannot be read becomes its own error; the others go ahead. */
function readItem<T>(read: () => T): T | AppError {
  try {
    return read()
  } catch (error) {
    if (error instanceof AppError) return error
    throw error
  }
}

export function batchRoutes(batches: BatchService): DataRoute[] {
  return [
    dataRoute({
      method: 'POST',
      url: '/encrypt/batch',
      access: access.scope('encryption:write'),
      binary: true,
      bodyLimit: CRYPTO_BODY_LIMIT_BYTES,
      schema: {
        tags: TAGS,
        summary:
          'Encrypt up to 1,000 independent items; each result is {ok: true, ...} or {ok: false, error, message}',
        description: `${BINARY_BATCH} X-Key-Id names the key of every item of a binary batch.`,
        operationId: 'encryptBatch',
        headers: BatchHeaders,
        body: jsonOrBinary(EncryptBatchBody, 'Binary batch framing: plaintext and context per item'),
        response: {
          200: jsonOrBinary(EncryptBatchResponse, 'Binary batch framing: the compact envelope per item'),
          ...errorResponses(403, 413, 415),
        },
      },
      handler: async (request, reply) => {
        if (Buffer.isBuffer(request.body)) {
          const keyId = request.headers['x-key-id']
          const parsed = parseBinaryBatch(request.body, {
            maxItems: MAX_BATCH_ITEMS,
            maxDataBytes: MAX_PLAINTEXT_BYTES,
            dataName: 'plaintext',
          })
          const results = await batches.encrypt(
            actorOf(request),
            parsed.map((item) => ({
              keyId,
              plaintext: item.data,
              context: item.context,
            })),
          )
          reply.type(BINARY)
          return serializeBinaryBatch(
            results.map((r) =>
              r.ok ? { ok: true, keyId: r.keyId, keyVersion: r.keyVersion, bytes: toCompact(r) } : r,
            ),
          )
        }
        rejectKeyHeader(
          request.headers,
          `for ${BINARY} batches only; a JSON batch names keyId per item`,
          'is for binary bodies only',
        )
        const { items, mode } = request.body as Static<typeof EncryptBatchBody>
        const inputs = items.map((item, i) =>
          readItem<EncryptItem>(() => ({
            keyId: item.keyId,
            plaintext: decodeBase64Field(item.plaintext, `body/items/${i}/plaintext`),
            context: itemContextBytes(item.context, i),
          })),
        )
        const results = await batches.encrypt(actorOf(request), inputs)
        return {
          results: results.map((r) =>
            r.ok
              ? { ok: true as const, ...envelopeToParts(r, mode), keyId: r.keyId, keyVersion: r.keyVersion }
              : r,
          ),
        }
      },
    }),

    dataRoute({
      method: 'POST',
      url: '/decrypt/batch',
      access: access.scope('encryption:write'),
      binary: true,
      bodyLimit: DECRYPT_BATCH_BODY_LIMIT_BYTES,
      schema: {
        tags: TAGS,
        summary:
          'Decrypt up to 1,000 independent items; each result is {ok: true, ...} or {ok: false, error, message}',
        description: `${BINARY_BATCH} The envelopes name their keys.`,
        operationId: 'decryptBatch',
        headers: BatchHeaders,
        body: jsonOrBinary(DecryptBatchBody, 'Binary batch framing: compact envelope and context per item'),
        response: {
          200: jsonOrBinary(DecryptBatchResponse, 'Binary batch framing: the plaintext per item'),
          ...errorResponses(403, 413, 415),
        },
      },
      handler: async (request, reply) => {
        if (Buffer.isBuffer(request.body)) {
          rejectKeyHeader(
            request.headers,
            'for binary encrypt batches only',
            'is for binary encrypt batches only',
          )
          const parsed = parseBinaryBatch(request.body, {
            maxItems: MAX_BATCH_ITEMS,
            maxDataBytes: MAX_ENVELOPE_BYTES,
            dataName: 'envelope',
          })
          const results = await batches.decrypt(
            actorOf(request),
            parsed.map((item) => ({ envelope: compactEnvelope(item.data), context: item.context })),
          )
          reply.type(BINARY)
          return serializeBinaryBatch(
            results.map((r) =>
              r.ok ? { ok: true, keyId: r.keyId, keyVersion: r.keyVersion, bytes: r.plaintext } : r,
            ),
          )
        }
        rejectKeyHeader(
          request.headers,
          `for ${BINARY} batches only; a JSON batch names keyId per item`,
          'is for binary bodies only',
        )
        const { items, mode } = request.body as Static<typeof DecryptBatchBody>
        const inputs = items.map((item: Static<typeof DecryptBatchItem>, i) =>
          readItem<OpenRequest>(() => ({
            keyId: item.keyId,
            keyVersion: item.keyVersion,
            envelope: envelopeFromParts({ ...item, mode: item.mode ?? mode }, `body/items/${i}`),
            context: itemContextBytes(item.context, i),
          })),
        )
        const results = await batches.decrypt(actorOf(request), inputs)
        return {
          results: results.map((r) =>
            r.ok
              ? {
                  ok: true as const,
                  plaintext: r.plaintext.toString('base64'),
                  keyId: r.keyId,
                  keyVersion: r.keyVersion,
                }
              : r,
          ),
        }
      },
    }),
  ]
}
