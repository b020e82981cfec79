import assert from 'node:assert/strict'
import { createHash, randomBytes } from 'node:crypto'
import {
  createServer,
  type IncomingHttpHeaders,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from 'node:http'
import type { AddressInfo } from 'node:net'
import { after, afterEach, before, describe, test } from 'node:test'
import { inspect } from 'node:util'
import { ConfigError, loadConfig } from '../../src/config.ts'
import { createAqnClient } from '../../src/entropy/aqn-client.ts'
import { Credential } from '../../src/entropy/credential.ts'
import {
  createEntropyChain,
  type EntropyChain,
  type EntropyChainOptions,
  type EntropyLogger,
  type RemoteSourceStatus,
} from '../../src/entropy/entropy-chain.ts'
import type { EntropyClient } from '../../src/entropy/entropy-client.ts'
import { createEntropyChainFromConfig } from '../../src/entropy/entropy-from-config.ts'
import { createQryptClient } from '../../src/entropy/qrypt-client.ts'
import { createCsprngSource, type RandomSource } from '../../src/entropy/random-source.ts'
import { EntropyFetchFailure, EntropyRejection, EntropySourceError } from '../../src/entropy/source-errors.ts'
import { renderEntropyMetrics } from '../../src/health/metrics-routes.ts'
import {
  type HttpResult,
  startTestService,
  type TenantWithKey,
  type TestService,
  waitFor,
} from '../helpers/service.ts'

/**
 * The quantum entropy chain (docs/entropy.md): the ANU AQN and Qrypt EaaS clients against local
 * fake servers that speak both protocols exactly (reference entropy-sources.md §2.6) with fault
 * switches; the chain's pools, failover and mixing constructed directly with short intervals;
 * configuration; and the real service end to end over HTTP (encrypts never fail while the
 * sources go down, slow or corrupt; /health and /metrics follow the source in use).
 *
 * Timing is never asserted: everything waits by polling for the state it names.
 */

const AQN_KEY = 'aqn-test-key-0123456789'
const QRYPT_TOKEN = 'qrypt-test-token-abcdefghij'
const QRYPT_BLOCK = 1024

// ---------------------------------------------------------------------------------------------
// Fake QRNG servers

/** Fault switches; each fake ignores the ones its protocol has no equivalent for. */
type Fault =
  | 'none'
  | 'slow'
  | 'server_error'
  | 'quota'
  | 'redirect'
  | 'truncated'
  | 'short'
  | 'oversized'
  | 'huge_body'
  | 'wrong_type'
  | 'strings'
  | 'out_of_range'
  | 'length_mismatch'
  | 'invalid_json'
  | 'not_success'
  | 'all_zero'
  | 'constant'
  | 'repeated'
  | 'pattern'
  | 'size_mismatch'
  | 'invalid_base64'
  | 'noncanonical_base64'
  | 'block_size'
  | 'zero_block'

interface Reply {
  status: number
  body: string
  headers?: Record<string, string>
}

interface RecordedRequest {
  path: string
  query: URLSearchParams
  headers: IncomingHttpHeaders
}

/** What the fakes answer with 200 (and AQN with 400), as the tests read it back. */
interface AqnBody {
  type: string
  length: number | string
  size?: number
  data: (number | string)[]
  success: boolean
}
interface QryptBody {
  random: string[]
  size: number
}

const json = (status: number, body: unknown, headers?: Record<string, string>): Reply => ({
  status,
  body: JSON.stringify(body),
  ...(headers ? { headers } : {}),
})

/** A recognisable, non-constant, never-repeating byte stream: batch `n` starts where n-1 ended. */
function patternBytes(batch: number, length: number): Buffer {
  const out = Buffer.alloc(length)
  for (let i = 0; i < length; i++) out[i] = (batch * 131 + i * 29 + 7) & 0xff
  return out
}

abstract class FakeQrng {
  fault: Fault = 'none'
  /** Used by the `slow` fault: far beyond the client's timeout. */
  latencyMs = 3000
  readonly requests: RecordedRequest[] = []
  /** The bytes of every batch answered with 200 and valid content (what a client could use). */
  readonly served: Buffer[] = []
  /** Requests refused for credentials or parameters. */
  readonly refused: { status: number; path: string }[] = []
  redirectTargetHits = 0
  openRequests = 0
  protected lastBatch: Buffer | undefined
  protected patternBatch = 0
  private server: Server | undefined
  private port = 0
  private readonly timers = new Set<NodeJS.Timeout>()

  get url(): string {
    return `http://127.0.0.1:${this.port}`
  }

  async start(): Promise<this> {
    await this.listen(0)
    return this
  }

  /** Connection refused from now on (the port stays reserved for `up`). */
  async down(): Promise<void> {
    const server = this.server
    this.server = undefined
    if (!server) return
    for (const timer of this.timers) clearTimeout(timer)
    this.timers.clear()
    server.closeAllConnections()
    await new Promise<void>((resolve) => server.close(() => resolve()))
  }

  async up(): Promise<void> {
    if (!this.server) await this.listen(this.port)
  }

  close(): Promise<void> {
    return this.down()
  }

  bytesServed(): Buffer {
    return Buffer.concat(this.served)
  }

  private async listen(port: number): Promise<void> {
    const server = createServer((req, res) => this.handle(req, res))
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject)
      server.listen(port, '127.0.0.1', () => resolve())
    })
    this.port = (server.address() as AddressInfo).port
    this.server = server
  }

  private handle(req: IncomingMessage, res: ServerResponse): void {
    this.openRequests++
    res.once('close', () => {
      this.openRequests--
    })
    const url = new URL(req.url ?? '/', 'http://fake')
    this.requests.push({ path: url.pathname, query: url.searchParams, headers: req.headers })
    if (url.pathname === '/redirected') {
      this.redirectTargetHits++
      this.send(res, json(200, { message: 'a redirect was followed' }))
      return
    }
    const refusal = this.refuse(url, req.headers)
    if (refusal) {
      this.refused.push({ status: refusal.status, path: url.pathname })
      this.send(res, refusal)
      return
    }
    switch (this.fault) {
      case 'slow': {
        const timer = setTimeout(() => {
          this.timers.delete(timer)
          this.send(res, this.answer(url, 'none'))
        }, this.latencyMs)
        this.timers.add(timer)
        return
      }
      case 'server_error':
        this.send(res, json(503, { message: 'Service Unavailable' }))
        return
      case 'quota':
        this.send(res, json(429, { message: 'Too Many Requests' }))
        return
      case 'redirect':
        this.send(res, { status: 302, body: '', headers: { location: `${this.url}/redirected` } })
        return
      case 'invalid_json':
        this.send(res, { status: 200, body: 'this is { not json' })
        return
      case 'truncated': {
        const whole = this.answer(url, 'none').body
        this.send(res, { status: 200, body: whole.slice(0, Math.floor(whole.length / 2)) })
        return
      }
      case 'huge_body': {
        // Chunked (no content-length): the client must stop reading at its cap.
        res.writeHead(200, { 'content-type': 'application/json' })
        const filler = ' '.repeat(64 * 1024)
        res.write('{"padding":"')
        for (let i = 0; i < 64; i++) res.write(filler)
        res.end('"}')
        return
      }
      default:
        this.send(res, this.answer(url, this.fault))
    }
  }

  private send(res: ServerResponse, reply: Reply): void {
    if (res.destroyed) return
    res.writeHead(reply.status, { 'content-type': 'application/json', ...reply.headers })
    res.end(reply.body)
  }

  /** Credentials and parameters, checked as the real service does; undefined if acceptable. */
  protected abstract refuse(url: URL, headers: IncomingHttpHeaders): Reply | undefined
  /** A 200 answer, spoiled by `fault`. */
  protected abstract answer(url: URL, fault: Fault): Reply

  /** The batch for a 200 answer; recorded as served only if the fault leaves it valid. */
  protected batch(length: number, fault: Fault): Buffer {
    let bytes: Buffer
    if (fault === 'all_zero') bytes = Buffer.alloc(length)
    else if (fault === 'constant') bytes = Buffer.alloc(length, 0xab)
    else if (fault === 'repeated' && this.lastBatch?.length === length) bytes = Buffer.from(this.lastBatch)
    else if (fault === 'pattern') bytes = patternBytes(this.patternBatch++, length)
    else bytes = randomBytes(length)
    this.lastBatch = Buffer.from(bytes)
    if (fault === 'none' || fault === 'pattern') this.served.push(Buffer.from(bytes))
    return bytes
  }
}

