import type { Queryable } from '../../data/database.ts'

/** oidc_session_factors (migration 0028). Only the identity module touches it. */

export type SecondFactor = 'totp' | 'email' | 'sms'

/** The factors one session has satisfied for one account, with when each was last proven. */
export async function factorsOfSession(
  db: Queryable,
  sessionUid: string,
  accountId: string,
): Promise<Map<SecondFactor, Date>> {
  const rows = await db<{ factor: SecondFactor; satisfied_at: Date }[]>`
    SELECT factor, satisfied_at FROM oidc_session_factors
    WHERE session_uid = ${sessionUid} AND account_id = ${accountId} AND expires_at > now()`
  return new Map(rows.map((row) => [row.factor, row.satisfied_at]))
}

/**
 * Records factors just proven. A row of another account under the same uid (the session changed
 * hands through a new login) is replaced: its factors were never this account's.
 */
export async function recordSessionFactors(
  db: Queryable,
  input: { sessionUid: string; accountId: string; factors: SecondFactor[]; at: Date; expiresAt: Date },
): Promise<void> {
  if (input.factors.length === 0) return
  await db`
    INSERT INTO oidc_session_factors (session_uid, account_id, factor, satisfied_at, expires_at)
    SELECT ${input.sessionUid}, ${input.accountId}, factor, ${input.at}, ${input.expiresAt}
    FROM unnest(${db.array(input.factors)}::text[]) AS factor
    ON CONFLICT (session_uid, factor) DO UPDATE SET
      account_id = EXCLUDED.account_id, satisfied_at = EXCLUDED.satisfied_at, expires_at = EXCLUDED.expires_at`
}

/** A session whose account changed keeps nothing of the previous account's proofs. */
export async function forgetOtherAccounts(
  db: Queryable,
  sessionUid: string,
  accountId: string,
): Promise<void> {
  await db`DELETE FROM oidc_session_factors WHERE session_uid = ${sessionUid} AND account_id <> ${accountId}`
}

export async function destroyFactorsOfAccount(db: Queryable, accountId: string): Promise<void> {
  await db`DELETE FROM oidc_session_factors WHERE account_id = ${accountId}`
}

export async function sweepExpiredFactors(db: Queryable, limit: number): Promise<number> {
  const rows = await db`
    DELETE FROM oidc_session_factors WHERE ctid IN (
      SELECT ctid FROM oidc_session_factors WHERE expires_at < now() LIMIT ${limit})`
  return rows.count
}
