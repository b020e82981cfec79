import { Type } from 'typebox'
import { access } from '../auth/access.ts'
import { actorOf } from '../auth/request-context.ts'
import { type DataRoute, dataRoute } from '../http/data-route.ts'
import { errorResponses, nameSchema, Uuid } from '../http/http-schemas.ts'
import { KeyRef } from '../keys/alias-schemas.ts'
import { decodeBase64Field } from '../platform/base64.ts'
import { AppError, invalidField } from '../platform/errors.ts'
import {
  Base64,
  Base64Output,
  Context,
  compactEnvelope,
  contextBytes,
  KeyIdParams,
  KeyVersion,
  MAX_WRAP_BYTES,
  WrappedKey,
} from './crypto-schemas.ts'
import type { CryptoService, DataKeyResult } from './crypto-service.ts'
import { toCompact } from './envelope.ts'
import { SourceKeyFields } from './re-encrypt-schemas.ts'

const TAGS = ['Data keys and wrapping']

const DataKeyResponse = Type.Object({
  plaintextDek: Type.Optional(
    Base64Output(
      'The data key, Base64: use it locally, then discard it (absent when withPlaintext is false)',
    ),
  ),
  encryptedDek: Base64Output(
    'The data key wrapped by the key (compact envelope, Base64): store it; POST /keys/{keyId}/unwrap recovers the data key, with the same context',
  ),
  keyId: Uuid('The wrapping key'),
  keyVersion: Type.Integer({ description: 'The wrapping key version' }),
  keyBytes: Type.Integer({ description: 'Data key length in bytes' }),
})
nameSchema(DataKeyResponse, 'DataKeyResponse')

const GenerateDataKeyBody = Type.Object(
  { keyId: Type.Optional(KeyRef('Encryption key (default: the tenant default Encryption key)')) },
  { $id: 'GenerateDataKeyRequest', additionalProperties: false, examples: [{}] },
)

const PerKeyDataKeyBody = Type.Object(
  {
    keyBytes: Type.Optional(
      Type.Union([Type.Literal(16), Type.Literal(24), Type.Literal(32)], {
        default: 32,
        description: 'Data key length: 16, 24 or 32 bytes (AES-128/192/256)',
      }),
    ),
    withPlaintext: Type.Optional(
      Type.Boolean({ default: true, description: 'Include the plaintext data key in the response' }),
    ),
    context: Context,
  },
  {
    $id: 'DataKeyRequest',
    additionalProperties: false,
    examples: [{ keyBytes: 32, withPlaintext: true, context: 'bucket=invoices' }],
  },
)

const WrapBody = Type.Object(
  {
    plaintext: Base64('Key material to wrap, Base64 (up to 64 KiB)', Math.ceil(MAX_WRAP_BYTES / 3) * 4, 4),
    context: Context,
  },
  {
    $id: 'WrapRequest',
    additionalProperties: false,
    examples: [{ plaintext: 'RBSNsqbVjEGUYY16TMtnXh+0GSQlQpGhtnOIDeEh/4M=', context: 'bucket=invoices' }],
  },
)

const WrapResponse = Type.Object({
  wrappedKey: Base64Output('Compact envelope, Base64: give it to unwrap with the same context'),
  keyId: Uuid('The wrapping key'),
  keyVersion: Type.Integer({ description: 'The wrapping key version' }),
})
nameSchema(WrapResponse, 'WrapResponse')

/**
 * What wrap or a data-key endpoint answered is accepted as it is: their keyId and keyVersion are
 * cross-checks, keyBytes a check of the length, and plaintextDek is ignored (never read).
 */
const UnwrapBody = Type.Object(
  {
    wrappedKey: Type.Optional(WrappedKey('From wrap (wrappedKey); give this or encryptedDek')),
    encryptedDek: Type.Optional(
      WrappedKey('From a data-key endpoint (encryptedDek); give this or wrappedKey'),
    ),
    context: Context,
    keyId: Type.Optional(KeyRef('From the wrap or data-key answer: must be the key of the path')),
    keyVersion: Type.Optional(KeyVersion('From the wrap or data-key answer: cross-check of the envelope')),
    keyBytes: Type.Optional(
      Type.Integer({
        minimum: 1,
        maximum: MAX_WRAP_BYTES,
        description: 'From a data-key answer: the expected length',
      }),
    ),
    plaintextDek: Type.Optional(
      Type.String({
        maxLength: 64,
        description: 'From a data-key answer; ignored (accepted so the answer can be passed back as it is)',
      }),
    ),
    ...SourceKeyFields,
  },
  {
    $id: 'UnwrapRequest',
    additionalProperties: false,
    examples: [
      {
        wrappedKey:
          '19pfFL9heZ3BOpFeZ/lUJceJHOtSVmhLD31C8lrpEkys+WfH1L2ayYm+SZM0eHIyxusoxAvsKwKOqO7s9S2Lgx6TR+DqC4hWNCr0WpxJDHFkPtlrgFkygUOWXEl2LKIZlYDjFT2QA9cd5sVuPKmMwasx1p8b87hL',
        context: 'bucket=invoices',
      },
    ],
  },
)

const UnwrapResponse = Type.Object({
  plaintext: Base64Output('The unwrapped key material, Base64'),
  keyId: Uuid('The wrapping key'),
  keyVersion: Type.Integer({ description: 'The wrapping key version' }),
})
nameSchema(UnwrapResponse, 'UnwrapResponse')

