import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http'
import { createServer as createHttpsServer } from 'node:https'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { ConfigError, loadConfig } from '../../src/config.ts'
import { AllowListError, createAllowList } from '../../src/outbound/allow-list.ts'
import type { Resolver } from '../../src/outbound/destination.ts'
import { classify, parseIp } from '../../src/outbound/ip-address.ts'
import {
  createOutboundClient,
  OutboundError,
  type OutboundRequest,
} from '../../src/outbound/outbound-client.ts'

/**
 * The outbound HTTP client (src/outbound/): the address classifier against a table of expected
 * kinds written out here (not derived from net.BlockList or from the implementation's ranges),
 * the operator allow list, and the client against a real local HTTP server with injected
 * resolvers: refusal before any request, pinning to the checked address, no redirects,
 * timeouts and response caps.
 */

describe('address classifier', () => {
  const table: [string, string | null][] = [
    // IPv4
    ['127.0.0.1', 'loopback'],
    ['127.255.255.254', 'loopback'],
    ['0.0.0.0', 'unspecified'],
    ['0.1.2.3', 'unspecified'],
    ['10.0.0.1', 'private'],
    ['10.255.255.255', 'private'],
    ['172.16.0.1', 'private'],
    ['172.31.255.255', 'private'],
    ['172.15.255.255', null],
    ['172.32.0.0', null],
    ['192.168.0.1', 'private'],
    ['192.169.0.1', null],
    ['100.64.0.1', 'carrier-grade NAT (shared)'],
    ['100.127.255.255', 'carrier-grade NAT (shared)'],
    ['100.63.255.255', null],
    ['100.128.0.0', null],
    ['169.254.169.254', 'link-local'],
    ['169.254.0.1', 'link-local'],
    ['224.0.0.1', 'multicast'],
    ['239.255.255.250', 'multicast'],
    ['240.0.0.1', 'reserved'],
    ['255.255.255.255', 'broadcast'],
    ['192.0.0.8', 'reserved'],
    ['192.0.2.1', 'documentation'],
    ['198.51.100.7', 'documentation'],
    ['203.0.113.9', 'documentation'],
    ['198.18.0.1', 'benchmarking'],
    ['198.19.255.255', 'benchmarking'],
    ['192.88.99.1', 'reserved'],
    ['8.8.8.8', null],
    ['93.184.216.34', null],
    ['1.1.1.1', null],
    // IPv6
    ['::1', 'loopback'],
    ['::', 'unspecified'],
    ['fe80::1', 'link-local'],
    ['febf:ffff::1', 'link-local'],
    ['fc00::1', 'unique-local'],
    ['fd12:3456:789a::1', 'unique-local'],
    ['fec0::1', 'site-local'],
    ['ff02::1', 'multicast'],
    ['ff05::1:3', 'multicast'],
    ['2001:db8::1', 'documentation'],
    ['2001:0:4136:e378:8000:63bf:3fff:fdd2', 'reserved'], // Teredo
    ['100::1', 'reserved'],
    ['::ffff:127.0.0.1', 'loopback'], // IPv4-mapped
    ['::ffff:7f00:1', 'loopback'],
    ['::ffff:10.0.0.1', 'private'],
    ['::ffff:169.254.169.254', 'link-local'],
    ['::ffff:8.8.8.8', 'reserved'], // mapped: refused even for a public IPv4 address
    ['::127.0.0.1', 'loopback'], // IPv4-compatible
    ['::8.8.8.8', 'reserved'],
    ['64:ff9b::7f00:1', 'loopback'], // NAT64 of 127.0.0.1
    ['64:ff9b::a9fe:a9fe', 'link-local'], // NAT64 of 169.254.169.254
    ['64:ff9b::808:808', null], // NAT64 of 8.8.8.8
    ['64:ff9b:1::1', 'reserved'],
    ['2002:7f00:1::1', 'loopback'], // 6to4 of 127.0.0.1
    ['2002:c0a8:1::1', 'private'], // 6to4 of 192.168.0.1
    ['2002:808:808::1', null], // 6to4 of 8.8.8.8
    ['3fff::1', 'documentation'],
    ['4000::1', 'reserved'], // outside 2000::/3
    ['2606:4700:4700::1111', null],
    ['2a00:1450:4001:80b::200e', null],
  ]
  for (const [text, expected] of table) {
    test(`${text} is ${expected ?? 'public'}`, () => {
      const address = parseIp(text)
      assert.ok(address, `${text} parses`)
      assert.equal(classify(address).kind, expected)
    })
  }

  test('parsing gives canonical text and bytes; zones and non-addresses are not addresses', () => {
    assert.equal(parseIp('[::FFFF:127.0.0.1]')?.text, '::ffff:7f00:1')
    assert.equal(parseIp('2001:0db8:0000:0000:0000:0000:0000:0001')?.text, '2001:db8::1')
    assert.equal(parseIp('1:0:0:2:0:0:0:3')?.text, '1:0:0:2::3')
    assert.deepEqual([...parseIp('10.1.2.3')!.bytes], [10, 1, 2, 3])
    assert.equal(parseIp('fe80::1%eth0'), undefined)
    assert.equal(parseIp('localhost'), undefined)
    assert.equal(parseIp('2130706433'), undefined, 'the URL parser, not this one, reads other spellings')
  })
})

