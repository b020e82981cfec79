import 'reflect-metadata'
import assert from 'node:assert/strict'
import { webcrypto } from 'node:crypto'
import { after, before, describe, test } from 'node:test'
import * as x509 from '@peculiar/x509'
import { mapConcurrently } from '../helpers/api-client.ts'
import { pemToDer } from '../helpers/der.ts'
import { Rng } from '../helpers/rng.ts'
import {
  type HttpResult,
  startTestService,
  type TenantWithKey,
  type TestService,
} from '../helpers/service.ts'

/**
 * Fuzz of the X.509 routes (issue 36): seeded random and mutated bodies for creating CAs, roles
 * and certificates, for updates, imports and revocations, and for the list's query: wrong types,
 * unicode, huge arrays and strings, nested junk, and CSRs and certificates that are random text or
 * valid DER with bytes flipped, cut, or nested thousands deep. Invariant: every answer is a 2xx
 * or a 4xx JSON `{error: <snake_case code>, message}`, never a 5xx; afterwards the service still
 * issues and its CRL still verifies.
 *
 * Deterministic: reproduce with `FUZZ_SEED=<seed> node --test test/pki/pki-fuzz.test.ts`;
 * each violation names its case number.
 */

x509.cryptoProvider.set(webcrypto as unknown as Parameters<typeof x509.cryptoProvider.set>[0])

const SEED = parseSeed(process.env['FUZZ_SEED'])
const CASES_PER_ROUTE = 200
const CONCURRENCY = 4
const FUZZ_TIMEOUT_MS = 600_000

function parseSeed(raw: string | undefined): number {
  if (raw === undefined || raw === '') return 0x9c1_5eed
  const n = Number(raw)
  if (!Number.isInteger(n)) throw new Error(`FUZZ_SEED must be an integer, got ${raw}`)
  return n >>> 0
}

let svc: TestService
let tenant: TenantWithKey

before(async () => {
  svc = await startTestService()
  tenant = await svc.createTenant()
})
after(async () => svc?.stop())

const call = (method: string, path: string, body?: unknown, rawBody?: string) =>
  svc.request(method, `/api/v1${path}`, {
    key: tenant.key,
    ...(rawBody !== undefined ? { rawBody, headers: { 'content-type': 'application/json' } } : {}),
    ...(body !== undefined ? { body } : {}),
  })

// ---- junk ---------------------------------------------------------------------------------------

const toPem = (der: Buffer, label: string) =>
  `-----BEGIN ${label}-----\n${der.toString('base64').replace(/(.{64})/g, '$1\n')}\n-----END ${label}-----\n`

function derLength(n: number): Buffer {
  if (n < 0x80) return Buffer.of(n)
  const bytes: number[] = []
  for (let v = n; v > 0; v = Math.floor(v / 256)) bytes.unshift(v & 0xff)
  return Buffer.from([0x80 | bytes.length, ...bytes])
}

/** SEQUENCE inside SEQUENCE, `depth` deep: a parser without a depth bound recurses until it dies. */
function nestedSequences(depth: number): Buffer {
  let inner = Buffer.of(0x05, 0x00)
  for (let i = 0; i < depth; i++) inner = Buffer.concat([Buffer.of(0x30), derLength(inner.length), inner])
  return inner
}

