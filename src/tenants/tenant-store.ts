import type { Queryable } from '../data/database.ts'

export interface TenantRow {
  id: string
  name: string
  created_at: Date
}

export async function insertTenant(
  db: Queryable,
  tenant: { id: string; name: string; kekWrapped: Buffer; kekMasterKeyId: string },
): Promise<TenantRow> {
  const [row] = await db<TenantRow[]>`
    INSERT INTO tenants (id, name, kek_wrapped, kek_master_key_id)
    VALUES (${tenant.id}, ${tenant.name}, ${tenant.kekWrapped}, ${tenant.kekMasterKeyId})
    RETURNING id, name, created_at`
  return row!
}

export async function getTenant(db: Queryable, id: string): Promise<TenantRow | undefined> {
  const [row] = await db<TenantRow[]>`SELECT id, name, created_at FROM tenants WHERE id = ${id}`
  return row
}

export async function listTenants(db: Queryable): Promise<TenantRow[]> {
  return db<TenantRow[]>`SELECT id, name, created_at FROM tenants ORDER BY created_at, id`
}

export async function countTenants(db: Queryable): Promise<number> {
  const [row] = await db<{ n: number }[]>`SELECT count(*)::int AS n FROM tenants`
  return row?.n ?? 0
}
