import assert from 'node:assert/strict'
import { createHash, randomBytes, randomUUID } from 'node:crypto'
import { Agent, type IncomingHttpHeaders, request } from 'node:http'
import { after, before, describe, test } from 'node:test'
import { gzipSync } from 'node:zlib'
import { loadConfig } from '../../src/config.ts'
import {
  CRYPTO_BODY_LIMIT_BYTES,
  DECRYPT_BATCH_BODY_LIMIT_BYTES,
  DECRYPT_JSON_BODY_LIMIT_BYTES,
  ENCRYPT_JSON_BODY_LIMIT_BYTES,
  MAX_PLAINTEXT_BYTES,
} from '../../src/crypto/crypto-schemas.ts'
import { createLogger } from '../../src/platform/logger.ts'
import { type ApiProcess, startApiProcess } from '../../src/server/api-process.ts'
import { b64, unb64, uniqueName } from '../helpers/api-client.ts'
import { has, type Sample, samples, total } from '../helpers/prometheus.ts'
import { Rng } from '../helpers/rng.ts'
import { startTestService, type TenantWithKey, type TestService } from '../helpers/service.ts'

/**
 * The data-plane contract (src/http/data-route.ts): the hot routes are declared once and served
 * by either HTTP adapter, node:http before Fastify (`KMS_DATA_PLANE=node`) or Fastify itself
 * (`KMS_DATA_PLANE=fastify`), and both must answer every request identically.
 *
 * Service A runs the node adapter, service B the Fastify one, on the same database, Redis prefix
 * and master key: the same tenant, keys and ciphertexts are valid on both. Every case goes to
 * both over real HTTP (node:http, so headers, framing and bodies are exactly what the case
 * says) and the answers are compared: status, content type, the JSON body or the bytes, and the
 * headers that carry meaning. Answers that differ by nature (encryptions, data keys, wraps,
 * ECDSA signatures) are compared by shape, then opened across: what A made, B opens, and the
 * other way round. Then: the audit records each request left, the metrics label sets of the
 * data-plane routes, and a seeded fuzz of mutated bodies.
 *
 * The node adapter must really have answered: A's `kms_data_plane_requests_total` grows by
 * exactly the requests it should take (a JSON or octet-stream body on a declared path within
 * the Content-Length limit), never the ones it hands to Fastify.
 *
 * Reproduce a fuzz failure with `CONTRACT_FUZZ_SEED=<seed>`; each failure names its case.
 */

const API = '/api/v1'
const FUZZ_CASES = 200
const FUZZ_CONCURRENCY = 8
const FUZZ_SEED = parseSeed(process.env['CONTRACT_FUZZ_SEED'])
/** An X-Request-Id the service keeps (http/response-headers.ts); any other is replaced. */
const SANE_REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/

/** The data plane's route templates: the label values compared across the adapters' metrics. */
const DATA_ROUTES = [
  '/encrypt',
  '/decrypt',
  '/encrypt/batch',
  '/decrypt/batch',
  '/sign',
  '/verify',
  '/keys/:keyId/mac',
  '/keys/:keyId/mac/verify',
  '/generate-data-key',
  '/keys/:keyId/data-key',
  '/keys/:keyId/wrap',
  '/keys/:keyId/unwrap',
].map((route) => `${API}${route}`)

/** The headers whose values are part of the contract (beside status, content type and body). */
const CONTRACT_HEADERS = [
  'content-type',
  'cache-control',
  'x-content-type-options',
  'www-authenticate',
  'retry-after',
  'x-key-id',
  'x-key-version',
] as const

/**
 * Also part of an identical answer, though outside the headers above: whether the connection
 * stays open after it, which headers there are, and the exact JSON text. The hop-by-hop headers
 * themselves (`connection`, `keep-alive`) are compared by what they mean: an HTTP/1.1
 * connection persists unless the request or the answer says `close`.
 */
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'date'])

/** Fields whose values differ between two runs of the same request: compared by length only. */
const VOLATILE_FIELDS = new Set([
  'ciphertext',
  'encapsulatedKey',
  'nonce',
  'tag',
  'plaintextDek',
  'encryptedDek',
  'wrappedKey',
])

function parseSeed(raw: string | undefined): number {
  if (raw === undefined || raw === '') return 0xc0_47_2a_c7
  const n = Number(raw)
  if (!Number.isInteger(n)) throw new Error(`CONTRACT_FUZZ_SEED must be an integer, got ${raw}`)
  return n >>> 0
}

// ---------------------------------------------------------------------------------------------
// HTTP: node:http requests whose headers and framing are exactly the case's

/** One request as a case describes it; it goes unchanged to both services. */
interface Sent {
  method?: string
  /** The request target, query string included. */
  path: string
  /** The API key: the tenant's when absent, none when null. */
  key?: string | null
  headers?: Record<string, string | string[]>
  /** Serialized as JSON, with `content-type: application/json` unless `headers` names one. */
  json?: unknown
  /** Raw body bytes (no content type added). */
  raw?: Buffer | string
  /** `Transfer-Encoding: chunked`, one HTTP chunk per piece, no Content-Length. */
  chunks?: Buffer[]
  /** A connection of its own, closed after the answer (`Connection: close`): large refused bodies. */
  fresh?: boolean
  /** Whether the node adapter takes this request (else it is handed to Fastify). Default true. */
  node?: boolean
}

interface Answer {
  status: number
  headers: IncomingHttpHeaders
  bytes: Buffer
  // biome-ignore lint/suspicious/noExplicitAny: parsed JSON of any shape; each case asserts what it reads
  json: any
  text: string
  requestId: string
  /** The request asked to close the connection (a connection of its own). */
  closeRequested: boolean
}

interface Side {
  name: 'A' | 'B'
  adapter: 'node' | 'fastify'
  base: URL
  agent: Agent
}

function bodyOf(sent: Sent): Buffer | undefined {
  if (sent.json !== undefined) return Buffer.from(JSON.stringify(sent.json))
  if (sent.raw !== undefined) return Buffer.from(sent.raw)
  return undefined
}

/** A short, exact description of a request, for failure messages and the report. */
function describeSent(sent: Sent): string {
  const headers: Record<string, unknown> = { ...sent.headers }
  if (sent.key === null) headers['x-api-key'] = '(none)'
  else if (sent.key !== undefined) headers['x-api-key'] = `${sent.key.slice(0, 8)}…`
  const body = sent.chunks
    ? `chunked: ${sent.chunks.length} pieces, ${sent.chunks.reduce((n, c) => n + c.length, 0)} bytes`
    : (() => {
        const bytes = bodyOf(sent)
        if (bytes === undefined) return '(no body)'
        const text = bytes.toString('utf8')
        const shown = bytes.length > 300 ? `${text.slice(0, 300)}… (${bytes.length} bytes)` : text
        return sent.json !== undefined ? `json ${shown}` : `raw ${JSON.stringify(shown)}`
      })()
  return `${sent.method ?? 'POST'} ${sent.path} headers=${JSON.stringify(headers)} body=${body}`
}

function send(side: Side, sent: Sent, requestId: string | undefined, tenantKey: string): Promise<Answer> {
  const headers: Record<string, string | string[]> = {}
  const body = bodyOf(sent)
  if (sent.json !== undefined) headers['content-type'] = 'application/json'
  const key = sent.key === undefined ? tenantKey : sent.key
  if (key !== null) headers['x-api-key'] = key
  if (requestId !== undefined) headers['x-request-id'] = requestId
  Object.assign(headers, sent.headers)
  if (sent.chunks) headers['transfer-encoding'] = 'chunked'
  else if (body !== undefined && headers['content-length'] === undefined)
    headers['content-length'] = String(body.length)
  return new Promise((resolve, reject) => {
    let settled = false
    const req = request({
      host: side.base.hostname,
      port: side.base.port,
      method: sent.method ?? 'POST',
      path: sent.path,
      headers,
      agent: sent.fresh ? false : side.agent,
    })
    req.on('response', (res) => {
      const chunks: Buffer[] = []
      res.on('data', (chunk: Buffer) => chunks.push(chunk))
      res.on('error', (error) => {
        if (!settled) reject(error)
        settled = true
      })
      res.on('end', () => {
        const bytes = Buffer.concat(chunks)
        const text = bytes.toString('utf8')
        let json: unknown
        if (String(res.headers['content-type'] ?? '').startsWith('application/json')) {
          try {
            json = JSON.parse(text)
          } catch {
            json = undefined
          }
        }
        settled = true
        resolve({
          status: res.statusCode ?? 0,
          headers: res.headers,
          bytes,
          json,
          text,
          requestId: String(res.headers['x-request-id'] ?? ''),
          closeRequested: sent.fresh === true || /close/i.test(String(sent.headers?.['connection'] ?? '')),
        })
      })
    })
    // A service may answer (413) while the body is still going out: the answer counts, not the write.
    req.on('error', (error) => {
      if (!settled) reject(new Error(`${side.name}: ${describeSent(sent)}: ${error.message}`))
      settled = true
    })
    if (sent.chunks) {
      for (const chunk of sent.chunks) req.write(chunk)
      req.end()
    } else req.end(body)
  })
}

