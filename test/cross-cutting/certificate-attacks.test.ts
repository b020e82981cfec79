import 'reflect-metadata'
import assert from 'node:assert/strict'
import { generateKeyPairSync, webcrypto, X509Certificate } from 'node:crypto'
import { after, before, describe, test } from 'node:test'
import * as x509 from '@peculiar/x509'
import { uniqueName } from '../helpers/api-client.ts'
import {
  type HttpResult,
  startTestService,
  type TenantWithKey,
  type TestService,
} from '../helpers/service.ts'

/**
 * Attacks on the X.509 (src/pki) and SSH (src/ssh) certificate authorities that cross flows: the
 * CA key reached another way (keys, aliases, imports, the other CA kind), refusals that leave a
 * key reserved behind them, lower scopes reaching higher ones, races between CA creations and
 * between the first issuance and a PATCH, role rules fed odd names, and what the public routes
 * answer once the CA key is gone. Each test asserts the secure behaviour: a hole fails it.
 */

let svc: TestService
let owner: TenantWithKey

before(async () => {
  svc = await startTestService()
  owner = await svc.createTenant()
})
after(async () => svc?.stop())

// ---- helpers ----------------------------------------------------------------------------------

const call = (method: string, path: string, body: unknown, by: TenantWithKey | string = owner) =>
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
  assert.equal(res.body?.error, code, `${what}: ${res.text.slice(0, 400)}`)
}

async function signingKey(by: TenantWithKey, algorithm = 'EC-P256', extra: Record<string, unknown> = {}) {
  const res = await call(
    'POST',
    '/keys',
    { name: uniqueName('app'), keyType: 'Signing', algorithm, ...extra },
    by,
  )
  return expectStatus(res, 201, 'create Signing key').body as { id: string; name: string }
}

async function apiKey(by: TenantWithKey, body: Record<string, unknown>): Promise<string> {
  const res = await call('POST', '/api-keys', { name: uniqueName('limited'), ...body }, by)
  return expectStatus(res, 201, `create API key ${JSON.stringify(body)}`).body.key
}

const MESSAGE = Buffer.from('an application message').toString('base64')

/** What an ordinary key is for: /sign with it works (it was not left reserved for a CA). */
async function assertStillSigns(keyId: string, by: TenantWithKey, what: string): Promise<void> {
  const key = expectStatus(await call('GET', `/keys/${keyId}`, undefined, by), 200, 'GET key').body
  assert.equal(key.reservedFor, null, `${what}: the key is not left reserved (${key.reservedFor})`)
  expectStatus(await call('POST', '/sign', { keyId, message: MESSAGE }, by), 200, `${what}: /sign`)
}

const rootBody = (extra: Record<string, unknown> = {}) => ({
  name: uniqueName('ca'),
  type: 'root',
  algorithm: 'EC-P256',
  subject: { commonName: 'Attack Root' },
  ...extra,
})

async function createCa(by: TenantWithKey, extra: Record<string, unknown> = {}) {
  const res = await call('POST', '/cas', rootBody(extra), by)
  return expectStatus(res, 201, 'create CA').body as {
    id: string
    keyId: string
    certificate: string
    crlDistributionPoints: string[]
  }
}

async function createRole(caId: string, settings: Record<string, unknown>, by: TenantWithKey = owner) {
  const name = uniqueName('role')
  expectStatus(await call('POST', `/cas/${caId}/roles`, { name, ...settings }, by), 201, 'create role')
  return name
}

/** An ssh-ed25519 public key line made with node:crypto. */
function sshEd25519Line(): string {
  const { publicKey } = generateKeyPairSync('ed25519')
  const raw = Buffer.from(publicKey.export({ format: 'jwk' }).x!, 'base64url')
  const field = (b: Buffer) => {
    const length = Buffer.alloc(4)
    length.writeUInt32BE(b.length)
    return Buffer.concat([length, b])
  }
  const blob = Buffer.concat([field(Buffer.from('ssh-ed25519')), field(raw)])
  return `ssh-ed25519 ${blob.toString('base64')} attacker@host`
}

