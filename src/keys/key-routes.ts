import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { FastifyRequest } from 'fastify'
import { type Static, Type } from 'typebox'
import { access } from '../auth/access.ts'
import { actorOf, missingScopesFor } from '../auth/request-context.ts'
import { errorResponses, toDate } from '../http/http-schemas.ts'
import { parseInclude } from '../http/include.ts'
import { AppError } from '../platform/errors.ts'
import type { PublicFormat } from './key-material.ts'
import {
  CreateKeyBody,
  DeleteKeyQuery,
  ExportPrivateBody,
  ImportKeyBody,
  JwkSchema,
  KeyIdParams,
  KeyListSchema,
  KeySchema,
  KeyVersionsSchema,
  ListKeysQuery,
  PrivateKeySchema,
  PUBLIC_INCLUDE_FIELDS,
  PublicKeyDownloadQuery,
  PublicKeyQuery,
  PublicKeySchema,
  UpdateKeyBody,
} from './key-schemas.ts'
import { EXPIRY_ALERT_DAYS, type KeyCaller, type KeyService, type KeyView } from './key-service.ts'
import type { KeyListPosition, KeySort } from './key-store.ts'

const TAGS = ['Keys']

/**
 * Making a key the tenant's default (the key callers that omit keyId use) is a data-access
 * decision: besides keys:write it needs the scope that uses keys of the type, and every key type
 * is used under encryption:write. The service tells when a request changes the default.
 */
const DEFAULT_KEY = 'defaultKey'
const WRITES_KEYS = access.withConditions(access.scope('keys:write'), {
  [DEFAULT_KEY]: ['keys:write', 'encryption:write'],
})

const keyCallerOf = (request: FastifyRequest): KeyCaller => ({
  missingForDefault: missingScopesFor(request, DEFAULT_KEY),
})

/** Spec 2.2's download table: extension and media type per format. */
const DOWNLOAD: Record<PublicFormat, { extension: string; contentType: string }> = {
  PEM: { extension: 'pem', contentType: 'application/x-pem-file' },
  DER: { extension: 'der', contentType: 'application/pkix-spki' },
  RAW: { extension: 'txt', contentType: 'text/plain; charset=utf-8' },
  JWK: { extension: 'json', contentType: 'application/jwk+json' },
}

interface Cursor extends KeyListPosition {
  sort: KeySort
  descending: boolean
}

function encodeCursor(cursor: Cursor): string {
  const { sort, descending, favorite, value, id } = cursor
  return Buffer.from(JSON.stringify([sort, descending, favorite, value, id])).toString('base64url')
}

const invalidCursor = () =>
  new AppError(400, 'invalid_cursor', 'The cursor is not one this list returned for the same sort order')

function decodeCursor(text: string, sort: KeySort, descending: boolean): KeyListPosition {
  let parsed: unknown
  try {
    parsed = JSON.parse(Buffer.from(text, 'base64url').toString('utf8'))
  } catch {
    throw invalidCursor()
  }
  if (!Array.isArray(parsed) || parsed.length !== 5) throw invalidCursor()
  const [cursorSort, cursorDescending, favorite, value, id] = parsed as unknown[]
  // The value goes back to PostgreSQL: it must fit the column, or the database would refuse it.
  const valueOk =
    sort === 'version'
      ? Number.isInteger(value) && (value as number) >= 1 && (value as number) <= 2_147_483_647
      : sort === 'status'
        ? Number.isInteger(value) && (value as number) >= 0 && (value as number) <= 4
        : typeof value === 'string' && value.length <= 400 && !value.includes('\u0000')
  const year = sort === 'createdAt' && typeof value === 'string' ? new Date(value).getUTCFullYear() : 2000
  const dateOk = year >= 1 && year <= 9999
  if (
    cursorSort !== sort ||
    cursorDescending !== descending ||
    typeof favorite !== 'boolean' ||
    !valueOk ||
    !dateOk ||
    typeof id !== 'string' ||
    !/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/.test(id)
  ) {
    throw invalidCursor()
  }
  return { favorite, value: value as string | number, id }
}

/** A file name from the key name, safe in a header; the id when nothing printable is left. */
function downloadName(key: KeyView, version: number, extension: string): string {
  const base =
    key.name
      .replace(/[^A-Za-z0-9._-]+/g, '_')
      .replace(/^[._]+/, '')
      .slice(0, 100) || key.id
  return `${base}-v${version}.${extension}`
}

