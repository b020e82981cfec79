import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { DAY_MS } from '../../src/platform/clock.ts'
import { type ManualClock, manualClock } from '../helpers/manual-clock.ts'
import { startTestService, type TenantWithKey, type TestService, waitFor } from '../helpers/service.ts'

/**
 * Rotation policies over HTTP with the background jobs running in the service's process
 * (real BullMQ on the real Redis, sweeping every 100 ms) and a manual clock: each frequency's
 * interval, the key record's nextRotationAt and lastRotatedAt, pause (time kept) and resume,
 * replacing and removing a policy, and the refusals.
 */

const FREQUENCIES = { Daily: 1, Weekly: 7, Monthly: 30, Quarterly: 90, Yearly: 365 } as const
type Frequency = keyof typeof FREQUENCIES

let svc: TestService
let clock: ManualClock
let tenant: TenantWithKey

before(async () => {
  clock = manualClock(new Date('2030-01-01T00:00:00.000Z'))
  // example.invalid never resolves; the operator allowing it by name keeps it a valid webhookUrl.
  svc = await startTestService(
    { KMS_JOB_SWEEP_MS: '100', KMS_OUTBOUND_ALLOW: 'example.invalid' },
    { clock, jobs: true },
  )
  tenant = await svc.createTenant()
})
after(async () => svc?.stop())

const call = (method: string, path: string, body?: unknown) =>
  svc.request(method, `/api/v1${path}`, { key: tenant.key, ...(body === undefined ? {} : { body }) })

async function createKey(algorithm = 'ML-KEM-768', keyType = 'Encryption'): Promise<string> {
  const res = await call('POST', '/keys', { name: `rot-${Math.random()}`, keyType, algorithm })
  assert.equal(res.status, 201, res.text)
  return res.body.id as string
}

const version = async (keyId: string) => (await call('GET', `/keys/${keyId}`)).body.version as number

/** Waits until the sweeps have rotated the key to `expected` versions. */
async function waitForVersion(keyId: string, expected: number): Promise<void> {
  await waitFor(async () => (await version(keyId)) === expected, `key ${keyId} at version ${expected}`)
}

/**
 * Returns once a whole rotation sweep has run at the clock's current time: a sentinel key is made
 * due at exactly now, the latest due time of all, and sweeps take due keys oldest first, so by
 * the time the sentinel is rotated every key due at this time has been too. A test then asserts
 * that a key was *not* rotated without guessing how long a sweep takes.
 */
async function sweepPassed(): Promise<void> {
  const sentinel = await createKey('HMAC-SHA256', 'HMAC')
  await call('POST', `/keys/${sentinel}/rotation-policy`, { frequency: 'Yearly' })
  await svc.sql`UPDATE keys SET next_rotation_at = ${clock.now()} WHERE id = ${sentinel}`
  await waitForVersion(sentinel, 2)
}

describe('each frequency rotates once per interval', () => {
  for (const [frequency, days] of Object.entries(FREQUENCIES) as [Frequency, number][]) {
    test(`${frequency}: a version every ${days} day(s), and not before`, async () => {
      const keyId = await createKey()
      const start = clock.now().getTime()
      const set = await call('POST', `/keys/${keyId}/rotation-policy`, { frequency })
      assert.equal(set.status, 200, set.text)
      assert.equal(set.body.frequency, frequency)
      assert.equal(set.body.intervalSeconds, days * 86_400)
      assert.equal(set.body.nextRotationAt, new Date(start + days * DAY_MS).toISOString())
      const key = (await call('GET', `/keys/${keyId}`)).body
      assert.equal(key.nextRotationAt, set.body.nextRotationAt, 'the key record shows the schedule')
      assert.equal(key.lastRotatedAt, null)

      // Just before the interval: nothing happens, however many sweeps run.
      clock.advance(days * DAY_MS - 1000)
      await sweepPassed()
      assert.equal(await version(keyId), 1)

      clock.advance(1000)
      await waitForVersion(keyId, 2)
      const rotated = (await call('GET', `/keys/${keyId}`)).body
      assert.equal(rotated.lastRotatedAt, new Date(start + days * DAY_MS).toISOString())
      assert.equal(rotated.nextRotationAt, new Date(start + 2 * days * DAY_MS).toISOString())

      clock.advance(days * DAY_MS)
      await waitForVersion(keyId, 3)
      await call('DELETE', `/keys/${keyId}/rotation-policy`)
    })
  }
})

