import type { MembershipRoles } from '../../auth/bearer-authenticator.ts'
import type { Sql } from '../../data/database.ts'
import type { MfaMethodSetting } from '../../settings/settings-service.ts'
import type { TenantService } from '../../tenants/tenant-service.ts'
import { type AccountService, PARTNER_REALM, TEAM_REALM, tenantRealm } from '../accounts/account-service.ts'
import { factorsOfSession, type SecondFactor } from './session-factor-store.ts'

/** The tenant's (or an application's) MFA methods: each may be used, must be used (src/settings). */
export type MfaMethods = Record<'totp' | 'emailOtp' | 'smsOtp', MfaMethodSetting>

/** What the gate needs of tenant settings (src/settings). */
export interface MfaPolicy {
  /** The tenant's MFA methods; an application's own replace them in full. */
  methodsFor(tenantId: string): Promise<MfaMethods>
}

/** The second factors, in the order they are asked for: a step proves one factor. */
export type Step = 'totp' | 'totp-enrol' | 'email-otp' | 'sms-enrol' | 'sms-otp'
export const STEPS: readonly Step[] = ['totp', 'totp-enrol', 'email-otp', 'sms-enrol', 'sms-otp']
export const factorOfStep = (step: Step): SecondFactor =>
  step.startsWith('totp') ? 'totp' : step === 'email-otp' ? 'email' : 'sms'
export type { SecondFactor }

/**
 * The factors an account must pass (docs/identity.md "MFA methods"): every required method
 * (enrolling it first when the account has none), and an enrolled authenticator when TOTP is
 * enabled. Without a tenant (the console without a resource) an enrolled authenticator is asked for.
 */
function stepsFor(
  account: { totpEnrolled: boolean; phoneNumber: string | null },
  methods: MfaMethods | undefined,
): Step[] {
  if (!methods) return account.totpEnrolled ? ['totp'] : []
  const steps: Step[] = []
  if (methods.totp.required) steps.push(account.totpEnrolled ? 'totp' : 'totp-enrol')
  else if (methods.totp.enabled && account.totpEnrolled) steps.push('totp')
  if (methods.emailOtp.required) steps.push('email-otp')
  if (methods.smsOtp.required) steps.push(account.phoneNumber ? 'sms-otp' : 'sms-enrol')
  return steps
}

/** A tenant's application as the gate needs it (src/applications, through the client directory). */
interface GateApplication {
  tenantId: string
  applicationId: string
  /** The application's own MFA methods; null: the tenant's. */
  mfaMethods: MfaMethods | null
}

/** Who an authorization is for: the console for some tenants, the partner portal, or an application. */
export type AuthorizationTarget =
  | { kind: 'console'; tenantIds: string[] }
  | { kind: 'partner-portal' }
  | { kind: 'application'; application: GateApplication }

/** Access policies (src/access-policies): at sign-in they may ask for approval; at refresh they only answer. */
export interface GateAccessPolicy {
  decideSignIn(attempt: {
    tenantId: string
    applicationId: string
    accountId: string
    ip: string | null
  }): Promise<{ outcome: 'allow' } | { outcome: 'deny' } | { outcome: 'pending'; request: { id: string } }>
  /** The same answer as decideSignIn's allow, with nothing recorded and no request opened. */
  allowsSignIn(attempt: {
    tenantId: string
    applicationId: string
    accountId: string
    ip: string | null
  }): Promise<boolean>
  allowsRefresh(attempt: {
    tenantId: string
    applicationId: string
    accountId: string
    ip: string | null
  }): Promise<boolean>
}

/** The end-users module: an end-user who signs in to an application joins its list; a blocked one may not. */
export interface GateEndUsers {
  /** false: the account has no end-user record of the tenant, or it is blocked. */
  recordSignIn(tenantId: string, accountId: string, applicationId: string): Promise<boolean>
}

/** The partner portal (src/partners): only a partner the operator approved may enter. */
export interface GatePartners {
  statusOf(accountId: string): Promise<'pending' | 'active' | 'suspended' | 'rejected' | undefined>
}

type DenyReason =
  | 'account_unavailable'
  | 'not_member'
  | 'factor_missing'
  | 'access_policy'
  | 'enduser_blocked'
  | 'partner_pending'
  | 'partner_refused'

export type GateDecision =
  | { outcome: 'allow' }
  /** Factors the session has not satisfied yet, in the order to ask for them. */
  | { outcome: 'step-up'; steps: Step[] }
  | { outcome: 'deny'; reason: DenyReason }
  /** An access policy waits for a team member's approval of this request. */
  | { outcome: 'pending'; requestId: string }

