import type { Queryable } from '../data/database.ts'
import type { Frequency } from './rotation-schedule.ts'

/** Data access for rotation policies. Every query names the tenant except the due-key sweep. */

export interface RotationPolicyRow {
  key_id: string
  tenant_id: string
  frequency: Frequency
  webhook_url: string | null
  paused_at: Date | null
  created_at: Date
  updated_at: Date
}

export async function policiesOfTenant(db: Queryable, tenantId: string): Promise<RotationPolicyRow[]> {
  return db<RotationPolicyRow[]>`SELECT * FROM rotation_policies WHERE tenant_id = ${tenantId}`
}

export async function getPolicy(
  db: Queryable,
  tenantId: string,
  keyId: string,
  lock: 'none' | 'for update' = 'none',
): Promise<RotationPolicyRow | undefined> {
  const [row] =
    lock === 'for update'
      ? await db<RotationPolicyRow[]>`
          SELECT * FROM rotation_policies WHERE tenant_id = ${tenantId} AND key_id = ${keyId} FOR UPDATE`
      : await db<RotationPolicyRow[]>`
          SELECT * FROM rotation_policies WHERE tenant_id = ${tenantId} AND key_id = ${keyId}`
  return row
}

export async function upsertPolicy(db: Queryable, row: RotationPolicyRow): Promise<RotationPolicyRow> {
  const [saved] = await db<RotationPolicyRow[]>`
    INSERT INTO rotation_policies ${db(row)}
    ON CONFLICT (key_id) DO UPDATE SET
      frequency = EXCLUDED.frequency,
      webhook_url = EXCLUDED.webhook_url,
      updated_at = EXCLUDED.updated_at
    RETURNING *`
  return saved!
}

export async function setPaused(
  db: Queryable,
  tenantId: string,
  keyId: string,
  pausedAt: Date | null,
  now: Date,
): Promise<RotationPolicyRow> {
  const [row] = await db<RotationPolicyRow[]>`
    UPDATE rotation_policies SET paused_at = ${pausedAt}, updated_at = ${now}
    WHERE tenant_id = ${tenantId} AND key_id = ${keyId} RETURNING *`
  return row!
}

export async function deletePolicy(db: Queryable, tenantId: string, keyId: string): Promise<boolean> {
  const rows = await db`DELETE FROM rotation_policies WHERE tenant_id = ${tenantId} AND key_id = ${keyId}`
  return rows.count > 0
}

/** Keys whose policy is due, oldest due first; no lock (each is re-checked under one). */
export async function dueRotations(
  db: Queryable,
  now: Date,
  limit: number,
): Promise<{ id: string; tenant_id: string; algorithm: string }[]> {
  return db<{ id: string; tenant_id: string; algorithm: string }[]>`
    SELECT id, tenant_id, algorithm FROM keys
    WHERE next_rotation_at IS NOT NULL AND next_rotation_at <= ${now}
    ORDER BY next_rotation_at LIMIT ${limit}`
}
