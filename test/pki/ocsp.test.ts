import 'reflect-metadata'
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { createHash, randomBytes, randomUUID, verify, X509Certificate } from 'node:crypto'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { ml_dsa65 } from '@noble/post-quantum/ml-dsa.js'
import { createIssuerSigner, type IssuerSigner } from '../../src/crypto/issuer-signer.ts'
import { createKeyObjectCache } from '../../src/crypto/key-object-cache.ts'
import { createKeyResolver } from '../../src/crypto/key-resolver.ts'
import { createKeyCache } from '../../src/keys/key-cache.ts'
import { createOcspResponder, type OcspResponder } from '../../src/pki/ocsp-responder.ts'
import { insertRevocation } from '../../src/pki/pki-store.ts'
import { systemClock } from '../../src/platform/clock.ts'
import { uniqueName } from '../helpers/api-client.ts'
import {
  children,
  int,
  octets,
  oid,
  oidContent,
  pemToDer,
  readTlv,
  seq,
  type Tlv,
  tlv,
} from '../helpers/der.ts'
import { manualClock } from '../helpers/manual-clock.ts'
import { Rng } from '../helpers/rng.ts'
import {
  type HttpResult,
  startTestService,
  type TenantWithKey,
  type TestService,
  waitFor,
} from '../helpers/service.ts'

/**
 * The OCSP responder (RFC 6960) of the tenants' CAs: the system's openssl 3.0 asks about leaves
 * of an EC P-256 CA (good, then revoked with its reason; the signature verified by openssl), an
 * ML-DSA-65 CA's response is checked with @noble/post-quantum over tbsResponseData, serials and
 * issuers the responder does not answer for are `unauthorized` without a signature, malformed
 * requests (a seeded fuzz loop) are `malformedRequest`, and repeated or concurrent identical
 * requests cost one signature (counted by the responder and by a signer wrapper).
 *
 * The responder is built here from the service's own components (its database, crypto pool,
 * entropy, key caches), as the service composes it; the last describe goes through the HTTP
 * routes `POST /cas/{id}/ocsp` and `GET /cas/{id}/ocsp/{request}`.
 */

let svc: TestService
let tenant: TenantWithKey
let dir: string
let baseSigner: IssuerSigner
/** Signatures made through the signer the responder is given (counted outside the responder). */
let signerCalls = 0
let responder: OcspResponder

let ecRoot: Ca
let ecRole: string

before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'kms-ocsp-'))
  svc = await startTestService()
  tenant = await svc.createTenant()
  const s = svc.api.services
  const keyCache = createKeyCache({ sql: s.sql, bus: s.bus, ttlMs: 5_000 })
  const keyObjects = createKeyObjectCache({ sql: s.sql, tenantKeks: s.tenantKeks })
  baseSigner = createIssuerSigner({
    keys: createKeyResolver({ keyCache, keyObjects, clock: systemClock }),
    pool: s.cryptoPool,
    random: s.random,
  })
  responder = createOcspResponder({ sql: s.sql, signer: countingSigner(baseSigner), clock: systemClock })
  ecRoot = await createCa({ algorithm: 'EC-P256' })
  ecRole = await createRole(ecRoot.id)
})
after(async () => {
  rmSync(dir, { recursive: true, force: true })
  await svc?.stop()
})

function countingSigner(signer: IssuerSigner): IssuerSigner {
  return {
    async open(actor, key) {
      const opened = await signer.open(actor, key)
      return {
        ...opened,
        sign(message) {
          signerCalls++
          return opened.sign(message)
        },
      }
    },
  }
}

// ---- the API ------------------------------------------------------------------------------------

const call = (method: string, path: string, body?: unknown) =>
  svc.request(method, `/api/v1${path}`, { key: tenant.key, ...(body === undefined ? {} : { body }) })

function expectStatus(res: HttpResult, status: number, what: string): HttpResult {
  assert.equal(res.status, status, `${what}: ${res.status} ${res.text.slice(0, 400)}`)
  return res
}

interface Ca {
  id: string
  keyId: string
  certificate: string
}

async function createCa(body: Record<string, unknown>): Promise<Ca> {
  const res = await call('POST', '/cas', {
    name: uniqueName('ca'),
    type: 'root',
    subject: { commonName: uniqueName('OCSP Test CA') },
    ...body,
  })
  return expectStatus(res, 201, `create CA ${JSON.stringify(body)}`).body
}

async function createRole(caId: string, body: Record<string, unknown> = {}): Promise<string> {
  const name = uniqueName('role')
  const res = await call('POST', `/cas/${caId}/roles`, {
    allowedDomains: ['example.com'],
    allowSubdomains: true,
    ...body,
    name,
  })
  expectStatus(res, 201, 'create role')
  return name
}

interface Issued {
  serial: string
  certificate: string
}

