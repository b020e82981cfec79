import { randomBytes, randomUUID } from 'node:crypto'
import type { AuditLog } from '../audit/audit-log.ts'
import type { Actor } from '../auth/request-context.ts'
import type { Queryable, Sql } from '../data/database.ts'
import type { TenantKeks } from '../keyring/tenant-kek.ts'
import type { OutboundClient } from '../outbound/outbound-client.ts'
import type { Clock } from '../platform/clock.ts'
import { sendWebhook } from './webhook-sender.ts'
import { signatureOf } from './webhook-signature.ts'
import {
  claimAttempt,
  type DeliveryRow,
  getDelivery,
  getSealedSecret,
  insertDelivery,
  listDeliveries,
  overdueDeliveries,
  recordAttempt,
  storeSecret,
} from './webhook-store.ts'

/** Spec 6 and 8: a failed delivery is retried 3 times, after 1 s, 10 s and 60 s. */
const RETRY_DELAYS_MS = [1000, 10_000, 60_000] as const
const MAX_ATTEMPTS = RETRY_DELAYS_MS.length + 1
/** Beyond the attempt's own timeout: signing, recording and a slow database. */
const LEASE_MARGIN_MS = 30_000

interface WebhookEvent {
  type: string
  tenantId: string
  data: Record<string, unknown>
}

/** An event of the partner programme, delivered to a partner's endpoint (src/partners). */
export interface PartnerWebhookEvent {
  type: string
  partnerId: string
  data: Record<string, unknown>
}

/** The partners module's webhook secrets (a partner's deliveries are signed with the partner's). */
export interface PartnerSecrets {
  secretOf(partnerId: string): Promise<Buffer>
}

export interface NextAttempt {
  deliveryId: string
  /**
   * Whose delivery, as the fair scheduler's queue (src/jobs/fair-scheduler.ts): the owning
   * tenant's id, or `partner:<id>` for a partner's delivery.
   */
  queue: string
  attempt: number
  delayMs: number
}

export interface WebhookService {
  /**
   * Writes the event's delivery to the outbox in the caller's transaction, so it exists exactly
   * when the event does. The caller schedules the first attempt after commit.
   */
  enqueue(tx: Queryable, url: string, event: WebhookEvent, now: Date): Promise<NextAttempt>
  /** The same for a partner's event: `{id, type, partnerId, time, data}`, signed with the partner's secret. */
  enqueueForPartner(tx: Queryable, url: string, event: PartnerWebhookEvent, now: Date): Promise<NextAttempt>
  /** Makes attempt `attempt` of a delivery; the attempt to schedule next, if any. */
  attempt(deliveryId: string, attempt: number): Promise<NextAttempt | null>
  /** Pending deliveries whose next attempt is overdue by more than `graceMs`: their job was lost. */
  overdue(graceMs: number): Promise<NextAttempt[]>
  /** The tenant's signing secret, created on first use; audited (`webhooks.secret.reveal`). */
  secret(actor: Actor): Promise<string>
  /** A new signing secret; audited (`webhooks.secret.rotate`) in the transaction that stores it. */
  rotateSecret(actor: Actor): Promise<string>
  list(tenantId: string, page: { limit: number; offset: number }): Promise<DeliveryRow[]>
  get(tenantId: string, id: string): Promise<DeliveryRow | undefined>
}

/** The audit record of a secret's use names the tenant's secret, never its value. */
const secretResource = (actor: Actor) => ({
  resource: `webhook-secret:${actor.tenantId}`,
  outcome: 'success' as const,
})

/** The fairness queue of a delivery: its tenant, or its partner. */
const queueOf = (row: { tenant_id: string | null; partner_id: string | null }) =>
  row.tenant_id ?? `partner:${row.partner_id}`

const secretAad = (tenantId: string) => `kms:webhook-secret:v1:${tenantId}`
const newSecret = () => `whsec_${randomBytes(32).toString('base64url')}`

