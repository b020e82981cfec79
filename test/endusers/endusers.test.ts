import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import * as oidc from 'openid-client'
import { applicationClient, choosePassword, endUserWithPassword, linkMailedTo } from '../helpers/endusers.ts'
import { verifyAgainstJwks } from '../helpers/jwks.ts'
import { manualClock } from '../helpers/manual-clock.ts'
import { type AuditView, startTestService, type TestService } from '../helpers/service.ts'
import {
  type ConsoleClient,
  CookieJar,
  consoleClient,
  csrfOf,
  follow,
  formActionOf,
  memberSession,
  page,
  signIn,
} from '../helpers/sign-in.ts'
import { startSmtp, type TestSmtp } from '../helpers/smtp.ts'

const CONSOLE_REDIRECT = 'http://127.0.0.1:9/console'
const APP_REDIRECT = 'http://127.0.0.1:9/app-callback'
const RESOURCE = 'https://api.example.com/orders'

async function auditOf(service: TestService, key: string, action: string): Promise<AuditView[]> {
  const result = await service.request('GET', `/api/v1/audit?action=${encodeURIComponent(action)}`, { key })
  assert.equal(result.status, 200, result.text)
  return result.body.data as AuditView[]
}

/** openid-client reports a 401 from the token endpoint as a WWW-Authenticate challenge. */
const invalidClient = (err: { error?: string; cause?: Array<{ parameters?: { error?: string } }> }) =>
  err.error === 'invalid_client' || err.cause?.[0]?.parameters?.error === 'invalid_client'

const claimsOf = (jwt: string) =>
  JSON.parse(Buffer.from(jwt.split('.')[1]!, 'base64url').toString()) as Record<string, unknown>