// ---------------------------------------------------------------------------------------------
// Comparing answers

type Compare =
  /** Status, contract headers and the body exactly. */
  | 'exact'
  /** Volatile fields (envelopes, data keys) by length; a signature of a non-Ed25519 key by presence. */
  | 'shape'
  /** Raw bytes by length only (a binary encryption). */
  | 'binary-shape'
  /** A binary batch answer: each item's status, key and version, and its bytes' length. */
  | 'batch-shape'

const contractHeaders = (answer: Answer) =>
  Object.fromEntries(CONTRACT_HEADERS.map((name) => [name, answer.headers[name]]))

function shapeOf(value: unknown, field?: string, signatureVolatile = false): unknown {
  if (Array.isArray(value)) return value.map((item) => shapeOf(item, undefined, signatureVolatile))
  if (value !== null && typeof value === 'object') {
    const record = value as Record<string, unknown>
    const volatileSignature =
      signatureVolatile || (typeof record['algorithm'] === 'string' && record['algorithm'] !== 'Ed25519')
    return Object.fromEntries(
      Object.keys(record)
        .sort()
        .map((key) => [key, shapeOf(record[key], key, volatileSignature)]),
    )
  }
  if (typeof value === 'string' && field !== undefined) {
    if (VOLATILE_FIELDS.has(field)) return `<${unb64(value).length} bytes>`
    if (field === 'signature' && signatureVolatile) return '<signature>'
  }
  return value
}

/** Whether the connection stays open after this answer (HTTP/1.1: unless either side says close). */
const persists = (answer: Answer) =>
  !answer.closeRequested && !/\bclose\b/i.test(String(answer.headers.connection ?? ''))

/** The raw hop-by-hop headers, for the report (their meaning is what is compared). */
const hopByHop = (answer: Answer) => ({
  connection: answer.headers.connection,
  'keep-alive': answer.headers['keep-alive'],
})

/** A view of an answer in which two correct answers to the same request are equal. */
function view(answer: Answer, compare: Compare, strict = true) {
  let body: unknown
  if (answer.json !== undefined) body = compare === 'exact' ? answer.json : shapeOf(answer.json)
  else if (compare === 'binary-shape' && answer.status === 200) body = `<${answer.bytes.length} bytes>`
  else if (compare === 'batch-shape' && answer.status === 200)
    body = readBinaryBatch(answer.bytes).map((item) =>
      item.ok ? { ...item, bytes: `<${item.bytes.length} bytes>` } : item,
    )
  else body = { bytes: answer.bytes.toString('base64') }
  const base = { status: answer.status, headers: contractHeaders(answer), body }
  if (!strict) return base
  return {
    ...base,
    connection: persists(answer) ? 'persists' : 'closes',
    headerNames: Object.keys(answer.headers)
      .filter((name) => !HOP_BY_HOP.has(name))
      .sort(),
    ...(compare === 'exact' && answer.json !== undefined ? { text: answer.text } : {}),
  }
}

// ---------------------------------------------------------------------------------------------
// The binary batch framing (docs/envelope-format.md, "Binary batches")

function binaryBatch(items: readonly { data: Buffer; context?: string }[]): Buffer {
  const parts: Buffer[] = []
  const count = Buffer.alloc(4)
  count.writeUInt32BE(items.length)
  parts.push(count)
  for (const item of items) {
    const length = Buffer.alloc(4)
    length.writeUInt32BE(item.data.length)
    const context = Buffer.from(item.context ?? '', 'utf8')
    const contextLength = Buffer.alloc(2)
    contextLength.writeUInt16BE(context.length)
    parts.push(length, item.data, contextLength, context)
  }
  return Buffer.concat(parts)
}

type BatchItem =
  | { ok: true; keyId: string; keyVersion: number; bytes: Buffer }
  | { ok: false; error: unknown }

function readBinaryBatch(bytes: Buffer): BatchItem[] {
  const count = bytes.readUInt32BE(0)
  const items: BatchItem[] = []
  let at = 4
  for (let i = 0; i < count; i++) {
    const flag = bytes[at++]
    if (flag === 0) {
      const hex = bytes.subarray(at, at + 16).toString('hex')
      const keyId = `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`
      const keyVersion = bytes.readUInt32BE(at + 16)
      const length = bytes.readUInt32BE(at + 20)
      at += 24
      items.push({ ok: true, keyId, keyVersion, bytes: bytes.subarray(at, at + length) })
      at += length
    } else {
      const length = bytes.readUInt16BE(at)
      at += 2
      items.push({ ok: false, error: JSON.parse(bytes.subarray(at, at + length).toString('utf8')) })
      at += length
    }
  }
  assert.equal(at, bytes.length, 'the binary batch answer ends after its last item')
  return items
}

type Json = null | boolean | number | string | Json[] | { [key: string]: Json }

/** Every place in a JSON value that can be replaced or removed: [parent, key]. */
function slotsOf(value: Json): Array<[Json[] | Record<string, Json>, string | number]> {
  const out: Array<[Json[] | Record<string, Json>, string | number]> = []
  const walk = (node: Json) => {
    if (Array.isArray(node)) {
      node.forEach((child, i) => {
        out.push([node, i])
        walk(child)
      })
    } else if (node !== null && typeof node === 'object') {
      for (const key of Object.keys(node)) {
        out.push([node, key])
        walk(node[key]!)
      }
    }
  }
  walk(value)
  return out
}

function nested(depth: number, asArray: boolean): Json {
  let value: Json = asArray ? [] : {}
  for (let i = 0; i < depth; i++) value = asArray ? [value] : { a: value }
  return value
}

// ---------------------------------------------------------------------------------------------

interface Fixtures {
  enc: string
  ed: string
  ec: string
  hmac: string
  /** A JSON encrypt answer (standard mode), context `order=1`. */
  envelope: Record<string, unknown>
  /** A JSON encrypt answer in legacy mode, no context. */
  legacy: Record<string, unknown>
  /** A binary encrypt answer (compact envelope), context `ctx=bin`. */
  compact: Buffer
  wrapped: Record<string, unknown>
  dataKey: Record<string, unknown>
  edSignature: string
  ecSignature: Record<string, unknown>
  mac: string
  message: string
  /** API keys: keys:read only, encrypt:invoke only. */
  readOnly: string
  invokeOnly: string
}

interface Case {
  name: string
  sent: Sent
  /** The status both must answer (a check that the case exercises what it says). */
  status: number
  /** The error code both must answer. */
  error?: string
  compare?: Compare
  /** Further checks on the two answers (the cross-checks: A's output opened on B and back). */
  check?: (a: Answer, b: Answer) => Promise<void> | void
  /**
   * Send no X-Request-Id (both must make up a UUID), or this one per side (kept when it is sane:
   * 1 to 128 of `A-Za-z0-9._:-`, else replaced by a UUID). Default: `contract-<case>-<side>`.
   */
  requestId?: false | ((side: 'a' | 'b') => string)
}