/** The CRL distribution point URLs a certificate carries, read by @peculiar/x509. */
function crlUrlsOf(pem: string): string[] {
  const cert = new x509.X509Certificate(pem)
  const ext = cert.getExtension(x509.CRLDistributionPointsExtension)
  if (!ext) return []
  return [...ext.distributionPoints].flatMap(
    (point) =>
      point.distributionPoint?.fullName?.flatMap((name) =>
        name.uniformResourceIdentifier ? [name.uniformResourceIdentifier] : [],
      ) ?? [],
  )
}

// =================================================================================================

describe('a refused CA creation leaves the key it named as it was (no stray reservation)', () => {
  test('X.509: a CA refused for its name constraints (host bits set) does not keep the key reserved', async () => {
    const key = await signingKey(owner)
    const res = await call(
      'POST',
      '/cas',
      rootBody({ keyId: key.id, nameConstraints: { permittedIpRanges: ['10.0.0.1/8'] } }),
    )
    expectStatus(res, 400, 'a CA with an IP range that has host bits set')
    await assertStillSigns(key.id, owner, 'after a CA creation refused with 400')
  })

  test('X.509: a CA refused for a C1 control character in its subject does not keep the key reserved', async () => {
    const key = await signingKey(owner)
    const res = await call(
      'POST',
      '/cas',
      rootBody({ keyId: key.id, subject: { commonName: 'Root', organization: 'Evil\u0085Corp' } }),
    )
    expectStatus(res, 400, 'a CA whose subject has a C1 control character')
    await assertStillSigns(key.id, owner, 'after a CA creation refused for its subject')
  })

  test('X.509: an intermediate refused because its parent’s key is revoked does not keep the key reserved', async () => {
    const parent = await createCa(owner)
    expectStatus(await call('POST', `/keys/${parent.keyId}/revoke`, {}), 200, 'revoke the parent key')
    const key = await signingKey(owner)
    const res = await call('POST', '/cas', {
      name: uniqueName('sub'),
      type: 'intermediate',
      parentId: parent.id,
      keyId: key.id,
      subject: { commonName: 'Sub' },
      validityDays: 30,
    })
    assert.ok(res.status >= 400 && res.status < 500, `refused, not a 5xx: ${res.status} ${res.text}`)
    await assertStillSigns(key.id, owner, 'after an intermediate refused for its parent’s key')
  })

  test('X.509: an API key restricted to operations without sign is refused before the key it names is reserved', async () => {
    const key = await signingKey(owner)
    const verifyOnly = await apiKey(owner, {
      scopes: ['certificates:read', 'certificates:write', 'keys:read'],
      operations: ['verify'],
    })
    const res = await call('POST', '/cas', rootBody({ keyId: key.id }), verifyOnly)
    expectStatus(res, 403, 'CA creation on keyId by a verify-only API key')
    await assertStillSigns(key.id, owner, 'after a CA creation a verify-only API key was refused')
  })

  test('X.509: a CA on a new key refused for its name constraints leaves no key, and the name can be used again', async () => {
    const body = rootBody({ nameConstraints: { permittedDnsDomains: ['a..example.com'] } })
    expectStatus(await call('POST', '/cas', body), 400, 'a CA with a malformed DNS constraint')
    const keyNamed = async () => {
      const [row] = await svc.sql<{ n: string }[]>`
        SELECT count(*)::text AS n FROM keys
        WHERE tenant_id = ${owner.tenantId} AND name LIKE ${`pki-ca-${body.name}-%`}`
      return row!.n
    }
    assert.equal(await keyNamed(), '0', 'the refusal made no key')
    // The mended request, same name: a stray key would make it a 409 for ever (key names are
    // unique in the tenant, destroyed keys included).
    const retry = await call('POST', '/cas', {
      ...body,
      nameConstraints: { permittedDnsDomains: ['example.com'] },
    })
    expectStatus(retry, 201, 'the same CA name, the constraint mended')
    assert.equal(await keyNamed(), '1', 'one key pki-ca-<name>-…: the CA’s, none left by the refusal')
  })

  test('X.509: concurrent CAs of one name on distinct keys: one is made, the other keys are left unreserved', async () => {
    const keys = await Promise.all(Array.from({ length: 6 }, () => signingKey(owner)))
    const name = uniqueName('race')
    const results = await Promise.all(
      keys.map((key) => call('POST', '/cas', rootBody({ name, keyId: key.id }))),
    )
    const statuses = results.map((r) => r.status).sort()
    assert.deepEqual(
      statuses,
      [201, 409, 409, 409, 409, 409],
      results.map((r) => r.text.slice(0, 200)).join('\n'),
    )
    const winner = results.find((r) => r.status === 201)!.body.keyId
    for (const key of keys.filter((k) => k.id !== winner))
      await assertStillSigns(key.id, owner, 'a key of a CA that lost the race')
  })

  test('SSH: two concurrent user CAs on two keys: one is made, the other key is left unreserved', async () => {
    const tenant = await svc.createTenant()
    const [k1, k2] = [await signingKey(tenant, 'Ed25519'), await signingKey(tenant, 'Ed25519')]
    const results = await Promise.all(
      [k1, k2].map((key) => call('POST', '/ssh/ca', { type: 'user', keyId: key.id }, tenant)),
    )
    const statuses = results.map((r) => r.status).sort()
    assert.deepEqual(statuses, [201, 409], results.map((r) => r.text.slice(0, 200)).join('\n'))
    const winner = results.find((r) => r.status === 201)!.body.keyId
    const loser = winner === k1.id ? k2.id : k1.id
    await assertStillSigns(loser, tenant, 'the key of the SSH CA that lost the race')
  })
})

