import type postgres from 'postgres'
import type { Queryable } from '../data/database.ts'
import type { KeyState } from './key-state.ts'

/** Data access for keys and key versions. Every query names the tenant: no cross-tenant reads. */

export interface KeyRow {
  id: string
  tenant_id: string
  name: string
  description: string
  key_type: string
  algorithm: string
  origin: 'Generated' | 'Imported'
  is_default: boolean
  is_favorite: boolean
  labels: string[]
  current_version: number
  created_at: Date
  created_by: string
  updated_at: Date
  last_rotated_at: Date | null
  expires_at: Date | null
  revoked_at: Date | null
  scheduled_deletion_date: Date | null
  destroyed_at: Date | null
  /** The rotation policy's next due time; null without a policy or while it is paused. */
  next_rotation_at: Date | null
  /** When the lifecycle job acted on the key's expiry (the state derives from expires_at). */
  expired_at: Date | null
  /** Private-key export allowed; fixed when the key is created or imported. */
  exportable: boolean
  /** Imported without its private key: verifies and encrypts only. */
  public_only: boolean
  /** The issuer the key signs for alone ('pki', 'ssh'); null: an ordinary key. */
  reserved_for: KeyIssuer | null
}

/** The certificate issuers a key may be reserved for (migration 0036). */
export type KeyIssuer = 'pki' | 'ssh'

export interface KeyVersionRow {
  key_id: string
  version: number
  tenant_id: string
  created_at: Date
  public_key: Buffer | null
  sealed_material: Buffer | null
  destroyed_at: Date | null
}

export type NewKeyRow = Omit<
  KeyRow,
  'revoked_at' | 'scheduled_deletion_date' | 'destroyed_at' | 'next_rotation_at' | 'expired_at'
>

/** The unique constraint the service turns into 409 key_name_taken. */
export const KEY_NAME_CONSTRAINT = 'keys_tenant_name_key'

export async function insertKey(db: Queryable, row: NewKeyRow): Promise<KeyRow> {
  const [inserted] = await db<KeyRow[]>`INSERT INTO keys ${db(row)} RETURNING *`
  return inserted!
}

export async function insertKeyVersion(db: Queryable, row: KeyVersionRow): Promise<void> {
  await db`INSERT INTO key_versions ${db(row)}`
}

export async function getKey(
  db: Queryable,
  tenantId: string,
  id: string,
  lock: 'none' | 'for update' = 'none',
): Promise<KeyRow | undefined> {
  const [row] =
    lock === 'for update'
      ? await db<KeyRow[]>`SELECT * FROM keys WHERE tenant_id = ${tenantId} AND id = ${id} FOR UPDATE`
      : await db<KeyRow[]>`SELECT * FROM keys WHERE tenant_id = ${tenantId} AND id = ${id}`
  return row
}

/** The tenant's default key of a type, if one is set. */
export async function getDefaultKey(
  db: Queryable,
  tenantId: string,
  keyType: string,
): Promise<KeyRow | undefined> {
  const [row] = await db<KeyRow[]>`
    SELECT * FROM keys WHERE tenant_id = ${tenantId} AND key_type = ${keyType} AND is_default`
  return row
}

export async function getKeyVersion(
  db: Queryable,
  tenantId: string,
  keyId: string,
  version: number,
): Promise<KeyVersionRow | undefined> {
  const [row] = await db<KeyVersionRow[]>`
    SELECT * FROM key_versions WHERE tenant_id = ${tenantId} AND key_id = ${keyId} AND version = ${version}`
  return row
}

export interface KeyVersionSummary {
  version: number
  created_at: Date
  destroyed_at: Date | null
}

export async function listKeyVersions(
  db: Queryable,
  tenantId: string,
  keyId: string,
): Promise<KeyVersionSummary[]> {
  return db<KeyVersionSummary[]>`
    SELECT version, created_at, destroyed_at FROM key_versions
    WHERE tenant_id = ${tenantId} AND key_id = ${keyId} ORDER BY version`
}

