import 'reflect-metadata'
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { createPrivateKey, createPublicKey, decapsulate, webcrypto, X509Certificate } from 'node:crypto'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { ml_dsa44, ml_dsa65, ml_dsa87 } from '@noble/post-quantum/ml-dsa.js'
import { ml_kem768 } from '@noble/post-quantum/ml-kem.js'
import { slh_dsa_sha2_128s } from '@noble/post-quantum/slh-dsa.js'
import * as x509 from '@peculiar/x509'
import { uniqueName } from '../helpers/api-client.ts'
import { children, oidContent, pemToDer, readTlv, type Tlv } from '../helpers/der.ts'
import { type ManualClock, manualClock } from '../helpers/manual-clock.ts'
import {
  type HttpResult,
  startTestService,
  type TenantWithKey,
  type TestService,
  waitFor,
} from '../helpers/service.ts'

/**
 * X.509 certificate authorities over HTTP (issue 36): for every CA algorithm a root, a role and
 * leaves (a generated key and a CSR) whose chains are verified outside the service (node:crypto,
 * @peculiar/x509 for the classical algorithms, @noble/post-quantum over the TBS bytes for ML-DSA
 * and SLH-DSA); an ML-KEM leaf; intermediates under a tenant root and under an outside parent;
 * every rule of a role; CRLs (revocation, reasons, numbers, noStore, the job's refresh); the
 * list filters. One service with a manual clock and the background jobs running; the clock only
 * moves in the last describe.
 */

x509.cryptoProvider.set(webcrypto as unknown as Parameters<typeof x509.cryptoProvider.set>[0])
type CryptoKey = webcrypto.CryptoKey
type CryptoKeyPair = webcrypto.CryptoKeyPair

const HOUR_MS = 3_600_000
const DAY_S = 86_400
const BACKDATE_MS = 30_000
const CRL_LIFETIME_MS = 72 * HOUR_MS

let svc: TestService
let clock: ManualClock
let tenant: TenantWithKey
/** Files handed to the system's openssl. */
let dir: string

before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'kms-pki-'))
  // Whole seconds: X.509 times have second precision, so the clock's times compare exactly.
  clock = manualClock(new Date(Math.floor(Date.now() / 1000) * 1000))
  svc = await startTestService({ KMS_JOB_SWEEP_MS: '200' }, { clock, jobs: true })
  tenant = await svc.createTenant()
})
after(async () => {
  rmSync(dir, { recursive: true, force: true })
  await svc?.stop()
})

// ---- HTTP helpers -------------------------------------------------------------------------------

const call = (method: string, path: string, body?: unknown, key: string | undefined = tenant.key) =>
  svc.request(method, `/api/v1${path}`, {
    ...(key === undefined ? {} : { key }),
    ...(body === undefined ? {} : { body }),
  })

function expectStatus(res: HttpResult, status: number, what: string): HttpResult {
  assert.equal(res.status, status, `${what}: ${res.status} ${res.text.slice(0, 400)}`)
  return res
}

/** A refusal: the status, the error code, and (for role rules) the rule named in the body. */
function expectRefusal(res: HttpResult, status: number, code: string, what: string): void {
  expectStatus(res, status, what)
  assert.equal(res.headers.get('content-type')?.split(';')[0], 'application/json', what)
  assert.equal(res.body.error, code, `${what}: ${res.text}`)
  assert.equal(typeof res.body.message, 'string', what)
}

/** A public route's bytes (no credentials): the CA certificate or CRL, DER or PEM. */
async function fetchPublic(path: string): Promise<{ status: number; type: string | null; bytes: Buffer }> {
  const response = await fetch(new URL(path, svc.baseUrl))
  return {
    status: response.status,
    type: response.headers.get('content-type'),
    bytes: Buffer.from(await response.arrayBuffer()),
  }
}

interface Ca {
  id: string
  keyId: string
  algorithm: string
  certificate: string
  notAfter: string
  chain: string[]
}

async function createCa(body: Record<string, unknown>, by = tenant): Promise<Ca> {
  const res = await call(
    'POST',
    '/cas',
    { name: uniqueName('ca'), type: 'root', subject: { commonName: uniqueName('Test CA') }, ...body },
    by.key,
  )
  return expectStatus(res, 201, `create CA ${JSON.stringify(body)}`).body
}

async function createRole(caId: string, body: Record<string, unknown> = {}): Promise<string> {
  const name = (body['name'] as string | undefined) ?? uniqueName('role')
  const res = await call('POST', `/cas/${caId}/roles`, {
    allowedDomains: ['example.com'],
    allowSubdomains: true,
    ...body,
    name,
  })
  expectStatus(res, 201, `create role ${JSON.stringify(body)}`)
  return name
}

interface Issued {
  serial: string
  caId: string
  certificate: string
  chain: string[]
  privateKey?: string
  notBefore: string
  notAfter: string
  stored: boolean
  keyAlgorithm: string
  status: string
  dnsNames: string[]
  ipAddresses: string[]
}

const issueRequest = (caId: string, role: string, body: Record<string, unknown> = {}) =>
  call('POST', '/certificates', { caId, role, ...body })

async function issue(caId: string, role: string, body: Record<string, unknown> = {}): Promise<Issued> {
  const res = await issueRequest(caId, role, { dnsNames: [`${uniqueName('h')}.example.com`], ...body })
  return expectStatus(res, 201, `issue ${JSON.stringify(body).slice(0, 200)}`).body
}

async function revoke(serial: string, body: Record<string, unknown> = {}) {
  return expectStatus(await call('POST', `/certificates/${serial}/revoke`, body), 200, `revoke ${serial}`)
    .body
}

// ---- DER reading (independent of src/pki) -------------------------------------------------------

const derToPem = (der: Buffer, label: string) =>
  `-----BEGIN ${label}-----\n${der.toString('base64').replace(/(.{64})/g, '$1\n')}\n-----END ${label}-----\n`

/** The three parts of a signed object (certificate, CRL, CSR): TBS, AlgorithmIdentifier, signature. */
function signedParts(der: Buffer) {
  const [tbs, algorithm, signature] = children(readTlv(der))
  assert.ok(tbs && algorithm && signature)
  assert.equal(signature.tag, 0x03)
  assert.equal(signature.content[0], 0, 'no unused bits in the signature')
  return { tbs, algorithm, signature: signature.content.subarray(1) }
}

/** The raw public key of a SubjectPublicKeyInfo (the BIT STRING's bytes). */
function rawPublicKey(spki: Buffer): Buffer {
  const [, bits] = children(readTlv(spki))
  return bits!.content.subarray(1)
}

const spkiOf = (cert: X509Certificate) => cert.publicKey.export({ type: 'spki', format: 'der' })

/** The signature OIDs of the post-quantum issuers (RFC 9881, RFC 9909), verified with noble. */
const PQ_VERIFIERS = new Map<string, (sig: Buffer, msg: Buffer, pub: Buffer) => boolean>([
  [oidContent('2.16.840.1.101.3.4.3.17'), (s, m, p) => ml_dsa44.verify(s, m, p)],
  [oidContent('2.16.840.1.101.3.4.3.18'), (s, m, p) => ml_dsa65.verify(s, m, p)],
  [oidContent('2.16.840.1.101.3.4.3.19'), (s, m, p) => ml_dsa87.verify(s, m, p)],
  [oidContent('2.16.840.1.101.3.4.3.20'), (s, m, p) => slh_dsa_sha2_128s.verify(s, m, p)],
])
const ML_DSA_OIDS: Record<string, string> = {
  'ML-DSA-44': oidContent('2.16.840.1.101.3.4.3.17'),
  'ML-DSA-65': oidContent('2.16.840.1.101.3.4.3.18'),
  'ML-DSA-87': oidContent('2.16.840.1.101.3.4.3.19'),
  'SLH-DSA-128s': oidContent('2.16.840.1.101.3.4.3.20'),
}

/** The OID (hex content) of an AlgorithmIdentifier, asserting its parameters are absent. */
function oidWithoutParameters(algorithm: Tlv): string {
  const parts = children(algorithm)
  assert.equal(parts.length, 1, 'a post-quantum AlgorithmIdentifier has no parameters (not even NULL)')
  assert.equal(parts[0]!.tag, 0x06)
  return parts[0]!.content.toString('hex')
}

/**
 * Verifies a post-quantum signature over the TBS bytes with noble: the outer algorithm is the
 * expected OID without parameters, the TBS's own signature field is the same, the signature
 * verifies with the issuer's raw public key and fails on a flipped TBS byte.
 */
function verifyPqSigned(
  der: Buffer,
  issuerSpki: Buffer,
  issuerAlgorithm: string,
  /** Where the TBS repeats the algorithm (certificate: 2, CRL: 1; a CSR does not: null). */
  tbsAlgorithmIndex: number | null,
) {
  const { tbs, algorithm, signature } = signedParts(der)
  const oid = oidWithoutParameters(algorithm)
  assert.equal(oid, ML_DSA_OIDS[issuerAlgorithm], `signature algorithm of a ${issuerAlgorithm} issuer`)
  if (tbsAlgorithmIndex !== null)
    assert.deepEqual(children(tbs)[tbsAlgorithmIndex]!.raw, algorithm.raw, 'TBS signature field = outer')
  const verify = PQ_VERIFIERS.get(oid)!
  const publicKey = rawPublicKey(issuerSpki)
  assert.ok(verify(signature, tbs.raw, publicKey), `noble verifies the ${issuerAlgorithm} signature`)
  const tampered = Buffer.from(tbs.raw)
  tampered[tampered.length - 1]! ^= 1
  assert.ok(!verify(signature, tampered, publicKey), 'noble refuses a tampered TBS')
}