describe('who may turn a key into a CA key', () => {
  test('an API key with certificates:write but no keys:write cannot take over an application’s Signing key', async () => {
    const appKey = await signingKey(owner)
    const pkiOnly = await apiKey(owner, { scopes: ['certificates:read', 'certificates:write'] })
    const res = await call('POST', '/cas', rootBody({ keyId: appKey.id }), pkiOnly)
    expectStatus(res, 403, 'CA creation on an application key by a certificates-only API key')
    await assertStillSigns(appKey.id, owner, 'the application key')
  })

  test('an API key with ssh:write but no keys:write cannot take over an application’s Signing key', async () => {
    const tenant = await svc.createTenant()
    const appKey = await signingKey(tenant, 'Ed25519')
    const sshOnly = await apiKey(tenant, { scopes: ['ssh:read', 'ssh:write'] })
    const res = await call('POST', '/ssh/ca', { type: 'user', keyId: appKey.id }, sshOnly)
    expectStatus(res, 403, 'SSH CA creation on an application key by an ssh-only API key')
    await assertStillSigns(appKey.id, tenant, 'the application key')
  })

  test('a CA cannot be made on an imported key, whose private key exists outside the service', async () => {
    const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' })
    const imported = await call('POST', '/keys/import', {
      name: uniqueName('imported'),
      keyType: 'Signing',
      algorithm: 'EC-P256',
      format: 'PEM',
      keyMaterial: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
    })
    const keyId = expectStatus(imported, 201, 'import a non-exportable key').body.id
    const ca = await call('POST', '/cas', rootBody({ keyId }))
    assert.ok(
      ca.status === 400 || ca.status === 409,
      `a CA on a key whose private key the caller holds offline must be refused: ${ca.status} ${ca.text.slice(0, 300)}`,
    )
    const ssh = await call('POST', '/ssh/ca', { type: 'host', keyId })
    assert.ok(
      ssh.status === 400 || ssh.status === 409,
      `an SSH CA on it neither: ${ssh.status} ${ssh.text.slice(0, 300)}`,
    )
  })
})

