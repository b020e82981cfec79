import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from 'typebox'
import { access } from '../auth/access.ts'
import { actorOf } from '../auth/request-context.ts'
import { errorResponses, PageQuery } from '../http/http-schemas.ts'
import {
  ChangePlanBody,
  InvoiceListSchema,
  PlanListSchema,
  SubscriptionSchema,
  UsageQuery,
  UsageSchema,
  WebhookAnswerSchema,
} from './billing-schemas.ts'
import type { BillingService } from './billing-service.ts'

const TAGS = ['Billing']
/** A provider's event is a few kilobytes; Stripe's are below 64 KB. */
const WEBHOOK_BODY_LIMIT = 256 * 1024

export function billingRoutes(billing: BillingService): FastifyPluginAsyncTypebox {
  return async (app) => {
    app.get(
      '/billing/plans',
      {
        config: { access: access.scope('billing:read') },
        schema: {
          tags: TAGS,
          summary: 'The plans a tenant can be on, with prices and quotas',
          operationId: 'listPlans',
          response: { 200: PlanListSchema, ...errorResponses(403) },
        },
      },
      async () => ({ data: await billing.plans() }),
    )
    app.get(
      '/billing/subscription',
      {
        config: { access: access.scope('billing:read') },
        schema: {
          tags: TAGS,
          summary: 'The tenant’s plan, status, current period and next invoice',
          operationId: 'getSubscription',
          response: { 200: SubscriptionSchema, ...errorResponses(403) },
        },
      },
      async (request) => billing.subscription(actorOf(request)),
    )
    app.put(
      '/billing/subscription',
      {
        config: { access: access.role('tenant:owner') },
        schema: {
          tags: TAGS,
          summary: 'Move the tenant to another plan (owners only; audited)',
          operationId: 'changePlan',
          body: ChangePlanBody,
          response: { 200: SubscriptionSchema, ...errorResponses(400, 403) },
        },
      },
      async (request) => billing.changePlan(actorOf(request), request.body.planId),
    )
    app.get(
      '/billing/usage',
      {
        config: { access: access.scope('billing:read') },
        schema: {
          tags: TAGS,
          summary: 'Operations per month by kind (from the usage meter), and what the tenant holds now',
          operationId: 'getUsage',
          querystring: UsageQuery,
          response: { 200: UsageSchema, ...errorResponses(400, 403) },
        },
      },
      async (request) => billing.usage(actorOf(request), request.query),
    )
    app.get(
      '/billing/invoices',
      {
        config: { access: access.scope('billing:read') },
        schema: {
          tags: TAGS,
          summary: 'The tenant’s invoices, newest month first',
          operationId: 'listInvoices',
          querystring: Type.Object({ ...PageQuery }, { additionalProperties: false }),
          response: { 200: InvoiceListSchema, ...errorResponses(403) },
        },
      },
      async (request) => billing.listInvoices(actorOf(request), request.query),
    )
    // The payment provider calls this; its signature over the raw body is the authentication.
    await app.register(async (raw) => {
      raw.removeContentTypeParser('application/json')
      raw.addContentTypeParser(
        'application/json',
        { parseAs: 'string', bodyLimit: WEBHOOK_BODY_LIMIT },
        (_request, body, done) => {
          // The signature is over the raw text, which is what the route gets; a body that is not
          // JSON at all is refused here like anywhere in the API (400 invalid_json).
          try {
            JSON.parse(body as string)
          } catch (err) {
            done(err as SyntaxError, undefined)
            return
          }
          done(null, body)
        },
      )
      raw.post(
        '/billing/webhooks/stripe',
        {
          config: { access: access.public() },
          bodyLimit: WEBHOOK_BODY_LIMIT,
          schema: {
            tags: TAGS,
            summary:
              'A payment provider’s signed webhook (Stripe: Stripe-Signature; invoice.paid marks an invoice paid)',
            operationId: 'stripeWebhook',
            security: [],
            response: { 200: WebhookAnswerSchema, ...errorResponses(400, 404) },
          },
        },
        async (request) => billing.paymentWebhook('stripe', String(request.body ?? ''), request.headers),
      )
    })
  }
}
