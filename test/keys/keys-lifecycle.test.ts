import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { after, before, describe, test } from 'node:test'
import { DAY_MS } from '../../src/platform/clock.ts'
import { type ManualClock, manualClock } from '../helpers/manual-clock.ts'
import {
  type AuditView,
  type HttpResult,
  startTestService,
  type TenantWithKey,
  type TestService,
} from '../helpers/service.ts'

/**
 * docs/keys.md "Lifecycle" and "Versions" over real HTTP: every transition of spec section 3,
 * the time-driven ones moved by a manual clock (no background job runs), every refused
 * transition as 409 key_state_conflict with the state, Destroyed erasing the material of every
 * version, the audit record of each change, the default-key rule, and the list's alert and
 * status filter on derived states.
 *
 * One service and one clock for the file. The clock only moves forward, and every test takes
 * its times from `clock.now()` at the moment it needs them, so a test never depends on where
 * an earlier one left the clock. Tests that read the list use a tenant of their own.
 */

const HOUR_MS = 60 * 60 * 1000

interface KeyBody {
  id: string
  name: string
  keyType: string
  algorithm: string
  isActive: boolean
  isDefault: boolean
  state: string
  version: number
  createdAt: string
  updatedAt: string
  expiresAt: string | null
  lastRotatedAt: string | null
  scheduledDeletionDate: string | null
}

interface VersionRow {
  version: number
  sealed_material: Buffer | null
  public_key: Buffer | null
  destroyed_at: Date | null
}

const unique = (prefix: string) => `${prefix}-${randomBytes(4).toString('hex')}`

