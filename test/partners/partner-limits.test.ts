import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { type Resolver, systemResolver } from '../../src/outbound/destination.ts'
import { MAX_PARTNER_ENDPOINTS } from '../../src/partners/partner-service.ts'
import { isSelfReferral } from '../../src/partners/self-referral.ts'
import { type ManualClock, manualClock } from '../helpers/manual-clock.ts'
import { startTestService, type TestService } from '../helpers/service.ts'
import { confirmSignup, createdIdOf, signupLinkMailedTo } from '../helpers/signup.ts'
import { startSmtp, type TestSmtp } from '../helpers/smtp.ts'

/**
 * Issue 31, defects 7 and 8: a partner's webhook endpoints are checked when saved and limited in
 * number, and a partner's own sign-up through its code earns nothing. The service runs with the
 * default address policy (no KMS_OUTBOUND_ALLOW); `*.test` names resolve through an injected
 * resolver, so nothing here leaves the machine (saving an endpoint resolves, never connects).
 */

const resolver: Resolver = async (host) => {
  if (host === 'loopback.test') return [{ address: '127.0.0.1', family: 4 }]
  if (host === 'public.test') return [{ address: '93.184.216.34', family: 4 }]
  // A name that does not exist, whatever DNS this machine has.
  if (host.endsWith('.invalid')) throw Object.assign(new Error(`${host} not found`), { code: 'ENOTFOUND' })
  return systemResolver(host)
}

