import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { type ManualClock, manualClock } from '../helpers/manual-clock.ts'
import { startTestService, type TestService } from '../helpers/service.ts'
import { type ConsoleClient, consoleClient, signIn } from '../helpers/sign-in.ts'
import { askToSignUp, confirmSignup, createdIdOf, signupLinkMailedTo } from '../helpers/signup.ts'
import { startSmtp, type TestSmtp } from '../helpers/smtp.ts'

const REDIRECT = 'http://127.0.0.1:9/console'
const PASSWORD = 'a-long-enough-password'

describe('self-service tenant sign-up: the e-mail proves the address, then the tenant and its owner exist', () => {
  let smtp: TestSmtp
  let service: TestService
  let client: ConsoleClient
  let clock: ManualClock
  let counter = 0
  const address = () => `owner-${process.pid}-${++counter}@example.com`

  before(async () => {
    smtp = await startSmtp('accept')
    clock = manualClock()
    service = await startTestService(
      {
        KMS_SMTP_URL: smtp.url,
        KMS_SMTP_ATTEMPTS: '1',
        KMS_CONSOLE_REDIRECT_URIS: REDIRECT,
        KMS_JOB_SWEEP_MS: '200',
        KMS_SIGNUP_RATE_PER_HOUR: '1000',
      },
      { jobs: true, clock },
    )
    client = await consoleClient(service.baseUrl, REDIRECT)
  })
  after(async () => {
    await service.stop()
    await smtp.stop()
  })

  const tenantsNamed = async (name: string) => [
    ...(await service.sql<{ id: string }[]>`SELECT id FROM tenants WHERE name = ${name}`),
  ]

  test('POST /api/v1/signup answers 202 and creates nothing; the link’s page creates the tenant with the signer as owner and no API key', async () => {
    const email = address()
    const name = `Acme ${counter}`
    const asked = await service.request('POST', '/api/v1/signup', { body: { organizationName: name, email } })
    assert.equal(asked.status, 202, asked.text)
    assert.equal(asked.body.email, email)
    assert.ok(Date.parse(asked.body.expiresAt) - clock.now().getTime() === 24 * 3600_000)
    assert.deepEqual(await tenantsNamed(name), [])

    const link = await signupLinkMailedTo(smtp, email)
    assert.equal(link.pathname, '/signup/confirm')
    // Nothing yet after the e-mail either: only the confirmation creates.
    assert.deepEqual(await tenantsNamed(name), [])
    const done = await confirmSignup(link, { password: PASSWORD })
    assert.equal(done.status, 201, done.html)
    const tenantId = createdIdOf(done.html, 'tenant')
    assert.deepEqual(await tenantsNamed(name), [{ id: tenantId }])

    // The owner signs in to the console for the new tenant with the password chosen on the page.
    const { tokens } = await signIn(service.baseUrl, client, {
      email,
      password: PASSWORD,
      resource: `urn:kms:tenant:${tenantId}`,
      tokenResource: true,
    })
    const headers = { authorization: `Bearer ${tokens.access_token}` }
    const members = await service.request('GET', '/api/v1/team/members', { headers })
    assert.equal(members.status, 200, members.text)
    assert.deepEqual(
      members.body.data.map((m: { email: string; role: string }) => [m.email, m.role]),
      [[email, 'tenant:owner']],
    )
    // No API key was made that nobody saw.
    const keys = await service.request('GET', '/api/v1/api-keys', { headers })
    assert.equal(keys.status, 200, keys.text)
    assert.equal(keys.body.total, 0)
    const audit = await service.request('GET', '/api/v1/audit?action=tenants.signup', { headers })
    assert.equal(audit.status, 200, audit.text)
    assert.equal(audit.body.data.length, 1)
    assert.deepEqual(audit.body.data[0].details, { referred: false, existingAccount: false })

    // The link worked once.
    const again = await confirmSignup(link, { password: PASSWORD })
    assert.equal(again.status, 400)
    assert.match(again.html, /not valid/)
  })

  test('the sign-up page: the same answer for a new and a known address; a known account confirms with its own password', async () => {
    const email = address()
    const first = await askToSignUp(`${service.baseUrl}/signup`, {
      organizationName: `First ${counter}`,
      email,
    })
    assert.equal(first.answer.status, 200, first.answer.html)
    assert.match(first.answer.html, /confirmation link is on its way/)
    assert.equal(
      (await confirmSignup(await signupLinkMailedTo(smtp, email), { password: PASSWORD })).status,
      201,
    )
    // The same person signs up a second organisation: the page answers alike, and asks for the
    // existing password, not a new one.
    const second = await askToSignUp(`${service.baseUrl}/signup`, {
      organizationName: `Second ${counter}`,
      email: email.toUpperCase(),
    })
    assert.equal(second.answer.status, first.answer.status)
    assert.equal(
      second.answer.html.replace(/[^\s<>]+@example\.com/gi, 'ADDRESS'),
      first.answer.html.replace(/[^\s<>]+@example\.com/gi, 'ADDRESS'),
    )
    const link = await signupLinkMailedTo(smtp, email, 1)
    const wrong = await confirmSignup(link, { password: 'not-the-password-at-all' })
    assert.equal(wrong.status, 401)
    assert.match(wrong.html, /Your password/)
    const right = await confirmSignup(link, { password: PASSWORD })
    assert.equal(right.status, 201, right.html)
    const [account] = await service.sql<{ id: string }[]>`
      SELECT id FROM accounts WHERE realm = 'team' AND email_normalized = ${email.toLowerCase()}`
    const tenants = await service.api.services.team.tenantsOf(account!.id)
    assert.equal(tenants.length, 2)
    assert.ok(tenants.every((t) => t.role === 'tenant:owner'))
  })

  test('a name taken meanwhile: the page says so and the same link creates the tenant under another name', async () => {
    const email = address()
    const name = `Taken ${counter}`
    await service.request('POST', '/api/v1/signup', { body: { organizationName: name, email } })
    await service.api.services.tenants.create({ name: name.toUpperCase(), actor: 'test' })
    const link = await signupLinkMailedTo(smtp, email)
    const taken = await confirmSignup(link, { password: PASSWORD })
    assert.equal(taken.status, 409)
    assert.match(taken.html, /exists already/)
    const renamed = await confirmSignup(link, { password: PASSWORD, organizationName: `${name} Two` })
    assert.equal(renamed.status, 201, renamed.html)
    assert.equal((await tenantsNamed(`${name} Two`)).length, 1)
    // The failed attempt created no account half-way: one account, owner of one tenant.
    const [account] = await service.sql<{ id: string }[]>`
      SELECT id FROM accounts WHERE realm = 'team' AND email_normalized = ${email}`
    assert.equal((await service.api.services.team.tenantsOf(account!.id)).length, 1)
  })

  test('a link expires after 24 hours; a weak password is refused with the rule; the same address may ask five times an hour', async () => {
    const email = address()
    await service.request('POST', '/api/v1/signup', { body: { organizationName: `Late ${counter}`, email } })
    const link = await signupLinkMailedTo(smtp, email)
    const weak = await confirmSignup(link, { password: 'short' })
    assert.equal(weak.status, 400)
    assert.match(weak.html, /The password must have at least 12 characters/)
    assert.doesNotMatch(weak.html, /must have must have/)
    clock.advance(24 * 3600_000 + 1000)
    try {
      const late = await confirmSignup(link, { password: PASSWORD })
      assert.equal(late.status, 400)
      assert.match(late.html, /expired or was used/)
    } finally {
      clock.set(new Date())
    }

    const busy = address()
    const statuses: number[] = []
    for (let i = 0; i < 6; i++) {
      const asked = await service.request('POST', '/api/v1/signup', {
        body: { organizationName: `Busy ${i}`, email: busy },
      })
      statuses.push(asked.status)
      if (asked.status === 429) assert.equal(asked.body.error, 'signup_rate_limited')
    }
    assert.deepEqual(statuses, [202, 202, 202, 202, 202, 429])
  })

  test('bad input is a 400 naming the field; nothing is stored', async () => {
    const before = (await service.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM signups`)[0]!.n
    const cases: Array<[unknown, RegExp]> = [
      [{ email: 'a@example.com' }, /organizationName/],
      [{ organizationName: 'X' }, /email/],
      [{ organizationName: 'X', email: 'not an address' }, /body\/email/],
      [{ organizationName: 'x'.repeat(201), email: 'a@example.com' }, /organizationName/],
      [{ organizationName: ' padded', email: 'a@example.com' }, /organizationName/],
      [{ organizationName: 'X', email: 'a@example.com', referralCode: 'NOSUCHCODE1' }, /body\/referralCode/],
      [{ organizationName: 'X', email: 'a@example.com', plan: 'pro' }, /plan/],
      ['text', /body/],
    ]
    for (const [body, field] of cases) {
      const answer = await service.request('POST', '/api/v1/signup', { body })
      assert.equal(answer.status, 400, `${JSON.stringify(body)}: ${answer.text}`)
      assert.match(answer.text, field)
    }
    const partner = await service.request('POST', '/api/v1/partner-signup', {
      body: { organizationName: 'X', email: 'a@example.com', referralCode: 'ABCDEFGH' },
    })
    assert.equal(partner.status, 400, partner.text)
    const afterCount = (await service.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM signups`)[0]!.n
    assert.equal(afterCount, before)
    // A confirmation page without a live token is a page, not a crash.
    for (const path of [
      '/signup/confirm',
      '/signup/confirm?token=x',
      `/signup/confirm?token=${'A'.repeat(43)}`,
    ]) {
      const answer = await fetch(`${service.baseUrl}${path}`)
      assert.equal(answer.status, 400, path)
      assert.match(answer.headers.get('content-type') ?? '', /text\/html/)
    }
  })

  test('an unknown ?ref= on the sign-up page is said and dropped; the sign-up goes on without it', async () => {
    const jarless = await fetch(`${service.baseUrl}/signup?ref=NOSUCHCODE1`)
    const html = await jarless.text()
    assert.equal(jarless.status, 200)
    assert.match(html, /The referral code <strong>NOSUCHCODE1<\/strong> is not valid/)
    assert.doesNotMatch(html, /name="ref"/)
  })
})

