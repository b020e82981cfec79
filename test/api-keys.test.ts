import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { startTestService, type TestService } from './helpers/service.ts'

describe('API keys over HTTP', () => {
  let svc: TestService
  before(async () => {
    svc = await startTestService()
  })
  after(async () => svc?.stop())

  test('a created key is shown once, stored only as a hash, and works', async () => {
    const admin = await svc.createTenant()
    const created = await svc.request('POST', '/api/v1/api-keys', {
      key: admin.key,
      body: { name: 'reader', scopes: ['audit:read'] },
    })
    assert.equal(created.status, 201)
    assert.match(created.body.key, /^kms_[A-Za-z0-9]{52}$/)
    assert.deepEqual(created.body.scopes, ['audit:read'])

    const rows = await svc.sql`SELECT * FROM api_keys WHERE id = ${created.body.id}`
    assert.equal(rows.length, 1)
    assert.ok(!JSON.stringify(rows[0]).includes(created.body.key.slice(4)), 'the key is not stored')

    const listed = await svc.request('GET', `/api/v1/api-keys/${created.body.id}`, { key: admin.key })
    assert.equal(listed.status, 200)
    assert.equal(listed.body.key, undefined, 'the key is never shown again')

    const audit = await svc.request('GET', '/api/v1/audit', { key: created.body.key })
    assert.equal(audit.status, 200)
  })

  test('a key cannot grant scopes it does not hold', async () => {
    const narrow = await svc.createTenant(['apikeys:write', 'audit:read'])
    const res = await svc.request('POST', '/api/v1/api-keys', {
      key: narrow.key,
      body: { name: 'escalate', scopes: ['keys:write'] },
    })
    assert.equal(res.status, 403)
    assert.equal(res.body.error, 'scope_escalation')
    assert.deepEqual(res.body.missingScopes, ['keys:write'])
  })

  test('a revoked key gets 401 at once on the same process', async () => {
    const admin = await svc.createTenant()
    const created = await svc.request('POST', '/api/v1/api-keys', {
      key: admin.key,
      body: { name: 'temp', scopes: ['audit:read'] },
    })
    assert.equal((await svc.request('GET', '/api/v1/audit', { key: created.body.key })).status, 200)
    const revoked = await svc.request('POST', `/api/v1/api-keys/${created.body.id}/revoke`, {
      key: admin.key,
    })
    assert.equal(revoked.status, 200)
    assert.ok(revoked.body.revokedAt)
    const after = await svc.request('GET', '/api/v1/audit', { key: created.body.key })
    assert.equal(after.status, 401)
    assert.equal(after.body.error, 'unauthorized')
  })
})
