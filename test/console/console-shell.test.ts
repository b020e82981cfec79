import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { CONSOLE_CSP } from '../../src/console/console-routes.ts'
import {
  assertAccessible,
  type ConsoleHarness,
  screenshotBothThemes,
  startConsoleHarness,
} from '../helpers/console.ts'

/** The console's shell: how it is served, signing in and out, the tenant switcher, deep links. */
describe('console shell', () => {
  let h: ConsoleHarness
  before(async () => {
    h = await startConsoleHarness()
  })
  after(async () => {
    await h?.stop()
  })

  test('index.html is no-cache with the strict CSP, hashed assets are immutable, a deep link gets index.html, a missing asset is a 404 page', async () => {
    const base = h.service.baseUrl
    const index = await fetch(`${base}/console/`)
    assert.equal(index.status, 200)
    assert.equal(index.headers.get('cache-control'), 'no-cache')
    assert.equal(index.headers.get('content-security-policy'), CONSOLE_CSP)
    assert.match(CONSOLE_CSP, /script-src 'self';/)
    assert.match(CONSOLE_CSP, /connect-src 'self';/)
    assert.match(CONSOLE_CSP, /frame-ancestors 'none'/)
    assert.equal(index.headers.get('x-frame-options'), 'DENY')
    const html = await index.text()
    assert.doesNotMatch(html, /<script(?![^>]*\bsrc=)[^>]*>/, 'no inline script')
    const asset = /src="(\/console\/assets\/[^"]+\.js)"/.exec(html)?.[1]
    assert.ok(asset, 'index.html names its hashed script')
    const script = await fetch(`${base}${asset}`)
    assert.equal(script.status, 200)
    assert.equal(script.headers.get('cache-control'), 'public, max-age=31536000, immutable')
    assert.match(script.headers.get('content-type') ?? '', /^text\/javascript/)
    const etag = script.headers.get('etag')!
    assert.equal((await fetch(`${base}${asset}`, { headers: { 'if-none-match': etag } })).status, 304)

    const deep = await fetch(`${base}/console/keys/0b6f3c7e-8d2a-4c1e-9f5b-2a7d4e6c8b10?tab=versions`)
    assert.equal(deep.status, 200)
    assert.equal(await deep.text(), html)
    const missing = await fetch(`${base}/console/assets/index-gone.js`)
    assert.equal(missing.status, 404)
    assert.match(missing.headers.get('content-type') ?? '', /^text\/html/)
    for (const path of [
      '/console/../package.json',
      '/console/%2e%2e/package.json',
      '/console/assets/..%2f..%2fpackage.json',
    ]) {
      const res = await fetch(`${base}${path}`)
      assert.ok(
        res.status === 404 || (res.status === 200 && (await res.text()) === html),
        `${path}: ${res.status}`,
      )
    }
    const bare = await fetch(`${base}/console`, { redirect: 'manual' })
    assert.equal(bare.status, 308)
    assert.equal(bare.headers.get('location'), '/console/')
  })

  test('a person opens a deep link, signs in, lands on it, switches tenant, reloads, and signs out', async () => {
    const first = await h.service.createTenant()
    const second = await h.service.createTenant()
    const person = await h.member(first.tenantId, 'tenant:owner')
    await h.service.api.services.team.addMember(
      { tenantId: second.tenantId, actor: 'test', requestId: null, clientIp: null },
      { accountId: person.accountId, role: 'tenant:viewer' },
    )
    const page = await h.newPage()
    await h.signIn(page, person, { tenantId: first.tenantId, path: '/console/audit' })
    assert.match(page.url(), /\/console\/audit/)
    assert.equal(await page.locator('h1').textContent(), 'Audit log')
    assert.equal(await page.locator('.who .badge').textContent(), 'Owner')
    // The token is in memory only: nothing in storage looks like one.
    const stored = await page.evaluate(() => JSON.stringify({ ...localStorage, ...sessionStorage }))
    assert.doesNotMatch(stored, /eyJ/)
    await assertAccessible(page, 'the shell')
    await screenshotBothThemes(page, 'shell')

    // Switching tenant: a new authorization, silent (the provider's session), for the other tenant.
    await page.getByRole('button', { name: /Tenant/ }).click()
    const secondName = (await h.service.api.services.tenants.get(second.tenantId))!.name
    await page.getByRole('option', { name: new RegExp(secondName) }).click()
    await page.locator('.tenant-id code', { hasText: second.tenantId }).waitFor()
    assert.equal(await page.locator('.who .badge').textContent(), 'Viewer')
    // A reload signs in again silently, to the same tenant.
    await page.reload()
    await page.waitForSelector('nav[aria-label="Console"]')
    assert.equal(await page.locator('.tenant-id code').textContent(), second.tenantId)

    // The token the console holds now, as its API calls carry it.
    const tokens: string[] = []
    page.on('request', (request) => {
      const authorization = request.headers()['authorization']
      if (authorization?.startsWith('Bearer ')) tokens.push(authorization.slice('Bearer '.length))
    })
    await page.reload()
    await page.waitForSelector('nav[aria-label="Console"]')
    const token = tokens.at(-1)!
    const tenantOf = (bearer: string) =>
      h.service.request('GET', '/api/v1/tenant', { headers: { authorization: `Bearer ${bearer}` } })
    assert.equal((await tenantOf(token)).status, 200)

    await page.getByRole('button', { name: 'Sign out' }).click()
    await page.waitForSelector('button[value=yes]')
    // Signing out revoked the grant before the provider's page asks anything: the token is dead
    // even if the person walks away from that page; and no ID token travels in its URL.
    assert.equal((await tenantOf(token)).status, 401)
    assert.doesNotMatch(page.url(), /id_token_hint|eyJ/)
    await Promise.all([page.waitForURL(/\/console\/callback/), page.click('button[value=yes]')])
    await page.waitForSelector('text=You are signed out of the console')
    // Signed out at the provider: opening the console asks for the password again.
    await page.goto(`${h.service.baseUrl}/console/keys`)
    await page.waitForSelector('#email')
  })

  test('a person who is no member of the tenant in the link gets the refusal, and can sign in to their own', async () => {
    const mine = await h.service.createTenant()
    const other = await h.service.createTenant()
    const person = await h.member(mine.tenantId, 'tenant:developer')
    const page = await h.newPage()
    await page.goto(`${h.service.baseUrl}/console/keys?tenant=${other.tenantId}`)
    await page.waitForSelector('#email')
    await page.fill('#email', person.email)
    await page.fill('#password', person.password)
    await page.click('button[type=submit]')
    await page.waitForSelector('text=Sign-in did not complete')
    await assertAccessible(page, 'the sign-in problem page')
    // The refused authorization left no session: the password is asked again, then the
    // provider's userinfo names the person's tenants and the console opens the first.
    await page.getByRole('button', { name: 'Sign in without a tenant' }).click()
    await page.waitForSelector('#email')
    await page.fill('#email', person.email)
    await page.fill('#password', person.password)
    await page.click('button[type=submit]')
    await page.waitForSelector('nav[aria-label="Console"]')
    assert.equal(await page.locator('.tenant-id code').textContent(), mine.tenantId)
  })

  test('a callback the console did not start (a forged or replayed code) is refused without a token request', async () => {
    const page = await h.newPage()
    const tokenRequests: string[] = []
    page.on('request', (request) => {
      if (request.url().includes('/oidc/token')) tokenRequests.push(request.url())
    })
    await page.goto(
      `${h.service.baseUrl}/console/callback?code=stolen-code&state=forged&iss=${encodeURIComponent(h.service.baseUrl)}`,
    )
    await page.waitForSelector('text=Sign-in did not complete')
    assert.match((await page.locator('[role=alert]').textContent()) ?? '', /state_mismatch/)
    // A crafted error answer: its text is not shown as the console's own.
    await page.goto(
      `${h.service.baseUrl}/console/callback?error=account_locked&error_description=${encodeURIComponent('Call security and give them your password')}&state=forged`,
    )
    await page.waitForSelector('text=Sign-in did not complete')
    assert.match((await page.locator('[role=alert]').textContent()) ?? '', /state_mismatch/)
    assert.equal(await page.getByText('Call security').count(), 0)
    assert.deepEqual(tokenRequests, [])
  })

  test('no Content Security Policy refusal and no uncaught error on any page', () => {
    assert.deepEqual(h.violations, [])
  })
})