describe('sign-up requests per client IP are limited across processes (KMS_SIGNUP_RATE_PER_HOUR)', () => {
  let service: TestService
  before(async () => {
    service = await startTestService({ KMS_SIGNUP_RATE_PER_HOUR: '3' })
  })
  after(async () => {
    await service?.stop()
  })

  test('the fourth request of the hour from one address is 429 with Retry-After, the API and the page counting together', async () => {
    const statuses: number[] = []
    for (let i = 0; i < 3; i++) {
      const asked = await service.request('POST', '/api/v1/signup', {
        body: { organizationName: `Org ${i}`, email: `ip-${i}@example.com` },
      })
      statuses.push(asked.status)
    }
    assert.deepEqual(statuses, [202, 202, 202])
    const api = await service.request('POST', '/api/v1/partner-signup', {
      body: { organizationName: 'Org 4', email: 'ip-4@example.com' },
    })
    assert.equal(api.status, 429, api.text)
    assert.equal(api.body.error, 'signup_rate_limited')
    assert.ok(Number(api.headers.get('retry-after')) > 0)
    const { answer } = await askToSignUp(`${service.baseUrl}/signup`, {
      organizationName: 'Org 5',
      email: 'ip-5@example.com',
    })
    assert.equal(answer.status, 429)
    assert.match(answer.headers.get('content-type') ?? '', /text\/html/)
    // GET pages are not counted: anyone may still read the form.
    assert.equal((await fetch(`${service.baseUrl}/signup`)).status, 200)
  })
})