describe('the CA key reached by another path', () => {
  test('an X.509 CA key cannot back an SSH CA, nor an SSH CA key an X.509 CA', async () => {
    const tenant = await svc.createTenant()
    const pki = await createCa(tenant, { algorithm: 'Ed25519' })
    expectRefusal(
      await call('POST', '/ssh/ca', { type: 'user', keyId: pki.keyId }, tenant),
      409,
      'key_reserved',
      'SSH CA on the X.509 CA key',
    )
    const ssh = expectStatus(await call('POST', '/ssh/ca', { type: 'host' }, tenant), 201, 'SSH host CA').body
    expectRefusal(
      await call('POST', '/cas', rootBody({ keyId: ssh.keyId, algorithm: undefined }), tenant),
      409,
      'key_reserved',
      'X.509 CA on the SSH CA key',
    )
  })

  test('a CA on a key scheduled for deletion is refused (409), and no CA or reservation is left', async () => {
    const key = await signingKey(owner)
    expectStatus(await call('DELETE', `/keys/${key.id}?pendingWindowDays=7`, undefined), 200, 'schedule')
    const name = uniqueName('doomed')
    expectRefusal(
      await call('POST', '/cas', rootBody({ name, keyId: key.id })),
      409,
      'key_state_conflict',
      'CA on a key pending deletion',
    )
    const view = expectStatus(await call('GET', `/keys/${key.id}`, undefined), 200, 'GET key').body
    assert.equal(view.reservedFor, null)
    const cas = expectStatus(await call('GET', '/cas?limit=1000', undefined), 200, 'CAs').body
    assert.ok(cas.data.every((c: { name: string }) => c.name !== name))
  })

  test('an alias moved onto the CA key does not sign with it, and cannot be moved back to sign', async () => {
    const ca = await createCa(owner)
    const app = await signingKey(owner)
    const alias = `alias/${uniqueName('mover')}`
    expectStatus(await call('POST', '/aliases', { alias, keyId: app.id }), 201, 'alias on the app key')
    expectStatus(await call('POST', '/sign', { keyId: alias, message: MESSAGE }), 200, 'sign via alias')
    expectStatus(
      await call('PATCH', `/aliases/${encodeURIComponent(alias)}`, { keyId: ca.keyId }),
      200,
      'move alias to the CA key',
    )
    expectRefusal(
      await call('POST', '/sign', { keyId: alias, message: MESSAGE }),
      409,
      'key_reserved',
      'sign via the alias moved onto the CA key',
    )
  })

  test('the CA key cannot be exported (private) nor sent to a cloud KMS by key export', async () => {
    const ca = await createCa(owner)
    const key = expectStatus(await call('GET', `/keys/${ca.keyId}`, undefined), 200, 'GET key').body
    const exported = await call('POST', `/keys/${ca.keyId}/export-private`, {
      confirm: key.name,
      format: 'PEM',
    })
    expectRefusal(exported, 409, 'key_not_exportable', 'export the CA key')
    // Its public key is public anyway (it is in the CA certificate).
    expectStatus(await call('GET', `/keys/${ca.keyId}/public?format=PEM`, undefined), 200, 'public key')
  })
})