describe('partner webhook endpoints and referrals: checked, limited, never the partner’s own', () => {
  let service: TestService
  let smtp: TestSmtp
  let clock: ManualClock
  let counter = 0

  before(async () => {
    smtp = await startSmtp('accept')
    clock = manualClock()
    service = await startTestService(
      {
        KMS_SMTP_URL: smtp.url,
        KMS_SMTP_ATTEMPTS: '1',
        KMS_JOB_SWEEP_MS: '200',
        KMS_SIGNUP_RATE_PER_HOUR: '1000',
      },
      { clock, jobs: true, resolve: resolver },
    )
  })
  after(async () => {
    await service?.stop()
    await smtp?.stop()
  })

  async function partnerWithKey(email?: string) {
    const n = ++counter
    const partners = service.api.services.partners
    const partner = await partners.createPartner(
      { name: `Partner ${n}`, email: email ?? `partner-${n}@partner-${n}.example` },
      'test',
    )
    const { key } = await partners.createKey(partner.id, 'main', 'test')
    return { id: partner.id, headers: { authorization: `Bearer ${key}` } }
  }

  const addEndpoint = (headers: Record<string, string>, url: string) =>
    service.request('POST', '/api/v1/partners/webhook-endpoints', { headers, body: { url } })

  test('an endpoint on a loopback, private or link-local address, or a name resolving to one, is a 400 naming body/url; nothing is stored', async () => {
    const partner = await partnerWithKey()
    for (const [url, reason] of [
      ['http://127.0.0.1:8080/events', /127\.0\.0\.1, a loopback address/],
      ['http://10.1.2.3/events', /10\.1\.2\.3, a private address/],
      ['http://169.254.169.254/latest/meta-data/', /169\.254\.169\.254, a link-local address/],
      ['http://[::1]:8080/events', /::1, a loopback address/],
      ['https://loopback.test/events', /loopback\.test resolves to 127\.0\.0\.1, a loopback address/],
      ['http://localhost:8080/events', /localhost is a loopback name/],
    ] as const) {
      const refused = await addEndpoint(partner.headers, url)
      assert.equal(refused.status, 400, `${url}: ${refused.text}`)
      assert.equal(refused.body.error, 'validation_failed', url)
      assert.equal(refused.body.fields[0].path, 'body/url', url)
      assert.match(refused.body.message, /^body\/url is not an allowed destination: /, url)
      assert.match(refused.body.message, reason, url)
    }
    const missing = await addEndpoint(partner.headers, 'https://no-such-host.invalid/events')
    assert.equal(missing.status, 400, missing.text)
    assert.match(missing.body.message, /^body\/url names a host that does not resolve/)

    const listed = await service.request('GET', '/api/v1/partners/webhook-endpoints', {
      headers: partner.headers,
    })
    assert.deepEqual(listed.body, { data: [] }, 'no refused endpoint was stored')
    // A public destination is accepted.
    const accepted = await addEndpoint(partner.headers, 'https://public.test/events')
    assert.equal(accepted.status, 201, accepted.text)
    assert.equal(accepted.body.url, 'https://public.test/events')
  })

  test(`a partner has at most ${MAX_PARTNER_ENDPOINTS} endpoints, even asked at once: the rest are 409 partner_endpoint_limit until one is removed`, async () => {
    const partner = await partnerWithKey()
    const answers = await Promise.all(
      Array.from({ length: MAX_PARTNER_ENDPOINTS + 2 }, (_, i) =>
        addEndpoint(partner.headers, `https://public.test/events/${i}`),
      ),
    )
    const statuses = answers.map((answer) => answer.status).sort()
    assert.deepEqual(
      statuses,
      [...Array(MAX_PARTNER_ENDPOINTS).fill(201), 409, 409],
      JSON.stringify(statuses),
    )
    for (const refused of answers.filter((answer) => answer.status === 409)) {
      assert.equal(refused.body.error, 'partner_endpoint_limit', refused.text)
      assert.equal(refused.body.limit, MAX_PARTNER_ENDPOINTS, refused.text)
    }
    const listed = await service.request('GET', '/api/v1/partners/webhook-endpoints', {
      headers: partner.headers,
    })
    assert.equal(listed.body.data.length, MAX_PARTNER_ENDPOINTS)
    const one = await addEndpoint(partner.headers, 'https://public.test/events/one-more')
    assert.equal(one.status, 409, one.text)

    // Removing one makes room for one.
    const removed = await service.request(
      'DELETE',
      `/api/v1/partners/webhook-endpoints/${listed.body.data[0].id}`,
      { headers: partner.headers },
    )
    assert.equal(removed.status, 204, removed.text)
    assert.equal((await addEndpoint(partner.headers, 'https://public.test/events/one-more')).status, 201)
    // Another partner has its own count.
    const other = await partnerWithKey()
    assert.equal((await addEndpoint(other.headers, 'https://public.test/events/0')).status, 201)
  })

  test('self-referral: the partner’s address, a +tag of it and its company’s domain sign up unreferred (no referral, no commission); another domain is referred', async () => {
    const corporate = await partnerWithKey('Sales@Acme-Partner.example')
    // At a public mailbox provider only the address itself is the partner's.
    const personal = await partnerWithKey('jane.partner@gmail.com')
    const codeOf = async (partner: { headers: Record<string, string> }) => {
      const made = await service.request('POST', '/api/v1/partners/codes', {
        headers: partner.headers,
        body: { label: 'Own' },
      })
      assert.equal(made.status, 201, made.text)
      return made.body.code as string
    }
    const corporateCode = await codeOf(corporate)
    const personalCode = await codeOf(personal)

    /** A tenant signed up through the API with the code, confirmed through the e-mailed link. */
    async function signUp(email: string, referralCode: string) {
      const asked = await service.request('POST', '/api/v1/signup', {
        body: { organizationName: `Referred ${++counter}`, email, referralCode },
      })
      assert.equal(asked.status, 202, `${email}: ${asked.text}`)
      const done = await confirmSignup(await signupLinkMailedTo(smtp, email), {
        password: 'a-long-enough-password',
      })
      assert.equal(done.status, 201, `${email}: ${done.html}`)
      return createdIdOf(done.html, 'tenant')
    }

    const billing = service.api.services.billing
    const partners = service.api.services.partners
    try {
      clock.set(new Date('2032-01-10T10:00:00Z'))
      const own = {
        sameAddress: await signUp('SALES@acme-partner.example', corporateCode),
        plusTag: await signUp('sales+kms@acme-partner.example', corporateCode),
        sameDomain: await signUp('cfo@ACME-PARTNER.example', corporateCode),
        personalPlusTag: await signUp('jane.partner+trial@gmail.com', personalCode),
      }
      const referred = {
        corporate: await signUp('founder@customer.example', corporateCode),
        // Another person at the same public provider is a real referral.
        personal: await signUp('someone.else@gmail.com', personalCode),
      }
      const ids = [...Object.values(own), ...Object.values(referred)]
      // Every tenant was created, referred or not.
      const [tenants] = await service.sql<{ n: number }[]>`
        SELECT count(*)::int AS n FROM tenants WHERE id = ANY(${ids})`
      assert.equal(tenants!.n, ids.length)

      // The partners' view: only the real referrals.
      const referralsOf = async (partner: { headers: Record<string, string> }) => {
        const listed = await service.request('GET', '/api/v1/partners/referrals', {
          headers: partner.headers,
        })
        assert.equal(listed.status, 200, listed.text)
        return listed.body.data as Array<{ id: string; tenantId: string }>
      }
      const corporateReferrals = await referralsOf(corporate)
      const personalReferrals = await referralsOf(personal)
      assert.deepEqual(
        corporateReferrals.map((r) => r.tenantId),
        [referred.corporate],
      )
      assert.deepEqual(
        personalReferrals.map((r) => r.tenantId),
        [referred.personal],
      )

      // Every tenant pays January on Pro: commissions only for the real referrals.
      for (const tenantId of ids)
        await billing.changePlan({ tenantId, actor: 'cli', requestId: null, clientIp: null }, 'pro')
      clock.set(new Date('2032-02-01T00:05:00Z'))
      await billing.issueInvoices('2032-01')
      clock.set(new Date('2032-02-03T12:00:00Z'))
      for (const tenantId of ids) {
        const cli = { tenantId, actor: 'cli', requestId: null, clientIp: null }
        const [invoice] = (await billing.listInvoices(cli, { limit: 10, offset: 0 })).data
        assert.ok(invoice && invoice.amountMinor > 0, `an invoice of ${tenantId}`)
        await billing.markPaid(invoice.id, 'cli')
      }
      clock.set(new Date('2032-03-01T01:00:00Z'))
      await partners.calculateCommissions('2032-02')
      const commissionsOf = async (partner: { headers: Record<string, string> }) => {
        const listed = await service.request('GET', '/api/v1/partners/commissions?period=2032-02', {
          headers: partner.headers,
        })
        assert.equal(listed.status, 200, listed.text)
        return listed.body as { data: Array<{ referralId: string; amount: number }>; totalAmount: number }
      }
      assert.deepEqual(
        (await commissionsOf(corporate)).data.map((c) => [c.referralId, c.amount]),
        [[corporateReferrals[0]!.id, 9.8]],
      )
      assert.deepEqual(
        (await commissionsOf(personal)).data.map((c) => [c.referralId, c.amount]),
        [[personalReferrals[0]!.id, 9.8]],
      )
    } finally {
      clock.set(new Date())
    }
  })

  test('what counts as the partner’s own address', () => {
    const cases: Array<[string, string, boolean]> = [
      ['sales@acme.example', 'Sales@ACME.example.', true],
      ['sales+partners@acme.example', 'sales@acme.example', true],
      ['sales@acme.example', 'anyone@acme.example', true],
      ['sales@acme.example', 'sales@eu.acme.example', false],
      ['sales@acme.example', 'sales@acme.example.org', false],
      ['jane@gmail.com', 'jane+x@GMAIL.com', true],
      ['jane@gmail.com', 'john@gmail.com', false],
      ['jane@gmail.com', 'j.ane@gmail.com', false],
      ['ada@bücher.example', 'bob@xn--bcher-kva.example', true],
    ]
    for (const [partner, signer, expected] of cases)
      assert.equal(isSelfReferral(partner, signer), expected, `${partner} / ${signer}`)
  })
})
