import type { AccountService, PasswordPolicy } from '../identity/accounts/account-service.ts'
import type { ClientDirectory } from '../identity/oidc/oidc-provider.ts'
import type { TenantBranding } from '../identity/sign-in/sign-in-types.ts'
import type { Module } from '../platform/module.ts'
import type { Csrf } from '../web/csrf.ts'
import type { PageSettings } from '../web/layout.ts'
import { endUserRoutes } from './enduser-routes.ts'
import type { EndUserService } from './enduser-service.ts'
import { endUserSignUpPages } from './enduser-signup-pages.ts'
import { endusersJobs } from './endusers-jobs.ts'

/** The people who use the tenant's applications, with the applications' sign-up pages. */
export function endUsersModule(deps: {
  endusers: EndUserService
  accounts: Pick<AccountService, 'preparePassword'>
  clients: Pick<ClientDirectory, 'applicationOf'>
  branding?: TenantBranding | undefined
  passwordPolicyOf(tenantId: string): Promise<PasswordPolicy>
  csrf: Csrf
  pageSettings: PageSettings
}): Module {
  const { branding, ...pages } = deps
  return {
    jobs: endusersJobs(deps),
    name: 'endusers',
    routes: endUserRoutes(deps.endusers),
    pages: endUserSignUpPages({ ...pages, ...(branding ? { branding } : {}) }),
  }
}