export type KeyChanges = Partial<
  Pick<
    KeyRow,
    | 'name'
    | 'description'
    | 'labels'
    | 'expires_at'
    | 'is_default'
    | 'is_favorite'
    | 'reserved_for'
    | 'revoked_at'
    | 'scheduled_deletion_date'
    | 'current_version'
    | 'last_rotated_at'
    | 'next_rotation_at'
    | 'expired_at'
  >
> & { updated_at: Date }

/** The tenant's keys, oldest first (a report's read, bounded by `limit`). */
export async function allKeys(db: Queryable, tenantId: string, limit: number): Promise<KeyRow[]> {
  return db<KeyRow[]>`SELECT * FROM keys WHERE tenant_id = ${tenantId} ORDER BY created_at, id LIMIT ${limit}`
}

export async function updateKey(
  db: Queryable,
  tenantId: string,
  id: string,
  changes: KeyChanges,
): Promise<KeyRow> {
  const [row] = await db<KeyRow[]>`
    UPDATE keys SET ${db(changes)} WHERE tenant_id = ${tenantId} AND id = ${id} RETURNING *`
  return row!
}

/**
 * Serialises default changes of one key type in one tenant for the rest of the transaction.
 * The unique index is the guarantee; the lock makes concurrent "make X the default" requests
 * queue up and each succeed in turn instead of failing on the index.
 */
export async function lockDefaultSlot(db: Queryable, tenantId: string, keyType: string): Promise<void> {
  await db`SELECT pg_advisory_xact_lock(hashtextextended(${`kms:default-key:${tenantId}:${keyType}`}, 0))`
}

export async function clearDefault(
  db: Queryable,
  tenantId: string,
  keyType: string,
  now: Date,
): Promise<void> {
  await db`
    UPDATE keys SET is_default = false, updated_at = ${now}
    WHERE tenant_id = ${tenantId} AND key_type = ${keyType} AND is_default`
}

export interface DestroyedKey {
  id: string
  tenant_id: string
  current_version: number
}

/**
 * Erases the material of keys whose deletion date has passed (in one tenant, or in all when
 * `tenantId` is null) and marks them destroyed. Idempotent: a key is destroyed once.
 */
/**
 * The earliest deletion date not yet acted on (of the tenant, or of every tenant). Written as a
 * min() over the partial index's exact predicate so that even a generic plan reads one index
 * entry; an EXISTS with `<= $now` was planned as a 24 ms table scan.
 */
export async function nextDeletionDate(db: Queryable, tenantId: string | null): Promise<Date | null> {
  const [row] = await db<{ next: Date | null }[]>`
    SELECT min(scheduled_deletion_date) AS next FROM keys
    WHERE scheduled_deletion_date IS NOT NULL AND destroyed_at IS NULL
      ${tenantId ? db`AND tenant_id = ${tenantId}` : db``}`
  return row?.next ?? null
}

export async function destroyDueKeys(
  db: Queryable,
  tenantId: string | null,
  now: Date,
  onlyKeyId?: string,
): Promise<DestroyedKey[]> {
  const destroyed = await db<DestroyedKey[]>`
    UPDATE keys SET destroyed_at = scheduled_deletion_date, is_default = false, updated_at = ${now}
    WHERE scheduled_deletion_date <= ${now} AND destroyed_at IS NULL
      ${tenantId ? db`AND tenant_id = ${tenantId}` : db``}
      ${onlyKeyId ? db`AND id = ${onlyKeyId}` : db``}
    RETURNING id, tenant_id, current_version`
  if (destroyed.length > 0) {
    await db`
      UPDATE key_versions SET sealed_material = NULL, public_key = NULL, destroyed_at = ${now}
      WHERE key_id = ANY(${db.array(destroyed.map((k) => k.id))}::uuid[]) AND destroyed_at IS NULL`
  }
  return destroyed
}

// ---------------------------------------------------------------------------------------------
// The key list
// ---------------------------------------------------------------------------------------------

export const KEY_SORTS = ['name', 'algorithm', 'purpose', 'version', 'status', 'createdAt'] as const
export type KeySort = (typeof KEY_SORTS)[number]

