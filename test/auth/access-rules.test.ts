import assert from 'node:assert/strict'
import { test } from 'node:test'
import Fastify, { type FastifyInstance } from 'fastify'
import type { Authenticator } from '../../src/api-keys/api-key-authenticator.ts'
import { type Access, access } from '../../src/auth/access.ts'
import { type PartnerAuthenticator, registerAuthentication } from '../../src/auth/auth-hook.ts'
import type { BearerAuthenticator } from '../../src/auth/bearer-authenticator.ts'
import { type ApiKeyPrincipal, partnerPrincipal } from '../../src/auth/principal.ts'
import { missingScopesFor, partnerOf, principalOf } from '../../src/auth/request-context.ts'
import { scopesOfRole } from '../../src/auth/roles.ts'
import type { Scope } from '../../src/auth/scopes.ts'
import { installErrorHandlers } from '../../src/http/error-handler.ts'

/**
 * Scope rules of access declarations (src/auth/access.ts) enforced by the hook alone: all-of
 * rules, conditions a handler consults, declarations that cannot be enforced, and partners as the
 * request's principal.
 */

/** `X-Api-Key: <scope> <scope> …`: a key holding exactly the scopes it names. */
const keysNamingTheirScopes: Authenticator = {
  authenticate: async (presented) =>
    ({
      kind: 'apiKey',
      tenantId: '00000000-0000-4000-8000-000000000001',
      apiKeyId: '00000000-0000-4000-8000-000000000002',
      scopes: new Set(presented.split(' ').filter(Boolean) as Scope[]),
      keyRestriction: null,
    }) satisfies ApiKeyPrincipal,
  invalidate: async () => {},
}

/** `Authorization: Bearer developer`: a member whose role is tenant:developer. */
const developers: BearerAuthenticator = {
  authenticate: async (token) =>
    token === 'developer'
      ? {
          kind: 'member',
          tenantId: '00000000-0000-4000-8000-000000000001',
          accountId: '00000000-0000-4000-8000-000000000003',
          grantId: 'grant',
          role: 'tenant:developer',
          scopes: scopesOfRole('tenant:developer'),
        }
      : undefined,
}

/** `Bearer kmsp_<id>`: that partner key; `Bearer portal`: a person signed in to the portal. */
const partners: PartnerAuthenticator = {
  authenticate: async (presented) =>
    presented.startsWith('kmsp_')
      ? partnerPrincipal('partner-1', { keyId: presented.slice(5) })
      : presented === 'portal'
        ? partnerPrincipal('partner-1', { accountId: 'account-1' })
        : undefined,
}

interface Recorded {
  action: string
  details?: Record<string, unknown>
}

async function appWith(
  routes: (app: FastifyInstance) => void,
): Promise<{ app: FastifyInstance; audit: Recorded[] }> {
  const audit: Recorded[] = []
  const app = Fastify()
  installErrorHandlers(app)
  registerAuthentication(app, {
    authenticator: keysNamingTheirScopes,
    bearer: developers,
    audit: { record: async (entry: Recorded) => void audit.push(entry) } as never,
    partners,
  })
  routes(app)
  await app.ready()
  return { app, audit }
}

test('an all-of declaration: a key with only one of the scopes is 403 naming the one it lacks, audited', async () => {
  const { app, audit } = await appWith((app) => {
    app.post(
      '/api/v1/connections',
      { config: { access: access.allScopes('keys:write', 'keys:export') } },
      async () => ({ ok: true }),
    )
  })
  try {
    const call = (key: string) =>
      app.inject({ method: 'POST', url: '/api/v1/connections', headers: { 'x-api-key': key } })

    for (const [held, lacking] of [
      ['keys:write', 'keys:export'],
      ['keys:export', 'keys:write'],
      ['keys:read', 'keys:write'],
    ] as const) {
      const res = await call(held)
      assert.equal(res.statusCode, 403, `${held}: ${res.body}`)
      const body = res.json()
      assert.equal(body.error, 'insufficient_scope')
      assert.equal(body.requiredScope, lacking, held)
      assert.equal(body.message, `This API key lacks the scope ${lacking}`)
      const record = audit.at(-1)
      assert.equal(record?.action, 'authorization.denied')
      assert.deepEqual(record?.details, { requiredScope: lacking })
    }

    const both = await call('keys:write keys:export')
    assert.equal(both.statusCode, 200, both.body)
    assert.deepEqual(both.json(), { ok: true })

    // A member whose role grants one of the two: the same 403, in a member's words.
    const member = await app.inject({
      method: 'POST',
      url: '/api/v1/connections',
      headers: { authorization: 'Bearer developer' },
    })
    assert.equal(member.statusCode, 403, member.body)
    assert.equal(member.json().requiredScope, 'keys:export')
    assert.equal(member.json().message, 'Your role in this tenant does not grant the scope keys:export')
  } finally {
    await app.close()
  }
})

test('an any-of declaration still admits a key holding one of its scopes', async () => {
  const { app } = await appWith((app) => {
    app.post(
      '/api/v1/encrypt',
      { config: { access: access.scope('encryption:write', 'encrypt:invoke') } },
      async () => ({ ok: true }),
    )
  })
  try {
    const call = (key: string) =>
      app.inject({ method: 'POST', url: '/api/v1/encrypt', headers: { 'x-api-key': key } })
    assert.equal((await call('encrypt:invoke')).statusCode, 200)
    const refused = await call('keys:write')
    assert.equal(refused.statusCode, 403)
    assert.equal(refused.json().requiredScope, 'encryption:write', 'the first scope is the one named')
  } finally {
    await app.close()
  }
})