describe('the data plane answers alike through the node and fastify adapters', () => {
  let A: TestService
  let B: ApiProcess | undefined
  let sideA: Side
  let sideB: Side
  let tenant: TenantWithKey
  let fx: Fixtures
  /** The requests to A the node adapter should have taken since `baseline` was read. */
  let expectedNodeTakes = 0
  let baseline: number | undefined
  /** Request ids per compared exchange, for the audit comparison: [name, A's id, B's id]. */
  const exchanges: Array<{ name: string; a: string; b: string }> = []
  const differences: string[] = []
  /** Answers alike in meaning but not to the byte (hop-by-hop headers): reported, not failed. */
  const notes: string[] = []

  async function call(side: Side, sent: Sent, requestId?: string): Promise<Answer> {
    if (side.name === 'A' && (sent.node ?? true)) expectedNodeTakes++
    return send(side, sent, requestId, tenant.key)
  }

  async function scrape(side: Side): Promise<Sample[]> {
    const answer = await send(
      side,
      { method: 'GET', path: '/metrics', key: null, node: false },
      undefined,
      '',
    )
    assert.equal(answer.status, 200)
    return samples(answer.text)
  }

  async function setupCall(path: string, body: unknown, key = tenant.key): Promise<Answer> {
    const answer = await send(sideA, { path, json: body, key }, undefined, key)
    assert.ok(answer.status === 200 || answer.status === 201, `${path}: ${answer.status} ${answer.text}`)
    return answer
  }

  before(async () => {
    A = await startTestService({ KMS_DATA_PLANE: 'node' })
    B = await startApiProcess(
      loadConfig({ ...A.env, KMS_DATA_PLANE: 'fastify' }),
      createLogger('silent', 'kms-test-fastify'),
      A.db.url,
    )
    sideA = { name: 'A', adapter: 'node', base: new URL(A.baseUrl), agent: new Agent({ keepAlive: true }) }
    sideB = { name: 'B', adapter: 'fastify', base: new URL(B.url), agent: new Agent({ keepAlive: true }) }
    tenant = await A.createTenant()

    const createKey = async (keyType: string, algorithm: string, extra: Record<string, unknown> = {}) =>
      (
        await setupCall(`${API}/keys`, {
          name: uniqueName(algorithm.toLowerCase()),
          keyType,
          algorithm,
          ...extra,
        })
      ).json.id as string
    const [enc, ed, ec, hmac] = [
      await createKey('Encryption', 'ML-KEM-768', { isDefault: true }),
      await createKey('Signing', 'Ed25519', { isDefault: true }),
      await createKey('Signing', 'EC-P256'),
      await createKey('HMAC', 'HMAC-SHA256'),
    ]
    const apiKey = async (scopes: string[]) =>
      (await setupCall(`${API}/api-keys`, { name: uniqueName('contract'), scopes })).json.key as string
    const message = b64('the data-plane contract')
    const compact = await send(
      sideA,
      {
        path: `${API}/encrypt`,
        raw: Buffer.from('binary fixture'),
        headers: { 'content-type': 'application/octet-stream', 'x-encryption-context': b64('ctx=bin') },
      },
      undefined,
      tenant.key,
    )
    assert.equal(compact.status, 200, compact.text)
    fx = {
      enc,
      ed,
      ec,
      hmac,
      envelope: (
        await setupCall(`${API}/encrypt`, { plaintext: b64('json fixture'), context: 'order=1', keyId: enc })
      ).json,
      legacy: (await setupCall(`${API}/encrypt`, { plaintext: b64('legacy fixture'), mode: 'legacy' })).json,
      compact: compact.bytes,
      wrapped: (
        await setupCall(`${API}/keys/${enc}/wrap`, { plaintext: b64(randomBytes(32)), context: 'wrap=1' })
      ).json,
      dataKey: (await setupCall(`${API}/generate-data-key`, { keyId: enc })).json,
      edSignature: (await setupCall(`${API}/sign`, { keyId: ed, message })).json.signature,
      ecSignature: (await setupCall(`${API}/sign`, { keyId: ec, message })).json,
      mac: (await setupCall(`${API}/keys/${hmac}/mac`, { data: message })).json.mac,
      message,
      readOnly: await apiKey(['keys:read']),
      invokeOnly: await apiKey(['encrypt:invoke']),
    }
  })

  after(async () => {
    // B first: it shares A's database, which A's stop drops.
    try {
      await B?.stop()
    } finally {
      sideA?.agent.destroy()
      sideB?.agent.destroy()
      await A?.stop()
    }
  })

  test('service A runs the node adapter, service B the fastify adapter', async (t) => {
    const [a, b] = [await scrape(sideA), await scrape(sideB)]
    const adapters = (list: Sample[]) =>
      list.filter((s) => s.name === 'kms_data_plane_info').map((s) => `${s.labels['adapter']}=${s.value}`)
    t.diagnostic(`service A (KMS_DATA_PLANE=node): kms_data_plane_info ${adapters(a).join(', ')}`)
    t.diagnostic(`service B (KMS_DATA_PLANE=fastify): kms_data_plane_info ${adapters(b).join(', ')}`)
    t.diagnostic(
      'uWebSockets.js: not available on this machine (no build for glibc 2.36, config.ts refuses it): not run',
    )
    assert.deepEqual(adapters(a), ['node=1'])
    assert.deepEqual(adapters(b), ['fastify=1'])
    assert.ok(has(a, 'kms_data_plane_requests_total', { adapter: 'node' }), 'A counts what node answers')
    assert.ok(!has(b, 'kms_data_plane_requests_total'), 'B has no node adapter to count')
    baseline = total(a, 'kms_data_plane_requests_total', { adapter: 'node' })
    expectedNodeTakes = 0
  })

  /** Sends to A then B, asserts the contract, and returns both answers. */
  async function exchange(index: number, c: Case): Promise<[Answer, Answer]> {
    const name = c.name
    const idOf = c.requestId ?? ((side: 'a' | 'b') => `contract-${index}-${side}`)
    const ids = idOf === false ? undefined : [idOf('a'), idOf('b')]
    const a = await call(sideA, c.sent, ids?.[0])
    const b = await call(sideB, c.sent, ids?.[1])
    exchanges.push({ name, a: a.requestId, b: b.requestId })
    const compare = c.compare ?? 'exact'
    const [va, vb] = [view(a, compare), view(b, compare)]
    try {
      assert.deepEqual(va, vb, `the adapters' answers differ`)
    } catch (error) {
      const side = (answer: Answer, v: typeof va) =>
        `${answer.status} ${JSON.stringify({ ...v.headers, ...hopByHop(answer) })} ${answer.text.slice(0, 600)}`
      differences.push(
        `${name}\n  request: ${describeSent(c.sent)}\n  node (A):    ${side(a, va)}\n  fastify (B): ${side(b, vb)}`,
      )
      throw error
    }
    if (JSON.stringify(hopByHop(a)) !== JSON.stringify(hopByHop(b)))
      notes.push(
        `${name}: the same connection handling, other hop-by-hop headers: node ${JSON.stringify(hopByHop(a))}, fastify ${JSON.stringify(hopByHop(b))}`,
      )
    if (ids?.every((id) => SANE_REQUEST_ID.test(id))) {
      assert.equal(a.requestId, ids[0], 'A echoes the X-Request-Id')
      assert.equal(b.requestId, ids[1], 'B echoes the X-Request-Id')
    } else {
      assert.match(a.requestId, UUID, 'A makes up a UUID request id')
      assert.match(b.requestId, UUID, 'B makes up a UUID request id')
      assert.notEqual(a.requestId, b.requestId)
    }
    assert.equal(a.status, c.status, `status: ${a.text.slice(0, 400)}`)
    if (c.error !== undefined) assert.equal(a.json?.error, c.error, a.text.slice(0, 400))
    assert.equal(a.headers['cache-control'], 'no-store')
    assert.equal(a.headers['x-content-type-options'], 'nosniff')
    await c.check?.(a, b)
    return [a, b]
  }

  // -------------------------------------------------------------------------------------------
  // Cross-checks: what one adapter made, the other opens

  async function decryptOn(side: Side, encrypted: Answer, context?: string) {
    const answer = await call(side, {
      path: `${API}/decrypt`,
      json: { ...encrypted.json, ...(context !== undefined ? { context } : {}) },
    })
    assert.equal(answer.status, 200, `decrypt on ${side.name}: ${answer.text}`)
    return answer.json
  }

  const crossDecrypt = (plaintext: Buffer, context?: string) => async (a: Answer, b: Answer) => {
    for (const [made, on] of [
      [a, sideB],
      [b, sideA],
    ] as const) {
      const opened = await decryptOn(on, made, context)
      assert.equal(opened.plaintext, plaintext.toString('base64'), `${on.name} opens the other's envelope`)
      assert.equal(opened.keyId, made.json.keyId)
      assert.equal(opened.keyVersion, made.json.keyVersion)
    }
  }

  const crossDecryptBinary = (plaintext: Buffer, context?: string) => async (a: Answer, b: Answer) => {
    for (const [made, on] of [
      [a, sideB],
      [b, sideA],
    ] as const) {
      const opened = await call(on, {
        path: `${API}/decrypt`,
        raw: made.bytes,
        headers: {
          'content-type': 'application/octet-stream',
          ...(context !== undefined ? { 'x-encryption-context': b64(context) } : {}),
        },
      })
      assert.equal(opened.status, 200, opened.text)
      assert.deepEqual(opened.bytes, plaintext, `${on.name} opens the other's compact envelope`)
      assert.equal(opened.headers['x-key-id'], made.headers['x-key-id'])
      assert.equal(opened.headers['x-key-version'], made.headers['x-key-version'])
    }
  }

  const crossUnwrap =
    (keyId: string, context?: string, plaintext?: Buffer) => async (a: Answer, b: Answer) => {
      for (const [made, on] of [
        [a, sideB],
        [b, sideA],
      ] as const) {
        const opened = await call(on, {
          path: `${API}/keys/${keyId}/unwrap`,
          json: { ...made.json, ...(context !== undefined ? { context } : {}) },
        })
        assert.equal(opened.status, 200, `unwrap on ${on.name}: ${opened.text}`)
        const expected = plaintext?.toString('base64') ?? made.json.plaintextDek
        if (expected !== undefined) assert.equal(opened.json.plaintext, expected)
        else assert.equal(unb64(opened.json.plaintext).length, made.json.keyBytes)
      }
    }

  const crossVerify =
    (message: string, extra: Record<string, unknown> = {}) =>
    async (a: Answer, b: Answer) => {
      for (const [made, on] of [
        [a, sideB],
        [b, sideA],
      ] as const) {
        const verified = await call(on, {
          path: `${API}/verify`,
          json: { ...made.json, message, ...extra },
        })
        assert.equal(verified.status, 200, verified.text)
        assert.equal(verified.json.valid, true, `${on.name} verifies the other's signature`)
      }
    }

  function cases(): Case[] {
    const { enc, ed, ec, hmac, message } = fx
    const sign = `${API}/sign`
    const mac = `${API}/keys/${hmac}/mac`
    const octet = { 'content-type': 'application/octet-stream' }
    const limit = A.config.bodyLimitBytes
    const digest = createHash('sha256').update('digest me').digest()
    const wrapSecret = randomBytes(32)
    const ecVerify = {
      keyId: ec,
      message,
      signature: fx.ecSignature['signature'],
      signingScheme: fx.ecSignature['signingScheme'],
      algorithm: fx.ecSignature['algorithm'],
      keyVersion: fx.ecSignature['keyVersion'],
    }
    const tampered = (() => {
      const bytes = unb64(String(fx.envelope['ciphertext']))
      bytes[0]! ^= 1
      return { ...fx.envelope, ciphertext: bytes.toString('base64'), context: 'order=1' }
    })()
    const tamperedCompact = Buffer.from(fx.compact)
    tamperedCompact[tamperedCompact.length - 1]! ^= 1
    const pieces = (text: string, n: number) => {
      const size = Math.ceil(text.length / n)
      return Array.from({ length: n }, (_, i) => Buffer.from(text.slice(i * size, (i + 1) * size)))
    }
    const overLimit = (bytes: number) =>
      Array.from({ length: Math.ceil(bytes / 65_536) }, () => Buffer.alloc(65_536, 0x20))

    return [
      // --- deterministic answers -------------------------------------------------------------
      { name: 'sign Ed25519', sent: { path: sign, json: { keyId: ed, message } }, status: 200 },
      { name: 'sign with the default Signing key', sent: { path: sign, json: { message } }, status: 200 },
      {
        name: 'sign, application/json; charset=utf-8',
        sent: {
          path: sign,
          json: { keyId: ed, message },
          headers: { 'content-type': 'application/json; charset=utf-8' },
        },
        status: 200,
      },
      {
        name: 'sign, APPLICATION/JSON upper case',
        sent: { path: sign, json: { keyId: ed, message }, headers: { 'content-type': 'APPLICATION/JSON' } },
        status: 200,
      },
      {
        name: 'sign, a small chunked body',
        sent: {
          path: sign,
          chunks: pieces(JSON.stringify({ keyId: ed, message }), 3),
          headers: { 'content-type': 'application/json' },
        },
        status: 200,
      },
      {
        name: 'sign, a query string is ignored',
        sent: { path: `${sign}?keyId=${ec}&x=1`, json: { keyId: ed, message } },
        status: 200,
      },
      {
        name: 'sign, a malformed query string',
        sent: { path: `${sign}?%zz=%&a`, json: { keyId: ed, message } },
        status: 200,
      },
      {
        name: 'verify Ed25519: valid',
        sent: { path: `${API}/verify`, json: { keyId: ed, message, signature: fx.edSignature } },
        status: 200,
      },
      {
        name: 'verify Ed25519: a wrong signature is valid false',
        sent: {
          path: `${API}/verify`,
          json: { keyId: ed, message: b64('other'), signature: fx.edSignature },
        },
        status: 200,
        check: (a) => assert.equal(a.json.valid, false),
      },
      {
        name: 'verify ECDSA, the sign answer passed back',
        sent: { path: `${API}/verify`, json: ecVerify },
        status: 200,
      },
      { name: 'MAC HMAC-SHA256', sent: { path: mac, json: { data: message } }, status: 200 },
      {
        name: 'MAC, an upper-case key id in the path is lower-cased',
        sent: { path: `${API}/keys/${hmac.toUpperCase()}/mac`, json: { data: message } },
        status: 200,
        check: (a) => assert.equal(a.json.keyId, hmac),
      },
      {
        name: 'MAC, no X-Request-Id: both make up a UUID',
        sent: { path: mac, json: { data: message } },
        status: 200,
        requestId: false,
      },
      {
        name: 'MAC, an invalid X-Request-Id is replaced by a UUID',
        sent: { path: mac, json: { data: message } },
        status: 200,
        requestId: (side) => `not a valid id ${side}!`,
      },
      {
        name: 'MAC, a %-encoded path (handed to Fastify)',
        sent: { path: `${API}/keys/${hmac}/m%61c`, json: { data: message }, node: false },
        status: 200,
      },
      {
        name: 'mac/verify: valid',
        sent: { path: `${mac}/verify`, json: { data: message, mac: fx.mac } },
        status: 200,
      },
      {
        name: 'mac/verify: a wrong MAC is valid false',
        sent: { path: `${mac}/verify`, json: { data: b64('x'), mac: fx.mac, keyVersion: 1 } },
        status: 200,
        check: (a) => assert.equal(a.json.valid, false),
      },
      {
        name: 'mac/verify: the mac answer passed back',
        sent: {
          path: `${mac}/verify`,
          json: { data: message, mac: fx.mac, keyId: hmac, algorithm: 'HMAC-SHA256' },
        },
        status: 200,
      },
      {
        name: 'decrypt JSON',
        sent: { path: `${API}/decrypt`, json: { ...fx.envelope, context: 'order=1' } },
        status: 200,
        check: (a) => assert.equal(a.json.plaintext, b64('json fixture')),
      },
      {
        name: 'decrypt JSON, legacy mode',
        sent: { path: `${API}/decrypt`, json: { ...fx.legacy } },
        status: 200,
        check: (a) => assert.equal(a.json.plaintext, b64('legacy fixture')),
      },
      {
        name: 'decrypt binary',
        sent: {
          path: `${API}/decrypt`,
          raw: fx.compact,
          headers: { ...octet, 'x-encryption-context': b64('ctx=bin') },
        },
        status: 200,
        check: (a) => {
          assert.equal(a.bytes.toString(), 'binary fixture')
          assert.equal(a.headers['x-key-id'], enc)
        },
      },
      {
        name: 'decrypt binary with X-Key-Id and X-Key-Version',
        sent: {
          path: `${API}/decrypt`,
          raw: fx.compact,
          headers: {
            ...octet,
            'x-encryption-context': b64('ctx=bin'),
            'x-key-id': enc.toUpperCase(),
            'x-key-version': '1',
          },
        },
        status: 200,
      },
      {
        name: 'decrypt batch JSON, one item failing',
        sent: {
          path: `${API}/decrypt/batch`,
          json: {
            items: [
              { ...fx.envelope, context: 'order=1' },
              { ...fx.envelope, context: 'wrong' },
              { ...fx.legacy, mode: 'legacy' },
            ],
          },
        },
        status: 200,
        check: (a) =>
          assert.deepEqual(
            a.json.results.map((r: { ok: boolean }) => r.ok),
            [true, false, true],
          ),
      },
      {
        name: 'decrypt batch binary, one item failing',
        sent: {
          path: `${API}/decrypt/batch`,
          raw: binaryBatch([{ data: fx.compact, context: 'ctx=bin' }, { data: fx.compact }]),
          headers: octet,
        },
        status: 200,
        check: (a) =>
          assert.deepEqual(
            readBinaryBatch(a.bytes).map((r) => r.ok),
            [true, false],
          ),
      },
      {
        name: 'unwrap a wrap answer',
        sent: { path: `${API}/keys/${enc}/unwrap`, json: { ...fx.wrapped, context: 'wrap=1' } },
        status: 200,
      },
      {
        name: 'unwrap a data-key answer passed back',
        sent: { path: `${API}/keys/${enc}/unwrap`, json: { ...fx.dataKey } },
        status: 200,
        check: (a) => assert.equal(a.json.plaintext, fx.dataKey['plaintextDek']),
      },

      // --- answers that differ by nature: shape, then opened across ---------------------------
      {
        name: 'sign ECDSA P-256 (DER)',
        sent: { path: sign, json: { keyId: ec, message } },
        status: 200,
        compare: 'shape',
        check: crossVerify(message),
      },
      {
        name: 'sign ECDSA P-256 (P1363)',
        sent: { path: sign, json: { keyId: ec, message, signatureFormat: 'P1363' } },
        status: 200,
        compare: 'shape',
        check: crossVerify(message),
      },
      {
        name: 'sign ECDSA P-256 (a DIGEST)',
        sent: { path: sign, json: { keyId: ec, message: digest.toString('base64'), messageType: 'DIGEST' } },
        status: 200,
        compare: 'shape',
        check: crossVerify(digest.toString('base64'), { messageType: 'DIGEST' }),
      },
      {
        name: 'encrypt JSON with the default key',
        sent: { path: `${API}/encrypt`, json: { plaintext: b64('hello') } },
        status: 200,
        compare: 'shape',
        check: crossDecrypt(Buffer.from('hello')),
      },
      {
        name: 'encrypt JSON with a key id and a context',
        sent: {
          path: `${API}/encrypt`,
          json: { keyId: enc, plaintext: b64('with context'), context: 'order=7' },
        },
        status: 200,
        compare: 'shape',
        check: crossDecrypt(Buffer.from('with context'), 'order=7'),
      },
      {
        name: 'encrypt JSON, legacy mode',
        sent: { path: `${API}/encrypt`, json: { plaintext: b64('legacy'), mode: 'legacy' } },
        status: 200,
        compare: 'shape',
        check: crossDecrypt(Buffer.from('legacy')),
      },
      {
        name: 'encrypt binary',
        sent: { path: `${API}/encrypt`, raw: Buffer.from('raw bytes'), headers: octet },
        status: 200,
        compare: 'binary-shape',
        check: crossDecryptBinary(Buffer.from('raw bytes')),
      },
      {
        name: 'encrypt binary with X-Key-Id and X-Encryption-Context',
        sent: {
          path: `${API}/encrypt`,
          raw: randomBytes(5000),
          headers: { ...octet, 'x-key-id': enc, 'x-encryption-context': b64('tenant=é') },
        },
        status: 200,
        compare: 'binary-shape',
        check: async (a, b) => {
          // The plaintext is the case's: read it back from one side first.
          const plain = await call(sideA, {
            path: `${API}/decrypt`,
            raw: a.bytes,
            headers: { ...octet, 'x-encryption-context': b64('tenant=é') },
          })
          assert.equal(plain.status, 200)
          await crossDecryptBinary(plain.bytes, 'tenant=é')(a, b)
        },
      },
      {
        name: 'encrypt binary, an empty body',
        sent: { path: `${API}/encrypt`, raw: Buffer.alloc(0), headers: octet },
        status: 200,
        compare: 'binary-shape',
        check: crossDecryptBinary(Buffer.alloc(0)),
      },
      {
        name: 'encrypt batch JSON',
        sent: {
          path: `${API}/encrypt/batch`,
          json: {
            items: [
              { plaintext: b64('one') },
              { keyId: enc, plaintext: b64('two'), context: 'c=2' },
              { keyId: ed, plaintext: b64('x') },
            ],
          },
        },
        status: 200,
        compare: 'shape',
        check: async (a, b) => {
          for (const [made, on] of [
            [a, sideB],
            [b, sideA],
          ] as const) {
            const [first, second] = made.json.results
            const opened = await call(on, {
              path: `${API}/decrypt/batch`,
              json: { items: [first, { ...second, context: 'c=2' }] },
            })
            assert.equal(opened.status, 200, opened.text)
            assert.deepEqual(
              opened.json.results.map((r: { plaintext: string }) => r.plaintext),
              [b64('one'), b64('two')],
            )
          }
        },
      },
      {
        name: 'encrypt batch binary with X-Key-Id',
        sent: {
          path: `${API}/encrypt/batch`,
          raw: binaryBatch([{ data: Buffer.from('b-one') }, { data: Buffer.from('b-two'), context: 'c=b' }]),
          headers: { ...octet, 'x-key-id': enc },
        },
        status: 200,
        compare: 'batch-shape',
        check: async (a, b) => {
          for (const [made, on] of [
            [a, sideB],
            [b, sideA],
          ] as const) {
            const items = readBinaryBatch(made.bytes)
            const opened = await call(on, {
              path: `${API}/decrypt/batch`,
              raw: binaryBatch([
                { data: (items[0] as { bytes: Buffer }).bytes },
                { data: (items[1] as { bytes: Buffer }).bytes, context: 'c=b' },
              ]),
              headers: octet,
            })
            assert.equal(opened.status, 200, opened.text)
            assert.deepEqual(
              readBinaryBatch(opened.bytes).map((r) => (r.ok ? r.bytes.toString() : r.error)),
              ['b-one', 'b-two'],
            )
          }
        },
      },
      {
        name: 'generate-data-key',
        sent: { path: `${API}/generate-data-key`, json: {} },
        status: 200,
        compare: 'shape',
        check: crossUnwrap(enc),
      },
      {
        name: 'keys/:keyId/data-key, 16 bytes with a context',
        sent: { path: `${API}/keys/${enc}/data-key`, json: { keyBytes: 16, context: 'dk=1' } },
        status: 200,
        compare: 'shape',
        check: crossUnwrap(enc, 'dk=1'),
      },
      {
        name: 'keys/:keyId/data-key without the plaintext',
        sent: { path: `${API}/keys/${enc}/data-key`, json: { withPlaintext: false } },
        status: 200,
        compare: 'shape',
        check: crossUnwrap(enc),
      },
      {
        name: 'wrap',
        sent: {
          path: `${API}/keys/${enc}/wrap`,
          json: { plaintext: wrapSecret.toString('base64'), context: 'w=2' },
        },
        status: 200,
        compare: 'shape',
        check: crossUnwrap(enc, 'w=2', wrapSecret),
      },

      // --- authentication and authorization ---------------------------------------------------
      {
        name: 'no credential',
        sent: { path: mac, json: { data: message }, key: null },
        status: 401,
        error: 'unauthorized',
        check: (a) => assert.ok(a.headers['www-authenticate']),
      },
      {
        name: 'a wrong API key',
        sent: { path: sign, json: { message }, key: `kms_${'A'.repeat(52)}` },
        status: 401,
        error: 'unauthorized',
      },
      {
        name: 'a malformed Bearer token',
        sent: { path: sign, json: { message }, key: null, headers: { authorization: 'Bearer not.a.token' } },
        status: 401,
        error: 'unauthorized',
      },
      {
        name: 'X-Api-Key twice',
        sent: {
          path: sign,
          json: { message },
          key: null,
          headers: { 'x-api-key': [tenant.key, tenant.key] },
        },
        status: 401,
        error: 'unauthorized',
      },
      {
        name: 'an API key with keys:read only (403)',
        sent: { path: mac, json: { data: message }, key: fx.readOnly },
        status: 403,
        error: 'insufficient_scope',
      },
      {
        name: 'an API key with encrypt:invoke only may not sign (403)',
        sent: { path: sign, json: { message }, key: fx.invokeOnly },
        status: 403,
        error: 'insufficient_scope',
      },
      {
        name: 'an API key with encrypt:invoke only may decrypt',
        sent: { path: `${API}/decrypt`, json: { ...fx.envelope, context: 'order=1' }, key: fx.invokeOnly },
        status: 200,
      },

      // --- validation -------------------------------------------------------------------------
      {
        name: 'an unknown field',
        sent: { path: sign, json: { message, colour: 'blue' } },
        status: 400,
        error: 'validation_failed',
        check: (a) => assert.equal(a.json.fields[0].path, 'body/colour'),
      },
      {
        name: 'a bad enum value',
        sent: { path: sign, json: { keyId: ec, message, messageType: 'HASHED' } },
        status: 400,
        error: 'validation_failed',
        check: (a) => assert.deepEqual(a.json.fields[0].allowedValues, ['RAW', 'DIGEST']),
      },
      {
        name: 'a bad union-of-literals value',
        sent: { path: `${API}/keys/${enc}/data-key`, json: { keyBytes: 20 } },
        status: 400,
        error: 'validation_failed',
        check: (a) => assert.deepEqual(a.json.fields[0].allowedValues, [16, 24, 32]),
      },
      {
        name: 'a missing required field',
        sent: { path: mac, json: {} },
        status: 400,
        error: 'validation_failed',
      },
      {
        name: 'a field of the wrong type',
        sent: { path: sign, json: { message: 42 } },
        status: 400,
        error: 'validation_failed',
      },
      { name: 'invalid Base64', sent: { path: sign, json: { message: 'not base64!' } }, status: 400 },
      {
        name: 'invalid JSON',
        sent: { path: sign, raw: '{"message":', headers: { 'content-type': 'application/json' } },
        status: 400,
        error: 'invalid_json',
      },
      {
        name: 'an empty JSON body',
        sent: { path: sign, raw: '', headers: { 'content-type': 'application/json' } },
        status: 400,
        error: 'invalid_json',
      },
      {
        name: 'a body with __proto__',
        sent: {
          path: sign,
          raw: `{"message":"${message}","__proto__":{"polluted":1}}`,
          headers: { 'content-type': 'application/json' },
        },
        status: 400,
      },
      {
        name: 'a body with constructor.prototype',
        sent: {
          path: sign,
          raw: `{"message":"${message}","constructor":{"prototype":{"polluted":1}}}`,
          headers: { 'content-type': 'application/json' },
        },
        status: 400,
      },
      { name: 'a JSON null body', sent: { path: sign, json: null }, status: 400 },
      { name: 'a JSON array body', sent: { path: sign, json: [{ message }] }, status: 400 },
      {
        name: 'a byte-order mark before the JSON',
        sent: {
          path: sign,
          raw: `\ufeff${JSON.stringify({ keyId: ed, message })}`,
          headers: { 'content-type': 'application/json' },
        },
        status: 200,
      },
      {
        name: 'a path parameter that is not a UUID',
        sent: { path: `${API}/keys/not-a-uuid/mac`, json: { data: message } },
        status: 400,
        error: 'validation_failed',
      },
      {
        name: 'an unknown key',
        sent: { path: `${API}/keys/${randomUUID()}/mac`, json: { data: message } },
        status: 404,
      },
      {
        name: 'an unknown key on encrypt',
        sent: { path: `${API}/encrypt`, json: { keyId: randomUUID(), plaintext: b64('x') } },
        status: 404,
      },
      { name: 'sign with an HMAC key', sent: { path: sign, json: { keyId: hmac, message } }, status: 400 },
      {
        name: 'MAC with a Signing key',
        sent: { path: `${API}/keys/${ed}/mac`, json: { data: message } },
        status: 400,
      },
      {
        name: 'encrypt with a Signing key',
        sent: { path: `${API}/encrypt`, json: { keyId: ed, plaintext: b64('x') } },
        status: 400,
      },
      {
        name: 'verify, a signingScheme contradicting signatureFormat',
        sent: { path: `${API}/verify`, json: { ...ecVerify, signatureFormat: 'P1363' } },
        status: 400,
      },
      {
        name: 'mac/verify, a body keyId that is not the path key',
        sent: { path: `${mac}/verify`, json: { data: message, mac: fx.mac, keyId: enc } },
        status: 400,
      },
      {
        name: 'unwrap with both wrappedKey and encryptedDek',
        sent: {
          path: `${API}/keys/${enc}/unwrap`,
          json: { wrappedKey: fx.wrapped['wrappedKey'], encryptedDek: fx.dataKey['encryptedDek'] },
        },
        status: 400,
      },
      {
        name: 'wrap, too little key material',
        sent: { path: `${API}/keys/${enc}/wrap`, json: { plaintext: 'YQ' } },
        status: 400,
      },

      // --- media types and paths (handed to Fastify where marked) ----------------------------
      {
        name: 'text/plain (415)',
        sent: {
          path: sign,
          raw: JSON.stringify({ message }),
          headers: { 'content-type': 'text/plain' },
          node: false,
        },
        status: 415,
      },
      {
        name: 'octet-stream to /sign (415)',
        sent: { path: sign, raw: Buffer.from('bytes'), headers: octet, node: false },
        status: 415,
      },
      {
        name: 'a body without a content type',
        sent: { path: sign, raw: JSON.stringify({ message }), node: false },
        status: 415,
      },
      {
        name: 'application/json with another charset',
        sent: {
          path: sign,
          json: { keyId: ed, message },
          headers: { 'content-type': 'application/json; charset=latin1' },
          node: false,
        },
        status: 200,
      },
      {
        name: 'octet-stream with a parameter to /encrypt',
        sent: {
          path: `${API}/encrypt`,
          raw: Buffer.from('x'),
          headers: { 'content-type': 'application/octet-stream; x=1' },
          node: false,
        },
        status: 200,
        compare: 'binary-shape',
        check: crossDecryptBinary(Buffer.from('x')),
      },
      {
        name: 'a trailing slash (404 after authentication)',
        sent: { path: `${sign}/`, json: { message }, node: false },
        status: 404,
      },
      {
        name: 'a trailing slash without a credential (401)',
        sent: { path: `${sign}/`, json: { message }, key: null, node: false },
        status: 401,
      },
      { name: 'a double slash', sent: { path: `${API}//sign`, json: { message }, node: false }, status: 404 },
      {
        name: 'GET on a data-plane path',
        sent: { method: 'GET', path: `${API}/encrypt`, node: false },
        status: 404,
      },

      {
        name: 'a # in the path parameter (Fastify ends the path there)',
        // Fastify's router reads the path up to the `#`: POST /api/v1/keys/<uuid>, no such route.
        // The node adapter should hand such a path to Fastify as it does a %-encoded one.
        sent: { path: `${API}/keys/${hmac}#/mac`, json: { data: message }, node: false },
        status: 404,
      },
      {
        name: 'a # after the path',
        sent: { path: `${mac}#fragment`, json: { data: message }, node: false },
        status: 200,
      },
      {
        name: 'an empty path parameter (handed to Fastify, whose router takes it)',
        sent: { path: `${API}/keys//mac`, json: { data: message }, node: false },
        status: 400,
      },
      {
        name: 'a dot-dot path parameter',
        sent: { path: `${API}/keys/../mac`, json: { data: message } },
        status: 400,
      },
      { name: 'a dot segment', sent: { path: `${API}/./sign`, json: { message }, node: false }, status: 404 },
      {
        name: 'a path parameter of 10,000 characters',
        sent: { path: `${API}/keys/${'a'.repeat(10_000)}/mac`, json: { data: message } },
        status: 400,
      },
      {
        name: 'an invalid path parameter and an invalid body: the parameter is reported',
        sent: { path: `${API}/keys/not-a-uuid/mac`, json: { data: 1, extra: true } },
        status: 400,
        check: (a) => assert.equal(a.json.fields[0].path, 'params/keyId'),
      },
      {
        name: 'an invalid body and an invalid header: the body is reported',
        sent: { path: `${API}/encrypt`, json: { plaintext: 1 }, headers: { 'x-key-id': 'nope' } },
        status: 400,
        check: (a) => assert.equal(a.json.fields[0].path, 'body/plaintext'),
      },
      {
        name: 'a valid JSON body and an invalid X-Key-Id header',
        sent: { path: `${API}/encrypt`, json: { plaintext: b64('x') }, headers: { 'x-key-id': 'nope' } },
        status: 400,
      },
      {
        name: 'no credential and an invalid path parameter (401 first)',
        sent: { path: `${API}/keys/not-a-uuid/mac`, json: { data: message }, key: null },
        status: 401,
      },
      {
        name: 'no credential and invalid JSON (401 first)',
        sent: { path: sign, raw: '{', headers: { 'content-type': 'application/json' }, key: null },
        status: 401,
      },
      {
        name: 'an empty query string',
        sent: { path: `${sign}?`, json: { keyId: ed, message } },
        status: 200,
      },
      {
        name: 'application/json;charset=UTF-8',
        sent: {
          path: sign,
          json: { keyId: ed, message },
          headers: { 'content-type': 'application/json;charset=UTF-8' },
        },
        status: 200,
      },
      {
        name: 'Expect: 100-continue',
        sent: { path: sign, json: { keyId: ed, message }, headers: { expect: '100-continue' } },
        status: 200,
      },
      {
        name: 'Content-Encoding: gzip is not decoded',
        sent: {
          path: sign,
          raw: gzipSync(JSON.stringify({ keyId: ed, message })),
          headers: { 'content-type': 'application/json', 'content-encoding': 'gzip' },
        },
        status: 400,
      },
      {
        name: 'decrypt JSON, an upper-case key id in the body',
        sent: {
          path: `${API}/decrypt`,
          json: { ...fx.envelope, keyId: enc.toUpperCase(), context: 'order=1' },
        },
        status: 200,
      },
      {
        name: 'an X-Request-Id of 128 characters is kept',
        sent: { path: mac, json: { data: message } },
        status: 200,
        requestId: (side) => `${side}-${'r'.repeat(126)}`,
      },
      {
        name: 'an X-Request-Id of 129 characters is replaced',
        sent: { path: mac, json: { data: message } },
        status: 200,
        requestId: (side) => `${side}-${'r'.repeat(127)}`,
      },

      // --- body limits --------------------------------------------------------------------------
      {
        name: 'a chunked body over the limit on a kept-alive connection (413)',
        sent: {
          path: sign,
          chunks: overLimit(limit + 65_536),
          headers: { 'content-type': 'application/json' },
        },
        status: 413,
        error: 'payload_too_large',
      },
      {
        name: 'a chunked body over the limit, no Content-Length (413)',
        sent: {
          path: sign,
          chunks: overLimit(limit + 65_536),
          headers: { 'content-type': 'application/json' },
          fresh: true,
        },
        status: 413,
        error: 'payload_too_large',
        check: (a) => assert.equal(a.json.limitBytes, limit),
      },
      {
        name: 'a chunked body over the limit without a credential (401)',
        sent: {
          path: mac,
          chunks: overLimit(limit + 65_536),
          headers: { 'content-type': 'application/json' },
          key: null,
          fresh: true,
        },
        status: 401,
      },
      {
        name: 'a Content-Length over the limit (413, handed to Fastify)',
        sent: {
          path: sign,
          raw: Buffer.alloc(limit + 1, 0x20),
          headers: { 'content-type': 'application/json' },
          fresh: true,
          node: false,
        },
        status: 413,
        error: 'payload_too_large',
        check: (a) => assert.equal(a.json.limitBytes, limit),
      },
      {
        name: 'a binary body over the binary limit (413 from the handler)',
        sent: {
          path: `${API}/encrypt`,
          raw: Buffer.alloc(MAX_PLAINTEXT_BYTES + 1, 7),
          headers: octet,
          fresh: true,
        },
        status: 413,
        error: 'payload_too_large',
        check: (a) => assert.equal(a.json.limitBytes, MAX_PLAINTEXT_BYTES),
      },

      // --- binary headers and binary bodies --------------------------------------------------
      {
        name: 'JSON encrypt with X-Key-Id (binary headers on a JSON body)',
        sent: { path: `${API}/encrypt`, json: { plaintext: b64('x') }, headers: { 'x-key-id': enc } },
        status: 400,
        error: 'validation_failed',
        check: (a) =>
          assert.deepEqual(a.json.fields, [
            { path: 'headers/x-key-id', message: 'is for binary bodies only' },
          ]),
      },
      {
        name: 'JSON decrypt with X-Key-Version and X-Encryption-Context',
        sent: {
          path: `${API}/decrypt`,
          json: { ...fx.envelope, context: 'order=1' },
          headers: { 'x-key-version': '1', 'x-encryption-context': b64('a') },
        },
        status: 400,
        error: 'validation_failed',
      },
      {
        name: 'JSON encrypt batch with X-Key-Id',
        sent: {
          path: `${API}/encrypt/batch`,
          json: { items: [{ plaintext: b64('x') }] },
          headers: { 'x-key-id': enc },
        },
        status: 400,
      },
      {
        name: 'binary decrypt, a non-decimal X-Key-Version',
        sent: { path: `${API}/decrypt`, raw: fx.compact, headers: { ...octet, 'x-key-version': '0x1' } },
        status: 400,
      },
      {
        name: 'binary encrypt, X-Encryption-Context not Base64',
        sent: {
          path: `${API}/encrypt`,
          raw: Buffer.from('x'),
          headers: { ...octet, 'x-encryption-context': '***' },
        },
        status: 400,
      },
      {
        name: 'binary encrypt, X-Key-Id not a UUID',
        sent: { path: `${API}/encrypt`, raw: Buffer.from('x'), headers: { ...octet, 'x-key-id': 'key-1' } },
        status: 400,
      },
      {
        name: 'binary decrypt batch with X-Key-Id',
        sent: {
          path: `${API}/decrypt/batch`,
          raw: binaryBatch([{ data: fx.compact }]),
          headers: { ...octet, 'x-key-id': enc },
        },
        status: 400,
      },
      {
        name: 'binary batch, malformed framing',
        sent: { path: `${API}/encrypt/batch`, raw: Buffer.from([0, 0, 0, 2, 0, 0]), headers: octet },
        status: 400,
      },
      {
        name: 'binary decrypt of garbage',
        sent: { path: `${API}/decrypt`, raw: randomBytes(64), headers: octet },
        status: 400,
      },

      // --- decryption failures -----------------------------------------------------------------
      {
        name: 'decrypt JSON, a tampered ciphertext',
        sent: { path: `${API}/decrypt`, json: tampered },
        status: 400,
        error: 'decryption_failed',
      },
      {
        name: 'decrypt JSON, the wrong context',
        sent: { path: `${API}/decrypt`, json: { ...fx.envelope, context: 'order=2' } },
        status: 400,
        error: 'decryption_failed',
      },
      {
        name: 'decrypt binary, a tampered envelope',
        sent: {
          path: `${API}/decrypt`,
          raw: tamperedCompact,
          headers: { ...octet, 'x-encryption-context': b64('ctx=bin') },
        },
        status: 400,
        error: 'decryption_failed',
      },
      {
        name: 'unwrap with the wrong context',
        sent: { path: `${API}/keys/${enc}/unwrap`, json: { ...fx.wrapped, context: 'wrap=2' } },
        status: 400,
        error: 'decryption_failed',
      },
    ]
  }

  test('every case answers alike through both adapters', async (t) => {
    const table = cases()
    t.diagnostic(`${table.length} cases, each sent to A (node adapter) and B (fastify adapter)`)
    for (const [index, c] of table.entries())
      await t.test(c.name, async () => void (await exchange(index, c)))
  })

  test('a small fuzz: mutated bodies answer alike, never a 5xx', async (t) => {
    t.diagnostic(`fuzz seed ${FUZZ_SEED} (CONTRACT_FUZZ_SEED), ${FUZZ_CASES} cases`)
    const rng = new Rng(FUZZ_SEED)
    const { enc, ed, ec, hmac, message } = fx
    const limitOf: Record<string, number> = {
      [`${API}/encrypt`]: ENCRYPT_JSON_BODY_LIMIT_BYTES,
      [`${API}/decrypt`]: DECRYPT_JSON_BODY_LIMIT_BYTES,
      [`${API}/encrypt/batch`]: CRYPTO_BODY_LIMIT_BYTES,
      [`${API}/decrypt/batch`]: DECRYPT_BATCH_BODY_LIMIT_BYTES,
    }
    const targets: Array<{ path: string; body: () => Json; volatile: boolean }> = [
      {
        path: `${API}/encrypt`,
        body: () => ({ keyId: enc, plaintext: b64('fuzz'), context: 'c=1' }),
        volatile: true,
      },
      {
        path: `${API}/decrypt`,
        body: () => ({ ...(fx.envelope as Record<string, Json>), context: 'order=1' }),
        volatile: false,
      },
      {
        path: `${API}/encrypt/batch`,
        body: () => ({
          items: [{ plaintext: b64('a') }, { keyId: enc, plaintext: b64('b'), context: 'x' }] as Json[],
        }),
        volatile: true,
      },
      {
        path: `${API}/decrypt/batch`,
        body: () => ({ items: [{ ...(fx.envelope as Record<string, Json>), context: 'order=1' }] }),
        volatile: false,
      },
      { path: `${API}/sign`, body: () => ({ keyId: ed, message }), volatile: false },
      { path: `${API}/sign`, body: () => ({ keyId: ec, message, signatureFormat: 'P1363' }), volatile: true },
      {
        path: `${API}/verify`,
        body: () => ({ keyId: ed, message, signature: fx.edSignature }),
        volatile: false,
      },
      { path: `${API}/keys/${hmac}/mac`, body: () => ({ data: message }), volatile: false },
      {
        path: `${API}/keys/${hmac}/mac/verify`,
        body: () => ({ data: message, mac: fx.mac }),
        volatile: false,
      },
      { path: `${API}/generate-data-key`, body: () => ({ keyId: enc }), volatile: true },
      {
        path: `${API}/keys/${enc}/data-key`,
        body: () => ({ keyBytes: 16, withPlaintext: true, context: 'k' }),
        volatile: true,
      },
      {
        path: `${API}/keys/${enc}/wrap`,
        body: () => ({ plaintext: b64(rng.bytes(32)), context: 'w' }),
        volatile: true,
      },
      {
        path: `${API}/keys/${enc}/unwrap`,
        body: () => ({ ...(fx.wrapped as Record<string, Json>), context: 'wrap=1' }),
        volatile: false,
      },
    ]
    const scalars: Json[] = [
      0,
      -1,
      1.5,
      1e308,
      2 ** 53 + 1,
      true,
      false,
      null,
      '',
      'x',
      [],
      {},
      [1, 2],
      { a: 1 },
    ]

    function mutateTree(root: Json): Json {
      const slots = slotsOf(root)
      const op = rng.int(9)
      if (slots.length === 0 || op === 0)
        return rng.pick(scalars.concat([nested(rng.int(200) + 2, rng.chance(0.5))]))
      const [parent, key] = rng.pick(slots)
      const set = (value: Json) => {
        ;(parent as Record<string | number, Json>)[key] = value
      }
      switch (op) {
        case 1:
          if (Array.isArray(parent)) parent.splice(key as number, 1)
          else delete parent[key as string]
          break
        case 2:
          set(structuredClone(rng.pick(scalars)))
          break
        case 3:
          set(rng.chance(0.5) ? 'A'.repeat(rng.int(900_000) + 1000) : b64(rng.bytes(rng.int(600_000) + 100)))
          break
        case 4:
          set(nested(rng.int(300) + 2, rng.chance(0.5)))
          break
        case 5:
          ;(parent as Record<string, Json>)[
            rng.pick(['extra', 'KEYID', 'keyid', 'ok', 'mode', 'x'.repeat(300)])
          ] = structuredClone(rng.pick(scalars))
          break
        case 6:
          set(rng.unicode(rng.int(40) + 1))
          break
        case 7: {
          const value = (parent as Record<string | number, Json>)[key]
          set(
            typeof value === 'string' && UUID.test(value)
              ? rng.chance(0.5)
                ? value.toUpperCase()
                : rng.uuid()
              : rng.uuid(),
          )
          break
        }
        default:
          set(rng.pick(['@@@@', 'YQ', ' YQ==', 'YQ==\n', '====', 'YQ=a', `${message}=`]))
      }
      return root
    }

    function mutateText(text: string): Buffer {
      switch (rng.int(8)) {
        case 0:
          return rng.bytes(rng.int(2000))
        case 1:
          return Buffer.from(text.slice(0, rng.int(text.length)))
        case 2:
          return Buffer.from(`{"__proto__":{"x":1},${text.slice(1)}`)
        case 3:
          return Buffer.from(`${text.slice(0, -1)},"message":1,"message":"${message}"}`)
        case 4:
          return Buffer.from(`  \n\t${text}\n  `)
        case 5:
          return Buffer.concat([
            Buffer.from(text.slice(0, 2)),
            Buffer.from([0xff, 0xfe, 0xc3]),
            Buffer.from(text.slice(2)),
          ])
        case 6:
          return Buffer.from(`${text}${text}`)
        default:
          return Buffer.from(`\ufeff${text}`)
      }
    }

    const plans = Array.from({ length: FUZZ_CASES }, (_, i) => {
      const target = rng.pick(targets)
      let body: Json = target.body()
      const mutations = rng.chance(0.6) ? 1 : rng.chance(0.75) ? 2 : 3
      for (let m = 0; m < mutations; m++) body = mutateTree(body)
      const text = JSON.stringify(body) ?? 'null'
      const raw = rng.chance(0.2) ? mutateText(text) : Buffer.from(text)
      const limit = limitOf[target.path] ?? A.config.bodyLimitBytes
      const sent: Sent = {
        path: target.path,
        raw,
        headers: { 'content-type': 'application/json' },
        node: raw.length <= limit,
        fresh: raw.length > limit,
      }
      return { i, sent, volatile: target.volatile }
    })

    const failures: string[] = []
    const statuses = new Map<string, number>()
    const strictOnly = new Map<string, { count: number; example: number }>()
    let next = 0
    const worker = async () => {
      while (next < plans.length) {
        const { i, sent, volatile } = plans[next++]!
        const [a, b] = await Promise.all([
          call(sideA, sent, `fuzz-${FUZZ_SEED}-${i}-a`),
          call(sideB, sent, `fuzz-${FUZZ_SEED}-${i}-b`),
        ])
        exchanges.push({ name: `fuzz case ${i}`, a: a.requestId, b: b.requestId })
        statuses.set(`${a.status}/${b.status}`, (statuses.get(`${a.status}/${b.status}`) ?? 0) + 1)
        const compare: Compare = volatile && a.status === 200 && b.status === 200 ? 'shape' : 'exact'
        // Status, contract headers and body here; the connection headers, header names and
        // exact JSON text are tallied apart (the case table asserts them).
        const [va, vb] = [view(a, compare, false), view(b, compare, false)]
        const problems: string[] = []
        if (a.status >= 500 || b.status >= 500) problems.push('a 5xx')
        try {
          assert.deepEqual(va, vb)
        } catch {
          problems.push('the answers differ')
        }
        if (problems.length === 0) {
          const [sa, sb] = [view(a, compare), view(b, compare)] as Array<Record<string, unknown>>
          const parts = ['connection', 'headerNames', 'text'].filter(
            (part) => JSON.stringify(sa![part]) !== JSON.stringify(sb![part]),
          )
          if (parts.length > 0) {
            const kind = `${parts.join('+')}: node ${JSON.stringify(hopByHop(a))} vs fastify ${JSON.stringify(hopByHop(b))} (${a.json?.error ?? a.status})`
            const seen = strictOnly.get(kind)
            strictOnly.set(kind, { count: (seen?.count ?? 0) + 1, example: seen?.example ?? i })
          }
        }
        if (problems.length > 0) {
          const line = `fuzz case ${i} (${problems.join(', ')})\n  request: ${describeSent(sent)}\n  node (A):    ${a.status} ${a.text.slice(0, 400)}\n  fastify (B): ${b.status} ${b.text.slice(0, 400)}`
          failures.push(line)
          differences.push(line)
        }
      }
    }
    await Promise.all(Array.from({ length: FUZZ_CONCURRENCY }, worker))
    t.diagnostic(
      `fuzz statuses (A/B: count): ${[...statuses]
        .sort()
        .map(([s, n]) => `${s}: ${n}`)
        .join(', ')}`,
    )
    for (const [kind, { count, example }] of strictOnly)
      t.diagnostic(`fuzz: ${count} answers alike but for ${kind}; e.g. case ${example}`)
    assert.deepEqual(failures, [], `${failures.length} of ${FUZZ_CASES} fuzz cases differ`)
  })

  test('the node adapter answered exactly the requests it takes, and none it hands to Fastify', async (t) => {
    assert.ok(baseline !== undefined, 'the baseline was read')
    const after = total(await scrape(sideA), 'kms_data_plane_requests_total', { adapter: 'node' })
    t.diagnostic(`node adapter: ${after - baseline} requests answered, ${expectedNodeTakes} expected`)
    assert.equal(after - baseline, expectedNodeTakes)
    const b = await scrape(sideB)
    assert.ok(!has(b, 'kms_data_plane_requests_total'), 'B: no kms_data_plane_requests_total series')
    assert.ok(has(b, 'kms_data_plane_info', { adapter: 'fastify' }))
  })

  test('the audit records are the same through both adapters', async (t) => {
    const ids = exchanges.flatMap((e) => [e.a, e.b])
    const rows = await A.sql<
      Array<{
        request_id: string
        tenant_id: string
        actor: string
        action: string
        resource: string | null
        key_version: number | null
        outcome: string
        client_ip: string | null
        details: unknown
      }>
    >`SELECT request_id, tenant_id, actor, action, resource, key_version, outcome, client_ip, details
      FROM audit_log WHERE request_id IN ${A.sql(ids)} ORDER BY id`
    const byRequest = new Map<string, unknown[]>()
    for (const { request_id, ...rest } of rows)
      byRequest.set(request_id, [...(byRequest.get(request_id) ?? []), rest])
    let compared = 0
    const mismatches: string[] = []
    for (const e of exchanges) {
      const [a, b] = [byRequest.get(e.a) ?? [], byRequest.get(e.b) ?? []]
      compared += a.length
      try {
        assert.deepEqual(a, b)
      } catch {
        mismatches.push(`${e.name}: node (A) ${JSON.stringify(a)} vs fastify (B) ${JSON.stringify(b)}`)
      }
    }
    t.diagnostic(`${compared} audit records of ${exchanges.length} exchanges compared`)
    differences.push(...mismatches.map((m) => `audit: ${m}`))
    assert.deepEqual(mismatches, [])

    const denied = byRequest.get(exchanges.find((e) => e.name === 'an API key with keys:read only (403)')!.a)
    assert.deepEqual(
      (denied as Array<Record<string, unknown>>).map((r) => [
        r['action'],
        r['resource'],
        r['outcome'],
        r['details'],
      ]),
      [
        [
          'authorization.denied',
          `POST ${API}/keys/:keyId/mac`,
          'denied',
          { requiredScope: 'encryption:write' },
        ],
      ],
    )
    const macRecords = byRequest.get(exchanges.find((e) => e.name === 'MAC HMAC-SHA256')!.b) as Array<
      Record<string, unknown>
    >
    assert.equal(macRecords.length, 1)
    assert.equal(macRecords[0]!['resource'], `key:${fx.hmac}`)
    assert.equal(macRecords[0]!['outcome'], 'success')
  })

  test('the metrics label sets of the data-plane routes are the same', async (t) => {
    const labelSets = (list: Sample[]) =>
      new Set(
        list
          .filter(
            (s) =>
              (s.name === 'kms_http_requests_total' || s.name === 'kms_http_errors_total') &&
              DATA_ROUTES.includes(s.labels['route'] ?? ''),
          )
          .map((s) => `${s.name}${JSON.stringify(Object.entries(s.labels).sort())}`),
      )
    const [a, b] = [labelSets(await scrape(sideA)), labelSets(await scrape(sideB))]
    const onlyA = [...a].filter((s) => !b.has(s)).sort()
    const onlyB = [...b].filter((s) => !a.has(s)).sort()
    t.diagnostic(`${a.size} label combinations on A, ${b.size} on B`)
    if (onlyA.length + onlyB.length > 0)
      differences.push(
        `metrics labels: only on node (A): ${onlyA.join(' ')}; only on fastify (B): ${onlyB.join(' ')}`,
      )
    assert.deepEqual({ onlyA, onlyB }, { onlyA: [], onlyB: [] })
  })

  test('report', (t) => {
    if (differences.length === 0) t.diagnostic('no difference between the adapters')
    for (const d of differences) t.diagnostic(`DIFFERENCE: ${d}`)
    for (const n of notes) t.diagnostic(`NOTE: ${n}`)
  })
})

test('KMS_DATA_PLANE: auto is the node adapter; anything else but node or fastify stops the start, naming why', () => {
  assert.equal(loadConfig({}).dataPlane, 'node')
  assert.equal(loadConfig({ KMS_DATA_PLANE: 'auto' }).dataPlane, 'node')
  assert.equal(loadConfig({ KMS_DATA_PLANE: 'fastify' }).dataPlane, 'fastify')
  assert.throws(
    () => loadConfig({ KMS_DATA_PLANE: 'uws' }),
    /must be one of: auto, node, fastify.*uWebSockets\.js/,
  )
  assert.throws(() => loadConfig({ KMS_DATA_PLANE: 'express' }), /KMS_DATA_PLANE must be one of/)
})
