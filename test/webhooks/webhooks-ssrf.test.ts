import assert from 'node:assert/strict'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { after, before, test } from 'node:test'
import { type Resolver, systemResolver } from '../../src/outbound/destination.ts'
import { DAY_MS } from '../../src/platform/clock.ts'
import { type ManualClock, manualClock } from '../helpers/manual-clock.ts'
import { startTestService, type TenantWithKey, type TestService, waitFor } from '../helpers/service.ts'

/**
 * Server-side request forgery through webhooks (issue 15, defect 1), end to end with the
 * default policy (no KMS_OUTBOUND_ALLOW): a local receiver on 127.0.0.1 stands for the internal
 * service an attacker aims at, and must never be called. Names resolve through an injected
 * resolver for `*.test` (the rebinding case: public when the policy is saved, 127.0.0.1 when
 * delivered) and through the system resolver otherwise (localhost).
 */

let svc: TestService
let clock: ManualClock
let receiver: Server
let port: number
const received: string[] = []
/** What `rebind.test` answers now. */
let rebindAnswer = '93.184.216.34'

const resolver: Resolver = async (host) => {
  if (host === 'rebind.test') return [{ address: rebindAnswer, family: 4 }]
  if (host === 'public.test') return [{ address: '93.184.216.34', family: 4 }]
  return systemResolver(host)
}

before(async () => {
  receiver = createServer((req, res) => {
    received.push(`${req.method} ${req.url}`)
    req.resume()
    res.end('internal secrets')
  })
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve))
  port = (receiver.address() as AddressInfo).port
  clock = manualClock(new Date('2030-01-01T00:00:00.000Z'))
  svc = await startTestService(
    { KMS_JOB_SWEEP_MS: '100', KMS_WEBHOOK_RETRY_SCALE: '0.01', KMS_WEBHOOK_TIMEOUT_MS: '1000' },
    { clock, jobs: true, resolve: resolver },
  )
})
after(async () => {
  receiver?.closeAllConnections()
  await new Promise<void>((resolve) => (receiver ? receiver.close(() => resolve()) : resolve()))
  await svc?.stop()
})

/** The spellings of issue 15 and more; the reason each 400 must give. */
const spellings = (): [string, RegExp][] => [
  [`http://127.0.0.1:${port}/hook`, /127\.0\.0\.1, a loopback address/],
  [`http://localhost:${port}/hook`, /localhost is a loopback name/],
  [`http://LOCALHOST.:${port}/hook`, /localhost\. is a loopback name/],
  [`http://[::1]:${port}/hook`, /::1, a loopback address/],
  [`http://0.0.0.0:${port}/hook`, /0\.0\.0\.0, an unspecified address/],
  [`http://[::]:${port}/hook`, /::, an unspecified address/],
  [`http://2130706433:${port}/hook`, /127\.0\.0\.1, a loopback address/],
  [`http://0x7f.1:${port}/hook`, /127\.0\.0\.1, a loopback address/],
  [`http://0x7f000001:${port}/hook`, /127\.0\.0\.1, a loopback address/],
  [`http://017700000001:${port}/hook`, /127\.0\.0\.1, a loopback address/],
  [`http://0177.0.0.1:${port}/hook`, /127\.0\.0\.1, a loopback address/],
  [`http://127.1:${port}/hook`, /127\.0\.0\.1, a loopback address/],
  [`http://[::ffff:127.0.0.1]:${port}/hook`, /IPv4-mapped loopback address \(127\.0\.0\.1\)/],
  [`http://[::ffff:7f00:1]:${port}/hook`, /IPv4-mapped loopback address/],
  [`http://[2002:7f00:1::1]:${port}/hook`, /6to4 loopback address \(127\.0\.0\.1\)/],
  [`http://[64:ff9b::7f00:1]:${port}/hook`, /NAT64 loopback address \(127\.0\.0\.1\)/],
  ['http://169.254.169.254/latest/meta-data/', /169\.254\.169\.254, a link-local address/],
  ['http://[fe80::1]/hook', /fe80::1, a link-local address/],
  ['http://[fd00::1]/hook', /fd00::1, a unique-local address/],
  ['http://10.0.0.1/hook', /10\.0\.0\.1, a private address/],
  ['http://172.16.0.1/hook', /172\.16\.0\.1, a private address/],
  ['http://192.168.0.1/hook', /192\.168\.0\.1, a private address/],
  ['http://100.64.0.1/hook', /100\.64\.0\.1, a carrier-grade NAT \(shared\) address/],
  ['http://224.0.0.1/hook', /224\.0\.0\.1, a multicast address/],
  ['http://255.255.255.255/hook', /255\.255\.255\.255, a broadcast address/],
]

const call = (tenant: TenantWithKey, method: string, path: string, body?: unknown) =>
  svc.request(method, `/api/v1${path}`, { key: tenant.key, ...(body === undefined ? {} : { body }) })

