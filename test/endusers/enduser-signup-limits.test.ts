import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import * as oidc from 'openid-client'
import { applicationClient, endUserWithPassword } from '../helpers/endusers.ts'
import { type AuditView, startTestService, type TestService, waitFor } from '../helpers/service.ts'
import {
  CookieJar,
  csrfOf,
  follow,
  formActionOf,
  type PageResponse,
  page,
  signIn,
} from '../helpers/sign-in.ts'
import { startSmtp, type TestSmtp, textOf } from '../helpers/smtp.ts'

/**
 * Issue 30, defect 7: an application's sign-up and forgot-password pages are bounded per client
 * address (KMS_SIGNUP_RATE_PER_HOUR, one count for both, a 429 page past it) and per e-mail
 * address (sign-up: 5 an hour, `+tag` variants counted as one address; forgot password: 5 reset
 * links per account an hour), and sign-up creates no end-user (nothing billing counts) before the
 * e-mailed link is used.
 */

const APP_REDIRECT = 'http://127.0.0.1:9/app-callback'
const SIGN_UP_LINK = /(http:\/\/[^\s"<>]+\/confirm-sign-up\?[^\s"<>]+)/
const PASSWORD = 'a password of my very own'

interface Harness {
  service: TestService
  smtp: TestSmtp
}

async function start(perHour: number): Promise<Harness> {
  const smtp = await startSmtp('accept')
  const service = await startTestService(
    {
      KMS_SMTP_URL: smtp.url,
      KMS_SMTP_ATTEMPTS: '1',
      KMS_SMTP_TIMEOUT_MS: '2000',
      KMS_JOB_SWEEP_MS: '200',
      KMS_SIGNUP_RATE_PER_HOUR: String(perHour),
    },
    { jobs: true },
  )
  return { service, smtp }
}

async function stop(harness: Harness | undefined) {
  await harness?.service.stop()
  await harness?.smtp.stop()
}

/** A tenant with an application that allows sign-up. */
async function openApplication(service: TestService) {
  const tenant = await service.createTenant()
  const created = await service.request('POST', '/api/v1/applications', {
    key: tenant.key,
    body: { name: 'Open', applicationType: 'spa', redirectUris: [APP_REDIRECT], signUpEnabled: true },
  })
  assert.equal(created.status, 201, created.text)
  return { tenant, app: created.body as { id: string; clientId: string } }
}

/** The application's sign-in page, reached as a browser does, with its cookies. */
async function signInPage(service: TestService, clientId: string) {
  const client = await applicationClient(service.baseUrl, clientId, APP_REDIRECT)
  const url = oidc.buildAuthorizationUrl(client.config, {
    redirect_uri: APP_REDIRECT,
    scope: 'openid',
    code_challenge: await oidc.calculatePKCECodeChallenge(oidc.randomPKCECodeVerifier()),
    code_challenge_method: 'S256',
    state: 's',
  })
  const jar = new CookieJar()
  const shown = (await follow(jar, service.baseUrl, url.toString(), APP_REDIRECT)).page
  assert.ok(shown, 'the sign-in page')
  return { jar, client, html: shown.html }
}

/** The sign-up form; its action and CSRF value serve every ask of the burst. */
async function signUpForm(service: TestService, clientId: string) {
  const { jar, html } = await signInPage(service, clientId)
  const href = /href="(\/sign-in\/[^"]+\/sign-up)"/.exec(html)?.[1]
  assert.ok(href, 'the sign-in page offers sign-up')
  const form = await page(jar, new URL(href, service.baseUrl))
  assert.equal(form.status, 200)
  const action = new URL(formActionOf(form.html), service.baseUrl)
  const csrf = csrfOf(form.html)
  return (email: string) => page(jar, action, { form: { csrf, email } })
}

