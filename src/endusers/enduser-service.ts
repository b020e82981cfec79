import { createHash, randomBytes, randomUUID } from 'node:crypto'
import type { AuditLog } from '../audit/audit-log.ts'
import type { Actor } from '../auth/request-context.ts'
import type { Queryable, Sql } from '../data/database.ts'
import type { RequestAdmission } from '../http/client-rate-limit.ts'
import { type AccountLinks, type LinkKind, linkEmail } from '../identity/accounts/account-links.ts'
import {
  type AccountService,
  checkEmail,
  normalizeEmail,
  tenantRealm,
} from '../identity/accounts/account-service.ts'
import { open, seal } from '../keyring/aead.ts'
import type { MasterKeyring } from '../keyring/master-key.ts'
import { type RewrapResult, rewrapEach } from '../keyring/rewrap.ts'
import { MailError, type Mailer } from '../mail/mailer.ts'
import type { Clock } from '../platform/clock.ts'
import { AppError, isUniqueViolation, notFound } from '../platform/errors.ts'
import type { MailQueue } from '../platform/module.ts'
import { SIGNUP_LIFETIME_MS, SIGNUPS_PER_ADDRESS_PER_HOUR } from '../signup/signup-service.ts'
import {
  consumeSignUpRequest,
  countSignUpRequestsSince,
  findLiveSignUpRequest,
  getSignUpRequest,
  insertSignUpRequest,
  lockSignUpAddress,
  overdueSignUpRequests,
  recordSignUpDispatch,
  recordSignUpEndUser,
  replaceSealedSignUpLink,
  signUpLinksToRewrap,
} from './enduser-signup-store.ts'
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
type EndUserStatus = (typeof ENDUSER_STATUSES)[number]

