import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from 'typebox'
import { access } from '../auth/access.ts'
import { actorOf } from '../auth/request-context.ts'
import { errorResponses, IdParams } from '../http/http-schemas.ts'
import {
  CreatedEndUserSchema,
  CreateEndUserBody,
  EndUserListQuery,
  EndUserListSchema,
  EndUserSchema,
  LinkDispatchSchema,
  SendResetBody,
} from './enduser-schemas.ts'
import type { EndUserService } from './enduser-service.ts'

const TAGS = ['End-users']

export function endUserRoutes(endusers: EndUserService): FastifyPluginAsyncTypebox {
  return async (app) => {
    app.get(
      '/endusers',
      {
        config: { access: access.scope('endusers:read') },
        schema: {
          tags: TAGS,
          summary: 'The tenant’s end-users, oldest first; filter by application, status, search',
          operationId: 'listEndUsers',
          querystring: EndUserListQuery,
          response: { 200: EndUserListSchema, ...errorResponses(403) },
        },
      },
      async (request) => {
        const { limit, offset, applicationId, status, search } = request.query
        return endusers.list(
          actorOf(request),
          { applicationId, status, search: search?.trim() || undefined },
          { limit, offset },
        )
      },
    )
    app.get(
      '/endusers/:id',
      {
        config: { access: access.scope('endusers:read') },
        schema: {
          tags: TAGS,
          summary: 'One end-user',
          operationId: 'getEndUser',
          params: IdParams,
          response: { 200: EndUserSchema, ...errorResponses(403, 404) },
        },
      },
      async (request) => endusers.get(actorOf(request), request.params.id),
    )
    app.post(
      '/endusers/create-without-password',
      {
        config: { access: access.scope('endusers:write') },
        schema: {
          tags: TAGS,
          summary: 'Create an end-user with no password; the set-up link goes out by e-mail',
          operationId: 'createEndUserWithoutPassword',
          body: CreateEndUserBody,
          response: { 201: CreatedEndUserSchema, ...errorResponses(403, 404, 409) },
        },
      },
      async (request, reply) => {
        reply.code(201)
        return endusers.createWithoutPassword(actorOf(request), request.body)
      },
    )
    app.post(
      '/endusers/:id/send-password-reset',
      {
        config: { access: access.scope('endusers:write') },
        schema: {
          tags: TAGS,
          summary: 'E-mail a password reset link (one hour, single use; older reset links stop working)',
          operationId: 'sendEndUserPasswordReset',
          params: IdParams,
          body: SendResetBody,
          response: { 202: LinkDispatchSchema, ...errorResponses(403, 404, 409) },
        },
      },
      async (request, reply) => {
        reply.code(202)
        return endusers.sendPasswordReset(actorOf(request), request.params.id, request.body)
      },
    )
    for (const action of ['block', 'unblock'] as const) {
      app.post(
        `/endusers/:id/${action}`,
        {
          config: { access: access.scope('endusers:write') },
          schema: {
            tags: TAGS,
            summary:
              action === 'block'
                ? 'Block: sign-in disabled and the record flagged; sessions and refresh tokens end at once (idempotent)'
                : 'Unblock: sign-in enabled again (idempotent)',
            operationId: action === 'block' ? 'blockEndUser' : 'unblockEndUser',
            params: IdParams,
            response: { 200: EndUserSchema, ...errorResponses(403, 404) },
          },
        },
        async (request) => endusers[action](actorOf(request), request.params.id),
      )
    }
    app.delete(
      '/endusers/:id/permanent',
      {
        config: { access: access.scope('endusers:write') },
        schema: {
          tags: TAGS,
          summary: 'Delete for good: the identity user, then the record with its applications and roles',
          operationId: 'deleteEndUserPermanently',
          params: IdParams,
          response: { 204: Type.Null({ description: 'Deleted' }), ...errorResponses(403, 404) },
        },
      },
      async (request, reply) => {
        await endusers.deletePermanently(actorOf(request), request.params.id)
        return reply.code(204).send(null)
      },
    )
  }
}
