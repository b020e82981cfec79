import assert from 'node:assert/strict'
import { X509Certificate } from 'node:crypto'
import { after, before, describe, test } from 'node:test'
import {
  type HttpResult,
  startTestService,
  type TenantWithKey,
  type TestService,
} from '../helpers/service.ts'

/**
 * What a CA's life does to what it may sign: the URLs its certificates carry are fixed by its
 * first issuance (a later change would leave two kinds of certificates in the field); an
 * intermediate whose certificate its parent revoked issues nothing more; a common name is always
 * in the SAN (TLS clients read names from the SAN only); the CRL sweep goes on past a CA that
 * cannot sign.
 */

let svc: TestService
let tenant: TenantWithKey

before(async () => {
  svc = await startTestService()
  tenant = await svc.createTenant()
})
after(async () => svc?.stop())

const call = (method: string, path: string, body?: unknown) =>
  svc.request(method, `/api/v1${path}`, { key: tenant.key, ...(body === undefined ? {} : { body }) })

function ok(res: HttpResult, status = 200): Record<string, unknown> & { id: string } {
  assert.equal(res.status, status, res.text)
  return res.body
}

const newCa = async (name: string, extra: object = {}) =>
  ok(
    await call('POST', '/cas', {
      name,
      type: 'root',
      algorithm: 'EC-P256',
      subject: { commonName: name },
      pathLength: 1,
      ...extra,
    }),
    201,
  ) as { id: string; keyId: string; certificate: string; firstIssuedAt: string | null }

/** A role `web` of the CA: names under example.com. */
const webRole = async (caId: string) =>
  ok(
    await call('POST', `/cas/${caId}/roles`, {
      name: 'web',
      allowedDomains: ['example.com'],
      allowSubdomains: true,
    }),
    201,
  )