describe('allow list', () => {
  test('host names match exactly (case and a trailing dot aside); ranges match addresses', () => {
    const allow = createAllowList(['Hooks.Example.Internal', '10.20.0.0/16', '127.0.0.1', 'fd00::/8'])
    assert.equal(allow.allowsHost('hooks.example.internal'), true)
    assert.equal(allow.allowsHost('HOOKS.example.internal.'), true)
    assert.equal(allow.allowsHost('evil.hooks.example.internal'), false)
    assert.equal(allow.allowsHost('example.internal'), false)
    assert.equal(allow.allowsAddress('10.20.255.1'), true)
    assert.equal(allow.allowsAddress('10.21.0.1'), false)
    assert.equal(allow.allowsAddress('127.0.0.1'), true)
    assert.equal(allow.allowsAddress('127.0.0.2'), false)
    assert.equal(allow.allowsAddress('fd12::1'), true)
    assert.equal(allow.allowsAddress('fc00::1'), false)
  })

  test('a bad entry is refused, naming it', () => {
    for (const entry of ['10.0.0.0/33', '::/129', '10.0.0.0/x', 'exa mple.com', 'http://x.example', 'a/8']) {
      assert.throws(
        () => createAllowList([entry]),
        (error: Error) => {
          assert.ok(error instanceof AllowListError)
          assert.ok(error.message.includes(entry), error.message)
          return true
        },
      )
    }
  })
})

describe('configuration', () => {
  test('KMS_OUTBOUND_ALLOW is empty by default, parsed as a list, and a bad entry stops the start naming it', () => {
    assert.deepEqual(loadConfig({}).outboundAllow, [])
    assert.deepEqual(loadConfig({ KMS_OUTBOUND_ALLOW: ' hooks.internal , 10.0.0.0/8,' }).outboundAllow, [
      'hooks.internal',
      '10.0.0.0/8',
    ])
    assert.throws(
      () => loadConfig({ KMS_OUTBOUND_ALLOW: 'hooks.internal,10.0.0.0/33' }),
      (error: Error) =>
        error instanceof ConfigError && /KMS_OUTBOUND_ALLOW: "10\.0\.0\.0\/33"/.test(error.message),
    )
  })

  test('KMS_WEBHOOK_TENANT_CONCURRENCY defaults to half the worker concurrency and may not exceed it', () => {
    assert.equal(loadConfig({}).jobs.tenantConcurrency, 5)
    assert.equal(loadConfig({ KMS_WORKER_CONCURRENCY: '1' }).jobs.tenantConcurrency, 1)
    assert.equal(loadConfig({ KMS_WEBHOOK_TENANT_CONCURRENCY: '3' }).jobs.tenantConcurrency, 3)
    assert.throws(
      () => loadConfig({ KMS_WORKER_CONCURRENCY: '4', KMS_WEBHOOK_TENANT_CONCURRENCY: '5' }),
      (error: Error) =>
        error instanceof ConfigError && error.message.includes('KMS_WEBHOOK_TENANT_CONCURRENCY'),
    )
  })
})

