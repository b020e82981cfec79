import type { AuditLog } from '../audit/audit-log.ts'
import type { MembershipRoles } from '../auth/bearer-authenticator.ts'
import type { IdentityConfig } from '../config.ts'
import type { Queryable, Sql } from '../data/database.ts'
import type { InvalidationBus } from '../data/invalidation-bus.ts'
import type { ClientRateLimit } from '../http/client-rate-limit.ts'
import type { MasterKeyring } from '../keyring/master-key.ts'
import type { Mailer } from '../mail/mailer.ts'
import type { Clock } from '../platform/clock.ts'
import type { MailQueue } from '../platform/module.ts'
import type { SmsSender } from '../sms/sms-sender.ts'
import type { TenantService } from '../tenants/tenant-service.ts'
import { type Csrf, createCsrf } from '../web/csrf.ts'
import type { PageSettings } from '../web/layout.ts'
import { type AccountLinks, createAccountLinks } from './accounts/account-links.ts'
import type { AccountService } from './accounts/account-service.ts'
import { createOneTimeCodes, type OneTimeCodes } from './accounts/one-time-codes.ts'
import { createAccessTokenVerifier } from './oidc/access-token-verifier.ts'
import { type CorsAllowlist, createCorsAllowlist } from './oidc/cors-allowlist.ts'
import { createIssuer, type Issuer } from './oidc/issuer.ts'
import {
  CLI_CLIENT_ID,
  type ClientDirectory,
  CONSOLE_CLIENT_ID,
  createOidcRuntime,
  type OidcRuntime,
  type RoleClaims,
  type SessionPolicy,
  TENANT_RESOURCE_PREFIX,
} from './oidc/oidc-provider.ts'
import { destroyByAccount, destroyGrantsWithResource, sweepExpiredModels } from './oidc/oidc-store.ts'
import { createSigningKeys, type SigningKeys } from './oidc/signing-keys.ts'
import {
  type AuthorizationGate,
  createAuthorizationGate,
  type GateAccessPolicy,
  type GateEndUsers,
  type GatePartners,
  type MfaPolicy,
} from './sign-in/authorization-gate.ts'
import { destroyFactorsOfAccount, sweepExpiredFactors } from './sign-in/session-factor-store.ts'
import { createSignInEvents, type SignInEvents } from './sign-in/sign-in-events.ts'
import type { TenantBranding } from './sign-in/sign-in-types.ts'

/**
 * The parts of the identity module that other modules need before the provider can be built:
 * the issuer (links in e-mails), one-time links and codes, and ending an account's sessions and
 * grants. The provider itself asks applications, roles, access policies, end-users, partners and
 * the team (createIdentity), which are built with these parts, so it comes last and nothing is
 * bound late.
 */
export interface IdentityCore {
  issuer: Issuer
  signingKeys: SigningKeys
  verifier: ReturnType<typeof createAccessTokenVerifier>
  csrf: Csrf
  pageSettings: PageSettings
  /** One-time links (password reset, account set-up) and their e-mails. */
  links: AccountLinks
  /** Sign-in codes by e-mail and SMS. */
  codes: OneTimeCodes
  /** Ends every session, grant and token of an account, in every process. */
  endSessionsOf(accountId: string): Promise<void>
  /**
   * A member removed from a tenant: destroys, inside the caller's transaction, the account's
   * console and command-line grants that include the tenant's resource, with their codes and
   * tokens (a grant may hold other tenants too: it goes whole). Returns them for `grantsRevoked`
   * after commit.
   */
  destroyTenantGrantsOf(tx: Queryable, accountId: string, tenantId: string): Promise<string[]>
  /** After the commit that destroyed them: every process forgets these grants. */
  grantsRevoked(grantIds: readonly string[]): Promise<void>
}

export interface Identity extends IdentityCore {
  oidc: OidcRuntime
  memberships: MembershipRoles
  tenants: Pick<TenantService, 'get'>
  mfaPolicy: MfaPolicy | undefined
  branding: TenantBranding | undefined
  cors: CorsAllowlist
  /** What every authorization checks, before a code and at each refresh. */
  gate: AuthorizationGate
  /** Sign-ins and failed sign-ins: audited and counted. */
  signIns: SignInEvents
  /** Tenants' applications as the provider and the pages see them. */
  clients: ClientDirectory
  /** Expired provider rows, ended throttle windows, and the signing key's scheduled rotation. */
  sweep(): Promise<{ expiredModels: number; throttleRows: number; rotatedToVersion: number | null }>
}

