import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import * as oidc from 'openid-client'
import { verifyAgainstJwks } from '../helpers/jwks.ts'
import { startTestService, type TestService } from '../helpers/service.ts'
import { type ConsoleClient, consoleClient, signIn } from '../helpers/sign-in.ts'

describe('OpenID provider: authorization code with PKCE (openid-client)', () => {
  let service: TestService
  let client: ConsoleClient
  const email = 'ada@example.com'
  const password = 'a password long enough'
  const redirectUri = 'http://127.0.0.1:9/callback'

  before(async () => {
    service = await startTestService({ KMS_CONSOLE_REDIRECT_URIS: redirectUri })
    await service.api.services.accounts.createTeamAccount({ email, password, displayName: 'Ada' })
    client = await consoleClient(service.baseUrl, redirectUri)
  })
  after(() => service.stop())

  test('discovery and JWKS are public with Access-Control-Allow-Origin: *', async () => {
    for (const path of ['/.well-known/openid-configuration', '/.well-known/jwks.json']) {
      const response = await fetch(new URL(path, service.baseUrl), {
        headers: { origin: 'https://elsewhere.example' },
      })
      assert.equal(response.status, 200, path)
      assert.equal(response.headers.get('access-control-allow-origin'), '*', path)
    }
    const discovery = client.config.serverMetadata()
    assert.equal(discovery.issuer, service.baseUrl.replace(/\/$/, ''))
    assert.deepEqual(discovery.code_challenge_methods_supported, ['S256'])
    assert.ok(
      discovery.end_session_endpoint &&
        discovery.revocation_endpoint &&
        discovery.introspection_endpoint &&
        discovery.userinfo_endpoint,
    )
  })

  test('sign-in through the page, tokens, userinfo, refresh, introspection, revocation and end-session', async () => {
    const { tokens, jar } = await signIn(service.baseUrl, client, {
      email,
      password,
      scope: 'openid email profile',
    })
    assert.ok(tokens.id_token && tokens.access_token && tokens.refresh_token)
    const { claims } = await verifyAgainstJwks(service.baseUrl, tokens.id_token)
    const account = await service.api.services.accounts.findTeamAccount(email)
    assert.equal(claims['sub'], account!.id)
    assert.equal(claims['aud'], 'kms-console')
    assert.equal(claims['iss'], client.config.serverMetadata().issuer)

    const userinfo = await oidc.fetchUserInfo(client.config, tokens.access_token, account!.id)
    assert.equal(userinfo.email, email)
    assert.equal(userinfo.name, 'Ada')
    // Signed in without a tenant, the console learns the person's tenants here: none yet.
    assert.deepEqual(userinfo['kms_tenants'], [])

    const refreshed = await oidc.refreshTokenGrant(client.config, tokens.refresh_token)
    assert.ok(refreshed.access_token)
    assert.notEqual(refreshed.access_token, tokens.access_token)

    const active = await oidc.tokenIntrospection(client.config, refreshed.access_token)
    assert.equal(active.active, true)
    await oidc.tokenRevocation(client.config, refreshed.access_token)
    const revoked = await oidc.tokenIntrospection(client.config, refreshed.access_token)
    assert.equal(revoked.active, false)

    // End-session: the provider asks, the form posts, the session ends.
    const end = oidc.buildEndSessionUrl(client.config, {
      id_token_hint: tokens.id_token,
      post_logout_redirect_uri: redirectUri,
    })
    const question = await fetch(end, { headers: { cookie: jar.header() }, redirect: 'manual' })
    assert.equal(question.status, 200)
    const html = await question.text()
    const xsrf = /name="xsrf" value="([^"]+)"/.exec(html)?.[1]
    const action = /action="([^"]+)"/.exec(html)?.[1]
    assert.ok(xsrf && action)
    const confirm = await fetch(new URL(action, service.baseUrl), {
      method: 'POST',
      headers: { cookie: jar.header(), 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ xsrf, logout: 'yes' }).toString(),
      redirect: 'manual',
    })
    assert.equal(confirm.status, 303)
    assert.ok(confirm.headers.get('location')!.startsWith(redirectUri))
    // The session's refresh token ended with it.
    await assert.rejects(oidc.refreshTokenGrant(client.config, tokens.refresh_token))
  })

  test('a member signs in for a tenant: the access token is a JWT for the tenant, accepted by the main API as Bearer', async () => {
    const tenant = await service.createTenant()
    const account = await service.api.services.accounts.findTeamAccount(email)
    await service.api.services.team.addMember(
      { tenantId: tenant.tenantId, actor: 'test', requestId: null, clientIp: null },
      { accountId: account!.id, role: 'tenant:developer' },
    )
    const resource = `urn:kms:tenant:${tenant.tenantId}`
    const { tokens } = await signIn(service.baseUrl, client, {
      email,
      password,
      resource,
      tokenResource: true,
    })
    const { header, claims } = await verifyAgainstJwks(service.baseUrl, tokens.access_token)
    assert.equal(header['typ'], 'at+jwt')
    assert.equal(claims['aud'], resource)
    assert.equal(claims['sub'], account!.id)
    assert.equal(typeof claims['gid'], 'string')

    const bearer = { authorization: `Bearer ${tokens.access_token}` }
    const me = await service.request('GET', '/api/v1/tenant', { headers: bearer })
    assert.equal(me.status, 200, me.text)
    assert.equal(me.body.callerKind, 'member')
    assert.equal(me.body.role, 'tenant:developer')
    // The spec's sample: the public key with a Bearer token.
    const created = await service.request('POST', '/api/v1/keys', {
      headers: bearer,
      body: { name: 'signing', keyType: 'Signing', algorithm: 'Ed25519' },
    })
    assert.equal(created.status, 201, created.text)
    const publicKey = await service.request('GET', `/api/v1/keys/${created.body.id}/public`, {
      headers: bearer,
    })
    assert.equal(publicKey.status, 200, publicKey.text)
    // A developer holds no audit:read; the same token for another tenant's id is nothing.
    assert.equal((await service.request('GET', '/api/v1/audit', { headers: bearer })).status, 403)
    assert.equal(
      (
        await service.request('GET', '/api/v1/tenant', {
          headers: { authorization: `Bearer ${tokens.access_token}x` },
        })
      ).status,
      401,
    )

    // Refresh for the resource, then the access token of a revoked grant is refused.
    const refreshed = await oidc.refreshTokenGrant(client.config, tokens.refresh_token!, { resource })
    assert.equal(
      (
        await service.request('GET', '/api/v1/tenant', {
          headers: { authorization: `Bearer ${refreshed.access_token}` },
        })
      ).status,
      200,
    )
    await oidc.tokenRevocation(client.config, refreshed.refresh_token!)
    assert.equal(
      (
        await service.request('GET', '/api/v1/tenant', {
          headers: { authorization: `Bearer ${refreshed.access_token}` },
        })
      ).status,
      401,
    )
  })

  test("the console's userinfo names every tenant the member belongs to (kms_tenants), oldest first, and no other", async () => {
    const person = 'grace@example.com'
    const secret = 'grace password long enough'
    const account = await service.api.services.accounts.createTeamAccount({ email: person, password: secret })
    const first = await service.createTenant()
    const second = await service.createTenant()
    const notMine = await service.createTenant()
    for (const [tenantId, role] of [
      [first.tenantId, 'tenant:viewer'],
      [second.tenantId, 'tenant:owner'],
    ] as const)
      await service.api.services.team.addMember(
        { tenantId, actor: 'test', requestId: null, clientIp: null },
        { accountId: account.id, role },
      )
    const { tokens } = await signIn(service.baseUrl, client, { email: person, password: secret })
    const userinfo = await oidc.fetchUserInfo(client.config, tokens.access_token, account.id)
    assert.deepEqual(userinfo['kms_tenants'], [first.tenantId, second.tenantId])
    assert.ok(!(userinfo['kms_tenants'] as string[]).includes(notMine.tenantId))
  })

  test('a tenant the person is not a member of: the authorization ends in access_denied', async () => {
    const other = await service.createTenant()
    await assert.rejects(
      signIn(service.baseUrl, client, { email, password, resource: `urn:kms:tenant:${other.tenantId}` }),
      (err: { error?: string }) => err.error === 'access_denied',
    )
  })

  test('after a signing-key rotation new ID tokens carry the new key, and earlier tokens still verify against the JWKS', async () => {
    const before = await signIn(service.baseUrl, client, { email, password, scope: 'openid email' })
    const first = await verifyAgainstJwks(service.baseUrl, before.tokens.id_token!)
    const version = await service.api.services.identity.signingKeys.rotate()
    assert.ok(version && version >= 2)
    const after = await signIn(service.baseUrl, client, { email, password, scope: 'openid email' })
    const second = await verifyAgainstJwks(service.baseUrl, after.tokens.id_token!)
    assert.notEqual(second.header['kid'], first.header['kid'])
    await verifyAgainstJwks(service.baseUrl, before.tokens.id_token!)
    const jwks = (await (await fetch(new URL('/.well-known/jwks.json', service.baseUrl))).json()) as {
      keys: unknown[]
    }
    assert.equal(jwks.keys.length, 2)
  })

  test('the identity sweep deletes expired provider rows and rotates the signing key only when it is due', async () => {
    await service.sql`
      INSERT INTO oidc_models (model, id, payload, expires_at)
      VALUES ('Session', 'expired-one', '{}'::jsonb, now() - interval '1 minute'),
             ('Session', 'live-one', '{}'::jsonb, now() + interval '1 hour')`
    const swept = await service.api.services.identity.sweep()
    assert.ok(swept.expiredModels >= 1)
    assert.equal(swept.rotatedToVersion, null, 'the current key is younger than the rotation age')
    const left = await service.sql<
      { id: string }[]
    >`SELECT id FROM oidc_models WHERE id IN ('expired-one', 'live-one')`
    assert.deepEqual(
      left.map((r) => r.id),
      ['live-one'],
    )
    // Due: the key is older than the rotation age.
    await service.sql`UPDATE oidc_signing_keys SET created_at = now() - interval '40 days' WHERE retired_at IS NULL`
    const due = await service.api.services.identity.sweep()
    assert.ok(due.rotatedToVersion !== null)
  })

  test('a wrong password and an unknown address get the same page', async () => {
    await assert.rejects(
      signIn(service.baseUrl, client, { email, password: 'wrong password here' }),
      (err: Error) => {
        assert.match(err.message, /not right/)
        return true
      },
    )
    await assert.rejects(
      signIn(service.baseUrl, client, { email: 'nobody@example.com', password: 'wrong password here' }),
      (err: Error) => {
        assert.match(err.message, /not right/)
        return true
      },
    )
  })
})