// ---------------------------------------------------------------------------------------------
// The client against a real server

interface Seen {
  method: string
  url: string
  headers: IncomingHttpHeaders
}
let server: Server
let port: number
const seen: Seen[] = []

before(async () => {
  server = createServer((req, res) => {
    seen.push({ method: req.method!, url: req.url!, headers: req.headers })
    req.resume()
    if (req.url === '/redirect') {
      res.writeHead(302, { location: `http://127.0.0.1:${port}/target` })
      return res.end()
    }
    if (req.url === '/big') {
      res.writeHead(200, { 'content-type': 'text/plain' })
      return res.end('x'.repeat(100_000))
    }
    if (req.url === '/big-chunked') {
      res.writeHead(200)
      res.write('y'.repeat(60_000))
      return res.end('y'.repeat(60_000))
    }
    if (req.url === '/hang') return // never answers
    res.writeHead(200)
    res.end(`hello ${req.headers.host}`)
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  port = (server.address() as AddressInfo).port
})
after(async () => {
  server.closeAllConnections()
  await new Promise<void>((resolve) => server.close(() => resolve()))
})

const get = (url: string, extra: Partial<OutboundRequest> = {}): OutboundRequest => ({
  url: new URL(url),
  method: 'GET',
  headers: {},
  timeoutMs: 5000,
  maxResponseBytes: 1024,
  oversize: 'truncate',
  ...extra,
})

/** A resolver that answers from a list, one answer per call, and counts its calls. */
function scriptedResolver(...answers: string[][]): Resolver & { calls: number } {
  const resolver = Object.assign(
    async (_host: string) => {
      const answer = answers[Math.min(resolver.calls, answers.length - 1)]!
      resolver.calls++
      return answer.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }))
    },
    { calls: 0 },
  )
  return resolver
}

async function refusal(promise: Promise<unknown>): Promise<OutboundError> {
  try {
    await promise
  } catch (error) {
    assert.ok(error instanceof OutboundError, String(error))
    return error
  }
  assert.fail('the request was made')
}

