import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { after, before, describe, test } from 'node:test'
import { DAY_MS } from '../../src/platform/clock.ts'
import { type ManualClock, manualClock } from '../helpers/manual-clock.ts'
import { startTestService, type TenantWithKey, type TestService, waitFor } from '../helpers/service.ts'

/**
 * Secrets over HTTP (docs/secrets.md): every field, every include token, `metadata` and `all`,
 * refused tokens, updates, custom-field types, value versions and how many are kept, the audit of
 * value reads, inactive secrets, list filters and pages, and deletion with restore and purge
 * (a manual clock and the background jobs in the service's process).
 */

const INCLUDE_TOKENS = [
  'customFields',
  'notes',
  'labels',
  'description',
  'expiresAt',
  'folderId',
  'isActive',
  'isFavorite',
  'hasTotp',
  'isTravelSafe',
  'createdAt',
  'updatedAt',
  'createdBy',
  'updatedBy',
] as const
const METADATA = INCLUDE_TOKENS.filter((f) => f !== 'notes' && f !== 'customFields')
const VERSIONS_KEPT = 3

let svc: TestService
let clock: ManualClock
let tenant: TenantWithKey

before(async () => {
  clock = manualClock(new Date('2031-03-01T12:00:00.000Z'))
  svc = await startTestService(
    { KMS_JOB_SWEEP_MS: '100', KMS_SECRET_VERSIONS_KEPT: String(VERSIONS_KEPT) },
    { clock, jobs: true },
  )
  tenant = await svc.createTenant()
})
after(async () => svc?.stop())

const call = (method: string, path: string, body?: unknown, key = tenant.key) =>
  svc.request(method, `/api/v1${path}`, { key, ...(body === undefined ? {} : { body }) })

const unique = (prefix: string) => `${prefix}-${randomBytes(4).toString('hex')}`

async function create(body: Record<string, unknown> = {}): Promise<{ id: string; name: string }> {
  const res = await call('POST', '/secrets', { name: unique('s'), value: 'v', ...body })
  assert.equal(res.status, 201, res.text)
  return res.body
}

const get = async (id: string, include?: string) => {
  const res = await call('GET', `/secrets/${id}${include === undefined ? '' : `?include=${include}`}`)
  assert.equal(res.status, 200, res.text)
  return res.body
}

async function valueReads(id: string) {
  return svc.sql<{ actor: string; key_version: number | null; details: { fields: string } }[]>`
    SELECT actor, key_version, details FROM audit_log
    WHERE action = 'secrets.value.read' AND resource = ${`secret:${id}`} ORDER BY id`
}

const FULL = () => ({
  name: unique('full'),
  value: 'p@ss wörd ✓',
  description: 'the primary database',
  notes: 'rotate after the audit',
  labels: ['prod', 'db'],
  customFields: [
    { name: 'user', type: 'text', value: 'admin' },
    { name: 'port', type: 'number', value: 5432 },
    { name: 'tls', type: 'boolean', value: true },
    { name: 'console', type: 'url', value: 'https://db.example.com/ui' },
    { name: 'owner', type: 'email', value: 'ops@example.com' },
    { name: 'renew', type: 'date', value: '2031-12-31' },
    { name: 'pin', type: 'number', value: 9876, sensitive: true },
    { name: 'recovery', type: 'text', value: 'recovery-code-1', sensitive: true },
  ],
  expiresAt: '2032-01-01T00:00:00.000Z',
  isActive: true,
  isFavorite: true,
  isTravelSafe: true,
  totp: { secret: 'JBSWY3DPEHPK3PXP' },
})

