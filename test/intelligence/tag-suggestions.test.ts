import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { createBuiltinEngine } from '../../src/intelligence/builtin-engine.ts'
import { createIntelligenceService, MAX_BATCH_ATTEMPTS } from '../../src/intelligence/intelligence-service.ts'
import { claimJob } from '../../src/intelligence/intelligence-store.ts'
import type { TagEngine } from '../../src/intelligence/tag-engine.ts'
import { type FakeChatCompletions, startFakeChatCompletions } from '../helpers/fake-chat-completions.ts'
import { type ManualClock, manualClock } from '../helpers/manual-clock.ts'
import { startTestService, type TestService, waitFor } from '../helpers/service.ts'

const PURPOSES = [
  'payments',
  'customer-pii',
  'jwt',
  'backup',
  'orders',
  'billing',
  'audit-log',
  'webhook',
  'database',
  'tls',
]
const ENVS = ['prod', 'staging', 'dev']

describe('tag suggestions', () => {
  let service: TestService
  let clock: ManualClock

  before(async () => {
    clock = manualClock()
    // No job process: the test is the worker (runJobs), so it decides when one stops.
    service = await startTestService({}, { clock })
  })
  after(() => service.stop())

  async function tenant() {
    const t = await service.createTenant()
    const call = (method: string, path: string, body?: unknown) =>
      service.request(method, `/api/v1${path}`, { key: t.key, ...(body === undefined ? {} : { body }) })
    const key = async (name: string, body: Record<string, unknown> = {}) => {
      const made = await call('POST', '/keys', { name, keyType: 'HMAC', algorithm: 'HMAC-SHA256', ...body })
      assert.equal(made.status, 201, made.text)
      return made.body as { id: string; labels: string[] }
    }
    return { ...t, call, key }
  }

  test('one key on demand: stored pending with a reason; asking again adds nothing twice', async () => {
    const t = await tenant()
    const key = await t.key('payments-prod-signing', {
      keyType: 'Signing',
      algorithm: 'EC-P256',
      description: 'Signs payment webhooks for the production API',
    })
    const first = await t.call('POST', `/keys/${key.id}/tag-suggestions`)
    assert.equal(first.status, 201, first.text)
    const labels = (
      first.body.data as Array<{ label: string; reason: string; status: string; engine: string }>
    ).map((s) => s.label)
    assert.ok(labels.includes('payments'), labels.join(','))
    assert.ok(
      (first.body.data as Array<{ reason: string; status: string }>).every(
        (s) => s.reason && s.status === 'pending',
      ),
    )
    const again = await t.call('POST', `/keys/${key.id}/tag-suggestions`)
    assert.deepEqual(again.body.data, [])
    const listed = await t.call('GET', `/tag-suggestions?keyId=${key.id}`)
    assert.equal(listed.body.total, labels.length)
  })

  test('95 active keys in 10 batches, with progress; a worker that dies mid-run leaves nothing twice', async () => {
    const t = await tenant()
    for (let i = 0; i < 95; i++) await t.key(`${PURPOSES[i % PURPOSES.length]}-${ENVS[i % ENVS.length]}-${i}`)
    // A revoked key is not active: not part of the job.
    const revoked = await t.key('revoked-payments-key')
    await t.call('POST', `/keys/${revoked.id}/revoke`)

    const started = await t.call('POST', '/tag-suggestion-jobs')
    assert.equal(started.status, 202, started.text)
    assert.equal(started.body.totalKeys, 95)
    assert.equal(started.body.batchesTotal, 10)
    assert.equal(started.body.batchSize, 10)
    const jobId = started.body.id as string
    const progress = async () => (await t.call('GET', `/tag-suggestion-jobs/${jobId}`)).body

    // A worker does four batches and stops.
    assert.deepEqual(await service.api.services.intelligence.runJobs({ maxBatches: 4 }), {
      batches: 4,
      failed: 0,
    })
    let now = await progress()
    assert.equal(now.status, 'running')
    assert.equal(now.batchesDone, 4)
    assert.equal(now.processedKeys, 40)
    // Another worker claims the job and dies without a word (its lease stays).
    assert.ok(await claimJob(service.sql, clock.now(), new Date(clock.now().getTime() + 120_000)))
    assert.deepEqual(
      await service.api.services.intelligence.runJobs(),
      { batches: 0, failed: 0 },
      'the lease holds it',
    )
    assert.equal((await progress()).batchesDone, 4)
    // Past the lease, a restarted worker goes on from batch 5.
    clock.advance(121_000)
    try {
      assert.deepEqual(await service.api.services.intelligence.runJobs(), { batches: 6, failed: 0 })
    } finally {
      clock.set(new Date())
    }
    now = await progress()
    assert.equal(now.status, 'completed')
    assert.equal(now.batchesDone, 10)
    assert.equal(now.processedKeys, 95)
    assert.ok(now.finishedAt)

    const [counts] = await service.sql<{ all: number; distinct: number; keys: number }[]>`
      SELECT count(*)::int AS all, count(DISTINCT (key_id, label))::int AS distinct, count(DISTINCT key_id)::int AS keys
      FROM tag_suggestions WHERE tenant_id = ${t.tenantId} AND job_id = ${jobId}`
    assert.equal(counts!.all, counts!.distinct, 'no suggestion twice')
    assert.equal(counts!.all, now.suggestionsCreated)
    assert.equal(counts!.keys, 95, 'every active key got suggestions')
    const [forRevoked] = await service.sql<{ n: number }[]>`
      SELECT count(*)::int AS n FROM tag_suggestions WHERE key_id = ${revoked.id}`
    assert.equal(forRevoked!.n, 0)

    // The same job again suggests nothing new.
    const second = await t.call('POST', '/tag-suggestion-jobs')
    await service.api.services.intelligence.runJobs()
    const secondDone = (await t.call('GET', `/tag-suggestion-jobs/${second.body.id}`)).body
    assert.equal(secondDone.status, 'completed')
    assert.equal(secondDone.suggestionsCreated, 0)
  })

  test('a key name with an emoji at the reason’s cut: the job completes, and another tenant’s later job too', async () => {
    const a = await tenant()
    // 38 characters, then an emoji whose two UTF-16 units are the 39th and 40th: the built-in
    // engine names similar keys cut to 40 characters, which cut this one between the two units.
    const prefix = `payments-${'a'.repeat(29)}`
    assert.equal(prefix.length, 38)
    const other = `payments-${'b'.repeat(29)}`
    await a.key(`${prefix}\u{1F511}-one`, { labels: ['team-pay'] })
    await a.key(`${other}\u{1F511}-two`, { labels: ['team-pay'] })
    const third = await a.key('payments-third')
    const aJob = await a.call('POST', '/tag-suggestion-jobs')
    assert.equal(aJob.status, 202, aJob.text)
    const b = await tenant()
    await b.key('backup-archive')
    const bJob = await b.call('POST', '/tag-suggestion-jobs')
    assert.equal(bJob.status, 202, bJob.text)

    // The sweep as the job process runs it, tick after tick: no tick throws.
    for (let tick = 0; tick < 5; tick++) await service.api.services.intelligence.runJobs({ maxBatches: 20 })
    const aDone = (await a.call('GET', `/tag-suggestion-jobs/${aJob.body.id}`)).body
    const bDone = (await b.call('GET', `/tag-suggestion-jobs/${bJob.body.id}`)).body
    assert.equal(bDone.status, 'completed', 'the other tenant’s job is not held up')
    assert.equal(aDone.status, 'completed')
    const suggested = (await a.call('GET', `/tag-suggestions?keyId=${third.id}`)).body.data as Array<{
      label: string
      reason: string
    }>
    const reason = suggested.find((s) => s.label === 'team-pay')?.reason ?? ''
    assert.ok(reason.isWellFormed(), 'no lone surrogate')
    assert.ok(reason.includes(`${prefix}\u{1F511}…`), reason)
  })

  test('jobs are claimed fairly: a tenant’s one-batch job started later completes before a long job of another tenant', async () => {
    const a = await tenant()
    for (let i = 0; i < 40; i++) await a.key(`${PURPOSES[i % PURPOSES.length]}-long-${i}`)
    const long = await a.call('POST', '/tag-suggestion-jobs')
    assert.equal(long.body.batchesTotal, 4)
    // The clock stands still; the short job is started a second later, as it would be for real
    // (with equal creation times, which job is older would be decided by its random id).
    clock.advance(1000)
    const b = await tenant()
    await b.key('jwt-signing-short')
    const short = await b.call('POST', '/tag-suggestion-jobs')
    assert.equal(short.body.batchesTotal, 1)
    const progress = async () => ({
      long: (await a.call('GET', `/tag-suggestion-jobs/${long.body.id}`)).body,
      short: (await b.call('GET', `/tag-suggestion-jobs/${short.body.id}`)).body,
    })

    // One batch per step, as a worker with a small budget would go; the order is what counts.
    const order: string[] = []
    for (let step = 0; step < 10; step++) {
      const { batches } = await service.api.services.intelligence.runJobs({ maxBatches: 1 })
      if (batches === 0) break
      const now = await progress()
      order.push(`long ${now.long.batchesDone}/4, short ${now.short.batchesDone}/1`)
    }
    // The old claim (oldest job first) gave: long 1/4 … long 4/4, then short.
    assert.deepEqual(order, [
      'long 1/4, short 0/1',
      'long 1/4, short 1/1',
      'long 2/4, short 1/1',
      'long 3/4, short 1/1',
      'long 4/4, short 1/1',
    ])
    const done = await progress()
    assert.equal(done.short.status, 'completed')
    assert.equal(done.long.status, 'completed')
  })

  test('a batch that keeps failing is retried a bounded number of times, then its job fails with a reason; others go on', async () => {
    const services = service.api.services
    const builtin = createBuiltinEngine()
    let poisonCalls = 0
    // An engine that throws on one tenant's keys: the sweep's worst case, whatever the cause.
    const engine: TagEngine = {
      name: 'builtin',
      async suggest(key, context) {
        if (key.name.startsWith('poison')) {
          poisonCalls++
          throw new Error('the engine cannot handle this key')
        }
        return builtin.suggest(key, context)
      },
    }
    const worker = createIntelligenceService({
      sql: service.sql,
      clock,
      audit: services.audit,
      directories: { keys: services.keys },
      engine,
    })
    const p = await tenant()
    await p.key('poison-payments')
    const failing = await p.call('POST', '/tag-suggestion-jobs')
    const q = await tenant()
    await q.key('backup-archive-q')
    const healthy = await q.call('POST', '/tag-suggestion-jobs')

    const start = clock.now()
    try {
      for (let tick = 0; tick < 8; tick++) {
        // No tick throws; each waits out the retry delay of the tick before.
        await worker.runJobs({ maxBatches: 20 })
        clock.advance(10 * 60_000)
      }
    } finally {
      clock.set(start)
    }
    assert.equal(poisonCalls, MAX_BATCH_ATTEMPTS, 'tried exactly the bounded number of times')
    const failed = (await p.call('GET', `/tag-suggestion-jobs/${failing.body.id}`)).body
    assert.equal(failed.status, 'failed')
    assert.ok(failed.finishedAt)
    assert.match(failed.error, /batch 1 failed \(attempt 3 of 3\): the engine cannot handle this key/)
    const other = (await q.call('GET', `/tag-suggestion-jobs/${healthy.body.id}`)).body
    assert.equal(other.status, 'completed', 'the other tenant’s job completed')
    assert.equal(other.error, null)
  })

  test('accept and reject, one or all: only pending suggestions of the caller’s tenant; accepting labels the key', async () => {
    const a = await tenant()
    const b = await tenant()
    const aKey = await a.key('orders-prod-archive', { description: 'Backups of the orders database' })
    const aOther = await a.key('jwt-staging-tokens')
    const bKey = await b.key('orders-prod-archive', { description: 'Backups of the orders database' })
    for (const [who, key] of [
      [a, aKey],
      [a, aOther],
      [b, bKey],
    ] as const)
      assert.equal((await who.call('POST', `/keys/${key.id}/tag-suggestions`)).status, 201)
    const pendingOf = async (who: typeof a) =>
      (await who.call('GET', '/tag-suggestions?status=pending')).body.data as Array<{
        id: string
        keyId: string
        label: string
      }>
    const aPending = await pendingOf(a)
    const bPending = await pendingOf(b)
    assert.ok(aPending.length >= 2 && bPending.length >= 1)

    // One rejected, one accepted by hand.
    const rejected = aPending[0]!
    const accepted = aPending.find((s) => s.keyId === rejected.keyId && s.id !== rejected.id) ?? aPending[1]!
    assert.equal((await a.call('POST', `/tag-suggestions/${rejected.id}/reject`)).body.status, 'rejected')
    const one = await a.call('POST', `/tag-suggestions/${accepted.id}/accept`)
    assert.equal(one.status, 200, one.text)
    assert.equal(one.body.status, 'accepted')
    const labelled = await a.call('GET', `/keys/${accepted.keyId}`)
    assert.ok(labelled.body.labels.includes(accepted.label))
    // Deciding twice, or another tenant's suggestion: refused.
    assert.equal((await a.call('POST', `/tag-suggestions/${accepted.id}/reject`)).status, 409)
    assert.equal(
      (await b.call('POST', `/tag-suggestions/${aPending[2]?.id ?? rejected.id}/accept`)).status,
      404,
    )

    // Accept all: A's remaining pending ones, nothing of B's, the rejected one stays rejected.
    const all = await a.call('POST', '/tag-suggestions/accept-all', {})
    assert.equal(all.status, 200, all.text)
    assert.equal(all.body.decided, aPending.length - 2)
    assert.deepEqual(await pendingOf(a), [])
    assert.equal((await pendingOf(b)).length, bPending.length, 'B untouched')
    const stillRejected = await a.call('GET', `/tag-suggestions?status=rejected`)
    assert.deepEqual(
      (stillRejected.body.data as Array<{ id: string }>).map((s) => s.id),
      [rejected.id],
    )
    for (const key of [aKey, aOther]) {
      const view = await a.call('GET', `/keys/${key.id}`)
      const acceptedLabels = (
        (await a.call('GET', `/tag-suggestions?keyId=${key.id}&status=accepted`)).body.data as Array<{
          label: string
        }>
      ).map((s) => s.label)
      for (const label of acceptedLabels) assert.ok(view.body.labels.includes(label), label)
    }

    // Reject all for B: its own pending ones only.
    const rejectAll = await b.call('POST', '/tag-suggestions/reject-all', {})
    assert.equal(rejectAll.body.decided, bPending.length)
    assert.equal((await b.call('GET', `/keys/${bKey.id}`)).body.labels.length, 0)
    const audit = await a.call('GET', '/audit?action=tag_suggestions.accept')
    assert.equal(audit.body.data.length, aPending.length - 1)
  })
})

