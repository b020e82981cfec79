import rateLimit from '@fastify/rate-limit'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { Redis } from 'ioredis'
import { access } from '../auth/access.ts'
import { AppError, unauthorized } from '../platform/errors.ts'
import { errorResponses } from '../platform/http-schemas.ts'
import {
  CommissionListSchema,
  CommissionQuery,
  CreateCodeBody,
  ReferralCodeSchema,
  ReferralListQuery,
  ReferralListSchema,
} from './partner-schemas.ts'
import type { PartnerCaller, PartnerService } from './partner-service.ts'

const TAGS = ['Partners']
/** Spec section 8: 100 requests per minute per partner API key, across every process. */
export const PARTNER_RATE_LIMIT = { max: 100, windowMs: 60_000 } as const

const callerOf = (request: { partner: PartnerCaller | null }): PartnerCaller => {
  if (!request.partner) throw unauthorized()
  return request.partner
}

/**
 * The partner API (spec 4.5): partner API keys only (auth/access.ts `partner`), each key limited
 * to 100 requests a minute by @fastify/rate-limit with its Redis store, so the count is shared by
 * every API process. The limit runs after authentication (its key is the partner key's id, never
 * the secret), and answers 429 with Retry-After and the RateLimit-* headers.
 */
export function partnerRoutes(
  partners: PartnerService,
  limits: { redis: Redis; prefix: string },
): FastifyPluginAsyncTypebox {
  return async (app) => {
    await app.register(rateLimit, {
      global: true,
      hook: 'preHandler',
      max: PARTNER_RATE_LIMIT.max,
      timeWindow: PARTNER_RATE_LIMIT.windowMs,
      redis: limits.redis,
      nameSpace: `${limits.prefix}partner-rate:`,
      keyGenerator: (request) => callerOf(request).keyId,
      enableDraftSpec: true,
      // Without Redis the limit cannot be shared: the partner API stays up rather than refusing all.
      skipOnError: true,
      errorResponseBuilder: (_request, context) =>
        new AppError(429, 'rate_limited', `At most ${context.max} requests per minute per partner API key`, {
          retryAfterSeconds: Math.max(1, Math.ceil(context.ttl / 1000)),
        }),
    })
    app.get(
      '/partners/referrals',
      {
        config: { access: access.partner() },
        schema: {
          tags: TAGS,
          summary: 'Tenants referred by the partner, newest first',
          operationId: 'listReferrals',
          security: [{ PartnerApiKey: [] }],
          querystring: ReferralListQuery,
          response: { 200: ReferralListSchema, ...errorResponses(401, 429) },
        },
      },
      async (request) => partners.referrals(callerOf(request), request.query),
    )
    app.get(
      '/partners/commissions',
      {
        config: { access: access.partner() },
        schema: {
          tags: TAGS,
          summary: 'The partner’s commissions of a month',
          operationId: 'listCommissions',
          security: [{ PartnerApiKey: [] }],
          querystring: CommissionQuery,
          response: { 200: CommissionListSchema, ...errorResponses(400, 401, 429) },
        },
      },
      async (request) => partners.commissions(callerOf(request), request.query.period),
    )
    app.post(
      '/partners/codes',
      {
        config: { access: access.partner() },
        schema: {
          tags: TAGS,
          summary: 'A new referral code and its sign-up URL',
          operationId: 'createReferralCode',
          security: [{ PartnerApiKey: [] }],
          body: CreateCodeBody,
          response: { 201: ReferralCodeSchema, ...errorResponses(400, 401, 429) },
        },
      },
      async (request, reply) => {
        reply.code(201)
        return partners.createCode(callerOf(request), request.body.label)
      },
    )
  }
}
