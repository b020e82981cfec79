import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { createServer, type Server, type Socket, connect as tcpConnect } from 'node:net'
import { after, before, test } from 'node:test'
import Fastify from 'fastify'
import { AuditUnavailableError } from '../../src/audit/audit-log.ts'
import { installErrorHandlers } from '../../src/http/error-handler.ts'
import { instrumentRequests } from '../../src/metrics/http-metrics.ts'
import { createServiceMetrics } from '../../src/metrics/service-metrics.ts'
import { markDatabaseError, serviceUnavailable } from '../../src/platform/errors.ts'
import { installFormHandling } from '../../src/web/form-surface.ts'
import { samples } from '../helpers/prometheus.ts'
import {
  type SpawnedService,
  spawnService,
  startTestService,
  type TenantWithKey,
  type TestService,
} from '../helpers/service.ts'

/**
 * A database outage under load (issue 31, defect 4; docs/operations.md "Database outages"): a TCP
 * proxy stands between one service and PostgreSQL, and the test cuts it while requests that need
 * the database keep coming: every connection reset as requests arrive, then twice while they are
 * in flight, then connections refused; then it restores it. Every request must get an HTTP
 * answer, never a 500; every 503 must say when to retry (Retry-After); no process of the service
 * may exit (the primary would replace it, and the clients it served would see their connections
 * reset); and every write the service acknowledged must be there afterwards.
 *
 * The service under test is a real `npm start` (a primary, two API processes and the job
 * process), so a crash shows as an exit in its log. A second, in-process service on the same
 * database but not behind the proxy makes the tenant and reads what was stored.
 *
 * The phases are counted in rounds of requests and in answers, never timed; no duration is
 * asserted. REQUEST_BOUND_MS only bounds a request that would otherwise hang (a failure).
 */

const CONCURRENCY = 24
const REQUEST_BOUND_MS = 20_000

/** A TCP proxy in front of PostgreSQL that resets its connections, refuses new ones, and comes back. */
class DatabaseProxy {
  private server: Server | undefined
  private readonly sockets = new Set<Socket>()
  port = 0

  async listen(): Promise<void> {
    const server = createServer((client) => {
      const upstream = tcpConnect(5432, '127.0.0.1')
      this.sockets.add(client)
      this.sockets.add(upstream)
      client.pipe(upstream)
      upstream.pipe(client)
      const drop = () => {
        this.sockets.delete(client)
        this.sockets.delete(upstream)
        client.destroy()
        upstream.destroy()
      }
      for (const socket of [client, upstream]) {
        socket.on('error', drop)
        socket.on('close', drop)
      }
    })
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject)
      server.listen(this.port, '127.0.0.1', () => resolve())
    })
    this.port = (server.address() as { port: number }).port
    this.server = server
  }

  /** Resets every connection through the proxy (the service reads ECONNRESET); keeps accepting. */
  reset(): void {
    for (const socket of [...this.sockets]) socket.resetAndDestroy()
  }

  /** Stops listening (new connections are refused: ECONNREFUSED), and resets the open ones. */
  async refuse(): Promise<void> {
    const server = this.server
    this.server = undefined
    this.reset()
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()))
  }
}

type Op = 'encrypt' | 'secret' | 'key'

interface Outcome {
  op: Op
  status: number
  retryAfter: string | null
  error: string | undefined
  /** The created key's or secret's id, when the service acknowledged it (201). */
  id: string | undefined
  /** Why no HTTP answer came (a reset or refused connection, or the bound passed). */
  failure: string | undefined
}

let a: TestService
let b: SpawnedService
let proxy: DatabaseProxy
let tenant: TenantWithKey
let keyId: string
const outcomes: Outcome[] = []

before(async () => {
  a = await startTestService()
  proxy = new DatabaseProxy()
  await proxy.listen()
  const proxied = new URL(a.db.url)
  proxied.port = String(proxy.port)
  b = await spawnService({
    ...a.env,
    DATABASE_URL: proxied.toString(),
    KMS_API_PROCESSES: '2',
    KMS_ROLE: 'all',
  })
  tenant = await a.createTenant()
  const key = await call('POST', '/keys', { name: `enc-${hex()}`, keyType: 'Encryption' })
  assert.equal(key.status, 201, JSON.stringify(key.body))
  keyId = key.body.id
})

