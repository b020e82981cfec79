import assert from 'node:assert/strict'
import { createHmac, timingSafeEqual } from 'node:crypto'
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { after, before, test } from 'node:test'
import { DAY_MS } from '../../src/platform/clock.ts'
import { type ManualClock, manualClock } from '../helpers/manual-clock.ts'
import {
  type HttpResult,
  startTestService,
  type TenantWithKey,
  type TestService,
  waitFor,
} from '../helpers/service.ts'

/**
 * Signed webhook deliveries of policy rotations, end to end: the background jobs run in the
 * service's process (real BullMQ on the real Redis, sweeping every 100 ms), a manual clock makes
 * rotations due, and real HTTP receivers on 127.0.0.1 answer as each test chooses. A receiver
 * verifies the signature as a partner would. Retry delays are real (scaled by 0.01), so the
 * schedule is checked on the receivers' own wall-clock timestamps, with lower bounds only.
 */

const RETRY_SCALE = 0.01
const TIMEOUT_MS = 500
/** Delays before attempts 2, 3 and 4 (1 s, 10 s, 60 s) once scaled. */
const SCALED_DELAYS_MS = [1000, 10_000, 60_000].map((ms) => ms * RETRY_SCALE)
const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/
const SIGNATURE_RE = /^sha256=[0-9a-f]{64}$/

let svc: TestService
let clock: ManualClock

before(async () => {
  clock = manualClock(new Date('2030-01-01T00:00:00.000Z'))
  svc = await startTestService(
    {
      KMS_JOB_SWEEP_MS: '100',
      KMS_WEBHOOK_RETRY_SCALE: String(RETRY_SCALE),
      KMS_WEBHOOK_TIMEOUT_MS: String(TIMEOUT_MS),
      // The receivers run on this machine: the operator allows it (the default refuses loopback).
      KMS_OUTBOUND_ALLOW: '127.0.0.1',
    },
    { clock, jobs: true },
  )
})

const receivers: Receiver[] = []
after(async () => {
  await Promise.all(receivers.map((r) => r.close()))
  await svc?.stop()
})

// ---------------------------------------------------------------------------------------------
// Receivers

interface Received {
  /** Wall-clock time the request arrived (Date.now()). */
  at: number
  headers: IncomingHttpHeaders
  rawBody: Buffer
  /** The connection of this request closed (after the answer, or because the sender gave up). */
  closed: boolean
  answered: boolean
}

type Reply = { status: number; body?: string | Buffer; headers?: Record<string, string> } | 'hang'

interface Receiver {
  url: string
  requests: Received[]
  close(): Promise<void>
}