async function issue(caId: string, role: string): Promise<Issued> {
  const res = await call('POST', '/certificates', {
    caId,
    role,
    dnsNames: [`${uniqueName('h')}.example.com`],
  })
  return expectStatus(res, 201, 'issue').body
}

async function revoke(serial: string, body: Record<string, unknown>): Promise<{ revokedAt: string }> {
  return expectStatus(await call('POST', `/certificates/${serial}/revoke`, body), 200, `revoke ${serial}`)
    .body
}

// ---- DER, read and written here (independent of src/pki) ---------------------------------------

/** The issuer certificate's subject Name (DER) and subjectPublicKey bits, read from its TBS. */
function issuerParts(caPem: string): { name: Buffer; key: Buffer } {
  const [tbs] = children(readTlv(pemToDer(caPem)))
  const fields = children(tbs!)
  // [0] version, serial, signature, issuer, validity, subject, subjectPublicKeyInfo
  const subject = fields[5]!
  const [, bits] = children(fields[6]!)
  return { name: subject.raw, key: bits!.content.subarray(1) }
}

const HASH_OIDS = { sha1: '1.3.14.3.2.26', sha256: '2.16.840.1.101.3.4.2.1', md5: '1.2.840.113549.2.5' }

/** A CertID for `serial` (hex) under the CA `caPem`, hashed with `hash`. */
function certId(caPem: string, serial: string, hash: 'sha1' | 'sha256' = 'sha1'): Buffer {
  const { name, key } = issuerParts(caPem)
  const digest = (b: Buffer) => createHash(hash).update(b).digest()
  return seq(
    seq(oid(oidContent(HASH_OIDS[hash])), Buffer.of(0x05, 0x00)),
    octets(digest(name)),
    octets(digest(key)),
    int(BigInt(`0x${serial}`)),
  )
}

const NONCE_OID = '1.3.6.1.5.5.7.48.1.2'

/** OCSPRequest { TBSRequest { requestList, [2] requestExtensions (a nonce)? } } */
function ocspRequest(certIds: Buffer[], nonce?: Buffer): Buffer {
  const extensions = nonce ? [tlv(0xa2, seq(seq(oid(oidContent(NONCE_OID)), octets(octets(nonce)))))] : []
  return seq(seq(seq(...certIds.map((id) => seq(id))), ...extensions))
}

const STATUS = {
  successful: 0,
  malformedRequest: 1,
  internalError: 2,
  tryLater: 3,
  sigRequired: 5,
  unauthorized: 6,
} as const

/** The responseStatus of an OCSPResponse, asserting an unsigned one has no responseBytes. */
function responseStatus(der: Buffer): number {
  const top = readTlv(der)
  assert.equal(top.raw.length, der.length, 'one OCSPResponse')
  assert.equal(top.tag, 0x30)
  const [status, ...rest] = children(top)
  assert.equal(status!.tag, 0x0a, 'responseStatus is an ENUMERATED')
  const code = status!.content[0]!
  assert.equal(rest.length, code === 0 ? 1 : 0, 'responseBytes with a successful status only')
  return code
}

interface Basic {
  tbs: Tlv
  algorithm: Tlv
  signature: Buffer
  responderId: Tlv
  producedAt: string
  singles: Array<{ certId: Buffer; status: Tlv; thisUpdate: string; nextUpdate: string; rest: number }>
  responseExtensions: boolean
  certs: boolean
}

const generalized = (node: Tlv) => {
  assert.equal(node.tag, 0x18, 'a GeneralizedTime')
  return node.content.toString('latin1')
}

function basicResponse(der: Buffer): Basic {
  assert.equal(responseStatus(der), STATUS.successful)
  const [, responseBytes] = children(readTlv(der))
  assert.equal(responseBytes!.tag, 0xa0)
  const [bytes] = children(responseBytes!)
  const [type, octet] = children(bytes!)
  assert.equal(type!.content.toString('hex'), oidContent('1.3.6.1.5.5.7.48.1.1'), 'id-pkix-ocsp-basic')
  const [tbs, algorithm, signature, ...certs] = children(readTlv(octet!.content))
  assert.equal(signature!.tag, 0x03)
  assert.equal(signature!.content[0], 0, 'no unused bits in the signature')
  const [responderId, producedAt, responses, ...extensions] = children(tbs!)
  return {
    tbs: tbs!,
    algorithm: algorithm!,
    signature: signature!.content.subarray(1),
    responderId: responderId!,
    producedAt: generalized(producedAt!),
    singles: children(responses!).map((single) => {
      const [id, status, thisUpdate, nextUpdate, ...rest] = children(single)
      assert.equal(nextUpdate!.tag, 0xa0, 'nextUpdate [0]')
      return {
        certId: id!.raw,
        status: status!,
        thisUpdate: generalized(thisUpdate!),
        nextUpdate: generalized(children(nextUpdate!)[0]!),
        rest: rest.length,
      }
    }),
    responseExtensions: extensions.length > 0,
    certs: certs.length > 0,
  }
}