describe('fields and projection', () => {
  let full: ReturnType<typeof FULL>
  let id: string
  const createdAt = () => clock.now().toISOString()
  let created: string

  before(async () => {
    full = FULL()
    created = createdAt()
    id = (await create(full)).id
  })

  test('the default projection is id, name and version only', async () => {
    assert.deepEqual(await get(id), { id, name: full.name, version: 1 })
    assert.deepEqual(await get(id, ''), { id, name: full.name, version: 1 })
  })

  test('include=all returns every field as created, the value and sensitive custom values', async () => {
    const actor = `apikey:${tenant.apiKeyId}`
    assert.deepEqual(await get(id, 'all'), {
      id,
      name: full.name,
      version: 1,
      value: full.value,
      customFields: full.customFields.map((f) => ({ ...f, sensitive: f.sensitive ?? false })),
      notes: full.notes,
      labels: full.labels,
      description: full.description,
      expiresAt: full.expiresAt,
      folderId: null,
      isActive: true,
      isFavorite: true,
      hasTotp: true,
      isTravelSafe: true,
      createdAt: created,
      updatedAt: created,
      createdBy: actor,
      updatedBy: actor,
    })
  })

  test('each include token adds exactly its field', async () => {
    const all = await get(id, 'all')
    for (const token of INCLUDE_TOKENS) {
      const body = await get(id, token)
      const expected =
        token === 'customFields'
          ? all.customFields.map((f: { sensitive: boolean; value: unknown }) => ({
              ...f,
              value: f.sensitive ? null : f.value,
            }))
          : all[token]
      assert.deepEqual(body, { id, name: full.name, version: 1, [token]: expected }, token)
    }
  })

  test('metadata selects every field except the value, notes and custom fields', async () => {
    const body = await get(id, 'metadata')
    assert.deepEqual(Object.keys(body).sort(), ['id', 'name', 'version', ...METADATA].sort())
    assert.equal(body.value, undefined)
    const combined = await get(id, 'metadata,notes')
    assert.equal(combined.notes, full.notes)
    assert.equal(combined.value, undefined)
  })

  test('tokens combine, repeat and may carry spaces', async () => {
    assert.deepEqual(await get(id, 'labels,isFavorite,labels'), {
      id,
      name: full.name,
      version: 1,
      labels: full.labels,
      isFavorite: true,
    })
    assert.deepEqual(await get(id, encodeURIComponent(' labels , hasTotp ')), {
      id,
      name: full.name,
      version: 1,
      labels: full.labels,
      hasTotp: true,
    })
  })

  test('unknown tokens are a 400 that lists every valid token, and nothing is read', async () => {
    const before = (await valueReads(id)).length
    for (const include of ['value', 'Notes', 'all,secret', 'metadata,x', 'totp']) {
      const res = await call('GET', `/secrets/${id}?include=${include}`)
      assert.equal(res.status, 400, `${include}: ${res.text}`)
      assert.equal(res.body.error, 'validation_failed')
      assert.deepEqual([...res.body.allowedFields].sort(), [...INCLUDE_TOKENS, 'metadata', 'all'].sort())
      assert.match(res.body.message, /include names unknown fields/)
    }
    for (const include of ['notes;drop', 'a.b', '%00']) {
      const res = await call('GET', `/secrets/${id}?include=${include}`)
      assert.equal(res.status, 400, `${include}: ${res.text}`)
      assert.equal(res.body.error, 'validation_failed')
    }
    assert.equal((await valueReads(id)).length, before, 'a refused read is not a value access')
  })

  test('a minimal secret has the documented defaults', async () => {
    const { id: minimal, name } = await create({ value: '' })
    const body = await get(minimal, 'all')
    assert.deepEqual(
      { ...body, createdAt: undefined, updatedAt: undefined, createdBy: undefined, updatedBy: undefined },
      {
        id: minimal,
        name,
        version: 1,
        value: '',
        customFields: [],
        notes: null,
        labels: [],
        description: '',
        expiresAt: null,
        folderId: null,
        isActive: true,
        isFavorite: false,
        hasTotp: false,
        isTravelSafe: false,
        createdAt: undefined,
        updatedAt: undefined,
        createdBy: undefined,
        updatedBy: undefined,
      },
    )
  })

  test('the create answer is the metadata projection, without value or content', async () => {
    const res = await call('POST', '/secrets', FULL())
    assert.equal(res.status, 201, res.text)
    assert.deepEqual(Object.keys(res.body).sort(), ['id', 'name', 'version', ...METADATA].sort())
    assert.doesNotMatch(res.text, /p@ss|rotate after|recovery-code/)
  })

  test('answers that may carry a value are not cacheable', async () => {
    const res = await call('GET', `/secrets/${id}?include=all`)
    assert.equal(res.headers.get('cache-control'), 'no-store')
  })
})

