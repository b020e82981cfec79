import assert from 'node:assert/strict'
import { readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { createServer, request as httpRequest, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import type { Browser, BrowserContext, Page } from 'playwright-core'
import { launchChromium, pageWatchingCsp } from '../helpers/browser.ts'
import { getLoopback, newCliMember, runKms, signInEnv, startKms } from '../helpers/kms-cli.ts'
import { PROJECT_ROOT, startTestService, type TestService } from '../helpers/service.ts'

/*
 * `kms login` (browser), `kms logout` and the stored sign-in, with the real `kms` command as a
 * child process (test/helpers/kms-cli.ts), the real service and the real sign-in pages in Chromium.
 */

const SIGNED_IN_PAGE = 'Signed in — return to your terminal'

/** kms with these variables, run to its end. */
const kms = (args: string[], env: Record<string, string>) => runKms(args, { cwd: PROJECT_ROOT, env })

interface CredentialsFile {
  version: number
  credentials: Record<
    string,
    { tenant: string; addr: string; accessToken: string; refreshToken: string; accessTokenExpiresAt: number }
  >
}

describe('kms login in the browser, the stored sign-in and kms logout', { timeout: 240_000 }, () => {
  let service: TestService
  let browser: Browser
  const dirs: string[] = []
  const violations: string[] = []

  before(async () => {
    service = await startTestService()
    browser = await launchChromium()
  })
  after(async () => {
    await browser?.close()
    await service?.stop()
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true })
  })

  const cliEnv = (tenantId: string | undefined, extra: Record<string, string> = {}) =>
    signInEnv(service, tenantId, dirs, extra)
  const newMember = (tenantId: string, on: TestService = service) => newCliMember(on, tenantId)

  /**
   * The command line's confirmation page, shown after the sign-in (and on every kms login, also to
   * a browser still signed in): it names the client, the tenant and the loopback port kms listens on.
   */
  async function confirmation(
    page: Page,
    expected: { tenantId: string; redirectUri: string },
    on: TestService = service,
  ) {
    await page.waitForSelector('#cli-confirmation', { timeout: 30_000 })
    const text = (await page.textContent('main')) ?? ''
    const tenantName = (await on.api.services.tenants.get(expected.tenantId))!.name
    assert.match(text, /kms command line asks to sign in with your account to the tenant/)
    assert.ok(text.includes(`${tenantName} (${expected.tenantId})`), 'the tenant, by name and id')
    assert.equal(await page.textContent('#cli-port'), new URL(expected.redirectUri).port)
    assert.equal(await page.textContent('#cli-address'), expected.redirectUri)
    assert.match(
      (await page.textContent('#warning')) ?? '',
      /Only continue if you just ran kms login on this computer/,
    )
  }

  /**
   * The sign-in pages from the URL kms printed, in a fresh browser context (or `context`, still
   * signed in), until the browser leaves them: the password when asked, then the confirmation
   * page answered with `answer` ('none': a sign-in refused before it).
   */
  async function signInInBrowser(
    url: string,
    member: { email: string; password: string },
    options: {
      answer?: 'continue' | 'cancel' | 'none'
      context?: BrowserContext
      signedIn?: boolean
      /** The service kms signs in to, when not this file's. */
      on?: TestService
    } = {},
  ) {
    const context = options.context ?? (await pageWatchingCsp(browser, violations)).context
    const page = context.pages()[0] ?? (await context.newPage())
    await page.goto(url)
    if (!options.signedIn) {
      await page.waitForSelector('#email')
      await page.fill('#email', member.email)
      await page.fill('#password', member.password)
      await page.click('button[type=submit]')
    }
    const answer = options.answer ?? 'continue'
    if (answer !== 'none') {
      const params = new URL(url).searchParams
      const tenantId = params.get('resource')!.replace('urn:kms:tenant:', '')
      await confirmation(page, { tenantId, redirectUri: params.get('redirect_uri')! }, options.on)
      await page.click(`button[name=decision][value=${answer === 'continue' ? 'allow' : 'deny'}]`)
    }
    await page.waitForURL((at) => at.hostname === '127.0.0.1' && at.pathname === '/callback', {
      timeout: 30_000,
    })
    await page.waitForLoadState('load')
    const shown = (await page.textContent('body')) ?? ''
    if (!options.context) await context.close()
    return shown
  }

  /** `kms login --no-browser` signed in through Chromium; returns the finished run. */
  async function login(
    env: Record<string, string>,
    member: { email: string; password: string },
    options: Parameters<typeof signInInBrowser>[2] = {},
  ) {
    const run = startKms(['login', '--no-browser'], { cwd: PROJECT_ROOT, env })
    const [, url] = await run.waitForStderr(/(http:\/\/\S+\/oidc\/auth\?\S+)/)
    const shown = await signInInBrowser(url!, member, options)
    const { code } = await run.exited
    return { run, code, shown, url: new URL(url!) }
  }

  const readCredentials = (path: string) => JSON.parse(readFileSync(path, 'utf8')) as CredentialsFile
  const onlyEntry = (path: string) => {
    const entries = Object.values(readCredentials(path).credentials)
    assert.equal(entries.length, 1)
    return entries[0]!
  }
  /** Makes the stored access token look expired, so the next command must refresh it. */
  function expireStoredToken(path: string) {
    const file = readCredentials(path)
    for (const entry of Object.values(file.credentials)) entry.accessTokenExpiresAt = 0
    writeFileSync(path, JSON.stringify(file))
  }

  test('kms login: the URL is printed, the sign-in in Chromium comes back to the loopback listener, the tokens are stored owner-only, and kms calls the API with them', async () => {
    const tenant = await service.createTenant()
    const member = await newMember(tenant.tenantId)
    const { env, configDir, credentialsPath } = cliEnv(tenant.tenantId)

    const { run, code, shown, url } = await login(env, member)
    assert.equal(code, 0, run.stderr())
    assert.ok(shown.includes(SIGNED_IN_PAGE), shown)
    // What the CLI asked for: the CLI's client, PKCE S256, state, nonce, the tenant's resource, a loopback redirect.
    assert.equal(url.searchParams.get('client_id'), 'kms-cli')
    assert.equal(url.searchParams.get('code_challenge_method'), 'S256')
    assert.match(url.searchParams.get('code_challenge') ?? '', /^[A-Za-z0-9_-]{43}$/)
    assert.ok((url.searchParams.get('state') ?? '').length >= 32)
    assert.ok((url.searchParams.get('nonce') ?? '').length >= 32)
    assert.equal(url.searchParams.get('resource'), `urn:kms:tenant:${tenant.tenantId}`)
    assert.match(url.searchParams.get('redirect_uri') ?? '', /^http:\/\/127\.0\.0\.1:\d+\/callback$/)
    assert.match(run.stderr(), new RegExp(`Signed in to tenant ${tenant.tenantId} .* as ${member.email}`))

    // Stored owner-only, in a directory only the owner can enter.
    assert.equal(statSync(credentialsPath).mode & 0o777, 0o600)
    assert.equal(statSync(configDir).mode & 0o777, 0o700)
    const stored = onlyEntry(credentialsPath)
    assert.equal(stored.tenant, tenant.tenantId)
    assert.equal(stored.addr, service.baseUrl)
    // Never printed.
    for (const secret of [stored.accessToken, stored.refreshToken])
      assert.ok(!run.stderr().includes(secret) && !run.stdout().includes(secret), 'a token was printed')

    // The stored token is a member's token for the tenant's API.
    const whoami = await kms(['whoami', '--output', 'json'], env)
    assert.equal(whoami.code, 0, whoami.stderr)
    const caller = JSON.parse(whoami.out)
    assert.equal(caller.callerKind, 'member')
    assert.equal(caller.tenantId, tenant.tenantId)
    assert.equal(caller.accountId, member.accountId)
    assert.equal(caller.email, member.email)
    assert.deepEqual(violations, [], 'no CSP violation on the sign-in pages')
  })

  test('Cancel on the confirmation page ends kms login with access_denied, and nothing is stored', async () => {
    const tenant = await service.createTenant()
    const member = await newMember(tenant.tenantId)
    const { env, credentialsPath } = cliEnv(tenant.tenantId)
    const { run, code } = await login(env, member, { answer: 'cancel' })
    assert.equal(code, 3, run.stderr())
    assert.match(run.stderr(), /^kms: access_denied: /m)
    assert.throws(() => statSync(credentialsPath), { code: 'ENOENT' })
    assert.deepEqual(violations, [], 'no CSP violation on the sign-in pages')
  })

  test('a second kms login in a browser still signed in asks no password but shows the confirmation page again; Continue signs in', async () => {
    const tenant = await service.createTenant()
    const member = await newMember(tenant.tenantId)
    const { context } = await pageWatchingCsp(browser, violations)
    try {
      const first = cliEnv(tenant.tenantId)
      const signedIn = await login(first.env, member, { context })
      assert.equal(signedIn.code, 0, signedIn.run.stderr())

      // The same browser: its session is live and kms-cli has a grant; the page is shown all the same.
      const second = cliEnv(tenant.tenantId)
      const again = await login(second.env, member, { context, signedIn: true })
      assert.equal(again.code, 0, again.run.stderr())
      assert.ok(again.shown.includes(SIGNED_IN_PAGE), again.shown)
      assert.notEqual(
        again.url.searchParams.get('redirect_uri'),
        signedIn.url.searchParams.get('redirect_uri'),
      )
      assert.equal(onlyEntry(second.credentialsPath).tenant, tenant.tenantId)
    } finally {
      await context.close()
    }
    assert.deepEqual(violations, [], 'no CSP violation on the sign-in pages')
  })

  test('without KMS_CREDENTIAL_STORE the OS keyring is tried first; where it cannot be used, the owner-only file holds the sign-in', async () => {
    const tenant = await service.createTenant()
    const member = await newMember(tenant.tenantId)
    const { env, credentialsPath } = cliEnv(tenant.tenantId)
    delete env['KMS_CREDENTIAL_STORE']
    // What the CLI counts as a keyring on Linux: the Secret Service (a desktop's), not the kernel's.
    const { Entry } = await import('@napi-rs/keyring')
    const keyringEntry = (key: string) => new Entry('kms-cli', key, { linux: { store: 'secret-service' } })
    let keyringUsable: boolean
    try {
      const probe = keyringEntry(`probe-${process.pid}`)
      probe.setPassword('probe')
      probe.deletePassword()
      keyringUsable = true
    } catch {
      keyringUsable = false
    }
    const { run, code } = await login(env, member)
    assert.equal(code, 0, run.stderr())
    const key = `default ${service.baseUrl} ${tenant.tenantId}`
    if (keyringUsable) {
      // A machine with a keyring: the sign-in is there, and not in a file.
      const entry = keyringEntry(key)
      assert.equal(JSON.parse(entry.getPassword()!).tenant, tenant.tenantId)
      entry.deletePassword()
      assert.match(run.stderr(), /kept in the OS keyring/)
    } else {
      // This machine (no usable platform store): the file, owner-only.
      assert.equal(statSync(credentialsPath).mode & 0o777, 0o600)
      assert.ok(readCredentials(credentialsPath).credentials[key])
      assert.match(run.stderr(), /kept in .*credentials\.json/)
    }
    const whoami = await kms(['whoami', '--output', 'json'], env)
    assert.equal(whoami.code, 0, whoami.stderr)
    assert.equal(JSON.parse(whoami.out).accountId, member.accountId)
  })

  test('an answer with another state is refused with a page and the login waits on for its own; an error answer with its state ends the login with that error', async () => {
    const tenant = await service.createTenant()
    const member = await newMember(tenant.tenantId)
    const { env, credentialsPath } = cliEnv(tenant.tenantId)

    const run = startKms(['login', '--no-browser'], { cwd: PROJECT_ROOT, env })
    const [, printed] = await run.waitForStderr(/(http:\/\/\S+\/oidc\/auth\?\S+)/)
    const redirectUri = new URL(printed!).searchParams.get('redirect_uri')!
    const forged = await getLoopback(`${redirectUri}?code=forged-code&state=${'x'.repeat(32)}`)
    assert.equal(forged.status, 400)
    assert.match(forged.body, /Refused/)
    const noState = await getLoopback(`${redirectUri}?code=forged-code`)
    assert.equal(noState.status, 400)
    // Still waiting: the real sign-in completes.
    const shown = await signInInBrowser(printed!, member)
    assert.ok(shown.includes(SIGNED_IN_PAGE), shown)
    assert.equal((await run.exited).code, 0, run.stderr())
    assert.match(run.stderr(), /another state was refused/)
    assert.equal(onlyEntry(credentialsPath).tenant, tenant.tenantId)

    // An error answer carrying the login's state ends it with that error (exit 3), nothing stored.
    const other = cliEnv(tenant.tenantId)
    const failing = startKms(['login', '--no-browser'], { cwd: PROJECT_ROOT, env: other.env })
    const [, url] = await failing.waitForStderr(/(http:\/\/\S+\/oidc\/auth\?\S+)/)
    const params = new URL(url!).searchParams
    const answered = await getLoopback(
      `${params.get('redirect_uri')}?error=access_denied&error_description=nope&state=${params.get('state')}&iss=${encodeURIComponent(service.baseUrl)}`,
    )
    assert.equal(answered.status, 400)
    assert.equal((await failing.exited).code, 3)
    assert.match(failing.stderr(), /^kms: access_denied: the sign-in failed: nope$/m)
    assert.throws(() => statSync(other.credentialsPath), { code: 'ENOENT' })
  })

  test('a member of tenant A gets no CLI token for tenant B: the provider answers access_denied and nothing is stored', async () => {
    const tenantA = await service.createTenant()
    const tenantB = await service.createTenant()
    const member = await newMember(tenantA.tenantId)
    const { env, credentialsPath } = cliEnv(tenantB.tenantId)
    const run = startKms(['login', '--no-browser'], { cwd: PROJECT_ROOT, env })
    const [, url] = await run.waitForStderr(/(http:\/\/\S+\/oidc\/auth\?\S+)/)
    // Refused before any confirmation: the gate answers at the sign-in.
    const shown = await signInInBrowser(url!, member, { answer: 'none' })
    assert.match(shown, /Sign-in failed/)
    assert.equal((await run.exited).code, 3)
    assert.match(run.stderr(), /^kms: access_denied: .*not a member of this tenant/m)
    assert.throws(() => statSync(credentialsPath), { code: 'ENOENT' })
  })

  test('stored credentials of tenant A are never used for tenant B: not_signed_in, and no request carries A’s token', async () => {
    // The CLI talks to a service through a recording proxy: every request it sends is seen. kms
    // signs in only with the provider of the address it talks to, so that service's issuer (ID_URL)
    // is the proxy's address, as it is for a service published behind one.
    const seen: Array<{ path: string; authorization: string | undefined }> = []
    let target: URL | undefined
    const proxy: Server = createServer((req, res) => {
      seen.push({ path: req.url ?? '', authorization: req.headers.authorization })
      const upstream = httpRequest(
        {
          host: target!.hostname,
          port: target!.port,
          path: req.url,
          method: req.method,
          headers: req.headers,
        },
        (answer) => {
          res.writeHead(answer.statusCode ?? 502, answer.headers)
          answer.pipe(res)
        },
      )
      req.pipe(upstream)
    })
    await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', () => resolve()))
    const proxied = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`
    let behindProxy: TestService | undefined
    try {
      behindProxy = await startTestService({ ID_URL: proxied })
      target = new URL(behindProxy.baseUrl)
      const tenantA = await behindProxy.createTenant()
      const tenantB = await behindProxy.createTenant()
      const member = await newMember(tenantA.tenantId, behindProxy)
      await behindProxy.api.services.team.addMember(
        { tenantId: tenantB.tenantId, actor: 'test', requestId: null, clientIp: null },
        { accountId: member.accountId, role: 'tenant:developer' },
      )
      const { env } = cliEnv(tenantA.tenantId, { KMS_ADDR: proxied })
      const { run, code } = await login(env, member, { on: behindProxy })
      assert.equal(code, 0, run.stderr())
      const tokenA = onlyEntry(join(env['KMS_CONFIG_DIR']!, 'credentials.json')).accessToken

      seen.length = 0
      const forB = await kms(['whoami'], { ...env, KMS_TENANT: tenantB.tenantId })
      assert.equal(forB.code, 3)
      assert.match(forB.stderr, /^kms: not_signed_in: /m)
      assert.equal(seen.length, 0, `nothing is sent for tenant B: ${JSON.stringify(seen.map((r) => r.path))}`)

      // The same proxy does see the requests of tenant A's own commands, with A's token.
      const forA = await kms(['whoami', '--output', 'json'], env)
      assert.equal(forA.code, 0, forA.stderr)
      assert.equal(JSON.parse(forA.out).tenantId, tenantA.tenantId)
      assert.ok(seen.length > 0 && seen.every((r) => r.authorization === `Bearer ${tokenA}`))
    } finally {
      await behindProxy?.stop()
      proxy.closeAllConnections()
      await new Promise<void>((resolve) => proxy.close(() => resolve()))
    }
  })

  test('several kms processes started together after the access token expired all succeed: one refreshes, the others use its token, and the sign-in survives', async () => {
    const tenant = await service.createTenant()
    const member = await newMember(tenant.tenantId)
    const { env, credentialsPath } = cliEnv(tenant.tenantId)
    const { run, code } = await login(env, member)
    assert.equal(code, 0, run.stderr())
    const before = onlyEntry(credentialsPath)

    expireStoredToken(credentialsPath)
    const runs = await Promise.all(Array.from({ length: 4 }, () => kms(['whoami', '--output', 'json'], env)))
    for (const result of runs) {
      assert.equal(result.code, 0, result.stderr)
      assert.equal(JSON.parse(result.out).accountId, member.accountId)
    }
    const after = onlyEntry(credentialsPath)
    // Refreshed (a public client's refresh token rotates at each use) and stored once.
    assert.notEqual(after.refreshToken, before.refreshToken)
    assert.notEqual(after.accessToken, before.accessToken)
    // expireStoredToken set 0: the entry now holds the new token's own expiry, whatever the clock says.
    assert.notEqual(after.accessTokenExpiresAt, 0)
    // Had two processes sent the same refresh token, the provider would have ended the sign-in:
    // it is alive, and refreshes again.
    expireStoredToken(credentialsPath)
    const again = await kms(['whoami', '--output', 'json'], env)
    assert.equal(again.code, 0, again.stderr)
    assert.notEqual(onlyEntry(credentialsPath).refreshToken, after.refreshToken)
  })

  test('a member removed from the tenant loses CLI access at once: the access token is refused, and the refresh ends the sign-in', async () => {
    const tenant = await service.createTenant()
    const member = await newMember(tenant.tenantId)
    const { env, credentialsPath } = cliEnv(tenant.tenantId)
    const { run, code } = await login(env, member)
    assert.equal(code, 0, run.stderr())
    assert.equal((await kms(['whoami'], env)).code, 0)

    // The team service's removal, as DELETE /api/v1/team/members/{id} by an owner runs it.
    await service.api.services.team.removeMember(
      { tenantId: tenant.tenantId, actor: 'test', requestId: null, clientIp: null },
      { memberRole: 'tenant:owner' },
      member.accountId,
    )
    const refused = await kms(['whoami'], env)
    assert.equal(refused.code, 3, refused.stderr)

    expireStoredToken(credentialsPath)
    const refresh = await kms(['whoami'], env)
    assert.equal(refresh.code, 3)
    assert.match(refresh.stderr, /^kms: not_signed_in: the sign-in to tenant .* has ended/m)
    assert.deepEqual(readCredentials(credentialsPath).credentials, {}, 'the dead sign-in is deleted')
  })

  test('kms logout revokes the sign-in at the provider (the refresh token and the access token stop working) and deletes the stored tokens', async () => {
    const tenant = await service.createTenant()
    const member = await newMember(tenant.tenantId)
    const { env, credentialsPath } = cliEnv(tenant.tenantId)
    const { run, code } = await login(env, member)
    assert.equal(code, 0, run.stderr())
    const stored = onlyEntry(credentialsPath)

    const out = await kms(['logout'], env)
    assert.equal(out.code, 0, out.stderr)
    assert.match(out.stderr, /Signed out of tenant/)
    assert.deepEqual(readCredentials(credentialsPath).credentials, {})

    const refreshed = await fetch(new URL('/oidc/token', service.baseUrl), {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({
        grant_type: 'refresh_token',
        client_id: 'kms-cli',
        refresh_token: stored.refreshToken,
        resource: `urn:kms:tenant:${tenant.tenantId}`,
      }),
    })
    assert.equal(refreshed.status, 400)
    assert.equal(((await refreshed.json()) as { error: string }).error, 'invalid_grant')
    const api = await service.request('GET', '/api/v1/tenant', {
      headers: { authorization: `Bearer ${stored.accessToken}` },
    })
    assert.equal(api.status, 401)

    const whoami = await kms(['whoami'], env)
    assert.equal(whoami.code, 3)
    assert.match(whoami.stderr, /^kms: not_signed_in: /m)
    const twice = await kms(['logout'], env)
    assert.equal(twice.code, 0)
    assert.match(twice.stderr, /Not signed in/)
  })

  test('kms login without a tenant refuses before sending anything, naming where tenant ids are found', async () => {
    const { env } = cliEnv(undefined, { KMS_ADDR: 'http://127.0.0.1:9' })
    const out = await kms(['login'], env)
    assert.equal(out.code, 2)
    assert.match(out.stderr, /^kms: tenant_required: kms login needs a tenant: pass --tenant <tenant id>/m)
    assert.match(out.stderr, /GET \/api\/v1\/me/)
    const bad = await kms(['login', '--tenant', 'acme'], env)
    assert.equal(bad.code, 2)
    assert.match(bad.stderr, /--tenant must be a tenant id \(a UUID\)/)
  })
})
