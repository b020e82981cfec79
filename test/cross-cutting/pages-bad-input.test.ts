import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import * as oidc from 'openid-client'
import { applicationClient, linkMailedTo } from '../helpers/endusers.ts'
import { makeCertificate } from '../helpers/saml-idp.ts'
import { startTestService, type TestService } from '../helpers/service.ts'
import {
  type ConsoleClient,
  CookieJar,
  consoleClient,
  csrfOf,
  follow,
  formActionOf,
  memberSession,
  page,
} from '../helpers/sign-in.ts'
import { startSmtp, type TestSmtp } from '../helpers/smtp.ts'

const REDIRECT = 'http://127.0.0.1:9/callback'
const APP_REDIRECT = 'http://127.0.0.1:9/app-callback'

/** mulberry32: the same cases on every run. */
function rng(seed: number) {
  let state = seed >>> 0
  const next = () => {
    state = (state + 0x6d2b79f5) >>> 0
    let t = state
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
  const int = (n: number) => Math.floor(next() * n)
  const pick = <T>(items: readonly T[]) => items[int(items.length)]!
  const text = (length: number) => {
    let out = ''
    for (let i = 0; i < length; i++)
      out += String.fromCharCode(pick([int(0x7f), 0x20 + int(0x5f), 0x80 + int(0x700), 0xd800 + int(0x800)]))
    return out
  }
  return { int, pick, text }
}

describe('sign-in pages: malformed input gets an HTML error page with a 4xx, never a 5xx', () => {
  let service: TestService
  let client: ConsoleClient
  // The sign-up link's page (/confirm-sign-up) needs a live link: one e-mailed, so SMTP and jobs.
  let smtp: TestSmtp

  before(async () => {
    smtp = await startSmtp('accept')
    service = await startTestService(
      {
        KMS_CONSOLE_REDIRECT_URIS: REDIRECT,
        KMS_SMTP_URL: smtp.url,
        KMS_SMTP_ATTEMPTS: '1',
        KMS_SMTP_TIMEOUT_MS: '2000',
        KMS_JOB_SWEEP_MS: '200',
        // Every ask here comes from 127.0.0.1; the fuzz must not use up the sign-ups this file needs.
        KMS_SIGNUP_RATE_PER_HOUR: '100000',
      },
      { jobs: true },
    )
    client = await consoleClient(service.baseUrl, REDIRECT)
  })
  after(async () => {
    await service?.stop()
    await smtp?.stop()
  })

  /** A live interaction of this jar's browser: its sign-in page. */
  async function interaction(jar: CookieJar): Promise<{ action: string; csrf: string; uid: string }> {
    const verifier = oidc.randomPKCECodeVerifier()
    const url = oidc.buildAuthorizationUrl(client.config, {
      redirect_uri: REDIRECT,
      scope: 'openid',
      code_challenge: await oidc.calculatePKCECodeChallenge(verifier),
      code_challenge_method: 'S256',
    })
    const reached = await follow(jar, service.baseUrl, url.toString(), REDIRECT)
    const html = reached.page!.html
    const action = /<form method="post" action="([^"]+)"/.exec(html)![1]!
    return { action, csrf: csrfOf(html), uid: action.split('/')[2]! }
  }

  function assertHtmlError(
    result: { status: number; headers: Headers; html: string },
    expected: number | number[],
    what: string,
  ) {
    const allowed = [expected].flat()
    assert.ok(
      allowed.includes(result.status),
      `${what}: status ${result.status}, expected ${allowed.join(' or ')}\n${result.html.slice(0, 300)}`,
    )
    assert.match(result.headers.get('content-type') ?? '', /^text\/html/, what)
    assert.ok(result.headers.get('content-security-policy')?.includes("script-src 'self'"), `${what}: CSP`)
    assert.match(result.html, /<!DOCTYPE html>/, what)
  }

  test('each way a form can be wrong has its own 4xx page', async () => {
    const jar = new CookieJar()
    const live = await interaction(jar)
    const url = new URL(live.action, service.baseUrl)
    const raw = async (body: string | undefined, contentType?: string) => {
      const response = await fetch(url, {
        method: 'POST',
        headers: { cookie: jar.header(), ...(contentType ? { 'content-type': contentType } : {}) },
        body,
        redirect: 'manual',
      })
      return { status: response.status, headers: response.headers, html: await response.text() }
    }
    assertHtmlError(await raw(undefined), 400, 'no body')
    assertHtmlError(await raw('{"email":"a"}', 'application/json'), 415, 'JSON')
    assertHtmlError(await raw('email=a&email=b', 'application/x-www-form-urlencoded'), 400, 'a field twice')
    assertHtmlError(
      await raw(`password=${'x'.repeat(20_000)}`, 'application/x-www-form-urlencoded'),
      413,
      'too large',
    )
    assertHtmlError(
      await raw(
        Array.from({ length: 30 }, (_, i) => `f${i}=1`).join('&'),
        'application/x-www-form-urlencoded',
      ),
      400,
      'too many fields',
    )
    assertHtmlError(
      await raw('email=a@b.c&password=x', 'application/x-www-form-urlencoded'),
      403,
      'no CSRF token',
    )
    assertHtmlError(
      await raw(`email=a@b.c&password=x&csrf=${'A'.repeat(43)}`, 'application/x-www-form-urlencoded'),
      403,
      'a wrong CSRF token',
    )
    // Valid CSRF, absurd values: the form again with an error (401), never a crash.
    const long = await page(jar, url, {
      form: { csrf: live.csrf, email: 'e'.repeat(5000), password: 'p'.repeat(5000) },
    })
    assertHtmlError(long, 401, 'very long e-mail and password')
    // Another browser (no interaction cookie) with this interaction's id.
    const stranger = await page(new CookieJar(), url, {
      form: { csrf: live.csrf, email: 'a@b.c', password: 'x' },
    })
    assertHtmlError(stranger, 400, 'someone else’s interaction')
    assertHtmlError(
      await page(new CookieJar(), new URL('/sign-in/%3Cscript%3E', service.baseUrl)),
      400,
      'a malformed id',
    )
    assertHtmlError(
      await page(new CookieJar(), new URL(`/sign-in/${'a'.repeat(500)}`, service.baseUrl)),
      400,
      'a long id',
    )
    assertHtmlError(
      await page(new CookieJar(), new URL('/invitations/accept?token=nope', service.baseUrl)),
      400,
      'a bad invitation token',
    )
    assertHtmlError(
      await page(new CookieJar(), new URL('/invitations/accept', service.baseUrl)),
      400,
      'no invitation token',
    )
    assertHtmlError(
      await page(new CookieJar(), new URL('/invitations/accept', service.baseUrl), {
        form: { token: 'x', password: 'y' },
      }),
      403,
      'an invitation form without CSRF',
    )
    const uuid = '0b6f3c1e-2f4a-4c69-9d1e-6f0d2a9b7c11'
    for (const [path, status] of [
      [`/reset-password?userId=${uuid}&token=${'A'.repeat(43)}`, 400],
      ['/reset-password', 400],
      [`/set-up-account?userId=x&token=y`, 400],
      [`/reset-password?userId=${uuid}&applicationId=nope&token=${'A'.repeat(43)}`, 400],
      ['/forgot-password', 404],
      [`/forgot-password?applicationId=${uuid}`, 404],
    ] as const) {
      const shown = await page(new CookieJar(), new URL(path, service.baseUrl))
      assertHtmlError(shown, status, path)
      if (path.startsWith('/reset-password')) assert.match(shown.html, /invalid_reset_token/, path)
    }
    assertHtmlError(
      await page(new CookieJar(), new URL('/reset-password', service.baseUrl), {
        form: { userId: uuid, token: 'A'.repeat(43), password: 'p', repeat: 'p' },
      }),
      403,
      'a reset form without CSRF',
    )
    assertHtmlError(
      await page(new CookieJar(), new URL('/forgot-password', service.baseUrl), { form: { email: 'a@b.c' } }),
      403,
      'a forgot-password form without CSRF',
    )
    assertHtmlError(
      await page(jar, new URL(`/sign-in/${live.uid}/sign-up`, service.baseUrl)),
      404,
      'sign-up of the console',
    )
  })

  let signUps = 0
  /** A live sign-up link (`/confirm-sign-up?token=…`), asked for on an application's sign-up page. */
  async function liveSignUpLink(): Promise<URL> {
    const tenant = await service.createTenant()
    const created = await service.request('POST', '/api/v1/applications', {
      key: tenant.key,
      body: { name: 'Open', applicationType: 'spa', redirectUris: [APP_REDIRECT], signUpEnabled: true },
    })
    assert.equal(created.status, 201, created.text)
    const app = await applicationClient(service.baseUrl, created.body.clientId as string, APP_REDIRECT)
    const url = oidc.buildAuthorizationUrl(app.config, {
      redirect_uri: APP_REDIRECT,
      scope: 'openid',
      code_challenge: await oidc.calculatePKCECodeChallenge(oidc.randomPKCECodeVerifier()),
      code_challenge_method: 'S256',
    })
    const jar = new CookieJar()
    const shown = (await follow(jar, service.baseUrl, url.toString(), APP_REDIRECT)).page!
    const href = /href="(\/sign-in\/[^"]+\/sign-up)"/.exec(shown.html)?.[1]
    assert.ok(href, 'the application offers sign-up')
    const form = await page(jar, new URL(href, service.baseUrl))
    const email = `confirm-${process.pid}-${++signUps}-${Date.now()}@example.com`
    const sent = await page(jar, new URL(formActionOf(form.html), service.baseUrl), {
      form: { csrf: csrfOf(form.html), email },
    })
    assert.equal(sent.status, 200, sent.html.slice(0, 300))
    const link = await linkMailedTo(smtp, email)
    assert.equal(link.pathname, '/confirm-sign-up')
    return link
  }

  test('the sign-up link’s page (/confirm-sign-up): a missing, garbage or oversized token, a bad CSRF value, GET or POST: a 4xx page', async () => {
    const confirmUrl = (query = '') => new URL(`/confirm-sign-up${query}`, service.baseUrl)
    const unknown = 'A'.repeat(43)
    // GET: only a live link shows the form.
    for (const query of [
      '',
      '?token=',
      '?token=nope',
      `?token=${unknown}`,
      `?token=${'A'.repeat(42)}`,
      `?token=${'A'.repeat(44)}`,
      `?token=${'A'.repeat(6000)}`,
      '?token=%3Cscript%3Ealert(1)%3C%2Fscript%3E',
      '?token=%00%ff%fe',
      '?token=%',
      `?token=${unknown}&token=${unknown}`,
      `?token[]=${unknown}`,
      `?token[a]=${unknown}`,
    ]) {
      const shown = await page(new CookieJar(), confirmUrl(query))
      assertHtmlError(shown, 400, `GET /confirm-sign-up${query.slice(0, 80)}`)
      assert.match(shown.html, /This link is not valid/, query.slice(0, 80))
    }

    // POST, without a live link: the form is malformed, or the link is not valid.
    const url = confirmUrl()
    const raw = async (body: string | undefined, contentType?: string) => {
      const response = await fetch(url, {
        method: 'POST',
        headers: contentType ? { 'content-type': contentType } : {},
        body,
        redirect: 'manual',
      })
      return { status: response.status, headers: response.headers, html: await response.text() }
    }
    const form = 'application/x-www-form-urlencoded'
    assertHtmlError(await raw(undefined), 400, 'POST: no body')
    assertHtmlError(await raw(`{"token":"${unknown}"}`, 'application/json'), 415, 'POST: JSON')
    assertHtmlError(await raw(`token=${unknown}&token=${unknown}`, form), 400, 'POST: the token twice')
    assertHtmlError(await raw(`token=${'A'.repeat(20_000)}`, form), 413, 'POST: too large')
    for (const [what, fields] of [
      ['no token', { password: 'p', repeat: 'p' }],
      ['an empty token', { token: '', password: 'p', repeat: 'p' }],
      ['a garbage token', { token: '<script>', password: 'p', repeat: 'p' }],
      ['an unknown token', { token: unknown, password: 'p', repeat: 'p' }],
      ['an oversized token', { token: 'A'.repeat(6000), password: 'p', repeat: 'p' }],
      ['an unknown token and a CSRF value', { token: unknown, csrf: unknown, password: 'p', repeat: 'p' }],
    ] as const) {
      const answered = await page(new CookieJar(), url, { form: fields })
      assertHtmlError(answered, 400, `POST: ${what}`)
      assert.match(answered.html, /This link is not valid/, what)
    }

    // A live link: its form without the right CSRF value is a 403 page, and leaves the link live.
    const link = await liveSignUpLink()
    const token = link.searchParams.get('token')!
    const jar = new CookieJar()
    const shown = await page(jar, link)
    assert.equal(shown.status, 200, shown.html.slice(0, 300))
    const csrf = csrfOf(shown.html)
    const action = new URL(formActionOf(shown.html), service.baseUrl)
    const password = 'a password long enough'
    const signInJar = new CookieJar()
    const signInForm = await interaction(signInJar)
    for (const [what, browser, fields] of [
      ['no CSRF value', jar, { token, password, repeat: password }],
      ['an empty CSRF value', jar, { csrf: '', token, password, repeat: password }],
      ['a wrong CSRF value', jar, { csrf: unknown, token, password, repeat: password }],
      ['a garbage CSRF value', jar, { csrf: '<>'.repeat(500), token, password, repeat: password }],
      ['no CSRF cookie', new CookieJar(), { csrf, token, password, repeat: password }],
      [
        'the sign-in form’s CSRF value',
        signInJar,
        { csrf: signInForm.csrf, token, password, repeat: password },
      ],
    ] as const) {
      const answered = await page(browser, action, { form: fields })
      assertHtmlError(answered, 403, `POST with a live link: ${what}`)
    }
    // The right values sent as JSON: not a form (415), whatever they say.
    assertHtmlError(
      await (async () => {
        const response = await fetch(action, {
          method: 'POST',
          headers: { cookie: jar.header(), 'content-type': 'application/json' },
          body: JSON.stringify({ csrf, token, password, repeat: password }),
        })
        return { status: response.status, headers: response.headers, html: await response.text() }
      })(),
      415,
      'POST with a live link: JSON',
    )
    // The right CSRF value, passwords wrong: the form again with its error, the link still live.
    for (const [what, fields] of [
      ['no password', { csrf, token }],
      ['passwords that differ', { csrf, token, password, repeat: `${password}!` }],
      ['a weak password', { csrf, token, password: 'x', repeat: 'x' }],
      ['a very long password', { csrf, token, password: 'p'.repeat(5000), repeat: 'p'.repeat(5000) }],
      ['a password of odd characters', { csrf, token, password: '\u0000\ud800', repeat: '\u0000\ud800' }],
    ] as const) {
      const answered = await page(jar, action, { form: fields })
      assertHtmlError(answered, 400, `POST with a live link: ${what}`)
      assert.match(answered.html, /role="alert"/, what)
      assert.match(answered.html, /name="token"/, `${what}: the form again`)
    }
    // None of that used the link: it works now, once.
    const saved = await page(jar, action, { form: { csrf, token, password, repeat: password } })
    assert.equal(saved.status, 200, saved.html.slice(0, 300))
    const again = await page(jar, action, { form: { csrf, token, password, repeat: password } })
    assertHtmlError(again, 400, 'POST: the used link')
    assertHtmlError(await page(new CookieJar(), link), 400, 'GET: the used link')
  })

  /** A SAML IdP registered for a new tenant (by its owner: keys may not register IdPs): its id. */
  async function registeredIdp(): Promise<string> {
    const tenant = await service.createTenant()
    const owner = await memberSession(service, client, tenant.tenantId, 'tenant:owner')
    const registered = await service.request('POST', '/api/v1/saml-identity-providers', {
      headers: owner.headers,
      body: {
        name: 'Fuzz IdP',
        entityId: 'https://idp.fuzz.example/saml',
        ssoUrl: 'https://idp.fuzz.example/sso',
        certificate: (await makeCertificate()).pem,
      },
    })
    assert.equal(registered.status, 201, registered.text)
    return registered.body.id as string
  }

  test('the SAML ACS: a missing, malformed, non-XML or huge response is an HTML 4xx page', async () => {
    const idp = await registeredIdp()
    const acs = new URL(`/saml/${idp}/acs`, service.baseUrl)
    const cases: Array<[string, Record<string, string> | string, number | number[]]> = [
      ['no SAMLResponse', { RelayState: 'x' }, 400],
      ['not Base64 XML', { SAMLResponse: 'not base64 at all %%%' }, 400],
      ['Base64 of text', { SAMLResponse: Buffer.from('hello').toString('base64') }, 400],
      ['XML that is not SAML', { SAMLResponse: Buffer.from('<a><b/></a>').toString('base64') }, 400],
      [
        'an entity expansion',
        {
          SAMLResponse: Buffer.from(
            '<?xml version="1.0"?><!DOCTYPE r [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">]><samlp:Response xmlns:samlp="urn:oasis:names:tc:SAML:2.0:protocol">&b;</samlp:Response>',
          ).toString('base64'),
        },
        400,
      ],
      ['a response too large', { SAMLResponse: 'A'.repeat(300 * 1024) }, [400, 413]],
      ['a repeated field', 'SAMLResponse=a&SAMLResponse=b', 400],
    ]
    for (const [what, form, status] of cases) {
      const raw = await fetch(acs, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: typeof form === 'string' ? form : new URLSearchParams(form).toString(),
      })
      const answered = { status: raw.status, headers: raw.headers, html: await raw.text() }
      assertHtmlError(answered, status, what)
    }
    const json = await fetch(acs, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{}',
    })
    assertHtmlError({ status: json.status, headers: json.headers, html: await json.text() }, 415, 'JSON body')
  })

  test('300 seeded random forms and paths: never a 5xx, always an HTML page', async () => {
    const r = rng(0x5eed)
    const jar = new CookieJar()
    const live = await interaction(jar)
    const id = '0b6f3c1e-2f4a-4c69-9d1e-6f0d2a9b7c11'
    const idp = await registeredIdp()
    // A live sign-up link: the fuzz reaches its form (and may use it) as well as the refusals.
    const signUpLink = await liveSignUpLink()
    const confirmPath = `${signUpLink.pathname}${signUpLink.search}`
    const paths = [
      `/saml/${idp}/acs`,
      `/saml/${idp}/acs`,
      `/saml/${idp}/metadata`,
      `/saml/${id}/acs`,
      '/saml/not-a-uuid/acs',
      `/sign-in/${live.uid}/federated/${idp}`,
      `/sign-in/${live.uid}/federated/not-a-uuid`,
      `/sign-in/${live.uid}/federated-return/_${'a'.repeat(40)}`,
      `/sign-in/${live.uid}/federated-return/${'<'.repeat(10)}`,
      live.action,
      `/sign-in/${live.uid}/totp`,
      `/sign-in/${live.uid}/totp-enrol`,
      `/sign-in/${live.uid}/email-otp`,
      `/sign-in/${live.uid}/sms-enrol`,
      `/sign-in/${live.uid}/sms-otp`,
      `/sign-in/${live.uid}/resend`,
      `/sign-in/${live.uid}/sign-up`,
      `/sign-in/${live.uid}/consent`,
      `/sign-in/${live.uid}`,
      '/invitations/accept',
      '/forgot-password',
      `/forgot-password?applicationId=${id}`,
      '/reset-password',
      `/reset-password?userId=${id}&token=${'A'.repeat(43)}`,
      `/set-up-account?userId=not-a-uuid&applicationId=${id}&token=x`,
      '/confirm-sign-up',
      `/confirm-sign-up?token=${'A'.repeat(43)}`,
      confirmPath,
      confirmPath,
      '/signup',
      '/signup?ref=NOSUCHCODE1',
      `/signup?ref=${'<'.repeat(100)}`,
      '/signup/confirm',
      `/signup/confirm?token=${'A'.repeat(43)}`,
      '/partners/signup',
      '/partners/signup/confirm',
      '/partners/nothing-here',
    ]
    const fields = [
      'email',
      'password',
      'repeat',
      'code',
      'phone',
      'csrf',
      'token',
      'userId',
      'applicationId',
      'return',
      'decision',
      'SAMLResponse',
      'SAMLResponse',
      'RelayState',
      'organizationName',
      'ref',
      '__proto__',
      'constructor',
      '',
    ]
    for (let i = 0; i < 300; i++) {
      const path = r.pick(paths)
      const form = new URLSearchParams()
      for (let f = r.int(6); f > 0; f--) form.append(r.pick(fields), r.text(r.pick([0, 1, 10, 300, 3000])))
      if (r.int(2) === 0) form.set('csrf', live.csrf)
      const method = r.pick(['GET', 'POST', 'POST', 'POST'])
      const response = await fetch(new URL(path, service.baseUrl), {
        method,
        headers: {
          cookie: r.int(3) === 0 ? '' : jar.header(),
          'content-type': r.pick([
            'application/x-www-form-urlencoded',
            'application/x-www-form-urlencoded; charset=utf-8',
            'text/plain',
            'multipart/form-data; boundary=x',
          ]),
        },
        body: method === 'POST' ? form.toString() : undefined,
        redirect: 'manual',
      })
      const html = await response.text()
      assert.ok(
        response.status < 500,
        `case ${i}: ${method} ${path} answered ${response.status}\n${html.slice(0, 300)}`,
      )
      if (response.status >= 400)
        assert.match(response.headers.get('content-type') ?? '', /^text\/html/, `case ${i}`)
    }
    // The service still answers.
    assert.equal((await fetch(new URL('/api/v1/health', service.baseUrl))).status, 200)
  })
})
