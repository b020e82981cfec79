import type { Queryable } from '../data/database.ts'

/** Data access for webhook secrets and deliveries (the outbox). */

export interface DeliveryAttempt {
  attempt: number
  at: string
  statusCode: number | null
  error: string | null
  durationMs: number
  responseExcerpt: string | null
}

export interface DeliveryRow {
  id: string
  /** The owner: a tenant's delivery, or (tenant_id null) a partner's (migration 0019). */
  tenant_id: string | null
  partner_id: string | null
  event_id: string
  event_type: string
  url: string
  payload: string
  status: 'pending' | 'succeeded' | 'failed'
  attempts: DeliveryAttempt[]
  claimed_attempt: number
  next_attempt_at: Date | null
  created_at: Date
  completed_at: Date | null
}

export async function getSealedSecret(db: Queryable, tenantId: string): Promise<Buffer | undefined> {
  const [row] = await db<{ sealed_secret: Buffer }[]>`
    SELECT sealed_secret FROM webhook_secrets WHERE tenant_id = ${tenantId}`
  return row?.sealed_secret
}

/**
 * Stores the tenant's secret: `replace` overwrites the current one (rotation); otherwise a
 * secret stored meanwhile by another process wins. Returns the secret that is stored.
 */
export async function storeSecret(
  db: Queryable,
  tenantId: string,
  sealed: Buffer,
  now: Date,
  mode: 'replace' | 'keep-existing',
): Promise<Buffer> {
  const [row] =
    mode === 'replace'
      ? await db<{ sealed_secret: Buffer }[]>`
          INSERT INTO webhook_secrets (tenant_id, sealed_secret, created_at)
          VALUES (${tenantId}, ${sealed}, ${now})
          ON CONFLICT (tenant_id) DO UPDATE
            SET sealed_secret = EXCLUDED.sealed_secret, created_at = EXCLUDED.created_at
          RETURNING sealed_secret`
      : await db<{ sealed_secret: Buffer }[]>`
          INSERT INTO webhook_secrets (tenant_id, sealed_secret, created_at)
          VALUES (${tenantId}, ${sealed}, ${now})
          ON CONFLICT (tenant_id) DO UPDATE SET tenant_id = webhook_secrets.tenant_id
          RETURNING sealed_secret`
  return row!.sealed_secret
}

export async function insertDelivery(
  db: Queryable,
  row: Pick<
    DeliveryRow,
    'id' | 'tenant_id' | 'event_id' | 'event_type' | 'url' | 'payload' | 'created_at'
  > & {
    partner_id?: string | null
  },
): Promise<void> {
  await db`
    INSERT INTO webhook_deliveries ${db({ ...row, status: 'pending', next_attempt_at: row.created_at })}`
}

/**
 * Claims attempt `attempt` of a pending delivery: only the attempt after the last one claimed
 * can be, so a job that arrives twice (or late, after a Redis restart) does nothing.
 */
export async function claimAttempt(
  db: Queryable,
  id: string,
  attempt: number,
  leaseUntil: Date,
): Promise<DeliveryRow | undefined> {
  // The lease: while the attempt runs, the outbox sweep must not take it for a lost job.
  const [row] = await db<DeliveryRow[]>`
    UPDATE webhook_deliveries SET claimed_attempt = ${attempt}, next_attempt_at = ${leaseUntil}
    WHERE id = ${id} AND status = 'pending' AND claimed_attempt = ${attempt - 1}
    RETURNING *`
  return row
}

export async function recordAttempt(
  db: Queryable,
  id: string,
  attempt: DeliveryAttempt,
  outcome: { status: DeliveryRow['status']; nextAttemptAt: Date | null; completedAt: Date | null },
): Promise<void> {
  await db`
    UPDATE webhook_deliveries SET
      attempts = attempts || ${db.json([attempt] as never)}::jsonb,
      status = ${outcome.status},
      next_attempt_at = ${outcome.nextAttemptAt},
      completed_at = ${outcome.completedAt}
    WHERE id = ${id}`
}

/** Pending deliveries whose next attempt is overdue by `grace`: their job was lost. */
export async function overdueDeliveries(
  db: Queryable,
  before: Date,
  limit: number,
): Promise<Pick<DeliveryRow, 'id' | 'tenant_id' | 'partner_id' | 'claimed_attempt' | 'next_attempt_at'>[]> {
  return db<Pick<DeliveryRow, 'id' | 'tenant_id' | 'partner_id' | 'claimed_attempt' | 'next_attempt_at'>[]>`
    SELECT id, tenant_id, partner_id, claimed_attempt, next_attempt_at FROM webhook_deliveries
    WHERE status = 'pending' AND next_attempt_at <= ${before}
    ORDER BY next_attempt_at LIMIT ${limit}`
}

export async function listDeliveries(
  db: Queryable,
  tenantId: string,
  page: { limit: number; offset: number },
): Promise<DeliveryRow[]> {
  return db<DeliveryRow[]>`
    SELECT * FROM webhook_deliveries WHERE tenant_id = ${tenantId}
    ORDER BY created_at DESC, id LIMIT ${page.limit} OFFSET ${page.offset}`
}

export async function getDelivery(
  db: Queryable,
  tenantId: string,
  id: string,
): Promise<DeliveryRow | undefined> {
  const [row] = await db<DeliveryRow[]>`
    SELECT * FROM webhook_deliveries WHERE tenant_id = ${tenantId} AND id = ${id}`
  return row
}
