import { randomUUID } from 'node:crypto'
import type { AuditLog } from '../audit/audit-log.ts'
import type { Actor } from '../auth/request-context.ts'
import type { AccountLinks, LinkKind } from '../identity/account-links.ts'
import { type AccountService, checkEmail, normalizeEmail, tenantRealm } from '../identity/account-service.ts'
import type { Clock } from '../platform/clock.ts'
import type { Queryable, Sql } from '../platform/database.ts'
import { AppError, isUniqueViolation, notFound } from '../platform/errors.ts'
import {
  addToApplication,
  countEndUsers,
  deleteEndUser,
  type EndUserFilter,
  type EndUserRow,
  findEndUserByEmail,
  getEndUser,
  insertEndUser,
  listEndUsers,
  setStatus,
} from './enduser-store.ts'

export const ENDUSER_STATUSES = ['active', 'blocked'] as const
export type EndUserStatus = (typeof ENDUSER_STATUSES)[number]

export interface EndUserView {
  id: string
  email: string
  displayName: string | null
  status: EndUserStatus
  blockedAt: string | null
  /** How the user came to be: `api`, `app_creator` or `sign_up`. */
  source: EndUserRow['source']
  /** The applications whose end-user list holds the user. */
  applicationIds: string[]
  /** Whether the user has chosen a password (a set-up link not yet used: false). */
  hasPassword: boolean
  createdAt: string
  updatedAt: string
}

/** A link just issued: its e-mail is queued for the job process. */
export interface LinkDispatch {
  userId: string
  emailDispatchStatus: 'queued'
  linkExpiresAt: string
}

export interface EndUserSessions {
  /** Ends every session, grant and token of the account in every process (after commit). */
  endSessionsOf(accountId: string): Promise<void>
}

/** What the end-users module needs of applications (src/applications). */
export interface ApplicationDirectory {
  exists(tenantId: string, applicationId: string): Promise<boolean>
}

/** Prepared outside the application's transaction (it reads the team realm). */
export interface AppCreator {
  email: string
  displayName: string | null
}

export interface EndUserService {
  list(
    actor: Actor,
    filter: EndUserFilter,
    page: { limit: number; offset: number },
  ): Promise<{ data: EndUserView[]; total: number }>
  get(actor: Actor, id: string): Promise<EndUserView>
  /** The account (no password) and the record; the set-up link goes out by e-mail. 409 `enduser_exists`. */
  createWithoutPassword(
    actor: Actor,
    input: { email: string; displayName?: string | undefined; applicationId?: string | undefined },
  ): Promise<EndUserView & { setupLink: LinkDispatch }>
  /** A reset link by e-mail (older reset links stop working); 409 `enduser_blocked`. */
  sendPasswordReset(
    actor: Actor,
    id: string,
    input: { applicationId?: string | undefined },
  ): Promise<LinkDispatch>
  block(actor: Actor, id: string): Promise<EndUserView>
  unblock(actor: Actor, id: string): Promise<EndUserView>
  /** Identity user first, then the record and what hangs on it; safe to retry after a failure. */
  deletePermanently(actor: Actor, id: string): Promise<void>
  /** The team member registering an application, as an end-user of its tenant (undefined: not a member). */
  prepareAppCreator(actor: Actor): Promise<AppCreator | undefined>
  /** In the application's transaction: the creator joins its end-user list, audited. */
  addAppCreator(tx: Queryable, actor: Actor, creator: AppCreator, applicationId: string): Promise<void>
  /**
   * Sign-up on an application's pages. A new address gets an account without a password, a record
   * and a set-up link; a known one a reset link; a blocked one nothing. The page says the same in
   * every case, and the e-mail proves the address before any password is set.
   */
  signUp(input: { tenantId: string; applicationId: string; email: string }): Promise<void>
  /** The sign-in pages: a user signing in joins the application's list (false: no record, or blocked). */
  recordSignIn(tenantId: string, accountId: string, applicationId: string): Promise<boolean>
  /**
   * Federation: the end-user an external IdP vouches for by e-mail address, created (account
   * without a password, record with source `federation`) when the tenant has none. undefined:
   * the end-user is blocked.
   */
  federatedAccount(input: {
    tenantId: string
    email: string
    displayName: string | null
    idpId: string
  }): Promise<string | undefined>
  /** The tenant's end-users (billing's usage report). */
  count(tenantId: string): Promise<number>
  /** Whether the tenant has this end-user (access policies' conditions). */
  exists(tenantId: string, id: string): Promise<boolean>
}

