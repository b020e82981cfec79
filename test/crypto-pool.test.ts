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
