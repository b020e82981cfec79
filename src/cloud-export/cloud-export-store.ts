import type { Queryable } from '../data/database.ts'
import { clipText } from '../platform/text.ts'
import type { CloudProvider } from './provider.ts'

/** cloud_connections and cloud_exports (migrations 0021, 0029): only the cloud-export module touches them. */
export interface ConnectionRow {
  id: string
  tenant_id: string
  name: string
  provider: CloudProvider
  settings: Record<string, unknown>
  credentials_sealed: Buffer
  created_at: Date
  created_by: string
  updated_at: Date
  credentials_updated_at: Date
}

export interface ExportRow {
  id: string
  tenant_id: string
  key_id: string
  connection_id: string
  provider: CloudProvider
  target: Record<string, unknown>
  created_at: Date
  created_by: string
  desired_version: number
  sync_status: 'pending' | 'synced' | 'failed'
  attempts: number
  next_attempt_at: Date | null
  lease_until: Date | null
  last_sync_at: Date | null
  last_sync_version: number | null
  last_sync_error_code: string | null
  last_sync_error: string | null
  last_attempt_at: Date | null
  provider_key_id: string | null
  provider_state: Record<string, unknown> | null
}

export const CONNECTION_NAME_CONSTRAINT = 'cloud_connections_name_unique'

export async function insertConnection(db: Queryable, row: ConnectionRow): Promise<ConnectionRow> {
  const [created] = await db<ConnectionRow[]>`
    INSERT INTO cloud_connections (id, tenant_id, name, provider, settings, credentials_sealed, created_at,
      created_by, updated_at, credentials_updated_at)
    VALUES (${row.id}, ${row.tenant_id}, ${row.name}, ${row.provider}, ${db.json(row.settings as never)},
      ${row.credentials_sealed}, ${row.created_at}, ${row.created_by}, ${row.updated_at}, ${row.credentials_updated_at})
    RETURNING *`
  return created!
}

export async function getConnection(
  db: Queryable,
  tenantId: string,
  id: string,
): Promise<ConnectionRow | undefined> {
  const [row] = await db<ConnectionRow[]>`
    SELECT * FROM cloud_connections WHERE tenant_id = ${tenantId} AND id = ${id}`
  return row
}

export async function listConnections(db: Queryable, tenantId: string): Promise<ConnectionRow[]> {
  return db<ConnectionRow[]>`
    SELECT * FROM cloud_connections WHERE tenant_id = ${tenantId} ORDER BY created_at, id`
}

export async function replaceCredentials(
  db: Queryable,
  tenantId: string,
  id: string,
  sealed: Buffer,
  now: Date,
): Promise<ConnectionRow | undefined> {
  const [row] = await db<ConnectionRow[]>`
    UPDATE cloud_connections SET credentials_sealed = ${sealed}, credentials_updated_at = ${now}, updated_at = ${now}
    WHERE tenant_id = ${tenantId} AND id = ${id}
    RETURNING *`
  return row
}

/** Removes a connection no export uses (the caller checked under the same lock). */
export async function deleteConnection(db: Queryable, tenantId: string, id: string): Promise<boolean> {
  const rows =
    await db`DELETE FROM cloud_connections WHERE tenant_id = ${tenantId} AND id = ${id} RETURNING id`
  return rows.length > 0
}

export async function lockConnection(
  db: Queryable,
  tenantId: string,
  id: string,
): Promise<ConnectionRow | undefined> {
  const [row] = await db<ConnectionRow[]>`
    SELECT * FROM cloud_connections WHERE tenant_id = ${tenantId} AND id = ${id} FOR UPDATE`
  return row
}

export async function countExportsOfConnection(db: Queryable, connectionId: string): Promise<number> {
  const [row] = await db<{ n: number }[]>`
    SELECT count(*)::int AS n FROM cloud_exports WHERE connection_id = ${connectionId}`
  return row?.n ?? 0
}

export async function insertExport(
  db: Queryable,
  row: Pick<
    ExportRow,
    | 'id'
    | 'tenant_id'
    | 'key_id'
    | 'connection_id'
    | 'provider'
    | 'target'
    | 'created_at'
    | 'created_by'
    | 'desired_version'
    | 'next_attempt_at'
  >,
): Promise<ExportRow> {
  const [created] = await db<ExportRow[]>`
    INSERT INTO cloud_exports (id, tenant_id, key_id, connection_id, provider, target, created_at, created_by,
      desired_version, sync_status, next_attempt_at)
    VALUES (${row.id}, ${row.tenant_id}, ${row.key_id}, ${row.connection_id}, ${row.provider},
      ${db.json(row.target as never)}, ${row.created_at}, ${row.created_by}, ${row.desired_version}, 'pending',
      ${row.next_attempt_at})
    RETURNING *`
  return created!
}

export async function getExport(
  db: Queryable,
  tenantId: string,
  keyId: string,
  id: string,
): Promise<ExportRow | undefined> {
  const [row] = await db<ExportRow[]>`
    SELECT * FROM cloud_exports WHERE tenant_id = ${tenantId} AND key_id = ${keyId} AND id = ${id}`
  return row
}

