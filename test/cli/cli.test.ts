import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { runCli, startTestService, type TestService } from '../helpers/service.ts'

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

  test('no command prints the usage on stderr and exits 2; help prints it on stdout and exits 0', async () => {
    const bare = await runCli([], svc.env)
    assert.equal(bare.code, 2)
    assert.equal(bare.stdout, '')
    assert.equal(bare.stderr.split('\n')[0], 'kms: no command given')
    assert.match(bare.stderr, /Usage: npm run kms-admin -- <command>/)
    const help = await runCli(['help'], svc.env)
    assert.equal(help.code, 0)
    assert.match(help.stdout, /^Usage: npm run kms-admin -- <command>/)
    assert.equal(help.stderr, '')
  })

  test('tenant names are unique ignoring case: a second create-tenant fails with tenant_name_taken, exit 1', async () => {
    const first = await runCli(['create-tenant', '--name', 'Globex'], svc.env)
    assert.equal(first.code, 0, first.stderr)
    for (const name of ['Globex', 'globex']) {
      const again = await runCli(['create-tenant', '--name', name], svc.env)
      assert.equal(again.code, 1)
      assert.equal(again.stdout, '')
      assert.match(again.stderr, /^kms: tenant_name_taken: A tenant named "\w+" already exists/)
      assert.equal(again.stderr.trim().split('\n').length, 1, 'one line')
    }
    const [row] = await svc.sql`SELECT count(*)::int AS n FROM tenants WHERE lower(name) = 'globex'`
    assert.equal(row!['n'], 1)
  })

  test('list-tenants and list-api-keys print the same {data, total} shape with camelCase fields', async () => {
    const made = await runCli(['create-tenant', '--name', 'shape-check'], svc.env)
    const created = JSON.parse(made.stdout)
    const tenants = await runCli(['list-tenants'], svc.env)
    assert.equal(tenants.code, 0, tenants.stderr)
    const keys = await runCli(['list-api-keys', '--tenant', created.tenantId], svc.env)
    assert.equal(keys.code, 0, keys.stderr)
    const t = JSON.parse(tenants.stdout)
    const k = JSON.parse(keys.stdout)
    assert.deepEqual(Object.keys(t).sort(), ['data', 'total'])
    assert.deepEqual(Object.keys(k).sort(), ['data', 'total'])
    assert.equal(t.total, t.data.length)
    assert.equal(k.total, k.data.length)
    const tenant = t.data.find((x: { id: string }) => x.id === created.tenantId)
    assert.deepEqual(tenant, { id: created.tenantId, name: 'shape-check', createdAt: created.createdAt })
    assert.ok(k.data.every((x: Record<string, unknown>) => 'createdAt' in x && !('created_at' in x)))
  })

  test('an unreachable database (exit 1) or a bad setting (exit 2): one line on stderr naming the cause', async () => {
    const unreachable = await runCli(['list-tenants'], {
      ...svc.env,
      DATABASE_URL: 'postgres://kms:hunter2-secret@127.0.0.1:1/kms',
    })
    assert.equal(unreachable.code, 1)
    assert.equal(
      unreachable.stderr,
      'kms: cannot reach the database at 127.0.0.1:1 (ECONNREFUSED): check DATABASE_URL and that PostgreSQL is running\n',
    )
    const badConfig = await runCli(['list-tenants'], { ...svc.env, PORT: 'eighty' })
    assert.equal(badConfig.code, 2, 'wrong input from the operator, as a wrong command line')
    assert.equal(
      badConfig.stderr,
      'kms: configuration error: PORT must be an integer between 0 and 65535, got "eighty"\n',
    )
  })

  test('bad input fails with a message and a non-zero exit code', async () => {
    const unknownScope = await runCli(
      [
        'create-api-key',
        '--tenant',
        '00000000-0000-4000-8000-000000000000',
        '--name',
        'n',
        '--scopes',
        'nope',
      ],
      svc.env,
    )
    assert.equal(unknownScope.code, 2)
    assert.match(unknownScope.stderr, /unknown scope/)
    const missing = await runCli(['create-tenant'], svc.env)
    assert.equal(missing.code, 2)
    assert.match(missing.stderr, /--name is required/)
    const unknownCommand = await runCli(['frobnicate'], svc.env)
    assert.equal(unknownCommand.code, 2)
    assert.equal(unknownCommand.stderr.split('\n')[0], 'kms: unknown command "frobnicate"')
    const unknownOption = await runCli(['list-tenants', '--colour'], svc.env)
    assert.equal(unknownOption.code, 2)
    assert.match(unknownOption.stderr.split('\n')[0]!, /^kms: Unknown option '--colour'/)
    const badId = await runCli(['list-api-keys', '--tenant', 'acme'], svc.env)
    assert.equal(badId.code, 2)
    assert.equal(badId.stderr.split('\n')[0], 'kms: --tenant must be a UUID, got "acme"')
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
