import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { after, before, describe, test } from 'node:test'
import { dereference } from '@readme/openapi-parser'
import type { Scope } from '../../src/auth/scopes.ts'
import type { KeyView } from '../../src/keys/key-service.ts'
import { manualClock } from '../helpers/manual-clock.ts'
import {
  type HttpResult,
  startTestService,
  type TenantWithKey,
  type TestService,
} from '../helpers/service.ts'

/**
 * The key list (docs/keys.md "The list"), the default key rule under concurrent requests, the
 * name uniqueness race, tenant isolation on every per-key route and the keys:read/keys:write split.
 * One service with a manual clock: expiry and destruction happen by moving time, not by waiting.
 */

const API = '/api/v1'
const DAY_MS = 24 * 60 * 60 * 1000
const clock = manualClock()
let svc: TestService

before(async () => {
  svc = await startTestService({}, { clock })
})
after(async () => {
  await svc?.stop()
})

type Pairs = [string, string][]

const range = (n: number) => Array.from({ length: n }, (_, i) => i)
const qs = (pairs: Pairs) => new URLSearchParams(pairs).toString()
const b64 = (text: string) => Buffer.from(text).toString('base64url')
const futureIso = (days: number) => new Date(clock.now().getTime() + days * DAY_MS).toISOString()

function expectError(res: HttpResult, status: number, code: string, what = ''): void {
  assert.equal(res.status, status, `${what} ${res.status} ${res.text}`)
  assert.equal(res.body?.error, code, `${what} ${res.text}`)
}

async function createKey(t: TenantWithKey, body: Record<string, unknown>): Promise<KeyView> {
  const res = await svc.request('POST', `${API}/keys`, { key: t.key, body })
  assert.equal(res.status, 201, res.text)
  return res.body as KeyView
}

async function getKey(t: TenantWithKey, id: string): Promise<KeyView> {
  const res = await svc.request('GET', `${API}/keys/${id}`, { key: t.key })
  assert.equal(res.status, 200, res.text)
  return res.body as KeyView
}

async function mustSucceed(t: TenantWithKey, method: string, path: string, body?: unknown): Promise<KeyView> {
  const res = await svc.request(method, `${API}${path}`, { key: t.key, ...(body ? { body } : {}) })
  assert.equal(res.status, 200, `${method} ${path}: ${res.text}`)
  return res.body as KeyView
}

async function listKeys(t: TenantWithKey, query: string | Pairs): Promise<HttpResult> {
  const search = typeof query === 'string' ? query : qs(query)
  return svc.request('GET', `${API}/keys${search ? `?${search}` : ''}`, { key: t.key })
}

async function listAll(t: TenantWithKey, pairs: Pairs = []): Promise<KeyView[]> {
  const res = await listKeys(t, [...pairs, ['limit', '1000']])
  assert.equal(res.status, 200, res.text)
  assert.equal(res.body.nextCursor, null)
  return res.body.data as KeyView[]
}

async function defaultsInDb(tenantId: string, keyType: string): Promise<string[]> {
  const rows = await svc.sql<{ id: string }[]>`
    SELECT id::text AS id FROM keys WHERE tenant_id = ${tenantId} AND key_type = ${keyType} AND is_default`
  return rows.map((r) => r.id)
}

/** The key whose success record of `action` came last: audit ids follow commit order under the lock. */
async function lastAudited(tenantId: string, action: string, ids: string[]): Promise<string> {
  const [row] = await svc.sql<{ resource: string }[]>`
    SELECT resource FROM audit_log
    WHERE tenant_id = ${tenantId} AND action = ${action} AND outcome = 'success'
      AND resource = ANY(${svc.sql.array(ids.map((id) => `key:${id}`))}::text[])
    ORDER BY id DESC LIMIT 1`
  assert.ok(row, `an audit record of ${action}`)
  return row.resource.slice('key:'.length)
}

// ---------------------------------------------------------------------------------------------
// 1. Concurrency: the name race and the default key rule
// ---------------------------------------------------------------------------------------------

