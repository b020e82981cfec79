import type { Queryable } from '../data/database.ts'

/**
 * partners, partner_api_keys, referral_codes, referrals and commissions (migration 0018). Only the
 * partners module touches them.
 */
export interface PartnerRow {
  id: string
  name: string
  email: string
  /** pending: signed up, waiting for an operator; rejected: the operator said no. */
  status: 'pending' | 'active' | 'suspended' | 'rejected'
  created_at: Date
  created_by: string
  /** The partner-realm account that signs in to the portal (partners who signed up; optional for the CLI's). */
  account_id: string | null
  decided_at: Date | null
  decided_by: string | null
  /** The decision e-mail of a partner who signed up: queued with the decision, then sent or failed. */
  decision_email_status: 'queued' | 'sent' | 'failed' | null
}

export interface PartnerKeyRow {
  id: string
  partner_id: string
  name: string
  lookup_id: string
  secret_hash: Buffer
  created_at: Date
  created_by: string
  revoked_at: Date | null
}

export interface ReferralCodeRow {
  code: string
  partner_id: string
  label: string
  created_at: Date
}

export interface ReferralRow {
  id: string
  partner_id: string
  tenant_id: string
  code: string
  status: 'active' | 'converted' | 'churned'
  created_at: Date
  converted_at: Date | null
}

export interface CommissionRow {
  id: string
  partner_id: string
  referral_id: string
  period: string
  amount_minor: string
  currency: string
  status: 'calculated' | 'paid'
  calculated_at: Date
  paid_at: Date | null
}

/** The columns a partner row is read with (not its sealed webhook secret). */
const PARTNER_COLUMNS =
  'id, name, email, status, created_at, created_by, account_id, decided_at, decided_by, decision_email_status'

export async function insertPartner(
  db: Queryable,
  row: Omit<PartnerRow, 'decided_at' | 'decided_by' | 'decision_email_status'>,
): Promise<PartnerRow> {
  const [created] = await db<PartnerRow[]>`
    INSERT INTO partners (id, name, email, status, created_at, created_by, account_id)
    VALUES (${row.id}, ${row.name}, ${row.email}, ${row.status}, ${row.created_at}, ${row.created_by},
      ${row.account_id})
    RETURNING ${db.unsafe(PARTNER_COLUMNS)}`
  return created!
}

export async function listPartners(
  db: Queryable,
  status: PartnerRow['status'] | undefined,
): Promise<PartnerRow[]> {
  return status
    ? db<
        PartnerRow[]
      >`SELECT ${db.unsafe(PARTNER_COLUMNS)} FROM partners WHERE status = ${status} ORDER BY created_at, id`
    : db<PartnerRow[]>`SELECT ${db.unsafe(PARTNER_COLUMNS)} FROM partners ORDER BY created_at, id`
}

/** The partner whose portal account this is. */
export async function partnerOfAccount(db: Queryable, accountId: string): Promise<PartnerRow | undefined> {
  const [row] = await db<PartnerRow[]>`
    SELECT ${db.unsafe(PARTNER_COLUMNS)} FROM partners WHERE account_id = ${accountId}`
  return row
}

/** An operator's decision on a pending partner: only a pending one changes. */
export async function decidePartner(
  db: Queryable,
  input: { id: string; status: 'active' | 'rejected'; at: Date; by: string },
): Promise<PartnerRow | undefined> {
  const [row] = await db<PartnerRow[]>`
    UPDATE partners SET status = ${input.status}, decided_at = ${input.at}, decided_by = ${input.by},
      decision_email_status = CASE WHEN account_id IS NULL THEN NULL ELSE 'queued' END
    WHERE id = ${input.id} AND status = 'pending'
    RETURNING ${db.unsafe(PARTNER_COLUMNS)}`
  return row
}

/** The decision e-mail went out (or failed for good): recorded once. */
export async function recordDecisionEmail(
  db: Queryable,
  input: { id: string; status: 'sent' | 'failed'; error: string | null },
): Promise<boolean> {
  const rows = await db`
    UPDATE partners SET decision_email_status = ${input.status}, decision_email_error = ${input.error}
    WHERE id = ${input.id} AND decision_email_status = 'queued'
    RETURNING id`
  return rows.length > 0
}

