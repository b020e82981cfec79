import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { after, before, describe, test } from 'node:test'
import { type ManualClock, manualClock } from './helpers/manual-clock.ts'
import { startTestService, type TestService } from './helpers/service.ts'

const DAY = 24 * 60 * 60_000

interface Finding {
  code: string
  severity: string
  count: number
  keys: Array<{ id: string; name: string }>
  recommendation: string
  reference: string | null
}

/**
 * Each finding of GET /api/v1/insights with keys set up to trigger it, next to keys that must
 * not (docs/insights.md). The service's clock is manual; operations are stamped with the wall
 * clock, so keys are created in the past (the clock set back) and used now.
 */
describe('insights', () => {
  let service: TestService
  let clock: ManualClock

  before(async () => {
    clock = manualClock()
    service = await startTestService({}, { clock })
  })
  after(() => service.stop())

  async function tenant() {
    clock.set(new Date())
    const t = await service.createTenant()
    const call = (method: string, path: string, body?: unknown) =>
      service.request(method, `/api/v1${path}`, { key: t.key, ...(body === undefined ? {} : { body }) })
    const key = async (body: Record<string, unknown>) => {
      const made = await call('POST', '/keys', { name: `k-${randomUUID().slice(0, 8)}`, ...body })
      assert.equal(made.status, 201, made.text)
      return made.body as { id: string; name: string }
    }
    const insights = async () => {
      const answer = await call('GET', '/insights')
      assert.equal(answer.status, 200, answer.text)
      return answer.body as { summary: Record<string, number>; findings: Finding[] }
    }
    const keysOf = async (code: string) =>
      ((await insights()).findings.find((f) => f.code === code)?.keys ?? []).map((k) => k.id)
    return { ...t, call, key, insights, keysOf }
  }

  const sign = (t: Awaited<ReturnType<typeof tenant>>, keyId: string) =>
    t.call('POST', '/sign', { keyId, message: Buffer.from('m').toString('base64') })

  test('a tenant with nothing to report has no findings', async () => {
    const t = await tenant()
    const good = await t.key({ keyType: 'Signing', algorithm: 'ML-DSA-65', labels: ['payments'] })
    assert.equal(
      (await t.call('POST', `/keys/${good.id}/rotation-policy`, { frequency: 'Quarterly' })).status,
      200,
    )
    assert.equal((await sign(t, good.id)).status, 200)
    const report = await t.insights()
    assert.deepEqual(report.findings, [])
    assert.deepEqual(report.summary, { critical: 0, warning: 0, info: 0 })
  })

  test('critical: an expired key used after its expiry, within the window', async () => {
    const t = await tenant()
    const now = Date.now()
    clock.set(new Date(now - 3 * DAY))
    const expiresAt = new Date(now - 2 * DAY).toISOString()
    const used = await t.key({ keyType: 'Signing', algorithm: 'ML-DSA-65', expiresAt })
    const idle = await t.key({ keyType: 'Signing', algorithm: 'ML-DSA-65', expiresAt })
    clock.set(new Date(now))
    // Refused (the key expired), and an attempt all the same.
    assert.equal((await sign(t, used.id)).status, 409)
    assert.deepEqual(await t.keysOf('expired_key_in_use'), [used.id])
    const finding = (await t.insights()).findings.find((f) => f.code === 'expired_key_in_use')!
    assert.equal(finding.severity, 'critical')
    assert.ok(!finding.keys.some((k) => k.id === idle.id))
    // Past the window, the attempt is old news.
    clock.set(new Date(now + 31 * DAY))
    assert.deepEqual(await t.keysOf('expired_key_in_use'), [])
  })

  test('critical: a weak algorithm (RSA-2048, by BSI TR-02102-1 and NIST SP 800-131A)', async () => {
    const t = await tenant()
    const weak = await t.key({ keyType: 'Signing', algorithm: 'RSA-2048' })
    await t.key({ keyType: 'Signing', algorithm: 'RSA-3072' })
    const finding = (await t.insights()).findings.find((f) => f.code === 'weak_algorithm')!
    assert.deepEqual(
      finding.keys.map((k) => k.id),
      [weak.id],
    )
    assert.match(finding.reference ?? '', /BSI TR-02102-1/)
    assert.match(finding.reference ?? '', /SP 800-131A/)
  })

  test('critical: keys without a rotation policy', async () => {
    const t = await tenant()
    const without = await t.key({ keyType: 'Encryption', algorithm: 'ML-KEM-768' })
    const withPolicy = await t.key({ keyType: 'Encryption', algorithm: 'ML-KEM-768' })
    await t.call('POST', `/keys/${withPolicy.id}/rotation-policy`, { frequency: 'Monthly' })
    assert.deepEqual(await t.keysOf('no_rotation_policy'), [without.id])
  })

  test('warning: keys expiring within 30 days; rotation paused too long; unused for 90 days', async () => {
    const t = await tenant()
    const now = Date.now()
    const soon = await t.key({
      keyType: 'Signing',
      algorithm: 'ML-DSA-65',
      expiresAt: new Date(now + 10 * DAY).toISOString(),
    })
    await t.key({
      keyType: 'Signing',
      algorithm: 'ML-DSA-65',
      expiresAt: new Date(now + 60 * DAY).toISOString(),
    })
    assert.deepEqual(await t.keysOf('expiring_soon'), [soon.id])

    // Paused 31 days ago (the clock set back for the pause), and another paused just now.
    clock.set(new Date(now - 31 * DAY))
    const longPaused = await t.key({ keyType: 'HMAC', algorithm: 'HMAC-SHA256' })
    await t.call('POST', `/keys/${longPaused.id}/rotation-policy`, { frequency: 'Monthly' })
    assert.equal((await t.call('POST', `/keys/${longPaused.id}/rotation-policy/pause`)).status, 200)
    clock.set(new Date(now))
    const justPaused = await t.key({ keyType: 'HMAC', algorithm: 'HMAC-SHA256' })
    await t.call('POST', `/keys/${justPaused.id}/rotation-policy`, { frequency: 'Monthly' })
    await t.call('POST', `/keys/${justPaused.id}/rotation-policy/pause`)
    assert.deepEqual(await t.keysOf('rotation_paused_too_long'), [longPaused.id])

    // Made 100 days ago: one never used since, one used now.
    clock.set(new Date(now - 100 * DAY))
    const unused = await t.key({ keyType: 'Signing', algorithm: 'Ed25519' })
    const used = await t.key({ keyType: 'Signing', algorithm: 'Ed25519' })
    clock.set(new Date(now))
    assert.equal((await sign(t, used.id)).status, 200)
    const unusedIds = await t.keysOf('unused_key')
    assert.ok(unusedIds.includes(unused.id))
    assert.ok(!unusedIds.includes(used.id))
    assert.ok(!unusedIds.includes(soon.id), 'a key made today is not unused')
  })

  test('information: post-quantum candidates, untagged keys, keys of one purpose', async () => {
    const t = await tenant()
    const classical = await t.key({ keyType: 'Encryption', algorithm: 'RSA-3072', labels: ['a'] })
    const quantum = await t.key({ keyType: 'Encryption', algorithm: 'ML-KEM-768', labels: ['b'] })
    const mac = await t.key({ keyType: 'HMAC', algorithm: 'HMAC-SHA256', labels: ['c'] })
    assert.deepEqual(await t.keysOf('post_quantum_candidate'), [classical.id])
    const untagged = await t.key({ keyType: 'Signing', algorithm: 'ML-DSA-65' })
    assert.deepEqual(await t.keysOf('untagged_key'), [untagged.id])
    const eu = await t.call('POST', '/keys', {
      name: 'payments-signing-eu',
      keyType: 'Signing',
      algorithm: 'EC-P256',
    })
    const us = await t.call('POST', '/keys', {
      name: 'payments-signing-us',
      keyType: 'Signing',
      algorithm: 'EC-P256',
    })
    // Same words, another algorithm: not the same purpose by this rule.
    await t.call('POST', '/keys', { name: 'payments-signing-apac', keyType: 'Signing', algorithm: 'Ed25519' })
    const duplicates = await t.keysOf('duplicate_purpose')
    assert.deepEqual(duplicates.sort(), [eu.body.id, us.body.id].sort())
    assert.ok(!duplicates.includes(quantum.id) && !duplicates.includes(mac.id))

    // One key's view: only the findings that name it.
    const one = await t.call('GET', `/keys/${classical.id}/insights`)
    assert.equal(one.status, 200, one.text)
    assert.deepEqual((one.body.findings as Finding[]).map((f) => f.code).sort(), [
      'no_rotation_policy',
      'post_quantum_candidate',
    ])
    assert.ok((one.body.findings as Finding[]).every((f) => f.count === 1 && f.keys[0]!.id === classical.id))
  })

  test('another tenant’s key is 404 for the per-key insights', async () => {
    const a = await tenant()
    const b = await tenant()
    const mine = await a.key({ keyType: 'Signing', algorithm: 'Ed25519' })
    const answer = await b.call('GET', `/keys/${mine.id}/insights`)
    assert.equal(answer.status, 404)
    assert.ok(!(await b.insights()).findings.some((f) => f.keys.some((k) => k.id === mine.id)))
  })
})
