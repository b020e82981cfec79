import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import * as oidc from 'openid-client'
import { applicationClient, endUserWithPassword } from '../helpers/endusers.ts'
import {
  httpRequest,
  type SpawnedService,
  spawnService,
  startTestService,
  type TestService,
  waitFor,
} from '../helpers/service.ts'
import {
  type ConsoleClient,
  CookieJar,
  consoleClient,
  csrfOf,
  follow,
  formActionOf,
  memberSession,
  type PageResponse,
  page,
  refreshTargetOf,
} from '../helpers/sign-in.ts'
import { startSmtp, type TestSmtp, textOf } from '../helpers/smtp.ts'
import { totpCode } from '../helpers/totp.ts'

/**
 * Issue 30, defects 1 and 2: every authorization, also one that reuses a remembered login, asks
 * the same question before a code is issued (the factors this client, tenant and application
 * require, the access policies, the end-user's status), and so does every refresh. The browser's
 * first sign-in goes through process A; the later authorizations through process B, another OS
 * process of the same deployment.
 */

const CONSOLE_REDIRECT = 'http://127.0.0.1:9/console'
const APP_REDIRECT = 'http://127.0.0.1:9/app'
const NONE = { enabled: false, required: false }
const REQUIRED = { enabled: true, required: true }

let smtp: TestSmtp
let a: TestService
let b: SpawnedService
let console_: ConsoleClient

before(async () => {
  smtp = await startSmtp('accept')
  a = await startTestService(
    {
      KMS_SMTP_URL: smtp.url,
      KMS_SMTP_ATTEMPTS: '1',
      KMS_SMTP_TIMEOUT_MS: '2000',
      KMS_CONSOLE_REDIRECT_URIS: CONSOLE_REDIRECT,
    },
    { jobs: true },
  )
  b = await spawnService({ ...a.env, ID_URL: a.baseUrl })
  console_ = await consoleClient(a.baseUrl, CONSOLE_REDIRECT)
})
after(async () => {
  await b?.stop()
  await a?.stop()
  await smtp?.stop()
})

/** A browser's authorization request, sent to `base` (process A or B), followed as far as it goes. */
async function authorize(
  jar: CookieJar,
  client: ConsoleClient,
  base: string,
  resource?: string,
): Promise<{ callback?: URL; page?: PageResponse; verifier: string; state: string }> {
  const verifier = oidc.randomPKCECodeVerifier()
  const state = oidc.randomState()
  const url = oidc.buildAuthorizationUrl(client.config, {
    redirect_uri: client.redirectUri,
    scope: 'openid email',
    code_challenge: await oidc.calculatePKCECodeChallenge(verifier),
    code_challenge_method: 'S256',
    state,
    ...(resource ? { resource } : {}),
  })
  const onB = new URL(url.pathname + url.search, base)
  return { ...(await follow(jar, base, onB.toString(), client.redirectUri)), verifier, state }
}

/** Submits the form of `shown` with `fields`, then follows to the client or the next page. */
async function submit(
  jar: CookieJar,
  client: ConsoleClient,
  shown: PageResponse,
  fields: Record<string, string>,
): Promise<{ callback?: URL; page?: PageResponse }> {
  let next = await page(jar, new URL(formActionOf(shown.html), shown.url), {
    form: { csrf: csrfOf(shown.html), ...fields },
  })
  if (next.status === 303 && next.location) {
    return follow(jar, shown.url, new URL(next.location, shown.url).toString(), client.redirectUri)
  }
  const refresh = refreshTargetOf(next.html)
  if (refresh) return follow(jar, shown.url, new URL(refresh, shown.url).toString(), client.redirectUri)
  next = { ...next }
  return { page: next }
}

const stepOf = (html: string) => /<form method="post" action="\/sign-in\/[^/"]+\/([a-z-]+)"/.exec(html)?.[1]
const secretOf = (html: string) => /id="totp-secret">([A-Z2-7]+)</.exec(html)?.[1]
const claimsOf = (jwt: string) =>
  JSON.parse(Buffer.from(jwt.split('.')[1]!, 'base64url').toString()) as {
    amr?: string[]
    aud?: string | string[]
  }

