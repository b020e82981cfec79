import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from 'typebox'
import { access } from '../auth/access.ts'
import { principalOf } from '../auth/request-context.ts'
import { errorResponses, Text, Timestamp, toDate } from '../http/http-schemas.ts'
import { AppError } from '../platform/errors.ts'
import type { AuditLog } from './audit-log.ts'
import type { AuditRow } from './audit-store.ts'

const AuditRecordSchema = Type.Object(
  {
    id: Type.String({ description: 'Record id (increases with time)' }),
    occurredAt: Timestamp('When the operation happened'),
    actor: Type.String({ description: 'apikey:<id>, cli or system' }),
    action: Type.String({ description: '<module>.<verb>, e.g. apikeys.create' }),
    resource: Type.Union([Type.String(), Type.Null()]),
    keyVersion: Type.Union([Type.Integer(), Type.Null()]),
    outcome: Type.Enum(['success', 'failure', 'denied']),
    requestId: Type.Union([Type.String(), Type.Null()]),
    clientIp: Type.Union([Type.String(), Type.Null()]),
    details: Type.Union([Type.Record(Type.String(), Type.Unknown()), Type.Null()]),
  },
  { $id: 'AuditRecord', title: 'AuditRecord' },
)

const AuditQuery = Type.Object(
  {
    action: Type.Optional(Text(100, 'Exact action, e.g. apikeys.revoke', 1)),
    resource: Type.Optional(Text(300, 'Exact resource, e.g. apikey:<id>', 1)),
    outcome: Type.Optional(Type.Enum(['success', 'failure', 'denied'])),
    from: Type.Optional(Timestamp('Records at or after this time')),
    to: Type.Optional(Timestamp('Records before this time')),
    limit: Type.Integer({ minimum: 1, maximum: 500, default: 100 }),
    cursor: Type.Optional(
      Type.String({ pattern: '^[0-9]{1,18}$', description: 'nextCursor of the previous page' }),
    ),
  },
  { additionalProperties: false },
)

function toView(row: AuditRow) {
  return {
    id: row.id,
    occurredAt: row.occurred_at.toISOString(),
    actor: row.actor,
    action: row.action,
    resource: row.resource,
    keyVersion: row.key_version,
    outcome: row.outcome,
    requestId: row.request_id,
    clientIp: row.client_ip,
    details: row.details,
  }
}

export function auditRoutes(audit: Pick<AuditLog, 'list'>): FastifyPluginAsyncTypebox {
  return async (app) => {
    app.get(
      '/audit',
      {
        config: { access: access.scope('audit:read') },
        schema: {
          tags: ['Audit'],
          summary: "List the tenant's audit records, newest first",
          description: 'Cursor pagination: pass `nextCursor` back as `cursor` until it is null.',
          operationId: 'listAuditRecords',
          querystring: AuditQuery,
          response: {
            200: Type.Object({
              data: Type.Array(AuditRecordSchema),
              nextCursor: Type.Union([Type.String(), Type.Null()]),
            }),
            ...errorResponses(403),
          },
        },
      },
      async (request) => {
        const q = request.query
        const from = q.from ? toDate(q.from, 'querystring/from') : undefined
        const to = q.to ? toDate(q.to, 'querystring/to') : undefined
        if (from && to && from > to) throw new AppError(400, 'validation_failed', 'from must not be after to')
        const rows = await audit.list(principalOf(request).tenantId, {
          action: q.action,
          resource: q.resource,
          outcome: q.outcome as AuditRow['outcome'] | undefined,
          from,
          to,
          before: q.cursor,
          limit: q.limit + 1,
        })
        const page = rows.slice(0, q.limit)
        return {
          data: page.map(toView),
          nextCursor: rows.length > q.limit ? page[page.length - 1]!.id : null,
        }
      },
    )
  }
}