interface EndUserView {
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
interface LinkDispatch {
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

/** What federatedAccount found or made for an IdP's first sign-in of an address. */
type FederatedAccount =
  /** `existing_by_trust`: an end-user with credentials, linked because the IdP is trusted to. */
  | { outcome: 'created' | 'existing' | 'existing_by_trust'; accountId: string }
  | { outcome: 'blocked' }
  /** An end-user with a password or a factor, and the IdP not trusted to link by address. */
  | { outcome: 'has_credentials'; accountId: string }

/** The page of a sign-up link: what the person asked for. */
export interface SignUpRequestView {
  tenantId: string
  applicationId: string
  email: string
}

/** What using a sign-up link did: `exists` when the address has an end-user already (no duplicate). */
type SignUpCompletion =
  | { outcome: 'created'; endUserId: string; tenantId: string; applicationId: string }
  | { outcome: 'exists' }
  | { outcome: 'invalid' }

/** The page that takes a sign-up link: `{ID_URL}/confirm-sign-up?token=…`. */
export const SIGN_UP_CONFIRM_PATH = '/confirm-sign-up'

/**
 * What the per-address sign-up limit counts: the address in lower case with the local part's
 * `+tag` removed, since most providers deliver `victim+1@x` and `victim+2@x` to one mailbox.
 * Dots are kept: only some providers ignore them, and elsewhere they name other people.
 */
function signUpAddressKey(email: string): string {
  const lower = email.trim().toLowerCase()
  const at = lower.lastIndexOf('@')
  if (at < 0) return lower
  const local = lower.slice(0, at)
  const plus = local.indexOf('+')
  return `${plus < 0 ? local : local.slice(0, plus)}${lower.slice(at)}`
}

const SIGN_UP_TOKEN = /^[A-Za-z0-9_-]{43}$/
const hashToken = (token: string) => createHash('sha256').update(token, 'utf8').digest()
const signUpLinkAad = (id: string) => `kms enduser signup link v1 id:${id}`

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
   * The sign-up page's bound per client address (KMS_SIGNUP_RATE_PER_HOUR, counted with the
   * forgot-password page's): asked before `signUp`, so a refusal can be the page's answer.
   */
  admitSignUp(clientIp: string): Promise<RequestAdmission>
  /**
   * Sign-up on an application's pages (docs/identity.md "Sign-up"). A new address gets a sign-up
   * link and nothing else: no account, no record (nothing billing counts) until the link is used
   * (`completeSignUp`). A known address gets a reset link (within the identity module's reset
   * cap); a blocked one nothing. An address (its `signUpAddressKey`) asks at most
   * SIGNUPS_PER_ADDRESS_PER_HOUR times an hour in a tenant; beyond it nothing is sent. The page
   * says the same in every case; each ask is audited (`endusers.sign_up.request`).
   */
  signUp(input: {
    tenantId: string
    applicationId: string
    email: string
    clientIp?: string | null
  }): Promise<void>
  /** The sign-up link's page: what was asked for, while the link is live. */
  signUpRequest(token: string): Promise<SignUpRequestView | undefined>
  /**
   * The sign-up link used: the account (with the password chosen on the page, hashed beforehand)
   * and the record, with the application's list, in one transaction with the link's use. A used,
   * expired or unknown link is `invalid`; an address that has an end-user by now is `exists`
   * (the link is used up, nothing is created twice).
   */
  completeSignUp(
    token: string,
    passwordHash: string,
    context: { requestId: string | null; clientIp: string | null },
  ): Promise<SignUpCompletion>
  /** The job process: sends a sign-up link's e-mail once. */
  deliverSignUp(requestId: string, final: boolean): Promise<'sent' | 'failed' | 'skipped'>
  /** Queued sign-up e-mails whose job was lost, to enqueue again. */
  overdueSignUps(graceMs: number): Promise<string[]>
  /** Master key rotation: sign-up links waiting for their e-mail are sealed again under the primary key. */
  rewrapSealed(keyring: MasterKeyring): Promise<RewrapResult>
  /** The sign-in pages: a user signing in joins the application's list (false: no record, or blocked). */
  recordSignIn(tenantId: string, accountId: string, applicationId: string): Promise<boolean>
  /**
   * Federation: the end-user an external IdP vouches for by e-mail address, created (account
   * without a password, record with source `federation`) when the tenant has none. An existing
   * end-user who has a password or a factor is the IdP's only when `linkByVerifiedEmail` (the
   * registration is trusted to link by address); otherwise `has_credentials`, and nothing changes.
   */
  federatedAccount(input: {
    tenantId: string
    email: string
    displayName: string | null
    idpId: string
    linkByVerifiedEmail: boolean
  }): Promise<FederatedAccount>
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

/** The link of a sign-up on an application's pages, on the mail queue (endusers-jobs.ts). */
export const ENDUSER_SIGNUP_EMAIL = 'enduser-signup-email'
export interface EndUserSignUpEmail {
  requestId: string
}
export const enduserSignUpEmailId = (requestId: string) => `enduser-signup.${requestId}`

/**
 * End-users (docs/identity.md "End-users"): the identity context (the account
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
  /** Sign-up links: sealed until the job process has sent them. */
  masterKeys: MasterKeyring
  mailQueue?: MailQueue
  mailer?: Mailer
  /** The issuer: sign-up links are `{ID_URL}/confirm-sign-up?token=…`. */
  linkBase: () => string
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
   * A new end-user in the caller's transaction: the account of the tenant's realm (no password
   * unless a sign-up link's page chose one), the record, the application's list and the audit record.
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
      passwordHash?: string
    },
    details: Record<string, string> = {},
  ) {
    await accounts.createAccount(
      tenantRealm(actor.tenantId),
      {
        id: user.id,
        email: user.email,
        displayName: user.displayName,
        ...(user.passwordHash ? { passwordHash: user.passwordHash } : {}),
      },
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
    admitSignUp: (clientIp) => deps.links.admitRequest(clientIp),
    async signUp({ tenantId, applicationId, email, clientIp = null }) {
      const address = checkEmail(email)
      const known = await findEndUserByEmail(sql, tenantId, normalizeEmail(address))
      if (known) {
        if (known.status === 'blocked') return
        // Its owner may have forgotten the account: a reset link, bounded per account by identity.
        await deps.links.requestReset({ realm: tenantRealm(tenantId), email: address, applicationId })
        return
      }
      const addressKey = signUpAddressKey(address)
      const id = randomUUID()
      const token = randomBytes(32).toString('base64url')
      const link = `${deps.linkBase()}${SIGN_UP_CONFIRM_PATH}?${new URLSearchParams({ token })}`
      const primary = deps.masterKeys.primary
      const now = deps.clock.now()
      const queued = await sql.begin(async (tx) => {
        // One ask of an address at a time: a burst cannot pass the count together.
        await lockSignUpAddress(tx, tenantId, addressKey)
        const since = new Date(now.getTime() - 3600_000)
        const allowed =
          (await countSignUpRequestsSince(tx, tenantId, addressKey, since)) < SIGNUPS_PER_ADDRESS_PER_HOUR
        if (allowed)
          await insertSignUpRequest(tx, {
            id,
            tenant_id: tenantId,
            application_id: applicationId,
            email: address,
            email_normalized: normalizeEmail(address),
            address_key: addressKey,
            token_hash: hashToken(token),
            link_sealed: seal(primary.key, Buffer.from(link, 'utf8'), signUpLinkAad(id)),
            link_master_key_id: primary.id,
            created_at: now,
            expires_at: new Date(now.getTime() + SIGNUP_LIFETIME_MS),
          })
        // The tenant sees every ask, the refused ones too (a mailbox being flooded); never the address.
        await audit.recordInTransaction(tx, {
          tenantId,
          actor: 'anonymous',
          action: 'endusers.sign_up.request',
          resource: allowed ? `enduser_signup:${id}` : `application:${applicationId}`,
          outcome: allowed ? 'success' : 'denied',
          clientIp,
          details: { applicationId, reason: allowed ? null : 'address_rate_limited' },
        })
        return allowed
      })
      // A failure leaves the row queued: the identity sweep sends it.
      if (queued)
        await deps.mailQueue
          ?.enqueue(ENDUSER_SIGNUP_EMAIL, { requestId: id }, enduserSignUpEmailId(id))
          .catch(() => {})
    },
    async signUpRequest(token) {
      if (!SIGN_UP_TOKEN.test(token)) return undefined
      const row = await findLiveSignUpRequest(sql, hashToken(token), deps.clock.now())
      return row
        ? { tenantId: row.tenant_id, applicationId: row.application_id, email: row.email }
        : undefined
    },
    async completeSignUp(token, passwordHash, context) {
      if (!SIGN_UP_TOKEN.test(token)) return { outcome: 'invalid' }
      try {
        return await sql.begin(async (tx): Promise<SignUpCompletion> => {
          const row = await consumeSignUpRequest(tx, hashToken(token), deps.clock.now())
          if (!row) return { outcome: 'invalid' }
          // Another link of the address was used first (or the tenant added the address since):
          // this one is used up and makes nothing.
          const taken =
            (await findEndUserByEmail(tx, row.tenant_id, row.email_normalized)) ??
            (await accounts.findAccount(tenantRealm(row.tenant_id), row.email, tx))
          if (taken) return { outcome: 'exists' }
          const actor = { tenantId: row.tenant_id, actor: `enduser:${row.id}`, ...context }
          await insertAccountAndRecord(tx, actor, {
            id: row.id,
            email: row.email,
            displayName: null,
            source: 'sign_up',
            applicationId: row.application_id,
            passwordHash,
          })
          await recordSignUpEndUser(tx, row.id, row.id)
          return {
            outcome: 'created',
            endUserId: row.id,
            tenantId: row.tenant_id,
            applicationId: row.application_id,
          }
        })
      } catch (err) {
        // Two links of one address used at the same moment: the other one made the end-user.
        if (isDuplicate(err)) return { outcome: 'exists' }
        throw err
      }
    },
    async deliverSignUp(requestId, final) {
      const row = await getSignUpRequest(sql, requestId)
      if (row?.email_dispatch_status !== 'queued' || !row.link_sealed || !row.link_master_key_id)
        return 'skipped'
      if (row.consumed_at) return 'skipped'
      const masterKey = deps.masterKeys.find(row.link_master_key_id)
      if (!masterKey) return 'skipped'
      const link = open(masterKey.key, row.link_sealed, signUpLinkAad(row.id)).toString('utf8')
      try {
        if (!deps.mailer) throw new MailError('smtp_not_configured')
        // The set-up e-mail's words: the person asked for an account and chooses its password.
        await deps.mailer.send({ to: row.email, ...linkEmail('setup', link, row.expires_at) })
      } catch (err) {
        const reason = err instanceof MailError ? err.reason : 'smtp_failed'
        if (!final && reason !== 'smtp_not_configured') throw err
        await sql.begin(async (tx) => {
          if (
            !(await recordSignUpDispatch(tx, {
              id: row.id,
              status: 'failed',
              error: reason,
              now: deps.clock.now(),
            }))
          )
            return
          await audit.recordInTransaction(tx, {
            tenantId: row.tenant_id,
            actor: 'system:mail',
            action: 'endusers.sign_up.email_failed',
            resource: `enduser_signup:${row.id}`,
            outcome: 'failure',
            details: { applicationId: row.application_id, reason },
          })
        })
        return 'failed'
      }
      await recordSignUpDispatch(sql, { id: row.id, status: 'sent', error: null, now: deps.clock.now() })
      return 'sent'
    },
    async overdueSignUps(graceMs) {
      const now = deps.clock.now()
      const rows = await overdueSignUpRequests(sql, new Date(now.getTime() - graceMs), now)
      return rows.map((row) => row.id)
    },
    rewrapSealed: (keyring) =>
      rewrapEach({
        keyring,
        batch: (primaryId, after, limit) => signUpLinksToRewrap(sql, { primaryId, after, limit }),
        aad: (item) => signUpLinkAad(item.id),
        replace: (item, resealed, primary) =>
          replaceSealedSignUpLink(sql, {
            id: item.id,
            from: item.sealed,
            to: resealed,
            masterKeyId: primary.id,
          }),
      }),
    async federatedAccount({ tenantId, email, displayName, idpId, linkByVerifiedEmail }) {
      const address = checkEmail(email)
      const find = () => findEndUserByEmail(sql, tenantId, normalizeEmail(address))
      /**
       * An address alone proves nothing to an account that has its own way of signing in: whoever
       * controls the IdP chooses what it asserts (issue 30). Such an account is linked only when an
       * owner or admin marked the IdP as trusted to link by address.
       */
      const existing = async (row: EndUserRow): Promise<FederatedAccount> => {
        if (row.status === 'blocked') return { outcome: 'blocked' }
        const account = await accounts.get(row.id)
        const credentialed =
          account !== undefined &&
          (account.hasPassword || account.totpEnrolled || account.phoneNumber !== null)
        if (!credentialed) return { outcome: 'existing', accountId: row.id }
        return linkByVerifiedEmail
          ? { outcome: 'existing_by_trust', accountId: row.id }
          : { outcome: 'has_credentials', accountId: row.id }
      }
      const known = await find()
      if (known) return existing(known)
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
        return { outcome: 'created', accountId: id }
      } catch (err) {
        // Created meanwhile by another sign-in (or the account of the realm exists without a record).
        if (!isDuplicate(err)) throw err
        const raced = await find()
        return raced ? existing(raced) : { outcome: 'blocked' }
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