describe('concurrent requests', () => {
  test('20 parallel creates with the same name: one 201, nineteen 409 key_name_taken, one row', async () => {
    const t = await svc.createTenant()
    const name = 'contended-name'
    const results = await Promise.all(
      range(20).map((i) =>
        svc.request('POST', `${API}/keys`, {
          key: t.key,
          body: { name, keyType: 'Signing', algorithm: 'Ed25519', description: `attempt ${i}` },
        }),
      ),
    )
    const statuses = results.map((r) => r.status).join(',')
    const created = results.filter((r) => r.status === 201)
    const refused = results.filter((r) => r.status === 409)
    assert.equal(created.length, 1, statuses)
    assert.equal(refused.length, 19, statuses)
    for (const r of refused) expectError(r, 409, 'key_name_taken')
    const winner = created[0]!.body as KeyView
    assert.equal(winner.name, name)

    const rows = await svc.sql<{ id: string }[]>`
      SELECT id::text AS id FROM keys WHERE tenant_id = ${t.tenantId} AND name = ${name}`
    assert.deepEqual(
      rows.map((r) => r.id),
      [winner.id],
    )
    // Nothing of the losers was left behind: one key, one version, one create record.
    const [counts] = await svc.sql<{ keys: number; versions: number; creates: number }[]>`
      SELECT (SELECT count(*)::int FROM keys WHERE tenant_id = ${t.tenantId}) AS keys,
             (SELECT count(*)::int FROM key_versions WHERE tenant_id = ${t.tenantId}) AS versions,
             (SELECT count(*)::int FROM audit_log
               WHERE tenant_id = ${t.tenantId} AND action = 'keys.create' AND outcome = 'success') AS creates`
    assert.deepEqual(counts, { keys: 1, versions: 1, creates: 1 })
    const listed = await listAll(t)
    assert.deepEqual(
      listed.map((k) => k.id),
      [winner.id],
    )
  })

  test('20 parallel PATCH isDefault:true of one type all succeed and leave exactly one default', async () => {
    const t = await svc.createTenant()
    const signing = await Promise.all(
      range(20).map((i) => createKey(t, { name: `sig-${i}`, keyType: 'Signing', algorithm: 'Ed25519' })),
    )
    const encDefault = await createKey(t, {
      name: 'enc-default',
      keyType: 'Encryption',
      algorithm: 'ML-KEM-768',
      isDefault: true,
    })
    const encOther = await createKey(t, { name: 'enc-other', keyType: 'Encryption', algorithm: 'ML-KEM-768' })
    const macDefault = await createKey(t, {
      name: 'mac-default',
      keyType: 'HMAC',
      algorithm: 'HMAC-SHA256',
      isDefault: true,
    })
    assert.equal(encDefault.isDefault, true)
    assert.equal(macDefault.isDefault, true)
    // A later updatedAt would show that a key of another type was touched.
    clock.advance(1000)

    const results = await Promise.all(
      signing.map((k) =>
        svc.request('PATCH', `${API}/keys/${k.id}`, { key: t.key, body: { isDefault: true } }),
      ),
    )
    for (const r of results) {
      assert.equal(r.status, 200, r.text)
      assert.equal(r.body.isDefault, true)
    }

    const listedSigning = await listAll(t, [['keyType', 'Signing']])
    assert.equal(listedSigning.length, 20)
    const listedDefaults = listedSigning.filter((k) => k.isDefault)
    assert.equal(listedDefaults.length, 1, 'exactly one Signing default in the list')
    const inDb = await defaultsInDb(t.tenantId, 'Signing')
    assert.deepEqual(inDb, [listedDefaults[0]!.id], 'exactly one Signing default in the database')
    // The default is the key whose request took the default slot last.
    assert.equal(
      await lastAudited(
        t.tenantId,
        'keys.update',
        signing.map((k) => k.id),
      ),
      inDb[0],
    )
    for (const k of signing) {
      assert.equal((await getKey(t, k.id)).isDefault, k.id === inDb[0], `GET ${k.name}`)
    }

    // Other key types keep their own default, untouched.
    assert.deepEqual(await getKey(t, encDefault.id), encDefault)
    assert.deepEqual(await getKey(t, macDefault.id), macDefault)
    assert.deepEqual(await getKey(t, encOther.id), encOther)
    assert.deepEqual(await defaultsInDb(t.tenantId, 'Encryption'), [encDefault.id])
    assert.deepEqual(await defaultsInDb(t.tenantId, 'HMAC'), [macDefault.id])
  })

  test('20 parallel creates with isDefault:true of one type: all 201, exactly one default', async () => {
    const t = await svc.createTenant()
    const old = await createKey(t, {
      name: 'mac-old',
      keyType: 'HMAC',
      algorithm: 'HMAC-SHA256',
      isDefault: true,
    })
    const signingDefault = await createKey(t, {
      name: 'sig-default',
      keyType: 'Signing',
      algorithm: 'ML-DSA-44',
      isDefault: true,
    })
    const results = await Promise.all(
      range(20).map((i) =>
        svc.request('POST', `${API}/keys`, {
          key: t.key,
          body: { name: `mac-${i}`, keyType: 'HMAC', algorithm: 'HMAC-SHA256', isDefault: true },
        }),
      ),
    )
    for (const r of results) {
      assert.equal(r.status, 201, r.text)
      assert.equal(r.body.isDefault, true)
    }
    const ids = results.map((r) => r.body.id as string)
    const inDb = await defaultsInDb(t.tenantId, 'HMAC')
    assert.equal(inDb.length, 1, 'exactly one HMAC default in the database')
    assert.ok(ids.includes(inDb[0]!), 'the default is one of the new keys')
    assert.equal(await lastAudited(t.tenantId, 'keys.create', ids), inDb[0])
    const listed = (await listAll(t, [['keyType', 'HMAC']])).filter((k) => k.isDefault)
    assert.deepEqual(
      listed.map((k) => k.id),
      inDb,
    )
    assert.equal((await getKey(t, old.id)).isDefault, false, 'the previous default was cleared')
    assert.equal((await getKey(t, signingDefault.id)).isDefault, true, 'the Signing default is untouched')
    assert.deepEqual(await defaultsInDb(t.tenantId, 'Signing'), [signingDefault.id])
  })

  test('a new default clears the old one; isDefault:false on the default leaves none', async () => {
    const t = await svc.createTenant()
    const first = await createKey(t, {
      name: 'first',
      keyType: 'Signing',
      algorithm: 'EC-P256',
      isDefault: true,
    })
    const second = await createKey(t, { name: 'second', keyType: 'Signing', algorithm: 'Ed25519' })
    const enc = await createKey(t, {
      name: 'enc',
      keyType: 'Encryption',
      algorithm: 'ML-KEM-768',
      isDefault: true,
    })
    assert.equal(first.isDefault, true)
    assert.equal(second.isDefault, false)

    const made = await mustSucceed(t, 'PATCH', `/keys/${second.id}`, { isDefault: true })
    assert.equal(made.isDefault, true)
    assert.equal((await getKey(t, first.id)).isDefault, false, 'the old default is cleared')
    assert.equal((await getKey(t, second.id)).isDefault, true)
    assert.deepEqual(await defaultsInDb(t.tenantId, 'Signing'), [second.id])

    // Making the default the default again changes nothing.
    assert.equal((await mustSucceed(t, 'PATCH', `/keys/${second.id}`, { isDefault: true })).isDefault, true)
    assert.deepEqual(await defaultsInDb(t.tenantId, 'Signing'), [second.id])

    const unset = await mustSucceed(t, 'PATCH', `/keys/${second.id}`, { isDefault: false })
    assert.equal(unset.isDefault, false)
    assert.equal((await getKey(t, second.id)).isDefault, false)
    assert.equal((await getKey(t, first.id)).isDefault, false, 'the old default does not come back')
    assert.deepEqual(await defaultsInDb(t.tenantId, 'Signing'), [])
    assert.equal((await listAll(t, [['keyType', 'Signing']])).filter((k) => k.isDefault).length, 0)
    assert.equal((await getKey(t, enc.id)).isDefault, true, 'the Encryption default is untouched')
  })
})

// ---------------------------------------------------------------------------------------------
// 2. Tenant isolation on every per-key route of the OpenAPI document
// ---------------------------------------------------------------------------------------------

interface JsonSchema {
  type?: string | string[]
  enum?: unknown[]
  anyOf?: JsonSchema[]
  oneOf?: JsonSchema[]
  properties?: Record<string, JsonSchema>
  required?: string[]
  items?: JsonSchema
  minLength?: number
  minimum?: number
  format?: string
  'x-content-encoding'?: string
}

interface OpenApiOperation {
  parameters?: { in: string; name: string; required?: boolean; schema: JsonSchema }[]
  requestBody?: { content: Record<string, { schema: JsonSchema }> }
}

interface Attempt {
  method: string
  template: string
  query: Pairs
  body: Record<string, unknown> | undefined
}

/** A value the schema accepts: the first enum member, a UUID, a future date-time, the minimum, ... */
function sampleValue(schema: JsonSchema): unknown {
  if (schema.enum) return schema.enum[0]
  const alternatives = schema.anyOf ?? schema.oneOf
  if (alternatives) {
    return sampleValue(alternatives.find((s) => s.type !== 'null') ?? alternatives[0]!)
  }
  const type = Array.isArray(schema.type) ? schema.type.find((t) => t !== 'null') : schema.type
  switch (type) {
    case 'string':
      if (schema.format === 'uuid') return randomUUID()
      if (schema.format === 'date-time') return futureIso(365)
      if (schema['x-content-encoding'] === 'base64')
        return 'AAAA'.repeat(Math.max(Math.ceil((schema.minLength ?? 4) / 4), 1))
      return 'x'.repeat(Math.max(schema.minLength ?? 1, 1))
    case 'integer':
    case 'number':
      return schema.minimum ?? 1
    case 'boolean':
      return true
    case 'array':
      return schema.items ? [sampleValue(schema.items)] : []
    default:
      return sampleObject(schema)
  }
}

