import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import {
  type HttpResult,
  startTestService,
  type TenantWithKey,
  type TestService,
} from '../helpers/service.ts'

/**
 * Issue 15, defect 3: 60 SLH-DSA signatures from tenant B made tenant A's ML-DSA key creation
 * take 6.7 s instead of 15 ms. The crypto pool now serves per-tenant queues round-robin and keeps
 * a thread for the other tenants while one floods (src/crypto-pool/fair-queue.ts). Latency is
 * compared as a ratio measured in the same test on the same machine, never against a fixed time.
 */

const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.floor(sorted.length / 2)]!
}

async function createKey(svc: TestService, tenant: TenantWithKey, name: string, algorithm: string) {
  const res = await svc.request('POST', '/api/v1/keys', {
    key: tenant.key,
    body: { name, keyType: 'Signing', algorithm },
  })
  assert.equal(res.status, 201, res.text)
  return res.body.id as string
}

const signSlh = (svc: TestService, tenant: TenantWithKey, keyId: string, i: number) =>
  svc.request('POST', '/api/v1/sign', {
    key: tenant.key,
    body: { keyId, message: Buffer.from(`flood ${i}`).toString('base64') },
  })

describe('crypto pool fairness across tenants', () => {
  let svc: TestService
  let victim: TenantWithKey
  let flooder: TenantWithKey

  before(async () => {
    // Two threads, as on the 2-core machine the defect was measured on.
    svc = await startTestService({ KMS_CRYPTO_THREADS: '2' })
    victim = await svc.createTenant()
    flooder = await svc.createTenant()
  })
  after(async () => svc?.stop())

  test("A's ML-DSA key creation while B floods with 60 SLH-DSA signatures stays within 3x of A's idle latency (medians)", async (t) => {
    const pool = svc.api.services.cryptoPool
    const slhKey = await createKey(svc, flooder, 'flood-key', 'SLH-DSA-128s')
    let created = 0
    const timedCreate = async () => {
      const started = performance.now()
      await createKey(svc, victim, `victim-${created++}`, 'ML-DSA-65')
      return performance.now() - started
    }

    // Warm-up (threads started, statements prepared), then A alone (9 samples; 9 more at the end).
    for (let i = 0; i < 3; i++) await timedCreate()
    const idle: number[] = []
    for (let i = 0; i < 9; i++) idle.push(await timedCreate())

    let finished = 0
    const flood = Array.from({ length: 60 }, (_, i) =>
      signSlh(svc, flooder, slhKey, i).then((res) => {
        finished++
        return res
      }),
    )
    // The flood is under way: B's tasks wait in the pool.
    const deadline = Date.now() + 30_000
    while (pool.stats().queued < 10 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5))
    assert.ok(pool.stats().queued >= 10, `B's signatures are queued (${pool.stats().queued})`)

    // 15 samples: on a busy 2-core machine (another test file running beside this one) a median of
    // more samples moves less with that other load.
    const flooded: number[] = []
    for (let i = 0; i < 15; i++) {
      flooded.push(await timedCreate())
      // Each of A's calls began and ended inside the flood: a call that waited for the flood to
      // drain (as with one FIFO for everyone) ends with B's signatures nearly all done.
      assert.ok(
        60 - finished >= 30,
        `A's request ${i} ended with ${60 - finished} of B's 60 signatures outstanding (at least 30 expected)`,
      )
    }
    const stillRunning = 60 - finished
    const results: HttpResult[] = await Promise.all(flood)
    for (const res of results) assert.equal(res.status, 200, res.text)
    // A alone again: idle samples from before and after the flood, so that the machine's load
    // drifting during the test (other work on a shared machine) does not pass for unfairness.
    for (let i = 0; i < 9; i++) idle.push(await timedCreate())

    const ratio = median(flooded) / median(idle)
    t.diagnostic(
      `A idle median ${median(idle).toFixed(1)} ms, during flood ${median(flooded).toFixed(1)} ms, ratio ${ratio.toFixed(2)}; B had ${stillRunning} signatures left when A finished`,
    )
    assert.ok(ratio <= 3, `A's latency during B's flood is ${ratio.toFixed(2)}x its idle latency (limit 3x)`)
  })
})

describe('per-tenant queue limit', () => {
  let svc: TestService
  let busy: TenantWithKey
  let other: TenantWithKey

  before(async () => {
    svc = await startTestService({ KMS_CRYPTO_THREADS: '2', KMS_CRYPTO_TENANT_QUEUE: '3' })
    busy = await svc.createTenant()
    other = await svc.createTenant()
  })
  after(async () => svc?.stop())

  test('a tenant over its queue limit gets 429 crypto_busy with Retry-After; another tenant is served meanwhile', async () => {
    const slhKey = await createKey(svc, busy, 'busy-key', 'SLH-DSA-128s')
    const burst = Array.from({ length: 16 }, (_, i) => signSlh(svc, busy, slhKey, i))
    // While the burst is in the pool, the other tenant's work still gets in.
    const otherKey = await createKey(svc, other, 'other-key', 'ML-DSA-44')
    const otherSigned = await svc.request('POST', '/api/v1/sign', {
      key: other.key,
      body: { keyId: otherKey, message: Buffer.from('other tenant').toString('base64') },
    })
    assert.equal(otherSigned.status, 200, otherSigned.text)

    const results = await Promise.all(burst)
    const refused = results.filter((r) => r.status === 429)
    const signed = results.filter((r) => r.status === 200)
    assert.equal(refused.length + signed.length, 16, results.map((r) => r.status).join(','))
    // At most 2 running and 3 waiting at any time: of 16 sent at once, some must be refused.
    assert.ok(refused.length >= 1, `429s: ${refused.length}`)
    assert.ok(signed.length >= 5, `signed: ${signed.length}`)
    for (const res of refused) {
      assert.equal(res.body.error, 'crypto_busy')
      assert.match(res.body.message, /waiting \(3\)/)
      assert.equal(res.headers.get('retry-after'), '1')
    }
  })
})
