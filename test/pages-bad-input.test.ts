import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import * as oidc from 'openid-client'
import { makeCertificate } from './helpers/saml-idp.ts'
import { startTestService, type TestService } from './helpers/service.ts'
import { type ConsoleClient, CookieJar, consoleClient, csrfOf, follow, page } from './helpers/sign-in.ts'

const REDIRECT = 'http://127.0.0.1:9/callback'

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

  before(async () => {
    service = await startTestService({ KMS_CONSOLE_REDIRECT_URIS: REDIRECT })
    client = await consoleClient(service.baseUrl, REDIRECT)
  })
  after(() => service.stop())

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

  /** A SAML IdP registered for a new tenant: its id. */
  async function registeredIdp(): Promise<string> {
    const tenant = await service.createTenant()
    const registered = await service.request('POST', '/api/v1/saml-identity-providers', {
      key: tenant.key,
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
