import assert from 'node:assert/strict'
import { generateKeyPairSync } from 'node:crypto'
import { after, before, describe, test } from 'node:test'
import type { Scope } from '../../src/auth/scopes.ts'
import { apiClient, uniqueName } from '../helpers/api-client.ts'
import {
  type HttpResult,
  startTestService,
  type TenantWithKey,
  type TestService,
} from '../helpers/service.ts'

/**
 * Issue 15, defect 5: keys:write alone can no longer read data. Private export needs keys:export
 * and a key created or imported with exportable: true (fixed at creation, kept by rotation), and
 * is audited at warning level; changing the tenant default key needs encryption:write besides
 * keys:write, and is audited.
 */

interface AuditRecord {
  actor: string
  action: string
  resource: string | null
  outcome: string
  details: Record<string, unknown> | null
}

describe('private-key export and the default key (issue 15, defect 5)', () => {
  let svc: TestService
  let tenant: TenantWithKey
  const { call, createKey } = apiClient(() => ({ svc, tenant }))

  before(async () => {
    svc = await startTestService()
    tenant = await svc.createTenant()
  })
  after(async () => svc?.stop())

  async function keyWith(scopes: Scope[]): Promise<string> {
    const res = await call('POST', '/api-keys', { name: uniqueName('scoped'), scopes })
    assert.equal(res.status, 201, res.text)
    return res.body.key
  }

  async function audit(query: string): Promise<AuditRecord[]> {
    const res = await call('GET', `/audit?${query}`)
    assert.equal(res.status, 200, res.text)
    return res.body.data
  }

  const exportPrivate = (key: { id: string; name: string }, by?: string, extra: object = {}) =>
    call('POST', `/keys/${key.id}/export-private`, { confirm: key.name, format: 'PEM', ...extra }, by)

  function assertNoKeyMaterial(res: HttpResult) {
    assert.equal(res.body.privateKey, undefined)
    assert.doesNotMatch(res.text, /PRIVATE KEY/)
  }

  test('keys:write without keys:export cannot export a private key (403 insufficient_scope, audited)', async () => {
    const key = await createKey('Signing', 'Ed25519', { exportable: true })
    const writer = await keyWith(['keys:read', 'keys:write', 'encryption:write'])
    const res = await exportPrivate(key, writer)
    assert.equal(res.status, 403, res.text)
    assert.equal(res.body.error, 'insufficient_scope')
    assert.equal(res.body.requiredScope, 'keys:export')
    assertNoKeyMaterial(res)
    const denied = await audit('action=authorization.denied&outcome=denied')
    assert.ok(
      denied.some(
        (r) =>
          r.resource === 'POST /api/v1/keys/:keyId/export-private' &&
          r.details?.['requiredScope'] === 'keys:export',
      ),
      JSON.stringify(denied),
    )
    assert.equal((await audit(`action=keys.export_private&resource=key:${key.id}`)).length, 0, 'nothing ran')
  })

  test('keys:export cannot export a key not created exportable: 409 key_not_exportable, audited at warning level', async () => {
    const generated = await createKey('Signing', 'Ed25519')
    const created = await call('GET', `/keys/${generated.id}`)
    assert.equal(created.body.exportable, false, 'not exportable unless asked for')

    const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' })
    const imported = await call('POST', '/keys/import', {
      name: uniqueName('imported'),
      keyType: 'Signing',
      algorithm: 'EC-P256',
      format: 'PEM',
      keyMaterial: privateKey.export({ format: 'pem', type: 'pkcs8' }),
    })
    assert.equal(imported.status, 201, imported.text)
    assert.equal(imported.body.exportable, false)

    const exporter = await keyWith(['keys:export'])
    for (const key of [generated, { id: imported.body.id as string, name: imported.body.name as string }]) {
      for (const by of [exporter, tenant.key]) {
        const res = await exportPrivate(key, by)
        assert.equal(res.status, 409, res.text)
        assert.equal(res.body.error, 'key_not_exportable')
        assertNoKeyMaterial(res)
      }
      const records = await audit(`action=keys.export_private&resource=key:${key.id}`)
      assert.equal(records.length, 2)
      for (const record of records) {
        assert.equal(record.outcome, 'failure')
        assert.deepEqual(record.details, { level: 'warning', reason: 'key_not_exportable' })
      }
    }
  })

  test('an exportable key exports with keys:export alone, stays exportable after rotation, audited at warning level', async () => {
    const key = await createKey('Signing', 'Ed25519', { exportable: true })
    const rotated = await call('POST', `/keys/${key.id}/rotate`)
    assert.equal(rotated.status, 200, rotated.text)
    assert.equal(rotated.body.version, 2)
    assert.equal(rotated.body.exportable, true, 'rotation keeps the flag')

    const exporter = await keyWith(['keys:export'])
    for (const version of [1, 2]) {
      const res = await exportPrivate(key, exporter, { version })
      assert.equal(res.status, 200, res.text)
      assert.match(res.body.privateKey, /^-----BEGIN PRIVATE KEY-----\n/)
      assert.equal(res.body.version, version)
    }
    const records = await audit(`action=keys.export_private&resource=key:${key.id}`)
    assert.equal(records.length, 2)
    for (const record of records) {
      assert.equal(record.outcome, 'success')
      assert.equal(record.details?.['level'], 'warning')
    }
  })

  test('exportable cannot be changed by PATCH (400 naming the field); the flag stays as created', async () => {
    const key = await createKey('Signing', 'Ed25519')
    for (const body of [{ exportable: true }, { name: uniqueName('renamed'), exportable: true }]) {
      const res = await call('PATCH', `/keys/${key.id}`, body)
      assert.equal(res.status, 400, res.text)
      assert.match(res.body.message, /exportable/)
    }
    const after = await call('GET', `/keys/${key.id}`)
    assert.equal(after.body.exportable, false)
    assert.equal(after.body.name, key.name)
    const [row] = await svc.sql<{ exportable: boolean }[]>`SELECT exportable FROM keys WHERE id = ${key.id}`
    assert.equal(row!.exportable, false)
  })

  test('keys:write alone cannot make a key the default (create, import, PATCH): 403, each audited', async () => {
    const own = await svc.createTenant()
    const ownCall = (method: string, path: string, body: unknown, key: string) =>
      svc.request(method, `/api/v1${path}`, { key, body })
    const writer = (
      await ownCall('POST', '/api-keys', { name: 'writer', scopes: ['keys:read', 'keys:write'] }, own.key)
    ).body.key as string
    const defaultKey = await ownCall(
      'POST',
      '/keys',
      { name: 'the-default', keyType: 'Encryption', algorithm: 'ML-KEM-768', isDefault: true },
      own.key,
    )
    assert.equal(defaultKey.status, 201, defaultKey.text)

    const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 })
    const attempts: [string, string, unknown][] = [
      ['POST', '/keys', { name: 'mine', keyType: 'Encryption', algorithm: 'RSA-2048', isDefault: true }],
      [
        'POST',
        '/keys/import',
        {
          name: 'my-own-pair',
          keyType: 'Encryption',
          algorithm: 'RSA-2048',
          format: 'PEM',
          keyMaterial: privateKey.export({ format: 'pem', type: 'pkcs8' }),
          isDefault: true,
        },
      ],
    ]
    const other = await ownCall(
      'POST',
      '/keys',
      { name: 'other', keyType: 'Encryption', algorithm: 'RSA-2048' },
      own.key,
    )
    assert.equal(other.status, 201, other.text)
    attempts.push(['PATCH', `/keys/${other.body.id}`, { isDefault: true }])
    attempts.push(['PATCH', `/keys/${defaultKey.body.id}`, { isDefault: false }])

    for (const [method, path, body] of attempts) {
      const res = await ownCall(method, path, body, writer)
      assert.equal(res.status, 403, `${method} ${path}: ${res.text}`)
      assert.equal(res.body.error, 'insufficient_scope')
      assert.equal(res.body.requiredScope, 'encryption:write')
      assert.match(res.body.message, /encryption:write/)
    }
    const names = await ownKeys(own)
    assert.deepEqual(names, ['other', 'the-default'], 'neither create nor import made a key')
    const current = await ownCall('GET', `/keys/${defaultKey.body.id}`, undefined, own.key)
    assert.equal(current.body.isDefault, true, 'the default is unchanged')

    const denied = await svc.request('GET', '/api/v1/audit?action=keys.default_change&outcome=denied', {
      key: own.key,
    })
    assert.equal(denied.body.data.length, attempts.length)
    for (const record of denied.body.data as AuditRecord[]) {
      assert.equal(record.details?.['requiredScope'], 'encryption:write')
    }

    // The same writer may still create keys that are not the default, and rename the default.
    const plain = await ownCall(
      'POST',
      '/keys',
      { name: 'plain', keyType: 'HMAC', algorithm: 'HMAC-SHA256' },
      writer,
    )
    assert.equal(plain.status, 201, plain.text)
    const renamed = await ownCall(
      'PATCH',
      `/keys/${defaultKey.body.id}`,
      { isDefault: true, description: 'x' },
      writer,
    )
    assert.equal(renamed.status, 200, `isDefault unchanged needs no use scope: ${renamed.text}`)
  })

  test('keys:write with encryption:write changes the default; audited with the previous default', async () => {
    const own = await svc.createTenant()
    const ownCall = (method: string, path: string, body: unknown, key: string) =>
      svc.request(method, `/api/v1${path}`, { key, body })
    const manager = (
      await ownCall(
        'POST',
        '/api-keys',
        { name: 'manager', scopes: ['keys:read', 'keys:write', 'encryption:write'] },
        own.key,
      )
    ).body.key as string
    const first = await ownCall(
      'POST',
      '/keys',
      { name: 'first', keyType: 'Encryption', algorithm: 'RSA-2048', isDefault: true },
      manager,
    )
    assert.equal(first.status, 201, first.text)
    const second = await ownCall(
      'POST',
      '/keys',
      { name: 'second', keyType: 'Encryption', algorithm: 'RSA-2048' },
      manager,
    )
    const moved = await ownCall('PATCH', `/keys/${second.body.id}`, { isDefault: true }, manager)
    assert.equal(moved.status, 200, moved.text)
    assert.equal(moved.body.isDefault, true)

    const records = (
      await svc.request('GET', '/api/v1/audit?action=keys.default_change&outcome=success', { key: own.key })
    ).body.data as AuditRecord[]
    // Newest first.
    assert.equal(records.length, 2)
    assert.equal(records[0]!.resource, `key:${second.body.id}`)
    assert.deepEqual(records[0]!.details, {
      keyType: 'Encryption',
      isDefault: true,
      previousDefault: first.body.id,
    })
    assert.equal(records[1]!.resource, `key:${first.body.id}`)
    assert.deepEqual(records[1]!.details, { keyType: 'Encryption', isDefault: true, previousDefault: null })
  })

  async function ownKeys(own: TenantWithKey): Promise<string[]> {
    const res = await svc.request('GET', '/api/v1/keys?sort=name&order=asc', { key: own.key })
    assert.equal(res.status, 200, res.text)
    return res.body.data.map((k: { name: string }) => k.name)
  }
})
