import { randomBytes, randomInt, randomUUID } from 'node:crypto'
import type { Queryable, Sql } from '../data/database.ts'
import { checkEmail } from '../identity/accounts/account-service.ts'
import { open, seal } from '../keyring/aead.ts'
import type { MasterKeyring } from '../keyring/master-key.ts'
import { type RewrapResult, rewrapEach } from '../keyring/rewrap.ts'
import { MailError, type Mailer } from '../mail/mailer.ts'
import type { OutboundClient } from '../outbound/outbound-client.ts'
import type { Clock } from '../platform/clock.ts'
import { AppError, invalidField, isUniqueViolation, notFound } from '../platform/errors.ts'
import { isUuid } from '../platform/ids.ts'
import type { MailQueue } from '../platform/module.ts'
import { checkWebhookUrl } from '../rotation/rotation-service.ts'
import { esc } from '../web/layout.ts'
import type { PartnerSecrets, PartnerWebhookEvent } from '../webhooks/webhook-service.ts'
import { partnerKeys } from './partner-key-format.ts'
import {
  commissionsOf,
  convertedReferrals,
  convertReferral,
  countEndpoints,
  countLivePartnerKeys,
  decidePartner,
  deleteEndpoint,
  endpointsOf,
  findCode,
  findPartnerKey,
  getPartner,
  insertCode,
  insertCommission,
  insertEndpoint,
  insertPartner,
  insertPartnerAudit,
  insertPartnerKey,
  insertReferral,
  listPartnerAudit,
  listPartnerKeys,
  listPartners,
  listReferrals,
  lockPartner,
  type PartnerKeyRow,
  type PartnerRow,
  partnerOfAccount,
  recordDecisionEmail,
  recordPayout,
  replaceSealedSecret,
  revokePartnerKey,
  sealedSecretOf,
  secretsToRewrap,
  storeSecretIfNone,
} from './partner-store.ts'
import { isSelfReferral } from './self-referral.ts'

/**
 * Who calls the partner API: a partner through one of its API keys, or a person of the partner
 * signed in to the portal (docs/partners.md "Partner accounts"). The key (or the account) is the
 * rate limit's unit and the audit trail's actor.
 */
export interface PartnerCaller {
  partnerId: string
  /** The API key used; null for a portal session. */
  keyId: string | null
  /** The partner-realm account signed in; null for an API key. */
  accountId: string | null
  requestId?: string | null
  clientIp?: string | null
}

/** `partnerkey:<id>` or `partneruser:<accountId>`: the actor of the partner's audit trail. */
const partnerActorOf = (caller: PartnerCaller): string =>
  caller.keyId ? `partnerkey:${caller.keyId}` : `partneruser:${caller.accountId}`

interface PartnerKeyView {
  id: string
  name: string
  /** The first characters of the key, to recognise it (`kmsp_` and its lookup id). */
  prefix: string
  createdAt: string
  createdBy: string
  revokedAt: string | null
}

interface PartnerAuditView {
  id: string
  occurredAt: string
  actor: string
  action: string
  resource: string
  details: Record<string, unknown>
}

interface PartnerView {
  id: string
  name: string
  email: string
  status: PartnerRow['status']
  createdAt: string
  decidedAt: string | null
  /** The decision e-mail to a partner who signed up: queued, sent or failed (null: none). */
  decisionEmailStatus: PartnerRow['decision_email_status']
}

const toPartnerView = (row: PartnerRow): PartnerView => ({
  id: row.id,
  name: row.name,
  email: row.email,
  status: row.status,
  createdAt: row.created_at.toISOString(),
  decidedAt: row.decided_at?.toISOString() ?? null,
  decisionEmailStatus: row.decision_email_status,
})

/** A partner may hold this many live API keys (revoke one to make room). */
export const MAX_PARTNER_KEYS = 20
/**
 * A partner may register this many webhook endpoints (remove one to make room): each event is
 * one delivery per endpoint, so the count bounds what one event costs the outbox.
 */
export const MAX_PARTNER_ENDPOINTS = 10

interface ReferralView {
  id: string
  tenantId: string
  status: 'active' | 'converted' | 'churned'
  createdAt: string
}

