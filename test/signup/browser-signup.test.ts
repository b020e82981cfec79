import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import * as oidc from 'openid-client'
import type { Browser, Page } from 'playwright-core'
import { launchChromium, pageWatchingCsp, screenshot, startClientSite } from '../helpers/browser.ts'
import { applicationClient } from '../helpers/endusers.ts'
import { startTestService, type TestService } from '../helpers/service.ts'
import { signupLinkMailedTo } from '../helpers/signup.ts'
import { startSmtp, type TestSmtp } from '../helpers/smtp.ts'

describe('sign-up and the partner portal’s sign-in in Chromium', () => {
  let smtp: TestSmtp
  let service: TestService
  let browser: Browser
  let clientSite: Awaited<ReturnType<typeof startClientSite>> | undefined
  let portalRedirect: string
  const violations: string[] = []

  before(async () => {
    clientSite = await startClientSite('Partner portal')
    portalRedirect = `${clientSite.origin}/partner-portal`
    smtp = await startSmtp('accept')
    service = await startTestService(
      {
        KMS_SMTP_URL: smtp.url,
        KMS_SMTP_ATTEMPTS: '1',
        KMS_PARTNER_PORTAL_REDIRECT_URIS: portalRedirect,
        KMS_JOB_SWEEP_MS: '200',
      },
      { jobs: true },
    )
    browser = await launchChromium()
  })
  after(async () => {
    await browser?.close()
    await service?.stop()
    await smtp?.stop()
    await clientSite?.close()
  })

  async function newPage(): Promise<Page> {
    const { page } = await pageWatchingCsp(browser, violations)
    return page
  }

  async function submit(page: Page) {
    await Promise.all([page.waitForLoadState('load'), page.click('button[type=submit]')])
  }

  test('a tenant signs up through a partner’s code URL: the form, the e-mailed link, the password, the tenant', async () => {
    const partners = service.api.services.partners
    const partner = await partners.createPartner({ name: 'Referrer', email: 'referrer@example.com' }, 'test')
    const { key } = await partners.createKey(partner.id, 'main', 'test')
    const headers = { authorization: `Bearer ${key}` }
    const code = await service.request('POST', '/api/v1/partners/codes', { headers, body: { label: 'Blog' } })
    assert.equal(code.status, 201, code.text)

    const page = await newPage()
    await page.goto(code.body.url)
    await page.waitForSelector(`text=referred by a partner`)
    assert.equal(await page.inputValue('input[name=ref]'), code.body.code)
    await page.fill('#organizationName', 'Browser Robotics')
    await page.fill('#email', 'founder@browser.example')
    await screenshot(page, 'signup-01-form')
    await submit(page)
    await page.waitForSelector('text=Check your inbox')

    const link = await signupLinkMailedTo(smtp, 'founder@browser.example')
    await page.goto(link.toString())
    await page.waitForSelector('text=Create the organisation')
    assert.equal(await page.inputValue('#organizationName'), 'Browser Robotics')
    await page.fill('#password', 'browser-founder-password')
    await screenshot(page, 'signup-02-confirm')
    await submit(page)
    await page.waitForSelector('text=is ready and you are its owner')
    const tenantId = (await page.textContent('#tenant-id'))?.trim()
    assert.match(tenantId ?? '', /^[0-9a-f-]{36}$/)

    const referrals = await service.request('GET', '/api/v1/partners/referrals', { headers })
    assert.deepEqual(
      referrals.body.data.map((r: { tenantId: string; status: string }) => [r.tenantId, r.status]),
      [[tenantId, 'active']],
    )
    // Back to the link: used once.
    await page.goto(link.toString())
    await page.waitForSelector('text=This confirmation link is not valid')
  })

  test('a partner applies, is told to wait at the portal’s sign-in, and enters once approved', async () => {
    const page = await newPage()
    await page.goto(`${service.baseUrl}/partners/signup`)
    await page.fill('#organizationName', 'Browser Integrators')
    await page.fill('#email', 'lin@integrators.example')
    await submit(page)
    await page.waitForSelector('text=Check your inbox')
    await page.goto((await signupLinkMailedTo(smtp, 'lin@integrators.example')).toString())
    await page.fill('#password', 'integrators-password-1')
    await submit(page)
    await page.waitForSelector('text=once an operator approves it')
    const partnerId = (await page.textContent('#partner-id'))?.trim()
    assert.ok(partnerId)

    const portal = await applicationClient(service.baseUrl, 'kms-partner-portal', portalRedirect)
    const authorize = async () =>
      oidc
        .buildAuthorizationUrl(portal.config, {
          redirect_uri: portalRedirect,
          scope: 'openid email api',
          resource: 'urn:kms:partner-portal',
          code_challenge: await oidc.calculatePKCECodeChallenge(oidc.randomPKCECodeVerifier()),
          code_challenge_method: 'S256',
          state: 'st',
        })
        .toString()
    const signIn = async () => {
      await page.goto(await authorize())
      await page.waitForSelector('#email')
      await page.fill('#email', 'lin@integrators.example')
      await page.fill('#password', 'integrators-password-1')
      await submit(page)
    }

    await signIn()
    await page.waitForSelector('text=waiting for an operator’s approval')
    await screenshot(page, 'partner-portal-01-pending')
    await Promise.all([
      page.waitForURL((url) => url.toString().startsWith(portalRedirect)),
      page.click('#return'),
    ])
    assert.equal(new URL(page.url()).searchParams.get('error'), 'access_denied')

    await service.api.services.partners.decide(partnerId!, 'approve', 'test')
    await page.goto(await authorize())
    // The browser's provider session may already know the account; either way it ends at the portal.
    if (await page.$('#email')) {
      await page.fill('#email', 'lin@integrators.example')
      await page.fill('#password', 'integrators-password-1')
      await Promise.all([
        page.waitForURL((url) => url.toString().startsWith(portalRedirect), { timeout: 15_000 }),
        page.click('button[type=submit]'),
      ])
    } else await page.waitForURL((url) => url.toString().startsWith(portalRedirect), { timeout: 15_000 })
    const callback = new URL(page.url())
    assert.ok(callback.searchParams.get('code'), 'an authorization code for the portal')
    assert.equal(callback.searchParams.get('error'), null)
    assert.deepEqual(violations, [])
  })
})