/** A scalar, string, array or object of a shape no schema here expects (or just barely does). */
function junk(rng: Rng, depth = 0): unknown {
  switch (rng.int(16)) {
    case 0:
      return null
    case 1:
      return rng.chance(0.5)
    case 2:
      return rng.pick([0, -1, 1, 1.5, 2 ** 31, 2 ** 53 + 1, -(2 ** 63), 1e308, 300, 86_400 * 399])
    case 3:
      return ''
    case 4:
      return rng.unicode(rng.range(1, 80))
    case 5:
      return 'x'.repeat(rng.pick([64, 65, 101, 254, 2049, 70_000]))
    case 6:
      return rng.fromAlphabet(rng.range(1, 40), 'abcdefghijklmnopqrstuvwxyz0123456789.-*_:/ ')
    case 7:
      return Array.from(
        { length: rng.pick([0, 1, 101, 2_000]) },
        () => `${rng.fromAlphabet(6, 'abc')}.example.com`,
      )
    case 8:
      return depth < 3 ? Array.from({ length: rng.range(1, 4) }, () => junk(rng, depth + 1)) : []
    case 9:
      return depth < 3 ? { [rng.fromAlphabet(5, 'abcxyz')]: junk(rng, depth + 1) } : {}
    case 10:
      return JSON.parse('{"__proto__": {"polluted": true}, "constructor": {"prototype": {"x": 1}}}')
    case 11:
      return rng.uuid()
    case 12:
      return rng.pick([
        'root',
        'intermediate',
        'EC-P256',
        'ML-DSA-65',
        'keyCompromise',
        'serverAuth',
        'truncate',
      ])
    case 13:
      return rng.pick([
        '192.0.2.1',
        '::1',
        '999.1.1.1',
        '10.0.0.0/8',
        '1.2.3.4/33',
        'fe80::1%eth0',
        '::ffff:1.2.3.4',
      ])
    case 14:
      return rng.pick([
        '*.example.com',
        'a..example.com',
        '*.*.example.com',
        'xn--bcher-kva.example',
        '-a.example.com',
      ])
    default:
      return String(rng.int(1_000_000))
  }
}

/** PEM-ish text: random, or `valid` DER with bytes flipped, cut, extended, relabelled, nested. */
function mangledPem(rng: Rng, valid: Buffer, label: string): unknown {
  const der = Buffer.from(valid)
  switch (rng.int(10)) {
    case 0:
      return rng.unicode(rng.range(1, 200))
    case 1: {
      for (let i = rng.range(1, 8); i > 0; i--) der[rng.int(der.length)] = rng.int(256)
      return toPem(der, label)
    }
    case 2:
      return toPem(der.subarray(0, rng.int(der.length)), label)
    case 3:
      return toPem(Buffer.concat([der, rng.bytes(rng.range(1, 64))]), label)
    case 4:
      return toPem(
        der,
        rng.pick([
          'CERTIFICATE',
          'CERTIFICATE REQUEST',
          'PRIVATE KEY',
          'X509 CRL',
          'NEW CERTIFICATE REQUEST',
        ]),
      )
    case 5:
      return toPem(nestedSequences(rng.pick([64, 500, 8_000])), label)
    case 6: {
      // A length that claims far more than there is.
      const lie = Buffer.concat([Buffer.of(0x30, 0x84, 0x7f, 0xff, 0xff, 0xff), der.subarray(2)])
      return toPem(lie, label)
    }
    case 7:
      return `-----BEGIN ${label}-----\n${rng.fromAlphabet(rng.range(4, 400), 'ABCDEFGHIJ+/=abc\n')}\n-----END ${label}-----`
    case 8:
      return `${toPem(der, label)}${toPem(der, label)}`
    default:
      return toPem(rng.bytes(rng.range(1, 300)), label)
  }
}

/** A copy of `base` with one to three mutations: a field junked, dropped, added, or the whole body. */
function mutate(
  rng: Rng,
  base: Record<string, unknown>,
  special: Record<string, () => unknown> = {},
): unknown {
  if (rng.chance(0.05)) return junk(rng)
  const body: Record<string, unknown> = structuredClone(base)
  const fields = [...new Set([...Object.keys(base), ...Object.keys(special)])]
  for (let n = rng.range(1, 3); n > 0; n--) {
    const field = rng.pick(fields)
    const r = rng.int(10)
    if (r < 2) delete body[field]
    else if (r < 3) body[rng.pick(['extra', 'id', 'tenantId', 'status', 'privateKey'])] = junk(rng)
    else if (special[field] && r < 7) body[field] = special[field]!()
    else body[field] = junk(rng)
  }
  return body
}

// ---- the invariant ------------------------------------------------------------------------------

interface Violation {
  caseNo: number
  route: string
  status: number
  body: string
  answer: string
}

const ERROR_CODE = /^[a-z][a-z0-9_]*$/

function violation(res: HttpResult): string | null {
  if (res.status >= 500) return `a ${res.status}`
  if (res.status >= 200 && res.status < 300) return null
  if (res.status < 400) return `status ${res.status}`
  if (res.headers.get('content-type')?.split(';')[0] !== 'application/json') return 'not JSON'
  if (typeof res.body?.error !== 'string' || !ERROR_CODE.test(res.body.error)) return 'no error code'
  if (typeof res.body.message !== 'string') return 'no message'
  return null
}