describe('tag suggestions from a configured language model (a local OpenAI-compatible server)', () => {
  let service: TestService
  let model: FakeChatCompletions

  before(async () => {
    model = await startFakeChatCompletions()
    service = await startTestService({
      KMS_TAG_MODEL_URL: model.baseUrl,
      KMS_TAG_MODEL: 'test-model',
      KMS_TAG_MODEL_API_KEY: model.apiKey,
      KMS_TAG_MODEL_TIMEOUT_MS: '5000',
    })
  })
  after(async () => {
    await service?.stop()
    await model?.stop()
  })

  test('the model answers; it is sent the four fields only; when it fails the built-in engine answers', async () => {
    const t = await service.createTenant()
    const call = (method: string, path: string, body?: unknown) =>
      service.request(method, `/api/v1${path}`, { key: t.key, ...(body === undefined ? {} : { body }) })
    const made = await call('POST', '/keys', {
      name: 'payments-prod-signing',
      keyType: 'Signing',
      algorithm: 'EC-P256',
      description: 'Signs payment authorisations',
      labels: ['team-payments'],
    })
    model.setAnswer([{ label: 'card-processing', reason: 'the description mentions payment authorisations' }])
    const answered = await call('POST', `/keys/${made.body.id}/tag-suggestions`)
    assert.equal(answered.status, 201, answered.text)
    assert.deepEqual(
      (answered.body.data as Array<{ label: string; engine: string }>).map((s) => [s.label, s.engine]),
      [['card-processing', 'model']],
    )
    const sent = model.requests.at(-1)!
    assert.equal(sent.authorization, `Bearer ${model.apiKey}`)
    const user = (sent.body as { messages: Array<{ role: string; content: string }> }).messages.find(
      (m) => m.role === 'user',
    )!
    assert.deepEqual(Object.keys(JSON.parse(user.content)).sort(), [
      'algorithm',
      'description',
      'keyType',
      'name',
    ])
    assert.ok(!sent.raw.includes(made.body.id), 'no key id is sent')
    assert.ok(!sent.raw.includes('team-payments'), 'no label is sent')

    // The model fails: the built-in engine's suggestions are stored instead.
    model.setMode('http-500')
    const other = await call('POST', '/keys', {
      name: 'backup-archive',
      keyType: 'Encryption',
      algorithm: 'ML-KEM-768',
    })
    const fallback = await call('POST', `/keys/${other.body.id}/tag-suggestions`)
    assert.equal(fallback.status, 201, fallback.text)
    const engines = new Set((fallback.body.data as Array<{ engine: string }>).map((s) => s.engine))
    assert.ok(fallback.body.data.length > 0)
    assert.ok((fallback.body.data as Array<{ label: string }>).some((s) => s.label === 'backup'))
    assert.deepEqual([...engines], ['builtin'], 'stored as the built-in engine’s')
  })
})

describe('the job process works through suggestion jobs by itself', () => {
  let service: TestService
  before(async () => {
    service = await startTestService({ KMS_JOB_SWEEP_MS: '200' }, { jobs: true })
  })
  after(() => service?.stop())

  test('a job asked for over the API completes without anyone calling the worker', async () => {
    const t = await service.createTenant()
    for (let i = 0; i < 12; i++) {
      const made = await service.request('POST', '/api/v1/keys', {
        key: t.key,
        body: {
          name: `${PURPOSES[i % PURPOSES.length]}-key-${i}`,
          keyType: 'HMAC',
          algorithm: 'HMAC-SHA256',
        },
      })
      assert.equal(made.status, 201, made.text)
    }
    const started = await service.request('POST', '/api/v1/tag-suggestion-jobs', { key: t.key })
    assert.equal(started.status, 202, started.text)
    assert.equal(started.body.batchesTotal, 2)
    let last: { status: string; batchesDone: number } | undefined
    await waitFor(async () => {
      last = (await service.request('GET', `/api/v1/tag-suggestion-jobs/${started.body.id}`, { key: t.key }))
        .body
      return last?.status === 'completed'
    }, 'the job completed')
    assert.equal(last!.batchesDone, 2)
  })
})