/** The required properties; with none required, every property (a PATCH changes everything it can). */
function sampleObject(schema: JsonSchema): Record<string, unknown> {
  const properties = schema.properties ?? {}
  const names = schema.required?.length ? schema.required : Object.keys(properties)
  return Object.fromEntries(names.map((name) => [name, sampleValue(properties[name] ?? {})]))
}

function without(body: Record<string, unknown>, names: string[]): Record<string, unknown> {
  return Object.fromEntries(Object.entries(body).filter(([name]) => !names.includes(name)))
}

/** Every operation on a path with {keyId}, one attempt per value of its `format` (query or body). */
function attemptsFrom(doc: { paths: Record<string, Record<string, OpenApiOperation>> }): Attempt[] {
  const attempts: Attempt[] = []
  for (const [template, operations] of Object.entries(doc.paths)) {
    if (!template.includes('{keyId}')) continue
    for (const [method, op] of Object.entries(operations)) {
      if (!['get', 'post', 'put', 'patch', 'delete'].includes(method)) continue
      const queryParams = (op.parameters ?? []).filter((p) => p.in === 'query' && p.required)
      const query: Pairs = queryParams.map((p) => [p.name, String(sampleValue(p.schema))])
      const bodySchema = op.requestBody?.content['application/json']?.schema
      const sampled = bodySchema ? sampleObject(bodySchema) : undefined
      // unwrap takes a wrap answer (wrappedKey) or a data-key answer (encryptedDek), never both.
      const bodies =
        sampled && 'wrappedKey' in sampled && 'encryptedDek' in sampled
          ? [without(sampled, ['encryptedDek', 'keyBytes', 'plaintextDek']), without(sampled, ['wrappedKey'])]
          : [sampled]
      const formats =
        queryParams.find((p) => p.name === 'format')?.schema.enum ?? bodySchema?.properties?.['format']?.enum
      for (const body of bodies) {
        for (const format of formats ?? [undefined]) {
          attempts.push({
            method: method.toUpperCase(),
            template,
            query:
              format === undefined ? query : query.map(([n, v]) => [n, n === 'format' ? String(format) : v]),
            body: body && format !== undefined && 'format' in body ? { ...body, format } : body,
          })
        }
      }
    }
  }
  return attempts
}

describe('tenant isolation of keys', () => {
  let a: TenantWithKey
  let b: TenantWithKey
  let aKeys: KeyView[]

  before(async () => {
    a = await svc.createTenant()
    b = await svc.createTenant()
    const signing = await createKey(a, {
      name: 'shared-name',
      keyType: 'Signing',
      algorithm: 'Ed25519',
      description: 'A signing key of tenant A',
      labels: ['a-only'],
      isDefault: true,
    })
    const mac = await createKey(a, { name: 'a-mac', keyType: 'HMAC', algorithm: 'HMAC-SHA256' })
    const pending = await createKey(a, { name: 'a-pending', keyType: 'Encryption', algorithm: 'ML-KEM-768' })
    const deleted = await svc.request('DELETE', `${API}/keys/${pending.id}`, { key: a.key })
    assert.equal(deleted.status, 200, deleted.text)
    aKeys = [signing, mac, deleted.body as KeyView]
  })

  test('the same key name in two tenants is allowed: both 201', async () => {
    const mine = await createKey(b, { name: 'shared-name', keyType: 'Signing', algorithm: 'Ed25519' })
    assert.notEqual(mine.id, aKeys[0]!.id)
    assert.equal(mine.name, aKeys[0]!.name)
    assert.equal(mine.isDefault, false)
    assert.equal((await getKey(a, aKeys[0]!.id)).name, 'shared-name')
  })

  test('B using A’s key ids: 404 key_not_found on every per-key route, A’s keys unchanged', async () => {
    const doc = await svc.request('GET', `${API}/openapi.json`)
    assert.equal(doc.status, 200)
    // Body schemas are named components ($ref): resolve them to sample valid bodies.
    const attempts = attemptsFrom((await dereference(structuredClone(doc.body))) as never)
    const covered = new Set(attempts.map((x) => `${x.method} ${x.template.replace(API, '')}`))
    for (const route of [
      'GET /keys/{keyId}',
      'PATCH /keys/{keyId}',
      'DELETE /keys/{keyId}',
      'POST /keys/{keyId}/rotate',
      'POST /keys/{keyId}/revoke',
      'POST /keys/{keyId}/cancel-deletion',
      'GET /keys/{keyId}/versions',
      'GET /keys/{keyId}/public',
      'GET /keys/{keyId}/public/download',
      'POST /keys/{keyId}/export-private',
    ]) {
      assert.ok(covered.has(route), `the OpenAPI document lists ${route}`)
    }
    for (const format of ['PEM', 'DER', 'RAW', 'JWK']) {
      for (const path of ['/keys/{keyId}/public', '/keys/{keyId}/public/download']) {
        assert.ok(
          attempts.some(
            (x) => x.template.endsWith(path) && x.query.some(([n, v]) => n === 'format' && v === format),
          ),
          `${path} is tried with format ${format}`,
        )
      }
    }

    const auditBefore = await svc.sql<{ id: string }[]>`
      SELECT id::text AS id FROM audit_log
      WHERE tenant_id = ${a.tenantId} AND resource = ANY(${svc.sql.array(aKeys.map((k) => `key:${k.id}`))}::text[])`
    const versionsBefore = await svc.sql<{ key_id: string; version: number }[]>`
      SELECT key_id::text AS key_id, version FROM key_versions WHERE tenant_id = ${a.tenantId} ORDER BY 1, 2`

    const NOWHERE = randomUUID()
    let tried = 0
    for (const target of aKeys) {
      for (const attempt of attempts) {
        // The confirmation a real export would need, so only the tenant check can refuse it.
        const body =
          attempt.body && 'confirm' in attempt.body ? { ...attempt.body, confirm: target.name } : attempt.body
        const search = attempt.query.length ? `?${qs(attempt.query)}` : ''
        // A body that names its key (an answer passed back, e.g. wrap's to unwrap) names the path's.
        const send = (who: TenantWithKey, id: string) =>
          // Other path parameters (a cloud export's id) are ids that exist nowhere: the key decides first.
          svc.request(
            attempt.method,
            `${attempt.template.replace('{keyId}', id).replace(/\{[A-Za-z]+\}/g, NOWHERE)}${search}`,
            {
              key: who.key,
              ...(body ? { body: 'keyId' in body ? { ...body, keyId: id } : body } : {}),
            },
          )
        const sent = JSON.stringify(body ?? null)
        const what = `${attempt.method} ${attempt.template}${search} ${sent} on ${target.name}`
        const foreign = await send(b, target.id)
        expectError(foreign, 404, 'key_not_found', what)
        assert.ok(!foreign.text.includes(target.name), `${what}: no name echoed`)
        assert.ok(!foreign.text.includes(a.tenantId), `${what}: no tenant id echoed`)
        // The same answer as for an id that exists nowhere (which also shows the request passed validation).
        const unknown = await send(b, randomUUID())
        expectError(unknown, 404, 'key_not_found', `${what} (unknown id)`)
        assert.deepEqual(foreign.body, unknown.body, what)
        tried++
      }
    }
    assert.ok(tried >= aKeys.length * 18, `${tried} attempts`)

    // A's keys are exactly as they were: same version, state, name, default, favourite, updatedAt.
    for (const k of aKeys) assert.deepEqual(await getKey(a, k.id), k)
    assert.equal(aKeys[0]!.state, 'Active')
    assert.equal(aKeys[0]!.version, 1)
    assert.equal(aKeys[2]!.state, 'Pending Deletion')
    const versionsAfter = await svc.sql<{ key_id: string; version: number }[]>`
      SELECT key_id::text AS key_id, version FROM key_versions WHERE tenant_id = ${a.tenantId} ORDER BY 1, 2`
    assert.deepEqual(versionsAfter, versionsBefore)
    assert.deepEqual(await defaultsInDb(a.tenantId, 'Signing'), [aKeys[0]!.id])
    // No audit record about A's keys was written by any of B's attempts.
    const auditAfter = await svc.sql<{ id: string }[]>`
      SELECT id::text AS id FROM audit_log
      WHERE tenant_id = ${a.tenantId} AND resource = ANY(${svc.sql.array(aKeys.map((k) => `key:${k.id}`))}::text[])`
    // A's audit log is untouched; B's own log may record B's refused attempts, naming the ids B sent.
    assert.deepEqual(auditAfter, auditBefore)
    const bRecords = await svc.sql<{ outcome: string }[]>`
      SELECT outcome FROM audit_log
      WHERE tenant_id = ${b.tenantId} AND resource = ANY(${svc.sql.array(aKeys.map((k) => `key:${k.id}`))}::text[])`
    assert.ok(
      bRecords.every((r) => r.outcome === 'failure'),
      'every record of B naming A’s keys is a refusal',
    )
    // And nothing B sent created, renamed or moved a key into B's tenant.
    assert.ok((await listAll(b)).every((k) => k.name !== 'x' && !aKeys.some((ak) => ak.id === k.id)))
  })

  test('B’s list never contains A’s keys, whatever the filter or cursor', async () => {
    const aIds = new Set(aKeys.map((k) => k.id))
    const queries: Pairs[] = [
      [],
      [['search', 'shared-name']],
      [['search', 'tenant A']],
      [['label', 'a-only']],
      [['keyType', 'HMAC']],
      [['status', 'Pending Deletion']],
      [
        ['sort', 'name'],
        ['order', 'asc'],
      ],
    ]
    for (const query of queries) {
      const listed = await listAll(b, query)
      for (const k of listed) assert.ok(!aIds.has(k.id), `${qs(query)}: A's key ${k.id} in B's list`)
    }
    assert.deepEqual(await listAll(b, [['label', 'a-only']]), [])
    assert.deepEqual(await listAll(b, [['search', 'tenant A']]), [])
    const bShared = await listAll(b, [['search', 'shared-name']])
    assert.equal(bShared.length, 1)
    assert.notEqual(bShared[0]!.id, aKeys[0]!.id)
    // A's own list has its keys (so the empty answers above are isolation, not broken filters).
    assert.deepEqual(
      (await listAll(a, [['label', 'a-only']])).map((k) => k.id),
      [aKeys[0]!.id],
    )
    const aAll = await listAll(a)
    assert.deepEqual(new Set(aAll.map((k) => k.id)), aIds)

    // A cursor from A's list does not open A's keys to B.
    const first = await listKeys(a, 'limit=1')
    assert.equal(first.status, 200)
    assert.ok(first.body.nextCursor)
    const withCursor = await listKeys(b, `limit=1000&cursor=${first.body.nextCursor}`)
    assert.equal(withCursor.status, 200, withCursor.text)
    for (const k of withCursor.body.data as KeyView[]) assert.ok(!aIds.has(k.id))
    assert.equal(withCursor.body.total, (await listAll(b)).length)
  })
})

