import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import * as oidc from 'openid-client'
import { RESET_REQUESTS } from '../../src/identity/accounts/account-links.ts'
import { choosePassword, linkMailedTo } from '../helpers/endusers.ts'
import {
  httpRequest,
  runCli,
  type SpawnedService,
  spawnService,
  startTestService,
  type TestService,
  waitFor,
} from '../helpers/service.ts'
import {
  type ConsoleClient,
  CookieJar,
  consoleClient,
  csrfOf,
  follow,
  formActionOf,
  memberSession,
  page,
  signIn,
} from '../helpers/sign-in.ts'
import { startSmtp, type TestSmtp, textOf } from '../helpers/smtp.ts'

/**
 * Issue 30: what ends a member's credentials. An operator's password reset (defect 5) and a
 * removal from a tenant (defect 6) end the tokens issued before them, in this process and in
 * another one (B, whose caches live ten minutes: only the bus can explain a refusal within a
 * second); members reset their own password from the console's sign-in page; the invitation
 * e-mail names who invited and the page words a weak password once.
 */
const REDIRECT = 'http://127.0.0.1:9/callback'
const resourceOf = (tenantId: string) => `urn:kms:tenant:${tenantId}`

describe('member credentials', () => {
  let smtp: TestSmtp
  let a: TestService
  let b: SpawnedService
  let client: ConsoleClient

  before(async () => {
    smtp = await startSmtp('accept')
    a = await startTestService(
      {
        KMS_SMTP_URL: smtp.url,
        KMS_SMTP_ATTEMPTS: '1',
        KMS_SMTP_TIMEOUT_MS: '2000',
        KMS_CONSOLE_REDIRECT_URIS: REDIRECT,
        KMS_JOB_SWEEP_MS: '200',
      },
      { jobs: true },
    )
    b = await spawnService({ ...a.env, ID_URL: a.baseUrl, KMS_API_KEY_CACHE_TTL_MS: '600000' })
    client = await consoleClient(a.baseUrl, REDIRECT)
  })
  after(async () => {
    await b?.stop()
    await a?.stop()
    await smtp?.stop()
  })

  const tenantStatus = async (baseUrl: string, accessToken: string) =>
    httpRequest(baseUrl, 'GET', '/api/v1/tenant', { headers: { authorization: `Bearer ${accessToken}` } })

  /**
   * Polls process B until it refuses the token, for at most 200 tries. B caches grants and roles
   * for ten minutes, far longer than the polling can last: only the invalidation over the bus can
   * explain a refusal, whatever the machine's load (no time is asserted).
   */
  async function statusOnBAfterInvalidation(accessToken: string): Promise<number> {
    let status = 200
    for (let tries = 0; tries < 200; tries++) {
      status = (await tenantStatus(b.baseUrl, accessToken)).status
      if (status === 401) break
      await sleep(50)
    }
    return status
  }

  /** B has the member's grant and role cached (ten minutes): a refusal later is the bus's doing. */
  async function warmB(member: { accessToken: string }) {
    for (let i = 0; i < 2; i++) {
      const seen = await tenantStatus(b.baseUrl, member.accessToken)
      assert.equal(seen.status, 200, seen.text)
    }
  }

  /** The old refresh token is dead: the provider answers invalid_grant. */
  async function assertRefreshRefused(refreshToken: string, tenantId: string, what: string) {
    await assert.rejects(
      oidc.refreshTokenGrant(client.config, refreshToken, { resource: resourceOf(tenantId) }),
      (err: { error?: string }) => {
        assert.equal(err.error, 'invalid_grant', what)
        return true
      },
    )
  }

  const mailsTo = (email: string) =>
    smtp.messages.filter((m) => m.to.some((to) => to.toLowerCase() === email.toLowerCase()))

  const invitationLinkIn = (text: string): string => {
    const match = /(http:\/\/[^\s"<>]+\/invitations\/accept\?token=[A-Za-z0-9_-]+)/.exec(text)
    assert.ok(match, `a link in the e-mail:\n${text}`)
    return match[1]!
  }

  /** The owner invites `email`; the e-mail arrives; returns its text (headers unfolded) and link. */
  async function invite(owner: { headers: Record<string, string> }, email: string, role: string) {
    const seen = mailsTo(email).length
    const invited = await a.request('POST', '/api/v1/team/invitations', {
      headers: owner.headers,
      body: { email, role },
    })
    assert.equal(invited.status, 201, invited.text)
    await waitFor(() => mailsTo(email).length > seen, `the invitation e-mail to ${email}`)
    const text = textOf(mailsTo(email).at(-1)!).replace(/\r?\n[ \t]+/g, ' ')
    return { text, link: invitationLinkIn(text) }
  }

  /** The accept-invitation page, submitted with `password`. */
  async function accept(link: string, password: string) {
    const jar = new CookieJar()
    const shown = await page(jar, link)
    assert.equal(shown.status, 200, shown.html.slice(0, 500))
    return page(jar, new URL('/invitations/accept', a.baseUrl), {
      form: { csrf: csrfOf(shown.html), token: new URL(link).searchParams.get('token')!, password },
    })
  }

  // With and without --reset-totp: either way the operator's reset is the remedy for a compromised account.
  for (const flags of [[], ['--reset-totp']]) {
    test(`reset-member-password${flags.map((flag) => ` ${flag}`).join('')} ends every session: the old access token is refused on another process (its ten-minute cache dropped over the bus), the old refresh token fails`, async () => {
      const tenant = await a.createTenant()
      const member = await memberSession(a, client, tenant.tenantId, 'tenant:developer')
      await warmB(member)

      const reset = await runCli(['reset-member-password', '--email', member.email, ...flags], a.env)
      assert.equal(reset.code, 0, reset.stderr)
      const out = JSON.parse(reset.stdout)
      assert.equal(out.totpReset, flags.length > 0)

      assert.equal(
        await statusOnBAfterInvalidation(member.accessToken),
        401,
        `process B never refused the old access token after reset-member-password ${flags.join(' ')}`,
      )
      assert.equal((await tenantStatus(a.baseUrl, member.accessToken)).status, 401)
      await assertRefreshRefused(member.refreshToken, tenant.tenantId, 'the old refresh token')
      assert.equal(out.sessionsEnded, true, 'the operator is told')

      // The printed password signs in; the membership is untouched.
      const { tokens } = await signIn(a.baseUrl, client, {
        email: member.email,
        password: out.password,
        resource: resourceOf(tenant.tenantId),
        tokenResource: true,
      })
      const me = await tenantStatus(b.baseUrl, tokens.access_token)
      assert.equal(me.status, 200, me.text)
      assert.equal(me.body.role, 'tenant:developer')
    })
  }

  test('a removal destroys the member’s grants for that tenant: re-invited and accepted, their old access and refresh tokens stay dead; another tenant’s session lives on', async () => {
    const tenant = await a.createTenant()
    const other = await a.createTenant()
    const owner = await memberSession(a, client, tenant.tenantId, 'tenant:owner')
    const member = await memberSession(a, client, tenant.tenantId, 'tenant:developer')
    // The same person in another tenant, signed in there in a session of its own.
    await a.api.services.team.addMember(
      { tenantId: other.tenantId, actor: 'test', requestId: null, clientIp: null },
      { accountId: member.accountId, role: 'tenant:viewer' },
    )
    const elsewhere = await signIn(a.baseUrl, client, {
      email: member.email,
      password: member.password,
      resource: resourceOf(other.tenantId),
      tokenResource: true,
    })
    await warmB(member)
    await warmB({ accessToken: elsewhere.tokens.access_token })

    const removed = await a.request('DELETE', `/api/v1/team/members/${member.accountId}`, {
      headers: owner.headers,
    })
    assert.equal(removed.status, 204, removed.text)
    assert.equal(await statusOnBAfterInvalidation(member.accessToken), 401)

    // Invited again, with another role, and accepted with their password.
    const { link } = await invite(owner, member.email, 'tenant:admin')
    const accepted = await accept(link, member.password)
    assert.equal(accepted.status, 200, accepted.html.slice(0, 500))
    const members = await a.request('GET', '/api/v1/team/members', { headers: owner.headers })
    assert.equal(
      members.body.data.find((m: { accountId: string }) => m.accountId === member.accountId)?.role,
      'tenant:admin',
    )

    // Tokens from before the removal do not come back with the new membership, on either process.
    assert.equal(
      await statusOnBAfterInvalidation(member.accessToken),
      401,
      'process B accepted a token issued before the removal',
    )
    assert.equal((await tenantStatus(a.baseUrl, member.accessToken)).status, 401)
    await assertRefreshRefused(
      member.refreshToken,
      tenant.tenantId,
      'the refresh token from before the removal',
    )

    // Only that tenant's grants went: the other tenant's session still works, and refreshes.
    const kept = await tenantStatus(b.baseUrl, elsewhere.tokens.access_token)
    assert.equal(kept.status, 200, kept.text)
    assert.equal(kept.body.role, 'tenant:viewer')
    const refreshed = await oidc.refreshTokenGrant(client.config, elsewhere.tokens.refresh_token!, {
      resource: resourceOf(other.tenantId),
    })
    assert.equal((await tenantStatus(a.baseUrl, refreshed.access_token)).status, 200)

    // A new sign-in gets the new role.
    const { tokens } = await signIn(a.baseUrl, client, {
      email: member.email,
      password: member.password,
      resource: resourceOf(tenant.tenantId),
      tokenResource: true,
    })
    const me = await tenantStatus(b.baseUrl, tokens.access_token)
    assert.equal(me.status, 200, me.text)
    assert.equal(me.body.role, 'tenant:admin')
  })

  test('the invitation e-mail names who invited (display name and address) and the tenant', async () => {
    const tenant = await a.createTenant()
    const tenantName = (await a.api.services.tenants.get(tenant.tenantId))!.name
    const ownerEmail = `ada-${Date.now()}@example.com`
    const ownerPassword = 'ada-password-long-enough'
    const ownerAccount = await a.api.services.accounts.createTeamAccount({
      email: ownerEmail,
      password: ownerPassword,
      displayName: 'Ada Lovelace',
    })
    await a.api.services.team.addMember(
      { tenantId: tenant.tenantId, actor: 'test', requestId: null, clientIp: null },
      { accountId: ownerAccount.id, role: 'tenant:owner' },
    )
    const { tokens } = await signIn(a.baseUrl, client, {
      email: ownerEmail,
      password: ownerPassword,
      resource: resourceOf(tenant.tenantId),
      tokenResource: true,
    })
    const owner = { headers: { authorization: `Bearer ${tokens.access_token}` } }

    const invitee = `grace-${Date.now()}@example.com`
    const { text, link } = await invite(owner, invitee, 'tenant:developer')
    assert.match(
      text,
      new RegExp(`Subject: Ada Lovelace \\(${ownerEmail}\\) invited you to join ${tenantName}`),
    )
    assert.ok(
      text.includes(`Ada Lovelace (${ownerEmail}) invited you to join ${tenantName} as developer.`),
      `the e-mail names the inviter and the tenant:\n${text}`,
    )
    assert.equal((await accept(link, 'grace-password-long-enough')).status, 200)
  })

  test('the accept-invitation page words a too-short password once, and the invitee can then join', async () => {
    const tenant = await a.createTenant()
    const owner = await memberSession(a, client, tenant.tenantId, 'tenant:owner')
    const invitee = `hopper-${Date.now()}@example.com`
    const { link } = await invite(owner, invitee, 'tenant:developer')

    const weak = await accept(link, 'short')
    assert.equal(weak.status, 400)
    assert.ok(weak.html.includes('The password needs at least 12 characters.'), weak.html.slice(0, 800))
    assert.ok(!/must have must have/.test(weak.html), 'the words are not doubled')

    const done = await accept(link, 'grace-password-long-enough')
    assert.equal(done.status, 200, done.html.slice(0, 500))
    const grace = await a.api.services.accounts.findTeamAccount(invitee)
    assert.equal(await a.api.services.team.roleOf(tenant.tenantId, grace!.id), 'tenant:developer')
  })

  test('a member resets their own password from the console’s sign-in page: the same answer for any address, an e-mailed one-time link, and every other session ends', async () => {
    const tenant = await a.createTenant()
    const member = await memberSession(a, client, tenant.tenantId, 'tenant:viewer')
    await warmB(member)

    // The console's sign-in page links to the reset.
    const jar = new CookieJar()
    const authorize = oidc.buildAuthorizationUrl(client.config, {
      redirect_uri: REDIRECT,
      scope: 'openid email profile api',
      code_challenge: await oidc.calculatePKCECodeChallenge(oidc.randomPKCECodeVerifier()),
      code_challenge_method: 'S256',
      state: 's',
      resource: resourceOf(tenant.tenantId),
    })
    const signInPage = (await follow(jar, a.baseUrl, authorize.toString(), REDIRECT)).page!
    const forgotHref = /href="(\/forgot-password\?[^"]+)"/.exec(signInPage.html)?.[1]?.replace(/&amp;/g, '&')
    assert.ok(forgotHref, 'the console’s sign-in page links to the reset')
    assert.equal(new URL(forgotHref, a.baseUrl).searchParams.get('realm'), 'team')

    const seen = mailsTo(member.email).length
    const answers: string[] = []
    for (const email of [member.email, 'nobody-on-the-team@example.com']) {
      const form = await page(jar, new URL(forgotHref, a.baseUrl))
      assert.equal(form.status, 200, form.html.slice(0, 500))
      const fields: Record<string, string> = { csrf: csrfOf(form.html), email }
      for (const name of ['realm', 'return']) {
        const value = new RegExp(`name="${name}" value="([^"]+)"`).exec(form.html)?.[1]
        if (value) fields[name] = value.replace(/&amp;/g, '&')
      }
      const sent = await page(jar, new URL(formActionOf(form.html), a.baseUrl), { form: fields })
      assert.equal(sent.status, 200)
      answers.push(sent.html)
    }
    assert.equal(answers[0], answers[1], 'the page reads the same for a member and an unknown address')

    const link = await linkMailedTo(smtp, member.email, seen)
    assert.equal(link.pathname, '/reset-password')
    assert.equal(link.searchParams.get('userId'), member.accountId)

    // The team's policy applies on the link's page; a refused password leaves the link usable.
    const weak = await choosePassword(link, 'short')
    assert.equal(weak.status, 400)
    assert.match(weak.html, /at least 12 characters/)
    const newPassword = 'a brand new member password'
    const saved = await choosePassword(link, newPassword)
    assert.equal(saved.status, 200, saved.html.slice(0, 500))

    // Every session of the account ended, in every process.
    assert.equal(
      await statusOnBAfterInvalidation(member.accessToken),
      401,
      'process B never refused the old access token after the reset',
    )
    await assertRefreshRefused(
      member.refreshToken,
      tenant.tenantId,
      'the refresh token from before the reset',
    )
    // The link worked once.
    const again = await page(new CookieJar(), link)
    assert.equal(again.status, 400)
    assert.match(again.html, /invalid_reset_token/)
    // The old password is refused, the new one signs in with the membership as it was.
    await assert.rejects(
      signIn(a.baseUrl, client, { email: member.email, password: member.password }),
      /not right/,
    )
    const { tokens } = await signIn(a.baseUrl, client, {
      email: member.email,
      password: newPassword,
      resource: resourceOf(tenant.tenantId),
      tokenResource: true,
    })
    assert.equal((await tenantStatus(a.baseUrl, tokens.access_token)).body.role, 'tenant:viewer')
  })

  test('members’ reset requests have the end-users’ cap: five links an account an hour, then nothing', async () => {
    const tenant = await a.createTenant()
    const member = await memberSession(a, client, tenant.tenantId, 'tenant:viewer')
    const links = a.api.services.identity.links
    for (let i = 0; i < RESET_REQUESTS.perWindow + 2; i++)
      await links.requestReset({ realm: 'team', email: member.email, applicationId: null })
    const [row] = await a.sql<{ count: number }[]>`
      SELECT count(*)::int AS count FROM account_links WHERE account_id = ${member.accountId} AND kind = 'reset'`
    assert.equal(row!.count, RESET_REQUESTS.perWindow)
  })
})
