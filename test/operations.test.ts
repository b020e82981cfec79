import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { parse as parseOpenApi, validate as validateOpenApi } from '@readme/openapi-parser'
import postgres from 'postgres'
import {
  createTestDatabase,
  httpRequest,
  spawnService,
  startTestService,
  type TestDatabase,
  type TestService,
  testEnv,
  waitFor,
} from './helpers/service.ts'

/** Flattens Fastify's printRoutes tree into `METHOD /path/{param}` entries. */
function registeredRoutes(tree: string): string[] {
  const prefixes: string[] = []
  const out: string[] = []
  for (const line of tree.split('\n')) {
    const match = /^(.*?)[├└]── (\S+) \(([^)]+)\)$/.exec(line)
    if (!match) continue
    const depth = match[1]!.length / 4
    const path = (prefixes[depth - 1] ?? '') + match[2]!
    prefixes[depth] = path
    for (const method of match[3]!.split(', ')) out.push(`${method} ${path.replace(/:(\w+)/g, '{$1}')}`)
  }
  return out
}

describe('OpenAPI document', () => {
  let svc: TestService
  before(async () => {
    svc = await startTestService()
  })
  after(async () => svc?.stop())

  test('is served without a key, validates as OpenAPI 3 and lists every route', async () => {
    const res = await svc.request('GET', '/api/v1/openapi.json')
    assert.equal(res.status, 200)
    assert.match(res.body.openapi, /^3\./)
    const result = await validateOpenApi(structuredClone(res.body))
    assert.equal(result.valid, true, JSON.stringify(result))
    await parseOpenApi(structuredClone(res.body))

    const documented = new Set<string>()
    for (const [path, item] of Object.entries(res.body.paths as Record<string, Record<string, unknown>>)) {
      for (const method of Object.keys(item)) documented.add(`${method.toUpperCase()} ${path}`)
    }
    // Every route the server really has under /api/v1 (bar the document itself) is in the document.
    const registered = registeredRoutes(svc.api.app.printRoutes({ commonPrefix: false })).filter((r) =>
      r.includes(' /api/v1/'),
    )
    const undocumented = registered.filter(
      (r) => !r.startsWith('HEAD ') && !r.endsWith('/openapi.json') && !documented.has(r),
    )
    assert.ok(registered.length >= 7)
    assert.deepEqual(undocumented, [])
    assert.equal(res.body.components.securitySchemes.ApiKey.name, 'X-Api-Key')
  })

  test('the browsable reference is served at /docs', async () => {
    const res = await svc.request('GET', '/docs/')
    assert.equal(res.status, 200)
    assert.match(res.headers.get('content-type') ?? '', /text\/html/)
  })
})

describe('Redis unreachable', () => {
  let svc: TestService
  before(async () => {
    // Nothing listens on port 1: the service must start and serve without Redis.
    svc = await startTestService({ REDIS_URL: 'redis://127.0.0.1:1' })
  })
  after(async () => svc?.stop())

  test('the API keeps serving, health says degraded, and revocation still applies locally', async () => {
    const health = await svc.request('GET', '/api/v1/health')
    assert.equal(health.status, 200)
    assert.equal(health.body.status, 'degraded')
    assert.equal(health.body.redis.status, 'down')
    assert.equal(health.body.database.status, 'up')

    const admin = await svc.createTenant()
    const made = await svc.request('POST', '/api/v1/api-keys', {
      key: admin.key,
      body: { name: 'k', scopes: ['audit:read'] },
    })
    assert.equal(made.status, 201)
    assert.equal((await svc.request('GET', '/api/v1/audit', { key: made.body.key })).status, 200)
    assert.equal(
      (await svc.request('POST', `/api/v1/api-keys/${made.body.id}/revoke`, { key: admin.key })).status,
      200,
    )
    assert.equal((await svc.request('GET', '/api/v1/audit', { key: made.body.key })).status, 401)
  })
})

describe('processes and shutdown', () => {
  let db: TestDatabase
  before(async () => {
    db = await createTestDatabase()
  })
  after(async () => db?.drop())

  test('npm start runs the configured number of API processes on one port and stops cleanly on SIGTERM', async () => {
    const env = testEnv(db, { KMS_API_PROCESSES: '2', KMS_BOOTSTRAP: 'true' })
    const svc = await spawnService(env)
    const key = /kms_[A-Za-z0-9]{52}/.exec(svc.output())?.[0]
    assert.ok(key, 'bootstrap key printed on the first start')
    // Both API processes answer on the shared port; each reports its pid in the logs.
    const results = await Promise.all(
      Array.from({ length: 40 }, () => httpRequest(svc.baseUrl, 'GET', '/api/v1/tenant', { key })),
    )
    assert.ok(results.every((r) => r.status === 200))
    const listeners = () =>
      new Set([...svc.output().matchAll(/"pid":(\d+),[^\n]*"msg":"Server listening/g)].map((m) => m[1]))
    await waitFor(() => listeners().size >= 2, 'both API processes to log that they listen')
    assert.equal(listeners().size, 2, 'two API processes listen')

    // A request in flight when SIGTERM arrives still gets its answer. A table lock holds the
    // request inside its transaction until both API processes have begun shutting down.
    const blocker = postgres(db.url, { max: 1, onnotice: () => {} })
    const lock = await blocker.reserve()
    await lock`BEGIN`
    await lock`LOCK TABLE audit_log IN ACCESS EXCLUSIVE MODE`
    const inflight = httpRequest(svc.baseUrl, 'POST', '/api/v1/api-keys', {
      key,
      body: { name: 'during-shutdown', scopes: ['audit:read'] },
    })
    await waitFor(async () => {
      const [waiting] = await lock`
        SELECT count(*)::int AS n FROM pg_stat_activity
        WHERE datname = current_database() AND wait_event_type = 'Lock'`
      return waiting!['n'] > 0
    }, 'the request to wait on the audit table lock')
    const exited = svc.stop('SIGTERM')
    await waitFor(
      () => (svc.output().match(/finishing in-flight requests/g) ?? []).length >= 2,
      'both API processes to start shutting down',
    )
    await lock`COMMIT`
    lock.release()
    await blocker.end()

    const answered = await inflight
    assert.equal(answered.status, 201, 'the in-flight request completed')
    assert.equal(await exited, 0, svc.output().slice(-2000))
    const check = postgres(db.url, { max: 1, onnotice: () => {} })
    const [row] = await check`SELECT count(*)::int AS n FROM api_keys WHERE name = 'during-shutdown'`
    await check.end()
    assert.equal(row!['n'], 1)
    assert.match(svc.output(), /shutting down/)
  })
})
