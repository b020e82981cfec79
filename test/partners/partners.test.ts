import assert from 'node:assert/strict'
import { createHmac, timingSafeEqual } from 'node:crypto'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { after, before, describe, test } from 'node:test'
import { commissionOf } from '../../src/partners/partner-service.ts'
import { type ManualClock, manualClock } from '../helpers/manual-clock.ts'
import {
  httpRequest,
  runCli,
  type SpawnedService,
  spawnService,
  startTestService,
  type TestService,
  waitFor,
} from '../helpers/service.ts'
import { consoleClient, memberSession } from '../helpers/sign-in.ts'
import { askToSignUp, confirmSignup, createdIdOf, signupLinkMailedTo } from '../helpers/signup.ts'
import { startSmtp, type TestSmtp } from '../helpers/smtp.ts'

const CONSOLE_REDIRECT = 'http://127.0.0.1:9/console'
const WEBHOOK_SECRET = 'whsec_partners_test'

describe('partner API: partner keys only, isolation, and a rate limit shared by every process', () => {
  let a: TestService
  let b: SpawnedService
  let clock: ManualClock
  let smtp: TestSmtp

  before(async () => {
    clock = manualClock()
    smtp = await startSmtp('accept')
    a = await startTestService(
      {
        // Sign-up confirmations reach a local SMTP server.
        KMS_SMTP_URL: smtp.url,
        KMS_SMTP_ATTEMPTS: '1',
        KMS_CONSOLE_REDIRECT_URIS: CONSOLE_REDIRECT,
        KMS_STRIPE_WEBHOOK_SECRET: WEBHOOK_SECRET,
        // Partner events go through the webhook outbox to a receiver on this machine.
        KMS_JOB_SWEEP_MS: '200',
        KMS_OUTBOUND_ALLOW: '127.0.0.1',
      },
      { clock, jobs: true },
    )
    // A second API process of the same deployment (database, Redis and its prefix).
    b = await spawnService({ ...a.env, ID_URL: a.baseUrl })
  })
  after(async () => {
    await b?.stop()
    await a?.stop()
    await smtp?.stop()
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
    const attribute = (code: string) =>
      a.api.services.partners.attribute({
        tenantId: tenant.tenantId,
        code,
        signerEmail: `owner-${counter}@customer.example`,
      })
    assert.equal(await attribute(made.body.code.toLowerCase()), true)
    assert.equal(await attribute('NOSUCHCODE1'), false)

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

  /** The key with its last character changed: always another character, so never the key itself. */
  const malformed = (key: string) => `${key.slice(0, -1)}${key.endsWith('x') ? 'y' : 'x'}`

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
      ['a malformed partner key', { authorization: `Bearer ${malformed(partner.key)}` }],
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
  test('commission arithmetic: amount × rate in integers, rounded half up', () => {
    assert.equal(commissionOf(4900n, 2000), 980n)
    assert.equal(commissionOf(49900n, 2000), 9980n)
    assert.equal(commissionOf(1n, 2000), 0n)
    assert.equal(commissionOf(3n, 2000), 1n)
    assert.equal(commissionOf(25n, 2000), 5n)
    assert.equal(commissionOf(4999n, 1234), 617n)
    assert.equal(commissionOf(10n ** 15n, 2000), 2n * 10n ** 14n)
  })

  /** What a partner runs: an HTTP receiver that keeps each request's raw body and signature. */
  async function receiver(): Promise<{
    url: string
    received: Array<{ body: string; signature: string | undefined }>
    server: Server
  }> {
    const received: Array<{ body: string; signature: string | undefined }> = []
    const server = createServer((req, res) => {
      const chunks: Buffer[] = []
      req.on('data', (chunk: Buffer) => chunks.push(chunk))
      req.on('end', () => {
        const signature = req.headers['x-service-signature']
        received.push({
          body: Buffer.concat(chunks).toString('utf8'),
          signature: typeof signature === 'string' ? signature : undefined,
        })
        res.writeHead(200).end()
      })
    })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()))
    return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/events`, received, server }
  }

  test('money: a tenant signs up through the code’s URL, pays, the referral converts, the commission is calculated once and paid out; each step is a signed event', async () => {
    const partner = await partnerWithKey()
    const other = await partnerWithKey()
    const events = await receiver()
    const registered = await a.request('POST', '/api/v1/partners/webhook-endpoints', {
      headers: partner.headers,
      body: { url: events.url },
    })
    assert.equal(registered.status, 201, registered.text)
    const secret = (await a.request('GET', '/api/v1/partners/webhook-secret', { headers: partner.headers }))
      .body.secret as string
    assert.match(secret, /^whsec_/)
    const { code, url } = (
      await a.request('POST', '/api/v1/partners/codes', { headers: partner.headers, body: { label: 'Q1' } })
    ).body as { code: string; url: string }
    const billing = a.api.services.billing
    const partners = a.api.services.partners
    try {
      clock.set(new Date('2031-01-15T10:00:00Z'))
      // A tenant signs up through the code's URL: the page carries the code, the e-mail proves
      // the address, the confirmation creates the tenant attributed to the partner.
      // Another domain than the partner's (example.com): its own domain would be a self-referral.
      const email = `referred-${process.pid}@customer.example`
      const { form, answer } = await askToSignUp(url, { organizationName: `Referred ${code}`, email })
      assert.match(form.html, new RegExp(`referred by a partner \\(code <strong>${code}</strong>\\)`))
      assert.equal(answer.status, 200, answer.html)
      const done = await confirmSignup(await signupLinkMailedTo(smtp, email), {
        password: 'referred-password-1',
      })
      assert.equal(done.status, 201, done.html)
      const tenant = { tenantId: createdIdOf(done.html, 'tenant') }
      const cli = { tenantId: tenant.tenantId, actor: 'cli', requestId: null, clientIp: null }
      await billing.changePlan(cli, 'pro')
      // February 1st: January's invoice, paid through Stripe's webhook on the 3rd.
      clock.set(new Date('2031-02-01T00:05:00Z'))
      await billing.issueInvoices()
      const [invoice] = (await billing.listInvoices(cli, { limit: 10, offset: 0 })).data
      assert.equal(invoice?.amountMinor, 4900)
      clock.set(new Date('2031-02-03T12:00:00Z'))
      const body = JSON.stringify({
        id: 'evt_partner_flow',
        type: 'invoice.paid',
        data: { object: { metadata: { kms_invoice_id: invoice!.id } } },
      })
      const t = Math.floor(clock.now().getTime() / 1000)
      const v1 = createHmac('sha256', WEBHOOK_SECRET).update(`${t}.${body}`).digest('hex')
      const paid = await a.request('POST', '/api/v1/billing/webhooks/stripe', {
        rawBody: body,
        headers: { 'content-type': 'application/json', 'stripe-signature': `t=${t},v1=${v1}` },
      })
      assert.deepEqual(paid.body, { received: true, handled: true })
      const referrals = await a.request('GET', '/api/v1/partners/referrals', { headers: partner.headers })
      const referral = referrals.body.data.find((r: { tenantId: string }) => r.tenantId === tenant.tenantId)
      assert.equal(referral.status, 'converted')

      // March 1st: February's commissions (the month the invoice was paid), twice.
      clock.set(new Date('2031-03-01T01:00:00Z'))
      await assert.rejects(partners.calculateCommissions('2031-03'), /must be a month that has ended/)
      // The job runs twice (and the lifecycle sweep may run it too): one commission all the same.
      const runs = [await partners.calculateCommissions(), await partners.calculateCommissions('2031-02')]
      assert.deepEqual(
        runs.map((run) => run.period),
        ['2031-02', '2031-02'],
      )
      assert.equal(runs[1]!.calculated, 0)
      const [rows] = await a.sql<{ count: number }[]>`
        SELECT count(*)::int AS count FROM commissions WHERE referral_id = ${referral.id}`
      assert.equal(rows!.count, 1)
      const commissions = await a.request('GET', '/api/v1/partners/commissions?period=2031-02', {
        headers: partner.headers,
      })
      assert.deepEqual(commissions.body, {
        data: [
          { referralId: referral.id, amount: 9.8, currency: 'EUR', status: 'calculated', period: '2031-02' },
        ],
        totalAmount: 9.8,
      })
      const theirs = await a.request('GET', '/api/v1/partners/commissions?period=2031-02', {
        headers: other.headers,
      })
      assert.deepEqual(theirs.body, { data: [], totalAmount: 0 })

      // The operator pays February out, once.
      const payout = await partners.recordPayout(partner.id, '2031-02', 'cli')
      assert.deepEqual(payout, {
        partnerId: partner.id,
        period: '2031-02',
        amount: 9.8,
        amountMinor: 980,
        currency: 'EUR',
        commissions: 1,
      })
      await assert.rejects(partners.recordPayout(partner.id, '2031-02', 'cli'), (err: { code?: string }) => {
        assert.equal(err.code, 'nothing_to_pay')
        return true
      })
      const after = await a.request('GET', '/api/v1/partners/commissions?period=2031-02', {
        headers: partner.headers,
      })
      assert.equal(after.body.data[0].status, 'paid')

      // The outbox sends what is overdue: time moves on, and the receiver gets each event once,
      // signed with the partner's secret (verified here as a partner would, on the raw body).
      clock.advance(60_000)
      await waitFor(() => events.received.length >= 4, 'four partner events')
      const verified = events.received.map(({ body, signature }) => {
        const expected = Buffer.from(`sha256=${createHmac('sha256', secret).update(body).digest('hex')}`)
        assert.ok(
          signature !== undefined &&
            signature.length === expected.length &&
            timingSafeEqual(Buffer.from(signature), expected),
          'signed with the partner secret',
        )
        return JSON.parse(body) as { type: string; partnerId: string; data: Record<string, unknown> }
      })
      assert.deepEqual(verified.map((e) => e.type).sort(), [
        'commission.calculated',
        'payout.completed',
        'referral.converted',
        'referral.created',
      ])
      assert.ok(verified.every((e) => e.partnerId === partner.id))
      assert.deepEqual(verified.find((e) => e.type === 'commission.calculated')!.data, {
        referralId: referral.id,
        period: '2031-02',
        amount: 9.8,
        currency: 'EUR',
      })
      assert.deepEqual(verified.find((e) => e.type === 'payout.completed')!.data, {
        period: '2031-02',
        amount: 9.8,
        currency: 'EUR',
        commissions: 1,
      })
      assert.equal(verified.find((e) => e.type === 'referral.created')!.data['tenantId'], tenant.tenantId)
      assert.equal(verified.find((e) => e.type === 'referral.converted')!.data['referralId'], referral.id)
      // The other partner registered nothing and received nothing; each event came once.
      assert.equal(events.received.length, 4)
    } finally {
      clock.set(new Date())
      events.server.closeAllConnections()
      await new Promise((resolve) => events.server.close(resolve))
    }
  })
})