export function createWebhookService(deps: {
  sql: Sql
  audit: AuditLog
  /** Every attempt goes through it: the address policy applies at delivery too. */
  outbound: OutboundClient
  tenantKeks: TenantKeks
  clock: Clock
  timeoutMs: number
  /** Multiplies the retry delays (1 in production; tests shrink the schedule). */
  retryScale: number
  userAgent: string
  /** Partner deliveries are signed with the partner's own secret (partners/partner-service.ts). */
  partnerSecrets?: PartnerSecrets
}): WebhookService {
  const { sql, tenantKeks, clock } = deps
  const delayBefore = (attempt: number) => Math.round(RETRY_DELAYS_MS[attempt - 2]! * deps.retryScale)

  async function secretBytes(db: Queryable, tenantId: string): Promise<Buffer> {
    let sealed = await getSealedSecret(db, tenantId)
    if (!sealed) {
      const fresh = await tenantKeks.seal(tenantId, Buffer.from(newSecret()), secretAad(tenantId), db)
      sealed = await storeSecret(db, tenantId, fresh, clock.now(), 'keep-existing')
    }
    return tenantKeks.open(tenantId, sealed, secretAad(tenantId), db)
  }

  return {
    async enqueue(tx, url, event, now) {
      const id = randomUUID()
      const eventId = randomUUID()
      const payload = JSON.stringify({
        id: eventId,
        type: event.type,
        tenantId: event.tenantId,
        time: now.toISOString(),
        data: event.data,
      })
      await insertDelivery(tx, {
        id,
        tenant_id: event.tenantId,
        event_id: eventId,
        event_type: event.type,
        url,
        payload,
        created_at: now,
      })
      return { deliveryId: id, queue: event.tenantId, attempt: 1, delayMs: 0 }
    },

    async enqueueForPartner(tx, url, event, now) {
      const id = randomUUID()
      const eventId = randomUUID()
      const payload = JSON.stringify({
        id: eventId,
        type: event.type,
        partnerId: event.partnerId,
        time: now.toISOString(),
        data: event.data,
      })
      await insertDelivery(tx, {
        id,
        tenant_id: null,
        partner_id: event.partnerId,
        event_id: eventId,
        event_type: event.type,
        url,
        payload,
        created_at: now,
      })
      return {
        deliveryId: id,
        queue: queueOf({ tenant_id: null, partner_id: event.partnerId }),
        attempt: 1,
        delayMs: 0,
      }
    },

    async attempt(deliveryId, attempt) {
      const leaseUntil = new Date(clock.now().getTime() + deps.timeoutMs + LEASE_MARGIN_MS)
      const row = await claimAttempt(sql, deliveryId, attempt, leaseUntil)
      if (!row) return null
      const partnerSecrets = deps.partnerSecrets
      if (!row.tenant_id && (!row.partner_id || !partnerSecrets)) return null
      const secret = row.tenant_id
        ? await secretBytes(sql, row.tenant_id)
        : await partnerSecrets!.secretOf(row.partner_id!)
      let signature: string
      try {
        signature = signatureOf(secret, row.payload)
      } finally {
        secret.fill(0)
      }
      const at = clock.now()
      const result = await sendWebhook(deps.outbound, {
        url: row.url,
        body: row.payload,
        signature,
        eventId: row.event_id,
        eventType: row.event_type,
        timeoutMs: deps.timeoutMs,
        userAgent: deps.userAgent,
      })
      const succeeded = result.error === null
      // A refused destination is final: retrying would only repeat the refusal, and a name that
      // resolves to an internal address is not something to keep knocking on.
      const last = attempt >= MAX_ATTEMPTS || result.error === 'destination_not_allowed'
      const next =
        succeeded || last
          ? null
          : { deliveryId, queue: queueOf(row), attempt: attempt + 1, delayMs: delayBefore(attempt + 1) }
      const finishedAt = clock.now()
      await recordAttempt(
        sql,
        deliveryId,
        { attempt, at: at.toISOString(), ...result },
        {
          status: succeeded ? 'succeeded' : last ? 'failed' : 'pending',
          nextAttemptAt: next ? new Date(finishedAt.getTime() + next.delayMs) : null,
          completedAt: next ? null : finishedAt,
        },
      )
      return next
    },

    async overdue(graceMs) {
      const now = clock.now()
      const rows = await overdueDeliveries(sql, new Date(now.getTime() - graceMs), 100)
      return rows.map((row) => ({
        deliveryId: row.id,
        queue: queueOf(row),
        attempt: row.claimed_attempt + 1,
        delayMs: 0,
      }))
    },

    async secret(actor) {
      const bytes = await secretBytes(sql, actor.tenantId)
      try {
        // Recorded before the secret leaves: if the record cannot be written, it is not shown.
        await deps.audit.record({ ...actor, ...secretResource(actor), action: 'webhooks.secret.reveal' })
        return bytes.toString('utf8')
      } finally {
        bytes.fill(0)
      }
    },

    async rotateSecret(actor) {
      const { tenantId } = actor
      const secret = newSecret()
      const sealed = await tenantKeks.seal(tenantId, Buffer.from(secret), secretAad(tenantId))
      await sql.begin(async (tx) => {
        await storeSecret(tx, tenantId, sealed, clock.now(), 'replace')
        await deps.audit.recordInTransaction(tx, {
          ...actor,
          ...secretResource(actor),
          action: 'webhooks.secret.rotate',
        })
      })
      return secret
    },

    list: (tenantId, page) => listDeliveries(sql, tenantId, page),
    get: (tenantId, id) => getDelivery(sql, tenantId, id),
  }
}