export function keyRoutes(keys: KeyService): FastifyPluginAsyncTypebox {
  return async (app) => {
    app.post(
      '/keys',
      {
        config: { access: WRITES_KEYS },
        schema: {
          tags: TAGS,
          summary: 'Generate a key (Active at once, public key available at once)',
          operationId: 'createKey',
          body: CreateKeyBody,
          response: { 201: KeySchema, ...errorResponses(403, 409) },
        },
      },
      async (request, reply) => {
        const { expiresAt, ...rest } = request.body
        const key = await keys.create(
          actorOf(request),
          {
            ...rest,
            ...(expiresAt !== undefined ? { expiresAt: toDate(expiresAt, 'body/expiresAt') } : {}),
          },
          keyCallerOf(request),
        )
        return reply.code(201).send(key)
      },
    )

    app.post(
      '/keys/import',
      {
        config: { access: WRITES_KEYS },
        schema: {
          tags: TAGS,
          summary:
            'Import a private key (BYOK; the material is sealed before the response), or a public key alone (publicOnly)',
          operationId: 'importKey',
          body: ImportKeyBody,
          response: { 201: KeySchema, ...errorResponses(403, 409) },
        },
      },
      async (request, reply) => {
        const { expiresAt, keyMaterial, ...rest } = request.body
        const key = await keys.import(
          actorOf(request),
          {
            ...rest,
            material: keyMaterial,
            ...(expiresAt !== undefined ? { expiresAt: toDate(expiresAt, 'body/expiresAt') } : {}),
          },
          keyCallerOf(request),
        )
        return reply.code(201).send(key)
      },
    )

    app.get(
      '/keys',
      {
        config: { access: access.scope('keys:read') },
        schema: {
          tags: TAGS,
          summary: 'List keys: favourites first, then by the sort column; keyset pagination',
          operationId: 'listKeys',
          querystring: ListKeysQuery,
          response: { 200: KeyListSchema, ...errorResponses(403) },
        },
      },
      async (request) => {
        const q = request.query
        const descending = q.order === 'desc'
        const result = await keys.list(actorOf(request), {
          filter: {
            status: q.status,
            keyType: q.keyType,
            algorithm: q.algorithm,
            labels: q.label,
            search: q.search,
            favorite: q.favorite,
          },
          sort: q.sort,
          descending,
          limit: q.limit,
          after: q.cursor ? decodeCursor(q.cursor, q.sort, descending) : null,
        })
        return {
          data: result.data,
          total: result.total,
          totalIsExact: result.totalIsExact,
          nextCursor: result.next ? encodeCursor({ ...result.next, sort: q.sort, descending }) : null,
          ...(result.expiringSoon > 0
            ? {
                alert: {
                  expiringSoon: result.expiringSoon,
                  windowDays: EXPIRY_ALERT_DAYS,
                  message: `${result.expiringSoon} active key(s) expire within ${EXPIRY_ALERT_DAYS} days`,
                },
              }
            : {}),
        }
      },
    )

    app.get(
      '/keys/:keyId',
      {
        config: { access: access.scope('keys:read') },
        schema: {
          tags: TAGS,
          summary: 'Get a key',
          operationId: 'getKey',
          params: KeyIdParams,
          response: { 200: KeySchema, ...errorResponses(403, 404) },
        },
      },
      async (request) => keys.get(actorOf(request), request.params.keyId),
    )

    app.patch(
      '/keys/:keyId',
      {
        config: { access: WRITES_KEYS },
        schema: {
          tags: TAGS,
          summary: 'Update name, description, labels, expiration, default or favourite status',
          operationId: 'updateKey',
          params: KeyIdParams,
          body: UpdateKeyBody,
          response: { 200: KeySchema, ...errorResponses(403, 404, 409) },
        },
      },
      async (request) => {
        const { expiresAt, ...rest } = request.body
        return keys.update(
          actorOf(request),
          request.params.keyId,
          {
            ...rest,
            ...(expiresAt !== undefined
              ? { expiresAt: expiresAt === null ? null : toDate(expiresAt, 'body/expiresAt') }
              : {}),
          },
          keyCallerOf(request),
        )
      },
    )

    app.delete(
      '/keys/:keyId',
      {
        config: { access: access.scope('keys:write') },
        schema: {
          tags: TAGS,
          summary: 'Schedule deletion (Pending Deletion; destroyed after the window)',
          operationId: 'scheduleKeyDeletion',
          params: KeyIdParams,
          querystring: DeleteKeyQuery,
          response: { 200: KeySchema, ...errorResponses(403, 404, 409) },
        },
      },
      async (request) =>
        keys.scheduleDeletion(actorOf(request), request.params.keyId, request.query.pendingWindowDays),
    )

    const lifecycle = [
      ['rotate', 'rotateKey', 'Add a new version (new material, same key id)', keys.rotate],
      ['revoke', 'revokeKey', 'Revoke (irreversible; decrypt and verify still work)', keys.revoke],
      [
        'cancel-deletion',
        'cancelKeyDeletion',
        'Cancel a scheduled deletion before its date',
        keys.cancelDeletion,
      ],
    ] as const
    for (const [verb, operationId, summary, run] of lifecycle) {
      app.post(
        `/keys/:keyId/${verb}`,
        {
          config: { access: access.scope('keys:write') },
          schema: {
            tags: TAGS,
            summary,
            operationId,
            params: KeyIdParams,
            response: { 200: KeySchema, ...errorResponses(403, 404, 409) },
          },
        },
        async (request) => run(actorOf(request), request.params.keyId),
      )
    }

    app.get(
      '/keys/:keyId/versions',
      {
        config: { access: access.scope('keys:read') },
        schema: {
          tags: TAGS,
          summary: 'All versions of a key',
          operationId: 'listKeyVersions',
          params: KeyIdParams,
          response: { 200: KeyVersionsSchema, ...errorResponses(403, 404) },
        },
      },
      async (request) => keys.versions(actorOf(request), request.params.keyId),
    )

    app.get(
      '/keys/:keyId/public',
      {
        config: { access: access.scope('keys:read') },
        schema: {
          tags: TAGS,
          summary: 'Export the public key (PEM, DER, RAW or JWK)',
          operationId: 'getPublicKey',
          params: KeyIdParams,
          querystring: PublicKeyQuery,
          response: { 200: Type.Union([PublicKeySchema, JwkSchema]), ...errorResponses(403, 404, 409) },
        },
      },
      async (request) => {
        const { format, include, version } = request.query
        const fields = [
          ...parseInclude(include, PUBLIC_INCLUDE_FIELDS, {
            metadata: PUBLIC_INCLUDE_FIELDS,
            all: PUBLIC_INCLUDE_FIELDS,
          }).fields,
        ]
        const result = await keys.exportPublic(actorOf(request), request.params.keyId, format, version)
        const { exported } = result
        if (exported.format === 'JWK') return exported.jwk as Static<typeof JwkSchema>
        return {
          publicKey: exported.text,
          algorithm: result.key.algorithm,
          version: result.version,
          format: exported.format as 'PEM' | 'DER' | 'RAW',
          ...Object.fromEntries(fields.map((f) => [f, result.key[f]])),
        }
      },
    )

    app.get(
      '/keys/:keyId/public/download',
      {
        config: { access: access.scope('keys:read') },
        schema: {
          tags: TAGS,
          summary: 'Download the public key as a file (.pem, .der, .txt or .json)',
          operationId: 'downloadPublicKey',
          params: KeyIdParams,
          querystring: PublicKeyDownloadQuery,
          response: { 200: Type.String({ description: 'The key file' }), ...errorResponses(403, 404, 409) },
        },
      },
      async (request, reply) => {
        const { format, version } = request.query
        const result = await keys.exportPublic(actorOf(request), request.params.keyId, format, version)
        const { exported } = result
        const file = DOWNLOAD[format]
        const body =
          exported.format === 'JWK'
            ? Buffer.from(`${JSON.stringify(exported.jwk, null, 2)}\n`)
            : format === 'RAW'
              ? Buffer.from(`${exported.text}\n`)
              : exported.bytes
        return (
          reply
            .header('content-type', file.contentType)
            .header(
              'content-disposition',
              `attachment; filename="${downloadName(result.key, result.version, file.extension)}"`,
            )
            // A Buffer is sent as is; the string schema above only documents the file.
            .send(body as unknown as string)
        )
      },
    )

    app.post(
      '/keys/:keyId/export-private',
      {
        config: { access: access.scope('keys:export') },
        schema: {
          tags: TAGS,
          summary:
            "Export the private key: needs keys:export and a key created or imported with exportable: true; confirm repeats the key's name. Audited at warning level.",
          operationId: 'exportPrivateKey',
          params: KeyIdParams,
          body: ExportPrivateBody,
          response: { 200: PrivateKeySchema, ...errorResponses(403, 404, 409) },
        },
      },
      async (request, reply) => {
        reply.header('cache-control', 'no-store')
        const result = await keys.exportPrivate(actorOf(request), request.params.keyId, request.body)
        return {
          keyId: result.key.id,
          algorithm: result.key.algorithm,
          version: result.version,
          format: request.body.format,
          encrypted: result.exported.encrypted,
          privateKey: result.exported.value,
        }
      },
    )
  }
}
