import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { createPrivateKey, createPublicKey } from 'node:crypto'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { startTestService, type TenantWithKey, type TestService } from '../helpers/service.ts'

/**
 * Issue 15, defect 8: a password-protected private export used node's default PBKDF2 with
 * 2,048 iterations. It is now PBES2 with PBKDF2-HMAC-SHA256 at 600,000 iterations (OWASP 2023)
 * and AES-256-CBC, checked here by the openssl CLI (asn1parse shows the parameters, pkcs8
 * decrypts), by node's createPrivateKey and by the service's own import; passwords are at least
 * 12 characters.
 */

const PASSWORD = 'export-pass-phrase-9d2e'

function openssl(args: string[], input: string | Buffer): string {
  return execFileSync('openssl', args, { input, stdio: ['pipe', 'pipe', 'pipe'] }).toString()
}

describe('password-protected private export', () => {
  let svc: TestService
  let tenant: TenantWithKey
  let keyId: string
  let publicPem: string
  let dir: string
  const name = 'exported-p256'

  before(async () => {
    svc = await startTestService()
    tenant = await svc.createTenant()
    dir = mkdtempSync(join(tmpdir(), 'kms-export-'))
    const created = await svc.request('POST', '/api/v1/keys', {
      key: tenant.key,
      body: { name, keyType: 'Signing', algorithm: 'EC-P256', exportable: true },
    })
    assert.equal(created.status, 201, created.text)
    keyId = created.body.id
    const pub = await svc.request('GET', `/api/v1/keys/${keyId}/public?format=PEM`, { key: tenant.key })
    assert.equal(pub.status, 200, pub.text)
    publicPem = pub.body.publicKey
  })
  after(async () => {
    if (dir) rmSync(dir, { recursive: true, force: true })
    await svc?.stop()
  })

  const exportPrivate = (body: Record<string, unknown>) =>
    svc.request('POST', `/api/v1/keys/${keyId}/export-private`, {
      key: tenant.key,
      body: { confirm: name, ...body },
    })

  /** The PBES2 parameters as `openssl asn1parse` prints them. */
  function assertPbes2Parameters(pem: string): void {
    const parsed = openssl(['asn1parse'], pem)
    assert.match(parsed, /OBJECT\s+:PBES2/)
    assert.match(parsed, /OBJECT\s+:PBKDF2/)
    assert.match(parsed, /OBJECT\s+:hmacWithSHA256/)
    assert.match(parsed, /OBJECT\s+:aes-256-cbc/)
    const iterations = /prim: INTEGER\s+:([0-9A-F]+)/.exec(parsed)
    assert.ok(iterations, parsed)
    assert.ok(Number.parseInt(iterations[1]!, 16) >= 600_000, `iteration count ${iterations[1]} (hex)`)
  }

  test('PEM: PBES2 with PBKDF2-HMAC-SHA256 >= 600,000 iterations and AES-256-CBC; openssl, node and the import all open it', async () => {
    const pool = svc.api.services.cryptoPool
    const tasksBefore = pool.completedTasks()
    const res = await exportPrivate({ format: 'PEM', password: PASSWORD })
    assert.equal(res.status, 200, res.text)
    assert.equal(res.body.encrypted, true)
    assert.equal(pool.completedTasks(), tasksBefore + 1, 'the KDF ran in the crypto pool, off the event loop')
    const pem: string = res.body.privateKey
    assert.ok(pem.startsWith('-----BEGIN ENCRYPTED PRIVATE KEY-----\n'))
    assertPbes2Parameters(pem)

    const file = join(dir, 'key.pem')
    writeFileSync(file, pem)
    const decrypted = openssl(['pkcs8', '-in', file, '-passin', `pass:${PASSWORD}`], '')
    assert.match(decrypted, /^-----BEGIN PRIVATE KEY-----/)
    assert.equal(openssl(['pkey', '-pubout'], decrypted), publicPem, 'openssl derives the public key')
    assert.throws(() => openssl(['pkcs8', '-in', file, '-passin', 'pass:not-the-password'], ''))

    const opened = createPrivateKey({ key: pem, format: 'pem', passphrase: PASSWORD })
    assert.equal(createPublicKey(opened).export({ format: 'pem', type: 'spki' }), publicPem)

    const imported = await svc.request('POST', '/api/v1/keys/import', {
      key: tenant.key,
      body: {
        name: 'round-trip',
        keyType: 'Signing',
        algorithm: 'EC-P256',
        format: 'PEM',
        keyMaterial: pem,
        password: PASSWORD,
      },
    })
    assert.equal(imported.status, 201, imported.text)
    const importedPublic = await svc.request('GET', `/api/v1/keys/${imported.body.id}/public?format=PEM`, {
      key: tenant.key,
    })
    assert.equal(importedPublic.body.publicKey, publicPem, 'the round trip keeps the key')
  })

  test('DER: the same structure, Base64', async () => {
    const res = await exportPrivate({ format: 'DER', password: PASSWORD })
    assert.equal(res.status, 200, res.text)
    const der = Buffer.from(res.body.privateKey, 'base64')
    const pem = `-----BEGIN ENCRYPTED PRIVATE KEY-----\n${der.toString('base64').replace(/(.{64})/g, '$1\n')}\n-----END ENCRYPTED PRIVATE KEY-----\n`
    assertPbes2Parameters(pem)
    const opened = createPrivateKey({ key: der, format: 'der', type: 'pkcs8', passphrase: PASSWORD })
    assert.equal(createPublicKey(opened).export({ format: 'pem', type: 'spki' }), publicPem)
  })

  test('a password shorter than 12 characters is 400 naming body/password', async () => {
    const res = await exportPrivate({ format: 'PEM', password: 'elevenchars' })
    assert.equal(res.status, 400, res.text)
    assert.equal(res.body.error, 'validation_failed')
    assert.match(res.body.message, /body\/password/)
    assert.match(res.body.message, /12 characters/)
    assert.ok(!res.text.includes('elevenchars'), 'the password is not echoed')
  })
})
