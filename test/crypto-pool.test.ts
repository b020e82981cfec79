import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
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

test('the API keeps answering while an RSA-4096 key is generated', async () => {
  let createdAt = 0
  const creating = svc
    .request('POST', '/api/v1/keys', {
      key: tenant.key,
      body: { name: 'slow-rsa', keyType: 'Signing', algorithm: 'RSA-4096' },
    })
    .then((response) => {
      createdAt = performance.now()
      return response
    })
  // Sequential requests issued after the generation started: on a blocked event loop none of
  // them could be answered before the generation ends and the key is created.
  await new Promise((resolve) => setTimeout(resolve, 20))
  const answeredAt: number[] = []
  for (let i = 0; i < 3; i++) {
    const health = await svc.request('GET', '/api/v1/tenant', { key: tenant.key })
    assert.equal(health.status, 200)
    answeredAt.push(performance.now())
  }
  const created = await creating
  assert.equal(created.status, 201, created.text)
  assert.ok(
    answeredAt.every((t) => t < createdAt),
    'every request issued during the generation was answered before it finished',
  )
})
