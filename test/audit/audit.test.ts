import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { after, before, describe, test } from 'node:test'
import postgres from 'postgres'
import type { AuditEntry, AuditRow } from '../../src/audit/audit-store.ts'
import { AppError } from '../../src/platform/errors.ts'
import { startTestService, type TenantWithKey, type TestService } from '../helpers/service.ts'

/**
 * The audit trail: one record per state change, with who, what, when, from where and which
 * request; never a secret; durable before the operation answers (no record, no operation);
 * group commit; and the tenant's listing with its filters and cursor pagination.
 */

interface AuditView {
  id: string
  occurredAt: string
  actor: string
  action: string
  resource: string | null
  outcome: string
  requestId: string | null
  clientIp: string | null
}

const FAIL_TRIGGER_SQL = [
  `CREATE OR REPLACE FUNCTION test_audit_unavailable() RETURNS trigger LANGUAGE plpgsql AS $$
   BEGIN RAISE EXCEPTION 'audit storage unavailable (test trigger)'; END $$`,
  `CREATE TRIGGER test_audit_unavailable BEFORE INSERT ON audit_log
   FOR EACH STATEMENT EXECUTE FUNCTION test_audit_unavailable()`,
]

async function withFailingAudit<T>(svc: TestService, run: () => Promise<T>): Promise<T> {
  for (const statement of FAIL_TRIGGER_SQL) await svc.sql.unsafe(statement)
  try {
    return await run()
  } finally {
    await svc.sql.unsafe('DROP TRIGGER IF EXISTS test_audit_unavailable ON audit_log')
  }
}

const LOOPBACK = /^(::ffff:)?127\.0\.0\.1$|^::1$/

async function recordsAfter(svc: TestService, tenantId: string, afterId: string): Promise<AuditRow[]> {
  return svc.sql<AuditRow[]>`
    SELECT id::text AS id, tenant_id, occurred_at, actor, action, resource, key_version, outcome,
           request_id, client_ip, details
    FROM audit_log WHERE tenant_id = ${tenantId} AND id > ${afterId} ORDER BY audit_log.id`
}

async function lastId(svc: TestService): Promise<string> {
  const [row] = await svc.sql<{ id: string }[]>`SELECT coalesce(max(id), 0)::text AS id FROM audit_log`
  return row!.id
}

async function countApiKeys(svc: TestService, tenantId: string): Promise<number> {
  const [row] = await svc.sql<
    { n: number }[]
  >`SELECT count(*)::int AS n FROM api_keys WHERE tenant_id = ${tenantId}`
  return row!.n
}

