import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import * as oidc from 'openid-client'
import type { Browser, Page } from 'playwright-core'
import {
  launchChromium,
  pageWatchingCsp,
  recordDocuments,
  screenshot,
  startClientSite,
} from '../helpers/browser.ts'
import { applicationClient, linkMailedTo } from '../helpers/endusers.ts'
import { startTestService, type TestService, waitFor } from '../helpers/service.ts'
import type { ConsoleClient } from '../helpers/sign-in.ts'
import { smsCodeOf, startSmsProvider, type TestSmsProvider } from '../helpers/sms.ts'
import { type CapturedMail, startSmtp, type TestSmtp, textOf } from '../helpers/smtp.ts'
import { totpCode } from '../helpers/totp.ts'

/** Spec 4.4, written out here rather than taken from the code. */
const EXPECTED_CSP =
  "default-src 'self'; style-src 'self' 'unsafe-inline' https://cdn.example.test; font-src 'self' https://cdn.example.test; " +
  "img-src 'self' data: blob: https:; script-src 'self'; frame-ancestors 'none'; form-action 'self'"
const NONE = { enabled: false, required: false }
const REQUIRED = { enabled: true, required: true }

describe('end-users in Chromium: set-up link, MFA by e-mail, SMS and TOTP, reset, blocked, branding', () => {
  let smtp: TestSmtp
  let sms: TestSmsProvider
  let service: TestService
  let browser: Browser
  let clientSite: Awaited<ReturnType<typeof startClientSite>> | undefined
  let redirectUri: string
  let tenantKey: string
  let app: { id: string; clientId: string }
  let client: ConsoleClient
  const recorders: Array<ReturnType<typeof recordDocuments>> = []
  let tenantId: string
  const violations: string[] = []
  const email = 'grace.enduser@example.com'
  let password = 'grace initial password'

  before(async () => {
    clientSite = await startClientSite('Orders')
    redirectUri = `${clientSite.origin}/callback`
    smtp = await startSmtp('accept')
    sms = await startSmsProvider()
    service = await startTestService(
      { KMS_SMTP_URL: smtp.url, KMS_SMTP_ATTEMPTS: '1', KMS_CDN_HOST: 'cdn.example.test', ...sms.env },
      { jobs: true },
    )
    const tenant = await service.createTenant()
    tenantKey = tenant.key
    tenantId = tenant.tenantId
    const created = await service.request('POST', '/api/v1/applications', {
      key: tenantKey,
      body: { name: 'Orders', applicationType: 'spa', redirectUris: [redirectUri] },
    })
    assert.equal(created.status, 201, created.text)
    app = created.body
    client = await applicationClient(service.baseUrl, app.clientId, redirectUri)
    browser = await launchChromium()
  })
  after(async () => {
    await browser?.close()
    await service?.stop()
    await smtp?.stop()
    await sms?.stop()
    await clientSite?.close()
  })

  async function newPage(locale = 'en-US'): Promise<Page> {
    const { page } = await pageWatchingCsp(browser, violations, locale)
    recorders.push(recordDocuments(page, service.baseUrl))
    return page
  }

  async function setMfa(mfaMethods: unknown) {
    const put = await service.request('PUT', `/api/v1/applications/${app.id}`, {
      key: tenantKey,
      body: { name: 'Orders', redirectUris: [redirectUri], mfaMethods },
    })
    assert.equal(put.status, 200, put.text)
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

  const submit = (page: Page, selector = 'button[type=submit]') =>
    Promise.all([page.waitForLoadState('load'), page.click(selector)])

  const backAtTheApplication = (page: Page, selector = 'button[type=submit]') =>
    Promise.all([
      page.waitForURL((url) => url.toString().startsWith(redirectUri), { timeout: 15_000 }),
      page.click(selector),
    ])

  async function passwordStep(page: Page, name: string) {
    await page.goto(await authorizeUrl())
    await page.waitForSelector('#email')
    if (name) await screenshot(page, name)
    await page.fill('#email', email)
    await page.fill('#password', password)
    await submit(page)
  }

  const mails = (): CapturedMail[] => smtp.messages.filter((m) => m.to.includes(email))
  const mailedCode = (mail: CapturedMail) => /sign-in code is (\d{6})/.exec(textOf(mail))?.[1]

  test('the set-up link from the e-mail, then sign-in with an e-mailed code', async () => {
    const created = await service.request('POST', '/api/v1/endusers/create-without-password', {
      key: tenantKey,
      body: { email, displayName: 'Grace', applicationId: app.id },
    })
    assert.equal(created.status, 201, created.text)
    const link = await linkMailedTo(smtp, email)
    const page = await newPage()
    await page.goto(link.toString())
    await page.waitForSelector('#repeat')
    await screenshot(page, 'enduser-01-set-up-account')
    await page.fill('#password', password)
    await page.fill('#repeat', password)
    await submit(page)
    await page.waitForSelector('text=Your password is saved')
    await screenshot(page, 'enduser-02-password-saved')

    await setMfa({ totp: NONE, emailOtp: REQUIRED, smsOtp: NONE })
    const seen = mails().length
    await passwordStep(page, 'enduser-03-sign-in')
    await page.waitForSelector('#code')
    assert.match((await page.textContent('main'))!, /g•••@example\.com/)
    await screenshot(page, 'enduser-04-email-code')
    await waitFor(() => mails().length > seen, 'the code e-mail')
    await page.fill('#code', mailedCode(mails().at(-1)!)!)
    await backAtTheApplication(page)
    assert.equal(new URL(page.url()).searchParams.get('state'), 'st')
    await page.context().close()
  })

  test('SMS: the number is enrolled on the page, the code comes from the SMS provider', async () => {
    await setMfa({ totp: NONE, emailOtp: NONE, smsOtp: REQUIRED })
    const page = await newPage()
    await passwordStep(page, '')
    await page.waitForSelector('#phone')
    await screenshot(page, 'enduser-05-sms-enrol')
    await page.fill('#phone', '+14155550123')
    await submit(page)
    await page.waitForSelector('#code')
    await screenshot(page, 'enduser-06-sms-code')
    await waitFor(() => smsCodeOf(sms, '+14155550123') !== undefined, 'the SMS')
    await page.fill('#code', smsCodeOf(sms, '+14155550123')!)
    await backAtTheApplication(page)
    await page.context().close()
  })

  test('TOTP: enrolment on the page, then the challenge', async () => {
    await setMfa({ totp: REQUIRED, emailOtp: NONE, smsOtp: NONE })
    const page = await newPage()
    await passwordStep(page, '')
    await page.waitForSelector('#totp-secret')
    await screenshot(page, 'enduser-07-totp-enrol')
    const secret = (await page.textContent('#totp-secret'))!.trim()
    await page.fill('#code', totpCode(secret))
    await backAtTheApplication(page)
    await page.context().clearCookies()
    await passwordStep(page, '')
    await page.waitForSelector('#code')
    await screenshot(page, 'enduser-08-totp-challenge')
    await page.fill('#code', totpCode(secret, Date.now() + 30_000))
    await backAtTheApplication(page)
    await page.context().close()
  })

  test('a password reset from the link in the captured e-mail', async () => {
    await setMfa({ totp: NONE, emailOtp: NONE, smsOtp: NONE })
    const page = await newPage()
    await page.goto(await authorizeUrl())
    await page.waitForSelector('#email')
    await submit(page, 'text=Forgot your password?')
    await page.waitForSelector('#email')
    await screenshot(page, 'enduser-09-forgot-password')
    const seen = mails().length
    await page.fill('#email', email)
    await submit(page)
    await page.waitForSelector('text=If an account exists for this address')
    await screenshot(page, 'enduser-10-forgot-sent')
    const link = await linkMailedTo(smtp, email, seen)
    assert.equal(link.pathname, '/reset-password')
    await page.goto(link.toString())
    await page.waitForSelector('#repeat')
    await screenshot(page, 'enduser-11-reset-password')
    password = 'grace brand new password'
    await page.fill('#password', password)
    await page.fill('#repeat', password)
    await submit(page)
    await page.waitForSelector('text=Your password is saved')
    // The link is used: opening it again is invalid_reset_token.
    const again = await page.goto(link.toString())
    assert.equal(again?.status(), 400)
    assert.match((await page.textContent('main'))!, /invalid_reset_token/)
    await screenshot(page, 'enduser-12-reset-link-used')
    await passwordStep(page, '')
    await page.waitForURL((url) => url.toString().startsWith(redirectUri), { timeout: 15_000 })
    await page.context().close()
  })

  test('a blocked user is refused at sign-in', async () => {
    const users = await service.request('GET', `/api/v1/endusers?search=grace.enduser`, { key: tenantKey })
    const id = users.body.data[0].id as string
    assert.equal(
      (await service.request('POST', `/api/v1/endusers/${id}/block`, { key: tenantKey })).status,
      200,
    )
    const page = await newPage()
    await passwordStep(page, '')
    await page.waitForSelector('text=This account is blocked')
    await screenshot(page, 'enduser-13-blocked')
    assert.ok(!page.url().startsWith(redirectUri))
    await service.request('POST', `/api/v1/endusers/${id}/unblock`, { key: tenantKey })
    await page.context().close()
  })

  test('branding: the application’s panel for the locale, then the tenant’s, then the defaults', async () => {
    const owner = await service.request('PUT', `/api/v1/applications/${app.id}`, {
      key: tenantKey,
      body: {
        name: 'Orders',
        redirectUris: [redirectUri],
        branding: {
          loginPanel: {
            imageUrl: 'https://images.example.test/orders.png',
            translations: {
              de: { title: 'Bestellungen', text: 'Melden Sie sich an, um Ihre Bestellungen zu sehen.' },
            },
          },
        },
      },
    })
    assert.equal(owner.status, 200, owner.text)
    // The tenant's branding is an owner's or admin's: set through the service as a member would.
    await service.api.services.settings.updateBranding(
      { tenantId, actor: 'test', requestId: null, clientIp: null },
      {
        translations: { en: { title: 'Acme Corporation', text: 'One account for every Acme application.' } },
      },
    )
    const panelOf = async (locale: string, name: string) => {
      const page = await newPage(locale)
      await page.goto(await authorizeUrl())
      await page.waitForSelector('#email')
      await screenshot(page, name)
      const panel = {
        title: await page.textContent('.panel h2'),
        text: await page.textContent('.panel p'),
        image: await page.getAttribute('.panel-image', 'src'),
      }
      await page.context().close()
      return panel
    }
    const de = await panelOf('de-DE', 'enduser-14-branding-de')
    assert.equal(de.title, 'Bestellungen', 'the application’s own words for German')
    assert.equal(de.image, 'https://images.example.test/orders.png')
    const en = await panelOf('en-GB', 'enduser-15-branding-en')
    assert.equal(en.title, 'Acme Corporation', 'no English from the application: the tenant’s')
    assert.equal(en.image, 'https://images.example.test/orders.png', 'the image is the application’s')
    const fr = await panelOf('fr-FR', 'enduser-16-branding-fr')
    // Neither has French: the defaults, which on an application's page name the application.
    assert.equal(fr.title, 'Orders', 'neither has French: the application’s name, not the service’s words')
    assert.equal(fr.text, 'Connectez-vous pour continuer vers Orders.')
  })

  test('every page had exactly the spec’s CSP, and the browser reported no violation', async () => {
    const seen = recorders.flat()
    assert.ok(seen.length >= 20, `${seen.length} documents`)
    for (const doc of seen) {
      assert.equal(doc.headers['content-security-policy'], EXPECTED_CSP, `CSP of ${doc.url}`)
      assert.equal(doc.headers['x-frame-options'], 'DENY', doc.url)
    }
    const paths = new Set(
      seen.map((d) => new URL(d.url).pathname.replace(/\/sign-in\/[^/]+/, '/sign-in/:uid')),
    )
    for (const path of ['/set-up-account', '/reset-password', '/forgot-password', '/sign-in/:uid'])
      assert.ok(paths.has(path), `a document of ${path} was checked`)
    assert.deepEqual(violations, [])
  })
})
