import type { Queryable } from '../platform/database.ts'

/** The accounts table (migration 0008). Only the identity module reads or writes it. */
export interface AccountRow {
  id: string
  realm: string
  email: string
  email_normalized: string
  display_name: string | null
  password_hash: string | null
  password_changed_at: Date | null
  totp_secret_sealed: Buffer | null
  totp_master_key_id: string | null
  totp_enrolled_at: Date | null
  totp_last_step: string | null
  disabled_at: Date | null
  phone_number: string | null
  phone_verified_at: Date | null
  created_at: Date
  updated_at: Date
}

export async function insertAccount(
  db: Queryable,
  row: {
    id: string
    realm: string
    email: string
    emailNormalized: string
    displayName: string | null
    passwordHash: string | null
  },
): Promise<AccountRow> {
  const [created] = await db<AccountRow[]>`
    INSERT INTO accounts (id, realm, email, email_normalized, display_name, password_hash, password_changed_at)
    VALUES (${row.id}, ${row.realm}, ${row.email}, ${row.emailNormalized}, ${row.displayName}, ${row.passwordHash},
            ${row.passwordHash ? new Date() : null})
    RETURNING *`
  return created!
}

export async function getAccount(db: Queryable, id: string): Promise<AccountRow | undefined> {
  const [row] = await db<AccountRow[]>`SELECT * FROM accounts WHERE id = ${id}`
  return row
}

export async function getAccounts(db: Queryable, ids: readonly string[]): Promise<AccountRow[]> {
  if (ids.length === 0) return []
  return db<AccountRow[]>`SELECT * FROM accounts WHERE id = ANY(${ids as string[]}::uuid[])`
}

export async function findAccountByEmail(
  db: Queryable,
  realm: string,
  emailNormalized: string,
): Promise<AccountRow | undefined> {
  const [row] = await db<AccountRow[]>`
    SELECT * FROM accounts WHERE realm = ${realm} AND email_normalized = ${emailNormalized}`
  return row
}

export async function setPasswordHash(db: Queryable, id: string, hash: string): Promise<boolean> {
  const rows = await db`
    UPDATE accounts SET password_hash = ${hash}, password_changed_at = now(), updated_at = now()
    WHERE id = ${id}`
  return rows.count === 1
}

export async function setTotpSecret(
  db: Queryable,
  id: string,
  sealed: Buffer,
  masterKeyId: string,
): Promise<void> {
  await db`
    UPDATE accounts SET totp_secret_sealed = ${sealed}, totp_master_key_id = ${masterKeyId},
      totp_enrolled_at = NULL, totp_last_step = NULL, updated_at = now()
    WHERE id = ${id} AND totp_enrolled_at IS NULL`
}

/** Marks the pending secret enrolled and remembers the step used, once. */
export async function confirmTotp(db: Queryable, id: string, step: number): Promise<boolean> {
  const rows = await db`
    UPDATE accounts SET totp_enrolled_at = now(), totp_last_step = ${step}, updated_at = now()
    WHERE id = ${id} AND totp_enrolled_at IS NULL AND totp_secret_sealed IS NOT NULL`
  return rows.count === 1
}

/** Accepts a step only if it is later than the last accepted one: a code is single use. */
export async function useTotpStep(db: Queryable, id: string, step: number): Promise<boolean> {
  const rows = await db`
    UPDATE accounts SET totp_last_step = ${step}
    WHERE id = ${id} AND totp_enrolled_at IS NOT NULL AND (totp_last_step IS NULL OR totp_last_step < ${step})`
  return rows.count === 1
}

export async function clearTotp(db: Queryable, id: string): Promise<void> {
  await db`
    UPDATE accounts SET totp_secret_sealed = NULL, totp_master_key_id = NULL, totp_enrolled_at = NULL,
      totp_last_step = NULL, updated_at = now()
    WHERE id = ${id}`
}

/** A phone number proven by a code sent to it: the account's SMS factor. */
export async function setVerifiedPhone(db: Queryable, id: string, phone: string): Promise<void> {
  await db`
    UPDATE accounts SET phone_number = ${phone}, phone_verified_at = now(), updated_at = now() WHERE id = ${id}`
}

/** Sign-in enabled (NULL) or disabled (a time): the identity half of blocking an end-user. */
export async function setDisabled(db: Queryable, id: string, disabledAt: Date | null): Promise<boolean> {
  const rows = await db`
    UPDATE accounts SET disabled_at = ${disabledAt}, updated_at = now() WHERE id = ${id}`
  return rows.count === 1
}

/** Removes the account (its one-time links go with it); false when it was already gone. */
export async function deleteAccount(db: Queryable, id: string): Promise<boolean> {
  const rows = await db`DELETE FROM accounts WHERE id = ${id}`
  return rows.count === 1
}

// --- sign-in throttling ------------------------------------------------------------------

export interface ThrottleRow {
  failures: number
  window_started_at: Date
  locked_until: Date | null
}

export async function getThrottle(
  db: Queryable,
  subject: string,
  clientIp: string,
): Promise<ThrottleRow | undefined> {
  const [row] = await db<ThrottleRow[]>`
    SELECT failures, window_started_at, locked_until FROM sign_in_throttle
    WHERE subject = ${subject} AND client_ip = ${clientIp}`
  return row
}

/**
 * Counts one failure in the window (a new window when the old one ended) and locks the pair once
 * the count reaches the limit. One statement: concurrent failures cannot lose a count.
 */
export async function recordFailure(
  db: Queryable,
  input: { subject: string; clientIp: string; now: Date; windowMs: number; limit: number; lockMs: number },
): Promise<ThrottleRow> {
  const windowStart = new Date(input.now.getTime() - input.windowMs)
  const lockUntil = new Date(input.now.getTime() + input.lockMs)
  const [row] = await db<ThrottleRow[]>`
    INSERT INTO sign_in_throttle AS t (subject, client_ip, failures, window_started_at)
    VALUES (${input.subject}, ${input.clientIp}, 1, ${input.now})
    ON CONFLICT (subject, client_ip) DO UPDATE SET
      failures = CASE WHEN t.window_started_at < ${windowStart} THEN 1 ELSE t.failures + 1 END,
      window_started_at = CASE WHEN t.window_started_at < ${windowStart} THEN ${input.now} ELSE t.window_started_at END
    RETURNING failures, window_started_at, locked_until`
  if (row!.failures >= input.limit) {
    await db`
      UPDATE sign_in_throttle SET locked_until = ${lockUntil}, failures = 0, window_started_at = ${input.now}
      WHERE subject = ${input.subject} AND client_ip = ${input.clientIp}`
    return { ...row!, locked_until: lockUntil }
  }
  return row!
}

export async function clearFailures(db: Queryable, subject: string, clientIp: string): Promise<void> {
  await db`DELETE FROM sign_in_throttle WHERE subject = ${subject} AND client_ip = ${clientIp}`
}

export async function sweepThrottle(db: Queryable, before: Date): Promise<number> {
  const rows = await db`
    DELETE FROM sign_in_throttle
    WHERE window_started_at < ${before} AND (locked_until IS NULL OR locked_until < ${before})`
  return rows.count
}
