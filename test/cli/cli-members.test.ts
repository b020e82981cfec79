import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { runCli, startTestService, type TestService } from '../helpers/service.ts'
import { type ConsoleClient, consoleClient, signIn } from '../helpers/sign-in.ts'

const REDIRECT = 'http://127.0.0.1:9/callback'

describe('kms CLI: team members', () => {
  let svc: TestService
  let client: ConsoleClient
  before(async () => {
    svc = await startTestService({ KMS_CONSOLE_REDIRECT_URIS: REDIRECT })
    client = await consoleClient(svc.baseUrl, REDIRECT)
  })
  after(async () => svc?.stop())

  test('create-member makes the account with a generated password, printed once, and the member signs in with the role', async () => {
    const tenant = await svc.createTenant()
    const made = await runCli(
      ['create-member', '--tenant', tenant.tenantId, '--email', 'ops@example.com', '--role', 'tenant:admin'],
      svc.env,
    )
    assert.equal(made.code, 0, made.stderr)
    const out = JSON.parse(made.stdout)
    assert.equal(out.role, 'tenant:admin')
    assert.equal(typeof out.password, 'string')
    const { tokens } = await signIn(svc.baseUrl, client, {
      email: 'ops@example.com',
      password: out.password,
      resource: `urn:kms:tenant:${tenant.tenantId}`,
      tokenResource: true,
    })
    const me = await svc.request('GET', '/api/v1/tenant', {
      headers: { authorization: `Bearer ${tokens.access_token}` },
    })
    assert.equal(me.body.role, 'tenant:admin')

    // An existing account joins another tenant without a new password.
    const other = await svc.createTenant()
    const again = await runCli(
      ['create-member', '--tenant', other.tenantId, '--email', 'ops@example.com', '--role', 'tenant:viewer'],
      svc.env,
    )
    assert.equal(again.code, 0, again.stderr)
    assert.equal(JSON.parse(again.stdout).password, undefined)
  })

  test('reset-member-password: the old password stops working, the printed one works', async () => {
    const tenant = await svc.createTenant()
    const made = JSON.parse(
      (
        await runCli(
          [
            'create-member',
            '--tenant',
            tenant.tenantId,
            '--email',
            'reset@example.com',
            '--role',
            'tenant:viewer',
          ],
          svc.env,
        )
      ).stdout,
    )
    const reset = await runCli(['reset-member-password', '--email', 'reset@example.com'], svc.env)
    assert.equal(reset.code, 0, reset.stderr)
    const { password } = JSON.parse(reset.stdout)
    assert.notEqual(password, made.password)
    await assert.rejects(
      signIn(svc.baseUrl, client, { email: 'reset@example.com', password: made.password }),
      /not right/,
    )
    const { tokens } = await signIn(svc.baseUrl, client, { email: 'reset@example.com', password })
    assert.ok(tokens.id_token)
  })

  test('bad input: an unknown role or address is a one-line error with a non-zero exit', async () => {
    const tenant = await svc.createTenant()
    const badRole = await runCli(
      ['create-member', '--tenant', tenant.tenantId, '--email', 'x@example.com', '--role', 'tenant:god'],
      svc.env,
    )
    assert.equal(badRole.code, 2)
    assert.match(badRole.stderr, /--role must be one of/)
    const unknown = await runCli(['reset-member-password', '--email', 'nobody@example.com'], svc.env)
    assert.equal(unknown.code, 1)
    assert.match(unknown.stderr, /no team account/)
  })
})
