import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { samples } from '../helpers/prometheus.ts'
import { startTestService, type TenantWithKey, type TestService } from '../helpers/service.ts'
import { type ConsoleClient, consoleClient, memberSession } from '../helpers/sign-in.ts'

/**
 * Issue 30's findings on the provider's surface: what discovery advertises, how a confidential
 * client authenticates, CORS on error answers, the metrics' route labels, and who may take back
 * an owner's invitation (docs/decisions.md).
 */

const REDIRECT = 'http://127.0.0.1:9/callback'
const RESOURCE = 'https://orders-api.example.com'
const FOREIGN = 'https://evil.example.net'

describe('the OpenID provider’s surface (issue 30)', () => {
  let service: TestService
  let tenant: TenantWithKey
  let client: ConsoleClient
  let machine: { clientId: string; clientSecret: string }

  before(async () => {
    service = await startTestService({ KMS_CONSOLE_REDIRECT_URIS: REDIRECT })
    tenant = await service.createTenant()
    client = await consoleClient(service.baseUrl, REDIRECT)
    const created = await service.request('POST', '/api/v1/applications', {
      key: tenant.key,
      body: { name: 'Batch', applicationType: 'machine_to_machine', redirectUris: [], resources: [RESOURCE] },
    })
    assert.equal(created.status, 201, created.text)
    machine = { clientId: created.body.clientId, clientSecret: created.body.clientSecret }
  })
  after(() => service?.stop())

  const token = (form: Record<string, string>, headers: Record<string, string> = {}) =>
    fetch(new URL('/oidc/token', service.baseUrl), {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
      body: new URLSearchParams(form),
    })
  const basic = (id: string, secret: string) =>
    `Basic ${Buffer.from(`${encodeURIComponent(id)}:${encodeURIComponent(secret)}`).toString('base64')}`

  test('discovery advertises the code flow only and the two client authentications in use', async () => {
    const document = client.config.serverMetadata()
    assert.deepEqual(document.response_types_supported, ['code'])
    assert.ok(!document.grant_types_supported?.includes('implicit'), String(document.grant_types_supported))
    assert.deepEqual([...(document.token_endpoint_auth_methods_supported ?? [])].sort(), [
      'client_secret_basic',
      'none',
    ])
    // An ID token straight from the authorization endpoint is refused, not issued.
    const implicit = await fetch(
      new URL(
        `/oidc/auth?client_id=kms-console&response_type=id_token&scope=openid&nonce=n&redirect_uri=${encodeURIComponent(REDIRECT)}`,
        service.baseUrl,
      ),
      { redirect: 'manual' },
    )
    const location = new URL(implicit.headers.get('location') ?? '', REDIRECT)
    const answer = new URLSearchParams(location.hash.slice(1))
    assert.equal(answer.get('error'), 'unsupported_response_type', location.href)
    assert.equal(answer.get('id_token'), null)
  })

  test('a client registered for client_secret_basic cannot authenticate with the secret in the body', async () => {
    const posted = await token({
      grant_type: 'client_credentials',
      resource: RESOURCE,
      client_id: machine.clientId,
      client_secret: machine.clientSecret,
    })
    assert.equal(posted.status, 401)
    assert.equal(((await posted.json()) as { error: string }).error, 'invalid_client')
    const viaHeader = await token(
      { grant_type: 'client_credentials', resource: RESOURCE },
      { authorization: basic(machine.clientId, machine.clientSecret) },
    )
    assert.equal(viaHeader.status, 200, await viaHeader.clone().text())
    assert.equal(((await viaHeader.json()) as { token_type: string }).token_type, 'Bearer')
  })

  test('client_credentials without a resource: the one declared resource, else invalid_target, never an opaque token', async () => {
    const granted = await token(
      { grant_type: 'client_credentials' },
      { authorization: basic(machine.clientId, machine.clientSecret) },
    )
    assert.equal(granted.status, 200, await granted.clone().text())
    const accessToken = ((await granted.json()) as { access_token: string }).access_token
    assert.equal(accessToken.split('.').length, 3, 'a JWT, not an opaque token')
    const claims = JSON.parse(Buffer.from(accessToken.split('.')[1]!, 'base64url').toString())
    assert.equal(claims.aud, RESOURCE)

    const two = await service.request('POST', '/api/v1/applications', {
      key: tenant.key,
      body: {
        name: 'Two APIs',
        applicationType: 'machine_to_machine',
        redirectUris: [],
        resources: [RESOURCE, 'https://billing-api.example.com'],
      },
    })
    assert.equal(two.status, 201, two.text)
    const ambiguous = await token(
      { grant_type: 'client_credentials' },
      { authorization: basic(two.body.clientId, two.body.clientSecret) },
    )
    assert.equal(ambiguous.status, 400)
    assert.equal(((await ambiguous.json()) as { error: string }).error, 'invalid_target')
  })

  test('error answers carry CORS headers only for an allowed origin', async () => {
    const userinfo = (origin: string) =>
      fetch(new URL('/oidc/me', service.baseUrl), {
        headers: { origin, authorization: 'Bearer not-a-token' },
      })
    const foreign = await userinfo(FOREIGN)
    assert.equal(foreign.status, 401)
    assert.equal(foreign.headers.get('access-control-allow-origin'), null)
    assert.equal(foreign.headers.get('access-control-expose-headers'), null)
    const local = await userinfo('http://localhost:5173')
    assert.equal(local.status, 401)
    assert.equal(local.headers.get('access-control-allow-origin'), 'http://localhost:5173')
    // An unknown client at the token endpoint: the error comes before any client's allow-list.
    const unknown = await token(
      {
        grant_type: 'authorization_code',
        code: 'x',
        client_id: 'no-such-client',
        code_verifier: 'v'.repeat(43),
      },
      { origin: FOREIGN },
    )
    assert.equal(unknown.status, 401)
    assert.equal(unknown.headers.get('access-control-allow-origin'), null)
  })

  test('/metrics labels the provider’s requests by its own route templates, not one /oidc/* label', async () => {
    await fetch(new URL('/oidc/me', service.baseUrl), { headers: { authorization: 'Bearer x' } })
    await token({ grant_type: 'client_credentials' })
    await fetch(new URL('/oidc/auth/not-an-interaction', service.baseUrl), { redirect: 'manual' })
    await fetch(new URL('/oidc/no-such-endpoint', service.baseUrl))
    await fetch(new URL('/.well-known/openid-configuration', service.baseUrl))
    const scraped = await service.request('GET', '/metrics')
    assert.equal(scraped.status, 200)
    const routes = new Set(
      samples(scraped.text)
        .filter((s) => s.name === 'kms_http_requests_total')
        .map((s) => `${s.labels['method']} ${s.labels['route']}`),
    )
    for (const expected of [
      'GET /oidc/me',
      'POST /oidc/token',
      'GET /oidc/auth/:uid',
      'GET /oidc/*',
      'GET /.well-known/openid-configuration',
    ])
      assert.ok(routes.has(expected), `${expected} in ${[...routes].join(', ')}`)
    assert.ok(![...routes].some((r) => r.includes('not-an-interaction') || r.includes('no-such-endpoint')))
  })

  test('only an owner takes back an owner’s invitation, as only an owner sends one', async () => {
    const owner = await memberSession(service, client, tenant.tenantId, 'tenant:owner')
    const admin = await memberSession(service, client, tenant.tenantId, 'tenant:admin')
    const invite = async (role: string) => {
      const made = await service.request('POST', '/api/v1/team/invitations', {
        headers: owner.headers,
        body: { email: `invitee-${role.replace(':', '-')}-${Date.now()}@example.com`, role },
      })
      assert.equal(made.status, 201, made.text)
      return made.body.invitationId as string
    }
    const revoke = (id: string, headers: Record<string, string> | undefined, key?: string) =>
      service.request('DELETE', `/api/v1/team/invitations/${id}`, {
        ...(headers ? { headers } : {}),
        ...(key ? { key } : {}),
      })

    const forOwner = await invite('tenant:owner')
    const byAdmin = await revoke(forOwner, admin.headers)
    assert.equal(byAdmin.status, 403, byAdmin.text)
    assert.equal(byAdmin.body.error, 'forbidden')
    const byKey = await revoke(forOwner, undefined, tenant.key)
    assert.ok(byKey.status === 403, byKey.text)
    const byOwner = await revoke(forOwner, owner.headers)
    assert.equal(byOwner.status, 200, byOwner.text)
    assert.equal(byOwner.body.status, 'revoked')
    // Any other invitation is still the admin's to revoke.
    const forDeveloper = await invite('tenant:developer')
    assert.equal((await revoke(forDeveloper, admin.headers)).status, 200)
  })
})