const fromGeneralized = (text: string) =>
  new Date(
    `${text.slice(0, 4)}-${text.slice(4, 6)}-${text.slice(6, 8)}T${text.slice(8, 10)}:${text.slice(10, 12)}:${text.slice(12, 14)}Z`,
  )

// ---- openssl -------------------------------------------------------------------------------------

let fileCount = 0
function writeTemp(content: string | Buffer, extension = 'pem'): string {
  const path = join(dir, `${++fileCount}.${extension}`)
  writeFileSync(path, content)
  return path
}

/** Runs the system's openssl without blocking the event loop (the service answers in this process). */
function openssl(args: string[]): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn('openssl', args, { stdio: ['ignore', 'pipe', 'pipe'] })
    let output = ''
    child.stdout.on('data', (chunk: Buffer) => {
      output += chunk.toString()
    })
    child.stderr.on('data', (chunk: Buffer) => {
      output += chunk.toString()
    })
    child.once('error', reject)
    child.once('exit', (code) => resolve({ code, output }))
  })
}

/** openssl's request for the leaves (`-reqout`), with CertIDs hashed by `digest`. */
async function opensslRequest(issuerPem: string, leafPems: string[], digest = 'sha1'): Promise<Buffer> {
  const out = join(dir, `${++fileCount}.req`)
  const args = ['ocsp', `-${digest}`, '-issuer', writeTemp(issuerPem)]
  for (const leaf of leafPems) args.push('-cert', writeTemp(leaf))
  const run = await openssl([...args, '-no_nonce', '-reqout', out])
  assert.equal(run.code, 0, run.output)
  return readFileSync(out)
}

/** What openssl makes of a response to the leaves: verified against `rootPem`, each leaf's status. */
async function opensslCheck(
  response: Buffer,
  issuerPem: string,
  leafPems: string[],
  rootPem: string,
  /** The CertIDs' hash: openssl looks each leaf up by the CertID it makes itself. */
  digest = 'sha1',
) {
  const leafFiles = leafPems.map((pem) => writeTemp(pem))
  const args = ['ocsp', `-${digest}`, '-respin', writeTemp(response, 'der'), '-issuer', writeTemp(issuerPem)]
  for (const leaf of leafFiles) args.push('-cert', leaf)
  const run = await openssl([...args, '-CAfile', writeTemp(rootPem), '-no_nonce'])
  return { ...run, leafFiles }
}

/** The status block openssl prints for one certificate file. */
function statusOf(output: string, file: string): string {
  const at = output.indexOf(`${file}: `)
  assert.ok(at >= 0, `openssl names ${file}:\n${output}`)
  return output.slice(at + file.length + 2).split(/\n(?=\S)/)[0]!
}

const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec']
/** ASN1_TIME_print's form: "Mar  5 09:03:07 2026 GMT". */
function opensslTime(date: Date): string {
  const iso = date.toISOString()
  return `${MONTHS[date.getUTCMonth()]} ${String(date.getUTCDate()).padStart(2, ' ')} ${iso.slice(11, 19)} ${date.getUTCFullYear()} GMT`
}

// ---- tests ---------------------------------------------------------------------------------------