const integerParam = (value: string | null) =>
  value !== null && /^\d{1,6}$/.test(value) ? Number(value) : undefined

/** ANU Quantum Numbers: `GET /?length=N&type=T[&size=S]` with `x-api-key`. */
class FakeAqn extends FakeQrng {
  /** Real responses sometimes carry `length` as a string. */
  lengthAsString = false

  protected refuse(url: URL, headers: IncomingHttpHeaders): Reply | undefined {
    if (url.pathname !== '/') return json(404, { message: 'Not Found' })
    if (headers['x-api-key'] !== AQN_KEY) return json(403, { message: 'Forbidden' })
    const length = integerParam(url.searchParams.get('length'))
    const type = url.searchParams.get('type') ?? ''
    if (length === undefined || length < 1 || length > 1024) {
      return json(400, { success: false, message: 'length must be an integer between 1 and 1024' })
    }
    if (!['uint8', 'uint16', 'hex8', 'hex16'].includes(type)) {
      return json(400, { success: false, message: 'type must be uint8, uint16, hex8 or hex16' })
    }
    if (type.startsWith('hex')) {
      const size = integerParam(url.searchParams.get('size'))
      if (size === undefined || size < 1 || size > 10) {
        return json(400, { success: false, message: 'size must be an integer between 1 and 10' })
      }
    }
    return undefined
  }

  protected answer(url: URL, fault: Fault): Reply {
    const length = Number(url.searchParams.get('length'))
    const type = url.searchParams.get('type')!
    const size = Number(url.searchParams.get('size') ?? '1')
    let data: unknown[]
    if (type === 'uint8') {
      data = [...this.batch(length, fault)]
    } else if (type === 'uint16') {
      const bytes = randomBytes(length * 2)
      data = Array.from({ length }, (_, i) => bytes.readUInt16BE(i * 2))
    } else {
      const perItem = type === 'hex8' ? size : size * 2
      data = Array.from({ length }, () => randomBytes(perItem).toString('hex'))
    }
    const body: Record<string, unknown> = {
      type,
      length: this.lengthAsString ? String(length) : length,
      ...(type.startsWith('hex') ? { size } : {}),
      data,
      success: true,
    }
    if (fault === 'short') data.pop()
    if (fault === 'oversized') data.push(7)
    if (fault === 'wrong_type') body['type'] = 'uint16'
    if (fault === 'strings') body['data'] = data.map(String)
    if (fault === 'out_of_range') data[0] = 256
    if (fault === 'length_mismatch') body['length'] = length + 1
    if (fault === 'not_success') body['success'] = false
    return json(200, body)
  }
}

/** Qrypt EaaS: `GET /api/v1/quantum-entropy?size=K` with `Authorization: Bearer`. */
class FakeQrypt extends FakeQrng {
  protected refuse(url: URL, headers: IncomingHttpHeaders): Reply | undefined {
    if (url.pathname !== '/api/v1/quantum-entropy') return json(404, { error: 'not_found' })
    if (headers.authorization !== `Bearer ${QRYPT_TOKEN}`) return json(401, { error: 'unauthorized' })
    const raw = url.searchParams.get('size')
    const size = raw === null ? 1 : integerParam(raw)
    if (size === undefined || size < 1 || size > 512) {
      return json(400, { error: 'size must be an integer between 1 and 512' })
    }
    return undefined
  }

  protected answer(url: URL, fault: Fault): Reply {
    const raw = url.searchParams.get('size')
    const size = raw === null ? 1 : Number(raw)
    const blockBytes = fault === 'block_size' ? QRYPT_BLOCK - 1 : QRYPT_BLOCK
    const bytes = this.batch(size * blockBytes, fault)
    const random: unknown[] = []
    for (let i = 0; i < size; i++) {
      random.push(bytes.subarray(i * blockBytes, (i + 1) * blockBytes).toString('base64'))
    }
    const body: Record<string, unknown> = { random, size }
    if (fault === 'short') random.pop()
    if (fault === 'oversized') random.push(randomBytes(QRYPT_BLOCK).toString('base64'))
    if (fault === 'size_mismatch') body['size'] = size + 1
    if (fault === 'zero_block') random[0] = Buffer.alloc(QRYPT_BLOCK).toString('base64')
    // base64url characters are not standard Base64.
    if (fault === 'invalid_base64') random[0] = `-_${(random[0] as string).slice(2)}`
    if (fault === 'noncanonical_base64') {
      // 1024 bytes end in "X==": the last character carries 4 padding bits that must be zero.
      const text = random[0] as string
      const last = text.charAt(text.length - 3)
      const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/'
      const flipped = alphabet[alphabet.indexOf(last) ^ 1]!
      random[0] = `${text.slice(0, -3)}${flipped}==`
    }
    if (fault === 'wrong_type') body['random'] = (random[0] as string) ?? ''
    if (fault === 'strings') body['random'] = random.map(() => 42)
    return json(200, body)
  }
}

// ---------------------------------------------------------------------------------------------
// Helpers

function captureLogger(): { logger: EntropyLogger; lines: string[] } {
  const lines: string[] = []
  const log = (level: string) => (fields: object, message: string) => {
    lines.push(JSON.stringify({ level, ...fields, message }))
  }
  return { lines, logger: { info: log('info'), warn: log('warn'), debug: log('debug') } }
}

const aqnClient = (fake: FakeQrng, credential = AQN_KEY, timeoutMs = 500) =>
  createAqnClient({ url: fake.url, credential: new Credential(credential), timeoutMs })

const qryptClient = (fake: FakeQrng, credential = QRYPT_TOKEN, timeoutMs = 500) =>
  createQryptClient({ url: fake.url, credential: new Credential(credential), timeoutMs })

async function fetchError(client: EntropyClient, bytes: number): Promise<EntropySourceError> {
  try {
    const got = await client.fetch(bytes, new AbortController().signal)
    assert.fail(`expected a failure, got ${got.length} bytes`)
  } catch (error) {
    assert.ok(error instanceof EntropySourceError, `a typed error, got ${String(error)}`)
    return error
  }
}

const fastChain = (options: Partial<EntropyChainOptions>): EntropyChain =>
  createEntropyChain({
    logger: captureLogger().logger,
    poolBytes: 2048,
    refillIntervalMs: 10,
    retryMs: 20,
    retryMaxMs: 100,
    ...options,
  })

