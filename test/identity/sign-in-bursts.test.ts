import assert from 'node:assert/strict'
import { request as httpRequest } from 'node:http'
import { after, before, describe, test } from 'node:test'
import * as oidc from 'openid-client'
import { createAccountService, THROTTLE } from '../../src/identity/accounts/account-service.ts'
import { OTP_POLICY } from '../../src/identity/accounts/one-time-codes.ts'
import { loadMasterKeyring } from '../../src/keyring/master-key.ts'
import { createLogger } from '../../src/platform/logger.ts'
import { manualClock } from '../helpers/manual-clock.ts'
import { startTestService, type TestService, waitFor } from '../helpers/service.ts'
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
import { totpCode } from '../helpers/totp.ts'

const REDIRECT = 'http://127.0.0.1:9/callback'
const NONE = { enabled: false, required: false }
const REQUIRED = { enabled: true, required: true }

interface Answer {
  status: number
  location: string | undefined
  setCookie: string[]
  html: string
}

/**
 * A form POST from a chosen loopback address: all of 127.0.0.0/8 is this host, so the service
 * sees each test's own client address over a real connection, with no proxy header to trust.
 * One connection per request, so a burst arrives as simultaneous requests.
 */
function postFrom(address: string, url: URL, jar: CookieJar, form: Record<string, string>): Promise<Answer> {
  const body = new URLSearchParams(form).toString()
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      url,
      {
        method: 'POST',
        localAddress: address,
        agent: false,
        headers: {
          cookie: jar.header(),
          'content-type': 'application/x-www-form-urlencoded',
          'content-length': Buffer.byteLength(body),
        },
      },
      (res) => {
        let html = ''
        res.setEncoding('utf8')
        res.on('data', (chunk: string) => {
          html += chunk
        })
        res.on('end', () =>
          resolve({
            status: res.statusCode!,
            location: res.headers.location,
            setCookie: res.headers['set-cookie'] ?? [],
            html,
          }),
        )
      },
    )
    req.on('error', reject)
    req.end(body)
  })
}

const keep = (jar: CookieJar, answer: Answer) => {
  const headers = new Headers()
  for (const line of answer.setCookie) headers.append('set-cookie', line)
  jar.store({ headers } as Response)
}

/** How many answers had each status: 401 is a guess checked and wrong, 429 one refused unchecked. */
const tally = (answers: Answer[]) => {
  const counts = new Map<number, number>()
  for (const a of answers) counts.set(a.status, (counts.get(a.status) ?? 0) + 1)
  return counts
}

