import assert from 'node:assert/strict'
import { generateKeyPairSync } from 'node:crypto'
import { after, before, describe, test } from 'node:test'
import { apiClient, b64, uniqueName } from '../helpers/api-client.ts'
import { startTestService, type TenantWithKey, type TestService } from '../helpers/service.ts'

/**
 * Issue 15, defect 9 (keys and encryption): a refused key import leaves a record (reason code,
 * never the material or password), and a refused encryption through the tenant default key is
 * recorded against the key it resolved to, not against nothing.
 */

interface AuditRecord {
  action: string
  resource: string | null
  keyVersion: number | null
  outcome: string
  details: Record<string, unknown> | null
}

describe('audit gaps: failed imports and default-key failures (issue 15, defect 9)', () => {
  let svc: TestService
  let tenant: TenantWithKey
  const { call, createKey } = apiClient(() => ({ svc, tenant }))

  before(async () => {
    svc = await startTestService()
  })
  after(async () => svc?.stop())

  async function records(query: string, by = tenant): Promise<AuditRecord[]> {
    const res = await call('GET', `/audit?${query}`, undefined, by)
    assert.equal(res.status, 200, res.text)
    return res.body.data
  }

  test('a failed import writes a failure record with the reason, never the material or the password', async () => {
    tenant = await svc.createTenant()
    const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' })
    const password = 'import-password-marker'
    const encrypted = privateKey.export({
      format: 'pem',
      type: 'pkcs8',
      cipher: 'aes-256-cbc',
      passphrase: password,
    }) as string
    const plain = privateKey.export({ format: 'pem', type: 'pkcs8' }) as string
    const base = { keyType: 'Signing', algorithm: 'EC-P256', format: 'PEM' }
    const attempts = [
      {
        ...base,
        name: uniqueName('wrong-password'),
        keyMaterial: encrypted,
        password: 'not-the-password-marker',
      },
      {
        ...base,
        name: uniqueName('garbage'),
        keyMaterial: '-----BEGIN PRIVATE KEY-----\nZ2FyYmFnZQ==\n-----END PRIVATE KEY-----\n',
      },
      { ...base, name: uniqueName('wrong-curve'), algorithm: 'EC-P384', keyMaterial: plain },
    ]
    const codes: string[] = []
    for (const body of attempts) {
      const res = await call('POST', '/keys/import', body)
      assert.equal(res.status, 400, res.text)
      codes.push(res.body.error)
    }
    const failures = (await records('action=keys.import&outcome=failure')).reverse()
    assert.equal(failures.length, attempts.length)
    for (const [i, record] of failures.entries()) {
      assert.equal(record.resource, null, 'no key was made')
      assert.equal(record.details?.['reason'], codes[i])
      assert.equal(record.details?.['format'], 'PEM')
      assert.equal(record.details?.['algorithm'], attempts[i]!.algorithm)
    }
    const stored = JSON.stringify(
      await svc.sql`SELECT * FROM audit_log WHERE tenant_id = ${tenant.tenantId} AND action = 'keys.import'`,
    )
    for (const secret of [password, 'not-the-password-marker', 'Z2FyYmFnZQ', plain.split('\n')[1]!]) {
      assert.ok(!stored.includes(secret), `the audit log does not contain ${secret.slice(0, 12)}...`)
    }
  })

  test('a refused import as the default (scope) is recorded too', async () => {
    tenant = await svc.createTenant()
    const writer = await call('POST', '/api-keys', { name: 'writer', scopes: ['keys:write'] })
    const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' })
    const res = await call(
      'POST',
      '/keys/import',
      {
        name: 'default-attempt',
        keyType: 'Signing',
        algorithm: 'EC-P256',
        format: 'PEM',
        keyMaterial: privateKey.export({ format: 'pem', type: 'pkcs8' }),
        isDefault: true,
      },
      writer.body.key,
    )
    assert.equal(res.status, 403, res.text)
    const [failure] = await records('action=keys.import&outcome=failure')
    assert.equal(failure?.details?.['reason'], 'insufficient_scope')
  })

  test('a refused encrypt or data key through the default key names the key it resolved to', async () => {
    tenant = await svc.createTenant()
    const key = await createKey('Encryption', 'ML-KEM-768', { isDefault: true })
    const ok = await call('POST', '/encrypt', { plaintext: b64('before') })
    assert.equal(ok.status, 200, ok.text)
    assert.equal(ok.body.keyId, key.id)
    const revoked = await call('POST', `/keys/${key.id}/revoke`)
    assert.equal(revoked.status, 200, revoked.text)
    assert.equal(revoked.body.isDefault, true, 'a revoked key stays the default until another is chosen')

    const encrypt = await call('POST', '/encrypt', { plaintext: b64('after') })
    assert.equal(encrypt.status, 409, encrypt.text)
    const dataKey = await call('POST', '/generate-data-key', {})
    assert.equal(dataKey.status, 409, dataKey.text)

    for (const action of ['crypto.encrypt', 'crypto.generate_data_key']) {
      const [failure] = await records(`action=${action}&outcome=failure`)
      assert.ok(failure, `${action}: a failure record`)
      assert.equal(failure.resource, `key:${key.id}`, `${action}: the default key, not null`)
      assert.equal(failure.details?.['error'], encrypt.body.error)
    }
  })

  test('with no default key at all, the failure names no key', async () => {
    tenant = await svc.createTenant()
    const res = await call('POST', '/encrypt', { plaintext: b64('x') })
    assert.equal(res.status, 409, res.text)
    assert.equal(res.body.error, 'no_default_key')
    const [failure] = await records('action=crypto.encrypt&outcome=failure')
    assert.equal(failure?.resource, null)
    assert.equal(failure?.details?.['error'], 'no_default_key')
  })
})
