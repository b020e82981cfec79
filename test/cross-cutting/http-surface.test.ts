import assert from 'node:assert/strict'
import { randomBytes, randomUUID } from 'node:crypto'
import { after, before, describe, test } from 'node:test'
import { base64Length, MAX_PLAINTEXT_BYTES } from '../../src/crypto/crypto-schemas.ts'
import { DOCS_CSP } from '../../src/http/response-headers.ts'
import { b64 } from '../helpers/api-client.ts'
import {
  type HttpResult,
  startTestService,
  type TenantWithKey,
  type TestService,
} from '../helpers/service.ts'

/**
 * The HTTP surface: security headers on every kind of answer, the 10 MiB JSON encrypt limit,
 * and answers passed back unchanged to the call that consumes them.
 */

const API = '/api/v1'
let svc: TestService
let tenant: TenantWithKey
let encryptionKey: string
let signingKey: string
let rsaKey: string
let hmacKey: string

async function createKey(keyType: string, algorithm: string): Promise<string> {
  const res = await svc.request('POST', `${API}/keys`, {
    key: tenant.key,
    body: { name: `k-${randomUUID()}`, keyType, algorithm },
  })
  assert.equal(res.status, 201, res.text)
  return res.body.id as string
}

before(async () => {
  svc = await startTestService()
  tenant = await svc.createTenant()
  encryptionKey = await createKey('Encryption', 'ML-KEM-768')
  signingKey = await createKey('Signing', 'EC-P256')
  rsaKey = await createKey('Signing', 'RSA-2048')
  hmacKey = await createKey('HMAC', 'HMAC-SHA256')
})
after(async () => {
  await svc?.stop()
})

const post = (path: string, body: unknown) => svc.request('POST', `${API}${path}`, { key: tenant.key, body })

describe('security headers', () => {
  const assertApiHeaders = (res: { status: number; headers: Headers }, what: string) => {
    assert.equal(res.headers.get('x-content-type-options'), 'nosniff', `${what}: nosniff`)
    assert.equal(res.headers.get('cache-control'), 'no-store', `${what}: no-store`)
  }

  test('JSON answers, binary answers and every kind of error carry nosniff and no-store', async () => {
    const cases: [string, () => Promise<{ status: number; headers: Headers }>, number][] = [
      ['200 JSON (tenant)', () => svc.request('GET', `${API}/tenant`, { key: tenant.key }), 200],
      ['200 JSON (health)', () => svc.request('GET', `${API}/health`), 200],
      ['200 JSON (OpenAPI document)', () => svc.request('GET', `${API}/openapi.json`), 200],
      ['200 JSON (encrypt)', () => post('/encrypt', { keyId: encryptionKey, plaintext: b64('x') }), 200],
      [
        '201 JSON (key creation)',
        () => post('/keys', { name: `h-${randomUUID()}`, keyType: 'HMAC', algorithm: 'HMAC-SHA256' }),
        201,
      ],
      [
        '200 application/octet-stream (binary encrypt)',
        () =>
          fetch(`${svc.baseUrl}${API}/encrypt`, {
            method: 'POST',
            headers: {
              'x-api-key': tenant.key,
              'content-type': 'application/octet-stream',
              'x-key-id': encryptionKey,
            },
            body: Buffer.from('binary'),
          }),
        200,
      ],
      ['400 validation', () => post('/keys', { name: 1 }), 400],
      ['400 malformed URL', () => svc.request('GET', `${API}/keys/%E0%A4%A`, { key: tenant.key }), 400],
      ['401', () => svc.request('GET', `${API}/tenant`), 401],
      [
        '403',
        async () => {
          const narrow = await svc.createTenant(['audit:read'])
          return svc.request('GET', `${API}/keys`, { key: narrow.key })
        },
        403,
      ],
      ['404 unknown route', () => svc.request('GET', `${API}/nothing-here`, { key: tenant.key }), 404],
      ['404 unknown key', () => svc.request('GET', `${API}/keys/${randomUUID()}`, { key: tenant.key }), 404],
      [
        '413',
        () =>
          svc.request('POST', `${API}/keys`, {
            key: tenant.key,
            rawBody: ' '.repeat(2 * 1024 * 1024),
            headers: { 'content-type': 'application/json' },
          }),
        413,
      ],
      [
        '415',
        () =>
          svc.request('POST', `${API}/keys`, {
            key: tenant.key,
            rawBody: 'x',
            headers: { 'content-type': 'text/html' },
          }),
        415,
      ],
      ['/metrics', () => svc.request('GET', '/metrics'), 200],
    ]
    for (const [what, call, status] of cases) {
      const res = await call()
      assert.equal(res.status, status, what)
      assertApiHeaders(res, what)
    }
  })

  test('/docs has a CSP forbidding framing, nosniff, and every asset it loads is served under it', async () => {
    const page = await fetch(`${svc.baseUrl}/docs/`)
    assert.equal(page.status, 200)
    const csp = page.headers.get('content-security-policy') ?? ''
    assert.equal(csp, DOCS_CSP)
    assert.match(csp, /frame-ancestors 'none'/)
    assert.match(csp, /script-src 'self'(;|$)/, 'scripts only from the page origin, no inline script')
    assert.equal(page.headers.get('x-content-type-options'), 'nosniff')
    const html = await page.text()
    // Under script-src 'self' an inline script would not run: the page must have none.
    for (const tag of html.match(/<script\b[^>]*>/g) ?? [])
      assert.match(tag, /\bsrc=/, `no inline script: ${tag}`)
    assert.doesNotMatch(html, /\son[a-z]+=/i, 'no inline event handlers')
    const assets = [...html.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]!)
    assert.ok(
      assets.some((a) => a.endsWith('swagger-ui-bundle.js')),
      'the page loads swagger-ui',
    )
    for (const asset of assets) {
      const res = await fetch(new URL(asset, `${svc.baseUrl}/docs/`))
      assert.equal(res.status, 200, asset)
      assert.equal(res.headers.get('x-content-type-options'), 'nosniff', asset)
      assert.equal(res.headers.get('content-security-policy'), DOCS_CSP, asset)
      const type = res.headers.get('content-type') ?? ''
      if (asset.endsWith('.js')) assert.match(type, /javascript/, asset)
      if (asset.endsWith('.css')) assert.match(type, /text\/css/, asset)
      await res.arrayBuffer()
    }
    // The initializer fetches the document from the same origin (connect-src 'self').
    const initializer = await (await fetch(`${svc.baseUrl}/docs/static/swagger-initializer.js`)).text()
    const json = await fetch(`${svc.baseUrl}/docs/json`)
    assert.equal(json.status, 200)
    assert.ok(
      initializer.includes('json') || initializer.includes('url'),
      'the initializer names the document',
    )
    const redirect = await fetch(`${svc.baseUrl}/docs`, { redirect: 'manual' })
    assert.equal(redirect.headers.get('x-content-type-options'), 'nosniff')
  })
})

