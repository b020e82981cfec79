import assert from 'node:assert/strict'
import { rmSync } from 'node:fs'
import { request as httpRequest } from 'node:http'
import { after, before, describe, test } from 'node:test'
import type { Browser } from 'playwright-core'
import { USER_CODE_THROTTLE } from '../../src/identity/oidc/device-flow.ts'
import { launchChromium, pageWatchingCsp, recordDocuments } from '../helpers/browser.ts'
import { newCliMember, runKms, signInEnv, startKms } from '../helpers/kms-cli.ts'
import { PROJECT_ROOT, startTestService, type TestService } from '../helpers/service.ts'
import { CookieJar } from '../helpers/sign-in.ts'

/*
 * `kms login --device` (RFC 8628) against the real service: the code, confirmation and success
 * pages in Chromium (the CLI a child process, test/helpers/kms-cli.ts), the device grant kept to
 * the CLI's client, and code guessing bounded.
 */

const CDN = 'cdn.example.test'
/** Spec 4.4's sign-in page CSP, written out here rather than taken from the code. */
const EXPECTED_CSP =
  "default-src 'self'; style-src 'self' 'unsafe-inline' https://cdn.example.test; font-src 'self' https://cdn.example.test; " +
  "img-src 'self' data: blob: https:; script-src 'self'; frame-ancestors 'none'; form-action 'self'"
const DEVICE_GRANT = 'urn:ietf:params:oauth:grant-type:device_code'

/** kms with these variables, run to its end. */
const kms = (args: string[], env: Record<string, string>) => runKms(args, { cwd: PROJECT_ROOT, env })

/** One HTTP exchange from a chosen local address (a browser on another machine), cookies kept in `jar`. */
function fromAddress(
  localAddress: string,
  jar: CookieJar,
  url: URL,
  form?: Record<string, string>,
): Promise<{ status: number; html: string }> {
  return new Promise((resolve, reject) => {
    const body = form ? new URLSearchParams(form).toString() : undefined
    const req = httpRequest(
      url,
      {
        method: form ? 'POST' : 'GET',
        localAddress,
        headers: {
          cookie: jar.header(),
          ...(body ? { 'content-type': 'application/x-www-form-urlencoded' } : {}),
        },
      },
      (res) => {
        const cookies = res.headers['set-cookie'] ?? []
        jar.store({ headers: { getSetCookie: () => cookies } } as unknown as Response)
        let html = ''
        res.on('data', (chunk: Buffer) => {
          html += chunk.toString()
        })
        res.on('end', () => resolve({ status: res.statusCode ?? 0, html }))
      },
    )
    req.on('error', reject)
    req.end(body)
  })
}

const xsrfOf = (html: string): string => {
  const match = /name="xsrf" value="([^"]+)"/.exec(html)
  if (!match) throw new Error(`no xsrf field in the page:\n${html.slice(0, 800)}`)
  return match[1]!
}