describe('scopes across the two CA kinds', () => {
  test('certificates:write cannot sign or revoke SSH certificates, ssh:write cannot issue X.509 ones', async () => {
    const tenant = await svc.createTenant()
    const pki = await createCa(tenant)
    const role = await createRole(pki.id, { allowedDomains: ['example.com'], allowSubdomains: true }, tenant)
    const sshCa = expectStatus(await call('POST', '/ssh/ca', { type: 'user' }, tenant), 201, 'SSH CA').body
    const sshCert = expectStatus(
      await call(
        'POST',
        '/ssh/certificates',
        { caId: sshCa.id, publicKey: sshEd25519Line(), principals: ['a'] },
        tenant,
      ),
      201,
      'SSH certificate',
    ).body
    const pkiOnly = await apiKey(tenant, { scopes: ['certificates:read', 'certificates:write'] })
    const sshOnly = await apiKey(tenant, { scopes: ['ssh:read', 'ssh:write'] })
    expectRefusal(
      await call(
        'POST',
        '/ssh/certificates',
        { caId: sshCa.id, publicKey: sshEd25519Line(), principals: ['root'] },
        pkiOnly,
      ),
      403,
      'insufficient_scope',
      'certificates:write signs SSH',
    )
    expectRefusal(
      await call('POST', `/ssh/certificates/${sshCert.id}/revoke`, {}, pkiOnly),
      403,
      'insufficient_scope',
      'certificates:write revokes SSH',
    )
    expectRefusal(
      await call('POST', '/certificates', { caId: pki.id, role, dnsNames: ['x.example.com'] }, sshOnly),
      403,
      'insufficient_scope',
      'ssh:write issues X.509',
    )
  })

  test('certificates:read reads a CA but its GET answers carry no private key', async () => {
    const ca = await createCa(owner)
    const role = await createRole(ca.id, { allowedDomains: ['example.com'], allowSubdomains: true })
    const issued = expectStatus(
      await call('POST', '/certificates', { caId: ca.id, role, dnsNames: ['k.example.com'] }),
      201,
      'issue with a generated key',
    ).body
    assert.match(issued.privateKey, /BEGIN PRIVATE KEY/)
    const reader = await apiKey(owner, { scopes: ['certificates:read'] })
    for (const path of [`/certificates/${issued.serial}`, `/certificates?caId=${ca.id}`, `/cas/${ca.id}`]) {
      const res = expectStatus(await call('GET', path, undefined, reader), 200, path)
      assert.ok(!res.text.includes('PRIVATE KEY'), `${path} shows no private key`)
    }
    const audit = expectStatus(await call('GET', '/audit?limit=200', undefined), 200, 'audit').body
    assert.ok(!JSON.stringify(audit).includes('PRIVATE KEY'), 'no private key in the audit log')
    const body = issued.privateKey.split('\n').slice(1, -2).join('')
    assert.ok(!JSON.stringify(audit).includes(body.slice(0, 40)), 'nor its Base64')
  })
})

describe('role rules fed odd names', () => {
  let caId: string
  let role: string
  let ipRole: string
  let looseRole: string

  before(async () => {
    const ca = await createCa(owner, {
      nameConstraints: { permittedDnsDomains: ['example.com'], excludedIpRanges: ['10.0.0.0/8'] },
    })
    caId = ca.id
    role = await createRole(caId, {
      allowedDomains: ['example.com'],
      allowSubdomains: true,
      allowWildcardCertificates: true,
    })
    ipRole = await createRole(caId, {
      allowedDomains: ['example.com'],
      allowSubdomains: true,
      allowIpSans: true,
    })
    looseRole = await createRole(caId, { allowAnyName: true, enforceHostnames: false })
  })

  const refused: Array<[string, () => string, Record<string, unknown>]> = [
    ['a trailing dot', () => role, { dnsNames: ['api.example.com.'] }],
    ['a wildcard in the middle', () => role, { dnsNames: ['api.*.example.com'] }],
    ['a wildcard inside a label', () => role, { dnsNames: ['a*.example.com'] }],
    ['a double wildcard', () => role, { dnsNames: ['*.*.example.com'] }],
    ['an IDN in Unicode', () => role, { dnsNames: ['bücher.example.com'] }],
    ['a look-alike suffix after a dot', () => role, { dnsNames: ['example.com.evil.org'] }],
    ['a CN with spaces', () => role, { commonName: 'www example.com' }],
    [
      'an IPv4-mapped IPv6 address in an excluded IPv4 range',
      () => ipRole,
      { dnsNames: ['i.example.com'], ipAddresses: ['::ffff:10.1.2.3'] },
    ],
    [
      'an IPv4 address in the excluded range',
      () => ipRole,
      { dnsNames: ['i.example.com'], ipAddresses: ['10.1.2.3'] },
    ],
    ['any-name role, a name outside the CA’s permitted domains', () => looseRole, { dnsNames: ['evil.org'] }],
    [
      'any-name role, a CN with a space outside the permitted domains',
      () => looseRole,
      { commonName: 'Evil Corp' },
    ],
    ['any-name role, a CN that is a suffix trick', () => looseRole, { commonName: 'evil.org/.example.com' }],
  ]
  for (const [label, roleOf, names] of refused) {
    test(`${label}: 400, nothing signed`, async () => {
      const res = await call('POST', '/certificates', { caId, role: roleOf(), ...names })
      expectStatus(res, 400, label)
    })
  }

  test('upper-case names are certified in lower case, as the role checked them', async () => {
    const res = await call('POST', '/certificates', { caId, role, dnsNames: ['API.Example.COM'] })
    const cert = new X509Certificate(expectStatus(res, 201, 'upper-case name').body.certificate)
    assert.equal(cert.subjectAltName, 'DNS:api.example.com')
  })

  test('a punycode name (A-labels) is a host name and is certified as given', async () => {
    const res = await call('POST', '/certificates', { caId, role, dnsNames: ['xn--bcher-kva.example.com'] })
    const cert = new X509Certificate(expectStatus(res, 201, 'punycode name').body.certificate)
    assert.equal(cert.subjectAltName, 'DNS:xn--bcher-kva.example.com')
  })

  test('a CSR’s names outside the role are refused even when the body names allowed ones for another field', async () => {
    const keys = (await webcrypto.subtle.generateKey({ name: 'ECDSA', namedCurve: 'P-256' }, true, [
      'sign',
      'verify',
    ])) as webcrypto.CryptoKeyPair
    const csr = await x509.Pkcs10CertificateRequestGenerator.create({
      name: 'CN=evil.org',
      keys,
      signingAlgorithm: { name: 'ECDSA', hash: 'SHA-256' },
      extensions: [
        new x509.SubjectAlternativeNameExtension([
          { type: 'dns', value: 'evil.org' },
          { type: 'ip', value: '8.8.8.8' },
        ]),
      ],
    })
    // The body replaces the DNS names only: the CSR's CN (and IP) still ask to be certified.
    const res = await call('POST', '/certificates', {
      caId,
      role: ipRole,
      csr: csr.toString('pem'),
      dnsNames: ['ok.example.com'],
    })
    expectStatus(res, 400, 'the CSR’s CN outside the role')
  })
})

