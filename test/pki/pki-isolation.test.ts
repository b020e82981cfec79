import assert from 'node:assert/strict'
import { generateKeyPairSync, X509Certificate } from 'node:crypto'
import { after, before, describe, test } from 'node:test'
import { uniqueName } from '../helpers/api-client.ts'
import { type ManualClock, manualClock } from '../helpers/manual-clock.ts'
import {
  type HttpResult,
  startTestService,
  type TenantWithKey,
  type TestService,
  waitFor,
} from '../helpers/service.ts'

/**
 * X.509 CAs between tenants and API keys (issue 36): another tenant's CA, roles and certificates
 * are 404 on every route and cannot be touched; scopes (certificates:read / certificates:write)
 * and API-key restrictions (keys, operations) hold for issuance and revocation, which sign with
 * the CA's key; a CA key is never exportable and only the tenant's own Signing keys may become
 * one; issuance and revocation are audited on the CA key without any key material, and counted
 * by billing; one tenant's revocations cannot stop another tenant's CRLs being refreshed.
 * One service with the background jobs and a manual clock, which moves only in the last describe.
 */

const HOUR_MS = 3_600_000
const NO_SUCH_ID = '00000000-0000-4000-8000-000000000000'

let svc: TestService
let clock: ManualClock
/** `owner` holds the CA under test; `stranger` is the other tenant. */
let owner: TenantWithKey
let stranger: TenantWithKey

before(async () => {
  // Near the wall clock: billing files usage under the audit record's own (wall-clock) month.
  clock = manualClock(new Date(Math.floor(Date.now() / 1000) * 1000))
  svc = await startTestService({ KMS_JOB_SWEEP_MS: '200' }, { clock, jobs: true })
  owner = await svc.createTenant()
  stranger = await svc.createTenant()
})
after(async () => svc?.stop())

// ---- helpers ----------------------------------------------------------------------------------

const call = (method: string, path: string, body: unknown, by: TenantWithKey | string) =>
  svc.request(method, `/api/v1${path}`, {
    key: typeof by === 'string' ? by : by.key,
    ...(body === undefined ? {} : { body }),
  })

function expectStatus(res: HttpResult, status: number, what: string): HttpResult {
  assert.equal(res.status, status, `${what}: ${res.status} ${res.text.slice(0, 400)}`)
  return res
}

function expectRefusal(res: HttpResult, status: number, code: string, what: string): void {
  expectStatus(res, status, what)
  assert.equal(res.body?.error, code, `${what}: ${res.text}`)
}

interface Ca {
  id: string
  keyId: string
  certificate: string
}

async function createCa(by: TenantWithKey, extra: Record<string, unknown> = {}): Promise<Ca> {
  const res = await call(
    'POST',
    '/cas',
    {
      name: uniqueName('ca'),
      type: 'root',
      algorithm: 'EC-P256',
      subject: { commonName: 'Iso CA' },
      ...extra,
    },
    by,
  )
  return expectStatus(res, 201, 'create CA').body
}

async function createRole(caId: string, by: TenantWithKey, extra: Record<string, unknown> = {}) {
  const name = uniqueName('role')
  const res = await call(
    'POST',
    `/cas/${caId}/roles`,
    { name, allowedDomains: ['example.com'], allowSubdomains: true, ...extra },
    by,
  )
  expectStatus(res, 201, 'create role')
  return name
}

async function issue(
  caId: string,
  role: string,
  by: TenantWithKey | string,
  extra: Record<string, unknown> = {},
) {
  const res = await call(
    'POST',
    '/certificates',
    { caId, role, dnsNames: [`${uniqueName('h')}.example.com`], ...extra },
    by,
  )
  return expectStatus(res, 201, 'issue').body as { serial: string; certificate: string; privateKey?: string }
}

/** An API key of `by`'s tenant with the given scopes and restrictions. */
async function apiKey(by: TenantWithKey, body: Record<string, unknown>): Promise<string> {
  const res = await call('POST', '/api-keys', { name: uniqueName('limited'), ...body }, by)
  return expectStatus(res, 201, `create API key ${JSON.stringify(body)}`).body.key
}

async function certificateStatus(serial: string, by: TenantWithKey): Promise<string> {
  return expectStatus(await call('GET', `/certificates/${serial}`, undefined, by), 200, 'GET certificate')
    .body.status
}

