import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from 'typebox'
import { access } from '../auth/access.ts'
import { principalOf } from '../auth/request-context.ts'
import { TenantRoleSchema } from '../auth/roles.ts'
import { errorResponses, Timestamp, Uuid } from '../http/http-schemas.ts'
import { notFound } from '../platform/errors.ts'
import type { TenantService } from './tenant-service.ts'

const CurrentTenantSchema = Type.Object(
  {
    id: Uuid('Tenant id'),
    name: Type.String(),
    createdAt: Timestamp('Creation time'),
    callerKind: Type.Union([Type.Literal('apiKey'), Type.Literal('member')], {
      description: 'Who is calling: an API key or a signed-in team member',
    }),
    apiKeyId: Type.Optional(Uuid('The calling API key (API keys only)')),
    accountId: Type.Optional(Uuid('The calling team member’s account (team members only)')),
    role: Type.Optional(TenantRoleSchema),
    scopes: Type.Array(Type.String(), { description: 'What the caller may do in this tenant' }),
  },
  { $id: 'CurrentTenant' },
)

export function tenantRoutes(tenants: TenantService): FastifyPluginAsyncTypebox {
  return async (app) => {
    app.get(
      '/tenant',
      {
        config: { access: access.authenticated() },
        schema: {
          tags: ['Tenant'],
          summary: 'The tenant this request acts on, and who is calling',
          operationId: 'getCurrentTenant',
          response: { 200: CurrentTenantSchema, ...errorResponses() },
        },
      },
      async (request) => {
        const principal = principalOf(request)
        const tenant = await tenants.get(principal.tenantId)
        if (!tenant) throw notFound('tenant_not_found', 'Tenant')
        const caller =
          principal.kind === 'apiKey'
            ? { callerKind: 'apiKey' as const, apiKeyId: principal.apiKeyId }
            : { callerKind: 'member' as const, accountId: principal.accountId, role: principal.role }
        return { ...tenant, ...caller, scopes: [...principal.scopes] }
      },
    )
  }
}
