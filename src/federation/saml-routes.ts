import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from 'typebox'
import { access } from '../auth/access.ts'
import { actorOf } from '../auth/request-context.ts'
import { errorResponses, IdParams } from '../platform/http-schemas.ts'
import {
  SamlIdpBody,
  SamlIdpListQuery,
  SamlIdpListSchema,
  SamlIdpPatchBody,
  SamlIdpSchema,
} from './saml-schemas.ts'
import type { FederationService } from './saml-service.ts'

const TAGS = ['SAML federation']
const PATH = '/saml-identity-providers'

/** A tenant's external SAML identity providers (docs/identity.md "SAML federation"). */
export function samlRoutes(federation: FederationService): FastifyPluginAsyncTypebox {
  return async (app) => {
    app.get(
      PATH,
      {
        config: { access: access.scope('applications:read') },
        schema: {
          tags: TAGS,
          summary: 'Registered SAML identity providers',
          operationId: 'listSamlIdentityProviders',
          querystring: SamlIdpListQuery,
          response: { 200: SamlIdpListSchema, ...errorResponses(403) },
        },
      },
      async (request) => federation.list(actorOf(request), request.query),
    )
    app.get(
      `${PATH}/:id`,
      {
        config: { access: access.scope('applications:read') },
        schema: {
          tags: TAGS,
          summary: 'One SAML identity provider, with the SP values to give it',
          operationId: 'getSamlIdentityProvider',
          params: IdParams,
          response: { 200: SamlIdpSchema, ...errorResponses(403, 404) },
        },
      },
      async (request) => federation.get(actorOf(request), request.params.id),
    )
    app.post(
      PATH,
      {
        config: { access: access.scope('applications:write') },
        schema: {
          tags: TAGS,
          summary: 'Register a SAML identity provider (its certificate is checked now)',
          operationId: 'createSamlIdentityProvider',
          body: SamlIdpBody,
          response: { 201: SamlIdpSchema, ...errorResponses(400, 403, 409) },
        },
      },
      async (request, reply) => {
        reply.code(201)
        return federation.create(actorOf(request), request.body)
      },
    )
    app.patch(
      `${PATH}/:id`,
      {
        config: { access: access.scope('applications:write') },
        schema: {
          tags: TAGS,
          summary: 'Change a registration (a new certificate is checked as at registration)',
          operationId: 'updateSamlIdentityProvider',
          params: IdParams,
          body: SamlIdpPatchBody,
          response: { 200: SamlIdpSchema, ...errorResponses(400, 403, 404, 409) },
        },
      },
      async (request) => federation.update(actorOf(request), request.params.id, request.body),
    )
    app.delete(
      `${PATH}/:id`,
      {
        config: { access: access.scope('applications:write') },
        schema: {
          tags: TAGS,
          summary: 'Remove a registration (its users keep their accounts)',
          operationId: 'deleteSamlIdentityProvider',
          params: IdParams,
          response: { 204: Type.Null({ description: 'Deleted' }), ...errorResponses(403, 404) },
        },
      },
      async (request, reply) => {
        await federation.remove(actorOf(request), request.params.id)
        return reply.code(204).send(null)
      },
    )
  }
}
