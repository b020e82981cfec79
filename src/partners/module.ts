import type { Redis } from 'ioredis'
import type { Module } from '../platform/module.ts'
import { partnerRoutes } from './partner-routes.ts'
import type { PartnerService } from './partner-service.ts'
import { partnersJobs } from './partners-jobs.ts'

/** The partner programme: partners, their keys and codes, referrals and commissions. */
export function partnersModule(deps: {
  partners: PartnerService
  /** The partner API's rate limit counts in Redis, under the deployment's prefix. */
  limits: { redis: Redis; prefix: string }
}): Module {
  return { name: 'partners', routes: partnerRoutes(deps.partners, deps.limits), jobs: partnersJobs(deps) }
}