interface CommissionView {
  referralId: string
  /** Major units, two decimals (summed exactly in minor units). */
  amount: number
  currency: string
  status: 'calculated' | 'paid'
  period: string
}

const PERIOD = /^[0-9]{4}-(0[1-9]|1[0-2])$/
const CODE_ALPHABET = 'ABCDEFGHJKLMNPQRSTUVWXYZ23456789'
const CODE_LENGTH = 10

export interface PartnerService {
  /** The operator's CLI: an active partner (no portal account). */
  createPartner(input: { name: string; email: string }, by: string): Promise<PartnerView>
  /**
   * Partner sign-up (src/signup), in the caller's transaction: a pending partner whose portal
   * account is `accountId`, waiting for an operator's approval.
   */
  createPending(
    input: { name: string; email: string; accountId: string; clientIp: string | null },
    tx: Queryable,
  ): Promise<PartnerView>
  /** The operator's CLI. */
  list(status?: PartnerRow['status']): Promise<PartnerView[]>
  /**
   * The operator approves (active) or rejects a pending partner; 409 `partner_not_pending`
   * otherwise. A partner who signed up is told by e-mail (the job process sends it).
   */
  decide(partnerId: string, decision: 'approve' | 'reject', by: string): Promise<PartnerView>
  /** The job process: the decision e-mail, once. */
  deliverDecision(partnerId: string, final: boolean): Promise<'sent' | 'failed' | 'skipped'>
  /** The partner a portal account belongs to, whatever its status (the sign-in page says why it may not enter). */
  partnerOfAccount(accountId: string): Promise<PartnerView | undefined>
  /** A portal session's caller: only for an active partner. */
  sessionCaller(accountId: string): Promise<PartnerCaller | undefined>
  profile(caller: PartnerCaller): Promise<PartnerView>
  /** The operator's CLI: the key is shown once; only its hash is kept. */
  createKey(partnerId: string, name: string, by: string): Promise<{ id: string; key: string }>
  /** The portal (a signed-in person): a new key, shown once. 409 `partner_key_limit` past MAX_PARTNER_KEYS. */
  issueKey(caller: PartnerCaller, name: string): Promise<PartnerKeyView & { key: string }>
  listKeys(caller: PartnerCaller): Promise<{ data: PartnerKeyView[] }>
  revokeKey(caller: PartnerCaller, id: string): Promise<PartnerKeyView>
  /** The partner's own audit trail, newest first. */
  auditTrail(
    caller: PartnerCaller,
    page: { limit: number; offset: number },
  ): Promise<{ data: PartnerAuditView[]; total: number }>
  /** `Authorization: Bearer kmsp_…` on /api/v1/partners/*: undefined for anything else. */
  authenticate(presented: string): Promise<PartnerCaller | undefined>
  /** A sign-up's `?ref=`: the code as stored, if it exists. */
  findCode(code: string): Promise<string | undefined>
  createCode(caller: PartnerCaller, label: string): Promise<{ code: string; url: string; createdAt: string }>
  referrals(
    caller: PartnerCaller,
    page: { limit: number; offset: number },
  ): Promise<{ data: ReferralView[]; total: number }>
  /** 400 naming `period` when it is not YYYY-MM. */
  commissions(caller: PartnerCaller, period: string): Promise<{ data: CommissionView[]; totalAmount: number }>
  /**
   * Sign-up with `?ref=CODE`: the new tenant is the code's partner's referral (and
   * `referral.created` is queued), in the caller's transaction when given; false for an unknown
   * code, and for the partner's own sign-up (`signerEmail` is the partner's address or at its
   * domain, self-referral.ts), which the partner is not told of.
   */
  attribute(input: { tenantId: string; code: string; signerEmail: string }, tx?: Queryable): Promise<boolean>
  /**
   * The partner's webhook endpoints (events go to each). The URL is checked as a tenant's
   * webhook URL is (400 naming `body/url`); 409 `partner_endpoint_limit` past MAX_PARTNER_ENDPOINTS.
   */
  addEndpoint(caller: PartnerCaller, url: string): Promise<EndpointView>
  listEndpoints(caller: PartnerCaller): Promise<{ data: EndpointView[] }>
  removeEndpoint(caller: PartnerCaller, id: string): Promise<void>
  /** The secret the partner verifies `X-Service-Signature` with (made on first use). */
  webhookSecret(caller: PartnerCaller): Promise<string>
  /** The webhook outbox signs a partner's deliveries with it. */
  secretOf(partnerId: string): Promise<Buffer>
  /** Master key rotation: every partner's webhook secret is sealed again under the primary key. */
  rewrapSealed(keyring: MasterKeyring): Promise<RewrapResult>
  /** The tenant's first invoice is paid: its referral (if any, and active) is converted. */
  convert(tenantId: string): Promise<boolean>
  /**
   * The monthly job (and the CLI): each converted referral's commission for `period` (default:
   * last month), from its tenant's invoices paid in that month at the configured rate; exactly
   * once per referral and month, however often or wherever it runs.
   */
  calculateCommissions(period?: string): Promise<{ period: string; calculated: number }>
  /** The operator: a partner's calculated commissions of a month are paid, and the payout recorded. */
  recordPayout(
    partnerId: string,
    period: string,
    by: string,
  ): Promise<{
    partnerId: string
    period: string
    amount: number
    amountMinor: number
    currency: string
    commissions: number
  }>
}