const remote = (chain: EntropyChain, name: 'qrng-primary' | 'qrng-secondary'): RemoteSourceStatus => {
  const found = chain.status().sources.find((s) => s.name === name)
  assert.ok(found, `${name} is configured`)
  return found
}

/** Served by `name`: one request is drawn and the counters say which source mixed into it. */
function servesFrom(chain: EntropyChain, name: 'qrng-primary' | 'qrng-secondary' | 'system-csprng'): boolean {
  const before = chain.status()
  const out = chain.bytes(12)
  const after = chain.status()
  assert.equal(out.length, 12)
  if (name === 'system-csprng') return after.csprngBytesServed === before.csprngBytesServed + 12
  const b = before.sources.find((s) => s.name === name)!
  const a = after.sources.find((s) => s.name === name)!
  return a.bytesServed === b.bytesServed + 12
}

/** Simulated traffic, so pools drain and refills (and thus failures) happen. */
const drain = (chain: EntropyChain, bytes = 256) => chain.bytes(bytes)

/** Is `needle` anywhere inside `haystack`? */
const contains = (haystack: Buffer, needle: Buffer) => haystack.indexOf(needle) !== -1

// ---------------------------------------------------------------------------------------------
// Configuration

describe('entropy configuration', () => {
  const base = {
    KMS_ENTROPY_PRIMARY_URL: 'https://api.quantumnumbers.anu.edu.au',
    KMS_ENTROPY_PRIMARY_PROTOCOL: 'anu-aqn',
    KMS_ENTROPY_PRIMARY_CREDENTIAL: 'secret-aqn-key',
  }

  test('nothing configured: no remote source, and the chain is the system CSPRNG alone', () => {
    const config = loadConfig({})
    assert.equal(config.entropy.primary, undefined)
    assert.equal(config.entropy.secondary, undefined)
    const chain = createEntropyChainFromConfig(config.entropy, captureLogger().logger)
    try {
      assert.equal(chain.source(), 'system-csprng')
      assert.deepEqual(chain.status().sources, [])
      const a = chain.bytes(12)
      const b = chain.bytes(12)
      assert.equal(a.length, 12)
      assert.notDeepEqual(a, b)
      assert.equal(chain.status().csprngBytesServed, 24)
    } finally {
      chain.close()
    }
  })

  test('both sources with their protocols, credentials and tuning are read', () => {
    const config = loadConfig({
      ...base,
      KMS_ENTROPY_SECONDARY_URL: 'https://api-eus.qrypt.com/',
      KMS_ENTROPY_SECONDARY_PROTOCOL: 'qrypt',
      KMS_ENTROPY_SECONDARY_CREDENTIAL: 'secret-qrypt-token',
      KMS_ENTROPY_TIMEOUT_MS: '1500',
      KMS_ENTROPY_POOL_BYTES: '65536',
      KMS_ENTROPY_REFILL_INTERVAL_MS: '200',
      KMS_ENTROPY_RETRY_MS: '1000',
      KMS_ENTROPY_RETRY_MAX_MS: '30000',
    })
    const { primary, secondary } = config.entropy
    assert.equal(primary?.protocol, 'anu-aqn')
    assert.equal(primary?.url, 'https://api.quantumnumbers.anu.edu.au/')
    assert.equal(primary?.credential.reveal(), 'secret-aqn-key')
    assert.equal(secondary?.protocol, 'qrypt')
    assert.equal(secondary?.credential.reveal(), 'secret-qrypt-token')
    assert.equal(config.entropy.timeoutMs, 1500)
    assert.equal(config.entropy.poolBytes, 65536)
    assert.equal(config.entropy.refillIntervalMs, 200)
    assert.equal(config.entropy.retryMs, 1000)
    assert.equal(config.entropy.retryMaxMs, 30000)
  })

  test('defaults: 2 s timeout, 32 KiB pools', () => {
    const config = loadConfig(base)
    assert.equal(config.entropy.timeoutMs, 2000)
    assert.equal(config.entropy.poolBytes, 32 * 1024)
  })

  test('credentials never show in JSON, string conversion or util.inspect of the config', () => {
    const config = loadConfig(base)
    assert.ok(!JSON.stringify(config).includes('secret-aqn-key'))
    assert.ok(!inspect(config, { depth: 10 }).includes('secret-aqn-key'))
    assert.ok(!`${config.entropy.primary?.credential}`.includes('secret-aqn-key'))
  })

  const invalid: [string, Record<string, string>, RegExp][] = [
    [
      'a non-http scheme',
      { ...base, KMS_ENTROPY_PRIMARY_URL: 'ftp://qrng.example' },
      /http:\/\/ or https:\/\//,
    ],
    ['a relative URL', { ...base, KMS_ENTROPY_PRIMARY_URL: 'qrng.example/x' }, /absolute http/],
    [
      'a URL carrying a password',
      { ...base, KMS_ENTROPY_PRIMARY_URL: 'https://user:pw@qrng.example' },
      /must not contain a user or password/,
    ],
    [
      'a URL with a query',
      { ...base, KMS_ENTROPY_PRIMARY_URL: 'https://qrng.example/?x=1' },
      /query or fragment/,
    ],
    ['an unknown protocol', { ...base, KMS_ENTROPY_PRIMARY_PROTOCOL: 'nist-beacon' }, /anu-aqn, qrypt/],
    [
      'a missing protocol',
      { KMS_ENTROPY_PRIMARY_URL: base.KMS_ENTROPY_PRIMARY_URL, KMS_ENTROPY_PRIMARY_CREDENTIAL: 'k' },
      /KMS_ENTROPY_PRIMARY_PROTOCOL must be one of/,
    ],
    [
      'a missing credential',
      { KMS_ENTROPY_PRIMARY_URL: base.KMS_ENTROPY_PRIMARY_URL, KMS_ENTROPY_PRIMARY_PROTOCOL: 'qrypt' },
      /KMS_ENTROPY_PRIMARY_CREDENTIAL is required/,
    ],
    [
      'a credential with a newline',
      { ...base, KMS_ENTROPY_PRIMARY_CREDENTIAL: 'abc\ninjected: 1' },
      /printable ASCII/,
    ],
    ['a credential without a URL', { KMS_ENTROPY_PRIMARY_CREDENTIAL: 'k' }, /need KMS_ENTROPY_PRIMARY_URL/],
    [
      'a secondary without a primary',
      {
        KMS_ENTROPY_SECONDARY_URL: 'https://q.example',
        KMS_ENTROPY_SECONDARY_PROTOCOL: 'qrypt',
        KMS_ENTROPY_SECONDARY_CREDENTIAL: 't',
      },
      /SECONDARY_URL is set but KMS_ENTROPY_PRIMARY_URL is not/,
    ],
    ['a timeout out of range', { ...base, KMS_ENTROPY_TIMEOUT_MS: '0' }, /KMS_ENTROPY_TIMEOUT_MS must be/],
    [
      'a pool below two Qrypt blocks',
      { ...base, KMS_ENTROPY_POOL_BYTES: '1024' },
      /KMS_ENTROPY_POOL_BYTES must be/,
    ],
    [
      'a retry ceiling below the retry',
      { ...base, KMS_ENTROPY_RETRY_MS: '5000', KMS_ENTROPY_RETRY_MAX_MS: '1000' },
      /KMS_ENTROPY_RETRY_MAX_MS \(1000\) must be at least/,
    ],
  ]
  for (const [what, env, message] of invalid) {
    test(`refused with a ConfigError: ${what}`, () => {
      assert.throws(
        () => loadConfig(env),
        (error: unknown) => {
          assert.ok(error instanceof ConfigError)
          assert.match(error.message, message)
          assert.ok(!error.message.includes('secret-aqn-key'), 'the credential is not echoed')
          assert.ok(!error.message.includes('pw@'), 'the URL is not echoed')
          return true
        },
      )
    })
  }
})

