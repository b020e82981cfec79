import assert from 'node:assert/strict'
import { createHash } from 'node:crypto'
import { after, before, describe, test } from 'node:test'
import * as oidc from 'openid-client'
import { applicationClient, endUserWithPassword } from '../helpers/endusers.ts'
import { startTestService, type TestService, waitFor } from '../helpers/service.ts'
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
} from '../helpers/sign-in.ts'
import { smsCodeOf, startSmsProvider, type TestSmsProvider } from '../helpers/sms.ts'
import { type CapturedMail, startSmtp, type TestSmtp, textOf } from '../helpers/smtp.ts'
import { totpCode } from '../helpers/totp.ts'

const CONSOLE_REDIRECT = 'http://127.0.0.1:9/console'
const APP_REDIRECT = 'http://127.0.0.1:9/app'
const NONE = { enabled: false, required: false }
const REQUIRED = { enabled: true, required: true }

type Step = 'totp' | 'totp-enrol' | 'email-otp' | 'sms-enrol' | 'sms-otp'

/** The step a page's form is for (`/sign-in/<uid>/<step>`), or undefined. */
const stepOf = (html: string): Step | undefined =>
  /<form method="post" action="\/sign-in\/[^/"]+\/([a-z-]+)"/.exec(html)?.[1] as Step | undefined

/**
 * Drives a sign-in through the real pages: the password, then each factor page the service shows,
 * answered by `answer` (which sees the step and the page). Returns the steps met and the tokens.
 */
async function signInWithFactors(
  baseUrl: string,
  client: ConsoleClient,
  credentials: { email: string; password: string },
  answer: (step: Step, shown: PageResponse) => Promise<Record<string, string>>,
): Promise<{ steps: Step[]; tokens: Awaited<ReturnType<typeof oidc.authorizationCodeGrant>> }> {
  const jar = new CookieJar()
  const verifier = oidc.randomPKCECodeVerifier()
  const url = oidc.buildAuthorizationUrl(client.config, {
    redirect_uri: client.redirectUri,
    scope: 'openid email',
    code_challenge: await oidc.calculatePKCECodeChallenge(verifier),
    code_challenge_method: 'S256',
    state: 'st',
  })
  let shown = (await follow(jar, baseUrl, url.toString(), client.redirectUri)).page!
  shown = await page(jar, new URL(formActionOf(shown.html), baseUrl), {
    form: { csrf: csrfOf(shown.html), ...credentials },
  })
  const steps: Step[] = []
  for (let i = 0; i < 8; i++) {
    if (shown.status === 303) shown = await page(jar, new URL(shown.location!, baseUrl))
    const step = stepOf(shown.html)
    if (!step) break
    steps.push(step)
    shown = await page(jar, new URL(formActionOf(shown.html), baseUrl), {
      form: { csrf: csrfOf(shown.html), ...(await answer(step, shown)) },
    })
  }
  const next = /http-equiv="refresh" content="0;url=([^"]+)"/.exec(shown.html)?.[1]?.replace(/&amp;/g, '&')
  if (!next) throw new Error(`sign-in did not finish (${shown.status}):\n${shown.html.slice(0, 600)}`)
  const reached = await follow(jar, baseUrl, new URL(next, baseUrl).toString(), client.redirectUri)
  assert.ok(reached.callback, 'back at the application')
  const tokens = await oidc.authorizationCodeGrant(client.config, reached.callback, {
    pkceCodeVerifier: verifier,
    expectedState: 'st',
  })
  return { steps, tokens }
}

const mailsTo = (smtp: TestSmtp, email: string): CapturedMail[] =>
  smtp.messages.filter((m) => m.to.some((to) => to.toLowerCase() === email.toLowerCase()))
const mailedCode = (mail: CapturedMail) => /sign-in code is (\d{6})/.exec(textOf(mail))?.[1]