describe('outbound client', () => {
  test('by default every local spelling is refused before any request, with the reason', async () => {
    const client = createOutboundClient({ allow: createAllowList([]) })
    const before = seen.length
    const spellings: [string, RegExp][] = [
      [`http://127.0.0.1:${port}/`, /the host is 127\.0\.0\.1, a loopback address/],
      [`http://localhost:${port}/`, /localhost is a loopback name/],
      [`http://[::1]:${port}/`, /::1, a loopback address/],
      [`http://0.0.0.0:${port}/`, /0\.0\.0\.0, an unspecified address/],
      [`http://2130706433:${port}/`, /127\.0\.0\.1, a loopback address/],
      [`http://0x7f.1:${port}/`, /127\.0\.0\.1, a loopback address/],
      [`http://017700000001:${port}/`, /127\.0\.0\.1, a loopback address/],
      [`http://127.1:${port}/`, /127\.0\.0\.1, a loopback address/],
      [`http://[::ffff:127.0.0.1]:${port}/`, /IPv4-mapped loopback address \(127\.0\.0\.1\)/],
      ['http://169.254.169.254/latest/meta-data/', /169\.254\.169\.254, a link-local address/],
      ['http://10.0.0.1/', /10\.0\.0\.1, a private address/],
      ['http://192.168.0.1/', /192\.168\.0\.1, a private address/],
    ]
    for (const [url, reason] of spellings) {
      const error = await refusal(client.request(get(url)))
      assert.equal(error.code, 'destination_not_allowed', url)
      assert.match(error.reason ?? '', reason, url)
    }
    assert.equal(seen.length, before, 'no request reached the server')
  })

  test('a name is resolved once and the connection goes to the checked address (DNS rebinding changes nothing)', async () => {
    // The first answer is checked and used; a second lookup would answer another address.
    const resolver = scriptedResolver(['127.0.0.1'], ['10.9.9.9'])
    const client = createOutboundClient({ allow: createAllowList(['127.0.0.0/8']), resolve: resolver })
    const response = await client.request(get(`http://receiver.test:${port}/pinned`))
    assert.equal(response.status, 200)
    assert.equal(response.body.toString(), `hello receiver.test:${port}`, 'the Host header keeps the name')
    assert.equal(resolver.calls, 1, 'resolved exactly once')
    assert.equal(response.operatorAllowed, true)
  })

  test('a name that resolves to one public and one private address is refused', async () => {
    const client = createOutboundClient({
      allow: createAllowList([]),
      resolve: scriptedResolver(['93.184.216.34', '127.0.0.1']),
    })
    const error = await refusal(client.request(get(`http://mixed.test:${port}/`)))
    assert.equal(error.code, 'destination_not_allowed')
    assert.match(error.reason!, /mixed\.test resolves to 127\.0\.0\.1, a loopback address/)
  })

  test('a host allowed by name may resolve to a private address; a range allows only its addresses', async () => {
    const byName = createOutboundClient({
      allow: createAllowList(['receiver.test']),
      resolve: scriptedResolver(['127.0.0.1']),
    })
    assert.equal((await byName.request(get(`http://receiver.test:${port}/`))).status, 200)
    const otherName = await refusal(byName.request(get(`http://other.test:${port}/`)))
    assert.equal(otherName.code, 'destination_not_allowed')

    const byRange = createOutboundClient({
      allow: createAllowList(['10.0.0.0/8']),
      resolve: scriptedResolver(['127.0.0.1']),
    })
    assert.equal(
      (await refusal(byRange.request(get(`http://receiver.test:${port}/`)))).code,
      'destination_not_allowed',
    )
  })

  test('only an operator-allowed destination is marked as such (webhooks keep answers only from those)', async () => {
    const client = createOutboundClient({
      allow: createAllowList(['hooks.internal', '10.1.0.0/16']),
      resolve: async (host) => [
        { address: host === 'public.test' ? '93.184.216.34' : '10.1.2.3', family: 4 },
      ],
    })
    assert.equal((await client.check(new URL('https://public.test/'))).operatorAllowed, false)
    assert.equal((await client.check(new URL('https://hooks.internal/'))).operatorAllowed, true)
    assert.equal((await client.check(new URL('https://ranged.test/'))).operatorAllowed, true)
    assert.equal((await client.check(new URL('https://8.8.8.8/'))).operatorAllowed, false)
  })

  test('withAllowed adds hosts for one client only', async () => {
    const base = createOutboundClient({ allow: createAllowList([]) })
    const entropy = base.withAllowed(createAllowList(['127.0.0.1']))
    assert.equal((await entropy.request(get(`http://127.0.0.1:${port}/`))).status, 200)
    assert.equal(
      (await refusal(base.request(get(`http://127.0.0.1:${port}/`)))).code,
      'destination_not_allowed',
    )
  })

  test('redirects are never followed: the 3xx is the answer', async () => {
    const client = createOutboundClient({ allow: createAllowList(['127.0.0.1']) })
    const before = seen.filter((s) => s.url === '/target').length
    const response = await client.request(get(`http://127.0.0.1:${port}/redirect`))
    assert.equal(response.status, 302)
    assert.equal(seen.filter((s) => s.url === '/target').length, before, 'the target was not called')
  })

  test('the answer is capped: truncated, or refused as too large', async () => {
    const client = createOutboundClient({ allow: createAllowList(['127.0.0.1']) })
    const truncated = await client.request(get(`http://127.0.0.1:${port}/big`, { maxResponseBytes: 256 }))
    assert.equal(truncated.body.length, 256)
    assert.equal(truncated.truncated, true)
    for (const path of ['/big', '/big-chunked']) {
      const error = await refusal(
        client.request(get(`http://127.0.0.1:${port}${path}`, { maxResponseBytes: 1000, oversize: 'fail' })),
      )
      assert.equal(error.code, 'response_too_large', path)
    }
    const whole = await client.request(get(`http://127.0.0.1:${port}/ok`, { oversize: 'fail' }))
    assert.equal(whole.truncated, false)
    assert.equal(whole.body.toString(), `hello 127.0.0.1:${port}`)
  })

  test('a receiver that never answers times out; an abort signal cancels', async () => {
    const client = createOutboundClient({ allow: createAllowList(['127.0.0.1']) })
    const timedOut = await refusal(client.request(get(`http://127.0.0.1:${port}/hang`, { timeoutMs: 200 })))
    assert.equal(timedOut.code, 'timeout')
    const controller = new AbortController()
    const pending = client.request(get(`http://127.0.0.1:${port}/hang`, { signal: controller.signal }))
    setTimeout(() => controller.abort(), 50)
    assert.equal((await refusal(pending)).code, 'aborted')
  })

  test('an unresolvable name and a closed port are errors, not exceptions of another kind', async () => {
    const failing: Resolver = async () => {
      throw Object.assign(new Error('nope'), { code: 'ENOTFOUND' })
    }
    const client = createOutboundClient({ allow: createAllowList(['127.0.0.1']), resolve: failing })
    assert.equal((await refusal(client.request(get('http://nowhere.test/')))).code, 'destination_unresolved')
    const closed = createServer()
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve))
    const closedPort = (closed.address() as AddressInfo).port
    await new Promise<void>((resolve) => closed.close(() => resolve()))
    assert.equal(
      (await refusal(client.request(get(`http://127.0.0.1:${closedPort}/`)))).code,
      'connection_failed',
    )
  })
})