// ---------------------------------------------------------------------------------------------
// 3. Scopes: keys:read reads, keys:write writes
// ---------------------------------------------------------------------------------------------

describe('keys:read and keys:write', () => {
  let owner: TenantWithKey
  let reader: TenantWithKey
  let writer: TenantWithKey
  let key: KeyView

  async function apiKey(scopes: Scope[]): Promise<TenantWithKey> {
    const res = await svc.request('POST', `${API}/api-keys`, {
      key: owner.key,
      body: { name: scopes.join('+'), scopes },
    })
    assert.equal(res.status, 201, res.text)
    return { tenantId: owner.tenantId, apiKeyId: res.body.id, key: res.body.key }
  }

  before(async () => {
    owner = await svc.createTenant()
    key = await createKey(owner, { name: 'scoped-key', keyType: 'Signing', algorithm: 'Ed25519' })
    reader = await apiKey(['keys:read'])
    writer = await apiKey(['keys:write'])
  })

  test('keys:read can list, get and export the public key', async () => {
    const list = await listKeys(reader, '')
    assert.equal(list.status, 200, list.text)
    assert.deepEqual(
      list.body.data.map((k: KeyView) => k.id),
      [key.id],
    )
    assert.deepEqual(await getKey(reader, key.id), key)
    const pub = await svc.request('GET', `${API}/keys/${key.id}/public?format=PEM`, { key: reader.key })
    assert.equal(pub.status, 200, pub.text)
    assert.match(pub.body.publicKey, /^-----BEGIN PUBLIC KEY-----/)
    const versions = await svc.request('GET', `${API}/keys/${key.id}/versions`, { key: reader.key })
    assert.equal(versions.status, 200, versions.text)
  })

  test('keys:read gets 403 insufficient_scope on every write; nothing changes', async () => {
    const writes: [string, string, unknown][] = [
      ['POST', '/keys', { name: 'by-reader', keyType: 'Signing', algorithm: 'Ed25519' }],
      ['PATCH', `/keys/${key.id}`, { name: 'renamed-by-reader', isFavorite: true }],
      ['DELETE', `/keys/${key.id}`, undefined],
      ['POST', `/keys/${key.id}/rotate`, undefined],
      ['POST', `/keys/${key.id}/revoke`, undefined],
      ['POST', `/keys/${key.id}/cancel-deletion`, undefined],
      ['POST', `/keys/${key.id}/export-private`, { confirm: key.name, format: 'PEM' }],
    ]
    for (const [method, path, body] of writes) {
      const res = await svc.request(method, `${API}${path}`, { key: reader.key, ...(body ? { body } : {}) })
      expectError(res, 403, 'insufficient_scope', `${method} ${path}`)
      // Private export has its own scope, which keys:write does not imply.
      const required = path.endsWith('/export-private') ? 'keys:export' : 'keys:write'
      assert.equal(res.body.requiredScope, required)
      assert.ok(!('privateKey' in res.body))
    }
    assert.deepEqual(await getKey(owner, key.id), key)
    assert.deepEqual(
      (await listAll(owner)).map((k) => k.id),
      [key.id],
    )
  })

  test('keys:write cannot read: GET /keys and GET /keys/{id} are 403; its writes work', async () => {
    for (const path of ['/keys', `/keys/${key.id}`, `/keys/${key.id}/public?format=PEM`]) {
      const res = await svc.request('GET', `${API}${path}`, { key: writer.key })
      expectError(res, 403, 'insufficient_scope', `GET ${path}`)
      assert.equal(res.body.requiredScope, 'keys:read')
    }
    const created = await svc.request('POST', `${API}/keys`, {
      key: writer.key,
      body: { name: 'by-writer', keyType: 'HMAC', algorithm: 'HMAC-SHA256' },
    })
    assert.equal(created.status, 201, created.text)
    const removed = await svc.request('DELETE', `${API}/keys/${created.body.id}`, { key: writer.key })
    assert.equal(removed.status, 200, removed.text)
  })
})

