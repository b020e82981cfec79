import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import {
  httpRequest,
  runCli,
  type SpawnedService,
  spawnService,
  startTestService,
  type TestService,
} from './helpers/service.ts'
import { consoleClient, memberSession } from './helpers/sign-in.ts'

const CONSOLE_REDIRECT = 'http://127.0.0.1:9/console'

describe('partner API: partner keys only, isolation, and a rate limit shared by every process', () => {
  let a: TestService
  let b: SpawnedService

  before(async () => {
    a = await startTestService({ KMS_CONSOLE_REDIRECT_URIS: CONSOLE_REDIRECT })
    // A second API process of the same deployment (database, Redis and its prefix).
    b = await spawnService({ ...a.env, ID_URL: a.baseUrl })
  })
  after(async () => {
    await b?.stop()
    await a?.stop()
  })

  let counter = 0
  async function partnerWithKey() {
    const partners = a.api.services.partners
    const partner = await partners.createPartner(
      { name: `Partner ${++counter}`, email: `p${counter}@example.com` },
      'test',
    )
    const { key } = await partners.createKey(partner.id, 'main', 'test')
    return { id: partner.id, key, headers: { authorization: `Bearer ${key}` } }
  }

  test('codes and referrals: each partner sees its own; a code’s URL carries it as ?ref=', async () => {
    const one = await partnerWithKey()
    const two = await partnerWithKey()
    const made = await a.request('POST', '/api/v1/partners/codes', {
      headers: one.headers,
      body: { label: 'Spring' },
    })
    assert.equal(made.status, 201, made.text)
    assert.match(made.body.code, /^[A-Z0-9]{10}$/)
    assert.equal(made.body.url, `${a.baseUrl}/signup?ref=${made.body.code}`)
    // A tenant signs up through the code (what the sign-up does with ?ref=).
    const tenant = await a.createTenant()
    assert.equal(await a.api.services.partners.attribute(tenant.tenantId, made.body.code.toLowerCase()), true)
    assert.equal(await a.api.services.partners.attribute(tenant.tenantId, 'NOSUCHCODE1'), false)

    const mine = await a.request('GET', '/api/v1/partners/referrals', { headers: one.headers })
    assert.equal(mine.status, 200, mine.text)
    assert.equal(mine.body.total, 1)
    assert.deepEqual(Object.keys(mine.body.data[0]).sort(), ['createdAt', 'id', 'status', 'tenantId'])
    assert.equal(mine.body.data[0].tenantId, tenant.tenantId)
    assert.equal(mine.body.data[0].status, 'active')
    const theirs = await a.request('GET', '/api/v1/partners/referrals', { headers: two.headers })
    assert.deepEqual(theirs.body, { data: [], total: 0 })
    // Pagination.
    const page = await a.request('GET', '/api/v1/partners/referrals?limit=1&offset=1', {
      headers: one.headers,
    })
    assert.deepEqual(page.body, { data: [], total: 1 })

    const commissions = await a.request('GET', '/api/v1/partners/commissions?period=2026-11', {
      headers: two.headers,
    })
    assert.equal(commissions.status, 200, commissions.text)
    assert.deepEqual(commissions.body, { data: [], totalAmount: 0 })
    for (const period of ['2026-13', '2026-1', 'november', '']) {
      const bad = await a.request('GET', `/api/v1/partners/commissions?period=${period}`, {
        headers: one.headers,
      })
      assert.equal(bad.status, 400, period)
      assert.match(JSON.stringify(bad.body), /period/)
    }
  })

  test('only partner keys reach the partner API, and partner keys reach nothing else (401)', async () => {
    const partner = await partnerWithKey()
    const tenant = await a.createTenant()
    const member = await memberSession(
      a,
      await consoleClient(a.baseUrl, CONSOLE_REDIRECT),
      tenant.tenantId,
      'tenant:owner',
    )
    for (const [what, headers] of [
      ['a tenant API key', { 'x-api-key': tenant.key }],
      ['a tenant API key as Bearer', { authorization: `Bearer ${tenant.key}` }],
      ['a member access token', member.headers],
      ['a partner key as X-Api-Key', { 'x-api-key': partner.key }],
      ['a partner key and a tenant key', { ...partner.headers, 'x-api-key': tenant.key }],
      ['a malformed partner key', { authorization: `Bearer ${partner.key.slice(0, -1)}x` }],
      ['nothing', {}],
    ] as const) {
      for (const [method, path] of [
        ['GET', '/api/v1/partners/referrals'],
        ['GET', '/api/v1/partners/commissions?period=2026-11'],
        ['POST', '/api/v1/partners/codes'],
      ] as const) {
        const result = await a.request(method, path, {
          headers: { ...headers },
          body: method === 'POST' ? { label: 'x' } : undefined,
        })
        assert.equal(result.status, 401, `${what}: ${method} ${path} -> ${result.status}`)
        assert.equal(result.body.error, 'unauthorized')
      }
    }
    for (const path of [
      '/api/v1/keys',
      '/api/v1/tenant',
      '/api/v1/billing/usage',
      '/api/v1/partners/nothing-here',
    ]) {
      const result = await a.request('GET', path, { headers: partner.headers })
      assert.equal(result.status, 401, `partner key on ${path}`)
    }
  })

  test('100 requests a minute per key across two processes: the 101st is 429 on either; another key is unaffected', async () => {
    const limited = await partnerWithKey()
    const other = await partnerWithKey()
    const path = '/api/v1/partners/referrals'
    const bases = [a.baseUrl, b.baseUrl]
    let remaining: string | null = null
    for (let i = 0; i < 100; i++) {
      const result = await httpRequest(bases[i % 2]!, 'GET', path, { headers: limited.headers })
      assert.equal(result.status, 200, `request ${i + 1} on process ${(i % 2) + 1}: ${result.text}`)
      remaining = result.headers.get('ratelimit-remaining')
      assert.equal(result.headers.get('ratelimit-limit'), '100')
    }
    assert.equal(remaining, '0', 'the last allowed request says none remain')
    for (const base of bases) {
      const refused = await httpRequest(base, 'GET', path, { headers: limited.headers })
      assert.equal(refused.status, 429, `the 101st on ${base}`)
      assert.equal(refused.body.error, 'rate_limited')
      const retryAfter = Number(refused.headers.get('retry-after'))
      assert.ok(retryAfter >= 1 && retryAfter <= 60, `Retry-After ${retryAfter}`)
      assert.equal(refused.headers.get('ratelimit-remaining'), '0')
    }
    const unaffected = await httpRequest(b.baseUrl, 'GET', path, { headers: other.headers })
    assert.equal(unaffected.status, 200)
    assert.equal(unaffected.headers.get('ratelimit-remaining'), '99')
  })
  test('the CLI creates a partner and a key, printed once; the key works at once', async () => {
    const made = await runCli(
      ['create-partner', '--name', 'Acme Consulting', '--email', 'partners@acme.example'],
      a.env,
    )
    assert.equal(made.code, 0, made.stderr)
    const partner = JSON.parse(made.stdout)
    assert.equal(partner.status, 'active')
    const key = await runCli(['create-partner-key', '--partner', partner.id, '--name', 'main'], a.env)
    assert.equal(key.code, 0, key.stderr)
    const printed = JSON.parse(key.stdout)
    assert.match(printed.key, /^kmsp_[A-Za-z0-9]{52}$/)
    const [stored] = await a.sql<
      { secret_hash: Buffer }[]
    >`SELECT secret_hash FROM partner_api_keys WHERE id = ${printed.id}`
    assert.ok(!stored!.secret_hash.toString('latin1').includes(printed.key), 'only a hash is stored')
    const used = await a.request('GET', '/api/v1/partners/referrals', {
      headers: { authorization: `Bearer ${printed.key}` },
    })
    assert.equal(used.status, 200)
    const unknown = await runCli(
      ['create-partner-key', '--partner', crypto.randomUUID(), '--name', 'x'],
      a.env,
    )
    assert.equal(unknown.code, 1)
    const badEmail = await runCli(['create-partner', '--name', 'X', '--email', 'not-an-address'], a.env)
    assert.equal(badEmail.code, 1)
  })
})
