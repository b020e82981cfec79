import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { startTestService, type TestService } from '../helpers/service.ts'

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

  test('after a key was verified, a key with the same lookup id and any other secret is still 401', async () => {
    const tenant = await svc.createTenant()
    // The first request verifies the key by its hash and remembers it for the row (the cache).
    assert.equal((await svc.request('GET', '/api/v1/tenant', { key: tenant.key })).status, 200)
    const body = tenant.key.slice(4)
    const flip = (c: string) => (c === 'A' ? 'B' : 'A')
    // Same prefix and lookup id (the first 12 characters), the secret changed at its first, a
    // middle and its last character: each is refused, and the real key still works in between.
    for (const at of [12, 30, 51]) {
      const forged = `kms_${body.slice(0, at)}${flip(body[at]!)}${body.slice(at + 1)}`
      assert.equal(forged.length, tenant.key.length)
      const refused = await svc.request('GET', '/api/v1/tenant', { key: forged })
      assert.equal(refused.status, 401, `changed at ${at}`)
      assert.equal((await svc.request('GET', '/api/v1/tenant', { key: tenant.key })).status, 200)
    }
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

  // ---- issue 15, defect 4: lifetime escalation ------------------------------------------------

  const HOUR = 3_600_000
  const inHours = (hours: number) => new Date(Date.now() + hours * HOUR).toISOString()

  async function mint(by: string, body: Record<string, unknown>) {
    const res = await svc.request('POST', '/api/v1/api-keys', { key: by, body })
    assert.equal(res.status, 201, res.text)
    return res.body as { id: string; key: string; parentId: string | null; expiresAt: string | null }
  }

  async function auditOf(admin: string, query: string) {
    const res = await svc.request('GET', `/api/v1/audit?${query}`, { key: admin })
    assert.equal(res.status, 200, res.text)
    return res.body.data as {
      action: string
      resource: string
      outcome: string
      details: Record<string, unknown> | null
    }[]
  }

  test('a key that expires cannot mint a key that outlives it: 400 naming expiresAt and the bound', async () => {
    const admin = await svc.createTenant()
    const parentExpiry = inHours(1)
    const parent = await mint(admin.key, {
      name: 'expiring',
      scopes: ['apikeys:write', 'audit:read'],
      expiresAt: parentExpiry,
    })
    assert.equal(parent.expiresAt, parentExpiry)

    for (const body of [
      { name: 'forever', scopes: ['audit:read'] },
      { name: 'longer', scopes: ['audit:read'], expiresAt: inHours(2) },
    ]) {
      const res = await svc.request('POST', '/api/v1/api-keys', { key: parent.key, body })
      assert.equal(res.status, 400, `${body.name}: ${res.text}`)
      assert.equal(res.body.error, 'validation_failed')
      assert.equal(res.body.fields[0].path, 'body/expiresAt')
      assert.ok(res.body.message.includes(parentExpiry), `names the bound: ${res.body.message}`)
      assert.equal(res.body.maxExpiresAt, parentExpiry)
    }
    const [stored] = await svc.sql<{ n: number }[]>`
      SELECT count(*)::int AS n FROM api_keys WHERE tenant_id = ${admin.tenantId} AND parent_id = ${parent.id}`
    assert.equal(stored!.n, 0, 'nothing was created')

    const child = await mint(parent.key, { name: 'shorter', scopes: ['audit:read'], expiresAt: inHours(0.5) })
    assert.equal(child.parentId, parent.id)
    const atBound = await mint(parent.key, { name: 'same', scopes: ['audit:read'], expiresAt: parentExpiry })
    assert.equal(atBound.expiresAt, parentExpiry)
  })

  test('keys made at tenant creation have no parent; keys made through the API record theirs', async () => {
    const admin = await svc.createTenant()
    const self = await svc.request('GET', `/api/v1/api-keys/${admin.apiKeyId}`, { key: admin.key })
    assert.equal(self.status, 200, self.text)
    assert.equal(self.body.parentId, null)
    const child = await mint(admin.key, { name: 'child', scopes: ['audit:read'] })
    assert.equal(child.parentId, admin.apiKeyId)
    assert.equal(child.expiresAt, null, 'a parent without expiry may mint keys without one')
  })

  test('revoking a key revokes the keys it minted, transitively: answer, audit, and at once', async () => {
    const admin = await svc.createTenant()
    const a = await mint(admin.key, { name: 'a', scopes: ['apikeys:write', 'audit:read'] })
    const b = await mint(a.key, { name: 'b', scopes: ['apikeys:write', 'audit:read'] })
    const c = await mint(b.key, { name: 'c', scopes: ['audit:read'] })
    const sibling = await mint(admin.key, { name: 'sibling', scopes: ['audit:read'] })
    for (const k of [a, b, c]) {
      assert.equal((await svc.request('GET', '/api/v1/audit', { key: k.key })).status, 200, 'works before')
    }

    const revoked = await svc.request('POST', `/api/v1/api-keys/${a.id}/revoke`, { key: admin.key })
    assert.equal(revoked.status, 200, revoked.text)
    assert.ok(revoked.body.revokedAt)
    assert.deepEqual([...revoked.body.revokedDescendants].sort(), [b.id, c.id].sort())

    for (const k of [a, b, c]) {
      const res = await svc.request('GET', '/api/v1/audit', { key: k.key })
      assert.equal(res.status, 401, `${k.id} stops working at once`)
    }
    assert.equal((await svc.request('GET', '/api/v1/audit', { key: sibling.key })).status, 200)

    const [record] = await auditOf(admin.key, `action=apikeys.revoke&resource=apikey:${a.id}`)
    assert.equal(record!.outcome, 'success')
    assert.deepEqual(String(record!.details!['revokedDescendants']).split(' ').sort(), [b.id, c.id].sort())
    for (const k of [b, c]) {
      const [own] = await auditOf(admin.key, `action=apikeys.revoke&resource=apikey:${k.id}`)
      assert.equal(own!.outcome, 'success')
      assert.equal(own!.details!['reason'], 'ancestor_revoked')
      assert.equal(own!.details!['revokedWith'], a.id)
    }
  })

  test('a key may revoke only keys whose scopes it holds: 403 scope_escalation, audited, nothing revoked', async () => {
    const admin = await svc.createTenant()
    const revoker = await mint(admin.key, { name: 'revoker', scopes: ['apikeys:write', 'apikeys:read'] })
    const res = await svc.request('POST', `/api/v1/api-keys/${admin.apiKeyId}/revoke`, { key: revoker.key })
    assert.equal(res.status, 403, res.text)
    assert.equal(res.body.error, 'scope_escalation')
    assert.ok(res.body.missingScopes.includes('keys:write'))
    assert.ok(!res.body.missingScopes.includes('apikeys:write'))
    assert.equal((await svc.request('GET', '/api/v1/tenant', { key: admin.key })).status, 200, 'admin works')
    const [stored] = await svc.sql<{ revoked_at: Date | null }[]>`
      SELECT revoked_at FROM api_keys WHERE id = ${admin.apiKeyId}`
    assert.equal(stored!.revoked_at, null)
    const [denied] = await auditOf(admin.key, `action=authorization.denied&resource=apikey:${admin.apiKeyId}`)
    assert.equal(denied!.outcome, 'denied')

    // Within its own scopes it may: a key holding what the target holds.
    const peer = await mint(admin.key, { name: 'peer', scopes: ['apikeys:read'] })
    const ok = await svc.request('POST', `/api/v1/api-keys/${peer.id}/revoke`, { key: revoker.key })
    assert.equal(ok.status, 200, ok.text)
  })
})