describe('MFA methods: TOTP, e-mail and SMS codes, per application or per tenant', () => {
  let smtp: TestSmtp
  let sms: TestSmsProvider
  let service: TestService
  let console_: ConsoleClient

  before(async () => {
    smtp = await startSmtp('accept')
    sms = await startSmsProvider()
    service = await startTestService(
      {
        KMS_SMTP_URL: smtp.url,
        KMS_SMTP_ATTEMPTS: '1',
        KMS_SMTP_TIMEOUT_MS: '2000',
        KMS_CONSOLE_REDIRECT_URIS: CONSOLE_REDIRECT,
        ...sms.env,
      },
      { jobs: true },
    )
    console_ = await consoleClient(service.baseUrl, CONSOLE_REDIRECT)
  })
  after(async () => {
    await service.stop()
    await smtp.stop()
    await sms.stop()
  })

  /** The newest e-mailed code to `email` after `seen` messages. */
  async function emailCode(email: string, seen: number): Promise<string> {
    await waitFor(() => mailsTo(smtp, email).length > seen, `a code e-mailed to ${email}`)
    const code = mailedCode(mailsTo(smtp, email).at(-1)!)
    assert.ok(code, 'a code in the e-mail')
    return code
  }

  async function smsCode(to: string, seen: number): Promise<string> {
    await waitFor(() => sms.messages.filter((m) => m.to === to).length > seen, `an SMS to ${to}`)
    return smsCodeOf(sms, to)!
  }

  test('an application’s methods replace the tenant’s in full; without its own, the tenant’s apply', async () => {
    const tenant = await service.createTenant()
    const owner = await memberSession(service, console_, tenant.tenantId, 'tenant:owner')
    const patched = await service.request('PATCH', '/api/v1/settings/security', {
      headers: owner.headers,
      body: { mfaMethods: { totp: { enabled: true, required: true } } },
    })
    assert.equal(patched.status, 200, patched.text)
    const emailOnly = await service.request('POST', '/api/v1/applications', {
      key: tenant.key,
      body: {
        name: 'E-mail only',
        applicationType: 'spa',
        redirectUris: [APP_REDIRECT],
        mfaMethods: { totp: NONE, emailOtp: REQUIRED, smsOtp: NONE },
      },
    })
    assert.equal(emailOnly.status, 201, emailOnly.text)
    assert.deepEqual(emailOnly.body.mfaMethods.emailOtp, REQUIRED)
    const plain = await service.request('POST', '/api/v1/applications', {
      key: tenant.key,
      body: { name: 'Tenant default', applicationType: 'spa', redirectUris: [APP_REDIRECT] },
    })
    assert.equal(plain.body.mfaMethods, null)
    const user = await endUserWithPassword(service, smtp, tenant.key, emailOnly.body.id)

    // The application's set: an e-mailed code, and no TOTP although the tenant requires it.
    const seen = mailsTo(smtp, user.email).length
    const viaEmail = await signInWithFactors(
      service.baseUrl,
      await applicationClient(service.baseUrl, emailOnly.body.clientId, APP_REDIRECT),
      user,
      async (step) => {
        assert.equal(step, 'email-otp')
        return { code: await emailCode(user.email, seen) }
      },
    )
    assert.deepEqual(viaEmail.steps, ['email-otp'])
    assert.ok(viaEmail.tokens.id_token)

    // The tenant's: TOTP enrolment, then the code of the authenticator just added.
    let secret = ''
    const viaTenant = await signInWithFactors(
      service.baseUrl,
      await applicationClient(service.baseUrl, plain.body.clientId, APP_REDIRECT),
      user,
      async (step, shown) => {
        assert.equal(step, 'totp-enrol')
        secret = /id="totp-secret">([A-Z2-7]+)</.exec(shown.html)![1]!
        return { code: totpCode(secret) }
      },
    )
    assert.deepEqual(viaTenant.steps, ['totp-enrol'])

    // Clearing the application's own set (null) makes the tenant's apply there too.
    const cleared = await service.request('PUT', `/api/v1/applications/${emailOnly.body.id}`, {
      key: tenant.key,
      body: { name: 'E-mail only', redirectUris: [APP_REDIRECT], mfaMethods: null },
    })
    assert.equal(cleared.body.mfaMethods, null)
    const now = await signInWithFactors(
      service.baseUrl,
      await applicationClient(service.baseUrl, emailOnly.body.clientId, APP_REDIRECT),
      user,
      async () => ({ code: totpCode(secret, Date.now() + 30_000) }),
    )
    assert.deepEqual(now.steps, ['totp'])
  })

  test('a required method must be enabled; the 400 names the field', async () => {
    const tenant = await service.createTenant()
    const bad = await service.request('POST', '/api/v1/applications', {
      key: tenant.key,
      body: {
        name: 'Bad',
        applicationType: 'spa',
        redirectUris: [APP_REDIRECT],
        mfaMethods: { totp: NONE, emailOtp: { enabled: false, required: true }, smsOtp: NONE },
      },
    })
    assert.equal(bad.status, 400)
    assert.equal(bad.body.fields[0].path, 'body/mfaMethods/emailOtp/required')
    const partial = await service.request('POST', '/api/v1/applications', {
      key: tenant.key,
      body: {
        name: 'Partial',
        applicationType: 'spa',
        redirectUris: [APP_REDIRECT],
        mfaMethods: { totp: REQUIRED },
      },
    })
    assert.equal(partial.status, 400, 'no field-level merge: all three methods are given')
  })

  test('SMS: the number is enrolled with a code sent to it, then each sign-in asks for a code to it', async () => {
    const tenant = await service.createTenant()
    const app = await service.request('POST', '/api/v1/applications', {
      key: tenant.key,
      body: {
        name: 'SMS',
        applicationType: 'spa',
        redirectUris: [APP_REDIRECT],
        mfaMethods: { totp: NONE, emailOtp: NONE, smsOtp: REQUIRED },
      },
    })
    const user = await endUserWithPassword(service, smtp, tenant.key, app.body.id)
    const client = await applicationClient(service.baseUrl, app.body.clientId, APP_REDIRECT)
    const phone = `+1415555${String(Date.now()).slice(-4)}`
    let phoneGiven = false
    const first = await signInWithFactors(
      service.baseUrl,
      client,
      user,
      async (step, shown): Promise<Record<string, string>> => {
        assert.equal(step, 'sms-enrol')
        if (!phoneGiven) {
          phoneGiven = true
          assert.match(shown.html, /name="phone"/)
          return { phone: '0044 not a number' }
        }
        if (/name="phone"/.test(shown.html)) {
          assert.equal(shown.status, 400, 'a malformed number is refused')
          return { phone }
        }
        assert.ok(
          shown.html.includes(`${phone.slice(0, 3)}•••${phone.slice(-2)}`),
          'the page names the number, masked',
        )
        assert.ok(!shown.html.includes(phone), 'never in full')
        return { code: await smsCode(phone, 0) }
      },
    )
    assert.deepEqual(first.steps, ['sms-enrol', 'sms-enrol', 'sms-enrol'])
    assert.equal((await service.api.services.accounts.get(user.id))?.phoneNumber, phone)
    const amr = JSON.parse(Buffer.from(first.tokens.id_token!.split('.')[1]!, 'base64url').toString()).amr
    assert.deepEqual(amr, ['pwd', 'sms', 'mfa'])

    const second = await signInWithFactors(service.baseUrl, client, user, async (step) => {
      assert.equal(step, 'sms-otp')
      return { code: await smsCode(phone, 1) }
    })
    assert.deepEqual(second.steps, ['sms-otp'])
    assert.equal(sms.refused, 0, 'every request to the provider was well-formed and authenticated')
  })

  test('codes: single use, a wrong one refused, five wrong tries kill it, a new one replaces it, five sends per 15 minutes', async () => {
    const tenant = await service.createTenant()
    const app = await service.request('POST', '/api/v1/applications', {
      key: tenant.key,
      body: {
        name: 'Mail',
        applicationType: 'spa',
        redirectUris: [APP_REDIRECT],
        mfaMethods: { totp: NONE, emailOtp: REQUIRED, smsOtp: NONE },
      },
    })
    const user = await endUserWithPassword(service, smtp, tenant.key, app.body.id)
    const client = await applicationClient(service.baseUrl, app.body.clientId, APP_REDIRECT)
    const jar = new CookieJar()
    const url = oidc.buildAuthorizationUrl(client.config, {
      redirect_uri: APP_REDIRECT,
      scope: 'openid',
      code_challenge: await oidc.calculatePKCECodeChallenge(oidc.randomPKCECodeVerifier()),
      code_challenge_method: 'S256',
      state: 's',
    })
    const base = service.baseUrl
    let shown = (await follow(jar, base, url.toString(), APP_REDIRECT)).page!
    const seen = mailsTo(smtp, user.email).length
    shown = await page(jar, new URL(formActionOf(shown.html), base), {
      form: { csrf: csrfOf(shown.html), email: user.email, password: user.password },
    })
    const codePage = await page(jar, new URL(shown.location!, base))
    const first = await emailCode(user.email, seen)

    // The code is stored as an HMAC, not as itself nor its plain hash, and dropped once sent.
    await waitFor(async () => {
      const [row] = await service.sql<{ dispatch_status: string }[]>`
        SELECT dispatch_status FROM account_otps WHERE account_id = ${user.id} ORDER BY created_at DESC LIMIT 1`
      return row?.dispatch_status === 'sent'
    }, 'the code marked sent')
    const [stored] = await service.sql<{ code_hmac: Buffer; code_sealed: Buffer | null }[]>`
      SELECT code_hmac, code_sealed FROM account_otps WHERE account_id = ${user.id} ORDER BY created_at DESC LIMIT 1`
    assert.equal(stored!.code_sealed, null)
    assert.notDeepEqual(stored!.code_hmac, createHash('sha256').update(first).digest())
    assert.ok(!stored!.code_hmac.toString('latin1').includes(first))

    const submit = async (code: string, on: PageResponse) =>
      page(jar, new URL(formActionOf(on.html), base), { form: { csrf: csrfOf(on.html), code } })
    const wrong = first === '000000' ? '111111' : '000000'
    let answer = await submit(wrong, codePage)
    assert.equal(answer.status, 401)
    // Four more wrong tries: the code is dead, even the right one fails now.
    for (let i = 0; i < 4; i++) answer = await submit(wrong, answer)
    answer = await submit(first, answer)
    assert.equal(answer.status, 401, 'a code dies after five wrong tries')

    // A new code (resend) works; four more resends reach the limit of five per 15 minutes.
    const resend = async (on: PageResponse) => {
      const form =
        /<form method="post" action="(\/sign-in\/[^"]+\/resend)">\s*<input type="hidden" name="csrf" value="([^"]+)"/.exec(
          on.html,
        )!
      return page(jar, new URL(form[1]!, base), { form: { csrf: form[2]! } })
    }
    const before = mailsTo(smtp, user.email).length
    let afterResend = await resend(answer)
    assert.equal(afterResend.status, 303)
    const second = await emailCode(user.email, before)
    for (let i = 0; i < 3; i++) {
      afterResend = await resend(await page(jar, new URL(afterResend.location!, base)))
      assert.equal(afterResend.status, 303)
    }
    const limited = await resend(await page(jar, new URL(afterResend.location!, base)))
    assert.equal(limited.status, 429)
    assert.match(limited.html, /Too many codes/)
    // The newest code is the live one; the second (replaced by the resends) is not.
    await waitFor(() => mailsTo(smtp, user.email).length >= before + 4, 'the resent codes')
    const newest = mailedCode(mailsTo(smtp, user.email).at(-1)!)!
    if (second !== newest)
      assert.equal((await submit(second, limited)).status, 401, 'a replaced code is dead')
    const done = await submit(newest, limited)
    assert.equal(done.status, 200)
    assert.ok(/http-equiv="refresh"/.test(done.html), 'signed in')
  })
})