export interface KeyListFilter {
  /** Only these keys (an API key restricted to keys: the ones it may use). */
  ids?: readonly string[] | undefined
  status?: readonly KeyState[] | undefined
  keyType?: readonly string[] | undefined
  algorithm?: readonly string[] | undefined
  labels?: readonly string[] | undefined
  search?: string | undefined
  favorite?: boolean | undefined
}

/** Where a page ends: the segment (favourites or not) and the last row's sort value and id. */
export interface KeyListPosition {
  favorite: boolean
  value: string | number
  id: string
}

export interface KeyListQuery {
  filter: KeyListFilter
  sort: KeySort
  descending: boolean
  limit: number
  after: KeyListPosition | null
  now: Date
}

function stateCondition(db: Queryable, state: KeyState, now: Date) {
  const live = db`destroyed_at IS NULL AND scheduled_deletion_date IS NULL`
  switch (state) {
    case 'Active':
      return db`(${live} AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > ${now}))`
    case 'Expired':
      return db`(${live} AND revoked_at IS NULL AND expires_at <= ${now})`
    case 'Revoked':
      return db`(${live} AND revoked_at IS NOT NULL)`
    case 'Pending Deletion':
      return db`(destroyed_at IS NULL AND scheduled_deletion_date > ${now})`
    case 'Destroyed':
      return db`(destroyed_at IS NOT NULL OR scheduled_deletion_date <= ${now})`
  }
}

/** The derived state as a number in spec order (Active first), for sorting by status. */
function stateRank(db: Queryable, now: Date) {
  return db`(CASE
    WHEN destroyed_at IS NOT NULL OR scheduled_deletion_date <= ${now} THEN 4
    WHEN scheduled_deletion_date IS NOT NULL THEN 3
    WHEN revoked_at IS NOT NULL THEN 2
    WHEN expires_at <= ${now} THEN 1
    ELSE 0 END)`
}

function sortExpression(db: Queryable, sort: KeySort, now: Date) {
  switch (sort) {
    case 'name':
      return db`name`
    case 'algorithm':
      return db`algorithm`
    case 'purpose':
      return db`key_type`
    case 'version':
      return db`current_version`
    case 'createdAt':
      return db`created_at`
    case 'status':
      return stateRank(db, now)
  }
}

function filterConditions(db: Queryable, tenantId: string, filter: KeyListFilter, now: Date) {
  const conditions = [db`tenant_id = ${tenantId}`]
  if (filter.ids) conditions.push(db`id = ANY(${db.array([...filter.ids])}::uuid[])`)
  if (filter.status?.length) {
    const any = filter.status.map((s) => stateCondition(db, s, now))
    conditions.push(db`(${any.reduce((a, b) => db`${a} OR ${b}`)})`)
  }
  if (filter.keyType?.length) conditions.push(db`key_type = ANY(${db.array([...filter.keyType])}::text[])`)
  if (filter.algorithm?.length)
    conditions.push(db`algorithm = ANY(${db.array([...filter.algorithm])}::text[])`)
  if (filter.labels?.length) conditions.push(db`labels && ${db.array([...filter.labels])}::text[]`)
  if (filter.search) {
    const pattern = `%${filter.search.replace(/[\\%_]/g, (c) => `\\${c}`)}%`
    conditions.push(db`(name ILIKE ${pattern} OR description ILIKE ${pattern})`)
  }
  if (filter.favorite !== undefined) conditions.push(db`is_favorite = ${filter.favorite}`)
  return conditions
}

type Fragment = postgres.PendingQuery<postgres.Row[]>

const and = (db: Queryable, parts: Fragment[]) => parts.reduce((a, b) => db`${a} AND ${b}`)

export type ListedKeyRow = KeyRow & { sort_value: string | number }

/**
 * One page of keys: favourites first, then the others, each segment ordered by the sort column
 * and id (keyset pagination, so page 1000 costs what page 1 costs).
 */
