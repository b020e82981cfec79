import assert from 'node:assert/strict'
import { randomBytes, randomUUID } from 'node:crypto'
import { after, before, describe, test } from 'node:test'
import { apiClient, b64 } from '../helpers/api-client.ts'
import { startTestService, type TenantWithKey, type TestService } from '../helpers/service.ts'

/**
 * The binary batch transport of POST /api/v1/encrypt/batch and /decrypt/batch
 * (docs/envelope-format.md, "Binary batches"). The framing is written and read here from the
 * document alone (nothing imports src/crypto): round trips, each envelope opened by the single
 * binary /decrypt, interoperation with the JSON batch, per-item failures, bad framing as 400
 * naming the item and field, the item-count bound, audit records as for JSON batches, OpenAPI.
 */

const BINARY = 'application/octet-stream'
const MAX_ITEMS = 1000

// ---- docs/envelope-format.md, "Binary batches", as code ------------------------------------

/** "count u32, then per item: data length u32, data, context length u16, context" */
function frameRequest(
  items: readonly { data: Uint8Array; context?: string }[],
  count = items.length,
): Buffer {
  const parts: Buffer[] = []
  const head = Buffer.alloc(4)
  head.writeUInt32BE(count)
  parts.push(head)
  for (const item of items) {
    const context = Buffer.from(item.context ?? '', 'utf8')
    const dataLength = Buffer.alloc(4)
    dataLength.writeUInt32BE(item.data.length)
    const contextLength = Buffer.alloc(2)
    contextLength.writeUInt16BE(context.length)
    parts.push(dataLength, Buffer.from(item.data), contextLength, context)
  }
  return Buffer.concat(parts)
}

type ParsedItem =
  | { ok: true; keyId: string; keyVersion: number; bytes: Buffer }
  | { ok: false; error: string; message: string }

/** "0x00, key id (16 bytes), key version u32, length u32, bytes | 0x01, length u16, JSON" */
function parseResponse(body: Buffer): ParsedItem[] {
  const count = body.readUInt32BE(0)
  const items: ParsedItem[] = []
  let at = 4
  for (let i = 0; i < count; i++) {
    const status = body[at++]
    if (status === 0x00) {
      const hex = body.subarray(at, at + 16).toString('hex')
      const keyId = `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`
      at += 16
      const keyVersion = body.readUInt32BE(at)
      const length = body.readUInt32BE(at + 4)
      at += 8
      items.push({ ok: true, keyId, keyVersion, bytes: body.subarray(at, at + length) })
      at += length
    } else {
      assert.equal(status, 0x01, `item ${i}: status byte`)
      const length = body.readUInt16BE(at)
      at += 2
      const failure = JSON.parse(body.subarray(at, at + length).toString('utf8'))
      assert.deepEqual(Object.keys(failure).sort(), ['error', 'message'], `item ${i}: failure fields`)
      items.push({ ok: false, ...failure })
      at += length
    }
  }
  assert.equal(at, body.length, 'nothing after the last item')
  return items
}

