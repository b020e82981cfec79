import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import * as oidc from 'openid-client'
import { applicationClient } from '../helpers/endusers.ts'
import {
  buildResponse,
  makeCertificate,
  parseAuthnRequest,
  type TestCertificate,
} from '../helpers/saml-idp.ts'
import { type AuditView, type HttpResult, startTestService, type TestService } from '../helpers/service.ts'
import {
  type ConsoleClient,
  CookieJar,
  consoleClient,
  csrfOf,
  follow,
  formActionOf,
  type MemberSession,
  memberSession,
  page,
  refreshTargetOf,
} from '../helpers/sign-in.ts'

/**
 * Issue 30, defect 4: a federated first sign-in must not take over an end-user who has a password
 * or a factor. Registering an IdP is an owner's or admin's session (a developer or an API key
 * with applications:write could otherwise register their own certificate and assert anyone's
 * address), and without the registration's trust flag (set by an owner or admin, audited) an
 * address that belongs to such an end-user is refused, with nothing linked or changed.
 */

const APP_REDIRECT = 'http://127.0.0.1:9/app-callback'
const CONSOLE_REDIRECT = 'http://127.0.0.1:9/console'
const IDP_SSO = 'https://idp.attacker.example/saml/sso'
const PATH = '/api/v1/saml-identity-providers'