// ---------------------------------------------------------------------------------------------
// 4. The list: order, keyset pagination, cursors, filters, bounds
// ---------------------------------------------------------------------------------------------

interface Spec {
  name: string
  keyType: 'Encryption' | 'Signing' | 'HMAC'
  algorithm: string
  labels?: string[]
  description?: string
  expires?: boolean
}

const SPECS: Spec[] = [
  {
    name: 'alpha-signing',
    keyType: 'Signing',
    algorithm: 'Ed25519',
    labels: ['prod', 'team-a'],
    description: 'Signs releases',
  },
  {
    name: 'Beta encryption',
    keyType: 'Encryption',
    algorithm: 'ML-KEM-768',
    labels: ['prod'],
    description: 'Customer data',
  },
  {
    name: 'gamma-mac',
    keyType: 'HMAC',
    algorithm: 'HMAC-SHA256',
    labels: ['staging'],
    description: 'Webhooks',
  },
  { name: 'delta', keyType: 'Signing', algorithm: 'ML-DSA-44' },
  { name: 'Epsilon-EC', keyType: 'Signing', algorithm: 'EC-P256', labels: ['team-b'], description: 'Legacy' },
  { name: 'zeta', keyType: 'Encryption', algorithm: 'ML-KEM-768', labels: ['prod', 'team-b'] },
  { name: 'eta_underscore', keyType: 'HMAC', algorithm: 'HMAC-SHA256', description: 'literal underscore' },
  { name: 'etaXunderscore', keyType: 'Signing', algorithm: 'Ed25519', description: 'no underscore here' },
  {
    name: 'discount 100%',
    keyType: 'Encryption',
    algorithm: 'ML-KEM-768',
    description: 'percent in the name',
  },
  { name: 'discount 1000', keyType: 'Signing', algorithm: 'ML-DSA-44', description: 'no percent' },
  {
    name: 'theta',
    keyType: 'Signing',
    algorithm: 'ML-DSA-44',
    labels: ['team-a'],
    description: 'Mixed Alpha Case',
  },
  { name: 'iota', keyType: 'HMAC', algorithm: 'HMAC-SHA256', labels: ['team-a', 'staging'] },
  { name: 'kappa', keyType: 'Signing', algorithm: 'Ed25519', description: 'back\\slash and 50%_off' },
  { name: 'Lambda', keyType: 'Encryption', algorithm: 'ML-KEM-768', labels: ['dev'] },
  { name: 'mu', keyType: 'Signing', algorithm: 'EC-P256', labels: ['dev'] },
  { name: 'nu', keyType: 'HMAC', algorithm: 'HMAC-SHA256', labels: ['dev', 'prod'] },
  { name: 'xi', keyType: 'Signing', algorithm: 'ML-DSA-44' },
  { name: 'omicron', keyType: 'Encryption', algorithm: 'ML-KEM-768', labels: ['staging'] },
  { name: 'pi', keyType: 'Signing', algorithm: 'Ed25519', labels: ['prod'] },
  { name: 'rho', keyType: 'Signing', algorithm: 'EC-P256' },
  { name: 'sigma', keyType: 'HMAC', algorithm: 'HMAC-SHA256', labels: ['team-b'] },
  { name: 'tau', keyType: 'Encryption', algorithm: 'ML-KEM-768' },
  { name: 'upsilon', keyType: 'Signing', algorithm: 'ML-DSA-44', labels: ['team-a'], expires: true },
  { name: 'phi', keyType: 'Signing', algorithm: 'Ed25519', labels: ['dev'] },
  { name: 'chi', keyType: 'HMAC', algorithm: 'HMAC-SHA256' },
  { name: 'psi', keyType: 'Encryption', algorithm: 'ML-KEM-768', expires: true, description: 'short-lived' },
  {
    name: 'omega',
    keyType: 'Signing',
    algorithm: 'Ed25519',
    labels: ['prod'],
    description: 'to be destroyed',
  },
]

const FAVOURITES = ['alpha-signing', 'gamma-mac', 'delta', 'discount 100%', 'nu', 'psi', 'tau', 'omega']
const ROTATIONS: Record<string, number> = { 'alpha-signing': 2, zeta: 1, iota: 1, pi: 2, mu: 1, delta: 1 }
const SORTS = ['name', 'algorithm', 'purpose', 'version', 'status', 'createdAt'] as const
const STATUS_RANK: Record<string, number> = {
  Active: 0,
  Expired: 1,
  Revoked: 2,
  'Pending Deletion': 3,
  Destroyed: 4,
}

function sortValue(k: KeyView, sort: (typeof SORTS)[number]): string | number {
  switch (sort) {
    case 'name':
      return k.name
    case 'algorithm':
      return k.algorithm
    case 'purpose':
      return k.keyType
    case 'version':
      return k.version
    case 'status':
      return STATUS_RANK[k.state]!
    case 'createdAt':
      return Date.parse(k.createdAt)
  }
}

// Code-point order, as the database's C collation orders the (ASCII) names; uuids compare as their hex text.
const compare = (x: string | number, y: string | number) => (x < y ? -1 : x > y ? 1 : 0)

/** The documented order: favourites first, then the sort column in `order`, ties by id the same way. */
function expectedOrder(keys: KeyView[], sort: (typeof SORTS)[number], order: 'asc' | 'desc'): string[] {
  const dir = order === 'asc' ? 1 : -1
  return [...keys]
    .sort(
      (x, y) =>
        Number(y.isFavorite) - Number(x.isFavorite) ||
        dir * compare(sortValue(x, sort), sortValue(y, sort)) ||
        dir * compare(x.id, y.id),
    )
    .map((k) => k.id)
}