export async function listKeys(
  db: Queryable,
  tenantId: string,
  query: KeyListQuery,
): Promise<ListedKeyRow[]> {
  const { now, sort } = query
  const base = filterConditions(db, tenantId, query.filter, now)
  const expression = sortExpression(db, sort, now)
  const direction = query.descending ? db`DESC` : db`ASC`
  const sortValue = sort === 'createdAt' ? db`to_json(created_at)#>>'{}'` : expression
  const rows: ListedKeyRow[] = []
  const segments = query.after?.favorite === false ? [false] : [true, false]
  for (const favorite of segments) {
    const wanted = query.limit + 1 - rows.length
    if (wanted <= 0) break
    const conditions = [...base, db`is_favorite = ${favorite}`]
    if (query.after && query.after.favorite === favorite) {
      const { value, id } = query.after
      const typed =
        sort === 'createdAt'
          ? db`${value}::timestamptz`
          : sort === 'version' || sort === 'status'
            ? db`${value}::int`
            : db`${value}::text`
      conditions.push(
        query.descending
          ? db`(${expression}, id) < (${typed}, ${id}::uuid)`
          : db`(${expression}, id) > (${typed}, ${id}::uuid)`,
      )
    }
    const page = await db<ListedKeyRow[]>`
      SELECT *, ${sortValue} AS sort_value FROM keys
      WHERE ${and(db, conditions)}
      ORDER BY ${expression} ${direction}, id ${direction}
      LIMIT ${wanted}`
    rows.push(...page)
  }
  return rows
}

/**
 * Matching keys, counted up to `cap`: an exact count of 100,000 rows costs more than the page
 * itself, so past the cap the caller reports a lower bound.
 */
export async function countKeys(
  db: Queryable,
  tenantId: string,
  filter: KeyListFilter,
  now: Date,
  cap: number,
): Promise<number> {
  const [row] = await db<{ total: number }[]>`
    SELECT count(*)::int AS total FROM (
      SELECT 1 FROM keys WHERE ${and(db, filterConditions(db, tenantId, filter, now))} LIMIT ${cap}
    ) AS matching`
  return row?.total ?? 0
}

/** Keys whose material exists (not destroyed): what a plan's key quota counts. */
export async function countKeysInUse(db: Queryable, tenantId: string): Promise<number> {
  const [row] = await db<{ total: number }[]>`
    SELECT count(*)::int AS total FROM keys WHERE tenant_id = ${tenantId} AND destroyed_at IS NULL`
  return row?.total ?? 0
}

/** Active keys whose expiry falls within the window: the key list's alert banner. */
export async function countActiveExpiringBy(
  db: Queryable,
  tenantId: string,
  now: Date,
  until: Date,
  /** Only these keys (an API key restricted to keys). */
  ids?: readonly string[],
): Promise<number> {
  const [row] = await db<{ total: number }[]>`
    SELECT count(*)::int AS total FROM keys
    WHERE tenant_id = ${tenantId} AND expires_at > ${now} AND expires_at <= ${until}
      AND revoked_at IS NULL AND scheduled_deletion_date IS NULL AND destroyed_at IS NULL
      ${ids ? db`AND id = ANY(${db.array([...ids])}::uuid[])` : db``}`
  return row?.total ?? 0
}

/** Marks every key past its expiry, not yet marked and not destroyed; the keys marked. */
export async function markExpired(
  db: Queryable,
  now: Date,
): Promise<{ id: string; tenant_id: string; current_version: number; expires_at: Date }[]> {
  return db<{ id: string; tenant_id: string; current_version: number; expires_at: Date }[]>`
    UPDATE keys SET expired_at = ${now}
    WHERE expires_at IS NOT NULL AND expires_at <= ${now} AND expired_at IS NULL AND destroyed_at IS NULL
    RETURNING id, tenant_id, current_version, expires_at`
}

/** Which of `ids` (lower-case UUIDs) are keys of the tenant, in any state (API-key restrictions). */
export async function existingKeyIds(
  db: Queryable,
  tenantId: string,
  ids: readonly string[],
): Promise<Set<string>> {
  if (ids.length === 0) return new Set()
  const rows = await db<{ id: string }[]>`
    SELECT id FROM keys WHERE tenant_id = ${tenantId} AND id = ANY(${db.array([...ids])}::uuid[])`
  return new Set(rows.map((row) => row.id))
}
