import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { after, before, describe, test } from 'node:test'
import { startTestService, type TenantWithKey, type TestService } from '../helpers/service.ts'

/**
 * Every category of bad input gets its exact status and error code, in the one error format
 * `{error, message, ...}`, with no internals and no echo of what was sent, and every response
 * carries an x-request-id.
 */

const API = '/api/v1'
const SANE_REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/

interface Sent {
  status: number
  headers: Headers
  text: string
  /** The parsed JSON body, or undefined. */
  json: Record<string, unknown> | undefined
}

interface SendOptions {
  key?: string
  headers?: Record<string, string>
  /** Sent as is; a Uint8Array goes without any Content-Type. */
  body?: string | Uint8Array
  /** Shorthand for a JSON body with Content-Type application/json. */
  json?: unknown
}

let svc: TestService
let tenant: TenantWithKey
let otherKeyId: string

async function send(method: string, path: string, options: SendOptions = {}): Promise<Sent> {
  const headers: Record<string, string> = { ...options.headers }
  if (options.key !== undefined) headers['x-api-key'] = options.key
  let body = options.body
  if (options.json !== undefined) {
    body = JSON.stringify(options.json)
    headers['content-type'] ??= 'application/json'
  }
  const response = await fetch(new URL(path, svc.baseUrl), {
    method,
    headers,
    ...(body !== undefined ? { body } : {}),
    redirect: 'manual',
  })
  const text = await response.text()
  let json: Record<string, unknown> | undefined
  try {
    const parsed: unknown = JSON.parse(text)
    json = typeof parsed === 'object' && parsed !== null ? (parsed as Record<string, unknown>) : undefined
  } catch {
    json = undefined
  }
  return { status: response.status, headers: response.headers, text, json }
}

const withKey = (options: SendOptions = {}): SendOptions => ({ ...options, key: tenant.key })

/** Status, error code and the `{error, message}` shape, with the response in the failure message. */
function assertError(res: Sent, status: number, code: string, context: string): void {
  const where = `${context}: got ${res.status} ${res.text.slice(0, 300)}`
  assert.equal(res.status, status, where)
  assert.match(res.headers.get('content-type') ?? '', /^application\/json\b/, where)
  assert.ok(res.json, `${where} (not JSON)`)
  assert.equal(res.json['error'], code, where)
  assert.equal(typeof res.json['message'], 'string', where)
}

