import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from 'typebox'
import { access } from '../auth/access.ts'
import { actorOf } from '../auth/request-context.ts'
import { errorResponses, IdParams } from '../http/http-schemas.ts'
import {
  CreateRoleBody,
  EndUserRoleParams,
  EndUserRolesSchema,
  RoleListQuery,
  RoleListSchema,
  RoleSchema,
  UpdateRoleBody,
} from './role-schemas.ts'
import type { RoleService } from './role-service.ts'

const TAGS = ['Roles']

export function roleRoutes(roles: RoleService): FastifyPluginAsyncTypebox {
  return async (app) => {
    app.get(
      '/roles',
      {
        config: { access: access.scope('roles:read') },
        schema: {
          tags: TAGS,
          summary: 'Roles of the tenant’s applications, oldest first',
          operationId: 'listRoles',
          querystring: RoleListQuery,
          response: { 200: RoleListSchema, ...errorResponses(403) },
        },
      },
      async (request) => {
        const { applicationId, limit, offset } = request.query
        return roles.list(actorOf(request), applicationId, { limit, offset })
      },
    )
    app.get(
      '/roles/:id',
      {
        config: { access: access.scope('roles:read') },
        schema: {
          tags: TAGS,
          summary: 'One role',
          operationId: 'getRole',
          params: IdParams,
          response: { 200: RoleSchema, ...errorResponses(403, 404) },
        },
      },
      async (request) => roles.get(actorOf(request), request.params.id),
    )
    app.post(
      '/roles',
      {
        config: { access: access.scope('roles:write') },
        schema: {
          tags: TAGS,
          summary: 'Create a role of an application',
          operationId: 'createRole',
          body: CreateRoleBody,
          response: { 201: RoleSchema, ...errorResponses(403, 404, 409) },
        },
      },
      async (request, reply) => {
        reply.code(201)
        return roles.create(actorOf(request), request.body)
      },
    )
    app.put(
      '/roles/:id',
      {
        config: { access: access.scope('roles:write') },
        schema: {
          tags: TAGS,
          summary: 'Replace a role’s name, description and permissions',
          operationId: 'updateRole',
          params: IdParams,
          body: UpdateRoleBody,
          response: { 200: RoleSchema, ...errorResponses(403, 404, 409) },
        },
      },
      async (request) => roles.update(actorOf(request), request.params.id, request.body),
    )
    app.delete(
      '/roles/:id',
      {
        config: { access: access.scope('roles:write') },
        schema: {
          tags: TAGS,
          summary: 'Delete a role (its assignments go with it)',
          operationId: 'deleteRole',
          params: IdParams,
          response: { 204: Type.Null({ description: 'Deleted' }), ...errorResponses(403, 404) },
        },
      },
      async (request, reply) => {
        await roles.remove(actorOf(request), request.params.id)
        return reply.code(204).send(null)
      },
    )
    app.get(
      '/endusers/:id/roles',
      {
        config: { access: access.scope('roles:read') },
        schema: {
          tags: TAGS,
          summary: 'The roles an end-user holds, in every application',
          operationId: 'listEndUserRoles',
          params: IdParams,
          response: { 200: EndUserRolesSchema, ...errorResponses(403, 404) },
        },
      },
      async (request) => ({ data: await roles.rolesOf(actorOf(request), request.params.id) }),
    )
    app.put(
      '/endusers/:id/roles/:roleId',
      {
        config: { access: access.scope('roles:write') },
        schema: {
          tags: TAGS,
          summary: 'Assign a role to an end-user (idempotent); answers the user’s roles',
          operationId: 'assignEndUserRole',
          params: EndUserRoleParams,
          response: { 200: EndUserRolesSchema, ...errorResponses(403, 404) },
        },
      },
      async (request) => ({
        data: await roles.assign(actorOf(request), request.params.id, request.params.roleId),
      }),
    )
    app.delete(
      '/endusers/:id/roles/:roleId',
      {
        config: { access: access.scope('roles:write') },
        schema: {
          tags: TAGS,
          summary: 'Take a role from an end-user (idempotent)',
          operationId: 'unassignEndUserRole',
          params: EndUserRoleParams,
          response: {
            204: Type.Null({ description: 'Not assigned (any more)' }),
            ...errorResponses(403, 404),
          },
        },
      },
      async (request, reply) => {
        await roles.unassign(actorOf(request), request.params.id, request.params.roleId)
        return reply.code(204).send(null)
      },
    )
  }
}