test('rotation audit records name the policy and the new version', async () => {
  const keyId = await createKey()
  await call('POST', `/keys/${keyId}/rotation-policy`, { frequency: 'Daily' })
  clock.advance(DAY_MS)
  await waitForVersion(keyId, 2)
  const rows = await svc.sql`
    SELECT actor, action, key_version, outcome, details FROM audit_log
    WHERE tenant_id = ${tenant.tenantId} AND resource = ${`key:${keyId}`} AND action = 'keys.rotate'`
  assert.equal(rows.length, 1)
  assert.equal(rows[0]!['actor'], 'system:rotation-policy')
  assert.equal(rows[0]!['key_version'], 2)
  assert.deepEqual(rows[0]!['details'], { policy: 'Daily' })
  await call('DELETE', `/keys/${keyId}/rotation-policy`)
})

test('pause keeps its time and stops rotations; resume rotates what fell due, then keeps the interval', async () => {
  const keyId = await createKey()
  const start = clock.now().getTime()
  await call('POST', `/keys/${keyId}/rotation-policy`, { frequency: 'Weekly' })
  clock.advance(DAY_MS)
  const paused = await call('POST', `/keys/${keyId}/rotation-policy/pause`)
  assert.equal(paused.status, 200, paused.text)
  assert.equal(paused.body.paused, true)
  const pausedAt = new Date(start + DAY_MS).toISOString()
  assert.equal(paused.body.pausedAt, pausedAt)
  assert.equal(paused.body.nextRotationAt, null)
  assert.equal((await call('GET', `/keys/${keyId}`)).body.nextRotationAt, null)

  // Pausing again keeps the first pause time.
  clock.advance(DAY_MS)
  assert.equal((await call('POST', `/keys/${keyId}/rotation-policy/pause`)).body.pausedAt, pausedAt)

  clock.advance(14 * DAY_MS)
  await sweepPassed()
  assert.equal(await version(keyId), 1, 'no rotation while paused')
  assert.equal((await call('GET', `/keys/${keyId}/rotation-policy`)).body.pausedAt, pausedAt)

  const resumed = await call('POST', `/keys/${keyId}/rotation-policy/resume`)
  assert.equal(resumed.status, 200, resumed.text)
  assert.equal(resumed.body.paused, false)
  assert.equal(resumed.body.pausedAt, null)
  assert.equal(resumed.body.nextRotationAt, new Date(start + 7 * DAY_MS).toISOString(), 'due since the pause')
  await waitForVersion(keyId, 2)
  const after = (await call('GET', `/keys/${keyId}`)).body
  assert.equal(after.nextRotationAt, new Date(clock.now().getTime() + 7 * DAY_MS).toISOString())
  await call('DELETE', `/keys/${keyId}/rotation-policy`)
})

test('a new frequency restarts the schedule; the same frequency keeps it; removal stops it', async () => {
  const keyId = await createKey()
  const start = clock.now().getTime()
  await call('POST', `/keys/${keyId}/rotation-policy`, { frequency: 'Monthly' })
  clock.advance(DAY_MS)
  const same = await call('POST', `/keys/${keyId}/rotation-policy`, {
    frequency: 'Monthly',
    webhookUrl: 'https://example.invalid/hook',
  })
  assert.equal(same.status, 200, same.text)
  assert.equal(same.body.nextRotationAt, new Date(start + 30 * DAY_MS).toISOString())
  assert.equal(same.body.webhookUrl, 'https://example.invalid/hook')
  const changed = await call('POST', `/keys/${keyId}/rotation-policy`, {
    frequency: 'Daily',
    webhookUrl: null,
  })
  assert.equal(changed.body.nextRotationAt, new Date(start + 2 * DAY_MS).toISOString())
  assert.equal(changed.body.webhookUrl, null)

  const removed = await call('DELETE', `/keys/${keyId}/rotation-policy`)
  assert.equal(removed.status, 204)
  assert.equal((await call('GET', `/keys/${keyId}/rotation-policy`)).status, 404)
  assert.equal((await call('GET', `/keys/${keyId}`)).body.nextRotationAt, null)
  clock.advance(2 * DAY_MS)
  await sweepPassed()
  assert.equal(await version(keyId), 1)
})