after(async () => {
  await b?.stop()
  await proxy?.refuse()
  await a?.stop()
})

const hex = () => randomBytes(6).toString('hex')

async function call(
  method: string,
  path: string,
  body?: unknown,
  // biome-ignore lint/suspicious/noExplicitAny: parsed JSON; the test reads the fields it needs
): Promise<{ status: number; headers: Headers; body: any }> {
  const response = await fetch(`${b.baseUrl}/api/v1${path}`, {
    method,
    headers: {
      'x-api-key': tenant.key,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    signal: AbortSignal.timeout(REQUEST_BOUND_MS),
  })
  const text = await response.text()
  let parsed: unknown
  try {
    parsed = text ? JSON.parse(text) : undefined
  } catch {
    parsed = { unparsed: text.slice(0, 200) }
  }
  return { status: response.status, headers: response.headers, body: parsed }
}

/** Requests answered (or failed) so far, and who waits for a count of them. */
let answers = 0
let waiters: { count: number; wake: () => void }[] = []

/** Resolves once `more` further requests have been answered (at once when the test has failed). */
function answered(more: number): Promise<void> {
  if (failedAlready()) return Promise.resolve()
  const count = answers + more
  return new Promise((wake) => waiters.push({ count, wake }))
}

function countAnswer(): void {
  answers++
  for (const waiter of waiters.filter((w) => w.count <= answers)) waiter.wake()
  waiters = waiters.filter((w) => w.count > answers)
}

async function attempt(op: Op): Promise<Outcome> {
  try {
    const res =
      op === 'encrypt'
        ? await call('POST', '/encrypt', { keyId, plaintext: randomBytes(32).toString('base64') })
        : op === 'secret'
          ? await call('POST', '/secrets', { name: `s-${hex()}`, value: hex() })
          : await call('POST', '/keys', { name: `k-${hex()}`, keyType: 'HMAC', algorithm: 'HMAC-SHA256' })
    return {
      op,
      status: res.status,
      retryAfter: res.headers.get('retry-after'),
      error: res.body?.error,
      id: res.status === 201 ? res.body?.id : undefined,
      failure: undefined,
    }
  } catch (err) {
    const cause = (err as { cause?: { code?: string } }).cause
    return {
      op,
      status: 0,
      retryAfter: null,
      error: undefined,
      id: undefined,
      failure: `${(err as Error).name}: ${(err as Error).message}${cause?.code ? ` (${cause.code})` : ''}`,
    }
  }
}

async function one(op: Op): Promise<Outcome> {
  try {
    return await attempt(op)
  } finally {
    countAnswer()
  }
}

const OPS: readonly Op[] = ['encrypt', 'secret', 'key']

const succeeded = (o: Outcome) => o.status === 200 || o.status === 201
/** An outcome that fails the test: no answer, or an answer that is neither a success nor a 503. */
const wrong = (o: Outcome) => !succeeded(o) && o.status !== 503
const failedAlready = () => outcomes.some(wrong)

/**
 * `rounds` rounds of CONCURRENCY concurrent requests (encrypt, create a secret, create a key),
 * each round waiting for all its answers. Once an outcome failed the test, the rest is skipped:
 * the assertions report it, instead of the load waiting out hung requests round after round.
 */
async function load(rounds: number): Promise<Outcome[]> {
  const mine: Outcome[] = []
  for (let round = 0; round < rounds; round++) {
    if (failedAlready()) {
      // Keep the answer count moving for whoever waits on it.
      for (let i = 0; i < CONCURRENCY; i++) countAnswer()
      continue
    }
    const results = await Promise.all(
      Array.from({ length: CONCURRENCY }, (_, i) => one(OPS[i % OPS.length]!)),
    )
    mine.push(...results)
    outcomes.push(...results)
  }
  return mine
}

async function healthy(): Promise<boolean> {
  try {
    const response = await fetch(`${b.baseUrl}/api/v1/health`, {
      signal: AbortSignal.timeout(REQUEST_BOUND_MS),
    })
    await response.body?.cancel()
    return response.status === 200
  } catch {
    return false
  }
}

function summary(list: Outcome[]): string {
  const counts = new Map<string, number>()
  for (const o of list) {
    const key = `${o.op} ${o.status}${o.error ? ` ${o.error}` : ''}${o.failure ? ` ${o.failure}` : ''}`
    counts.set(key, (counts.get(key) ?? 0) + 1)
  }
  return [...counts].map(([key, n]) => `${n} × ${key}`).join('\n')
}

/** The service's error and fatal log lines (the first 20), for a failure's message. */
const serviceErrors = () =>
  b
    .output()
    .split('\n')
    .filter((line) => /"level":(50|60)/.test(line) || /Error|\[test harness\]/.test(line))
    .slice(0, 20)
    .join('\n')

test('a database cut under load: an answer for every request, 503 with Retry-After, no crash, no lost write', async () => {
  const warm = await load(2)
  assert.ok(warm.every(succeeded), `before the cut:\n${summary(warm)}`)

  // Reset twice with requests in flight (statements and transactions on the wire).
  const resetting = load(4)
  await answered(CONCURRENCY / 2)
  proxy.reset()
  await answered(CONCURRENCY * 2)
  proxy.reset()
  await resetting
  // Reset as requests arrive, the connections idle: a connection must not be used between its
  // socket's error and its close.
  const arriving = load(2)
  await new Promise((resolve) => setImmediate(resolve))
  proxy.reset()
  await arriving
  // Refused: the load goes on against a database that cannot be reached.
  const refusing = load(6)
  await answered(CONCURRENCY / 2)
  await proxy.refuse()
  const refused = await refusing
  assert.ok(
    failedAlready() || refused.some((o) => o.status === 503),
    `the cut was not seen by the service:\n${summary(refused)}`,
  )

  // Restored: the service recovers on its own (bounded: some rounds, then every request succeeds).
  await proxy.listen()
  for (let i = 0; i < 100 && !failedAlready() && !(await healthy()); i++)
    await new Promise((r) => setTimeout(r, 100))
  let recovered = false
  for (let i = 0; i < 20 && !recovered && !failedAlready(); i++) recovered = (await load(1)).every(succeeded)

  console.log(`outcomes:\n${summary(outcomes)}`)
  const answeredWrong = outcomes.filter((o) => wrong(o) && o.failure === undefined)
  assert.deepEqual(answeredWrong, [], `no answer but a success or a 503 (no 500)\n${serviceErrors()}`)
  const unanswered = outcomes.filter((o) => o.failure !== undefined)
  assert.deepEqual(unanswered, [], `every request gets an HTTP answer\n${serviceErrors()}`)
  const withoutRetryAfter = outcomes.filter((o) => o.status === 503 && !/^[1-9]\d*$/.test(o.retryAfter ?? ''))
  assert.deepEqual(withoutRetryAfter, [], 'every 503 carries Retry-After in seconds')
  assert.ok(
    outcomes
      .filter((o) => o.status === 503)
      .every((o) => o.error === 'database_unavailable' || o.error === 'audit_unavailable'),
    summary(outcomes),
  )
  assert.ok(recovered, `the service did not recover after the database came back:\n${summary(outcomes)}`)

  // No process exited: the primary would have logged the replacement it started.
  assert.equal(b.child.exitCode, null, 'the service is still running')
  assert.doesNotMatch(b.output(), /process exited; starting a replacement/, serviceErrors())
  assert.doesNotMatch(b.output(), /Cannot read properties of null/)

  // Every acknowledged write is stored (read straight from the database, not through the proxy)...
  const acknowledged = outcomes.filter((o) => o.id !== undefined)
  const keyIds = acknowledged.filter((o) => o.op === 'key').map((o) => o.id!)
  const secretIds = acknowledged.filter((o) => o.op === 'secret').map((o) => o.id!)
  assert.ok(keyIds.length > 0 && secretIds.length > 0)
  const keys = await a.sql<{ id: string }[]>`
    SELECT id FROM keys WHERE id = ANY(${a.sql.array(keyIds)}::uuid[])`
  const secrets = await a.sql<{ id: string }[]>`
    SELECT id FROM secrets WHERE id = ANY(${a.sql.array(secretIds)}::uuid[])`
  assert.deepEqual(new Set(keys.map((r) => r.id)), new Set(keyIds), 'every acknowledged key is stored')
  assert.deepEqual(
    new Set(secrets.map((r) => r.id)),
    new Set(secretIds),
    'every acknowledged secret is stored',
  )
  // ...and the service serves each of them again.
  const reads = [...keyIds.map((id) => `/keys/${id}`), ...secretIds.map((id) => `/secrets/${id}`)]
  for (let i = 0; i < reads.length; i += CONCURRENCY) {
    const statuses = await Promise.all(
      reads.slice(i, i + CONCURRENCY).map(async (path) => [path, (await call('GET', path)).status]),
    )
    assert.deepEqual(
      statuses.filter(([, status]) => status !== 200),
      [],
    )
  }
})

/** An error as a query through connectDatabase fails with (marked as the database's). */
function databaseError(code: string): Error {
  const error = Object.assign(new Error(`database failure ${code}`), { code })
  markDatabaseError(error)
  return error
}

test('every database error that will pass is a 503 with Retry-After, on the API and on the pages', async () => {
  const app = Fastify()
  installErrorHandlers(app)
  app.get('/db/:code', async (request) => {
    throw databaseError((request.params as { code: string }).code)
  })
  // postgres.js's own decoration of a query's error, without the mark.
  app.get('/decorated', async () => {
    throw Object.assign(new Error('read ECONNRESET'), {
      code: 'ECONNRESET',
      query: 'SELECT 1',
      parameters: [],
    })
  })
  // The same code from another client (Redis, an outbound call) is not the database's.
  app.get('/other-client', async () => {
    throw Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' })
  })
  app.get('/audit', async () => {
    throw new AuditUnavailableError()
  })
  app.get('/own-503', async () => {
    throw serviceUnavailable('identity_unavailable', 'Not now')
  })
  await app.register(async (pages) => {
    installFormHandling(pages, {
      pageSettings: { cdnHost: 'cdn.example.com' },
      bodyLimit: 1024,
      maxFields: 10,
      failure: 'page failed',
      tooLarge: 'too large',
      notAForm: 'not a form',
    })
    pages.get('/page', async () => {
      throw databaseError('ECONNREFUSED')
    })
  })

  const unavailable = [
    'ECONNRESET',
    'ECONNREFUSED',
    'ETIMEDOUT',
    'EPIPE',
    'CONNECTION_CLOSED',
    'CONNECTION_ENDED',
    'CONNECTION_DESTROYED',
    'CONNECT_TIMEOUT',
    '57P01',
    '57P02',
    '57P03',
    '57014',
    '55P03',
    '53300',
    '08006',
    '08001',
  ]
  for (const code of unavailable) {
    const res = await app.inject(`/db/${code}`)
    assert.equal(res.statusCode, 503, code)
    assert.equal(res.json().error, 'database_unavailable', code)
    assert.match(String(res.headers['retry-after']), /^[1-9]\d*$/, code)
  }
  const decorated = await app.inject('/decorated')
  assert.equal(decorated.statusCode, 503)
  assert.equal((await app.inject('/other-client')).statusCode, 500)
  // Errors about the request or the data stay what they were.
  assert.equal((await app.inject('/db/23505')).statusCode, 500)
  assert.equal((await app.inject('/db/22P02')).statusCode, 400)
  for (const path of ['/audit', '/own-503']) {
    const res = await app.inject(path)
    assert.equal(res.statusCode, 503, path)
    assert.match(String(res.headers['retry-after']), /^[1-9]\d*$/, path)
  }
  const page = await app.inject('/page')
  assert.equal(page.statusCode, 503)
  assert.match(String(page.headers['content-type']), /text\/html/)
  assert.match(String(page.headers['retry-after']), /^[1-9]\d*$/)
  await app.close()
})

test('a 503 database_unavailable is counted as such in kms_http_errors_total, not as internal_error', async () => {
  const metrics = createServiceMetrics({ kind: 'api' })
  const app = Fastify()
  installErrorHandlers(app)
  instrumentRequests(app, metrics.http)
  app.get('/db', async () => {
    throw databaseError('ECONNRESET')
  })
  const res = await app.inject('/db')
  assert.equal(res.statusCode, 503)
  const errors = samples(await metrics.registry.metrics()).filter((s) => s.name === 'kms_http_errors_total')
  assert.deepEqual(
    errors.map((s) => [s.labels, s.value]),
    [[{ route: '/db', method: 'GET', status: '503', error: 'database_unavailable' }, 1]],
  )
  await app.close()
})