export function createIdentityCore(deps: {
  sql: Sql
  bus: InvalidationBus
  masterKeys: MasterKeyring
  clock: Clock
  config: IdentityConfig
  grantCacheTtlMs: number
  audit: AuditLog
  mailQueue?: MailQueue
  mailer?: Mailer
  sms?: SmsSender
  /** Requests per client address of the pages that e-mail someone (forgot password, sign-up). */
  requestLimit: ClientRateLimit
}): IdentityCore {
  const issuer = createIssuer(deps.config.idUrl)
  const signingKeys = createSigningKeys(deps)
  const verifier = createAccessTokenVerifier({
    sql: deps.sql,
    bus: deps.bus,
    signingKeys,
    issuer: () => issuer.url(),
    clock: deps.clock,
    grantCacheTtlMs: deps.grantCacheTtlMs,
  })
  return {
    issuer,
    signingKeys,
    verifier,
    csrf: createCsrf(deps.masterKeys),
    pageSettings: { cdnHost: deps.config.cdnHost },
    links: createAccountLinks({
      sql: deps.sql,
      masterKeys: deps.masterKeys,
      clock: deps.clock,
      audit: deps.audit,
      ...(deps.mailQueue ? { mailQueue: deps.mailQueue } : {}),
      ...(deps.mailer ? { mailer: deps.mailer } : {}),
      linkBase: () => issuer.url(),
      requestLimit: deps.requestLimit,
    }),
    codes: createOneTimeCodes({
      sql: deps.sql,
      masterKeys: deps.masterKeys,
      clock: deps.clock,
      ...(deps.mailQueue ? { mailQueue: deps.mailQueue } : {}),
      ...(deps.mailer ? { mailer: deps.mailer } : {}),
      ...(deps.sms ? { sms: deps.sms } : {}),
    }),
    async endSessionsOf(accountId) {
      await destroyFactorsOfAccount(deps.sql, accountId)
      for (const grantId of await destroyByAccount(deps.sql, accountId)) await verifier.grantRevoked(grantId)
    },
    async destroyTenantGrantsOf(tx, accountId, tenantId) {
      const resource = `${TENANT_RESOURCE_PREFIX}${tenantId}`
      const destroyed: string[] = []
      for (const clientId of [CONSOLE_CLIENT_ID, CLI_CLIENT_ID])
        destroyed.push(...(await destroyGrantsWithResource(tx, { accountId, clientId, resource })))
      return destroyed
    },
    async grantsRevoked(grantIds) {
      for (const grantId of grantIds) await verifier.grantRevoked(grantId)
    },
  }
}

/** The OpenID provider over the identity core and the modules it asks (server/compose.ts). */
export function createIdentity(
  core: IdentityCore,
  deps: {
    sql: Sql
    bus: InvalidationBus
    masterKeys: MasterKeyring
    clock: Clock
    config: IdentityConfig
    accounts: AccountService
    memberships: MembershipRoles
    tenants: Pick<TenantService, 'get'>
    sessionPolicy?: SessionPolicy
    mfaPolicy?: MfaPolicy
    branding?: TenantBranding
    audit: AuditLog
    /** Tenants' applications as clients, read on every use; and their redirect origins for CORS. */
    clients: ClientDirectory
    /** The console's CORS list beside the tenants' (the applications' redirect origins). */
    cors: CorsAllowlist
    roles: RoleClaims
    /** The gate's questions to other modules: access policies, end-users, partners. */
    accessPolicy?: GateAccessPolicy
    endUsers?: GateEndUsers
    partners?: GatePartners
    /** Counts sign-ins in /metrics (src/metrics). */
    countSignIn?: Parameters<typeof createSignInEvents>[0]['count']
  },
): Identity {
  const gate = createAuthorizationGate({
    sql: deps.sql,
    accounts: deps.accounts,
    memberships: deps.memberships,
    tenants: deps.tenants,
    ...(deps.mfaPolicy ? { mfaPolicy: deps.mfaPolicy } : {}),
    ...(deps.accessPolicy ? { accessPolicy: deps.accessPolicy } : {}),
    ...(deps.endUsers ? { endUsers: deps.endUsers } : {}),
    ...(deps.partners ? { partners: deps.partners } : {}),
  })
  const oidc = createOidcRuntime({
    sql: deps.sql,
    clock: deps.clock,
    config: deps.config,
    masterKeys: deps.masterKeys,
    signingKeys: core.signingKeys,
    accounts: deps.accounts,
    memberships: deps.memberships,
    tenants: deps.tenants,
    ...(deps.sessionPolicy ? { sessionPolicy: deps.sessionPolicy } : {}),
    pageSettings: core.pageSettings,
    issuer: core.issuer,
    onGrantRevoked: (grantId) => core.verifier.grantRevoked(grantId),
    clients: deps.clients,
    roles: deps.roles,
    gate,
    cors: deps.cors,
  })
  return {
    ...core,
    oidc,
    memberships: deps.memberships,
    tenants: deps.tenants,
    mfaPolicy: deps.mfaPolicy,
    branding: deps.branding,
    cors: deps.cors,
    gate,
    signIns: createSignInEvents({ audit: deps.audit, count: deps.countSignIn ?? (() => {}) }),
    clients: deps.clients,
    async sweep() {
      const expiredModels =
        (await sweepExpiredModels(deps.sql, 10_000)) + (await sweepExpiredFactors(deps.sql, 10_000))
      const throttleRows = await deps.accounts.sweepThrottle()
      const rotatedToVersion = await core.signingKeys.rotate({
        olderThanDays: deps.config.signingKeyRotationDays,
      })
      return { expiredModels, throttleRows, rotatedToVersion: rotatedToVersion ?? null }
    },
  }
}

/**
 * The CORS allow-lists of the provider (spec 4.4): the tenants' applications' redirect origins,
 * and the console's and partner portal's own. Built before the applications, which drop it on
 * every change.
 */
export function createProviderCors(deps: {
  bus: InvalidationBus
  clock: Clock
  config: IdentityConfig
  /** Origins per tenant, from every tenant's applications. */
  redirectOrigins: () => Promise<Map<string, Set<string>>>
}): CorsAllowlist {
  // The console and the partner portal are the service's own clients: one CORS list for both.
  const consoleOrigins = () =>
    [...deps.config.consoleRedirectUris, ...deps.config.partnerPortalRedirectUris].flatMap((uri) => {
      try {
        return [new URL(uri).origin]
      } catch {
        return []
      }
    })
  return createCorsAllowlist({ bus: deps.bus, clock: deps.clock, load: deps.redirectOrigins, consoleOrigins })
}