interface EndpointView {
  id: string
  url: string
  createdAt: string
}

/** The events a partner receives (docs/partners.md "Events"). */
type PartnerEventType =
  | 'referral.created'
  | 'referral.converted'
  | 'commission.calculated'
  | 'payout.completed'

/** Commission in minor units: amount × rate, rounded half up, in integers only. */
export function commissionOf(amountMinor: bigint, rateBasisPoints: number): bigint {
  return (amountMinor * BigInt(rateBasisPoints) + 5000n) / 10000n
}

const monthStart = (period: string) => new Date(`${period}-01T00:00:00Z`)
const nextMonthOf = (date: Date) => new Date(Date.UTC(date.getUTCFullYear(), date.getUTCMonth() + 1, 1))

/** The operator's decision on a partner who signed up, on the mail queue (partners-jobs.ts). */
export const PARTNER_DECISION_EMAIL = 'partner-decision-email'
export interface PartnerDecisionEmail {
  partnerId: string
}
const partnerDecisionEmailId = (partnerId: string) => `partner-decision.${partnerId}`

/**
 * The partner programme (docs/partners.md). Partners are not tenants: they have their own keys
 * (`kmsp_`), their own routes, and see only their own referrals, commissions and codes.
 */
const secretAad = (partnerId: string) => `kms:partner-webhook-secret:v1:${partnerId}`

/**
 * Partners' webhook signing secrets (made on first use, sealed under the master key): the webhook
 * outbox signs partner deliveries with them. Apart from the partner service, which sends events
 * through that outbox, so the outbox can be built first.
 */
export function createPartnerSecrets(deps: { sql: Sql; masterKeys: MasterKeyring }): PartnerSecrets {
  const { sql } = deps
  return {
    async secretOf(partnerId) {
      let stored = await sealedSecretOf(sql, partnerId)
      if (!stored) {
        const primary = deps.masterKeys.primary
        const fresh = Buffer.from(`whsec_${randomBytes(32).toString('base64url')}`)
        await storeSecretIfNone(sql, partnerId, {
          sealed: seal(primary.key, fresh, secretAad(partnerId)),
          keyId: primary.id,
        })
        fresh.fill(0)
        stored = await sealedSecretOf(sql, partnerId)
      }
      const master = stored && deps.masterKeys.find(stored.keyId)
      if (!stored || !master)
        throw new AppError(503, 'secret_unavailable', 'The webhook secret cannot be opened')
      return open(master.key, stored.sealed, secretAad(partnerId))
    },
  }
}

