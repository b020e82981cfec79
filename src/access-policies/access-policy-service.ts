import { randomUUID } from 'node:crypto'
import type { AuditLog } from '../audit/audit-log.ts'
import type { Actor } from '../auth/request-context.ts'
import type { Sql } from '../data/database.ts'
import { applyPatch } from '../http/patch.ts'
import { MailError, type Mailer } from '../mail/mailer.ts'
import type { Clock } from '../platform/clock.ts'
import { AppError, invalidField, isUniqueViolation, notFound } from '../platform/errors.ts'
import type { MailQueue } from '../platform/module.ts'
import {
  type AccessPolicyRow,
  type AccessRequestRow,
  type AccessRequestStatus,
  decideRequest,
  deletePolicy,
  getPolicy,
  getRequest,
  insertPolicy,
  insertRequest,
  lapsePending,
  listPolicies,
  listRequests,
  liveRequest,
  type PolicyFields,
  policiesInOrder,
  recordRequestEmail,
  updatePolicy,
} from './access-policy-store.ts'
import { formatIpRange, ipMatcher, parseIpRange } from './ip-ranges.ts'

/** The actions a policy may be written with. */
export const POLICY_ACTIONS = ['Allow', 'Deny', 'AllowWithApproval'] as const
type PolicyAction = (typeof POLICY_ACTIONS)[number]
/** Step-up MFA is not released: refused on write, and a stored one refuses at run time. */
export const UNRELEASED_ACTIONS = ['RequireMfa'] as const

export const POLICY_LIMITS = {
  nameChars: 200,
  descriptionChars: 1000,
  maxPriority: 1_000_000,
  /** A policy written without a priority goes this far after the tenant's last one (room to insert between). */
  defaultPriorityStep: 10,
  /** Entries per condition list. */
  conditionItems: 100,
  reasonChars: 500,
} as const

/**
 * How long things last (docs/identity.md "Access policies"): a request waits for a decision for
 * a day; an approval lets the end-user in to the application for eight hours (sign-ins and
 * refresh-token use alike), after which a new request is needed.
 */
const APPROVAL_WINDOWS = {
  pendingMs: 24 * 60 * 60_000,
  accessMs: 8 * 60 * 60_000,
} as const

interface AccessPolicyView {
  id: string
  name: string
  description: string
  /** Allow, Deny, AllowWithApproval; a row written before this release may read RequireMfa. */
  action: string
  priority: number
  applicationIds: string[]
  endUserIds: string[]
  roleIds: string[]
  ipRanges: string[]
  createdAt: string
  updatedAt: string
}

interface AccessPolicyInput {
  name: string
  description?: string | undefined
  action: string
  /** Absent: after every other policy of the tenant (their highest priority + 10; 10 for the first). */
  priority?: number | undefined
  applicationIds?: string[] | undefined
  endUserIds?: string[] | undefined
  roleIds?: string[] | undefined
  ipRanges?: string[] | undefined
}

type AccessPolicyPatch = Partial<AccessPolicyInput>

interface AccessRequestView {
  id: string
  applicationId: string
  endUserId: string
  policyId: string | null
  status: AccessRequestStatus
  sourceIp: string | null
  requestedAt: string
  expiresAt: string
  decidedAt: string | null
  decidedBy: string | null
  reason: string | null
  /** Until when an approval lets the end-user in. */
  accessExpiresAt: string | null
  emailDispatchStatus: 'queued' | 'sent' | 'failed' | null
}

/** One end-user signing in to (or refreshing a token of) one application. */
interface AccessAttempt {
  tenantId: string
  applicationId: string
  accountId: string
  /** The caller's address (the browser's at sign-in; the token endpoint caller's at refresh). */
  ip: string | null
}

type SignInDecision =
  | { outcome: 'allow'; policyId: string | null }
  | { outcome: 'deny'; policyId: string }
  | { outcome: 'pending'; request: AccessRequestView }

