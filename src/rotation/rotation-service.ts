import type { AuditLog } from '../audit/audit-log.ts'
import type { Actor } from '../auth/request-context.ts'
import type { Queryable, Sql } from '../data/database.ts'
import type { AlgorithmName } from '../keys/algorithms.ts'
import { resolveKeyRef } from '../keys/alias-refs.ts'
import type { KeyCache } from '../keys/key-cache.ts'
import { type KeyService, requireRotatable } from '../keys/key-service.ts'
import { keyState, requireState } from '../keys/key-state.ts'
import { getKey, type KeyRow, updateKey } from '../keys/key-store.ts'
import { DestinationRefused, DestinationUnresolved } from '../outbound/destination.ts'
import type { OutboundClient } from '../outbound/outbound-client.ts'
import type { Clock } from '../platform/clock.ts'
import { invalidField, notFound } from '../platform/errors.ts'
import type { NextAttempt, WebhookService } from '../webhooks/webhook-service.ts'
import { type Frequency, INTERVAL_MS, nextRotation } from './rotation-schedule.ts'
import {
  deletePolicy,
  dueRotations,
  getPolicy,
  policiesOfTenant,
  type RotationPolicyRow,
  setPaused,
  upsertPolicy,
} from './rotation-store.ts'

interface RotationPolicyView {
  keyId: string
  frequency: Frequency
  intervalSeconds: number
  webhookUrl: string | null
  paused: boolean
  pausedAt: string | null
  nextRotationAt: string | null
  lastRotatedAt: string | null
  createdAt: string
  updatedAt: string
}

export interface RotationService {
  /** Creates or replaces the key's policy (a new frequency restarts the schedule from now). */
  set(
    actor: Actor,
    keyId: string,
    input: { frequency: Frequency; webhookUrl?: string | null },
  ): Promise<RotationPolicyView>
  get(actor: Actor, keyId: string): Promise<RotationPolicyView>
  remove(actor: Actor, keyId: string): Promise<void>
  pause(actor: Actor, keyId: string): Promise<RotationPolicyView>
  resume(actor: Actor, keyId: string): Promise<RotationPolicyView>
  /**
   * Rotates every key whose policy is due, each exactly once: the key row is locked (SKIP
   * LOCKED, so concurrent sweeps share the work) and re-checked as due in the transaction that
   * adds the version and moves the schedule on. Returns the webhook deliveries to schedule.
   */
  rotateDue(sweepId: string): Promise<{ rotated: number; skipped: number; deliveries: NextAttempt[] }>
  /** Every policy of the tenant: which keys have one, and since when it is paused (insights). */
  policiesOf(tenantId: string): Promise<Array<{ keyId: string; frequency: Frequency; pausedAt: Date | null }>>
}

const SYSTEM_ACTOR = 'system:rotation-policy'
const SWEEP_BATCH = 20

const policyNotFound = () => notFound('rotation_policy_not_found', 'Rotation policy')
const keyNotFound = () => notFound('key_not_found', 'Key')

function toView(policy: RotationPolicyRow, key: KeyRow): RotationPolicyView {
  return {
    keyId: policy.key_id,
    frequency: policy.frequency,
    intervalSeconds: INTERVAL_MS[policy.frequency] / 1000,
    webhookUrl: policy.webhook_url,
    paused: policy.paused_at !== null,
    pausedAt: policy.paused_at?.toISOString() ?? null,
    nextRotationAt: key.next_rotation_at?.toISOString() ?? null,
    lastRotatedAt: key.last_rotated_at?.toISOString() ?? null,
    createdAt: policy.created_at.toISOString(),
    updatedAt: policy.updated_at.toISOString(),
  }
}

/**
 * Only http(s) targets, without credentials in the URL (they would be stored and shown), and
 * only destinations the outbound client would call (src/outbound/): the address policy is
 * checked when the URL is saved, with the reason in the 400, and again at each delivery (the
 * name may resolve elsewhere by then). A name that does not exist is refused; a passing DNS
 * failure is not held against the URL, since delivery checks again.
 */
