import { createHash, randomBytes, randomUUID } from 'node:crypto'
import type { AuditLog } from '../audit/audit-log.ts'
import type { Sql, Tx } from '../data/database.ts'
import {
  type AccountService,
  checkEmail,
  normalizeEmail,
  PARTNER_REALM,
  passwordProblems,
  TEAM_PASSWORD_POLICY,
  TEAM_REALM,
} from '../identity/accounts/account-service.ts'
import { open, seal } from '../keyring/aead.ts'
import type { MasterKeyring } from '../keyring/master-key.ts'
import { type RewrapResult, rewrapEach } from '../keyring/rewrap.ts'
import { MailError, type Mailer } from '../mail/mailer.ts'
import type { Clock } from '../platform/clock.ts'
import { AppError, invalidField } from '../platform/errors.ts'
import type { MailQueue } from '../platform/module.ts'
import type { TenantView } from '../tenants/tenant-service.ts'
import { signupEmail } from './signup-email.ts'
import {
  consumeSignup,
  countRecentSignups,
  findLiveSignup,
  getSignup,
  insertSignup,
  overdueSignups,
  recordOutcome,
  recordSignupDispatch,
  replaceSealedSignupLink,
  type SignupRow,
  signupLinksToRewrap,
} from './signup-store.ts'

export type SignupKind = SignupRow['kind']

/** A confirmation link works once, for 24 hours. */
export const SIGNUP_LIFETIME_MS = 24 * 60 * 60_000
/** An address may ask this many times an hour (each asking sends an e-mail to it). */
export const SIGNUPS_PER_ADDRESS_PER_HOUR = 5

/** The pages that take each kind of link. */
const SIGNUP_CONFIRM_PATHS: Record<SignupKind, string> = {
  tenant: '/signup/confirm',
  partner: '/partners/signup/confirm',
}

const TOKEN = /^[A-Za-z0-9_-]{43}$/
const MAX_NAME_LENGTH = 200
const hashToken = (token: string) => createHash('sha256').update(token, 'utf8').digest()
const linkAad = (id: string) => `kms signup link v1 id:${id}`

const signupLinkInvalid = () =>
  new AppError(400, 'signup_link_invalid', 'The confirmation link is not valid: it expired or was used')
/** The per-client-IP limit of sign-up requests (KMS_SIGNUP_RATE_PER_HOUR), API and pages together. */
export const signupIpRateLimited = (perHour: number) =>
  new AppError(
    429,
    'signup_rate_limited',
    `At most ${perHour} sign-up requests an hour from one client address: try again later`,
  )
const signupRateLimited = () =>
  new AppError(
    429,
    'signup_rate_limited',
    `At most ${SIGNUPS_PER_ADDRESS_PER_HOUR} sign-ups an hour for one address`,
    { retryAfterSeconds: 3600 },
  )

/** What a sign-up request answers: the same whether or not the address has an account. */
interface SignupRequested {
  email: string
  expiresAt: string
}

/** What a confirmation page shows: only what the link's holder asked for. */
export interface SignupPreview {
  kind: SignupKind
  email: string
  organizationName: string
  referralCode: string | null
  /** The address has an account of the realm already: the page asks for its password, not a new one. */
  accountExists: boolean
}

type SignupConfirmed =
  | { kind: 'tenant'; tenantId: string; organizationName: string; accountId: string }
  | { kind: 'partner'; partnerId: string; organizationName: string; accountId: string }

/** What sign-up needs of the modules that own tenants, memberships and partners. */
export interface SignupDirectories {
  tenants: {
    createForOwner(input: { name: string; actor: string }, tx: Tx): Promise<TenantView>
    created(id: string): Promise<void>
  }
  team: {
    addMember(
      actor: { tenantId: string; actor: string; requestId: string | null; clientIp: string | null },
      input: { accountId: string; role: 'tenant:owner' },
      tx: Tx,
    ): Promise<unknown>
  }
  partners: {
    findCode(code: string): Promise<string | undefined>
    /** False also for the partner's own sign-up (its address or domain): no referral, nothing said. */
    attribute(input: { tenantId: string; code: string; signerEmail: string }, tx: Tx): Promise<boolean>
    createPending(
      input: { name: string; email: string; accountId: string; clientIp: string | null },
      tx: Tx,
    ): Promise<{ id: string }>
  }
}