async function tokensOf(
  client: ConsoleClient,
  reached: { callback?: URL; verifier: string; state: string },
  resource?: string,
) {
  assert.ok(reached.callback, 'back at the client')
  return oidc.authorizationCodeGrant(
    client.config,
    reached.callback,
    { pkceCodeVerifier: reached.verifier, expectedState: reached.state },
    resource ? { resource } : undefined,
  )
}

async function emailCodeAfter(email: string, seen: number): Promise<string> {
  const mine = () => smtp.messages.filter((m) => m.to.some((to) => to.toLowerCase() === email.toLowerCase()))
  await waitFor(() => mine().length > seen, `a code e-mailed to ${email}`)
  const code = /sign-in code is (\d{6})/.exec(textOf(mine().at(-1)!))?.[1]
  assert.ok(code, 'a code in the e-mail')
  return code
}

const mailCountTo = (email: string) =>
  smtp.messages.filter((m) => m.to.some((to) => to.toLowerCase() === email.toLowerCase())).length

let counter = 0
async function teamAccount(tenantIds: string[], role: 'tenant:owner' | 'tenant:developer' = 'tenant:owner') {
  const email = `gate-${process.pid}-${++counter}@example.com`
  const password = `gate password ${counter} long`
  const account = await a.api.services.accounts.createTeamAccount({ email, password })
  for (const tenantId of tenantIds)
    await a.api.services.team.addMember(
      { tenantId, actor: 'test', requestId: null, clientIp: null },
      { accountId: account.id, role },
    )
  return { id: account.id, email, password }
}

async function requireMethods(tenantId: string, mfaMethods: Record<string, unknown>) {
  const owner = await memberSession(a, console_, tenantId, 'tenant:owner')
  const patched = await a.request('PATCH', '/api/v1/settings/security', {
    headers: owner.headers,
    body: { mfaMethods },
  })
  assert.equal(patched.status, 200, patched.text)
  return owner
}

/** The first sign-in of a browser on process A: the password page, nothing else asked. */
async function passwordOnly(
  jar: CookieJar,
  client: ConsoleClient,
  user: { email: string; password: string },
  resource?: string,
) {
  const started = await authorize(jar, client, a.baseUrl, resource)
  assert.ok(started.page, 'the password page')
  const done = await submit(jar, client, started.page, { email: user.email, password: user.password })
  assert.ok(done.callback, `the password was enough: ${done.page?.html.slice(0, 300)}`)
  return { ...started, callback: done.callback }
}

