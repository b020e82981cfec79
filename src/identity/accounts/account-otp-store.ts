import type { Queryable, Sql } from '../../data/database.ts'

/** account_otps (migration 0013): one-time codes of the identity module. */
export interface AccountOtpRow {
  id: string
  account_id: string
  channel: 'email' | 'sms'
  destination: string
  code_hmac: Buffer
  code_sealed: Buffer | null
  master_key_id: string
  created_at: Date
  expires_at: Date
  consumed_at: Date | null
  revoked_at: Date | null
  failed_attempts: number
  dispatch_status: 'queued' | 'sent' | 'failed'
  dispatch_error: string | null
}

/** What a new code is stored with. */
export type NewOtp = Pick<
  AccountOtpRow,
  | 'id'
  | 'account_id'
  | 'channel'
  | 'destination'
  | 'code_hmac'
  | 'code_sealed'
  | 'master_key_id'
  | 'created_at'
  | 'expires_at'
>

/**
 * A new code, unless `max` were made for the account and channel since `since`: false then. The
 * count and the insert run under a lock of the account and channel, so simultaneous sends cannot
 * all see room for one more. A new code revokes the account's older live ones of that channel.
 */
export async function insertOtpWithinLimit(
  sql: Sql,
  row: NewOtp,
  limit: { since: Date; max: number },
): Promise<boolean> {
  return sql.begin(async (tx) => {
    await tx`SELECT pg_advisory_xact_lock(hashtextextended(${`kms:otp-send:${row.account_id}:${row.channel}`}, 0))`
    if ((await countSentSince(tx, row.account_id, row.channel, limit.since)) >= limit.max) return false
    await insertOtp(tx, row)
    return true
  })
}

async function insertOtp(db: Queryable, row: NewOtp): Promise<void> {
  await db`
    UPDATE account_otps SET revoked_at = ${row.created_at}, code_sealed = NULL
    WHERE account_id = ${row.account_id} AND channel = ${row.channel} AND consumed_at IS NULL AND revoked_at IS NULL`
  await db`
    INSERT INTO account_otps (id, account_id, channel, destination, code_hmac, code_sealed, master_key_id,
      created_at, expires_at, dispatch_status)
    VALUES (${row.id}, ${row.account_id}, ${row.channel}, ${row.destination}, ${row.code_hmac}, ${row.code_sealed},
      ${row.master_key_id}, ${row.created_at}, ${row.expires_at}, 'queued')`
}

async function countSentSince(
  db: Queryable,
  accountId: string,
  channel: AccountOtpRow['channel'],
  since: Date,
): Promise<number> {
  const [row] = await db<{ n: number }[]>`
    SELECT count(*)::int AS n FROM account_otps
    WHERE account_id = ${accountId} AND channel = ${channel} AND created_at > ${since}`
  return row!.n
}

/**
 * Takes one try from the account's newest live code of the channel before it is compared, or
 * none when the code has had `max` tries: simultaneous guesses get at most `max` comparisons,
 * where counting after the comparison let every guess that started before the first failure
 * landed through. `failed_attempts` counts the tries taken; a right one is given back (consumeOtp).
 */
export async function reserveOtpTry(
  db: Queryable,
  accountId: string,
  channel: AccountOtpRow['channel'],
  now: Date,
  max: number,
): Promise<AccountOtpRow | undefined> {
  const [row] = await db<AccountOtpRow[]>`
    UPDATE account_otps SET failed_attempts = failed_attempts + 1
    WHERE id = (
        SELECT id FROM account_otps
        WHERE account_id = ${accountId} AND channel = ${channel} AND consumed_at IS NULL AND revoked_at IS NULL
          AND expires_at > ${now}
        ORDER BY created_at DESC LIMIT 1)
      AND failed_attempts < ${max} AND consumed_at IS NULL AND revoked_at IS NULL
    RETURNING *`
  return row
}

/** Uses the code once (its try was right, so not a failed one): false when another request used it first. */
export async function consumeOtp(db: Queryable, id: string, now: Date): Promise<boolean> {
  const rows = await db`
    UPDATE account_otps SET consumed_at = ${now}, code_sealed = NULL, failed_attempts = failed_attempts - 1
    WHERE id = ${id} AND consumed_at IS NULL AND revoked_at IS NULL`
  return rows.count === 1
}

/** After a wrong try (already counted): the code dies once its tries reached `max`. */
export async function failOtp(db: Queryable, id: string, max: number, now: Date): Promise<void> {
  await db`
    UPDATE account_otps SET revoked_at = ${now}, code_sealed = NULL
    WHERE id = ${id} AND failed_attempts >= ${max} AND consumed_at IS NULL AND revoked_at IS NULL`
}

export async function getOtp(db: Queryable, id: string): Promise<AccountOtpRow | undefined> {
  const [row] = await db<AccountOtpRow[]>`SELECT * FROM account_otps WHERE id = ${id}`
  return row
}

export async function recordOtpDispatch(
  db: Queryable,
  input: { id: string; status: 'sent' | 'failed'; error: string | null },
): Promise<void> {
  await db`
    UPDATE account_otps SET dispatch_status = ${input.status}, dispatch_error = ${input.error}, code_sealed = NULL
    WHERE id = ${input.id} AND dispatch_status = 'queued'`
}

/** Master key rotation: codes still sealed (not yet sent) under another key than `primaryId`, by id after `after`. */
export async function otpsToRewrap(
  db: Queryable,
  input: { primaryId: string; after: string | undefined; limit: number },
): Promise<{ id: string; sealed: Buffer; masterKeyId: string }[]> {
  const rows = await db<{ id: string; code_sealed: Buffer; master_key_id: string }[]>`
    SELECT id, code_sealed, master_key_id FROM account_otps
    WHERE code_sealed IS NOT NULL AND master_key_id <> ${input.primaryId}
      AND (${input.after ?? null}::uuid IS NULL OR id > ${input.after ?? null}::uuid)
    ORDER BY id LIMIT ${input.limit}`
  return rows.map((row) => ({ id: row.id, sealed: row.code_sealed, masterKeyId: row.master_key_id }))
}

/** The code sealed anew and its HMAC under the new key, if the row still holds the blob the rotation read. */
export async function replaceSealedOtp(
  db: Queryable,
  input: { id: string; from: Buffer; to: Buffer; codeHmac: Buffer; masterKeyId: string },
): Promise<boolean> {
  const rows = await db`
    UPDATE account_otps SET code_sealed = ${input.to}, code_hmac = ${input.codeHmac}, master_key_id = ${input.masterKeyId}
    WHERE id = ${input.id} AND code_sealed = ${input.from}`
  return rows.count === 1
}
