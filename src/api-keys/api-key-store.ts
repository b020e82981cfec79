import type { Queryable } from '../data/database.ts'

export interface ApiKeyRow {
  id: string
  tenant_id: string
  lookup_id: string
  secret_hash: Buffer
  name: string
  scopes: string[]
  created_at: Date
  created_by: string
  expires_at: Date | null
  revoked_at: Date | null
  /** The API key that created this one; null for keys made by the CLI or at tenant creation. */
  parent_id: string | null
  /** Key ids and aliases the key may use; null: every key of the tenant (migration 0035). */
  restricted_keys: string[] | null
  /** Cryptographic operations the key may perform; null: all its scopes allow. */
  restricted_operations: string[] | null
  /** The latest audit record by the key that the last-use sweep has folded; null: none yet. */
  last_used_at: Date | null
}

export async function insertApiKey(
  db: Queryable,
  row: Omit<ApiKeyRow, 'created_at' | 'revoked_at' | 'last_used_at'>,
): Promise<ApiKeyRow> {
  const list = (values: string[] | null) => (values ? db.array(values) : null)
  const [inserted] = await db<ApiKeyRow[]>`
    INSERT INTO api_keys (id, tenant_id, lookup_id, secret_hash, name, scopes, created_by, expires_at, parent_id,
                          restricted_keys, restricted_operations)
    VALUES (${row.id}, ${row.tenant_id}, ${row.lookup_id}, ${row.secret_hash}, ${row.name},
            ${db.array(row.scopes)}, ${row.created_by}, ${row.expires_at}, ${row.parent_id},
            ${list(row.restricted_keys)}, ${list(row.restricted_operations)})
    RETURNING *`
  return inserted!
}

/**
 * Moves each key's last use to the given time when that is later (folding the same records twice
 * changes nothing). A use names its tenant: a record of one tenant never touches another's key.
 */
export async function addApiKeyUses(
  db: Queryable,
  uses: readonly { tenant_id: string; api_key_id: string; used_at: Date }[],
): Promise<void> {
  if (uses.length === 0) return
  await db`
    UPDATE api_keys AS k SET last_used_at = GREATEST(k.last_used_at, u.used_at)
    FROM jsonb_to_recordset(${db.json(uses.map((use) => ({ ...use, used_at: use.used_at.toISOString() })))}::jsonb)
      AS u(tenant_id uuid, api_key_id uuid, used_at timestamptz)
    WHERE k.tenant_id = u.tenant_id AND k.id = u.api_key_id
      AND (k.last_used_at IS NULL OR k.last_used_at < u.used_at)`
}

export async function findApiKeyByLookupId(db: Queryable, lookupId: string): Promise<ApiKeyRow | undefined> {
  const [row] = await db<ApiKeyRow[]>`SELECT * FROM api_keys WHERE lookup_id = ${lookupId}`
  return row
}

export async function getApiKey(db: Queryable, tenantId: string, id: string): Promise<ApiKeyRow | undefined> {
  const [row] = await db<ApiKeyRow[]>`SELECT * FROM api_keys WHERE tenant_id = ${tenantId} AND id = ${id}`
  return row
}

/**
 * Serialises the creation and revocation of one tenant's API keys for the rest of the
 * transaction. A child created while its parent is being revoked would otherwise commit after
 * the revocation's search for descendants and outlive its parent. Both are rare operations.
 */
export async function lockTenantApiKeys(db: Queryable, tenantId: string): Promise<void> {
  await db`SELECT pg_advisory_xact_lock(hashtextextended(${`kms:api-keys:${tenantId}`}, 0))`
}

export interface ApiKeyPage {
  rows: ApiKeyRow[]
  total: number
}

export async function listApiKeys(
  db: Queryable,
  tenantId: string,
  options: { limit: number; offset: number; includeRevoked: boolean },
): Promise<ApiKeyPage> {
  const revokedFilter = options.includeRevoked ? db`` : db`AND revoked_at IS NULL`
  const rows = await db<ApiKeyRow[]>`
    SELECT * FROM api_keys WHERE tenant_id = ${tenantId} ${revokedFilter}
    ORDER BY created_at, id LIMIT ${options.limit} OFFSET ${options.offset}`
  const [count] = await db<{ total: number }[]>`
    SELECT count(*)::int AS total FROM api_keys WHERE tenant_id = ${tenantId} ${revokedFilter}`
  return { rows, total: count?.total ?? 0 }
}

/** Revokes once: a key already revoked is returned unchanged, with `changed` false. */
export async function revokeApiKey(
  db: Queryable,
  tenantId: string,
  id: string,
): Promise<{ row: ApiKeyRow; changed: boolean } | undefined> {
  const [updated] = await db<ApiKeyRow[]>`
    UPDATE api_keys SET revoked_at = now()
    WHERE tenant_id = ${tenantId} AND id = ${id} AND revoked_at IS NULL
    RETURNING *`
  if (updated) return { row: updated, changed: true }
  const existing = await getApiKey(db, tenantId, id)
  return existing ? { row: existing, changed: false } : undefined
}

/**
 * Revokes every key descending from `id` (its children, theirs, ...) not revoked yet, and
 * returns them. Descendants already revoked are walked through, so a grandchild of a revoked
 * child is still reached. Run under lockTenantApiKeys, so no new descendant can appear meanwhile.
 */
export async function revokeDescendants(db: Queryable, tenantId: string, id: string): Promise<ApiKeyRow[]> {
  return db<ApiKeyRow[]>`
    WITH RECURSIVE descendants AS (
      SELECT id FROM api_keys WHERE tenant_id = ${tenantId} AND parent_id = ${id}
      UNION
      SELECT k.id FROM api_keys k JOIN descendants d ON k.parent_id = d.id WHERE k.tenant_id = ${tenantId}
    )
    UPDATE api_keys SET revoked_at = now()
    WHERE tenant_id = ${tenantId} AND id IN (SELECT id FROM descendants) AND revoked_at IS NULL
    RETURNING *`
}
