import assert from 'node:assert/strict'
import { X509Certificate } from 'node:crypto'
import { after, before, describe, test } from 'node:test'
import { DOMParser } from '@xmldom/xmldom'
import * as oidc from 'openid-client'
import { applicationClient } from '../helpers/endusers.ts'
import { verifyAgainstJwks } from '../helpers/jwks.ts'
import {
  buildResponse,
  makeCertificate,
  parseAuthnRequest,
  type ReceivedAuthnRequest,
  type ResponseOptions,
  type TestCertificate,
} from '../helpers/saml-idp.ts'
import { type AuditView, startTestService, type TestService } from '../helpers/service.ts'
import {
  type ConsoleClient,
  CookieJar,
  consoleClient,
  follow,
  type MemberSession,
  memberSession,
  type PageResponse,
  page,
  refreshTargetOf,
} from '../helpers/sign-in.ts'

const APP_REDIRECT = 'http://127.0.0.1:9/app-callback'
const CONSOLE_REDIRECT = 'http://127.0.0.1:9/console'
const IDP_ENTITY = 'https://idp.acme.example/saml'
const IDP_SSO = 'https://idp.acme.example/saml/sso'
const DAY = 24 * 3600_000

interface Started {
  uid: string
  jar: CookieJar
  verifier: string
  state: string
  request: ReceivedAuthnRequest
}