describe('statuses, checked by openssl 3.0', () => {
  test('issued leaves are good; the response verifies (SHA-1 and SHA-256 CertIDs, two leaves at once)', async () => {
    const [a, b] = [await issue(ecRoot.id, ecRole), await issue(ecRoot.id, ecRole)]
    for (const digest of ['sha1', 'sha256']) {
      const request = await opensslRequest(ecRoot.certificate, [a.certificate, b.certificate], digest)
      const response = await responder.respond(ecRoot.id, request)
      const run = await opensslCheck(
        response,
        ecRoot.certificate,
        [a.certificate, b.certificate],
        ecRoot.certificate,
        digest,
      )
      assert.equal(run.code, 0, run.output)
      assert.match(run.output, /^Response verify OK$/m, run.output)
      for (const file of run.leafFiles) assert.match(statusOf(run.output, file), /^good\n/, run.output)

      const basic = basicResponse(response)
      assert.equal(basic.singles.length, 2)
      assert.equal(basic.responseExtensions, false, 'no nonce, no extensions')
      assert.equal(basic.certs, false, 'the CA signs itself: no certificates are sent')
      for (const single of basic.singles) {
        assert.equal(single.status.raw.toString('hex'), '8000', 'good [0] IMPLICIT NULL')
        assert.equal(single.thisUpdate, basic.producedAt)
        const lifetime =
          fromGeneralized(single.nextUpdate).getTime() - fromGeneralized(single.thisUpdate).getTime()
        assert.equal(lifetime, 12 * 3_600_000, 'nextUpdate is thisUpdate + 12 h')
      }
      // The CertIDs come back as they were asked.
      const asked = children(children(children(readTlv(request))[0]!)[0]!).map((r) => children(r)[0]!.raw)
      assert.deepEqual(
        basic.singles.map((s) => s.certId),
        asked,
      )
    }
  })

  test('ResponderID is byKey: the SHA-1 of the CA’s subjectPublicKey; the signature verifies with node:crypto', async () => {
    const leaf = await issue(ecRoot.id, ecRole)
    const response = await responder.respond(
      ecRoot.id,
      ocspRequest([certId(ecRoot.certificate, leaf.serial)]),
    )
    const basic = basicResponse(response)
    assert.equal(basic.responderId.tag, 0xa2, 'byKey [2]')
    const [keyHash] = children(basic.responderId)
    assert.equal(keyHash!.tag, 0x04)
    const expected = createHash('sha1').update(issuerParts(ecRoot.certificate).key).digest()
    assert.deepEqual(keyHash!.content, expected)
    assert.equal(
      children(basic.algorithm)[0]!.content.toString('hex'),
      oidContent('1.2.840.10045.4.3.2'),
      'ecdsa-with-SHA256',
    )
    const publicKey = new X509Certificate(ecRoot.certificate).publicKey
    assert.ok(verify('sha256', basic.tbs.raw, publicKey, basic.signature), 'node:crypto verifies')
  })

  test('a revoked leaf is revoked, with its time and reason, at once after the revocation', async () => {
    const leaf = await issue(ecRoot.id, ecRole)
    const request = await opensslRequest(ecRoot.certificate, [leaf.certificate])
    const before = await opensslCheck(
      await responder.respond(ecRoot.id, request),
      ecRoot.certificate,
      [leaf.certificate],
      ecRoot.certificate,
    )
    assert.match(statusOf(before.output, before.leafFiles[0]!), /^good\n/, before.output)

    const revocation = await revoke(leaf.serial, { reason: 'keyCompromise' })
    const response = await responder.respond(ecRoot.id, request)
    const after = await opensslCheck(response, ecRoot.certificate, [leaf.certificate], ecRoot.certificate)
    assert.equal(after.code, 0, after.output)
    assert.match(after.output, /^Response verify OK$/m, after.output)
    const status = statusOf(after.output, after.leafFiles[0]!)
    assert.match(status, /^revoked\n/, after.output)
    assert.match(status, /Reason: keyCompromise/, after.output)
    assert.match(
      status,
      new RegExp(`Revocation Time: ${opensslTime(new Date(revocation.revokedAt))}`),
      after.output,
    )
  })

  test('an unspecified revocation carries no reason (as on the CRL)', async () => {
    const leaf = await issue(ecRoot.id, ecRole)
    await revoke(leaf.serial, {})
    const basic = basicResponse(
      await responder.respond(ecRoot.id, ocspRequest([certId(ecRoot.certificate, leaf.serial)])),
    )
    const status = basic.singles[0]!.status
    assert.equal(status.tag, 0xa1, 'revoked [1]')
    assert.equal(children(status).length, 1, 'revocationTime alone')
  })

  test('an intermediate CA’s certificate is answered by its parent', async () => {
    const intermediate = await createCa({ algorithm: 'EC-P256', type: 'intermediate', parentId: ecRoot.id })
    const request = await opensslRequest(ecRoot.certificate, [intermediate.certificate])
    const run = await opensslCheck(
      await responder.respond(ecRoot.id, request),
      ecRoot.certificate,
      [intermediate.certificate],
      ecRoot.certificate,
    )
    assert.match(run.output, /^Response verify OK$/m, run.output)
    assert.match(statusOf(run.output, run.leafFiles[0]!), /^good\n/, run.output)
  })

  test('a request with a nonce is answered without one (openssl warns and verifies)', async () => {
    const leaf = await issue(ecRoot.id, ecRole)
    const out = join(dir, `${++fileCount}.req`)
    const made = await openssl([
      'ocsp',
      '-issuer',
      writeTemp(ecRoot.certificate),
      '-cert',
      writeTemp(leaf.certificate),
      '-reqout',
      out,
    ])
    assert.equal(made.code, 0, made.output)
    const request = readFileSync(out)
    const response = await responder.respond(ecRoot.id, request)
    assert.equal(basicResponse(response).responseExtensions, false)
    const args = [
      'ocsp',
      '-respin',
      writeTemp(response, 'der'),
      '-reqin',
      out,
      '-issuer',
      writeTemp(ecRoot.certificate),
    ]
    const run = await openssl([...args, '-CAfile', writeTemp(ecRoot.certificate)])
    assert.match(run.output, /WARNING: no nonce in response/, run.output)
    assert.match(run.output, /^Response verify OK$/m, run.output)
  })
})