describe('updates', () => {
  test('each field changes alone; null clears; updatedAt and updatedBy follow the writer', async () => {
    const { id } = await create(FULL())
    const writer = await call('POST', '/api-keys', { name: unique('writer'), scopes: ['secrets:write'] })
    assert.equal(writer.status, 201, writer.text)
    clock.advance(60_000)
    const changes: [Record<string, unknown>, Record<string, unknown>][] = [
      [{ name: 'renamed-secret' }, { name: 'renamed-secret' }],
      [{ description: 'other' }, { description: 'other' }],
      [{ notes: 'new notes' }, { notes: 'new notes' }],
      [{ notes: null }, { notes: null }],
      [{ labels: ['a', 'b', 'a'] }, { labels: ['a', 'b'] }],
      [{ expiresAt: '2033-01-01T00:00:00.000Z' }, { expiresAt: '2033-01-01T00:00:00.000Z' }],
      [{ expiresAt: null }, { expiresAt: null }],
      [{ isFavorite: false }, { isFavorite: false }],
      [{ isTravelSafe: false }, { isTravelSafe: false }],
      [{ totp: null }, { hasTotp: false }],
      [{ totp: { secret: 'GEZDGNBVGY3TQOJQ' } }, { hasTotp: true }],
      [
        { customFields: [{ name: 'only', value: 'one' }] },
        { customFields: [{ name: 'only', type: 'text', sensitive: false, value: 'one' }] },
      ],
      [{ customFields: [] }, { customFields: [] }],
    ]
    for (const [body, expected] of changes) {
      const before = await get(id, 'all')
      const res = await svc.request('PATCH', `/api/v1/secrets/${id}`, { key: writer.body.key, body })
      assert.equal(res.status, 200, `${JSON.stringify(body)}: ${res.text}`)
      const after = await get(id, 'all')
      assert.deepEqual(
        after,
        {
          ...before,
          ...expected,
          updatedAt: clock.now().toISOString(),
          updatedBy: `apikey:${writer.body.id}`,
        },
        JSON.stringify(body),
      )
      assert.equal(after.version, 1, 'no value change, no new version')
    }
  })

  test('an empty body, unknown fields and wrong types are 400 and change nothing', async () => {
    const { id } = await create({ description: 'kept' })
    for (const body of [
      {},
      { extra: 1 },
      { name: '' },
      { name: 'x'.repeat(201) },
      { name: 'tab\tname' },
      { value: 5 },
      { value: 'nul\u0000' },
      { labels: 'prod' },
      { isActive: 'yes' },
      { folderId: 'not-a-uuid' },
      { expiresAt: 'tomorrow' },
      { notes: 'x'.repeat(10_001) },
    ]) {
      const res = await call('PATCH', `/secrets/${id}`, body)
      assert.equal(res.status, 400, `${JSON.stringify(body).slice(0, 80)}: ${res.text}`)
      assert.equal(res.body.error, 'validation_failed')
    }
    assert.equal((await get(id, 'description')).description, 'kept')
  })

  test('values up to 65,536 characters and any Unicode text round-trip', async () => {
    for (const value of ['x'.repeat(65_536), '🔑 ключ 鍵 \u200b', ' leading and trailing ']) {
      const { id } = await create({ value })
      assert.equal((await get(id, 'all')).value, value)
    }
    const res = await call('POST', '/secrets', { name: unique('big'), value: 'x'.repeat(65_537) })
    assert.equal(res.status, 400, res.text)
  })

  test('a duplicate name in the same place is 409 secret_name_taken; the original is untouched', async () => {
    const { id, name } = await create({ value: 'first' })
    const res = await call('POST', '/secrets', { name, value: 'second' })
    assert.equal(res.status, 409, res.text)
    assert.equal(res.body.error, 'secret_name_taken')
    const other = await create()
    const renamed = await call('PATCH', `/secrets/${other.id}`, { name })
    assert.equal(renamed.status, 409, renamed.text)
    assert.equal((await get(id, 'all')).value, 'first')
  })
})

