import type { Queryable, Sql } from '../../data/database.ts'

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

/**
 * One count an attempt is held to: an account from an address, an address (subject `*`), or an
 * account's factor from every address together (client `*`).
 */
export interface ThrottleCounter {
  subject: string
  clientIp: string
  limit: number
}

interface ThrottleRow {
  failures: number
  window_started_at: Date
  locked_until: Date | null
}

export type Reservation = { reserved: true } | { reserved: false; retryAfterMs: number }

/**
 * Takes one attempt from every counter, or from none, before the slow check runs: a burst of
 * simultaneous requests gets at most `limit` reservations, where counting failures after the
 * check let every request that started before the first failure landed through. `failures`
 * counts reservations in the window that no success has given back (the checks still running
 * included). A counter refuses while it is locked, or while its reservations fill its limit.
 * The rows are locked in one order (subject, client) in one transaction, so two reservations
 * never wait on each other in a cycle.
 */
export async function reserveAttempt(
  sql: Sql,
  input: { counters: readonly ThrottleCounter[]; now: Date; windowMs: number },
): Promise<Reservation> {
  const { counters, now } = input
  const nowMs = now.getTime()
  const windowStart = new Date(nowMs - input.windowMs)
  const subjects = counters.map((c) => c.subject)
  const clientIps = counters.map((c) => c.clientIp)
  return sql.begin(async (tx) => {
    await tx`
      INSERT INTO sign_in_throttle (subject, client_ip, failures, window_started_at)
      SELECT subject, client_ip, 0, ${now}::timestamptz
      FROM unnest(${subjects}::text[], ${clientIps}::text[]) AS c(subject, client_ip)
      ORDER BY subject, client_ip
      ON CONFLICT (subject, client_ip) DO NOTHING`
    const rows = await tx<(ThrottleRow & { subject: string; client_ip: string })[]>`
      SELECT subject, client_ip, failures, window_started_at, locked_until FROM sign_in_throttle
      WHERE (subject, client_ip) IN (SELECT * FROM unnest(${subjects}::text[], ${clientIps}::text[]))
      ORDER BY subject, client_ip
      FOR UPDATE`
    let retryAfterMs = 0
    for (const row of rows) {
      const limit = counters.find((c) => c.subject === row.subject && c.clientIp === row.client_ip)!.limit
      const lockedUntil = row.locked_until?.getTime()
      if (lockedUntil !== undefined && lockedUntil > nowMs) {
        retryAfterMs = Math.max(retryAfterMs, lockedUntil - nowMs)
        continue
      }
      // An ended window or an ended lock starts the count again (the UPDATE below says the same).
      const fresh = row.window_started_at < windowStart || lockedUntil !== undefined
      if (!fresh && row.failures >= limit) {
        // Full with checks still running: each that fails locks the counter, so refuse until then.
        const windowEnds = row.window_started_at.getTime() + input.windowMs
        retryAfterMs = Math.max(retryAfterMs, windowEnds - nowMs, 1000)
      }
    }
    if (retryAfterMs > 0) return { reserved: false, retryAfterMs } as const
    await tx`
      UPDATE sign_in_throttle SET
        failures = CASE WHEN window_started_at < ${windowStart} OR locked_until IS NOT NULL THEN 1 ELSE failures + 1 END,
        window_started_at = CASE WHEN window_started_at < ${windowStart} OR locked_until IS NOT NULL
          THEN ${now}::timestamptz ELSE window_started_at END,
        locked_until = NULL
      WHERE (subject, client_ip) IN (SELECT * FROM unnest(${subjects}::text[], ${clientIps}::text[]))`
    return { reserved: true } as const
  })
}

/**
 * After a failed check (its reservation stays counted): a counter whose reservations reached its
 * limit is locked for `lockMs`, its count starting again after. One row per statement, so this
 * never holds one row while waiting for another (reserveAttempt holds several, in order).
 */
export async function lockSpentCounters(
  db: Queryable,
  input: { counters: readonly ThrottleCounter[]; now: Date; lockMs: number },
): Promise<void> {
  const lockUntil = new Date(input.now.getTime() + input.lockMs)
  for (const c of input.counters) {
    await db`
      UPDATE sign_in_throttle SET locked_until = ${lockUntil}, failures = 0, window_started_at = ${input.now}
      WHERE subject = ${c.subject} AND client_ip = ${c.clientIp} AND failures >= ${c.limit}
        AND (locked_until IS NULL OR locked_until <= ${input.now})`
  }
}

/**
 * Gives a successful attempt's reservation back to a shared counter (an address, an account from
 * every address): a success is not a failure, yet it forgives nobody else's failures.
 */
export async function releaseAttempt(db: Queryable, subject: string, clientIp: string): Promise<void> {
  await db`
    UPDATE sign_in_throttle SET failures = failures - 1
    WHERE subject = ${subject} AND client_ip = ${clientIp} AND failures > 0`
}

export async function clearFailures(db: Queryable, subject: string, clientIp: string): Promise<void> {
  await db`DELETE FROM sign_in_throttle WHERE subject = ${subject} AND client_ip = ${clientIp}`
}

/**
 * Deletes rows whose window and lock both ended before `before`. Rows a reservation holds are
 * skipped, not waited for: deleting many rows in no set order while waiting could close a cycle
 * with a reservation that holds several (a deadlock); they go in a later sweep.
 */
export async function sweepThrottle(db: Queryable, before: Date): Promise<number> {
  const rows = await db`
    DELETE FROM sign_in_throttle
    WHERE (subject, client_ip) IN (
      SELECT subject, client_ip FROM sign_in_throttle
      WHERE window_started_at < ${before} AND (locked_until IS NULL OR locked_until < ${before})
      FOR UPDATE SKIP LOCKED)`
  return rows.count
}

/** Master key rotation: TOTP secrets sealed under another key than `primaryId`, by account id after `after`. */
export async function totpSecretsToRewrap(
  db: Queryable,
  input: { primaryId: string; after: string | undefined; limit: number },
): Promise<{ id: string; sealed: Buffer; masterKeyId: string }[]> {
  const rows = await db<{ id: string; totp_secret_sealed: Buffer; totp_master_key_id: string }[]>`
    SELECT id, totp_secret_sealed, totp_master_key_id FROM accounts
    WHERE totp_secret_sealed IS NOT NULL AND totp_master_key_id <> ${input.primaryId}
      AND (${input.after ?? null}::uuid IS NULL OR id > ${input.after ?? null}::uuid)
    ORDER BY id LIMIT ${input.limit}`
  return rows.map((row) => ({
    id: row.id,
    sealed: row.totp_secret_sealed,
    masterKeyId: row.totp_master_key_id,
  }))
}

/**
 * The TOTP secret sealed anew, if the account still holds the blob the rotation read; its
 * enrolment and last step stay as they are (the secret itself does not change).
 */
export async function replaceSealedTotp(
  db: Queryable,
  input: { id: string; from: Buffer; to: Buffer; masterKeyId: string },
): Promise<boolean> {
  const rows = await db`
    UPDATE accounts SET totp_secret_sealed = ${input.to}, totp_master_key_id = ${input.masterKeyId}
    WHERE id = ${input.id} AND totp_secret_sealed = ${input.from}`
  return rows.count === 1
}