describe('post-quantum: an ML-DSA-65 CA', () => {
  test('the response signature verifies with @noble/post-quantum over tbsResponseData', async () => {
    const ca = await createCa({ algorithm: 'ML-DSA-65' })
    const leaf = await issue(ca.id, await createRole(ca.id))
    for (const hash of ['sha1', 'sha256'] as const) {
      const response = await responder.respond(
        ca.id,
        ocspRequest([certId(ca.certificate, leaf.serial, hash)]),
      )
      const basic = basicResponse(response)
      const algorithm = children(basic.algorithm)
      assert.equal(algorithm.length, 1, 'an ML-DSA AlgorithmIdentifier has no parameters')
      assert.equal(algorithm[0]!.content.toString('hex'), oidContent('2.16.840.1.101.3.4.3.18'))
      const publicKey = issuerParts(ca.certificate).key
      assert.ok(ml_dsa65.verify(basic.signature, basic.tbs.raw, publicKey), 'noble verifies')
      const tampered = Buffer.from(basic.tbs.raw)
      tampered[tampered.length - 1]! ^= 1
      assert.ok(!ml_dsa65.verify(basic.signature, tampered, publicKey), 'noble refuses a tampered response')
      assert.equal(basic.singles[0]!.status.raw.toString('hex'), '8000', 'good')
      const [keyHash] = children(basic.responderId)
      assert.deepEqual(keyHash!.content, createHash('sha1').update(publicKey).digest())
    }
  })
})

describe('what the responder does not answer for: unauthorized, unsigned', () => {
  test('serials the CA never issued, other issuers, unknown CAs, unsupported hashes', async () => {
    const leaf = await issue(ecRoot.id, ecRole)
    const other = await createCa({ algorithm: 'EC-P256' })
    const otherLeaf = await issue(other.id, await createRole(other.id))
    const before = { signatures: responder.stats().signatures, calls: signerCalls }
    const { name, key } = issuerParts(ecRoot.certificate)
    const sha1 = (b: Buffer) => createHash('sha1').update(b).digest()
    const md5CertId = seq(
      seq(oid(oidContent(HASH_OIDS.md5)), Buffer.of(0x05, 0x00)),
      octets(createHash('md5').update(name).digest()),
      octets(createHash('md5').update(key).digest()),
      int(BigInt(`0x${leaf.serial}`)),
    )
    const wrongKeyHash = seq(
      seq(oid(oidContent(HASH_OIDS.sha1)), Buffer.of(0x05, 0x00)),
      octets(sha1(name)),
      octets(sha1(Buffer.concat([key, Buffer.of(0)]))),
      int(BigInt(`0x${leaf.serial}`)),
    )
    const cases: Array<[string, string, Buffer]> = [
      [
        'a random serial',
        ecRoot.id,
        ocspRequest([certId(ecRoot.certificate, randomBytes(16).toString('hex'))]),
      ],
      [
        'an issued serial beside a random one',
        ecRoot.id,
        ocspRequest([certId(ecRoot.certificate, leaf.serial), certId(ecRoot.certificate, '7fffffff01')]),
      ],
      [
        'another CA’s leaf, under this CA’s hashes',
        ecRoot.id,
        ocspRequest([certId(ecRoot.certificate, otherLeaf.serial)]),
      ],
      [
        'this CA’s leaf, under another CA’s hashes',
        ecRoot.id,
        ocspRequest([certId(other.certificate, leaf.serial)]),
      ],
      [
        'a CertID for another CA, sent to this one',
        other.id,
        ocspRequest([certId(ecRoot.certificate, leaf.serial)]),
      ],
      ['a wrong issuerKeyHash', ecRoot.id, ocspRequest([wrongKeyHash])],
      ['an MD5 CertID', ecRoot.id, ocspRequest([md5CertId])],
      ['a CA that does not exist', randomUUID(), ocspRequest([certId(ecRoot.certificate, leaf.serial)])],
      ['a CA id that is not a UUID', 'not-a-uuid', ocspRequest([certId(ecRoot.certificate, leaf.serial)])],
    ]
    for (const [what, caId, request] of cases) {
      assert.equal(responseStatus(await responder.respond(caId, request)), STATUS.unauthorized, what)
    }
    assert.equal(responder.stats().signatures, before.signatures, 'no signature was made')
    assert.equal(signerCalls, before.calls, 'the signer was not called')
  })

  test('a noStore certificate is unknown to the responder until it is revoked', async () => {
    const role = await createRole(ecRoot.id, { noStore: true })
    const leaf = await issue(ecRoot.id, role)
    const request = ocspRequest([certId(ecRoot.certificate, leaf.serial)])
    assert.equal(responseStatus(await responder.respond(ecRoot.id, request)), STATUS.unauthorized)
    await revoke(leaf.serial, { caId: ecRoot.id, reason: 'superseded' })
    const basic = basicResponse(await responder.respond(ecRoot.id, request))
    const status = basic.singles[0]!.status
    assert.equal(status.tag, 0xa1, 'revoked')
    const [, reason] = children(status)
    assert.equal(reason!.raw.toString('hex'), 'a0030a0104', 'revocationReason [0] superseded (4)')
  })
})

