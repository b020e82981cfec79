import type { Queryable } from '../data/database.ts'

export interface FolderRow {
  id: string
  tenant_id: string
  parent_id: string | null
  name: string
  created_at: Date
  created_by: string
  updated_at: Date
  updated_by: string
}

export type FolderWithPath = FolderRow & { path: string }

export async function insertFolder(db: Queryable, row: FolderRow): Promise<void> {
  await db`INSERT INTO secret_folders ${db(row as never)}`
}

/**
 * Folders of the tenant with their path from the top, and the path as an array of names, which
 * sorts a folder's subfolders right after it (as text, `a-x` would sort between `a` and `a/b`). The walk up is bounded by the depth
 * limit, so even a corrupted parent chain cannot loop.
 */
const withPaths = (db: Queryable, tenantId: string) => db`
  WITH RECURSIVE chain (id, ancestor, path, names, depth) AS (
    SELECT id, parent_id, name, ARRAY[name], 1 FROM secret_folders WHERE tenant_id = ${tenantId}
    UNION ALL
    SELECT c.id, f.parent_id, f.name || '/' || c.path, f.name || c.names, c.depth + 1
    FROM chain c JOIN secret_folders f ON f.id = c.ancestor
    WHERE c.depth < 64
  ),
  paths AS (SELECT id, path, names FROM chain WHERE ancestor IS NULL)`

export async function findFolder(
  db: Queryable,
  tenantId: string,
  id: string,
): Promise<FolderWithPath | undefined> {
  const [row] = await db<FolderWithPath[]>`
    ${withPaths(db, tenantId)}
    SELECT f.*, p.path FROM secret_folders f JOIN paths p ON p.id = f.id
    WHERE f.tenant_id = ${tenantId} AND f.id = ${id}`
  return row
}

export async function lockFolder(
  db: Queryable,
  tenantId: string,
  id: string,
): Promise<FolderRow | undefined> {
  const [row] = await db<FolderRow[]>`
    SELECT * FROM secret_folders WHERE tenant_id = ${tenantId} AND id = ${id} FOR UPDATE`
  return row
}

export async function listFolders(
  db: Queryable,
  tenantId: string,
  parent: string | null | undefined,
  page: { limit: number; offset: number },
): Promise<{ rows: FolderWithPath[]; total: number }> {
  const parentCondition =
    parent === undefined
      ? db``
      : parent === null
        ? db`AND f.parent_id IS NULL`
        : db`AND f.parent_id = ${parent}`
  const rows = await db<(FolderWithPath & { total: number })[]>`
    ${withPaths(db, tenantId)}
    SELECT f.*, p.path, count(*) OVER ()::int AS total
    FROM secret_folders f JOIN paths p ON p.id = f.id
    WHERE f.tenant_id = ${tenantId} ${parentCondition}
    ORDER BY p.names, f.id LIMIT ${page.limit} OFFSET ${page.offset}`
  if (rows.length > 0 || page.offset === 0) return { rows, total: rows[0]?.total ?? 0 }
  const [count] = await db<{ total: number }[]>`
    SELECT count(*)::int AS total FROM secret_folders f WHERE f.tenant_id = ${tenantId} ${parentCondition}`
  return { rows, total: count?.total ?? 0 }
}

/** The folder's ancestors, nearest first (the folder itself excluded). */
export async function ancestorIds(db: Queryable, id: string): Promise<string[]> {
  const rows = await db<{ id: string }[]>`
    WITH RECURSIVE up (id, parent_id, depth) AS (
      SELECT id, parent_id, 0 FROM secret_folders WHERE id = ${id}
      UNION ALL
      SELECT f.id, f.parent_id, up.depth + 1 FROM up JOIN secret_folders f ON f.id = up.parent_id
      WHERE up.depth < 64
    )
    SELECT id FROM up WHERE depth > 0 ORDER BY depth`
  return rows.map((r) => r.id)
}

/** Depth of the deepest folder under `id`, counting `id` as 1. */
export async function subtreeHeight(db: Queryable, id: string): Promise<number> {
  const [row] = await db<{ height: number }[]>`
    WITH RECURSIVE down (id, depth) AS (
      SELECT id, 1 FROM secret_folders WHERE id = ${id}
      UNION ALL
      SELECT f.id, down.depth + 1 FROM down JOIN secret_folders f ON f.parent_id = down.id
      WHERE down.depth < 64
    )
    SELECT max(depth)::int AS height FROM down`
  return row?.height ?? 1
}

export async function updateFolder(
  db: Queryable,
  id: string,
  changes: Partial<Pick<FolderRow, 'name' | 'parent_id' | 'updated_at' | 'updated_by'>>,
): Promise<void> {
  await db`UPDATE secret_folders SET ${db(changes as never)} WHERE id = ${id}`
}

export async function countChildren(db: Queryable, id: string): Promise<number> {
  const [row] = await db<
    { n: number }[]
  >`SELECT count(*)::int AS n FROM secret_folders WHERE parent_id = ${id}`
  return row?.n ?? 0
}

export async function deleteFolder(db: Queryable, id: string): Promise<void> {
  await db`DELETE FROM secret_folders WHERE id = ${id}`
}
