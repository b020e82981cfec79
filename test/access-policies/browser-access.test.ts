import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import * as oidc from 'openid-client'
import type { Browser, Page } from 'playwright-core'
import { launchChromium, pageWatchingCsp, screenshot, startClientSite } from '../helpers/browser.ts'
import { applicationClient, endUserWithPassword } from '../helpers/endusers.ts'
import { type ManualClock, manualClock } from '../helpers/manual-clock.ts'
import { startSamlIdp, type TestSamlIdp } from '../helpers/saml-idp.ts'
import { startTestService, type TestService, waitFor } from '../helpers/service.ts'
import { type ConsoleClient, consoleClient, type MemberSession, memberSession } from '../helpers/sign-in.ts'
import { startSmtp, type TestSmtp, textOf } from '../helpers/smtp.ts'

const CONSOLE_REDIRECT = 'http://127.0.0.1:9/console'

describe('access requests and SAML federation in Chromium', () => {
  let smtp: TestSmtp
  let service: TestService
  let clock: ManualClock
  let browser: Browser
  let clientSite: Awaited<ReturnType<typeof startClientSite>> | undefined
  let redirectUri: string
  let tenant: { tenantId: string; key: string }
  let app: { id: string; clientId: string }
  let client: ConsoleClient
  let admin: MemberSession
  let idp: TestSamlIdp
  const violations: string[] = []

  before(async () => {
    clientSite = await startClientSite('Orders')
    redirectUri = `${clientSite.origin}/callback`
    smtp = await startSmtp('accept')
    clock = manualClock()
    service = await startTestService(
      { KMS_SMTP_URL: smtp.url, KMS_SMTP_ATTEMPTS: '1', KMS_CONSOLE_REDIRECT_URIS: CONSOLE_REDIRECT },
      { jobs: true, clock },
    )
    tenant = await service.createTenant()
    const created = await service.request('POST', '/api/v1/applications', {
      key: tenant.key,
      body: { name: 'Orders', applicationType: 'spa', redirectUris: [redirectUri] },
    })
    assert.equal(created.status, 201, created.text)
    app = created.body
    client = await applicationClient(service.baseUrl, app.clientId, redirectUri)
    admin = await memberSession(
      service,
      await consoleClient(service.baseUrl, CONSOLE_REDIRECT),
      tenant.tenantId,
      'tenant:admin',
    )
    idp = await startSamlIdp({
      nameId: 'ada@acme.example',
      attributes: { email: 'ada@acme.example', displayName: 'Ada' },
    })
    browser = await launchChromium()
  })
  after(async () => {
    await browser?.close()
    await service?.stop()
    await smtp?.stop()
    await idp?.stop()
    await clientSite?.close()
  })

  async function newPage(): Promise<Page> {
    const { page } = await pageWatchingCsp(browser, violations)
    return page
  }

  const authorizeUrl = async () =>
    oidc
      .buildAuthorizationUrl(client.config, {
        redirect_uri: redirectUri,
        scope: 'openid email',
        code_challenge: await oidc.calculatePKCECodeChallenge(oidc.randomPKCECodeVerifier()),
        code_challenge_method: 'S256',
        state: 'st',
      })
      .toString()

  /** Password sign-in up to the page it ends on. */
  async function signIn(page: Page, user: { email: string; password: string }) {
    await page.goto(await authorizeUrl())
    await page.waitForSelector('#email')
    await page.fill('#email', user.email)
    await page.fill('#password', user.password)
    await Promise.all([page.waitForLoadState('load'), page.click('button[type=submit]')])
  }

  const pendingRequestOf = async (endUserId: string): Promise<string> => {
    const listed = await service.request('GET', '/api/v1/access-requests?status=pending', { key: tenant.key })
    assert.equal(listed.status, 200, listed.text)
    const request = (listed.body.data as Array<{ id: string; endUserId: string }>).find(
      (r) => r.endUserId === endUserId,
    )
    assert.ok(request, 'a pending request of the user')
    return request.id
  }

  test('approval: the sign-in waits, an admin approves through the API, the user completes sign-in', async () => {
    const policy = await service.request('POST', '/api/v1/access-policies', {
      key: tenant.key,
      body: { name: 'Everyone needs approval', action: 'AllowWithApproval', priority: 100 },
    })
    assert.equal(policy.status, 201, policy.text)
    const user = await endUserWithPassword(service, smtp, tenant.key, app.id)
    const page = await newPage()
    await signIn(page, user)
    await page.waitForSelector('text=Waiting for approval')
    await screenshot(page, 'access-01-waiting-for-approval')
    // Looking again before a decision: still waiting.
    await Promise.all([page.waitForLoadState('load'), page.click('#check-again')])
    await page.waitForSelector('text=Waiting for approval')

    const requestId = await pendingRequestOf(user.id)
    const approved = await service.request('POST', `/api/v1/access-requests/${requestId}/approve`, {
      headers: admin.headers,
      body: { reason: 'Welcome aboard' },
    })
    assert.equal(approved.status, 200, approved.text)
    await Promise.all([
      page.waitForURL((url) => url.toString().startsWith(redirectUri), { timeout: 15_000 }),
      page.click('#check-again'),
    ])
    const callback = new URL(page.url())
    assert.ok(callback.searchParams.get('code'), 'an authorization code')
    assert.equal(callback.searchParams.get('error'), null)
    await waitFor(
      () =>
        smtp.messages.some(
          (m) => m.to.includes(user.email) && /Subject: Access to Orders approved/.test(m.raw),
        ),
      'the approval e-mail',
    )
    assert.match(
      textOf(smtp.messages.find((m) => m.to.includes(user.email) && /approved/.test(m.raw))!),
      /was approved/,
    )
    await page.context().close()
  })

  test('rejection and expiry: the waiting sign-in ends with an access-denied page and access_denied at the client', async () => {
    const rejectedUser = await endUserWithPassword(service, smtp, tenant.key, app.id)
    const lateUser = await endUserWithPassword(service, smtp, tenant.key, app.id)
    const rejectedPage = await newPage()
    await signIn(rejectedPage, rejectedUser)
    await rejectedPage.waitForSelector('text=Waiting for approval')
    const latePage = await newPage()
    await signIn(latePage, lateUser)
    await latePage.waitForSelector('text=Waiting for approval')

    const rejected = await service.request(
      'POST',
      `/api/v1/access-requests/${await pendingRequestOf(rejectedUser.id)}/reject`,
      {
        headers: admin.headers,
      },
    )
    assert.equal(rejected.status, 200, rejected.text)
    await Promise.all([rejectedPage.waitForLoadState('load'), rejectedPage.click('#check-again')])
    await rejectedPage.waitForSelector('text=was not approved')
    await screenshot(rejectedPage, 'access-02-rejected')
    await Promise.all([
      rejectedPage.waitForURL((url) => url.toString().startsWith(redirectUri), { timeout: 15_000 }),
      rejectedPage.click('#return'),
    ])
    assert.equal(new URL(rejectedPage.url()).searchParams.get('error'), 'access_denied')

    // Nobody decides within a day.
    clock.advance(24 * 3600_000 + 1000)
    await Promise.all([latePage.waitForLoadState('load'), latePage.click('#check-again')])
    await latePage.waitForSelector('text=expired')
    await screenshot(latePage, 'access-03-expired')
    await Promise.all([
      latePage.waitForURL((url) => url.toString().startsWith(redirectUri), { timeout: 15_000 }),
      latePage.click('#return'),
    ])
    assert.equal(new URL(latePage.url()).searchParams.get('error'), 'access_denied')
    clock.set(new Date())
  })

  test('SAML: "Sign in with" goes to the IdP, whose signed response brings the user back signed in', async () => {
    // Approval applies to everyone here: an Allow for the federated user's application comes first.
    const allow = await service.request('POST', '/api/v1/access-policies', {
      key: tenant.key,
      body: { name: 'Federated users', action: 'Allow', priority: 1 },
    })
    assert.equal(allow.status, 201, allow.text)
    // Registering an IdP is an owner's or admin's session (API keys are refused).
    const registered = await service.request('POST', '/api/v1/saml-identity-providers', {
      headers: admin.headers,
      body: {
        name: 'Acme Corp',
        entityId: idp.entityId,
        ssoUrl: idp.ssoUrl,
        certificate: idp.key.body,
        attributeMapping: { email: 'email', name: 'displayName' },
      },
    })
    assert.equal(registered.status, 201, registered.text)
    const page = await newPage()
    await page.goto(await authorizeUrl())
    await page.waitForSelector('text=Sign in with Acme Corp')
    await screenshot(page, 'access-04-sign-in-with-idp')
    await Promise.all([
      page.waitForURL((url) => url.toString().startsWith(idp.ssoUrl)),
      page.click('text=Sign in with Acme Corp'),
    ])
    await Promise.all([
      page.waitForURL((url) => url.toString().startsWith(redirectUri), { timeout: 15_000 }),
      page.click('text=Continue'),
    ])
    assert.ok(new URL(page.url()).searchParams.get('code'), 'an authorization code')
    assert.equal(idp.requests.length, 1)
    const users = await service.request('GET', '/api/v1/endusers', { key: tenant.key })
    const ada = (users.body.data as Array<{ email: string; source: string; displayName: string }>).find(
      (u) => u.email === 'ada@acme.example',
    )
    assert.equal(ada?.source, 'federation')
    assert.equal(ada?.displayName, 'Ada')
    assert.deepEqual(violations, [])
  })
})