describe('end-users, applications as clients, roles', () => {
  let smtp: TestSmtp
  let service: TestService
  let console_: ConsoleClient

  before(async () => {
    smtp = await startSmtp('accept')
    service = await startTestService(
      {
        KMS_SMTP_URL: smtp.url,
        KMS_SMTP_ATTEMPTS: '1',
        KMS_SMTP_TIMEOUT_MS: '2000',
        KMS_CONSOLE_REDIRECT_URIS: CONSOLE_REDIRECT,
        KMS_JOB_SWEEP_MS: '200',
      },
      { jobs: true },
    )
    console_ = await consoleClient(service.baseUrl, CONSOLE_REDIRECT)
  })
  after(async () => {
    await service.stop()
    await smtp.stop()
  })

  async function createApp(key: string | { authorization: string }, body: Record<string, unknown> = {}) {
    const created = await service.request('POST', '/api/v1/applications', {
      ...(typeof key === 'string' ? { key } : { headers: key }),
      body: { name: 'Orders', applicationType: 'spa', redirectUris: [APP_REDIRECT], ...body },
    })
    assert.equal(created.status, 201, created.text)
    return created.body as { id: string; clientId: string; clientSecret?: string }
  }

  test('a team member who registers an application joins its end-user list, audited, in the same transaction', async () => {
    const tenant = await service.createTenant()
    const developer = await memberSession(service, console_, tenant.tenantId, 'tenant:developer')
    const app = await createApp(developer.headers)
    const list = await service.request('GET', `/api/v1/endusers?applicationId=${app.id}`, { key: tenant.key })
    assert.equal(list.status, 200, list.text)
    assert.equal(list.body.total, 1)
    const [creator] = list.body.data
    assert.equal(creator.email, developer.email)
    assert.equal(creator.source, 'app_creator')
    assert.deepEqual(creator.applicationIds, [app.id])
    const audit = await auditOf(service, tenant.key, 'endusers.create.auto_from_app_creator')
    assert.equal(audit.length, 1)
    assert.equal(audit[0]!.actor, `member:${developer.accountId}`)
    assert.equal(audit[0]!.resource, `enduser:${creator.id}`)
    assert.deepEqual(audit[0]!.details, { applicationId: app.id, newEndUser: true })

    // A second application: the same end-user joins its list too.
    const second = await createApp(developer.headers, { name: 'Billing' })
    const again = await service.request('GET', `/api/v1/endusers/${creator.id}`, { key: tenant.key })
    assert.deepEqual(new Set(again.body.applicationIds), new Set([app.id, second.id]))
    assert.equal((await service.request('GET', '/api/v1/endusers', { key: tenant.key })).body.total, 1)

    // An API key is no person: nobody is added.
    const byKey = await createApp(tenant.key, { name: 'Machine-made' })
    const none = await service.request('GET', `/api/v1/endusers?applicationId=${byKey.id}`, {
      key: tenant.key,
    })
    assert.equal(none.body.total, 0)

    // The list write fails: the application is not created either (one transaction).
    await service.sql.unsafe(`
      CREATE FUNCTION fail_enduser_apps() RETURNS trigger LANGUAGE plpgsql AS
        $$ BEGIN RAISE EXCEPTION 'injected failure'; END $$;
      CREATE TRIGGER fail_enduser_apps BEFORE INSERT ON enduser_applications
        FOR EACH ROW EXECUTE FUNCTION fail_enduser_apps();`)
    try {
      const failed = await service.request('POST', '/api/v1/applications', {
        headers: developer.headers,
        body: { name: 'Doomed', applicationType: 'spa', redirectUris: [APP_REDIRECT] },
      })
      assert.ok(failed.status >= 500, `${failed.status} ${failed.text}`)
    } finally {
      await service.sql.unsafe(
        'DROP TRIGGER fail_enduser_apps ON enduser_applications; DROP FUNCTION fail_enduser_apps();',
      )
    }
    const apps = await service.request('GET', '/api/v1/applications', { key: tenant.key })
    assert.deepEqual(apps.body.data.map((a: { name: string }) => a.name).sort(), [
      'Billing',
      'Machine-made',
      'Orders',
    ])
  })

  test('create-without-password e-mails a set-up link; the page sets the password; sign-in to the application gives tokens with the declared resource as aud and the roles', async () => {
    const tenant = await service.createTenant()
    const app = await createApp(tenant.key, { resources: [RESOURCE] })
    const email = `ada-${Date.now()}@example.com`
    const created = await service.request('POST', '/api/v1/endusers/create-without-password', {
      key: tenant.key,
      body: { email, displayName: 'Ada', applicationId: app.id },
    })
    assert.equal(created.status, 201, created.text)
    assert.equal(created.body.hasPassword, false)
    assert.equal(created.body.setupLink.emailDispatchStatus, 'queued')
    assert.equal(created.body.setupLink.userId, created.body.id)
    assert.ok(!created.text.includes('token='), 'the link is only in the e-mail')
    const link = await linkMailedTo(smtp, email)
    assert.equal(link.pathname, '/set-up-account')
    assert.equal(link.searchParams.get('userId'), created.body.id)
    assert.equal(link.searchParams.get('applicationId'), app.id)

    // The page checks the password against the tenant's policy, and that both fields agree.
    assert.equal((await choosePassword(link, 'long enough password', 'another one here')).status, 400)
    const weak = await choosePassword(link, 'short')
    assert.equal(weak.status, 400)
    assert.match(weak.html, /at least 12 characters/)
    const password = 'a long enough password'
    const saved = await choosePassword(link, password)
    assert.equal(saved.status, 200, saved.html.slice(0, 400))
    assert.equal((await choosePassword(link, password)).status, 400, 'the link works once')
    const user = await service.request('GET', `/api/v1/endusers/${created.body.id}`, { key: tenant.key })
    assert.equal(user.body.hasPassword, true)

    const role = await service.request('POST', '/api/v1/roles', {
      key: tenant.key,
      body: { applicationId: app.id, name: 'editor', permissions: ['orders:read', 'orders:write'] },
    })
    assert.equal(role.status, 201, role.text)
    const assigned = await service.request(
      'PUT',
      `/api/v1/endusers/${created.body.id}/roles/${role.body.id}`,
      {
        key: tenant.key,
      },
    )
    assert.equal(assigned.status, 200, assigned.text)
    assert.deepEqual(
      assigned.body.data.map((r: { name: string }) => r.name),
      ['editor'],
    )

    const client = await applicationClient(service.baseUrl, app.clientId, APP_REDIRECT)
    const { tokens } = await signIn(service.baseUrl, client, {
      email,
      password,
      resource: RESOURCE,
      tokenResource: true,
      scope: 'openid email profile',
    })
    const access = await verifyAgainstJwks(service.baseUrl, tokens.access_token)
    assert.equal(access.claims['aud'], RESOURCE)
    assert.equal(access.claims['sub'], created.body.id)
    assert.equal(access.claims['client_id'], app.clientId)
    assert.deepEqual(access.claims['roles'], ['editor'])
    const id = await verifyAgainstJwks(service.baseUrl, tokens.id_token!)
    assert.deepEqual(id.claims['roles'], ['editor'])
    assert.equal(id.claims['aud'], app.clientId)
    // The application's token is not a key to the tenant's admin API.
    const admin = await service.request('GET', '/api/v1/tenant', {
      headers: { authorization: `Bearer ${tokens.access_token}` },
    })
    assert.equal(admin.status, 401)

    // A role taken away leaves the next token without it.
    await service.request('DELETE', `/api/v1/endusers/${created.body.id}/roles/${role.body.id}`, {
      key: tenant.key,
    })
    const refreshed = await oidc.refreshTokenGrant(client.config, tokens.refresh_token!, {
      resource: RESOURCE,
    })
    assert.deepEqual(claimsOf(refreshed.access_token)['roles'], [])
  })

  test('a resource the application did not declare is refused with invalid_target; urn:kms: resources cannot be declared', async () => {
    const tenant = await service.createTenant()
    const app = await createApp(tenant.key, { resources: [RESOURCE] })
    const client = await applicationClient(service.baseUrl, app.clientId, APP_REDIRECT)
    for (const resource of ['https://api.example.com/other', `urn:kms:tenant:${tenant.tenantId}`]) {
      const url = oidc.buildAuthorizationUrl(client.config, {
        redirect_uri: APP_REDIRECT,
        scope: 'openid',
        code_challenge: await oidc.calculatePKCECodeChallenge(oidc.randomPKCECodeVerifier()),
        code_challenge_method: 'S256',
        resource,
        state: 's',
      })
      const reached = await follow(new CookieJar(), service.baseUrl, url.toString(), APP_REDIRECT)
      assert.ok(reached.callback, `the browser goes back to the application for ${resource}`)
      assert.equal(reached.callback.searchParams.get('error'), 'invalid_target', resource)
    }
    const reserved = await service.request('POST', '/api/v1/applications', {
      key: tenant.key,
      body: {
        name: 'Sneaky',
        applicationType: 'spa',
        redirectUris: [APP_REDIRECT],
        resources: [`urn:kms:tenant:${tenant.tenantId}`],
      },
    })
    assert.equal(reserved.status, 400)
    assert.equal(reserved.body.fields[0].path, 'body/resources/0')
  })

  test('realms: a team member cannot sign in to an application, and a console session is not an application session', async () => {
    const tenant = await service.createTenant()
    const member = await memberSession(service, console_, tenant.tenantId, 'tenant:admin')
    const app = await createApp(tenant.key)
    const client = await applicationClient(service.baseUrl, app.clientId, APP_REDIRECT)
    // The member's team password at the application's sign-in: the tenant realm has no such password.
    await assert.rejects(
      signIn(service.baseUrl, client, { email: member.email, password: member.password, scope: 'openid' }),
      /sign-in did not continue \(401\)/,
    )
    // Signed in at the console, then sent to the application: the application asks for its own sign-in.
    const consoleSession = await signIn(service.baseUrl, console_, {
      email: member.email,
      password: member.password,
      scope: 'openid',
    })
    const url = oidc.buildAuthorizationUrl(client.config, {
      redirect_uri: APP_REDIRECT,
      scope: 'openid',
      code_challenge: await oidc.calculatePKCECodeChallenge(oidc.randomPKCECodeVerifier()),
      code_challenge_method: 'S256',
      state: 's',
    })
    const reached = await follow(consoleSession.jar, service.baseUrl, url.toString(), APP_REDIRECT)
    assert.equal(reached.callback, undefined, 'no code for the member’s session')
    assert.match(reached.page!.html, /name="password"/)
  })

  test('confidential applications authenticate with their secret; machine-to-machine gets client-credentials tokens for its resource', async () => {
    const tenant = await service.createTenant()
    const web = await createApp(tenant.key, { applicationType: 'traditional' })
    assert.ok(web.clientSecret)
    const user = await endUserWithPassword(service, smtp, tenant.key, web.id)
    const good = await applicationClient(service.baseUrl, web.clientId, APP_REDIRECT, web.clientSecret)
    const { tokens } = await signIn(service.baseUrl, good, {
      email: user.email,
      password: user.password,
      scope: 'openid',
    })
    assert.ok(tokens.id_token)
    const bad = await applicationClient(service.baseUrl, web.clientId, APP_REDIRECT, 'cs_wrong')
    await assert.rejects(
      signIn(service.baseUrl, bad, { email: user.email, password: user.password, scope: 'openid' }),
      invalidClient,
    )
    // Rotation: the old secret stops working at once.
    const rotated = await service.request('POST', `/api/v1/applications/${web.id}/rotate-secret`, {
      key: tenant.key,
    })
    assert.equal(rotated.status, 200)
    await assert.rejects(
      signIn(service.baseUrl, good, { email: user.email, password: user.password, scope: 'openid' }),
      invalidClient,
    )

    const machine = await createApp(tenant.key, {
      applicationType: 'machine_to_machine',
      redirectUris: [],
      resources: [RESOURCE],
    })
    const m2m = await applicationClient(service.baseUrl, machine.clientId, APP_REDIRECT, machine.clientSecret)
    const granted = await oidc.clientCredentialsGrant(m2m.config, { resource: RESOURCE })
    const claims = (await verifyAgainstJwks(service.baseUrl, granted.access_token)).claims
    assert.equal(claims['aud'], RESOURCE)
    assert.equal(claims['client_id'], machine.clientId)
  })

  test('the provider sees an application change at once: a new redirect URI works, a deleted application is unknown', async () => {
    const tenant = await service.createTenant()
    const app = await createApp(tenant.key)
    const user = await endUserWithPassword(service, smtp, tenant.key, app.id)
    const later = 'http://127.0.0.1:9/later-callback'
    const client = await applicationClient(service.baseUrl, app.clientId, later)
    await assert.rejects(
      signIn(service.baseUrl, client, { email: user.email, password: user.password, scope: 'openid' }),
      'an unregistered redirect URI is refused',
    )
    const put = await service.request('PUT', `/api/v1/applications/${app.id}`, {
      key: tenant.key,
      body: { name: 'Orders', redirectUris: [APP_REDIRECT, later] },
    })
    assert.equal(put.status, 200, put.text)
    const { tokens } = await signIn(service.baseUrl, client, {
      email: user.email,
      password: user.password,
      scope: 'openid',
    })
    assert.ok(tokens.id_token)
    assert.equal(
      (await service.request('DELETE', `/api/v1/applications/${app.id}`, { key: tenant.key })).status,
      204,
    )
    await assert.rejects(oidc.refreshTokenGrant(client.config, tokens.refresh_token!), invalidClient)
  })

  test('block ends the sessions and refuses sign-in; unblock restores it; both idempotent', async () => {
    const tenant = await service.createTenant()
    const app = await createApp(tenant.key)
    const user = await endUserWithPassword(service, smtp, tenant.key, app.id)
    const client = await applicationClient(service.baseUrl, app.clientId, APP_REDIRECT)
    const { tokens } = await signIn(service.baseUrl, client, {
      email: user.email,
      password: user.password,
      scope: 'openid',
    })

    for (let i = 0; i < 2; i++) {
      const blocked = await service.request('POST', `/api/v1/endusers/${user.id}/block`, { key: tenant.key })
      assert.equal(blocked.status, 200, blocked.text)
      assert.equal(blocked.body.status, 'blocked')
      assert.ok(blocked.body.blockedAt)
    }
    assert.equal((await auditOf(service, tenant.key, 'endusers.block')).length, 1, 'one change, one record')
    assert.equal((await service.api.services.accounts.get(user.id))?.disabled, true)
    await assert.rejects(
      oidc.refreshTokenGrant(client.config, tokens.refresh_token!),
      (err: { error?: string }) => err.error === 'invalid_grant',
      'the refresh token ended with the block',
    )
    await assert.rejects(
      signIn(service.baseUrl, client, { email: user.email, password: user.password, scope: 'openid' }),
      /sign-in did not continue \(403\)[\s\S]*blocked/,
    )
    // The wrong password of a blocked account reads like any wrong password.
    await assert.rejects(
      signIn(service.baseUrl, client, {
        email: user.email,
        password: 'not the password at all',
        scope: 'openid',
      }),
      /sign-in did not continue \(401\)/,
    )
    const listed = await service.request('GET', '/api/v1/endusers?status=blocked', { key: tenant.key })
    assert.deepEqual(
      listed.body.data.map((u: { id: string }) => u.id),
      [user.id],
    )

    for (let i = 0; i < 2; i++) {
      const unblocked = await service.request('POST', `/api/v1/endusers/${user.id}/unblock`, {
        key: tenant.key,
      })
      assert.equal(unblocked.status, 200)
      assert.equal(unblocked.body.status, 'active')
      assert.equal(unblocked.body.blockedAt, null)
    }
    assert.equal((await auditOf(service, tenant.key, 'endusers.unblock')).length, 1)
    const again = await signIn(service.baseUrl, client, {
      email: user.email,
      password: user.password,
      scope: 'openid',
    })
    assert.ok(again.tokens.id_token)
  })

  test('fault: when the end-user record cannot be saved, the identity change is undone (block and unblock)', async () => {
    const tenant = await service.createTenant()
    const app = await createApp(tenant.key)
    const user = await endUserWithPassword(service, smtp, tenant.key, app.id)
    const inject = () =>
      service.sql.unsafe(`
        CREATE FUNCTION fail_enduser_update() RETURNS trigger LANGUAGE plpgsql AS
          $$ BEGIN RAISE EXCEPTION 'injected failure'; END $$;
        CREATE TRIGGER fail_enduser_update BEFORE UPDATE ON endusers
          FOR EACH ROW EXECUTE FUNCTION fail_enduser_update();`)
    const heal = () =>
      service.sql.unsafe('DROP TRIGGER fail_enduser_update ON endusers; DROP FUNCTION fail_enduser_update();')

    await inject()
    try {
      const failed = await service.request('POST', `/api/v1/endusers/${user.id}/block`, { key: tenant.key })
      assert.ok(failed.status >= 500, `${failed.status} ${failed.text}`)
    } finally {
      await heal()
    }
    assert.equal((await service.api.services.accounts.get(user.id))?.disabled, false, 'sign-in still enabled')
    const still = await service.request('GET', `/api/v1/endusers/${user.id}`, { key: tenant.key })
    assert.equal(still.body.status, 'active')

    assert.equal(
      (await service.request('POST', `/api/v1/endusers/${user.id}/block`, { key: tenant.key })).status,
      200,
    )
    await inject()
    try {
      const failed = await service.request('POST', `/api/v1/endusers/${user.id}/unblock`, { key: tenant.key })
      assert.ok(failed.status >= 500, `${failed.status} ${failed.text}`)
    } finally {
      await heal()
    }
    assert.equal((await service.api.services.accounts.get(user.id))?.disabled, true, 'sign-in still disabled')
    assert.equal(
      (await service.request('GET', `/api/v1/endusers/${user.id}`, { key: tenant.key })).body.status,
      'blocked',
    )
  })

  test('permanent deletion removes the identity user, then the record and what hangs on it; interrupted, it completes when retried', async () => {
    const tenant = await service.createTenant()
    const app = await createApp(tenant.key)
    const user = await endUserWithPassword(service, smtp, tenant.key, app.id)
    const role = await service.request('POST', '/api/v1/roles', {
      key: tenant.key,
      body: { applicationId: app.id, name: 'viewer' },
    })
    await service.request('PUT', `/api/v1/endusers/${user.id}/roles/${role.body.id}`, { key: tenant.key })

    // The record's deletion fails after the identity user's: nothing is half-done.
    await service.sql.unsafe(`
      CREATE FUNCTION fail_enduser_delete() RETURNS trigger LANGUAGE plpgsql AS
        $$ BEGIN RAISE EXCEPTION 'injected failure'; END $$;
      CREATE TRIGGER fail_enduser_delete BEFORE DELETE ON endusers
        FOR EACH ROW EXECUTE FUNCTION fail_enduser_delete();`)
    try {
      const failed = await service.request('DELETE', `/api/v1/endusers/${user.id}/permanent`, {
        key: tenant.key,
      })
      assert.ok(failed.status >= 500, `${failed.status} ${failed.text}`)
    } finally {
      await service.sql.unsafe(
        'DROP TRIGGER fail_enduser_delete ON endusers; DROP FUNCTION fail_enduser_delete();',
      )
    }
    assert.ok(await service.api.services.accounts.get(user.id), 'the identity user is still there')
    assert.equal(
      (await service.request('GET', `/api/v1/endusers/${user.id}`, { key: tenant.key })).status,
      200,
    )

    const retried = await service.request('DELETE', `/api/v1/endusers/${user.id}/permanent`, {
      key: tenant.key,
    })
    assert.equal(retried.status, 204, retried.text)
    assert.equal(await service.api.services.accounts.get(user.id), undefined)
    assert.equal(
      (await service.request('GET', `/api/v1/endusers/${user.id}`, { key: tenant.key })).status,
      404,
    )
    const [left] = await service.sql<{ n: number }[]>`
      SELECT (SELECT count(*) FROM enduser_roles WHERE enduser_id = ${user.id})
           + (SELECT count(*) FROM enduser_applications WHERE enduser_id = ${user.id}) AS n`
    assert.equal(Number(left!.n), 0)
    assert.equal(
      (await service.request('DELETE', `/api/v1/endusers/${user.id}/permanent`, { key: tenant.key })).status,
      404,
    )

    // An earlier attempt that got as far as the identity user (before one transaction held both
    // steps, or a crash of another writer): the retry finishes the record.
    const other = await endUserWithPassword(service, smtp, tenant.key, app.id)
    assert.equal(await service.api.services.accounts.removeAccount(other.id), true)
    const finished = await service.request('DELETE', `/api/v1/endusers/${other.id}/permanent`, {
      key: tenant.key,
    })
    assert.equal(finished.status, 204)
    const audit = await auditOf(service, tenant.key, 'endusers.delete_permanent')
    assert.deepEqual(
      audit.map((a) => a.details),
      [{ identityRemoved: false }, { identityRemoved: true }],
    )
  })

  test('reset links: e-mailed on request, single use, refused with another user’s id, and replaced by a newer one', async () => {
    const tenant = await service.createTenant()
    const app = await createApp(tenant.key)
    const user = await endUserWithPassword(service, smtp, tenant.key, app.id)
    const other = await endUserWithPassword(service, smtp, tenant.key, app.id)
    const mails = () => smtp.messages.filter((m) => m.to.includes(user.email)).length

    const seen = mails()
    const sent = await service.request('POST', `/api/v1/endusers/${user.id}/send-password-reset`, {
      key: tenant.key,
      body: { applicationId: app.id },
    })
    assert.equal(sent.status, 202, sent.text)
    assert.equal(sent.body.emailDispatchStatus, 'queued')
    const first = await linkMailedTo(smtp, user.email, seen)
    assert.equal(first.pathname, '/reset-password')
    assert.deepEqual([...first.searchParams.keys()], ['userId', 'applicationId', 'token'])
    assert.equal(first.searchParams.get('userId'), user.id)

    // The token with another user's id.
    const swapped = new URL(first)
    swapped.searchParams.set('userId', other.id)
    const mismatch = await page(new CookieJar(), swapped)
    assert.equal(mismatch.status, 400)
    assert.match(mismatch.html, /invalid_reset_token/)
    assert.equal((await choosePassword(swapped, 'a brand new password')).status, 400)

    // A newer link revokes the first.
    await service.request('POST', `/api/v1/endusers/${user.id}/send-password-reset`, {
      key: tenant.key,
      body: {},
    })
    const second = await linkMailedTo(smtp, user.email, seen + 1)
    assert.equal(second.searchParams.get('applicationId'), null, 'no application named: none in the link')
    const revoked = await choosePassword(first, 'a brand new password')
    assert.equal(revoked.status, 400)
    assert.match(revoked.html, /invalid_reset_token/)

    const used = await choosePassword(second, 'a brand new password')
    assert.equal(used.status, 200, used.html.slice(0, 300))
    const reused = await choosePassword(second, 'yet another password')
    assert.equal(reused.status, 400)
    assert.match(reused.html, /invalid_reset_token/)

    const client = await applicationClient(service.baseUrl, app.clientId, APP_REDIRECT)
    await assert.rejects(
      signIn(service.baseUrl, client, { email: user.email, password: user.password, scope: 'openid' }),
      /\(401\)/,
      'the old password no longer works',
    )
    const { tokens } = await signIn(service.baseUrl, client, {
      email: user.email,
      password: 'a brand new password',
      scope: 'openid',
    })
    assert.ok(tokens.id_token)
    const audit = await auditOf(service, tenant.key, 'endusers.password_reset.complete')
    assert.equal(audit.length, 1)
    assert.equal(audit[0]!.actor, `enduser:${user.id}`)

    // A blocked user gets no reset link.
    await service.request('POST', `/api/v1/endusers/${user.id}/block`, { key: tenant.key })
    const refused = await service.request('POST', `/api/v1/endusers/${user.id}/send-password-reset`, {
      key: tenant.key,
      body: {},
    })
    assert.equal(refused.status, 409)
    assert.equal(refused.body.error, 'enduser_blocked')
  })

  test('forgot password: the same answer for an unknown address; a link only to a real account', async () => {
    const tenant = await service.createTenant()
    const app = await createApp(tenant.key)
    const user = await endUserWithPassword(service, smtp, tenant.key, app.id)
    const client = await applicationClient(service.baseUrl, app.clientId, APP_REDIRECT)
    // From the sign-in page's link.
    const url = oidc.buildAuthorizationUrl(client.config, {
      redirect_uri: APP_REDIRECT,
      scope: 'openid',
      code_challenge: await oidc.calculatePKCECodeChallenge(oidc.randomPKCECodeVerifier()),
      code_challenge_method: 'S256',
      state: 's',
    })
    const jar = new CookieJar()
    const signInPage = (await follow(jar, service.baseUrl, url.toString(), APP_REDIRECT)).page!
    const forgotHref = /href="(\/forgot-password\?[^"]+)"/.exec(signInPage.html)?.[1]?.replace(/&amp;/g, '&')
    assert.ok(forgotHref, 'the sign-in page links to the reset')
    const answers: string[] = []
    const seen = smtp.messages.length
    const mine = smtp.messages.filter((m) => m.to.includes(user.email)).length
    for (const email of [user.email, 'nobody-here@example.com']) {
      const form = await page(jar, new URL(forgotHref, service.baseUrl))
      assert.equal(form.status, 200)
      const sent = await page(jar, new URL(formActionOf(form.html), service.baseUrl), {
        form: { csrf: csrfOf(form.html), applicationId: app.id, email },
      })
      assert.equal(sent.status, 200)
      answers.push(sent.html)
    }
    assert.equal(answers[0], answers[1], 'the page reads the same')
    const link = await linkMailedTo(smtp, user.email, mine)
    assert.equal(link.searchParams.get('applicationId'), app.id)
    assert.ok(
      smtp.messages.slice(seen).every((m) => !m.to.includes('nobody-here@example.com')),
      'nothing is sent to an address without an account',
    )
    assert.equal((await auditOf(service, tenant.key, 'endusers.password_reset.request')).length, 1)
  })

  test('sign-up where the application allows it: the address, then the e-mailed sign-up link creates the end-user; a known address reads the same', async () => {
    const tenant = await service.createTenant()
    const closed = await createApp(tenant.key, { name: 'Closed' })
    const open = await createApp(tenant.key, { name: 'Open', signUpEnabled: true })
    const signInPageOf = async (clientId: string) => {
      const client = await applicationClient(service.baseUrl, clientId, APP_REDIRECT)
      const url = oidc.buildAuthorizationUrl(client.config, {
        redirect_uri: APP_REDIRECT,
        scope: 'openid',
        code_challenge: await oidc.calculatePKCECodeChallenge(oidc.randomPKCECodeVerifier()),
        code_challenge_method: 'S256',
        state: 's',
      })
      const jar = new CookieJar()
      return { jar, client, shown: (await follow(jar, service.baseUrl, url.toString(), APP_REDIRECT)).page! }
    }
    const closedPage = await signInPageOf(closed.clientId)
    assert.ok(!/\/sign-up"/.test(closedPage.shown.html), 'no sign-up link where it is off')
    const uid = /action="\/sign-in\/([^/]+)\/password"/.exec(closedPage.shown.html)![1]!
    assert.equal(
      (await page(closedPage.jar, new URL(`/sign-in/${uid}/sign-up`, service.baseUrl))).status,
      404,
    )

    const { jar, client, shown } = await signInPageOf(open.clientId)
    const href = /href="(\/sign-in\/[^"]+\/sign-up)"/.exec(shown.html)?.[1]
    assert.ok(href, 'the sign-in page offers sign-up')
    const email = `new-${Date.now()}@example.com`
    /** The sign-up form filled in with `address`; the page it answers with, its CSRF value left out. */
    const signUp = async (address: string) => {
      const form = await page(jar, new URL(href, service.baseUrl))
      assert.equal(form.status, 200)
      const sent = await page(jar, new URL(formActionOf(form.html), service.baseUrl), {
        form: { csrf: csrfOf(form.html), email: address },
      })
      assert.equal(sent.status, 200, sent.html.slice(0, 500))
      return sent.html.replace(/name="csrf" value="[^"]+"/g, '')
    }
    const endUsersNamed = async () => {
      const found = await service.request('GET', `/api/v1/endusers?search=${encodeURIComponent(email)}`, {
        key: tenant.key,
      })
      assert.equal(found.status, 200, found.text)
      return found.body as {
        data: Array<{ email: string; source: string; hasPassword: boolean }>
        total: number
      }
    }
    const pendingRequests = async () =>
      (
        await service.sql<{ n: number }[]>`
          SELECT count(*)::int AS n FROM enduser_signup_requests WHERE tenant_id = ${tenant.tenantId}`
      )[0]!.n

    // A new address: a sign-up link, and nothing of the end-user yet.
    const answers = [await signUp(email)]
    const link = await linkMailedTo(smtp, email)
    assert.equal(link.pathname, '/confirm-sign-up')
    assert.match(link.searchParams.get('token') ?? '', /^[A-Za-z0-9_-]{43}$/)
    assert.equal(await pendingRequests(), 1, 'the ask is a pending request')
    assert.equal((await endUsersNamed()).total, 0, 'no end-user before the link is used')

    // The link's page, as a person opens it: the address shown, a form to choose the password.
    // Opening it creates nothing (a mail scanner following the link makes no account).
    const linkJar = new CookieJar()
    const confirm = await page(linkJar, link)
    assert.equal(confirm.status, 200, confirm.html.slice(0, 500))
    assert.match(confirm.headers.get('content-type') ?? '', /^text\/html/)
    assert.ok(confirm.html.includes(`value="${email}" readonly`), 'the page shows the address')
    assert.equal((await endUsersNamed()).total, 0, 'opening the link creates nothing')
    const confirmForm = {
      csrf: csrfOf(confirm.html),
      token: /name="token" value="([^"]+)"/.exec(confirm.html)?.[1] ?? '',
      password: 'a password of my own',
      repeat: 'a password of my own',
    }
    assert.equal(confirmForm.token, link.searchParams.get('token'), 'the form carries the link’s token')
    const confirmAction = new URL(formActionOf(confirm.html), link)
    const saved = await page(linkJar, confirmAction, { form: confirmForm })
    assert.equal(saved.status, 200, saved.html.slice(0, 500))
    assert.match(saved.html, /Your password is saved/)
    const made = await endUsersNamed()
    assert.equal(made.total, 1, 'the link made the end-user')
    assert.equal(made.data[0]!.email, email)
    assert.equal(made.data[0]!.source, 'sign_up')
    assert.equal(made.data[0]!.hasPassword, true)
    const listed = await service.request('GET', `/api/v1/endusers?applicationId=${open.id}`, {
      key: tenant.key,
    })
    assert.deepEqual(
      listed.body.data.map((u: { email: string }) => u.email),
      [email],
      'in the application’s list',
    )

    // The same address again, now known: the page reads the same, its owner gets a reset link.
    answers.push(await signUp(email))
    assert.equal(answers[0], answers[1], 'a new and a known address read the same')
    const reset = await linkMailedTo(smtp, email, 1)
    assert.equal(
      reset.pathname,
      '/reset-password',
      'the second attempt mails a reset link to the owner of the address',
    )
    assert.equal(reset.searchParams.get('applicationId'), open.id)
    assert.equal(await pendingRequests(), 1, 'no new sign-up request for a known address')
    assert.equal((await endUsersNamed()).total, 1, 'nothing made twice')

    // The used link: its page and its form again are a 400 page, and make nothing.
    const reopened = await page(new CookieJar(), link)
    assert.equal(reopened.status, 400)
    assert.match(reopened.headers.get('content-type') ?? '', /^text\/html/)
    assert.match(reopened.html, /This link is not valid/)
    const resent = await page(linkJar, confirmAction, {
      form: { ...confirmForm, password: 'another one of mine', repeat: 'another one of mine' },
    })
    assert.equal(resent.status, 400)
    assert.match(resent.html, /This link is not valid/)
    assert.equal((await endUsersNamed()).total, 1)

    // The password chosen on the link's page signs in to the application.
    const { tokens } = await signIn(service.baseUrl, client, {
      email,
      password: 'a password of my own',
      scope: 'openid',
    })
    assert.ok(tokens.id_token)

    const invalid = await page(jar, new URL(href, service.baseUrl))
    const bad = await page(jar, new URL(formActionOf(invalid.html), service.baseUrl), {
      form: { csrf: csrfOf(invalid.html), email: 'not an address' },
    })
    assert.equal(bad.status, 400)
  })

  test('end-user list: filters by application, status and search, paginated', async () => {
    const tenant = await service.createTenant()
    const a = await createApp(tenant.key, { name: 'A' })
    const b = await createApp(tenant.key, { name: 'B' })
    const make = async (email: string, applicationId: string) => {
      const created = await service.request('POST', '/api/v1/endusers/create-without-password', {
        key: tenant.key,
        body: { email, applicationId },
      })
      assert.equal(created.status, 201, created.text)
      return created.body.id as string
    }
    const ids = [
      await make('alice@example.com', a.id),
      await make('bob@example.com', a.id),
      await make('carol_1%@example.com', b.id),
    ]
    const get = async (query: string) => {
      const r = await service.request('GET', `/api/v1/endusers?${query}`, { key: tenant.key })
      assert.equal(r.status, 200, r.text)
      return r.body as { data: { id: string }[]; total: number }
    }
    assert.deepEqual(
      (await get(`applicationId=${a.id}`)).data.map((u) => u.id),
      ids.slice(0, 2),
    )
    assert.deepEqual(
      (await get('search=BOB')).data.map((u) => u.id),
      [ids[1]],
    )
    assert.deepEqual(
      (await get('search=_1%25')).data.map((u) => u.id),
      [ids[2]],
      'LIKE wildcards are literal',
    )
    assert.equal((await get('search=%25')).total, 1)
    const page1 = await get('limit=2&offset=0')
    const page2 = await get('limit=2&offset=2')
    assert.equal(page1.total, 3)
    assert.deepEqual(
      [...page1.data, ...page2.data].map((u) => u.id),
      ids,
    )
    const bad = await service.request('GET', '/api/v1/endusers?status=deleted', { key: tenant.key })
    assert.equal(bad.status, 400)
    assert.match(bad.text, /active/)
    const dup = await service.request('POST', '/api/v1/endusers/create-without-password', {
      key: tenant.key,
      body: { email: 'ALICE@example.com' },
    })
    assert.equal(dup.status, 409)
    assert.equal(dup.body.error, 'enduser_exists')
    const noApp = await service.request('POST', '/api/v1/endusers/create-without-password', {
      key: tenant.key,
      body: { email: 'dave@example.com', applicationId: '00000000-0000-4000-8000-000000000000' },
    })
    assert.equal(noApp.status, 404)
    assert.equal(noApp.body.error, 'application_not_found')
  })

  test('roles: create, list, change, delete; names unique per application; bad input is a 400 naming the field', async () => {
    const tenant = await service.createTenant()
    const app = await createApp(tenant.key)
    const create = (body: Record<string, unknown>) =>
      service.request('POST', '/api/v1/roles', { key: tenant.key, body: { applicationId: app.id, ...body } })
    const admin = await create({ name: 'admin', description: 'Everything', permissions: ['*'] })
    assert.equal(admin.status, 201, admin.text)
    assert.equal((await create({ name: 'admin' })).status, 409)
    const spaced = await create({ name: 'has space' })
    assert.equal(spaced.status, 400)
    assert.equal(spaced.body.fields[0].path, 'body/name')
    const repeated = await create({ name: 'x', permissions: ['a', 'a'] })
    assert.equal(repeated.status, 400)
    assert.equal(repeated.body.fields[0].path, 'body/permissions')
    const changed = await service.request('PUT', `/api/v1/roles/${admin.body.id}`, {
      key: tenant.key,
      body: { name: 'owner', permissions: ['orders:*'] },
    })
    assert.equal(changed.status, 200)
    assert.equal(changed.body.name, 'owner')
    assert.equal(changed.body.description, '', 'PUT replaces: a description left out is empty')
    const listed = await service.request('GET', `/api/v1/roles?applicationId=${app.id}`, { key: tenant.key })
    assert.deepEqual(
      listed.body.data.map((r: { name: string }) => r.name),
      ['owner'],
    )
    assert.equal(
      (await service.request('DELETE', `/api/v1/roles/${admin.body.id}`, { key: tenant.key })).status,
      204,
    )
    assert.equal(
      (await service.request('GET', `/api/v1/roles/${admin.body.id}`, { key: tenant.key })).status,
      404,
    )
    const actions = (await service.request('GET', '/api/v1/audit', { key: tenant.key })).body.data.map(
      (a: AuditView) => a.action,
    )
    for (const action of ['roles.create', 'roles.update', 'roles.delete'])
      assert.ok(actions.includes(action), action)
  })

  test('every id of another tenant is a 404 (end-users, roles, role assignments, links)', async () => {
    const mine = await service.createTenant()
    const theirs = await service.createTenant()
    const theirApp = await createApp(theirs.key)
    const theirUser = await endUserWithPassword(service, smtp, theirs.key, theirApp.id)
    const theirRole = await service.request('POST', '/api/v1/roles', {
      key: theirs.key,
      body: { applicationId: theirApp.id, name: 'r' },
    })
    const myApp = await createApp(mine.key)
    const myUser = await endUserWithPassword(service, smtp, mine.key, myApp.id)
    const myRole = await service.request('POST', '/api/v1/roles', {
      key: mine.key,
      body: { applicationId: myApp.id, name: 'r' },
    })
    const calls: Array<[string, string, unknown?]> = [
      ['GET', `/api/v1/endusers/${theirUser.id}`],
      ['POST', `/api/v1/endusers/${theirUser.id}/block`],
      ['POST', `/api/v1/endusers/${theirUser.id}/unblock`],
      ['POST', `/api/v1/endusers/${theirUser.id}/send-password-reset`, {}],
      ['DELETE', `/api/v1/endusers/${theirUser.id}/permanent`],
      ['GET', `/api/v1/endusers/${theirUser.id}/roles`],
      ['PUT', `/api/v1/endusers/${theirUser.id}/roles/${myRole.body.id}`],
      ['PUT', `/api/v1/endusers/${myUser.id}/roles/${theirRole.body.id}`],
      ['DELETE', `/api/v1/endusers/${myUser.id}/roles/${theirRole.body.id}`],
      ['GET', `/api/v1/roles/${theirRole.body.id}`],
      ['PUT', `/api/v1/roles/${theirRole.body.id}`, { name: 'mine-now' }],
      ['DELETE', `/api/v1/roles/${theirRole.body.id}`],
      ['POST', '/api/v1/roles', { applicationId: theirApp.id, name: 'x' }],
      [
        'POST',
        '/api/v1/endusers/create-without-password',
        { email: 'z@example.com', applicationId: theirApp.id },
      ],
      ['POST', `/api/v1/endusers/${myUser.id}/send-password-reset`, { applicationId: theirApp.id }],
    ]
    for (const [method, path, body] of calls) {
      const result = await service.request(method, path, { key: mine.key, ...(body ? { body } : {}) })
      assert.equal(result.status, 404, `${method} ${path}: ${result.text}`)
    }
    const list = await service.request('GET', `/api/v1/endusers?applicationId=${theirApp.id}`, {
      key: mine.key,
    })
    assert.equal(list.body.total, 0)
    assert.equal(
      (await service.request('GET', `/api/v1/endusers/${theirUser.id}`, { key: theirs.key })).body.status,
      'active',
    )
  })
})