describe('audit log', () => {
  let svc: TestService
  let owner: TenantWithKey
  /** Every API key string this file has seen, to look for in the audit table. */
  const secrets: string[] = []

  async function createKey(by: TenantWithKey, name: string, headers: Record<string, string> = {}) {
    const res = await svc.request('POST', '/api/v1/api-keys', {
      key: by.key,
      body: { name, scopes: ['audit:read'] },
      headers,
    })
    if (res.status === 201) secrets.push(res.body.key)
    return res
  }

  before(async () => {
    svc = await startTestService()
    owner = await svc.createTenant()
    secrets.push(owner.key)
  })
  after(async () => svc?.stop())

  test('a record the database refuses fails alone, not the batch it was written with', async () => {
    const audit = svc.api.services.audit
    const good = (n: number): AuditEntry => ({
      tenantId: owner.tenantId,
      actor: 'test',
      action: 'test.batch_isolation',
      resource: `batch:${n}`,
      outcome: 'success',
    })
    // A key version outside PostgreSQL's integer range: the insert of this record must fail.
    const bad: AuditEntry = { ...good(0), resource: 'batch:bad', keyVersion: 2 ** 31 }
    const results = await Promise.allSettled([
      audit.record(good(1)),
      audit.record(bad),
      audit.record(good(2)),
    ])
    assert.deepEqual(
      results.map((r) => r.status),
      ['fulfilled', 'rejected', 'fulfilled'],
    )
    const rejected = results[1] as PromiseRejectedResult
    assert.ok(rejected.reason instanceof AppError && rejected.reason.code === 'audit_unavailable')
    const rows = await svc.sql<{ resource: string }[]>`
      SELECT resource FROM audit_log WHERE action = 'test.batch_isolation' ORDER BY resource`
    assert.deepEqual(
      rows.map((r) => r.resource),
      ['batch:1', 'batch:2'],
    )
  })

  describe('records of state changes', () => {
    test('creating an API key writes exactly one complete record', async () => {
      const from = await lastId(svc)
      const t0 = Date.now()
      const res = await createKey(owner, 'audited')
      const t1 = Date.now()
      assert.equal(res.status, 201, res.text)
      const requestId = res.headers.get('x-request-id')
      assert.ok(requestId, 'the response carries x-request-id')

      const rows = await recordsAfter(svc, owner.tenantId, from)
      assert.equal(rows.length, 1, JSON.stringify(rows))
      const row = rows[0]!
      assert.equal(row.tenant_id, owner.tenantId)
      assert.ok(row.occurred_at.getTime() >= t0 - 1000 && row.occurred_at.getTime() <= t1 + 1000, 'time')
      assert.equal(row.actor, `apikey:${owner.apiKeyId}`)
      assert.equal(row.action, 'apikeys.create')
      assert.equal(row.resource, `apikey:${res.body.id}`)
      assert.equal(row.outcome, 'success')
      assert.equal(row.request_id, requestId)
      assert.match(row.client_ip ?? '', LOOPBACK)

      // The same record through the API.
      const listed = await svc.request('GET', `/api/v1/audit?resource=apikey:${res.body.id}`, {
        key: owner.key,
      })
      assert.equal(listed.status, 200)
      assert.equal(listed.body.data.length, 1)
      const view = listed.body.data[0] as AuditView
      assert.equal(view.id, row.id)
      assert.equal(view.occurredAt, row.occurred_at.toISOString())
      assert.equal(view.actor, row.actor)
      assert.equal(view.action, 'apikeys.create')
      assert.equal(view.outcome, 'success')
      assert.equal(view.requestId, requestId)
      assert.equal(view.clientIp, row.client_ip)
    })

    test('a caller’s X-Request-Id is kept and recorded', async () => {
      const requestId = `audit-test-${randomUUID()}`
      const from = await lastId(svc)
      const res = await createKey(owner, 'traced', { 'x-request-id': requestId })
      assert.equal(res.status, 201)
      assert.equal(res.headers.get('x-request-id'), requestId)
      const rows = await recordsAfter(svc, owner.tenantId, from)
      assert.equal(rows.length, 1)
      assert.equal(rows[0]!.request_id, requestId)
    })

    test('revoking writes exactly one record; revoking again writes none', async () => {
      const created = await createKey(owner, 'to-revoke')
      assert.equal(created.status, 201)
      const id = created.body.id as string

      let from = await lastId(svc)
      const revoked = await svc.request('POST', `/api/v1/api-keys/${id}/revoke`, { key: owner.key })
      assert.equal(revoked.status, 200, revoked.text)
      const rows = await recordsAfter(svc, owner.tenantId, from)
      assert.equal(rows.length, 1, JSON.stringify(rows))
      const row = rows[0]!
      assert.equal(row.tenant_id, owner.tenantId)
      assert.equal(row.actor, `apikey:${owner.apiKeyId}`)
      assert.equal(row.action, 'apikeys.revoke')
      assert.equal(row.resource, `apikey:${id}`)
      assert.equal(row.outcome, 'success')
      assert.equal(row.request_id, revoked.headers.get('x-request-id'))
      assert.match(row.client_ip ?? '', LOOPBACK)

      from = await lastId(svc)
      const again = await svc.request('POST', `/api/v1/api-keys/${id}/revoke`, { key: owner.key })
      assert.equal(again.status, 200)
      assert.equal(again.body.revokedAt, revoked.body.revokedAt, 'the first revocation stands')
      assert.equal((await recordsAfter(svc, owner.tenantId, from)).length, 0)
      const all =
        await svc.sql`SELECT 1 FROM audit_log WHERE action = 'apikeys.revoke' AND resource = ${`apikey:${id}`}`
      assert.equal(all.length, 1)
    })

    test('the actor is the calling key, not the tenant’s first key', async () => {
      const second = await svc.request('POST', '/api/v1/api-keys', {
        key: owner.key,
        body: { name: 'delegate', scopes: ['apikeys:write', 'audit:read'] },
      })
      assert.equal(second.status, 201)
      secrets.push(second.body.key)
      const from = await lastId(svc)
      const made = await svc.request('POST', '/api/v1/api-keys', {
        key: second.body.key,
        body: { name: 'by-delegate', scopes: ['audit:read'] },
      })
      assert.equal(made.status, 201)
      secrets.push(made.body.key)
      const rows = await recordsAfter(svc, owner.tenantId, from)
      assert.equal(rows.length, 1)
      assert.equal(rows[0]!.actor, `apikey:${second.body.id}`)
      assert.equal(rows[0]!.resource, `apikey:${made.body.id}`)
    })

    test('a refused scope escalation (403) is recorded as denied', async () => {
      const narrow = await svc.request('POST', '/api/v1/api-keys', {
        key: owner.key,
        body: { name: 'narrow-writer', scopes: ['apikeys:write'] },
      })
      assert.equal(narrow.status, 201)
      secrets.push(narrow.body.key)
      const requestId = `escalation-${randomUUID()}`
      const res = await svc.request('POST', '/api/v1/api-keys', {
        key: narrow.body.key,
        body: { name: 'escalated', scopes: ['keys:write'] },
        headers: { 'x-request-id': requestId },
      })
      assert.equal(res.status, 403)
      assert.equal(res.body.error, 'scope_escalation')
      const rows = await svc.sql<AuditRow[]>`SELECT * FROM audit_log WHERE request_id = ${requestId}`
      assert.equal(rows.length, 1, 'a refused write attempt leaves one record')
      assert.equal(rows[0]!.outcome, 'denied')
      assert.equal(rows[0]!.actor, `apikey:${narrow.body.id}`)
    })
  })

  describe('no record, no operation', () => {
    test('creating an API key fails with 503 audit_unavailable and creates nothing', async () => {
      const before = await countApiKeys(svc, owner.tenantId)
      const res = await withFailingAudit(svc, () => createKey(owner, 'unaudited'))
      assert.equal(res.status, 503, res.text)
      assert.equal(res.body.error, 'audit_unavailable')
      assert.equal(res.body.key, undefined)
      assert.equal(await countApiKeys(svc, owner.tenantId), before, 'all or nothing')
      const named = await svc.sql`SELECT 1 FROM api_keys WHERE name = 'unaudited'`
      assert.equal(named.length, 0)

      // Healthy again once the audit log is.
      const ok = await createKey(owner, 'audited-again')
      assert.equal(ok.status, 201, ok.text)
      assert.equal(await countApiKeys(svc, owner.tenantId), before + 1)
      assert.equal((await svc.request('GET', '/api/v1/tenant', { key: ok.body.key })).status, 200)
    })

    test('revoking an API key fails with 503 and the key keeps working', async () => {
      const victim = await createKey(owner, 'unrevokable-while-audit-down')
      assert.equal(victim.status, 201)
      const res = await withFailingAudit(svc, () =>
        svc.request('POST', `/api/v1/api-keys/${victim.body.id}/revoke`, { key: owner.key }),
      )
      assert.equal(res.status, 503, res.text)
      assert.equal(res.body.error, 'audit_unavailable')
      const [row] = await svc.sql<{ revoked_at: Date | null }[]>`
        SELECT revoked_at FROM api_keys WHERE id = ${victim.body.id}`
      assert.equal(row!.revoked_at, null)
      assert.equal((await svc.request('GET', '/api/v1/audit?limit=1', { key: victim.body.key })).status, 200)
      // And the revocation succeeds once the audit log is back.
      const revoked = await svc.request('POST', `/api/v1/api-keys/${victim.body.id}/revoke`, {
        key: owner.key,
      })
      assert.equal(revoked.status, 200)
      assert.equal((await svc.request('GET', '/api/v1/audit?limit=1', { key: victim.body.key })).status, 401)
    })
  })

  describe('group commit (AuditLog.record)', () => {
    test('500 concurrent records all resolve, all are stored, in few transactions', async () => {
      const tenantId = randomUUID()
      const action = 'test.group_commit'
      const entries: AuditEntry[] = Array.from({ length: 500 }, (_, i) => ({
        tenantId,
        actor: 'system',
        action,
        resource: `item:${i}`,
        outcome: 'success',
        details: { i },
      }))
      const results = await Promise.allSettled(entries.map((e) => svc.api.services.audit.record(e)))
      assert.deepEqual(
        results.filter((r) => r.status === 'rejected'),
        [],
      )
      const [stats] = await svc.sql<{ n: number; resources: number; transactions: number }[]>`
        SELECT count(*)::int AS n, count(DISTINCT resource)::int AS resources,
               count(DISTINCT xmin::text)::int AS transactions
        FROM audit_log WHERE tenant_id = ${tenantId} AND action = ${action}`
      assert.equal(stats!.n, 500)
      assert.equal(stats!.resources, 500, 'each record exactly once')
      assert.ok(
        stats!.transactions <= 10,
        `group commit: ${stats!.transactions} transactions for 500 records`,
      )
    })

    test('when the audit table refuses writes, record() rejects with audit_unavailable', async () => {
      const tenantId = randomUUID()
      const results = await withFailingAudit(svc, () =>
        Promise.allSettled(
          Array.from({ length: 50 }, (_, i) =>
            svc.api.services.audit.record({
              tenantId,
              actor: 'system',
              action: 'test.refused',
              resource: `item:${i}`,
              outcome: 'success',
            }),
          ),
        ),
      )
      assert.equal(results.length, 50)
      for (const r of results) {
        assert.equal(r.status, 'rejected')
        const reason = (r as PromiseRejectedResult).reason
        assert.ok(reason instanceof AppError)
        assert.equal(reason.code, 'audit_unavailable')
        assert.equal(reason.statusCode, 503)
      }
      const rows = await svc.sql`SELECT 1 FROM audit_log WHERE tenant_id = ${tenantId}`
      assert.equal(rows.length, 0)
      // The writer recovers.
      await svc.api.services.audit.record({
        tenantId,
        actor: 'system',
        action: 'test.recovered',
        outcome: 'success',
      })
      const [row] = await svc.sql<
        { n: number }[]
      >`SELECT count(*)::int AS n FROM audit_log WHERE tenant_id = ${tenantId}`
      assert.equal(row!.n, 1)
    })
  })

  describe('GET /api/v1/audit', () => {
    let lister: TenantWithKey
    /** Ids of the lister tenant's apikeys.create records, newest first. */
    let createIds: string[]
    let revokedKeyId: string
    let deniedRequestId: string

    const list = async (query: string, key = lister.key) => {
      const res = await svc.request('GET', `/api/v1/audit${query ? `?${query}` : ''}`, { key })
      assert.equal(res.status, 200, `${query}: ${res.text}`)
      return res.body as { data: AuditView[]; nextCursor: string | null }
    }

    before(async () => {
      // Let this tenant's record ids cross a power of ten (…99 -> …100), as any long-lived
      // deployment's do: ordering and cursors must compare ids as numbers.
      const [max] = await svc.sql<{ id: string }[]>`SELECT coalesce(max(id), 0)::text AS id FROM audit_log`
      let boundary = 10n ** BigInt(max!.id.length)
      if (boundary - BigInt(max!.id) < 20n) boundary *= 10n
      await svc.sql`SELECT setval(pg_get_serial_sequence('audit_log', 'id'), ${String(boundary - 12n)}::bigint)`
      lister = await svc.createTenant()
      secrets.push(lister.key)
      // The initial key's creation is one apikeys.create record; 24 more make 25.
      for (let i = 0; i < 24; i++) {
        const res = await createKey(lister, `page-${i}`)
        assert.equal(res.status, 201)
        if (i === 3) revokedKeyId = res.body.id
      }
      assert.equal(
        (await svc.request('POST', `/api/v1/api-keys/${revokedKeyId}/revoke`, { key: lister.key })).status,
        200,
      )
      const reader = await createKey(lister, 'reader')
      assert.equal(reader.status, 201)
      deniedRequestId = `denied-${randomUUID()}`
      const denied = await svc.request('POST', `/api/v1/api-keys/${revokedKeyId}/revoke`, {
        key: reader.body.key,
        headers: { 'x-request-id': deniedRequestId },
      })
      assert.equal(denied.status, 403)
      const rows = await svc.sql<{ id: string }[]>`
        SELECT id::text AS id FROM audit_log
        WHERE tenant_id = ${lister.tenantId} AND action = 'apikeys.create'
          AND resource <> ${`apikey:${reader.body.id}`}
        ORDER BY audit_log.id DESC`
      createIds = rows.map((r) => r.id)
      assert.equal(createIds.length, 25)
    })

    test('cursor pagination: 25 records with limit 10 make 3 pages, newest first, no duplicates', async () => {
      // Start just above the newest of the 25 so the reader key's record is not part of the set.
      const start = String(BigInt(createIds[0]!) + 1n)
      const pages: AuditView[][] = []
      let cursor: string | null = start
      while (cursor !== null) {
        const page = await list(`action=apikeys.create&limit=10&cursor=${cursor}`)
        pages.push(page.data)
        cursor = page.nextCursor
        assert.ok(pages.length <= 5, 'pagination ends')
      }
      assert.deepEqual(
        pages.map((p) => p.length),
        [10, 10, 5],
      )
      const ids = pages.flat().map((r) => r.id)
      assert.equal(new Set(ids).size, 25, 'no duplicates')
      assert.deepEqual(ids, createIds, 'every record, newest first')
      const flat = pages.flat()
      for (let i = 1; i < flat.length; i++) {
        assert.ok(BigInt(flat[i - 1]!.id) > BigInt(flat[i]!.id), 'ids decrease')
        assert.ok(flat[i - 1]!.occurredAt >= flat[i]!.occurredAt, 'time does not increase')
      }
    })

    test('the first page starts with the newest record', async () => {
      const [newest] = await svc.sql<{ id: string }[]>`
        SELECT max(id)::text AS id FROM audit_log WHERE tenant_id = ${lister.tenantId}`
      const page = await list('limit=3')
      assert.equal(page.data[0]?.id, newest!.id)
      const unfiltered: string[] = []
      let cursor: string | null = null
      do {
        const p = await list(`limit=7${cursor ? `&cursor=${cursor}` : ''}`)
        unfiltered.push(...p.data.map((r) => r.id))
        cursor = p.nextCursor
      } while (cursor)
      const inDb = await svc.sql<{ id: string }[]>`
        SELECT id::text AS id FROM audit_log WHERE tenant_id = ${lister.tenantId} ORDER BY audit_log.id DESC`
      assert.deepEqual(
        unfiltered,
        inDb.map((r) => r.id),
      )
    })

    test('filter by action', async () => {
      const revokes = await list('action=apikeys.revoke')
      assert.equal(revokes.data.length, 1)
      assert.equal(revokes.data[0]!.resource, `apikey:${revokedKeyId}`)
      const tenants = await list('action=tenants.create')
      assert.deepEqual(
        tenants.data.map((r) => r.resource),
        [`tenant:${lister.tenantId}`],
      )
      assert.deepEqual((await list('action=no.such.action')).data, [])
      for (const r of (await list('action=apikeys.create&limit=500')).data)
        assert.equal(r.action, 'apikeys.create')
    })

    test('filter by resource', async () => {
      const page = await list(`resource=apikey:${revokedKeyId}`)
      assert.deepEqual(
        page.data.map((r) => r.action),
        ['apikeys.revoke', 'apikeys.create'],
      )
      assert.deepEqual((await list(`resource=apikey:${randomUUID()}`)).data, [])
    })

    test('filter by outcome', async () => {
      const denied = await list('outcome=denied')
      assert.equal(denied.data.length, 1)
      assert.equal(denied.data[0]!.requestId, deniedRequestId)
      assert.equal(denied.data[0]!.action, 'authorization.denied')
      const success = await list('outcome=success&limit=500')
      assert.ok(success.data.length >= 27)
      for (const r of success.data) assert.equal(r.outcome, 'success')
      assert.deepEqual((await list('outcome=failure')).data, [])
      assert.deepEqual((await list('outcome=denied&action=apikeys.create')).data, [])
    })

    test('filter by time: from is inclusive, to is exclusive', async () => {
      const timed = await svc.createTenant()
      const base = Date.parse('2021-03-04T05:06:00.000Z')
      const at = (minutes: number) => new Date(base + minutes * 60_000).toISOString()
      for (let i = 0; i < 10; i++) {
        await svc.api.services.audit.record({
          tenantId: timed.tenantId,
          actor: 'system',
          action: 'test.timed',
          resource: `minute:${i}`,
          outcome: 'success',
          occurredAt: new Date(base + i * 60_000),
        })
      }
      const resources = async (query: string) =>
        (await list(`action=test.timed&${query}`, timed.key)).data.map((r) => r.resource)

      assert.deepEqual(await resources(`from=${at(3)}&to=${at(7)}`), [
        'minute:6',
        'minute:5',
        'minute:4',
        'minute:3',
      ])
      assert.deepEqual(await resources(`from=${at(8)}`), ['minute:9', 'minute:8'])
      assert.deepEqual(await resources(`to=${at(2)}`), ['minute:1', 'minute:0'])
      assert.deepEqual(await resources(`from=${at(5)}&to=${at(5)}`), [])
      // The same instant written with an offset.
      const plusTwo = new Date(base + 3 * 60_000 + 2 * 3_600_000).toISOString().replace('Z', '+02:00')
      assert.deepEqual(await resources(`from=${encodeURIComponent(plusTwo)}&to=${at(4)}`), ['minute:3'])
      // The tenant's real records are "now": outside the window.
      assert.equal((await list(`from=${at(0)}&to=${at(10)}`, timed.key)).data.length, 10)
      assert.ok(
        (await list(`from=${new Date(Date.now() - 600_000).toISOString()}`, timed.key)).data.length >= 2,
      )
      // Time filter with pagination.
      const first = await list(`from=${at(2)}&to=${at(9)}&limit=4`, timed.key)
      assert.equal(first.data.length, 4)
      assert.ok(first.nextCursor)
      const second = await list(`from=${at(2)}&to=${at(9)}&limit=4&cursor=${first.nextCursor}`, timed.key)
      assert.deepEqual(
        [...first.data, ...second.data].map((r) => r.resource),
        ['minute:8', 'minute:7', 'minute:6', 'minute:5', 'minute:4', 'minute:3', 'minute:2'],
      )
      assert.equal(second.nextCursor, null)
    })

    test('invalid filters give 400', async () => {
      const invalid = [
        'outcome=bogus',
        'limit=0',
        'limit=501',
        'limit=-1',
        'limit=ten',
        'limit=1.5',
        'cursor=abc',
        'cursor=-1',
        'cursor=12345678901234567890',
        'cursor=9999999999999999999',
        'from=yesterday',
        'to=2021-13-01T00:00:00Z',
        'from=2021-03-04',
        `from=${new Date(Date.now()).toISOString()}&to=${new Date(Date.now() - 60_000).toISOString()}`,
        'action=',
        'resource=',
        `resource=${'x'.repeat(301)}`,
        'unknown=1',
        'tenantId=00000000-0000-0000-0000-000000000000',
      ]
      for (const query of invalid) {
        const res = await svc.request('GET', `/api/v1/audit?${query}`, { key: lister.key })
        assert.equal(res.status, 400, `${query}: ${res.status} ${res.text}`)
        assert.equal(res.body.error, 'validation_failed', query)
      }
    })
  })

  test('no record ever contains a secret', async () => {
    // More keys, including tenants created by the service itself.
    for (let i = 0; i < 3; i++) {
      const t = await svc.createTenant()
      secrets.push(t.key)
      const res = await createKey(t, `secretive-${i}`)
      assert.equal(res.status, 201)
    }
    assert.ok(secrets.length >= 10)
    const dump = (await svc.sql<{ j: string }[]>`SELECT row_to_json(a)::text AS j FROM audit_log a`).map(
      (r) => r.j,
    )
    assert.ok(dump.length >= 20, 'there is something to look at')
    const text = dump.join('\n')
    for (const key of secrets) {
      const body = key.slice('kms_'.length)
      assert.ok(!text.includes(body), 'an API key body appears in the audit log')
      // Nor the part after the lookup id, which is the secret proper.
      assert.ok(!text.includes(body.slice(12)), 'the secret part of an API key appears in the audit log')
    }
    const masterKey = svc.config.masterKey
    assert.ok(masterKey && !text.includes(masterKey), 'the master key appears in the audit log')
  })
})