/** What the module needs of the others. */
export interface PolicyDirectories {
  applicationExists(tenantId: string, applicationId: string): Promise<boolean>
  endUserExists(tenantId: string, endUserId: string): Promise<boolean>
  roleExists(tenantId: string, roleId: string): Promise<boolean>
  /** Ids of every role the end-user holds in the tenant's applications. */
  roleIdsOf(tenantId: string, endUserId: string): Promise<string[]>
  /** For the decision e-mail. */
  emailOf(accountId: string): Promise<string | undefined>
  applicationName(applicationId: string): Promise<string | undefined>
}

export interface AccessPolicyService {
  list(
    actor: Actor,
    page: { limit: number; offset: number },
  ): Promise<{ data: AccessPolicyView[]; total: number }>
  get(actor: Actor, id: string): Promise<AccessPolicyView>
  create(actor: Actor, input: AccessPolicyInput): Promise<AccessPolicyView>
  /** PUT: the policy becomes the input (lists left out become empty). */
  replace(actor: Actor, id: string, input: AccessPolicyInput): Promise<AccessPolicyView>
  /** PATCH: the fields given change, the others stay. */
  patch(actor: Actor, id: string, patch: AccessPolicyPatch): Promise<AccessPolicyView>
  remove(actor: Actor, id: string): Promise<void>

  /** The sign-in pages: allow, deny, or wait for (and create when needed) an access request. */
  decideSignIn(attempt: AccessAttempt): Promise<SignInDecision>
  /**
   * Whether a sign-in would be allowed now, with no record and no access request made: the
   * provider asks it of a remembered login, and only a refusal sends the person to the page
   * (which then decides, and records, with decideSignIn).
   */
  allowsSignIn(attempt: AccessAttempt): Promise<boolean>
  /** The token endpoint, refresh grant: allowed only by a policy, no match, or an approval in its window. */
  allowsRefresh(attempt: AccessAttempt): Promise<boolean>
  /** The waiting page: the request of this end-user, as it stands now. */
  requestFor(tenantId: string, requestId: string, accountId: string): Promise<AccessRequestView | undefined>

  listRequests(
    actor: Actor,
    status: AccessRequestStatus | undefined,
    page: { limit: number; offset: number },
  ): Promise<{ data: AccessRequestView[]; total: number }>
  getRequest(actor: Actor, id: string): Promise<AccessRequestView>
  approve(actor: Actor, id: string, reason: string | undefined): Promise<AccessRequestView>
  reject(actor: Actor, id: string, reason: string | undefined): Promise<AccessRequestView>
  /** The job process: the decision's e-mail to the requester, once. */
  deliverDecision(requestId: string, final: boolean): Promise<'sent' | 'failed' | 'skipped'>
}

const toView = (row: AccessPolicyRow): AccessPolicyView => ({
  id: row.id,
  name: row.name,
  description: row.description,
  action: row.action,
  priority: row.priority,
  applicationIds: row.application_ids,
  endUserIds: row.enduser_ids,
  roleIds: row.role_ids,
  ipRanges: row.ip_ranges,
  createdAt: row.created_at.toISOString(),
  updatedAt: row.updated_at.toISOString(),
})

const requestView = (row: AccessRequestRow, now: Date): AccessRequestView => ({
  id: row.id,
  applicationId: row.application_id,
  endUserId: row.account_id,
  policyId: row.policy_id,
  status: row.status === 'pending' && row.expires_at <= now ? 'expired' : row.status,
  sourceIp: row.source_ip,
  requestedAt: row.requested_at.toISOString(),
  expiresAt: row.expires_at.toISOString(),
  decidedAt: row.decided_at?.toISOString() ?? null,
  decidedBy: row.decided_by,
  reason: row.reason,
  accessExpiresAt: row.access_expires_at?.toISOString() ?? null,
  emailDispatchStatus: row.email_dispatch_status,
})

