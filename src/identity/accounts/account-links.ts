import { createHash, randomBytes, randomUUID } from 'node:crypto'
import type { AuditLog } from '../../audit/audit-log.ts'
import type { Queryable, Sql } from '../../data/database.ts'
import type { ClientRateLimit, RequestAdmission } from '../../http/client-rate-limit.ts'
import { open, seal } from '../../keyring/aead.ts'
import type { MasterKeyring } from '../../keyring/master-key.ts'
import { type RewrapResult, rewrapEach } from '../../keyring/rewrap.ts'
import { MailError, type Mailer } from '../../mail/mailer.ts'
import type { Clock } from '../../platform/clock.ts'
import { isUuid } from '../../platform/ids.ts'
import type { MailQueue } from '../../platform/module.ts'
import { esc } from '../../web/layout.ts'
import {
  type AccountLinkRow,
  consumeLink,
  countLinksSince,
  findLiveLink,
  getLink,
  insertLink,
  linksToRewrap,
  lockLinksOf,
  overdueLinks,
  recordLinkDispatch,
  replaceSealedLink,
} from './account-link-store.ts'
import { normalizeEmail, TEAM_REALM, tenantOfRealm } from './account-service.ts'
import { findAccountByEmail, getAccount, setPasswordHash } from './account-store.ts'

export type LinkKind = AccountLinkRow['kind']

/** Spec 8: a reset link works once, for one hour; a set-up link for 7 days (as an invitation). */
const LINK_LIFETIME_MS: Record<LinkKind, number> = {
  reset: 60 * 60_000,
  setup: 7 * 24 * 60 * 60_000,
}

/**
 * Self-service reset requests (`POST /forgot-password`), end-users' and team members' alike: at
 * most five reset links per account an hour, those an administrator sends included. Further asks
 * make nothing and the page reads the same, so the public form cannot flood a mailbox; the owner
 * still has a live link (each new one replaces the last).
 */
export const RESET_REQUESTS = { perWindow: 5, windowMs: 60 * 60_000 } as const

/** The pages that take each kind of link (docs/identity.md). */
export const LINK_PATHS: Record<LinkKind, string> = {
  reset: '/reset-password',
  setup: '/set-up-account',
}

const TOKEN = /^[A-Za-z0-9_-]{43}$/
const hashToken = (token: string) => createHash('sha256').update(token, 'utf8').digest()
const linkAad = (id: string) => `kms account link v1 id:${id}`

/** What a link's page sends back: the account it is for, the token, and (informational) the application. */
interface LinkClaim {
  userId: string
  token: string
  kind: LinkKind
}

export interface AccountLinks {
  /**
   * Stores a new link in the caller's transaction (older live links of that kind for the account
   * stop working); the e-mail is sent by the job process once `enqueue` is called after commit.
   */
  issue(
    tx: Queryable,
    input: { accountId: string; kind: LinkKind; applicationId: string | null },
  ): Promise<{ linkId: string; expiresAt: Date }>
  /** After commit. A lost job is found by the identity sweep (`overdue`). */
  enqueue(linkId: string): Promise<void>
  /** Whether the token is a live link of that kind for that user (never says which part is wrong). */
  isLive(claim: LinkClaim): Promise<boolean>
  /** Uses the link once, inside the caller's transaction; undefined when it is not live. */
  consume(
    tx: Queryable,
    claim: LinkClaim,
  ): Promise<{ accountId: string; applicationId: string | null } | undefined>
  /**
   * Sets the password chosen on a link's page and uses the link, in one transaction (the hash is
   * made before it). undefined when the link is not live: nothing changes.
   */
  completeWithPassword(
    claim: LinkClaim,
    passwordHash: string,
  ): Promise<{ accountId: string; applicationId: string | null } | undefined>
  /**
   * Self-service reset (POST /forgot-password): a reset link for the address in this realm (a
   * tenant's end-users, or the team's members) when an account with sign-in enabled has it and
   * has not reached `RESET_REQUESTS`; nothing otherwise. The caller answers the same either way.
   */
  requestReset(input: { realm: string; email: string; applicationId: string | null }): Promise<void>
  /**
   * The bound per client address of the pages that e-mail someone at an anonymous person's
   * request (forgot password, an application's sign-up): KMS_SIGNUP_RATE_PER_HOUR, one count for
   * them all, in Redis across processes. Asked before the work, so a refusal is the page's answer
   * (429), the same for every address.
   */
  admitRequest(clientIp: string): Promise<RequestAdmission>
  /** The job process: sends the link's e-mail once. */
  deliver(linkId: string, final: boolean): Promise<'sent' | 'failed' | 'skipped'>
  overdue(graceMs: number): Promise<string[]>
  /** Master key rotation: links waiting for their e-mail are sealed again under the primary key. */
  rewrapSealed(keyring: MasterKeyring): Promise<RewrapResult>
}