describe('races', () => {
  test('a burst of first issuances and URL changes: every certificate carries the URLs the CA ends with', async () => {
    const ca = await createCa(owner)
    const role = await createRole(ca.id, { allowedDomains: ['example.com'], allowSubdomains: true })
    const patches = Array.from({ length: 8 }, (_, i) =>
      call('PATCH', `/cas/${ca.id}`, { crlDistributionPoints: [`http://crl${i}.example.com/ca.crl`] }),
    )
    const issues = Array.from({ length: 8 }, (_, i) =>
      call('POST', '/certificates', { caId: ca.id, role, dnsNames: [`r${i}.example.com`] }),
    )
    const results = await Promise.all([...patches, ...issues])
    for (const res of results) assert.ok([200, 201, 409].includes(res.status), `${res.status} ${res.text}`)
    const final = expectStatus(await call('GET', `/cas/${ca.id}`, undefined), 200, 'GET CA').body
    assert.ok(final.firstIssuedAt)
    for (const res of results.slice(8)) {
      expectStatus(res, 201, 'issue')
      assert.deepEqual(crlUrlsOf(res.body.certificate), final.crlDistributionPoints)
    }
    // A PATCH answered 200 must not claim a change the certificates do not carry.
    const lastOk = results.slice(0, 8).filter((r) => r.status === 200)
    for (const res of lastOk)
      assert.ok(res.body.firstIssuedAt === null, 'a successful PATCH came before the first issuance')
  })

  test('a burst of SSH certificates from one CA: serials are distinct and non-zero', async () => {
    const tenant = await svc.createTenant()
    const ca = expectStatus(await call('POST', '/ssh/ca', { type: 'user' }, tenant), 201, 'SSH CA').body
    const line = sshEd25519Line()
    const results = await Promise.all(
      Array.from({ length: 40 }, () =>
        call('POST', '/ssh/certificates', { caId: ca.id, publicKey: line, principals: ['ops'] }, tenant),
      ),
    )
    const serials = results.map((r) => expectStatus(r, 201, 'sign').body.serial as string)
    assert.equal(new Set(serials).size, serials.length)
    assert.ok(serials.every((s) => BigInt(s) > 0n))
  })

  test('concurrent revocations of one SSH certificate: one succeeds, the others 409, one record', async () => {
    const tenant = await svc.createTenant()
    const ca = expectStatus(await call('POST', '/ssh/ca', { type: 'user' }, tenant), 201, 'SSH CA').body
    const cert = expectStatus(
      await call(
        'POST',
        '/ssh/certificates',
        { caId: ca.id, publicKey: sshEd25519Line(), principals: ['x'] },
        tenant,
      ),
      201,
      'sign',
    ).body
    const results = await Promise.all(
      Array.from({ length: 6 }, (_, i) =>
        call('POST', `/ssh/certificates/${cert.id}/revoke`, { reason: `r${i}` }, tenant),
      ),
    )
    assert.deepEqual(
      results.map((r) => r.status).sort(),
      [200, 409, 409, 409, 409, 409],
      results.map((r) => r.text.slice(0, 120)).join('\n'),
    )
  })
})