export async function listPartnerKeys(db: Queryable, partnerId: string): Promise<PartnerKeyRow[]> {
  return db<PartnerKeyRow[]>`
    SELECT * FROM partner_api_keys WHERE partner_id = ${partnerId} ORDER BY created_at, id`
}

export async function countLivePartnerKeys(db: Queryable, partnerId: string): Promise<number> {
  const [row] = await db<{ n: number }[]>`
    SELECT count(*)::int AS n FROM partner_api_keys WHERE partner_id = ${partnerId} AND revoked_at IS NULL`
  return row?.n ?? 0
}

export async function revokePartnerKey(
  db: Queryable,
  partnerId: string,
  id: string,
  at: Date,
): Promise<PartnerKeyRow | undefined> {
  const [row] = await db<PartnerKeyRow[]>`
    UPDATE partner_api_keys SET revoked_at = ${at}
    WHERE partner_id = ${partnerId} AND id = ${id} AND revoked_at IS NULL
    RETURNING *`
  return row
}

export interface PartnerAuditRow {
  id: string
  partner_id: string
  occurred_at: Date
  actor: string
  action: string
  resource: string
  details: Record<string, unknown>
  client_ip: string | null
  request_id: string | null
}

export async function insertPartnerAudit(db: Queryable, row: Omit<PartnerAuditRow, 'id'>): Promise<void> {
  await db`
    INSERT INTO partner_audit (partner_id, occurred_at, actor, action, resource, details, client_ip, request_id)
    VALUES (${row.partner_id}, ${row.occurred_at}, ${row.actor}, ${row.action}, ${row.resource},
      ${db.json(row.details as never)}, ${row.client_ip}, ${row.request_id})`
}

export async function listPartnerAudit(
  db: Queryable,
  partnerId: string,
  page: { limit: number; offset: number },
): Promise<{ rows: PartnerAuditRow[]; total: number }> {
  const rows = await db<PartnerAuditRow[]>`
    SELECT id::text, partner_id, occurred_at, actor, action, resource, details, client_ip, request_id
    FROM partner_audit WHERE partner_id = ${partnerId}
    ORDER BY id DESC LIMIT ${page.limit} OFFSET ${page.offset}`
  const [counted] = await db<{ total: number }[]>`
    SELECT count(*)::int AS total FROM partner_audit WHERE partner_id = ${partnerId}`
  return { rows, total: counted!.total }
}

export async function getPartner(db: Queryable, id: string): Promise<PartnerRow | undefined> {
  const [row] = await db<PartnerRow[]>`SELECT ${db.unsafe(PARTNER_COLUMNS)} FROM partners WHERE id = ${id}`
  return row
}

export async function insertPartnerKey(db: Queryable, row: Omit<PartnerKeyRow, 'revoked_at'>): Promise<void> {
  await db`
    INSERT INTO partner_api_keys (id, partner_id, name, lookup_id, secret_hash, created_at, created_by)
    VALUES (${row.id}, ${row.partner_id}, ${row.name}, ${row.lookup_id}, ${row.secret_hash}, ${row.created_at},
      ${row.created_by})`
}

/** A live key of an active partner, by its lookup id. */
export async function findPartnerKey(
  db: Queryable,
  lookupId: string,
): Promise<(PartnerKeyRow & { partner_status: PartnerRow['status'] }) | undefined> {
  const [row] = await db<(PartnerKeyRow & { partner_status: PartnerRow['status'] })[]>`
    SELECT k.*, p.status AS partner_status FROM partner_api_keys k JOIN partners p ON p.id = k.partner_id
    WHERE k.lookup_id = ${lookupId} AND k.revoked_at IS NULL`
  return row
}

export async function insertCode(db: Queryable, row: ReferralCodeRow): Promise<ReferralCodeRow> {
  const [created] = await db<ReferralCodeRow[]>`
    INSERT INTO referral_codes (code, partner_id, label, created_at)
    VALUES (${row.code}, ${row.partner_id}, ${row.label}, ${row.created_at})
    RETURNING *`
  return created!
}

/** A code with its partner's status and address (only an active partner's codes attribute sign-ups). */
export type CodeWithPartner = ReferralCodeRow & {
  partner_status: PartnerRow['status']
  partner_email: string
}