export interface SignupService {
  /**
   * POST /api/v1/signup and the /signup page: stores the request and queues the confirmation
   * e-mail; nothing else is created before the address is proven. An unknown referral code is a
   * 400 naming `referralCode` (the page drops it and says so).
   */
  request(
    kind: SignupKind,
    input: { organizationName: string; email: string; referralCode?: string | null },
  ): Promise<SignupRequested>
  /** The sign-up page's `?ref=`: the code as stored when it is an active partner's. */
  referralCode(code: string): Promise<string | undefined>
  /** The confirmation page: undefined when the link is not live. */
  preview(token: string): Promise<SignupPreview | undefined>
  /**
   * The confirmation: the address is proven by the link. Makes (or, with its password, reuses)
   * the account and creates the tenant with that account as owner (attributed to the referring
   * partner), or the pending partner, all in one transaction with the link's use. Errors: 400
   * `signup_link_invalid`, 400 naming `password`, 401 `invalid_credentials`, 429 `locked`, 409
   * `tenant_name_taken` (the link stays usable, with another name).
   */
  confirm(
    token: string,
    input: { password: string; organizationName?: string },
    context: { requestId: string | null; clientIp: string | null },
  ): Promise<SignupConfirmed>
  /** The job process: sends the confirmation e-mail once. */
  deliver(signupId: string, final: boolean): Promise<'sent' | 'failed' | 'skipped'>
  /** Queued e-mails whose job was lost, to enqueue again. */
  overdue(graceMs: number): Promise<string[]>
  /** Master key rotation: links waiting for their e-mail are sealed again under the primary key. */
  rewrapSealed(keyring: MasterKeyring): Promise<RewrapResult>
}

/** Names are labels for people, as tenants' are: printable, no surrounding spaces. */
function checkOrganizationName(name: string, field = 'body/organizationName'): string {
  if (name.length === 0 || name.length > MAX_NAME_LENGTH)
    throw invalidField(field, `must be 1 to ${MAX_NAME_LENGTH} characters`)
  if (name.trim() !== name) throw invalidField(field, 'must not start or end with white space')
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what is refused
  if (/[\u0000-\u001f\u007f]/.test(name)) throw invalidField(field, 'must not contain control characters')
  return name
}

/** A sign-up's confirmation link on the mail queue (signup-jobs.ts delivers it). */
export const SIGNUP_EMAIL = 'signup-email'
export interface SignupEmail {
  signupId: string
}
export const signupEmailId = (signupId: string) => `signup.${signupId}`

/**
 * Self-service sign-up (docs/signup.md): tenants, and partners who then wait for an operator.
 * The e-mail link proves the address; it is a random token kept only as its SHA-256, single use,
 * 24 hours, consumed in the transaction that creates what was asked for. The link travels to
 * the job process sealed under the master keyring and is dropped once the e-mail is out.
 */