describe('kms login --device and the device pages', { timeout: 240_000 }, () => {
  let service: TestService
  let browser: Browser
  const dirs: string[] = []
  const violations: string[] = []

  before(async () => {
    service = await startTestService({ KMS_CDN_HOST: CDN })
    browser = await launchChromium()
  })
  after(async () => {
    await browser?.close()
    await service?.stop()
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true })
  })

  const cliEnv = (tenantId: string) => signInEnv(service, tenantId, dirs).env
  const newMember = (tenantId: string) => newCliMember(service, tenantId)

  const post = (path: string, form: Record<string, string>) =>
    fetch(new URL(path, service.baseUrl), {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams(form),
    })

  test('kms login --device end to end: the code typed in Chromium, a confirmation naming the client and tenant with a warning, the sign-in pages, the success page; then kms calls the API', async () => {
    const tenant = await service.createTenant()
    const tenantName = (await service.api.services.tenants.get(tenant.tenantId))!.name
    const member = await newMember(tenant.tenantId)
    const env = cliEnv(tenant.tenantId)
    const run = startKms(['login', '--device'], { cwd: PROJECT_ROOT, env })
    const [, verificationUri] = await run.waitForStderr(/open (http:\/\/\S+\/oidc\/device) in a browser/)
    const [, userCode] = await run.waitForStderr(/\n {4}([B-Z]{4}-[B-Z]{4})\n/)

    const { page, context } = await pageWatchingCsp(browser, violations)
    const documents = recordDocuments(page, service.baseUrl)
    await page.goto(verificationUri!)
    assert.equal(await page.textContent('h1'), 'Connect a device')
    // Typed as a person might: lower case, without the dash.
    await page.fill('#user_code', userCode!.replace('-', '').toLowerCase())
    await page.click('button[type=submit]')

    await page.waitForSelector('#user-code')
    assert.equal(await page.textContent('h1'), 'Confirm the sign-in')
    assert.equal((await page.textContent('#user-code'))?.trim(), userCode)
    const confirmText = (await page.textContent('main')) ?? ''
    assert.match(confirmText, /kms command line asks to sign in with your account to the tenant/)
    assert.ok(confirmText.includes(tenant.tenantId), 'the tenant is named')
    assert.match(
      (await page.textContent('#warning')) ?? '',
      /Only continue if you started this sign-in yourself\. If someone sent you this code or link, stop/,
    )
    await page.click('button[name=confirm]')

    // Not signed in in this browser: the sign-in pages, for a device flow interaction.
    await page.waitForSelector('#email')
    await page.fill('#email', member.email)
    await page.fill('#password', member.password)
    await page.click('button[type=submit]')
    await page.waitForSelector('#success', { timeout: 30_000 })
    assert.equal(await page.textContent('h1'), 'Device signed in')
    const success = (await page.textContent('#success')) ?? ''
    assert.ok(success.includes(`${tenantName} (${tenant.tenantId})`), success)
    await context.close()

    assert.equal((await run.exited).code, 0, run.stderr())
    assert.match(run.stderr(), new RegExp(`Signed in to tenant ${tenant.tenantId} .* as ${member.email}`))
    const whoami = await kms(['whoami', '--output', 'json'], env)
    assert.equal(whoami.code, 0, whoami.stderr)
    const caller = JSON.parse(whoami.out)
    assert.equal(caller.callerKind, 'member')
    assert.equal(caller.accountId, member.accountId)
    assert.equal(caller.tenantId, tenant.tenantId)

    // Every page of the service carried the sign-in pages' CSP, and the browser refused nothing.
    const devicePages = documents.filter((doc) => new URL(doc.url).pathname.startsWith('/oidc/device'))
    assert.ok(devicePages.length >= 3, `${devicePages.length} device pages`)
    for (const doc of documents) assert.equal(doc.headers['content-security-policy'], EXPECTED_CSP, doc.url)
    assert.deepEqual(violations, [], 'no CSP violation')
  })

  test('the link with the code shows it filled in; Cancel on the confirmation ends kms login with access_denied', async () => {
    const tenant = await service.createTenant()
    const env = cliEnv(tenant.tenantId)
    const run = startKms(['login', '--device'], { cwd: PROJECT_ROOT, env })
    const [, complete] = await run.waitForStderr(/or open (http:\/\/\S+\?user_code=\S+)\n/)
    const [, userCode] = await run.waitForStderr(/\n {4}([B-Z]{4}-[B-Z]{4})\n/)

    const { page, context } = await pageWatchingCsp(browser, violations)
    await page.goto(complete!)
    // Not submitted by script: shown in the form, for the person to send.
    assert.equal(await page.inputValue('#user_code'), userCode)
    await page.click('button[type=submit]')
    await page.waitForSelector('button[name=abort]')
    await page.click('button[name=abort]')
    await page.waitForSelector('[role=alert]')
    assert.match((await page.textContent('[role=alert]')) ?? '', /cancelled/)
    await context.close()

    assert.equal((await run.exited).code, 3)
    assert.match(run.stderr(), /^kms: access_denied: the sign-in was refused/m)
    assert.deepEqual(violations, [], 'no CSP violation')
  })

  test('the confirmation page shows the requesting address and when the code was asked for, and the User-Agent only as unverified text the device sent', async () => {
    const tenant = await service.createTenant()
    const claim = 'kms-cli (this is your own terminal, safe to continue)'
    const before = Math.floor(Date.now() / 1000)
    const asked = await fetch(new URL('/oidc/device/auth', service.baseUrl), {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', 'user-agent': claim },
      body: new URLSearchParams({
        client_id: 'kms-cli',
        scope: 'openid api',
        resource: `urn:kms:tenant:${tenant.tenantId}`,
      }),
    })
    const after = Math.ceil(Date.now() / 1000)
    assert.equal(asked.status, 200)
    const { user_code: userCode } = (await asked.json()) as { user_code: string }

    const jar = new CookieJar()
    const pageUrl = new URL('/oidc/device', service.baseUrl)
    const form = await fromAddress('127.0.0.4', jar, pageUrl)
    const confirm = await fromAddress('127.0.0.4', jar, pageUrl, {
      xsrf: xsrfOf(form.html),
      user_code: userCode,
    })
    assert.equal(confirm.status, 200)
    const textOf = (id: string) =>
      (new RegExp(`<p id="${id}">([\\s\\S]*?)</p>`).exec(confirm.html)?.[1] ?? '')
        .replace(/<[^>]+>/g, '')
        .replace(/&#39;/g, "'")
        .replace(/&quot;/g, '"')
        .replace(/&amp;/g, '&')
    // The address the device asked from (this test's own, 127.0.0.1) and the time it asked, in UTC.
    const from = textOf('requested-from')
    assert.match(from, /^Requested from the address 127\.0\.0\.1 at \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC\.$/)
    const shownAt =
      Date.parse(`${/(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) UTC/.exec(from)![1]!.replace(' ', 'T')}Z`) / 1000
    assert.ok(shownAt >= before && shownAt <= after, `${shownAt} within [${before}, ${after}]`)
    // The User-Agent: quoted, and labelled as the device's unverified claim.
    assert.equal(
      textOf('reported-agent'),
      `The device describes itself as “${claim}” (reported by the device, not verified: anyone can send any text).`,
    )
    // The service's own words never vouch for the requester: "safe" appears only inside the quote.
    const ownWords = confirm.html.replace(/<[^>]+>/g, ' ').replace(claim, '')
    assert.doesNotMatch(ownWords, /safe/i)
  })

  test('the device grant is the CLI’s only: the console, the partner portal and a tenant’s application are refused at both endpoints', async () => {
    const tenant = await service.createTenant()
    const resource = `urn:kms:tenant:${tenant.tenantId}`
    const app = await service.request('POST', '/api/v1/applications', {
      key: tenant.key,
      body: {
        name: 'Desktop',
        applicationType: 'native',
        redirectUris: ['http://127.0.0.1/callback'],
        resources: ['https://orders-api.example.com'],
      },
    })
    assert.equal(app.status, 201, app.text)
    for (const clientId of ['kms-console', 'kms-partner-portal', app.body.clientId as string]) {
      const asked = await post('/oidc/device/auth', { client_id: clientId, scope: 'openid', resource })
      assert.equal(asked.status, 400, clientId)
      const refusal = (await asked.json()) as { error: string; error_description: string }
      assert.equal(refusal.error, 'invalid_request', clientId)
      assert.match(refusal.error_description, /device_code is not allowed for this client/, clientId)
      const polled = await post('/oidc/token', {
        client_id: clientId,
        grant_type: DEVICE_GRANT,
        device_code: 'any-device-code',
      })
      assert.equal(polled.status, 400, clientId)
      const pollRefusal = (await polled.json()) as { error: string; error_description: string }
      assert.equal(pollRefusal.error, 'invalid_request', clientId)
      assert.equal(
        pollRefusal.error_description,
        'requested grant type is not allowed for this client',
        clientId,
      )
    }
    // The CLI may, and only for a tenant's resource.
    const cli = await post('/oidc/device/auth', { client_id: 'kms-cli', scope: 'openid', resource })
    assert.equal(cli.status, 200)
    assert.match(((await cli.json()) as { user_code: string }).user_code, /^[B-Z]{4}-[B-Z]{4}$/)
    const noResource = await post('/oidc/device/auth', { client_id: 'kms-cli', scope: 'openid' })
    assert.equal(noResource.status, 400)
    assert.equal(((await noResource.json()) as { error: string }).error, 'invalid_target')
  })

  test('a burst of wrong codes from one address is bounded: past the limit even the right code is refused there, while another address is served', async () => {
    const tenant = await service.createTenant()
    const asked = await post('/oidc/device/auth', {
      client_id: 'kms-cli',
      scope: 'openid',
      resource: `urn:kms:tenant:${tenant.tenantId}`,
    })
    const { user_code: rightCode } = (await asked.json()) as { user_code: string }
    const pageUrl = new URL('/oidc/device', service.baseUrl)

    // 127.0.0.3 guesses (no other test of this service uses that address).
    const guesser = new CookieJar()
    let shown = await fromAddress('127.0.0.3', guesser, pageUrl)
    assert.equal(shown.status, 200)
    for (let i = 0; i < USER_CODE_THROTTLE.perAddressLimit; i++) {
      shown = await fromAddress('127.0.0.3', guesser, pageUrl, {
        xsrf: xsrfOf(shown.html),
        user_code: `BBBB-BB${'BCDFGHJKLM'[i]}${'BCDFGHJKLM'[i]}`,
      })
      assert.equal(shown.status, 200, `guess ${i + 1}`)
      assert.match(shown.html, /That code is not right/)
    }
    const xsrf = xsrfOf(shown.html)
    const refused = await fromAddress('127.0.0.3', guesser, pageUrl, { xsrf, user_code: 'BBBB-CCCC' })
    assert.equal(refused.status, 429)
    assert.match(refused.html, /Too many wrong codes were tried from your network/)
    const rightButLate = await fromAddress('127.0.0.3', guesser, pageUrl, { xsrf, user_code: rightCode })
    assert.equal(rightButLate.status, 429, 'the right code is refused too while the address is locked')
    assert.ok(!rightButLate.html.includes(rightCode))

    // Another address is not held by the guesser's count.
    const other = new CookieJar()
    const form = await fromAddress('127.0.0.2', other, pageUrl)
    const confirm = await fromAddress('127.0.0.2', other, pageUrl, {
      xsrf: xsrfOf(form.html),
      user_code: rightCode,
    })
    assert.equal(confirm.status, 200)
    assert.match(confirm.html, new RegExp(`id="user-code">${rightCode}<`))
  })
})
