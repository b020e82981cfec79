import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { FastifyRequest } from 'fastify'
import { Type } from 'typebox'
import { access } from '../auth/access.ts'
import { actorOf } from '../auth/request-context.ts'
import { errorResponses, IdParams } from '../http/http-schemas.ts'
import {
  AccessDecisionBody,
  AccessPolicyBody,
  AccessPolicyListQuery,
  AccessPolicyListSchema,
  AccessPolicyPatchBody,
  AccessPolicySchema,
  AccessRequestListQuery,
  AccessRequestListSchema,
  AccessRequestSchema,
} from './access-policy-schemas.ts'
import { type AccessPolicyService, actionNotSupported, UNRELEASED_ACTIONS } from './access-policy-service.ts'

const TAGS = ['Access policies']
/** The body is optional: a decision without a reason needs none. */
const DecisionBody = Type.Optional(AccessDecisionBody)
/** A person decides on access: owners and admins, never an API key (docs/identity.md). */
const DECIDE = access.role('tenant:owner', 'tenant:admin')

/**
 * An unreleased action (RequireMfa) is refused before the body is validated: whatever else the
 * body holds (no priority, no name, a field too many), the answer is action_not_supported with
 * the supported actions, never a validation_failed about another field (docs/identity.md).
 */
async function unreleasedActionFirst(request: FastifyRequest): Promise<void> {
  const body = request.body
  if (typeof body !== 'object' || body === null || !('action' in body)) return
  if ((UNRELEASED_ACTIONS as readonly unknown[]).includes(body.action)) throw actionNotSupported()
}

export function accessPolicyRoutes(policies: AccessPolicyService): FastifyPluginAsyncTypebox {
  return async (app) => {
    app.get(
      '/access-policies',
      {
        config: { access: access.scope('policies:read') },
        schema: {
          tags: TAGS,
          summary: 'The tenant’s access policies in evaluation order (priority, lowest first)',
          operationId: 'listAccessPolicies',
          querystring: AccessPolicyListQuery,
          response: { 200: AccessPolicyListSchema, ...errorResponses(403) },
        },
      },
      async (request) => policies.list(actorOf(request), request.query),
    )
    app.get(
      '/access-policies/:id',
      {
        config: { access: access.scope('policies:read') },
        schema: {
          tags: TAGS,
          summary: 'One access policy',
          operationId: 'getAccessPolicy',
          params: IdParams,
          response: { 200: AccessPolicySchema, ...errorResponses(403, 404) },
        },
      },
      async (request) => policies.get(actorOf(request), request.params.id),
    )
    app.post(
      '/access-policies',
      {
        config: { access: access.scope('policies:write') },
        preValidation: unreleasedActionFirst,
        schema: {
          tags: TAGS,
          summary: 'Create an access policy (applies to sign-ins from the next one on)',
          operationId: 'createAccessPolicy',
          body: AccessPolicyBody,
          response: { 201: AccessPolicySchema, ...errorResponses(400, 403, 409) },
        },
      },
      async (request, reply) => {
        reply.code(201)
        return policies.create(actorOf(request), request.body)
      },
    )
    app.put(
      '/access-policies/:id',
      {
        config: { access: access.scope('policies:write') },
        preValidation: unreleasedActionFirst,
        schema: {
          tags: TAGS,
          summary: 'Replace an access policy (condition lists left out become empty)',
          operationId: 'replaceAccessPolicy',
          params: IdParams,
          body: AccessPolicyBody,
          response: { 200: AccessPolicySchema, ...errorResponses(400, 403, 404, 409) },
        },
      },
      async (request) => policies.replace(actorOf(request), request.params.id, request.body),
    )
    app.patch(
      '/access-policies/:id',
      {
        config: { access: access.scope('policies:write') },
        preValidation: unreleasedActionFirst,
        schema: {
          tags: TAGS,
          summary: 'Change some fields of an access policy',
          operationId: 'updateAccessPolicy',
          params: IdParams,
          body: AccessPolicyPatchBody,
          response: { 200: AccessPolicySchema, ...errorResponses(400, 403, 404, 409) },
        },
      },
      async (request) => policies.patch(actorOf(request), request.params.id, request.body),
    )
    app.delete(
      '/access-policies/:id',
      {
        config: { access: access.scope('policies:write') },
        schema: {
          tags: TAGS,
          summary: 'Delete an access policy',
          operationId: 'deleteAccessPolicy',
          params: IdParams,
          response: { 204: Type.Null({ description: 'Deleted' }), ...errorResponses(403, 404) },
        },
      },
      async (request, reply) => {
        await policies.remove(actorOf(request), request.params.id)
        return reply.code(204).send(null)
      },
    )
    app.get(
      '/access-requests',
      {
        config: { access: access.scope('policies:read') },
        schema: {
          tags: TAGS,
          summary: 'Sign-ins waiting for (or given) a decision, newest first',
          operationId: 'listAccessRequests',
          querystring: AccessRequestListQuery,
          response: { 200: AccessRequestListSchema, ...errorResponses(403) },
        },
      },
      async (request) => {
        const { status, limit, offset } = request.query
        return policies.listRequests(actorOf(request), status, { limit, offset })
      },
    )
    app.get(
      '/access-requests/:id',
      {
        config: { access: access.scope('policies:read') },
        schema: {
          tags: TAGS,
          summary: 'One access request',
          operationId: 'getAccessRequest',
          params: IdParams,
          response: { 200: AccessRequestSchema, ...errorResponses(403, 404) },
        },
      },
      async (request) => policies.getRequest(actorOf(request), request.params.id),
    )
    for (const decision of ['approve', 'reject'] as const) {
      app.post(
        `/access-requests/:id/${decision}`,
        {
          config: { access: DECIDE },
          // No body at all is a decision without a reason.
          preValidation: async (request) => {
            request.body ??= {}
          },
          schema: {
            tags: TAGS,
            summary:
              decision === 'approve'
                ? 'Approve: the end-user may sign in to the application for 8 hours; told by e-mail'
                : 'Reject: the waiting sign-in is refused; the end-user is told by e-mail',
            operationId: decision === 'approve' ? 'approveAccessRequest' : 'rejectAccessRequest',
            params: IdParams,
            body: DecisionBody,
            response: { 200: AccessRequestSchema, ...errorResponses(400, 403, 404, 409) },
          },
        },
        async (request) => policies[decision](actorOf(request), request.params.id, request.body?.reason),
      )
    }
  }
}