describe('refusals', () => {
  test('unknown frequency, bad webhook URLs and unknown fields are 400', async () => {
    const keyId = await createKey()
    for (const body of [
      { frequency: 'Hourly' },
      {},
      { frequency: 'Daily', webhookUrl: 'ftp://example.com/x' },
      { frequency: 'Daily', webhookUrl: 'not a url' },
      { frequency: 'Daily', webhookUrl: 'https://user:pw@example.com/x' },
      { frequency: 'Daily', extra: 1 },
    ]) {
      const res = await call('POST', `/keys/${keyId}/rotation-policy`, body)
      assert.equal(res.status, 400, `${JSON.stringify(body)}: ${res.text}`)
      assert.equal(res.body.error, 'validation_failed')
    }
    assert.equal((await call('GET', `/keys/${keyId}/rotation-policy`)).status, 404, 'nothing was stored')
  })

  test('unknown key and another tenant key are 404; no policy is 404 rotation_policy_not_found', async () => {
    const other = await svc.createTenant()
    const theirs = await svc.request('POST', '/api/v1/keys', {
      key: other.key,
      body: { name: 'theirs', keyType: 'Encryption', algorithm: 'ML-KEM-768' },
    })
    for (const id of ['00000000-0000-4000-8000-000000000000', theirs.body.id]) {
      const res = await call('POST', `/keys/${id}/rotation-policy`, { frequency: 'Daily' })
      assert.equal(res.status, 404, res.text)
      assert.equal(res.body.error, 'key_not_found')
    }
    const keyId = await createKey()
    for (const [method, suffix] of [
      ['GET', ''],
      ['DELETE', ''],
      ['POST', '/pause'],
      ['POST', '/resume'],
    ]) {
      const res = await call(method!, `/keys/${keyId}/rotation-policy${suffix}`)
      assert.equal(res.status, 404, `${method} ${suffix}: ${res.text}`)
      assert.equal(res.body.error, 'rotation_policy_not_found')
    }
  })

  test('a revoked key cannot get a policy (409); a key revoked under one is not rotated', async () => {
    const keyId = await createKey()
    await call('POST', `/keys/${keyId}/rotation-policy`, { frequency: 'Daily' })
    assert.equal((await call('POST', `/keys/${keyId}/revoke`)).status, 200)
    const refused = await call('POST', `/keys/${keyId}/rotation-policy`, { frequency: 'Weekly' })
    assert.equal(refused.status, 409, refused.text)
    assert.equal(refused.body.error, 'key_state_conflict')
    clock.advance(DAY_MS)
    await waitFor(async () => {
      const rows = await svc.sql`
          SELECT outcome FROM audit_log WHERE resource = ${`key:${keyId}`} AND action = 'keys.rotate'`
      return rows.length === 1 && rows[0]!['outcome'] === 'failure'
    }, 'the skipped rotation is audited')
    assert.equal(await version(keyId), 1)
  })

  test('scopes: keys:read reads the policy, only keys:write changes it', async () => {
    const keyId = await createKey()
    await call('POST', `/keys/${keyId}/rotation-policy`, { frequency: 'Yearly' })
    const created = await call('POST', '/api-keys', {
      name: `reader-${Math.random()}`,
      scopes: ['keys:read'],
    })
    assert.equal(created.status, 201, created.text)
    const reader = created.body.key as string
    const as = (method: string, path: string) => svc.request(method, `/api/v1${path}`, { key: reader })
    assert.equal((await as('GET', `/keys/${keyId}/rotation-policy`)).status, 200)
    for (const [method, suffix] of [
      ['POST', ''],
      ['DELETE', ''],
      ['POST', '/pause'],
      ['POST', '/resume'],
    ]) {
      const res = await as(method!, `/keys/${keyId}/rotation-policy${suffix}`)
      assert.equal(res.status, 403, `${method} ${suffix}`)
      assert.equal(res.body.error, 'insufficient_scope')
    }
    assert.equal((await call('GET', `/keys/${keyId}/rotation-policy`)).body.paused, false, 'unchanged')
  })
})

