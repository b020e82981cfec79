import assert from 'node:assert/strict'
import { createHash, randomBytes } from 'node:crypto'
import { after, before, describe, test } from 'node:test'
import { type ManualClock, manualClock } from '../helpers/manual-clock.ts'
import { startTestService, type TestService } from '../helpers/service.ts'
import {
  type ConsoleClient,
  type CookieJar,
  consoleClient,
  csrfOf,
  follow,
  formActionOf,
  page,
  refreshTargetOf,
  signIn,
} from '../helpers/sign-in.ts'

/*
 * The command line's client (`kms-cli`) against what a page on the web, or a process on the
 * machine, could try with it, over plain HTTP (the browser's part is login.test.ts):
 * a remembered browser session never approves the CLI's loopback sign-in unseen (RFC 8252 8.6),
 * and a tenant's session lifetime bounds the CLI's refresh tokens whatever the token request names.
 * Time is the service's manual clock where it matters; nothing waits.
 */

const DEVICE_GRANT = 'urn:ietf:params:oauth:grant-type:device_code'
const b64 = (bytes: Buffer) => bytes.toString('base64url')

describe('kms-cli: no silent loopback sign-in, and the tenant’s session lifetime holds', {
  timeout: 240_000,
}, () => {
  let clock: ManualClock
  let service: TestService
  let console_: ConsoleClient

  before(async () => {
    clock = manualClock()
    service = await startTestService({}, { clock })
    console_ = await consoleClient(service.baseUrl, `${service.baseUrl}/console/callback`)
  })
  after(() => service?.stop())

  const post = (path: string, form: Record<string, string>) =>
    fetch(new URL(path, service.baseUrl), {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams(form),
    })

  async function member(tenantId: string, role: 'tenant:owner' | 'tenant:developer' = 'tenant:developer') {
    const email = `cli-attack-${randomBytes(5).toString('hex')}@example.com`
    const password = `cli-attack-password-${randomBytes(6).toString('hex')}`
    const account = await service.api.services.accounts.createTeamAccount({ email, password })
    await service.api.services.team.addMember(
      { tenantId, actor: 'test', requestId: null, clientIp: null },
      { accountId: account.id, role },
    )
    return { accountId: account.id, email, password }
  }

  /** A browser signed in to the console for the tenant (its cookies in the jar), and an owner's token. */
  async function consoleSession(tenantId: string) {
    const owner = await member(tenantId, 'tenant:owner')
    const resource = `urn:kms:tenant:${tenantId}`
    const signed = await signIn(service.baseUrl, console_, { ...owner, resource, tokenResource: true })
    return { owner, jar: signed.jar, ownerToken: signed.tokens.access_token }
  }

  /** The CLI's authorization request, as `kms login` (or a page imitating it) makes it. */
  function cliAuthorization(tenantId: string, port: number, extra: Record<string, string> = {}) {
    const verifier = b64(randomBytes(32))
    const state = b64(randomBytes(16))
    const redirectUri = `http://127.0.0.1:${port}/callback`
    const url = new URL('/oidc/auth', service.baseUrl)
    const params = {
      client_id: 'kms-cli',
      response_type: 'code',
      redirect_uri: redirectUri,
      scope: 'openid email profile api',
      code_challenge: b64(createHash('sha256').update(verifier).digest()),
      code_challenge_method: 'S256',
      state,
      resource: `urn:kms:tenant:${tenantId}`,
      ...extra,
    }
    for (const [name, value] of Object.entries(params)) url.searchParams.set(name, value)
    return { url: url.toString(), verifier, state, redirectUri }
  }

  /** Answers the confirmation page with Continue or Cancel; where the browser is sent back to. */
  async function answer(jar: CookieJar, shown: string, decision: 'allow' | 'deny', redirectUri: string) {
    const answered = await page(jar, new URL(formActionOf(shown), service.baseUrl), {
      form: { csrf: csrfOf(shown), decision },
    })
    assert.equal(answered.status, 200, 'a continuing page, not a redirect (form-action \u2019self\u2019)')
    const next = refreshTargetOf(answered.html)
    assert.ok(next, answered.html.slice(0, 500))
    const reached = await follow(jar, service.baseUrl, new URL(next, service.baseUrl).toString(), redirectUri)
    assert.ok(reached.callback, reached.page?.html.slice(0, 500))
    return reached.callback
  }

  async function setRefreshLifetime(ownerToken: string, seconds: number) {
    const patched = await service.request('PATCH', '/api/v1/settings/security', {
      headers: { authorization: `Bearer ${ownerToken}` },
      body: { sessionLifetimes: { refreshTokenSeconds: seconds } },
    })
    assert.equal(patched.status, 200, patched.text)
  }

  /** A refresh token's lifetime as the provider itself reports it (the CLI may introspect its own). */
  /** Seconds from issue to end of a refresh token, introspected by its own client. */
  async function lifetimeOf(refreshToken: string, clientId = 'kms-cli'): Promise<number> {
    const introspected = await post('/oidc/token/introspection', {
      client_id: clientId,
      token: refreshToken,
    })
    const info = (await introspected.json()) as { active: boolean; exp: number; iat: number }
    assert.equal(info.active, true)
    return info.exp - info.iat
  }

  test('a browser signed in to the console is not enough: the CLI’s sign-in to a loopback port shows the confirmation page, every time, and no code leaves without Continue', async () => {
    const tenant = await service.createTenant()
    const tenantName = (await service.api.services.tenants.get(tenant.tenantId))!.name
    const { jar } = await consoleSession(tenant.tenantId)

    // What a web page's top-level navigation can do with the victim's cookies.
    const lured = cliAuthorization(tenant.tenantId, 47_123)
    const reached = await follow(jar, service.baseUrl, lured.url, lured.redirectUri)
    assert.equal(reached.callback, undefined, 'no redirect to the loopback without the person')
    const shown = reached.page!
    assert.equal(shown.status, 200)
    const text = shown.html.replace(/<[^>]+>/g, ' ').replace(/\s+/g, ' ')
    assert.match(text, /kms command line asks to sign in with your account to the tenant/)
    assert.ok(text.includes(`${tenantName} (${tenant.tenantId})`), 'the tenant by name and id')
    assert.match(shown.html, /id="cli-port">47123</)
    assert.ok(text.includes('http://127.0.0.1:47123/callback'))
    assert.match(text, /Only continue if you just ran kms login on this computer/)
    assert.match(shown.html, /name="decision" value="allow"/)
    assert.match(shown.html, /name="decision" value="deny"/)

    // Cancel: the loopback gets access_denied with its state, and no code.
    const cancelled = await answer(jar, shown.html, 'deny', lured.redirectUri)
    assert.equal(cancelled.searchParams.get('error'), 'access_denied')
    assert.equal(cancelled.searchParams.get('state'), lured.state)
    assert.equal(cancelled.searchParams.get('code'), null)

    // Continue: a code, which the CLI exchanges for a tenant token.
    const asked = cliAuthorization(tenant.tenantId, 47_124)
    const again = await follow(jar, service.baseUrl, asked.url, asked.redirectUri)
    assert.ok(again.page, 'the page again')
    const approved = await answer(jar, again.page.html, 'allow', asked.redirectUri)
    const code = approved.searchParams.get('code')
    assert.ok(code)
    const exchanged = await post('/oidc/token', {
      client_id: 'kms-cli',
      grant_type: 'authorization_code',
      code,
      redirect_uri: asked.redirectUri,
      code_verifier: asked.verifier,
    })
    assert.equal(exchanged.status, 200)

    // A grant exists now, and the session is live: the next CLI sign-in is still put to the person.
    const third = cliAuthorization(tenant.tenantId, 47_125)
    const thirdReached = await follow(jar, service.baseUrl, third.url, third.redirectUri)
    assert.equal(thirdReached.callback, undefined)
    assert.match(thirdReached.page?.html ?? '', /id="cli-confirmation"/)

    // prompt=none cannot skip it either: the loopback gets an error, not a code.
    const silent = cliAuthorization(tenant.tenantId, 47_126, { prompt: 'none' })
    const refused = await follow(jar, service.baseUrl, silent.url, silent.redirectUri)
    assert.ok(refused.callback)
    assert.equal(refused.callback.searchParams.get('code'), null)
    assert.match(refused.callback.searchParams.get('error') ?? '', /^(interaction|consent)_required$/)
  })

  test('the console’s own re-authorization on the same session stays silent', async () => {
    const tenant = await service.createTenant()
    const { jar } = await consoleSession(tenant.tenantId)
    const redirectUri = `${service.baseUrl}/console/callback`
    const url = new URL('/oidc/auth', service.baseUrl)
    for (const [name, value] of Object.entries({
      client_id: 'kms-console',
      response_type: 'code',
      redirect_uri: redirectUri,
      scope: 'openid email profile api',
      code_challenge: b64(
        createHash('sha256')
          .update(b64(randomBytes(32)))
          .digest(),
      ),
      code_challenge_method: 'S256',
      state: b64(randomBytes(16)),
      resource: `urn:kms:tenant:${tenant.tenantId}`,
    }))
      url.searchParams.set(name, value)
    const reached = await follow(jar, service.baseUrl, url.toString(), redirectUri)
    assert.ok(reached.callback?.searchParams.get('code'), 'a code without any page')
  })

  test('device flow: a token request without resource gets the tenant’s refresh lifetime, not 14 days', async () => {
    const tenant = await service.createTenant()
    const { jar, ownerToken } = await consoleSession(tenant.tenantId)
    await setRefreshLifetime(ownerToken, 300)

    const asked = await post('/oidc/device/auth', {
      client_id: 'kms-cli',
      scope: 'openid api',
      resource: `urn:kms:tenant:${tenant.tenantId}`,
    })
    assert.equal(asked.status, 200)
    const device = (await asked.json()) as { device_code: string; user_code: string }
    // The owner confirms the code in the browser signed in above.
    const form = await page(jar, new URL('/oidc/device', service.baseUrl))
    const xsrf = (html: string) => /name="xsrf" value="([^"]+)"/.exec(html)![1]!
    const confirm = await page(jar, new URL('/oidc/device', service.baseUrl), {
      form: { xsrf: xsrf(form.html), user_code: device.user_code },
    })
    const done = await page(jar, new URL('/oidc/device', service.baseUrl), {
      form: { xsrf: xsrf(confirm.html), user_code: device.user_code, confirm: 'yes' },
    })
    // A remembered session: straight on to the success page (through the provider's redirects).
    const shown = done.location
      ? (
          await follow(
            jar,
            service.baseUrl,
            new URL(done.location, service.baseUrl).toString(),
            'http://x.invalid',
          )
        ).page
      : done
    assert.match(shown?.html ?? '', /id="success"/)

    // Polled without `resource`: the refresh token is still the tenant's.
    const polled = await post('/oidc/token', {
      client_id: 'kms-cli',
      grant_type: DEVICE_GRANT,
      device_code: device.device_code,
    })
    assert.equal(polled.status, 200)
    const tokens = (await polled.json()) as { refresh_token: string }
    assert.equal(await lifetimeOf(tokens.refresh_token), 300)
  })

  test('code flow: a token request without resource gets the tenant’s refresh lifetime', async () => {
    const tenant = await service.createTenant()
    const { jar, ownerToken } = await consoleSession(tenant.tenantId)
    await setRefreshLifetime(ownerToken, 300)
    const asked = cliAuthorization(tenant.tenantId, 47_200)
    const reached = await follow(jar, service.baseUrl, asked.url, asked.redirectUri)
    const approved = await answer(jar, reached.page!.html, 'allow', asked.redirectUri)
    const exchanged = await post('/oidc/token', {
      client_id: 'kms-cli',
      grant_type: 'authorization_code',
      code: approved.searchParams.get('code')!,
      redirect_uri: asked.redirectUri,
      code_verifier: asked.verifier,
    })
    assert.equal(exchanged.status, 200)
    const tokens = (await exchanged.json()) as { refresh_token: string }
    assert.equal(await lifetimeOf(tokens.refresh_token), 300)
  })

  test('a console sign-in that names no tenant gets the shortest lifetime of the account’s tenants', async () => {
    const strict = await service.createTenant()
    const relaxed = await service.createTenant()
    const { owner, ownerToken } = await consoleSession(strict.tenantId)
    await setRefreshLifetime(ownerToken, 300)
    await service.api.services.team.addMember(
      { tenantId: relaxed.tenantId, actor: 'test', requestId: null, clientIp: null },
      { accountId: owner.accountId, role: 'tenant:developer' },
    )
    const { tokens } = await signIn(service.baseUrl, console_, {
      email: owner.email,
      password: owner.password,
    })
    assert.equal(await lifetimeOf(tokens.refresh_token!, 'kms-console'), 300)
  })

  test('a refresh for a tenant is refused once the sign-in is older than the tenant’s lifetime, even with a token issued for longer', async () => {
    const tenant = await service.createTenant()
    const { ownerToken } = await consoleSession(tenant.tenantId)
    const cli = await member(tenant.tenantId)
    const jar = (
      await signIn(service.baseUrl, console_, {
        email: cli.email,
        password: cli.password,
        resource: `urn:kms:tenant:${tenant.tenantId}`,
      })
    ).jar
    // Signed in while the tenant had the default (14 days).
    const asked = cliAuthorization(tenant.tenantId, 47_300)
    const reached = await follow(jar, service.baseUrl, asked.url, asked.redirectUri)
    const approved = await answer(jar, reached.page!.html, 'allow', asked.redirectUri)
    const exchanged = await post('/oidc/token', {
      client_id: 'kms-cli',
      grant_type: 'authorization_code',
      code: approved.searchParams.get('code')!,
      redirect_uri: asked.redirectUri,
      code_verifier: asked.verifier,
    })
    const { refresh_token: refreshToken } = (await exchanged.json()) as { refresh_token: string }
    assert.equal(await lifetimeOf(refreshToken), 14 * 24 * 3600)

    // The tenant shortens its lifetime; within it, a refresh works and rotates to what is left.
    await setRefreshLifetime(ownerToken, 300)
    clock.set(new Date())
    clock.advance(100_000)
    const refresh = (token: string) =>
      post('/oidc/token', {
        client_id: 'kms-cli',
        grant_type: 'refresh_token',
        refresh_token: token,
        resource: `urn:kms:tenant:${tenant.tenantId}`,
      })
    const within = await refresh(refreshToken)
    assert.equal(within.status, 200)
    const rotated = ((await within.json()) as { refresh_token: string }).refresh_token
    const left = await lifetimeOf(rotated)
    assert.ok(left <= 200 && left > 0, `the rotated token lives what the tenant’s 300 s leave (${left} s)`)

    // Past it: refused, although the token itself has not expired (the provider's own time has not moved).
    clock.advance(201_000)
    assert.ok((await lifetimeOf(rotated)) > 0, 'the token is still active')
    const past = await refresh(rotated)
    assert.equal(past.status, 400)
    assert.equal(((await past.json()) as { error: string }).error, 'invalid_grant')
  })
})