// ---------------------------------------------------------------------------------------------
// Fake servers follow the protocols (so that the client tests below mean something)

describe('fake QRNG servers speak the documented protocols', () => {
  let aqn: FakeAqn
  let qrypt: FakeQrypt
  before(async () => {
    aqn = await new FakeAqn().start()
    qrypt = await new FakeQrypt().start()
  })
  after(async () => {
    await aqn.close()
    await qrypt.close()
  })

  test('AQN: 403 {"message":"Forbidden"} without or with a wrong x-api-key', async () => {
    for (const headers of [{}, { 'x-api-key': 'wrong' }]) {
      const res = await fetch(`${aqn.url}/?length=4&type=uint8`, { headers })
      assert.equal(res.status, 403)
      assert.deepEqual(await res.json(), { message: 'Forbidden' })
    }
  })

  test('AQN: 400 for length outside 1-1024, an unknown type, or a hex type without size 1-10', async () => {
    for (const query of [
      'length=0&type=uint8',
      'length=1025&type=uint8',
      'length=x&type=uint8',
      'type=uint8',
      'length=4&type=int8',
      'length=4&type=hex16',
      'length=4&type=hex16&size=11',
    ]) {
      const res = await fetch(`${aqn.url}/?${query}`, { headers: { 'x-api-key': AQN_KEY } })
      assert.equal(res.status, 400, query)
      assert.equal(((await res.json()) as AqnBody).success, false, query)
    }
  })

  test('AQN: 200 {type, length, data, success} for each type', async () => {
    const get = async (query: string) => {
      const res = await fetch(`${aqn.url}/?${query}`, { headers: { 'x-api-key': AQN_KEY } })
      assert.equal(res.status, 200)
      return (await res.json()) as AqnBody
    }
    const u8 = await get('length=5&type=uint8')
    assert.deepEqual(Object.keys(u8), ['type', 'length', 'data', 'success'])
    assert.equal(u8.length, 5)
    assert.ok(u8.data.every((v) => Number.isInteger(v) && Number(v) >= 0 && Number(v) <= 255))
    const u16 = await get('length=3&type=uint16')
    assert.ok(u16.data.every((v) => Number.isInteger(v) && Number(v) >= 0 && Number(v) <= 65535))
    const h8 = await get('length=2&type=hex8&size=3')
    assert.equal(h8.size, 3)
    assert.ok(h8.data.every((v) => typeof v === 'string' && /^[0-9a-f]{6}$/.test(v)))
    const h16 = await get('length=2&type=hex16&size=2')
    assert.ok(h16.data.every((v) => typeof v === 'string' && /^[0-9a-f]{8}$/.test(v)))
  })

  test('Qrypt: 401 without the bearer token, 400 for size outside 1-512', async () => {
    for (const headers of [{}, { authorization: 'Bearer wrong' }, { authorization: QRYPT_TOKEN }]) {
      const res = await fetch(`${qrypt.url}/api/v1/quantum-entropy?size=1`, { headers })
      assert.equal(res.status, 401)
    }
    for (const size of ['0', '513', 'x']) {
      const res = await fetch(`${qrypt.url}/api/v1/quantum-entropy?size=${size}`, {
        headers: { authorization: `Bearer ${QRYPT_TOKEN}` },
      })
      assert.equal(res.status, 400, size)
    }
  })

  test('Qrypt: 200 {random: [base64 of 1024 bytes] x size, size}; size defaults to 1', async () => {
    const get = async (query: string) => {
      const res = await fetch(`${qrypt.url}/api/v1/quantum-entropy${query}`, {
        headers: { authorization: `Bearer ${QRYPT_TOKEN}`, accept: 'application/json' },
      })
      assert.equal(res.status, 200)
      return (await res.json()) as QryptBody
    }
    const three = await get('?size=3')
    assert.equal(three.size, 3)
    assert.equal(three.random.length, 3)
    for (const text of three.random) assert.equal(Buffer.from(text, 'base64').length, QRYPT_BLOCK)
    assert.equal((await get('')).random.length, 1)
  })
})

// ---------------------------------------------------------------------------------------------
// Clients

describe('AQN client', () => {
  let aqn: FakeAqn
  before(async () => {
    aqn = await new FakeAqn().start()
  })
  after(async () => aqn.close())
  afterEach(() => {
    aqn.fault = 'none'
    aqn.lengthAsString = false
  })

  test('asks GET /?length=N&type=uint8 with x-api-key and returns exactly the bytes served', async () => {
    const before = aqn.requests.length
    const got = await aqnClient(aqn).fetch(1024, new AbortController().signal)
    const request = aqn.requests[before]!
    assert.equal(request.path, '/')
    assert.equal(request.query.get('length'), '1024')
    assert.equal(request.query.get('type'), 'uint8')
    assert.equal(request.headers['x-api-key'], AQN_KEY)
    assert.match(request.headers.accept ?? '', /application\/json/)
    assert.deepEqual(got, aqn.served.at(-1))
  })

  test('a base URL with a path prefix keeps it', async () => {
    const client = createAqnClient({
      url: `${aqn.url}/prefix/`,
      credential: new Credential(AQN_KEY),
      timeoutMs: 500,
    })
    const error = await fetchError(client, 16)
    assert.equal(aqn.requests.at(-1)!.path, '/prefix/')
    // The fake only serves "/": the prefix reached it, and a 404 is a failure.
    assert.equal(error.reason, 'http_status')
  })

  test('`length` sent as a string (seen in real responses) is accepted', async () => {
    aqn.lengthAsString = true
    const got = await aqnClient(aqn).fetch(64, new AbortController().signal)
    assert.deepEqual(got, aqn.served.at(-1))
  })

  test('a wrong or missing key is a failure (unauthorized) that carries no credential', async () => {
    const error = await fetchError(aqnClient(aqn, 'not-the-key'), 32)
    assert.ok(error instanceof EntropyFetchFailure)
    assert.equal(error.reason, 'unauthorized')
    assert.ok(!error.message.includes('not-the-key'))
    assert.ok(!error.message.includes(aqn.url))
  })

  test('never asks for more than 1024 values: larger batches are refused before any request', async () => {
    const before = aqn.requests.length
    await assert.rejects(aqnClient(aqn).fetch(1025, new AbortController().signal), RangeError)
    assert.equal(aqn.requests.length, before)
  })

  const rejections: [Fault, string][] = [
    ['short', 'short'],
    ['oversized', 'oversized'],
    ['huge_body', 'oversized'],
    ['truncated', 'invalid_json'],
    ['invalid_json', 'invalid_json'],
    ['not_success', 'not_success'],
    ['wrong_type', 'wrong_type'],
    ['strings', 'invalid_data'],
    ['out_of_range', 'invalid_data'],
    ['length_mismatch', 'length_mismatch'],
    ['all_zero', 'all_zero'],
    ['constant', 'constant'],
  ]
  for (const [fault, reason] of rejections) {
    test(`rejects a ${fault} response (${reason})`, async () => {
      aqn.fault = fault
      const error = await fetchError(aqnClient(aqn), 512)
      assert.ok(error instanceof EntropyRejection, `${error.kind} ${error.reason}`)
      assert.equal(error.reason, reason)
    })
  }

  test('rejects a batch identical to the previous one from the same source', async () => {
    const client = aqnClient(aqn)
    await client.fetch(256, new AbortController().signal)
    aqn.fault = 'repeated'
    const error = await fetchError(client, 256)
    assert.equal(error.reason, 'repeated')
    // Still the same batch: still refused (the refused batch does not become "previous").
    assert.equal((await fetchError(client, 256)).reason, 'repeated')
    aqn.fault = 'none'
    assert.equal((await client.fetch(256, new AbortController().signal)).length, 256)
  })

  const failures: [Fault, string][] = [
    ['server_error', 'server_error'],
    ['quota', 'rate_limited'],
    ['slow', 'timeout'],
  ]
  for (const [fault, reason] of failures) {
    test(`a ${fault} answer is a failure (${reason})`, async () => {
      aqn.fault = fault
      const error = await fetchError(aqnClient(aqn, AQN_KEY, 100), 128)
      assert.ok(error instanceof EntropyFetchFailure)
      assert.equal(error.reason, reason)
    })
  }

  test('a redirect is a failure and is not followed', async () => {
    aqn.fault = 'redirect'
    const hits = aqn.redirectTargetHits
    const error = await fetchError(aqnClient(aqn), 128)
    assert.equal(error.reason, 'redirect')
    assert.equal(aqn.redirectTargetHits, hits)
  })

  test('connection refused is a failure (network)', async () => {
    const gone = await new FakeAqn().start()
    const client = aqnClient(gone)
    await gone.close()
    const error = await fetchError(client, 128)
    assert.ok(error instanceof EntropyFetchFailure)
    assert.equal(error.reason, 'network')
  })
})

