import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from 'typebox'
import { access } from '../auth/access.ts'
import { actorOf } from '../auth/request-context.ts'
import { errorResponses, IdParams, PageQuery } from '../http/http-schemas.ts'
import {
  ApplicationListSchema,
  ApplicationSchema,
  ApplicationWithSecretSchema,
  CreateApplicationBody,
  UpdateApplicationBody,
} from './application-schemas.ts'
import type { ApplicationService } from './application-service.ts'

const TAGS = ['Applications']

export function applicationRoutes(applications: ApplicationService): FastifyPluginAsyncTypebox {
  return async (app) => {
    app.get(
      '/applications',
      {
        config: { access: access.scope('applications:read') },
        schema: {
          tags: TAGS,
          summary: 'The tenant’s applications (OpenID clients), oldest first',
          operationId: 'listApplications',
          querystring: Type.Object(PageQuery, { additionalProperties: false }),
          response: { 200: ApplicationListSchema, ...errorResponses(403) },
        },
      },
      async (request) => applications.list(actorOf(request), request.query),
    )
    app.get(
      '/applications/:id',
      {
        config: { access: access.scope('applications:read') },
        schema: {
          tags: TAGS,
          summary: 'One application',
          operationId: 'getApplication',
          params: IdParams,
          response: { 200: ApplicationSchema, ...errorResponses(403, 404) },
        },
      },
      async (request) => applications.get(actorOf(request), request.params.id),
    )
    app.post(
      '/applications',
      {
        config: { access: access.scope('applications:write') },
        schema: {
          tags: TAGS,
          summary: 'Register an application; a confidential one’s secret is in this answer only',
          operationId: 'createApplication',
          body: CreateApplicationBody,
          response: { 201: ApplicationWithSecretSchema, ...errorResponses(403) },
        },
      },
      async (request, reply) => {
        reply.code(201)
        return applications.create(actorOf(request), request.body)
      },
    )
    app.put(
      '/applications/:id',
      {
        config: { access: access.scope('applications:write') },
        schema: {
          tags: TAGS,
          summary:
            'Change an application: omitting resources keeps them, an empty array clears them; a read answer put back unchanged is valid',
          operationId: 'updateApplication',
          params: IdParams,
          body: UpdateApplicationBody,
          // 409 read_only_field: the type, an id, the secret state or a timestamp differs from the stored one.
          response: { 200: ApplicationSchema, ...errorResponses(403, 404, 409) },
        },
      },
      async (request) => applications.update(actorOf(request), request.params.id, request.body),
    )
    app.post(
      '/applications/:id/rotate-secret',
      {
        config: { access: access.scope('applications:write') },
        schema: {
          tags: TAGS,
          summary: 'A new client secret, shown once; the old one stops working',
          operationId: 'rotateApplicationSecret',
          params: IdParams,
          response: { 200: ApplicationWithSecretSchema, ...errorResponses(403, 404, 409) },
        },
      },
      async (request) => applications.rotateSecret(actorOf(request), request.params.id),
    )
    app.delete(
      '/applications/:id',
      {
        config: { access: access.scope('applications:write') },
        schema: {
          tags: TAGS,
          summary: 'Delete an application',
          operationId: 'deleteApplication',
          params: IdParams,
          response: { 204: Type.Null({ description: 'Deleted' }), ...errorResponses(403, 404) },
        },
      },
      async (request, reply) => {
        await applications.remove(actorOf(request), request.params.id)
        return reply.code(204).send(null)
      },
    )
  }
}