describe('end-users: a reset link expires after an hour (test clock)', () => {
  let smtp: TestSmtp
  let service: TestService
  const clock = manualClock()

  before(async () => {
    smtp = await startSmtp('accept')
    service = await startTestService(
      { KMS_SMTP_URL: smtp.url, KMS_SMTP_ATTEMPTS: '1', KMS_SMTP_TIMEOUT_MS: '2000' },
      { jobs: true, clock },
    )
  })
  after(async () => {
    await service.stop()
    await smtp.stop()
  })

  test('a link 59 minutes old works; one 61 minutes old is invalid_reset_token', async () => {
    const tenant = await service.createTenant()
    const created = await service.request('POST', '/api/v1/applications', {
      key: tenant.key,
      body: { name: 'App', applicationType: 'spa', redirectUris: [APP_REDIRECT] },
    })
    const user = await endUserWithPassword(service, smtp, tenant.key, created.body.id)
    const reset = async () => {
      const seen = smtp.messages.filter((m) => m.to.includes(user.email)).length
      const sent = await service.request('POST', `/api/v1/endusers/${user.id}/send-password-reset`, {
        key: tenant.key,
        body: {},
      })
      assert.equal(sent.status, 202)
      return linkMailedTo(smtp, user.email, seen)
    }
    const fresh = await reset()
    clock.advance(59 * 60_000)
    assert.equal((await page(new CookieJar(), fresh)).status, 200)
    const old = await reset()
    clock.advance(61 * 60_000)
    const expired = await page(new CookieJar(), old)
    assert.equal(expired.status, 400)
    assert.match(expired.html, /invalid_reset_token/)
    assert.equal((await choosePassword(old, 'a long enough password')).status, 400)
  })
})