describe('custom fields', () => {
  test('values must match their type', async () => {
    const bad: [string, unknown][] = [
      ['number', '5'],
      ['boolean', 'true'],
      ['text', 5],
      ['url', 'not a url'],
      ['email', 'nobody'],
      ['date', '2031-02-30'],
      ['date', '31/12/2031'],
      ['url', true],
    ]
    for (const [type, value] of bad) {
      const res = await call('POST', '/secrets', {
        name: unique('cf'),
        value: 'v',
        customFields: [
          { name: 'ok', value: 'fine' },
          { name: 'f', type, value },
        ],
      })
      assert.equal(res.status, 400, `${type} ${JSON.stringify(value)}: ${res.text}`)
      assert.equal(res.body.error, 'validation_failed')
      assert.equal(res.body.fields[0].path, '/customFields/1/value')
    }
  })

  test('names are unique within a secret; at most 50 fields; unknown types and keys are refused', async () => {
    const dup = await call('POST', '/secrets', {
      name: unique('cf'),
      value: 'v',
      customFields: [
        { name: 'a', value: '1' },
        { name: 'a', value: '2' },
      ],
    })
    assert.equal(dup.status, 400, dup.text)
    assert.equal(dup.body.fields[0].path, '/customFields/1/name')
    const many = Array.from({ length: 51 }, (_, i) => ({ name: `f${i}`, value: 'v' }))
    for (const customFields of [
      many,
      [{ name: 'a', type: 'password', value: 'x' }],
      [{ name: 'a', value: 'x', hidden: true }],
      [{ value: 'x' }],
      [{ name: 'a', value: { nested: 1 } }],
    ]) {
      const res = await call('POST', '/secrets', { name: unique('cf'), value: 'v', customFields })
      assert.equal(res.status, 400, res.text)
    }
    const fifty = await call('POST', '/secrets', {
      name: unique('cf'),
      value: 'v',
      customFields: many.slice(0, 50),
    })
    assert.equal(fifty.status, 201, fifty.text)
  })

  test('sensitive values are null unless include=all', async () => {
    const { id } = await create({
      customFields: [
        { name: 'visible', value: 'plain' },
        { name: 'hidden', value: 'covert', sensitive: true },
      ],
    })
    const fields = (await get(id, 'customFields')).customFields
    assert.deepEqual(fields, [
      { name: 'visible', type: 'text', sensitive: false, value: 'plain' },
      { name: 'hidden', type: 'text', sensitive: true, value: null },
    ])
    assert.equal((await valueReads(id)).length, 0, 'nothing sealed was revealed')
    assert.equal((await get(id, 'all')).customFields[1].value, 'covert')
  })
})

describe('versions', () => {
  test('each value change is a version; the newest KMS_SECRET_VERSIONS_KEPT are kept', async () => {
    const { id } = await create({ value: 'v1' })
    const times = [clock.now().toISOString()]
    for (const n of [2, 3, 4, 5]) {
      clock.advance(1000)
      times.push(clock.now().toISOString())
      const res = await call('PATCH', `/secrets/${id}`, { value: `v${n}` })
      assert.equal(res.status, 200, res.text)
      assert.equal(res.body.version, n)
    }
    const list = await call('GET', `/secrets/${id}/versions`)
    assert.equal(list.status, 200, list.text)
    assert.deepEqual(
      list.body.data,
      [5, 4, 3].map((version) => ({
        version,
        createdAt: times[version - 1],
        createdBy: `apikey:${tenant.apiKeyId}`,
        isCurrent: version === 5,
      })),
    )
    for (const version of [3, 4, 5]) {
      const res = await call('GET', `/secrets/${id}/versions/${version}?include=all`)
      assert.equal(res.status, 200, res.text)
      assert.equal(res.body.value, `v${version}`)
      assert.equal(res.headers.get('cache-control'), 'no-store')
    }
    for (const version of [1, 2, 6]) {
      const res = await call('GET', `/secrets/${id}/versions/${version}?include=all`)
      assert.equal(res.status, 404, res.text)
      assert.equal(res.body.error, 'secret_version_not_found')
    }
    const rows = await svc.sql`SELECT version FROM secret_versions WHERE secret_id = ${id} ORDER BY version`
    assert.deepEqual(
      rows.map((r) => r['version']),
      [3, 4, 5],
      'older versions are erased, not hidden',
    )
    assert.equal((await get(id, 'all')).value, 'v5')
  })

  test('without include=all a version has no value; other tokens are refused', async () => {
    const { id } = await create({ value: 'only' })
    const plain = await call('GET', `/secrets/${id}/versions/1`)
    assert.equal(plain.status, 200, plain.text)
    assert.equal(plain.body.value, undefined)
    assert.equal(plain.body.isCurrent, true)
    const refused = await call('GET', `/secrets/${id}/versions/1?include=notes`)
    assert.equal(refused.status, 400, refused.text)
    assert.deepEqual(refused.body.allowedFields, ['all'])
    for (const version of ['0', '-1', 'x', '2147483648']) {
      const res = await call('GET', `/secrets/${id}/versions/${version}`)
      assert.equal(res.status, 400, `${version}: ${res.text}`)
    }
  })

  test('the same value again is not a new version', async () => {
    const { id } = await create({ value: 'same' })
    const res = await call('PATCH', `/secrets/${id}`, { value: 'same', description: 'touched' })
    assert.equal(res.status, 200, res.text)
    assert.equal(res.body.version, 1)
    assert.equal((await call('GET', `/secrets/${id}/versions`)).body.data.length, 1)
  })
})