async function createKey(tenant: TenantWithKey): Promise<string> {
  const created = await call(tenant, 'POST', '/keys', {
    name: `ssrf-${Math.random().toString(36).slice(2)}`,
    keyType: 'Encryption',
    algorithm: 'ML-KEM-768',
  })
  assert.equal(created.status, 201, created.text)
  return created.body.id as string
}

interface Delivery {
  url: string
  status: string
  payload: string
  attempts: {
    attempt: number
    statusCode: number | null
    error: string | null
    responseExcerpt: string | null
  }[]
}

async function finalDeliveries(tenant: TenantWithKey, count: number): Promise<Delivery[]> {
  let deliveries: Delivery[] = []
  await waitFor(async () => {
    const res = await call(tenant, 'GET', '/webhooks/deliveries?limit=1000')
    deliveries = res.body.data
    return deliveries.length === count && deliveries.every((d) => d.status !== 'pending')
  }, `${count} deliveries to finish`)
  return deliveries
}

test('saving a policy whose webhookUrl is a local, private or otherwise internal address is a 400 with the reason', async () => {
  const tenant = await svc.createTenant()
  const keyId = await createKey(tenant)
  for (const [url, reason] of spellings()) {
    const res = await call(tenant, 'POST', `/keys/${keyId}/rotation-policy`, {
      frequency: 'Daily',
      webhookUrl: url,
    })
    assert.equal(res.status, 400, `${url}: ${res.text}`)
    assert.equal(res.body.error, 'validation_failed', url)
    assert.equal(res.body.fields[0].path, 'body/webhookUrl', url)
    assert.match(res.body.message, /^body\/webhookUrl is not an allowed destination: /, url)
    assert.match(res.body.message, reason, url)
  }
  const none = await call(tenant, 'GET', `/keys/${keyId}/rotation-policy`)
  assert.equal(none.status, 404, 'no policy was stored')
  // A name that does not exist is refused too; a public one is accepted.
  const missing = await call(tenant, 'POST', `/keys/${keyId}/rotation-policy`, {
    frequency: 'Daily',
    webhookUrl: 'https://no-such-host.invalid/hook',
  })
  assert.equal(missing.status, 400, missing.text)
  assert.match(missing.body.message, /does not resolve/)
  const ok = await call(tenant, 'POST', `/keys/${keyId}/rotation-policy`, {
    frequency: 'Daily',
    webhookUrl: 'https://public.test/hook',
  })
  assert.equal(ok.status, 200, ok.text)
  await call(tenant, 'DELETE', `/keys/${keyId}/rotation-policy`)
  assert.deepEqual(received, [], 'validation never calls the URL')
})

test('at delivery every such URL is refused again: destination_not_allowed, no request, no retry', async () => {
  const tenant = await svc.createTenant()
  const urls = spellings().map(([url]) => url)
  for (const url of urls) {
    const keyId = await createKey(tenant)
    const saved = await call(tenant, 'POST', `/keys/${keyId}/rotation-policy`, {
      frequency: 'Daily',
      webhookUrl: 'https://public.test/hook',
    })
    assert.equal(saved.status, 200, saved.text)
    // Arranging state: a policy stored before the check existed (or by another path).
    await svc.sql`UPDATE rotation_policies SET webhook_url = ${url} WHERE key_id = ${keyId}`
  }
  clock.advance(DAY_MS)
  const deliveries = await finalDeliveries(tenant, urls.length)
  assert.deepEqual(deliveries.map((d) => d.url).sort(), [...urls].sort())
  for (const delivery of deliveries) {
    assert.equal(delivery.status, 'failed', delivery.url)
    assert.deepEqual(
      delivery.attempts.map((a) => [a.attempt, a.statusCode, a.error, a.responseExcerpt]),
      [[1, null, 'destination_not_allowed', null]],
      delivery.url,
    )
  }
  assert.deepEqual(received, [], 'the local receiver got no request')
  const keys = await svc.sql`SELECT key_id FROM rotation_policies WHERE tenant_id = ${tenant.tenantId}`
  for (const { key_id } of keys) await call(tenant, 'DELETE', `/keys/${key_id}/rotation-policy`)
})

test('DNS rebinding: a name that was public when saved and resolves to 127.0.0.1 at delivery gets no request', async () => {
  const tenant = await svc.createTenant()
  const keyId = await createKey(tenant)
  rebindAnswer = '93.184.216.34'
  const url = `http://rebind.test:${port}/hook`
  const saved = await call(tenant, 'POST', `/keys/${keyId}/rotation-policy`, {
    frequency: 'Daily',
    webhookUrl: url,
  })
  assert.equal(saved.status, 200, saved.text)
  rebindAnswer = '127.0.0.1'
  clock.advance(DAY_MS)
  const [delivery] = await finalDeliveries(tenant, 1)
  assert.equal(delivery!.status, 'failed')
  assert.deepEqual(
    delivery!.attempts.map((a) => [a.statusCode, a.error, a.responseExcerpt]),
    [[null, 'destination_not_allowed', null]],
  )
  assert.deepEqual(received, [], 'the local receiver got no request')
  await call(tenant, 'DELETE', `/keys/${keyId}/rotation-policy`)
})