describe('audit log: write timeout', () => {
  let svc: TestService
  let locker: postgres.Sql

  before(async () => {
    svc = await startTestService({ KMS_AUDIT_WRITE_TIMEOUT_MS: '1000' })
    locker = postgres(svc.db.url, { max: 1, onnotice: () => {} })
  })
  after(async () => {
    await locker?.end({ timeout: 5 })
    await svc?.stop()
  })

  test('with audit_log locked, creating an API key fails with 503 in bounded time and creates nothing', async () => {
    const owner = await svc.createTenant()
    // Warm the key cache so only the audit write can be slow.
    assert.equal((await svc.request('GET', '/api/v1/tenant', { key: owner.key })).status, 200)
    const before = await countApiKeys(svc, owner.tenantId)

    let release!: () => void
    const released = new Promise<void>((resolve) => {
      release = resolve
    })
    let locked!: () => void
    const isLocked = new Promise<void>((resolve) => {
      locked = resolve
    })
    const holding = locker.begin(async (tx) => {
      await tx`LOCK TABLE audit_log IN ACCESS EXCLUSIVE MODE`
      locked()
      await released
    })
    try {
      await isLocked
      // The lock is held until `finally`: any answer before then shows the write timeout, not
      // the lock's release, ended the wait (without the bound these calls would hang the test).
      const res = await svc.request('POST', '/api/v1/api-keys', {
        key: owner.key,
        body: { name: 'blocked', scopes: ['audit:read'] },
      })
      assert.equal(res.status, 503, res.text)
      assert.equal(res.body.error, 'audit_unavailable')

      // The group-commit path is bounded too.
      const recorded = await svc.api.services.audit
        .record({ tenantId: owner.tenantId, actor: 'system', action: 'test.locked', outcome: 'success' })
        .then(
          () => undefined,
          (err: unknown) => err,
        )
      assert.ok(recorded instanceof AppError, 'record() rejects while the table is locked')
      assert.equal(recorded.code, 'audit_unavailable')
    } finally {
      release()
      await holding
    }

    assert.equal(await countApiKeys(svc, owner.tenantId), before, 'nothing was created')
    const blocked = await svc.sql`SELECT 1 FROM api_keys WHERE name = 'blocked'`
    assert.equal(blocked.length, 0)
    const locked2 = await svc.sql`SELECT 1 FROM audit_log WHERE action = 'test.locked'`
    assert.equal(locked2.length, 0)

    const ok = await svc.request('POST', '/api/v1/api-keys', {
      key: owner.key,
      body: { name: 'unblocked', scopes: ['audit:read'] },
    })
    assert.equal(ok.status, 201, ok.text)
    assert.equal(await countApiKeys(svc, owner.tenantId), before + 1)
  })
})