export async function findCode(db: Queryable, code: string): Promise<CodeWithPartner | undefined> {
  const [row] = await db<CodeWithPartner[]>`
    SELECT c.*, p.status AS partner_status, p.email AS partner_email
    FROM referral_codes c JOIN partners p ON p.id = c.partner_id
    WHERE c.code = ${code}`
  return row
}

/** Serialises one partner's key and endpoint creations (the live-key and endpoint limits). */
export async function lockPartner(db: Queryable, partnerId: string): Promise<void> {
  await db`SELECT id FROM partners WHERE id = ${partnerId} FOR UPDATE`
}

export async function listReferrals(
  db: Queryable,
  partnerId: string,
  page: { limit: number; offset: number },
): Promise<{ rows: ReferralRow[]; total: number }> {
  const rows = await db<ReferralRow[]>`
    SELECT * FROM referrals WHERE partner_id = ${partnerId}
    ORDER BY created_at DESC, id LIMIT ${page.limit} OFFSET ${page.offset}`
  const [counted] = await db<{ total: number }[]>`
    SELECT count(*)::int AS total FROM referrals WHERE partner_id = ${partnerId}`
  return { rows, total: counted!.total }
}

export async function insertReferral(
  db: Queryable,
  row: Omit<ReferralRow, 'converted_at'>,
): Promise<ReferralRow> {
  const [created] = await db<ReferralRow[]>`
    INSERT INTO referrals (id, partner_id, tenant_id, code, status, created_at)
    VALUES (${row.id}, ${row.partner_id}, ${row.tenant_id}, ${row.code}, ${row.status}, ${row.created_at})
    RETURNING *`
  return created!
}

export async function commissionsOf(
  db: Queryable,
  partnerId: string,
  period: string,
): Promise<CommissionRow[]> {
  return db<CommissionRow[]>`
    SELECT id, partner_id, referral_id, period, amount_minor::text, currency, status, calculated_at, paid_at
    FROM commissions WHERE partner_id = ${partnerId} AND period = ${period}
    ORDER BY calculated_at, id`
}

/** The first paid invoice: an active referral becomes converted (once). */
export async function convertReferral(
  db: Queryable,
  tenantId: string,
  at: Date,
): Promise<ReferralRow | undefined> {
  const [row] = await db<ReferralRow[]>`
    UPDATE referrals SET status = 'converted', converted_at = ${at}
    WHERE tenant_id = ${tenantId} AND status = 'active'
    RETURNING *`
  return row
}

export async function convertedReferrals(db: Queryable, before: Date): Promise<ReferralRow[]> {
  return db<ReferralRow[]>`
    SELECT * FROM referrals WHERE status = 'converted' AND converted_at < ${before} ORDER BY id`
}

/** One commission per referral and month: a second calculation inserts nothing. */
export async function insertCommission(
  db: Queryable,
  row: Omit<CommissionRow, 'paid_at' | 'status' | 'amount_minor'> & { amount_minor: bigint },
): Promise<CommissionRow | undefined> {
  const [created] = await db<CommissionRow[]>`
    INSERT INTO commissions (id, partner_id, referral_id, period, amount_minor, currency, status, calculated_at)
    VALUES (${row.id}, ${row.partner_id}, ${row.referral_id}, ${row.period}, ${row.amount_minor.toString()},
      ${row.currency}, 'calculated', ${row.calculated_at})
    ON CONFLICT (referral_id, period) DO NOTHING
    RETURNING id, partner_id, referral_id, period, amount_minor::text, currency, status, calculated_at, paid_at`
  return created
}

/** Marks a partner's calculated commissions of a month paid and records the payout, once. */
export async function recordPayout(
  db: Queryable,
  input: { partnerId: string; period: string; at: Date; by: string },
): Promise<{ amount_minor: string; currency: string; commissions: number } | undefined> {
  const paid = await db<{ amount_minor: string; currency: string }[]>`
    UPDATE commissions SET status = 'paid', paid_at = ${input.at}
    WHERE partner_id = ${input.partnerId} AND period = ${input.period} AND status = 'calculated'
    RETURNING amount_minor::text, currency`
  if (paid.length === 0) return undefined
  const currency = paid[0]!.currency
  const total = paid.reduce((sum, row) => sum + BigInt(row.amount_minor), 0n)
  await db`
    INSERT INTO payouts (partner_id, period, amount_minor, currency, paid_at, paid_by)
    VALUES (${input.partnerId}, ${input.period}, ${total.toString()}, ${currency}, ${input.at}, ${input.by})`
  return { amount_minor: total.toString(), currency, commissions: paid.length }
}

