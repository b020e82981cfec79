import type { Queryable } from '../data/database.ts'

/** signups (migration 0020): only the sign-up module touches it. */
export interface SignupRow {
  id: string
  kind: 'tenant' | 'partner'
  email: string
  email_normalized: string
  organization_name: string
  referral_code: string | null
  token_hash: Buffer
  link_sealed: Buffer | null
  link_master_key_id: string | null
  created_at: Date
  expires_at: Date
  consumed_at: Date | null
  email_dispatch_status: 'queued' | 'sent' | 'failed'
  dispatch_error: string | null
  dispatched_at: Date | null
  tenant_id: string | null
  partner_id: string | null
}

export async function insertSignup(
  db: Queryable,
  row: Pick<
    SignupRow,
    | 'id'
    | 'kind'
    | 'email'
    | 'email_normalized'
    | 'organization_name'
    | 'referral_code'
    | 'token_hash'
    | 'link_sealed'
    | 'link_master_key_id'
    | 'created_at'
    | 'expires_at'
  >,
): Promise<SignupRow> {
  const [created] = await db<SignupRow[]>`
    INSERT INTO signups (id, kind, email, email_normalized, organization_name, referral_code, token_hash,
      link_sealed, link_master_key_id, created_at, expires_at, email_dispatch_status)
    VALUES (${row.id}, ${row.kind}, ${row.email}, ${row.email_normalized}, ${row.organization_name},
      ${row.referral_code}, ${row.token_hash}, ${row.link_sealed}, ${row.link_master_key_id}, ${row.created_at},
      ${row.expires_at}, 'queued')
    RETURNING *`
  return created!
}

/** How many sign-ups an address asked for since `since` (the per-address limit). */
export async function countRecentSignups(
  db: Queryable,
  emailNormalized: string,
  since: Date,
): Promise<number> {
  const [row] = await db<{ n: number }[]>`
    SELECT count(*)::int AS n FROM signups WHERE email_normalized = ${emailNormalized} AND created_at >= ${since}`
  return row?.n ?? 0
}

export async function getSignup(db: Queryable, id: string): Promise<SignupRow | undefined> {
  const [row] = await db<SignupRow[]>`SELECT * FROM signups WHERE id = ${id}`
  return row
}

/** The unused, unexpired sign-up whose link carries this token. */
export async function findLiveSignup(
  db: Queryable,
  tokenHash: Buffer,
  now: Date,
): Promise<SignupRow | undefined> {
  const [row] = await db<SignupRow[]>`
    SELECT * FROM signups
    WHERE token_hash = ${tokenHash} AND consumed_at IS NULL AND expires_at > ${now}`
  return row
}

/**
 * Uses the link once: the row is locked and marked, so of two confirmations one wins and the
 * other finds nothing. The link itself is dropped with it.
 */
export async function consumeSignup(
  db: Queryable,
  tokenHash: Buffer,
  now: Date,
): Promise<SignupRow | undefined> {
  const [row] = await db<SignupRow[]>`
    UPDATE signups SET consumed_at = ${now}, link_sealed = NULL
    WHERE token_hash = ${tokenHash} AND consumed_at IS NULL AND expires_at > ${now}
    RETURNING *`
  return row
}

/** What the confirmation created. */
export async function recordOutcome(
  db: Queryable,
  id: string,
  outcome: { tenantId: string | null; partnerId: string | null },
): Promise<void> {
  await db`UPDATE signups SET tenant_id = ${outcome.tenantId}, partner_id = ${outcome.partnerId} WHERE id = ${id}`
}

export async function recordSignupDispatch(
  db: Queryable,
  input: { id: string; status: 'sent' | 'failed'; error: string | null; now: Date },
): Promise<boolean> {
  const rows = await db`
    UPDATE signups SET email_dispatch_status = ${input.status}, dispatch_error = ${input.error},
      dispatched_at = ${input.now}, link_sealed = NULL
    WHERE id = ${input.id} AND email_dispatch_status = 'queued'`
  return rows.count > 0
}

/** Queued e-mails whose job was lost (still queued long after they were asked for), to send again. */
export async function overdueSignups(db: Queryable, before: Date, now: Date): Promise<SignupRow[]> {
  return db<SignupRow[]>`
    SELECT * FROM signups
    WHERE email_dispatch_status = 'queued' AND created_at < ${before} AND expires_at > ${now}
      AND consumed_at IS NULL
    ORDER BY created_at LIMIT 500`
}

/** Master key rotation: links still sealed under another key than `primaryId`, by id after `after`. */
export async function signupLinksToRewrap(
  db: Queryable,
  input: { primaryId: string; after: string | undefined; limit: number },
): Promise<{ id: string; sealed: Buffer; masterKeyId: string }[]> {
  const rows = await db<{ id: string; link_sealed: Buffer; link_master_key_id: string }[]>`
    SELECT id, link_sealed, link_master_key_id FROM signups
    WHERE link_sealed IS NOT NULL AND link_master_key_id <> ${input.primaryId}
      AND (${input.after ?? null}::uuid IS NULL OR id > ${input.after ?? null}::uuid)
    ORDER BY id LIMIT ${input.limit}`
  return rows.map((row) => ({ id: row.id, sealed: row.link_sealed, masterKeyId: row.link_master_key_id }))
}

/** The link sealed anew, if the row still holds the blob the rotation read (not sent meanwhile). */
export async function replaceSealedSignupLink(
  db: Queryable,
  input: { id: string; from: Buffer; to: Buffer; masterKeyId: string },
): Promise<boolean> {
  const rows = await db`
    UPDATE signups SET link_sealed = ${input.to}, link_master_key_id = ${input.masterKeyId}
    WHERE id = ${input.id} AND link_sealed = ${input.from}`
  return rows.count === 1
}