describe('a CA that cannot sign', () => {
  test('its key revoked: internalError, unsigned', async () => {
    const ca = await createCa({ algorithm: 'EC-P256' })
    const leaf = await issue(ca.id, await createRole(ca.id))
    const request = ocspRequest([certId(ca.certificate, leaf.serial)])
    assert.equal(responseStatus(await responder.respond(ca.id, request)), STATUS.successful)
    expectStatus(await call('POST', `/keys/${ca.keyId}/revoke`), 200, 'revoke the CA key')
    // Another question (not the cached one): the key's state reaches the responder's key cache
    // through the service's invalidation bus.
    const other = ocspRequest([certId(ca.certificate, leaf.serial, 'sha256')])
    let status = -1
    await waitFor(async () => {
      status = responseStatus(await responder.respond(ca.id, other))
      return status !== STATUS.successful
    }, 'the revoked key to reach the responder')
    assert.equal(status, STATUS.internalError)
  })
})

describe('malformed requests: malformedRequest, unsigned, never an exception', () => {
  test('empty, oversized, too many CertIDs, trailing bytes, non-DER, wrong version', async () => {
    const id = certId(ecRoot.certificate, (await issue(ecRoot.id, ecRole)).serial)
    const valid = ocspRequest([id])
    const bigNonce = ocspRequest([id], randomBytes(8300))
    const v2 = seq(seq(tlv(0xa0, int(1)), seq(seq(id))))
    const indefinite = Buffer.concat([Buffer.of(0x30, 0x80), valid.subarray(2), Buffer.of(0, 0)])
    const cases: Array<[string, Buffer]> = [
      ['empty', Buffer.alloc(0)],
      ['over 8 KiB (a large nonce)', bigNonce],
      ['eleven CertIDs', ocspRequest(Array.from({ length: 11 }, () => id))],
      ['no CertID', ocspRequest([])],
      ['trailing bytes', Buffer.concat([valid, Buffer.of(0)])],
      ['an indefinite length', indefinite],
      ['version 2', v2],
      ['a certificate instead', pemToDer(ecRoot.certificate)],
    ]
    for (const [what, request] of cases) {
      assert.equal(responseStatus(await responder.respond(ecRoot.id, request)), STATUS.malformedRequest, what)
    }
    assert.ok(bigNonce.length > 8192)
  })

  test('seeded fuzz: truncations and garbage are malformed; mutations never throw', async () => {
    const rng = new Rng(0x0c5b)
    const leaf = await issue(ecRoot.id, ecRole)
    const valid = ocspRequest(
      [certId(ecRoot.certificate, leaf.serial), certId(ecRoot.certificate, leaf.serial, 'sha256')],
      randomBytes(16),
    )
    const signaturesBefore = responder.stats().signatures
    const seen = new Set<number>()
    for (let i = 0; i < 400; i++) {
      const kind = rng.pick(['truncate', 'garbage', 'flip', 'splice'] as const)
      let request: Buffer
      if (kind === 'truncate') request = valid.subarray(0, rng.int(valid.length))
      else if (kind === 'garbage') request = rng.bytes(rng.range(1, 300))
      else if (kind === 'flip') {
        request = Buffer.from(valid)
        for (let n = rng.range(1, 4); n > 0; n--) request[rng.int(request.length)]! ^= 1 << rng.int(8)
      } else {
        const at = rng.int(valid.length)
        request = Buffer.concat([valid.subarray(0, at), rng.bytes(rng.range(1, 8)), valid.subarray(at)])
      }
      const response = await responder.respond(ecRoot.id, request)
      const status = responseStatus(response)
      seen.add(status)
      if (kind === 'truncate' || kind === 'garbage' || kind === 'splice')
        assert.equal(status, STATUS.malformedRequest, `${kind} #${i}: ${request.toString('hex')}`)
      else assert.ok(([0, 1, 6] as number[]).includes(status), `flip #${i}: status ${status}`)
      if (status === STATUS.successful) basicResponse(response)
    }
    assert.ok(seen.has(STATUS.malformedRequest))
    // A flipped byte may leave a valid request (in the nonce: the same question, answered from
    // the cache) or name another serial or issuer (unauthorized): at most that one signature.
    assert.ok(responder.stats().signatures - signaturesBefore <= 1)
  })
})