describe('sign-in bursts: simultaneous guesses get no more checks than the limits', () => {
  let service: TestService
  let client: ConsoleClient
  before(async () => {
    service = await startTestService({ KMS_CONSOLE_REDIRECT_URIS: REDIRECT })
    client = await consoleClient(service.baseUrl, REDIRECT)
  })
  after(() => service.stop())

  /** A sign-in started (the authorization request, from 127.0.0.1): its jar and its form. */
  async function startSignIn(resource?: string) {
    const jar = new CookieJar()
    const url = oidc.buildAuthorizationUrl(client.config, {
      redirect_uri: REDIRECT,
      scope: 'openid email',
      code_challenge: await oidc.calculatePKCECodeChallenge(oidc.randomPKCECodeVerifier()),
      code_challenge_method: 'S256',
      state: 'st',
      ...(resource ? { resource } : {}),
    })
    const shown = (await follow(jar, service.baseUrl, url.toString(), REDIRECT)).page!
    return { jar, action: new URL(formActionOf(shown.html), service.baseUrl), csrf: csrfOf(shown.html) }
  }

  /** The password from `address`, then the factor page it leads to: its form, for guesses. */
  async function atFactorPage(
    address: string,
    credentials: { email: string; password: string },
    resource?: string,
  ) {
    const { jar, action, csrf } = await startSignIn(resource)
    const answer = await postFrom(address, action, jar, { csrf, ...credentials })
    assert.equal(answer.status, 303, `the password is accepted from ${address}: ${answer.html.slice(0, 300)}`)
    keep(jar, answer)
    const shown = await page(jar, new URL(answer.location!, service.baseUrl))
    return {
      jar,
      shown,
      action: new URL(formActionOf(shown.html), service.baseUrl),
      csrf: csrfOf(shown.html),
    }
  }

  test('40 passwords at once from one address: at most five are checked, and the right one sent after them is refused', async () => {
    const email = 'forty@example.com'
    const password = 'the right password'
    await service.api.services.accounts.createTeamAccount({ email, password })
    const address = '127.0.0.11'
    const { jar, action, csrf } = await startSignIn()
    const wrong = Array.from({ length: 39 }, (_, i) =>
      postFrom(address, action, jar, { csrf, email, password: `wrong guess ${i}` }),
    )
    // The right password goes once the wrong ones are in: the throttle row shows the account's
    // limit taken from this address (or already locked). Which reaches the server first is then
    // not left to the network.
    await waitFor(async () => {
      const [row] = await service.sql<{ failures: number; locked: boolean }[]>`
        SELECT failures, locked_until IS NOT NULL AS locked FROM sign_in_throttle
        WHERE client_ip = ${address} AND subject <> '*'`
      return !!row && (row.locked || row.failures >= THROTTLE.perAccountLimit)
    }, 'the account’s limit taken from the address')
    const right = await postFrom(address, action, jar, { csrf, email, password })
    const counts = tally(await Promise.all(wrong))
    assert.equal(right.status, 429, 'the right password, sent last, is refused')
    assert.ok((counts.get(401) ?? 0) <= THROTTLE.perAccountLimit, `checked: ${counts.get(401)}`)
    assert.equal((counts.get(401) ?? 0) + (counts.get(429) ?? 0), 39, 'each wrong one was checked or refused')

    // Nothing account-wide for passwords: the owner, at their own address, signs in.
    const owner = await startSignIn()
    const signedIn = await postFrom('127.0.0.12', owner.action, owner.jar, {
      csrf: owner.csrf,
      email,
      password,
    })
    assert.notEqual(signedIn.status, 429)
    assert.notEqual(signedIn.status, 401)
  })

  test('100 passwords at once from one address: at most five checked for one account, at most fifty across accounts', async () => {
    const email = 'hundred@example.com'
    await service.api.services.accounts.createTeamAccount({ email, password: 'the right password' })
    const one = await startSignIn()
    const atOne = tally(
      await Promise.all(
        Array.from({ length: 100 }, (_, i) =>
          postFrom('127.0.0.13', one.action, one.jar, { csrf: one.csrf, email, password: `guess ${i}` }),
        ),
      ),
    )
    assert.ok((atOne.get(401) ?? 0) <= THROTTLE.perAccountLimit, `checked: ${atOne.get(401)}`)
    assert.equal((atOne.get(401) ?? 0) + (atOne.get(429) ?? 0), 100)

    // A spray: a hundred accounts (unknown addresses are checked against a decoy all the same).
    const spray = await startSignIn()
    const across = tally(
      await Promise.all(
        Array.from({ length: 100 }, (_, i) =>
          postFrom('127.0.0.14', spray.action, spray.jar, {
            csrf: spray.csrf,
            email: `sprayed-${i}@example.com`,
            password: 'Summer2026!',
          }),
        ),
      ),
    )
    assert.ok((across.get(401) ?? 0) <= THROTTLE.perAddressLimit, `checked: ${across.get(401)}`)
    assert.equal((across.get(401) ?? 0) + (across.get(429) ?? 0), 100)
    const after = await postFrom('127.0.0.14', spray.action, spray.jar, {
      csrf: spray.csrf,
      email,
      password: 'the right password',
    })
    assert.equal(after.status, 429, 'the address is locked for every account')
  })

  test('TOTP: 60 codes at once check at most five; other addresses share a cap of ten for the account', async () => {
    const email = 'totp-burst@example.com'
    const password = 'the right password'
    const accounts = service.api.services.accounts
    const account = await accounts.createTeamAccount({ email, password })
    const { secret } = await accounts.beginTotpEnrolment(account.id, 'KMS')
    assert.equal(await accounts.confirmTotpEnrolment(account.id, totpCode(secret), '192.0.2.50'), 'ok')
    // Guesses that are surely wrong: no code of the steps around now (five minutes either way).
    const near = new Set(
      Array.from({ length: 21 }, (_, i) => totpCode(secret, Date.now() + (i - 10) * 30_000)),
    )
    const guesses = Array.from({ length: 200 }, (_, i) => String(i * 4_999).padStart(6, '0'))
      .filter((code) => !near.has(code))
      .slice(0, 60)

    const burst = async (address: string) => {
      const at = await atFactorPage(address, { email, password })
      const answers = await Promise.all(
        guesses.map((code) => postFrom(address, at.action, at.jar, { csrf: at.csrf, code })),
      )
      return { at, counts: tally(answers) }
    }

    const first = await burst('127.0.0.21')
    const firstChecked = first.counts.get(401) ?? 0
    assert.ok(firstChecked <= THROTTLE.perAccountLimit, `checked from the first address: ${firstChecked}`)
    assert.equal(firstChecked + (first.counts.get(429) ?? 0), 60)

    // Another address, after the first is locked: it adds guesses only up to the account's cap.
    const second = await burst('127.0.0.22')
    const secondChecked = second.counts.get(401) ?? 0
    assert.ok(
      firstChecked + secondChecked <= THROTTLE.totpPerAccountLimit,
      `checked from two addresses: ${firstChecked} + ${secondChecked}`,
    )

    // The cap reached, a third address checks nothing: not even the right code gets through.
    const third = await burst('127.0.0.23')
    assert.equal(third.counts.get(401) ?? 0, 0, 'no code checked from a third address')
    const rightCode = await postFrom('127.0.0.23', third.at.action, third.at.jar, {
      csrf: third.at.csrf,
      code: totpCode(secret),
    })
    assert.equal(rightCode.status, 429)
    const [wide] = await service.sql<{ locked: boolean }[]>`
      SELECT locked_until > now() AS locked FROM sign_in_throttle
      WHERE subject = ${`totp:${account.id}`} AND client_ip = '*'`
    assert.ok(wide?.locked, 'the account’s TOTP is locked from every address')
  })

  test('e-mailed codes: 60 guesses at once take at most five tries of the code; 20 resends at once make at most five codes', async () => {
    const tenant = await service.createTenant()
    const owner = await memberSession(service, client, tenant.tenantId, 'tenant:owner')
    const patched = await service.request('PATCH', '/api/v1/settings/security', {
      headers: owner.headers,
      body: { mfaMethods: { totp: NONE, emailOtp: REQUIRED, smsOtp: NONE } },
    })
    assert.equal(patched.status, 200, patched.text)
    const at = await atFactorPage(
      '127.0.0.31',
      { email: owner.email, password: owner.password },
      `urn:kms:tenant:${tenant.tenantId}`,
    )
    assert.match(at.action.pathname, /\/email-otp$/)

    // Not six digits, so surely not the code: each is still a try of it.
    const answers = await Promise.all(
      Array.from({ length: 60 }, (_, i) =>
        postFrom('127.0.0.31', at.action, at.jar, { csrf: at.csrf, code: `guess-${i}` }),
      ),
    )
    assert.ok(answers.every((a) => a.status === 401))
    const [code] = await service.sql<{ failed_attempts: number; revoked: boolean }[]>`
      SELECT failed_attempts, revoked_at IS NOT NULL AS revoked FROM account_otps
      WHERE account_id = ${owner.accountId} AND channel = 'email' ORDER BY created_at LIMIT 1`
    assert.ok(
      code!.failed_attempts <= OTP_POLICY.maxFailedAttempts,
      `tries of the code: ${code!.failed_attempts}`,
    )
    assert.ok(code!.revoked, 'the code is dead')

    // The resend form of the code page.
    const resend =
      /<form method="post" action="(\/sign-in\/[^"]+\/resend)">\s*<input type="hidden" name="csrf" value="([^"]+)"/.exec(
        at.shown.html,
      )!
    const resends = tally(
      await Promise.all(
        Array.from({ length: 20 }, () =>
          postFrom('127.0.0.31', new URL(resend[1]!, service.baseUrl), at.jar, { csrf: resend[2]! }),
        ),
      ),
    )
    const [made] = await service.sql<{ n: number }[]>`
      SELECT count(*)::int AS n FROM account_otps WHERE account_id = ${owner.accountId} AND channel = 'email'`
    assert.ok(made!.n <= OTP_POLICY.sendsPerWindow, `codes made: ${made!.n}`)
    assert.equal(resends.get(429), 20 - (made!.n - 1), 'each resend past the limit is refused')
  })

  test('counts whose window and lock have ended are swept', async () => {
    const clock = manualClock()
    const accounts = createAccountService({
      sql: service.sql,
      masterKeys: loadMasterKeyring(service.config, createLogger('silent', 'test')).keyring,
      clock,
    })
    const address = '203.0.113.40'
    await accounts.signIn({ email: 'swept@example.com', password: 'a guess', clientIp: address })
    const rows = () => service.sql<{ n: number }[]>`
      SELECT count(*)::int AS n FROM sign_in_throttle WHERE client_ip = ${address}`
    assert.equal((await rows())[0]!.n, 2, 'the account from the address, and the address')
    clock.advance(THROTTLE.windowMs + THROTTLE.lockMs + 1000)
    assert.ok((await accounts.sweepThrottle()) >= 2)
    assert.equal((await rows())[0]!.n, 0)
  })
})