/** The serials on a CA's public CRL and its number (parsed with node:crypto-independent slicing). */
async function crlOf(caId: string): Promise<{ number: bigint; der: Buffer }> {
  const response = await fetch(new URL(`/api/v1/cas/${caId}/crl`, svc.baseUrl))
  assert.equal(response.status, 200, `CRL of ${caId}`)
  const der = Buffer.from(await response.arrayBuffer())
  // cRLNumber: extnID 2.5.29.20 (06 03 55 1d 14), then an OCTET STRING holding the INTEGER.
  const at = der.indexOf(Buffer.from('0603551d14', 'hex'))
  assert.ok(at > 0, 'the CRL has a cRLNumber')
  const integer = der.subarray(at + 5 + 2)
  assert.equal(integer[0], 0x02)
  return { number: BigInt(`0x${integer.subarray(2, 2 + integer[1]!).toString('hex')}`), der }
}

const listsSerial = (crl: { der: Buffer }, serial: string) => crl.der.includes(Buffer.from(serial, 'hex'))

// =================================================================================================

describe('another tenant’s CA, roles and certificates are 404 on every route', () => {
  let theirs: Ca
  let theirRole: string
  let theirCert: { serial: string }
  let theirPending: Ca
  let mine: Ca

  before(async () => {
    theirs = await createCa(stranger)
    theirRole = await createRole(theirs.id, stranger)
    theirCert = await issue(theirs.id, theirRole, stranger)
    theirPending = await createCa(stranger, { type: 'intermediate', subject: { commonName: 'Pending' } })
    mine = await createCa(owner)
  })

  test('every route naming their CA, role or serial answers as for an id that does not exist', async () => {
    const cases: Array<[string, string, unknown, string]> = [
      ['GET', `/cas/${theirs.id}`, undefined, 'ca_not_found'],
      [
        'PATCH',
        `/cas/${theirs.id}`,
        { crlDistributionPoints: ['http://evil.example.com/x.crl'] },
        'ca_not_found',
      ],
      ['POST', `/cas/${theirPending.id}/certificate`, { certificate: theirs.certificate }, 'ca_not_found'],
      ['GET', `/cas/${theirs.id}/roles`, undefined, 'ca_not_found'],
      ['POST', `/cas/${theirs.id}/roles`, { name: 'mine', allowAnyName: true }, 'ca_not_found'],
      ['GET', `/cas/${theirs.id}/roles/${theirRole}`, undefined, 'ca_not_found'],
      ['PATCH', `/cas/${theirs.id}/roles/${theirRole}`, { allowAnyName: true }, 'ca_not_found'],
      ['DELETE', `/cas/${theirs.id}/roles/${theirRole}`, undefined, 'ca_not_found'],
      [
        'POST',
        '/certificates',
        { caId: theirs.id, role: theirRole, dnsNames: ['a.example.com'] },
        'ca_not_found',
      ],
      ['GET', `/certificates/${theirCert.serial}`, undefined, 'certificate_not_found'],
      [
        'POST',
        `/certificates/${theirCert.serial}/revoke`,
        { reason: 'keyCompromise' },
        'certificate_not_found',
      ],
      ['POST', `/certificates/${theirCert.serial}/revoke`, { caId: theirs.id }, 'ca_not_found'],
      [
        'POST',
        '/cas',
        { name: uniqueName('sub'), type: 'intermediate', parentId: theirs.id, subject: { commonName: 'x' } },
        'ca_not_found',
      ],
    ]
    for (const [method, path, body, code] of cases) {
      const res = await call(method, path, body, owner)
      expectRefusal(res, 404, code, `${method} ${path}`)
      // The same answer as for an id that exists nowhere: nothing tells theirs from none.
      const unknownPath = path.replaceAll(theirs.id, NO_SUCH_ID).replaceAll(theirPending.id, NO_SUCH_ID)
      const unknownBody =
        body && typeof body === 'object'
          ? JSON.parse(JSON.stringify(body).replaceAll(theirs.id, NO_SUCH_ID))
          : body
      const none = await call(
        method,
        unknownPath.replace(theirCert.serial, '7f0011223344'),
        unknownBody,
        owner,
      )
      assert.equal(none.status, 404, `${method} ${unknownPath}`)
      assert.equal(none.body.error, res.body.error, `${method} ${path}: the same code as for nothing`)
    }
  })

  test('their CA, role and certificate are unchanged, and none of it shows in my lists', async () => {
    const ca = expectStatus(await call('GET', `/cas/${theirs.id}`, undefined, stranger), 200, 'theirs').body
    assert.deepEqual(ca.crlDistributionPoints, [`${ca.crlDistributionPoints[0]}`])
    assert.ok(!ca.crlDistributionPoints[0].includes('evil'))
    const role = expectStatus(
      await call('GET', `/cas/${theirs.id}/roles/${theirRole}`, undefined, stranger),
      200,
      'their role',
    ).body
    assert.equal(role.allowAnyName, false)
    const roles = expectStatus(
      await call('GET', `/cas/${theirs.id}/roles`, undefined, stranger),
      200,
      'roles',
    )
    assert.deepEqual(
      roles.body.data.map((r: { name: string }) => r.name),
      [theirRole],
    )
    assert.equal(await certificateStatus(theirCert.serial, stranger), 'valid')
    const pending = expectStatus(await call('GET', `/cas/${theirPending.id}`, undefined, stranger), 200, 'p')
    assert.equal(pending.body.status, 'pending')

    const myCas = expectStatus(await call('GET', '/cas?limit=1000', undefined, owner), 200, 'my CAs').body
    assert.ok(myCas.data.every((c: Ca) => c.id !== theirs.id && c.id !== theirPending.id))
    const mine = expectStatus(
      await call('GET', `/certificates?caId=${theirs.id}`, undefined, owner),
      200,
      'my list filtered by their CA',
    ).body
    assert.deepEqual(mine.data, [])
    assert.equal(mine.total, 0)
    const all = expectStatus(await call('GET', '/certificates?limit=1000', undefined, owner), 200, 'all').body
    assert.ok(all.data.every((c: { serial: string }) => c.serial !== theirCert.serial))
  })

  test('revoking their serial under my own CA lists it on my CRL only; theirs stays valid', async () => {
    const revoked = expectStatus(
      await call(
        'POST',
        `/certificates/${theirCert.serial}/revoke`,
        { caId: mine.id, reason: 'keyCompromise' },
        owner,
      ),
      200,
      'revoke their serial under my CA',
    ).body
    assert.equal(revoked.stored, false, 'not a certificate of mine')
    assert.equal(revoked.caId, mine.id)
    assert.ok(listsSerial(await crlOf(mine.id), theirCert.serial), 'on my CRL (it names my CA as issuer)')
    assert.ok(!listsSerial(await crlOf(theirs.id), theirCert.serial), 'not on theirs')
    assert.equal(await certificateStatus(theirCert.serial, stranger), 'valid')
  })
})

