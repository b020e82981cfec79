import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { createCryptoPool } from '../../src/crypto-pool/crypto-pool.ts'
import { createFairQueue } from '../../src/crypto-pool/fair-queue.ts'
import type { AppError } from '../../src/platform/errors.ts'
import { pbkdf2Encrypted } from '../helpers/der.ts'
import { startTestService, type TenantWithKey, type TestService, waitFor } from '../helpers/service.ts'

let svc: TestService
let tenant: TenantWithKey

before(async () => {
  svc = await startTestService()
  tenant = await svc.createTenant()
})
after(async () => svc?.stop())

test('key pairs are generated in the worker pool; HMAC secrets are not', async () => {
  const pool = svc.api.services.cryptoPool
  const before = pool.completedTasks()
  const created = await svc.request('POST', '/api/v1/keys', {
    key: tenant.key,
    body: { name: 'pooled', keyType: 'Signing', algorithm: 'Ed25519' },
  })
  assert.equal(created.status, 201, created.text)
  assert.equal(pool.completedTasks(), before + 1, 'one generation task ran in a worker thread')
  const hmac = await svc.request('POST', '/api/v1/keys', {
    key: tenant.key,
    body: { name: 'inline', keyType: 'HMAC', algorithm: 'HMAC-SHA256' },
  })
  assert.equal(hmac.status, 201, hmac.text)
  assert.equal(pool.completedTasks(), before + 1, 'an HMAC secret needs no worker thread')
})

describe('task deadline (issue 15, defect 2)', () => {
  let slow: TestService
  let owner: TenantWithKey

  before(async () => {
    // A deadline well below what 10,000,000 PBKDF2 iterations take, which the KDF bound allows:
    // with HMAC-SHA-512 3.7 s here (HMAC-SHA-256 took 1.35 s on a CPU with SHA extensions, too
    // close to the deadline: the test failed once in CI), and well above a thread's cold start plus a key
    // generation: the slow task is stopped, the next ones are not.
    slow = await startTestService({ KMS_CRYPTO_TASK_TIMEOUT_MS: '1500', KMS_CRYPTO_THREADS: '2' })
    owner = await slow.createTenant()
  })
  after(async () => slow?.stop())

  test('a task past its deadline answers 503 crypto_task_timeout with Retry-After; the pool serves the next call', async () => {
    const pool = slow.api.services.cryptoPool
    const res = await slow.request('POST', '/api/v1/keys/import', {
      key: owner.key,
      body: {
        name: 'slow-kdf',
        keyType: 'Signing',
        algorithm: 'Ed25519',
        format: 'PKCS#8',
        keyMaterial: pbkdf2Encrypted(10_000_000, 'sha512').toString('base64'),
        password: 'a-password-for-the-slow-kdf',
      },
    })
    assert.equal(res.status, 503, res.text)
    assert.equal(res.body.error, 'crypto_task_timeout')
    // The message names the configured deadline (configuration, not a measured time).
    assert.match(res.body.message, new RegExp(`deadline of ${slow.config.cryptoPool.taskTimeoutMs} ms`))
    assert.equal(res.headers.get('retry-after'), '1')
    assert.equal(pool.stats().running, 0, 'the stopped task no longer holds a thread')

    for (const name of ['after-timeout-1', 'after-timeout-2', 'after-timeout-3']) {
      const next = await slow.request('POST', '/api/v1/keys', {
        key: owner.key,
        body: { name, keyType: 'Signing', algorithm: 'Ed25519' },
      })
      assert.equal(next.status, 201, next.text)
    }
  })
})

test('stats() and onTaskDone report each task with its kind and outcome', async () => {
  const done: { kind: string; outcome: string; durationMs: number }[] = []
  const pool = createCryptoPool({
    maxThreads: 1,
    taskTimeoutMs: 1500,
    onTaskDone: (kind, durationMs, outcome) => done.push({ kind, durationMs, outcome }),
  })
  try {
    assert.deepEqual(pool.stats(), { queued: 0, running: 0, completed: 0 })
    const first = pool.generateKey('tenant-a', 'Ed25519')
    const second = pool.generateKey('tenant-a', 'Ed25519')
    assert.deepEqual(pool.stats(), { queued: 1, running: 1, completed: 0 }, 'one thread: one runs, one waits')
    await Promise.all([first, second])
    assert.deepEqual(pool.stats(), { queued: 0, running: 0, completed: 2 })
    await assert.rejects(
      pool.importKey('tenant-a', {
        algorithm: 'Ed25519',
        format: 'DER',
        material: pbkdf2Encrypted(10_000_000, 'sha512').toString('base64'),
        password: 'a-password-for-the-slow-kdf',
      }),
      (error: { code?: string }) => error.code === 'crypto_task_timeout',
    )
    assert.deepEqual(
      done.map((d) => [d.kind, d.outcome]),
      [
        ['generateKey', 'ok'],
        ['generateKey', 'ok'],
        ['importKey', 'timeout'],
      ],
    )
    assert.equal(pool.stats().completed, 3)
  } finally {
    await pool.destroy()
  }
})