describe('public routes once the CA key is gone or the CA is pending', () => {
  test('revoked CA keys: the X.509 CRL and certificate and the SSH public key and KRL still answer, never a 5xx', async () => {
    const tenant = await svc.createTenant()
    const pki = await createCa(tenant)
    const ssh = expectStatus(await call('POST', '/ssh/ca', { type: 'user' }, tenant), 201, 'SSH CA').body
    for (const keyId of [pki.keyId, ssh.keyId])
      expectStatus(await call('POST', `/keys/${keyId}/revoke`, {}, tenant), 200, 'revoke CA key')
    for (const path of [
      `/api/v1/cas/${pki.id}/crl`,
      `/api/v1/cas/${pki.id}/certificate`,
      `/api/v1/ssh/ca/${ssh.id}/public-key`,
      `/api/v1/ssh/ca/${ssh.id}/krl`,
    ]) {
      const res = await svc.request('GET', path)
      expectStatus(res, 200, path)
    }
    // Issuing is refused with a 409, not a 5xx.
    const role = await createRole(pki.id, { allowedDomains: ['example.com'], allowSubdomains: true }, tenant)
    expectRefusal(
      await call('POST', '/certificates', { caId: pki.id, role, dnsNames: ['a.example.com'] }, tenant),
      409,
      'key_state_conflict',
      'issue with a revoked CA key',
    )
    expectRefusal(
      await call(
        'POST',
        '/ssh/certificates',
        { caId: ssh.id, publicKey: sshEd25519Line(), principals: ['a'] },
        tenant,
      ),
      409,
      'key_state_conflict',
      'SSH sign with a revoked CA key',
    )
  })

  test('a pending CA publishes nothing: its certificate and CRL are 404 (no CSR, no 5xx)', async () => {
    const pending = expectStatus(
      await call('POST', '/cas', {
        name: uniqueName('pending'),
        type: 'intermediate',
        algorithm: 'EC-P256',
        subject: { commonName: 'Pending' },
      }),
      201,
      'pending intermediate',
    ).body
    assert.equal(pending.status, 'pending')
    for (const what of ['certificate', 'crl']) {
      const res = await svc.request('GET', `/api/v1/cas/${pending.id}/${what}?format=pem`)
      expectStatus(res, 404, `pending CA ${what}`)
      assert.ok(!res.text.includes('CERTIFICATE REQUEST'))
    }
  })

  test('the public routes carry no tenant data beyond the CA’s own: no tenant id, no key id', async () => {
    const tenant = await svc.createTenant()
    const pki = await createCa(tenant)
    const ssh = expectStatus(await call('POST', '/ssh/ca', { type: 'user' }, tenant), 201, 'SSH CA').body
    for (const path of [
      `/api/v1/cas/${pki.id}/crl?format=pem`,
      `/api/v1/cas/${pki.id}/certificate?format=pem`,
      `/api/v1/ssh/ca/${ssh.id}/public-key`,
    ]) {
      const res = expectStatus(await svc.request('GET', path), 200, path)
      assert.ok(!res.text.includes(tenant.tenantId), `${path}: no tenant id`)
      assert.ok(!res.text.includes(pki.keyId) && !res.text.includes(ssh.keyId), `${path}: no key id`)
    }
  })
})