const toView = (row: EndUserRow, hasPassword: boolean): EndUserView => ({
  id: row.id,
  email: row.email,
  displayName: row.display_name,
  status: row.status,
  blockedAt: row.blocked_at?.toISOString() ?? null,
  source: row.source,
  applicationIds: row.application_ids,
  hasPassword,
  createdAt: row.created_at.toISOString(),
  updatedAt: row.updated_at.toISOString(),
})

const MEMBER_ACTOR = /^member:([0-9a-f-]{36})$/

/**
 * End-users (design/identity.md "Two contexts of an end-user"): the identity context (the account
 * in the tenant's realm: credentials, sign-in enabled, sessions) belongs to the identity module and
 * is changed through its AccountService; the record (profile, status, applications) is this
 * module's. Both live in PostgreSQL, so one transaction coordinates them: the identity change is
 * made first and is undone with the transaction when the record cannot be saved. Ending sessions
 * and dropping caches in other processes happen after commit.
 */
export function createEndUserService(deps: {
  sql: Sql
  audit: AuditLog
  accounts: AccountService
  links: AccountLinks
  sessions: EndUserSessions
  applications: ApplicationDirectory
  clock: Clock
}): EndUserService {
  const { sql, audit, accounts } = deps
  const missing = () => notFound('enduser_not_found', 'End-user')

  async function view(row: EndUserRow): Promise<EndUserView> {
    const account = await accounts.get(row.id)
    return toView(row, account?.hasPassword ?? false)
  }

  async function requireApplication(actor: Actor, applicationId: string | undefined) {
    if (applicationId && !(await deps.applications.exists(actor.tenantId, applicationId)))
      throw notFound('application_not_found', 'Application')
  }

  async function issueLink(
    actor: Actor,
    id: string,
    kind: LinkKind,
    applicationId: string | null,
    tx: Queryable,
  ): Promise<{ linkId: string; dispatch: LinkDispatch }> {
    const { linkId, expiresAt } = await deps.links.issue(tx, { accountId: id, kind, applicationId })
    await audit.recordInTransaction(tx, {
      ...actor,
      action: kind === 'reset' ? 'endusers.password_reset.send' : 'endusers.setup_link.send',
      resource: `enduser:${id}`,
      outcome: 'success',
      details: applicationId ? { applicationId } : {},
    })
    return {
      linkId,
      dispatch: { userId: id, emailDispatchStatus: 'queued', linkExpiresAt: expiresAt.toISOString() },
    }
  }

  /**
   * A new end-user in the caller's transaction: the account of the tenant's realm (no password),
   * the record, the application's list and the audit record.
   */
  async function insertAccountAndRecord(
    tx: Queryable,
    actor: Actor,
    user: {
      id: string
      email: string
      displayName: string | null
      source: 'api' | 'sign_up' | 'federation'
      applicationId: string | null
    },
    details: Record<string, string> = {},
  ) {
    await accounts.createAccount(
      tenantRealm(actor.tenantId),
      { id: user.id, email: user.email, displayName: user.displayName },
      tx,
    )
    await insertEndUser(tx, {
      id: user.id,
      tenant_id: actor.tenantId,
      email: user.email,
      email_normalized: normalizeEmail(user.email),
      display_name: user.displayName,
      source: user.source,
      created_by: actor.actor,
    })
    if (user.applicationId)
      await addToApplication(tx, {
        tenantId: actor.tenantId,
        endUserId: user.id,
        applicationId: user.applicationId,
      })
    await audit.recordInTransaction(tx, {
      ...actor,
      action: 'endusers.create',
      resource: `enduser:${user.id}`,
      outcome: 'success',
      details: {
        source: user.source,
        ...(user.applicationId ? { applicationId: user.applicationId } : {}),
        ...details,
      },
    })
  }

  /** A new end-user who chooses a password through the set-up link issued with it. */
  async function insertNew(
    tx: Queryable,
    actor: Actor,
    user: Parameters<typeof insertAccountAndRecord>[2] & { source: 'api' | 'sign_up' },
  ) {
    await insertAccountAndRecord(tx, actor, user)
    return issueLink(actor, user.id, 'setup', user.applicationId, tx)
  }

  /** The address is taken in the tenant (its account or its record, whichever the race hit first). */
  const isDuplicate = (err: unknown) =>
    (err instanceof AppError && err.code === 'account_exists') ||
    isUniqueViolation(err, 'endusers_tenant_email_unique')

  /** Block and unblock: the identity change, then the record, in one transaction; idempotent. */
  async function setBlocked(actor: Actor, id: string, blocked: boolean): Promise<EndUserView> {
    const status: EndUserStatus = blocked ? 'blocked' : 'active'
    const changed = await sql.begin(async (tx) => {
      const row = await getEndUser(tx, actor.tenantId, id, { lock: true })
      if (!row) throw missing()
      if (row.status === status) return false
      await accounts.setSignInEnabled(id, !blocked, tx)
      if (!(await setStatus(tx, actor.tenantId, id, status, deps.clock.now()))) throw missing()
      await audit.recordInTransaction(tx, {
        ...actor,
        action: blocked ? 'endusers.block' : 'endusers.unblock',
        resource: `enduser:${id}`,
        outcome: 'success',
      })
      return true
    })
    // After commit: a blocked user's sessions and refresh tokens end at once, everywhere.
    if (changed && blocked) await deps.sessions.endSessionsOf(id)
    const row = await getEndUser(sql, actor.tenantId, id)
    if (!row) throw missing()
    return view(row)
  }

  return {
    async list(actor, filter, page) {
      const { rows, total } = await listEndUsers(sql, actor.tenantId, filter, page)
      const withPassword = new Set(
        (await accounts.getMany(rows.map((row) => row.id))).filter((a) => a.hasPassword).map((a) => a.id),
      )
      return { data: rows.map((row) => toView(row, withPassword.has(row.id))), total }
    },
    async get(actor, id) {
      const row = await getEndUser(sql, actor.tenantId, id)
      if (!row) throw missing()
      return view(row)
    },
    async createWithoutPassword(actor, input) {
      const email = checkEmail(input.email, 'body/email')
      const displayName = input.displayName?.trim() || null
      await requireApplication(actor, input.applicationId)
      const id = randomUUID()
      const { linkId, dispatch } = await sql
        .begin((tx) =>
          insertNew(tx, actor, {
            id,
            email,
            displayName,
            source: 'api',
            applicationId: input.applicationId ?? null,
          }),
        )
        .catch((err: unknown) => {
          if (isDuplicate(err))
            throw new AppError(409, 'enduser_exists', 'An end-user with this e-mail address already exists')
          throw err
        })
      await deps.links.enqueue(linkId)
      const row = await getEndUser(sql, actor.tenantId, id)
      if (!row) throw missing()
      return { ...toView(row, false), setupLink: dispatch }
    },
    async sendPasswordReset(actor, id, input) {
      await requireApplication(actor, input.applicationId)
      const { linkId, dispatch } = await sql.begin(async (tx) => {
        const row = await getEndUser(tx, actor.tenantId, id, { lock: true })
        if (!row) throw missing()
        if (row.status === 'blocked')
          throw new AppError(409, 'enduser_blocked', 'The end-user is blocked: unblock them first')
        return issueLink(actor, id, 'reset', input.applicationId ?? null, tx)
      })
      await deps.links.enqueue(linkId)
      return dispatch
    },
    block: (actor, id) => setBlocked(actor, id, true),
    unblock: (actor, id) => setBlocked(actor, id, false),
    async deletePermanently(actor, id) {
      await sql.begin(async (tx) => {
        const row = await getEndUser(tx, actor.tenantId, id, { lock: true })
        if (!row) throw missing()
        // The identity user first (absent already when an earlier attempt got that far), then the record.
        const identityRemoved = await accounts.removeAccount(id, tx)
        if (!(await deleteEndUser(tx, actor.tenantId, id))) throw missing()
        await audit.recordInTransaction(tx, {
          ...actor,
          action: 'endusers.delete_permanent',
          resource: `enduser:${id}`,
          outcome: 'success',
          details: { identityRemoved },
        })
      })
      await deps.sessions.endSessionsOf(id)
    },
    async prepareAppCreator(actor) {
      const match = MEMBER_ACTOR.exec(actor.actor)
      if (!match) return undefined
      const account = await accounts.get(match[1]!)
      return account ? { email: account.email, displayName: account.displayName } : undefined
    },
    async addAppCreator(tx, actor, creator, applicationId) {
      const realm = tenantRealm(actor.tenantId)
      let row = await findEndUserByEmail(tx, actor.tenantId, normalizeEmail(creator.email))
      let created = false
      if (!row) {
        const account =
          (await accounts.findAccount(realm, creator.email, tx)) ??
          (await accounts.createAccount(
            realm,
            { email: creator.email, displayName: creator.displayName },
            tx,
          ))
        await insertEndUser(tx, {
          id: account.id,
          tenant_id: actor.tenantId,
          email: account.email,
          email_normalized: normalizeEmail(account.email),
          display_name: account.displayName,
          source: 'app_creator',
          created_by: actor.actor,
        })
        created = true
        row = await getEndUser(tx, actor.tenantId, account.id)
      }
      await addToApplication(tx, { tenantId: actor.tenantId, endUserId: row!.id, applicationId })
      await audit.recordInTransaction(tx, {
        ...actor,
        action: 'endusers.create.auto_from_app_creator',
        resource: `enduser:${row!.id}`,
        outcome: 'success',
        details: { applicationId, newEndUser: created },
      })
    },
    async signUp({ tenantId, applicationId, email }) {
      const address = checkEmail(email)
      const known = await findEndUserByEmail(sql, tenantId, normalizeEmail(address))
      if (known) {
        if (known.status === 'blocked') return
        const actor = { tenantId, actor: `enduser:${known.id}`, requestId: null, clientIp: null }
        const { linkId } = await sql.begin((tx) => issueLink(actor, known.id, 'reset', applicationId, tx))
        await deps.links.enqueue(linkId)
        return
      }
      const id = randomUUID()
      const actor = { tenantId, actor: `enduser:${id}`, requestId: null, clientIp: null }
      const issued = await sql
        .begin((tx) =>
          insertNew(tx, actor, { id, email: address, displayName: null, source: 'sign_up', applicationId }),
        )
        .catch((err: unknown) => {
          // Two sign-ups of one address at once: the other made it, and sent its link.
          if (isDuplicate(err)) return undefined
          throw err
        })
      if (issued) await deps.links.enqueue(issued.linkId)
    },
    async federatedAccount({ tenantId, email, displayName, idpId }) {
      const address = checkEmail(email)
      const find = () => findEndUserByEmail(sql, tenantId, normalizeEmail(address))
      const known = await find()
      if (known) return known.status === 'blocked' ? undefined : known.id
      const id = randomUUID()
      const actor = { tenantId, actor: `saml_idp:${idpId}`, requestId: null, clientIp: null }
      try {
        // No set-up link: the person signs in through the IdP.
        await sql.begin((tx) =>
          insertAccountAndRecord(
            tx,
            actor,
            { id, email: address, displayName, source: 'federation', applicationId: null },
            { idpId },
          ),
        )
        return id
      } catch (err) {
        // Created meanwhile by another sign-in (or the account of the realm exists without a record).
        if (!isDuplicate(err)) throw err
        const raced = await find()
        return raced && raced.status !== 'blocked' ? raced.id : undefined
      }
    },
    count: (tenantId) => countEndUsers(sql, tenantId),
    async exists(tenantId, id) {
      return (await getEndUser(sql, tenantId, id)) !== undefined
    },
    async recordSignIn(tenantId, accountId, applicationId) {
      const row = await getEndUser(sql, tenantId, accountId)
      if (!row || row.status === 'blocked') return false
      await addToApplication(sql, { tenantId, endUserId: accountId, applicationId })
      return true
    },
  }
}
