import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { type ManualClock, manualClock } from './helpers/manual-clock.ts'
import { runCli, startTestService, type TestService } from './helpers/service.ts'
import { consoleClient, memberSession } from './helpers/sign-in.ts'

const CONSOLE_REDIRECT = 'http://127.0.0.1:9/console'
const b64 = (text: string) => Buffer.from(text).toString('base64')

describe('billing: plans, subscription, and usage from the meter', () => {
  let service: TestService
  let clock: ManualClock

  before(async () => {
    // The meter files an operation under its audit record's time (the wall clock); the service's
    // clock, which says what "this month" is, starts at the same time.
    clock = manualClock()
    service = await startTestService({ KMS_CONSOLE_REDIRECT_URIS: CONSOLE_REDIRECT }, { clock })
  })
  after(() => service.stop())

  async function ok(method: string, path: string, key: string, body?: unknown, status = 200) {
    const result = await service.request(method, `/api/v1${path}`, {
      key,
      ...(body === undefined ? {} : { body }),
    })
    assert.equal(result.status, status, `${method} ${path}: ${result.text.slice(0, 300)}`)
    return result.body
  }

  test('usage counts every operation kind of the benchmark scenarios exactly; refusals are not counted', async () => {
    const { key, tenantId } = await service.createTenant()
    const encryption = (
      await ok('POST', '/keys', key, { name: 'enc', keyType: 'Encryption', isDefault: true }, 201)
    ).id
    const signing = (
      await ok(
        'POST',
        '/keys',
        key,
        { name: 'sig', keyType: 'Signing', algorithm: 'Ed25519', isDefault: true },
        201,
      )
    ).id
    const hmac = (
      await ok('POST', '/keys', key, { name: 'mac', keyType: 'HMAC', algorithm: 'HMAC-SHA256' }, 201)
    ).id

    const expected = {
      encrypt: 0,
      decrypt: 0,
      sign: 0,
      verify: 0,
      mac: 0,
      mac_verify: 0,
      generate_data_key: 0,
      wrap: 0,
      unwrap: 0,
    }
    // 3 encryptions (one binary), 2 decryptions.
    const envelopes = []
    for (const text of ['a', 'b'])
      envelopes.push(await ok('POST', '/encrypt', key, { keyId: encryption, plaintext: b64(text) }))
    const binary = await fetch(`${service.baseUrl}/api/v1/encrypt`, {
      method: 'POST',
      headers: { 'x-api-key': key, 'content-type': 'application/octet-stream', 'x-key-id': encryption },
      body: Buffer.from('binary plaintext'),
    })
    assert.equal(binary.status, 200, await binary.clone().text())
    expected.encrypt += 3
    for (const envelope of envelopes) await ok('POST', '/decrypt', key, envelope)
    expected.decrypt += 2
    // Batches count their items: 5 encryptions, then 4 of them decrypted.
    const batch = await ok('POST', '/encrypt/batch', key, {
      items: ['1', '2', '3', '4', '5'].map((t) => ({ keyId: encryption, plaintext: b64(t) })),
    })
    expected.encrypt += 5
    const sealed = (batch.results as Array<Record<string, unknown>>)
      .slice(0, 4)
      .map(({ ok: _ok, ...envelope }) => envelope)
    const opened = await ok('POST', '/decrypt/batch', key, { items: sealed })
    assert.ok((opened.results as Array<{ ok: boolean }>).every((r) => r.ok))
    expected.decrypt += 4
    // Signatures, MACs, data keys, wrap and unwrap.
    const signed = await ok('POST', '/sign', key, { keyId: signing, message: b64('m') })
    await ok('POST', '/sign', key, { keyId: signing, message: b64('n') })
    expected.sign += 2
    await ok('POST', '/verify', key, { keyId: signing, message: b64('m'), signature: signed.signature })
    expected.verify += 1
    const mac = await ok('POST', `/keys/${hmac}/mac`, key, { data: b64('d') })
    await ok('POST', `/keys/${hmac}/mac`, key, { data: b64('e') })
    expected.mac += 2
    await ok('POST', `/keys/${hmac}/mac/verify`, key, { data: b64('d'), mac: mac.mac })
    expected.mac_verify += 1
    await ok('POST', '/generate-data-key', key, { keyId: encryption })
    await ok('POST', `/keys/${encryption}/data-key`, key, {})
    expected.generate_data_key += 2
    const wrapped = await ok('POST', `/keys/${encryption}/wrap`, key, {
      plaintext: b64('0123456789abcdef0123456789abcdef'),
    })
    expected.wrap += 1
    await ok('POST', `/keys/${encryption}/unwrap`, key, { wrappedKey: wrapped.wrappedKey })
    expected.unwrap += 1
    // Refusals are audited but are not usage.
    for (const [path, body] of [
      ['/encrypt', { keyId: signing, plaintext: b64('x') }],
      ['/decrypt', { ...envelopes[0], ciphertext: b64('tampered') }],
    ] as const) {
      const refused = await service.request('POST', `/api/v1${path}`, { key, body })
      assert.ok(refused.status >= 400 && refused.status < 500, `${path}: ${refused.status}`)
    }

    const usage = await ok('GET', '/billing/usage', key)
    assert.equal(usage.data.length, 1)
    assert.equal(usage.data[0].period, new Date().toISOString().slice(0, 7))
    assert.deepEqual(usage.data[0].operations, expected)
    assert.equal(
      usage.data[0].totalOperations,
      Object.values(expected).reduce((a, b) => a + b, 0),
    )
    assert.deepEqual(usage.current, { keys: 3, secrets: 0, endUsers: 0 })
    assert.equal(usage.data[0].operationsQuota, 10_000)

    // The meter agrees with the audit log it rides on (the independent count).
    const [audited] = await service.sql<{ total: string }[]>`
      SELECT sum(CASE WHEN action LIKE '%\\_batch' THEN (details->>'items')::int ELSE 1 END)::text AS total
      FROM audit_log WHERE tenant_id = ${tenantId} AND outcome = 'success' AND action LIKE 'crypto.%'`
    assert.equal(Number(audited!.total), usage.data[0].totalOperations)

    // The sweep folds the meter's rows (one per audit write) into one per kind; the report is unchanged.
    const rowsBefore = await service.sql`SELECT 1 FROM usage_counters WHERE tenant_id = ${tenantId}`
    assert.ok(rowsBefore.length > Object.keys(expected).length, 'one row per audit write before folding')
    await service.api.services.billing.foldUsage()
    const rowsAfter = await service.sql`SELECT 1 FROM usage_counters WHERE tenant_id = ${tenantId}`
    assert.equal(rowsAfter.length, Object.keys(expected).length)
    assert.deepEqual((await ok('GET', '/billing/usage', key)).data, usage.data)

    // Another tenant's usage is its own.
    const other = await service.createTenant()
    const otherUsage = await ok('GET', '/billing/usage', other.key)
    assert.equal(otherUsage.data[0].totalOperations, 0)
  })

  test('folding while operations are written, by two sweeps at once, loses and doubles nothing', async () => {
    const { key } = await service.createTenant()
    const mac = (
      await ok('POST', '/keys', key, { name: 'mac', keyType: 'HMAC', algorithm: 'HMAC-SHA256' }, 201)
    ).id
    const billing = service.api.services.billing
    let writing = true
    const operations = (async () => {
      for (let round = 0; round < 10; round++)
        await Promise.all(
          Array.from({ length: 20 }, () => ok('POST', `/keys/${mac}/mac`, key, { data: b64('d') })),
        )
      writing = false
    })()
    const sweeps = [0, 1].map(async () => {
      while (writing) await billing.foldUsage()
    })
    await Promise.all([operations, ...sweeps])
    await Promise.all([billing.foldUsage(), billing.foldUsage()])
    const usage = await ok('GET', '/billing/usage', key)
    assert.equal(usage.data[0].operations.mac, 200)
    assert.equal(usage.data[0].totalOperations, 200)
  })

  test('months: a range lists each month, oldest first; an operation is filed under its UTC month; bad ranges are 400', async () => {
    const { key, tenantId } = await service.createTenant()
    // Audit records written with their own time, through the service's audit log (the meter rides on it).
    const audit = service.api.services.audit
    const operation = (occurredAt: string, action = 'crypto.encrypt', details?: Record<string, number>) =>
      audit.record({
        tenantId,
        actor: 'test',
        action,
        outcome: 'success',
        occurredAt: new Date(occurredAt),
        ...(details ? { details } : {}),
      })
    await operation('2026-10-31T23:59:59Z')
    // 00:30 on 1 November in Paris is still October in UTC.
    await operation('2026-11-01T00:30:00+01:00', 'crypto.sign')
    await operation('2026-11-01T00:00:00Z', 'crypto.decrypt_batch', { items: 7 })
    const range = await ok('GET', '/billing/usage?from=2026-09&to=2026-11', key)
    assert.deepEqual(
      range.data.map((m: { period: string; totalOperations: number }) => [m.period, m.totalOperations]),
      [
        ['2026-09', 0],
        ['2026-10', 2],
        ['2026-11', 7],
      ],
    )
    assert.equal(range.data[1].operations.sign, 1)
    assert.equal(range.data[2].operations.decrypt, 7)
    const single = await ok('GET', '/billing/usage?from=2026-10', key)
    assert.deepEqual(
      single.data.map((m: { period: string }) => m.period),
      ['2026-10'],
    )
    for (const [query, field] of [
      ['from=2026-13', 'querystring/from'],
      ['to=26-01', 'querystring/to'],
      ['from=2026-11&to=2026-10', 'querystring/from'],
    ] as const) {
      const bad = await service.request('GET', `/api/v1/billing/usage?${query}`, { key })
      assert.equal(bad.status, 400, query)
      assert.match(JSON.stringify(bad.body), new RegExp(field))
    }
    const tooLong = await service.request('GET', '/api/v1/billing/usage?from=2020-01&to=2026-11', { key })
    assert.equal(tooLong.status, 400)
    assert.equal(tooLong.body.error, 'range_too_long')
  })

  test('plans and subscription: Free by default; an owner changes the plan, audited; others cannot', async () => {
    clock.set(new Date('2026-11-25T12:00:00Z'))
    const { key, tenantId } = await service.createTenant()
    const plans = await ok('GET', '/billing/plans', key)
    assert.deepEqual(
      plans.data.map((p: { id: string; monthlyPriceMinor: number; currency: string }) => [
        p.id,
        p.monthlyPriceMinor,
        p.currency,
      ]),
      [
        ['free', 0, 'EUR'],
        ['pro', 4900, 'EUR'],
        ['enterprise', 49900, 'EUR'],
      ],
    )
    const initial = await ok('GET', '/billing/subscription', key)
    assert.equal(initial.plan.id, 'free')
    assert.equal(initial.status, 'active')
    assert.deepEqual(initial.currentPeriod, {
      start: '2026-11-01T00:00:00.000Z',
      end: '2026-12-01T00:00:00.000Z',
    })
    assert.deepEqual(initial.nextInvoice, {
      date: '2026-12-01T00:00:00.000Z',
      amount: 0,
      amountMinor: 0,
      currency: 'EUR',
    })

    // An API key, whatever its scopes, and an admin cannot change the plan; the owner can.
    const byKey = await service.request('PUT', '/api/v1/billing/subscription', {
      key,
      body: { planId: 'pro' },
    })
    assert.equal(byKey.status, 403)
    clock.set(new Date())
    const console_ = await consoleClient(service.baseUrl, CONSOLE_REDIRECT)
    const admin = await memberSession(service, console_, tenantId, 'tenant:admin')
    const owner = await memberSession(service, console_, tenantId, 'tenant:owner')
    const byAdmin = await service.request('PUT', '/api/v1/billing/subscription', {
      headers: admin.headers,
      body: { planId: 'pro' },
    })
    assert.equal(byAdmin.status, 403)
    const unknown = await service.request('PUT', '/api/v1/billing/subscription', {
      headers: owner.headers,
      body: { planId: 'platinum' },
    })
    assert.equal(unknown.status, 400)
    assert.match(unknown.body.message, /free, pro, enterprise/)
    const changed = await service.request('PUT', '/api/v1/billing/subscription', {
      headers: owner.headers,
      body: { planId: 'pro' },
    })
    assert.equal(changed.status, 200, changed.text)
    assert.equal(changed.body.plan.id, 'pro')
    assert.equal(changed.body.nextInvoice.amount, 49)
    assert.equal(changed.body.nextInvoice.amountMinor, 4900)
    assert.equal((await ok('GET', '/billing/subscription', key)).plan.id, 'pro')
    const audit = await ok('GET', '/audit?action=billing.plan.change', key)
    assert.equal(audit.data.length, 1)
    assert.equal(audit.data[0].actor, `member:${owner.accountId}`)
    assert.deepEqual(audit.data[0].details, { from: 'free', to: 'pro' })
    // The same plan again changes nothing and records nothing.
    await service.request('PUT', '/api/v1/billing/subscription', {
      headers: owner.headers,
      body: { planId: 'pro' },
    })
    assert.equal((await ok('GET', '/audit?action=billing.plan.change', key)).data.length, 1)
  })
  test('the CLI moves a tenant to another plan (audited as cli); an unknown plan or tenant fails with exit 1', async () => {
    const { key, tenantId } = await service.createTenant()
    const moved = await runCli(['set-plan', '--tenant', tenantId, '--plan', 'enterprise'], service.env)
    assert.equal(moved.code, 0, moved.stderr)
    assert.equal(JSON.parse(moved.stdout).plan.id, 'enterprise')
    assert.equal((await ok('GET', '/billing/subscription', key)).plan.id, 'enterprise')
    const audit = await ok('GET', '/audit?action=billing.plan.change', key)
    assert.equal(audit.data[0].actor, 'cli')
    const unknownPlan = await runCli(['set-plan', '--tenant', tenantId, '--plan', 'platinum'], service.env)
    assert.equal(unknownPlan.code, 1)
    assert.match(unknownPlan.stderr, /free, pro, enterprise/)
    const unknownTenant = await runCli(
      ['set-plan', '--tenant', crypto.randomUUID(), '--plan', 'pro'],
      service.env,
    )
    assert.equal(unknownTenant.code, 1)
    const missing = await runCli(['set-plan', '--tenant', tenantId], service.env)
    assert.equal(missing.code, 2)
  })
})