describe('time-driven transitions run as jobs, without any read of the key', () => {
  test('a key past expiresAt is marked Expired by the lifecycle sweep, audited once', async () => {
    const res = await call('POST', '/keys', {
      name: `exp-${Math.random()}`,
      keyType: 'Encryption',
      algorithm: 'ML-KEM-768',
      expiresAt: new Date(clock.now().getTime() + DAY_MS).toISOString(),
    })
    assert.equal(res.status, 201, res.text)
    const keyId = res.body.id as string
    const expiredAt = async () =>
      (await svc.sql<{ expired_at: Date | null }[]>`SELECT expired_at FROM keys WHERE id = ${keyId}`)[0]!
        .expired_at
    await sweepPassed()
    assert.equal(await expiredAt(), null, 'not before its time')

    clock.advance(DAY_MS)
    await waitFor(async () => (await expiredAt()) !== null, 'the lifecycle sweep to mark the key')
    assert.equal((await expiredAt())!.toISOString(), clock.now().toISOString())
    const records = await svc.sql`
      SELECT actor, outcome FROM audit_log WHERE action = 'keys.expire' AND resource = ${`key:${keyId}`}`
    assert.deepEqual(
      records.map((r) => `${r['actor']} ${r['outcome']}`),
      ['system:lifecycle success'],
    )
    const key = (await call('GET', `/keys/${keyId}`)).body
    assert.equal(key.state, 'Expired')
    const refused = await call('POST', '/encrypt', { keyId, plaintext: 'aGVsbG8=' })
    assert.equal(refused.status, 409, refused.text)
  })

  test('a key past its scheduled deletion date is destroyed by the sweep: every version erased', async () => {
    const keyId = await createKey('ML-DSA-65', 'Signing')
    assert.equal((await call('POST', `/keys/${keyId}/rotate`)).status, 200)
    const scheduled = await call('DELETE', `/keys/${keyId}?pendingWindowDays=7`)
    assert.equal(scheduled.status, 200, scheduled.text)
    const versions = () =>
      svc.sql<{ sealed_material: Buffer | null; public_key: Buffer | null }[]>`
        SELECT sealed_material, public_key FROM key_versions WHERE key_id = ${keyId}`
    clock.advance(7 * DAY_MS - 1000)
    await sweepPassed()
    const kept = await versions()
    assert.equal(kept.length, 2)
    for (const row of kept) assert.notEqual(row.sealed_material, null, 'kept until the date')

    clock.advance(1000)
    await waitFor(
      async () => (await versions()).every((row) => row.sealed_material === null && row.public_key === null),
      'the lifecycle sweep to erase the material',
    )
    assert.equal((await versions()).length, 2)
    const [row] = await svc.sql<
      { destroyed_at: Date | null }[]
    >`SELECT destroyed_at FROM keys WHERE id = ${keyId}`
    assert.notEqual(row!.destroyed_at, null)
    const records = await svc.sql`
      SELECT actor FROM audit_log WHERE action = 'keys.destroy' AND resource = ${`key:${keyId}`}`
    assert.equal(records.length, 1)
    assert.equal((await call('GET', `/keys/${keyId}`)).body.state, 'Destroyed')
  })
})
