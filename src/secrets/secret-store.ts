import type { Queryable } from '../data/database.ts'
import type { CustomFieldType } from './secret-schemas.ts'

/** A custom field as stored in clear: a sensitive field's value lives in sealed_custom_values. */
export interface StoredCustomField {
  name: string
  type: CustomFieldType
  sensitive: boolean
  value?: string | number | boolean
}

export interface SecretRow {
  id: string
  tenant_id: string
  folder_id: string | null
  name: string
  description: string
  labels: string[]
  custom_fields: StoredCustomField[]
  sealed_dek: Buffer
  sealed_notes: Buffer | null
  sealed_custom_values: Buffer | null
  sealed_totp: Buffer | null
  current_version: number
  expires_at: Date | null
  is_active: boolean
  is_favorite: boolean
  is_travel_safe: boolean
  created_at: Date
  created_by: string
  updated_at: Date
  updated_by: string
  deleted_at: Date | null
  deleted_by: string | null
}

export interface VersionRow {
  secret_id: string
  version: number
  sealed_value: Buffer
  created_at: Date
  created_by: string
}

export async function insertSecret(db: Queryable, row: SecretRow): Promise<void> {
  await db`
    INSERT INTO secrets ${db({ ...row, custom_fields: db.json(row.custom_fields as never) } as never)}`
}

export type SecretChanges = Partial<
  Pick<
    SecretRow,
    | 'folder_id'
    | 'name'
    | 'description'
    | 'labels'
    | 'custom_fields'
    | 'sealed_notes'
    | 'sealed_custom_values'
    | 'sealed_totp'
    | 'current_version'
    | 'expires_at'
    | 'is_active'
    | 'is_favorite'
    | 'is_travel_safe'
    | 'updated_at'
    | 'updated_by'
    | 'deleted_at'
    | 'deleted_by'
  >
>

export async function updateSecret(db: Queryable, id: string, changes: SecretChanges): Promise<SecretRow> {
  const values: Record<string, unknown> = { ...changes }
  if (changes.custom_fields) values['custom_fields'] = db.json(changes.custom_fields as never)
  const [row] = await db<SecretRow[]>`
    UPDATE secrets SET ${db(values as never)} WHERE id = ${id} RETURNING *`
  return row!
}

/** A live secret, or with `deleted` one in the trash; `lock` takes the row for an update. */
export async function findSecret(
  db: Queryable,
  tenantId: string,
  id: string,
  options: { deleted?: boolean; lock?: boolean } = {},
): Promise<SecretRow | undefined> {
  const [row] = await db<SecretRow[]>`
    SELECT * FROM secrets
    WHERE tenant_id = ${tenantId} AND id = ${id}
      AND deleted_at IS ${options.deleted ? db`NOT NULL` : db`NULL`}
    ${options.lock ? db`FOR UPDATE` : db``}`
  return row
}

export interface SecretFilter {
  folder?: string | null | undefined
  labels?: string[] | undefined
  favorite?: boolean | undefined
  active?: boolean | undefined
  search?: string | undefined
  /** Only the trash: deleted after this time (older ones are due for purging). */
  deletedAfter?: Date | undefined
}

export async function listSecrets(
  db: Queryable,
  tenantId: string,
  filter: SecretFilter,
  page: { limit: number; offset: number },
): Promise<{ rows: SecretRow[]; total: number }> {
  const conditions = [db`tenant_id = ${tenantId}`]
  conditions.push(filter.deletedAfter ? db`deleted_at > ${filter.deletedAfter}` : db`deleted_at IS NULL`)
  if (filter.folder !== undefined) {
    conditions.push(filter.folder === null ? db`folder_id IS NULL` : db`folder_id = ${filter.folder}`)
  }
  if (filter.labels && filter.labels.length > 0) conditions.push(db`labels && ${filter.labels}::text[]`)
  if (filter.favorite !== undefined) conditions.push(db`is_favorite = ${filter.favorite}`)
  if (filter.active !== undefined) conditions.push(db`is_active = ${filter.active}`)
  if (filter.search) {
    const pattern = `%${filter.search.replace(/[\\%_]/g, (c) => `\\${c}`)}%`
    conditions.push(db`(name ILIKE ${pattern} OR description ILIKE ${pattern})`)
  }
  const where = conditions.reduce((acc, condition) => db`${acc} AND ${condition}`)
  const rows = await db<(SecretRow & { total: number })[]>`
    SELECT *, count(*) OVER ()::int AS total FROM secrets WHERE ${where}
    ORDER BY name, id LIMIT ${page.limit} OFFSET ${page.offset}`
  if (rows.length > 0 || page.offset === 0) return { rows, total: rows[0]?.total ?? 0 }
  // A page past the end still reports how many there are.
  const [count] = await db<{ total: number }[]>`SELECT count(*)::int AS total FROM secrets WHERE ${where}`
  return { rows, total: count?.total ?? 0 }
}

