import type { Queryable } from '../data/database.ts'

/** Data access for key aliases (migration 0034). Every query names the tenant. */

export interface AliasRow {
  tenant_id: string
  alias: string
  key_id: string
  created_at: Date
  created_by: string
  updated_at: Date
}

/** The primary key: an alias is unique in its tenant (409 alias_exists). */
export const ALIAS_CONSTRAINT = 'key_aliases_pkey'

export async function insertAlias(db: Queryable, row: AliasRow): Promise<AliasRow> {
  const [inserted] = await db<AliasRow[]>`INSERT INTO key_aliases ${db(row)} RETURNING *`
  return inserted!
}

export async function getAlias(
  db: Queryable,
  tenantId: string,
  alias: string,
  lock: 'none' | 'for update' = 'none',
): Promise<AliasRow | undefined> {
  const [row] =
    lock === 'for update'
      ? await db<AliasRow[]>`
          SELECT * FROM key_aliases WHERE tenant_id = ${tenantId} AND alias = ${alias} FOR UPDATE`
      : await db<AliasRow[]>`SELECT * FROM key_aliases WHERE tenant_id = ${tenantId} AND alias = ${alias}`
  return row
}

/** The key each of `aliases` names in the tenant (aliases naming nothing are absent). */
export async function aliasTargets(
  db: Queryable,
  tenantId: string,
  aliases: readonly string[],
): Promise<Map<string, string>> {
  if (aliases.length === 0) return new Map()
  const rows = await db<{ alias: string; key_id: string }[]>`
    SELECT alias, key_id FROM key_aliases
    WHERE tenant_id = ${tenantId} AND alias = ANY(${db.array([...aliases])}::text[])`
  return new Map(rows.map((row) => [row.alias, row.key_id]))
}

/** The aliases of each key, in alias order (keys without one are absent). */
export async function aliasesOfKeys(
  db: Queryable,
  tenantId: string,
  keyIds: readonly string[],
): Promise<Map<string, string[]>> {
  const byKey = new Map<string, string[]>()
  if (keyIds.length === 0) return byKey
  const rows = await db<{ alias: string; key_id: string }[]>`
    SELECT alias, key_id FROM key_aliases
    WHERE tenant_id = ${tenantId} AND key_id = ANY(${db.array([...keyIds])}::uuid[])
    ORDER BY key_id, alias`
  for (const row of rows) {
    const list = byKey.get(row.key_id)
    if (list) list.push(row.alias)
    else byKey.set(row.key_id, [row.alias])
  }
  return byKey
}

export async function countAliasesOfKey(db: Queryable, tenantId: string, keyId: string): Promise<number> {
  const [row] = await db<{ total: number }[]>`
    SELECT count(*)::int AS total FROM key_aliases WHERE tenant_id = ${tenantId} AND key_id = ${keyId}`
  return row?.total ?? 0
}

export interface AliasListQuery {
  /** Only aliases of these keys; null: every key. */
  keyIds: readonly string[] | null
  /** The last alias of the previous page. */
  after: string | null
  limit: number
}

/**
 * One page of aliases in alias order (byte order: the column's collation is "C"), keyset
 * paginated. Reads `limit + 1` rows: the caller tells from the extra row whether a next page
 * exists.
 */
export async function listAliases(
  db: Queryable,
  tenantId: string,
  query: AliasListQuery,
): Promise<AliasRow[]> {
  const conditions = [db`tenant_id = ${tenantId}`]
  if (query.keyIds) conditions.push(db`key_id = ANY(${db.array([...query.keyIds])}::uuid[])`)
  if (query.after !== null) conditions.push(db`alias > ${query.after}`)
  const where = conditions.reduce((a, b) => db`${a} AND ${b}`)
  return db<AliasRow[]>`
    SELECT * FROM key_aliases WHERE ${where} ORDER BY alias LIMIT ${query.limit + 1}`
}

export async function moveAlias(
  db: Queryable,
  tenantId: string,
  alias: string,
  keyId: string,
  now: Date,
): Promise<AliasRow> {
  const [row] = await db<AliasRow[]>`
    UPDATE key_aliases SET key_id = ${keyId}, updated_at = ${now}
    WHERE tenant_id = ${tenantId} AND alias = ${alias} RETURNING *`
  return row!
}

export async function deleteAlias(db: Queryable, tenantId: string, alias: string): Promise<void> {
  await db`DELETE FROM key_aliases WHERE tenant_id = ${tenantId} AND alias = ${alias}`
}

/** Deletes every alias of the keys (their destruction); the aliases deleted. */
export async function deleteAliasesOfKeys(
  db: Queryable,
  keys: readonly { id: string; tenant_id: string }[],
): Promise<{ tenant_id: string; alias: string; key_id: string }[]> {
  if (keys.length === 0) return []
  return db<{ tenant_id: string; alias: string; key_id: string }[]>`
    DELETE FROM key_aliases
    WHERE key_id = ANY(${db.array(keys.map((k) => k.id))}::uuid[])
      AND tenant_id = ANY(${db.array([...new Set(keys.map((k) => k.tenant_id))])}::uuid[])
    RETURNING tenant_id, alias, key_id`
}
