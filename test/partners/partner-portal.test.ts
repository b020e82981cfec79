import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { applicationClient } from '../helpers/endusers.ts'
import { runCli, startTestService, type TestService, waitFor } from '../helpers/service.ts'
import { type ConsoleClient, consoleClient, memberSession, signIn } from '../helpers/sign-in.ts'
import { confirmSignup, createdIdOf, signupLinkMailedTo } from '../helpers/signup.ts'
import { startSmtp, type TestSmtp, textOf } from '../helpers/smtp.ts'

const CONSOLE_REDIRECT = 'http://127.0.0.1:9/console'
const PORTAL_REDIRECT = 'http://127.0.0.1:9/partner-portal'
const PORTAL_RESOURCE = 'urn:kms:partner-portal'
const PASSWORD = 'partner-password-long-enough'

describe('partner accounts: sign-up, operator approval, sign-in through the provider, keys managed in the portal', () => {
  let smtp: TestSmtp
  let service: TestService
  let portal: ConsoleClient
  let counter = 0

  before(async () => {
    smtp = await startSmtp('accept')
    service = await startTestService(
      {
        KMS_SMTP_URL: smtp.url,
        KMS_SMTP_ATTEMPTS: '1',
        KMS_CONSOLE_REDIRECT_URIS: CONSOLE_REDIRECT,
        KMS_PARTNER_PORTAL_REDIRECT_URIS: PORTAL_REDIRECT,
        KMS_JOB_SWEEP_MS: '200',
        KMS_SIGNUP_RATE_PER_HOUR: '1000',
      },
      { jobs: true },
    )
    portal = await applicationClient(service.baseUrl, 'kms-partner-portal', PORTAL_REDIRECT)
  })
  after(async () => {
    await service.stop()
    await smtp.stop()
  })

  /** A partner who signed up and confirmed the address: pending. */
  async function signedUpPartner() {
    const email = `partner-${process.pid}-${++counter}@example.com`
    const organizationName = `Integrators ${counter}`
    const asked = await service.request('POST', '/api/v1/partner-signup', {
      body: { organizationName, email },
    })
    assert.equal(asked.status, 202, asked.text)
    const link = await signupLinkMailedTo(smtp, email)
    assert.equal(link.pathname, '/partners/signup/confirm')
    const done = await confirmSignup(link, { password: PASSWORD })
    assert.equal(done.status, 201, done.html)
    assert.match(done.html, /once an operator approves it/)
    return { id: createdIdOf(done.html, 'partner'), email, organizationName }
  }

  const mailsTo = (email: string) =>
    smtp.messages.filter((m) => m.to.some((to) => to.toLowerCase() === email.toLowerCase()))

  const portalSignIn = (email: string, password = PASSWORD) =>
    signIn(service.baseUrl, portal, {
      email,
      password,
      resource: PORTAL_RESOURCE,
      tokenResource: true,
      scope: 'openid email api',
    })

  test('a partner who signed up waits for the operator; once approved it signs in and manages its API keys', async () => {
    const partner = await signedUpPartner()
    const partners = service.api.services.partners
    assert.equal((await partners.list('pending')).filter((p) => p.id === partner.id).length, 1)

    // Pending: the portal's sign-in says so and returns access_denied to the portal.
    await assert.rejects(portalSignIn(partner.email), /waiting for an operator’s approval/)

    // The operator approves through the CLI (the real entry point).
    const approved = await runCli(['approve-partner', '--partner', partner.id], service.env)
    assert.equal(approved.code, 0, approved.stderr)
    assert.equal(JSON.parse(approved.stdout).status, 'active')
    // The partner is told by e-mail (the job process sends it).
    await waitFor(
      () => mailsTo(partner.email).some((m) => /partner application is approved/.test(textOf(m))),
      'the approval e-mail',
    )
    const twice = await runCli(['approve-partner', '--partner', partner.id], service.env)
    assert.notEqual(twice.code, 0)
    assert.match(twice.stderr, /partner_not_pending|not pending/)

    const { tokens } = await portalSignIn(partner.email)
    const session = { authorization: `Bearer ${tokens.access_token}` }
    const me = await service.request('GET', '/api/v1/partners/me', { headers: session })
    assert.equal(me.status, 200, me.text)
    assert.equal(me.body.id, partner.id)
    assert.equal(me.body.status, 'active')
    assert.equal(me.body.name, partner.organizationName)

    // A key, shown once; listed without its secret.
    const made = await service.request('POST', '/api/v1/partners/api-keys', {
      headers: session,
      body: { name: 'CRM sync' },
    })
    assert.equal(made.status, 201, made.text)
    assert.match(made.body.key, /^kmsp_[A-Za-z0-9]{52}$/)
    assert.ok(made.body.key.startsWith(made.body.prefix))
    const listed = await service.request('GET', '/api/v1/partners/api-keys', { headers: session })
    assert.equal(listed.status, 200, listed.text)
    assert.deepEqual(
      listed.body.data.map((k: { id: string; name: string }) => [k.id, k.name]),
      [[made.body.id, 'CRM sync']],
    )
    assert.ok(!JSON.stringify(listed.body).includes(made.body.key))

    // The key works on the partner API, but a key may not manage keys.
    const keyHeaders = { authorization: `Bearer ${made.body.key}` }
    assert.equal(
      (await service.request('GET', '/api/v1/partners/referrals', { headers: keyHeaders })).status,
      200,
    )
    const byKey = await service.request('POST', '/api/v1/partners/api-keys', {
      headers: keyHeaders,
      body: { name: 'another' },
    })
    assert.equal(byKey.status, 403, byKey.text)
    assert.equal(byKey.body.error, 'partner_session_required')
    // The session works on the rest of the partner API too.
    const code = await service.request('POST', '/api/v1/partners/codes', {
      headers: session,
      body: { label: 'Web' },
    })
    assert.equal(code.status, 201, code.text)

    // Revoked: the key stops at once.
    const revoked = await service.request('DELETE', `/api/v1/partners/api-keys/${made.body.id}`, {
      headers: session,
    })
    assert.equal(revoked.status, 200, revoked.text)
    assert.ok(revoked.body.revokedAt)
    assert.equal(
      (await service.request('GET', '/api/v1/partners/referrals', { headers: keyHeaders })).status,
      401,
    )

    // The audit trail says who did what (the secret never appears in it).
    const trail = await service.request('GET', '/api/v1/partners/audit', { headers: session })
    assert.equal(trail.status, 200, trail.text)
    const actions = trail.body.data.map((e: { action: string }) => e.action).reverse()
    assert.deepEqual(actions, [
      'partner.signup',
      'partner.approve',
      'partner.api_key.create',
      'partner.code.create',
      'partner.api_key.revoke',
    ])
    const accountActor = trail.body.data.find(
      (e: { action: string }) => e.action === 'partner.api_key.create',
    ).actor
    assert.match(accountActor, /^partneruser:[0-9a-f-]{36}$/)
    assert.equal(trail.body.data.find((e: { action: string }) => e.action === 'partner.approve').actor, 'cli')
    assert.ok(!JSON.stringify(trail.body).includes(made.body.key))
  })

  test('the portal’s session and keys reach the partner API only; tenants’ credentials never reach it', async () => {
    const partner = await signedUpPartner()
    await service.api.services.partners.decide(partner.id, 'approve', 'test')
    const { tokens } = await portalSignIn(partner.email)
    const session = { authorization: `Bearer ${tokens.access_token}` }
    for (const path of ['/api/v1/tenant', '/api/v1/keys', '/api/v1/billing/subscription']) {
      const answer = await service.request('GET', path, { headers: session })
      assert.equal(answer.status, 401, `${path}: ${answer.text}`)
    }
    const tenant = await service.createTenant()
    const member = await memberSession(
      service,
      await consoleClient(service.baseUrl, CONSOLE_REDIRECT),
      tenant.tenantId,
      'tenant:owner',
    )
    for (const headers of [member.headers, { 'x-api-key': tenant.key }]) {
      for (const path of ['/api/v1/partners/me', '/api/v1/partners/api-keys']) {
        const answer = await service.request('GET', path, { headers })
        assert.equal(answer.status, 401, `${path}: ${answer.text}`)
      }
    }
    // A team member's password is not a partner's: the realms are apart.
    await assert.rejects(portalSignIn(member.email, member.password), /not right/)

    // Another partner cannot touch this one's keys.
    const other = await signedUpPartner()
    await service.api.services.partners.decide(other.id, 'approve', 'test')
    const otherSession = {
      authorization: `Bearer ${(await portalSignIn(other.email)).tokens.access_token}`,
    }
    const mine = await service.request('POST', '/api/v1/partners/api-keys', {
      headers: session,
      body: { name: 'mine' },
    })
    const theirs = await service.request('DELETE', `/api/v1/partners/api-keys/${mine.body.id}`, {
      headers: otherSession,
    })
    assert.equal(theirs.status, 404, theirs.text)
    const theirList = await service.request('GET', '/api/v1/partners/api-keys', { headers: otherSession })
    assert.deepEqual(theirList.body, { data: [] })
  })

  test('a rejected partner never enters the portal', async () => {
    const partner = await signedUpPartner()
    const rejected = await runCli(['reject-partner', '--partner', partner.id], service.env)
    assert.equal(rejected.code, 0, rejected.stderr)
    assert.equal(JSON.parse(rejected.stdout).status, 'rejected')
    await assert.rejects(portalSignIn(partner.email), /may not use the partner portal/)
    await waitFor(
      () => mailsTo(partner.email).some((m) => /was not approved/.test(textOf(m))),
      'the rejection e-mail',
    )
    const listed = await runCli(['list-partners', '--status', 'rejected'], service.env)
    assert.equal(listed.code, 0, listed.stderr)
    assert.ok(JSON.parse(listed.stdout).data.some((p: { id: string }) => p.id === partner.id))
    const bad = await runCli(['list-partners', '--status', 'sleeping'], service.env)
    assert.notEqual(bad.code, 0)

    // Applying again with the same address (two e-mails so far: the link and the decision): the
    // account is known (its password is asked) and
    // already a partner's, which the page says; nothing new is created.
    const again = await service.request('POST', '/api/v1/partner-signup', {
      body: { organizationName: 'Second try', email: partner.email },
    })
    assert.equal(again.status, 202, again.text)
    const link = await signupLinkMailedTo(smtp, partner.email, 2)
    const refused = await confirmSignup(link, { password: PASSWORD })
    assert.equal(refused.status, 409, refused.html)
    assert.match(refused.html, /has a partner account already/)
    const [count] = await service.sql<{ n: number }[]>`
      SELECT count(*)::int AS n FROM partners WHERE email = ${partner.email}`
    assert.equal(count!.n, 1)
  })
})