describe('scopes: certificates:read reads, certificates:write changes', () => {
  let ca: Ca
  let role: string
  let serial: string
  let readOnly: string
  let noCertificates: string

  before(async () => {
    ca = await createCa(owner)
    role = await createRole(ca.id, owner)
    serial = (await issue(ca.id, role, owner)).serial
    readOnly = await apiKey(owner, { scopes: ['certificates:read'] })
    noCertificates = await apiKey(owner, { scopes: ['keys:read', 'keys:write'] })
  })

  test('a certificates:read key reads everything and changes nothing (403)', async () => {
    for (const path of [
      '/cas',
      `/cas/${ca.id}`,
      `/cas/${ca.id}/roles`,
      `/cas/${ca.id}/roles/${role}`,
      '/certificates',
      `/certificates/${serial}`,
    ])
      expectStatus(await call('GET', path, undefined, readOnly), 200, `GET ${path}`)
    const writes: Array<[string, string, unknown]> = [
      [
        'POST',
        '/cas',
        { name: uniqueName('ro'), type: 'root', algorithm: 'EC-P256', subject: { commonName: 'x' } },
      ],
      ['PATCH', `/cas/${ca.id}`, { issuingCertificateUrls: ['http://x.example.com/ca.crt'] }],
      ['POST', `/cas/${ca.id}/certificate`, { certificate: ca.certificate }],
      ['POST', `/cas/${ca.id}/roles`, { name: uniqueName('ro') }],
      ['PATCH', `/cas/${ca.id}/roles/${role}`, { allowAnyName: true }],
      ['DELETE', `/cas/${ca.id}/roles/${role}`, undefined],
      ['POST', '/certificates', { caId: ca.id, role, dnsNames: ['ro.example.com'] }],
      ['POST', `/certificates/${serial}/revoke`, { reason: 'keyCompromise' }],
    ]
    for (const [method, path, body] of writes) {
      const res = await call(method, path, body, readOnly)
      expectRefusal(res, 403, 'insufficient_scope', `${method} ${path} with certificates:read`)
    }
    assert.equal(await certificateStatus(serial, owner), 'valid')
    const roles = expectStatus(await call('GET', `/cas/${ca.id}/roles`, undefined, owner), 200, 'roles').body
    assert.deepEqual(
      roles.data.map((r: { name: string; allowAnyName: boolean }) => [r.name, r.allowAnyName]),
      [[role, false]],
    )
  })

  test('a key without certificate scopes cannot even read (403)', async () => {
    for (const path of ['/cas', `/cas/${ca.id}`, '/certificates', `/certificates/${serial}`])
      expectRefusal(
        await call('GET', path, undefined, noCertificates),
        403,
        'insufficient_scope',
        `GET ${path}`,
      )
  })
})

