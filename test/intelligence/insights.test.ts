import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { after, before, describe, test } from 'node:test'
import postgres from 'postgres'
import type { Actor } from '../../src/auth/request-context.ts'
import type { Queryable, Sql } from '../../src/data/database.ts'
import { insightCriteria, MAX_LISTED_KEYS, MAX_PURPOSE_GROUPS } from '../../src/intelligence/insights.ts'
import { createIntelligenceService } from '../../src/intelligence/intelligence-service.ts'
import {
  activeAt,
  applyInsightSettings,
  expiredAt,
  type InsightRows,
  keyInsightQuery,
  tenantInsightQuery,
} from '../../src/intelligence/intelligence-store.ts'
import type { TagEngine } from '../../src/intelligence/tag-engine.ts'
import { type KeyState, keyState } from '../../src/keys/key-state.ts'
import { type ManualClock, manualClock } from '../helpers/manual-clock.ts'
import { startTestService, type TestService } from '../helpers/service.ts'

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

  /** `n` keys of one type, algorithm and purpose straight into the tenant (the API would take minutes). */
  async function seed(tenantId: string, n: number, prefix: string) {
    await service.sql`
      INSERT INTO keys (id, tenant_id, name, description, key_type, algorithm, origin, labels,
                        created_at, created_by, updated_at)
      SELECT gen_random_uuid(), ${tenantId}, ${prefix} || '-payments-' || lpad(i::text, 6, '0'),
             'Signs payment authorisations ' || i, 'Signing', 'ML-DSA-65', 'Generated', ARRAY['team-pay'],
             now(), 'test', now()
      FROM generate_series(1, ${n}) AS i`
  }

  /**
   * Rows every node of the statement's plan produced, all loops counted: the work it did, with
   * the settings the service runs it with.
   */
  async function rowsProcessed(
    tenantWide: boolean,
    query: (tx: Queryable) => ReturnType<typeof tenantInsightQuery>,
  ): Promise<number> {
    const plan = await service.sql.begin(async (tx) => {
      await applyInsightSettings(tx, { statementTimeoutMs: 60_000, tenantWide })
      const [row] = await tx<[{ 'QUERY PLAN': Array<{ Plan: PlanNode }> }]>`
        EXPLAIN (ANALYZE, FORMAT JSON) ${query(tx)}`
      return row!['QUERY PLAN'][0]!.Plan
    })
    const total = (node: PlanNode): number =>
      node['Actual Rows'] * node['Actual Loops'] + (node.Plans ?? []).reduce((sum, n) => sum + total(n), 0)
    return total(plan as PlanNode)
  }

  test('the read model’s Active and Expired agree with keyState() for every combination', async () => {
    const now = new Date('2026-06-01T00:00:00Z')
    const past = new Date('2026-05-01T00:00:00Z')
    const future = new Date('2026-07-01T00:00:00Z')
    const cases: Array<[Date | null, Date | null, Date | null, Date | null]> = []
    for (const destroyed of [null, past])
      for (const scheduled of [null, past, future])
        for (const revoked of [null, past])
          for (const expires of [null, past, now, future])
            cases.push([destroyed, scheduled, revoked, expires])
    for (const [destroyed_at, scheduled_deletion_date, revoked_at, expires_at] of cases) {
      const [row] = await service.sql<[{ active: boolean; expired: boolean }]>`
        SELECT ${activeAt(service.sql, 'f', now)} AS active, ${expiredAt(service.sql, 'f', now)} AS expired
        FROM (SELECT ${destroyed_at}::timestamptz AS destroyed_at,
          ${scheduled_deletion_date}::timestamptz AS scheduled_deletion_date,
          ${revoked_at}::timestamptz AS revoked_at, ${expires_at}::timestamptz AS expires_at) f`
      const state: KeyState = keyState({ destroyed_at, scheduled_deletion_date, revoked_at, expires_at }, now)
      const label = JSON.stringify({ destroyed_at, scheduled_deletion_date, revoked_at, expires_at })
      assert.equal(row!.active, state === 'Active', label)
      assert.equal(row!.expired, state === 'Expired', label)
    }
  })

  test('10,000 keys of one purpose: one group, found without pairs; every list bounded', async () => {
    const t = await tenant()
    await seed(t.tenantId, 10_000, 'bulk')
    const report = await t.insights()
    const duplicates = report.findings.find((f) => f.code === 'duplicate_purpose')!
    assert.equal(duplicates.count, 10_000)
    assert.equal(duplicates.keys.length, MAX_LISTED_KEYS, 'the first 100 by name')
    assert.equal(duplicates.keys[0]!.name, 'bulk-payments-000001')
    const groups = (duplicates as Finding & { groups: PurposeGroup[] }).groups
    assert.ok(groups.length <= MAX_PURPOSE_GROUPS)
    const payments = groups.find((g) => g.shared.kind === 'word' && g.shared.value === 'payments')!
    assert.equal(payments.count, 10_000)
    assert.deepEqual(
      payments.examples.map((k) => k.name),
      ['bulk-payments-000001', 'bulk-payments-010000'],
    )
    assert.ok(
      groups.some((g) => g.shared.kind === 'label' && g.shared.value === 'team-pay' && g.count === 10_000),
    )
    for (const finding of report.findings) assert.ok(finding.keys.length <= MAX_LISTED_KEYS, finding.code)
    assert.equal(report.findings.find((f) => f.code === 'no_rotation_policy')!.count, 10_000)
    assert.equal(report.summary.critical, 10_000)
  })

  test('the report statement’s work grows linearly with the keys (4x keys: about 4x rows, not 16x)', async (t) => {
    const small = await tenant()
    const large = await tenant()
    await seed(small.tenantId, 1_000, 'small')
    await seed(large.tenantId, 4_000, 'large')
    const criteria = insightCriteria(new Date())
    const smallRows = await rowsProcessed(true, (tx) => tenantInsightQuery(tx, small.tenantId, criteria))
    const largeRows = await rowsProcessed(true, (tx) => tenantInsightQuery(tx, large.tenantId, criteria))
    const ratio = largeRows / smallRows
    t.diagnostic(
      `tenant report, rows processed: ${smallRows} (1,000 keys), ${largeRows} (4,000 keys), x${ratio.toFixed(2)}`,
    )
    // One key's report: the same work whatever the tenant's size (its EXISTS probe stops at the first match).
    const oneOf = async (tenantId: string) => {
      const [key] = await service.sql<
        [{ id: string }]
      >`SELECT id FROM keys WHERE tenant_id = ${tenantId} LIMIT 1`
      return rowsProcessed(false, (tx) => keyInsightQuery(tx, tenantId, key!.id, criteria))
    }
    const [smallOne, largeOne] = [await oneOf(small.tenantId), await oneOf(large.tenantId)]
    t.diagnostic(`one key's report, rows processed: ${smallOne} (1,000 keys), ${largeOne} (4,000 keys)`)
    assert.equal(largeOne, smallOne)
    // Every key shares a word and a label with every other: pairs would be 16x (about 4,000,000 more).
    assert.ok(
      ratio > 3 && ratio < 5,
      `rows processed: ${smallRows} for 1,000 keys, ${largeRows} for 4,000 (x${ratio.toFixed(2)})`,
    )
  })

  test('one key’s report examines that key only; the tenant’s is computed in SQL and never loaded here', async () => {
    const t = await tenant()
    await seed(t.tenantId, 2_000, 'many')
    const mine = await t.key({ name: 'payments-mine', keyType: 'Signing', algorithm: 'ML-DSA-65' })
    const criteria = insightCriteria(clock.now())
    const run = async (query: ReturnType<typeof tenantInsightQuery>) => (await query)[0] as InsightRows
    const whole = await run(tenantInsightQuery(service.sql, t.tenantId, criteria))
    const one = await run(keyInsightQuery(service.sql, t.tenantId, mine.id, criteria))
    assert.equal(whole.examined, 2_001)
    assert.equal(one.examined, 1, 'only that key’s findings are computed')
    assert.deepEqual(one.findings.map((f) => f.code).sort(), [
      'duplicate_purpose',
      'no_rotation_policy',
      'untagged_key',
    ])
    assert.ok(one.findings.every((f) => f.count === 1 && f.keys.length === 1 && f.keys[0]!.id === mine.id))

    // A service whose keys directory refuses to list keys: the reports need no key in this process.
    let statements = 0
    const counted: Sql = postgres(service.db.url, {
      max: 4,
      onnotice: () => {},
      debug: (_connection, query) => {
        if (query.includes('intelligence_key_facts')) statements++
      },
    })
    try {
      const services = service.api.services
      const insights = createIntelligenceService({
        sql: counted,
        clock,
        audit: services.audit,
        directories: {
          keys: {
            get: (actor, id) => services.keys.get(actor, id),
            snapshot: () => Promise.reject(new Error('a report must not load the tenant’s keys')),
            addLabels: () => Promise.reject(new Error('not used')),
          },
        },
        engine: { name: 'builtin', suggest: async () => [] } satisfies TagEngine,
      })
      const actor: Actor = { tenantId: t.tenantId, actor: 'test', requestId: null, clientIp: null }
      // Four concurrent asks of one tenant share one statement.
      const answers = await Promise.all([1, 2, 3, 4].map(() => insights.insights(actor)))
      assert.equal(statements, 1)
      for (const answer of answers) assert.deepEqual(answer, answers[0])
      assert.equal(answers[0]!.findings.find((f) => f.code === 'duplicate_purpose')!.count, 2_001)
      const single = await insights.keyInsights(actor, mine.id)
      assert.equal(statements, 2)
      assert.ok(single.findings.every((f) => f.keys.length === 1 && f.keys[0]!.id === mine.id))
    } finally {
      await counted.end({ timeout: 5 })
    }
  })
})

interface PlanNode {
  'Actual Rows': number
  'Actual Loops': number
  Plans?: PlanNode[]
}

interface PurposeGroup {
  shared: { kind: string; value: string }
  count: number
  examples: Array<{ id: string; name: string }>
}