test('a condition is declared with the route and answered to the handler, never assumed', async () => {
  const { app } = await appWith((app) => {
    app.post(
      '/api/v1/keys',
      {
        config: {
          access: access.withConditions(access.scope('keys:write'), {
            defaultKey: ['keys:write', 'encryption:write'],
          }),
        },
      },
      async (request) => ({ missing: missingScopesFor(request, 'defaultKey') }),
    )
    app.post('/api/v1/other', { config: { access: access.scope('keys:write') } }, async (request) => ({
      missing: missingScopesFor(request, 'defaultKey'),
    }))
  })
  try {
    const call = (url: string, key: string) =>
      app.inject({ method: 'POST', url, headers: { 'x-api-key': key } })
    const writer = await call('/api/v1/keys', 'keys:write')
    assert.equal(writer.statusCode, 200, 'the route itself needs keys:write only')
    assert.deepEqual(writer.json(), { missing: ['encryption:write'] })
    assert.deepEqual((await call('/api/v1/keys', 'keys:write encryption:write')).json(), { missing: [] })
    assert.equal((await call('/api/v1/keys', 'encryption:write')).statusCode, 403)
    // A condition the route does not declare is an error, not an allowance.
    assert.equal((await call('/api/v1/other', 'keys:write encryption:write')).statusCode, 500)
  } finally {
    await app.close()
  }
})

test('a scope rule that cannot be enforced stops the start, naming the route', () => {
  const app = Fastify()
  registerAuthentication(app, {
    authenticator: keysNamingTheirScopes,
    audit: { record: async () => {} } as never,
  })
  const scoped = (rule: Partial<Extract<Access, { kind: 'scoped' }>>): Access => ({
    kind: 'scoped',
    callers: ['apiKey', 'member'],
    anyOf: [],
    allOf: [],
    ...rule,
  })
  assert.throws(
    () => app.post('/api/v1/anyone', { config: { access: scoped({}) } }, async () => ({})),
    /POST \/api\/v1\/anyone: its scope rule names no scope/,
  )
  assert.throws(
    () =>
      app.post(
        '/api/v1/typo',
        { config: { access: scoped({ allOf: ['keys:write', 'keys:exprot' as Scope] }) } },
        async () => ({}),
      ),
    /POST \/api\/v1\/typo: its scope rule names the unknown scope keys:exprot/,
  )
  assert.throws(
    () =>
      app.post(
        '/api/v1/empty-condition',
        {
          config: {
            access: scoped({ anyOf: ['keys:write'], conditions: { defaultKey: { anyOf: [], allOf: [] } } }),
          },
        },
        async () => ({}),
      ),
    /its condition defaultKey names no scope/,
  )
})

test('a partner is the request’s principal: no other decoration, and never a tenant’s caller', async () => {
  const { app } = await appWith((app) => {
    app.get('/api/v1/partners/me', { config: { access: access.partner() } }, async (request) => ({
      principal: request.principal,
      partner: partnerOf(request),
      decorated: 'partner' in request,
    }))
    app.get('/api/v1/partners/api-keys', { config: { access: access.partnerPortal() } }, async (request) => ({
      accountId: partnerOf(request).accountId,
    }))
    app.get('/api/v1/tenant', { config: { access: access.authenticated() } }, async (request) => ({
      tenantId: principalOf(request).tenantId,
    }))
  })
  try {
    const get = (url: string, headers: Record<string, string>) => app.inject({ method: 'GET', url, headers })
    const byKey = await get('/api/v1/partners/me', { authorization: 'Bearer kmsp_key-1' })
    assert.equal(byKey.statusCode, 200, byKey.body)
    const body = byKey.json()
    assert.equal(body.principal.kind, 'partner')
    assert.equal(body.partner.partnerId, 'partner-1')
    assert.equal(body.partner.keyId, 'key-1')
    assert.equal(body.partner.accountId, null)
    assert.equal(body.decorated, false, 'request.partner is gone')

    const session = await get('/api/v1/partners/api-keys', { authorization: 'Bearer portal' })
    assert.deepEqual(session.json(), { accountId: 'account-1' })
    const keyOnPortalRoute = await get('/api/v1/partners/api-keys', { authorization: 'Bearer kmsp_key-1' })
    assert.equal(keyOnPortalRoute.statusCode, 403)
    assert.equal(keyOnPortalRoute.json().error, 'partner_session_required')

    // Partner credentials are 401 on tenants' routes, and tenants' on partners'.
    assert.equal((await get('/api/v1/tenant', { authorization: 'Bearer kmsp_key-1' })).statusCode, 401)
    assert.equal((await get('/api/v1/tenant', { authorization: 'Bearer portal' })).statusCode, 401)
    assert.equal((await get('/api/v1/partners/me', { 'x-api-key': 'keys:read' })).statusCode, 401)
    assert.equal((await get('/api/v1/partners/me', { authorization: 'Bearer developer' })).statusCode, 401)
  } finally {
    await app.close()
  }
})