describe('a remembered login is asked for what the next tenant requires (defect 1)', () => {
  test('console without a resource, then tenant B requiring TOTP: the enrolment page, not a code', async () => {
    const tenantB = await a.createTenant()
    await requireMethods(tenantB.tenantId, { totp: REQUIRED })
    const member = await teamAccount([tenantB.tenantId])
    const jar = new CookieJar()
    await passwordOnly(jar, console_, member)

    const resourceB = `urn:kms:tenant:${tenantB.tenantId}`
    const reached = await authorize(jar, console_, b.baseUrl, resourceB)
    assert.equal(reached.callback, undefined, 'no code for tenant B without its factor')
    assert.ok(reached.page)
    assert.equal(reached.page.status, 200)
    assert.equal(stepOf(reached.page.html), 'totp-enrol', 'the remembered login is asked to enrol TOTP')
    assert.doesNotMatch(reached.page.html, /name="password"/, 'no password asked again')

    const secret = secretOf(reached.page.html)
    assert.ok(secret)
    const done = await submit(jar, console_, reached.page, { code: totpCode(secret) })
    const tokens = await tokensOf(console_, { ...reached, ...done }, resourceB)
    const claims = claimsOf(tokens.id_token!)
    assert.ok(claims.amr?.includes('otp'), `amr ${claims.amr}`)
    assert.ok(claims.amr?.includes('pwd'))
    assert.ok(claims.amr?.includes('mfa'))
    const onB = await httpRequest(b.baseUrl, 'GET', '/api/v1/tenant', {
      headers: { authorization: `Bearer ${tokens.access_token}` },
    })
    assert.equal(onB.status, 200, onB.text)

    // Single sign-on stays: the session has the factor now, so the next authorization needs no page.
    const again = await authorize(jar, console_, b.baseUrl, resourceB)
    assert.ok(
      again.callback,
      `a remembered login with every factor gets a code: ${again.page?.html.slice(0, 300)}`,
    )
    assert.ok(again.callback.searchParams.get('code'))

    // The sign-in and the step-up are in tenant B's audit log.
    const audit = await a.request('GET', '/api/v1/audit?action=identity.sign_in&limit=50', {
      key: tenantB.key,
    })
    assert.equal(audit.status, 200, audit.text)
    const mine = (audit.body.data as Array<{ actor: string; details: Record<string, unknown> }>).filter(
      (row) => row.actor === `member:${member.id}`,
    )
    assert.ok(
      mine.some((row) => row.details['stepUp'] === true && String(row.details['methods']).includes('otp')),
      JSON.stringify(audit.body.data),
    )
  })

  test('a member of A and B signed in for A, then B requiring an e-mailed code: the code page', async () => {
    const tenantA = await a.createTenant()
    const tenantB = await a.createTenant()
    await requireMethods(tenantB.tenantId, { totp: NONE, emailOtp: REQUIRED, smsOtp: NONE })
    const member = await teamAccount([tenantA.tenantId, tenantB.tenantId])
    const jar = new CookieJar()
    const resourceA = `urn:kms:tenant:${tenantA.tenantId}`
    await passwordOnly(jar, console_, member, resourceA)

    const resourceB = `urn:kms:tenant:${tenantB.tenantId}`
    const seen = mailCountTo(member.email)
    const reached = await authorize(jar, console_, b.baseUrl, resourceB)
    assert.equal(reached.callback, undefined, 'no code for tenant B without the e-mailed code')
    assert.ok(reached.page)
    assert.equal(stepOf(reached.page.html), 'email-otp')
    const done = await submit(jar, console_, reached.page, { code: await emailCodeAfter(member.email, seen) })
    const tokens = await tokensOf(console_, { ...reached, ...done }, resourceB)
    assert.ok(claimsOf(tokens.id_token!).amr?.includes('otp'))
    assert.equal(claimsOf(tokens.access_token).aud, resourceB)

    // Tenant A asks for nothing more: back to A, no page.
    const backToA = await authorize(jar, console_, b.baseUrl, resourceA)
    assert.ok(backToA.callback, 'tenant A needs nothing more')
  })

  test('a refresh is refused once the tenant requires a factor the session never proved', async () => {
    const tenant = await a.createTenant()
    const owner = await requireMethods(tenant.tenantId, { totp: NONE, emailOtp: NONE, smsOtp: NONE })
    const member = await teamAccount([tenant.tenantId], 'tenant:developer')
    const jar = new CookieJar()
    const resource = `urn:kms:tenant:${tenant.tenantId}`
    const reached = await passwordOnly(jar, console_, member, resource)
    const tokens = await tokensOf(console_, reached, resource)
    const refreshed = await oidc.refreshTokenGrant(console_.config, tokens.refresh_token!)
    assert.ok(refreshed.access_token, 'refresh works while nothing more is required')

    const patched = await a.request('PATCH', '/api/v1/settings/security', {
      headers: owner.headers,
      body: { mfaMethods: { emailOtp: REQUIRED } },
    })
    assert.equal(patched.status, 200, patched.text)
    await assert.rejects(
      oidc.refreshTokenGrant(console_.config, refreshed.refresh_token!),
      (err: oidc.ResponseBodyError) => err.error === 'invalid_grant',
    )
  })
})