const isPostQuantum = (algorithm: string) => algorithm in ML_DSA_OIDS

let fileCount = 0
function writeTemp(content: string | Buffer, extension = 'pem'): string {
  const path = join(dir, `${++fileCount}.${extension}`)
  writeFileSync(path, content)
  return path
}

/**
 * The system's OpenSSL (3.0: classical algorithms only) validates the path as a TLS client would:
 * RFC 5280 strict mode, at the service clock's time, optionally checking the CRL.
 */
function opensslVerify(leafPem: string, chainPems: string[], options: { crlPem?: string } = {}) {
  const root = chainPems[chainPems.length - 1]!
  const untrusted = chainPems.slice(0, -1)
  const args = [
    'verify',
    '-x509_strict',
    '-attime',
    String(Math.floor(clock.now().getTime() / 1000)),
    '-CAfile',
    writeTemp(root),
    ...(untrusted.length > 0 ? ['-untrusted', writeTemp(untrusted.join(''))] : []),
    ...(options.crlPem ? ['-crl_check', '-CRLfile', writeTemp(options.crlPem)] : []),
    writeTemp(leafPem),
  ]
  const run = spawnSync('openssl', args, { encoding: 'utf8' })
  return { ok: run.status === 0, output: `${run.stdout}${run.stderr}` }
}

const opensslText = (pem: string) =>
  spawnSync('openssl', ['x509', '-noout', '-text', '-in', writeTemp(pem)], { encoding: 'utf8' }).stdout

/**
 * Verifies `leaf` up to the self-signed root at the end of `chain` (issuer first): node:crypto
 * (checkIssued and verify) for every link; @peculiar/x509 for classical issuers (a signature
 * check, and X509ChainBuilder when the whole chain is classical); noble for post-quantum ones.
 */
async function verifyChain(leafPem: string, chainPems: string[], algorithms: string[]): Promise<void> {
  const pems = [leafPem, ...chainPems]
  assert.equal(algorithms.length, chainPems.length, 'one algorithm per issuer')
  const nodeCerts = pems.map((pem) => new X509Certificate(pem))
  const peculiar = pems.map((pem) => new x509.X509Certificate(pem))
  for (let i = 0; i < chainPems.length; i++) {
    const [subject, issuer] = [nodeCerts[i]!, nodeCerts[i + 1]!]
    assert.ok(subject.checkIssued(issuer), `link ${i}: checkIssued`)
    assert.ok(subject.verify(issuer.publicKey), `link ${i}: node verifies the signature`)
    const algorithm = algorithms[i]!
    if (isPostQuantum(algorithm)) verifyPqSigned(subject.raw, spkiOf(issuer), algorithm, 2)
    else
      assert.ok(
        await peculiar[i]!.verify({ publicKey: peculiar[i + 1]!, signatureOnly: true }),
        `link ${i}: @peculiar/x509 verifies the ${algorithm} signature`,
      )
  }
  const root = nodeCerts[nodeCerts.length - 1]!
  assert.ok(root.checkIssued(root) && root.verify(root.publicKey), 'the root is self-signed')
  if (leafPem !== chainPems[0] && !algorithms.some(isPostQuantum)) {
    const built = await new x509.X509ChainBuilder({ certificates: peculiar.slice(1) }).build(peculiar[0]!)
    assert.equal(built.length, pems.length, '@peculiar/x509 builds the whole chain')
    const leafKey = nodeCerts[0]!.publicKey.asymmetricKeyType ?? ''
    // OpenSSL 3.0 reads no post-quantum key, not even a leaf's.
    if (!leafKey.startsWith('ml-')) {
      const verdict = opensslVerify(leafPem, chainPems)
      assert.ok(verdict.ok, `openssl verify -x509_strict: ${verdict.output}`)
    }
  }
}

// ---- CSRs made outside the service (@peculiar/x509 on WebCrypto) --------------------------------

