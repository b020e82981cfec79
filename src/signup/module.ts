import type { Module } from '../platform/module.ts'
import type { Csrf } from '../web/csrf.ts'
import type { PageSettings } from '../web/layout.ts'
import { signupJobs } from './signup-jobs.ts'
import { type SignupRateLimit, signupPages } from './signup-pages.ts'
import { signupRoutes } from './signup-routes.ts'
import type { SignupService } from './signup-service.ts'

/** Self-service sign-up of tenants and partners: the API and the pages, one rate limit. */
export function signupModule(deps: {
  signups: SignupService
  limit: SignupRateLimit
  csrf: Csrf
  pageSettings: PageSettings
}): Module {
  return {
    jobs: signupJobs(deps),
    name: 'signup',
    routes: signupRoutes(deps.signups, deps.limit),
    pages: signupPages(deps),
  }
}