describe('the key list', () => {
  let t: TenantWithKey
  let all: KeyView[]
  const byName = new Map<string, KeyView>()
  const idOf = (name: string) => byName.get(name)!.id

  before(async () => {
    t = await svc.createTenant()
    // Batches created at one instant (createdAt ties, broken by id), one second between batches.
    for (let i = 0; i < SPECS.length; i += 4) {
      const batch = await Promise.all(
        SPECS.slice(i, i + 4).map(({ expires, ...spec }) =>
          createKey(t, { ...spec, ...(expires ? { expiresAt: futureIso(1 / 24) } : {}) }),
        ),
      )
      for (const k of batch) byName.set(k.name, k)
      clock.advance(1000)
    }
    for (const name of FAVOURITES) await mustSucceed(t, 'PATCH', `/keys/${idOf(name)}`, { isFavorite: true })
    await mustSucceed(t, 'DELETE', `/keys/${idOf('omega')}?pendingWindowDays=7`)
    for (const name of ['gamma-mac', 'xi', 'sigma'])
      await mustSucceed(t, 'POST', `/keys/${idOf(name)}/revoke`)
    // Eight days on: omega's deletion date and the short expiries have passed.
    clock.advance(8 * DAY_MS)
    for (const name of ['tau', 'xi', 'rho']) await mustSucceed(t, 'DELETE', `/keys/${idOf(name)}`)
    for (const [name, times] of Object.entries(ROTATIONS)) {
      for (let i = 0; i < times; i++) await mustSucceed(t, 'POST', `/keys/${idOf(name)}/rotate`)
    }
    all = await listAll(t)
  })

  test('the fixture: each key listed once, as GET shows it, in varied states and versions', async () => {
    assert.equal(all.length, SPECS.length)
    assert.deepEqual(new Set(all.map((k) => k.id)), new Set([...byName.values()].map((k) => k.id)))
    for (const k of all) assert.deepEqual(await getKey(t, k.id), k, `GET ${k.name}`)
    const names = (state: string) =>
      all
        .filter((k) => k.state === state)
        .map((k) => k.name)
        .sort()
    assert.deepEqual(names('Expired'), ['psi', 'upsilon'])
    assert.deepEqual(names('Revoked'), ['gamma-mac', 'sigma'])
    assert.deepEqual(names('Pending Deletion'), ['rho', 'tau', 'xi'])
    assert.deepEqual(names('Destroyed'), ['omega'])
    assert.equal(names('Active').length, SPECS.length - 8)
    for (const k of all) {
      assert.equal(k.version, 1 + (ROTATIONS[k.name] ?? 0), k.name)
      assert.equal(k.isFavorite, FAVOURITES.includes(k.name), k.name)
    }
  })

  test('favourites come first whatever the sort and order', async () => {
    for (const sort of SORTS) {
      for (const order of ['asc', 'desc']) {
        const listed = await listAll(t, [
          ['sort', sort],
          ['order', order],
        ])
        const flags = listed.map((k) => k.isFavorite)
        assert.deepEqual(
          flags,
          [...flags].sort((x, y) => Number(y) - Number(x)),
          `${sort} ${order}`,
        )
        assert.equal(flags.filter(Boolean).length, FAVOURITES.length)
      }
    }
  })

  test('each sort × order is the documented order, ties broken by id in the same direction', async () => {
    for (const sort of SORTS) {
      for (const order of ['asc', 'desc'] as const) {
        const listed = await listAll(t, [
          ['sort', sort],
          ['order', order],
        ])
        assert.deepEqual(
          listed.map((k) => k.id),
          expectedOrder(all, sort, order),
          `sort=${sort} order=${order}: ${listed.map((k) => k.name).join(', ')}`,
        )
      }
    }
    // The defaults are createdAt and desc.
    assert.deepEqual(
      (await listAll(t)).map((k) => k.id),
      expectedOrder(all, 'createdAt', 'desc'),
    )
    assert.deepEqual(
      (await listAll(t, [['sort', 'name']])).map((k) => k.id),
      expectedOrder(all, 'name', 'desc'),
    )
  })

  /** Walks every page via nextCursor; checks total and page sizes on the way. */
  async function walk(pairs: Pairs, limit: number, total: number): Promise<string[]> {
    const ids: string[] = []
    let cursor: string | null = null
    let pages = 0
    do {
      const res = await listKeys(t, [
        ...pairs,
        ['limit', String(limit)],
        ...(cursor ? [['cursor', cursor]] : []),
      ] as Pairs)
      assert.equal(res.status, 200, res.text)
      assert.equal(res.body.total, total, `total on page ${pages + 1} of ${qs(pairs)}`)
      assert.ok(res.body.data.length <= limit)
      if (res.body.nextCursor !== null)
        assert.equal(res.body.data.length, limit, 'only the last page is short')
      ids.push(...res.body.data.map((k: KeyView) => k.id))
      cursor = res.body.nextCursor
      pages++
      assert.ok(pages <= total + 1, 'pagination terminates')
    } while (cursor)
    assert.equal(
      pages,
      Math.max(1, Math.ceil(total / limit)),
      `${qs(pairs)} limit ${limit}: no empty last page`,
    )
    return ids
  }

  test('keyset pagination returns every key exactly once, in the one-page order', async () => {
    const cases: { pairs: Pairs; limit: number; match?: (k: KeyView) => boolean }[] = []
    for (const sort of SORTS) {
      for (const order of ['asc', 'desc']) {
        cases.push({
          pairs: [
            ['sort', sort],
            ['order', order],
          ],
          limit: 3,
        })
      }
    }
    // Page boundaries on the favourites boundary (8 favourites), around it and at the end (27 keys).
    for (const limit of [1, 4, 7, 8, 9, 26, 27, 28]) cases.push({ pairs: [['sort', 'name']], limit })
    cases.push({ pairs: [], limit: 5 })
    cases.push({
      pairs: [
        ['status', 'Active'],
        ['keyType', 'Signing'],
        ['sort', 'algorithm'],
        ['order', 'asc'],
      ],
      limit: 2,
      match: (k) => k.state === 'Active' && k.keyType === 'Signing',
    })
    cases.push({
      pairs: [
        ['label', 'prod'],
        ['label', 'dev'],
        ['sort', 'version'],
        ['order', 'desc'],
      ],
      limit: 3,
      match: (k) => k.labels.includes('prod') || k.labels.includes('dev'),
    })
    cases.push({
      pairs: [
        ['favorite', 'false'],
        ['sort', 'status'],
        ['order', 'asc'],
      ],
      limit: 4,
      match: (k) => !k.isFavorite,
    })
    cases.push({
      pairs: [
        ['search', 'A'],
        ['sort', 'purpose'],
        ['order', 'desc'],
      ],
      limit: 3,
      match: (k) => `${k.name}\n${k.description}`.toLowerCase().includes('a'),
    })

    for (const { pairs, limit, match } of cases) {
      const expected = all.filter(match ?? (() => true))
      assert.ok(expected.length > 1, `fixture for ${qs(pairs)}`)
      const onePage = await listKeys(t, [...pairs, ['limit', '1000']])
      assert.equal(onePage.status, 200, onePage.text)
      assert.equal(onePage.body.total, expected.length)
      const bigIds = onePage.body.data.map((k: KeyView) => k.id)
      const sort = (pairs.find(([n]) => n === 'sort')?.[1] ?? 'createdAt') as (typeof SORTS)[number]
      const order = (pairs.find(([n]) => n === 'order')?.[1] ?? 'desc') as 'asc' | 'desc'
      assert.deepEqual(bigIds, expectedOrder(expected, sort, order), `${qs(pairs)}: one page`)
      const walked = await walk(pairs, limit, expected.length)
      assert.equal(new Set(walked).size, walked.length, `${qs(pairs)} limit ${limit}: no key twice`)
      assert.deepEqual(walked, bigIds, `${qs(pairs)} limit ${limit}: pages in one-page order`)
    }
  })

  test('a cursor made for another sort or order is 400 invalid_cursor', async () => {
    const cursorFor = async (pairs: Pairs) => {
      const res = await listKeys(t, [...pairs, ['limit', '3']])
      assert.equal(res.status, 200, res.text)
      assert.ok(res.body.nextCursor)
      return res.body.nextCursor as string
    }
    const nameAsc = await cursorFor([
      ['sort', 'name'],
      ['order', 'asc'],
    ])
    const createdDesc = await cursorFor([])
    const versionAsc = await cursorFor([
      ['sort', 'version'],
      ['order', 'asc'],
    ])
    const misuses: [string, Pairs][] = [
      [
        nameAsc,
        [
          ['sort', 'name'],
          ['order', 'desc'],
        ],
      ],
      [nameAsc, [['sort', 'name']]],
      [
        nameAsc,
        [
          ['sort', 'algorithm'],
          ['order', 'asc'],
        ],
      ],
      [nameAsc, []],
      [createdDesc, [['order', 'asc']]],
      [createdDesc, [['sort', 'status']]],
      [
        versionAsc,
        [
          ['sort', 'status'],
          ['order', 'asc'],
        ],
      ],
      [
        versionAsc,
        [
          ['sort', 'version'],
          ['order', 'desc'],
        ],
      ],
    ]
    for (const [cursor, pairs] of misuses) {
      expectError(await listKeys(t, [...pairs, ['cursor', cursor]]), 400, 'invalid_cursor', qs(pairs))
    }
    // The same cursors work where they belong.
    for (const [cursor, pairs] of [
      [
        nameAsc,
        [
          ['sort', 'name'],
          ['order', 'asc'],
        ],
      ],
      [createdDesc, []],
    ] as [string, Pairs][]) {
      const res = await listKeys(t, [...pairs, ['cursor', cursor]])
      assert.equal(res.status, 200, res.text)
    }
  })

  test('a tampered cursor is 400 invalid_cursor, never 500', async () => {
    const id = randomUUID()
    const tampered: [string, Pairs][] = [
      ...['garbage', '{', '{"sort":"name"}', '[]', 'null', '42', '"name"', 'true', '[[[[', '\u0000'].map(
        (text): [string, Pairs] => [b64(text), []],
      ),
      ...[
        ['name', false, false, 'x'],
        ['name', false, false, 'x', id, 'extra'],
        ['name', 'false', false, 'x', id],
        ['name', false, 'no', 'x', id],
        ['name', false, null, 'x', id],
        ['name', false, false, 7, id],
        ['name', false, false, null, id],
        ['name', false, false, { a: 1 }, id],
        ['name', false, false, 'x', 'not-a-uuid'],
        ['name', false, false, 'x', 42],
        ['name', false, false, 'x', id.toUpperCase().replace(/-/g, '')],
        ['name', false, false, 'a\u0000b', id],
        ['name', false, false, 'x'.repeat(401), id],
        [null, false, false, 'x', id],
      ].map((array): [string, Pairs] => [
        b64(JSON.stringify(array)),
        [
          ['sort', 'name'],
          ['order', 'asc'],
        ],
      ]),
      ...[
        ['version', false, false, '3', id],
        ['version', false, false, 1.5, id],
        ['version', false, false, Number.MAX_SAFE_INTEGER + 2, id],
        ['version', false, false, true, id],
      ].map((array): [string, Pairs] => [
        b64(JSON.stringify(array)),
        [
          ['sort', 'version'],
          ['order', 'asc'],
        ],
      ]),
      ...[
        ['createdAt', true, false, 'yesterday', id],
        ['createdAt', true, false, 12345, id],
        ['createdAt', true, false, '', id],
      ].map((array): [string, Pairs] => [b64(JSON.stringify(array)), []]),
    ]
    for (const [cursor, pairs] of tampered) {
      const res = await listKeys(t, [...pairs, ['cursor', cursor]])
      expectError(
        res,
        400,
        'invalid_cursor',
        `${Buffer.from(cursor, 'base64url').toString()} with ${qs(pairs)}`,
      )
    }
    // Not base64url at all: refused by validation, also 400.
    for (const cursor of ['abc$def', 'a+b/c=', '%00', 'x'.repeat(2049)]) {
      const res = await listKeys(t, `cursor=${encodeURIComponent(cursor)}`)
      assert.equal(res.status, 400, `${cursor.slice(0, 20)}: ${res.text}`)
    }
  })

  test('a well-formed cursor whose value is out of the column’s range is 400 invalid_cursor', async () => {
    // Right shape and JSON type, but no list ever returned it: an int4 column holds no 2^40, and
    // PostgreSQL's timestamptz has no year 275760 (JavaScript's) nor -271821.
    const id = randomUUID()
    const versionAsc: Pairs = [
      ['sort', 'version'],
      ['order', 'asc'],
    ]
    const statusDesc: Pairs = [
      ['sort', 'status'],
      ['order', 'desc'],
    ]
    const cases: [unknown[], Pairs][] = [
      [['version', false, false, 2 ** 40, id], versionAsc],
      [['version', false, true, -(2 ** 31) - 1, id], versionAsc],
      [['status', true, true, -(2 ** 50), id], statusDesc],
      [['createdAt', true, false, '+275760-09-13T00:00:00.000Z', id], []],
      [['createdAt', true, false, '-271821-04-20T00:00:00.000Z', id], []],
    ]
    const answers = []
    for (const [array, pairs] of cases) {
      const res = await listKeys(t, [...pairs, ['cursor', b64(JSON.stringify(array))]])
      answers.push({ cursor: JSON.stringify(array), status: res.status, error: res.body?.error })
    }
    assert.deepEqual(
      answers,
      cases.map(([array]) => ({ cursor: JSON.stringify(array), status: 400, error: 'invalid_cursor' })),
    )
  })

  test('filters: status, keyType, algorithm, label, search, favorite, and their combinations', async () => {
    const text = (k: KeyView) => `${k.name}\n${k.description}`.toLowerCase()
    const labelled =
      (...labels: string[]) =>
      (k: KeyView) =>
        labels.some((l) => k.labels.includes(l))
    const cases: { pairs: Pairs; match: (k: KeyView) => boolean; names?: string[] }[] = [
      {
        pairs: [
          ['status', 'Active'],
          ['status', 'Revoked'],
        ],
        match: (k) => k.state === 'Active' || k.state === 'Revoked',
      },
      { pairs: [['status', 'Expired']], match: (k) => k.state === 'Expired', names: ['psi', 'upsilon'] },
      { pairs: [['status', 'Revoked']], match: (k) => k.state === 'Revoked', names: ['gamma-mac', 'sigma'] },
      {
        pairs: [['status', 'Pending Deletion']],
        match: (k) => k.state === 'Pending Deletion',
        names: ['rho', 'tau', 'xi'],
      },
      { pairs: [['status', 'Destroyed']], match: (k) => k.state === 'Destroyed', names: ['omega'] },
      { pairs: [['keyType', 'HMAC']], match: (k) => k.keyType === 'HMAC' },
      {
        pairs: [
          ['keyType', 'Signing'],
          ['keyType', 'Encryption'],
        ],
        match: (k) => k.keyType !== 'HMAC',
      },
      {
        pairs: [
          ['algorithm', 'Ed25519'],
          ['algorithm', 'EC-P256'],
        ],
        match: (k) => k.algorithm === 'Ed25519' || k.algorithm === 'EC-P256',
      },
      { pairs: [['algorithm', 'ML-DSA-44']], match: (k) => k.algorithm === 'ML-DSA-44' },
      {
        pairs: [
          ['label', 'prod'],
          ['label', 'staging'],
        ],
        match: labelled('prod', 'staging'),
      },
      {
        pairs: [['label', 'team-a']],
        match: labelled('team-a'),
        names: ['alpha-signing', 'iota', 'theta', 'upsilon'],
      },
      {
        pairs: [['search', 'ALPHA']],
        match: (k) => text(k).includes('alpha'),
        names: ['alpha-signing', 'theta'],
      },
      {
        pairs: [['search', 'beta ENC']],
        match: (k) => text(k).includes('beta enc'),
        names: ['Beta encryption'],
      },
      { pairs: [['search', 'lambda']], match: (k) => text(k).includes('lambda'), names: ['Lambda'] },
      { pairs: [['search', '100%']], match: (k) => text(k).includes('100%'), names: ['discount 100%'] },
      { pairs: [['search', '%']], match: (k) => text(k).includes('%'), names: ['discount 100%', 'kappa'] },
      { pairs: [['search', 'eta_']], match: (k) => text(k).includes('eta_'), names: ['eta_underscore'] },
      { pairs: [['search', '_']], match: (k) => text(k).includes('_'), names: ['eta_underscore', 'kappa'] },
      { pairs: [['search', '50%_off']], match: (k) => text(k).includes('50%_off'), names: ['kappa'] },
      { pairs: [['search', '\\']], match: (k) => text(k).includes('\\'), names: ['kappa'] },
      {
        pairs: [['search', 'customer data']],
        match: (k) => text(k).includes('customer data'),
        names: ['Beta encryption'],
      },
      { pairs: [['favorite', 'true']], match: (k) => k.isFavorite },
      { pairs: [['favorite', 'false']], match: (k) => !k.isFavorite },
      {
        pairs: [
          ['keyType', 'Signing'],
          ['status', 'Active'],
          ['favorite', 'true'],
        ],
        match: (k) => k.keyType === 'Signing' && k.state === 'Active' && k.isFavorite,
        names: ['alpha-signing', 'delta'],
      },
      {
        pairs: [
          ['label', 'prod'],
          ['label', 'dev'],
          ['algorithm', 'ML-KEM-768'],
          ['algorithm', 'HMAC-SHA256'],
          ['search', 'a'],
        ],
        match: (k) =>
          labelled('prod', 'dev')(k) &&
          (k.algorithm === 'ML-KEM-768' || k.algorithm === 'HMAC-SHA256') &&
          text(k).includes('a'),
        names: ['Beta encryption', 'Lambda', 'zeta'],
      },
      {
        pairs: [
          ['status', 'Revoked'],
          ['status', 'Pending Deletion'],
          ['keyType', 'Signing'],
        ],
        match: (k) => (k.state === 'Revoked' || k.state === 'Pending Deletion') && k.keyType === 'Signing',
        names: ['rho', 'xi'],
      },
      { pairs: [['label', 'no-such-label']], match: () => false, names: [] },
      {
        pairs: [
          ['keyType', 'HMAC'],
          ['algorithm', 'Ed25519'],
        ],
        match: () => false,
        names: [],
      },
      { pairs: [['search', 'no such text']], match: () => false, names: [] },
    ]
    for (const { pairs, match, names } of cases) {
      const expected = all.filter(match)
      if (names) {
        assert.deepEqual(expected.map((k) => k.name).sort(), [...names].sort(), `fixture for ${qs(pairs)}`)
      } else {
        assert.ok(expected.length > 0 && expected.length < all.length, `fixture for ${qs(pairs)}`)
      }
      const res = await listKeys(t, [...pairs, ['limit', '1000']])
      assert.equal(res.status, 200, `${qs(pairs)}: ${res.text}`)
      assert.equal(res.body.total, expected.length, `${qs(pairs)}: total`)
      assert.equal(res.body.nextCursor, null)
      assert.deepEqual(
        res.body.data.map((k: KeyView) => k.name),
        expectedOrder(expected, 'createdAt', 'desc').map((id) => all.find((k) => k.id === id)!.name),
        qs(pairs),
      )
    }
  })

  test('limit bounds, unknown parameters and bad values are 400', async () => {
    for (const query of [
      'limit=0',
      'limit=1001',
      'limit=-1',
      'limit=abc',
      'limit=2.5',
      'foo=bar',
      'sortBy=name',
      'sort=size',
      'order=up',
      'status=Bogus',
      'keyType=Symmetric',
      'algorithm=RSA-1024',
      'favorite=maybe',
      'search=',
    ]) {
      const res = await listKeys(t, query)
      expectError(res, 400, 'validation_failed', query)
    }
    const one = await listKeys(t, 'limit=1')
    assert.equal(one.status, 200, one.text)
    assert.equal(one.body.data.length, 1)
    assert.equal(one.body.total, all.length)
    assert.ok(one.body.nextCursor)
    const max = await listKeys(t, 'limit=1000')
    assert.equal(max.status, 200, max.text)
    assert.equal(max.body.data.length, all.length)
    const byDefault = await listKeys(t, '')
    assert.equal(byDefault.body.data.length, all.length, 'default limit 50 covers the fixture')
  })
})
