import type { Queryable } from '../data/database.ts'

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

export async function getBrandingDocument(
  db: Queryable,
  tenantId: string,
): Promise<Record<string, unknown> | undefined> {
  const [row] = await db<{ branding: Record<string, unknown> }[]>`
    SELECT branding FROM tenant_settings WHERE tenant_id = ${tenantId}`
  return row?.branding
}

/** Replaces the tenant's branding (the row is made if missing). */
export async function saveBrandingDocument(
  db: Queryable,
  tenantId: string,
  branding: Record<string, unknown>,
  by: string,
): Promise<void> {
  await db`
    INSERT INTO tenant_settings (tenant_id, branding, updated_by) VALUES (${tenantId}, ${db.json(branding as never)}, ${by})
    ON CONFLICT (tenant_id) DO UPDATE SET branding = EXCLUDED.branding, updated_at = now(), updated_by = EXCLUDED.updated_by`
}
