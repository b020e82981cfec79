import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { createCryptoPool } from '../src/crypto-pool/crypto-pool.ts'
import { pbkdf2Encrypted } from './helpers/der.ts'
import { startTestService, type TenantWithKey, type TestService } from './helpers/service.ts'

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
    // A deadline well below what 10,000,000 PBKDF2 iterations take (3.5-5 s, more on a busy
    // machine), which the KDF bound allows, and well above a thread's cold start plus a key
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
        keyMaterial: pbkdf2Encrypted(10_000_000).toString('base64'),
        password: 'a-password-for-the-slow-kdf',
      },
    })
    assert.equal(res.status, 503, res.text)
    assert.equal(res.body.error, 'crypto_task_timeout')
    assert.match(res.body.message, /deadline of 1500 ms/)
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
        material: pbkdf2Encrypted(10_000_000).toString('base64'),
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
    assert.ok(done.every((d) => d.durationMs >= 0))
    assert.equal(pool.stats().completed, 3)
  } finally {
    await pool.destroy()
  }
})
