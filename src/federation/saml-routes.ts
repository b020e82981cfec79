import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from 'typebox'
import { access } from '../auth/access.ts'
import { actorOf } from '../auth/request-context.ts'
import { errorResponses, IdParams } from '../http/http-schemas.ts'
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

/**
 * Who reads registrations: whoever may read applications (developers, viewers, keys with
 * applications:read); a registration holds nothing secret, and developers need its SP values.
 */
const READ = access.scope('applications:read')
/**
 * Who changes them: owner and admin sessions only (issue 30). A registered IdP's certificate signs
 * whatever addresses it likes, so registering one is deciding who may sign in as the tenant's
 * end-users: tenant administration, a person's act. Developers and API keys get 403 `forbidden`.
 */
const MANAGE = access.role('tenant:owner', 'tenant:admin')

/** A tenant's external SAML identity providers (docs/identity.md "SAML federation"). */
export function samlRoutes(federation: FederationService): FastifyPluginAsyncTypebox {
  return async (app) => {
    app.get(
      PATH,
      {
        config: { access: READ },
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
        config: { access: READ },
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
        config: { access: MANAGE },
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
        config: { access: MANAGE },
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
        config: { access: MANAGE },
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
