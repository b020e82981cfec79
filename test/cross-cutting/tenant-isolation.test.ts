import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { after, before, describe, test } from 'node:test'
import type { Scope } from '../../src/auth/scopes.ts'
import { startTestService, type TenantWithKey, type TestService } from '../helpers/service.ts'

/**
 * Two tenants on one service: neither can see, read or change anything of the other, and the
 * answer for another tenant's resource is the same 404 as for one that does not exist.
 */

interface AuditView {
  id: string
  action: string
  resource: string | null
  outcome: string
  actor: string
  requestId: string | null
}

describe('tenant isolation', () => {
  let svc: TestService
  let a: TenantWithKey
  let b: TenantWithKey
  /** API keys each tenant created through the API (besides its initial key). */
  const created: Record<'a' | 'b', { id: string; key: string }[]> = { a: [], b: [] }

  async function createKey(owner: TenantWithKey, name: string, scopes: Scope[]) {
    const res = await svc.request('POST', '/api/v1/api-keys', { key: owner.key, body: { name, scopes } })
    assert.equal(res.status, 201, res.text)
    return { id: res.body.id as string, key: res.body.key as string }
  }

  /** Every page of the caller's audit listing for `query`, following nextCursor. */
  async function auditPages(key: string, query: Record<string, string>) {
    const pages: AuditView[][] = []
    let cursor: string | null = null
    do {
      const params = new URLSearchParams({ ...query, ...(cursor ? { cursor } : {}) })
      const res = await svc.request('GET', `/api/v1/audit?${params}`, { key })
      assert.equal(res.status, 200, res.text)
      pages.push(res.body.data)
      cursor = res.body.nextCursor
      assert.ok(pages.length < 100, 'pagination terminates')
    } while (cursor)
    return pages
  }

  async function auditIdsInDb(tenantId: string): Promise<Set<string>> {
    const rows = await svc.sql<
      { id: string }[]
    >`SELECT id::text AS id FROM audit_log WHERE tenant_id = ${tenantId}`
    return new Set(rows.map((r) => r.id))
  }

  before(async () => {
    svc = await startTestService()
    a = await svc.createTenant()
    b = await svc.createTenant()
    for (let i = 0; i < 3; i++) created.a.push(await createKey(a, `a-${i}`, ['audit:read', 'apikeys:read']))
    for (let i = 0; i < 4; i++) created.b.push(await createKey(b, `b-${i}`, ['audit:read', 'apikeys:read']))
    // Some revocations and some denied attempts on both sides, so each tenant has every kind of record.
    for (const [owner, mine] of [
      [a, created.a],
      [b, created.b],
    ] as const) {
      const revoked = await svc.request('POST', `/api/v1/api-keys/${mine[0]!.id}/revoke`, { key: owner.key })
      assert.equal(revoked.status, 200)
      const denied = await svc.request('POST', '/api/v1/api-keys', {
        key: mine[1]!.key,
        body: { name: 'denied', scopes: ['audit:read'] },
      })
      assert.equal(denied.status, 403)
    }
  })
  after(async () => svc?.stop())

  test('/api/v1/tenant answers with the caller’s own tenant', async () => {
    for (const [t, other] of [
      [a, b],
      [b, a],
    ] as const) {
      const res = await svc.request('GET', '/api/v1/tenant', { key: t.key })
      assert.equal(res.status, 200, res.text)
      assert.equal(res.body.id, t.tenantId)
      assert.notEqual(res.body.id, other.tenantId)
      assert.equal(res.body.apiKeyId, t.apiKeyId)
    }
    const secondKey = created.b[1]!
    const res = await svc.request('GET', '/api/v1/tenant', { key: secondKey.key })
    assert.equal(res.body.id, b.tenantId)
    assert.equal(res.body.apiKeyId, secondKey.id)
  })

  test('A cannot get B’s API key: 404 api_key_not_found, the same as an unknown id', async () => {
    for (const target of [b.apiKeyId, ...created.b.map((k) => k.id)]) {
      const res = await svc.request('GET', `/api/v1/api-keys/${target}`, { key: a.key })
      assert.equal(res.status, 404, res.text)
      assert.equal(res.body.error, 'api_key_not_found')
      assert.ok(!res.text.includes(b.tenantId), 'nothing of B is echoed')
    }
    // Byte for byte the answer for an id that exists nowhere.
    const unknown = await svc.request('GET', `/api/v1/api-keys/${randomUUID()}`, { key: a.key })
    const foreign = await svc.request('GET', `/api/v1/api-keys/${b.apiKeyId}`, { key: a.key })
    assert.equal(unknown.status, 404)
    assert.deepEqual(foreign.body, unknown.body)
  })

  test('A cannot revoke B’s API key: 404, never 403, and B’s key keeps working', async () => {
    const victim = created.b[2]!
    const res = await svc.request('POST', `/api/v1/api-keys/${victim.id}/revoke`, { key: a.key })
    assert.equal(res.status, 404, res.text)
    assert.equal(res.body.error, 'api_key_not_found')

    // B's own initial key too.
    const own = await svc.request('POST', `/api/v1/api-keys/${b.apiKeyId}/revoke`, { key: a.key })
    assert.equal(own.status, 404)
    assert.equal(own.body.error, 'api_key_not_found')

    const [row] = await svc.sql<
      { revoked_at: Date | null }[]
    >`SELECT revoked_at FROM api_keys WHERE id = ${victim.id}`
    assert.equal(row!.revoked_at, null)
    assert.equal((await svc.request('GET', '/api/v1/tenant', { key: victim.key })).status, 200)
    assert.equal((await svc.request('GET', '/api/v1/tenant', { key: b.key })).status, 200)
    const seen = await svc.request('GET', `/api/v1/api-keys/${victim.id}`, { key: b.key })
    assert.equal(seen.status, 200)
    assert.equal(seen.body.revokedAt, null)

    // The failed attempt left no revoke record in either tenant.
    const records =
      await svc.sql`SELECT 1 FROM audit_log WHERE action = 'apikeys.revoke' AND resource = ${`apikey:${victim.id}`}`
    assert.equal(records.length, 0)
  })

  test('listing API keys shows only the caller’s keys, with correct totals', async () => {
    for (const [t, mine, theirs] of [
      [a, created.a, created.b],
      [b, created.b, created.a],
    ] as const) {
      const otherIds = new Set([...theirs.map((k) => k.id), t === a ? b.apiKeyId : a.apiKeyId])
      const active = await svc.request('GET', '/api/v1/api-keys', { key: t.key })
      assert.equal(active.status, 200, active.text)
      // Initial key plus created keys, minus the one revoked in setup.
      const expectedActive = [t.apiKeyId, ...mine.slice(1).map((k) => k.id)].sort()
      assert.deepEqual(active.body.data.map((k: { id: string }) => k.id).sort(), expectedActive)
      assert.equal(active.body.total, expectedActive.length)

      const all = await svc.request('GET', '/api/v1/api-keys?includeRevoked=true', { key: t.key })
      const expectedAll = [t.apiKeyId, ...mine.map((k) => k.id)].sort()
      assert.deepEqual(all.body.data.map((k: { id: string }) => k.id).sort(), expectedAll)
      assert.equal(all.body.total, expectedAll.length)

      // Paged one at a time: same keys, total unchanged on every page.
      const paged: string[] = []
      for (let offset = 0; offset < expectedAll.length + 1; offset++) {
        const page = await svc.request(
          'GET',
          `/api/v1/api-keys?includeRevoked=true&limit=1&offset=${offset}`,
          {
            key: t.key,
          },
        )
        assert.equal(page.status, 200)
        assert.equal(page.body.total, expectedAll.length)
        paged.push(...page.body.data.map((k: { id: string }) => k.id))
      }
      assert.deepEqual(paged.sort(), expectedAll)
      for (const id of paged) assert.ok(!otherIds.has(id), 'no key of the other tenant')
    }
  })

  test('A’s audit listing never contains B’s records, whatever the filters and pages', async () => {
    const aIds = await auditIdsInDb(a.tenantId)
    const bIds = await auditIdsInDb(b.tenantId)
    assert.ok(bIds.size >= 7, 'B has records to leak')
    const bResources = new Set([
      `tenant:${b.tenantId}`,
      `apikey:${b.apiKeyId}`,
      ...created.b.map((k) => `apikey:${k.id}`),
    ])
    const bActors = new Set([`apikey:${b.apiKeyId}`, ...created.b.map((k) => `apikey:${k.id}`)])

    const check = (records: AuditView[], label: string) => {
      for (const r of records) {
        assert.ok(!bIds.has(r.id), `${label}: record ${r.id} of B in A's listing`)
        assert.ok(aIds.has(r.id), `${label}: ${r.id} is A's`)
        assert.ok(!r.resource || !bResources.has(r.resource), `${label}: B's resource ${r.resource}`)
        assert.ok(!bActors.has(r.actor), `${label}: B's actor ${r.actor}`)
      }
    }

    check((await auditPages(a.key, { limit: '2' })).flat(), 'unfiltered, pages of 2')

    const queries: Record<string, string>[] = [
      { action: 'apikeys.create', limit: '3' },
      { action: 'apikeys.revoke' },
      { action: 'tenants.create' },
      { action: 'authorization.denied' },
      { outcome: 'success', limit: '1' },
      { outcome: 'denied' },
      {
        from: new Date(Date.now() - 3_600_000).toISOString(),
        to: new Date(Date.now() + 60_000).toISOString(),
      },
      { limit: '500' },
    ]
    for (const query of queries) check((await auditPages(a.key, query)).flat(), JSON.stringify(query))

    // Asking for B's resources by name gives nothing.
    for (const resource of bResources) {
      const pages = await auditPages(a.key, { resource })
      assert.deepEqual(pages.flat(), [], `resource ${resource}`)
    }
    // And B sees its own: the filter works, so the empty answers above are isolation, not a broken filter.
    const bOwn = (await auditPages(b.key, { resource: `apikey:${created.b[0]!.id}` })).flat()
    assert.deepEqual(bOwn.map((r) => r.action).sort(), ['apikeys.create', 'apikeys.revoke'])

    // A cursor taken from B's listing does not open B's records to A.
    const bFirst = await svc.request('GET', '/api/v1/audit?limit=1', { key: b.key })
    const maxB = String(Math.max(...[...bIds].map(Number)) + 1)
    for (const cursor of [bFirst.body.nextCursor as string, maxB]) {
      const res = await svc.request('GET', `/api/v1/audit?cursor=${cursor}&limit=500`, { key: a.key })
      assert.equal(res.status, 200)
      check(res.body.data, `cursor ${cursor}`)
    }

    // B's listing symmetrically holds none of A's.
    for (const r of (await auditPages(b.key, { limit: '500' })).flat()) assert.ok(!aIds.has(r.id))
  })

  test('each tenant’s audit listing, paged or not, is exactly its own records', async () => {
    for (const t of [a, b]) {
      const inDb = await auditIdsInDb(t.tenantId)
      for (const limit of ['500', '2']) {
        const listed = (await auditPages(t.key, { limit })).flat().map((r) => r.id)
        assert.equal(new Set(listed).size, listed.length, `limit ${limit}: no duplicates`)
        assert.deepEqual(
          [...listed].sort((x, y) => Number(y) - Number(x)),
          [...inDb].sort((x, y) => Number(y) - Number(x)),
          `limit ${limit}: every record of the tenant, and only those (listed order: ${listed.join(',')})`,
        )
      }
    }
  })
})