describe('Qrypt client', () => {
  let qrypt: FakeQrypt
  before(async () => {
    qrypt = await new FakeQrypt().start()
  })
  after(async () => qrypt.close())
  afterEach(() => {
    qrypt.fault = 'none'
  })

  test('asks GET /api/v1/quantum-entropy?size=K with the bearer token and Accept: application/json', async () => {
    const before = qrypt.requests.length
    const got = await qryptClient(qrypt).fetch(3 * QRYPT_BLOCK, new AbortController().signal)
    const request = qrypt.requests[before]!
    assert.equal(request.path, '/api/v1/quantum-entropy')
    assert.equal(request.query.get('size'), '3')
    assert.equal(request.headers.authorization, `Bearer ${QRYPT_TOKEN}`)
    assert.match(request.headers.accept ?? '', /application\/json/)
    assert.deepEqual(got, qrypt.served.at(-1))
  })

  test('a missing or wrong token is a failure (unauthorized)', async () => {
    const error = await fetchError(qryptClient(qrypt, 'wrong-token'), QRYPT_BLOCK)
    assert.equal(error.reason, 'unauthorized')
    assert.ok(!error.message.includes('wrong-token'))
  })

  test('only whole 1 KiB blocks are asked for', async () => {
    const before = qrypt.requests.length
    await assert.rejects(qryptClient(qrypt).fetch(1000, new AbortController().signal), RangeError)
    assert.equal(qrypt.requests.length, before)
  })

  const rejections: [Fault, string][] = [
    ['short', 'short'],
    ['oversized', 'oversized'],
    ['huge_body', 'oversized'],
    ['truncated', 'invalid_json'],
    ['invalid_json', 'invalid_json'],
    ['size_mismatch', 'size_mismatch'],
    ['invalid_base64', 'invalid_base64'],
    ['noncanonical_base64', 'invalid_base64'],
    ['block_size', 'block_size'],
    ['wrong_type', 'invalid_data'],
    ['strings', 'invalid_data'],
    ['all_zero', 'all_zero'],
    ['constant', 'constant'],
  ]
  for (const [fault, reason] of rejections) {
    test(`rejects a ${fault} response (${reason})`, async () => {
      qrypt.fault = fault
      const error = await fetchError(qryptClient(qrypt), 2 * QRYPT_BLOCK)
      assert.ok(error instanceof EntropyRejection, `${error.kind} ${error.reason}`)
      assert.equal(error.reason, reason)
    })
  }

  test('one all-zero block among good ones is rejected (checked per KiB, not only per batch)', async () => {
    qrypt.fault = 'zero_block'
    const error = await fetchError(qryptClient(qrypt), 3 * QRYPT_BLOCK)
    assert.equal(error.reason, 'all_zero')
  })

  test('rejects a batch identical to the previous one', async () => {
    const client = qryptClient(qrypt)
    await client.fetch(QRYPT_BLOCK, new AbortController().signal)
    qrypt.fault = 'repeated'
    assert.equal((await fetchError(client, QRYPT_BLOCK)).reason, 'repeated')
  })

  test('5xx, a timeout and a redirect are failures', async () => {
    for (const [fault, reason] of [
      ['server_error', 'server_error'],
      ['slow', 'timeout'],
      ['redirect', 'redirect'],
    ] as const) {
      qrypt.fault = fault
      const error = await fetchError(qryptClient(qrypt, QRYPT_TOKEN, 100), QRYPT_BLOCK)
      assert.ok(error instanceof EntropyFetchFailure)
      assert.equal(error.reason, reason)
    }
    assert.equal(qrypt.redirectTargetHits, 0)
  })
})

// ---------------------------------------------------------------------------------------------
// The chain, constructed directly