interface GateQuestion {
  target: AuthorizationTarget
  accountId: string
  /** The second factors this session has satisfied for this account (stored, and just proven). */
  satisfied: ReadonlySet<SecondFactor>
  ip: string | null
  /**
   * An authorization on the pages (a person is there to step up or wait: refusals are recorded
   * and access requests opened), the provider's look at a remembered login (`probe`: nothing
   * recorded, any refusal sends the person to the pages, which decide), or a refresh (yes or no).
   */
  purpose: 'authorization' | 'probe' | 'refresh'
}

export interface AuthorizationGate {
  /**
   * The one question asked before a code is issued and at every refresh (docs/identity.md "What
   * every authorization checks"), in this order: the account is usable in the client's realm;
   * the factors required (the application's MFA methods, else its tenant's; for the console every
   * requested tenant's) are satisfied by this session; then the member belongs to every tenant,
   * the partner is approved, or, for an application, the access policies allow it and the
   * end-user is not blocked (and joins the application's list).
   */
  decide(question: GateQuestion): Promise<GateDecision>
  /** The factors a session has satisfied for an account (none without a session). */
  satisfiedBy(sessionUid: string | undefined, accountId: string): Promise<Set<SecondFactor>>
}

export interface AuthorizationGateDeps {
  sql: Sql
  accounts: Pick<AccountService, 'get'>
  memberships: MembershipRoles
  tenants: Pick<TenantService, 'get'>
  mfaPolicy?: MfaPolicy
  accessPolicy?: GateAccessPolicy
  endUsers?: GateEndUsers
  partners?: GatePartners
}

const realmOfTarget = (target: AuthorizationTarget): string =>
  target.kind === 'console'
    ? TEAM_REALM
    : target.kind === 'partner-portal'
      ? PARTNER_REALM
      : tenantRealm(target.application.tenantId)

export function createAuthorizationGate(deps: AuthorizationGateDeps): AuthorizationGate {
  /** The MFA method sets that apply: the application's own, else its tenant's; the console's, each tenant's. */
  async function methodSets(target: AuthorizationTarget): Promise<Array<MfaMethods | undefined>> {
    if (target.kind === 'partner-portal') return [undefined]
    if (target.kind === 'application') {
      const { application } = target
      return [application.mfaMethods ?? (await deps.mfaPolicy?.methodsFor(application.tenantId))]
    }
    if (target.tenantIds.length === 0) return [undefined]
    return Promise.all(target.tenantIds.map((tenantId) => deps.mfaPolicy?.methodsFor(tenantId)))
  }

  return {
    async satisfiedBy(sessionUid, accountId) {
      if (!sessionUid) return new Set()
      return new Set((await factorsOfSession(deps.sql, sessionUid, accountId)).keys())
    },

    async decide({ target, accountId, satisfied, ip, purpose }) {
      const account = await deps.accounts.get(accountId)
      if (!account || account.disabled || account.realm !== realmOfTarget(target))
        return { outcome: 'deny', reason: 'account_unavailable' }

      // Factors first: a person who holds only the password learns nothing more of the account.
      const due = new Set<Step>()
      for (const methods of await methodSets(target))
        for (const step of stepsFor(account, methods)) due.add(step)
      const missing = STEPS.filter((step) => due.has(step) && !satisfied.has(factorOfStep(step)))
      if (missing.length > 0)
        return purpose === 'refresh'
          ? { outcome: 'deny', reason: 'factor_missing' }
          : { outcome: 'step-up', steps: missing }

      if (target.kind === 'console') {
        for (const tenantId of target.tenantIds) {
          if (!(await deps.tenants.get(tenantId)) || !(await deps.memberships.roleOf(tenantId, accountId)))
            return { outcome: 'deny', reason: 'not_member' }
        }
        return { outcome: 'allow' }
      }
      if (target.kind === 'partner-portal') {
        const status = await deps.partners?.statusOf(accountId)
        if (status === 'active') return { outcome: 'allow' }
        return { outcome: 'deny', reason: status === 'pending' ? 'partner_pending' : 'partner_refused' }
      }
      const { tenantId, applicationId } = target.application
      const attempt = { tenantId, applicationId, accountId, ip }
      if (deps.accessPolicy) {
        if (purpose === 'refresh') {
          if (!(await deps.accessPolicy.allowsRefresh(attempt)))
            return { outcome: 'deny', reason: 'access_policy' }
        } else if (purpose === 'probe') {
          if (!(await deps.accessPolicy.allowsSignIn(attempt)))
            return { outcome: 'deny', reason: 'access_policy' }
        } else {
          const decision = await deps.accessPolicy.decideSignIn(attempt)
          if (decision.outcome === 'deny') return { outcome: 'deny', reason: 'access_policy' }
          if (decision.outcome === 'pending') return { outcome: 'pending', requestId: decision.request.id }
        }
      }
      if (deps.endUsers && !(await deps.endUsers.recordSignIn(tenantId, accountId, applicationId)))
        return { outcome: 'deny', reason: 'enduser_blocked' }
      return { outcome: 'allow' }
    },
  }
}