describe('no amplification: one signature per question', () => {
  test('a second identical request (even with another nonce) is answered from the cache', async () => {
    const leaf = await issue(ecRoot.id, ecRole)
    const id = certId(ecRoot.certificate, leaf.serial)
    const before = { ...responder.stats(), calls: signerCalls }
    const first = await responder.respond(ecRoot.id, ocspRequest([id], randomBytes(16)))
    const second = await responder.respond(ecRoot.id, ocspRequest([id], randomBytes(16)))
    const third = await responder.respond(ecRoot.id, ocspRequest([id]))
    assert.deepEqual(second, first)
    assert.deepEqual(third, first)
    const now = responder.stats()
    assert.equal(now.signatures - before.signatures, 1, 'one signature (the responder’s count)')
    assert.equal(signerCalls - before.calls, 1, 'one signature (the signer’s count)')
    assert.equal(now.cacheHits - before.cacheHits, 2)
  })

  test('concurrent identical requests share one signature', async () => {
    const leaf = await issue(ecRoot.id, ecRole)
    const request = ocspRequest([certId(ecRoot.certificate, leaf.serial)])
    const before = { ...responder.stats(), calls: signerCalls }
    const answers = await Promise.all(Array.from({ length: 8 }, () => responder.respond(ecRoot.id, request)))
    for (const answer of answers) assert.deepEqual(answer, answers[0])
    const now = responder.stats()
    assert.equal(signerCalls - before.calls, 1)
    assert.equal(now.signatures - before.signatures, 1)
    assert.equal(now.sharedInFlight - before.sharedInFlight + now.cacheHits - before.cacheHits, 7)
  })

  test('a revocation is seen at once: the cached good answer is not reused', async () => {
    const leaf = await issue(ecRoot.id, ecRole)
    const request = ocspRequest([certId(ecRoot.certificate, leaf.serial)])
    const good = basicResponse(await responder.respond(ecRoot.id, request))
    assert.equal(good.singles[0]!.status.tag, 0x80)
    await revoke(leaf.serial, { reason: 'cessationOfOperation' })
    const before = responder.stats().signatures
    const revoked = basicResponse(await responder.respond(ecRoot.id, request))
    assert.equal(revoked.singles[0]!.status.tag, 0xa1)
    assert.equal(responder.stats().signatures - before, 1)
    await responder.respond(ecRoot.id, request)
    assert.equal(responder.stats().signatures - before, 1, 'and the revoked answer is reused in turn')
  })

  test('a revocation whose CRL was not rebuilt yet (the CA stale) is answered from the database', async () => {
    const leaf = await issue(ecRoot.id, ecRole)
    const request = ocspRequest([certId(ecRoot.certificate, leaf.serial)])
    assert.equal(basicResponse(await responder.respond(ecRoot.id, request)).singles[0]!.status.tag, 0x80)
    // What a revocation's transaction leaves when its CRL build then fails: the row, the CA stale.
    await svc.sql.begin((tx) =>
      insertRevocation(tx, {
        serial: leaf.serial,
        revoked_at: new Date(),
        reason: 'keyCompromise',
        tenant_id: tenant.tenantId,
        ca_id: ecRoot.id,
        listed_until: new Date(Date.now() + 86_400_000),
      }),
    )
    const stale = await responder.respond(ecRoot.id, request)
    assert.equal(basicResponse(stale).singles[0]!.status.tag, 0xa1, 'revoked, not the cached good')
    // Leave the CA as a completed revocation would (its CRL rebuilt) for the other tests.
    await revoke(leaf.serial, { reason: 'keyCompromise' })
  })

  test('a cached answer is signed again after an hour; the cache is bounded', async () => {
    const clock = manualClock(new Date())
    const small = createOcspResponder({
      sql: svc.api.services.sql,
      signer: baseSigner,
      clock,
      cache: { maxEntries: 2 },
    })
    const leaves = [
      await issue(ecRoot.id, ecRole),
      await issue(ecRoot.id, ecRole),
      await issue(ecRoot.id, ecRole),
    ]
    const requests = leaves.map((leaf) => ocspRequest([certId(ecRoot.certificate, leaf.serial)]))
    await small.respond(ecRoot.id, requests[0]!)
    await small.respond(ecRoot.id, requests[0]!)
    assert.equal(small.stats().signatures, 1)
    clock.advance(3_600_000 - 1000)
    await small.respond(ecRoot.id, requests[0]!)
    assert.equal(small.stats().signatures, 1, 'reused within the hour')
    clock.advance(1000)
    const renewed = basicResponse(await small.respond(ecRoot.id, requests[0]!))
    assert.equal(small.stats().signatures, 2, 'signed again after it')
    assert.equal(
      fromGeneralized(renewed.producedAt).getTime(),
      Math.floor(clock.now().getTime() / 1000) * 1000,
    )

    await small.respond(ecRoot.id, requests[1]!)
    await small.respond(ecRoot.id, requests[2]!)
    assert.equal(small.stats().cached, 2, 'two entries at most')
    await small.respond(ecRoot.id, requests[0]!) // the least recently used: evicted
    assert.equal(small.stats().signatures, 5)
    await small.respond(ecRoot.id, requests[2]!) // still kept
    assert.equal(small.stats().signatures, 5)
  })
})

