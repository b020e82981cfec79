import assert from 'node:assert/strict'
import { X509Certificate } from 'node:crypto'
import { after, before, describe, test } from 'node:test'
import { startTestService, type TenantWithKey, type TestService } from '../helpers/service.ts'

/**
 * A CA's key signs for the CA alone. Without this, anyone allowed to sign with the tenant's keys
 * (crypto scopes, no certificates:write) could forge a certificate: hand-make a TBS naming the CA
 * as issuer and have /sign produce its signature. These tests take that path and others to the
 * same key: /sign naming the key id, an alias, the default-key rule, and a second CA on the key.
 */

let svc: TestService
let tenant: TenantWithKey

before(async () => {
  svc = await startTestService()
  tenant = await svc.createTenant()
})
after(async () => svc?.stop())

const call = (method: string, path: string, body?: unknown) =>
  svc.request(method, `/api/v1${path}`, { key: tenant.key, ...(body === undefined ? {} : { body }) })

async function created<T>(method: string, path: string, body: unknown): Promise<T> {
  const answer = await call(method, path, body)
  assert.equal(answer.status, method === 'POST' ? 201 : 200, JSON.stringify(answer.body))
  return answer.body as T
}

interface Ca {
  id: string
  keyId: string
  certificate: string
}

const root = (name: string, extra: object = {}) =>
  call('POST', '/cas', { name, type: 'root', algorithm: 'EC-P256', subject: { commonName: name }, ...extra })

describe('a CA key signs for its CA only', () => {
  test('a generated CA key is reserved, not exportable, and /sign refuses it by id, alias and as the default', async () => {
    const ca = (await root('forgery-target')).body as Ca
    const key = await created<{ reservedFor: string; exportable: boolean }>(
      'GET',
      `/keys/${ca.keyId}`,
      undefined,
    )
    assert.equal(key.reservedFor, 'pki')
    assert.equal(key.exportable, false)

    const tbs = Buffer.from('a hand-made TBSCertificate naming the CA as issuer').toString('base64')
    const direct = await call('POST', '/sign', { keyId: ca.keyId, message: tbs })
    assert.equal(direct.status, 409)
    assert.equal((direct.body as { error: string }).error, 'key_reserved')

    await created('POST', '/aliases', { alias: 'alias/the-ca', keyId: ca.keyId })
    const viaAlias = await call('POST', '/sign', { keyId: 'alias/the-ca', message: tbs })
    assert.equal(viaAlias.status, 409)
    assert.equal((viaAlias.body as { error: string }).error, 'key_reserved')

    const madeDefault = await call('PATCH', `/keys/${ca.keyId}`, { isDefault: true })
    assert.equal(madeDefault.status, 200, JSON.stringify(madeDefault.body))
    const viaDefault = await call('POST', '/sign', { message: tbs })
    assert.equal(viaDefault.status, 409)
    assert.equal((viaDefault.body as { error: string }).error, 'key_reserved')

    // Nor does the private key ever leave.
    const exported = await call('POST', `/keys/${ca.keyId}/export-private`, {
      confirm: 'pki-ca-forgery-target',
      format: 'PEM',
    })
    assert.equal(exported.status, 409)
    assert.equal((exported.body as { error: string }).error, 'key_not_exportable')

    // The CA itself still signs: a role and a leaf.
    await created('POST', `/cas/${ca.id}/roles`, {
      name: 'web',
      allowedDomains: ['example.com'],
      allowSubdomains: true,
    })
    const leaf = await created<{ certificate: string }>('POST', '/certificates', {
      caId: ca.id,
      role: 'web',
      dnsNames: ['www.example.com'],
    })
    assert.ok(new X509Certificate(leaf.certificate).verify(new X509Certificate(ca.certificate).publicKey))
  })

  test('a CA on an existing key reserves it: /sign then refuses it, and a second CA cannot take it', async () => {
    const key = await created<{ id: string; reservedFor: string | null }>('POST', '/keys', {
      name: 'bring-your-own-ca-key',
      keyType: 'Signing',
      algorithm: 'EC-P384',
    })
    assert.equal(key.reservedFor, null)
    const message = Buffer.from('before').toString('base64')
    assert.equal((await call('POST', '/sign', { keyId: key.id, message })).status, 200)

    const ca = await root('on-existing-key', { keyId: key.id, algorithm: 'EC-P384' })
    assert.equal(ca.status, 201, JSON.stringify(ca.body))
    const after = await call('POST', '/sign', { keyId: key.id, message })
    assert.equal(after.status, 409)
    assert.equal((after.body as { error: string }).error, 'key_reserved')

    const second = await root('second-on-same-key', { keyId: key.id, algorithm: 'EC-P384' })
    assert.equal(second.status, 409)
    assert.equal((second.body as { error: string }).error, 'key_reserved')
  })

  test('a key with a rotation policy cannot become a CA key until the policy is gone', async () => {
    const key = await created<{ id: string }>('POST', '/keys', {
      name: 'scheduled-signing',
      keyType: 'Signing',
      algorithm: 'EC-P256',
    })
    assert.equal((await call('POST', `/keys/${key.id}/rotation-policy`, { frequency: 'Yearly' })).status, 200)
    const refused = await root('on-scheduled-key', { keyId: key.id })
    assert.equal(refused.status, 409, refused.text)
    assert.equal((refused.body as { error: string }).error, 'key_not_reservable')
    assert.equal((await call('DELETE', `/keys/${key.id}/rotation-policy`)).status, 204)
    const accepted = await root('on-scheduled-key', { keyId: key.id })
    assert.equal(accepted.status, 201, accepted.text)
  })

  test('an exportable key cannot become a CA key', async () => {
    const key = await created<{ id: string }>('POST', '/keys', {
      name: 'exportable-signing',
      keyType: 'Signing',
      algorithm: 'EC-P256',
      exportable: true,
    })
    const refused = await root('on-exportable-key', { keyId: key.id })
    assert.equal(refused.status, 400)
    assert.match(JSON.stringify(refused.body), /keyId/)
    // Nothing was reserved on the way.
    const after = await created<{ reservedFor: string | null }>('GET', `/keys/${key.id}`, undefined)
    assert.equal(after.reservedFor, null)
  })
})
