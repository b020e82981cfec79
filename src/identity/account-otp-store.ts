import type { Queryable } from '../platform/database.ts'

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

/** A new code for a channel revokes the account's older live ones of that channel. */
export async function insertOtp(
  db: Queryable,
  row: Pick<
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
  >,
): Promise<void> {
  await db`
    UPDATE account_otps SET revoked_at = ${row.created_at}, code_sealed = NULL
    WHERE account_id = ${row.account_id} AND channel = ${row.channel} AND consumed_at IS NULL AND revoked_at IS NULL`
  await db`
    INSERT INTO account_otps (id, account_id, channel, destination, code_hmac, code_sealed, master_key_id,
      created_at, expires_at, dispatch_status)
    VALUES (${row.id}, ${row.account_id}, ${row.channel}, ${row.destination}, ${row.code_hmac}, ${row.code_sealed},
      ${row.master_key_id}, ${row.created_at}, ${row.expires_at}, 'queued')`
}

export async function countSentSince(
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

export async function liveOtp(
  db: Queryable,
  accountId: string,
  channel: AccountOtpRow['channel'],
  now: Date,
): Promise<AccountOtpRow | undefined> {
  const [row] = await db<AccountOtpRow[]>`
    SELECT * FROM account_otps
    WHERE account_id = ${accountId} AND channel = ${channel} AND consumed_at IS NULL AND revoked_at IS NULL
      AND expires_at > ${now}
    ORDER BY created_at DESC LIMIT 1`
  return row
}

/** Uses the code once: false when another request used it first. */
export async function consumeOtp(db: Queryable, id: string, now: Date): Promise<boolean> {
  const rows = await db`
    UPDATE account_otps SET consumed_at = ${now}, code_sealed = NULL
    WHERE id = ${id} AND consumed_at IS NULL AND revoked_at IS NULL`
  return rows.count === 1
}

/** Counts a wrong try; the code dies at `max`. */
export async function failOtp(db: Queryable, id: string, max: number, now: Date): Promise<void> {
  await db`
    UPDATE account_otps SET failed_attempts = failed_attempts + 1,
      revoked_at = CASE WHEN failed_attempts + 1 >= ${max} THEN ${now}::timestamptz ELSE revoked_at END,
      code_sealed = CASE WHEN failed_attempts + 1 >= ${max} THEN NULL ELSE code_sealed END
    WHERE id = ${id}`
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
