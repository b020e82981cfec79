import type { Queryable } from '../data/database.ts'

/** enduser_signup_requests (migration 0027): only the end-users module touches it. */
export interface SignUpRequestRow {
  id: string
  tenant_id: string
  application_id: string
  email: string
  email_normalized: string
  address_key: string
  token_hash: Buffer
  link_sealed: Buffer | null
  link_master_key_id: string | null
  created_at: Date
  expires_at: Date
  consumed_at: Date | null
  email_dispatch_status: 'queued' | 'sent' | 'failed'
  dispatch_error: string | null
  dispatched_at: Date | null
  enduser_id: string | null
}

/** Arbitrary constant: the first key of the per-address advisory locks (two-key form). */
const ADDRESS_LOCK_CLASS = 300_007

/**
 * Serialises the sign-ups of one address of a tenant until the caller's transaction ends, so the
 * count and the insert that follows it cannot interleave with another request's.
 */
export async function lockSignUpAddress(db: Queryable, tenantId: string, addressKey: string): Promise<void> {
  await db`SELECT pg_advisory_xact_lock(${ADDRESS_LOCK_CLASS}, hashtext(${`${tenantId}:${addressKey}`}))`
}

/** How many sign-ups the address (by its key) asked for in the tenant since `since`. */
export async function countSignUpRequestsSince(
  db: Queryable,
  tenantId: string,
  addressKey: string,
  since: Date,
): Promise<number> {
  const [row] = await db<{ n: number }[]>`
    SELECT count(*)::int AS n FROM enduser_signup_requests
    WHERE tenant_id = ${tenantId} AND address_key = ${addressKey} AND created_at >= ${since}`
  return row?.n ?? 0
}

export async function insertSignUpRequest(
  db: Queryable,
  row: Pick<
    SignUpRequestRow,
    | 'id'
    | 'tenant_id'
    | 'application_id'
    | 'email'
    | 'email_normalized'
    | 'address_key'
    | 'token_hash'
    | 'link_sealed'
    | 'link_master_key_id'
    | 'created_at'
    | 'expires_at'
  >,
): Promise<void> {
  await db`
    INSERT INTO enduser_signup_requests (id, tenant_id, application_id, email, email_normalized, address_key,
      token_hash, link_sealed, link_master_key_id, created_at, expires_at, email_dispatch_status)
    VALUES (${row.id}, ${row.tenant_id}, ${row.application_id}, ${row.email}, ${row.email_normalized},
      ${row.address_key}, ${row.token_hash}, ${row.link_sealed}, ${row.link_master_key_id}, ${row.created_at},
      ${row.expires_at}, 'queued')`
}

export async function getSignUpRequest(db: Queryable, id: string): Promise<SignUpRequestRow | undefined> {
  const [row] = await db<SignUpRequestRow[]>`SELECT * FROM enduser_signup_requests WHERE id = ${id}`
  return row
}

/** The unused, unexpired request whose link carries this token. */
export async function findLiveSignUpRequest(
  db: Queryable,
  tokenHash: Buffer,
  now: Date,
): Promise<SignUpRequestRow | undefined> {
  const [row] = await db<SignUpRequestRow[]>`
    SELECT * FROM enduser_signup_requests
    WHERE token_hash = ${tokenHash} AND consumed_at IS NULL AND expires_at > ${now}`
  return row
}

/**
 * Uses the link once: of two submissions of it, one marks the row and the other finds nothing
 * (the row stays locked until the first one's transaction ends). The link itself is dropped.
 */
export async function consumeSignUpRequest(
  db: Queryable,
  tokenHash: Buffer,
  now: Date,
): Promise<SignUpRequestRow | undefined> {
  const [row] = await db<SignUpRequestRow[]>`
    UPDATE enduser_signup_requests SET consumed_at = ${now}, link_sealed = NULL
    WHERE token_hash = ${tokenHash} AND consumed_at IS NULL AND expires_at > ${now}
    RETURNING *`
  return row
}

/** The end-user the link created. */
export async function recordSignUpEndUser(db: Queryable, id: string, endUserId: string): Promise<void> {
  await db`UPDATE enduser_signup_requests SET enduser_id = ${endUserId} WHERE id = ${id}`
}

export async function recordSignUpDispatch(
  db: Queryable,
  input: { id: string; status: 'sent' | 'failed'; error: string | null; now: Date },
): Promise<boolean> {
  const rows = await db`
    UPDATE enduser_signup_requests SET email_dispatch_status = ${input.status}, dispatch_error = ${input.error},
      dispatched_at = ${input.now}, link_sealed = NULL
    WHERE id = ${input.id} AND email_dispatch_status = 'queued'`
  return rows.count > 0
}

/** Queued e-mails whose job was lost (still queued long after they were asked for), to send again. */
export async function overdueSignUpRequests(
  db: Queryable,
  before: Date,
  now: Date,
): Promise<SignUpRequestRow[]> {
  return db<SignUpRequestRow[]>`
    SELECT * FROM enduser_signup_requests
    WHERE email_dispatch_status = 'queued' AND created_at < ${before} AND expires_at > ${now}
      AND consumed_at IS NULL
    ORDER BY created_at LIMIT 500`
}

/** Master key rotation: sign-up links still sealed under another key than `primaryId`, by id after `after`. */
export async function signUpLinksToRewrap(
  db: Queryable,
  input: { primaryId: string; after: string | undefined; limit: number },
): Promise<{ id: string; sealed: Buffer; masterKeyId: string }[]> {
  const rows = await db<{ id: string; link_sealed: Buffer; link_master_key_id: string }[]>`
    SELECT id, link_sealed, link_master_key_id FROM enduser_signup_requests
    WHERE link_sealed IS NOT NULL AND link_master_key_id <> ${input.primaryId}
      AND (${input.after ?? null}::uuid IS NULL OR id > ${input.after ?? null}::uuid)
    ORDER BY id LIMIT ${input.limit}`
  return rows.map((row) => ({ id: row.id, sealed: row.link_sealed, masterKeyId: row.link_master_key_id }))
}

/** The link sealed anew, if the row still holds the blob the rotation read (not sent meanwhile). */
export async function replaceSealedSignUpLink(
  db: Queryable,
  input: { id: string; from: Buffer; to: Buffer; masterKeyId: string },
): Promise<boolean> {
  const rows = await db`
    UPDATE enduser_signup_requests SET link_sealed = ${input.to}, link_master_key_id = ${input.masterKeyId}
    WHERE id = ${input.id} AND link_sealed = ${input.from}`
  return rows.count === 1
}