export function createSignupService(deps: {
  sql: Sql
  clock: Clock
  masterKeys: MasterKeyring
  audit: AuditLog
  accounts: AccountService
  directories: SignupDirectories
  mailQueue?: MailQueue
  mailer?: Mailer
  /** The issuer: links are `{ID_URL}/signup/confirm?token=…`. */
  linkBase: () => string
}): SignupService {
  const { sql, clock, directories } = deps
  const realmOf = (kind: SignupKind) => (kind === 'tenant' ? TEAM_REALM : PARTNER_REALM)

  return {
    async request(kind, input) {
      const organizationName = checkOrganizationName(input.organizationName)
      const email = checkEmail(input.email, 'body/email')
      let referralCode: string | null = null
      if (kind === 'tenant' && input.referralCode) {
        referralCode = (await directories.partners.findCode(input.referralCode)) ?? null
        if (!referralCode)
          throw invalidField('body/referralCode', 'is not a referral code of an active partner')
      }
      const now = clock.now()
      const normalized = normalizeEmail(email)
      if (
        (await countRecentSignups(sql, normalized, new Date(now.getTime() - 3600_000))) >=
        SIGNUPS_PER_ADDRESS_PER_HOUR
      )
        throw signupRateLimited()
      const id = randomUUID()
      const token = randomBytes(32).toString('base64url')
      const link = `${deps.linkBase()}${SIGNUP_CONFIRM_PATHS[kind]}?${new URLSearchParams({ token })}`
      const primary = deps.masterKeys.primary
      const row = await insertSignup(sql, {
        id,
        kind,
        email,
        email_normalized: normalized,
        organization_name: organizationName,
        referral_code: referralCode,
        token_hash: hashToken(token),
        link_sealed: seal(primary.key, Buffer.from(link, 'utf8'), linkAad(id)),
        link_master_key_id: primary.id,
        created_at: now,
        expires_at: new Date(now.getTime() + SIGNUP_LIFETIME_MS),
      })
      // A failure leaves the row queued: the identity sweep sends it.
      await deps.mailQueue?.enqueue(SIGNUP_EMAIL, { signupId: id }, signupEmailId(id)).catch(() => {})
      return { email: row.email, expiresAt: row.expires_at.toISOString() }
    },

    referralCode: (code) => directories.partners.findCode(code),

    async preview(token) {
      if (!TOKEN.test(token)) return undefined
      const row = await findLiveSignup(sql, hashToken(token), clock.now())
      if (!row) return undefined
      return {
        kind: row.kind,
        email: row.email,
        organizationName: row.organization_name,
        referralCode: row.referral_code,
        accountExists: (await deps.accounts.findAccount(realmOf(row.kind), row.email)) !== undefined,
      }
    },

    async confirm(token, input, context) {
      if (!TOKEN.test(token)) throw signupLinkInvalid()
      const live = await findLiveSignup(sql, hashToken(token), clock.now())
      if (!live) throw signupLinkInvalid()
      const realm = realmOf(live.kind)
      const organizationName =
        input.organizationName === undefined
          ? live.organization_name
          : checkOrganizationName(input.organizationName)
      // The password is checked (existing account) or hashed (new one) before the transaction:
      // argon2id is slow, and nothing is locked meanwhile.
      const existing = await deps.accounts.findAccount(realm, live.email)
      let passwordHash: string | undefined
      if (existing) {
        const checked = await deps.accounts.checkPassword(existing.id, input.password, context.clientIp ?? '')
        if (checked.outcome === 'locked')
          throw new AppError(429, 'locked', 'Too many attempts: wait before trying again', {
            retryAfterSeconds: checked.retryAfterSeconds,
          })
        if (checked.outcome !== 'ok')
          throw new AppError(401, 'invalid_credentials', 'The password is not this account’s')
      } else {
        const problems = passwordProblems(input.password, TEAM_PASSWORD_POLICY)
        if (problems.length > 0) throw invalidField('password', `must have ${problems.join(', ')}`)
        const prepared = await deps.accounts.preparePassword(input.password, TEAM_PASSWORD_POLICY)
        passwordHash = prepared.hash
      }

      const confirmed = await sql.begin(async (tx): Promise<SignupConfirmed> => {
        const row = await consumeSignup(tx, hashToken(token), clock.now())
        if (!row) throw signupLinkInvalid()
        const account =
          existing ??
          (await deps.accounts.createAccount(
            realm,
            { email: row.email, ...(passwordHash ? { passwordHash } : {}) },
            tx,
          ))
        if (row.kind === 'partner') {
          const partner = await directories.partners.createPending(
            { name: organizationName, email: row.email, accountId: account.id, clientIp: context.clientIp },
            tx,
          )
          await recordOutcome(tx, row.id, { tenantId: null, partnerId: partner.id })
          return { kind: 'partner', partnerId: partner.id, organizationName, accountId: account.id }
        }
        const actor = `member:${account.id}`
        const tenant = await directories.tenants.createForOwner({ name: organizationName, actor }, tx)
        const auditActor = { tenantId: tenant.id, actor, ...context }
        await directories.team.addMember(auditActor, { accountId: account.id, role: 'tenant:owner' }, tx)
        const referred = row.referral_code
          ? await directories.partners.attribute(
              { tenantId: tenant.id, code: row.referral_code, signerEmail: row.email },
              tx,
            )
          : false
        await deps.audit.recordInTransaction(tx, {
          ...auditActor,
          action: 'tenants.signup',
          resource: `tenant:${tenant.id}`,
          outcome: 'success',
          details: { referred, existingAccount: existing !== undefined },
        })
        await recordOutcome(tx, row.id, { tenantId: tenant.id, partnerId: null })
        return { kind: 'tenant', tenantId: tenant.id, organizationName, accountId: account.id }
      })
      if (confirmed.kind === 'tenant') await directories.tenants.created(confirmed.tenantId)
      return confirmed
    },

    async deliver(signupId, final) {
      const row = await getSignup(sql, signupId)
      if (row?.email_dispatch_status !== 'queued' || !row.link_sealed || !row.link_master_key_id)
        return 'skipped'
      if (row.consumed_at) return 'skipped'
      const masterKey = deps.masterKeys.find(row.link_master_key_id)
      if (!masterKey) return 'skipped'
      const link = open(masterKey.key, row.link_sealed, linkAad(row.id)).toString('utf8')
      try {
        if (!deps.mailer) throw new MailError('smtp_not_configured')
        await deps.mailer.send({
          to: row.email,
          ...signupEmail({
            kind: row.kind,
            organizationName: row.organization_name,
            link,
            expiresAt: row.expires_at,
          }),
        })
      } catch (err) {
        const reason = err instanceof MailError ? err.reason : 'smtp_failed'
        if (!final && reason !== 'smtp_not_configured') throw err
        await recordSignupDispatch(sql, { id: row.id, status: 'failed', error: reason, now: clock.now() })
        return 'failed'
      }
      await recordSignupDispatch(sql, { id: row.id, status: 'sent', error: null, now: clock.now() })
      return 'sent'
    },

    async overdue(graceMs) {
      const now = clock.now()
      const rows = await overdueSignups(sql, new Date(now.getTime() - graceMs), now)
      return rows.map((row) => row.id)
    },

    rewrapSealed: (keyring) =>
      rewrapEach({
        keyring,
        batch: (primaryId, after, limit) => signupLinksToRewrap(sql, { primaryId, after, limit }),
        aad: (item) => linkAad(item.id),
        replace: (item, resealed, primary) =>
          replaceSealedSignupLink(sql, {
            id: item.id,
            from: item.sealed,
            to: resealed,
            masterKeyId: primary.id,
          }),
      }),
  }
}
