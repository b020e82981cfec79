import type { AuditLog } from '../../audit/audit-log.ts'

/** Whose sign-in: a team member (the console), a tenant's end-user (an application), a partner's person. */
export type SignInKind = 'member' | 'enduser' | 'partner'

/** Why a sign-in did not end with a code: a bounded set (metric labels and audit details). */
export type SignInFailure =
  | 'invalid_credentials'
  | 'locked'
  | 'blocked'
  | 'invalid_code'
  | 'code_locked'
  | 'access_policy'
  | 'approval_rejected'
  | 'approval_expired'
  | 'not_member'
  | 'enduser_blocked'
  | 'partner_pending'
  | 'partner_refused'
  | 'account_unavailable'

interface SignInEvent {
  kind: SignInKind
  clientId: string
  /** The tenant the sign-in is for (an application's; the console's resource); none for the portal. */
  tenantId: string | undefined
  applicationId: string | undefined
  /** Unknown when the address matched no account (a wrong address reads as a wrong password). */
  accountId: string | undefined
  outcome: 'success' | 'failure'
  reason?: SignInFailure
  /** How the person proved themselves (RFC 8176 `amr` values: pwd, otp, sms, ext, mfa). */
  methods: string[]
  /** A remembered login asked for more factors for this client, tenant or application. */
  stepUp: boolean
  ip: string | null
}

export interface SignInEvents {
  record(event: SignInEvent): Promise<void>
}

/**
 * Sign-ins and failed sign-ins (docs/identity.md "Sign-in records"): audited in the tenant they
 * are for, counted in /metrics by kind, outcome and reason. A sign-in for no tenant (the console
 * without a resource, the partner portal) is counted only: the audit log is per tenant. Never
 * the address typed, a password or a code.
 */
export function createSignInEvents(deps: {
  audit: AuditLog
  count(kind: SignInKind, outcome: 'success' | 'failure', reason: SignInFailure | 'none'): void
}): SignInEvents {
  return {
    async record(event) {
      deps.count(event.kind, event.outcome, event.reason ?? 'none')
      if (!event.tenantId) return
      await deps.audit.record({
        tenantId: event.tenantId,
        actor: event.accountId
          ? `${event.kind === 'member' ? 'member' : event.kind}:${event.accountId}`
          : 'anonymous',
        action: event.outcome === 'success' ? 'identity.sign_in' : 'identity.sign_in_failed',
        resource: `client:${event.clientId}`,
        outcome: event.outcome === 'success' ? 'success' : 'denied',
        clientIp: event.ip,
        details: {
          kind: event.kind,
          clientId: event.clientId,
          applicationId: event.applicationId ?? null,
          methods: event.methods.join(' '),
          stepUp: event.stepUp,
          reason: event.reason ?? null,
        },
      })
    },
  }
}