describe('another application of the same tenant asks its own question (defect 2)', () => {
  test('a Deny policy, an application requiring TOTP, and a blocked end-user, through a remembered login', async () => {
    const tenant = await a.createTenant()
    const app = async (name: string, extra: Record<string, unknown> = {}) => {
      const created = await a.request('POST', '/api/v1/applications', {
        key: tenant.key,
        body: { name, applicationType: 'spa', redirectUris: [APP_REDIRECT], ...extra },
      })
      assert.equal(created.status, 201, created.text)
      return {
        id: created.body.id as string,
        client: await applicationClient(a.baseUrl, created.body.clientId as string, APP_REDIRECT),
      }
    }
    const app1 = await app('Open')
    const app2 = await app('Denied')
    const app3 = await app('TOTP required', { mfaMethods: { totp: REQUIRED, emailOtp: NONE, smsOtp: NONE } })
    const denied = await a.request('POST', '/api/v1/access-policies', {
      key: tenant.key,
      body: { name: 'No one in app2', action: 'Deny', priority: 1, applicationIds: [app2.id] },
    })
    assert.equal(denied.status, 201, denied.text)
    const user = await endUserWithPassword(a, smtp, tenant.key, app1.id)

    const jar = new CookieJar()
    const first = await passwordOnly(jar, app1.client, user)
    const tokens1 = await tokensOf(app1.client, first)

    // app2: the policy refuses, on a page; no code.
    const toApp2 = await authorize(jar, app2.client, b.baseUrl)
    assert.equal(toApp2.callback, undefined, 'no code for the denied application')
    assert.ok(toApp2.page)
    assert.equal(toApp2.page.status, 403)
    assert.match(toApp2.page.html, /id="return"/)
    const returned = new URL(/id="return" href="([^"]+)"/.exec(toApp2.page.html)![1]!.replace(/&amp;/g, '&'))
    const back = await follow(jar, b.baseUrl, returned.toString(), APP_REDIRECT)
    assert.equal(back.callback?.searchParams.get('error'), 'access_denied')
    // One refusal, one record: the provider's look at the remembered login records nothing itself.
    const refusals = await a.request('GET', '/api/v1/audit?action=access_policies.sign_in.refused', {
      key: tenant.key,
    })
    assert.equal(refusals.status, 200, refusals.text)
    assert.equal(refusals.body.data.length, 1, JSON.stringify(refusals.body.data))
    const failed = await a.request('GET', '/api/v1/audit?action=identity.sign_in_failed', { key: tenant.key })
    assert.deepEqual(
      failed.body.data.map((row: { details: Record<string, unknown> }) => [
        row.details['reason'],
        row.details['stepUp'],
      ]),
      [['access_policy', true]],
    )

    // app3: its own TOTP requirement, asked of the remembered login.
    const toApp3 = await authorize(jar, app3.client, b.baseUrl)
    assert.equal(toApp3.callback, undefined, 'no code for app3 without TOTP')
    assert.ok(toApp3.page)
    assert.equal(stepOf(toApp3.page.html), 'totp-enrol')
    const secret = secretOf(toApp3.page.html)!
    const done = await submit(jar, app3.client, toApp3.page, { code: totpCode(secret) })
    const tokens3 = await tokensOf(app3.client, { ...toApp3, ...done })
    assert.ok(claimsOf(tokens3.id_token!).amr?.includes('otp'))

    // The end-user joined app3's list (and not app2's).
    const record = await a.request('GET', `/api/v1/endusers/${user.id}`, { key: tenant.key })
    assert.equal(record.status, 200, record.text)
    assert.ok(record.body.applicationIds.includes(app3.id), JSON.stringify(record.body.applicationIds))
    assert.ok(!record.body.applicationIds.includes(app2.id))

    // Blocked: app1’s refresh token stops working (blocking also ends the sessions).
    const blocked = await a.request('POST', `/api/v1/endusers/${user.id}/block`, { key: tenant.key })
    assert.equal(blocked.status, 200, blocked.text)
    await assert.rejects(
      oidc.refreshTokenGrant(app1.client.config, tokens1.refresh_token!),
      (err: oidc.ResponseBodyError) => err.error === 'invalid_grant',
    )
  })

  test('a refresh is refused once the end-user is denied by a new policy', async () => {
    const tenant = await a.createTenant()
    const created = await a.request('POST', '/api/v1/applications', {
      key: tenant.key,
      body: { name: 'Refreshing', applicationType: 'spa', redirectUris: [APP_REDIRECT] },
    })
    assert.equal(created.status, 201, created.text)
    const client = await applicationClient(a.baseUrl, created.body.clientId as string, APP_REDIRECT)
    const user = await endUserWithPassword(a, smtp, tenant.key, created.body.id as string)
    const jar = new CookieJar()
    const tokens = await tokensOf(client, await passwordOnly(jar, client, user))
    const policy = await a.request('POST', '/api/v1/access-policies', {
      key: tenant.key,
      body: { name: 'Closed', action: 'Deny', priority: 1, applicationIds: [created.body.id] },
    })
    assert.equal(policy.status, 201, policy.text)
    await assert.rejects(
      oidc.refreshTokenGrant(client.config, tokens.refresh_token!),
      (err: oidc.ResponseBodyError) => err.error === 'invalid_grant',
    )
  })
})
