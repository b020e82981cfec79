import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { manualClock } from '../helpers/manual-clock.ts'
import {
  type SpawnedService,
  spawnService,
  startTestService,
  type TestService,
  waitFor,
} from '../helpers/service.ts'

const APP_ORIGIN = 'https://orders.example.com'
const OTHER_TENANT_ORIGIN = 'https://billing.example.org'
const NEW_ORIGIN = 'https://orders-v2.example.com'
const FOREIGN = 'https://evil.example.net'

async function preflight(baseUrl: string, path: string, origin: string) {
  const response = await fetch(new URL(path, baseUrl), {
    method: 'OPTIONS',
    headers: {
      origin,
      'access-control-request-method': 'POST',
      'access-control-request-headers': 'content-type',
    },
  })
  await response.arrayBuffer()
  return { status: response.status, allowOrigin: response.headers.get('access-control-allow-origin') }
}

/** A real cross-origin call to the token endpoint by a public client (the code is made up: 400). */
async function tokenCall(baseUrl: string, origin: string, clientId: string) {
  const response = await fetch(new URL('/oidc/token', baseUrl), {
    method: 'POST',
    headers: { origin, 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({
      grant_type: 'authorization_code',
      code: 'not-a-real-code',
      redirect_uri: `${APP_ORIGIN}/callback`,
      client_id: clientId,
      code_verifier: 'v'.repeat(43),
    }),
  })
  const body = (await response.json()) as { error?: string; error_description?: string }
  return { status: response.status, allowOrigin: response.headers.get('access-control-allow-origin'), body }
}

describe('CORS of the OpenID provider (spec 4.4)', () => {
  let a: TestService
  let b: SpawnedService
  let appId: string
  let clientId: string
  let tenantKey: string

  before(async () => {
    a = await startTestService()
    // A second process of the same deployment; its allow-list would live 5 minutes: only the
    // bus explains it seeing a change sooner.
    b = await spawnService({ ...a.env, ID_URL: a.baseUrl })
    const tenant = await a.createTenant()
    tenantKey = tenant.key
    const app = await a.request('POST', '/api/v1/applications', {
      key: tenant.key,
      body: {
        name: 'Orders',
        applicationType: 'spa',
        redirectUris: [`${APP_ORIGIN}/callback`],
        postLogoutRedirectUris: [`${APP_ORIGIN}/signed-out`],
      },
    })
    assert.equal(app.status, 201, app.text)
    appId = app.body.id
    clientId = app.body.clientId
    const other = await a.createTenant()
    const otherApp = await a.request('POST', '/api/v1/applications', {
      key: other.key,
      body: { name: 'Billing', applicationType: 'spa', redirectUris: [`${OTHER_TENANT_ORIGIN}/cb`] },
    })
    assert.equal(otherApp.status, 201, otherApp.text)
  })
  after(async () => {
    await b?.stop()
    await a?.stop()
  })

  test('discovery and JWKS answer any origin with *, preflight included', async () => {
    for (const path of ['/.well-known/openid-configuration', '/.well-known/jwks.json']) {
      const response = await fetch(new URL(path, a.baseUrl), { headers: { origin: FOREIGN } })
      assert.equal(response.status, 200)
      assert.equal(response.headers.get('access-control-allow-origin'), '*', path)
      const pre = await fetch(new URL(path, a.baseUrl), {
        method: 'OPTIONS',
        headers: { origin: FOREIGN, 'access-control-request-method': 'GET' },
      })
      assert.equal(pre.headers.get('access-control-allow-origin'), '*', `${path} preflight`)
    }
  })

  test('preflight: an application’s origin and any localhost origin pass; a foreign origin does not', async () => {
    const port = 20_000 + Math.floor(Math.random() * 40_000)
    for (const path of ['/oidc/token', '/oidc/me', '/oidc/token/revocation', '/oidc/token/introspection']) {
      for (const origin of [APP_ORIGIN, `http://localhost:${port}`, `https://127.0.0.1:${port}`]) {
        const result = await preflight(a.baseUrl, path, origin)
        assert.equal(result.status, 204, `${path} ${origin}`)
        assert.equal(result.allowOrigin, origin, `${path} ${origin}`)
      }
      const foreign = await preflight(a.baseUrl, path, FOREIGN)
      assert.equal(foreign.status, 403, path)
      assert.equal(foreign.allowOrigin, null, path)
    }
    // Look-alikes of localhost are foreign.
    for (const origin of ['http://localhost.evil.example', 'http://127.0.0.1.evil.example:80']) {
      assert.equal((await preflight(a.baseUrl, '/oidc/token', origin)).allowOrigin, null, origin)
    }
  })

  test('actual requests: the client’s own tenant decides; another tenant’s origin and a foreign one get no CORS headers', async () => {
    const allowed = await tokenCall(a.baseUrl, APP_ORIGIN, clientId)
    assert.equal(allowed.status, 400)
    assert.equal(allowed.body.error, 'invalid_grant', 'the request itself was handled')
    assert.equal(allowed.allowOrigin, APP_ORIGIN)
    const local = await tokenCall(a.baseUrl, 'http://localhost:5173', clientId)
    assert.equal(local.allowOrigin, 'http://localhost:5173')
    for (const origin of [FOREIGN, OTHER_TENANT_ORIGIN]) {
      const refused = await tokenCall(a.baseUrl, origin, clientId)
      assert.equal(refused.allowOrigin, null, origin)
      assert.equal(refused.body.error, 'invalid_request', origin)
    }
  })

  test('an application registered after a process started is its client at once (no restart)', async () => {
    const later = await a.request('POST', '/api/v1/applications', {
      key: tenantKey,
      body: { name: 'Later', applicationType: 'spa', redirectUris: [`${APP_ORIGIN}/later`] },
    })
    assert.equal(later.status, 201)
    // The made-up code is the only thing wrong: the client itself is known to process B.
    const call = await tokenCall(b.baseUrl, APP_ORIGIN, later.body.clientId)
    assert.equal(call.body.error, 'invalid_grant')
    await a.request('DELETE', `/api/v1/applications/${later.body.id}`, { key: tenantKey })
    const gone = await tokenCall(b.baseUrl, 'http://localhost:3000', later.body.clientId)
    assert.equal(gone.body.error, 'invalid_client')
  })

  test('after the application’s redirect URIs change, both processes follow without a restart', async () => {
    // Warm process B's list with the current origins.
    assert.equal((await preflight(b.baseUrl, '/oidc/token', APP_ORIGIN)).status, 204)
    assert.equal((await preflight(b.baseUrl, '/oidc/token', NEW_ORIGIN)).status, 403)
    const put = await a.request('PUT', `/api/v1/applications/${appId}`, {
      key: tenantKey,
      body: { name: 'Orders', redirectUris: [`${NEW_ORIGIN}/callback`] },
    })
    assert.equal(put.status, 200, put.text)
    for (const base of [a.baseUrl, b.baseUrl]) {
      await waitFor(
        async () => (await preflight(base, '/oidc/token', NEW_ORIGIN)).status === 204,
        `the new origin allowed by ${base}`,
      )
      assert.equal((await preflight(base, '/oidc/token', APP_ORIGIN)).status, 403, 'the old origin is gone')
      assert.equal((await tokenCall(base, NEW_ORIGIN, clientId)).allowOrigin, NEW_ORIGIN)
      assert.equal((await tokenCall(base, APP_ORIGIN, clientId)).allowOrigin, null)
    }
  })
})

describe('CORS allow-list: held at most 5 minutes (test clock)', () => {
  let service: TestService
  const clock = manualClock()

  before(async () => {
    service = await startTestService({}, { clock })
  })
  after(() => service?.stop())

  test('a change the bus never announced (written behind the service’s back) is seen once the 5 minutes are over', async () => {
    const tenant = await service.createTenant()
    const created = await service.request('POST', '/api/v1/applications', {
      key: tenant.key,
      body: { name: 'Orders', applicationType: 'spa', redirectUris: [`${APP_ORIGIN}/callback`] },
    })
    assert.equal(created.status, 201)
    assert.equal((await preflight(service.baseUrl, '/oidc/token', APP_ORIGIN)).status, 204)
    // As if another writer (or a process whose bus message was lost) changed the URIs.
    await service.sql`UPDATE applications SET redirect_uris = ${[`${NEW_ORIGIN}/callback`]} WHERE id = ${created.body.id}`
    clock.advance(4 * 60_000)
    assert.equal(
      (await preflight(service.baseUrl, '/oidc/token', NEW_ORIGIN)).status,
      403,
      'still the held list',
    )
    clock.advance(61_000)
    assert.equal(
      (await preflight(service.baseUrl, '/oidc/token', NEW_ORIGIN)).status,
      204,
      'rebuilt after 5 minutes',
    )
    assert.equal((await preflight(service.baseUrl, '/oidc/token', APP_ORIGIN)).status, 403)
  })
})
