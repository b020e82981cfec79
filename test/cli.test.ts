import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { runCli, startTestService, type TestService } from './helpers/service.ts'

describe('kms CLI', () => {
  let svc: TestService
  before(async () => {
    svc = await startTestService()
  })
  after(async () => svc?.stop())

  test('create-tenant prints the tenant id and a working full-scope key as JSON', async () => {
    const result = await runCli(['create-tenant', '--name', 'acme'], svc.env)
    assert.equal(result.code, 0, result.stderr)
    const out = JSON.parse(result.stdout)
    assert.match(out.tenantId, /^[0-9a-f-]{36}$/)
    assert.equal(out.name, 'acme')
    assert.match(out.apiKey.key, /^kms_[A-Za-z0-9]{52}$/)
    const me = await svc.request('GET', '/api/v1/tenant', { key: out.apiKey.key })
    assert.equal(me.status, 200)
    assert.equal(me.body.id, out.tenantId)
    assert.equal(me.body.scopes.length, out.apiKey.scopes.length)
  })

  test('create-api-key grants exactly the chosen scopes; list and revoke; revocation reaches the service', async () => {
    const tenant = await svc.createTenant()
    const made = await runCli(
      ['create-api-key', '--tenant', tenant.tenantId, '--name', 'reader', '--scopes', 'audit:read'],
      svc.env,
    )
    assert.equal(made.code, 0, made.stderr)
    const key = JSON.parse(made.stdout)
    assert.deepEqual(key.scopes, ['audit:read'])
    assert.equal((await svc.request('GET', '/api/v1/audit', { key: key.key })).status, 200)
    assert.equal((await svc.request('GET', '/api/v1/api-keys', { key: key.key })).status, 403)

    const listed = await runCli(['list-api-keys', '--tenant', tenant.tenantId], svc.env)
    assert.equal(listed.code, 0, listed.stderr)
    const names = JSON.parse(listed.stdout).data.map((k: { name: string }) => k.name)
    assert.ok(names.includes('reader'))
    assert.ok(!listed.stdout.includes(key.key), 'a listing never shows a key')

    const revoked = await runCli(['revoke-api-key', '--tenant', tenant.tenantId, '--id', key.id], svc.env)
    assert.equal(revoked.code, 0, revoked.stderr)
    assert.ok(JSON.parse(revoked.stdout).revokedAt)
    // The CLI is another process: the running service learns of it through Redis.
    const deadline = Date.now() + 1000
    let status = 200
    while (Date.now() < deadline && status !== 401) {
      status = (await svc.request('GET', '/api/v1/audit', { key: key.key })).status
    }
    assert.equal(status, 401)

    const audit =
      await svc.sql`SELECT actor, action FROM audit_log WHERE resource = ${`apikey:${key.id}`} ORDER BY id`
    assert.deepEqual(
      audit.map((r) => `${r['actor']} ${r['action']}`),
      ['cli apikeys.create', 'cli apikeys.revoke'],
    )
  })

  test('bad input fails with a message and a non-zero exit code', async () => {
    const unknownScope = await runCli(
      ['create-api-key', '--tenant', 'x', '--name', 'n', '--scopes', 'nope'],
      svc.env,
    )
    assert.equal(unknownScope.code, 2)
    assert.match(unknownScope.stderr, /unknown scope/)
    const missing = await runCli(['create-tenant'], svc.env)
    assert.equal(missing.code, 2)
    assert.match(missing.stderr, /--name is required/)
    const unknownCommand = await runCli(['frobnicate'], svc.env)
    assert.equal(unknownCommand.code, 2)
    const noTenant = await runCli(
      [
        'create-api-key',
        '--tenant',
        '00000000-0000-4000-8000-000000000000',
        '--name',
        'n',
        '--scopes',
        'audit:read',
      ],
      svc.env,
    )
    assert.equal(noTenant.code, 1)
    assert.match(noTenant.stderr, /no such tenant/)
  })
})