export async function listExports(db: Queryable, tenantId: string, keyId: string): Promise<ExportRow[]> {
  return db<ExportRow[]>`
    SELECT * FROM cloud_exports WHERE tenant_id = ${tenantId} AND key_id = ${keyId} ORDER BY created_at, id`
}

export async function deleteExport(
  db: Queryable,
  tenantId: string,
  keyId: string,
  id: string,
): Promise<boolean> {
  const rows = await db`
    DELETE FROM cloud_exports WHERE tenant_id = ${tenantId} AND key_id = ${keyId} AND id = ${id} RETURNING id`
  return rows.length > 0
}

/**
 * A sync is wanted (a rotation, a manual sync): the export becomes pending for `version`, due
 * now, with a fresh count of attempts. A lease of a running push is kept: that push's outcome is
 * recorded and, the version being newer, the export stays pending.
 */
export async function requestSync(
  db: Queryable,
  where: { tenantId: string; keyId: string; exportId?: string },
  version: number,
  now: Date,
): Promise<ExportRow[]> {
  return db<ExportRow[]>`
    UPDATE cloud_exports
    SET desired_version = GREATEST(desired_version, ${version}), sync_status = 'pending', attempts = 0,
      next_attempt_at = ${now}
    WHERE tenant_id = ${where.tenantId} AND key_id = ${where.keyId}
      ${where.exportId ? db`AND id = ${where.exportId}` : db``}
    RETURNING *`
}

/**
 * Claims due exports for one push each: pending, due, and not leased by another job process.
 * The lease bounds how long a crashed process keeps them.
 */
export async function claimDue(
  db: Queryable,
  now: Date,
  leaseUntil: Date,
  limit: number,
): Promise<ExportRow[]> {
  return db<ExportRow[]>`
    UPDATE cloud_exports SET lease_until = ${leaseUntil}, attempts = attempts + 1, last_attempt_at = ${now}
    WHERE id IN (
      SELECT id FROM cloud_exports
      WHERE sync_status = 'pending' AND next_attempt_at <= ${now}
        AND (lease_until IS NULL OR lease_until <= ${now})
      ORDER BY next_attempt_at
      LIMIT ${limit}
      FOR UPDATE SKIP LOCKED)
    RETURNING *`
}

/** A push succeeded: recorded if the lease is still ours; pending stays if a newer version is wanted. */
export async function recordSuccess(
  db: Queryable,
  input: {
    id: string
    leaseUntil: Date
    version: number
    now: Date
    providerKeyId: string
    providerState: Record<string, unknown>
  },
): Promise<ExportRow | undefined> {
  const [row] = await db<ExportRow[]>`
    UPDATE cloud_exports
    SET last_sync_at = ${input.now}, last_sync_version = ${input.version}, last_sync_error = NULL,
      last_sync_error_code = NULL, provider_key_id = ${input.providerKeyId},
      provider_state = ${db.json(input.providerState as never)}, lease_until = NULL,
      sync_status = CASE WHEN desired_version > ${input.version} THEN 'pending' ELSE 'synced' END,
      attempts = CASE WHEN desired_version > ${input.version} THEN 0 ELSE attempts END,
      next_attempt_at = CASE WHEN desired_version > ${input.version} THEN ${input.now}::timestamptz ELSE NULL END
    WHERE id = ${input.id} AND lease_until = ${input.leaseUntil}
    RETURNING *`
  return row
}

/** A push failed: retried at `retryAt`, or given up (`retryAt` null). */
export async function recordFailure(
  db: Queryable,
  input: { id: string; leaseUntil: Date; code: string; message: string; retryAt: Date | null },
): Promise<ExportRow | undefined> {
  const [row] = await db<ExportRow[]>`
    UPDATE cloud_exports
    SET last_sync_error_code = ${input.code}, last_sync_error = ${clipText(input.message, 500)}, lease_until = NULL,
      sync_status = ${input.retryAt ? 'pending' : 'failed'}, next_attempt_at = ${input.retryAt}
    WHERE id = ${input.id} AND lease_until = ${input.leaseUntil}
    RETURNING *`
  return row
}

/**
 * Exports that must not be pushed at all (their key is not exportable): failed with the reason,
 * not due again. A running push keeps its lease; it checks the same rule before sending anything.
 */
export async function stopExports(
  db: Queryable,
  where: { tenantId: string; keyId: string; exportId?: string },
  code: string,
  message: string,
): Promise<ExportRow[]> {
  return db<ExportRow[]>`
    UPDATE cloud_exports
    SET sync_status = 'failed', last_sync_error_code = ${code}, last_sync_error = ${clipText(message, 500)},
      next_attempt_at = NULL
    WHERE tenant_id = ${where.tenantId} AND key_id = ${where.keyId}
      ${where.exportId ? db`AND id = ${where.exportId}` : db``}
    RETURNING *`
}
