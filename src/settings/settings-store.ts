import type { Queryable } from '../platform/database.ts'

/** tenant_settings (migration 0010). Only the settings module touches it. */

export async function getSecurityDocument(
  db: Queryable,
  tenantId: string,
): Promise<Record<string, unknown> | undefined> {
  const [row] = await db<{ security: Record<string, unknown> }[]>`
    SELECT security FROM tenant_settings WHERE tenant_id = ${tenantId}`
  return row?.security
}

/** The tenant's row, made if missing, locked until the transaction ends (concurrent changes queue). */
export async function lockSecurityDocument(
  db: Queryable,
  tenantId: string,
): Promise<Record<string, unknown>> {
  await db`INSERT INTO tenant_settings (tenant_id) VALUES (${tenantId}) ON CONFLICT (tenant_id) DO NOTHING`
  const [row] = await db<{ security: Record<string, unknown> }[]>`
    SELECT security FROM tenant_settings WHERE tenant_id = ${tenantId} FOR UPDATE`
  return row!.security
}

export async function saveSecurityDocument(
  db: Queryable,
  tenantId: string,
  security: Record<string, unknown>,
  by: string,
): Promise<void> {
  await db`
    UPDATE tenant_settings SET security = ${db.json(security as never)}, updated_at = now(), updated_by = ${by}
    WHERE tenant_id = ${tenantId}`
}