/** The stack, file paths, framework codes or driver messages a body must never carry. */
function assertNoInternals(res: Sent, context: string): void {
  const where = `${context}: ${res.status} ${res.text.slice(0, 300)}`
  const hasStack = (value: unknown): boolean =>
    typeof value === 'object' &&
    value !== null &&
    (Object.hasOwn(value, 'stack') || Object.values(value).some(hasStack))
  assert.ok(!hasStack(res.json), `${where} (has a stack property)`)
  const patterns: [RegExp, string][] = [
    [/\bat (?:\S+ )?\(?(?:file:|node:|\/)[^)\s]*:\d+(?::\d+)?/, 'a stack frame'],
    [/node_modules/, 'node_modules'],
    [/file:\/\//, 'a file URL'],
    [/\/work\/|\/home\/|\/usr\/|\/src\/[\w/-]+\.ts/, 'a file path'],
    [/\bFST_[A-Z_]+/, 'a Fastify error code'],
    [
      /SyntaxError|Unexpected (?:token|end of JSON)|in JSON at position|Unterminated string|Bad control character/,
      "the JSON parser's own message",
    ],
    [/PostgresError|invalid input syntax|violates|SQLSTATE|relation "/i, 'a database message'],
  ]
  for (const [re, what] of patterns) assert.ok(!re.test(res.text), `${where} (reveals ${what})`)
}

before(async () => {
  svc = await startTestService()
  tenant = await svc.createTenant()
  otherKeyId = (await svc.createTenant()).apiKeyId
})
after(async () => svc?.stop())

describe('malformed JSON -> 400 invalid_json', () => {
  const cases: [string, string][] = [
    ['a truncated object', '{"name":"x","scopes":["audit:read"]'],
    ['trailing garbage after the object', '{"name":"x","scopes":["audit:read"]} trailing'],
    ['two objects back to back', '{"name":"x"}{"name":"y"}'],
    ['single-quoted strings', "{'name':'x','scopes':['audit:read']}"],
    ['an unquoted key', '{name:"x"}'],
    ['a trailing comma', '{"name":"x","scopes":["audit:read"],}'],
    ['a NaN literal', '{"name":NaN}'],
    ['a bad escape', '{"name":"\\x41"}'],
    ['a bare word', 'hello'],
    ['an empty body', ''],
    ['a whitespace-only body', '  \n '],
  ]
  for (const [name, body] of cases) {
    test(name, async () => {
      const res = await send(
        'POST',
        `${API}/api-keys`,
        withKey({ body, headers: { 'content-type': 'application/json' } }),
      )
      assertError(res, 400, 'invalid_json', name)
    })
  }

  test('also on a route that takes no body (revoke)', async () => {
    const res = await send(
      'POST',
      `${API}/api-keys/${otherKeyId}/revoke`,
      withKey({ body: '{"reason":', headers: { 'content-type': 'application/json' } }),
    )
    assertError(res, 400, 'invalid_json', 'revoke with a truncated body')
    const still = await send('GET', `${API}/api-keys/${otherKeyId}`, withKey())
    assert.equal(still.status, 404, 'the key of another tenant stays invisible')
  })

  test('prototype-poisoning keys are refused, and Object.prototype is untouched', async () => {
    for (const body of [
      '{"name":"x","scopes":["audit:read"],"__proto__":{"badInputPolluted":true}}',
      '{"name":"x","scopes":["audit:read"],"constructor":{"prototype":{"badInputPolluted":true}}}',
    ]) {
      const res = await send(
        'POST',
        `${API}/api-keys`,
        withKey({ body, headers: { 'content-type': 'application/json' } }),
      )
      assert.ok(res.status === 400, `${body}: got ${res.status} ${res.text}`)
      assert.ok(
        res.json?.['error'] === 'invalid_json' || res.json?.['error'] === 'validation_failed',
        `${body}: ${res.text}`,
      )
    }
    assert.equal(Object.hasOwn(Object.prototype, 'badInputPolluted'), false)
  })
})

describe('wrong content type -> 415 unsupported_media_type', () => {
  const valid = JSON.stringify({ name: 'ct', scopes: ['audit:read'] })
  const cases: [string, string][] = [
    ['text/plain', valid],
    ['text/plain; charset=utf-8', valid],
    ['application/xml', '<apiKey><name>ct</name></apiKey>'],
    ['text/xml', '<apiKey/>'],
    [
      'multipart/form-data; boundary=b',
      '--b\r\nContent-Disposition: form-data; name="name"\r\n\r\nct\r\n--b--\r\n',
    ],
    ['application/x-www-form-urlencoded', 'name=ct&scopes=audit:read'],
    ['application/octet-stream', valid],
    ['application/jsonx', valid],
  ]
  for (const [contentType, body] of cases) {
    test(contentType, async () => {
      const before = await svc.sql`SELECT count(*)::int AS n FROM api_keys`
      const res = await send(
        'POST',
        `${API}/api-keys`,
        withKey({ body, headers: { 'content-type': contentType } }),
      )
      assertError(res, 415, 'unsupported_media_type', `Content-Type ${contentType}`)
      const afterRows = await svc.sql`SELECT count(*)::int AS n FROM api_keys`
      assert.equal(afterRows[0]!['n'], before[0]!['n'], 'nothing was created')
    })
  }

  test('a body without any Content-Type', async () => {
    const res = await send('POST', `${API}/api-keys`, withKey({ body: new TextEncoder().encode(valid) }))
    assertError(res, 415, 'unsupported_media_type', 'no Content-Type')
  })

  test('text/plain on a route that takes no body (revoke)', async () => {
    const res = await send(
      'POST',
      `${API}/api-keys/${randomUUID()}/revoke`,
      withKey({ body: 'revoke it', headers: { 'content-type': 'text/plain' } }),
    )
    assertError(res, 415, 'unsupported_media_type', 'revoke with text/plain')
  })

  test('application/json with a charset parameter is accepted', async () => {
    const res = await send(
      'POST',
      `${API}/api-keys`,
      withKey({ body: valid, headers: { 'content-type': 'application/json; charset=utf-8' } }),
    )
    assert.equal(res.status, 201, res.text)
  })
})

describe('unknown fields -> 400 validation_failed naming the field', () => {
  test('in the body', async () => {
    const res = await send(
      'POST',
      `${API}/api-keys`,
      withKey({ json: { name: 'x', scopes: ['audit:read'], isAdmin: true } }),
    )
    assertError(res, 400, 'validation_failed', 'unknown body field')
    assert.match(String(res.json?.['message']), /isAdmin/, res.text)
    const fields = res.json?.['fields'] as { path: string }[] | undefined
    assert.ok(
      fields?.some((f) => f.path === 'body/isAdmin'),
      res.text,
    )
  })

  test('in the body, next to otherwise valid fields, nothing is created', async () => {
    const before = await svc.sql`SELECT count(*)::int AS n FROM api_keys`
    const res = await send(
      'POST',
      `${API}/api-keys`,
      withKey({ json: { name: 'x', scopes: ['audit:read'], tenantId: randomUUID() } }),
    )
    assertError(res, 400, 'validation_failed', 'tenantId smuggled into the body')
    assert.match(String(res.json?.['message']), /tenantId/, res.text)
    const afterRows = await svc.sql`SELECT count(*)::int AS n FROM api_keys`
    assert.equal(afterRows[0]!['n'], before[0]!['n'])
  })

  test('in the query string', async () => {
    const res = await send('GET', `${API}/api-keys?bogusParam=1`, withKey())
    assertError(res, 400, 'validation_failed', 'unknown query parameter')
    assert.match(String(res.json?.['message']), /bogusParam/, res.text)
    const audit = await send('GET', `${API}/audit?sortBy=id`, withKey())
    assertError(audit, 400, 'validation_failed', 'unknown audit query parameter')
    assert.match(String(audit.json?.['message']), /sortBy/, audit.text)
  })
})

describe('oversized body -> 413 payload_too_large', () => {
  const bodyOf = (bytes: number) => {
    const head = '{"name":"x","scopes":["audit:read"],"pad":"'
    return `${head}${'p'.repeat(bytes - head.length - 2)}"}`
  }

  test('one byte over the limit', async () => {
    const limit = svc.config.bodyLimitBytes
    const body = bodyOf(limit + 1)
    assert.equal(Buffer.byteLength(body), limit + 1)
    const res = await send(
      'POST',
      `${API}/api-keys`,
      withKey({ body, headers: { 'content-type': 'application/json' } }),
    )
    assertError(res, 413, 'payload_too_large', `${limit + 1} bytes`)
  })

  test('far over the limit (4 MiB)', async () => {
    const res = await send(
      'POST',
      `${API}/api-keys`,
      withKey({ body: bodyOf(4 * 1024 * 1024), headers: { 'content-type': 'application/json' } }),
    )
    assertError(res, 413, 'payload_too_large', '4 MiB')
  })

  test('exactly at the limit is judged on its content, not its size', async () => {
    const limit = svc.config.bodyLimitBytes
    const res = await send(
      'POST',
      `${API}/api-keys`,
      withKey({ body: bodyOf(limit), headers: { 'content-type': 'application/json' } }),
    )
    assertError(res, 400, 'validation_failed', `${limit} bytes with an unknown field`)
  })

  test('without a key, authentication answers first', async () => {
    const res = await send('POST', `${API}/api-keys`, {
      body: bodyOf(svc.config.bodyLimitBytes + 1),
      headers: { 'content-type': 'application/json' },
    })
    assertError(res, 401, 'unauthorized', 'oversized body without a key')
  })
})

describe('bad UUID in path -> 400 validation_failed', () => {
  const segments: [string, string][] = [
    ['not-a-uuid', 'not-a-uuid'],
    ['a non-hex digit', '00000000-0000-0000-0000-00000000000G'],
    ['a number', '12345'],
    ['no dashes', '0123456789abcdef0123456789abcdef'],
    ['one digit too many', '00000000-0000-0000-0000-0000000000000'],
    ['braces', '%7B00000000-0000-0000-0000-000000000000%7D'],
    ['a percent-encoded slash', 'a%2Fb'],
    ['a NUL byte', '%00'],
    ['a urn:uuid: prefix', 'urn:uuid:00000000-0000-0000-0000-000000000000'],
    ['a 150-character string', 'a'.repeat(150)],
  ]
  for (const [name, segment] of segments) {
    test(`GET and revoke with ${name}`, async () => {
      for (const [method, path] of [
        ['GET', `${API}/api-keys/${segment}`],
        ['POST', `${API}/api-keys/${segment}/revoke`],
      ] as const) {
        const res = await send(method, path, withKey())
        assertError(res, 400, 'validation_failed', `${method} ${path}`)
        const fields = res.json?.['fields'] as { path: string }[] | undefined
        assert.ok(
          fields?.some((f) => f.path === 'params/id'),
          `${method} ${path}: ${res.text}`,
        )
      }
    })
  }

  test('a 1000-character id is a 400 validation_failed in the API format, not the router’s 414', async () => {
    const res = await send('GET', `${API}/api-keys/${'a'.repeat(1000)}`, withKey())
    assertError(res, 400, 'validation_failed', '1000-character id')
    assert.ok(!res.text.includes('a'.repeat(100)), `the id is not echoed: ${res.text.slice(0, 200)}`)
  })

  test('invalid percent-encoding in the path is a 400 bad_request in the API format', async () => {
    for (const segment of ['%E0%A4%A', '%zz', '%C0%AF']) {
      const res = await send('GET', `${API}/api-keys/${segment}`, withKey())
      assertError(res, 400, 'bad_request', `GET ${API}/api-keys/${segment}`)
      assert.ok(res.headers.get('x-request-id'), `x-request-id on ${segment}`)
    }
  })

  test('a well-formed UUID that does not exist is a 404, not a 400', async () => {
    const res = await send('GET', `${API}/api-keys/${randomUUID()}`, withKey())
    assertError(res, 404, 'api_key_not_found', 'unknown id')
  })
})

describe('values the schema lets through but the database cannot hold -> 400 validation_failed, never 500', () => {
  const cases: [string, () => Promise<Sent>][] = [
    [
      'a NUL character in a body string',
      () => send('POST', `${API}/api-keys`, withKey({ json: { name: 'a\u0000b', scopes: ['audit:read'] } })),
    ],
    [
      'a leap second in a body timestamp',
      () =>
        send(
          'POST',
          `${API}/api-keys`,
          withKey({ json: { name: 'leap', scopes: ['audit:read'], expiresAt: '2030-12-31T23:59:60Z' } }),
        ),
    ],
    ['a NUL character in a query string', () => send('GET', `${API}/audit?action=a%00b`, withKey())],
    [
      'a leap second in a query timestamp',
      () => send('GET', `${API}/audit?from=2016-12-31T23%3A59%3A60Z`, withKey()),
    ],
    [
      'the year 0000 in a query timestamp',
      () => send('GET', `${API}/audit?to=0000-01-01T00%3A00%3A00Z`, withKey()),
    ],
    [
      'a timestamp that falls before year 1 in UTC',
      () => send('GET', `${API}/audit?from=0001-01-01T00%3A00%3A00%2B01%3A00`, withKey()),
    ],
  ]
  for (const [name, probe] of cases) {
    test(name, async () => {
      assertError(await probe(), 400, 'validation_failed', name)
    })
  }
})

describe('unpaired UTF-16 surrogates in body strings -> 400 naming the field, never 503', () => {
  // JSON.stringify writes a lone surrogate as a \\uXXXX escape, as a fuzzer would send it. Before
  // the schemas refused them, the audit record's jsonb refused the escape and the request
  // answered 503 audit_unavailable.
  const lone = '\udfff\ud800'
  let folderId: string
  before(async () => {
    const created = await send('POST', `${API}/folders`, withKey({ json: { name: `f-${randomUUID()}` } }))
    assert.equal(created.status, 201, created.text)
    folderId = String(created.json?.['id'])
  })
  const cases: [string, string, () => Promise<Sent>][] = [
    ['a folder name', 'body/name', () => send('POST', `${API}/folders`, withKey({ json: { name: lone } }))],
    [
      'a folder rename',
      'body/name',
      () => send('PATCH', `${API}/folders/${folderId}`, withKey({ json: { name: `x${lone}` } })),
    ],
    [
      'a secret value',
      'body/value',
      () =>
        send('POST', `${API}/secrets`, withKey({ json: { name: `s-${randomUUID()}`, value: `v${lone}` } })),
    ],
    [
      'an API key name',
      'body/name',
      () => send('POST', `${API}/api-keys`, withKey({ json: { name: lone, scopes: ['audit:read'] } })),
    ],
    [
      'a key description',
      'body/description',
      () =>
        send(
          'POST',
          `${API}/keys`,
          withKey({ json: { name: `k-${randomUUID()}`, keyType: 'HMAC', description: `d${lone}` } }),
        ),
    ],
  ]
  for (const [name, path, probe] of cases) {
    test(name, async () => {
      const res = await probe()
      assertError(res, 400, 'validation_failed', name)
      const fields = res.json?.['fields'] as { path: string; message: string }[]
      assert.equal(fields[0]?.path, path, res.text)
      assert.match(fields[0]!.message, /unpaired UTF-16 surrogate/, res.text)
    })
  }
  test('a well-formed pair (an emoji) is still accepted', async () => {
    const res = await send(
      'POST',
      `${API}/folders`,
      withKey({ json: { name: `emoji-\u{1F511}-${randomUUID()}` } }),
    )
    assert.equal(res.status, 201, res.text)
  })
})

describe('unknown route -> 404 not_found with a key, 401 unauthorized without', () => {
  const paths = [
    `${API}/nope`,
    `${API}/api-keys/${randomUUID()}/unknown`,
    `${API}/tenant/extra`,
    `${API}/tenant/`,
    `${API}/`,
    API,
    `${API}/openapi.json/extra`,
  ]
  for (const path of paths) {
    test(`GET ${path}`, async () => {
      assertError(await send('GET', path, withKey()), 404, 'not_found', `with a key: GET ${path}`)
      const anonymous = await send('GET', path)
      assertError(anonymous, 401, 'unauthorized', `without a key: GET ${path}`)
      assert.ok(anonymous.headers.get('www-authenticate'), 'WWW-Authenticate on the 401')
    })
  }

  test('an unknown method on a known path', async () => {
    assertError(
      await send('DELETE', `${API}/tenant`, withKey()),
      404,
      'not_found',
      'DELETE /tenant with a key',
    )
    assertError(await send('DELETE', `${API}/tenant`), 401, 'unauthorized', 'DELETE /tenant without a key')
    // GET /health is public; PUT has no route, and a path without a route declares no access, so
    // it is treated like any unknown path under /api/v1: authenticated first, then 404.
    assertError(
      await send('PUT', `${API}/health`),
      401,
      'unauthorized',
      'PUT on the health path without a key',
    )
    assertError(
      await send('PUT', `${API}/health`, withKey()),
      404,
      'not_found',
      'PUT on the health path with a key',
    )
  })

  test('the 404 message does not echo an unbounded path', async () => {
    const res = await send('GET', `${API}/${'z'.repeat(5000)}`, withKey())
    assertError(res, 404, 'not_found', 'a 5000-character unknown path')
    assert.ok(res.text.length < 1000, `bounded body: ${res.text.length} chars`)
  })

  test('outside /api/v1 no key is needed to learn there is nothing', async () => {
    assertError(await send('GET', '/nope'), 404, 'not_found', 'GET /nope')
  })
})

describe('missing or invalid key -> 401 unauthorized with WWW-Authenticate', () => {
  const keys: [string, () => string | undefined][] = [
    ['no X-Api-Key header', () => undefined],
    ['an empty X-Api-Key', () => ''],
    ['garbage', () => 'garbage'],
    ['random high bytes', () => '\u00ff\u00fe\u0080\u00a0'],
    ['a bearer token', () => 'Bearer abc'],
    ['a well-formed key that does not exist', () => `kms_${'A'.repeat(52)}`],
    [
      'a real key with one character changed',
      () => `${tenant.key.slice(0, -1)}${tenant.key.endsWith('A') ? 'B' : 'A'}`,
    ],
    ['a real key with a suffix', () => `${tenant.key}x`],
    ['a 10,000-character key', () => `kms_${'a'.repeat(10_000)}`],
  ]
  for (const [name, keyOf] of keys) {
    test(name, async () => {
      const key = keyOf()
      const res = await send('GET', `${API}/tenant`, key === undefined ? {} : { key })
      assertError(res, 401, 'unauthorized', name)
      assert.match(
        res.headers.get('www-authenticate') ?? '',
        /^ApiKey\b/,
        'WWW-Authenticate names the scheme',
      )
      assert.ok(!res.text.includes('kms_'), 'the presented key is not echoed')
    })
  }

  test('a revoked key', async () => {
    const victim = await svc.createTenant()
    const revoked = await send('POST', `${API}/api-keys/${victim.apiKeyId}/revoke`, { key: victim.key })
    assert.equal(revoked.status, 200, revoked.text)
    const res = await send('GET', `${API}/tenant`, { key: victim.key })
    assertError(res, 401, 'unauthorized', 'revoked key')
    assert.ok(res.headers.get('www-authenticate'))
  })

  test('authentication is judged before the body: malformed JSON without a key is a 401', async () => {
    const res = await send('POST', `${API}/api-keys`, {
      body: '{"name":',
      headers: { 'content-type': 'application/json' },
    })
    assertError(res, 401, 'unauthorized', 'malformed JSON, no key')
    assert.ok(res.headers.get('www-authenticate'))
  })
})

describe('no stack trace or internal detail in any error body', () => {
  test('across every kind of error', async () => {
    const json = { 'content-type': 'application/json' }
    const probes: [string, () => Promise<Sent>][] = [
      ['malformed JSON', () => send('POST', `${API}/api-keys`, withKey({ body: '{"name":', headers: json }))],
      [
        'deeply nested JSON',
        () =>
          send(
            'POST',
            `${API}/api-keys`,
            withKey({ body: `${'['.repeat(10_000)}${']'.repeat(10_000)}`, headers: json }),
          ),
      ],
      [
        'huge number',
        () =>
          send(
            'POST',
            `${API}/api-keys`,
            withKey({ body: '{"name":1e999,"scopes":["audit:read"]}', headers: json }),
          ),
      ],
      [
        'wrong content type',
        () =>
          send(
            'POST',
            `${API}/api-keys`,
            withKey({ body: '<x/>', headers: { 'content-type': 'application/xml' } }),
          ),
      ],
      [
        'unknown field',
        () =>
          send('POST', `${API}/api-keys`, withKey({ json: { name: 'x', scopes: ['audit:read'], zz: 1 } })),
      ],
      [
        'wrong type',
        () => send('POST', `${API}/api-keys`, withKey({ json: { name: 42, scopes: 'audit:read' } })),
      ],
      [
        'oversized',
        () =>
          send(
            'POST',
            `${API}/api-keys`,
            withKey({ body: `"${'x'.repeat(svc.config.bodyLimitBytes + 10)}"`, headers: json }),
          ),
      ],
      ['bad UUID', () => send('GET', `${API}/api-keys/not-a-uuid`, withKey())],
      ['bad query', () => send('GET', `${API}/audit?limit=-5&cursor=x`, withKey())],
      ['NUL in a query string', () => send('GET', `${API}/audit?action=%00`, withKey())],
      [
        'NUL in a body string',
        () =>
          send('POST', `${API}/api-keys`, withKey({ json: { name: 'a\u0000b', scopes: ['audit:read'] } })),
      ],
      ['leap second', () => send('GET', `${API}/audit?from=2016-12-31T23%3A59%3A60Z`, withKey())],
      [
        'urn:uuid id',
        () => send('GET', `${API}/api-keys/urn:uuid:00000000-0000-0000-0000-000000000000`, withKey()),
      ],
      ['unknown route', () => send('GET', `${API}/nope`, withKey())],
      ['no key', () => send('GET', `${API}/tenant`)],
      ['over-long path parameter', () => send('GET', `${API}/api-keys/${'a'.repeat(1000)}`, withKey())],
      ['bad percent-encoding', () => send('GET', `${API}/api-keys/%E0%A4%A`, withKey())],
    ]
    const failures: string[] = []
    for (const [name, probe] of probes) {
      const res = await probe()
      try {
        assert.ok(res.status >= 400, `${name}: expected an error, got ${res.status}`)
        assertNoInternals(res, name)
      } catch (error) {
        failures.push((error as Error).message)
      }
    }
    assert.deepEqual(failures, [], failures.join('\n'))
  })
})

describe('a JSON parse error never echoes the request body', () => {
  const marker = `EchoMarker${randomUUID().replaceAll('-', '')}`
  const bodies: [string, string][] = [
    ['truncated inside a string', `{"name":"${marker}`],
    ['an unquoted token', `{"name": ${marker}}`],
    ['a bare token', marker],
    ['trailing garbage', `{"name":"x","scopes":["audit:read"]} ${marker}`],
    ['an invalid escape next to it', `{"name":"${marker}\\q"}`],
    ['a key with no value', `{"${marker}": }`],
    ['a poisoned key', `{"__proto__":{"${marker}":1}}`],
  ]
  for (const [name, body] of bodies) {
    test(name, async () => {
      const res = await send(
        'POST',
        `${API}/api-keys`,
        withKey({ body, headers: { 'content-type': 'application/json' } }),
      )
      assert.equal(res.status, 400, `${name}: ${res.text}`)
      assert.ok(!res.text.includes(marker.slice(0, 16)), `${name}: the body is echoed: ${res.text}`)
      for (const [header, value] of res.headers) {
        assert.ok(!value.includes(marker.slice(0, 16)), `${name}: echoed in the ${header} header`)
      }
      assertNoInternals(res, name)
    })
  }
})

describe('x-request-id', () => {
  test('every response carries one: success, 4xx of every kind, HEAD', async () => {
    const narrow = await svc.createTenant(['audit:read'])
    const responses: [string, Sent][] = [
      ['200 health', await send('GET', `${API}/health`)],
      ['200 tenant', await send('GET', `${API}/tenant`, withKey())],
      ['200 HEAD', await send('HEAD', `${API}/tenant`, withKey())],
      [
        '400 invalid_json',
        await send(
          'POST',
          `${API}/api-keys`,
          withKey({ body: '{', headers: { 'content-type': 'application/json' } }),
        ),
      ],
      ['400 validation_failed', await send('GET', `${API}/api-keys/nope`, withKey())],
      ['401', await send('GET', `${API}/tenant`)],
      ['403', await send('GET', `${API}/api-keys`, { key: narrow.key })],
      ['404', await send('GET', `${API}/nope`, withKey())],
      ['404 outside the API', await send('GET', '/nope')],
      [
        '413',
        await send(
          'POST',
          `${API}/api-keys`,
          withKey({
            body: `"${'x'.repeat(svc.config.bodyLimitBytes + 1)}"`,
            headers: { 'content-type': 'application/json' },
          }),
        ),
      ],
      [
        '415',
        await send(
          'POST',
          `${API}/api-keys`,
          withKey({ body: '<x/>', headers: { 'content-type': 'application/xml' } }),
        ),
      ],
    ]
    for (const [name, res] of responses) {
      const id = res.headers.get('x-request-id')
      assert.ok(id, `${name}: no x-request-id (status ${res.status})`)
      assert.match(id, SANE_REQUEST_ID, name)
    }
  })

  test('framework-level errors carry one too (bad percent-encoding, over-long path parameter)', async () => {
    for (const path of [
      `${API}/api-keys/%E0%A4%A`,
      `${API}/nope%zz`,
      `${API}/api-keys/${'a'.repeat(1000)}`,
    ]) {
      const res = await send('GET', path, withKey())
      assert.ok(res.status >= 400 && res.status < 500, `${path}: ${res.status}`)
      assert.ok(
        res.headers.get('x-request-id'),
        `${path.slice(0, 60)}: no x-request-id on ${res.status} ${res.text.slice(0, 120)}`,
      )
    }
  })

  test('each request without one gets a fresh id', async () => {
    const a = (await send('GET', `${API}/health`)).headers.get('x-request-id')
    const b = (await send('GET', `${API}/health`)).headers.get('x-request-id')
    assert.ok(a && b)
    assert.notEqual(a, b)
  })

  for (const given of ['abc-123', 'trace.1:span_2', randomUUID(), 'A'.repeat(128)]) {
    test(`a sane X-Request-Id is echoed (${given.slice(0, 40)})`, async () => {
      for (const [name, res] of [
        ['200', await send('GET', `${API}/health`, { headers: { 'x-request-id': given } })],
        ['401', await send('GET', `${API}/tenant`, { headers: { 'x-request-id': given } })],
        ['404', await send('GET', `${API}/nope`, withKey({ headers: { 'x-request-id': given } }))],
      ] as const) {
        assert.equal(res.headers.get('x-request-id'), given, name)
      }
    })
  }

  const insane: [string, string][] = [
    ['500 characters', 'r'.repeat(500)],
    ['129 characters', 'r'.repeat(129)],
    ['spaces', 'has spaces in it'],
    ['markup', '<script>alert(1)</script>'],
    ['a semicolon', 'a;b'],
    ['a quote', 'a"b'],
    ['a high byte', 'caf\u00e9'],
  ]
  for (const [name, given] of insane) {
    test(`an insane X-Request-Id is replaced (${name})`, async () => {
      for (const [status, res] of [
        ['200', await send('GET', `${API}/health`, { headers: { 'x-request-id': given } })],
        ['401', await send('GET', `${API}/tenant`, { headers: { 'x-request-id': given } })],
      ] as const) {
        const id = res.headers.get('x-request-id')
        assert.ok(id, `${status}: an id is still given`)
        assert.notEqual(id, given, status)
        assert.match(id, SANE_REQUEST_ID, status)
        assert.ok(!res.text.includes(given), `${status}: the given id is not echoed in the body`)
      }
    })
  }
})

describe('validation errors say what is allowed', () => {
  const someId = randomUUID()
  interface Field {
    path: string
    message: string
    allowedValues?: unknown[]
  }
  /** The one field entry at `path`; the message names the field and each allowed value. */
  function assertAllowed(res: Sent, path: string, allowed: readonly unknown[], context: string): void {
    assertError(res, 400, 'validation_failed', context)
    const fields = res.json?.['fields'] as Field[]
    assert.equal(fields.length, 1, `${context}: one entry per failing field: ${res.text}`)
    assert.equal(fields[0]!.path, path, context)
    assert.deepEqual(fields[0]!.allowedValues, allowed, context)
    const message = String(res.json?.['message'])
    assert.ok(message.startsWith(path), `${context}: the message names the field: ${message}`)
    for (const value of allowed)
      assert.ok(message.includes(String(value)), `${context}: ${message} names ${value}`)
    assert.ok(!message.includes('must be equal to constant'), context)
    assert.ok(!message.includes('must match a schema in anyOf'), context)
  }

  test('status=revoked lists the key states', async () => {
    const res = await send('GET', `${API}/keys?status=revoked`, withKey())
    assertAllowed(
      res,
      'querystring/status/0',
      ['Active', 'Expired', 'Revoked', 'Pending Deletion', 'Destroyed'],
      'status',
    )
  })

  test('sort=bogus lists the sort columns', async () => {
    const res = await send('GET', `${API}/keys?sort=bogus`, withKey())
    assertAllowed(
      res,
      'querystring/sort',
      ['name', 'algorithm', 'purpose', 'version', 'status', 'createdAt'],
      'sort',
    )
  })

  test('format=pem lists the public key formats', async () => {
    const res = await send('GET', `${API}/keys/${someId}/public?format=pem`, withKey())
    assertAllowed(res, 'querystring/format', ['PEM', 'DER', 'RAW', 'JWK'], 'format')
  })

  test('frequency=weekly lists the frequencies', async () => {
    const res = await send(
      'POST',
      `${API}/keys/${someId}/rotation-policy`,
      withKey({ json: { frequency: 'weekly' } }),
    )
    assertAllowed(res, 'body/frequency', ['Daily', 'Weekly', 'Monthly', 'Quarterly', 'Yearly'], 'frequency')
  })

  test('an unknown scope lists the scopes', async () => {
    const res = await send(
      'POST',
      `${API}/api-keys`,
      withKey({ json: { name: 'x', scopes: ['keys:read', 'keys:own'] } }),
    )
    assertError(res, 400, 'validation_failed', 'scope')
    const field = (res.json!['fields'] as Field[])[0]!
    assert.equal(field.path, 'body/scopes/1')
    assert.ok(
      field.allowedValues?.includes('keys:read') && field.allowedValues.includes('audit:read'),
      res.text,
    )
    assert.match(String(res.json?.['message']), /^body\/scopes\/1 must be one of: .*keys:read/)
  })

  test('keyBytes: 20 says 16, 24 or 32 once, not "must be equal to constant" three times', async () => {
    const res = await send('POST', `${API}/keys/${someId}/data-key`, withKey({ json: { keyBytes: 20 } }))
    assertAllowed(res, 'body/keyBytes', [16, 24, 32], 'keyBytes')
  })

  test('invalid ids say "must be a UUID"; key references (a key id or an alias) name both forms', async () => {
    const keyRef = 'must be a key id (UUID) or an alias (alias/ then 1 to 250 of A-Z a-z 0-9 / _ -)'
    for (const [method, path, options, field, message] of [
      ['GET', `${API}/api-keys/not-a-uuid`, {}, 'params/id', 'must be a UUID'],
      ['GET', `${API}/keys/not-a-uuid`, {}, 'params/keyId', keyRef],
      ['POST', `${API}/encrypt`, { json: { keyId: 'nope', plaintext: 'AA==' } }, 'body/keyId', keyRef],
      ['POST', `${API}/generate-data-key`, { json: { keyId: `${someId}0` } }, 'body/keyId', keyRef],
    ] as const) {
      const res = await send(method, path, withKey(options))
      assertError(res, 400, 'validation_failed', path)
      const fields = res.json?.['fields'] as Field[]
      assert.deepEqual(fields, [{ path: field, message }], `${path}: ${res.text}`)
      assert.equal(res.json?.['message'], `${field} ${message}`)
      assert.ok(!res.text.includes('[0-9a-fA-F]'), 'no regular expression')
    }
  })

  test('a missing field is named as the field', async () => {
    const res = await send('POST', `${API}/api-keys`, withKey({ json: { scopes: ['keys:read'] } }))
    assertError(res, 400, 'validation_failed', 'missing name')
    assert.deepEqual(res.json?.['fields'], [{ path: 'body/name', message: 'is required' }])
  })
})

describe('free-form objects are bounded: deep or wide JSON is a 400 naming the bound, never a 5xx', () => {
  const JSON_TYPE = { 'content-type': 'application/json' }
  /** The JSON text of an object nested `depth` levels deep (JSON.stringify would overflow the stack). */
  const nested = (depth: number): string =>
    `${'{"kty":"EC","a":'.repeat(depth - 1)}{"kty":"EC"}${'}'.repeat(depth - 1)}`
  /** An import request body around the JSON text of `keyMaterial`. */
  const importBody = (keyMaterial: string) =>
    `{"name":"bounded-${randomUUID()}","keyType":"Signing","algorithm":"EC-P256","format":"JWK","keyMaterial":${keyMaterial}}`
  const cases: [string, () => string, RegExp][] = [
    ['a JWK nested 10,000 levels deep', () => nested(10_000), /at most 4 levels deep/],
    ['a JWK nested 5 levels deep (one over the bound)', () => nested(5), /at most 4 levels deep/],
    [
      'a JWK of 1,000 members',
      () => JSON.stringify(Object.fromEntries([...Array(1000).keys()].map((i) => [`m${i}`, i]))),
      /at most 512 keys and items/,
    ],
    [
      'a JWK with an array of 100,000 items',
      () => JSON.stringify({ kty: 'RSA', x5c: [...Array(100_000).keys()].map(() => 'A') }),
      /at most 512 keys and items/,
    ],
    [
      'a JWK of 300,000 characters',
      () => JSON.stringify({ kty: 'RSA', n: 'A'.repeat(300_000) }),
      /at most 262144 characters/,
    ],
    [
      'arrays nested 10,000 levels deep inside a JWK member',
      () => `{"kty":"EC","oth":${'['.repeat(10_000)}${']'.repeat(10_000)}}`,
      /at most 4 levels deep/,
    ],
  ]
  for (const [name, make, bound] of cases) {
    test(name, async () => {
      const res = await send(
        'POST',
        `${API}/keys/import`,
        withKey({ body: importBody(make()), headers: JSON_TYPE }),
      )
      assertError(res, 400, 'validation_failed', name)
      const fields = res.json?.['fields'] as { path: string; message: string }[]
      assert.equal(fields[0]?.path, 'body/keyMaterial', res.text.slice(0, 300))
      assert.match(fields[0]!.message, bound, res.text.slice(0, 300))
      assertNoInternals(res, name)
    })
  }

  test('the service stays healthy after them', async () => {
    for (let i = 0; i < 3; i++) {
      const res = await send(
        'POST',
        `${API}/keys/import`,
        withKey({ body: importBody(nested(10_000)), headers: JSON_TYPE }),
      )
      assert.equal(res.status, 400)
    }
    const health = await send('GET', `${API}/health`)
    assert.equal(health.status, 200)
    const list = await send('GET', `${API}/keys`, withKey())
    assert.equal(list.status, 200)
  })

  test('every free-form object in a request schema of the OpenAPI document carries bounds', async () => {
    const doc = (await send('GET', `${API}/openapi.json`)).json as Record<string, unknown>
    const components = ((doc['components'] as Record<string, unknown>)?.['schemas'] ?? {}) as Record<
      string,
      unknown
    >
    const unbounded: string[] = []
    const seen = new Set<unknown>()
    const walk = (schema: unknown, where: string): void => {
      if (schema === null || typeof schema !== 'object' || seen.has(schema)) return
      seen.add(schema)
      const s = schema as Record<string, unknown>
      if (typeof s['$ref'] === 'string') {
        const name = s['$ref'].split('/').pop()!
        walk(components[name], `${where} -> ${name}`)
        return
      }
      const open = s['type'] === 'object' && s['additionalProperties'] !== false
      if (open && s['x-bounded-json'] === undefined) unbounded.push(where)
      for (const [key, value] of Object.entries(s)) {
        if (key === 'properties' && value && typeof value === 'object') {
          for (const [prop, sub] of Object.entries(value)) walk(sub, `${where}/${prop}`)
        } else if (Array.isArray(value)) {
          for (const [i, sub] of value.entries()) walk(sub, `${where}/${key}/${i}`)
        } else if (typeof value === 'object') {
          walk(value, `${where}/${key}`)
        }
      }
    }
    let requestSchemas = 0
    for (const [path, item] of Object.entries(doc['paths'] as Record<string, Record<string, unknown>>)) {
      for (const [method, op] of Object.entries(item)) {
        const operation = op as {
          requestBody?: { content?: Record<string, { schema?: unknown }> }
          parameters?: { schema?: unknown; name: string }[]
        }
        for (const media of Object.values(operation.requestBody?.content ?? {})) {
          requestSchemas++
          walk(media.schema, `${method.toUpperCase()} ${path} body`)
        }
        for (const parameter of operation.parameters ?? [])
          walk(parameter.schema, `${method.toUpperCase()} ${path} ${parameter.name}`)
      }
    }
    assert.ok(requestSchemas > 20, `the walk saw the request bodies (${requestSchemas})`)
    assert.deepEqual(unbounded, [], 'free-form request objects without x-bounded-json')
  })
})
