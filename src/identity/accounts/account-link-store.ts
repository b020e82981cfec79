import type { Queryable } from '../../data/database.ts'

/** account_links (migration 0012): one-time links of the identity module. */
export interface AccountLinkRow {
  id: string
  account_id: string
  kind: 'reset' | 'setup'
  application_id: string | null
  token_hash: Buffer
  link_sealed: Buffer | null
  link_master_key_id: string | null
  created_at: Date
  expires_at: Date
  consumed_at: Date | null
  revoked_at: Date | null
  email_dispatch_status: 'queued' | 'sent' | 'failed'
  dispatch_error: string | null
  dispatched_at: Date | null
}

/** A new link of a kind revokes the account's older ones of that kind, in the same statement group. */
export async function insertLink(
  db: Queryable,
  row: Pick<
    AccountLinkRow,
    | 'id'
    | 'account_id'
    | 'kind'
    | 'application_id'
    | 'token_hash'
    | 'link_sealed'
    | 'link_master_key_id'
    | 'created_at'
    | 'expires_at'
  >,
): Promise<AccountLinkRow> {
  await db`
    UPDATE account_links SET revoked_at = ${row.created_at}, link_sealed = NULL
    WHERE account_id = ${row.account_id} AND kind = ${row.kind} AND consumed_at IS NULL AND revoked_at IS NULL`
  const [created] = await db<AccountLinkRow[]>`
    INSERT INTO account_links (id, account_id, kind, application_id, token_hash, link_sealed, link_master_key_id,
      created_at, expires_at, email_dispatch_status)
    VALUES (${row.id}, ${row.account_id}, ${row.kind}, ${row.application_id}, ${row.token_hash}, ${row.link_sealed},
      ${row.link_master_key_id}, ${row.created_at}, ${row.expires_at}, 'queued')
    RETURNING *`
  return created!
}

/** Arbitrary constant: the first key of the per-account advisory locks of links (two-key form). */
const LINKS_LOCK_CLASS = 300_012

/**
 * Serialises the self-service requests of one account until the caller's transaction ends, so
 * the cap's count and the link that follows it cannot interleave with a concurrent request's.
 */
export async function lockLinksOf(db: Queryable, accountId: string): Promise<void> {
  await db`SELECT pg_advisory_xact_lock(${LINKS_LOCK_CLASS}, hashtext(${accountId}))`
}

/** How many links of a kind the account was given since `since` (the self-service request cap). */
export async function countLinksSince(
  db: Queryable,
  accountId: string,
  kind: AccountLinkRow['kind'],
  since: Date,
): Promise<number> {
  const [row] = await db<{ count: number }[]>`
    SELECT count(*)::int AS count FROM account_links
    WHERE account_id = ${accountId} AND kind = ${kind} AND created_at > ${since}`
  return row?.count ?? 0
}

export async function getLink(db: Queryable, id: string): Promise<AccountLinkRow | undefined> {
  const [row] = await db<AccountLinkRow[]>`SELECT * FROM account_links WHERE id = ${id}`
  return row
}

/** The live link with this token for this account and kind (unused, unrevoked, unexpired at `now`). */
export async function findLiveLink(
  db: Queryable,
  input: { accountId: string; kind: AccountLinkRow['kind']; tokenHash: Buffer; now: Date },
): Promise<AccountLinkRow | undefined> {
  const [row] = await db<AccountLinkRow[]>`
    SELECT * FROM account_links
    WHERE token_hash = ${input.tokenHash} AND account_id = ${input.accountId} AND kind = ${input.kind}
      AND consumed_at IS NULL AND revoked_at IS NULL AND expires_at > ${input.now}`
  return row
}

/** Uses the link: one atomic update, so two submissions of one link cannot both succeed. */
export async function consumeLink(
  db: Queryable,
  input: { accountId: string; kind: AccountLinkRow['kind']; tokenHash: Buffer; now: Date },
): Promise<AccountLinkRow | undefined> {
  const [row] = await db<AccountLinkRow[]>`
    UPDATE account_links SET consumed_at = ${input.now}, link_sealed = NULL
    WHERE token_hash = ${input.tokenHash} AND account_id = ${input.accountId} AND kind = ${input.kind}
      AND consumed_at IS NULL AND revoked_at IS NULL AND expires_at > ${input.now}
    RETURNING *`
  return row
}

/** Records the e-mail's outcome once; the sealed link is dropped with it. */
export async function recordLinkDispatch(
  db: Queryable,
  input: { id: string; status: 'sent' | 'failed'; error: string | null },
): Promise<boolean> {
  const rows = await db`
    UPDATE account_links SET email_dispatch_status = ${input.status}, dispatch_error = ${input.error},
      dispatched_at = now(), link_sealed = NULL
    WHERE id = ${input.id} AND email_dispatch_status = 'queued'`
  return rows.count === 1
}

/** Queued e-mails whose job was lost (queued before `before`, still live). */
export async function overdueLinks(db: Queryable, before: Date): Promise<{ id: string }[]> {
  return db<{ id: string }[]>`
    SELECT id FROM account_links
    WHERE email_dispatch_status = 'queued' AND created_at < ${before} AND revoked_at IS NULL
      AND consumed_at IS NULL AND link_sealed IS NOT NULL
    ORDER BY created_at LIMIT 100`
}

/** Master key rotation: links still sealed under another key than `primaryId`, by id after `after`. */
export async function linksToRewrap(
  db: Queryable,
  input: { primaryId: string; after: string | undefined; limit: number },
): Promise<{ id: string; sealed: Buffer; masterKeyId: string }[]> {
  const rows = await db<{ id: string; link_sealed: Buffer; link_master_key_id: string }[]>`
    SELECT id, link_sealed, link_master_key_id FROM account_links
    WHERE link_sealed IS NOT NULL AND link_master_key_id <> ${input.primaryId}
      AND (${input.after ?? null}::uuid IS NULL OR id > ${input.after ?? null}::uuid)
    ORDER BY id LIMIT ${input.limit}`
  return rows.map((row) => ({ id: row.id, sealed: row.link_sealed, masterKeyId: row.link_master_key_id }))
}

/** The link sealed anew, if the row still holds the blob the rotation read (not sent meanwhile). */
export async function replaceSealedLink(
  db: Queryable,
  input: { id: string; from: Buffer; to: Buffer; masterKeyId: string },
): Promise<boolean> {
  const rows = await db`
    UPDATE account_links SET link_sealed = ${input.to}, link_master_key_id = ${input.masterKeyId}
    WHERE id = ${input.id} AND link_sealed = ${input.from}`
  return rows.count === 1
}