describe('entropy chain', () => {
  let aqn: FakeAqn
  let qrypt: FakeQrypt
  const chains: EntropyChain[] = []
  const chain = (options: Partial<EntropyChainOptions> = {}) => {
    const made = fastChain(options)
    chains.push(made)
    return made
  }

  before(async () => {
    aqn = await new FakeAqn().start()
    qrypt = await new FakeQrypt().start()
  })
  after(async () => {
    await aqn.close()
    await qrypt.close()
  })
  afterEach(async () => {
    for (const c of chains.splice(0)) c.close()
    aqn.fault = 'none'
    qrypt.fault = 'none'
    await aqn.up()
    await qrypt.up()
  })

  test('with no source it is the pooled CSPRNG: right lengths, distinct outputs, source system-csprng', () => {
    const c = chain()
    assert.equal(c.source(), 'system-csprng')
    const seen = new Set<string>()
    for (const n of [0, 1, 12, 16, 24, 32, 5000]) assert.equal(c.bytes(n).length, n)
    for (let i = 0; i < 1000; i++) seen.add(c.bytes(12).toString('hex'))
    assert.equal(seen.size, 1000)
    assert.throws(() => c.bytes(-1), RangeError)
    assert.throws(() => c.bytes(1.5), RangeError)
  })

  test('primary preferred; primary down → secondary; both down → CSPRNG; primary back → primary', async () => {
    const c = chain({ primary: aqnClient(aqn), secondary: qryptClient(qrypt) })
    await waitFor(
      () => remote(c, 'qrng-primary').state === 'up' && remote(c, 'qrng-secondary').state === 'up',
      'both sources up',
    )
    await waitFor(() => c.source() === 'qrng-primary' && servesFrom(c, 'qrng-primary'), 'primary serving')

    await aqn.down()
    await waitFor(() => {
      drain(c)
      return remote(c, 'qrng-primary').state === 'down' && servesFrom(c, 'qrng-secondary')
    }, 'secondary serving while the primary is down')
    assert.equal(c.source(), 'qrng-secondary')
    assert.ok(remote(c, 'qrng-primary').fetchFailures.network >= 1)
    assert.equal(remote(c, 'qrng-primary').poolBytes, 0, 'a source marked down keeps no bytes')

    await qrypt.down()
    await waitFor(() => {
      drain(c)
      return remote(c, 'qrng-secondary').state === 'down' && servesFrom(c, 'system-csprng')
    }, 'the CSPRNG serving while both are down')
    assert.equal(c.source(), 'system-csprng')

    const attempts = aqn.requests.length
    await aqn.up()
    await waitFor(
      () => c.source() === 'qrng-primary' && servesFrom(c, 'qrng-primary'),
      'primary serving again',
    )
    assert.ok(aqn.requests.length > attempts, 'the down primary was retried in the background')

    await qrypt.up()
    await waitFor(() => remote(c, 'qrng-secondary').state === 'up', 'secondary back up')
    assert.ok(servesFrom(c, 'qrng-primary'), 'with both up the primary serves')
  })

  const corruptions: [Fault, string][] = [
    ['short', 'short'],
    ['oversized', 'oversized'],
    ['huge_body', 'oversized'],
    ['strings', 'invalid_data'],
    ['wrong_type', 'wrong_type'],
    ['not_success', 'not_success'],
    ['invalid_json', 'invalid_json'],
    ['all_zero', 'all_zero'],
    ['repeated', 'repeated'],
  ]
  for (const [fault, reason] of corruptions) {
    test(`a primary answering ${fault} is counted (${reason}), marked down and failed over; it recovers`, async () => {
      const c = chain({ primary: aqnClient(aqn), secondary: qryptClient(qrypt) })
      await waitFor(() => servesFrom(c, 'qrng-primary'), 'primary serving')
      aqn.fault = fault
      await waitFor(() => {
        drain(c)
        return remote(c, 'qrng-primary').state === 'down' && servesFrom(c, 'qrng-secondary')
      }, `the primary marked down for ${fault}`)
      const status = remote(c, 'qrng-primary')
      assert.ok(status.rejections[reason as keyof typeof status.rejections] >= 1, JSON.stringify(status))
      assert.equal(status.lastError, reason)
      aqn.fault = 'none'
      await waitFor(() => servesFrom(c, 'qrng-primary'), 'primary serving again')
    })
  }

  for (const [fault, reason] of [
    ['invalid_base64', 'invalid_base64'],
    ['block_size', 'block_size'],
    ['size_mismatch', 'size_mismatch'],
    ['short', 'short'],
  ] as const) {
    test(`a secondary answering ${fault} is counted (${reason}) and the CSPRNG takes over`, async () => {
      const c = chain({ primary: aqnClient(aqn), secondary: qryptClient(qrypt) })
      await waitFor(() => remote(c, 'qrng-secondary').state === 'up', 'secondary up')
      await aqn.down()
      qrypt.fault = fault
      await waitFor(() => {
        drain(c)
        return remote(c, 'qrng-secondary').state === 'down' && servesFrom(c, 'system-csprng')
      }, 'the CSPRNG serving')
      assert.ok(remote(c, 'qrng-secondary').rejections[reason] >= 1)
    })
  }

  test('a slow source never makes a request wait: bytes() answers from the CSPRNG while the fetch hangs', async () => {
    aqn.fault = 'slow'
    const c = chain({ primary: aqnClient(aqn, AQN_KEY, 200) })
    await waitFor(() => aqn.openRequests > 0, 'a fetch in flight')
    // Synchronous by type: a Buffer, not a promise, while the network is stuck.
    const out = c.bytes(12)
    assert.ok(Buffer.isBuffer(out))
    assert.equal(remote(c, 'qrng-primary').state, 'starting')
    assert.equal(c.source(), 'system-csprng')
    await waitFor(() => remote(c, 'qrng-primary').fetchFailures.timeout >= 1, 'the timeout counted')
    assert.equal(remote(c, 'qrng-primary').state, 'down')
  })

  test('close() aborts the fetch in flight and stops the refills; bytes() still works', async () => {
    const stuck = await new FakeAqn().start()
    stuck.fault = 'slow'
    stuck.latencyMs = 30_000
    try {
      const c = chain({ primary: aqnClient(stuck, AQN_KEY, 20_000) })
      await waitFor(() => stuck.openRequests > 0, 'a fetch in flight')
      c.close()
      await waitFor(() => stuck.openRequests === 0, 'the fetch aborted (the fake saw the connection close)')
      const requests = stuck.requests.length
      assert.equal(c.bytes(12).length, 12)
      assert.equal(c.source(), 'system-csprng')
      assert.equal(remote(c, 'qrng-primary').fetchFailures.timeout, 0, 'an abort at close is not a failure')
      // A live chain with the same tick completing several refills stands in for "time passed".
      stuck.fault = 'none'
      const live = chain({ primary: aqnClient(aqn) })
      await waitFor(() => {
        drain(live)
        return remote(live, 'qrng-primary').batchesAccepted >= 3
      }, 'a live chain refilling')
      assert.equal(stuck.requests.length, requests, 'the closed chain fetched nothing more')
    } finally {
      await stuck.close()
    }
  })

  test('every output draws the CSPRNG, remote-served or not', async () => {
    const csprng = createCsprngSource()
    let drawn = 0
    const counting: RandomSource = {
      bytes(n) {
        drawn += n
        return csprng.bytes(n)
      },
      source: () => 'counting',
    }
    const c = chain({ primary: aqnClient(aqn), csprng: counting })
    await waitFor(() => servesFrom(c, 'qrng-primary'), 'primary serving')
    const before = drawn
    c.bytes(12)
    c.bytes(32)
    assert.equal(drawn - before, 44)
  })

  test('a known pattern from the source never appears in the output', async () => {
    aqn.fault = 'pattern'
    const c = chain({ primary: aqnClient(aqn) })
    const outputs: Buffer[] = []
    await waitFor(() => {
      for (let i = 0; i < 100; i++) {
        const before = remote(c, 'qrng-primary').bytesServed
        const out = c.bytes(12)
        if (remote(c, 'qrng-primary').bytesServed > before) outputs.push(out)
      }
      return outputs.length >= 500
    }, '500 outputs served with the patterned source')
    const sent = aqn.bytesServed()
    assert.ok(sent.length >= 1024)
    for (const out of outputs) assert.ok(!contains(sent, out), 'an output equals bytes the source sent')
  })

  test('with a CSPRNG stuck at zero the output is the SHAKE256-conditioned stream, never the raw remote bytes', async () => {
    // The source answers the same 1 KiB every time (a stub: the protocol checks would refuse it).
    const fixed = patternBytes(0, 1024)
    const stub: EntropyClient = {
      protocol: 'anu-aqn',
      maxBatchBytes: 1024,
      batchUnitBytes: 1,
      fetch: async (bytes) => Buffer.from(fixed.subarray(0, bytes)),
    }
    const zero: RandomSource = { bytes: (n) => Buffer.alloc(n), source: () => 'broken' }
    const c = chain({ primary: stub, csprng: zero })
    await waitFor(() => remote(c, 'qrng-primary').state === 'up', 'the stub source up')
    const out = c.bytes(12)
    const index = Buffer.alloc(8)
    const stream = createHash('shake256', { outputLength: 1024 })
      .update('kms/entropy/condition/v1\0')
      .update('qrng-primary')
      .update(index)
      .update(fixed)
      .digest()
    assert.ok(contains(stream, out), 'the output comes from the conditioned first batch')
    assert.ok(!contains(fixed, out), 'the raw remote bytes never reach the output')
  })

  test('a source replaying the same batch forever causes no repeated output, within or across processes', async () => {
    const fixed = patternBytes(3, 1024)
    // A stub: the protocol's repeated-batch check would refuse this source; the mix alone must hold.
    const replaying = (): EntropyClient => ({
      protocol: 'qrypt',
      maxBatchBytes: 1024,
      batchUnitBytes: 1024,
      fetch: async () => Buffer.from(fixed),
    })
    const a = chain({ primary: replaying() })
    const b = chain({ primary: replaying() })
    const seen = new Set<string>()
    let fromRemote = 0
    await waitFor(() => {
      for (let i = 0; i < 100; i++) {
        for (const c of [a, b]) {
          const before = remote(c, 'qrng-primary').bytesServed
          const out = c.bytes(12)
          if (remote(c, 'qrng-primary').bytesServed === before) continue
          fromRemote++
          assert.ok(!contains(fixed, out), 'the replayed bytes reached the output')
          seen.add(out.toString('hex'))
        }
      }
      return fromRemote >= 2000
    }, '2000 outputs mixed with the replayed batch')
    assert.equal(seen.size, fromRemote, 'an output repeated')
  })

  test('logs name the source and the reason, never the credential or the URL', async () => {
    const { logger, lines } = captureLogger()
    const c = chain({ primary: aqnClient(aqn, 'the-wrong-key'), secondary: qryptClient(qrypt), logger })
    await waitFor(
      () => remote(c, 'qrng-primary').fetchFailures.unauthorized >= 2,
      'the bad key refused twice',
    )
    aqn.fault = 'short'
    const good = chain({ primary: aqnClient(aqn), logger })
    await waitFor(() => remote(good, 'qrng-primary').rejections.short >= 1, 'a rejection logged')
    const text = lines.join('\n')
    assert.match(text, /entropy source down/)
    assert.match(text, /"reason":"unauthorized"/)
    for (const secret of ['the-wrong-key', AQN_KEY, QRYPT_TOKEN, aqn.url, qrypt.url, '127.0.0.1']) {
      assert.ok(!text.includes(secret), `the log contains ${secret}`)
    }
  })

  test('status and metrics expose states and counters only', async () => {
    const c = chain({ primary: aqnClient(aqn), secondary: qryptClient(qrypt) })
    await waitFor(() => servesFrom(c, 'qrng-primary'), 'primary serving')
    const text = await renderEntropyMetrics(c.status())
    assert.match(text, /^kms_entropy_source_in_use\{source="qrng-primary"\} 1$/m)
    assert.match(text, /^kms_entropy_source_in_use\{source="system-csprng"\} 0$/m)
    assert.match(text, /^kms_entropy_source_up\{source="qrng-primary",protocol="anu-aqn"\} 1$/m)
    assert.match(text, /^kms_entropy_rejections_total\{source="qrng-secondary",reason="invalid_base64"\} 0$/m)
    assert.match(text, /^# TYPE kms_entropy_bytes_served_total counter$/m)
    for (const secret of [AQN_KEY, QRYPT_TOKEN, aqn.url, qrypt.url]) assert.ok(!text.includes(secret))
  })
})

// ---------------------------------------------------------------------------------------------
// The real service, end to end over HTTP

/** Reads one sample from a Prometheus text exposition; undefined if the series is absent. */
function metric(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  const wanted = Object.entries(labels)
    .map(([k, v]) => `${k}="${v}"`)
    .join(',')
  for (const line of text.split('\n')) {
    const match = /^([a-z_]+)(?:\{([^}]*)\})? (\S+)$/.exec(line)
    if (!match || match[1] !== name) continue
    const present = match[2] ?? ''
    if (wanted.split(',').every((pair) => pair === '' || present.split(',').includes(pair)))
      return Number(match[3])
  }
  return undefined
}