describe('JSON encrypt up to 10 MiB of plaintext', () => {
  const roundTrip = async (plaintext: Buffer) => {
    const encrypted = await post('/encrypt', {
      keyId: encryptionKey,
      plaintext: plaintext.toString('base64'),
    })
    assert.equal(encrypted.status, 200, encrypted.text.slice(0, 300))
    const decrypted = await post('/decrypt', encrypted.body)
    assert.equal(decrypted.status, 200, decrypted.text.slice(0, 300))
    assert.ok(Buffer.from(decrypted.body.plaintext, 'base64').equals(plaintext), 'the plaintext comes back')
  }

  test('8,000,000 bytes round trip', async () => {
    await roundTrip(randomBytes(8_000_000))
  })

  test('exactly 10 MiB round trips', async () => {
    await roundTrip(randomBytes(MAX_PLAINTEXT_BYTES))
  })

  test('10 MiB + 1 is refused naming the limit', async () => {
    const res = await post('/encrypt', {
      keyId: encryptionKey,
      plaintext: randomBytes(MAX_PLAINTEXT_BYTES + 1).toString('base64'),
    })
    assert.equal(res.status, 400, res.text.slice(0, 300))
    assert.match(res.body.message, /body\/plaintext must decode to at most 10485760 bytes/)
  })

  test('10 MiB + 3 (a longer Base64 text) is refused naming the limit', async () => {
    const res = await post('/encrypt', {
      keyId: encryptionKey,
      plaintext: randomBytes(MAX_PLAINTEXT_BYTES + 3).toString('base64'),
    })
    assert.equal(res.status, 400, res.text.slice(0, 300))
    assert.match(
      res.body.message,
      new RegExp(`body/plaintext must NOT have more than ${base64Length(MAX_PLAINTEXT_BYTES)} characters`),
    )
  })

  test('a binary plaintext of 10 MiB + 1 is a 413 naming 10 MiB', async () => {
    const res = await fetch(`${svc.baseUrl}${API}/encrypt`, {
      method: 'POST',
      headers: {
        'x-api-key': tenant.key,
        'content-type': 'application/octet-stream',
        'x-key-id': encryptionKey,
      },
      body: randomBytes(MAX_PLAINTEXT_BYTES + 1),
    })
    assert.equal(res.status, 413)
    const body = (await res.json()) as { error: string; message: string }
    assert.equal(body.error, 'payload_too_large')
    assert.match(body.message, /exceeds the limit of 10485760 bytes/)
  })

  test('the OpenAPI document states the limits', async () => {
    const doc = (await svc.request('GET', `${API}/openapi.json`)).body
    assert.match(JSON.stringify(doc.paths['/api/v1/encrypt']), /10485760 bytes \(10 MiB\)/)
    // The body schema is the named EncryptRequest component.
    assert.equal(
      doc.components.schemas.EncryptRequest.properties.plaintext.maxLength,
      base64Length(MAX_PLAINTEXT_BYTES),
    )
  })
})

