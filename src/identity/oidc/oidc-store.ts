import type { Queryable } from '../../data/database.ts'

/** oidc_models and oidc_signing_keys (migration 0008). Only the identity module touches them. */

export interface ModelRow {
  payload: Record<string, unknown>
  consumed_at: Date | null
}

export async function upsertModel(
  db: Queryable,
  row: { model: string; id: string; payload: Record<string, unknown>; expiresAt: Date | null },
): Promise<void> {
  const grantId = typeof row.payload['grantId'] === 'string' ? row.payload['grantId'] : null
  const uid = typeof row.payload['uid'] === 'string' ? row.payload['uid'] : null
  const userCode = typeof row.payload['userCode'] === 'string' ? row.payload['userCode'] : null
  await db`
    INSERT INTO oidc_models (model, id, payload, grant_id, uid, user_code, expires_at)
    VALUES (${row.model}, ${row.id}, ${db.json(row.payload as never)}, ${grantId}, ${uid}, ${userCode}, ${row.expiresAt})
    ON CONFLICT (model, id) DO UPDATE SET
      payload = EXCLUDED.payload, grant_id = EXCLUDED.grant_id, uid = EXCLUDED.uid,
      user_code = EXCLUDED.user_code, expires_at = EXCLUDED.expires_at`
}

/** Expired rows are as good as gone, whether or not the sweep has reached them. */
export async function findModel(
  db: Queryable,
  model: string,
  column: 'id' | 'uid' | 'user_code',
  value: string,
): Promise<ModelRow | undefined> {
  const [row] = await db<ModelRow[]>`
    SELECT payload, consumed_at FROM oidc_models
    WHERE model = ${model} AND ${db(column)} = ${value} AND (expires_at IS NULL OR expires_at > now())
    LIMIT 1`
  return row
}

export async function consumeModel(db: Queryable, model: string, id: string): Promise<void> {
  await db`UPDATE oidc_models SET consumed_at = now() WHERE model = ${model} AND id = ${id} AND consumed_at IS NULL`
}

export async function destroyModel(db: Queryable, model: string, id: string): Promise<void> {
  await db`DELETE FROM oidc_models WHERE model = ${model} AND id = ${id}`
}

export async function destroyByGrant(db: Queryable, grantId: string): Promise<void> {
  await db`DELETE FROM oidc_models WHERE grant_id = ${grantId} OR (model = 'Grant' AND id = ${grantId})`
}

/**
 * The account's grants of one client that include a resource (a member removed from a tenant:
 * the console's grants for that tenant's resource), with every code and token issued under them.
 * Returns the grants removed, so every process can drop them from its cache after commit.
 */
export async function destroyGrantsWithResource(
  db: Queryable,
  input: { accountId: string; clientId: string; resource: string },
): Promise<string[]> {
  const rows = await db<{ id: string }[]>`
    DELETE FROM oidc_models
    WHERE model = 'Grant' AND payload->>'accountId' = ${input.accountId}
      AND payload->>'clientId' = ${input.clientId} AND (payload->'resources') ? ${input.resource}
    RETURNING id`
  const ids = rows.map((row) => row.id)
  if (ids.length > 0) await db`DELETE FROM oidc_models WHERE grant_id = ANY(${ids}::text[])`
  return ids
}

/**
 * Everything of one account: sessions, grants, codes and tokens. Returns the grants removed, so
 * every process can drop them from its cache.
 */
export async function destroyByAccount(db: Queryable, accountId: string): Promise<string[]> {
  const rows = await db<{ model: string; id: string }[]>`
    DELETE FROM oidc_models WHERE payload->>'accountId' = ${accountId} RETURNING model, id`
  return rows.filter((row) => row.model === 'Grant').map((row) => row.id)
}