interface Load {
  ok(): number
  failures: string[]
  /** Nonces of successful encrypts, while `collect` is on. */
  nonces: Buffer[]
  collect: boolean
  stop(): Promise<void>
}

/** Encrypt + decrypt round trips on every key, `concurrency` at a time, until stopped. */
function startLoad(svc: TestService, tenant: TenantWithKey, keyIds: string[], concurrency = 4): Load {
  let stopping = false
  let ok = 0
  const load: Load = {
    ok: () => ok,
    failures: [],
    nonces: [],
    collect: false,
    stop: async () => {
      stopping = true
      await Promise.all(workers)
    },
  }
  const post = (path: string, body: unknown) =>
    svc.request('POST', `/api/v1${path}`, { key: tenant.key, body })
  const worker = async (offset: number) => {
    for (let i = offset; !stopping; i++) {
      const keyId = keyIds[i % keyIds.length]!
      const plaintext = randomBytes(48)
      try {
        const sealed: HttpResult = await post('/encrypt', { keyId, plaintext: plaintext.toString('base64') })
        if (sealed.status !== 200) {
          load.failures.push(`encrypt ${sealed.status} ${sealed.text}`)
          continue
        }
        if (load.collect) load.nonces.push(Buffer.from(sealed.body.nonce, 'base64'))
        const { ciphertext, encapsulatedKey, nonce, tag } = sealed.body
        const opened = await post('/decrypt', { keyId, ciphertext, encapsulatedKey, nonce, tag })
        if (opened.status !== 200) load.failures.push(`decrypt ${opened.status} ${opened.text}`)
        else if (!Buffer.from(opened.body.plaintext, 'base64').equals(plaintext))
          load.failures.push('round trip differs')
        else ok++
      } catch (error) {
        load.failures.push(`request failed: ${String(error)}`)
      }
    }
  }
  const workers = Array.from({ length: concurrency }, (_, i) => worker(i))
  return load
}

