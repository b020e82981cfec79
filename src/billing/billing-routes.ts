import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { access } from '../auth/access.ts'
import { actorOf } from '../auth/request-context.ts'
import { errorResponses } from '../platform/http-schemas.ts'
import {
  ChangePlanBody,
  PlanListSchema,
  SubscriptionSchema,
  UsageQuery,
  UsageSchema,
} from './billing-schemas.ts'
import type { BillingService } from './billing-service.ts'

const TAGS = ['Billing']

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
  }
}