const RSA_EXPONENT = new Uint8Array([1, 0, 1])
const CSR_KEYS: Record<string, webcrypto.Algorithm & Record<string, unknown>> = {
  'EC-P256': { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' },
  'EC-P384': { name: 'ECDSA', namedCurve: 'P-384', hash: 'SHA-384' },
  'RSA-2048': {
    name: 'RSASSA-PKCS1-v1_5',
    modulusLength: 2048,
    publicExponent: RSA_EXPONENT,
    hash: 'SHA-256',
  },
  Ed25519: { name: 'Ed25519' },
  'ML-DSA-44': { name: 'ML-DSA-44' },
  'ML-DSA-65': { name: 'ML-DSA-65' },
  'ML-DSA-87': { name: 'ML-DSA-87' },
}

async function makeCsr(
  keyAlgorithm: keyof typeof CSR_KEYS,
  names: { commonName?: string; dnsNames?: string[]; ipAddresses?: string[] },
): Promise<{ pem: string; der: Buffer; spki: Buffer }> {
  const algorithm = CSR_KEYS[keyAlgorithm]!
  const keys = (await webcrypto.subtle.generateKey(algorithm, true, ['sign', 'verify'])) as CryptoKeyPair
  const san = [
    ...(names.dnsNames ?? []).map((value) => ({ type: 'dns' as const, value })),
    ...(names.ipAddresses ?? []).map((value) => ({ type: 'ip' as const, value })),
  ]
  const csr = await x509.Pkcs10CertificateRequestGenerator.create({
    ...(names.commonName ? { name: `CN=${names.commonName}` } : {}),
    keys,
    signingAlgorithm: algorithm,
    extensions: san.length > 0 ? [new x509.SubjectAlternativeNameExtension(san)] : [],
  })
  const spki = Buffer.from(await webcrypto.subtle.exportKey('spki', keys.publicKey))
  return { pem: csr.toString('pem'), der: Buffer.from(csr.rawData), spki }
}

// ---- certificate content ----------------------------------------------------------------------

function sanDnsNames(cert: x509.X509Certificate): string[] {
  const san = cert.getExtension(x509.SubjectAlternativeNameExtension)
  return san ? san.names.items.filter((n) => n.type === 'dns').map((n) => n.value) : []
}

/** Serials: positive, at most 20 octets (RFC 5280 4.1.2.2), the API's hex the certificate's. */
function checkSerial(issued: Issued): void {
  const cert = new X509Certificate(issued.certificate)
  assert.equal(issued.serial, cert.serialNumber.toLowerCase())
  const bytes = Buffer.from(issued.serial, 'hex')
  assert.ok(bytes.length >= 1 && bytes.length <= 20, `serial of ${bytes.length} octets`)
  assert.ok(bytes[0]! < 0x80, 'the serial is positive')
  assert.ok(
    bytes.some((b) => b !== 0),
    'the serial is not zero',
  )
}

const CA_USAGES =
  x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign | x509.KeyUsageFlags.digitalSignature

/** A CA certificate: critical basicConstraints CA (with the path length), critical keyUsage, an SKI. */
function checkCaCertificate(pem: string, pathLength?: number): void {
  const cert = new x509.X509Certificate(pem)
  const constraints = cert.getExtension(x509.BasicConstraintsExtension)
  assert.ok(constraints?.ca && constraints.critical, 'critical basicConstraints CA')
  assert.equal(constraints.pathLength, pathLength)
  const usage = cert.getExtension(x509.KeyUsagesExtension)
  assert.ok(usage?.critical, 'critical keyUsage')
  assert.equal(usage.usages, CA_USAGES)
  assert.ok(cert.getExtension(x509.SubjectKeyIdentifierExtension)?.keyId, 'a subject key identifier')
}

/** The key usages a leaf of the default role carries, by its key (RFC 8813, RFC 9881, RFC 9935). */
function expectedLeafUsages(keyAlgorithm: string): number {
  if (keyAlgorithm.startsWith('RSA'))
    return x509.KeyUsageFlags.digitalSignature | x509.KeyUsageFlags.keyEncipherment
  if (keyAlgorithm.startsWith('ML-KEM')) return x509.KeyUsageFlags.keyEncipherment
  return x509.KeyUsageFlags.digitalSignature
}

/** What every leaf carries: backdated notBefore, not a CA, the role's SANs, AKI, CRL DP and AIA. */
function checkLeaf(issued: Issued, ca: Ca, expected: { dnsNames: string[]; ttlSeconds: number }): void {
  checkSerial(issued)
  const now = clock.now().getTime()
  const cert = new x509.X509Certificate(issued.certificate)
  assert.equal(cert.notBefore.getTime(), now - BACKDATE_MS, 'notBefore is backdated 30 s')
  assert.equal(issued.notBefore, new Date(now - BACKDATE_MS).toISOString())
  assert.equal(cert.notAfter.getTime(), now + expected.ttlSeconds * 1000)
  assert.equal(issued.notAfter, cert.notAfter.toISOString())
  assert.equal(cert.getExtension(x509.BasicConstraintsExtension)?.ca ?? false, false, 'a leaf is no CA')
  assert.equal(cert.getExtension(x509.KeyUsagesExtension)?.usages, expectedLeafUsages(issued.keyAlgorithm))
  assert.deepEqual(
    [...(cert.getExtension(x509.ExtendedKeyUsageExtension)?.usages ?? [])],
    [x509.ExtendedKeyUsage.serverAuth],
  )
  assert.deepEqual(sanDnsNames(cert).sort(), [...expected.dnsNames].sort())
  const caCert = new x509.X509Certificate(ca.certificate)
  assert.equal(
    cert.getExtension(x509.AuthorityKeyIdentifierExtension)?.keyId,
    caCert.getExtension(x509.SubjectKeyIdentifierExtension)?.keyId,
    'the AKI is the CA’s SKI',
  )
  const cdp = cert.getExtension(x509.CRLDistributionPointsExtension)
  const urls = cdp?.distributionPoints.flatMap(
    (point) => point.distributionPoint?.fullName?.map((name) => name.uniformResourceIdentifier) ?? [],
  )
  assert.ok(
    urls?.some((url) => url?.endsWith(`/api/v1/cas/${ca.id}/crl`)),
    `CRL DP: ${urls}`,
  )
  const aia = cert.getExtension(x509.AuthorityInfoAccessExtension)
  assert.ok(
    aia?.caIssuers.some((name) => name.value.endsWith(`/api/v1/cas/${ca.id}/certificate`)),
    'AIA caIssuers names the CA certificate route',
  )
  assert.deepEqual(issued.chain[0], ca.certificate, 'the chain starts with the issuing CA')
}

/** The generated private key (PKCS#8 PEM) is the pair of the certified public key. */
function checkPrivateKeyMatches(issued: Issued, expectedType: string): void {
  assert.ok(issued.privateKey?.startsWith('-----BEGIN PRIVATE KEY-----'), 'PKCS#8 PEM')
  const privateKey = createPrivateKey(issued.privateKey!)
  assert.equal(privateKey.asymmetricKeyType, expectedType)
  const cert = new X509Certificate(issued.certificate)
  assert.deepEqual(
    createPublicKey(privateKey).export({ type: 'spki', format: 'der' }),
    spkiOf(cert),
    'the certificate certifies the returned key',
  )
}

// ---- CRLs ---------------------------------------------------------------------------------------

const CRL_NUMBER_OID = '2.5.29.20'

interface Crl {
  der: Buffer
  parsed: x509.X509Crl
  number: bigint
}

async function fetchCrl(caId: string): Promise<Crl> {
  const got = await fetchPublic(`/api/v1/cas/${caId}/crl`)
  assert.equal(got.status, 200, `CRL of ${caId}: ${got.bytes.toString().slice(0, 200)}`)
  assert.equal(got.type, 'application/pkix-crl')
  const parsed = new x509.X509Crl(got.bytes)
  const extension = parsed.getExtension(CRL_NUMBER_OID)
  assert.ok(extension, 'the CRL has a cRLNumber')
  const integer = readTlv(Buffer.from(extension.value))
  assert.equal(integer.tag, 0x02)
  return { der: got.bytes, parsed, number: BigInt(`0x${integer.content.toString('hex')}`) }
}

/** The API's reasons as @peculiar/x509 names their CRLReason codes. */
const CRL_REASON: Record<string, x509.X509CrlReason> = {
  keyCompromise: x509.X509CrlReason.keyCompromise,
  caCompromise: x509.X509CrlReason.cACompromise,
  affiliationChanged: x509.X509CrlReason.affiliationChanged,
  superseded: x509.X509CrlReason.superseded,
  cessationOfOperation: x509.X509CrlReason.cessationOfOperation,
  privilegeWithdrawn: x509.X509CrlReason.privilegeWithdrawn,
}

const crlEntry = (crl: Crl, serial: string) =>
  crl.parsed.entries.find((entry) => entry.serialNumber.toLowerCase().replace(/^(00)+/, '') === serial)

// =================================================================================================

describe('CAs and roles', () => {
  let ca: Ca

  before(async () => {
    ca = await createCa({
      algorithm: 'EC-P256',
      subject: { commonName: 'Roles Root', organization: 'Example' },
    })
  })

  test('a root CA is active, self-signed, on a new non-exportable key, and listed', async () => {
    const got = expectStatus(await call('GET', `/cas/${ca.id}`), 200, 'GET CA').body
    assert.equal(got.status, 'active')
    assert.equal(got.type, 'root')
    assert.equal(got.algorithm, 'EC-P256')
    assert.equal(got.csr, null)
    assert.deepEqual(got.chain, [])
    assert.equal(got.parentId, null)
    const cert = new X509Certificate(got.certificate)
    assert.ok(cert.ca, 'basicConstraints CA')
    assert.ok(cert.checkIssued(cert) && cert.verify(cert.publicKey))
    assert.match(cert.subject, /CN=Roles Root/)
    assert.equal(got.notBefore, new Date(clock.now().getTime() - BACKDATE_MS).toISOString())
    assert.equal(got.notAfter, new Date(clock.now().getTime() + 3650 * DAY_S * 1000).toISOString())
    const key = expectStatus(await call('GET', `/keys/${got.keyId}`), 200, 'GET CA key').body
    assert.equal(key.exportable, false)
    assert.equal(key.keyType, 'Signing')
    assert.equal(key.algorithm, 'EC-P256')
    const list = expectStatus(await call('GET', '/cas?limit=100'), 200, 'list CAs').body
    assert.ok(list.data.some((c: Ca) => c.id === ca.id))
    assert.equal(list.total, list.data.length)
  })

  test('the CA certificate is public: DER (application/pkix-cert) or PEM', async () => {
    const der = await fetchPublic(`/api/v1/cas/${ca.id}/certificate`)
    assert.equal(der.status, 200)
    assert.equal(der.type, 'application/pkix-cert')
    assert.deepEqual(der.bytes, pemToDer(ca.certificate))
    const pem = await fetchPublic(`/api/v1/cas/${ca.id}/certificate?format=pem`)
    assert.equal(pem.status, 200)
    assert.ok(pem.bytes.toString().startsWith('-----BEGIN CERTIFICATE-----'))
    assert.deepEqual(pemToDer(pem.bytes.toString()), der.bytes)
    const unknown = await fetchPublic('/api/v1/cas/00000000-0000-4000-8000-000000000000/certificate')
    assert.equal(unknown.status, 404)
  })

  test('CA creation refuses a duplicate name (409), a short root (400) and a root with a parent (400)', async () => {
    const name = uniqueName('dup')
    await createCa({ name, algorithm: 'EC-P256' })
    expectRefusal(
      await call('POST', '/cas', { name, type: 'root', algorithm: 'EC-P256', subject: { commonName: 'x' } }),
      409,
      'ca_exists',
      'duplicate CA name',
    )
    expectRefusal(
      await call('POST', '/cas', {
        name: uniqueName('short'),
        type: 'root',
        algorithm: 'EC-P256',
        subject: { commonName: 'x' },
        validityDays: 100,
      }),
      400,
      'validation_failed',
      'a root of 100 days',
    )
    expectRefusal(
      await call('POST', '/cas', {
        name: uniqueName('rootparent'),
        type: 'root',
        algorithm: 'EC-P256',
        parentId: ca.id,
        subject: { commonName: 'x' },
      }),
      400,
      'validation_failed',
      'a root with a parentId',
    )
  })

  test('PATCH changes the URLs before the first certificate, 409 ca_in_use after', async () => {
    const fresh = await createCa({ algorithm: 'EC-P256' })
    const urls = { crlDistributionPoints: ['http://crl.example.com/root.crl'] }
    const patched = expectStatus(await call('PATCH', `/cas/${fresh.id}`, urls), 200, 'PATCH CA').body
    assert.deepEqual(patched.crlDistributionPoints, urls.crlDistributionPoints)
    const role = await createRole(fresh.id)
    const issued = await issue(fresh.id, role)
    const cdp = new x509.X509Certificate(issued.certificate).getExtension(x509.CRLDistributionPointsExtension)
    assert.equal(
      cdp?.distributionPoints[0]?.distributionPoint?.fullName?.[0]?.uniformResourceIdentifier,
      'http://crl.example.com/root.crl',
      'the leaf carries the patched CRL URL',
    )
    expectRefusal(
      await call('PATCH', `/cas/${fresh.id}`, { crlDistributionPoints: ['http://other.example.com/x.crl'] }),
      409,
      'ca_in_use',
      'PATCH after issuance',
    )
  })

  test('roles: create, read, list, update, delete; duplicates 409; ttl above max 400', async () => {
    const name = await createRole(ca.id, { allowBareDomains: true, maxTtlSeconds: 7200, ttlSeconds: 3600 })
    const got = expectStatus(await call('GET', `/cas/${ca.id}/roles/${name}`), 200, 'GET role').body
    assert.equal(got.caId, ca.id)
    assert.deepEqual(got.allowedDomains, ['example.com'])
    assert.equal(got.allowBareDomains, true)
    assert.equal(got.allowWildcardCertificates, false, 'defaults: wildcards off')
    assert.equal(got.enforceHostnames, true)
    assert.equal(got.notAfterBehavior, 'error')
    const list = expectStatus(await call('GET', `/cas/${ca.id}/roles`), 200, 'list roles').body
    assert.ok(list.data.some((r: { name: string }) => r.name === name))
    expectRefusal(await call('POST', `/cas/${ca.id}/roles`, { name }), 409, 'role_exists', 'duplicate role')
    expectRefusal(
      await call('POST', `/cas/${ca.id}/roles`, {
        name: uniqueName('r'),
        ttlSeconds: 7200,
        maxTtlSeconds: 3600,
      }),
      400,
      'validation_failed',
      'ttl above max',
    )
    expectRefusal(
      await call('POST', `/cas/${ca.id}/roles`, { name: uniqueName('r'), allowedDomains: ['-bad-.com'] }),
      400,
      'validation_failed',
      'an allowed domain that is no hostname',
    )
    const patched = expectStatus(
      await call('PATCH', `/cas/${ca.id}/roles/${name}`, { allowWildcardCertificates: true }),
      200,
      'PATCH role',
    ).body
    assert.equal(patched.allowWildcardCertificates, true)
    assert.equal(patched.allowBareDomains, true, 'PATCH keeps the other settings')
    expectStatus(await call('DELETE', `/cas/${ca.id}/roles/${name}`), 204, 'DELETE role')
    expectRefusal(await call('GET', `/cas/${ca.id}/roles/${name}`), 404, 'role_not_found', 'deleted role')
    expectRefusal(
      await issueRequest(ca.id, name, { dnsNames: ['a.example.com'] }),
      404,
      'role_not_found',
      'issue through a deleted role',
    )
  })
})

/** Per CA algorithm: the leaf keys generated by the service and the key of the CSR made here. */
const ALGORITHM_CASES: Array<{ ca: string; generated: string; nodeType: string; csr: string | null }> = [
  { ca: 'ML-DSA-44', generated: 'ML-DSA-44', nodeType: 'ml-dsa-44', csr: 'ML-DSA-44' },
  { ca: 'ML-DSA-65', generated: 'EC-P256', nodeType: 'ec', csr: 'ML-DSA-65' },
  { ca: 'ML-DSA-87', generated: 'ML-DSA-87', nodeType: 'ml-dsa-87', csr: 'EC-P384' },
  // ~1-2 s per SLH-DSA signature: one root (certificate and CRL) and one leaf.
  { ca: 'SLH-DSA-128s', generated: 'EC-P256', nodeType: 'ec', csr: null },
  { ca: 'EC-P256', generated: 'EC-P256', nodeType: 'ec', csr: 'EC-P256' },
  { ca: 'EC-P384', generated: 'EC-P384', nodeType: 'ec', csr: 'EC-P384' },
  { ca: 'RSA-3072', generated: 'RSA-2048', nodeType: 'rsa', csr: 'RSA-2048' },
  { ca: 'RSA-4096', generated: 'ML-DSA-65', nodeType: 'ml-dsa-65', csr: 'Ed25519' },
  { ca: 'Ed25519', generated: 'Ed25519', nodeType: 'ed25519', csr: 'Ed25519' },
]

describe('every CA algorithm: a root, a role, leaves from a generated key and from a CSR', () => {
  for (const { ca: algorithm, generated, nodeType, csr } of ALGORITHM_CASES) {
    test(`${algorithm} root: the chains verify outside the service`, async () => {
      const ca = await createCa({ algorithm, subject: { commonName: `${algorithm} Root`, country: 'FR' } })
      assert.equal(ca.algorithm, algorithm)
      checkCaCertificate(ca.certificate)
      await verifyChain(ca.certificate, [ca.certificate], [algorithm])
      const role = await createRole(ca.id)

      const dnsNames = [`gen-${algorithm.toLowerCase()}.example.com`]
      const fromKey = await issue(ca.id, role, { keyAlgorithm: generated, dnsNames, commonName: dnsNames[0] })
      assert.equal(fromKey.keyAlgorithm, generated)
      checkLeaf(fromKey, ca, { dnsNames, ttlSeconds: 30 * DAY_S })
      checkPrivateKeyMatches(fromKey, nodeType)
      await verifyChain(fromKey.certificate, fromKey.chain, [algorithm])

      if (csr) {
        const csrNames = [`csr-${algorithm.toLowerCase()}.example.com`, 'alt.example.com']
        const request = await makeCsr(csr, { commonName: csrNames[0]!, dnsNames: csrNames })
        const fromCsr = await issue(ca.id, role, { csr: request.pem, dnsNames: undefined })
        assert.equal(fromCsr.privateKey, undefined, 'no private key for a CSR')
        assert.equal(fromCsr.keyAlgorithm, csr)
        assert.deepEqual(fromCsr.dnsNames.sort(), [...csrNames].sort(), 'the CSR’s requested names')
        checkLeaf(fromCsr, ca, { dnsNames: csrNames, ttlSeconds: 30 * DAY_S })
        assert.deepEqual(spkiOf(new X509Certificate(fromCsr.certificate)), request.spki, 'the CSR’s key')
        await verifyChain(fromCsr.certificate, fromCsr.chain, [algorithm])
        assert.notEqual(fromCsr.serial, fromKey.serial)
      }
    })
  }

  test('an ML-KEM-768 leaf under an ML-DSA-65 root: keyEncipherment only, its key shown once', async () => {
    const ca = await createCa({ algorithm: 'ML-DSA-65' })
    const role = await createRole(ca.id)
    const issued = await issue(ca.id, role, { keyAlgorithm: 'ML-KEM-768' })
    checkPrivateKeyMatches(issued, 'ml-kem-768')
    await verifyChain(issued.certificate, issued.chain, ['ML-DSA-65'])
    const cert = new x509.X509Certificate(issued.certificate)
    const usage = cert.getExtension(x509.KeyUsagesExtension)
    assert.equal(usage?.usages, x509.KeyUsageFlags.keyEncipherment, 'keyEncipherment and nothing else')
    assert.ok(usage?.critical, 'keyUsage is critical')
    // The certified key encapsulates (noble) to what the returned private key decapsulates (node).
    const publicKey = rawPublicKey(spkiOf(new X509Certificate(issued.certificate)))
    const { cipherText, sharedSecret } = ml_kem768.encapsulate(publicKey)
    const opened = decapsulate(createPrivateKey(issued.privateKey!), Buffer.from(cipherText))
    assert.deepEqual(Buffer.from(opened), Buffer.from(sharedSecret))

    const got = expectStatus(await call('GET', `/certificates/${issued.serial}`), 200, 'GET ML-KEM leaf').body
    assert.equal(got.privateKey, undefined, 'GET never shows the private key')
    assert.equal(got.keyAlgorithm, 'ML-KEM-768')
    assert.equal(got.certificate, issued.certificate)
    const list = expectStatus(await call('GET', `/certificates?caId=${ca.id}`), 200, 'list').body
    assert.ok(list.data.every((c: Record<string, unknown>) => !('privateKey' in c)))
    const body = pemToDer(issued.privateKey!).toString('base64')
    const [leaks] = await svc.sql<{ n: string }[]>`
      SELECT count(*)::text AS n FROM audit_log
      WHERE details::text LIKE ${`%${body.slice(40, 100)}%`} OR details::text LIKE '%PRIVATE KEY%'`
    assert.equal(leaks!.n, '0', 'no audit record holds the private key')
    const [issuedRecord] = await svc.sql<{ resource: string; details: Record<string, unknown> }[]>`
      SELECT resource, details FROM audit_log
      WHERE action = 'crypto.certificate_issue' AND details->>'serial' = ${issued.serial}`
    assert.equal(issuedRecord?.resource, `key:${ca.keyId}`)
  })
})

describe('intermediates', () => {
  test('under a tenant root: a 3-level chain verifies; a pathLength 0 parent refuses 409', async () => {
    const root = await createCa({ algorithm: 'EC-P384', pathLength: 1 })
    const res = await call('POST', '/cas', {
      name: uniqueName('inter'),
      type: 'intermediate',
      parentId: root.id,
      algorithm: 'EC-P256',
      subject: { commonName: 'Issuing CA 1' },
      validityDays: 365,
    })
    const inter: Ca & { pathLength: number; parentId: string } = expectStatus(res, 201, 'intermediate').body
    assert.equal(inter.parentId, root.id)
    assert.equal(inter.pathLength, 0, 'one below the parent’s')
    assert.deepEqual(inter.chain, [root.certificate])
    await verifyChain(inter.certificate, [root.certificate], ['EC-P384'])
    const interCert = new x509.X509Certificate(inter.certificate)
    assert.equal(interCert.getExtension(x509.BasicConstraintsExtension)?.pathLength, 0)

    const role = await createRole(inter.id)
    const leaf = await issue(inter.id, role)
    assert.deepEqual(leaf.chain, [inter.certificate, root.certificate])
    await verifyChain(leaf.certificate, leaf.chain, ['EC-P256', 'EC-P384'])

    // The parent's record of what it signed.
    const parentList = expectStatus(await call('GET', `/certificates?caId=${root.id}`), 200, 'list').body
    assert.ok(
      parentList.data.some(
        (c: Issued) => c.serial === new X509Certificate(inter.certificate).serialNumber.toLowerCase(),
      ),
      'the intermediate’s certificate is listed under its parent',
    )

    expectRefusal(
      await call('POST', '/cas', {
        name: uniqueName('too-deep'),
        type: 'intermediate',
        parentId: inter.id,
        algorithm: 'EC-P256',
        subject: { commonName: 'Too deep' },
      }),
      409,
      'path_length_exceeded',
      'an intermediate under a pathLength 0 CA',
    )
  })

  test('the intermediate’s certificate is revocable by serial: its parent’s CRL lists it', async () => {
    const root = await createCa({ algorithm: 'EC-P256' })
    const inter: Ca = expectStatus(
      await call('POST', '/cas', {
        name: uniqueName('revoked-inter'),
        type: 'intermediate',
        parentId: root.id,
        algorithm: 'EC-P256',
        subject: { commonName: 'Revoked Issuing CA' },
      }),
      201,
      'intermediate',
    ).body
    const leaf = await issue(inter.id, await createRole(inter.id))
    const serial = new X509Certificate(inter.certificate).serialNumber.toLowerCase()
    const revoked = await revoke(serial, { reason: 'caCompromise' })
    assert.equal(revoked.caId, root.id)
    const crl = await fetchCrl(root.id)
    assert.equal(crlEntry(crl, serial)?.reason, x509.X509CrlReason.cACompromise)
    const verdict = opensslVerify(inter.certificate, [root.certificate], {
      crlPem: derToPem(crl.der, 'X509 CRL'),
    })
    assert.ok(!verdict.ok && /certificate revoked/.test(verdict.output), verdict.output)
    await verifyChain(leaf.certificate, leaf.chain, ['EC-P256', 'EC-P256'])
  })

  test('an intermediate may not outlive its parent nor widen its path length (400)', async () => {
    const root = await createCa({ algorithm: 'EC-P256', validityDays: 800, pathLength: 2 })
    const body = (extra: Record<string, unknown>) => ({
      name: uniqueName('i'),
      type: 'intermediate',
      parentId: root.id,
      algorithm: 'EC-P256',
      subject: { commonName: 'I' },
      ...extra,
    })
    const longer = await call('POST', '/cas', body({ validityDays: 801 }))
    expectRefusal(longer, 400, 'validation_failed', 'longer than the parent')
    assert.equal(longer.body.fields?.[0]?.path, 'validityDays')
    const wider = await call('POST', '/cas', body({ pathLength: 2 }))
    expectRefusal(wider, 400, 'validation_failed', 'a path length as long as the parent’s')
    assert.equal(wider.body.fields?.[0]?.path, 'pathLength')
    // Without validityDays: the default (1825 days) is cut to the parent's end.
    const cut: Ca = expectStatus(await call('POST', '/cas', body({})), 201, 'default validity').body
    assert.equal(cut.notAfter, root.notAfter)
    checkCaCertificate(cut.certificate, 1)
  })

  test('a post-quantum intermediate under a classical root: leaf → ML-DSA-87 → RSA-3072', async () => {
    const root = await createCa({ algorithm: 'RSA-3072' })
    const inter: Ca = expectStatus(
      await call('POST', '/cas', {
        name: uniqueName('pq-inter'),
        type: 'intermediate',
        parentId: root.id,
        algorithm: 'ML-DSA-87',
        subject: { commonName: 'PQ Issuing CA' },
      }),
      201,
      'PQ intermediate',
    ).body
    const leaf = await issue(inter.id, await createRole(inter.id), { keyAlgorithm: 'ML-DSA-44' })
    await verifyChain(leaf.certificate, leaf.chain, ['ML-DSA-87', 'RSA-3072'])
  })

  describe('under an outside parent (a CA made here with @peculiar/x509, ECDSA P-256)', () => {
    let outsideKeys: CryptoKeyPair
    let outsideRoot: x509.X509Certificate
    const ecdsa = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' }

    before(async () => {
      outsideKeys = (await webcrypto.subtle.generateKey(ecdsa, true, ['sign', 'verify'])) as CryptoKeyPair
      outsideRoot = await x509.X509CertificateGenerator.createSelfSigned({
        serialNumber: '01',
        name: 'CN=Outside Root, O=Elsewhere',
        notBefore: new Date(clock.now().getTime() - DAY_S * 1000),
        notAfter: new Date(clock.now().getTime() + 3650 * DAY_S * 1000),
        keys: outsideKeys,
        signingAlgorithm: ecdsa,
        extensions: [
          new x509.BasicConstraintsExtension(true, 2, true),
          new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
          await x509.SubjectKeyIdentifierExtension.create(outsideKeys.publicKey),
        ],
      })
    })

    /** The outside root signs a CA certificate for `publicKey` (the pending CA's, from its CSR). */
    async function signByOutsideRoot(subject: string, publicKey: x509.PublicKey | CryptoKey) {
      return x509.X509CertificateGenerator.create({
        serialNumber: '0badc0de',
        subject,
        issuer: outsideRoot.subject,
        notBefore: new Date(clock.now().getTime() - HOUR_MS),
        notAfter: new Date(clock.now().getTime() + 365 * DAY_S * 1000),
        publicKey,
        signingKey: outsideKeys.privateKey,
        signingAlgorithm: ecdsa,
        extensions: [
          new x509.BasicConstraintsExtension(true, 0, true),
          new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
          await x509.AuthorityKeyIdentifierExtension.create(outsideKeys.publicKey),
        ],
      })
    }

    test('imports that do not fit are refused (400): not a CA, expired, chain[0] not the issuer, not PEM', async () => {
      const pending = expectStatus(
        await call('POST', '/cas', {
          name: uniqueName('outside-bad'),
          type: 'intermediate',
          algorithm: 'EC-P256',
          subject: { commonName: 'Refused Import' },
        }),
        201,
        'pending',
      ).body
      const csr = new x509.Pkcs10CertificateRequest(pending.csr)
      const make = async (options: { ca?: boolean; notAfter?: Date }) =>
        x509.X509CertificateGenerator.create({
          serialNumber: '0c',
          subject: csr.subject,
          issuer: outsideRoot.subject,
          notBefore: new Date(clock.now().getTime() - 2 * DAY_S * 1000),
          notAfter: options.notAfter ?? new Date(clock.now().getTime() + 30 * DAY_S * 1000),
          publicKey: csr.publicKey,
          signingKey: outsideKeys.privateKey,
          signingAlgorithm: ecdsa,
          extensions: [new x509.BasicConstraintsExtension(options.ca ?? true, undefined, true)],
        })
      const notCa = await make({ ca: false })
      const expired = await make({ notAfter: new Date(clock.now().getTime() - DAY_S * 1000) })
      const good = await make({})
      const cases: Array<[string, Record<string, unknown>, string]> = [
        ['not a CA certificate', { certificate: notCa.toString('pem') }, 'certificate'],
        ['an expired certificate', { certificate: expired.toString('pem') }, 'certificate'],
        [
          'chain[0] did not issue it',
          { certificate: good.toString('pem'), chain: [good.toString('pem')] },
          'chain',
        ],
        ['not PEM', { certificate: 'hello' }, 'certificate'],
        ['a CSR, not a certificate', { certificate: pending.csr }, 'certificate'],
      ]
      for (const [label, body, field] of cases) {
        const res = await call('POST', `/cas/${pending.id}/certificate`, body)
        expectRefusal(res, 400, 'validation_failed', label)
        assert.equal(res.body.fields?.[0]?.path, field, `${label}: ${res.text}`)
      }
      const still = expectStatus(await call('GET', `/cas/${pending.id}`), 200, 'GET').body
      assert.equal(still.status, 'pending', 'nothing was imported')
    })

    test('the pending CA’s CSR, signed outside and imported, makes an issuing CA', async () => {
      const pending = expectStatus(
        await call('POST', '/cas', {
          name: uniqueName('outside'),
          type: 'intermediate',
          algorithm: 'ML-DSA-65',
          subject: { commonName: 'Imported Issuing CA', organization: 'Example' },
        }),
        201,
        'pending intermediate',
      ).body
      assert.equal(pending.status, 'pending')
      assert.equal(pending.certificate, null)
      assert.ok(pending.csr.startsWith('-----BEGIN CERTIFICATE REQUEST-----'))
      const csr = new x509.Pkcs10CertificateRequest(pending.csr)
      assert.ok(await csr.verify(), 'the CSR’s proof of possession verifies (@peculiar/x509)')
      assert.deepEqual(csr.subject.split(', ').sort(), ['CN=Imported Issuing CA', 'O=Example'])
      verifyPqSigned(pemToDer(pending.csr), Buffer.from(csr.publicKey.rawData), 'ML-DSA-65', null)

      // Pending: no certificate, no CRL, no issuance.
      assert.equal((await fetchPublic(`/api/v1/cas/${pending.id}/certificate`)).status, 404)
      assert.equal((await fetchPublic(`/api/v1/cas/${pending.id}/crl`)).status, 404)
      const role = await createRole(pending.id)
      expectRefusal(
        await issueRequest(pending.id, role, { dnsNames: ['a.example.com'] }),
        409,
        'ca_pending',
        'issue',
      )

      // A certificate for another key (same subject) is refused.
      const stranger = (await webcrypto.subtle.generateKey(ecdsa, true, ['sign', 'verify'])) as CryptoKeyPair
      const wrong = await signByOutsideRoot(csr.subject, stranger.publicKey)
      const refused = await call('POST', `/cas/${pending.id}/certificate`, {
        certificate: wrong.toString('pem'),
        chain: [outsideRoot.toString('pem')],
      })
      expectRefusal(refused, 400, 'validation_failed', 'a certificate of another key')
      assert.equal(refused.body.fields?.[0]?.path, 'certificate')

      const signedCert = await signByOutsideRoot(csr.subject, csr.publicKey)
      const imported = expectStatus(
        await call('POST', `/cas/${pending.id}/certificate`, {
          certificate: signedCert.toString('pem'),
          chain: [outsideRoot.toString('pem')],
        }),
        200,
        'import',
      ).body
      assert.equal(imported.status, 'active')
      assert.equal(imported.csr, null)
      assert.deepEqual(pemToDer(imported.certificate), Buffer.from(signedCert.rawData))
      assert.equal(imported.chain.length, 1)
      expectRefusal(
        await call('POST', `/cas/${pending.id}/certificate`, { certificate: signedCert.toString('pem') }),
        409,
        'ca_not_pending',
        'a second import',
      )

      const leaf = await issue(pending.id, role, { keyAlgorithm: 'EC-P256' })
      assert.deepEqual(
        leaf.chain.map((pem) => pemToDer(pem)),
        [Buffer.from(signedCert.rawData), Buffer.from(outsideRoot.rawData)],
      )
      await verifyChain(leaf.certificate, leaf.chain, ['ML-DSA-65', 'EC-P256'])
      const leafCert = new x509.X509Certificate(leaf.certificate)
      assert.equal(leafCert.issuer, signedCert.subject, 'the leaf’s issuer is the imported subject')
      const crl = await fetchCrl(pending.id)
      verifyPqSigned(crl.der, spkiOf(new X509Certificate(imported.certificate)), 'ML-DSA-65', 1)
    })
  })
})

describe('role rules: each refusal is a 400 naming its rule', () => {
  let ca: Ca
  let strict: string
  let bare: string

  before(async () => {
    ca = await createCa({ algorithm: 'EC-P256' })
    strict = await createRole(ca.id, {
      allowedDomains: ['example.com'],
      allowSubdomains: true,
      ttlSeconds: 1800,
      maxTtlSeconds: 3600,
      allowedKeyAlgorithms: ['EC-P256', 'Ed25519'],
    })
    bare = await createRole(ca.id, {
      allowedDomains: ['example.com'],
      allowBareDomains: true,
      allowSubdomains: false,
    })
  })

  /** A refusal by a role rule: `error` and `rule` name it, `field` the request's field. */
  function expectRule(res: HttpResult, rule: string, field: string, what: string) {
    expectRefusal(res, 400, rule, what)
    assert.equal(res.body.rule, rule, what)
    assert.equal(res.body.field, field, what)
  }

  const cases: Array<[string, () => { role: () => string; body: Record<string, unknown> }, string, string]> =
    [
      [
        'a name outside allowedDomains',
        () => ({ role: () => strict, body: { dnsNames: ['www.example.org'] } }),
        'name_not_allowed',
        'dnsNames',
      ],
      [
        'a look-alike suffix',
        () => ({ role: () => strict, body: { dnsNames: ['evilexample.com'] } }),
        'name_not_allowed',
        'dnsNames',
      ],
      [
        'a common name outside allowedDomains',
        () => ({ role: () => strict, body: { commonName: 'example.net', dnsNames: ['a.example.com'] } }),
        'name_not_allowed',
        'commonName',
      ],
      [
        'a subdomain without allowSubdomains',
        () => ({ role: () => bare, body: { dnsNames: ['www.example.com'] } }),
        'subdomains_not_allowed',
        'dnsNames',
      ],
      [
        'a bare domain without allowBareDomains',
        () => ({ role: () => strict, body: { dnsNames: ['example.com'] } }),
        'bare_domain_not_allowed',
        'dnsNames',
      ],
      [
        'a wildcard',
        () => ({ role: () => strict, body: { dnsNames: ['*.example.com'] } }),
        'wildcard_not_allowed',
        'dnsNames',
      ],
      [
        'an IP SAN',
        () => ({ role: () => strict, body: { dnsNames: ['a.example.com'], ipAddresses: ['192.0.2.1'] } }),
        'ip_sans_not_allowed',
        'ipAddresses',
      ],
      [
        'a TTL past maxTtlSeconds',
        () => ({ role: () => strict, body: { dnsNames: ['a.example.com'], ttlSeconds: 3601 } }),
        'ttl_exceeds_max',
        'ttlSeconds',
      ],
      [
        'a generated key algorithm not allowed',
        () => ({ role: () => strict, body: { dnsNames: ['a.example.com'], keyAlgorithm: 'RSA-2048' } }),
        'key_algorithm_not_allowed',
        'keyAlgorithm',
      ],
      ['no name at all', () => ({ role: () => strict, body: { dnsNames: [] } }), 'no_names', 'commonName'],
    ]
  for (const [label, make, rule, field] of cases) {
    test(`${label}: ${rule}`, async () => {
      const { role, body } = make()
      const res = await call('POST', '/certificates', { caId: ca.id, role: role(), ...body })
      expectRule(res, rule, field, label)
    })
  }

  test('what the roles allow is issued (subdomains under strict, the bare domain under bare)', async () => {
    const sub = await issue(ca.id, strict, { dnsNames: ['deep.www.example.com', 'API.Example.com'] })
    assert.deepEqual(sub.dnsNames.sort(), ['api.example.com', 'deep.www.example.com'], 'names lower-cased')
    checkLeaf(sub, ca, { dnsNames: ['api.example.com', 'deep.www.example.com'], ttlSeconds: 1800 })
    const apex = await issue(ca.id, bare, { dnsNames: ['example.com'] })
    assert.deepEqual(apex.dnsNames, ['example.com'])
    const max = await issue(ca.id, strict, { ttlSeconds: 3600 })
    assert.equal(new Date(max.notAfter).getTime(), clock.now().getTime() + 3600_000)
  })

  test('wildcards and IP SANs are issued when the role allows them', async () => {
    const open = await createRole(ca.id, { allowWildcardCertificates: true, allowIpSans: true })
    const issued = await issue(ca.id, open, {
      dnsNames: ['*.example.com'],
      ipAddresses: ['192.0.2.7', '2001:db8::1'],
    })
    const cert = new X509Certificate(issued.certificate)
    assert.match(cert.subjectAltName ?? '', /DNS:\*\.example\.com/)
    assert.match(cert.subjectAltName ?? '', /IP Address:192\.0\.2\.7/)
    assert.match(cert.subjectAltName ?? '', /IP Address:2001:DB8:0:0:0:0:0:1/i)
  })

  test('a CSR’s key algorithm not allowed: key_algorithm_not_allowed on csr', async () => {
    const request = await makeCsr('EC-P384', { dnsNames: ['a.example.com'] })
    expectRule(
      await issueRequest(ca.id, strict, { csr: request.pem }),
      'key_algorithm_not_allowed',
      'csr',
      'an EC-P384 CSR',
    )
  })

  test('a CSR asking for a CA certificate (basicConstraints, keyCertSign) gets a plain leaf', async () => {
    const keys = (await webcrypto.subtle.generateKey(CSR_KEYS['EC-P256']!, true, [
      'sign',
      'verify',
    ])) as CryptoKeyPair
    const request = await x509.Pkcs10CertificateRequestGenerator.create({
      name: 'CN=sneaky.example.com',
      keys,
      signingAlgorithm: CSR_KEYS['EC-P256']!,
      extensions: [
        new x509.BasicConstraintsExtension(true, 5, true),
        new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
        new x509.SubjectAlternativeNameExtension([
          { type: 'dns', value: 'sneaky.example.com' },
          { type: 'email', value: 'a@example.com' },
          { type: 'url', value: 'https://example.com/' },
        ]),
      ],
    })
    const issued = await issue(ca.id, strict, { csr: request.toString('pem'), dnsNames: undefined })
    checkLeaf(issued, ca, { dnsNames: ['sneaky.example.com'], ttlSeconds: 1800 })
    const cert = new x509.X509Certificate(issued.certificate)
    const san = cert.getExtension(x509.SubjectAlternativeNameExtension)
    assert.deepEqual(
      san?.names.items.map((n) => n.type),
      ['dns'],
      'only the names the role checked are certified (no email, no URI)',
    )
  })

  test('a CSR whose names the role refuses is refused like a request’s names', async () => {
    const request = await makeCsr('EC-P256', { commonName: 'www.example.org', dnsNames: ['www.example.org'] })
    expectRule(
      await issueRequest(ca.id, strict, { csr: request.pem }),
      'name_not_allowed',
      'commonName',
      'CSR',
    )
  })

  test('a CSR with a bad signature (no proof of possession) is a 400 naming csr', async () => {
    const request = await makeCsr('EC-P256', { dnsNames: ['a.example.com'] })
    const { signature } = signedParts(request.der)
    // Flip a bit inside the ECDSA signature's r INTEGER (past its tag and length).
    const at = request.der.length - signature.length + 6
    const tampered = Buffer.from(request.der)
    tampered[at]! ^= 0x01
    const res = await issueRequest(ca.id, strict, { csr: derToPem(tampered, 'CERTIFICATE REQUEST') })
    expectStatus(res, 400, 'a tampered CSR')
    assert.equal(res.body.fields?.[0]?.path, 'csr', res.text)
    assert.match(res.body.message, /csr/i)
    assert.match(res.body.message, /signature|possession/i)
  })

  test('malformed CSRs are 400 naming csr', async () => {
    for (const csr of [
      'not a csr',
      derToPem(Buffer.from('garbage'), 'CERTIFICATE REQUEST'),
      derToPem(Buffer.of(0x30, 0x03, 0x02, 0x01, 0x00), 'CERTIFICATE REQUEST'),
    ]) {
      const res = await issueRequest(ca.id, strict, { csr })
      expectStatus(res, 400, `CSR ${csr.slice(0, 40)}`)
      assert.equal(res.body.fields?.[0]?.path, 'csr', res.text)
    }
    const request = await makeCsr('EC-P256', { dnsNames: ['a.example.com'] })
    const both = await issueRequest(ca.id, strict, { csr: request.pem, keyAlgorithm: 'EC-P256' })
    expectStatus(both, 400, 'csr and keyAlgorithm')
    assert.equal(both.body.fields?.[0]?.path, 'keyAlgorithm')
  })

  test('a leaf past the CA’s end: not_after_beyond_ca (error) or cut to the CA’s notAfter (truncate)', async () => {
    const shortLived: Ca = expectStatus(
      await call('POST', '/cas', {
        name: uniqueName('short'),
        type: 'intermediate',
        parentId: ca.id,
        algorithm: 'EC-P256',
        subject: { commonName: 'Short-lived CA' },
        validityDays: 1,
      }),
      201,
      'a one-day intermediate',
    ).body
    assert.equal(shortLived.notAfter, new Date(clock.now().getTime() + DAY_S * 1000).toISOString())
    const refuse = await createRole(shortLived.id, { notAfterBehavior: 'error' })
    const truncate = await createRole(shortLived.id, { notAfterBehavior: 'truncate' })
    expectRule(
      await issueRequest(shortLived.id, refuse, { dnsNames: ['a.example.com'], ttlSeconds: 2 * DAY_S }),
      'not_after_beyond_ca',
      'ttlSeconds',
      'error behaviour',
    )
    const within = await issue(shortLived.id, refuse, { ttlSeconds: 3600 })
    assert.equal(new Date(within.notAfter).getTime(), clock.now().getTime() + 3600_000)
    const cut = await issue(shortLived.id, truncate, { ttlSeconds: 2 * DAY_S })
    assert.equal(cut.notAfter, shortLived.notAfter)
    assert.equal(new x509.X509Certificate(cut.certificate).notAfter.toISOString(), shortLived.notAfter)
    await verifyChain(cut.certificate, cut.chain, ['EC-P256', 'EC-P256'])
  })

  test('serials are positive, at most 20 octets, distinct; notBefore is backdated 30 s', async () => {
    const serials = new Set<string>()
    for (let i = 0; i < 12; i++) {
      const issued = await issue(ca.id, strict)
      checkSerial(issued)
      assert.equal(issued.notBefore, new Date(clock.now().getTime() - BACKDATE_MS).toISOString())
      serials.add(issued.serial)
    }
    assert.equal(serials.size, 12)
  })
})

describe('CA name constraints and subjects', () => {
  test('the CA certificate carries its name constraints, and a leaf outside them is refused', async () => {
    const ca = await createCa({
      algorithm: 'EC-P256',
      nameConstraints: {
        permittedDnsDomains: ['example.com'],
        excludedDnsDomains: ['secret.example.com'],
        permittedIpRanges: ['192.0.2.0/24'],
      },
    })
    const text = opensslText(ca.certificate)
    assert.match(text, /X509v3 Name Constraints: critical/)
    assert.match(text, /Permitted:\s+DNS:example\.com\s+IP:192\.0\.2\.0\/255\.255\.255\.0/)
    assert.match(text, /Excluded:\s+DNS:secret\.example\.com/)
    // The role alone would allow example.org and any IP: the CA's constraints must still hold.
    const role = await createRole(ca.id, {
      allowedDomains: ['example.com', 'example.org'],
      allowIpSans: true,
    })
    const inside = await issue(ca.id, role, { dnsNames: ['www.example.com'], ipAddresses: ['192.0.2.9'] })
    const verdict = opensslVerify(inside.certificate, inside.chain)
    assert.ok(verdict.ok, verdict.output)

    for (const [label, body] of [
      ['a DNS name outside the permitted subtrees', { dnsNames: ['www.example.org'] }],
      ['a DNS name in an excluded subtree', { dnsNames: ['db.secret.example.com'] }],
      [
        'an IP address outside the permitted ranges',
        { dnsNames: ['www.example.com'], ipAddresses: ['198.51.100.1'] },
      ],
    ] as const) {
      const res = await issueRequest(ca.id, role, body)
      if (res.status === 201) {
        const relyingParty = opensslVerify(res.body.certificate, res.body.chain)
        assert.fail(
          `${label}: issued a certificate its own CA's name constraints forbid (openssl verify: ${relyingParty.output.trim()})`,
        )
      }
      expectStatus(res, 400, label)
    }
  })

  test('subjects in UTF-8 (accents, CJK, emoji) round-trip into the certificate', async () => {
    const subject = {
      commonName: 'Racine Été 根 ✓',
      organization: 'Société Ünïcode',
      country: 'FR',
      locality: 'Zürich',
    }
    const ca = await createCa({ algorithm: 'EC-P256', subject })
    const got = expectStatus(await call('GET', `/cas/${ca.id}`), 200, 'GET').body
    assert.deepEqual(got.subject, subject)
    const cert = new X509Certificate(ca.certificate)
    assert.match(cert.subject, /CN=Racine Été 根 ✓/)
    assert.match(cert.subject, /O=Société Ünïcode/)
    assert.match(cert.subject, /L=Zürich/)
    const verdict = opensslVerify(ca.certificate, [ca.certificate])
    assert.ok(verdict.ok, verdict.output)
    expectRefusal(
      await call('POST', '/cas', {
        name: uniqueName('ctl'),
        type: 'root',
        algorithm: 'EC-P256',
        subject: { commonName: 'a\u0007b' },
      }),
      400,
      'validation_failed',
      'a control character in the subject',
    )
    expectRefusal(
      await call('POST', '/cas', {
        name: uniqueName('long'),
        type: 'root',
        algorithm: 'EC-P256',
        subject: { commonName: 'x'.repeat(65) },
      }),
      400,
      'validation_failed',
      'a 65-character CN',
    )
  })
})

describe('CRLs', () => {
  let ecCa: Ca
  let ecRole: string

  before(async () => {
    ecCa = await createCa({ algorithm: 'EC-P256' })
    ecRole = await createRole(ecCa.id)
  })

  test('a new CA publishes an empty CRL signed by its key, valid 72 h', async () => {
    const crl = await fetchCrl(ecCa.id)
    assert.equal(crl.parsed.entries.length, 0)
    assert.ok(crl.number >= 1n)
    assert.ok(await crl.parsed.verify({ publicKey: new x509.X509Certificate(ecCa.certificate) }))
    assert.equal(crl.parsed.issuer, new x509.X509Certificate(ecCa.certificate).subject)
    assert.equal(crl.parsed.nextUpdate!.getTime() - crl.parsed.thisUpdate.getTime(), CRL_LIFETIME_MS)
  })

  test('a revocation (keyCompromise) is listed at once, in DER and PEM, without credentials', async () => {
    const before = await fetchCrl(ecCa.id)
    const leaf = await issue(ecCa.id, ecRole)
    const revoked = await revoke(leaf.serial, { reason: 'keyCompromise' })
    assert.deepEqual(
      {
        serial: revoked.serial,
        caId: revoked.caId,
        reason: revoked.revocationReason,
        stored: revoked.stored,
      },
      { serial: leaf.serial, caId: ecCa.id, reason: 'keyCompromise', stored: true },
    )
    assert.equal(revoked.revokedAt, clock.now().toISOString())

    const crl = await fetchCrl(ecCa.id)
    assert.ok(crl.number > before.number, `the CRL number grows (${before.number} → ${crl.number})`)
    const entry = crlEntry(crl, leaf.serial)
    assert.ok(entry, 'the serial is listed')
    assert.equal(entry.reason, x509.X509CrlReason.keyCompromise)
    assert.equal(entry.revocationDate.getTime(), clock.now().getTime())
    const caCert = new x509.X509Certificate(ecCa.certificate)
    assert.ok(await crl.parsed.verify({ publicKey: caCert }), '@peculiar/x509 verifies the CRL')
    assert.equal(crl.parsed.thisUpdate.getTime(), clock.now().getTime())
    assert.equal(crl.parsed.nextUpdate!.getTime(), clock.now().getTime() + CRL_LIFETIME_MS)
    // Tampering breaks it: the verification is real.
    const tampered = Buffer.from(crl.der)
    tampered[tampered.length - 2]! ^= 1
    assert.equal(await new x509.X509Crl(tampered).verify({ publicKey: caCert }).catch(() => false), false)

    const pem = await fetchPublic(`/api/v1/cas/${ecCa.id}/crl?format=pem`)
    assert.equal(pem.status, 200)
    assert.ok(pem.bytes.toString().startsWith('-----BEGIN X509 CRL-----'))
    assert.deepEqual(pemToDer(pem.bytes.toString()), crl.der)

    const got = expectStatus(await call('GET', `/certificates/${leaf.serial}`), 200, 'GET revoked').body
    assert.equal(got.status, 'revoked')
    assert.equal(got.revocationReason, 'keyCompromise')

    // A relying party (OpenSSL with CRL checking) refuses the revoked leaf, accepts another.
    const crlPem = pem.bytes.toString()
    const refused = opensslVerify(leaf.certificate, leaf.chain, { crlPem })
    assert.ok(!refused.ok && /certificate revoked/.test(refused.output), refused.output)
    const other = await issue(ecCa.id, ecRole)
    const accepted = opensslVerify(other.certificate, other.chain, { crlPem })
    assert.ok(accepted.ok, accepted.output)
  })

  test('revoking twice keeps the first reason and time, and a repeat changes no CRL', async () => {
    const leaf = await issue(ecCa.id, ecRole)
    const first = await revoke(leaf.serial, { reason: 'superseded' })
    const afterFirst = await fetchCrl(ecCa.id)
    const second = await revoke(leaf.serial.toUpperCase().replace(/(..)(?!$)/g, '$1:'), {
      reason: 'keyCompromise',
    })
    assert.equal(second.revocationReason, 'superseded')
    assert.equal(second.revokedAt, first.revokedAt)
    const afterSecond = await fetchCrl(ecCa.id)
    // Nothing was revoked the second time: the CRL the first revocation built stands.
    assert.equal(afterSecond.number, afterFirst.number)
    assert.equal(crlEntry(afterSecond, leaf.serial)?.reason, x509.X509CrlReason.superseded)
    const got = expectStatus(await call('GET', `/certificates/${leaf.serial}`), 200, 'GET').body
    assert.equal(got.revocationReason, 'superseded')
  })

  test('concurrent revocations of one serial agree: one reason and time, in every answer, GET and the CRL', async () => {
    const reasons = [
      'keyCompromise',
      'superseded',
      'affiliationChanged',
      'cessationOfOperation',
      'privilegeWithdrawn',
      'caCompromise',
    ]
    for (let round = 0; round < 3; round++) {
      const leaf = await issue(ecCa.id, ecRole)
      const answers = await Promise.all(
        reasons.map((reason) => call('POST', `/certificates/${leaf.serial}/revoke`, { reason })),
      )
      for (const answer of answers) expectStatus(answer, 200, 'a concurrent revocation')
      const kept = new Set(answers.map((a) => `${a.body.revocationReason} ${a.body.revokedAt}`))
      assert.equal(kept.size, 1, `every answer names the same revocation: ${[...kept]}`)
      const [reason] = [...kept][0]!.split(' ')
      const got = expectStatus(await call('GET', `/certificates/${leaf.serial}`), 200, 'GET').body
      assert.equal(got.revocationReason, reason, 'GET names the revocation the answers named')
      const entry = crlEntry(await fetchCrl(ecCa.id), leaf.serial)
      assert.equal(entry?.reason, CRL_REASON[reason!], 'the CRL lists the same reason')
    }
  })

  test('reason unspecified is listed without a reasonCode (RFC 5280 5.3.1)', async () => {
    const leaf = await issue(ecCa.id, ecRole)
    const revoked = await revoke(leaf.serial)
    assert.equal(revoked.revocationReason, 'unspecified')
    const entry = crlEntry(await fetchCrl(ecCa.id), leaf.serial)
    assert.ok(entry)
    assert.equal(entry.reason, undefined)
  })

  test('an ML-DSA-44 CA’s CRL verifies with noble over its TBS', async () => {
    const ca = await createCa({ algorithm: 'ML-DSA-44' })
    const leaf = await issue(ca.id, await createRole(ca.id))
    await revoke(leaf.serial, { reason: 'cessationOfOperation' })
    const crl = await fetchCrl(ca.id)
    verifyPqSigned(crl.der, spkiOf(new X509Certificate(ca.certificate)), 'ML-DSA-44', 1)
    assert.equal(crlEntry(crl, leaf.serial)?.reason, x509.X509CrlReason.cessationOfOperation)
  })

  test('noStore: not listed, revocable by serial with its caId only, then on the CRL', async () => {
    const role = await createRole(ecCa.id, { noStore: true })
    const leaf = await issue(ecCa.id, role)
    assert.equal(leaf.stored, false)
    await verifyChain(leaf.certificate, leaf.chain, ['EC-P256'])
    const list = expectStatus(await call('GET', `/certificates?caId=${ecCa.id}&limit=500`), 200, 'list').body
    assert.ok(!list.data.some((c: Issued) => c.serial === leaf.serial), 'not in the list')
    expectRefusal(await call('GET', `/certificates/${leaf.serial}`), 404, 'certificate_not_found', 'GET')
    expectRefusal(
      await call('POST', `/certificates/${leaf.serial}/revoke`, { reason: 'keyCompromise' }),
      404,
      'certificate_not_found',
      'revoke without caId',
    )
    const revoked = await revoke(leaf.serial, { reason: 'keyCompromise', caId: ecCa.id })
    assert.equal(revoked.stored, false)
    const crl = await fetchCrl(ecCa.id)
    assert.equal(crlEntry(crl, leaf.serial)?.reason, x509.X509CrlReason.keyCompromise)
    assert.ok(await crl.parsed.verify({ publicKey: new x509.X509Certificate(ecCa.certificate) }))
  })

  test('a stored certificate revoked naming another CA of the tenant is a 400 on caId', async () => {
    const other = await createCa({ algorithm: 'EC-P256' })
    const leaf = await issue(ecCa.id, ecRole)
    const res = await call('POST', `/certificates/${leaf.serial}/revoke`, { caId: other.id })
    expectRefusal(res, 400, 'validation_failed', 'revoke with the wrong CA')
    assert.equal(res.body.fields?.[0]?.path, 'caId')
    const got = expectStatus(await call('GET', `/certificates/${leaf.serial}`), 200, 'GET').body
    assert.equal(got.status, 'valid')
  })

  test('the CRL of an unknown CA is 404', async () => {
    const res = await fetchPublic('/api/v1/cas/00000000-0000-4000-8000-000000000000/crl')
    assert.equal(res.status, 404)
  })
})

describe('lists, filters, and time (the manual clock moves forward)', () => {
  let ca: Ca
  let role: string

  before(async () => {
    ca = await createCa({ algorithm: 'EC-P256' })
    role = await createRole(ca.id)
  })

  const listSerials = async (query: string) => {
    const res = expectStatus(await call('GET', `/certificates?caId=${ca.id}&limit=500${query}`), 200, query)
    assert.equal(res.body.total, res.body.data.length)
    return res.body.data.map((c: Issued) => c.serial).sort() as string[]
  }

  test('status, expiringWithinDays and 404s; after the clock moves, expired', async () => {
    const short = await issue(ca.id, role, { ttlSeconds: DAY_S })
    const long = await issue(ca.id, role, { ttlSeconds: 60 * DAY_S })
    const gone = await issue(ca.id, role, { ttlSeconds: 60 * DAY_S })
    await revoke(gone.serial, { reason: 'affiliationChanged' })

    assert.deepEqual(await listSerials(''), [short.serial, long.serial, gone.serial].sort())
    assert.deepEqual(await listSerials('&status=valid'), [short.serial, long.serial].sort())
    assert.deepEqual(await listSerials('&status=revoked'), [gone.serial])
    assert.deepEqual(await listSerials('&status=expired'), [])
    assert.deepEqual(await listSerials('&expiringWithinDays=2'), [short.serial])
    assert.deepEqual(await listSerials('&expiringWithinDays=61'), [short.serial, long.serial].sort())
    const pages = []
    for (let offset = 0; offset < 3; offset++) {
      const page = expectStatus(
        await call('GET', `/certificates?caId=${ca.id}&limit=1&offset=${offset}`),
        200,
        'page',
      )
      assert.equal(page.body.total, 3)
      assert.equal(page.body.data.length, 1)
      pages.push(page.body.data[0].serial)
    }
    assert.deepEqual(
      pages.sort(),
      [short.serial, long.serial, gone.serial].sort(),
      'pages cover the list once',
    )

    expectRefusal(
      await call('GET', '/certificates/7f0102030405'),
      404,
      'certificate_not_found',
      'unknown serial',
    )
    expectRefusal(
      await call('POST', '/certificates/7f0102030405/revoke', {}),
      404,
      'certificate_not_found',
      'revoke an unknown serial',
    )
    expectRefusal(
      await call('GET', `/certificates?caId=${ca.id}&status=bogus`),
      400,
      'validation_failed',
      'status',
    )

    clock.advance(2 * DAY_S * 1000)
    assert.deepEqual(await listSerials('&status=expired'), [short.serial])
    assert.deepEqual(await listSerials('&status=valid'), [long.serial])
    assert.deepEqual(await listSerials('&status=revoked'), [gone.serial])
    assert.deepEqual(await listSerials('&expiringWithinDays=2'), [])
    const got = expectStatus(await call('GET', `/certificates/${short.serial}`), 200, 'GET expired').body
    assert.equal(got.status, 'expired')
  })

  test('61 h on, the job’s sweep rebuilds the CRL (higher number, new thisUpdate, still listing)', async () => {
    const leaf = await issue(ca.id, role)
    await revoke(leaf.serial, { reason: 'privilegeWithdrawn' })
    // Revoked and ending within the 61 h: dropped from the rebuilt CRL (RFC 5280 3.3).
    const ending = await issue(ca.id, role, { ttlSeconds: DAY_S })
    await revoke(ending.serial, { reason: 'superseded' })
    const before = await fetchCrl(ca.id)
    assert.equal(before.parsed.thisUpdate.getTime(), clock.now().getTime())
    clock.advance(61 * HOUR_MS)
    let rebuilt = before
    await waitFor(
      async () => {
        rebuilt = await fetchCrl(ca.id)
        return rebuilt.number > before.number
      },
      'the crl-refresh-sweep to rebuild the CRL',
      60_000,
    )
    assert.equal(rebuilt.parsed.thisUpdate.getTime(), clock.now().getTime())
    assert.equal(rebuilt.parsed.nextUpdate!.getTime(), clock.now().getTime() + CRL_LIFETIME_MS)
    assert.equal(crlEntry(rebuilt, leaf.serial)?.reason, x509.X509CrlReason.privilegeWithdrawn)
    assert.equal(crlEntry(rebuilt, ending.serial), undefined, 'an expired certificate leaves the CRL')
    assert.ok(await rebuilt.parsed.verify({ publicKey: new x509.X509Certificate(ca.certificate) }))
    // Rebuilt, it is no longer due: more sweeps leave it alone.
    const settled = await fetchCrl(ca.id)
    await new Promise((resolve) => setTimeout(resolve, 1_000))
    assert.equal((await fetchCrl(ca.id)).number, settled.number)
  })
})
