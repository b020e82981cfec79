import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from 'typebox'
import { access } from '../auth/access.ts'
import { actorOf } from '../auth/request-context.ts'
import { errorResponses } from '../http/http-schemas.ts'
import { parseInclude } from '../http/include.ts'
import {
  CreateSecretBody,
  DeleteSecretQuery,
  GetSecretQuery,
  GetVersionQuery,
  ListSecretsQuery,
  MoveSecretsBody,
  SecretIdParams,
  SecretListSchema,
  SecretSchema,
  SecretVersionListSchema,
  SecretVersionParams,
  SecretVersionSchema,
  TotpCodeSchema,
  UpdateSecretBody,
} from './secret-schemas.ts'
import { parseSecretInclude, type SecretService } from './secret-service.ts'

const TAGS = ['Secrets']

export function secretRoutes(secrets: SecretService): FastifyPluginAsyncTypebox {
  return async (app) => {
    app.post(
      '/secrets',
      {
        config: { access: access.scope('secrets:write') },
        schema: {
          tags: TAGS,
          summary: 'Create a secret (version 1 of its value); answers with its metadata',
          operationId: 'createSecret',
          body: CreateSecretBody,
          response: { 201: SecretSchema, ...errorResponses(403, 404, 409) },
        },
      },
      async (request, reply) => {
        reply.code(201)
        return secrets.create(actorOf(request), request.body)
      },
    )

    app.get(
      '/secrets',
      {
        config: { access: access.scope('secrets:read') },
        schema: {
          tags: TAGS,
          summary: 'List secrets by name; include selects fields as for one secret',
          operationId: 'listSecrets',
          querystring: ListSecretsQuery,
          response: { 200: SecretListSchema, ...errorResponses(403) },
        },
      },
      async (request) => {
        const selection = parseSecretInclude(request.query.include)
        const { data, total } = await secrets.list(actorOf(request), request.query, selection)
        return { data, total, limit: request.query.limit, offset: request.query.offset }
      },
    )

    app.post(
      '/secrets/move',
      {
        config: { access: access.scope('secrets:write') },
        schema: {
          tags: TAGS,
          summary: 'Move secrets into a folder (or the top level), all or none',
          operationId: 'moveSecrets',
          body: MoveSecretsBody,
          response: { 200: Type.Object({ moved: Type.Integer() }), ...errorResponses(403, 404, 409) },
        },
      },
      async (request) => ({
        moved: await secrets.move(actorOf(request), request.body.secretIds, request.body.folderId),
      }),
    )

    app.get(
      '/secrets/:id',
      {
        config: { access: access.scope('secrets:read') },
        schema: {
          tags: TAGS,
          summary: 'A secret: id, name and version by default; include selects more, all the value',
          operationId: 'getSecret',
          params: SecretIdParams,
          querystring: GetSecretQuery,
          response: { 200: SecretSchema, ...errorResponses(403, 404, 409) },
        },
      },
      async (request) => {
        const selection = parseSecretInclude(request.query.include)
        const view = await secrets.get(actorOf(request), request.params.id, selection)
        return view
      },
    )

    app.patch(
      '/secrets/:id',
      {
        config: { access: access.scope('secrets:write') },
        schema: {
          tags: TAGS,
          summary: 'Change a secret; a new value becomes a new version',
          operationId: 'updateSecret',
          params: SecretIdParams,
          body: UpdateSecretBody,
          response: { 200: SecretSchema, ...errorResponses(403, 404, 409) },
        },
      },
      async (request) => secrets.update(actorOf(request), request.params.id, request.body),
    )

    app.delete(
      '/secrets/:id',
      {
        config: { access: access.scope('secrets:write') },
        schema: {
          tags: TAGS,
          summary: 'Delete a secret: restorable for 30 days, or purged now with permanent=true',
          operationId: 'deleteSecret',
          params: SecretIdParams,
          querystring: DeleteSecretQuery,
          response: {
            200: SecretSchema,
            204: Type.Null({ description: 'Purged' }),
            ...errorResponses(403, 404),
          },
        },
      },
      async (request, reply) => {
        const deleted = await secrets.remove(actorOf(request), request.params.id, request.query.permanent)
        if (!deleted) return reply.code(204).send(null)
        return deleted
      },
    )

    app.post(
      '/secrets/:id/restore',
      {
        config: { access: access.scope('secrets:write') },
        schema: {
          tags: TAGS,
          summary: 'Restore a deleted secret within 30 days of its deletion',
          operationId: 'restoreSecret',
          params: SecretIdParams,
          response: { 200: SecretSchema, ...errorResponses(403, 404, 409) },
        },
      },
      async (request) => secrets.restore(actorOf(request), request.params.id),
    )

    app.get(
      '/secrets/:id/versions',
      {
        config: { access: access.scope('secrets:read') },
        schema: {
          tags: TAGS,
          summary: 'The kept versions of the value, newest first (no values)',
          operationId: 'listSecretVersions',
          params: SecretIdParams,
          response: { 200: SecretVersionListSchema, ...errorResponses(403, 404) },
        },
      },
      async (request) => ({ data: await secrets.versions(actorOf(request), request.params.id) }),
    )

    app.get(
      '/secrets/:id/versions/:version',
      {
        config: { access: access.scope('secrets:read') },
        schema: {
          tags: TAGS,
          summary: 'One version of the value; include=all returns the value itself',
          operationId: 'getSecretVersion',
          params: SecretVersionParams,
          querystring: GetVersionQuery,
          response: { 200: SecretVersionSchema, ...errorResponses(403, 404, 409) },
        },
      },
      async (request) => {
        const { tokens } = parseInclude(request.query.include, [], { all: [] })
        const { id, version } = request.params
        return secrets.version(actorOf(request), id, version, tokens.has('all'))
      },
    )

    app.get(
      '/secrets/:id/totp',
      {
        config: { access: access.scope('secrets:read') },
        schema: {
          tags: TAGS,
          summary: 'The current TOTP code of the secret (RFC 6238); audited as a value read',
          operationId: 'getSecretTotp',
          params: SecretIdParams,
          response: { 200: TotpCodeSchema, ...errorResponses(403, 404, 409) },
        },
      },
      async (request) => {
        return secrets.totp(actorOf(request), request.params.id)
      },
    )
  }
}