describe('API keys restricted to keys or operations', () => {
  let ca: Ca
  let role: string
  let otherKey: string

  before(async () => {
    ca = await createCa(owner)
    role = await createRole(ca.id, owner)
    const res = await call(
      'POST',
      '/keys',
      { name: uniqueName('other'), keyType: 'Signing', algorithm: 'EC-P256' },
      owner,
    )
    otherKey = expectStatus(res, 201, 'another Signing key').body.id
  })

  const scopes = ['certificates:read', 'certificates:write']
  const countIssued = async () =>
    expectStatus(await call('GET', `/certificates?caId=${ca.id}`, undefined, owner), 200, 'list').body.total

  test('a key restricted to other keys cannot issue from the CA: 403 key_not_allowed, nothing issued', async () => {
    const restricted = await apiKey(owner, { scopes, keys: [otherKey] })
    const before = await countIssued()
    const res = await call(
      'POST',
      '/certificates',
      { caId: ca.id, role, dnsNames: ['r.example.com'] },
      restricted,
    )
    expectRefusal(res, 403, 'key_not_allowed', 'issue with a key restricted to another key')
    assert.equal(await countIssued(), before)
  })

  test('a key restricted to other keys cannot revoke the CA’s certificates: 403, the certificate stays valid', async () => {
    const restricted = await apiKey(owner, { scopes, keys: [otherKey] })
    const { serial } = await issue(ca.id, role, owner)
    const crlBefore = await crlOf(ca.id)
    const res = await call('POST', `/certificates/${serial}/revoke`, { reason: 'keyCompromise' }, restricted)
    expectRefusal(res, 403, 'key_not_allowed', 'revoke with a key restricted to another key')
    assert.equal(await certificateStatus(serial, owner), 'valid', 'a refused revocation revokes nothing')
    const [row] = await svc.sql<{ n: string }[]>`
      SELECT count(*)::text AS n FROM certificate_revocations WHERE serial = ${serial}`
    assert.equal(row!.n, '0', 'no revocation is kept for the CRL')
    assert.ok(!listsSerial(await crlOf(ca.id), serial))
    assert.ok((await crlOf(ca.id)).number >= crlBefore.number)
  })

  test('a key restricted to operations without sign cannot issue (403 operation_not_allowed)', async () => {
    const encryptOnly = await apiKey(owner, { scopes, operations: ['encrypt', 'verify'] })
    const res = await call(
      'POST',
      '/certificates',
      { caId: ca.id, role, dnsNames: ['o.example.com'] },
      encryptOnly,
    )
    expectRefusal(res, 403, 'operation_not_allowed', 'issue with an encrypt-only key')
  })

  test('a key restricted to the CA’s key (and sign) issues and revokes', async () => {
    const allowed = await apiKey(owner, { scopes, keys: [ca.keyId], operations: ['sign'] })
    const issued = await issue(ca.id, role, allowed)
    expectStatus(
      await call('POST', `/certificates/${issued.serial}/revoke`, { reason: 'superseded' }, allowed),
      200,
      'revoke with the CA key allowed',
    )
    assert.equal(await certificateStatus(issued.serial, owner), 'revoked')
  })

  test('a restricted key creating a CA on a new key is refused and leaves no key behind', async () => {
    const restricted = await apiKey(owner, { scopes, keys: [otherKey] })
    const name = uniqueName('restricted-ca')
    const res = await call(
      'POST',
      '/cas',
      { name, type: 'root', algorithm: 'EC-P256', subject: { commonName: 'Restricted' } },
      restricted,
    )
    expectStatus(res, 403, 'CA creation by a key restricted to another key')
    const [keys] = await svc.sql<{ n: string }[]>`
      SELECT count(*)::text AS n FROM keys WHERE tenant_id = ${owner.tenantId} AND name = ${`pki-ca-${name}`}`
    assert.equal(keys!.n, '0', 'no orphan CA key is left in the tenant')
    const cas = expectStatus(await call('GET', '/cas?limit=1000', undefined, owner), 200, 'CAs').body
    assert.ok(cas.data.every((c: { name: string }) => c.name !== name))
  })
})

