import type { Queryable } from '../data/database.ts'

/** endusers and enduser_applications (migration 0012). Only the end-users module touches them. */
export interface EndUserRow {
  id: string
  tenant_id: string
  email: string
  email_normalized: string
  display_name: string | null
  status: 'active' | 'blocked'
  blocked_at: Date | null
  source: 'api' | 'app_creator' | 'sign_up' | 'federation'
  created_at: Date
  created_by: string
  updated_at: Date
  /** Aggregated: the applications whose end-user list holds the user. */
  application_ids: string[]
}

const WITH_APPS = (db: Queryable) => db`
  SELECT e.*, COALESCE(
    (SELECT array_agg(a.application_id ORDER BY a.added_at, a.application_id)
       FROM enduser_applications a WHERE a.enduser_id = e.id), '{}') AS application_ids
  FROM endusers e`

export async function insertEndUser(
  db: Queryable,
  row: Pick<
    EndUserRow,
    'id' | 'tenant_id' | 'email' | 'email_normalized' | 'display_name' | 'source' | 'created_by'
  >,
): Promise<void> {
  await db`
    INSERT INTO endusers (id, tenant_id, email, email_normalized, display_name, status, source, created_by)
    VALUES (${row.id}, ${row.tenant_id}, ${row.email}, ${row.email_normalized}, ${row.display_name}, 'active',
      ${row.source}, ${row.created_by})`
}

export async function getEndUser(
  db: Queryable,
  tenantId: string,
  id: string,
  options: { lock?: boolean } = {},
): Promise<EndUserRow | undefined> {
  const [row] = options.lock
    ? await db<
        EndUserRow[]
      >`${WITH_APPS(db)} WHERE e.tenant_id = ${tenantId} AND e.id = ${id} FOR UPDATE OF e`
    : await db<EndUserRow[]>`${WITH_APPS(db)} WHERE e.tenant_id = ${tenantId} AND e.id = ${id}`
  return row
}

export async function findEndUserByEmail(
  db: Queryable,
  tenantId: string,
  emailNormalized: string,
): Promise<EndUserRow | undefined> {
  const [row] = await db<EndUserRow[]>`
    ${WITH_APPS(db)} WHERE e.tenant_id = ${tenantId} AND e.email_normalized = ${emailNormalized}`
  return row
}

export interface EndUserFilter {
  applicationId?: string | undefined
  status?: EndUserRow['status'] | undefined
  /** A substring of the e-mail address or the display name, matched case-insensitively. */
  search?: string | undefined
}

export async function listEndUsers(
  db: Queryable,
  tenantId: string,
  filter: EndUserFilter,
  page: { limit: number; offset: number },
): Promise<{ rows: EndUserRow[]; total: number }> {
  const conditions = [db`e.tenant_id = ${tenantId}`]
  if (filter.status) conditions.push(db`e.status = ${filter.status}`)
  if (filter.applicationId)
    conditions.push(
      db`EXISTS (SELECT 1 FROM enduser_applications a WHERE a.enduser_id = e.id AND a.application_id = ${filter.applicationId})`,
    )
  if (filter.search) {
    // LIKE's own wildcards in the search are literal characters.
    const pattern = `%${filter.search.toLowerCase().replace(/[\\%_]/g, (c) => `\\${c}`)}%`
    conditions.push(db`(e.email_normalized LIKE ${pattern} OR lower(e.display_name) LIKE ${pattern})`)
  }
  const where = conditions.reduce((all, next) => db`${all} AND ${next}`)
  const rows = await db<EndUserRow[]>`
    ${WITH_APPS(db)} WHERE ${where} ORDER BY e.created_at, e.id LIMIT ${page.limit} OFFSET ${page.offset}`
  const [counted] = await db<
    { total: number }[]
  >`SELECT count(*)::int AS total FROM endusers e WHERE ${where}`
  return { rows, total: counted!.total }
}

export async function setStatus(
  db: Queryable,
  tenantId: string,
  id: string,
  status: EndUserRow['status'],
  at: Date,
): Promise<boolean> {
  const rows = await db`
    UPDATE endusers SET status = ${status}, blocked_at = ${status === 'blocked' ? at : null}, updated_at = ${at}
    WHERE tenant_id = ${tenantId} AND id = ${id}`
  return rows.count === 1
}

/** Removes the record and everything that hangs on it (application lists, role assignments: ON DELETE CASCADE). */
export async function deleteEndUser(db: Queryable, tenantId: string, id: string): Promise<boolean> {
  const rows = await db`DELETE FROM endusers WHERE tenant_id = ${tenantId} AND id = ${id}`
  return rows.count === 1
}

/** Adds the user to an application's list; false when already there. */
export async function addToApplication(
  db: Queryable,
  input: { tenantId: string; endUserId: string; applicationId: string },
): Promise<boolean> {
  const rows = await db`
    INSERT INTO enduser_applications (enduser_id, application_id, tenant_id)
    VALUES (${input.endUserId}, ${input.applicationId}, ${input.tenantId})
    ON CONFLICT DO NOTHING`
  return rows.count === 1
}

export async function countEndUsers(db: Queryable, tenantId: string): Promise<number> {
  const [row] = await db<
    { total: number }[]
  >`SELECT count(*)::int AS total FROM endusers WHERE tenant_id = ${tenantId}`
  return row?.total ?? 0
}