describe('value reads are audited', () => {
  test('include=all, include=notes, a version value and a list with all each write their records', async () => {
    const { id } = await create({ value: 'audited', notes: 'n' })
    await get(id)
    await get(id, 'metadata')
    await get(id, 'customFields')
    assert.equal((await valueReads(id)).length, 0, 'no sealed content, no value-read record')
    await get(id, 'all')
    await get(id, 'notes')
    await call('GET', `/secrets/${id}/versions/1?include=all`)
    await call('GET', `/secrets/${id}/versions/1`)
    const records = await valueReads(id)
    assert.deepEqual(
      records.map((r) => [r.actor, r.key_version, r.details.fields]),
      [
        [`apikey:${tenant.apiKeyId}`, 1, 'value,notes'],
        [`apikey:${tenant.apiKeyId}`, 1, 'notes'],
        [`apikey:${tenant.apiKeyId}`, 1, 'value'],
      ],
    )
    const all = await svc.sql`SELECT details::text AS d FROM audit_log WHERE resource = ${`secret:${id}`}`
    for (const row of all) assert.doesNotMatch(String(row['d']), /audited/, 'the value is never in a record')
  })

  test('a list with include=all writes one record per secret revealed', async () => {
    const label = unique('listed')
    const ids = [(await create({ labels: [label] })).id, (await create({ labels: [label] })).id]
    const res = await call('GET', `/secrets?label=${label}&include=all`)
    assert.equal(res.status, 200, res.text)
    assert.equal(res.body.data.length, 2)
    for (const id of ids) assert.equal((await valueReads(id)).length, 1)
  })
})

describe('inactive secrets', () => {
  test('their value, notes, old values and TOTP are refused; metadata is not; reactivation restores reads', async () => {
    const { id } = await create({
      value: 'dormant',
      notes: 'asleep',
      totp: { secret: 'JBSWY3DPEHPK3PXP' },
      isActive: false,
    })
    for (const path of [
      `/secrets/${id}?include=all`,
      `/secrets/${id}?include=notes`,
      `/secrets/${id}/versions/1?include=all`,
      `/secrets/${id}/totp`,
    ]) {
      const res = await call('GET', path)
      assert.equal(res.status, 409, `${path}: ${res.text}`)
      assert.equal(res.body.error, 'secret_inactive')
    }
    assert.equal((await get(id, 'metadata')).isActive, false)
    assert.equal((await valueReads(id)).length, 0)
    const listed = await call(
      'GET',
      `/secrets?search=${encodeURIComponent((await get(id)).name)}&include=all`,
    )
    assert.equal(listed.body.data.length, 1)
    assert.equal(listed.body.data[0].value, undefined, 'the list leaves the value out')
    assert.equal(listed.body.data[0].notes, undefined, 'and the notes')
    assert.equal(listed.body.data[0].isActive, false)
    assert.equal((await call('PATCH', `/secrets/${id}`, { isActive: true })).status, 200)
    assert.equal((await get(id, 'all')).value, 'dormant')
  })
})

