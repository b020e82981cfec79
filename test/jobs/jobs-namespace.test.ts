import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { after, before, test } from 'node:test'
import { Redis } from 'ioredis'
import { jobNamespace } from '../../src/jobs/job-namespace.ts'
import { DAY_MS } from '../../src/platform/clock.ts'
import { manualClock } from '../helpers/manual-clock.ts'
import { REDIS_URL, startTestService, type TestService, waitFor } from '../helpers/service.ts'

/**
 * Two deployments on one Redis with the same KMS_REDIS_PREFIX (issue 15, operability): each
 * runs its own sweeps against its own database. Deployment A sweeps every 100 ms; B, started
 * after A, every hour. When both shared one `rotation-sweep` scheduler, B's upsert (the last)
 * set it to hourly for A too, and whichever worker took a sweep ran it against its own
 * database: A's due rotation waited for an hour. With a namespace per database, A's rotation
 * happens at A's own pace and the queues in Redis are two, one per deployment.
 */

const PREFIX = `kms-ns-test-${randomBytes(4).toString('hex')}:`
let a: TestService
let b: TestService
const redis = new Redis(REDIS_URL, { lazyConnect: true, maxRetriesPerRequest: 1 })

before(async () => {
  const clock = manualClock(new Date('2030-01-01T00:00:00.000Z'))
  a = await startTestService({ KMS_REDIS_PREFIX: PREFIX, KMS_JOB_SWEEP_MS: '100' }, { clock, jobs: true })
  b = await startTestService({ KMS_REDIS_PREFIX: PREFIX, KMS_JOB_SWEEP_MS: '3600000' }, { clock, jobs: true })
  await redis.connect()
})
after(async () => {
  await a?.stop()
  await b?.stop()
  const keys = await redis.keys(`${PREFIX}*`)
  if (keys.length > 0) await redis.del(...keys)
  redis.disconnect()
})

test('two deployments sharing a Redis prefix each run only their own sweeps', async () => {
  const nsA = await jobNamespace(a.sql)
  const nsB = await jobNamespace(b.sql)
  assert.match(nsA, /^[0-9a-f]{16}$/)
  assert.notEqual(nsA, nsB, 'different databases, different namespaces')
  assert.equal(
    await jobNamespace(a.api.services.sql),
    nsA,
    'every process of a deployment derives the same one',
  )

  // A due rotation in A's database is done by A's job process, at A's own sweep interval.
  const tenant = await a.createTenant()
  const created = await a.request('POST', '/api/v1/keys', {
    key: tenant.key,
    body: { name: 'ns-key', keyType: 'Encryption', algorithm: 'ML-KEM-768' },
  })
  assert.equal(created.status, 201, created.text)
  const keyId = created.body.id as string
  const policy = await a.request('POST', `/api/v1/keys/${keyId}/rotation-policy`, {
    key: tenant.key,
    body: { frequency: 'Daily' },
  })
  assert.equal(policy.status, 200, policy.text)
  await a.sql`UPDATE keys SET next_rotation_at = ${new Date(Date.parse('2030-01-01T00:00:00.000Z') - DAY_MS)}
    WHERE id = ${keyId}`
  await waitFor(
    async () => {
      const res = await a.request('GET', `/api/v1/keys/${keyId}`, { key: tenant.key })
      return res.body.version === 2
    },
    "A's due rotation",
    20_000,
  )
  // The rotation's audit record names the sweep job that made it: one of A's own queue.
  const [record] = await a.sql<{ request_id: string }[]>`
    SELECT request_id FROM audit_log WHERE action = 'keys.rotate' AND resource = ${`key:${keyId}`}`
  assert.match(record!.request_id, /^job:repeat:/)

  // Each deployment has its own queues in Redis; neither sits at the shared prefix itself.
  const keys = await redis.keys(`${PREFIX}jobs:*`)
  const namespaces = new Set(keys.map((key) => key.slice(`${PREFIX}jobs:`.length).split(':')[0]))
  assert.deepEqual([...namespaces].sort(), [nsA, nsB].sort())
  for (const ns of [nsA, nsB]) {
    assert.ok(
      keys.some((key) => key.startsWith(`${PREFIX}jobs:${ns}:maintenance:`)),
      `the maintenance queue of ${ns}`,
    )
  }
  // B's schedulers are B's own: hourly; A's stay every 100 ms.
  const every = async (ns: string) => {
    const fields = await redis.hgetall(`${PREFIX}jobs:${ns}:maintenance:repeat:rotation-sweep`)
    return Number(fields['every'])
  }
  assert.equal(await every(nsA), 100)
  assert.equal(await every(nsB), 3_600_000)
})