export interface EndpointRow {
  id: string
  partner_id: string
  url: string
  created_at: Date
}

export async function insertEndpoint(db: Queryable, row: EndpointRow): Promise<EndpointRow> {
  const [created] = await db<EndpointRow[]>`
    INSERT INTO partner_webhook_endpoints (id, partner_id, url, created_at)
    VALUES (${row.id}, ${row.partner_id}, ${row.url}, ${row.created_at})
    RETURNING *`
  return created!
}

/** The partner's endpoints, oldest first; at most `limit` of them when given. */
export async function endpointsOf(db: Queryable, partnerId: string, limit?: number): Promise<EndpointRow[]> {
  return limit === undefined
    ? db<EndpointRow[]>`
        SELECT * FROM partner_webhook_endpoints WHERE partner_id = ${partnerId} ORDER BY created_at, id`
    : db<EndpointRow[]>`
        SELECT * FROM partner_webhook_endpoints WHERE partner_id = ${partnerId} ORDER BY created_at, id
        LIMIT ${limit}`
}

export async function countEndpoints(db: Queryable, partnerId: string): Promise<number> {
  const [row] = await db<{ n: number }[]>`
    SELECT count(*)::int AS n FROM partner_webhook_endpoints WHERE partner_id = ${partnerId}`
  return row?.n ?? 0
}

export async function deleteEndpoint(db: Queryable, partnerId: string, id: string): Promise<boolean> {
  const rows = await db`
    DELETE FROM partner_webhook_endpoints WHERE partner_id = ${partnerId} AND id = ${id} RETURNING id`
  return rows.length > 0
}

export async function sealedSecretOf(
  db: Queryable,
  partnerId: string,
): Promise<{ sealed: Buffer; keyId: string } | undefined> {
  const [row] = await db<{ webhook_secret_sealed: Buffer | null; webhook_secret_key_id: string | null }[]>`
    SELECT webhook_secret_sealed, webhook_secret_key_id FROM partners WHERE id = ${partnerId}`
  return row?.webhook_secret_sealed && row.webhook_secret_key_id
    ? { sealed: row.webhook_secret_sealed, keyId: row.webhook_secret_key_id }
    : undefined
}

/** Stores a first secret; a concurrent first use keeps the one stored first. */
export async function storeSecretIfNone(
  db: Queryable,
  partnerId: string,
  secret: { sealed: Buffer; keyId: string },
): Promise<void> {
  await db`
    UPDATE partners SET webhook_secret_sealed = ${secret.sealed}, webhook_secret_key_id = ${secret.keyId}
    WHERE id = ${partnerId} AND webhook_secret_sealed IS NULL`
}

/** Master key rotation: webhook secrets sealed under another key than `primaryId`, by partner id after `after`. */
export async function secretsToRewrap(
  db: Queryable,
  input: { primaryId: string; after: string | undefined; limit: number },
): Promise<{ id: string; sealed: Buffer; masterKeyId: string }[]> {
  const rows = await db<{ id: string; webhook_secret_sealed: Buffer; webhook_secret_key_id: string }[]>`
    SELECT id, webhook_secret_sealed, webhook_secret_key_id FROM partners
    WHERE webhook_secret_sealed IS NOT NULL AND webhook_secret_key_id IS DISTINCT FROM ${input.primaryId}
      AND (${input.after ?? null}::uuid IS NULL OR id > ${input.after ?? null}::uuid)
    ORDER BY id LIMIT ${input.limit}`
  return rows.map((row) => ({
    id: row.id,
    sealed: row.webhook_secret_sealed,
    masterKeyId: row.webhook_secret_key_id,
  }))
}

/** The secret sealed anew, if the partner still holds the blob the rotation read. */
export async function replaceSealedSecret(
  db: Queryable,
  input: { id: string; from: Buffer; to: Buffer; keyId: string },
): Promise<boolean> {
  const rows = await db`
    UPDATE partners SET webhook_secret_sealed = ${input.to}, webhook_secret_key_id = ${input.keyId}
    WHERE id = ${input.id} AND webhook_secret_sealed = ${input.from}`
  return rows.count === 1
}