describe('binary batches', () => {
  let svc: TestService
  let tenant: TenantWithKey
  let mlkem: string
  let rsa: string

  before(async () => {
    svc = await startTestService()
    tenant = await svc.createTenant()
    ;[mlkem, rsa] = await Promise.all([
      api.createKey('Encryption', 'ML-KEM-768', { isDefault: true }).then((k) => k.id),
      api.createKey('Encryption', 'RSA-2048').then((k) => k.id),
    ])
  })

  after(async () => {
    await svc?.stop()
  })

  const api = apiClient(() => ({ svc, tenant }))

  async function post(
    path: string,
    body: Uint8Array,
    headers: Record<string, string> = {},
    by: TenantWithKey = tenant,
  ): Promise<{ status: number; headers: Headers; bytes: Buffer; json: unknown }> {
    const response = await fetch(new URL(`/api/v1${path}`, svc.baseUrl), {
      method: 'POST',
      headers: { 'x-api-key': by.key, 'content-type': BINARY, ...headers },
      body: new Uint8Array(body),
    })
    const bytes = Buffer.from(await response.arrayBuffer())
    const isJson = (response.headers.get('content-type') ?? '').startsWith('application/json')
    return {
      status: response.status,
      headers: response.headers,
      bytes,
      json: isJson ? JSON.parse(bytes.toString()) : undefined,
    }
  }

  async function batch(path: string, body: Buffer, headers: Record<string, string> = {}, by = tenant) {
    const res = await post(path, body, headers, by)
    assert.equal(res.status, 200, `${path}: ${res.bytes.toString().slice(0, 300)}`)
    assert.equal(res.headers.get('content-type'), BINARY)
    return parseResponse(res.bytes)
  }

  function assertBadFraming(res: { status: number; json: unknown }, path: string, what: string): void {
    assert.equal(res.status, 400, what)
    const error = res.json as { error: string; message: string; fields: { path: string }[] }
    assert.equal(error.error, 'validation_failed', what)
    assert.equal(error.fields[0]!.path, path, `${what}: ${error.message}`)
    assert.ok(error.message.startsWith(path), `${what}: the message names ${path}: ${error.message}`)
  }

  test('round trip: envelopes open through the single binary /decrypt and the binary and JSON decrypt batches', async () => {
    const plaintexts = [randomBytes(64), Buffer.alloc(0), randomBytes(5000)]
    const contexts = ['orders/42', undefined, 'héllo ✓ 🔐']
    const items = plaintexts.map((data, i) => ({ data, context: contexts[i] }))
    for (const [keyId, headers] of [
      [mlkem, {}],
      [rsa, { 'x-key-id': rsa }],
    ] as const) {
      const sealed = await batch('/encrypt/batch', frameRequest(items), headers)
      assert.equal(sealed.length, items.length)
      for (const [i, result] of sealed.entries()) {
        assert.ok(result.ok, `item ${i}: ${JSON.stringify(result)}`)
        assert.equal(result.keyId, keyId)
        assert.equal(result.keyVersion, 1)
        // The compact envelope of the single binary transport: the single /decrypt opens it.
        const single = await post('/decrypt', result.bytes, {
          ...(contexts[i] === undefined ? {} : { 'x-encryption-context': b64(contexts[i]!) }),
        })
        assert.equal(single.status, 200, single.bytes.toString().slice(0, 300))
        assert.ok(single.bytes.equals(plaintexts[i]!), `item ${i} opens`)
      }
      const envelopes = sealed.map((r) => (r.ok ? r.bytes : Buffer.alloc(0)))
      const opened = await batch(
        '/decrypt/batch',
        frameRequest(envelopes.map((data, i) => ({ data, context: contexts[i] }))),
      )
      assert.deepEqual(
        opened.map((r) => (r.ok ? [r.keyId, r.keyVersion, r.bytes.toString('hex')] : r)),
        plaintexts.map((p) => [keyId, 1, p.toString('hex')]),
      )
      // The JSON batch takes the same envelope as a legacy-mode ciphertext.
      const json = await api.call('POST', '/decrypt/batch', {
        mode: 'legacy',
        items: envelopes.map((e, i) => ({
          ciphertext: b64(e),
          ...(contexts[i] ? { context: contexts[i] } : {}),
        })),
      })
      assert.equal(json.status, 200, json.text.slice(0, 300))
      assert.deepEqual(
        json.body.results.map((r: { plaintext: string }) => r.plaintext),
        plaintexts.map((p) => b64(p)),
      )
    }
  })

  test('items fail alone: a tampered envelope or wrong context is decryption_failed, an unknown key fails every item', async () => {
    const sealed = await batch(
      '/encrypt/batch',
      frameRequest([{ data: Buffer.from('a') }, { data: Buffer.from('b') }]),
    )
    const [a, b] = sealed.map((r) => (r.ok ? Buffer.from(r.bytes) : assert.fail('sealed')))
    const tampered = Buffer.from(a!)
    tampered[tampered.length - 1]! ^= 1
    const opened = await batch(
      '/decrypt/batch',
      frameRequest([
        { data: a! },
        { data: tampered },
        { data: b!, context: 'not the context' },
        { data: Buffer.from('not an envelope') },
        { data: b! },
      ]),
    )
    assert.deepEqual(
      opened.map((r) => (r.ok ? r.bytes.toString() : r.error)),
      ['a', 'decryption_failed', 'decryption_failed', 'decryption_failed', 'b'],
    )
    const unknown = await batch(
      '/encrypt/batch',
      frameRequest([{ data: Buffer.from('x') }, { data: Buffer.from('y') }]),
      {
        'x-key-id': randomUUID(),
      },
    )
    assert.deepEqual(
      unknown.map((r) => (r.ok ? 'ok' : r.error)),
      ['key_not_found', 'key_not_found'],
    )
  })

  test('bad framing is 400 validation_failed naming the item and field; 1,000 items work, 0 and 1,001 do not', async () => {
    const one = frameRequest([{ data: Buffer.from('hello'), context: 'c' }])
    const cases: [string, Buffer, string][] = [
      ['empty body', Buffer.alloc(0), 'body'],
      ['count only 3 bytes', Buffer.from([0, 0, 1]), 'body'],
      ['count 0', frameRequest([]), 'body/count'],
      ['count 1,001', frameRequest([{ data: Buffer.from('x') }], MAX_ITEMS + 1), 'body/count'],
      [
        'count larger than the items',
        frameRequest([{ data: Buffer.from('x') }], 2),
        'body/items/1/plaintext',
      ],
      [
        'data length past the end',
        Buffer.concat([one.subarray(0, 4), Buffer.from([0, 0, 0, 9]), Buffer.from('hello')]),
        'body/items/0/plaintext',
      ],
      ['context length missing', one.subarray(0, 4 + 4 + 5 + 1), 'body/items/0/context'],
      ['context past the end', one.subarray(0, one.length - 1), 'body/items/0/context'],
      ['bytes after the last item', Buffer.concat([one, Buffer.from([0])]), 'body'],
    ]
    // One item whose 2 context bytes 0xff 0xfe are not UTF-8.
    const badUtf8 = Buffer.concat([
      Buffer.from([0, 0, 0, 1, 0, 0, 0, 1]),
      Buffer.from('x'),
      Buffer.from([0, 2, 0xff, 0xfe]),
    ])
    cases.push(['context not UTF-8', badUtf8, 'body/items/0/context'])
    const tooLongContext = frameRequest([{ data: Buffer.from('x'), context: 'c'.repeat(8193) }])
    cases.push(['context of 8,193 characters', tooLongContext, 'body/items/0/context'])
    for (const [what, body, path] of cases) {
      assertBadFraming(await post('/encrypt/batch', body), path, `encrypt: ${what}`)
    }
    assertBadFraming(
      await post('/decrypt/batch', frameRequest([{ data: Buffer.from('x') }], 2)),
      'body/items/1/envelope',
      'decrypt: count larger than the items',
    )
    const badKey = await post('/encrypt/batch', one, { 'x-key-id': 'not-a-uuid' })
    assert.equal(badKey.status, 400)
    const keyOnDecrypt = await post('/decrypt/batch', one, { 'x-key-id': mlkem })
    assert.equal(keyOnDecrypt.status, 400)
    const keyOnJson = await svc.request('POST', '/api/v1/encrypt/batch', {
      key: tenant.key,
      body: { items: [{ plaintext: 'AA==' }] },
      headers: { 'x-key-id': mlkem },
    })
    assert.equal(keyOnJson.status, 400, keyOnJson.text)
    assert.equal(keyOnJson.body.fields[0].path, 'headers/x-key-id')

    const full = await batch(
      '/encrypt/batch',
      frameRequest(Array.from({ length: MAX_ITEMS }, (_, i) => ({ data: Buffer.from(`item ${i}`) }))),
    )
    assert.equal(full.length, MAX_ITEMS)
    assert.ok(full.every((r) => r.ok))
  })

  test('audit: one record per (key, version, outcome) with the item count, as for JSON batches', async () => {
    const own = await svc.createTenant()
    const key = (await api.createKey('Encryption', 'ML-KEM-512', { isDefault: true }, own)).id
    const marker = `MARKER-${randomBytes(8).toString('hex')}`
    const sealed = await batch(
      '/encrypt/batch',
      frameRequest([
        { data: Buffer.from(marker) },
        { data: Buffer.from(marker) },
        { data: Buffer.from(marker) },
      ]),
      {},
      own,
    )
    const envelopes = sealed.map((r) => (r.ok ? r.bytes : assert.fail('sealed')))
    await batch(
      '/decrypt/batch',
      frameRequest([
        { data: envelopes[0]! },
        { data: envelopes[1]! },
        { data: envelopes[2]!, context: 'wrong' },
      ]),
      {},
      own,
    )
    const rows = await svc.sql<
      { action: string; resource: string; key_version: number; outcome: string; details: unknown }[]
    >`
      SELECT action, resource, key_version, outcome, details FROM audit_log
      WHERE tenant_id = ${own.tenantId} AND action LIKE 'crypto.%'
      ORDER BY action, outcome`
    assert.deepEqual(
      rows.map((r) => ({ ...r })),
      [
        {
          action: 'crypto.decrypt_batch',
          resource: `key:${key}`,
          key_version: 1,
          outcome: 'failure',
          details: { items: 1, error: 'decryption_failed' },
        },
        {
          action: 'crypto.decrypt_batch',
          resource: `key:${key}`,
          key_version: 1,
          outcome: 'success',
          details: { items: 2 },
        },
        {
          action: 'crypto.encrypt_batch',
          resource: `key:${key}`,
          key_version: 1,
          outcome: 'success',
          details: { items: 3 },
        },
      ],
    )
    const all = await svc.sql<{ text: string }[]>`
      SELECT coalesce(string_agg(a::text, E'\n'), '') AS text FROM audit_log a WHERE tenant_id = ${own.tenantId}`
    assert.equal(all[0]!.text.includes(marker), false, 'no plaintext in the audit log')
  })

  test('OpenAPI: both batch routes take and answer JSON or the binary framing; X-Key-Id is a key reference header', async () => {
    const doc = await svc.request('GET', '/api/v1/openapi.json')
    assert.equal(doc.status, 200)
    for (const path of ['/api/v1/encrypt/batch', '/api/v1/decrypt/batch']) {
      const operation = doc.body.paths[path].post
      assert.deepEqual(Object.keys(operation.requestBody.content).sort(), ['application/json', BINARY], path)
      assert.deepEqual(
        Object.keys(operation.responses['200'].content).sort(),
        ['application/json', BINARY],
        path,
      )
      const header = operation.parameters.find(
        (p: { in: string; name: string }) => p.in === 'header' && p.name === 'x-key-id',
      )
      // A key id (UUID) or an alias (docs/keys.md "Key aliases").
      assert.match(header.schema.pattern, /\[0-9a-fA-F\]\{8\}.*\|alias\//, path)
      assert.match(operation.description, /Binary batches/, path)
    }
  })
})