describe('CA keys: only the tenant’s own non-exportable Signing keys, never exported', () => {
  const createKey = async (by: TenantWithKey, body: Record<string, unknown>) => {
    const res = await call(
      'POST',
      '/keys',
      { name: uniqueName('k'), keyType: 'Signing', algorithm: 'EC-P256', ...body },
      by,
    )
    return expectStatus(res, 201, `create key ${JSON.stringify(body)}`).body as { id: string; name: string }
  }
  const caOnKey = (keyId: string, extra: Record<string, unknown> = {}) =>
    call(
      'POST',
      '/cas',
      { name: uniqueName('onkey'), type: 'root', subject: { commonName: 'On key' }, keyId, ...extra },
      owner,
    )

  test('an exportable key, an Encryption key, a public-only key, a mismatched algorithm: 400 on keyId', async () => {
    const exportable = await createKey(owner, { exportable: true })
    const encryption = await createKey(owner, { keyType: 'Encryption', algorithm: 'ML-KEM-768' })
    const { publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' })
    const imported = expectStatus(
      await call(
        'POST',
        '/keys/import',
        {
          name: uniqueName('pub'),
          keyType: 'Signing',
          algorithm: 'EC-P256',
          format: 'PEM',
          keyMaterial: publicKey.export({ type: 'spki', format: 'pem' }),
          publicOnly: true,
        },
        owner,
      ),
      201,
      'public-only import',
    ).body
    for (const [label, keyId] of [
      ['exportable', exportable.id],
      ['Encryption', encryption.id],
      ['public-only', imported.id],
    ] as const) {
      const res = await caOnKey(keyId)
      expectRefusal(res, 400, 'validation_failed', `a CA on an ${label} key`)
      assert.equal(res.body.fields?.[0]?.path, 'keyId', `${label}: ${res.text}`)
    }
    const plain = await createKey(owner, {})
    const mismatch = await caOnKey(plain.id, { algorithm: 'ML-DSA-65' })
    expectRefusal(mismatch, 400, 'validation_failed', 'algorithm and key disagree')
    assert.equal(mismatch.body.fields?.[0]?.path, 'algorithm')
  })

  test('another tenant’s key is 404, and no CA is made on it', async () => {
    const theirKey = await createKey(stranger, {})
    const res = await caOnKey(theirKey.id)
    expectRefusal(res, 404, 'key_not_found', 'a CA on another tenant’s key')
    const [row] = await svc.sql<{ n: string }[]>`
      SELECT count(*)::text AS n FROM certificate_authorities WHERE key_id = ${theirKey.id}`
    assert.equal(row!.n, '0')
  })

  test('a CA on my own non-exportable key signs with it; its key cannot be exported (409)', async () => {
    const key = await createKey(owner, { algorithm: 'EC-P384' })
    const ca = expectStatus(await caOnKey(key.id, { algorithm: 'EC-P384' }), 201, 'CA on my key').body as Ca
    assert.equal(ca.keyId, key.id)
    const pub = expectStatus(
      await call('GET', `/keys/${key.id}/public?format=PEM`, undefined, owner),
      200,
      'the key’s public key',
    )
    const certified = new X509Certificate(ca.certificate).publicKey.export({ type: 'spki', format: 'pem' })
    assert.equal(
      pub.body.publicKey.trim(),
      certified.toString().trim(),
      'the CA certificate certifies the key',
    )
    for (const keyId of [key.id, (await createCa(owner)).keyId]) {
      const got = expectStatus(await call('GET', `/keys/${keyId}`, undefined, owner), 200, 'GET key').body
      assert.equal(got.exportable, false)
      const res = await call(
        'POST',
        `/keys/${keyId}/export-private`,
        { confirm: got.name, format: 'PEM' },
        owner,
      )
      expectRefusal(res, 409, 'key_not_exportable', 'export of a CA key')
      assert.ok(!res.text.includes('PRIVATE KEY'))
    }
  })

  test('a CA on a key, the algorithm not named, takes the key’s algorithm', async () => {
    const key = await createKey(owner, { algorithm: 'Ed25519' })
    const ca = expectStatus(await caOnKey(key.id), 201, 'CA on my key, no algorithm').body as Ca & {
      algorithm: string
    }
    assert.equal(ca.keyId, key.id)
    assert.equal(ca.algorithm, 'Ed25519')
  })

  test('the CA key cannot be rotated (its certificate certifies one version); revoked: 409, never a 5xx', async () => {
    const ca = await createCa(owner)
    const role = await createRole(ca.id, owner)
    const rotated = await call('POST', `/keys/${ca.keyId}/rotate`, {}, owner)
    expectRefusal(rotated, 409, 'key_reserved', 'rotate the CA key')
    const policy = await call('POST', `/keys/${ca.keyId}/rotation-policy`, { frequency: 'Yearly' }, owner)
    expectRefusal(policy, 409, 'key_reserved', 'a rotation policy on the CA key')
    const leaf = await issue(ca.id, role, owner)
    const caCert = new X509Certificate(ca.certificate)
    assert.ok(new X509Certificate(leaf.certificate).verify(caCert.publicKey), 'signed by the CA key')
    expectStatus(await call('POST', `/keys/${ca.keyId}/revoke`, {}, owner), 200, 'revoke the CA key')
    const res = await call('POST', '/certificates', { caId: ca.id, role, dnsNames: ['x.example.com'] }, owner)
    assert.ok(res.status === 409, `issuance on a revoked key: ${res.status} ${res.text}`)
    assert.equal(typeof res.body.error, 'string')
  })
})

describe('audit and billing', () => {
  let tenant: TenantWithKey
  let ca: Ca
  const leaves: Array<{ serial: string; certificate: string; privateKey?: string }> = []

  before(async () => {
    tenant = await svc.createTenant()
    ca = await createCa(tenant, { algorithm: 'ML-DSA-65' })
    const role = await createRole(ca.id, tenant)
    for (const keyAlgorithm of ['EC-P256', 'ML-KEM-768', 'Ed25519'])
      leaves.push(await issue(ca.id, role, tenant, { keyAlgorithm }))
    for (const leaf of leaves.slice(0, 2))
      expectStatus(
        await call('POST', `/certificates/${leaf.serial}/revoke`, { reason: 'keyCompromise' }, tenant),
        200,
        'revoke',
      )
    // A refusal: audited as a failure, not counted as usage.
    const refused = await call(
      'POST',
      '/certificates',
      { caId: ca.id, role, dnsNames: ['x.example.org'] },
      tenant,
    )
    expectRefusal(refused, 400, 'name_not_allowed', 'a refused issuance')
  })

  interface Row {
    action: string
    resource: string | null
    outcome: string
    key_version: number | null
    details: Record<string, unknown> | null
  }
  const records = () =>
    svc.sql<Row[]>`SELECT action, resource, outcome, key_version, details FROM audit_log
      WHERE tenant_id = ${tenant.tenantId} ORDER BY id`

  test('issue and revoke records name the CA key, the serial, and no key material', async () => {
    const rows = await records()
    const issues = rows.filter((r) => r.action === 'crypto.certificate_issue' && r.outcome === 'success')
    const revokes = rows.filter((r) => r.action === 'crypto.certificate_revoke' && r.outcome === 'success')
    for (const leaf of leaves) {
      const record = issues.find((r) => r.details?.['serial'] === leaf.serial)
      assert.ok(record, `an issue record for ${leaf.serial}`)
      assert.equal(record.resource, `key:${ca.keyId}`)
      assert.equal(record.key_version, 1)
      assert.equal(record.details?.['caId'], ca.id)
    }
    assert.deepEqual(
      revokes.map((r) => [r.resource, r.details?.['serial'], r.details?.['reason']]),
      leaves.slice(0, 2).map((l) => [`key:${ca.keyId}`, l.serial, 'keyCompromise']),
    )
    const failure = rows.find((r) => r.action === 'crypto.certificate_issue' && r.outcome === 'failure')
    assert.equal(failure?.details?.['error'], 'name_not_allowed')
    assert.equal(failure?.resource, `key:${ca.keyId}`)

    const everything = JSON.stringify(rows)
    assert.ok(!everything.includes('-----BEGIN'), 'no PEM in any record')
    for (const leaf of leaves) {
      const certificateBody = leaf.certificate.split('\n')[3]!
      assert.ok(!everything.includes(certificateBody), 'no certificate bytes in the records')
      if (leaf.privateKey) {
        const keyLine = leaf.privateKey.split('\n')[2]!
        assert.ok(!everything.includes(keyLine), 'no private key in the records')
      }
    }
  })

  test('billing counts certificate_issue and certificate_revoke (successes only)', async () => {
    const [last] = await svc.sql<{ id: string }[]>`SELECT coalesce(max(id), 0)::text AS id FROM audit_log`
    await waitFor(
      async () => {
        await svc.api.services.billing.foldUsage()
        const [cursor] = await svc.sql<{ position: string }[]>`
          SELECT position::text FROM audit_feed_cursors WHERE consumer = 'billing.usage'`
        return BigInt(cursor!.position) >= BigInt(last!.id)
      },
      'the usage fold',
      60_000,
    )
    const usage = expectStatus(await call('GET', '/billing/usage', undefined, tenant), 200, 'usage').body
    const month = usage.data.find(
      (m: { period: string }) => m.period === new Date().toISOString().slice(0, 7),
    )
    assert.ok(month, JSON.stringify(usage))
    // The root's self-signed certificate is an issuance by the CA key too: 1 + 3 leaves.
    assert.equal(month.operations.certificate_issue, 1 + leaves.length)
    assert.equal(month.operations.certificate_revoke, 2)
  })
})

describe('one tenant cannot stop another tenant’s CRLs (the clock moves 61 h)', () => {
  /** Serials no CRL can hold: zero, empty, over 20 octets. */
  const UNLISTABLE = ['00', '0000', '::', '7f'.repeat(21), 'ff'.repeat(25)]
  let theirs: Ca
  const answers: HttpResult[] = []

  before(async () => {
    // The stranger's CA is the oldest due: the sweep takes it before mine.
    theirs = await createCa(stranger)
    for (const serial of UNLISTABLE)
      answers.push(await call('POST', `/certificates/${serial}/revoke`, { caId: theirs.id }, stranger))
    clock.advance(60_000)
  })

  test('serials no CRL can hold are refused with a 400 on serial', () => {
    UNLISTABLE.forEach((serial, i) => {
      expectStatus(answers[i]!, 400, `revoke serial ${serial}`)
      assert.equal(answers[i]!.body.fields?.[0]?.path, 'serial', answers[i]!.text)
    })
  })

  test('their CA still publishes revocations afterwards', async () => {
    const theirLeaf = await issue(theirs.id, await createRole(theirs.id, stranger), stranger)
    expectStatus(
      await call('POST', `/certificates/${theirLeaf.serial}/revoke`, {}, stranger),
      200,
      'a valid revocation afterwards',
    )
    assert.ok(listsSerial(await crlOf(theirs.id), theirLeaf.serial))
  })

  test('61 h on, the sweep refreshes my CRL whatever the stranger revoked', async () => {
    const mine = await createCa(owner)
    const before = await crlOf(mine.id)
    clock.advance(61 * HOUR_MS)
    await waitFor(async () => (await crlOf(mine.id)).number > before.number, 'my CRL to be refreshed', 30_000)
  })
})