describe('list', () => {
  let other: TenantWithKey
  const names: string[] = []
  before(async () => {
    other = await svc.createTenant()
    const specs = [
      { name: 'alpha', labels: ['red'], isFavorite: true, description: 'First 100%' },
      { name: 'beta', labels: ['blue'], isActive: false },
      { name: 'Gamma', labels: ['red', 'blue'], description: 'under_score' },
      { name: 'delta', labels: [] },
      { name: 'epsilon', labels: ['green'], isFavorite: true },
    ]
    for (const spec of specs) {
      const res = await call('POST', '/secrets', { value: 'v', ...spec }, other.key)
      assert.equal(res.status, 201, res.text)
      names.push(spec.name)
    }
  })
  const list = async (query: string) => {
    const res = await call('GET', `/secrets?${query}`, undefined, other.key)
    assert.equal(res.status, 200, `${query}: ${res.text}`)
    return res.body
  }
  const namesOf = (body: { data: { name: string }[] }) => body.data.map((s) => s.name)

  test('ordered by name, paginated with total', async () => {
    assert.deepEqual(namesOf(await list('')), ['Gamma', 'alpha', 'beta', 'delta', 'epsilon'])
    const page = await list('limit=2&offset=2')
    assert.deepEqual(namesOf(page), ['beta', 'delta'])
    assert.equal(page.total, 5)
    assert.equal(page.limit, 2)
    assert.equal(page.offset, 2)
    const past = await list('limit=2&offset=10')
    assert.deepEqual(past.data, [])
    assert.equal(past.total, 5)
  })

  test('filters: label (any of), favorite, active, search', async () => {
    assert.deepEqual(namesOf(await list('label=red')), ['Gamma', 'alpha'])
    assert.deepEqual(namesOf(await list('label=green&label=blue')), ['Gamma', 'beta', 'epsilon'])
    assert.deepEqual(namesOf(await list('favorite=true')), ['alpha', 'epsilon'])
    assert.deepEqual(namesOf(await list('favorite=false&active=true')), ['Gamma', 'delta'])
    assert.deepEqual(namesOf(await list('active=false')), ['beta'])
    assert.deepEqual(namesOf(await list('search=GAM')), ['Gamma'])
    assert.deepEqual(namesOf(await list('search=100%25')), ['alpha'], '% is literal')
    assert.deepEqual(namesOf(await list('search=a_p')), [], '_ is literal')
    assert.deepEqual(namesOf(await list('search=under_')), ['Gamma'])
    assert.equal((await list('label=red&favorite=true')).total, 1)
  })

  test('the same include as for one secret', async () => {
    const body = await list('include=labels,isFavorite&limit=1')
    assert.deepEqual(Object.keys(body.data[0]).sort(), ['id', 'isFavorite', 'labels', 'name', 'version'])
    const refused = await call('GET', '/secrets?include=bogus', undefined, other.key)
    assert.equal(refused.status, 400)
    assert.ok(refused.body.allowedFields.includes('metadata'))
  })

  test('bad parameters are 400', async () => {
    for (const query of [
      'limit=0',
      'limit=1001',
      'offset=-1',
      'favorite=maybe',
      'folderId=x',
      'search=',
      'deleted=2',
    ]) {
      const res = await call('GET', `/secrets?${query}`, undefined, other.key)
      assert.equal(res.status, 400, `${query}: ${res.text}`)
    }
  })
})

