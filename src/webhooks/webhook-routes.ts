import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from 'typebox'
import { access } from '../auth/access.ts'
import { actorOf } from '../auth/request-context.ts'
import { errorResponses, IdParams, nameSchema, PageQuery, Timestamp } from '../http/http-schemas.ts'
import { notFound } from '../platform/errors.ts'
import type { WebhookService } from './webhook-service.ts'
import type { DeliveryRow } from './webhook-store.ts'

const TAGS = ['Webhooks']

const AttemptSchema = Type.Object({
  attempt: Type.Integer(),
  at: Timestamp('When the attempt started'),
  statusCode: Type.Union([Type.Integer(), Type.Null()], { description: 'null: no HTTP answer' }),
  error: Type.Union([Type.String(), Type.Null()], {
    description:
      'null on success; http_error, redirect_not_followed, timeout, connection_failed, or destination_not_allowed (the URL resolves to an address this service does not call: no request was made)',
  }),
  durationMs: Type.Integer(),
  responseExcerpt: Type.Union([Type.String(), Type.Null()], {
    description:
      'The first 256 bytes of the answer, only from a receiver the operator allowed (KMS_OUTBOUND_ALLOW); otherwise null',
  }),
})

const DeliverySchema = Type.Object({
  id: Type.String({ format: 'uuid' }),
  eventId: Type.String({ format: 'uuid' }),
  eventType: Type.String(),
  url: Type.String(),
  status: Type.Enum(['pending', 'succeeded', 'failed']),
  attempts: Type.Array(AttemptSchema),
  nextAttemptAt: Type.Union([Timestamp('When the next attempt is due'), Type.Null()]),
  createdAt: Timestamp('When the event occurred'),
  completedAt: Type.Union([Timestamp('When the delivery succeeded or finally failed'), Type.Null()]),
  payload: Type.String({ description: 'The exact body that was signed and sent' }),
})
nameSchema(DeliverySchema, 'WebhookDelivery')

const SecretSchema = Type.Object({
  secret: Type.String({
    description: 'HMAC-SHA256 key for X-Service-Signature: the UTF-8 bytes of this whole string',
  }),
})
nameSchema(SecretSchema, 'WebhookSecret')

function toView(row: DeliveryRow) {
  return {
    id: row.id,
    eventId: row.event_id,
    eventType: row.event_type,
    url: row.url,
    status: row.status,
    attempts: row.attempts,
    nextAttemptAt: row.next_attempt_at?.toISOString() ?? null,
    createdAt: row.created_at.toISOString(),
    completedAt: row.completed_at?.toISOString() ?? null,
    payload: row.payload,
  }
}

export function webhookRoutes(webhooks: WebhookService): FastifyPluginAsyncTypebox {
  return async (app) => {
    app.get(
      '/webhooks/deliveries',
      {
        config: { access: access.scope('keys:read') },
        schema: {
          tags: TAGS,
          summary: 'Webhook deliveries of the tenant, newest first, with every attempt',
          operationId: 'listWebhookDeliveries',
          querystring: Type.Object(PageQuery, { additionalProperties: false }),
          response: { 200: Type.Object({ data: Type.Array(DeliverySchema) }), ...errorResponses(403) },
        },
      },
      async (request) => {
        const rows = await webhooks.list(actorOf(request).tenantId, request.query)
        return { data: rows.map(toView) }
      },
    )

    app.get(
      '/webhooks/deliveries/:id',
      {
        config: { access: access.scope('keys:read') },
        schema: {
          tags: TAGS,
          summary: 'One webhook delivery with every attempt',
          operationId: 'getWebhookDelivery',
          params: IdParams,
          response: { 200: DeliverySchema, ...errorResponses(403, 404) },
        },
      },
      async (request) => {
        const row = await webhooks.get(actorOf(request).tenantId, request.params.id)
        if (!row) throw notFound('delivery_not_found', 'Webhook delivery')
        return toView(row)
      },
    )

    app.post(
      '/webhooks/secret',
      {
        config: { access: access.scope('keys:write') },
        schema: {
          tags: TAGS,
          summary: 'The tenant webhook signing secret (created on first use)',
          operationId: 'getWebhookSecret',
          response: { 200: SecretSchema, ...errorResponses(403) },
        },
      },
      async (request) => {
        return { secret: await webhooks.secret(actorOf(request)) }
      },
    )

    app.post(
      '/webhooks/secret/rotate',
      {
        config: { access: access.scope('keys:write') },
        schema: {
          tags: TAGS,
          summary: 'Replace the webhook signing secret; deliveries from now on use the new one',
          operationId: 'rotateWebhookSecret',
          response: { 200: SecretSchema, ...errorResponses(403) },
        },
      },
      async (request) => {
        return { secret: await webhooks.rotateSecret(actorOf(request)) }
      },
    )
  }
}