/** A real HTTP server; `respond` chooses the answer to the n-th request (0-based). */
async function startReceiver(
  respond: (index: number, request: Received) => Reply = () => ({ status: 200, body: 'ok' }),
): Promise<Receiver> {
  const requests: Received[] = []
  const server: Server = createServer((req, res) => {
    const at = Date.now()
    const chunks: Buffer[] = []
    req.on('data', (chunk: Buffer) => chunks.push(chunk))
    req.on('end', () => {
      const record: Received = {
        at,
        headers: req.headers,
        rawBody: Buffer.concat(chunks),
        closed: false,
        answered: false,
      }
      res.on('close', () => {
        record.closed = true
      })
      const index = requests.length
      requests.push(record)
      const reply = respond(index, record)
      if (reply === 'hang') return
      res.writeHead(reply.status, reply.headers ?? {})
      res.end(reply.body ?? '')
      record.answered = true
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  const receiver: Receiver = {
    url: `http://127.0.0.1:${port}/hooks/kms`,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      }),
  }
  receivers.push(receiver)
  return receiver
}

/** A port nothing listens on: a server was bound to it and closed. */
async function closedPort(): Promise<number> {
  const server = createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  await new Promise<void>((resolve) => server.close(() => resolve()))
  return port
}

/** What a partner does with a delivery: recompute the HMAC over the raw bytes, compare in constant time. */
function verifies(secret: string, rawBody: Buffer, header: string | string[] | undefined): boolean {
  if (typeof header !== 'string') return false
  const expected = Buffer.from(
    `sha256=${createHmac('sha256', Buffer.from(secret, 'utf8')).update(rawBody).digest('hex')}`,
  )
  const given = Buffer.from(header)
  return given.length === expected.length && timingSafeEqual(given, expected)
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))
/** Long enough for several sweeps and any stray retry to show up. */
const settle = () => sleep(400)

// ---------------------------------------------------------------------------------------------
// API helpers

interface Attempt {
  attempt: number
  at: string
  statusCode: number | null
  error: string | null
  durationMs: number
  responseExcerpt: string | null
}

interface Delivery {
  id: string
  eventId: string
  eventType: string
  url: string
  status: 'pending' | 'succeeded' | 'failed'
  attempts: Attempt[]
  nextAttemptAt: string | null
  createdAt: string
  completedAt: string | null
  payload: string
}

function as(who: TenantWithKey | string) {
  const key = typeof who === 'string' ? who : who.key
  return (method: string, path: string, body?: unknown): Promise<HttpResult> =>
    svc.request(method, `/api/v1${path}`, { key, ...(body === undefined ? {} : { body }) })
}

async function secretOf(tenant: TenantWithKey): Promise<string> {
  const res = await as(tenant)('POST', '/webhooks/secret')
  assert.equal(res.status, 200, res.text)
  assert.equal(res.headers.get('cache-control'), 'no-store')
  assert.match(res.body.secret, /^whsec_/)
  return res.body.secret as string
}

/** A key with a Daily policy that reports to `url`. */
async function keyWithPolicy(tenant: TenantWithKey, url: string): Promise<{ id: string; name: string }> {
  const call = as(tenant)
  const name = `hooked-${Math.random().toString(36).slice(2)}`
  const created = await call('POST', '/keys', { name, keyType: 'Encryption', algorithm: 'ML-KEM-768' })
  assert.equal(created.status, 201, created.text)
  const policy = await call('POST', `/keys/${created.body.id}/rotation-policy`, {
    frequency: 'Daily',
    webhookUrl: url,
  })
  assert.equal(policy.status, 200, policy.text)
  assert.equal(policy.body.webhookUrl, url)
  return { id: created.body.id as string, name }
}

async function removePolicy(tenant: TenantWithKey, keyId: string): Promise<void> {
  const res = await as(tenant)('DELETE', `/keys/${keyId}/rotation-policy`)
  assert.equal(res.status, 204, res.text)
}

async function listDeliveries(tenant: TenantWithKey, query = ''): Promise<Delivery[]> {
  const res = await as(tenant)('GET', `/webhooks/deliveries${query}`)
  assert.equal(res.status, 200, res.text)
  return res.body.data as Delivery[]
}

const keyIdOf = (delivery: Delivery) => JSON.parse(delivery.payload).data.keyId as string

/** Waits until the key's delivery (of the `nth` rotation, 1-based) is in a final state. */
async function finalDelivery(tenant: TenantWithKey, keyId: string, nth = 1): Promise<Delivery> {
  let found: Delivery | undefined
  await waitFor(async () => {
    const mine = (await listDeliveries(tenant)).filter((d) => keyIdOf(d) === keyId).reverse()
    found = mine[nth - 1]
    return found !== undefined && found.status !== 'pending'
  }, `delivery ${nth} of key ${keyId} to finish`)
  return found!
}

// ---------------------------------------------------------------------------------------------
// Tests

test('a successful delivery: one signed request per rotation, recorded as succeeded with the exact body', async () => {
  const tenant = await svc.createTenant()
  const secret = await secretOf(tenant)
  assert.equal(await secretOf(tenant), secret, 'the secret is created once, then returned as is')
  const receiver = await startReceiver()
  const key = await keyWithPolicy(tenant, receiver.url)

  clock.advance(DAY_MS)
  const rotatedAt = clock.now().toISOString()
  const delivery = await finalDelivery(tenant, key.id)
  await settle()
  assert.equal(receiver.requests.length, 1, 'exactly one request for one rotation')

  const [received] = receiver.requests
  assert.ok(verifies(secret, received!.rawBody, received!.headers['x-service-signature']), 'signature')
  assert.match(received!.headers['x-service-signature'] as string, SIGNATURE_RE)
  assert.match(received!.headers['content-type'] ?? '', /^application\/json/)
  assert.equal(received!.headers['x-service-event-type'], 'key.rotated')

  const body = JSON.parse(received!.rawBody.toString('utf8'))
  assert.match(body.id, UUID_RE)
  assert.equal(received!.headers['x-service-event-id'], body.id)
  assert.equal(body.type, 'key.rotated')
  assert.equal(body.tenantId, tenant.tenantId)
  assert.equal(body.time, rotatedAt)
  assert.deepEqual(body.data, { keyId: key.id, keyName: key.name, version: 2, rotatedAt })
  assert.equal((await as(tenant)('GET', `/keys/${key.id}`)).body.version, 2)

  assert.equal(delivery.status, 'succeeded')
  assert.match(delivery.id, UUID_RE)
  assert.equal(delivery.eventId, body.id)
  assert.equal(delivery.eventType, 'key.rotated')
  assert.equal(delivery.url, receiver.url)
  assert.equal(delivery.createdAt, rotatedAt)
  assert.equal(delivery.attempts.length, 1)
  const [attempt] = delivery.attempts
  assert.equal(attempt!.attempt, 1)
  assert.equal(attempt!.statusCode, 200)
  assert.equal(attempt!.error, null)
  assert.equal(attempt!.responseExcerpt, 'ok')
  assert.ok(Number.isInteger(attempt!.durationMs) && attempt!.durationMs >= 0)
  assert.equal(delivery.nextAttemptAt, null)
  assert.notEqual(delivery.completedAt, null)
  assert.ok(
    Buffer.from(delivery.payload, 'utf8').equals(received!.rawBody),
    'the listed payload is the received body, byte for byte',
  )
  const one = await as(tenant)('GET', `/webhooks/deliveries/${delivery.id}`)
  assert.equal(one.status, 200, one.text)
  assert.deepEqual(one.body, delivery)

  // A second rotation: a second event, listed first.
  clock.advance(DAY_MS)
  const second = await finalDelivery(tenant, key.id, 2)
  await settle()
  assert.equal(receiver.requests.length, 2, 'exactly one more request for the second rotation')
  const secondBody = JSON.parse(receiver.requests[1]!.rawBody.toString('utf8'))
  assert.ok(
    verifies(secret, receiver.requests[1]!.rawBody, receiver.requests[1]!.headers['x-service-signature']),
  )
  assert.equal(secondBody.data.version, 3)
  assert.notEqual(secondBody.id, body.id, 'each event has its own id')
  assert.equal(second.status, 'succeeded')
  const listed = await listDeliveries(tenant)
  assert.deepEqual(
    listed.map((d) => d.id),
    [second.id, delivery.id],
    'newest first',
  )
  assert.deepEqual(
    (await listDeliveries(tenant, '?limit=1')).map((d) => d.id),
    [second.id],
  )
  assert.deepEqual(
    (await listDeliveries(tenant, '?limit=1&offset=1')).map((d) => d.id),
    [delivery.id],
  )
  await removePolicy(tenant, key.id)
})

test('a receiver that always fails gets 4 attempts on the 1 s / 10 s / 60 s (scaled) schedule, then the delivery fails', async () => {
  const tenant = await svc.createTenant()
  const secret = await secretOf(tenant)
  const answer = Buffer.from('0123456789abcdef'.repeat(640)) // 10 KiB
  const receiver = await startReceiver(() => ({ status: 500, body: answer }))
  const key = await keyWithPolicy(tenant, receiver.url)

  clock.advance(DAY_MS)
  const delivery = await finalDelivery(tenant, key.id)
  await settle()
  assert.equal(receiver.requests.length, 4, 'exactly 4 requests in all')

  const at = receiver.requests.map((r) => r.at)
  for (const [index, delay] of SCALED_DELAYS_MS.entries()) {
    const gap = at[index + 1]! - at[index]!
    assert.ok(
      gap >= delay,
      `attempt ${index + 2} came ${gap} ms after attempt ${index + 1}, before ${delay} ms`,
    )
  }
  const first = receiver.requests[0]!
  for (const request of receiver.requests) {
    assert.ok(request.rawBody.equals(first.rawBody), 'every attempt sends the same body')
    assert.equal(request.headers['x-service-event-id'], first.headers['x-service-event-id'])
    assert.ok(verifies(secret, request.rawBody, request.headers['x-service-signature']))
  }

  assert.equal(delivery.status, 'failed')
  assert.notEqual(delivery.completedAt, null)
  assert.equal(delivery.nextAttemptAt, null)
  assert.deepEqual(
    delivery.attempts.map((a) => [a.attempt, a.statusCode, a.error]),
    [
      [1, 500, 'http_error'],
      [2, 500, 'http_error'],
      [3, 500, 'http_error'],
      [4, 500, 'http_error'],
    ],
  )
  for (const attempt of delivery.attempts) {
    assert.ok(attempt.responseExcerpt !== null)
    assert.ok(Buffer.byteLength(attempt.responseExcerpt, 'utf8') <= 256, 'at most 256 bytes kept')
    assert.equal(attempt.responseExcerpt, answer.subarray(0, 256).toString('utf8'), 'the start of the answer')
  }
  await removePolicy(tenant, key.id)
})

test('a receiver that fails twice then succeeds: 3 attempts, succeeded', async () => {
  const tenant = await svc.createTenant()
  const receiver = await startReceiver((index) =>
    index < 2 ? { status: 500, body: 'try later' } : { status: 204 },
  )
  const key = await keyWithPolicy(tenant, receiver.url)

  clock.advance(DAY_MS)
  const delivery = await finalDelivery(tenant, key.id)
  await settle()
  assert.equal(receiver.requests.length, 3)
  assert.equal(delivery.status, 'succeeded')
  assert.deepEqual(
    delivery.attempts.map((a) => [a.attempt, a.statusCode, a.error]),
    [
      [1, 500, 'http_error'],
      [2, 500, 'http_error'],
      [3, 204, null],
    ],
  )
  assert.equal(delivery.attempts[0]!.responseExcerpt, 'try later')
  assert.equal(delivery.nextAttemptAt, null)
  assert.notEqual(delivery.completedAt, null)
  const ids = new Set(receiver.requests.map((r) => r.headers['x-service-event-id']))
  assert.equal(ids.size, 1, 'a retry resends the same event')
  await removePolicy(tenant, key.id)
})

test('a redirect is not followed: the target is never called, each attempt is redirect_not_followed', async () => {
  const tenant = await svc.createTenant()
  const target = await startReceiver()
  const codes = [302, 307, 301, 308]
  const redirector = await startReceiver((index) => ({
    status: codes[index] ?? 302,
    headers: { location: target.url },
  }))
  const key = await keyWithPolicy(tenant, redirector.url)

  clock.advance(DAY_MS)
  const delivery = await finalDelivery(tenant, key.id)
  await settle()
  assert.equal(target.requests.length, 0, 'the redirect target never receives the signed body')
  assert.equal(redirector.requests.length, 4)
  assert.equal(delivery.status, 'failed')
  assert.deepEqual(
    delivery.attempts.map((a) => [a.statusCode, a.error]),
    codes.map((code) => [code, 'redirect_not_followed']),
  )
  await removePolicy(tenant, key.id)
})

test('a receiver that hangs does not hold up another policy delivery; its attempts time out', async () => {
  const tenant = await svc.createTenant()
  const hanging = await startReceiver(() => 'hang')
  let hangingWhenHealthyCalled: { requests: number; finished: number } | undefined
  const healthy = await startReceiver(() => {
    hangingWhenHealthyCalled = {
      requests: hanging.requests.length,
      finished: hanging.requests.filter((r) => r.closed).length,
    }
    return { status: 200, body: 'ok' }
  })
  // The hanging key is due first (the sweep takes due keys oldest first), so its delivery is
  // queued ahead of the healthy one.
  const slow = await keyWithPolicy(tenant, hanging.url)
  clock.advance(1000)
  const fast = await keyWithPolicy(tenant, healthy.url)
  clock.advance(DAY_MS)

  const ok = await finalDelivery(tenant, fast.id)
  assert.equal(ok.status, 'succeeded')
  assert.equal(healthy.requests.length, 1)
  const slowNow = (await listDeliveries(tenant)).find((d) => keyIdOf(d) === slow.id)
  assert.ok(slowNow, 'the hanging key has its delivery')
  assert.equal(slowNow.status, 'pending', 'the hanging delivery is still pending')
  assert.ok(hangingWhenHealthyCalled)
  assert.equal(
    hangingWhenHealthyCalled.finished,
    0,
    'the healthy receiver was called while the first hanging attempt was still open',
  )

  const stuck = await finalDelivery(tenant, slow.id)
  await settle()
  assert.equal(hanging.requests.length, 4)
  assert.equal(stuck.status, 'failed')
  assert.deepEqual(
    stuck.attempts.map((a) => [a.attempt, a.statusCode, a.error, a.responseExcerpt]),
    [1, 2, 3, 4].map((n) => [n, null, 'timeout', null]),
  )
  for (const attempt of stuck.attempts) {
    assert.ok(attempt.durationMs >= TIMEOUT_MS - 10, `gave up after ${attempt.durationMs} ms`)
  }
  assert.equal(healthy.requests.length, 1)
  await removePolicy(tenant, slow.id)
  await removePolicy(tenant, fast.id)
})

test('an unreachable URL: every attempt is connection_failed without a status code', async () => {
  const tenant = await svc.createTenant()
  const url = `http://127.0.0.1:${await closedPort()}/hooks/kms`
  const key = await keyWithPolicy(tenant, url)

  clock.advance(DAY_MS)
  const delivery = await finalDelivery(tenant, key.id)
  assert.equal(delivery.status, 'failed')
  assert.equal(delivery.url, url)
  assert.deepEqual(
    delivery.attempts.map((a) => [a.attempt, a.statusCode, a.error, a.responseExcerpt]),
    [1, 2, 3, 4].map((n) => [n, null, 'connection_failed', null]),
  )
  assert.notEqual(delivery.completedAt, null)
  assert.equal(delivery.nextAttemptAt, null)
  await removePolicy(tenant, key.id)
})

test('secret rotation: the next delivery is signed with the new secret only; no secret is stored or shown in clear', async () => {
  const tenant = await svc.createTenant()
  const oldSecret = await secretOf(tenant)
  const receiver = await startReceiver()
  const key = await keyWithPolicy(tenant, receiver.url)

  clock.advance(DAY_MS)
  await finalDelivery(tenant, key.id)
  assert.equal(receiver.requests.length, 1)
  const before = receiver.requests[0]!
  assert.ok(verifies(oldSecret, before.rawBody, before.headers['x-service-signature']))

  const rotated = await as(tenant)('POST', '/webhooks/secret/rotate')
  assert.equal(rotated.status, 200, rotated.text)
  assert.equal(rotated.headers.get('cache-control'), 'no-store')
  const newSecret = rotated.body.secret as string
  assert.match(newSecret, /^whsec_/)
  assert.notEqual(newSecret, oldSecret)
  assert.equal(await secretOf(tenant), newSecret, 'the secret route now returns the new secret')

  clock.advance(DAY_MS)
  const delivery = await finalDelivery(tenant, key.id, 2)
  assert.equal(delivery.status, 'succeeded')
  assert.equal(receiver.requests.length, 2)
  const afterRotation = receiver.requests[1]!
  assert.ok(verifies(newSecret, afterRotation.rawBody, afterRotation.headers['x-service-signature']))
  assert.equal(
    verifies(oldSecret, afterRotation.rawBody, afterRotation.headers['x-service-signature']),
    false,
    'the old secret no longer verifies',
  )

  // Neither secret (nor its random part) is shown or stored in clear.
  const needles = [oldSecret, newSecret].flatMap((s) => [s, s.slice('whsec_'.length)])
  const listed = await as(tenant)('GET', '/webhooks/deliveries')
  const one = await as(tenant)('GET', `/webhooks/deliveries/${delivery.id}`)
  for (const needle of needles) {
    assert.ok(!listed.text.includes(needle), 'secret in the delivery list')
    assert.ok(!one.text.includes(needle), 'secret in the delivery')
    for (const table of ['audit_log', 'webhook_deliveries', 'webhook_secrets']) {
      const [row] = await svc.sql`
        SELECT count(*)::int AS n FROM ${svc.sql(table)} t WHERE position(${needle} in t::text) > 0`
      assert.equal(row!['n'], 0, `secret in clear in ${table}`)
    }
  }
  const sealed = await svc.sql`SELECT sealed_secret FROM webhook_secrets WHERE tenant_id = ${tenant.tenantId}`
  assert.equal(sealed.length, 1)
  const bytes = Buffer.from(sealed[0]!['sealed_secret'] as Uint8Array)
  for (const needle of needles) assert.equal(bytes.includes(Buffer.from(needle)), false, 'sealed, not clear')
  await removePolicy(tenant, key.id)
})

test('tenant isolation and scopes of the webhook routes', async () => {
  const tenantA = await svc.createTenant()
  const tenantB = await svc.createTenant()
  const receiver = await startReceiver()
  const key = await keyWithPolicy(tenantA, receiver.url)
  clock.advance(DAY_MS)
  const delivery = await finalDelivery(tenantA, key.id)
  await removePolicy(tenantA, key.id)

  // Tenant B sees nothing of A's.
  assert.deepEqual(await listDeliveries(tenantB), [])
  const theirs = await as(tenantB)('GET', `/webhooks/deliveries/${delivery.id}`)
  assert.equal(theirs.status, 404, theirs.text)
  assert.equal(theirs.body.error, 'delivery_not_found')
  const unknown = await as(tenantA)('GET', '/webhooks/deliveries/00000000-0000-4000-8000-000000000000')
  assert.equal(unknown.status, 404, unknown.text)
  assert.equal(unknown.body.error, 'delivery_not_found')
  assert.notEqual(await secretOf(tenantB), await secretOf(tenantA), 'each tenant has its own secret')

  const apiKey = async (scopes: string[]) => {
    const res = await as(tenantA)('POST', '/api-keys', { name: `hooks-${scopes.join('-')}`, scopes })
    assert.equal(res.status, 201, res.text)
    return res.body.key as string
  }
  const reader = as(await apiKey(['keys:read']))
  const writer = as(await apiKey(['keys:write']))
  const auditor = as(await apiKey(['audit:read']))

  const readerList = await reader('GET', '/webhooks/deliveries')
  assert.equal(readerList.status, 200, readerList.text)
  assert.deepEqual(
    readerList.body.data.map((d: Delivery) => d.id),
    [delivery.id],
  )
  assert.equal((await reader('GET', `/webhooks/deliveries/${delivery.id}`)).status, 200)
  for (const path of ['/webhooks/secret', '/webhooks/secret/rotate']) {
    const res = await reader('POST', path)
    assert.equal(res.status, 403, `keys:read POST ${path}: ${res.text}`)
    assert.equal(res.body.error, 'insufficient_scope')
    assert.equal(res.text.includes('whsec_'), false)
  }
  for (const path of ['/webhooks/deliveries', `/webhooks/deliveries/${delivery.id}`]) {
    const res = await auditor('GET', path)
    assert.equal(res.status, 403, `audit:read GET ${path}: ${res.text}`)
    assert.equal(res.body.error, 'insufficient_scope')
  }
  const auditorSecret = await auditor('POST', '/webhooks/secret')
  assert.equal(auditorSecret.status, 403)

  const writerSecret = await writer('POST', '/webhooks/secret')
  assert.equal(writerSecret.status, 200, writerSecret.text)
  assert.equal(writerSecret.body.secret, await secretOf(tenantA), 'keys:write reads the tenant secret')
})

test('bad input: a malformed delivery id or page is 400', async () => {
  const tenant = await svc.createTenant()
  const call = as(tenant)
  for (const path of [
    '/webhooks/deliveries/not-a-uuid',
    '/webhooks/deliveries?limit=0',
    '/webhooks/deliveries?limit=5000',
    '/webhooks/deliveries?limit=abc',
    '/webhooks/deliveries?offset=-1',
    '/webhooks/deliveries?unknown=1',
  ]) {
    const res = await call('GET', path)
    assert.equal(res.status, 400, `${path}: ${res.text}`)
    assert.equal(res.body.error, 'validation_failed', path)
  }
  assert.equal((await call('GET', '/webhooks/deliveries?limit=1000')).status, 200)
})

test('responseExcerpt stays within 256 bytes when byte 256 falls inside a UTF-8 character', async () => {
  const tenant = await svc.createTenant()
  // 1 ASCII byte, then 2-byte characters: byte 256 is the first half of a character.
  const answer = Buffer.from(`a${'é'.repeat(600)}`, 'utf8')
  const receiver = await startReceiver((index) =>
    index === 0
      ? { status: 503, body: answer, headers: { 'content-type': 'text/plain; charset=utf-8' } }
      : { status: 200 },
  )
  const key = await keyWithPolicy(tenant, receiver.url)
  clock.advance(DAY_MS)
  const delivery = await finalDelivery(tenant, key.id)
  await removePolicy(tenant, key.id)
  assert.equal(delivery.status, 'succeeded')
  const excerpt = delivery.attempts[0]!.responseExcerpt
  assert.ok(excerpt !== null)
  assert.ok(
    Buffer.byteLength(excerpt, 'utf8') <= 256,
    `the excerpt is ${Buffer.byteLength(excerpt, 'utf8')} bytes of UTF-8`,
  )
})

test('revealing and rotating the signing secret each write an audit record that names the secret, never its value', async () => {
  const tenant = await svc.createTenant()
  const records = async () => [
    ...(await svc.sql<
      { actor: string; action: string; resource: string | null; outcome: string; text: string }[]
    >`
      SELECT actor, action, resource, outcome, a::text AS text FROM audit_log a
      WHERE tenant_id = ${tenant.tenantId} AND action LIKE 'webhooks.secret.%' ORDER BY id`),
  ]
  assert.deepEqual(await records(), [], 'nothing before the first use')

  const first = await secretOf(tenant)
  const again = await secretOf(tenant)
  const rotated = await as(tenant)('POST', '/webhooks/secret/rotate')
  assert.equal(rotated.status, 200, rotated.text)
  const second = rotated.body.secret as string

  const rows = await records()
  assert.deepEqual(
    rows.map((r) => [r.actor, r.action, r.resource, r.outcome]),
    [
      [`apikey:${tenant.apiKeyId}`, 'webhooks.secret.reveal', `webhook-secret:${tenant.tenantId}`, 'success'],
      [`apikey:${tenant.apiKeyId}`, 'webhooks.secret.reveal', `webhook-secret:${tenant.tenantId}`, 'success'],
      [`apikey:${tenant.apiKeyId}`, 'webhooks.secret.rotate', `webhook-secret:${tenant.tenantId}`, 'success'],
    ],
  )
  assert.equal(first, again)
  for (const secret of [first, second]) {
    for (const row of rows) {
      assert.equal(row.text.includes(secret.slice('whsec_'.length)), false, 'the secret is not in the record')
    }
  }
  // The tenant sees them through the audit API too.
  const listed = await as(tenant)('GET', `/audit?resource=webhook-secret:${tenant.tenantId}`)
  assert.equal(listed.status, 200, listed.text)
  assert.deepEqual(listed.body.data.map((r: { action: string }) => r.action).sort(), [
    'webhooks.secret.reveal',
    'webhooks.secret.reveal',
    'webhooks.secret.rotate',
  ])
})