describe('key lifecycle', () => {
  let svc: TestService
  let clock: ManualClock
  let tenant: TenantWithKey

  const iso = (offsetMs = 0) => new Date(clock.now().getTime() + offsetMs).toISOString()

  function call(method: string, path: string, body?: unknown, by: TenantWithKey = tenant) {
    return svc.request(method, `/api/v1${path}`, { key: by.key, ...(body !== undefined ? { body } : {}) })
  }

  async function createKey(body: Record<string, unknown>, by: TenantWithKey = tenant): Promise<KeyBody> {
    const res = await call('POST', '/keys', { name: unique('key'), ...body }, by)
    assert.equal(res.status, 201, res.text)
    return res.body
  }

  const signingKey = (extra: Record<string, unknown> = {}, by?: TenantWithKey) =>
    createKey({ keyType: 'Signing', algorithm: 'Ed25519', ...extra }, by)
  const hmacKey = (extra: Record<string, unknown> = {}, by?: TenantWithKey) =>
    createKey({ keyType: 'HMAC', algorithm: 'HMAC-SHA256', ...extra }, by)

  async function getKey(id: string, by: TenantWithKey = tenant): Promise<KeyBody> {
    const res = await call('GET', `/keys/${id}`, undefined, by)
    assert.equal(res.status, 200, res.text)
    return res.body
  }

  async function ok(res: Promise<HttpResult>): Promise<KeyBody> {
    const r = await res
    assert.equal(r.status, 200, r.text)
    return r.body
  }

  const rotate = (id: string) => call('POST', `/keys/${id}/rotate`)
  const revoke = (id: string) => call('POST', `/keys/${id}/revoke`)
  const cancel = (id: string) => call('POST', `/keys/${id}/cancel-deletion`)
  const schedule = (id: string, query = '') => call('DELETE', `/keys/${id}${query}`)
  const patch = (id: string, body: Record<string, unknown>) => call('PATCH', `/keys/${id}`, body)

  function assertConflict(res: HttpResult, state: string, what: string): void {
    assert.equal(res.status, 409, `${what}: ${res.text}`)
    assert.equal(res.body.error, 'key_state_conflict', what)
    assert.equal(res.body.state, state, what)
  }

  async function audit(action: string, keyId: string, by: TenantWithKey = tenant): Promise<AuditView[]> {
    const params = new URLSearchParams({ action, resource: `key:${keyId}` })
    const res = await call('GET', `/audit?${params}`, undefined, by)
    assert.equal(res.status, 200, res.text)
    return res.body.data
  }

  async function versionRows(keyId: string): Promise<VersionRow[]> {
    return svc.sql<VersionRow[]>`
      SELECT version, sealed_material, public_key, destroyed_at FROM key_versions
      WHERE key_id = ${keyId} ORDER BY version`
  }

  async function list(query: string, by: TenantWithKey) {
    const res = await call('GET', `/keys${query}`, undefined, by)
    assert.equal(res.status, 200, res.text)
    return res.body as { data: KeyBody[]; total: number; alert?: Record<string, unknown> }
  }

  before(async () => {
    clock = manualClock(new Date('2030-01-01T00:00:00Z'))
    svc = await startTestService({}, { clock })
    tenant = await svc.createTenant()
  })

  after(async () => {
    await svc?.stop()
  })

  test('create: a new key is Active at version 1, stamped with the clock, and audited', async () => {
    const created = await signingKey()
    assert.equal(created.state, 'Active')
    assert.equal(created.isActive, true)
    assert.equal(created.version, 1)
    assert.equal(created.createdAt, iso())
    assert.equal(created.updatedAt, iso())
    assert.equal(created.expiresAt, null)
    assert.equal(created.lastRotatedAt, null)
    assert.equal(created.scheduledDeletionDate, null)
    const read = await getKey(created.id)
    assert.equal(read.state, 'Active')
    assert.equal(read.version, 1)

    const records = await audit('keys.create', created.id)
    assert.equal(records.length, 1)
    assert.equal(records[0]!.resource, `key:${created.id}`)
    assert.equal(records[0]!.actor, `apikey:${tenant.apiKeyId}`)
    assert.equal(records[0]!.outcome, 'success')
    assert.equal(records[0]!.keyVersion, 1)
  })

  test('Active → Expired exactly when expiresAt is reached; Expired refuses expiry, revoke and rotate', async () => {
    const expiresAt = iso(DAY_MS)
    const key = await hmacKey({ expiresAt })
    assert.equal(key.expiresAt, expiresAt)
    assert.equal(key.state, 'Active')

    clock.advance(DAY_MS - 1)
    const before = await getKey(key.id)
    assert.equal(before.state, 'Active', 'one millisecond before expiresAt')
    assert.equal(before.isActive, true)

    clock.advance(1)
    const expired = await getKey(key.id)
    assert.equal(expired.state, 'Expired', 'at expiresAt')
    assert.equal(expired.isActive, false)
    assert.equal(expired.expiresAt, expiresAt)

    // Expired is terminal: a new expiry cannot revive it, nor can null.
    assertConflict(await patch(key.id, { expiresAt: iso(10 * DAY_MS) }), 'Expired', 'PATCH expiresAt')
    assertConflict(await patch(key.id, { expiresAt: null }), 'Expired', 'PATCH expiresAt null')
    assertConflict(await revoke(key.id), 'Expired', 'revoke')
    assertConflict(await rotate(key.id), 'Expired', 'rotate')
    assertConflict(await cancel(key.id), 'Expired', 'cancel-deletion')
    const still = await getKey(key.id)
    assert.equal(still.state, 'Expired')
    assert.equal(still.expiresAt, expiresAt)
    assert.equal(still.version, 1)

    // Attributes other than the expiry still change in Expired.
    const renamed = await ok(patch(key.id, { description: 'expired but described' }))
    assert.equal(renamed.state, 'Expired')
    assert.equal((await audit('keys.revoke', key.id)).length, 0, 'a refused transition writes no record')
  })

  test('PATCH expiresAt on an Active key: the past and now are 400, the future sets it, null clears it', async () => {
    const key = await hmacKey()
    for (const when of [iso(-DAY_MS), iso(0)]) {
      const res = await patch(key.id, { expiresAt: when })
      assert.equal(res.status, 400, res.text)
      assert.equal(res.body.error, 'validation_failed')
    }
    assert.equal((await getKey(key.id)).expiresAt, null, 'a refused PATCH changes nothing')

    const expiresAt = iso(2 * DAY_MS)
    const set = await ok(patch(key.id, { expiresAt }))
    assert.equal(set.expiresAt, expiresAt)
    assert.equal(set.state, 'Active')

    const cleared = await ok(patch(key.id, { expiresAt: null }))
    assert.equal(cleared.expiresAt, null)
    clock.advance(3 * DAY_MS)
    const later = await getKey(key.id)
    assert.equal(later.state, 'Active', 'a cleared expiry no longer expires the key')
    assert.equal(later.expiresAt, null)
    assert.equal((await audit('keys.update', key.id)).length, 2)
  })

  test('Active → Revoked; Revoked refuses revoke, rotate, expiry and cancel, and stays Revoked past expiresAt', async () => {
    const key = await hmacKey({ expiresAt: iso(DAY_MS) })
    const revoked = await ok(revoke(key.id))
    assert.equal(revoked.state, 'Revoked')
    assert.equal(revoked.isActive, false)
    assert.equal(revoked.updatedAt, iso())

    assertConflict(await revoke(key.id), 'Revoked', 'revoke again')
    assertConflict(await rotate(key.id), 'Revoked', 'rotate')
    assertConflict(await patch(key.id, { expiresAt: iso(5 * DAY_MS) }), 'Revoked', 'PATCH expiresAt')
    assertConflict(await cancel(key.id), 'Revoked', 'cancel-deletion')

    const described = await ok(patch(key.id, { description: 'revoked, still described' }))
    assert.equal(described.state, 'Revoked')

    clock.advance(2 * DAY_MS)
    const later = await getKey(key.id)
    assert.equal(later.state, 'Revoked', 'revocation takes precedence over expiry')
    assert.equal(later.version, 1)

    const records = await audit('keys.revoke', key.id)
    assert.equal(records.length, 1, 'one record for the revoke, none for the refused one')
    assert.equal(records[0]!.outcome, 'success')
  })

  test('Active → Pending Deletion with the default 30-day window; Pending Deletion refuses the rest', async () => {
    const key = await hmacKey()
    const scheduled = await ok(schedule(key.id))
    assert.equal(scheduled.state, 'Pending Deletion')
    assert.equal(scheduled.isActive, false)
    assert.equal(scheduled.scheduledDeletionDate, iso(30 * DAY_MS))
    assert.equal((await getKey(key.id)).state, 'Pending Deletion')

    assertConflict(await schedule(key.id), 'Pending Deletion', 'DELETE again')
    assertConflict(await rotate(key.id), 'Pending Deletion', 'rotate')
    assertConflict(await revoke(key.id), 'Pending Deletion', 'revoke')
    assertConflict(await patch(key.id, { isDefault: true }), 'Pending Deletion', 'PATCH isDefault')
    assert.equal((await getKey(key.id)).scheduledDeletionDate, scheduled.scheduledDeletionDate)

    const labelled = await ok(patch(key.id, { labels: ['pending'] }))
    assert.equal(labelled.state, 'Pending Deletion')

    const records = await audit('keys.schedule_deletion', key.id)
    assert.equal(records.length, 1)
    assert.equal(records[0]!.resource, `key:${key.id}`)
    assert.equal(records[0]!.details?.['windowDays'], 30)
  })

  test('DELETE ?pendingWindowDays: 7 is now+7d; 6 and 31 are 400 validation_failed', async () => {
    const key = await hmacKey()
    for (const days of [6, 31]) {
      const res = await schedule(key.id, `?pendingWindowDays=${days}`)
      assert.equal(res.status, 400, res.text)
      assert.equal(res.body.error, 'validation_failed')
    }
    const untouched = await getKey(key.id)
    assert.equal(untouched.state, 'Active')
    assert.equal(untouched.scheduledDeletionDate, null)

    const scheduled = await ok(schedule(key.id, '?pendingWindowDays=7'))
    assert.equal(scheduled.state, 'Pending Deletion')
    assert.equal(scheduled.scheduledDeletionDate, iso(7 * DAY_MS))
  })

  test('Expired → Pending Deletion and Revoked → Pending Deletion are allowed', async () => {
    const expiring = await hmacKey({ expiresAt: iso(HOUR_MS) })
    const revoked = await hmacKey()
    await ok(revoke(revoked.id))
    clock.advance(HOUR_MS)
    assert.equal((await getKey(expiring.id)).state, 'Expired')

    for (const key of [expiring, revoked]) {
      const scheduled = await ok(schedule(key.id, '?pendingWindowDays=10'))
      assert.equal(scheduled.state, 'Pending Deletion')
      assert.equal(scheduled.scheduledDeletionDate, iso(10 * DAY_MS))
    }
  })

  test('cancel-deletion before the date returns the key to the state it would otherwise have', async () => {
    const active = await createKey({ keyType: 'Encryption', algorithm: 'ML-KEM-768' })
    const revoked = await hmacKey()
    await ok(revoke(revoked.id))
    const expiring = await hmacKey({ expiresAt: iso(2 * DAY_MS) })

    assertConflict(await cancel(active.id), 'Active', 'cancel on an Active key')

    for (const key of [active, revoked, expiring]) await ok(schedule(key.id, '?pendingWindowDays=7'))
    // The expiry passes while the key is pending; the deletion date (7 days) does not.
    clock.advance(7 * DAY_MS - 1)

    const back = await ok(cancel(active.id))
    assert.equal(back.state, 'Active')
    assert.equal(back.isActive, true)
    assert.equal(back.scheduledDeletionDate, null)

    const stillRevoked = await ok(cancel(revoked.id))
    assert.equal(stillRevoked.state, 'Revoked')
    assert.equal(stillRevoked.scheduledDeletionDate, null)

    const nowExpired = await ok(cancel(expiring.id))
    assert.equal(nowExpired.state, 'Expired')
    assert.equal(nowExpired.scheduledDeletionDate, null)

    // The restored key works again: it can be rotated, and its cancel is not repeatable.
    assert.equal((await ok(rotate(active.id))).version, 2)
    assertConflict(await cancel(active.id), 'Active', 'cancel twice')
    clock.advance(1)
    assert.equal((await getKey(active.id)).state, 'Active', 'the cancelled date no longer destroys it')

    const records = await audit('keys.cancel_deletion', active.id)
    assert.equal(records.length, 1)
    assert.equal(records[0]!.resource, `key:${active.id}`)
    assert.equal(records[0]!.outcome, 'success')
  })

  test('Pending Deletion → Destroyed when the date passes: every version erased, metadata kept, all refused', async () => {
    const name = unique('doomed')
    // Exportable, so the private export below is refused for the state, not for the flag.
    const key = await signingKey({ name, isDefault: true, exportable: true })
    assert.equal(key.isDefault, true)
    clock.advance(HOUR_MS)
    assert.equal((await ok(rotate(key.id))).version, 2)
    clock.advance(HOUR_MS)
    assert.equal((await ok(rotate(key.id))).version, 3)
    const scheduled = await ok(schedule(key.id))
    assert.equal(scheduled.scheduledDeletionDate, iso(30 * DAY_MS))

    clock.advance(30 * DAY_MS - 1)
    assert.equal((await getKey(key.id)).state, 'Pending Deletion', 'one millisecond before the date')
    assert.equal((await ok(call('GET', `/keys/${key.id}/public`))).version, 3)

    clock.advance(1)
    // No job has run: the material is still there until the key is first seen past its date.
    const untouched = await versionRows(key.id)
    assert.equal(untouched.length, 3)
    for (const row of untouched) assert.notEqual(row.sealed_material, null)

    const destroyed = await getKey(key.id)
    assert.equal(destroyed.state, 'Destroyed')
    assert.equal(destroyed.isActive, false)
    assert.equal(destroyed.isDefault, false, 'a destroyed key is no longer the default')
    assert.equal(destroyed.name, name)
    assert.equal(destroyed.algorithm, 'Ed25519')
    assert.equal(destroyed.keyType, 'Signing')
    assert.equal(destroyed.createdAt, key.createdAt)
    assert.equal(destroyed.version, 3)
    assert.equal(destroyed.scheduledDeletionDate, scheduled.scheduledDeletionDate)

    const rows = await versionRows(key.id)
    assert.deepEqual(
      rows.map((r) => r.version),
      [1, 2, 3],
    )
    for (const row of rows) {
      assert.equal(row.sealed_material, null, `sealed material of version ${row.version}`)
      assert.equal(row.public_key, null, `public key of version ${row.version}`)
      assert.ok(row.destroyed_at instanceof Date, `destroyed_at of version ${row.version}`)
    }
    const [stored] = await svc.sql<{ is_default: boolean; destroyed_at: Date | null }[]>`
      SELECT is_default, destroyed_at FROM keys WHERE id = ${key.id}`
    assert.equal(stored!.is_default, false)
    assert.ok(stored!.destroyed_at instanceof Date)

    const versions = await call('GET', `/keys/${key.id}/versions`)
    assert.equal(versions.status, 200, versions.text)
    assert.deepEqual(
      versions.body.data.map((v: { version: number; state: string }) => [v.version, v.state]),
      [
        [1, 'Destroyed'],
        [2, 'Destroyed'],
        [3, 'Destroyed'],
      ],
    )

    assertConflict(await call('GET', `/keys/${key.id}/public`), 'Destroyed', 'public key export')
    assertConflict(await call('GET', `/keys/${key.id}/public?version=1`), 'Destroyed', 'export v1')
    assertConflict(
      await call('GET', `/keys/${key.id}/public/download?format=PEM`),
      'Destroyed',
      'public key download',
    )
    assertConflict(
      await call('POST', `/keys/${key.id}/export-private`, { confirm: name, format: 'PEM' }),
      'Destroyed',
      'private key export',
    )
    assertConflict(await cancel(key.id), 'Destroyed', 'cancel-deletion')
    assertConflict(await schedule(key.id), 'Destroyed', 'DELETE')
    assertConflict(await patch(key.id, { description: 'too late' }), 'Destroyed', 'PATCH description')
    assertConflict(await patch(key.id, { name: unique('renamed') }), 'Destroyed', 'PATCH name')
    assertConflict(await patch(key.id, { isDefault: true }), 'Destroyed', 'PATCH isDefault')
    assertConflict(await rotate(key.id), 'Destroyed', 'rotate')
    assertConflict(await revoke(key.id), 'Destroyed', 'revoke')

    const after = await getKey(key.id)
    assert.equal(after.name, name)
    assert.equal(after.version, 3)

    // A destroyed key keeps its name.
    const taken = await call('POST', '/keys', { name, keyType: 'HMAC', algorithm: 'HMAC-SHA256' })
    assert.equal(taken.status, 409, taken.text)
    assert.equal(taken.body.error, 'key_name_taken')

    const records = await audit('keys.destroy', key.id)
    assert.equal(records.length, 1, 'destroyed once, however often it is read')
    assert.equal(records[0]!.actor, 'system')
    assert.equal(records[0]!.resource, `key:${key.id}`)
    assert.equal(records[0]!.outcome, 'success')
  })

  test('the list alone destroys a key past its date: material erased without any read of the key', async () => {
    const owner = await svc.createTenant()
    const key = await signingKey({}, owner)
    const rotated = await call('POST', `/keys/${key.id}/rotate`, undefined, owner)
    assert.equal(rotated.status, 200, rotated.text)
    assert.equal(rotated.body.version, 2)
    const scheduled = await call('DELETE', `/keys/${key.id}?pendingWindowDays=7`, undefined, owner)
    assert.equal(scheduled.status, 200, scheduled.text)

    clock.advance(7 * DAY_MS)
    const before = await versionRows(key.id)
    assert.equal(before.length, 2)
    for (const row of before) assert.notEqual(row.sealed_material, null, 'nothing erased before the list')

    const listed = await list('', owner)
    const entry = listed.data.find((k) => k.id === key.id)
    assert.ok(entry, 'the destroyed key is still listed')
    assert.equal(entry.state, 'Destroyed')
    assert.equal(entry.isActive, false)

    const rows = await versionRows(key.id)
    assert.equal(rows.length, 2)
    for (const row of rows) {
      assert.equal(row.sealed_material, null, `sealed material of version ${row.version}`)
      assert.equal(row.public_key, null, `public key of version ${row.version}`)
    }
    const records = await audit('keys.destroy', key.id, owner)
    assert.equal(records.length, 1)
    assert.equal(records[0]!.actor, 'system')
  })

  test('rotation: Active → Active at n+1, clock-stamped versions, earlier public keys still exportable', async () => {
    const key = await signingKey()
    const v1 = await call('GET', `/keys/${key.id}/public`)
    assert.equal(v1.status, 200, v1.text)
    assert.equal(v1.body.version, 1)
    const v1Pem: string = v1.body.publicKey

    const times = [key.createdAt]
    for (const expected of [2, 3]) {
      clock.advance(HOUR_MS)
      const rotated = await ok(rotate(key.id))
      assert.equal(rotated.state, 'Active')
      assert.equal(rotated.isActive, true)
      assert.equal(rotated.version, expected)
      assert.equal(rotated.lastRotatedAt, iso())
      assert.equal(rotated.updatedAt, iso())
      assert.equal(rotated.createdAt, key.createdAt)
      times.push(iso())
    }
    const read = await getKey(key.id)
    assert.equal(read.version, 3)
    assert.equal(read.lastRotatedAt, times[2])

    const versions = await call('GET', `/keys/${key.id}/versions`)
    assert.equal(versions.status, 200, versions.text)
    assert.deepEqual(versions.body.data, [
      { version: 1, createdAt: times[0], state: 'Active', isCurrent: false },
      { version: 2, createdAt: times[1], state: 'Active', isCurrent: false },
      { version: 3, createdAt: times[2], state: 'Active', isCurrent: true },
    ])

    const pems: string[] = []
    for (const version of [1, 2, 3]) {
      const res = await call('GET', `/keys/${key.id}/public?version=${version}`)
      assert.equal(res.status, 200, res.text)
      assert.equal(res.body.version, version)
      assert.match(res.body.publicKey, /^-----BEGIN PUBLIC KEY-----/)
      pems.push(res.body.publicKey)
    }
    assert.equal(pems[0], v1Pem, 'version 1 keeps its public key after rotation')
    assert.equal(new Set(pems).size, 3, 'each version has its own material')
    const current = await call('GET', `/keys/${key.id}/public`)
    assert.equal(current.body.version, 3)
    assert.equal(current.body.publicKey, pems[2])
    const missing = await call('GET', `/keys/${key.id}/public?version=4`)
    assert.equal(missing.status, 404, missing.text)

    const records = await audit('keys.rotate', key.id)
    assert.deepEqual(records.map((r) => r.keyVersion).sort(), [2, 3])
    for (const r of records) assert.equal(r.resource, `key:${key.id}`)
  })

  test('each successful change writes exactly one audit record for the key; refusals write none', async () => {
    const key = await hmacKey()
    const other = await hmacKey()
    await ok(patch(key.id, { description: 'audited' }))
    await ok(rotate(key.id))
    await ok(schedule(key.id, '?pendingWindowDays=7'))
    assertConflict(await rotate(key.id), 'Pending Deletion', 'rotate while pending')
    await ok(cancel(key.id))
    await ok(revoke(key.id))
    assertConflict(await revoke(key.id), 'Revoked', 'revoke again')
    assertConflict(await patch(key.id, { expiresAt: iso(DAY_MS) }), 'Revoked', 'PATCH expiresAt')

    const expected: Record<string, number> = {
      'keys.create': 1,
      'keys.update': 1,
      'keys.rotate': 1,
      'keys.schedule_deletion': 1,
      'keys.cancel_deletion': 1,
      'keys.revoke': 1,
    }
    for (const [action, count] of Object.entries(expected)) {
      const records = await audit(action, key.id)
      assert.equal(records.length, count, action)
      for (const r of records) {
        assert.equal(r.action, action)
        assert.equal(r.resource, `key:${key.id}`)
        assert.equal(r.actor, `apikey:${tenant.apiKeyId}`)
        assert.equal(r.outcome, 'success')
      }
    }
    assert.equal((await audit('keys.rotate', other.id)).length, 0, "the filter names one key's records")
    assert.equal((await audit('keys.create', other.id)).length, 1)
  })

  test('default key rule with the lifecycle: isDefault needs Active; a destroyed default stops being default', async () => {
    const owner = await svc.createTenant()
    const ownerCall = (method: string, path: string, body?: unknown) => call(method, path, body, owner)

    const first = await signingKey({ isDefault: true }, owner)
    const revoked = await signingKey({}, owner)
    assert.equal((await ownerCall('POST', `/keys/${revoked.id}/revoke`)).status, 200)
    assertConflict(
      await ownerCall('PATCH', `/keys/${revoked.id}`, { isDefault: true }),
      'Revoked',
      'PATCH isDefault on a Revoked key',
    )
    const expiring = await signingKey({ expiresAt: iso(HOUR_MS) }, owner)
    clock.advance(HOUR_MS)
    assertConflict(
      await ownerCall('PATCH', `/keys/${expiring.id}`, { isDefault: true }),
      'Expired',
      'PATCH isDefault on an Expired key',
    )
    assert.equal((await getKey(first.id, owner)).isDefault, true, 'refusals leave the default in place')
    assert.equal((await getKey(revoked.id, owner)).isDefault, false)

    // The default key is deleted and destroyed: it is no longer the default, and another may be.
    const scheduled = await ownerCall('DELETE', `/keys/${first.id}?pendingWindowDays=7`)
    assert.equal(scheduled.status, 200, scheduled.text)
    clock.advance(7 * DAY_MS)
    const destroyed = await getKey(first.id, owner)
    assert.equal(destroyed.state, 'Destroyed')
    assert.equal(destroyed.isDefault, false)
    const listed = await list('?keyType=Signing', owner)
    assert.deepEqual(
      listed.data.filter((k) => k.isDefault).map((k) => k.id),
      [],
    )

    const next = await signingKey({}, owner)
    const promoted = await ownerCall('PATCH', `/keys/${next.id}`, { isDefault: true })
    assert.equal(promoted.status, 200, promoted.text)
    assert.equal(promoted.body.isDefault, true)
    assert.equal((await getKey(first.id, owner)).isDefault, false)
  })

  test('list alert: Active keys expiring within 30 days only', async () => {
    const soon = await svc.createTenant()
    await hmacKey({ expiresAt: iso(10 * DAY_MS) }, soon)
    await hmacKey({ expiresAt: iso(40 * DAY_MS) }, soon)
    await hmacKey({}, soon)
    const revokedSoon = await hmacKey({ expiresAt: iso(5 * DAY_MS) }, soon)
    assert.equal((await call('POST', `/keys/${revokedSoon.id}/revoke`, undefined, soon)).status, 200)
    const pendingSoon = await hmacKey({ expiresAt: iso(5 * DAY_MS) }, soon)
    assert.equal((await call('DELETE', `/keys/${pendingSoon.id}`, undefined, soon)).status, 200)

    const withAlert = await list('', soon)
    assert.ok(withAlert.alert, 'an alert with an Active key expiring in 10 days')
    assert.equal(withAlert.alert['expiringSoon'], 1, 'revoked and pending keys do not count')
    assert.equal(withAlert.alert['windowDays'], 30)
    assert.equal(typeof withAlert.alert['message'], 'string')

    const later = await svc.createTenant()
    await hmacKey({ expiresAt: iso(40 * DAY_MS) }, later)
    await hmacKey({}, later)
    const expired = await hmacKey({ expiresAt: iso(HOUR_MS) }, later)
    const revoked = await hmacKey({ expiresAt: iso(3 * DAY_MS) }, later)
    assert.equal((await call('POST', `/keys/${revoked.id}/revoke`, undefined, later)).status, 200)
    clock.advance(HOUR_MS)
    assert.equal((await getKey(expired.id, later)).state, 'Expired')

    const noAlert = await list('', later)
    assert.equal(noAlert.total, 4)
    assert.equal('alert' in noAlert, false, `no alert: ${JSON.stringify(noAlert.alert)}`)
  })

  test('the status filter uses derived states', async () => {
    const owner = await svc.createTenant()
    const active = await hmacKey({}, owner)
    const expiring = await hmacKey({ expiresAt: iso(DAY_MS) }, owner)
    const revoked = await hmacKey({}, owner)
    assert.equal((await call('POST', `/keys/${revoked.id}/revoke`, undefined, owner)).status, 200)
    const doomed = await hmacKey({}, owner)
    assert.equal(
      (await call('DELETE', `/keys/${doomed.id}?pendingWindowDays=7`, undefined, owner)).status,
      200,
    )

    const ids = async (query: string) => (await list(query, owner)).data.map((k) => k.id).sort()
    assert.deepEqual(await ids('?status=Active'), [active.id, expiring.id].sort(), 'before any time passes')
    assert.deepEqual(await ids('?status=Expired'), [])

    clock.advance(2 * DAY_MS)
    const pending = await hmacKey({}, owner)
    assert.equal(
      (await call('DELETE', `/keys/${pending.id}?pendingWindowDays=7`, undefined, owner)).status,
      200,
    )
    // doomed's date (7 days after its DELETE) passes; pending's does not.
    clock.advance(5 * DAY_MS + HOUR_MS)

    assert.deepEqual(await ids('?status=Active'), [active.id])
    assert.deepEqual(await ids('?status=Expired'), [expiring.id])
    assert.deepEqual(await ids('?status=Revoked'), [revoked.id])
    assert.deepEqual(await ids('?status=Pending%20Deletion'), [pending.id])
    assert.deepEqual(await ids('?status=Destroyed'), [doomed.id])
    assert.deepEqual(await ids('?status=Expired&status=Destroyed'), [expiring.id, doomed.id].sort())
    const counted = await list('?status=Expired', owner)
    assert.equal(counted.total, 1)
    for (const k of counted.data) assert.equal(k.state, 'Expired')

    const byStatus = await list('?sort=status&order=asc', owner)
    assert.deepEqual(
      byStatus.data.map((k) => k.state),
      ['Active', 'Expired', 'Revoked', 'Pending Deletion', 'Destroyed'],
    )
  })
})