describe('SAML federation never links an address to an account that has its own credentials unless trusted', () => {
  let service: TestService
  let tenant: { tenantId: string; key: string }
  let app: { id: string; clientId: string }
  let client: ConsoleClient
  let owner: MemberSession
  let admin: MemberSession
  let developer: MemberSession
  /** A key as a developer's automation would hold it. */
  let appKey: string
  let idpKey: TestCertificate
  let idp: { id: string; entityId: string; serviceProvider: { acsUrl: string } }
  let victim: { id: string; email: string; password: string }
  /** An end-user with no password, only a verified phone (the SMS factor). */
  let phoneVictim: { id: string; email: string }

  const body = (entityId: string) => ({
    name: 'Acme SSO',
    entityId,
    ssoUrl: IDP_SSO,
    certificate: idpKey.pem,
    attributeMapping: { email: 'email' },
  })

  /** An end-user made as a tenant does (API), then given a credential through the identity service. */
  async function endUser(email: string): Promise<string> {
    const created = await service.request('POST', '/api/v1/endusers/create-without-password', {
      key: tenant.key,
      body: { email, applicationId: app.id },
    })
    assert.equal(created.status, 201, created.text)
    return created.body.id as string
  }

  before(async () => {
    service = await startTestService({ KMS_CONSOLE_REDIRECT_URIS: CONSOLE_REDIRECT })
    tenant = await service.createTenant()
    const created = await service.request('POST', '/api/v1/applications', {
      key: tenant.key,
      body: { name: 'Orders', applicationType: 'spa', redirectUris: [APP_REDIRECT] },
    })
    assert.equal(created.status, 201, created.text)
    app = created.body
    client = await applicationClient(service.baseUrl, app.clientId, APP_REDIRECT)
    const console = await consoleClient(service.baseUrl, CONSOLE_REDIRECT)
    owner = await memberSession(service, console, tenant.tenantId, 'tenant:owner')
    admin = await memberSession(service, console, tenant.tenantId, 'tenant:admin')
    developer = await memberSession(service, console, tenant.tenantId, 'tenant:developer')
    const key = await service.request('POST', '/api/v1/api-keys', {
      key: tenant.key,
      body: { name: 'deploy bot', scopes: ['applications:read', 'applications:write'] },
    })
    assert.equal(key.status, 201, key.text)
    appKey = key.body.key
    idpKey = await makeCertificate()

    victim = {
      id: '',
      email: `victim-${Date.now()}@acme.example`,
      password: 'the victim’s own password',
    }
    victim.id = await endUser(victim.email)
    await service.api.services.accounts.setPassword(victim.id, victim.password)
    phoneVictim = { id: '', email: `phone-${Date.now()}@acme.example` }
    phoneVictim.id = await endUser(phoneVictim.email)
    await service.api.services.accounts.setVerifiedPhone(phoneVictim.id, '+14155550100')
  })
  after(async () => {
    await service?.stop()
  })

  const audited = async (action: string): Promise<AuditView[]> => {
    const answer = await service.request('GET', `/api/v1/audit?action=${action}&limit=100`, {
      key: tenant.key,
    })
    assert.equal(answer.status, 200, answer.text)
    return answer.body.data
  }

  const assertForbidden = (answer: HttpResult, who: string) => {
    assert.equal(answer.status, 403, `${who}: ${answer.text}`)
    assert.equal(answer.body.error, 'forbidden', who)
    assert.deepEqual(answer.body.allowedRoles, ['tenant:owner', 'tenant:admin'], who)
  }

  test('a developer session or an API key (applications:write, or every scope) cannot register, change or remove an IdP', async () => {
    const callers: Array<[string, { key?: string; headers?: Record<string, string> }]> = [
      ['developer session', { headers: developer.headers }],
      ['applications:write key', { key: appKey }],
      ['full-scope key', { key: tenant.key }],
    ]
    for (const [who, credential] of callers) {
      const answer = await service.request('POST', PATH, {
        ...credential,
        body: body(`https://idp-${crypto.randomUUID()}.example/saml`),
      })
      assertForbidden(answer, who)
    }
    const none = await service.request('GET', PATH, { headers: owner.headers })
    assert.equal(none.status, 200, none.text)
    assert.equal(none.body.total, 0, 'nothing was registered')

    const registered = await service.request('POST', PATH, {
      headers: owner.headers,
      body: body('https://idp.attacker.example/saml'),
    })
    assert.equal(registered.status, 201, registered.text)
    assert.equal(registered.body.linkByVerifiedEmail, false, 'not trusted unless asked')
    idp = registered.body

    for (const [who, credential] of callers) {
      for (const patch of [{ linkByVerifiedEmail: true }, { certificate: (await makeCertificate()).pem }])
        assertForbidden(
          await service.request('PATCH', `${PATH}/${idp.id}`, { ...credential, body: patch }),
          `${who} PATCH ${Object.keys(patch)[0]}`,
        )
      assertForbidden(await service.request('DELETE', `${PATH}/${idp.id}`, credential), `${who} DELETE`)
    }
    // Reading stays open to whoever reads applications: the SP values are what a developer needs.
    for (const [who, credential] of callers) {
      const read = await service.request('GET', `${PATH}/${idp.id}`, credential)
      assert.equal(read.status, 200, `${who}: ${read.text}`)
      assert.equal(read.body.linkByVerifiedEmail, false, who)
      assert.equal(read.body.certificateSha256, registered.body.certificateSha256, who)
    }
    const denied = (await audited('authorization.denied')).filter(
      (r) => r.resource === `POST ${PATH}` || r.resource === `PATCH ${PATH}/:id`,
    )
    assert.ok(
      denied.some((r) => r.actor === `member:${developer.accountId}`),
      'the developer’s attempts are audited',
    )
  })

  interface Started {
    uid: string
    jar: CookieJar
    verifier: string
    state: string
    request: ReturnType<typeof parseAuthnRequest>
  }

  /** The end-user starts at the application and chooses the IdP; the AuthnRequest the IdP gets. */
  async function start(): Promise<Started> {
    const jar = new CookieJar()
    const verifier = oidc.randomPKCECodeVerifier()
    const state = oidc.randomState()
    const authorize = oidc.buildAuthorizationUrl(client.config, {
      redirect_uri: APP_REDIRECT,
      scope: 'openid email',
      code_challenge: await oidc.calculatePKCECodeChallenge(verifier),
      code_challenge_method: 'S256',
      state,
    })
    const reached = await follow(jar, service.baseUrl, authorize.toString(), APP_REDIRECT)
    const button = /href="(\/sign-in\/[^"]+\/federated\/[^"]+)">Sign in with Acme SSO</.exec(
      reached.page!.html,
    )
    assert.ok(button, 'the sign-in page offers the IdP')
    const toIdp = await page(jar, new URL(button[1]!, service.baseUrl))
    assert.equal(toIdp.status, 303)
    const uid = /\/sign-in\/([^/]+)\//.exec(button[1]!)![1]!
    return { uid, jar, verifier, state, request: parseAuthnRequest(toIdp.location!) }
  }

  /** The IdP (whoever holds its key) asserts `email` for `nameId`, posted cross-site to the ACS. */
  const assertAddress = (started: Started, nameId: string, email: string) =>
    page(new CookieJar(), idp.serviceProvider.acsUrl, {
      form: {
        SAMLResponse: buildResponse(
          { request: started.request, issuer: idp.entityId, nameId, attributes: { email } },
          idpKey,
        ),
      },
    })

  /** From an accepted response's page to the application's callback, and the tokens' subject. */
  async function subjectOf(started: Started, html: string): Promise<string> {
    const next = refreshTargetOf(html)
    assert.ok(next, html.slice(0, 500))
    const back = await follow(
      started.jar,
      service.baseUrl,
      new URL(next, service.baseUrl).toString(),
      APP_REDIRECT,
    )
    assert.ok(back.callback, back.page?.html.slice(0, 500))
    const tokens = await oidc.authorizationCodeGrant(client.config, back.callback, {
      pkceCodeVerifier: started.verifier,
      expectedState: started.state,
    })
    return tokens.claims()!.sub
  }

  const linksOf = async (accountId: string) =>
    (
      await service.sql<{ n: number }[]>`
        SELECT count(*)::int AS n FROM federated_identities WHERE account_id = ${accountId}`
    )[0]!.n
  const accountRow = async (accountId: string) =>
    (await service.sql`SELECT * FROM accounts WHERE id = ${accountId}`)[0]
  const endUserRow = async (accountId: string) =>
    (await service.sql`SELECT * FROM endusers WHERE id = ${accountId}`)[0]

  test('without the trust flag, a signed response asserting the address of an end-user with a password (or a factor) is refused; nothing is linked or changed', async () => {
    const before = {
      account: await accountRow(victim.id),
      record: await endUserRow(victim.id),
      phoneAccount: await accountRow(phoneVictim.id),
    }
    const started = await start()
    const refused = await assertAddress(started, 'attacker-subject-1', victim.email.toUpperCase())
    assert.equal(refused.status, 400, refused.html.slice(0, 500))
    assert.match(refused.html, /already exists here/)
    assert.match(refused.html, /Sign in with your password/)
    // The browser cannot complete the sign-in from the refused response either.
    const forced = await page(
      started.jar,
      new URL(`/sign-in/${started.uid}/federated-return/${started.request.id}`, service.baseUrl),
    )
    assert.equal(forced.status, 400)

    const phoneStarted = await start()
    const phoneRefused = await assertAddress(phoneStarted, 'attacker-subject-2', phoneVictim.email)
    assert.equal(phoneRefused.status, 400, phoneRefused.html.slice(0, 500))
    assert.match(phoneRefused.html, /already exists here/)

    // No link, and the accounts and records are exactly as they were.
    assert.equal(await linksOf(victim.id), 0)
    assert.equal(await linksOf(phoneVictim.id), 0)
    assert.deepEqual(await accountRow(victim.id), before.account)
    assert.deepEqual(await endUserRow(victim.id), before.record)
    assert.deepEqual(await accountRow(phoneVictim.id), before.phoneAccount)
    const signIns = await audited('federation.saml.sign_in')
    assert.ok(
      !signIns.some((r) => r.outcome === 'success' && r.resource === `enduser:${victim.id}`),
      'no federated sign-in of the victim',
    )
    const refusals = signIns.filter(
      (r) => r.outcome === 'denied' && r.details?.['reason'] === 'account_has_credentials',
    )
    assert.deepEqual(refusals.map((r) => r.details?.['enduser']).sort(), [victim.id, phoneVictim.id].sort())
    assert.ok(refusals.every((r) => r.resource === `saml_idp:${idp.id}`))

    // The page leads back to the same sign-in, where the person's own password works.
    const backLink = /<a class="link" href="([^"]+)"/.exec(refused.html)?.[1]
    assert.equal(backLink, `/sign-in/${started.uid}`)
    const form = await page(started.jar, new URL(backLink!, service.baseUrl))
    assert.equal(form.status, 200)
    const signedIn = await page(started.jar, new URL(formActionOf(form.html), service.baseUrl), {
      form: { csrf: csrfOf(form.html), email: victim.email, password: victim.password },
    })
    assert.equal(await subjectOf(started, signedIn.html), victim.id)

    // An address nobody has yet still becomes a new federated end-user, as before.
    const fresh = await start()
    const email = `newcomer-${Date.now()}@acme.example`
    const accepted = await assertAddress(fresh, 'newcomer-subject', email)
    assert.equal(accepted.status, 200, accepted.html.slice(0, 500))
    const sub = await subjectOf(fresh, accepted.html)
    const user = await service.request('GET', `/api/v1/endusers/${sub}`, { key: tenant.key })
    assert.equal(user.body.email, email)
    assert.equal(user.body.source, 'federation')
  })

  test('once an owner marks the IdP as trusted to link by address (audited), the same assertion links to the existing end-user', async () => {
    const trusted = await service.request('PATCH', `${PATH}/${idp.id}`, {
      headers: owner.headers,
      body: { linkByVerifiedEmail: true },
    })
    assert.equal(trusted.status, 200, trusted.text)
    assert.equal(trusted.body.linkByVerifiedEmail, true)
    const [record] = (await audited('federation.saml_idp.link_trust')).filter(
      (r) => r.resource === `saml_idp:${idp.id}`,
    )
    assert.ok(record, 'the change of trust is audited')
    assert.equal(record.actor, `member:${owner.accountId}`)
    assert.equal(record.outcome, 'success')
    assert.equal(record.details?.['linkByVerifiedEmail'], true)
    // Another change by an admin that does not name the flag keeps it.
    const renamed = await service.request('PATCH', `${PATH}/${idp.id}`, {
      headers: admin.headers,
      body: { name: 'Acme SSO' },
    })
    assert.equal(renamed.status, 200, renamed.text)
    assert.equal(renamed.body.linkByVerifiedEmail, true)
    assert.equal(
      (await audited('federation.saml_idp.link_trust')).filter((r) => r.resource === `saml_idp:${idp.id}`)
        .length,
      1,
    )

    const started = await start()
    const accepted = await assertAddress(started, 'attacker-subject-1', victim.email)
    assert.equal(accepted.status, 200, accepted.html.slice(0, 500))
    assert.equal(await subjectOf(started, accepted.html), victim.id)
    assert.equal(await linksOf(victim.id), 1)
    const linked = (await audited('federation.saml.sign_in')).find(
      (r) => r.outcome === 'success' && r.resource === `enduser:${victim.id}`,
    )
    assert.equal(linked?.details?.['linked'], 'existing_by_trust')
  })
})