describe('an answer passed back unchanged is accepted by the call that consumes it', () => {
  const ok = (res: HttpResult, what: string) =>
    assert.equal(res.status, 200, `${what}: ${res.text.slice(0, 300)}`)

  test('wrap -> unwrap', async () => {
    const material = randomBytes(32)
    const wrapped = await post(`/keys/${encryptionKey}/wrap`, { plaintext: b64(material), context: 'ctx' })
    ok(wrapped, 'wrap')
    const unwrapped = await post(`/keys/${encryptionKey}/unwrap`, { ...wrapped.body, context: 'ctx' })
    ok(unwrapped, 'unwrap')
    assert.ok(Buffer.from(unwrapped.body.plaintext, 'base64').equals(material))
  })

  test('generate-data-key and keys/{id}/data-key -> unwrap', async () => {
    const generated = await post('/generate-data-key', { keyId: encryptionKey })
    ok(generated, 'generate-data-key')
    const unwrapped = await post(`/keys/${encryptionKey}/unwrap`, generated.body)
    ok(unwrapped, 'unwrap')
    assert.equal(unwrapped.body.plaintext, generated.body.plaintextDek)

    const perKey = await post(`/keys/${encryptionKey}/data-key`, {
      keyBytes: 16,
      withPlaintext: false,
      context: 'c',
    })
    ok(perKey, 'data-key')
    const again = await post(`/keys/${encryptionKey}/unwrap`, { ...perKey.body, context: 'c' })
    ok(again, 'unwrap of the per-key data key')
    assert.equal(Buffer.from(again.body.plaintext, 'base64').length, 16)
  })

  test('encrypt -> decrypt, standard and legacy modes', async () => {
    for (const mode of ['standard', 'legacy']) {
      const encrypted = await post('/encrypt', {
        keyId: encryptionKey,
        plaintext: b64('hello'),
        context: 'c',
        mode,
      })
      ok(encrypted, `encrypt ${mode}`)
      const decrypted = await post('/decrypt', { ...encrypted.body, context: 'c' })
      ok(decrypted, `decrypt ${mode}`)
      assert.equal(Buffer.from(decrypted.body.plaintext, 'base64').toString(), 'hello')
    }
  })

  test('encrypt/batch -> decrypt/batch (the results as the items)', async () => {
    const encrypted = await post('/encrypt/batch', {
      items: [
        { keyId: encryptionKey, plaintext: b64('a') },
        { keyId: encryptionKey, plaintext: b64('b') },
      ],
    })
    ok(encrypted, 'encrypt/batch')
    const decrypted = await post('/decrypt/batch', { items: encrypted.body.results })
    ok(decrypted, 'decrypt/batch')
    assert.deepEqual(
      decrypted.body.results.map((r: { plaintext: string }) => Buffer.from(r.plaintext, 'base64').toString()),
      ['a', 'b'],
    )
  })

  test('sign -> verify, for every scheme option', async () => {
    const message = b64('signed text')
    for (const [keyId, options] of [
      [signingKey, {}],
      [signingKey, { signatureFormat: 'P1363' }],
      [rsaKey, {}],
      [rsaKey, { rsaPadding: 'PKCS1' }],
    ] as const) {
      const signed = await post('/sign', { keyId, message, ...options })
      ok(signed, `sign ${JSON.stringify(options)}`)
      const verified = await post('/verify', { ...signed.body, message })
      ok(verified, `verify ${JSON.stringify(options)}`)
      assert.equal(
        verified.body.valid,
        true,
        `the sign answer verifies as it is (${signed.body.signingScheme})`,
      )
    }
  })

  test('mac -> mac/verify', async () => {
    const data = b64('mac me')
    const mac = await post(`/keys/${hmacKey}/mac`, { data })
    ok(mac, 'mac')
    const verified = await post(`/keys/${hmacKey}/mac/verify`, { ...mac.body, data })
    ok(verified, 'mac/verify')
    assert.equal(verified.body.valid, true)
  })

  test('a keyId in the body that is not the path key is a 400 saying so', async () => {
    const other = randomUUID()
    const wrapped = await post(`/keys/${encryptionKey}/wrap`, { plaintext: b64(randomBytes(16)) })
    const mac = await post(`/keys/${hmacKey}/mac`, { data: b64('x') })
    for (const [path, body] of [
      [`/keys/${encryptionKey}/unwrap`, { ...wrapped.body, keyId: other }],
      [`/keys/${hmacKey}/mac/verify`, { ...mac.body, data: b64('x'), keyId: other }],
    ] as const) {
      const res = await post(path, body)
      assert.equal(res.status, 400, res.text)
      assert.equal(res.body.error, 'validation_failed')
      assert.equal(res.body.fields[0].path, 'body/keyId')
      assert.match(res.body.message, /body\/keyId names key .* but the path names key/)
    }
  })

  test('a signingScheme contradicting the options is a 400', async () => {
    const message = b64('m')
    const signed = await post('/sign', { keyId: rsaKey, message })
    const res = await post('/verify', { ...signed.body, message, rsaPadding: 'PKCS1' })
    assert.equal(res.status, 400, res.text)
    assert.match(res.body.message, /body\/rsaPadding is PKCS1, but signingScheme RSASSA-PSS-SHA256 uses PSS/)
  })
})
