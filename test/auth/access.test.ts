import assert from 'node:assert/strict'
import { test } from 'node:test'
import Fastify from 'fastify'
import type { Authenticator } from '../../src/api-keys/api-key-authenticator.ts'
import { access } from '../../src/auth/access.ts'
import { registerAuthentication } from '../../src/auth/auth-hook.ts'
import { scopesOfRole, TENANT_ROLES } from '../../src/auth/roles.ts'
import { SCOPES } from '../../src/auth/scopes.ts'

/**
 * Per-route access (src/auth/access.ts): deny by default at start-up, and the role → scope
 * mapping of docs/identity.md. The enforcement over HTTP is tested with the real service in
 * scopes.test.ts and the team and settings tests.
 */

const noKeys: Authenticator = { authenticate: async () => undefined, invalidate: async () => {} }
const noAudit = { record: async () => {} } as never

test('a route under /api/v1 that declares no access stops the start, naming the route', async () => {
  const app = Fastify()
  registerAuthentication(app, { authenticator: noKeys, audit: noAudit })
  app.get('/api/v1/declared', { config: { access: access.public() } }, async () => ({ ok: true }))
  // Fastify runs onRoute hooks as the route is added: the start stops right there.
  assert.throws(
    () => app.get('/api/v1/forgotten', async () => ({ ok: true })),
    /GET \/api\/v1\/forgotten declares no config\.access/,
  )
})

test('routes outside /api/v1 need no declaration (other surfaces authenticate themselves)', async () => {
  const app = Fastify()
  registerAuthentication(app, { authenticator: noKeys, audit: noAudit })
  app.get('/.well-known/openid-configuration', async () => ({}))
  await app.ready()
  const res = await app.inject({ method: 'GET', url: '/.well-known/openid-configuration' })
  assert.equal(res.statusCode, 200)
  await app.close()
})

test('roles map to scopes as docs/identity.md says', () => {
  const viewer = scopesOfRole('tenant:viewer')
  assert.deepEqual([...viewer].sort(), SCOPES.filter((s) => s.endsWith(':read') && s !== 'audit:read').sort())
  const developer = scopesOfRole('tenant:developer')
  for (const scope of viewer) assert.ok(developer.has(scope), `developer has ${scope}`)
  for (const scope of ['keys:write', 'secrets:write', 'encryption:write', 'applications:write'] as const)
    assert.ok(developer.has(scope), `developer has ${scope}`)
  for (const scope of ['audit:read', 'keys:export', 'apikeys:write', 'endusers:write'] as const)
    assert.ok(!developer.has(scope), `developer lacks ${scope}`)
  assert.deepEqual([...scopesOfRole('tenant:admin')].sort(), [...SCOPES].sort())
  assert.deepEqual([...scopesOfRole('tenant:owner')].sort(), [...SCOPES].sort())
  assert.equal(TENANT_ROLES.length, 4)
})