/** The forgot-password form the sign-in page links to. */
async function forgotForm(service: TestService, clientId: string, applicationId: string) {
  const { jar, html } = await signInPage(service, clientId)
  const href = /href="(\/forgot-password\?[^"]+)"/.exec(html)?.[1]?.replace(/&amp;/g, '&')
  assert.ok(href, 'the sign-in page links to the reset')
  const form = await page(jar, new URL(href, service.baseUrl))
  assert.equal(form.status, 200)
  const action = new URL(formActionOf(form.html), service.baseUrl)
  const csrf = csrfOf(form.html)
  return (email: string) => page(jar, action, { form: { csrf, applicationId, email } })
}

async function auditOf(service: TestService, key: string, action: string): Promise<AuditView[]> {
  const result = await service.request(
    'GET',
    `/api/v1/audit?action=${encodeURIComponent(action)}&limit=500`,
    {
      key,
    },
  )
  assert.equal(result.status, 200, result.text)
  return result.body.data as AuditView[]
}

const count = async (query: Promise<{ n: number }[]>) => (await query)[0]!.n

const endUsersOf = (service: TestService, tenantId: string) =>
  count(service.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM endusers WHERE tenant_id = ${tenantId}`)

const requestsOf = (service: TestService, tenantId: string) =>
  count(
    service.sql<{ n: number }[]>`
      SELECT count(*)::int AS n FROM enduser_signup_requests WHERE tenant_id = ${tenantId}`,
  )

const mailsTo = (smtp: TestSmtp, match: RegExp) =>
  smtp.messages.filter((m) => m.to.some((to) => match.test(to)))

function signUpLinkIn(text: string): URL {
  const match = SIGN_UP_LINK.exec(text)
  assert.ok(match, `a sign-up link in the e-mail:\n${text}`)
  return new URL(match[1]!.replace(/&amp;/g, '&'))
}

/** Opens a sign-up link and chooses the password, as a person would; the last page. */
async function useSignUpLink(link: URL, password = PASSWORD): Promise<PageResponse> {
  const jar = new CookieJar()
  const shown = await page(jar, link)
  if (shown.status !== 200) return shown
  const token = /name="token" value="([^"]+)"/.exec(shown.html)?.[1]
  assert.ok(token, 'the form carries the token')
  return page(jar, new URL(formActionOf(shown.html), link), {
    form: { csrf: csrfOf(shown.html), token, password, repeat: password },
  })
}

describe('sign-up and forgot password are bounded per client address (KMS_SIGNUP_RATE_PER_HOUR)', () => {
  const LIMIT = 6
  let harness: Harness | undefined

  before(async () => {
    harness = await start(LIMIT)
  })
  after(() => stop(harness))

  test('40 sign-ups from one client address: the limit of them ask, the rest get a 429 page; no end-user exists until a link is used, one after, and a second use makes none', async () => {
    const { service, smtp } = harness!
    const { tenant, app } = await openApplication(service)
    const ask = await signUpForm(service, app.clientId)
    const answers = await Promise.all(
      Array.from({ length: 40 }, (_, i) => ask(`person-${i}@burst.example.com`)),
    )
    const ok = answers.filter((a) => a.status === 200)
    const refused = answers.filter((a) => a.status === 429)
    assert.equal(ok.length, LIMIT, 'the limit of asks are taken')
    assert.equal(refused.length, 40 - LIMIT, 'every other ask is refused')
    for (const answer of refused) {
      assert.match(answer.headers.get('content-type') ?? '', /^text\/html/)
      assert.match(answer.html, /role="alert">Too many sign-ups were asked for recently/)
      assert.ok(Number(answer.headers.get('retry-after')) > 0, 'Retry-After says when')
    }

    // Every ask taken is audited once its work is done: then nothing more is on its way.
    await waitFor(
      async () => (await auditOf(service, tenant.key, 'endusers.sign_up.request')).length === LIMIT,
      'the asks taken, audited',
    )
    assert.equal(await requestsOf(service, tenant.tenantId), LIMIT, 'one pending request per ask taken')
    assert.equal(await endUsersOf(service, tenant.tenantId), 0, 'no end-user before a link is used')
    assert.equal(await service.api.services.endusers.count(tenant.tenantId), 0, 'billing counts none')
    const burst = /@burst\.example\.com$/
    await waitFor(() => mailsTo(smtp, burst).length === LIMIT, 'one e-mail per ask taken')

    const first = mailsTo(smtp, burst)[0]!
    const link = signUpLinkIn(textOf(first))
    const done = await useSignUpLink(link)
    assert.equal(done.status, 200, done.html.slice(0, 500))
    assert.match(done.html, /Your password is saved/)
    assert.equal(await endUsersOf(service, tenant.tenantId), 1, 'the link made the end-user')
    assert.equal(await service.api.services.endusers.count(tenant.tenantId), 1)
    const list = await service.request('GET', `/api/v1/endusers?applicationId=${app.id}`, { key: tenant.key })
    assert.equal(list.body.total, 1)
    const [user] = list.body.data
    assert.equal(user.email, first.to[0])
    assert.equal(user.source, 'sign_up')
    assert.equal(user.hasPassword, true)

    // The link again: used up, nothing made twice (the page, and its form submitted once more).
    const again = await useSignUpLink(link)
    assert.equal(again.status, 400)
    assert.match(again.html, /This link is not valid/)
    assert.equal(await endUsersOf(service, tenant.tenantId), 1)

    // The password chosen on the link's page signs in.
    const client = await applicationClient(service.baseUrl, app.clientId, APP_REDIRECT)
    const { tokens } = await signIn(service.baseUrl, client, {
      email: user.email,
      password: PASSWORD,
      scope: 'openid',
    })
    assert.ok(tokens.id_token)
  })

  test('forgot password counts with sign-up from the same client address: past the limit, a 429 HTML page', async () => {
    const { service } = harness!
    const { app } = await openApplication(service)
    const forgot = await forgotForm(service, app.clientId, app.id)
    const statuses: number[] = []
    let refused: PageResponse | undefined
    for (let i = 0; i <= LIMIT && !refused; i++) {
      const answer = await forgot(`someone-${i}@example.com`)
      statuses.push(answer.status)
      if (answer.status === 429) refused = answer
    }
    assert.ok(refused, `a 429 within ${LIMIT + 1} asks (got ${statuses.join(', ')})`)
    assert.ok(statuses.filter((s) => s === 200).length <= LIMIT)
    assert.match(refused.headers.get('content-type') ?? '', /^text\/html/)
    assert.match(refused.html, /role="alert">Too many e-mails were asked for from your network recently/)
    assert.ok(Number(refused.headers.get('retry-after')) > 0)
    // Reading the forms is not counted.
    const { jar } = await signInPage(service, app.clientId)
    const form = await page(jar, new URL(`/forgot-password?applicationId=${app.id}`, service.baseUrl))
    assert.equal(form.status, 200)
  })
})

describe('sign-up and forgot password are bounded per e-mail address', () => {
  let harness: Harness | undefined

  before(async () => {
    // The per-client-address bound out of the way: every ask here comes from 127.0.0.1.
    harness = await start(100_000)
  })
  after(() => stop(harness))

  test('victim+1@…, victim+2@…, Victim@… count as one address: 5 sign-up e-mails an hour, and the page reads the same for every ask', async () => {
    const { service, smtp } = harness!
    const { tenant, app } = await openApplication(service)
    const ask = await signUpForm(service, app.clientId)
    const addresses = [
      ...Array.from({ length: 10 }, (_, i) => `victim+${i + 1}@mailbox.example.com`),
      'Victim@Mailbox.example.com',
      'victim@mailbox.example.com',
    ]
    const answers = await Promise.all(addresses.map((email) => ask(email)))
    assert.deepEqual(
      answers.map((a) => a.status),
      addresses.map(() => 200),
    )
    assert.equal(new Set(answers.map((a) => a.html)).size, 1, 'the page says the same to every ask')

    await waitFor(
      async () =>
        (await auditOf(service, tenant.key, 'endusers.sign_up.request')).length === addresses.length,
      'every ask, audited',
    )
    const audited = await auditOf(service, tenant.key, 'endusers.sign_up.request')
    assert.equal(audited.filter((r) => r.outcome === 'success').length, 5)
    assert.equal(audited.filter((r) => r.outcome === 'denied').length, addresses.length - 5)
    assert.ok(
      audited.every((r) => !JSON.stringify(r).includes('mailbox.example.com')),
      'no address in the log',
    )
    assert.equal(await requestsOf(service, tenant.tenantId), 5)
    const mailbox = /^victim(\+\d+)?@mailbox\.example\.com$/i
    await waitFor(() => mailsTo(smtp, mailbox).length === 5, 'five e-mails to the mailbox')
    assert.equal(await endUsersOf(service, tenant.tenantId), 0)

    // Another address is not held back by the victim's.
    assert.equal((await ask('bystander@mailbox.example.com')).status, 200)
    await waitFor(() => mailsTo(smtp, /^bystander@/).length === 1, 'the bystander’s e-mail')
  })

  test('two links of one address: the first makes the end-user, the second says the address has one and makes nothing', async () => {
    const { service, smtp } = harness!
    const { tenant, app } = await openApplication(service)
    const ask = await signUpForm(service, app.clientId)
    const email = `twice-${Date.now()}@example.com`
    for (let i = 0; i < 2; i++) assert.equal((await ask(email)).status, 200)
    await waitFor(() => mailsTo(smtp, new RegExp(`^${email}$`)).length === 2, 'two e-mails')
    const [one, two] = mailsTo(smtp, new RegExp(`^${email}$`)).map((m) => signUpLinkIn(textOf(m))) as [
      URL,
      URL,
    ]
    assert.equal((await useSignUpLink(one)).status, 200)
    const second = await useSignUpLink(two)
    assert.equal(second.status, 409)
    assert.match(second.html, /This address has an account already/)
    assert.equal(await endUsersOf(service, tenant.tenantId), 1)
    assert.equal(await service.api.services.endusers.count(tenant.tenantId), 1)
  })

  test('a burst of forgot-password asks for one victim: 5 reset links an hour, the page the same for all', async () => {
    const { service, smtp } = harness!
    const { tenant, app } = await openApplication(service)
    const user = await endUserWithPassword(service, smtp, tenant.key, app.id)
    const forgot = await forgotForm(service, app.clientId, app.id)
    const answers = await Promise.all(Array.from({ length: 12 }, () => forgot(user.email)))
    assert.deepEqual(
      answers.map((a) => a.status),
      answers.map(() => 200),
    )
    assert.equal(new Set(answers.map((a) => a.html)).size, 1, 'the page says the same to every ask')

    // Every ask is audited once its work is done (refused ones as denied): then nothing more comes.
    await waitFor(
      async () => (await auditOf(service, tenant.key, 'endusers.password_reset.request')).length === 12,
      'every ask, audited',
    )
    const audited = await auditOf(service, tenant.key, 'endusers.password_reset.request')
    assert.equal(audited.filter((r) => r.outcome === 'success').length, 5)
    assert.equal(audited.filter((r) => r.outcome === 'denied').length, 7)
    const links = await count(
      service.sql<{ n: number }[]>`
        SELECT count(*)::int AS n FROM account_links WHERE account_id = ${user.id} AND kind = 'reset'`,
    )
    assert.equal(links, 5, 'five reset links, so at most five e-mails')
    const resets = () =>
      mailsTo(smtp, new RegExp(`^${user.email}$`)).filter((m) => /Reset your password/.test(m.raw))
    await waitFor(() => resets().length >= 1, 'a reset e-mail')
    assert.ok(resets().length <= 5)
  })
})