describe('entropy end to end: the service with two fake QRNGs', () => {
  let aqn: FakeAqn
  let qrypt: FakeQrypt
  let svc: TestService
  let tenant: TenantWithKey
  let load: Load

  const health = async () => {
    const res = await svc.request('GET', '/api/v1/health')
    assert.equal(res.status, 200, res.text)
    return res.body as { entropy: { source: string; sources: { name: string; status: string }[] } }
  }
  const metrics = async () => {
    const res = await svc.request('GET', '/metrics')
    assert.equal(res.status, 200, res.text)
    assert.match(res.headers.get('content-type') ?? '', /^text\/plain; version=0\.0\.4/)
    return res.text
  }
  const sourceState = (h: Awaited<ReturnType<typeof health>>, name: string) =>
    h.entropy.sources.find((s) => s.name === name)?.status
  /** Health and metrics agree on the source in use. */
  const inUse = async (source: string) => {
    const [h, m] = await Promise.all([health(), metrics()])
    return h.entropy.source === source && metric(m, 'kms_entropy_source_in_use', { source }) === 1
  }
  /** Encrypts keep succeeding through the current phase. */
  const progresses = async (what: string) => {
    const from = load.ok()
    await waitFor(() => load.ok() >= from + 20, `encrypts completing while ${what}`)
  }

  before(async () => {
    aqn = await new FakeAqn().start()
    qrypt = await new FakeQrypt().start()
    svc = await startTestService({
      KMS_ENTROPY_PRIMARY_URL: aqn.url,
      KMS_ENTROPY_PRIMARY_PROTOCOL: 'anu-aqn',
      KMS_ENTROPY_PRIMARY_CREDENTIAL: AQN_KEY,
      KMS_ENTROPY_SECONDARY_URL: qrypt.url,
      KMS_ENTROPY_SECONDARY_PROTOCOL: 'qrypt',
      KMS_ENTROPY_SECONDARY_CREDENTIAL: QRYPT_TOKEN,
      KMS_ENTROPY_TIMEOUT_MS: '300',
      KMS_ENTROPY_POOL_BYTES: '2048',
      KMS_ENTROPY_REFILL_INTERVAL_MS: '20',
      KMS_ENTROPY_RETRY_MS: '50',
      KMS_ENTROPY_RETRY_MAX_MS: '200',
    })
    tenant = await svc.createTenant()
    const keyIds: string[] = []
    for (const algorithm of ['ML-KEM-768', 'RSA-2048']) {
      const created = await svc.request('POST', '/api/v1/keys', {
        key: tenant.key,
        body: { name: `entropy-${algorithm}`, keyType: 'Encryption', algorithm },
      })
      assert.equal(created.status, 201, created.text)
      keyIds.push(created.body.id)
    }
    load = startLoad(svc, tenant, keyIds)
  })

  after(async () => {
    await load?.stop()
    await svc?.stop()
    await aqn?.close()
    await qrypt?.close()
  })

  test('both sources up: the primary is in use, on /health and /metrics', async () => {
    await waitFor(async () => {
      const h = await health()
      return sourceState(h, 'qrng-primary') === 'up' && sourceState(h, 'qrng-secondary') === 'up'
    }, 'both sources up on /health')
    await waitFor(() => inUse('qrng-primary'), 'qrng-primary in use')
    await progresses('both sources are up')
    const m = await metrics()
    assert.ok(metric(m, 'kms_entropy_bytes_served_total', { source: 'qrng-primary' })! > 0)
    assert.equal(metric(m, 'kms_entropy_source_up', { source: 'qrng-secondary' }), 1)
  })

  test('the credentials travel as each protocol requires, and no request was refused', () => {
    assert.ok(aqn.requests.length > 0 && qrypt.requests.length > 0)
    for (const r of aqn.requests) {
      assert.equal(r.headers['x-api-key'], AQN_KEY)
      assert.equal(r.query.get('type'), 'uint8')
      const length = Number(r.query.get('length'))
      assert.ok(length >= 1 && length <= 1024, `length ${length}`)
    }
    for (const r of qrypt.requests) {
      assert.equal(r.headers.authorization, `Bearer ${QRYPT_TOKEN}`)
      assert.match(r.headers.accept ?? '', /application\/json/)
      const size = Number(r.query.get('size'))
      assert.ok(size >= 1 && size <= 512, `size ${size}`)
    }
    assert.deepEqual([...aqn.refused, ...qrypt.refused], [])
  })

  test('primary down: the secondary serves; /health shows the primary down', async () => {
    await aqn.down()
    await waitFor(async () => {
      const h = await health()
      return sourceState(h, 'qrng-primary') === 'down' && (await inUse('qrng-secondary'))
    }, 'qrng-secondary in use with the primary down')
    await progresses('the primary is down')
    const m = await metrics()
    assert.ok(
      metric(m, 'kms_entropy_fetch_failures_total', { source: 'qrng-primary', reason: 'network' })! >= 1,
    )
    assert.equal(metric(m, 'kms_entropy_source_up', { source: 'qrng-primary' }), 0)
  })

  test('both down (the secondary too slow): the system CSPRNG serves', async () => {
    qrypt.fault = 'slow'
    await waitFor(async () => {
      const h = await health()
      return sourceState(h, 'qrng-secondary') === 'down' && (await inUse('system-csprng'))
    }, 'system-csprng in use')
    await progresses('both sources are down')
    const m = await metrics()
    assert.ok(
      metric(m, 'kms_entropy_fetch_failures_total', { source: 'qrng-secondary', reason: 'timeout' })! >= 1,
    )
    const before = metric(m, 'kms_entropy_bytes_served_total', { source: 'system-csprng' })!
    await progresses('the CSPRNG serves alone')
    const later = metric(await metrics(), 'kms_entropy_bytes_served_total', { source: 'system-csprng' })!
    assert.ok(later > before, 'the CSPRNG served the encrypts')
  })

  test('primary back: the primary is in use again', async () => {
    await aqn.up()
    await waitFor(() => inUse('qrng-primary'), 'qrng-primary in use again')
    qrypt.fault = 'none'
    await waitFor(async () => sourceState(await health(), 'qrng-secondary') === 'up', 'secondary back up')
    await progresses('the primary is back')
    assert.equal((await health()).entropy.source, 'qrng-primary')
  })

  for (const [fault, reason] of [
    ['short', 'short'],
    ['strings', 'invalid_data'],
    ['oversized', 'oversized'],
  ] as const) {
    test(`a primary answering ${fault} is rejected (${reason}), counted, marked down; the secondary serves`, async () => {
      const before = metric(await metrics(), 'kms_entropy_rejections_total', {
        source: 'qrng-primary',
        reason,
      })!
      aqn.fault = fault
      await waitFor(async () => {
        const m = await metrics()
        return (
          metric(m, 'kms_entropy_rejections_total', { source: 'qrng-primary', reason })! > before &&
          metric(m, 'kms_entropy_source_up', { source: 'qrng-primary' }) === 0 &&
          (await inUse('qrng-secondary'))
        )
      }, `the ${fault} primary rejected and the secondary in use`)
      await progresses(`the primary answers ${fault}`)
      aqn.fault = 'none'
      await waitFor(() => inUse('qrng-primary'), 'qrng-primary in use again')
    })
  }

  test('a secondary answering invalid base64 is rejected while the primary is down: the CSPRNG serves', async () => {
    qrypt.fault = 'invalid_base64'
    await aqn.down()
    await waitFor(async () => {
      const m = await metrics()
      return (
        metric(m, 'kms_entropy_rejections_total', { source: 'qrng-secondary', reason: 'invalid_base64' })! >=
          1 && (await inUse('system-csprng'))
      )
    }, 'the invalid secondary rejected and the CSPRNG in use')
    await progresses('the primary is down and the secondary corrupt')
    qrypt.fault = 'none'
    await aqn.up()
    await waitFor(() => inUse('qrng-primary'), 'qrng-primary in use again')
  })

  test('nonces made while the primary sends a known pattern never contain it', async () => {
    await qrypt.down()
    aqn.fault = 'pattern'
    const servedBefore = aqn.served.length
    await waitFor(() => aqn.served.length >= servedBefore + 3, 'patterned batches served')
    const before = metric(await metrics(), 'kms_entropy_bytes_served_total', { source: 'qrng-primary' })!
    load.collect = true
    await waitFor(() => load.nonces.length >= 100, '100 nonces collected')
    load.collect = false
    const after = metric(await metrics(), 'kms_entropy_bytes_served_total', { source: 'qrng-primary' })!
    assert.ok(after > before, 'the patterned primary served while the nonces were made')
    const sent = Buffer.concat(aqn.served.slice(servedBefore))
    for (const nonce of load.nonces) {
      assert.equal(nonce.length, 12)
      assert.ok(!contains(sent, nonce), 'a nonce equals bytes the source sent')
    }
    aqn.fault = 'none'
    await qrypt.up()
  })

  test('no encrypt or decrypt failed through every phase, and every round trip matched', async () => {
    await load.stop()
    assert.deepEqual(load.failures, [])
    assert.ok(load.ok() > 200, `${load.ok()} round trips`)
  })
})