describe('deletion', () => {
  test('a deleted secret is gone from reads and lists, listed as deleted, and restorable with its value', async () => {
    const { id, name } = await create({ value: 'keep me', labels: ['trash-test'] })
    const deleted = await call('DELETE', `/secrets/${id}`)
    assert.equal(deleted.status, 200, deleted.text)
    const purgeAt = new Date(clock.now().getTime() + 30 * DAY_MS).toISOString()
    assert.equal(deleted.body.deletedAt, clock.now().toISOString())
    assert.equal(deleted.body.purgeAt, purgeAt)
    for (const path of [`/secrets/${id}`, `/secrets/${id}/versions`, `/secrets/${id}/versions/1`]) {
      const res = await call('GET', path)
      assert.equal(res.status, 404, path)
      assert.equal(res.body.error, 'secret_not_found')
    }
    assert.equal((await call('PATCH', `/secrets/${id}`, { description: 'x' })).status, 404)
    assert.equal((await call('DELETE', `/secrets/${id}`)).status, 404, 'already deleted')
    assert.deepEqual((await call('GET', '/secrets?label=trash-test')).body.data, [])
    const trash = await call('GET', '/secrets?label=trash-test&deleted=true&include=labels')
    assert.deepEqual(trash.body.data, [
      { id, name, version: 1, labels: ['trash-test'], deletedAt: deleted.body.deletedAt, purgeAt },
    ])

    // The name is free while the secret is deleted; a restore then conflicts.
    const taker = await create({ name })
    const conflict = await call('POST', `/secrets/${id}/restore`)
    assert.equal(conflict.status, 409, conflict.text)
    assert.equal(conflict.body.error, 'secret_name_taken')
    assert.equal((await call('DELETE', `/secrets/${taker.id}?permanent=true`)).status, 204)

    clock.advance(29 * DAY_MS)
    const restored = await call('POST', `/secrets/${id}/restore`)
    assert.equal(restored.status, 200, restored.text)
    assert.equal((await get(id, 'all')).value, 'keep me')
    assert.equal((await call('POST', `/secrets/${id}/restore`)).status, 404, 'only deleted secrets restore')
  })

  test('the lifecycle job purges a secret 30 days after deletion, with every version', async () => {
    const { id } = await create({ value: 'v1' })
    await call('PATCH', `/secrets/${id}`, { value: 'v2' })
    await call('DELETE', `/secrets/${id}`)
    clock.advance(30 * DAY_MS - 1000)
    const early = await call('GET', '/secrets?deleted=true&limit=1000')
    assert.ok(
      early.body.data.some((s: { id: string }) => s.id === id),
      'still restorable',
    )
    clock.advance(1000)
    await waitFor(
      async () => (await svc.sql`SELECT 1 FROM secrets WHERE id = ${id}`).length === 0,
      'the purge of the deleted secret',
    )
    assert.equal((await svc.sql`SELECT 1 FROM secret_versions WHERE secret_id = ${id}`).length, 0)
    const records = await svc.sql`
      SELECT actor FROM audit_log WHERE action = 'secrets.purge' AND resource = ${`secret:${id}`}`
    assert.deepEqual(
      records.map((r) => r['actor']),
      ['system:lifecycle'],
    )
    assert.equal((await call('POST', `/secrets/${id}/restore`)).status, 404)
  })

  test('a restore after the window purges on the spot and answers 404, even before the job runs', async () => {
    const { id } = await create()
    await call('DELETE', `/secrets/${id}`)
    // Backdate the deletion past the window rather than waiting for a sweep to lose the race.
    await svc.sql`UPDATE secrets SET deleted_at = ${new Date(clock.now().getTime() - 31 * DAY_MS)} WHERE id = ${id}`
    const res = await call('POST', `/secrets/${id}/restore`)
    assert.equal(res.status, 404, res.text)
    assert.equal((await svc.sql`SELECT 1 FROM secrets WHERE id = ${id}`).length, 0)
  })

  test('permanent=true purges a live or a deleted secret at once', async () => {
    for (const softFirst of [false, true]) {
      const { id } = await create()
      if (softFirst) await call('DELETE', `/secrets/${id}`)
      const res = await call('DELETE', `/secrets/${id}?permanent=true`)
      assert.equal(res.status, 204, res.text)
      assert.equal(res.text, '')
      assert.equal((await svc.sql`SELECT 1 FROM secrets WHERE id = ${id}`).length, 0)
      assert.equal((await call('POST', `/secrets/${id}/restore`)).status, 404)
      const records = await svc.sql`
        SELECT actor FROM audit_log WHERE action = 'secrets.purge' AND resource = ${`secret:${id}`}`
      assert.equal(records.length, 1)
    }
    assert.equal((await call('DELETE', `/secrets/${crypto.randomUUID()}?permanent=true`)).status, 404)
    assert.equal((await call('DELETE', `/secrets/${crypto.randomUUID()}?permanent=yes`)).status, 400)
  })

  test('the trash list never returns sealed content: deleted=true&include=all has no value, notes or sensitive values, and no value-read record', async () => {
    const full = FULL()
    const res = await call('POST', '/secrets', { ...full, labels: ['trash-leak'] })
    assert.equal(res.status, 201, res.text)
    const { id } = res.body
    assert.equal((await call('DELETE', `/secrets/${id}`)).status, 200)
    const readsBefore = (await valueReads(id)).length

    for (const include of ['all', 'notes', 'customFields', 'notes,customFields']) {
      const trash = await call('GET', `/secrets?label=trash-leak&deleted=true&include=${include}`)
      assert.equal(trash.status, 200, trash.text)
      assert.equal(trash.body.data.length, 1, include)
      const [item] = trash.body.data
      assert.equal(item.id, id)
      assert.ok(item.deletedAt, 'still listed as deleted')
      assert.equal(item.value, undefined, `${include}: no value`)
      assert.equal(item.notes, undefined, `${include}: no notes`)
      for (const field of item.customFields ?? []) {
        if (field.sensitive) assert.equal(field.value, null, `${include}: sensitive ${field.name} hidden`)
      }
      assert.doesNotMatch(trash.text, /p@ss|rotate after|recovery-code|9876/, include)
    }
    assert.equal((await valueReads(id)).length, readsBefore, 'nothing revealed, nothing recorded as read')
  })
})
