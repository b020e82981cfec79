import assert from 'node:assert/strict'
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { after, before, test } from 'node:test'
import { createKmsClient, dataOf, KmsError } from '@kms/sdk'
import { startTestService, type TenantWithKey, type TestService } from '../helpers/service.ts'

/**
 * The SDK's HTTP client: the service's error answers as KmsError (code, fields, request id, never
 * the credential), and its retry rules proven against a small local server standing in for a
 * load balancer: only 429 and 503 are retried, after the Retry-After the answer gave, measured by
 * a clock the test owns (the client's `sleep` moves it), never by wall time.
 */

let svc: TestService
let tenant: TenantWithKey
before(async () => {
  svc = await startTestService()
  tenant = await svc.createTenant()
})
after(async () => {
  await svc?.stop()
})

interface Attempt {
  at: number
  headers: IncomingMessage['headers']
  body: string
}

/** A local HTTP server answering from a script, recording each request and the test clock's time. */
async function scriptedServer(
  clock: { now: number },
  answer: (attempt: number, req: IncomingMessage, res: ServerResponse) => void,
): Promise<{ url: string; attempts: Attempt[]; server: Server }> {
  const attempts: Attempt[] = []
  const server = createServer((req, res) => {
    let body = ''
    req.on('data', (c: Buffer) => {
      body += c.toString()
    })
    req.on('end', () => {
      attempts.push({ at: clock.now, headers: req.headers, body })
      answer(attempts.length, req, res)
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, attempts, server }
}

const closeServer = (server: Server) =>
  new Promise<void>((resolve) => {
    server.closeAllConnections()
    server.close(() => resolve())
  })

const json = (res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) => {
  res.writeHead(status, { 'content-type': 'application/json', ...headers })
  res.end(JSON.stringify(body))
}

/** The client's wait, as the test's clock: a retry "waits" by moving the clock, and the delays are recorded. */
function testClock() {
  const clock = { now: 1_000_000_000_000, sleeps: [] as number[] }
  const sleep = async (ms: number) => {
    clock.sleeps.push(ms)
    clock.now += ms
  }
  return { clock, sleep, now: () => clock.now }
}

test('a 503 with Retry-After (seconds) is retried once its delay has passed on the clock', async (t) => {
  const { clock, sleep, now } = testClock()
  const lb = await scriptedServer(clock, (n, _req, res) =>
    n === 1
      ? json(res, 503, { error: 'unavailable', message: 'Try later' }, { 'retry-after': '7' })
      : json(res, 200, { status: 'ok' }),
  )
  t.after(() => closeServer(lb.server))
  const client = createKmsClient({ baseUrl: lb.url, apiKey: 'k', sleep, now })
  const result = await client.api.POST('/api/v1/keys/{keyId}/data-key', {
    params: { path: { keyId: 'alias/x' } },
    body: { keyBytes: 32 },
  })
  assert.equal(result.response.status, 200)
  assert.equal(lb.attempts.length, 2)
  assert.deepEqual(clock.sleeps, [7000])
  assert.ok(lb.attempts[1]!.at - lb.attempts[0]!.at >= 7000, 'the second attempt came after the Retry-After')
  // The same body again (the request is replayable), with the credential.
  assert.equal(lb.attempts[1]!.body, lb.attempts[0]!.body)
  assert.equal(lb.attempts[1]!.headers['x-api-key'], 'k')
})

test('a 429 with Retry-After as an HTTP date waits until that date', async (t) => {
  const { clock, sleep, now } = testClock()
  const lb = await scriptedServer(clock, (n, _req, res) =>
    n < 3
      ? json(
          res,
          429,
          { error: 'rate_limited', message: 'Slow down' },
          { 'retry-after': new Date(clock.now + 12_000).toUTCString() },
        )
      : json(res, 200, []),
  )
  t.after(() => closeServer(lb.server))
  const client = createKmsClient({ baseUrl: lb.url, apiKey: 'k', sleep, now })
  await client.api.GET('/api/v1/me')
  assert.equal(lb.attempts.length, 3)
  assert.deepEqual(clock.sleeps, [12_000, 12_000])
  assert.ok(lb.attempts[2]!.at - lb.attempts[1]!.at >= 12_000)
})

test('retries stop after `retries`, and a 503 without Retry-After backs off with jitter', async (t) => {
  const { clock, sleep, now } = testClock()
  const lb = await scriptedServer(clock, (_n, _req, res) =>
    json(res, 503, { error: 'database_unavailable', message: 'Down' }),
  )
  t.after(() => closeServer(lb.server))
  const client = createKmsClient({ baseUrl: lb.url, apiKey: 'k', retries: 2, sleep, now })
  await assert.rejects(dataOf(client.api.GET('/api/v1/me')), (error: unknown) => {
    assert.ok(error instanceof KmsError)
    assert.equal(error.status, 503)
    assert.equal(error.code, 'database_unavailable')
    return true
  })
  assert.equal(lb.attempts.length, 3)
  assert.equal(clock.sleeps.length, 2)
  // Backoff: half fixed, half jitter, doubling: 100..200 ms, then 200..400 ms.
  assert.ok(clock.sleeps[0]! >= 100 && clock.sleeps[0]! <= 200, String(clock.sleeps[0]))
  assert.ok(clock.sleeps[1]! >= 200 && clock.sleeps[1]! <= 400, String(clock.sleeps[1]))
})

test('a Retry-After beyond maxRetryDelayMs is not waited for: the 429 is the answer, with retryAfterSeconds', async (t) => {
  const { clock, sleep, now } = testClock()
  const lb = await scriptedServer(clock, (_n, _req, res) =>
    json(res, 429, { error: 'rate_limited', message: 'Slow down' }, { 'retry-after': '3600' }),
  )
  t.after(() => closeServer(lb.server))
  const client = createKmsClient({ baseUrl: lb.url, apiKey: 'k', sleep, now })
  await assert.rejects(dataOf(client.api.GET('/api/v1/me')), (error: unknown) => {
    assert.ok(error instanceof KmsError)
    assert.equal(error.code, 'rate_limited')
    assert.equal(error.retryAfterSeconds, 3600)
    return true
  })
  assert.equal(lb.attempts.length, 1)
  assert.deepEqual(clock.sleeps, [])
})

test('a 500 and a 400 are not retried', async (t) => {
  const { clock, sleep, now } = testClock()
  for (const [status, code] of [
    [500, 'internal_error'],
    [400, 'validation_failed'],
  ] as const) {
    const lb = await scriptedServer(clock, (_n, _req, res) =>
      json(res, status, { error: code, message: 'No' }),
    )
    t.after(() => closeServer(lb.server))
    const client = createKmsClient({ baseUrl: lb.url, apiKey: 'k', sleep, now })
    await assert.rejects(dataOf(client.api.GET('/api/v1/me')), (error: unknown) => {
      assert.ok(error instanceof KmsError)
      assert.equal(error.status, status)
      assert.equal(error.code, code)
      return true
    })
    assert.equal(lb.attempts.length, 1, `${status} was sent once`)
  }
  assert.deepEqual(clock.sleeps, [])
})

test('an attempt without an answer within timeoutMs is KmsError timeout (status 0), not retried', async (t) => {
  const { clock, sleep, now } = testClock()
  // Never answers.
  const lb = await scriptedServer(clock, () => {})
  t.after(() => closeServer(lb.server))
  const client = createKmsClient({ baseUrl: lb.url, apiKey: 'secret-api-key-1', timeoutMs: 300, sleep, now })
  await assert.rejects(dataOf(client.api.GET('/api/v1/me')), (error: unknown) => {
    assert.ok(error instanceof KmsError)
    assert.equal(error.status, 0)
    assert.equal(error.code, 'timeout')
    assert.ok(!String(error.stack).includes('secret-api-key-1'))
    return true
  })
  assert.equal(lb.attempts.length, 1)
})

test('no server at all is KmsError unavailable (status 0), not retried, the API key nowhere in it', async () => {
  const { clock, sleep, now } = testClock()
  const lb = await scriptedServer(clock, () => {})
  const url = lb.url
  await closeServer(lb.server)
  const client = createKmsClient({ baseUrl: url, apiKey: 'secret-api-key-2', sleep, now })
  await assert.rejects(dataOf(client.api.GET('/api/v1/me')), (error: unknown) => {
    assert.ok(error instanceof KmsError)
    assert.equal(error.status, 0)
    assert.equal(error.code, 'unavailable')
    assert.ok(!`${error.stack} ${JSON.stringify(error)}`.includes('secret-api-key-2'))
    return true
  })
  assert.deepEqual(clock.sleeps, [])
})

test('a redirect is never followed: KmsError unexpected_redirect with its 3xx, and the server it names gets nothing (no API key, no token, no body)', async (t) => {
  const { clock, sleep, now } = testClock()
  // Another origin (localhost, not 127.0.0.1): where fetch would carry X-Api-Key and the body along.
  const elsewhere = await scriptedServer(clock, (_n, _req, res) => json(res, 200, { data: [], total: 0 }))
  t.after(() => closeServer(elsewhere.server))
  const target = `${elsewhere.url.replace('127.0.0.1', 'localhost')}/steal`
  const statuses = [301, 302, 303, 307, 308]
  const redirecting = await scriptedServer(clock, (n, _req, res) => {
    res.writeHead(statuses[(n - 1) % statuses.length]!, { location: target })
    res.end()
  })
  t.after(() => closeServer(redirecting.server))

  const refused = (status: number, secret: string) => (error: unknown) => {
    assert.ok(error instanceof KmsError)
    assert.equal(error.code, 'unexpected_redirect')
    assert.equal(error.status, status)
    assert.match(error.message, /does not follow redirects/)
    assert.match(error.message, new RegExp(`to ${new URL(target).origin}`))
    assert.ok(!`${error.stack} ${JSON.stringify(error)}`.includes(secret))
    return true
  }
  const withKey = createKmsClient({ baseUrl: redirecting.url, apiKey: 'kms_SECRET_API_KEY', sleep, now })
  for (const status of statuses)
    await assert.rejects(
      withKey.api.POST('/api/v1/keys/{keyId}/wrap', {
        params: { path: { keyId: 'k' } },
        body: { plaintext: 'PLAINTEXT_DATA_KEY', context: {} } as never,
      }),
      refused(status, 'kms_SECRET_API_KEY'),
    )
  // The raw send (binary bodies: encrypt-file's data) with a bearer token: the same.
  const withToken = createKmsClient({ baseUrl: redirecting.url, token: 'SECRET_BEARER', sleep, now })
  await assert.rejects(
    withToken.send(new Request(`${redirecting.url}/api/v1/encrypt`, { method: 'POST', body: 'PLAINTEXT' })),
    refused(301, 'SECRET_BEARER'),
  )

  assert.equal(redirecting.attempts.length, statuses.length + 1, 'each request sent once, not retried')
  assert.equal(redirecting.attempts[0]!.headers['x-api-key'], 'kms_SECRET_API_KEY')
  assert.deepEqual(elsewhere.attempts, [], 'the server the redirects named was never asked')
  assert.deepEqual(clock.sleeps, [])
})

test("the caller's abort signal ends a request (and a retry's wait) as KmsError aborted", async (t) => {
  const { clock, now } = testClock()
  const lb = await scriptedServer(clock, (_n, _req, res) =>
    json(res, 503, { error: 'unavailable', message: 'x' }, { 'retry-after': '5' }),
  )
  t.after(() => closeServer(lb.server))
  const controller = new AbortController()
  // The wait for the retry is where the caller gives up.
  const sleep = (_ms: number, signal: AbortSignal) => {
    controller.abort()
    return signal.aborted ? Promise.reject(signal.reason) : Promise.resolve()
  }
  const client = createKmsClient({ baseUrl: lb.url, apiKey: 'k', sleep, now })
  await assert.rejects(client.api.GET('/api/v1/me', { signal: controller.signal }), (error: unknown) => {
    assert.ok(error instanceof KmsError)
    assert.equal(error.code, 'aborted')
    assert.equal(error.status, 0)
    return true
  })
  assert.equal(lb.attempts.length, 1)
})

test('a token function is asked before every attempt (a refreshed token is used on the retry)', async (t) => {
  const { clock, sleep, now } = testClock()
  const lb = await scriptedServer(clock, (n, _req, res) =>
    n === 1
      ? json(res, 503, { error: 'unavailable', message: 'x' }, { 'retry-after': '1' })
      : json(res, 200, []),
  )
  t.after(() => closeServer(lb.server))
  let issued = 0
  const client = createKmsClient({ baseUrl: lb.url, token: async () => `token-${++issued}`, sleep, now })
  await client.api.GET('/api/v1/me')
  assert.deepEqual(
    lb.attempts.map((a) => a.headers.authorization),
    ['Bearer token-1', 'Bearer token-2'],
  )
  assert.match(String(lb.attempts[0]!.headers['user-agent']), /^kms-sdk-typescript\//)
})

test('intercept sees the prepared request and can answer instead of the network (nothing is sent)', async (t) => {
  const { clock } = testClock()
  const lb = await scriptedServer(clock, (_n, _req, res) => json(res, 200, []))
  t.after(() => closeServer(lb.server))
  const captured: { method: string; url: string; key: string | null; body: string }[] = []
  const client = createKmsClient({
    baseUrl: lb.url,
    apiKey: 'k-captured',
    intercept: async (request) => {
      captured.push({
        method: request.method,
        url: request.url,
        key: request.headers.get('x-api-key'),
        body: await request.clone().text(),
      })
      return new Response(null, { status: 204 })
    },
  })
  const result = await client.api.POST('/api/v1/keys/{keyId}/wrap', {
    params: { path: { keyId: 'alias/app' } },
    body: { plaintext: 'AAAA', context: { b: '2' } },
  })
  assert.equal(result.response.status, 204)
  assert.equal(lb.attempts.length, 0)
  assert.deepEqual(captured, [
    {
      method: 'POST',
      url: `${lb.url}/api/v1/keys/alias%2Fapp/wrap`,
      key: 'k-captured',
      body: '{"plaintext":"AAAA","context":{"b":"2"}}',
    },
  ])
})

test("the service's error answers arrive as KmsError with its code, fields and request id, never the API key", async () => {
  const client = createKmsClient({ baseUrl: svc.baseUrl, apiKey: tenant.key })
  await assert.rejects(
    dataOf(client.api.GET('/api/v1/keys/{keyId}', { params: { path: { keyId: crypto.randomUUID() } } })),
    (error: unknown) => {
      assert.ok(error instanceof KmsError)
      assert.equal(error.status, 404)
      assert.equal(error.code, 'key_not_found')
      assert.match(error.requestId ?? '', /.+/)
      return true
    },
  )
  await assert.rejects(
    dataOf(client.api.POST('/api/v1/keys', { body: { name: 'k', keyType: 'Nope' as 'HMAC' } })),
    (error: unknown) => {
      assert.ok(error instanceof KmsError)
      assert.equal(error.code, 'validation_failed')
      assert.ok(error.fields.some((f) => f.path === 'body/keyType'))
      return true
    },
  )
  const wrongKey = `${tenant.key.slice(0, -4)}XXXX`
  const stranger = createKmsClient({ baseUrl: svc.baseUrl, apiKey: wrongKey })
  await assert.rejects(dataOf(stranger.api.GET('/api/v1/me')), (error: unknown) => {
    assert.ok(error instanceof KmsError)
    assert.equal(error.status, 401)
    assert.equal(error.code, 'unauthorized')
    const everything = `${error.message} ${error.stack} ${JSON.stringify(error)} ${JSON.stringify(error.details)}`
    assert.ok(!everything.includes(wrongKey) && !everything.includes(tenant.key))
    return true
  })
  // And a success is the data itself.
  const key = await dataOf(
    client.api.POST('/api/v1/keys', { body: { name: 'sdk-client', keyType: 'Encryption' } }),
  )
  assert.match(key.id, /^[0-9a-f-]{36}$/)
})

test('bad options are refused naming the option', () => {
  assert.throws(() => createKmsClient({ baseUrl: 'ftp://x' }), /baseUrl/)
  assert.throws(() => createKmsClient({ baseUrl: 'http://x', apiKey: 'a', token: 'b' }), /apiKey or token/)
  assert.throws(() => createKmsClient({ baseUrl: 'http://x', timeoutMs: 0 }), /timeoutMs/)
  assert.throws(() => createKmsClient({ baseUrl: 'http://x', retries: -1 }), /retries/)
})