/** Exactly one of wrappedKey (a wrap answer) and encryptedDek (a data-key answer). */
function wrappedKeyField(body: { wrappedKey?: string | undefined; encryptedDek?: string | undefined }) {
  if (body.wrappedKey !== undefined && body.encryptedDek === undefined) return 'wrappedKey' as const
  if (body.encryptedDek !== undefined && body.wrappedKey === undefined) return 'encryptedDek' as const
  const both = body.wrappedKey !== undefined
  throw new AppError(
    400,
    'validation_failed',
    both ? 'Give wrappedKey or encryptedDek, not both' : 'body/wrappedKey is required (or encryptedDek)',
    {
      fields: [
        { path: 'body/wrappedKey', message: both ? 'must not be given with encryptedDek' : 'is required' },
      ],
    },
  )
}

const dataKeyResponse = (result: DataKeyResult, keyBytes: number) => ({
  ...(result.plaintextDek ? { plaintextDek: result.plaintextDek.toString('base64') } : {}),
  encryptedDek: toCompact(result.encryptedDek).toString('base64'),
  keyId: result.keyId,
  keyVersion: result.keyVersion,
  keyBytes,
})

/**
 * Data keys and wrapping share one format: a compact envelope sealed for the "wrap" purpose
 * (docs/envelope-format.md), so /keys/{keyId}/unwrap recovers both, and neither opens through
 * /decrypt (a caller holding only encrypt:invoke cannot unwrap key material).
 */
export function dataKeyRoutes(crypto: CryptoService): DataRoute[] {
  return [
    dataRoute({
      method: 'POST',
      url: '/generate-data-key',
      access: access.scope('encryption:write'),
      schema: {
        tags: TAGS,
        summary: 'A fresh 256-bit data key, in plaintext and wrapped (recover it with /keys/{keyId}/unwrap)',
        operationId: 'generateDataKey',
        body: GenerateDataKeyBody,
        response: { 200: DataKeyResponse, ...errorResponses(403, 404, 409) },
      },
      handler: async (request) => {
        const result = await crypto.generateDataKey(actorOf(request), {
          keyId: request.body.keyId,
          keyBytes: 32,
          withPlaintext: true,
          context: Buffer.alloc(0),
        })
        return dataKeyResponse(result, 32)
      },
    }),

    dataRoute({
      method: 'POST',
      url: '/keys/:keyId/data-key',
      access: access.scope('encryption:write'),
      schema: {
        tags: TAGS,
        summary: 'A fresh data key of 16, 24 or 32 bytes, wrapped by this key with an optional context',
        operationId: 'generateKeyDataKey',
        params: KeyIdParams,
        body: PerKeyDataKeyBody,
        response: { 200: DataKeyResponse, ...errorResponses(403, 404, 409) },
      },
      handler: async (request) => {
        const keyBytes = request.body.keyBytes ?? 32
        const result = await crypto.generateDataKey(actorOf(request), {
          keyId: request.params.keyId,
          keyBytes,
          withPlaintext: request.body.withPlaintext ?? true,
          context: contextBytes(request.body.context, 'body/context'),
        })
        return dataKeyResponse(result, keyBytes)
      },
    }),

    dataRoute({
      method: 'POST',
      url: '/keys/:keyId/wrap',
      access: access.scope('encryption:write'),
      schema: {
        tags: TAGS,
        summary: 'Wrap key material; unwrap needs the same context',
        operationId: 'wrapKey',
        params: KeyIdParams,
        body: WrapBody,
        response: { 200: WrapResponse, ...errorResponses(403, 404, 409) },
      },
      handler: async (request) => {
        const plaintext = decodeBase64Field(request.body.plaintext, 'body/plaintext')
        if (plaintext.length > MAX_WRAP_BYTES) {
          throw new AppError(
            400,
            'validation_failed',
            'body/plaintext must be at most 64 KiB of key material',
            {
              fields: [{ path: 'body/plaintext', message: `must decode to at most ${MAX_WRAP_BYTES} bytes` }],
            },
          )
        }
        const result = await crypto.wrap(actorOf(request), {
          keyId: request.params.keyId,
          plaintext,
          context: contextBytes(request.body.context, 'body/context'),
        })
        return {
          wrappedKey: toCompact(result).toString('base64'),
          keyId: result.keyId,
          keyVersion: result.keyVersion,
        }
      },
    }),

    dataRoute({
      method: 'POST',
      url: '/keys/:keyId/unwrap',
      access: access.scope('encryption:write'),
      schema: {
        tags: TAGS,
        summary: 'Unwrap a wrapped key or an encryptedDek; any mismatch is decryption_failed',
        operationId: 'unwrapKey',
        params: KeyIdParams,
        body: UnwrapBody,
        response: { 200: UnwrapResponse, ...errorResponses(403, 409) },
      },
      handler: async (request) => {
        const body = request.body
        const keyId = request.params.keyId
        const field = wrappedKeyField(body)
        const bytes = decodeBase64Field(body[field]!, `body/${field}`)
        const result = await crypto.unwrap(actorOf(request), {
          keyId,
          // Compared with the path's key once both are resolved (either may be an alias): 400.
          bodyKeyId: body.keyId,
          keyVersion: body.keyVersion,
          envelope: compactEnvelope(bytes),
          context: contextBytes(body.context, 'body/context'),
        })
        if (body.keyBytes !== undefined && body.keyBytes !== result.plaintext.length) {
          throw invalidField(
            'body/keyBytes',
            `is ${body.keyBytes}, but the unwrapped key has ${result.plaintext.length} bytes`,
          )
        }
        return {
          plaintext: result.plaintext.toString('base64'),
          keyId: result.keyId,
          keyVersion: result.keyVersion,
        }
      },
    }),
  ]
}