describe('SAML federation: certificate checks, SP metadata, sign-in through an IdP and its refusals', () => {
  let service: TestService
  let tenant: { tenantId: string; key: string }
  let app: { id: string; clientId: string }
  let client: ConsoleClient
  /** Registering and changing IdPs is an owner's or admin's (a session; API keys are refused). */
  let owner: MemberSession
  let idpKey: TestCertificate
  let idp: { id: string; serviceProvider: { entityId: string; acsUrl: string; metadataUrl: string } }

  before(async () => {
    service = await startTestService({ KMS_CONSOLE_REDIRECT_URIS: CONSOLE_REDIRECT })
    tenant = await service.createTenant()
    owner = await memberSession(
      service,
      await consoleClient(service.baseUrl, CONSOLE_REDIRECT),
      tenant.tenantId,
      'tenant:owner',
    )
    const created = await service.request('POST', '/api/v1/applications', {
      key: tenant.key,
      body: { name: 'Orders', applicationType: 'spa', redirectUris: [APP_REDIRECT] },
    })
    assert.equal(created.status, 201, created.text)
    app = created.body
    client = await applicationClient(service.baseUrl, app.clientId, APP_REDIRECT)
    idpKey = await makeCertificate()
    const registered = await service.request('POST', '/api/v1/saml-identity-providers', {
      headers: owner.headers,
      body: {
        name: 'Acme Corp',
        entityId: IDP_ENTITY,
        ssoUrl: IDP_SSO,
        certificate: idpKey.pem,
        attributeMapping: { email: 'email', name: 'displayName' },
      },
    })
    assert.equal(registered.status, 201, registered.text)
    idp = registered.body
  })
  after(async () => {
    await service.stop()
  })

  const register = (certificate: string, entityId = `https://idp-${crypto.randomUUID()}.example/saml`) =>
    service.request('POST', '/api/v1/saml-identity-providers', {
      headers: owner.headers,
      body: { name: 'Another', entityId, ssoUrl: IDP_SSO, certificate },
    })

  test('certificates: PEM and bare Base64 accepted; garbage, expired, not yet valid refused with their codes', async () => {
    const good = await makeCertificate()
    const pem = await register(good.pem)
    assert.equal(pem.status, 201, pem.text)
    // What is stored is that certificate (compared by node:crypto's own reading of the test's PEM).
    assert.equal(pem.body.certificateSha256, new X509Certificate(good.pem).fingerprint256)
    assert.equal(
      new Date(pem.body.certificateNotAfter).getTime(),
      new X509Certificate(good.pem).validToDate.getTime(),
    )
    const bare = await register(good.body)
    assert.equal(bare.status, 201, bare.text)
    assert.equal(bare.body.certificateSha256, pem.body.certificateSha256)
    // The body as IdP consoles show it, wrapped at 64 columns, is the same certificate.
    const wrapped = await register(good.body.replace(/(.{64})/g, '$1\n'))
    assert.equal(wrapped.status, 201, wrapped.text)

    for (const garbage of [
      'not a certificate',
      Buffer.from('hello world, this is not DER').toString('base64'),
      good.privateKeyPem,
      good.pem.replace('CERTIFICATE-----', 'CERTIFICATE REQUEST-----'),
      `${good.pem}\n${good.pem}`,
      good.body.slice(0, -8),
    ]) {
      const refused = await register(garbage)
      assert.equal(refused.status, 400, `${garbage.slice(0, 40)}: ${refused.text}`)
      assert.equal(refused.body.error, 'invalid_certificate')
    }
    const expired = await makeCertificate({
      notBefore: new Date(Date.now() - 400 * DAY),
      notAfter: new Date(Date.now() - DAY),
    })
    const expiredAnswer = await register(expired.pem)
    assert.equal(expiredAnswer.status, 400)
    assert.equal(expiredAnswer.body.error, 'certificate_expired')
    const future = await makeCertificate({
      notBefore: new Date(Date.now() + DAY),
      notAfter: new Date(Date.now() + 400 * DAY),
    })
    const futureAnswer = await register(future.body)
    assert.equal(futureAnswer.status, 400)
    assert.equal(futureAnswer.body.error, 'certificate_not_yet_valid')
    // The same checks on a change of certificate.
    const patched = await service.request('PATCH', `/api/v1/saml-identity-providers/${pem.body.id}`, {
      headers: owner.headers,
      body: { certificate: expired.body },
    })
    assert.equal(patched.status, 400)
    assert.equal(patched.body.error, 'certificate_expired')
    // Nothing of the refused ones was stored.
    const list = await service.request('GET', '/api/v1/saml-identity-providers', { key: tenant.key })
    assert.equal(list.body.total, 4)
  })

  test('the SP metadata names the entity id and the ACS (HTTP-POST) of the registration', async () => {
    const metadata = await fetch(idp.serviceProvider.metadataUrl)
    assert.equal(metadata.status, 200)
    assert.match(metadata.headers.get('content-type') ?? '', /samlmetadata\+xml/)
    const doc = new DOMParser().parseFromString(await metadata.text(), 'text/xml')
    const root = doc.documentElement!
    assert.equal(root.localName, 'EntityDescriptor')
    assert.equal(root.getAttribute('entityID'), idp.serviceProvider.entityId)
    const acs = doc.getElementsByTagNameNS(
      'urn:oasis:names:tc:SAML:2.0:metadata',
      'AssertionConsumerService',
    )[0]!
    assert.equal(acs.getAttribute('Location'), idp.serviceProvider.acsUrl)
    assert.equal(acs.getAttribute('Binding'), 'urn:oasis:names:tc:SAML:2.0:bindings:HTTP-POST')
    assert.equal((await fetch(`${service.baseUrl}/saml/${crypto.randomUUID()}/metadata`)).status, 404)
  })

  /** The end-user starts at the application and chooses the IdP; where the IdP is sent. */
  async function start(): Promise<Started> {
    const jar = new CookieJar()
    const verifier = oidc.randomPKCECodeVerifier()
    const state = oidc.randomState()
    const authorize = oidc.buildAuthorizationUrl(client.config, {
      redirect_uri: APP_REDIRECT,
      scope: 'openid email profile',
      code_challenge: await oidc.calculatePKCECodeChallenge(verifier),
      code_challenge_method: 'S256',
      state,
    })
    const reached = await follow(jar, service.baseUrl, authorize.toString(), APP_REDIRECT)
    const button = /href="(\/sign-in\/[^"]+\/federated\/[^"]+)">Sign in with Acme Corp</.exec(
      reached.page!.html,
    )
    assert.ok(button, 'the sign-in page offers the IdP')
    const toIdp = await page(jar, new URL(button[1]!, service.baseUrl))
    assert.equal(toIdp.status, 303)
    assert.ok(toIdp.location!.startsWith(`${IDP_SSO}?`), toIdp.location!)
    const request = parseAuthnRequest(toIdp.location!)
    assert.equal(request.acsUrl, idp.serviceProvider.acsUrl)
    assert.equal(request.issuer, idp.serviceProvider.entityId)
    const uid = /\/sign-in\/([^/]+)\//.exec(button[1]!)![1]!
    return { uid, jar, verifier, state, request }
  }

  /** The IdP's page posts the response to the ACS: a cross-site POST, so without the service's cookies. */
  const post = (samlResponse: string) =>
    page(new CookieJar(), idp.serviceProvider.acsUrl, { form: { SAMLResponse: samlResponse } })

  async function finish(started: Started, acs: PageResponse) {
    assert.equal(acs.status, 200, acs.html.slice(0, 500))
    const next = refreshTargetOf(acs.html)
    assert.ok(next)
    const back = await follow(
      started.jar,
      service.baseUrl,
      new URL(next, service.baseUrl).toString(),
      APP_REDIRECT,
    )
    assert.ok(back.callback, back.page?.html.slice(0, 500))
    return back.callback
  }

  const audited = async (action: string): Promise<AuditView[]> =>
    (await service.request('GET', `/api/v1/audit?action=${action}`, { key: tenant.key })).body.data

  test('a signed response signs the end-user in: account created in the tenant realm, linked, tokens issued', async () => {
    const started = await start()
    const email = `saml-${Date.now()}@acme.example`
    const nameId = `acme-user-${Date.now()}`
    const response = buildResponse(
      {
        request: started.request,
        issuer: IDP_ENTITY,
        nameId,
        attributes: { email, displayName: 'Ada Federated' },
      },
      idpKey,
    )
    const callback = await finish(started, await post(response))
    const tokens = await oidc.authorizationCodeGrant(client.config, callback, {
      pkceCodeVerifier: started.verifier,
      expectedState: started.state,
    })
    const claims = tokens.claims()!
    await verifyAgainstJwks(service.baseUrl, tokens.id_token!)
    assert.deepEqual(claims['amr'], ['ext'])
    const userinfo = await oidc.fetchUserInfo(client.config, tokens.access_token, claims.sub)
    assert.equal(userinfo.email, email)
    assert.equal(userinfo.name, 'Ada Federated')
    // The console's claim of a member's tenants is never an application's.
    assert.equal(userinfo['kms_tenants'], undefined)
    assert.equal(claims['kms_tenants'], undefined)
    const user = await service.request('GET', `/api/v1/endusers/${claims.sub}`, { key: tenant.key })
    assert.equal(user.status, 200, user.text)
    assert.equal(user.body.source, 'federation')
    assert.equal(user.body.email, email)
    assert.equal(user.body.hasPassword, false)
    const signIns = (await audited('federation.saml.sign_in')).filter((r) => r.outcome === 'success')
    assert.ok(signIns.some((r) => r.resource === `enduser:${claims.sub}`))

    // The same IdP subject next time is the same account, even when the IdP sends a new address.
    const again = await start()
    const second = buildResponse(
      {
        request: again.request,
        issuer: IDP_ENTITY,
        nameId,
        attributes: { email: `renamed-${email}` },
      },
      idpKey,
    )
    const secondCallback = await finish(again, await post(second))
    const secondTokens = await oidc.authorizationCodeGrant(client.config, secondCallback, {
      pkceCodeVerifier: again.verifier,
      expectedState: again.state,
    })
    assert.equal(secondTokens.claims()!.sub, claims.sub)
  })

  test('an existing end-user with the address is linked, not duplicated', async () => {
    const email = `existing-${Date.now()}@acme.example`
    const existing = await service.request('POST', '/api/v1/endusers/create-without-password', {
      key: tenant.key,
      body: { email },
    })
    assert.equal(existing.status, 201, existing.text)
    const started = await start()
    const callback = await finish(
      started,
      await post(
        buildResponse(
          { request: started.request, issuer: IDP_ENTITY, nameId: `n-${Date.now()}`, attributes: { email } },
          idpKey,
        ),
      ),
    )
    const tokens = await oidc.authorizationCodeGrant(client.config, callback, {
      pkceCodeVerifier: started.verifier,
      expectedState: started.state,
    })
    assert.equal(tokens.claims()!.sub, existing.body.id)
  })

  test('refusals: unsigned, signed by another key, wrong audience, expired, replayed, wrong destination or recipient, other issuer, unknown request', async () => {
    const otherKey = await makeCertificate()
    // A good response of the registered IdP, but for what each case changes.
    const differing = (differences: Partial<ResponseOptions>) => (request: ReceivedAuthnRequest) =>
      buildResponse(
        { request, issuer: IDP_ENTITY, nameId: 'x', attributes: { email: 'x@acme.example' }, ...differences },
        idpKey,
      )
    const cases: Array<[string, (request: ReceivedAuthnRequest) => string]> = [
      ['unsigned response and assertion', differing({ signResponse: false, signAssertion: false })],
      ['signed response, unsigned assertion', differing({ signAssertion: false })],
      ['signed by another key', differing({ signingKey: otherKey })],
      ['wrong audience', differing({ audience: 'https://other-sp.example' })],
      [
        'expired assertion',
        differing({
          notBefore: new Date(Date.now() - 20 * 60_000),
          notOnOrAfter: new Date(Date.now() - 10 * 60_000),
        }),
      ],
      ['wrong destination', differing({ destination: 'https://elsewhere.example/acs' })],
      ['wrong recipient', differing({ recipient: 'https://elsewhere.example/acs' })],
      ['another issuer', differing({ issuer: 'https://evil.example/saml' })],
      [
        'an AuthnRequest this service never sent',
        (request) => differing({})({ ...request, id: '_never_sent_1234' }),
      ],
    ]
    for (const [name, make] of cases) {
      const started = await start()
      const answer = await post(make(started.request))
      assert.equal(answer.status, 400, `${name}: ${answer.status}`)
      assert.match(answer.html, /did not succeed/, name)
      // And the sign-in cannot be completed from the browser either: the request holds no account.
      const back = await page(
        started.jar,
        new URL(`/sign-in/${started.uid}/federated-return/${started.request.id}`, service.baseUrl),
      )
      assert.equal(back.status, 400, name)
    }
    // Replay: a response accepted once is refused the second time, also for a new sign-in.
    const started = await start()
    const response = buildResponse(
      {
        request: started.request,
        issuer: IDP_ENTITY,
        nameId: `replay-${Date.now()}`,
        attributes: { email: `replay-${Date.now()}@acme.example` },
      },
      idpKey,
    )
    assert.equal((await post(response)).status, 200)
    const replayed = await post(response)
    assert.equal(replayed.status, 400)
    assert.match(replayed.html, /did not succeed/)
    const refusals = (await audited('federation.saml.sign_in')).filter((r) => r.outcome === 'denied')
    const reasons = refusals.map((r) => r.details?.['reason'])
    for (const reason of [
      'invalid_response',
      'wrong_destination',
      'wrong_issuer',
      'unknown_request',
      'replayed',
    ])
      assert.ok(reasons.includes(reason), `audited ${reason}: ${reasons.join(', ')}`)
  })

  test('access policies apply to a federated sign-in as to any other', async () => {
    const deny = await service.request('POST', '/api/v1/access-policies', {
      key: tenant.key,
      body: { name: 'Nobody', action: 'Deny', priority: 1 },
    })
    assert.equal(deny.status, 201, deny.text)
    try {
      const started = await start()
      const acs = await post(
        buildResponse(
          {
            request: started.request,
            issuer: IDP_ENTITY,
            nameId: `p-${Date.now()}`,
            attributes: { email: `p-${Date.now()}@acme.example` },
          },
          idpKey,
        ),
      )
      const next = refreshTargetOf(acs.html)!
      const shown = await page(started.jar, new URL(next, service.baseUrl))
      assert.equal(shown.status, 403)
      assert.match(shown.html, /Access denied/)
    } finally {
      await service.request('DELETE', `/api/v1/access-policies/${deny.body.id}`, { key: tenant.key })
    }
  })

  test('an IdP limited to other applications is not offered, and cannot be started by URL', async () => {
    const other = await service.request('POST', '/api/v1/applications', {
      key: tenant.key,
      body: { name: 'Other', applicationType: 'spa', redirectUris: [APP_REDIRECT] },
    })
    const limited = await service.request('POST', '/api/v1/saml-identity-providers', {
      headers: owner.headers,
      body: {
        name: 'Limited IdP',
        entityId: 'https://limited.example/saml',
        ssoUrl: IDP_SSO,
        certificate: idpKey.body,
        applicationIds: [other.body.id],
      },
    })
    assert.equal(limited.status, 201, limited.text)
    const jar = new CookieJar()
    const authorize = oidc.buildAuthorizationUrl(client.config, {
      redirect_uri: APP_REDIRECT,
      scope: 'openid',
      code_challenge: await oidc.calculatePKCECodeChallenge(oidc.randomPKCECodeVerifier()),
      code_challenge_method: 'S256',
    })
    const reached = await follow(jar, service.baseUrl, authorize.toString(), APP_REDIRECT)
    assert.doesNotMatch(reached.page!.html, /Limited IdP/)
    const uid = /\/sign-in\/([A-Za-z0-9_-]+)\//.exec(reached.page!.html)![1]
    const forced = await page(jar, new URL(`/sign-in/${uid}/federated/${limited.body.id}`, service.baseUrl))
    assert.equal(forced.status, 404)
    // Another tenant cannot see or change the registration.
    const stranger = await service.createTenant()
    assert.equal(
      (await service.request('GET', `/api/v1/saml-identity-providers/${idp.id}`, { key: stranger.key }))
        .status,
      404,
    )
  })
})