export async function checkWebhookUrl(
  raw: string,
  field: string,
  outbound: Pick<OutboundClient, 'check'>,
): Promise<string> {
  let url: URL
  try {
    url = new URL(raw)
  } catch {
    throw invalidField(field, 'must be an absolute URL')
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:')
    throw invalidField(field, 'must be an http:// or https:// URL')
  if (url.username || url.password) throw invalidField(field, 'must not contain a user name or password')
  try {
    await outbound.check(url)
  } catch (error) {
    if (error instanceof DestinationRefused) {
      throw invalidField(field, `is not an allowed destination: ${error.reason}`)
    }
    if (error instanceof DestinationUnresolved) {
      if (error.definite) throw invalidField(field, `names a host that does not resolve (${error.host})`)
    } else throw error
  }
  return url.href
}

export function createRotationService(deps: {
  sql: Sql
  audit: AuditLog
  keys: Pick<KeyService, 'newMaterial' | 'addVersion'>
  keyCache: Pick<KeyCache, 'invalidateTenant'>
  webhooks: Pick<WebhookService, 'enqueue'>
  outbound: Pick<OutboundClient, 'check'>
  clock: Clock
}): RotationService {
  const { sql, audit, clock } = deps

  /** Runs a change of the key's policy with the key row locked, audited, caches dropped after. */
  async function change(
    actor: Actor,
    keyId: string,
    action: string,
    apply: (
      tx: Queryable,
      key: KeyRow,
      policy: RotationPolicyRow | undefined,
      now: Date,
    ) => Promise<{
      policy: RotationPolicyRow | null
      nextRotationAt: Date | null
      details?: Record<string, string | boolean | null>
    }>,
  ): Promise<{ policy: RotationPolicyRow | null; key: KeyRow }> {
    const now = clock.now()
    const result = await sql.begin(async (tx) => {
      const key = await getKey(tx, actor.tenantId, keyId, 'for update')
      if (!key) throw keyNotFound()
      const policy = await getPolicy(tx, actor.tenantId, keyId, 'for update')
      const outcome = await apply(tx, key, policy, now)
      const updated =
        outcome.nextRotationAt?.getTime() === key.next_rotation_at?.getTime()
          ? key
          : await updateKey(tx, actor.tenantId, keyId, {
              next_rotation_at: outcome.nextRotationAt,
              updated_at: now,
            })
      await audit.recordInTransaction(tx, {
        ...actor,
        action,
        resource: `key:${keyId}`,
        outcome: 'success',
        details: outcome.details ?? null,
      })
      return { policy: outcome.policy, key: updated }
    })
    await deps.keyCache.invalidateTenant(actor.tenantId)
    return result
  }

  /** The key id a path's reference names (an alias resolved; an API key's restriction applied). */
  const keyIdOf = async (actor: Actor, ref: string) => (await resolveKeyRef(sql, actor, ref)).id

  /** When a running policy rotates next: one interval after the last rotation (or the policy's start). */
  const scheduledFrom = (key: KeyRow, policy: RotationPolicyRow) =>
    new Date((key.last_rotated_at ?? policy.created_at).getTime() + INTERVAL_MS[policy.frequency])

  return {
    async set(actor, ref, input) {
      const keyId = await keyIdOf(actor, ref)
      const webhookUrl = input.webhookUrl
        ? await checkWebhookUrl(input.webhookUrl, 'body/webhookUrl', deps.outbound)
        : null
      const { policy, key } = await change(
        actor,
        keyId,
        'keys.rotation_policy.set',
        async (tx, key, existing, now) => {
          requireState(keyState(key, now), ['Active'], 'set a rotation policy on')
          requireRotatable(key)
          const saved = await upsertPolicy(tx, {
            key_id: keyId,
            tenant_id: actor.tenantId,
            frequency: input.frequency,
            webhook_url: webhookUrl,
            paused_at: existing?.paused_at ?? null,
            created_at: existing?.created_at ?? now,
            updated_at: now,
          })
          const restart = !existing || existing.frequency !== input.frequency
          const next = saved.paused_at
            ? null
            : restart
              ? new Date(now.getTime() + INTERVAL_MS[input.frequency])
              : key.next_rotation_at
          return {
            policy: saved,
            nextRotationAt: next,
            details: { frequency: input.frequency, webhook: webhookUrl !== null },
          }
        },
      )
      return toView(policy!, key)
    },

    async policiesOf(tenantId) {
      return (await policiesOfTenant(deps.sql, tenantId)).map((row) => ({
        keyId: row.key_id,
        frequency: row.frequency,
        pausedAt: row.paused_at,
      }))
    },
    async get(actor, ref) {
      const keyId = await keyIdOf(actor, ref)
      const key = await getKey(sql, actor.tenantId, keyId)
      if (!key) throw keyNotFound()
      const policy = await getPolicy(sql, actor.tenantId, keyId)
      if (!policy) throw policyNotFound()
      return toView(policy, key)
    },

    async remove(actor, ref) {
      const keyId = await keyIdOf(actor, ref)
      await change(actor, keyId, 'keys.rotation_policy.delete', async (tx, _key, existing) => {
        if (!existing) throw policyNotFound()
        await deletePolicy(tx, actor.tenantId, keyId)
        return { policy: null, nextRotationAt: null }
      })
    },

    async pause(actor, ref) {
      const keyId = await keyIdOf(actor, ref)
      const { policy, key } = await change(
        actor,
        keyId,
        'keys.rotation_policy.pause',
        async (tx, _key, existing, now) => {
          if (!existing) throw policyNotFound()
          // Pausing a paused policy keeps the original pause time: that is what "paused too long" measures.
          const saved = existing.paused_at ? existing : await setPaused(tx, actor.tenantId, keyId, now, now)
          return { policy: saved, nextRotationAt: null }
        },
      )
      return toView(policy!, key)
    },

    async resume(actor, ref) {
      const keyId = await keyIdOf(actor, ref)
      const { policy, key } = await change(
        actor,
        keyId,
        'keys.rotation_policy.resume',
        async (tx, key, existing, now) => {
          if (!existing) throw policyNotFound()
          if (!existing.paused_at) return { policy: existing, nextRotationAt: key.next_rotation_at }
          const saved = await setPaused(tx, actor.tenantId, keyId, null, now)
          // A rotation that fell due during the pause happens at the next sweep.
          return { policy: saved, nextRotationAt: scheduledFrom(key, saved) }
        },
      )
      return toView(policy!, key)
    },

    async rotateDue(sweepId) {
      let rotated = 0
      let skipped = 0
      const deliveries: NextAttempt[] = []
      const tenants = new Set<string>()
      for (;;) {
        const now = clock.now()
        const due = await dueRotations(sql, now, SWEEP_BATCH)
        if (due.length === 0) break
        let progressed = false
        for (const candidate of due) {
          const outcome = await rotateOne(
            candidate.tenant_id,
            candidate.id,
            candidate.algorithm as AlgorithmName,
            sweepId,
          )
          if (outcome === 'locked') continue
          progressed = true
          tenants.add(candidate.tenant_id)
          if (outcome === 'skipped') skipped++
          else {
            rotated++
            if (outcome.delivery) deliveries.push(outcome.delivery)
          }
        }
        // Everything due is being rotated by another sweep right now.
        if (!progressed) break
      }
      for (const tenantId of tenants) await deps.keyCache.invalidateTenant(tenantId)
      return { rotated, skipped, deliveries }
    },
  }

  async function rotateOne(
    tenantId: string,
    keyId: string,
    algorithm: AlgorithmName,
    sweepId: string,
  ): Promise<'locked' | 'skipped' | { delivery: NextAttempt | null }> {
    return sql.begin(async (tx) => {
      const now = clock.now()
      const [key] = await tx<KeyRow[]>`
        SELECT * FROM keys WHERE tenant_id = ${tenantId} AND id = ${keyId}
          AND next_rotation_at IS NOT NULL AND next_rotation_at <= ${now}
        FOR UPDATE SKIP LOCKED`
      if (!key) return 'locked'
      const policy = await getPolicy(tx, tenantId, keyId, 'for update')
      if (!policy || policy.paused_at) {
        await updateKey(tx, tenantId, keyId, { next_rotation_at: null, updated_at: now })
        return 'skipped'
      }
      const next = nextRotation(key.next_rotation_at!, now, policy.frequency)
      const actor = { tenantId, actor: SYSTEM_ACTOR, requestId: sweepId, clientIp: null }
      const state = keyState(key, now)
      if (state !== 'Active') {
        // Not rotated: an expired, revoked or pending-deletion key gets no new versions. The
        // schedule moves on (the key may become Active again), except for a destroyed key.
        await updateKey(tx, tenantId, keyId, {
          next_rotation_at: state === 'Destroyed' ? null : next,
          updated_at: now,
        })
        await audit.recordInTransaction(tx, {
          ...actor,
          action: 'keys.rotate',
          resource: `key:${keyId}`,
          outcome: 'failure',
          details: { policy: policy.frequency, error: 'key_state_conflict', state },
        })
        return 'skipped'
      }
      const material = await deps.keys.newMaterial(tenantId, algorithm)
      let rotatedKey: KeyRow
      try {
        rotatedKey = await deps.keys.addVersion(tx, key, material, now, { next_rotation_at: next })
      } finally {
        material.secret?.fill(0)
      }
      await audit.recordInTransaction(tx, {
        ...actor,
        action: 'keys.rotate',
        resource: `key:${keyId}`,
        keyVersion: rotatedKey.current_version,
        outcome: 'success',
        details: { policy: policy.frequency },
      })
      const delivery = policy.webhook_url
        ? await deps.webhooks.enqueue(
            tx,
            policy.webhook_url,
            {
              type: 'key.rotated',
              tenantId,
              data: {
                keyId,
                keyName: key.name,
                version: rotatedKey.current_version,
                rotatedAt: now.toISOString(),
              },
            },
            now,
          )
        : null
      return { delivery }
    })
  }
}