describe('over HTTP: POST and GET /cas/{id}/ocsp (public)', () => {
  const ocspUrl = (caId: string) => new URL(`/api/v1/cas/${caId}/ocsp`, svc.baseUrl).toString()

  async function post(caId: string, body: Buffer, type = 'application/ocsp-request') {
    const response = await fetch(ocspUrl(caId), { method: 'POST', headers: { 'content-type': type }, body })
    return {
      status: response.status,
      type: response.headers.get('content-type'),
      bytes: Buffer.from(await response.arrayBuffer()),
    }
  }

  async function get(caId: string, path: string) {
    const response = await fetch(`${ocspUrl(caId)}/${path}`)
    return {
      status: response.status,
      type: response.headers.get('content-type'),
      bytes: Buffer.from(await response.arrayBuffer()),
    }
  }

  test('openssl ocsp -url: good, then revoked after the revocation, Response verify OK', async () => {
    const leaf = await issue(ecRoot.id, ecRole)
    const args = [
      'ocsp',
      '-issuer',
      writeTemp(ecRoot.certificate),
      '-cert',
      writeTemp(leaf.certificate),
      '-url',
      ocspUrl(ecRoot.id),
      '-CAfile',
      writeTemp(ecRoot.certificate),
      '-no_nonce',
    ]
    const good = await openssl(args)
    assert.equal(good.code, 0, good.output)
    assert.match(good.output, /^Response verify OK$/m, good.output)
    assert.match(good.output, /: good\n/, good.output)
    await revoke(leaf.serial, { reason: 'affiliationChanged' })
    const revoked = await openssl(args)
    assert.match(revoked.output, /^Response verify OK$/m, revoked.output)
    assert.match(revoked.output, /: revoked\n/, revoked.output)
    assert.match(revoked.output, /Reason: affiliationChanged/, revoked.output)
  })

  test('GET with the request in the path (Base64 URL-encoded, or Base64url) answers what POST does', async () => {
    const leaf = await issue(ecRoot.id, ecRole)
    // A nonce (ignored by the responder) chosen so that the Base64 holds both '/' and '+'.
    let request = ocspRequest([certId(ecRoot.certificate, leaf.serial)])
    for (let i = 0; !/\/.*\+|\+.*\//.test(request.toString('base64')); i++) {
      assert.ok(i < 1000)
      request = ocspRequest([certId(ecRoot.certificate, leaf.serial)], randomBytes(16))
    }
    const posted = await post(ecRoot.id, request)
    assert.equal(posted.status, 200)
    assert.equal(posted.type, 'application/ocsp-response')
    assert.equal(responseStatus(posted.bytes), STATUS.successful)
    const base64 = request.toString('base64')
    const variants = [
      encodeURIComponent(base64),
      // '+' and '=' are literal in a path: only '/' must be encoded.
      base64.replaceAll('/', '%2F'),
      request.toString('base64url'),
    ]
    for (const path of variants) {
      const got = await get(ecRoot.id, path)
      assert.equal(got.status, 200, path)
      assert.equal(got.type, 'application/ocsp-response')
      assert.deepEqual(got.bytes, posted.bytes, 'the cached answer')
    }
  })

  test('malformed, oversized and unauthorized requests are 200 with an OCSP status, never a 5xx', async () => {
    const rng = new Rng(0x0c5c)
    for (let i = 0; i < 40; i++) {
      const garbage = rng.bytes(rng.range(1, 200))
      const posted = await post(ecRoot.id, garbage)
      assert.equal(posted.status, 200, `POST #${i}`)
      assert.equal(responseStatus(posted.bytes), STATUS.malformedRequest)
      const got = await get(ecRoot.id, encodeURIComponent(garbage.toString('base64')))
      assert.equal(got.status, 200, `GET #${i}`)
      assert.equal(responseStatus(got.bytes), STATUS.malformedRequest)
    }
    const oversized = await post(ecRoot.id, randomBytes(9000))
    assert.equal(oversized.status, 200)
    assert.equal(responseStatus(oversized.bytes), STATUS.malformedRequest)
    // Past the route's body limit (64 KiB) Fastify refuses the body before the responder: a 4xx.
    assert.equal((await post(ecRoot.id, randomBytes(70_000))).status, 413)
    assert.equal((await post(ecRoot.id, randomBytes(100), 'application/octet-stream')).status, 415)
    const notBase64 = await get(ecRoot.id, 'not*base64!')
    assert.equal(responseStatus(notBase64.bytes), STATUS.malformedRequest)
    const unknown = await post(ecRoot.id, ocspRequest([certId(ecRoot.certificate, '0123456789')]))
    assert.equal(unknown.status, 200)
    assert.equal(responseStatus(unknown.bytes), STATUS.unauthorized)
    const noCa = await post(randomUUID(), ocspRequest([certId(ecRoot.certificate, '0123456789')]))
    assert.equal(responseStatus(noCa.bytes), STATUS.unauthorized)
  })
})