describe('TLS through a pinned connection', () => {
  /** A test CA and a certificate for receiver.test only (no IP address in it), made with openssl. */
  function certificates(): { ca: Buffer; key: Buffer; cert: Buffer } {
    const dir = mkdtempSync(join(tmpdir(), 'kms-outbound-tls-'))
    try {
      const openssl = (...args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' })
      const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes']
      openssl(
        'req',
        '-x509',
        ...ec,
        '-keyout',
        'ca.key',
        '-out',
        'ca.crt',
        '-days',
        '1',
        '-subj',
        '/CN=kms test CA',
      )
      openssl('req', ...ec, '-keyout', 'srv.key', '-out', 'srv.csr', '-subj', '/CN=receiver.test')
      writeFileSync(join(dir, 'ext.cnf'), 'subjectAltName=DNS:receiver.test\n')
      openssl(
        'x509',
        '-req',
        '-in',
        'srv.csr',
        '-CA',
        'ca.crt',
        '-CAkey',
        'ca.key',
        '-CAcreateserial',
        '-out',
        'srv.crt',
        '-days',
        '1',
        '-extfile',
        'ext.cnf',
      )
      const read = (file: string) => readFileSync(join(dir, file))
      return { ca: read('ca.crt'), key: read('srv.key'), cert: read('srv.crt') }
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  }

  test('the certificate is verified against the URL host name although the socket goes to the checked address', async () => {
    const { ca, key, cert } = certificates()
    const tls = createHttpsServer({ key, cert }, (req, res) => res.end(`tls ${req.headers.host}`))
    await new Promise<void>((resolve) => tls.listen(0, '127.0.0.1', resolve))
    const tlsPort = (tls.address() as AddressInfo).port
    try {
      const client = createOutboundClient({
        allow: createAllowList(['127.0.0.1']),
        resolve: scriptedResolver(['127.0.0.1']),
        ca,
      })
      const ok = await client.request(get(`https://receiver.test:${tlsPort}/`))
      assert.equal(ok.status, 200)
      assert.equal(ok.body.toString(), `tls receiver.test:${tlsPort}`)
      // Same address, another name: the certificate does not name it, so no exchange.
      const otherName = await refusal(client.request(get(`https://other.test:${tlsPort}/`)))
      assert.equal(otherName.code, 'connection_failed')
      const byAddress = await refusal(client.request(get(`https://127.0.0.1:${tlsPort}/`)))
      assert.equal(byAddress.code, 'connection_failed', 'the certificate does not name the address')
      // Without the test CA, Node's own bundle does not trust it.
      const untrusting = createOutboundClient({
        allow: createAllowList(['127.0.0.1']),
        resolve: scriptedResolver(['127.0.0.1']),
      })
      assert.equal(
        (await refusal(untrusting.request(get(`https://receiver.test:${tlsPort}/`)))).code,
        'connection_failed',
      )
    } finally {
      tls.closeAllConnections()
      await new Promise<void>((resolve) => tls.close(() => resolve()))
    }
  })
})
