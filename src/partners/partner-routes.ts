import rateLimit from '@fastify/rate-limit'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { FastifyRequest } from 'fastify'
import type { Redis } from 'ioredis'
import { Type } from 'typebox'
import { access } from '../auth/access.ts'
import { partnerOf } from '../auth/request-context.ts'
import { errorResponses, IdParams, PageQuery } from '../http/http-schemas.ts'
import { AppError } from '../platform/errors.ts'
import {
  CommissionListSchema,
  CommissionQuery,
  CreateCodeBody,
  CreatedPartnerKeySchema,
  CreateEndpointBody,
  CreatePartnerKeyBody,
  EndpointListSchema,
  EndpointSchema,
  PartnerAuditListSchema,
  PartnerKeyListSchema,
  PartnerKeySchema,
  PartnerSchema,
  ReferralCodeSchema,
  ReferralListQuery,
  ReferralListSchema,
  WebhookSecretSchema,
} from './partner-schemas.ts'
import {
  MAX_PARTNER_ENDPOINTS,
  MAX_PARTNER_KEYS,
  type PartnerCaller,
  type PartnerService,
} from './partner-service.ts'

const TAGS = ['Partners']
/** Spec section 8: 100 requests per minute per partner API key, across every process. */
const PARTNER_RATE_LIMIT = { max: 100, windowMs: 60_000 } as const

/** The request's principal, a partner (auth/access.ts `partner`), as the partner service's caller. */
const callerOf = (request: FastifyRequest): PartnerCaller => {
  const { partnerId, keyId, accountId } = partnerOf(request)
  return { partnerId, keyId, accountId, requestId: request.id, clientIp: request.ip }
}

/** Partner API keys, and people signed in to the partner portal. */
const KEY_OR_SESSION: Array<Record<string, string[]>> = [{ PartnerApiKey: [] }, { PartnerAccessToken: [] }]
/** Only people signed in to the partner portal. */
const SESSION_ONLY: Array<Record<string, string[]>> = [{ PartnerAccessToken: [] }]

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
      keyGenerator: (request) => {
        const caller = callerOf(request)
        return caller.keyId ?? `session:${caller.accountId}`
      },
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
          security: KEY_OR_SESSION,
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
          security: KEY_OR_SESSION,
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
          security: KEY_OR_SESSION,
          body: CreateCodeBody,
          response: { 201: ReferralCodeSchema, ...errorResponses(400, 401, 429) },
        },
      },
      async (request, reply) => {
        reply.code(201)
        return partners.createCode(callerOf(request), request.body.label)
      },
    )
    app.post(
      '/partners/webhook-endpoints',
      {
        config: { access: access.partner() },
        schema: {
          tags: TAGS,
          summary: 'Register a URL for the partner’s events',
          description: `The URL must reach a public address (a local, private or link-local one is 400 naming body/url, unless the operator allowed it); at most ${MAX_PARTNER_ENDPOINTS} endpoints (409 partner_endpoint_limit) and one registration per URL (409 endpoint_exists).`,
          operationId: 'createPartnerWebhookEndpoint',
          security: KEY_OR_SESSION,
          body: CreateEndpointBody,
          response: { 201: EndpointSchema, ...errorResponses(400, 401, 409, 429) },
        },
      },
      async (request, reply) => {
        reply.code(201)
        return partners.addEndpoint(callerOf(request), request.body.url)
      },
    )
    app.get(
      '/partners/webhook-endpoints',
      {
        config: { access: access.partner() },
        schema: {
          tags: TAGS,
          summary: 'The partner’s event URLs',
          operationId: 'listPartnerWebhookEndpoints',
          security: KEY_OR_SESSION,
          response: { 200: EndpointListSchema, ...errorResponses(401, 429) },
        },
      },
      async (request) => partners.listEndpoints(callerOf(request)),
    )
    app.delete(
      '/partners/webhook-endpoints/:id',
      {
        config: { access: access.partner() },
        schema: {
          tags: TAGS,
          summary: 'Stop sending events to a URL',
          operationId: 'deletePartnerWebhookEndpoint',
          security: KEY_OR_SESSION,
          params: IdParams,
          response: { 204: Type.Null({ description: 'Removed' }), ...errorResponses(401, 404, 429) },
        },
      },
      async (request, reply) => {
        await partners.removeEndpoint(callerOf(request), request.params.id)
        return reply.code(204).send(null)
      },
    )
    app.get(
      '/partners/webhook-secret',
      {
        config: { access: access.partner() },
        schema: {
          tags: TAGS,
          summary: 'The secret that signs the partner’s events (made on first use)',
          operationId: 'getPartnerWebhookSecret',
          security: KEY_OR_SESSION,
          response: { 200: WebhookSecretSchema, ...errorResponses(401, 429) },
        },
      },
      async (request) => ({ secret: await partners.webhookSecret(callerOf(request)) }),
    )
    app.get(
      '/partners/me',
      {
        config: { access: access.partner() },
        schema: {
          tags: TAGS,
          summary: 'The partner the caller acts for',
          operationId: 'getPartner',
          security: KEY_OR_SESSION,
          response: { 200: PartnerSchema, ...errorResponses(401, 429) },
        },
      },
      async (request) => partners.profile(callerOf(request)),
    )
    app.get(
      '/partners/api-keys',
      {
        config: { access: access.partnerPortal() },
        schema: {
          tags: TAGS,
          summary: 'The partner’s API keys (never their secrets)',
          operationId: 'listPartnerApiKeys',
          security: SESSION_ONLY,
          response: { 200: PartnerKeyListSchema, ...errorResponses(401, 403, 429) },
        },
      },
      async (request) => partners.listKeys(callerOf(request)),
    )
    app.post(
      '/partners/api-keys',
      {
        config: { access: access.partnerPortal() },
        schema: {
          tags: TAGS,
          summary: 'A new partner API key, shown once',
          description: `Only a person signed in to the partner portal; at most ${MAX_PARTNER_KEYS} live keys (409 partner_key_limit).`,
          operationId: 'createPartnerApiKey',
          security: SESSION_ONLY,
          body: CreatePartnerKeyBody,
          response: { 201: CreatedPartnerKeySchema, ...errorResponses(400, 401, 403, 409, 429) },
        },
      },
      async (request, reply) => {
        reply.code(201)
        return partners.issueKey(callerOf(request), request.body.name)
      },
    )
    app.delete(
      '/partners/api-keys/:id',
      {
        config: { access: access.partnerPortal() },
        schema: {
          tags: TAGS,
          summary: 'Revoke a partner API key: it stops working at once',
          operationId: 'revokePartnerApiKey',
          security: SESSION_ONLY,
          params: IdParams,
          response: { 200: PartnerKeySchema, ...errorResponses(401, 403, 404, 429) },
        },
      },
      async (request) => partners.revokeKey(callerOf(request), request.params.id),
    )
    app.get(
      '/partners/audit',
      {
        config: { access: access.partner() },
        schema: {
          tags: TAGS,
          summary: 'The partner’s audit trail, newest first',
          operationId: 'listPartnerAudit',
          security: KEY_OR_SESSION,
          querystring: Type.Object({ ...PageQuery }, { additionalProperties: false }),
          response: { 200: PartnerAuditListSchema, ...errorResponses(401, 429) },
        },
      },
      async (request) => partners.auditTrail(callerOf(request), request.query),
    )
  }
}