// =================================================================================================

describe(`fuzz of the X.509 routes (seed ${SEED})`, { timeout: FUZZ_TIMEOUT_MS }, () => {
  let caId: string
  let caCertificate: Buffer
  let pendingId: string
  /** The revocation fuzz's own CA: whatever it does to that CRL, the final check reads the root's. */
  let revokeCaId: string
  let role: string
  let validCsr: Buffer
  const violations: Violation[] = []
  let caseNo = 0
  const seen = new Map<string, number>()

  before(async () => {
    const ca = await call('POST', '/cas', {
      name: 'fuzz-root',
      type: 'root',
      algorithm: 'EC-P256',
      subject: { commonName: 'Fuzz Root' },
    })
    assert.equal(ca.status, 201, ca.text)
    caId = ca.body.id
    caCertificate = pemToDer(ca.body.certificate)
    const pending = await call('POST', '/cas', {
      name: 'fuzz-pending',
      type: 'intermediate',
      algorithm: 'Ed25519',
      subject: { commonName: 'Fuzz Pending' },
    })
    assert.equal(pending.status, 201, pending.text)
    pendingId = pending.body.id
    const revokeCa = await call('POST', '/cas', {
      name: 'fuzz-revocations',
      type: 'root',
      algorithm: 'EC-P256',
      subject: { commonName: 'Fuzz Revocations' },
    })
    assert.equal(revokeCa.status, 201, revokeCa.text)
    revokeCaId = revokeCa.body.id
    role = 'fuzz'
    const created = await call('POST', `/cas/${caId}/roles`, {
      name: role,
      allowedDomains: ['example.com'],
      allowSubdomains: true,
      allowIpSans: true,
      allowWildcardCertificates: true,
    })
    assert.equal(created.status, 201, created.text)
    const algorithm = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' }
    const keys = (await webcrypto.subtle.generateKey(algorithm, true, [
      'sign',
      'verify',
    ])) as webcrypto.CryptoKeyPair
    const csr = await x509.Pkcs10CertificateRequestGenerator.create({
      name: 'CN=fuzz.example.com',
      keys,
      signingAlgorithm: algorithm,
      extensions: [new x509.SubjectAlternativeNameExtension([{ type: 'dns', value: 'fuzz.example.com' }])],
    })
    validCsr = Buffer.from(csr.rawData)
  })

  /** Sends `count` seeded cases of one route, recording every answer that breaks the invariant. */
  async function fuzz(
    route: string,
    count: number,
    make: (rng: Rng) => { method: string; path: string; body?: unknown; raw?: string },
  ) {
    const rng = new Rng(SEED ^ hash(route))
    const cases = Array.from({ length: count }, () => ({ no: ++caseNo, ...make(rng) }))
    await mapConcurrently(cases, CONCURRENCY, async (c) => {
      const res = await call(c.method, c.path, c.body, c.raw)
      const key = `${route} ${res.status} ${res.body?.error ?? ''}`
      seen.set(key, (seen.get(key) ?? 0) + 1)
      const broken = violation(res)
      if (broken)
        violations.push({
          caseNo: c.no,
          route: `${c.method} ${c.path}`,
          status: res.status,
          body: (c.raw ?? JSON.stringify(c.body) ?? 'undefined').slice(0, 300),
          answer: `${broken}: ${res.text.slice(0, 200)}`,
        })
    })
  }

  function hash(text: string): number {
    let h = 0
    for (const ch of text) h = (Math.imul(h, 31) + ch.charCodeAt(0)) >>> 0
    return h
  }

  test('POST /cas', async () => {
    let n = 0
    await fuzz('POST /cas', CASES_PER_ROUTE, (rng) => ({
      method: 'POST',
      path: '/cas',
      body: mutate(
        rng,
        {
          name: `fz-${n++}-${rng.fromAlphabet(6, 'abcdef')}`,
          type: 'root',
          // The cheap algorithms: a valid body makes a key and signs twice.
          algorithm: rng.pick(['EC-P256', 'Ed25519', 'ML-DSA-44']),
          subject: { commonName: 'Fuzz CA' },
        },
        {
          subject: () => ({ commonName: junk(rng), country: junk(rng), organization: junk(rng) }),
          nameConstraints: () => ({ permittedDnsDomains: junk(rng), excludedIpRanges: junk(rng) }),
          parentId: () => rng.pick([caId, pendingId, rng.uuid()]),
          keyId: () => rng.uuid(),
          validityDays: () => rng.pick([0, 1, 729, 730, 3650, 3651, -5, 1.5]),
          pathLength: () => rng.pick([-1, 0, 10, 11, 'x']),
          crlDistributionPoints: () => [
            rng.pick(['ftp://x', 'http://ok.example.com/c.crl', 'javascript:1', '']),
          ],
          type: () => rng.pick(['root', 'intermediate', 'leaf', '']),
        },
      ),
    }))
  })

  test('POST /cas/{id}/roles and PATCH', async () => {
    let n = 0
    const special = (rng: Rng) => ({
      allowedDomains: () => junk(rng),
      allowedKeyAlgorithms: () => [rng.pick(['EC-P256', 'RSA-1024', 'ML-KEM-768', '', 'X'])],
      keyUsage: () => [rng.pick(['digitalSignature', 'keyCertSign', 'cRLSign', 'decipherOnly'])],
      extKeyUsage: () => [rng.pick(['serverAuth', 'anyExtendedKeyUsage', '1.2.3'])],
      ttlSeconds: () => rng.pick([0, 299, 300, 86_400 * 398, 86_400 * 399, -1]),
      maxTtlSeconds: () => rng.pick([0, 299, 300, 86_400 * 398, 86_400 * 399]),
      notAfterBehavior: () => rng.pick(['error', 'truncate', 'permit']),
      name: () => rng.pick(['', '.a', 'a/b', 'x'.repeat(101), '../../etc', 'ok-name']),
    })
    await fuzz('POST /cas/{id}/roles', CASES_PER_ROUTE, (rng) => ({
      method: 'POST',
      path: `/cas/${rng.chance(0.9) ? caId : rng.pick([pendingId, rng.uuid(), 'not-a-uuid'])}/roles`,
      body: mutate(
        rng,
        { name: `r${n++}`, allowedDomains: ['example.com'], allowSubdomains: true },
        special(rng),
      ),
    }))
    await fuzz('PATCH /cas/{id}/roles/{name}', CASES_PER_ROUTE / 2, (rng) => ({
      method: 'PATCH',
      path: `/cas/${caId}/roles/${rng.chance(0.8) ? role : encodeURIComponent(rng.unicode(5).toWellFormed())}`,
      body: mutate(rng, { allowIpSans: true, ttlSeconds: 3600 }, special(rng)),
    }))
  })

  test('POST /certificates', async () => {
    await fuzz('POST /certificates', CASES_PER_ROUTE * 2, (rng) => {
      const withCsr = rng.chance(0.5)
      return {
        method: 'POST',
        path: '/certificates',
        body: mutate(
          rng,
          withCsr
            ? { caId, role, csr: toPem(validCsr, 'CERTIFICATE REQUEST') }
            : { caId, role, dnsNames: ['a.example.com'], keyAlgorithm: 'EC-P256' },
          {
            csr: () => mangledPem(rng, validCsr, 'CERTIFICATE REQUEST'),
            dnsNames: () => junk(rng),
            ipAddresses: () => [junk(rng)],
            commonName: () => junk(rng),
            // Cheap keys: a valid body generates one.
            keyAlgorithm: () => rng.pick(['EC-P256', 'Ed25519', 'ML-KEM-512', 'RSA-1024', 'DSA', '']),
            ttlSeconds: () => rng.pick([0, 299, 300, 86_400 * 398, 86_400 * 399, 2 ** 53]),
            caId: () => rng.pick([pendingId, rng.uuid(), 'x']),
            role: () => rng.pick(['nope', '', 'fuzz', '..']),
          },
        ),
      }
    })
  })

  test('POST /cas/{id}/certificate (import) and PATCH /cas/{id}', async () => {
    await fuzz('POST /cas/{id}/certificate', CASES_PER_ROUTE, (rng) => ({
      method: 'POST',
      path: `/cas/${rng.chance(0.8) ? pendingId : caId}/certificate`,
      body: mutate(
        rng,
        { certificate: toPem(caCertificate, 'CERTIFICATE'), chain: [toPem(caCertificate, 'CERTIFICATE')] },
        {
          certificate: () => mangledPem(rng, caCertificate, 'CERTIFICATE'),
          chain: () =>
            Array.from({ length: rng.pick([1, 2, 9]) }, () => mangledPem(rng, caCertificate, 'CERTIFICATE')),
        },
      ),
    }))
    await fuzz('PATCH /cas/{id}', CASES_PER_ROUTE / 2, (rng) => ({
      method: 'PATCH',
      path: `/cas/${rng.pick([caId, pendingId, rng.uuid()])}`,
      body: mutate(
        rng,
        { crlDistributionPoints: ['http://crl.example.com/a.crl'] },
        {
          crlDistributionPoints: () => junk(rng),
          issuingCertificateUrls: () => [
            rng.pick(['http://a', `http://${'x'.repeat(3000)}`, 'https://ok.example.com/c']),
          ],
        },
      ),
    }))
  })

  test('POST /certificates/{serial}/revoke and GET /certificates', async () => {
    await fuzz('POST /certificates/{serial}/revoke', CASES_PER_ROUTE, (rng) => ({
      method: 'POST',
      path: `/certificates/${encodeURIComponent(
        rng.pick([
          rng.fromAlphabet(rng.range(1, 59), '0123456789abcdefABCDEF:'),
          rng.fromAlphabet(rng.range(1, 80), '0123456789abcdef'),
          rng.unicode(4).toWellFormed(),
          '00',
          '%00',
        ]),
      )}/revoke`,
      body: mutate(
        rng,
        { reason: 'keyCompromise', caId: revokeCaId },
        {
          reason: () => rng.pick(['certificateHold', 'removeFromCRL', 'aACompromise', 'unspecified', 7]),
        },
      ),
    }))
    await fuzz('GET /certificates', CASES_PER_ROUTE / 2, (rng) => {
      const params = new URLSearchParams()
      for (const name of ['caId', 'status', 'expiringWithinDays', 'limit', 'offset', 'extra'])
        if (rng.chance(0.5)) params.set(name, String(junk(rng)).slice(0, 200))
      return { method: 'GET', path: `/certificates?${params}` }
    })
    await fuzz('raw JSON', CASES_PER_ROUTE / 4, (rng) => ({
      method: 'POST',
      path: rng.pick(['/cas', '/certificates', `/cas/${caId}/roles`]),
      raw: rng.pick([
        '{',
        '[]',
        '{"a":1}}',
        '"x"',
        'null',
        `{"caId":"${caId}","role":`,
        '\u0000',
        '{"x":1e999999}',
      ]),
    }))
  })

  test('no answer broke the invariant, and the service still issues and publishes its CRL', async () => {
    const issued = await call('POST', '/certificates', { caId, role, dnsNames: ['after.example.com'] })
    assert.equal(issued.status, 201, issued.text)
    const revoked = await call('POST', `/certificates/${issued.body.serial}/revoke`, { reason: 'superseded' })
    assert.equal(revoked.status, 200, revoked.text)
    const response = await fetch(new URL(`/api/v1/cas/${caId}/crl`, svc.baseUrl))
    assert.equal(response.status, 200)
    const crl = new x509.X509Crl(Buffer.from(await response.arrayBuffer()))
    const caCert = new x509.X509Certificate(caCertificate)
    assert.ok(await crl.verify({ publicKey: caCert }))
    assert.ok(crl.entries.some((e) => e.serialNumber.toLowerCase().endsWith(issued.body.serial)))
    assert.equal(({} as Record<string, unknown>)['polluted'], undefined, 'Object.prototype is untouched')

    const summary = [...seen.entries()].sort().map(([k, v]) => `${k} ×${v}`)
    assert.deepEqual(
      violations.sort((a, b) => a.caseNo - b.caseNo),
      [],
      `seed=${SEED} (reproduce: FUZZ_SEED=${SEED}); ${caseNo} cases; answers:\n${summary.join('\n')}`,
    )
  })
})
