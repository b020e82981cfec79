import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from 'typebox'
import { access } from '../auth/access.ts'
import { actorOf } from '../auth/request-context.ts'
import { errorResponses } from '../http/http-schemas.ts'
import { AppError } from '../platform/errors.ts'
import { isAlias } from './alias-name.ts'
import {
  AliasListSchema,
  AliasParams,
  AliasSchema,
  CreateAliasBody,
  ListAliasesQuery,
  MoveAliasBody,
} from './alias-schemas.ts'
import type { AliasService } from './alias-service.ts'

const TAGS = ['Key aliases']

const invalidCursor = () => new AppError(400, 'invalid_cursor', 'The cursor is not one this list returned')

/** The cursor is the last alias of the page, base64url: opaque to clients, checked on return. */
function decodeCursor(text: string): string {
  const alias = Buffer.from(text, 'base64url').toString('utf8')
  if (!isAlias(alias)) throw invalidCursor()
  return alias
}

/**
 * /aliases (docs/keys.md "Key aliases"). An alias holds `/`, so in a path it is URL-encoded:
 * `/aliases/alias%2Fpayments-prod`, as on every /keys/{keyId} route.
 */
export function aliasRoutes(aliases: AliasService): FastifyPluginAsyncTypebox {
  return async (app) => {
    app.post(
      '/aliases',
      {
        config: { access: access.scope('keys:write') },
        schema: {
          tags: TAGS,
          summary: 'Give a key an alias (alias/<name>), usable wherever a key id is',
          description:
            'A key may have up to 50 aliases; an alias names exactly one key of the tenant. 409 alias_exists when the tenant has it already (move it with PATCH). Names under alias/kms/ are reserved (400 alias_reserved).',
          operationId: 'createKeyAlias',
          body: CreateAliasBody,
          response: { 201: AliasSchema, ...errorResponses(403, 404, 409) },
        },
      },
      async (request, reply) => reply.code(201).send(await aliases.create(actorOf(request), request.body)),
    )

    app.get(
      '/aliases',
      {
        config: { access: access.scope('keys:read') },
        schema: {
          tags: TAGS,
          summary: "The tenant's aliases in alias order, optionally of one key; keyset pagination",
          operationId: 'listKeyAliases',
          querystring: ListAliasesQuery,
          response: { 200: AliasListSchema, ...errorResponses(403, 404) },
        },
      },
      async (request) => {
        const { keyId, limit, cursor } = request.query
        const result = await aliases.list(actorOf(request), {
          keyId,
          limit,
          after: cursor ? decodeCursor(cursor) : null,
        })
        return {
          data: result.data,
          nextCursor: result.next ? Buffer.from(result.next).toString('base64url') : null,
        }
      },
    )

    app.get(
      '/aliases/:alias',
      {
        config: { access: access.scope('keys:read') },
        schema: {
          tags: TAGS,
          summary: 'An alias and the key it names (the alias URL-encoded: alias%2F<name>)',
          operationId: 'getKeyAlias',
          params: AliasParams,
          response: { 200: AliasSchema, ...errorResponses(403, 404) },
        },
      },
      async (request) => aliases.get(actorOf(request), request.params.alias),
    )

    app.patch(
      '/aliases/:alias',
      {
        config: { access: access.scope('keys:write') },
        schema: {
          tags: TAGS,
          summary: 'Move an alias to another key of the same key type (rotation by alias)',
          description:
            'Callers using the alias use the new key from then on; what was encrypted or signed under the old key still decrypts or verifies by its envelope or key id. Another key type is 400 key_type_mismatch.',
          operationId: 'moveKeyAlias',
          params: AliasParams,
          body: MoveAliasBody,
          response: { 200: AliasSchema, ...errorResponses(403, 404, 409) },
        },
      },
      async (request) => aliases.move(actorOf(request), request.params.alias, request.body),
    )

    app.delete(
      '/aliases/:alias',
      {
        config: { access: access.scope('keys:write') },
        schema: {
          tags: TAGS,
          summary: 'Delete an alias (the key stays)',
          operationId: 'deleteKeyAlias',
          params: AliasParams,
          response: { 204: Type.Null({ description: 'Deleted' }), ...errorResponses(403, 404) },
        },
      },
      async (request, reply) => {
        await aliases.delete(actorOf(request), request.params.alias)
        return reply.code(204).send(null)
      },
    )
  }
}