/** A link's e-mail on the mail queue (identity-jobs.ts delivers it): one job per link. */
export const ACCOUNT_LINK_EMAIL = 'account-link-email'
export interface AccountLinkEmail {
  linkId: string
}
/** The job id of a link's e-mail, the same when the identity sweep queues it again. */
export const accountLinkEmailId = (linkId: string) => `link.${linkId}`

/**
 * One-time links of accounts (docs/identity.md "One-time links and the self-service pages"): a
 * random token stored only as its SHA-256, single use, with a lifetime, consumed by one atomic
 * UPDATE. The link travels to the job process sealed under the master keyring and is dropped once
 * the e-mail is out.
 */
export function createAccountLinks(deps: {
  sql: Sql
  masterKeys: MasterKeyring
  clock: Clock
  audit: AuditLog
  mailQueue?: MailQueue
  mailer?: Mailer
  /** The issuer: links are `{ID_URL}{path}?userId=…&applicationId=…&token=…`. */
  linkBase: () => string
  /** `admitRequest`'s counter. */
  requestLimit: ClientRateLimit
}): AccountLinks {
  const { sql, clock } = deps

  const wellFormed = (claim: LinkClaim) => isUuid(claim.userId) && TOKEN.test(claim.token)

  const links: AccountLinks = {
    async issue(tx, input) {
      const id = randomUUID()
      const token = randomBytes(32).toString('base64url')
      const query = new URLSearchParams({ userId: input.accountId })
      if (input.applicationId) query.set('applicationId', input.applicationId)
      query.set('token', token)
      const link = `${deps.linkBase()}${LINK_PATHS[input.kind]}?${query}`
      const primary = deps.masterKeys.primary
      const now = clock.now()
      const expiresAt = new Date(now.getTime() + LINK_LIFETIME_MS[input.kind])
      await insertLink(tx, {
        id,
        account_id: input.accountId,
        kind: input.kind,
        application_id: input.applicationId,
        token_hash: hashToken(token),
        link_sealed: seal(primary.key, Buffer.from(link, 'utf8'), linkAad(id)),
        link_master_key_id: primary.id,
        created_at: now,
        expires_at: expiresAt,
      })
      return { linkId: id, expiresAt }
    },
    async enqueue(linkId) {
      // A failure leaves the row queued: the identity sweep sends it.
      await deps.mailQueue
        ?.enqueue(ACCOUNT_LINK_EMAIL, { linkId }, accountLinkEmailId(linkId))
        .catch(() => {})
    },
    async isLive(claim) {
      if (!wellFormed(claim)) return false
      const row = await findLiveLink(sql, {
        accountId: claim.userId,
        kind: claim.kind,
        tokenHash: hashToken(claim.token),
        now: clock.now(),
      })
      return row !== undefined
    },
    async consume(tx, claim) {
      if (!wellFormed(claim)) return undefined
      const row = await consumeLink(tx, {
        accountId: claim.userId,
        kind: claim.kind,
        tokenHash: hashToken(claim.token),
        now: clock.now(),
      })
      return row ? { accountId: row.account_id, applicationId: row.application_id } : undefined
    },
    async completeWithPassword(claim, passwordHash) {
      if (!wellFormed(claim)) return undefined
      return sql.begin(async (tx) => {
        const used = await consumeLink(tx, {
          accountId: claim.userId,
          kind: claim.kind,
          tokenHash: hashToken(claim.token),
          now: clock.now(),
        })
        if (!used) return undefined
        await setPasswordHash(tx, used.account_id, passwordHash)
        const account = await getAccount(tx, used.account_id)
        const tenantId = account ? tenantOfRealm(account.realm) : undefined
        if (tenantId)
          await deps.audit.recordInTransaction(tx, {
            tenantId,
            actor: `enduser:${used.account_id}`,
            action: claim.kind === 'reset' ? 'endusers.password_reset.complete' : 'endusers.setup.complete',
            resource: `enduser:${used.account_id}`,
            outcome: 'success',
            details: used.application_id ? { applicationId: used.application_id } : {},
          })
        return { accountId: used.account_id, applicationId: used.application_id }
      })
    },
    async requestReset(input) {
      const normalized = normalizeEmail(input.email)
      if (normalized.length > 254) return
      const tenantId = tenantOfRealm(input.realm)
      // Partners' people have no self-service reset here.
      if (!tenantId && input.realm !== TEAM_REALM) return
      const account = await findAccountByEmail(sql, input.realm, normalized)
      if (!account || account.disabled_at) return
      const since = new Date(clock.now().getTime() - RESET_REQUESTS.windowMs)
      const linkId = await sql.begin(async (tx) => {
        // Counted under the account's lock: a burst of asks cannot pass the cap together.
        await lockLinksOf(tx, account.id)
        if ((await countLinksSince(tx, account.id, 'reset', since)) >= RESET_REQUESTS.perWindow) {
          // The tenant sees the refused asks too (a mailbox being flooded).
          if (tenantId)
            await deps.audit.recordInTransaction(tx, {
              tenantId,
              actor: `enduser:${account.id}`,
              action: 'endusers.password_reset.request',
              resource: `enduser:${account.id}`,
              outcome: 'denied',
              details: { applicationId: input.applicationId, reason: 'rate_limited' },
            })
          return undefined
        }
        const issued = await links.issue(tx, {
          accountId: account.id,
          kind: 'reset',
          applicationId: input.applicationId,
        })
        // A member's account belongs to no one tenant: only end-users' requests are a tenant's record.
        if (!tenantId) return issued.linkId
        await deps.audit.recordInTransaction(tx, {
          tenantId,
          actor: `enduser:${account.id}`,
          action: 'endusers.password_reset.request',
          resource: `enduser:${account.id}`,
          outcome: 'success',
          details: input.applicationId ? { applicationId: input.applicationId } : {},
        })
        return issued.linkId
      })
      if (linkId) await links.enqueue(linkId)
    },
    admitRequest: (clientIp) => deps.requestLimit.admit(clientIp),
    async deliver(linkId, final) {
      const row = await getLink(sql, linkId)
      if (row?.email_dispatch_status !== 'queued' || !row.link_sealed || !row.link_master_key_id)
        return 'skipped'
      if (row.revoked_at || row.consumed_at) return 'skipped'
      const account = await getAccount(sql, row.account_id)
      const masterKey = deps.masterKeys.find(row.link_master_key_id)
      if (!account || !masterKey) return 'skipped'
      const link = open(masterKey.key, row.link_sealed, linkAad(row.id)).toString('utf8')
      try {
        if (!deps.mailer) throw new MailError('smtp_not_configured')
        await deps.mailer.send({ to: account.email, ...linkEmail(row.kind, link, row.expires_at) })
      } catch (err) {
        const reason = err instanceof MailError ? err.reason : 'smtp_failed'
        if (!final && reason !== 'smtp_not_configured') throw err
        await sql.begin(async (tx) => {
          if (!(await recordLinkDispatch(tx, { id: row.id, status: 'failed', error: reason }))) return
          const tenantId = tenantOfRealm(account.realm)
          if (!tenantId) return
          await deps.audit.recordInTransaction(tx, {
            tenantId,
            actor: 'system:mail',
            action: 'endusers.link.email_failed',
            resource: `enduser:${account.id}`,
            outcome: 'failure',
            details: { kind: row.kind, reason },
          })
        })
        return 'failed'
      }
      await recordLinkDispatch(sql, { id: row.id, status: 'sent', error: null })
      return 'sent'
    },
    async overdue(graceMs) {
      const rows = await overdueLinks(sql, new Date(clock.now().getTime() - graceMs))
      return rows.map((row) => row.id)
    },
    rewrapSealed: (keyring) =>
      rewrapEach({
        keyring,
        batch: (primaryId, after, limit) => linksToRewrap(sql, { primaryId, after, limit }),
        aad: (item) => linkAad(item.id),
        replace: (item, resealed, primary) =>
          replaceSealedLink(sql, { id: item.id, from: item.sealed, to: resealed, masterKeyId: primary.id }),
      }),
  }
  return links
}

/** The e-mail of a link: plain text and simple HTML, the same words. */
export function linkEmail(
  kind: LinkKind,
  link: string,
  expiresAt: Date,
): { subject: string; text: string; html: string } {
  const until = expiresAt.toISOString().slice(0, 16).replace('T', ' ')
  const subject = kind === 'reset' ? 'Reset your password' : 'Set up your account'
  const action = kind === 'reset' ? 'Choose a new password' : 'Choose a password for your new account'
  const text = `${action}: ${link}

The link works once and until ${until} UTC. If you did not ask for this e-mail, ignore it.
`
  const html = `<p><a href="${esc(link)}">${esc(action)}</a></p>
<p>The link works once and until ${esc(until)} UTC. If you did not ask for this e-mail, ignore it.</p>
`
  return { subject, text, html }
}
