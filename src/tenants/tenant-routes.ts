import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from 'typebox'
import { principalOf } from '../auth/request-context.ts'
import type { Sql } from '../platform/database.ts'
import { notFound } from '../platform/errors.ts'
import { errorResponses, Timestamp, Uuid } from '../platform/http-schemas.ts'
import { getTenant } from './tenant-store.ts'

export function tenantRoutes(sql: Sql): FastifyPluginAsyncTypebox {
  return async (app) => {
    app.get(
      '/tenant',
      {
        schema: {
          tags: ['Tenant'],
          summary: 'The tenant and API key this request is authenticated as',
          operationId: 'getCurrentTenant',
          response: {
            200: Type.Object({
              id: Uuid('Tenant id'),
              name: Type.String(),
              createdAt: Timestamp('Creation time'),
              apiKeyId: Uuid('The calling API key'),
              scopes: Type.Array(Type.String()),
            }),
            ...errorResponses(),
          },
        },
      },
      async (request) => {
        const principal = principalOf(request)
        const tenant = await getTenant(sql, principal.tenantId)
        if (!tenant) throw notFound('tenant_not_found', 'Tenant')
        return {
          id: tenant.id,
          name: tenant.name,
          createdAt: tenant.created_at.toISOString(),
          apiKeyId: principal.apiKeyId,
          scopes: [...principal.scopes],
        }
      },
    )
  }
}
