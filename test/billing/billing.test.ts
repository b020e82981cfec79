import assert from 'node:assert/strict'
import { createHmac } from 'node:crypto'
import { after, before, describe, test } from 'node:test'
import { type ManualClock, manualClock } from '../helpers/manual-clock.ts'
import { runCli, startTestService, type TestService, waitFor } from '../helpers/service.ts'
import { consoleClient, memberSession } from '../helpers/sign-in.ts'

const CONSOLE_REDIRECT = 'http://127.0.0.1:9/console'
const b64 = (text: string) => Buffer.from(text).toString('base64')
const WEBHOOK_SECRET = 'whsec_test_0123456789abcdef'

/** What Stripe sends: the event JSON, signed as its documentation describes (t=…,v1=hex HMAC of "t.body"). */
function stripeDelivery(event: Record<string, unknown>, options: { secret?: string; at?: Date } = {}) {
  const body = JSON.stringify(event)
  const t = Math.floor((options.at ?? new Date()).getTime() / 1000)
  const v1 = createHmac('sha256', options.secret ?? WEBHOOK_SECRET)
    .update(`${t}.${body}`)
    .digest('hex')
  return { body, signature: `t=${t},v1=${v1}` }
}

describe('billing: plans, subscription, and usage folded from the audit log', () => {
  let service: TestService
  let clock: ManualClock

  before(async () => {
    // The meter files an operation under its audit record's time (the wall clock); the service's
    // clock, which says what "this month" is, starts at the same time.
    clock = manualClock()
    service = await startTestService(
      { KMS_CONSOLE_REDIRECT_URIS: CONSOLE_REDIRECT, KMS_STRIPE_WEBHOOK_SECRET: WEBHOOK_SECRET },
      { clock },
    )
  })
  after(() => service.stop())

  /** Runs the billing sweep's fold until it has folded every record written so far. */
  async function foldUsage() {
    const [last] = await service.sql<{ id: string }[]>`SELECT coalesce(max(id), 0)::text AS id FROM audit_log`
    await waitFor(
      async () => {
        await service.api.services.billing.foldUsage()
        const [cursor] = await service.sql<{ position: string }[]>`
        SELECT position::text FROM audit_feed_cursors WHERE consumer = 'billing.usage'`
        return BigInt(cursor!.position) >= BigInt(last!.id)
      },
      'the usage fold',
      60_000,
    )
  }

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
      re_encrypt: 0,
      certificate_issue: 0,
      certificate_revoke: 0,
      ssh_certificate_issue: 0,
      ssh_certificate_revoke: 0,
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

    // The report agrees with an independent count over the audit log.
    const [audited] = await service.sql<{ total: string }[]>`
      SELECT sum(CASE WHEN action LIKE '%\\_batch' THEN (details->>'items')::int ELSE 1 END)::text AS total
      FROM audit_log WHERE tenant_id = ${tenantId} AND outcome = 'success' AND action LIKE 'crypto.%'`
    assert.equal(Number(audited!.total), usage.data[0].totalOperations)

    // The report counted the records the billing sweep has not folded; the sweep folds them into
    // one row per kind, and the report is unchanged.
    const totals = () => service.sql`SELECT kind FROM usage_totals WHERE tenant_id = ${tenantId}`
    assert.equal((await totals()).length, 0, 'nothing folded before the sweep')
    await foldUsage()
    // One row per kind used (the kinds this scenario does not use, such as certificates, have none).
    assert.equal((await totals()).length, Object.values(expected).filter((count) => count > 0).length)
    assert.deepEqual((await ok('GET', '/billing/usage', key)).data, usage.data)
    await foldUsage()
    assert.deepEqual((await ok('GET', '/billing/usage', key)).data, usage.data, 'a second sweep adds nothing')

    // Another tenant's usage is its own.
    const other = await service.createTenant()
    const otherUsage = await ok('GET', '/billing/usage', other.key)
    assert.equal(otherUsage.data[0].totalOperations, 0)
  })

  test('folding while operations are written, by two sweeps at once, loses and doubles nothing', async () => {
    const { key, tenantId } = await service.createTenant()
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
    // Once every record is folded, the totals alone hold each operation once.
    await foldUsage()
    const [folded] = await service.sql<{ total: string }[]>`
      SELECT sum(count)::text AS total FROM usage_totals WHERE tenant_id = ${tenantId}`
    assert.equal(folded!.total, '200')
  })

  test('months: a range lists each month, oldest first; an operation is filed under its UTC month; bad ranges are 400', async () => {
    const { key, tenantId } = await service.createTenant()
    // Audit records written with their own time, through the service's audit log (usage is folded from it).
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
    // Folded, the same.
    await foldUsage()
    assert.deepEqual((await ok('GET', '/billing/usage?from=2026-09&to=2026-11', key)).data, range.data)
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
  async function postWebhook(delivery: { body: string; signature?: string }) {
    return service.request('POST', '/api/v1/billing/webhooks/stripe', {
      rawBody: delivery.body,
      headers: {
        'content-type': 'application/json',
        ...(delivery.signature ? { 'stripe-signature': delivery.signature } : {}),
      },
    })
  }

  test('invoices: issued once per tenant and month for paid plans; paid by a signed Stripe event, once', async () => {
    // A month with a Pro tenant, a Free tenant, and one that moves to Pro only after the month.
    clock.set(new Date('2031-03-10T09:00:00Z'))
    const pro = await service.createTenant()
    const free = await service.createTenant()
    const late = await service.createTenant()
    const billing = service.api.services.billing
    const cli = (tenantId: string) => ({ tenantId, actor: 'cli', requestId: null, clientIp: null })
    await billing.changePlan(cli(pro.tenantId), 'pro')
    await billing.changePlan(cli(free.tenantId), 'free')
    clock.set(new Date('2031-04-02T00:00:00Z'))
    await billing.changePlan(cli(late.tenantId), 'pro')
    // Not a month that has ended.
    await assert.rejects(billing.issueInvoices('2031-04'), /must be a month that has ended/)
    // The job runs twice (and the default month is the last one).
    const first = await billing.issueInvoices()
    const second = await billing.issueInvoices()
    assert.equal(first.period, '2031-03')
    assert.equal(second.issued, 0)
    const invoices = await ok('GET', '/billing/invoices', pro.key)
    assert.equal(invoices.total, 1)
    const [invoice] = invoices.data
    assert.deepEqual(
      {
        period: invoice.period,
        planId: invoice.planId,
        amount: invoice.amount,
        amountMinor: invoice.amountMinor,
        currency: invoice.currency,
        status: invoice.status,
      },
      { period: '2031-03', planId: 'pro', amount: 49, amountMinor: 4900, currency: 'EUR', status: 'open' },
    )
    assert.equal((await ok('GET', '/billing/invoices', free.key)).total, 0)
    assert.equal((await ok('GET', '/billing/invoices', late.key)).total, 0)

    // Stripe says it is paid: a signature that is wrong, too old, or missing is refused.
    const event = {
      id: 'evt_1NQxyz',
      type: 'invoice.paid',
      data: { object: { id: 'in_1NQxyz', object: 'invoice', metadata: { kms_invoice_id: invoice.id } } },
    }
    clock.set(new Date())
    const forged = await postWebhook(stripeDelivery(event, { secret: 'whsec_other' }))
    assert.equal(forged.status, 400)
    assert.equal(forged.body.error, 'invalid_signature')
    const stale = await postWebhook(stripeDelivery(event, { at: new Date(Date.now() - 10 * 60_000) }))
    assert.equal(stale.status, 400)
    assert.equal(stale.body.error, 'signature_expired')
    const unsigned = await postWebhook({ body: JSON.stringify(event) })
    assert.equal(unsigned.status, 400)
    const tampered = stripeDelivery(event)
    const altered = await postWebhook({
      ...tampered,
      body: tampered.body.replace('invoice.paid', 'invoice.paid '),
    })
    assert.equal(altered.status, 400)
    assert.equal((await ok('GET', '/billing/invoices', pro.key)).data[0].status, 'open')

    const paid = await postWebhook(stripeDelivery(event))
    assert.equal(paid.status, 200, paid.text)
    assert.deepEqual(paid.body, { received: true, handled: true })
    const after = (await ok('GET', '/billing/invoices', pro.key)).data[0]
    assert.equal(after.status, 'paid')
    // A redelivery of the event changes nothing; another event type is acknowledged and ignored.
    assert.deepEqual((await postWebhook(stripeDelivery(event))).body, { received: true, handled: false })
    assert.deepEqual(
      (await postWebhook(stripeDelivery({ id: 'evt_other', type: 'customer.created', data: { object: {} } })))
        .body,
      { received: true, handled: false },
    )
    const audit = await ok('GET', '/audit?action=billing.invoice.paid', pro.key)
    assert.equal(audit.data.length, 1)
    assert.equal(audit.data[0].actor, 'system:stripe')
    assert.equal(audit.data[0].details.paidBy, 'stripe:evt_1NQxyz')
    // A body that is not JSON is refused before anything else.
    assert.equal(
      (await postWebhook({ body: '{not json', signature: 't=1,v1=00' })).body.error,
      'invalid_json',
    )
  })

  test('invoices: the CLI issues and marks paid; a provider event for a paid invoice is acknowledged', async () => {
    // The CLI runs in its own process on the real clock: the month billed is one that has ended.
    clock.set(new Date('2026-10-10T09:00:00Z'))
    const tenant = await service.createTenant()
    await service.api.services.billing.changePlan(
      { tenantId: tenant.tenantId, actor: 'cli', requestId: null, clientIp: null },
      'enterprise',
    )
    clock.set(new Date())
    const issued = await runCli(['issue-invoices', '--period', '2026-10'], service.env)
    assert.equal(issued.code, 0, issued.stderr)
    assert.ok(JSON.parse(issued.stdout).issued >= 1)
    const [invoice] = (await ok('GET', '/billing/invoices', tenant.key)).data
    assert.equal(invoice.amountMinor, 49900)
    const marked = await runCli(['mark-invoice-paid', '--id', invoice.id], service.env)
    assert.equal(marked.code, 0, marked.stderr)
    assert.equal(JSON.parse(marked.stdout).status, 'paid')
    const again = await runCli(['mark-invoice-paid', '--id', invoice.id], service.env)
    assert.equal(again.code, 1)
    assert.match(again.stderr, /paid/)
    const late = await postWebhook(
      stripeDelivery({
        id: 'evt_late',
        type: 'invoice.paid',
        data: { object: { metadata: { kms_invoice_id: invoice.id } } },
      }),
    )
    assert.deepEqual(late.body, { received: true, handled: false })
    const badPeriod = await runCli(['issue-invoices', '--period', '2031-13'], service.env)
    assert.equal(badPeriod.code, 2)
  })
})