export const actionNotSupported = () =>
  new AppError(400, 'action_not_supported', 'This action is not released; use one of the supported actions', {
    supportedActions: [...POLICY_ACTIONS],
  })

const isReleased = (action: string): action is PolicyAction =>
  (POLICY_ACTIONS as readonly string[]).includes(action)

/** The decision on an access request, to the end-user who asked (access-policies-jobs.ts). */
export const ACCESS_DECISION_EMAIL = 'access-decision-email'
export interface AccessDecisionEmail {
  requestId: string
}
const accessDecisionEmailId = (requestId: string) => `access.${requestId}`

/**
 * Access policies and the access requests of AllowWithApproval (docs/identity.md "Access
 * policies"). Policies are read on every decision, so a change applies at once in every process.
 */
export function createAccessPolicyService(deps: {
  sql: Sql
  audit: AuditLog
  clock: Clock
  directories: PolicyDirectories
  mailQueue?: MailQueue
  mailer?: Mailer
}): AccessPolicyService {
  const { sql, audit, clock, directories } = deps
  const missing = () => notFound('access_policy_not_found', 'Access policy')
  const missingRequest = () => notFound('access_request_not_found', 'Access request')
  const priorityTaken = () =>
    new AppError(409, 'priority_taken', 'Another access policy of the tenant has this priority')

  async function checkIds(
    field: string,
    ids: readonly string[],
    exists: (id: string) => Promise<boolean>,
    what: string,
  ): Promise<string[]> {
    if (new Set(ids).size !== ids.length) throw invalidField(field, 'must not repeat an id')
    for (const [index, id] of ids.entries())
      if (!(await exists(id))) throw invalidField(`${field}/${index}`, `is not ${what} of this tenant`)
    return [...ids]
  }

  /** The stored fields of an input but its priority, every rule of the issue applied; 400 names the field. */
  async function fieldsOf(
    tenantId: string,
    input: AccessPolicyInput,
  ): Promise<Omit<PolicyFields, 'priority'>> {
    if ((UNRELEASED_ACTIONS as readonly string[]).includes(input.action)) throw actionNotSupported()
    if (!isReleased(input.action))
      throw invalidField('body/action', `must be one of ${POLICY_ACTIONS.join(', ')}`)
    const name = input.name.trim()
    if (!name) throw invalidField('body/name', 'must not be blank')
    const ipRanges = (input.ipRanges ?? []).map((text, index) => {
      const range = parseIpRange(text)
      if (typeof range === 'string')
        throw invalidField(`body/ipRanges/${index}`, `${range} (CIDR, e.g. 203.0.113.0/24 or 2001:db8::/32)`)
      return formatIpRange(range)
    })
    if (new Set(ipRanges).size !== ipRanges.length)
      throw invalidField('body/ipRanges', 'must not repeat a range')
    return {
      name,
      description: input.description ?? '',
      action: input.action,
      application_ids: await checkIds(
        'body/applicationIds',
        input.applicationIds ?? [],
        (id) => directories.applicationExists(tenantId, id),
        'an application',
      ),
      enduser_ids: await checkIds(
        'body/endUserIds',
        input.endUserIds ?? [],
        (id) => directories.endUserExists(tenantId, id),
        'an end-user',
      ),
      role_ids: await checkIds(
        'body/roleIds',
        input.roleIds ?? [],
        (id) => directories.roleExists(tenantId, id),
        'a role',
      ),
      ip_ranges: ipRanges,
    }
  }

  /** The stored policy as an input: what a PATCH starts from. */
  const inputOf = (row: AccessPolicyRow): AccessPolicyInput => {
    const { id: _id, createdAt: _created, updatedAt: _updated, ...input } = toView(row)
    return input
  }

  /**
   * The priority of a policy written without one: after every other policy of the tenant, so a new
   * policy never overrides the existing ones unasked. `except`: the policy a PUT replaces.
   */
  async function defaultPriority(tenantId: string, except: string): Promise<number> {
    const others = (await policiesInOrder(sql, tenantId)).filter((p) => p.id !== except)
    const priority = (others.at(-1)?.priority ?? 0) + POLICY_LIMITS.defaultPriorityStep
    if (priority > POLICY_LIMITS.maxPriority)
      throw invalidField(
        'body/priority',
        `is required here: the tenant's last policy has priority ${others.at(-1)?.priority}, leaving no room after it (0 to ${POLICY_LIMITS.maxPriority})`,
      )
    return priority
  }

  /**
   * create and replace: a policy with the priority given, or the default one. Two writes without
   * one may compute the same default at once; the one the unique index refuses computes it again.
   */
  async function place(
    actor: Actor,
    id: string,
    verb: 'create' | 'update',
    input: AccessPolicyInput,
  ): Promise<AccessPolicyView> {
    const fields = await fieldsOf(actor.tenantId, input)
    if (input.priority !== undefined) return write(actor, id, verb, { ...fields, priority: input.priority })
    for (let attempt = 1; ; attempt++) {
      const priority = await defaultPriority(actor.tenantId, id)
      try {
        return await write(actor, id, verb, { ...fields, priority })
      } catch (err) {
        if (attempt >= 3 || !(err instanceof AppError && err.code === 'priority_taken')) throw err
      }
    }
  }

  /** Stores a policy (new, or changed) with its audit record, in one transaction. */
  async function write(
    actor: Actor,
    id: string,
    verb: 'create' | 'update',
    fields: PolicyFields,
  ): Promise<AccessPolicyView> {
    try {
      return await sql.begin(async (tx) => {
        const row =
          verb === 'create'
            ? await insertPolicy(tx, { ...fields, id, tenant_id: actor.tenantId, created_by: actor.actor })
            : await updatePolicy(tx, actor.tenantId, id, fields)
        if (!row) throw missing()
        await audit.recordInTransaction(tx, {
          ...actor,
          action: `access_policies.${verb}`,
          resource: `access_policy:${id}`,
          outcome: 'success',
          details: { action: fields.action, priority: fields.priority },
        })
        return toView(row)
      })
    } catch (err) {
      if (isUniqueViolation(err, 'access_policies_priority_unique')) throw priorityTaken()
      throw err
    }
  }

  /**
   * The first policy, by priority, whose every condition holds. Conditions: the application is
   * listed (or none are); the end-user is listed or holds a listed role (or neither list is set);
   * the address is in a listed range (or none are).
   */
  async function firstMatch(attempt: AccessAttempt): Promise<AccessPolicyRow | undefined> {
    const policies = await policiesInOrder(sql, attempt.tenantId)
    let roleIds: Set<string> | undefined
    for (const policy of policies) {
      if (policy.application_ids.length > 0 && !policy.application_ids.includes(attempt.applicationId))
        continue
      if (policy.ip_ranges.length > 0 && !ipMatcher(policy.ip_ranges)(attempt.ip)) continue
      if (policy.enduser_ids.length > 0 || policy.role_ids.length > 0) {
        const listed = policy.enduser_ids.includes(attempt.accountId)
        if (!listed) {
          roleIds ??= new Set(await directories.roleIdsOf(attempt.tenantId, attempt.accountId))
          if (!policy.role_ids.some((id) => roleIds!.has(id))) continue
        }
      }
      return policy
    }
    return undefined
  }

  async function auditDecision(attempt: AccessAttempt, event: string, policyId: string, details = {}) {
    await audit.record({
      tenantId: attempt.tenantId,
      actor: `enduser:${attempt.accountId}`,
      action: event,
      resource: `application:${attempt.applicationId}`,
      outcome: 'denied',
      clientIp: attempt.ip,
      details: { policyId, ...details },
    })
  }

  async function decide(
    actor: Actor,
    id: string,
    decision: 'approved' | 'rejected',
    reason: string | undefined,
  ): Promise<AccessRequestView> {
    const now = clock.now()
    const row = await sql.begin(async (tx) => {
      const current = await getRequest(tx, actor.tenantId, id, { lock: true })
      if (!current) throw missingRequest()
      if (current.status !== 'pending')
        throw new AppError(409, 'access_request_decided', `The request is already ${current.status}`)
      if (current.expires_at <= now)
        throw new AppError(409, 'access_request_expired', 'The request expired before a decision')
      const decided = await decideRequest(tx, id, {
        status: decision,
        decidedAt: now,
        decidedBy: actor.actor,
        reason: reason?.trim() || null,
        accessExpiresAt: decision === 'approved' ? new Date(now.getTime() + APPROVAL_WINDOWS.accessMs) : null,
      })
      await audit.recordInTransaction(tx, {
        ...actor,
        action: decision === 'approved' ? 'access_requests.approve' : 'access_requests.reject',
        resource: `access_request:${id}`,
        outcome: 'success',
        details: { applicationId: current.application_id, endUserId: current.account_id },
      })
      return decided
    })
    // The requester's e-mail goes out from the job process; the row is its outbox.
    await deps.mailQueue
      ?.enqueue(ACCESS_DECISION_EMAIL, { requestId: id }, accessDecisionEmailId(id))
      .catch(() => {})
    return requestView(row, now)
  }

  return {
    async list(actor, page) {
      const { rows, total } = await listPolicies(sql, actor.tenantId, page)
      return { data: rows.map(toView), total }
    },
    async get(actor, id) {
      const row = await getPolicy(sql, actor.tenantId, id)
      if (!row) throw missing()
      return toView(row)
    },
    async create(actor, input) {
      return place(actor, randomUUID(), 'create', input)
    },
    async replace(actor, id, input) {
      if (!(await getPolicy(sql, actor.tenantId, id))) throw missing()
      return place(actor, id, 'update', input)
    },
    async patch(actor, id, patch) {
      const current = await getPolicy(sql, actor.tenantId, id)
      if (!current) throw missing()
      // A stored RequireMfa row must be given a released action to change: it is refused like a new one.
      const merged = applyPatch(inputOf(current), patch)
      return write(actor, id, 'update', {
        ...(await fieldsOf(actor.tenantId, merged)),
        priority: merged.priority ?? current.priority,
      })
    },
    async remove(actor, id) {
      await sql.begin(async (tx) => {
        if (!(await deletePolicy(tx, actor.tenantId, id))) throw missing()
        await audit.recordInTransaction(tx, {
          ...actor,
          action: 'access_policies.delete',
          resource: `access_policy:${id}`,
          outcome: 'success',
        })
      })
    },

    async decideSignIn(attempt) {
      const policy = await firstMatch(attempt)
      if (!policy || policy.action === 'Allow') return { outcome: 'allow', policyId: policy?.id ?? null }
      if (policy.action !== 'AllowWithApproval') {
        // Deny, and any action this release does not run (RequireMfa): never allowed.
        await auditDecision(attempt, 'access_policies.sign_in.refused', policy.id, { action: policy.action })
        return { outcome: 'deny', policyId: policy.id }
      }
      const now = clock.now()
      const key = { applicationId: attempt.applicationId, accountId: attempt.accountId, now }
      const live = await liveRequest(sql, key)
      if (live?.status === 'approved') return { outcome: 'allow', policyId: policy.id }
      if (live) return { outcome: 'pending', request: requestView(live, now) }
      const id = randomUUID()
      const created = await sql.begin(async (tx) => {
        await lapsePending(tx, key)
        const row = await insertRequest(tx, {
          id,
          tenant_id: attempt.tenantId,
          application_id: attempt.applicationId,
          account_id: attempt.accountId,
          policy_id: policy.id,
          source_ip: attempt.ip,
          requested_at: now,
          expires_at: new Date(now.getTime() + APPROVAL_WINDOWS.pendingMs),
        })
        if (row)
          await audit.recordInTransaction(tx, {
            tenantId: attempt.tenantId,
            actor: `enduser:${attempt.accountId}`,
            action: 'access_requests.create',
            resource: `access_request:${id}`,
            outcome: 'success',
            clientIp: attempt.ip,
            details: { applicationId: attempt.applicationId, policyId: policy.id },
          })
        return row
      })
      // Another sign-in of the same person made the request first: wait for that one.
      const request = created ?? (await liveRequest(sql, key))
      if (!request) throw new AppError(409, 'access_request_conflict', 'Try signing in again')
      return { outcome: 'pending', request: requestView(request, now) }
    },
    async allowsSignIn(attempt) {
      const policy = await firstMatch(attempt)
      if (!policy || policy.action === 'Allow') return true
      if (policy.action !== 'AllowWithApproval') return false
      const live = await liveRequest(sql, {
        applicationId: attempt.applicationId,
        accountId: attempt.accountId,
        now: clock.now(),
      })
      return live?.status === 'approved'
    },
    async allowsRefresh(attempt) {
      const policy = await firstMatch(attempt)
      if (!policy || policy.action === 'Allow') return true
      if (policy.action === 'AllowWithApproval') {
        const live = await liveRequest(sql, {
          applicationId: attempt.applicationId,
          accountId: attempt.accountId,
          now: clock.now(),
        })
        if (live?.status === 'approved') return true
      }
      await auditDecision(attempt, 'access_policies.refresh.refused', policy.id, { action: policy.action })
      return false
    },
    async requestFor(tenantId, requestId, accountId) {
      const row = await getRequest(sql, tenantId, requestId)
      return row && row.account_id === accountId ? requestView(row, clock.now()) : undefined
    },

    async listRequests(actor, status, page) {
      const now = clock.now()
      const { rows, total } = await listRequests(sql, actor.tenantId, { status, now }, page)
      return { data: rows.map((row) => requestView(row, now)), total }
    },
    async getRequest(actor, id) {
      const row = await getRequest(sql, actor.tenantId, id)
      if (!row) throw missingRequest()
      return requestView(row, clock.now())
    },
    approve: (actor, id, reason) => decide(actor, id, 'approved', reason),
    reject: (actor, id, reason) => decide(actor, id, 'rejected', reason),
    async deliverDecision(requestId, final) {
      const row = await getRequest(sql, undefined, requestId)
      if (row?.email_dispatch_status !== 'queued') return 'skipped'
      if (row.status !== 'approved' && row.status !== 'rejected') return 'skipped'
      const to = await directories.emailOf(row.account_id)
      if (!to) return 'skipped'
      const app = (await directories.applicationName(row.application_id)) ?? 'the application'
      const approved = row.status === 'approved'
      const text = approved
        ? `Your request to sign in to ${app} was approved. Sign in again within ${APPROVAL_WINDOWS.accessMs / 3_600_000} hours (until ${row.access_expires_at?.toISOString()}).\n`
        : `Your request to sign in to ${app} was not approved.${row.reason ? ` Reason: ${row.reason}` : ''}\n`
      try {
        if (!deps.mailer) throw new MailError('smtp_not_configured')
        await deps.mailer.send({
          to,
          subject: approved ? `Access to ${app} approved` : `Access to ${app} not approved`,
          text,
          html: `<p>${escapeHtml(text.trim())}</p>\n`,
        })
      } catch (err) {
        const reason = err instanceof MailError ? err.reason : 'email_failed'
        if (!final && reason !== 'smtp_not_configured') throw err
        await recordRequestEmail(sql, requestId, { status: 'failed', error: reason })
        return 'failed'
      }
      await recordRequestEmail(sql, requestId, { status: 'sent', error: null })
      return 'sent'
    },
  }
}

const escapeHtml = (text: string) => text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`)