/** Secrets not deleted (billing's usage report). */
export async function countSecretsInUse(db: Queryable, tenantId: string): Promise<number> {
  const [row] = await db<{ total: number }[]>`
    SELECT count(*)::int AS total FROM secrets WHERE tenant_id = ${tenantId} AND deleted_at IS NULL`
  return row?.total ?? 0
}

export async function insertVersion(db: Queryable, row: VersionRow): Promise<void> {
  await db`INSERT INTO secret_versions ${db(row as never)}`
}

/** Keeps the newest `keep` versions of a secret. */
export async function pruneVersions(db: Queryable, secretId: string, currentVersion: number, keep: number) {
  await db`DELETE FROM secret_versions WHERE secret_id = ${secretId} AND version <= ${currentVersion - keep}`
}

export async function findVersion(
  db: Queryable,
  secretId: string,
  version: number,
): Promise<VersionRow | undefined> {
  const [row] = await db<VersionRow[]>`
    SELECT * FROM secret_versions WHERE secret_id = ${secretId} AND version = ${version}`
  return row
}

/** The sealed current value of each secret, by secret id. */
export async function currentValues(db: Queryable, rows: readonly SecretRow[]): Promise<Map<string, Buffer>> {
  if (rows.length === 0) return new Map()
  const found = await db<{ secret_id: string; sealed_value: Buffer }[]>`
    SELECT v.secret_id, v.sealed_value FROM secret_versions v
    JOIN unnest(${rows.map((r) => r.id)}::uuid[], ${rows.map((r) => r.current_version)}::int[]) AS c (id, version)
      ON v.secret_id = c.id AND v.version = c.version`
  return new Map(found.map((row) => [row.secret_id, row.sealed_value]))
}

export async function listVersions(
  db: Queryable,
  secretId: string,
): Promise<Omit<VersionRow, 'sealed_value'>[]> {
  return db<Omit<VersionRow, 'sealed_value'>[]>`
    SELECT secret_id, version, created_at, created_by FROM secret_versions
    WHERE secret_id = ${secretId} ORDER BY version DESC`
}

/** Removes a secret and its versions for good. */
export async function purgeSecret(db: Queryable, id: string): Promise<void> {
  await db`DELETE FROM secrets WHERE id = ${id}`
}

/** Deleted secrets whose restore window closed, removed with their versions. */
export async function purgeDeletedBefore(
  db: Queryable,
  before: Date,
  limit: number,
): Promise<{ id: string; tenant_id: string }[]> {
  return db<{ id: string; tenant_id: string }[]>`
    DELETE FROM secrets WHERE id IN (
      SELECT id FROM secrets WHERE deleted_at IS NOT NULL AND deleted_at <= ${before}
      ORDER BY deleted_at LIMIT ${limit} FOR UPDATE SKIP LOCKED)
    RETURNING id, tenant_id`
}

/** Live secrets of the tenant among `ids`, locked for a move. */
export async function lockSecrets(db: Queryable, tenantId: string, ids: string[]): Promise<SecretRow[]> {
  return db<SecretRow[]>`
    SELECT * FROM secrets WHERE tenant_id = ${tenantId} AND id = ANY(${ids}::uuid[]) AND deleted_at IS NULL
    ORDER BY id FOR UPDATE`
}

export async function moveSecrets(
  db: Queryable,
  ids: string[],
  folderId: string | null,
  at: Date,
  by: string,
): Promise<void> {
  await db`
    UPDATE secrets SET folder_id = ${folderId}, updated_at = ${at}, updated_by = ${by}
    WHERE id = ANY(${ids}::uuid[])`
}

/** When a folder is deleted, its deleted secrets fall back to the top level (restored there). */
export async function detachDeletedSecrets(db: Queryable, folderId: string): Promise<void> {
  await db`UPDATE secrets SET folder_id = NULL WHERE folder_id = ${folderId} AND deleted_at IS NOT NULL`
}

export async function countLiveSecretsIn(db: Queryable, folderId: string): Promise<number> {
  const [row] = await db<{ n: number }[]>`
    SELECT count(*)::int AS n FROM secrets WHERE folder_id = ${folderId} AND deleted_at IS NULL`
  return row?.n ?? 0
}
