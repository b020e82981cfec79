import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import * as oidc from 'openid-client'
import { SCOPES } from '../../src/auth/scopes.ts'
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
  refreshTargetOf,
} from '../helpers/sign-in.ts'
import { totpCode } from '../helpers/totp.ts'

const REDIRECT = 'http://127.0.0.1:9/callback'

const totp = (base32: string, step = Math.floor(Date.now() / 30_000)) => totpCode(base32, step * 30_000)

describe('tenant security settings', () => {
  let service: TestService
  let client: ConsoleClient

  before(async () => {
    service = await startTestService({ KMS_CONSOLE_REDIRECT_URIS: REDIRECT })
    client = await consoleClient(service.baseUrl, REDIRECT)
  })
  after(() => service.stop())

  test('defaults: SMS OTP off, TOTP and e-mail OTP available, 15-minute access tokens, no API-key maximum', async () => {
    const tenant = await service.createTenant()
    const got = await service.request('GET', '/api/v1/settings/security', { key: tenant.key })
    assert.equal(got.status, 200, got.text)
    assert.deepEqual(got.body.mfaMethods.smsOtp, { enabled: false, required: false })
    assert.deepEqual(got.body.mfaMethods.totp, { enabled: true, required: false })
    assert.equal(got.body.sessionLifetimes.accessTokenSeconds, 900)
    assert.equal(got.body.passwordPolicy.minLength, 12)
    assert.equal(got.body.apiKeyPolicy.maxLifetimeDays, null)
  })

  test('PATCH: 403 forbidden to API keys with every scope and to developer and viewer sessions; owners and admins change it, audited with their identity', async () => {
    const tenant = await service.createTenant()
    const body = { sessionLifetimes: { accessTokenSeconds: 600 } }
    const everyScope = await service.request('POST', '/api/v1/api-keys', {
      key: tenant.key,
      body: { name: 'all', scopes: [...SCOPES] },
    })
    assert.equal(everyScope.status, 201, everyScope.text)
    for (const key of [tenant.key, everyScope.body.key as string]) {
      const refused = await service.request('PATCH', '/api/v1/settings/security', { key, body })
      assert.equal(refused.status, 403)
      assert.equal(refused.body.error, 'forbidden')
    }
    for (const role of ['tenant:developer', 'tenant:viewer'] as const) {
      const member = await memberSession(service, client, tenant.tenantId, role)
      const refused = await service.request('PATCH', '/api/v1/settings/security', {
        headers: member.headers,
        body,
      })
      assert.equal(refused.status, 403, role)
      assert.equal(refused.body.error, 'forbidden', role)
      assert.equal(
        (await service.request('GET', '/api/v1/settings/security', { headers: member.headers })).status,
        200,
        `${role} reads`,
      )
    }
    const editors: string[] = []
    for (const [role, seconds] of [
      ['tenant:owner', 600],
      ['tenant:admin', 300],
    ] as const) {
      const member = await memberSession(service, client, tenant.tenantId, role)
      const changed = await service.request('PATCH', '/api/v1/settings/security', {
        headers: member.headers,
        body: { sessionLifetimes: { accessTokenSeconds: seconds } },
      })
      assert.equal(changed.status, 200, changed.text)
      assert.equal(changed.body.sessionLifetimes.accessTokenSeconds, seconds)
      assert.equal(
        changed.body.sessionLifetimes.refreshTokenSeconds,
        1_209_600,
        'fields not given keep their values',
      )
      editors.push(`member:${member.accountId}`)
    }
    const audit = await service.request('GET', '/api/v1/audit?action=settings.security.update', {
      key: tenant.key,
    })
    const records = audit.body.data as AuditView[]
    assert.deepEqual(records.map((r) => r.actor).sort(), [...editors].sort())
    assert.ok(records.every((r) => r.details?.['changed'] === 'sessionLifetimes.accessTokenSeconds'))
    // The refusals were recorded as denials, not as changes.
    assert.equal(
      (await service.request('GET', '/api/v1/settings/security', { key: tenant.key })).body.sessionLifetimes
        .accessTokenSeconds,
      300,
    )
  })

  test('validation names the field and the bound; a required method must be enabled; an empty body is refused', async () => {
    const tenant = await service.createTenant()
    const owner = await memberSession(service, client, tenant.tenantId, 'tenant:owner')
    const patch = (body: unknown) =>
      service.request('PATCH', '/api/v1/settings/security', { headers: owner.headers, body })
    const cases: Array<[unknown, string]> = [
      [{ sessionLifetimes: { accessTokenSeconds: 5 } }, 'body/sessionLifetimes/accessTokenSeconds'],
      [{ passwordPolicy: { minLength: 500 } }, 'body/passwordPolicy/minLength'],
      [{ apiKeyPolicy: { maxLifetimeDays: 0 } }, 'body/apiKeyPolicy/maxLifetimeDays'],
      [{ mfaMethods: { smsOtp: { required: true } } }, 'body/mfaMethods/smsOtp/required'],
      [{ mfaMethods: { fax: { enabled: true } } }, 'body/mfaMethods'],
      [{}, 'body'],
    ]
    for (const [body, path] of cases) {
      const refused = await patch(body)
      assert.equal(refused.status, 400, JSON.stringify(body))
      assert.ok(refused.text.includes(path), `${JSON.stringify(body)} names ${path}: ${refused.text}`)
    }
    // SMS OTP enabled and required in one change is fine.
    const ok = await patch({ mfaMethods: { smsOtp: { enabled: true, required: true } } })
    assert.equal(ok.status, 200, ok.text)
  })

  test('concurrent changes of different groups both survive', async () => {
    const tenant = await service.createTenant()
    const owner = await memberSession(service, client, tenant.tenantId, 'tenant:owner')
    const patch = (body: unknown) =>
      service.request('PATCH', '/api/v1/settings/security', { headers: owner.headers, body })
    const results = await Promise.all([
      patch({ passwordPolicy: { minLength: 16 } }),
      patch({ apiKeyPolicy: { maxLifetimeDays: 30 } }),
      patch({ mfaMethods: { emailOtp: { enabled: false } } }),
      patch({ sessionLifetimes: { idleSignOutSeconds: 3600 } }),
    ])
    assert.deepEqual(
      results.map((r) => r.status),
      [200, 200, 200, 200],
    )
    const got = (await service.request('GET', '/api/v1/settings/security', { key: tenant.key })).body
    assert.equal(got.passwordPolicy.minLength, 16)
    assert.equal(got.apiKeyPolicy.maxLifetimeDays, 30)
    assert.equal(got.mfaMethods.emailOtp.enabled, false)
    assert.equal(got.sessionLifetimes.idleSignOutSeconds, 3600)
  })

  test('the API-key policy bounds new keys: none that never expires, none beyond the maximum', async () => {
    const tenant = await service.createTenant()
    const owner = await memberSession(service, client, tenant.tenantId, 'tenant:owner')
    await service.request('PATCH', '/api/v1/settings/security', {
      headers: owner.headers,
      body: { apiKeyPolicy: { maxLifetimeDays: 7 } },
    })
    const forever = await service.request('POST', '/api/v1/api-keys', {
      key: tenant.key,
      body: { name: 'forever', scopes: ['audit:read'] },
    })
    assert.equal(forever.status, 400)
    assert.equal(forever.body.maxLifetimeDays, 7)
    assert.ok(forever.text.includes('body/expiresAt'))
    const tooLong = await service.request('POST', '/api/v1/api-keys', {
      key: tenant.key,
      body: {
        name: 'long',
        scopes: ['audit:read'],
        expiresAt: new Date(Date.now() + 8 * 86_400_000).toISOString(),
      },
    })
    assert.equal(tooLong.status, 400)
    const fine = await service.request('POST', '/api/v1/api-keys', {
      key: tenant.key,
      body: {
        name: 'week',
        scopes: ['audit:read'],
        expiresAt: new Date(Date.now() + 6 * 86_400_000).toISOString(),
      },
    })
    assert.equal(fine.status, 201, fine.text)
  })

  test('the access-token lifetime and required TOTP apply to the next sign-in (enrolment through the page)', async () => {
    const tenant = await service.createTenant()
    const owner = await memberSession(service, client, tenant.tenantId, 'tenant:owner')
    const set = await service.request('PATCH', '/api/v1/settings/security', {
      headers: owner.headers,
      body: { sessionLifetimes: { accessTokenSeconds: 120 }, mfaMethods: { totp: { required: true } } },
    })
    assert.equal(set.status, 200, set.text)

    // A member without an authenticator: after the password, the enrolment page.
    const email = 'needs-totp@example.com'
    const password = 'needs-totp-password'
    const account = await service.api.services.accounts.createTeamAccount({ email, password })
    await service.api.services.team.addMember(
      { tenantId: tenant.tenantId, actor: 'test', requestId: null, clientIp: null },
      { accountId: account.id, role: 'tenant:viewer' },
    )
    const resource = `urn:kms:tenant:${tenant.tenantId}`
    const verifier = oidc.randomPKCECodeVerifier()
    const jar = new CookieJar()
    const start = oidc.buildAuthorizationUrl(client.config, {
      redirect_uri: REDIRECT,
      scope: 'openid api',
      code_challenge: await oidc.calculatePKCECodeChallenge(verifier),
      code_challenge_method: 'S256',
      resource,
      state: 's',
    })
    const signInPage = (await follow(jar, service.baseUrl, start.toString(), REDIRECT)).page!
    const afterPassword = await page(jar, new URL(formActionOf(signInPage.html), service.baseUrl), {
      form: { csrf: csrfOf(signInPage.html), email, password },
    })
    assert.equal(afterPassword.status, 303)
    const enrol = await page(jar, new URL(afterPassword.location!, service.baseUrl))
    assert.match(enrol.html, /Set up two-step verification/)
    const secret = /id="totp-secret">([A-Z2-7]+)</.exec(enrol.html)![1]!
    const wrong = await page(jar, new URL(formActionOf(enrol.html), service.baseUrl), {
      form: { csrf: csrfOf(enrol.html), code: '000000' === totp(secret) ? '111111' : '000000' },
    })
    assert.equal(wrong.status, 401)
    // The wrong code made a new secret (enrolment not confirmed): use the page's latest.
    const latest = /id="totp-secret">([A-Z2-7]+)</.exec(wrong.html)![1]!
    const done = await page(jar, new URL(formActionOf(wrong.html), service.baseUrl), {
      form: { csrf: csrfOf(wrong.html), code: totp(latest) },
    })
    const next = refreshTargetOf(done.html)
    assert.ok(next, done.html.slice(0, 500))
    const back = await follow(jar, service.baseUrl, new URL(next, service.baseUrl).toString(), REDIRECT)
    const tokens = await oidc.authorizationCodeGrant(
      client.config,
      back.callback!,
      { pkceCodeVerifier: verifier, expectedState: 's' },
      { resource },
    )
    const claims = JSON.parse(Buffer.from(tokens.access_token.split('.')[1]!, 'base64url').toString()) as {
      exp: number
      iat: number
    }
    assert.equal(claims.exp - claims.iat, 120)
    assert.equal((await service.api.services.accounts.get(account.id))?.totpEnrolled, true)
  })

  test('branding: any caller reads it; owners and admins replace it, audited with the editor; bounds are 400s naming the field', async () => {
    const tenant = await service.createTenant()
    const owner = await memberSession(service, client, tenant.tenantId, 'tenant:owner')
    const developer = await memberSession(service, client, tenant.tenantId, 'tenant:developer')
    const empty = await service.request('GET', '/api/v1/settings/branding', { key: tenant.key })
    assert.equal(empty.status, 200)
    assert.deepEqual(empty.body, {})
    const panel = {
      imageUrl: 'https://cdn.example.com/panel.png',
      translations: { en: { title: 'Acme', text: 'Welcome' }, it: { title: 'Acme', text: 'Benvenuti' } },
    }
    for (const forbidden of [{ key: tenant.key }, { headers: developer.headers }]) {
      const refused = await service.request('PUT', '/api/v1/settings/branding', { ...forbidden, body: panel })
      assert.equal(refused.status, 403)
      assert.equal(refused.body.error, 'forbidden')
    }
    const put = await service.request('PUT', '/api/v1/settings/branding', {
      headers: owner.headers,
      body: panel,
    })
    assert.equal(put.status, 200, put.text)
    assert.deepEqual(put.body, panel)
    assert.deepEqual(
      (await service.request('GET', '/api/v1/settings/branding', { key: tenant.key })).body,
      panel,
    )
    const audit = await service.request('GET', '/api/v1/audit?action=settings.branding.update', {
      key: tenant.key,
    })
    assert.equal(audit.body.data.length, 1)
    assert.equal(audit.body.data[0].actor, `member:${owner.accountId}`)
    const bad: Array<[unknown, string]> = [
      [{ translations: { en: { title: 't'.repeat(501), text: '' } } }, 'body/translations/en/title'],
      [{ translations: { en: { title: 't', text: 'x'.repeat(1001) } } }, 'body/translations/en/text'],
      [{ translations: { pt: { title: 't', text: 'x' } } }, 'body/translations'],
      [{ imageUrl: 'http://insecure.example.com/p.png' }, 'body/imageUrl'],
    ]
    for (const [body, field] of bad) {
      const refused = await service.request('PUT', '/api/v1/settings/branding', {
        headers: owner.headers,
        body,
      })
      assert.equal(refused.status, 400, JSON.stringify(body))
      assert.ok(
        refused.body.fields.some((f: { path: string }) => f.path.startsWith(field)),
        `${field}: ${refused.text}`,
      )
    }
    // Exactly at the bounds: accepted.
    const edge = await service.request('PUT', '/api/v1/settings/branding', {
      headers: owner.headers,
      body: { translations: { de: { title: 't'.repeat(500), text: 'x'.repeat(1000) } } },
    })
    assert.equal(edge.status, 200, edge.text)
  })

  test('refresh tokens live as long as the tenant says; a rotated one keeps the remaining life, never more', async () => {
    const tenant = await service.createTenant()
    const owner = await memberSession(service, client, tenant.tenantId, 'tenant:owner')
    // The lifetime the provider gave each token: its stored `exp - iat` (no clock read by the test).
    const lifetime = async (refreshToken: string) => {
      const [row] = await service.sql<{ iat: number; exp: number }[]>`
        SELECT (payload->>'iat')::int AS iat, (payload->>'exp')::int AS exp
        FROM oidc_models WHERE model = 'RefreshToken' AND id = ${refreshToken}`
      assert.ok(row, 'the refresh token is stored')
      return { ...row, seconds: row.exp - row.iat }
    }
    assert.equal((await lifetime(owner.refreshToken)).seconds, 14 * 86_400, 'the default: 14 days')
    const patched = await service.request('PATCH', '/api/v1/settings/security', {
      headers: owner.headers,
      body: { sessionLifetimes: { refreshTokenSeconds: 600 } },
    })
    assert.equal(patched.status, 200, patched.text)
    const member = await memberSession(service, client, tenant.tenantId, 'tenant:viewer')
    const first = await lifetime(member.refreshToken)
    assert.equal(first.seconds, 600, "the tenant's 600 s")
    // The console is a public client: each use rotates the token, which keeps the first one's end.
    const refreshed = await oidc.refreshTokenGrant(client.config, member.refreshToken, {
      resource: `urn:kms:tenant:${tenant.tenantId}`,
    })
    assert.notEqual(refreshed.refresh_token, member.refreshToken)
    const second = await lifetime(refreshed.refresh_token!)
    assert.ok(second.exp <= first.exp, 'rotation does not extend the session')
  })
})
