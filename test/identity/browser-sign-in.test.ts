import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import * as oidc from 'openid-client'
import type { Browser, BrowserContext, Page } from 'playwright-core'
import {
  launchChromium,
  pageWatchingCsp,
  recordDocuments,
  screenshot,
  startClientSite,
} from '../helpers/browser.ts'
import { startTestService, type TestService, waitFor } from '../helpers/service.ts'
import { type ConsoleClient, consoleClient, memberSession } from '../helpers/sign-in.ts'
import { startSmtp, type TestSmtp, textOf } from '../helpers/smtp.ts'
import { totpCode } from '../helpers/totp.ts'

/** Spec 4.4, written out here rather than taken from the code. */
const CDN = 'cdn.example.test'
const EXPECTED_CSP =
  "default-src 'self'; style-src 'self' 'unsafe-inline' https://cdn.example.test; font-src 'self' https://cdn.example.test; " +
  "img-src 'self' data: blob: https:; script-src 'self'; frame-ancestors 'none'; form-action 'self'"

const totpNow = (base32: string, offsetSteps = 0) => totpCode(base32, Date.now() + offsetSteps * 30_000)

describe('sign-in pages in Chromium (Playwright)', () => {
  let smtp: TestSmtp
  let service: TestService
  let client: ConsoleClient
  let browser: Browser
  let clientSite: Awaited<ReturnType<typeof startClientSite>> | undefined
  let redirectUri: string
  const violations: string[] = []

  before(async () => {
    // The console's callback: another origin than the service, as a real client would be.
    clientSite = await startClientSite('Callback')
    redirectUri = `${clientSite.origin}/callback`
    smtp = await startSmtp('accept')
    service = await startTestService(
      {
        KMS_SMTP_URL: smtp.url,
        KMS_CONSOLE_REDIRECT_URIS: redirectUri,
        KMS_CDN_HOST: CDN,
        KMS_SMTP_ATTEMPTS: '1',
      },
      { jobs: true },
    )
    client = await consoleClient(service.baseUrl, redirectUri)
    browser = await launchChromium()
  })
  after(async () => {
    await browser?.close()
    await service?.stop()
    await smtp?.stop()
    await clientSite?.close()
  })

  async function newPage(): Promise<{
    page: Page
    context: BrowserContext
    documents: ReturnType<typeof recordDocuments>
  }> {
    const { page, context } = await pageWatchingCsp(browser, violations)
    return { page, context, documents: recordDocuments(page, service.baseUrl) }
  }

  function assertCsp(documents: ReturnType<typeof recordDocuments>, expectedPages: number) {
    assert.ok(documents.length >= expectedPages, `${documents.length} documents seen`)
    for (const doc of documents) {
      assert.equal(doc.headers['content-security-policy'], EXPECTED_CSP, `CSP of ${doc.url}`)
      assert.equal(doc.headers['x-frame-options'], 'DENY', doc.url)
    }
  }

  test('an invited person accepts in the browser, enrols TOTP on the page the tenant requires, signs in again with password and TOTP, and calls the API with the token', async () => {
    const tenant = await service.createTenant()
    const owner = await memberSession(service, client, tenant.tenantId, 'tenant:owner')
    const invited = await service.request('POST', '/api/v1/team/invitations', {
      headers: owner.headers,
      body: { email: 'newbie@example.com', role: 'tenant:developer' },
    })
    assert.equal(invited.status, 201)
    assert.equal(invited.body.emailDispatchStatus, 'queued')
    await waitFor(
      () => smtp.messages.some((m) => m.to.includes('newbie@example.com')),
      'the invitation e-mail',
    )
    const link = /(http:\/\/\S+\/invitations\/accept\?token=[A-Za-z0-9_-]+)/.exec(
      textOf(smtp.messages.find((m) => m.to.includes('newbie@example.com'))!),
    )![1]!

    const { page, context, documents } = await newPage()
    // The invitation.
    await page.goto(link)
    await screenshot(page, '01-accept-invitation')
    await page.fill('#password', 'newbie-password-long')
    await Promise.all([page.waitForLoadState('load'), page.click('button[type=submit]')])
    await page.waitForSelector('text=You are now a member')
    await screenshot(page, '02-invitation-accepted')
    const members = await service.request('GET', '/api/v1/team/members', { headers: owner.headers })
    const newbie = members.body.data.find((m: { email: string }) => m.email === 'newbie@example.com')
    assert.equal(newbie.role, 'tenant:developer')

    // The tenant requires TOTP: the first sign-in enrols an authenticator on the page.
    const required = await service.request('PATCH', '/api/v1/settings/security', {
      headers: owner.headers,
      body: { mfaMethods: { totp: { required: true } } },
    })
    assert.equal(required.status, 200, required.text)
    const resource = `urn:kms:tenant:${tenant.tenantId}`
    const authorizeUrl = async (state: string, verifier: string) =>
      oidc
        .buildAuthorizationUrl(client.config, {
          redirect_uri: redirectUri,
          scope: 'openid email profile api',
          code_challenge: await oidc.calculatePKCECodeChallenge(verifier),
          code_challenge_method: 'S256',
          resource,
          state,
        })
        .toString()
    const firstVerifier = oidc.randomPKCECodeVerifier()
    await page.goto(await authorizeUrl('first', firstVerifier))
    await page.waitForSelector('#email')
    await screenshot(page, '03-sign-in')
    // A wrong password first: the same form, an error, no hint whether the address exists.
    await page.fill('#email', 'newbie@example.com')
    await page.fill('#password', 'not the password')
    await Promise.all([page.waitForLoadState('load'), page.click('button[type=submit]')])
    await page.waitForSelector('[role=alert]')
    await screenshot(page, '04-sign-in-wrong-password')
    await page.fill('#password', 'newbie-password-long')
    await Promise.all([page.waitForLoadState('load'), page.click('button[type=submit]')])
    await page.waitForSelector('#totp-secret')
    await screenshot(page, '05-totp-enrolment')
    const secret = (await page.textContent('#totp-secret'))!.trim()
    await page.fill('#code', totpNow(secret))
    await Promise.all([
      page.waitForURL((url) => url.toString().startsWith(redirectUri), { timeout: 15_000 }),
      page.click('button[type=submit]'),
    ])
    assert.equal(new URL(page.url()).searchParams.get('state'), 'first')
    assert.equal((await service.api.services.accounts.get(newbie.accountId))?.totpEnrolled, true)

    // Signed out of the provider, the next sign-in asks for the password, then the code.
    await context.clearCookies()
    const verifier = oidc.randomPKCECodeVerifier()
    await page.goto(await authorizeUrl('browser-state', verifier))
    await page.waitForSelector('#email')
    await page.fill('#email', 'newbie@example.com')
    await page.fill('#password', 'newbie-password-long')
    await Promise.all([page.waitForLoadState('load'), page.click('button[type=submit]')])
    await page.waitForSelector('#code')
    await screenshot(page, '06-totp-challenge')
    // A code of the next step: enrolment used this step's (each step is accepted once).
    await page.fill('#code', totpNow(secret, 1))
    await Promise.all([
      page.waitForURL((url) => url.toString().startsWith(redirectUri), { timeout: 15_000 }),
      page.click('button[type=submit]'),
    ])
    const callback = new URL(page.url())
    await screenshot(page, '07-back-at-the-client')
    const tokens = await oidc.authorizationCodeGrant(
      client.config,
      callback,
      { pkceCodeVerifier: verifier, expectedState: 'browser-state' },
      { resource },
    )
    const me = await service.request('GET', '/api/v1/tenant', {
      headers: { authorization: `Bearer ${tokens.access_token}` },
    })
    assert.equal(me.status, 200, me.text)
    assert.equal(me.body.callerKind, 'member')
    assert.equal(me.body.role, 'tenant:developer')
    assert.equal(me.body.accountId, newbie.accountId)

    // Sign-out: the question, then the signed-out page.
    await page.goto(oidc.buildEndSessionUrl(client.config, { id_token_hint: tokens.id_token! }).toString())
    await page.waitForSelector('button[value=yes]')
    await screenshot(page, '08-sign-out')
    await Promise.all([page.waitForLoadState('load'), page.click('button[value=yes]')])
    await page.waitForSelector('text=You are signed out')
    await screenshot(page, '09-signed-out')

    // An error page: a sign-in that does not exist.
    const missing = await page.goto(new URL('/sign-in/no-such-interaction', service.baseUrl).toString())
    assert.equal(missing?.status(), 400)
    await screenshot(page, '10-error')

    assertCsp(documents, 11)
    assert.deepEqual(violations, [], 'no CSP violation reported by the browser')
  })

  test('the pages follow the browser’s language', async () => {
    const context = await browser.newContext({ locale: 'fr-FR' })
    const page = await context.newPage()
    const verifier = oidc.randomPKCECodeVerifier()
    await page.goto(
      oidc
        .buildAuthorizationUrl(client.config, {
          redirect_uri: redirectUri,
          scope: 'openid',
          code_challenge: await oidc.calculatePKCECodeChallenge(verifier),
          code_challenge_method: 'S256',
        })
        .toString(),
    )
    await page.waitForSelector('#email')
    assert.equal(await page.textContent('h1'), 'Connexion')
    assert.equal(await page.getAttribute('html', 'lang'), 'fr')
    await screenshot(page, '11-sign-in-fr')
    await context.close()
  })

  test('a remembered login is asked, on a page and by keyboard alone, for the code a second tenant requires (step-up)', async () => {
    const tenantA = await service.createTenant()
    const tenantB = await service.createTenant()
    const ownerB = await memberSession(service, client, tenantB.tenantId, 'tenant:owner')
    const required = await service.request('PATCH', '/api/v1/settings/security', {
      headers: ownerB.headers,
      body: {
        mfaMethods: {
          totp: { enabled: false, required: false },
          emailOtp: { enabled: true, required: true },
        },
      },
    })
    assert.equal(required.status, 200, required.text)
    const email = `step-up-${process.pid}@example.com`
    const password = 'step-up password, long enough'
    const account = await service.api.services.accounts.createTeamAccount({ email, password })
    for (const tenantId of [tenantA.tenantId, tenantB.tenantId])
      await service.api.services.team.addMember(
        { tenantId, actor: 'test', requestId: null, clientIp: null },
        { accountId: account.id, role: 'tenant:developer' },
      )
    const authorizeUrl = async (tenantId: string, state: string, verifier: string) =>
      oidc
        .buildAuthorizationUrl(client.config, {
          redirect_uri: redirectUri,
          scope: 'openid email',
          code_challenge: await oidc.calculatePKCECodeChallenge(verifier),
          code_challenge_method: 'S256',
          resource: `urn:kms:tenant:${tenantId}`,
          state,
        })
        .toString()
    const { page, context, documents } = await newPage()
    /** Moves the focus with Tab until it is on the element with this id (a person using the keyboard). */
    const tabTo = async (id: string) => {
      for (let i = 0; i < 15; i++) {
        if ((await page.evaluate('document.activeElement?.id')) === id) return
        await page.keyboard.press('Tab')
      }
      assert.fail(`#${id} was not reached with the keyboard`)
    }

    // Tenant A asks for the password only.
    await page.goto(await authorizeUrl(tenantA.tenantId, 'a', oidc.randomPKCECodeVerifier()))
    await page.waitForSelector('#email')
    await tabTo('email')
    await page.keyboard.type(email)
    await tabTo('password')
    await page.keyboard.type(password)
    await Promise.all([
      page.waitForURL((url) => url.toString().startsWith(redirectUri), { timeout: 15_000 }),
      page.keyboard.press('Enter'),
    ])

    // Tenant B, same browser: no password again, but the e-mailed code B requires.
    const seen = smtp.messages.length
    const verifier = oidc.randomPKCECodeVerifier()
    await page.goto(await authorizeUrl(tenantB.tenantId, 'b', verifier))
    await page.waitForSelector('#step-up')
    assert.equal(await page.$('#password'), null, 'the password is not asked again')
    assert.match((await page.textContent('#step-up')) ?? '', /one more verification/)
    await screenshot(page, '12-step-up-email-code')
    await waitFor(() => smtp.messages.slice(seen).some((m) => m.to.includes(email)), 'the e-mailed code')
    const mail = smtp.messages.slice(seen).find((m) => m.to.includes(email))!
    const code = /sign-in code is (\d{6})/.exec(textOf(mail))?.[1]
    assert.ok(code)
    await tabTo('code')
    await page.keyboard.type(code)
    await Promise.all([
      page.waitForURL((url) => url.toString().startsWith(redirectUri), { timeout: 15_000 }),
      page.keyboard.press('Enter'),
    ])
    const tokens = await oidc.authorizationCodeGrant(
      client.config,
      new URL(page.url()),
      { pkceCodeVerifier: verifier, expectedState: 'b' },
      { resource: `urn:kms:tenant:${tenantB.tenantId}` },
    )
    const amr = JSON.parse(Buffer.from(tokens.id_token!.split('.')[1]!, 'base64url').toString()).amr
    assert.deepEqual(amr, ['pwd', 'otp', 'mfa'])
    assertCsp(documents, 3)
    assert.deepEqual(violations, [], 'no CSP violation reported by the browser')
    await context.close()
  })
})
