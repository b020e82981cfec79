import rateLimit from '@fastify/rate-limit'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { access } from '../auth/access.ts'
import { errorResponses } from '../http/http-schemas.ts'
import { type SignupRateLimit, signupRateLimitOptions } from './signup-pages.ts'
import { PartnerSignupBody, SignupRequestedSchema, TenantSignupBody } from './signup-schemas.ts'
import type { SignupService } from './signup-service.ts'

const TAGS = ['Sign-up']

/**
 * Self-service sign-up through the API (docs/signup.md): no credential. The answer is 202 and
 * nothing exists yet; the e-mailed link's page creates the tenant (or the pending partner). The
 * per-IP limit is shared with the sign-up pages.
 */
export function signupRoutes(signups: SignupService, limit: SignupRateLimit): FastifyPluginAsyncTypebox {
  return async (app) => {
    // This plugin holds only the two asking routes: its limit (one counter per client IP, in
    // Redis under the pages' name too) counts exactly them.
    await app.register(rateLimit, signupRateLimitOptions(limit))
    const config = { access: access.public() }
    app.post(
      '/signup',
      {
        config,
        schema: {
          tags: TAGS,
          summary: 'Sign up a new tenant: a confirmation link is e-mailed',
          description:
            'Creates nothing yet: the link (24 hours, single use) opens a page where the owner sets a password (or gives the existing account’s) and the tenant is created. An unknown referral code is a 400 naming referralCode.',
          operationId: 'signUpTenant',
          security: [],
          body: TenantSignupBody,
          response: { 202: SignupRequestedSchema, ...errorResponses(429) },
        },
      },
      async (request, reply) => {
        reply.code(202)
        return signups.request('tenant', request.body)
      },
    )
    app.post(
      '/partner-signup',
      {
        config,
        schema: {
          tags: TAGS,
          summary: 'Apply as a partner: a confirmation link is e-mailed',
          description:
            'Creates nothing yet: the link opens a page where the applicant sets the partner portal password; the partner then waits (pending) for an operator’s approval.',
          operationId: 'signUpPartner',
          security: [],
          body: PartnerSignupBody,
          response: { 202: SignupRequestedSchema, ...errorResponses(429) },
        },
      },
      async (request, reply) => {
        reply.code(202)
        return signups.request('partner', request.body)
      },
    )
  }
}
