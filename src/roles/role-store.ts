import type { Queryable } from '../data/database.ts'

/** application_roles and enduser_roles (migration 0012). Only the roles module touches them. */
export interface RoleRow {
  id: string
  tenant_id: string
  application_id: string
  name: string
  description: string
  permissions: string[]
  created_at: Date
  created_by: string
  updated_at: Date
}

export async function insertRole(
  db: Queryable,
  row: Pick<
    RoleRow,
    'id' | 'tenant_id' | 'application_id' | 'name' | 'description' | 'permissions' | 'created_by'
  >,
): Promise<RoleRow> {
  const [created] = await db<RoleRow[]>`
    INSERT INTO application_roles (id, tenant_id, application_id, name, description, permissions, created_by)
    VALUES (${row.id}, ${row.tenant_id}, ${row.application_id}, ${row.name}, ${row.description}, ${row.permissions},
      ${row.created_by})
    RETURNING *`
  return created!
}

export async function getRole(db: Queryable, tenantId: string, id: string): Promise<RoleRow | undefined> {
  const [row] = await db<
    RoleRow[]
  >`SELECT * FROM application_roles WHERE tenant_id = ${tenantId} AND id = ${id}`
  return row
}

export async function listRoles(
  db: Queryable,
  tenantId: string,
  applicationId: string | undefined,
  page: { limit: number; offset: number },
): Promise<{ rows: RoleRow[]; total: number }> {
  const where = applicationId
    ? db`tenant_id = ${tenantId} AND application_id = ${applicationId}`
    : db`tenant_id = ${tenantId}`
  const rows = await db<RoleRow[]>`
    SELECT * FROM application_roles WHERE ${where} ORDER BY created_at, id LIMIT ${page.limit} OFFSET ${page.offset}`
  const [counted] = await db<
    { total: number }[]
  >`SELECT count(*)::int AS total FROM application_roles WHERE ${where}`
  return { rows, total: counted!.total }
}

export async function updateRole(
  db: Queryable,
  tenantId: string,
  id: string,
  change: { name: string; description: string; permissions: string[] },
): Promise<RoleRow | undefined> {
  const [row] = await db<RoleRow[]>`
    UPDATE application_roles SET name = ${change.name}, description = ${change.description},
      permissions = ${change.permissions}, updated_at = now()
    WHERE tenant_id = ${tenantId} AND id = ${id}
    RETURNING *`
  return row
}

export async function deleteRole(db: Queryable, tenantId: string, id: string): Promise<boolean> {
  const rows = await db`DELETE FROM application_roles WHERE tenant_id = ${tenantId} AND id = ${id}`
  return rows.count === 1
}

export async function assignRole(
  db: Queryable,
  input: { endUserId: string; roleId: string; by: string },
): Promise<boolean> {
  const rows = await db`
    INSERT INTO enduser_roles (enduser_id, role_id, assigned_by) VALUES (${input.endUserId}, ${input.roleId}, ${input.by})
    ON CONFLICT DO NOTHING`
  return rows.count === 1
}

export async function unassignRole(db: Queryable, endUserId: string, roleId: string): Promise<boolean> {
  const rows = await db`DELETE FROM enduser_roles WHERE enduser_id = ${endUserId} AND role_id = ${roleId}`
  return rows.count === 1
}

export async function rolesOfEndUser(
  db: Queryable,
  tenantId: string,
  endUserId: string,
  applicationId?: string,
): Promise<RoleRow[]> {
  const app = applicationId ? db`AND r.application_id = ${applicationId}` : db``
  return db<RoleRow[]>`
    SELECT r.* FROM enduser_roles er JOIN application_roles r ON r.id = er.role_id
    WHERE er.enduser_id = ${endUserId} AND r.tenant_id = ${tenantId} ${app}
    ORDER BY r.name`
}