export async function grantExists(db: Queryable, grantId: string): Promise<boolean> {
  const [row] = await db`
    SELECT 1 FROM oidc_models WHERE model = 'Grant' AND id = ${grantId} AND (expires_at IS NULL OR expires_at > now())`
  return row !== undefined
}

export async function sweepExpiredModels(db: Queryable, limit: number): Promise<number> {
  const rows = await db`
    DELETE FROM oidc_models WHERE ctid IN (
      SELECT ctid FROM oidc_models WHERE expires_at < now() LIMIT ${limit})`
  return rows.count
}

// --- signing keys --------------------------------------------------------------------------

export interface SigningKeyRow {
  version: number
  kid: string
  alg: string
  public_jwk: Record<string, unknown>
  private_sealed: Buffer
  master_key_id: string
  created_at: Date
  retired_at: Date | null
}

/** The newest version first. */
export async function listSigningKeys(db: Queryable): Promise<SigningKeyRow[]> {
  return db<SigningKeyRow[]>`SELECT * FROM oidc_signing_keys ORDER BY version DESC`
}

/**
 * Adds the next version and retires the current one, under a lock so two processes rotating at
 * once make one version. `onlyIfOlderThan`: rotate only when the current version is older (the
 * scheduled rotation), or when there is none.
 */
export async function insertSigningKeyVersion(
  db: Queryable,
  row: {
    kid: string
    alg: string
    publicJwk: Record<string, unknown>
    privateSealed: Buffer
    masterKeyId: string
  },
  onlyIfOlderThan?: Date,
): Promise<number | undefined> {
  await db`SELECT pg_advisory_xact_lock(7301952211)`
  const [current] = await db<{ version: number; created_at: Date }[]>`
    SELECT version, created_at FROM oidc_signing_keys WHERE retired_at IS NULL ORDER BY version DESC LIMIT 1`
  if (current && onlyIfOlderThan && current.created_at > onlyIfOlderThan) return undefined
  const [{ next }] =
    (await db`SELECT COALESCE(max(version), 0) + 1 AS next FROM oidc_signing_keys`) as unknown as [
      { next: number },
    ]
  await db`UPDATE oidc_signing_keys SET retired_at = now() WHERE retired_at IS NULL`
  await db`
    INSERT INTO oidc_signing_keys (version, kid, alg, public_jwk, private_sealed, master_key_id)
    VALUES (${next}, ${row.kid}, ${row.alg}, ${db.json(row.publicJwk as never)}, ${row.privateSealed}, ${row.masterKeyId})`
  return next
}

/**
 * Master key rotation: versions still published (current, or retired since `retiredSince`) not
 * sealed by `primaryId`, by kid after `after`.
 */
export async function signingKeysToRewrap(
  db: Queryable,
  input: { primaryId: string; after: string | undefined; limit: number; retiredSince: Date },
): Promise<{ id: string; sealed: Buffer; masterKeyId: string }[]> {
  const rows = await db<{ kid: string; private_sealed: Buffer; master_key_id: string }[]>`
    SELECT kid, private_sealed, master_key_id FROM oidc_signing_keys
    WHERE master_key_id <> ${input.primaryId} AND (retired_at IS NULL OR retired_at > ${input.retiredSince})
      AND (${input.after ?? null}::text IS NULL OR kid > ${input.after ?? null}::text)
    ORDER BY kid LIMIT ${input.limit}`
  return rows.map((row) => ({ id: row.kid, sealed: row.private_sealed, masterKeyId: row.master_key_id }))
}

/** The version's private part sealed anew, if it still holds the blob the rotation read. */
export async function replaceSealedSigningKey(
  db: Queryable,
  input: { kid: string; from: Buffer; to: Buffer; masterKeyId: string },
): Promise<boolean> {
  const rows = await db`
    UPDATE oidc_signing_keys SET private_sealed = ${input.to}, master_key_id = ${input.masterKeyId}
    WHERE kid = ${input.kid} AND private_sealed = ${input.from}`
  return rows.count === 1
}
