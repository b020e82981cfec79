import type { Logger } from 'pino'
import type { Module } from '../platform/module.ts'
import { accountLinkPages } from './accounts/account-link-pages.ts'
import type { AccountService, PasswordPolicy } from './accounts/account-service.ts'
import { identityJobs } from './identity-jobs.ts'
import type { Identity } from './identity-service.ts'
import { providerSurface } from './oidc/identity-surface.ts'
import { signInRoutes } from './sign-in/sign-in-routes.ts'
import type { SignInDeps } from './sign-in/sign-in-types.ts'

/** The OpenID provider, its sign-in pages and the one-time links' pages. */
export function identityModule(deps: {
  identity: Identity
  accounts: AccountService
  logger: Logger
  endUsers: SignInDeps['endUsers']
  accessPolicy: NonNullable<SignInDeps['accessPolicy']>
  federation: NonNullable<SignInDeps['federation']>
  passwordPolicyOf(tenantId: string): Promise<PasswordPolicy>
}): Module {
  const { identity } = deps
  const branding = identity.branding ? { branding: identity.branding } : {}
  return {
    jobs: identityJobs(deps),
    name: 'identity',
    surface: providerSurface({
      oidc: identity.oidc,
      cors: identity.cors,
      pageSettings: identity.pageSettings,
      logger: deps.logger,
    }),
    pages: async (app) => {
      await app.register(
        signInRoutes({
          oidc: identity.oidc,
          clients: identity.clients,
          endUsers: deps.endUsers,
          accounts: deps.accounts,
          codes: identity.codes,
          csrf: identity.csrf,
          pageSettings: identity.pageSettings,
          gate: identity.gate,
          signIns: identity.signIns,
          tenants: identity.tenants,
          memberships: identity.memberships,
          ...branding,
          accessPolicy: deps.accessPolicy,
          federation: deps.federation,
          issuerName: 'KMS',
        }),
      )
      await app.register(
        accountLinkPages({
          accounts: deps.accounts,
          links: identity.links,
          clients: identity.clients,
          csrf: identity.csrf,
          pageSettings: identity.pageSettings,
          passwordPolicyOf: deps.passwordPolicyOf,
          endSessionsOf: (accountId) => identity.endSessionsOf(accountId),
          ...branding,
          logger: deps.logger,
        }),
      )
    },
  }
}