describe('a CA over its life', () => {
  test('the CRL and issuer URLs change until the first issuance, then are fixed (409 ca_in_use)', async () => {
    const ca = await newCa('urls')
    assert.equal(ca.firstIssuedAt, null)
    const url = 'https://pki.example.com/crl/urls.crl'
    const changed = ok(await call('PATCH', `/cas/${ca.id}`, { crlDistributionPoints: [url] }))
    assert.deepEqual(changed['crlDistributionPoints'], [url])
    await webRole(ca.id)
    const leaf = ok(
      await call('POST', '/certificates', { caId: ca.id, role: 'web', dnsNames: ['a.example.com'] }),
      201,
    ) as unknown as { certificate: string }
    assert.ok(Buffer.from(new X509Certificate(leaf.certificate).raw).includes(Buffer.from(url)))
    const refused = await call('PATCH', `/cas/${ca.id}`, {
      crlDistributionPoints: ['https://elsewhere.example/x.crl'],
    })
    assert.equal(refused.status, 409, refused.text)
    assert.equal(refused.body.error, 'ca_in_use')
    const after = ok(await call('GET', `/cas/${ca.id}`))
    assert.equal(typeof after['firstIssuedAt'], 'string')
    assert.deepEqual(after['crlDistributionPoints'], [url])
  })

  test('a leaf names the CA certificate and the CA’s OCSP responder in its AIA', async () => {
    const ca = await newCa('aia')
    await webRole(ca.id)
    const leaf = ok(
      await call('POST', '/certificates', { caId: ca.id, role: 'web', dnsNames: ['aia.example.com'] }),
      201,
    ) as unknown as { certificate: string }
    const ocspUrl = `${svc.baseUrl}/api/v1/cas/${ca.id}/ocsp`
    assert.equal(
      new X509Certificate(leaf.certificate).infoAccess,
      `OCSP - URI:${ocspUrl}\nCA Issuers - URI:${svc.baseUrl}/api/v1/cas/${ca.id}/certificate`,
    )
    assert.deepEqual(ok(await call('GET', `/cas/${ca.id}`))['ocspUrls'], [ocspUrl])
  })

  test('a common name is also in the SAN, once', async () => {
    const ca = await newCa('cn-in-san')
    await webRole(ca.id)
    const leaf = ok(
      await call('POST', '/certificates', {
        caId: ca.id,
        role: 'web',
        commonName: 'www.example.com',
        dnsNames: ['api.example.com', 'www.example.com'],
      }),
      201,
    ) as unknown as { certificate: string; dnsNames: string[] }
    // Named in dnsNames already: not twice, and in the order given.
    assert.equal(
      new X509Certificate(leaf.certificate).subjectAltName,
      'DNS:api.example.com, DNS:www.example.com',
    )
    assert.deepEqual(leaf.dnsNames, ['api.example.com', 'www.example.com'])
    const cnOnly = ok(
      await call('POST', '/certificates', { caId: ca.id, role: 'web', commonName: 'only.example.com' }),
      201,
    ) as unknown as { certificate: string }
    const cert = new X509Certificate(cnOnly.certificate)
    assert.equal(cert.subjectAltName, 'DNS:only.example.com')
    assert.ok(cert.checkHost('only.example.com'))
  })

  test('an intermediate whose certificate its parent revoked issues nothing more (409 ca_revoked)', async () => {
    const root = await newCa('revoking-parent')
    const child = ok(
      await call('POST', '/cas', {
        name: 'revoked-child',
        type: 'intermediate',
        algorithm: 'EC-P256',
        parentId: root.id,
        subject: { commonName: 'Revoked child' },
      }),
      201,
    ) as unknown as { id: string; certificate: string; status: string }
    assert.equal(child.status, 'active')
    await webRole(child.id)
    ok(await call('POST', '/certificates', { caId: child.id, role: 'web', dnsNames: ['b.example.com'] }), 201)

    const serial = new X509Certificate(child.certificate).serialNumber.toLowerCase()
    const listed = ok(await call('GET', `/certificates/${serial}`))
    assert.equal(listed['role'], 'intermediate-ca')
    ok(await call('POST', `/certificates/${serial}/revoke`, { reason: 'caCompromise' }))
    assert.equal(ok(await call('GET', `/cas/${child.id}`))['status'], 'revoked')
    const refused = await call('POST', '/certificates', {
      caId: child.id,
      role: 'web',
      dnsNames: ['c.example.com'],
    })
    assert.equal(refused.status, 409, refused.text)
    assert.equal(refused.body.error, 'ca_revoked')
    const grandchild = await call('POST', '/cas', {
      name: 'under-revoked',
      type: 'intermediate',
      algorithm: 'EC-P256',
      parentId: child.id,
      subject: { commonName: 'Under a revoked CA' },
    })
    assert.equal(grandchild.status, 409, grandchild.text)
    assert.equal(grandchild.body.error, 'ca_revoked')
    // The parent's CRL lists it.
    const crl = await fetch(`${svc.baseUrl}/api/v1/cas/${root.id}/crl`)
    assert.equal(crl.status, 200)
    assert.ok(Buffer.from(await crl.arrayBuffer()).includes(Buffer.from(serial, 'hex')))
  })

  test('the CRL sweep goes on past a CA whose key was revoked, and retries it later, not at every run', async () => {
    const broken = await newCa('key-revoked')
    const healthy = await newCa('healthy')
    ok(await call('POST', `/keys/${broken.keyId}/revoke`, {}))
    // Both CRLs are due now.
    await svc.sql`UPDATE certificate_authorities SET crl_stale = true WHERE id IN (${broken.id}, ${healthy.id})`
    const before = await svc.sql<{ id: string; crl_built_number: string }[]>`
      SELECT id, crl_built_number FROM certificate_authorities WHERE id IN (${broken.id}, ${healthy.id})`
    const sweep = svc.api.services.modules
      .flatMap((module) => module.jobs?.sweeps ?? [])
      .find((candidate) => candidate.name === 'crl-refresh-sweep')!
    const noQueue = { enqueue: async () => {} }
    const first = await sweep.run('job:test-1', noQueue)
    assert.ok(((first.details?.['failed'] as number) ?? 0) >= 1, JSON.stringify(first.details))
    const after = await svc.sql<{ id: string; crl_built_number: string; crl_retry_at: Date | null }[]>`
      SELECT id, crl_built_number, crl_retry_at FROM certificate_authorities WHERE id IN (${broken.id}, ${healthy.id})`
    const number = (rows: { id: string; crl_built_number: string }[], id: string) =>
      Number(rows.find((row) => row.id === id)!.crl_built_number)
    assert.ok(number(after, healthy.id) > number(before, healthy.id), 'the healthy CA got a new CRL')
    assert.equal(number(after, broken.id), number(before, broken.id))
    assert.ok(
      after.find((row) => row.id === broken.id)!.crl_retry_at,
      'the broken CA waits for its retry time',
    )
    // The next run does not try it again before its retry time.
    const second = await sweep.run('job:test-2', noQueue)
    assert.equal(second.details?.['failed'], 0, JSON.stringify(second.details))
  })
})
