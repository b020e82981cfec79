import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from 'typebox'
import { access } from '../auth/access.ts'
import { actorOf, principalOf } from '../auth/request-context.ts'
import { TENANT_ROLES, type TenantRole } from '../auth/roles.ts'
import { errorResponses, IdParams } from '../http/http-schemas.ts'
import {
  ChangeRoleBody,
  CreateInvitationBody,
  InvitationListSchema,
  InvitationSchema,
  MemberListSchema,
  MemberParams,
  MemberSchema,
  MeSchema,
} from './team-schemas.ts'
import type { TeamCaller, TeamService } from './team-service.ts'

const TAGS = ['Team']
/**
 * People manage people: the team routes admit signed-in members only (docs/decisions.md). Every
 * member may read the team; owners and admins change it; only owners grant or take the owner role.
 */
const READ = access.role(...(TENANT_ROLES as readonly [TenantRole, ...TenantRole[]]))
const WRITE = access.role('tenant:owner', 'tenant:admin')

export function teamRoutes(team: TeamService): FastifyPluginAsyncTypebox {
  const callerOf = (request: Parameters<typeof principalOf>[0]): TeamCaller => {
    const principal = principalOf(request)
    return { memberRole: principal.kind === 'member' ? principal.role : undefined }
  }
  return async (app) => {
    app.get(
      '/me',
      {
        config: { access: READ },
        schema: {
          tags: TAGS,
          summary: 'The signed-in member and every tenant they belong to',
          description:
            'A person’s access token (any tenant’s) answers with their account and memberships, so a client can learn which `urn:kms:tenant:<id>` to ask the provider for. API keys get 403: they belong to one tenant and no person.',
          operationId: 'getMe',
          response: { 200: MeSchema, ...errorResponses(403) },
        },
      },
      async (request) => {
        const principal = principalOf(request)
        // READ admits members only; the check narrows the type.
        if (principal.kind !== 'member') throw new Error('GET /me reached without a member')
        return team.me(principal.tenantId, principal.accountId)
      },
    )
    app.get(
      '/team/members',
      {
        config: { access: READ },
        schema: {
          tags: TAGS,
          summary: 'The tenant’s members and their roles',
          operationId: 'listTeamMembers',
          response: { 200: MemberListSchema, ...errorResponses(403) },
        },
      },
      async (request) => team.listMembers(actorOf(request).tenantId),
    )
    app.patch(
      '/team/members/:accountId',
      {
        config: { access: WRITE },
        schema: {
          tags: TAGS,
          summary: 'Change a member’s role (owner role: owners only; never the last owner away)',
          operationId: 'changeTeamMemberRole',
          params: MemberParams,
          body: ChangeRoleBody,
          response: { 200: MemberSchema, ...errorResponses(403, 404, 409) },
        },
      },
      async (request) =>
        team.changeRole(actorOf(request), callerOf(request), request.params.accountId, request.body.role),
    )
    app.delete(
      '/team/members/:accountId',
      {
        config: { access: WRITE },
        schema: {
          tags: TAGS,
          summary: 'Remove a member: their access tokens stop working in every process at once',
          operationId: 'removeTeamMember',
          params: MemberParams,
          response: { 204: Type.Null({ description: 'Removed' }), ...errorResponses(403, 404, 409) },
        },
      },
      async (request, reply) => {
        await team.removeMember(actorOf(request), callerOf(request), request.params.accountId)
        return reply.code(204).send(null)
      },
    )
    app.post(
      '/team/invitations',
      {
        config: { access: WRITE },
        schema: {
          tags: TAGS,
          summary:
            'Invite a person by e-mail; answers once the invitation is stored (the e-mail is sent by a job)',
          operationId: 'createInvitation',
          body: CreateInvitationBody,
          response: { 201: InvitationSchema, ...errorResponses(403, 409) },
        },
      },
      async (request, reply) => {
        reply.code(201)
        return team.invite(actorOf(request), callerOf(request), request.body)
      },
    )
    app.get(
      '/team/invitations',
      {
        config: { access: READ },
        schema: {
          tags: TAGS,
          summary: 'Invitations, newest first, with their e-mail status',
          operationId: 'listInvitations',
          response: { 200: InvitationListSchema, ...errorResponses(403) },
        },
      },
      async (request) => team.listInvitations(actorOf(request).tenantId),
    )
    app.post(
      '/team/invitations/:id/resend',
      {
        config: { access: WRITE },
        schema: {
          tags: TAGS,
          summary: 'Send the invitation again with a new link (the old link stops working)',
          operationId: 'resendInvitation',
          params: IdParams,
          response: { 200: InvitationSchema, ...errorResponses(403, 404, 409) },
        },
      },
      async (request) => team.resendInvitation(actorOf(request), callerOf(request), request.params.id),
    )
    app.delete(
      '/team/invitations/:id',
      {
        config: { access: WRITE },
        schema: {
          tags: TAGS,
          summary: 'Revoke a pending invitation',
          operationId: 'revokeInvitation',
          params: IdParams,
          response: { 200: InvitationSchema, ...errorResponses(403, 404, 409) },
        },
      },
      async (request) => team.revokeInvitation(actorOf(request), request.params.id),
    )
  }
}