export function createPartnerService(deps: {
  sql: Sql
  clock: Clock
  /** Where sign-up lives: a code's URL is `<signupBase>/signup?ref=<code>`. */
  signupBase: () => string
  /** Commission rate in basis points (2000 = 20%). */
  commissionBasisPoints: number
  /** Paid invoices of a month (src/billing). */
  invoices: {
    paidIn(period: string): Promise<Array<{ tenantId: string; amountMinor: bigint; currency: string }>>
  }
  masterKeys: MasterKeyring
  /** Checks an endpoint's destination when it is saved (the delivery checks again). */
  outbound: Pick<OutboundClient, 'check'>
  /** The webhook outbox (src/webhooks): a delivery per endpoint, in the event's transaction. */
  outbox: {
    enqueueForPartner(tx: Queryable, url: string, event: PartnerWebhookEvent, now: Date): Promise<unknown>
  }
  /** The decision e-mail to partners who signed up. */
  mailQueue?: MailQueue
  mailer?: Mailer
}): PartnerService {
  const { sql, clock } = deps
  const partnerWebhookSecrets = createPartnerSecrets(deps)

  /** The event to every endpoint of the partner, in the caller's transaction (the outbox). */
  async function emit(
    tx: Queryable,
    partnerId: string,
    type: PartnerEventType,
    data: Record<string, unknown>,
  ) {
    const now = clock.now()
    // The limit holds for endpoints registered before it existed too: the oldest ones are served.
    for (const endpoint of await endpointsOf(tx, partnerId, MAX_PARTNER_ENDPOINTS))
      await deps.outbox.enqueueForPartner(tx, endpoint.url, { type, partnerId, data }, now)
  }

  /** One line of the partner's audit trail, in the transaction of the change it records. */
  async function record(
    db: Queryable,
    partnerId: string,
    by: PartnerCaller | { actor: string; clientIp?: string | null; requestId?: string | null },
    action: string,
    resource: string,
    details: Record<string, unknown>,
  ) {
    await insertPartnerAudit(db, {
      partner_id: partnerId,
      occurred_at: clock.now(),
      actor: 'partnerId' in by ? partnerActorOf(by) : by.actor,
      action,
      resource,
      details,
      client_ip: by.clientIp ?? null,
      request_id: by.requestId ?? null,
    })
  }

  /**
   * A new partner API key (shown once, only its hash kept) with its audit line, in one
   * transaction; `limited`: the partner's live keys are counted under its row lock first.
   */
  async function addKey(
    partnerId: string,
    name: string,
    by: PartnerCaller | { actor: string },
    options: { field: string; limited: boolean },
  ) {
    const trimmed = name.trim()
    if (!trimmed || trimmed.length > 100) throw invalidField(options.field, 'must be 1 to 100 characters')
    const generated = partnerKeys.generate()
    const id = randomUUID()
    const createdAt = clock.now()
    const createdBy = 'partnerId' in by ? partnerActorOf(by) : by.actor
    await sql.begin(async (tx) => {
      if (options.limited) {
        // One partner's key creations queue here, so the limit holds under concurrency.
        await lockPartner(tx, partnerId)
        if ((await countLivePartnerKeys(tx, partnerId)) >= MAX_PARTNER_KEYS)
          throw new AppError(
            409,
            'partner_key_limit',
            `A partner holds at most ${MAX_PARTNER_KEYS} live API keys: revoke one first`,
            { limit: MAX_PARTNER_KEYS },
          )
      }
      await insertPartnerKey(tx, {
        id,
        partner_id: partnerId,
        name: trimmed,
        lookup_id: generated.lookupId,
        secret_hash: generated.secretHash,
        created_at: createdAt,
        created_by: createdBy,
      })
      await record(tx, partnerId, by, 'partner.api_key.create', `partnerkey:${id}`, { name: trimmed })
    })
    return { id, name: trimmed, lookupId: generated.lookupId, key: generated.key, createdAt, createdBy }
  }

  /** The tenant's referral, if any and active, becomes converted; `referral.converted` is sent. */
  function convertTenant(tenantId: string): Promise<boolean> {
    return sql.begin(async (tx) => {
      const referral = await convertReferral(tx, tenantId, clock.now())
      if (!referral) return false
      await emit(tx, referral.partner_id, 'referral.converted', {
        referralId: referral.id,
        tenantId: referral.tenant_id,
        convertedAt: referral.converted_at!.toISOString(),
      })
      return true
    })
  }

  const secretBytes = (partnerId: string) => partnerWebhookSecrets.secretOf(partnerId)
  const newCode = () => {
    let code = ''
    for (let i = 0; i < CODE_LENGTH; i++) code += CODE_ALPHABET[randomInt(CODE_ALPHABET.length)]
    return code
  }
  return {
    async createPartner(input, by) {
      const name = input.name.trim()
      if (!name || name.length > 200) throw invalidField('name', 'must be 1 to 200 characters')
      const email = checkEmail(input.email)
      return sql.begin(async (tx) => {
        const row = await insertPartner(tx, {
          id: randomUUID(),
          name,
          email,
          status: 'active',
          created_at: clock.now(),
          created_by: by,
          account_id: null,
        })
        await record(tx, row.id, { actor: by }, 'partner.create', `partner:${row.id}`, {})
        return toPartnerView(row)
      })
    },
    async createPending(input, tx) {
      const name = input.name.trim()
      if (!name || name.length > 200) throw invalidField('name', 'must be 1 to 200 characters')
      let row: PartnerRow
      try {
        row = await insertPartner(tx, {
          id: randomUUID(),
          name,
          email: checkEmail(input.email),
          status: 'pending',
          created_at: clock.now(),
          created_by: `partneruser:${input.accountId}`,
          account_id: input.accountId,
        })
      } catch (err) {
        // One partner per portal account: the address applied before (whatever came of it).
        if (isUniqueViolation(err, 'partners_account_id_key'))
          throw new AppError(
            409,
            'partner_account_exists',
            'This e-mail address has a partner account already: sign in to the partner portal',
          )
        throw err
      }
      await record(
        tx,
        row.id,
        { actor: `partneruser:${input.accountId}`, clientIp: input.clientIp },
        'partner.signup',
        `partner:${row.id}`,
        {},
      )
      return toPartnerView(row)
    },
    async list(status) {
      return (await listPartners(sql, status)).map(toPartnerView)
    },
    async decide(partnerId, decision, by) {
      if (!isUuid(partnerId)) throw notFound('partner_not_found', 'Partner')
      const view = await sql.begin(async (tx) => {
        const row = await decidePartner(tx, {
          id: partnerId,
          status: decision === 'approve' ? 'active' : 'rejected',
          at: clock.now(),
          by,
        })
        if (!row) {
          const current = await getPartner(tx, partnerId)
          if (!current) throw notFound('partner_not_found', 'Partner')
          throw new AppError(409, 'partner_not_pending', `The partner is ${current.status}, not pending`, {
            status: current.status,
          })
        }
        await record(tx, row.id, { actor: by }, `partner.${decision}`, `partner:${row.id}`, {})
        return { view: toPartnerView(row), email: row.decision_email_status === 'queued' }
      })
      // After commit. A failure to queue leaves the e-mail `queued` in the partner's view
      // (list-partners shows it): the operator then tells the partner.
      if (view.email)
        await deps.mailQueue
          ?.enqueue(PARTNER_DECISION_EMAIL, { partnerId }, partnerDecisionEmailId(partnerId))
          .catch(() => {})
      return view.view
    },
    async deliverDecision(partnerId, final) {
      const row = await getPartner(sql, partnerId)
      if (row?.decision_email_status !== 'queued') return 'skipped'
      const approved = row.status === 'active'
      const text = approved
        ? `The partner application of ${row.name} is approved. You can sign in to the partner portal with this address and the password you chose.\n`
        : `The partner application of ${row.name} was not approved.\n`
      try {
        if (!deps.mailer) throw new MailError('smtp_not_configured')
        await deps.mailer.send({
          to: row.email,
          subject: approved ? 'Your partner application is approved' : 'Your partner application',
          text,
          html: `<p>${esc(text.trim())}</p>\n`,
        })
      } catch (err) {
        const reason = err instanceof MailError ? err.reason : 'smtp_failed'
        if (!final && reason !== 'smtp_not_configured') throw err
        await recordDecisionEmail(sql, { id: row.id, status: 'failed', error: reason })
        return 'failed'
      }
      await recordDecisionEmail(sql, { id: row.id, status: 'sent', error: null })
      return 'sent'
    },
    async partnerOfAccount(accountId) {
      const row = await partnerOfAccount(sql, accountId)
      return row ? toPartnerView(row) : undefined
    },
    async sessionCaller(accountId) {
      const row = await partnerOfAccount(sql, accountId)
      return row?.status === 'active' ? { partnerId: row.id, keyId: null, accountId } : undefined
    },
    async profile(caller) {
      const row = await getPartner(sql, caller.partnerId)
      if (!row) throw notFound('partner_not_found', 'Partner')
      return toPartnerView(row)
    },
    async issueKey(caller, name) {
      const made = await addKey(caller.partnerId, name, caller, { field: 'body/name', limited: true })
      return {
        id: made.id,
        name: made.name,
        prefix: keyPrefix(made.lookupId),
        createdAt: made.createdAt.toISOString(),
        createdBy: made.createdBy,
        revokedAt: null,
        key: made.key,
      }
    },
    async listKeys(caller) {
      return { data: (await listPartnerKeys(sql, caller.partnerId)).map(toKeyView) }
    },
    async revokeKey(caller, id) {
      if (!isUuid(id)) throw notFound('partner_key_not_found', 'Partner API key')
      return sql.begin(async (tx) => {
        const row = await revokePartnerKey(tx, caller.partnerId, id, clock.now())
        if (!row) throw notFound('partner_key_not_found', 'Partner API key')
        await record(tx, caller.partnerId, caller, 'partner.api_key.revoke', `partnerkey:${id}`, {})
        return toKeyView(row)
      })
    },
    async auditTrail(caller, page) {
      const { rows, total } = await listPartnerAudit(sql, caller.partnerId, page)
      return {
        data: rows.map((row) => ({
          id: row.id,
          occurredAt: row.occurred_at.toISOString(),
          actor: row.actor,
          action: row.action,
          resource: row.resource,
          details: row.details,
        })),
        total,
      }
    },
    async findCode(code) {
      const normalized = code.trim().toUpperCase()
      if (!/^[A-Z0-9]{8,32}$/.test(normalized)) return undefined
      const found = await findCode(sql, normalized)
      return found?.partner_status === 'active' ? found.code : undefined
    },
    async createKey(partnerId, name, by) {
      if (!(await getPartner(sql, partnerId))) throw notFound('partner_not_found', 'Partner')
      // The operator's keys are not counted against the portal's limit.
      const made = await addKey(partnerId, name, { actor: by }, { field: 'name', limited: false })
      return { id: made.id, key: made.key }
    },
    async authenticate(presented) {
      const lookupId = partnerKeys.lookupIdOf(presented)
      if (!lookupId) return undefined
      const row = await findPartnerKey(sql, lookupId)
      if (row?.partner_status !== 'active' || !partnerKeys.matches(presented, row.secret_hash))
        return undefined
      return { partnerId: row.partner_id, keyId: row.id, accountId: null }
    },
    async createCode(caller, label) {
      for (let attempt = 0; attempt < 5; attempt++) {
        try {
          const row = await sql.begin(async (tx) => {
            const created = await insertCode(tx, {
              code: newCode(),
              partner_id: caller.partnerId,
              label,
              created_at: clock.now(),
            })
            await record(tx, caller.partnerId, caller, 'partner.code.create', `code:${created.code}`, {
              label,
            })
            return created
          })
          return {
            code: row.code,
            url: `${deps.signupBase()}/signup?ref=${row.code}`,
            createdAt: row.created_at.toISOString(),
          }
        } catch (err) {
          if (!isUniqueViolation(err)) throw err
        }
      }
      throw new AppError(503, 'code_unavailable', 'No free referral code was found; try again')
    },
    async referrals(caller, page) {
      const { rows, total } = await listReferrals(sql, caller.partnerId, page)
      return {
        data: rows.map((row) => ({
          id: row.id,
          tenantId: row.tenant_id,
          status: row.status,
          createdAt: row.created_at.toISOString(),
        })),
        total,
      }
    },
    async commissions(caller, period) {
      if (!PERIOD.test(period))
        throw invalidField('querystring/period', 'must be a month as YYYY-MM (01 to 12)')
      const rows = await commissionsOf(sql, caller.partnerId, period)
      let total = 0n
      const data = rows.map((row) => {
        const minor = BigInt(row.amount_minor)
        total += minor
        return {
          referralId: row.referral_id,
          amount: Number(minor) / 100,
          currency: row.currency,
          status: row.status,
          period: row.period,
        }
      })
      return { data, totalAmount: Number(total) / 100 }
    },
    async addEndpoint(caller, url) {
      let parsed: URL
      try {
        parsed = new URL(url)
      } catch {
        throw invalidField('body/url', 'must be an absolute http or https URL')
      }
      if (parsed.protocol !== 'https:' && parsed.protocol !== 'http:')
        throw invalidField('body/url', 'must be an absolute http or https URL')
      if (parsed.username || parsed.password) throw invalidField('body/url', 'must not carry credentials')
      // The tenant webhooks' check (rotation policies): the guarded client would refuse a local,
      // private or link-local destination at every delivery, so the partner is told now.
      const checked = await checkWebhookUrl(parsed.toString(), 'body/url', deps.outbound)
      try {
        const row = await sql.begin(async (tx) => {
          // One partner's endpoint creations queue here, so the limit holds under concurrency.
          await lockPartner(tx, caller.partnerId)
          if ((await countEndpoints(tx, caller.partnerId)) >= MAX_PARTNER_ENDPOINTS)
            throw new AppError(
              409,
              'partner_endpoint_limit',
              `A partner has at most ${MAX_PARTNER_ENDPOINTS} webhook endpoints: remove one first`,
              { limit: MAX_PARTNER_ENDPOINTS },
            )
          const created = await insertEndpoint(tx, {
            id: randomUUID(),
            partner_id: caller.partnerId,
            url: checked,
            created_at: clock.now(),
          })
          await record(
            tx,
            caller.partnerId,
            caller,
            'partner.webhook_endpoint.create',
            `endpoint:${created.id}`,
            {
              url: created.url,
            },
          )
          return created
        })
        return { id: row.id, url: row.url, createdAt: row.created_at.toISOString() }
      } catch (err) {
        if (isUniqueViolation(err))
          throw new AppError(409, 'endpoint_exists', 'This URL is registered already')
        throw err
      }
    },
    async listEndpoints(caller) {
      const rows = await endpointsOf(sql, caller.partnerId)
      return {
        data: rows.map((row) => ({ id: row.id, url: row.url, createdAt: row.created_at.toISOString() })),
      }
    },
    async removeEndpoint(caller, id) {
      await sql.begin(async (tx) => {
        if (!(await deleteEndpoint(tx, caller.partnerId, id)))
          throw notFound('endpoint_not_found', 'Webhook endpoint')
        await record(tx, caller.partnerId, caller, 'partner.webhook_endpoint.delete', `endpoint:${id}`, {})
      })
    },
    async webhookSecret(caller) {
      // Who read the secret is worth knowing (never the secret itself).
      await record(
        sql,
        caller.partnerId,
        caller,
        'partner.webhook_secret.read',
        `partner:${caller.partnerId}`,
        {},
      )
      const bytes = await secretBytes(caller.partnerId)
      try {
        return bytes.toString('utf8')
      } finally {
        bytes.fill(0)
      }
    },
    secretOf: (partnerId) => secretBytes(partnerId),
    rewrapSealed: (keyring) =>
      rewrapEach({
        keyring,
        batch: (primaryId, after, limit) => secretsToRewrap(sql, { primaryId, after, limit }),
        aad: (item) => secretAad(item.id),
        replace: (item, resealed, primary) =>
          replaceSealedSecret(sql, { id: item.id, from: item.sealed, to: resealed, keyId: primary.id }),
      }),
    convert: convertTenant,
    async calculateCommissions(period) {
      const now = clock.now()
      const target =
        period ?? new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() - 1, 1)).toISOString().slice(0, 7)
      if (!PERIOD.test(target)) throw invalidField('period', 'must be a month as YYYY-MM (01 to 12)')
      const end = nextMonthOf(monthStart(target))
      if (end > now) throw invalidField('period', 'must be a month that has ended')
      const paid = await deps.invoices.paidIn(target)
      // A referral whose tenant paid is converted (the invoice-paid hook normally did it already).
      for (const tenantId of new Set(paid.map((invoice) => invoice.tenantId))) await convertTenant(tenantId)
      let calculated = 0
      for (const referral of await convertedReferrals(sql, end)) {
        const invoices = paid.filter((invoice) => invoice.tenantId === referral.tenant_id)
        if (invoices.length === 0) continue
        const base = invoices.reduce((sum, invoice) => sum + invoice.amountMinor, 0n)
        const created = await sql.begin(async (tx) => {
          const row = await insertCommission(tx, {
            id: randomUUID(),
            partner_id: referral.partner_id,
            referral_id: referral.id,
            period: target,
            amount_minor: commissionOf(base, deps.commissionBasisPoints),
            currency: invoices[0]!.currency,
            calculated_at: now,
          })
          if (row)
            await emit(tx, referral.partner_id, 'commission.calculated', {
              referralId: referral.id,
              period: target,
              amount: Number(BigInt(row.amount_minor)) / 100,
              currency: row.currency,
            })
          return row
        })
        if (created) calculated++
      }
      return { period: target, calculated }
    },
    async recordPayout(partnerId, period, by) {
      if (!PERIOD.test(period)) throw invalidField('period', 'must be a month as YYYY-MM (01 to 12)')
      if (!(await getPartner(sql, partnerId))) throw notFound('partner_not_found', 'Partner')
      try {
        const payout = await sql.begin(async (tx) => {
          const done = await recordPayout(tx, { partnerId, period, at: clock.now(), by })
          if (done) {
            await record(tx, partnerId, { actor: by }, 'partner.payout.record', `payout:${period}`, {
              amountMinor: done.amount_minor,
              currency: done.currency,
            })
            await emit(tx, partnerId, 'payout.completed', {
              period,
              amount: Number(BigInt(done.amount_minor)) / 100,
              currency: done.currency,
              commissions: done.commissions,
            })
          }
          return done
        })
        if (!payout)
          throw new AppError(409, 'nothing_to_pay', 'The partner has no calculated commission for this month')
        const minor = BigInt(payout.amount_minor)
        return {
          partnerId,
          period,
          amount: Number(minor) / 100,
          amountMinor: Number(minor),
          currency: payout.currency,
          commissions: payout.commissions,
        }
      } catch (err) {
        if (isUniqueViolation(err))
          throw new AppError(409, 'payout_exists', 'This month was paid out already')
        throw err
      }
    },
    async attribute({ tenantId, code, signerEmail }, inTransaction) {
      const found = await findCode(inTransaction ?? sql, code.trim().toUpperCase())
      if (found?.partner_status !== 'active') return false
      // The partner's own tenant earns no commission. The sign-up goes on unreferred and nothing
      // tells the partner (no referral, no event): the code did not fail, it just pays nothing.
      if (isSelfReferral(found.partner_email, signerEmail)) return false
      const run = async (tx: Queryable) => {
        const referral = await insertReferral(tx, {
          id: randomUUID(),
          partner_id: found.partner_id,
          tenant_id: tenantId,
          code: found.code,
          status: 'active',
          created_at: clock.now(),
        })
        await emit(tx, found.partner_id, 'referral.created', {
          referralId: referral.id,
          tenantId,
          code: found.code,
          createdAt: referral.created_at.toISOString(),
        })
      }
      await (inTransaction ? run(inTransaction) : sql.begin(run))
      return true
    },
  }
}

const keyPrefix = (lookupId: string) => `kmsp_${lookupId}`

const toKeyView = (row: PartnerKeyRow): PartnerKeyView => ({
  id: row.id,
  name: row.name,
  prefix: keyPrefix(row.lookup_id),
  createdAt: row.created_at.toISOString(),
  createdBy: row.created_by,
  revokedAt: row.revoked_at?.toISOString() ?? null,
})