describe('fair queue (the scheduling in front of the threads)', () => {
  /** A queue over an executor whose tasks end when the test says so. */
  function harness(threads: number, activeWindowMs: number, options: { tenantMaxQueue?: number } = {}) {
    let clock = 0
    const started: string[] = []
    const finish = new Map<string, () => void>()
    const queue = createFairQueue<string, string>({
      threads,
      maxQueue: 100,
      tenantMaxQueue: options.tenantMaxQueue ?? 3,
      activeWindowMs,
      now: () => clock,
      // Tasks named s… are short (stackable two per thread), the others long.
      isShort: (task) => task.startsWith('s'),
      execute: (task) =>
        new Promise((resolve) => {
          started.push(task)
          finish.set(task, () => resolve(task))
        }),
    })
    const settle = () => new Promise((resolve) => setImmediate(resolve))
    return {
      queue,
      started,
      advance: (ms: number) => {
        clock += ms
      },
      async end(task: string) {
        finish.get(task)!()
        await settle()
      },
    }
  }

  test('queues are served round-robin, and a flooding tenant leaves a thread for the others', async () => {
    const h = harness(2, 1000)
    const results = ['b1', 'b2', 'b3'].map((t) => h.queue.submit('B', t))
    assert.deepEqual(h.started, ['b1', 'b2'], 'a tenant alone may use every thread')
    results.push(h.queue.submit('A', 'a1'), h.queue.submit('A', 'a2'))
    assert.deepEqual(h.started, ['b1', 'b2'])
    await h.end('b1')
    assert.deepEqual(h.started, ['b1', 'b2', 'a1'], "A's task goes before B's third")
    await h.end('b2')
    assert.deepEqual(h.started, ['b1', 'b2', 'a1', 'b3'], 'round-robin: B again')
    await h.end('a1')
    assert.deepEqual(h.started, ['b1', 'b2', 'a1', 'b3', 'a2'])
    results.push(h.queue.submit('B', 'b4'))
    await h.end('a2')
    // A called within the window: B keeps to one thread, the other stays free for A.
    assert.deepEqual(h.started, ['b1', 'b2', 'a1', 'b3', 'a2'])
    assert.deepEqual([h.queue.queued(), h.queue.running()], [1, 1])
    results.push(h.queue.submit('A', 'a3'))
    assert.deepEqual(h.started, ['b1', 'b2', 'a1', 'b3', 'a2', 'a3'], 'A starts at once on the kept thread')
    await h.end('a3')
    await h.end('b3')
    assert.deepEqual(h.started.at(-1), 'b4')
    await h.end('b4')
    assert.deepEqual((await Promise.all(results)).sort(), ['a1', 'a2', 'a3', 'b1', 'b2', 'b3', 'b4'])
  })

  test('once the other tenants have been idle past the window, a waiting tenant gets the free thread', async () => {
    const h = harness(2, 20)
    const a = h.queue.submit('A', 'a1')
    const b = ['b1', 'b2'].map((t) => h.queue.submit('B', t))
    assert.deepEqual(h.started, ['a1', 'b1'])
    h.advance(5)
    await h.end('a1')
    assert.deepEqual(h.started, ['a1', 'b1'], 'A was active a moment ago: its thread is kept')
    h.advance(100)
    await waitFor(() => h.started.length === 3, 'the recheck after the window')
    assert.deepEqual(h.started, ['a1', 'b1', 'b2'])
    await h.end('b1')
    await h.end('b2')
    await Promise.all([a, ...b])
  })

  test('short tasks stack two per thread while no long task runs or waits; a long task gets a thread with nothing stacked', async () => {
    const h = harness(2, 1000, { tenantMaxQueue: 10 })
    const results = ['s1', 's2', 's3', 's4', 's5'].map((t) => h.queue.submit('B', t))
    assert.deepEqual(h.started, ['s1', 's2', 's3', 's4'], 'two per thread for a tenant alone')
    results.push(h.queue.submit('A', 'long1'))
    await h.end('s1')
    await h.end('s2')
    assert.equal(h.started.length, 4, 'a long task waits, and nothing stacks meanwhile')
    await h.end('s3')
    assert.deepEqual(h.started.slice(4), ['long1'], 'once a thread can be free, the long task takes it')
    results.push(h.queue.submit('A', 's-a'))
    await h.end('s4')
    assert.deepEqual(h.started.slice(5), ['s5'], 'one task per free thread while a long task runs')
    await h.end('long1')
    assert.deepEqual(h.started.slice(6), ['s-a'], 'stacking again once no long task runs')
    await h.end('s5')
    await h.end('s-a')
    assert.deepEqual((await Promise.all(results)).sort(), ['long1', 's-a', 's1', 's2', 's3', 's4', 's5'])
  })

  test('past the per-tenant limit: 429 crypto_busy with retryAfterSeconds; other tenants still queue', async () => {
    const h = harness(1, 1000)
    const accepted = ['b1', 'b2', 'b3', 'b4'].map((t) => h.queue.submit('B', t))
    await assert.rejects(h.queue.submit('B', 'b5'), (error: AppError) => {
      assert.equal(error.statusCode, 429)
      assert.equal(error.code, 'crypto_busy')
      assert.equal(error.details?.['retryAfterSeconds'], 1)
      return true
    })
    const other = h.queue.submit('A', 'a1')
    // b2 was waiting before a1 arrived; after it, B goes to the back of the line.
    for (const t of ['b1', 'b2', 'a1', 'b3', 'b4']) await h.end(t)
    assert.deepEqual(h.started, ['b1', 'b2', 'a1', 'b3', 'b4'])
    await Promise.all([...accepted, other])
  })
})
