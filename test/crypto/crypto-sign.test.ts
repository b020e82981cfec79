import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { createHash, createPublicKey, verify as nodeVerify, randomBytes, randomUUID } from 'node:crypto'
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { ml_dsa44, ml_dsa65, ml_dsa87 } from '@noble/post-quantum/ml-dsa.js'
import { slh_dsa_sha2_128s } from '@noble/post-quantum/slh-dsa.js'
import { verifySignature } from '../../src/crypto/signing.ts'
import { DAY_MS } from '../../src/platform/clock.ts'
import { apiClient, b64, unb64, uniqueName } from '../helpers/api-client.ts'
import { type ManualClock, manualClock } from '../helpers/manual-clock.ts'
import {
  type HttpResult,
  startTestService,
  type TenantWithKey,
  type TestService,
} from '../helpers/service.ts'

/**
 * POST /api/v1/sign and /verify over real HTTP (docs/crypto-operations.md, "Signatures"): round
 * trips for every Signing algorithm across a rotation; the default key; signatures checked
 * outside the service with the exported public key (the openssl CLI for RSA, ECDSA and Ed25519,
 * @noble/post-quantum for ML-DSA and SLH-DSA), pre-hashed input included; signatures made outside
 * (openssl, noble) verified by the service against imported keys; the key states of spec section
 * 3 (a manual clock drives expiry and destruction); wrong and foreign keys; scopes; audit records
 * free of messages and signatures; and the event loop kept free while SLH-DSA signs in the pool.
 *
 * One service and one clock for the file; only the key-state tests move the clock.
 */

type Family = 'ml-dsa' | 'slh-dsa' | 'rsa' | 'ec' | 'ed25519'
type Hash = 'sha256' | 'sha384' | 'sha512'
type PqVerifier = { verify(sig: Uint8Array, msg: Uint8Array, publicKey: Uint8Array): boolean }

interface AlgorithmCase {
  algorithm: string
  family: Family
  /** Fixed signature length in bytes (ECDSA DER varies: none). */
  signatureBytes?: number
  /** ECDSA: the curve's hash and coordinate length. */
  ec?: { hash: Hash; coordinate: number; nodeCurve: string }
  /** ML-DSA / SLH-DSA: the independent verifier and the RAW public key length. */
  pq?: { lib: PqVerifier; publicBytes: number }
}

const ALGORITHMS: readonly AlgorithmCase[] = [
  {
    algorithm: 'ML-DSA-44',
    family: 'ml-dsa',
    signatureBytes: 2420,
    pq: { lib: ml_dsa44, publicBytes: 1312 },
  },
  {
    algorithm: 'ML-DSA-65',
    family: 'ml-dsa',
    signatureBytes: 3309,
    pq: { lib: ml_dsa65, publicBytes: 1952 },
  },
  {
    algorithm: 'ML-DSA-87',
    family: 'ml-dsa',
    signatureBytes: 4627,
    pq: { lib: ml_dsa87, publicBytes: 2592 },
  },
  {
    algorithm: 'SLH-DSA-128s',
    family: 'slh-dsa',
    signatureBytes: 7856,
    pq: { lib: slh_dsa_sha2_128s, publicBytes: 32 },
  },
  { algorithm: 'RSA-2048', family: 'rsa', signatureBytes: 256 },
  { algorithm: 'RSA-3072', family: 'rsa', signatureBytes: 384 },
  { algorithm: 'RSA-4096', family: 'rsa', signatureBytes: 512 },
  { algorithm: 'EC-P256', family: 'ec', ec: { hash: 'sha256', coordinate: 32, nodeCurve: 'prime256v1' } },
  { algorithm: 'EC-P384', family: 'ec', ec: { hash: 'sha384', coordinate: 48, nodeCurve: 'secp384r1' } },
  { algorithm: 'EC-P521', family: 'ec', ec: { hash: 'sha512', coordinate: 66, nodeCurve: 'secp521r1' } },
  { algorithm: 'Ed25519', family: 'ed25519', signatureBytes: 64 },
]
const EC_CASES = ALGORITHMS.filter((c) => c.family === 'ec')
const RSA_CASES = ALGORITHMS.filter((c) => c.family === 'rsa')

const digestOf = (hash: Hash, data: Buffer) => createHash(hash).update(data).digest()

/** Wycheproof test vectors, copied unmodified (test/vectors/wycheproof/SOURCE.txt). */
const VECTORS = join(import.meta.dirname, '..', 'vectors', 'wycheproof')

interface WycheproofPss {
  testGroups: {
    sLen: number
    publicKeyPem: string
    tests: { tcId: number; comment: string; msg: string; sig: string; result: 'valid' | 'invalid' }[]
  }[]
}

/** The same bytes with one bit flipped. */
function flipBit(bytes: Buffer, bit: number): Buffer {
  const flipped = Buffer.from(bytes)
  flipped[bit >> 3]! ^= 1 << (bit & 7)
  return flipped
}

/** DER length octets. */
function derLength(length: number): Buffer {
  if (length < 0x80) return Buffer.of(length)
  const bytes: number[] = []
  for (let n = length; n > 0; n >>= 8) bytes.unshift(n & 0xff)
  return Buffer.from([0x80 | bytes.length, ...bytes])
}

/** A DER INTEGER of an unsigned big-endian value. */
function derInteger(value: Buffer): Buffer {
  let start = 0
  while (start < value.length - 1 && value[start] === 0) start++
  let body = value.subarray(start)
  if (body[0]! & 0x80) body = Buffer.concat([Buffer.of(0), body])
  return Buffer.concat([Buffer.of(0x02), derLength(body.length), body])
}

/** IEEE P1363 r || s → the DER SEQUENCE { r INTEGER, s INTEGER } openssl reads. */
function p1363ToDer(signature: Buffer): Buffer {
  const half = signature.length / 2
  const content = Buffer.concat([
    derInteger(signature.subarray(0, half)),
    derInteger(signature.subarray(half)),
  ])
  return Buffer.concat([Buffer.of(0x30), derLength(content.length), content])
}

/** Runs the openssl CLI; throws (with its stderr) when it exits non-zero. */
function openssl(args: string[], input?: string | Buffer): Buffer {
  return execFileSync('openssl', args, { input: input ?? '', stdio: ['pipe', 'pipe', 'pipe'] })
}

/** True when the openssl verification command exits 0 ("Verified OK" / "Signature Verified Successfully"). */
function opensslVerifies(args: string[]): boolean {
  try {
    const out = openssl(args).toString()
    assert.match(out, /Verified (OK|Successfully)/i)
    return true
  } catch (error) {
    if (error instanceof assert.AssertionError) throw error
    return false
  }
}

describe('sign and verify', () => {
  let svc: TestService
  let clock: ManualClock
  let tenant: TenantWithKey
  let otherTenant: TenantWithKey
  let workDir: string
  /** One key per Signing algorithm, made once (RSA-4096 and SLH-DSA take a while). */
  const keys = new Map<string, string>()

  before(async () => {
    clock = manualClock(new Date('2030-01-01T00:00:00Z'))
    svc = await startTestService({}, { clock })
    tenant = await svc.createTenant()
    otherTenant = await svc.createTenant()
    workDir = mkdtempSync(join(tmpdir(), 'kms-sign-'))
    const created = await Promise.all(ALGORITHMS.map(({ algorithm }) => createKey(algorithm)))
    for (const [i, { algorithm }] of ALGORITHMS.entries()) keys.set(algorithm, created[i]!)
  })

  after(async () => {
    if (workDir) rmSync(workDir, { recursive: true, force: true })
    await svc?.stop()
  })

  const api = apiClient(() => ({ svc, tenant }))
  const call = api.call
  const createKey = async (
    algorithm: string,
    extra: Record<string, unknown> = {},
    by = tenant,
    keyType = 'Signing',
  ) => (await api.createKey(keyType, algorithm, extra, by)).id

  interface Signed {
    signature: string
    keyId: string
    keyVersion: number
    algorithm: string
    signingScheme: string
  }

  async function sign(body: Record<string, unknown>, by: TenantWithKey | string = tenant): Promise<Signed> {
    const res = await call('POST', '/sign', body, by)
    assert.equal(res.status, 200, res.text)
    assert.deepEqual(Object.keys(res.body).sort(), [
      'algorithm',
      'keyId',
      'keyVersion',
      'signature',
      'signingScheme',
    ])
    return res.body
  }

  const verify = (body: Record<string, unknown>, by: TenantWithKey | string = tenant) =>
    call('POST', '/verify', body, by)

  /** Verifies and asserts the exact answer: 200 {valid, keyId, keyVersion}. */
  async function assertVerify(
    body: Record<string, unknown>,
    expected: { valid: boolean; keyId: string; keyVersion: number },
    what: string,
    by: TenantWithKey | string = tenant,
  ): Promise<void> {
    const res = await verify(body, by)
    assert.equal(res.status, 200, `${what}: ${res.text}`)
    assert.deepEqual(res.body, expected, what)
  }

  function assertError(res: HttpResult, status: number, error: string, what: string): void {
    assert.equal(res.status, status, `${what}: ${res.text}`)
    assert.equal(res.body.error, error, what)
  }

  function assertConflict(res: HttpResult, state: string, what: string): void {
    assertError(res, 409, 'key_state_conflict', what)
    assert.equal(res.body.state, state, what)
  }

  async function exportPublic(keyId: string, format: 'PEM' | 'RAW', version: number): Promise<string> {
    const res = await call('GET', `/keys/${keyId}/public?format=${format}&version=${version}`)
    assert.equal(res.status, 200, res.text)
    assert.equal(res.body.version, version)
    assert.equal(res.body.format, format)
    return res.body.publicKey
  }

  /** A fresh directory under the file's temp dir holding the named files. */
  function files(contents: Record<string, string | Buffer>): Record<string, string> {
    const dir = join(workDir, randomBytes(6).toString('hex'))
    mkdirSync(dir)
    const paths: Record<string, string> = {}
    for (const [name, data] of Object.entries(contents)) {
      paths[name] = join(dir, name)
      writeFileSync(paths[name]!, data)
    }
    return paths
  }

  async function createApiKey(scopes: string[]): Promise<string> {
    const res = await call('POST', '/api-keys', { name: uniqueName('scoped'), scopes })
    assert.equal(res.status, 201, res.text)
    return res.body.key
  }

  // -------------------------------------------------------------------------------------------
  describe('round trips over HTTP', () => {
    for (const c of ALGORITHMS) {
      test(`${c.algorithm}: v1 signatures verify with keyVersion 1 after a rotation, new ones are v2; tampered and garbage signatures are {valid: false}`, async () => {
        const keyId = keys.get(c.algorithm)!
        const message = Buffer.from(`message for ${c.algorithm} ${randomBytes(8).toString('hex')}`)

        const v1 = await sign({ keyId, message: b64(message) })
        assert.equal(v1.keyId, keyId)
        assert.equal(v1.keyVersion, 1)
        assert.equal(v1.algorithm, c.algorithm)
        const sig1 = unb64(v1.signature)
        if (c.signatureBytes !== undefined) assert.equal(sig1.length, c.signatureBytes, 'signature length')
        else assert.equal(sig1[0], 0x30, 'ECDSA signatures are DER by default')
        await assertVerify(
          { keyId, message: b64(message), signature: v1.signature },
          { valid: true, keyId, keyVersion: 1 },
          'v1 before the rotation',
        )

        const rotated = await call('POST', `/keys/${keyId}/rotate`)
        assert.equal(rotated.status, 200, rotated.text)
        assert.equal(rotated.body.version, 2)

        const v2 = await sign({ keyId, message: b64(message) })
        assert.equal(v2.keyId, keyId)
        assert.equal(v2.keyVersion, 2)
        await assertVerify(
          { keyId, message: b64(message), signature: v2.signature },
          { valid: true, keyId, keyVersion: 2 },
          'v2 signature, current version',
        )
        await assertVerify(
          { keyId, keyVersion: 2, message: b64(message), signature: v2.signature },
          { valid: true, keyId, keyVersion: 2 },
          'v2 signature, keyVersion 2',
        )

        await assertVerify(
          { keyId, keyVersion: 1, message: b64(message), signature: v1.signature },
          { valid: true, keyId, keyVersion: 1 },
          'v1 signature with keyVersion 1',
        )
        // Without keyVersion every version is tried, newest first (issue 35): the answer names v1.
        await assertVerify(
          { keyId, message: b64(message), signature: v1.signature },
          { valid: true, keyId, keyVersion: 1 },
          'v1 signature without keyVersion',
        )
        await assertVerify(
          { keyId, keyVersion: 1, message: b64(message), signature: v2.signature },
          { valid: false, keyId, keyVersion: 1 },
          'v2 signature with keyVersion 1',
        )

        const other = Buffer.concat([message, Buffer.of(0x21)])
        await assertVerify(
          { keyId, keyVersion: 1, message: b64(other), signature: v1.signature },
          { valid: false, keyId, keyVersion: 1 },
          'a changed message',
        )
        await assertVerify(
          { keyId, keyVersion: 1, message: b64(flipBit(message, 3)), signature: v1.signature },
          { valid: false, keyId, keyVersion: 1 },
          'a message with one bit flipped',
        )
        const bits = sig1.length * 8
        for (const bit of [0, 7, Math.floor(bits / 2), bits - 1]) {
          await assertVerify(
            { keyId, keyVersion: 1, message: b64(message), signature: b64(flipBit(sig1, bit)) },
            { valid: false, keyId, keyVersion: 1 },
            `signature bit ${bit} flipped`,
          )
        }
        for (const [what, garbage] of [
          ['3 bytes', Buffer.from('abc')],
          ['empty', Buffer.alloc(0)],
          ['one byte too long', Buffer.concat([sig1, Buffer.of(0)])],
          ['one byte too short', sig1.subarray(0, -1)],
          ['zeros of the right length', Buffer.alloc(sig1.length)],
        ] as const) {
          await assertVerify(
            { keyId, keyVersion: 1, message: b64(message), signature: b64(garbage) },
            { valid: false, keyId, keyVersion: 1 },
            `garbage signature: ${what}`,
          )
        }
      })
    }

    test('without keyId: 409 no_default_key until a default Signing key exists, then that key signs and verifies', async () => {
      const own = await svc.createTenant()
      const message = b64('to the default key')
      assertError(await call('POST', '/sign', { message }, own), 409, 'no_default_key', 'sign, no default')
      assertError(
        await verify({ message, signature: b64(randomBytes(64)) }, own),
        409,
        'no_default_key',
        'verify, no default',
      )

      const other = await createKey('ML-DSA-44', {}, own)
      assertError(await call('POST', '/sign', { message }, own), 409, 'no_default_key', 'a non-default key')

      const defaultKey = await createKey('Ed25519', { isDefault: true }, own)
      assert.notEqual(defaultKey, other)
      const signed = await sign({ message }, own)
      assert.equal(signed.keyId, defaultKey)
      assert.equal(signed.keyVersion, 1)
      assert.equal(signed.algorithm, 'Ed25519')
      await assertVerify(
        { message, signature: signed.signature },
        { valid: true, keyId: defaultKey, keyVersion: 1 },
        'verify without keyId',
        own,
      )
      await assertVerify(
        { keyId: defaultKey, message, signature: signed.signature },
        { valid: true, keyId: defaultKey, keyVersion: 1 },
        'verify naming the default key',
        own,
      )
    })
  })

  // -------------------------------------------------------------------------------------------
  describe('independent verification with the exported public key', () => {
    const message = Buffer.from(`independently verified ${randomBytes(8).toString('hex')}`)
    const otherMessage = Buffer.from('a different message')

    for (const c of RSA_CASES) {
      test(`${c.algorithm}: PSS (default, salt 32) and PKCS1 signatures verify with openssl`, async () => {
        const keyId = keys.get(c.algorithm)!
        const pss = await sign({ keyId, message: b64(message) })
        assert.equal(pss.signingScheme, 'RSASSA-PSS-SHA256')
        const pkcs1 = await sign({ keyId, message: b64(message), rsaPadding: 'PKCS1' })
        assert.equal(pkcs1.keyVersion, pss.keyVersion)
        const pem = await exportPublic(keyId, 'PEM', pss.keyVersion)
        const f = files({
          'pub.pem': pem,
          msg: message,
          other: otherMessage,
          pss: unb64(pss.signature),
          pkcs1: unb64(pkcs1.signature),
        })
        const pssArgs = (msg: string) => [
          'pkeyutl',
          '-verify',
          '-pubin',
          '-inkey',
          f['pub.pem']!,
          '-rawin',
          '-in',
          msg,
          '-sigfile',
          f['pss']!,
          '-digest',
          'sha256',
          '-pkeyopt',
          'rsa_padding_mode:pss',
          '-pkeyopt',
          'rsa_pss_saltlen:32',
        ]
        assert.equal(opensslVerifies(pssArgs(f['msg']!)), true, 'PSS: openssl pkeyutl, salt length 32')
        assert.equal(opensslVerifies(pssArgs(f['other']!)), false, 'PSS: openssl refuses another message')
        const dgstPss = (msg: string) => [
          'dgst',
          '-sha256',
          '-sigopt',
          'rsa_padding_mode:pss',
          '-sigopt',
          'rsa_pss_saltlen:32',
          '-verify',
          f['pub.pem']!,
          '-signature',
          f['pss']!,
          msg,
        ]
        assert.equal(opensslVerifies(dgstPss(f['msg']!)), true, 'PSS: openssl dgst')

        const pkcs1Args = (msg: string) => [
          'dgst',
          '-sha256',
          '-verify',
          f['pub.pem']!,
          '-signature',
          f['pkcs1']!,
          msg,
        ]
        assert.equal(opensslVerifies(pkcs1Args(f['msg']!)), true, 'PKCS1: openssl dgst')
        assert.equal(opensslVerifies(pkcs1Args(f['other']!)), false, 'PKCS1: openssl refuses another message')
        // The two paddings are not interchangeable.
        assert.equal(
          opensslVerifies(['dgst', '-sha256', '-verify', f['pub.pem']!, '-signature', f['pss']!, f['msg']!]),
          false,
          'a PSS signature is not a PKCS1 one',
        )
      })
    }

    for (const c of EC_CASES) {
      test(`${c.algorithm}: DER (default) and P1363 signatures verify with openssl (and P1363 with node:crypto)`, async () => {
        const keyId = keys.get(c.algorithm)!
        const { hash, coordinate } = c.ec!
        const der = await sign({ keyId, message: b64(message) })
        assert.equal(der.signingScheme, `ECDSA-${hash.toUpperCase()}-DER`)
        const p1363 = await sign({ keyId, message: b64(message), signatureFormat: 'P1363' })
        assert.equal(p1363.keyVersion, der.keyVersion)
        const rs = unb64(p1363.signature)
        assert.equal(rs.length, 2 * coordinate, 'P1363 is r || s, each the coordinate length')
        const pem = await exportPublic(keyId, 'PEM', der.keyVersion)
        const f = files({
          'pub.pem': pem,
          msg: message,
          other: otherMessage,
          der: unb64(der.signature),
          p1363: p1363ToDer(rs),
        })
        const dgst = (sig: string, msg: string) => [
          'dgst',
          `-${hash}`,
          '-verify',
          f['pub.pem']!,
          '-signature',
          sig,
          msg,
        ]
        assert.equal(opensslVerifies(dgst(f['der']!, f['msg']!)), true, 'DER: openssl dgst')
        assert.equal(opensslVerifies(dgst(f['der']!, f['other']!)), false, 'DER: another message')
        assert.equal(opensslVerifies(dgst(f['p1363']!, f['msg']!)), true, 'P1363 (converted to DER): openssl')
        assert.equal(opensslVerifies(dgst(f['p1363']!, f['other']!)), false, 'P1363: another message')
        const publicKey = createPublicKey(pem)
        assert.equal(publicKey.asymmetricKeyDetails?.namedCurve, c.ec!.nodeCurve)
        assert.equal(nodeVerify(hash, message, { key: publicKey, dsaEncoding: 'ieee-p1363' }, rs), true)
      })
    }

    test('Ed25519: the signature verifies with openssl pkeyutl -rawin', async () => {
      const keyId = keys.get('Ed25519')!
      const signed = await sign({ keyId, message: b64(message) })
      assert.equal(signed.signingScheme, 'Ed25519')
      const pem = await exportPublic(keyId, 'PEM', signed.keyVersion)
      const f = files({ 'pub.pem': pem, msg: message, other: otherMessage, sig: unb64(signed.signature) })
      const args = (msg: string) => [
        'pkeyutl',
        '-verify',
        '-pubin',
        '-inkey',
        f['pub.pem']!,
        '-rawin',
        '-in',
        msg,
        '-sigfile',
        f['sig']!,
      ]
      assert.equal(opensslVerifies(args(f['msg']!)), true, 'openssl accepts it')
      assert.equal(opensslVerifies(args(f['other']!)), false, 'openssl refuses another message')
    })

    for (const c of ALGORITHMS.filter((a) => a.pq)) {
      test(`${c.algorithm}: the signature verifies with @noble/post-quantum and the RAW public key`, async () => {
        const keyId = keys.get(c.algorithm)!
        const signed = await sign({ keyId, message: b64(message) })
        const raw = unb64(await exportPublic(keyId, 'RAW', signed.keyVersion))
        assert.equal(raw.length, c.pq!.publicBytes, 'RAW public key length')
        const sig = unb64(signed.signature)
        assert.equal(c.pq!.lib.verify(sig, message, raw), true, 'noble accepts it')
        assert.equal(c.pq!.lib.verify(sig, otherMessage, raw), false, 'noble refuses another message')
      })
    }

    describe('pre-hashed input (messageType DIGEST)', () => {
      for (const rsaPadding of ['PSS', 'PKCS1'] as const) {
        test(`RSA-2048 ${rsaPadding}: a signature over the SHA-256 digest verifies with openssl over the original message and in the service with RAW`, async () => {
          const keyId = keys.get('RSA-2048')!
          const digest = digestOf('sha256', message)
          const signed = await sign({ keyId, message: b64(digest), messageType: 'DIGEST', rsaPadding })
          const sig = unb64(signed.signature)
          assert.equal(sig.length, 256)
          const pem = await exportPublic(keyId, 'PEM', signed.keyVersion)
          const f = files({ 'pub.pem': pem, msg: message, other: otherMessage, sig })
          const pss =
            rsaPadding === 'PSS' ? ['-sigopt', 'rsa_padding_mode:pss', '-sigopt', 'rsa_pss_saltlen:32'] : []
          const args = (msg: string) => [
            'dgst',
            '-sha256',
            ...pss,
            '-verify',
            f['pub.pem']!,
            '-signature',
            f['sig']!,
            msg,
          ]
          assert.equal(opensslVerifies(args(f['msg']!)), true, 'openssl over the original message')
          assert.equal(opensslVerifies(args(f['other']!)), false, 'openssl over another message')

          const expected = { valid: true, keyId, keyVersion: signed.keyVersion }
          await assertVerify(
            { keyId, message: b64(message), signature: signed.signature, rsaPadding },
            expected,
            'service verify with the RAW message',
          )
          await assertVerify(
            { keyId, message: b64(digest), messageType: 'DIGEST', signature: signed.signature, rsaPadding },
            expected,
            'service verify with the digest',
          )
          await assertVerify(
            { keyId, message: b64(otherMessage), signature: signed.signature, rsaPadding },
            { ...expected, valid: false },
            'service verify with another message',
          )
          if (rsaPadding === 'PKCS1') {
            // PKCS1 v1.5 is deterministic: the digest path gives the bytes the message path gives.
            const fromMessage = await sign({ keyId, message: b64(message), rsaPadding })
            assert.equal(fromMessage.signature, signed.signature)
          }
        })
      }

      for (const c of EC_CASES) {
        for (const signatureFormat of ['DER', 'P1363'] as const) {
          test(`${c.algorithm} ${signatureFormat}: a signature over the ${c.ec!.hash.toUpperCase()} digest verifies with openssl over the original message and in the service with RAW`, async () => {
            const keyId = keys.get(c.algorithm)!
            const { hash, coordinate } = c.ec!
            const digest = digestOf(hash, message)
            const signed = await sign({ keyId, message: b64(digest), messageType: 'DIGEST', signatureFormat })
            assert.equal(signed.signingScheme, `ECDSA-${hash.toUpperCase()}-${signatureFormat}`)
            const sig = unb64(signed.signature)
            if (signatureFormat === 'P1363') assert.equal(sig.length, 2 * coordinate)
            else assert.equal(sig[0], 0x30)
            const pem = await exportPublic(keyId, 'PEM', signed.keyVersion)
            const f = files({
              'pub.pem': pem,
              msg: message,
              other: otherMessage,
              sig: signatureFormat === 'P1363' ? p1363ToDer(sig) : sig,
            })
            const args = (msg: string) => [
              'dgst',
              `-${hash}`,
              '-verify',
              f['pub.pem']!,
              '-signature',
              f['sig']!,
              msg,
            ]
            assert.equal(opensslVerifies(args(f['msg']!)), true, 'openssl over the original message')
            assert.equal(opensslVerifies(args(f['other']!)), false, 'openssl over another message')

            const expected = { valid: true, keyId, keyVersion: signed.keyVersion }
            await assertVerify(
              { keyId, message: b64(message), signature: signed.signature, signatureFormat },
              expected,
              'service verify with the RAW message',
            )
            await assertVerify(
              {
                keyId,
                message: b64(digest),
                messageType: 'DIGEST',
                signature: signed.signature,
                signatureFormat,
              },
              expected,
              'service verify with the digest',
            )
            await assertVerify(
              { keyId, message: b64(otherMessage), signature: signed.signature, signatureFormat },
              { ...expected, valid: false },
              'service verify with another message',
            )
            for (const [what, bad] of [
              ['one bit flipped', flipBit(sig, 8 * Math.floor(sig.length / 2))],
              ['3 bytes of garbage', Buffer.from('abc')],
            ] as const) {
              await assertVerify(
                { keyId, message: b64(digest), messageType: 'DIGEST', signature: b64(bad), signatureFormat },
                { ...expected, valid: false },
                `service verify of the digest, signature ${what}`,
              )
            }
          })
        }
      }

      // EC digests are signed in the crypto pool: the refusal must still be a 400, not a worker error.
      test('RSA and EC: a digest of the wrong length is 400 invalid_digest on sign and verify', async () => {
        for (const [algorithm, lengths] of [
          ['RSA-2048', [0, 20, 31, 33, 48, 64]],
          ['EC-P256', [0, 31, 33, 48, 64]],
          ['EC-P384', [0, 32, 47, 49, 64]],
          ['EC-P521', [0, 32, 48, 63, 66]],
        ] as const) {
          const keyId = keys.get(algorithm)!
          const signature = b64(randomBytes(algorithm === 'RSA-2048' ? 256 : 72))
          for (const length of lengths) {
            const message = b64(randomBytes(length))
            assertError(
              await call('POST', '/sign', { keyId, message, messageType: 'DIGEST' }),
              400,
              'invalid_digest',
              `${algorithm} sign, ${length}-byte digest`,
            )
            assertError(
              await verify({ keyId, message, signature, messageType: 'DIGEST' }),
              400,
              'invalid_digest',
              `${algorithm} verify, ${length}-byte digest`,
            )
          }
        }
      })

      test('ML-DSA-44/65/87, Ed25519 and SLH-DSA refuse DIGEST with 400 digest_not_supported on sign and verify', async () => {
        const message = b64(digestOf('sha256', Buffer.from('pre-hashed')))
        for (const algorithm of ['ML-DSA-44', 'ML-DSA-65', 'ML-DSA-87', 'Ed25519', 'SLH-DSA-128s']) {
          const keyId = keys.get(algorithm)!
          assertError(
            await call('POST', '/sign', { keyId, message, messageType: 'DIGEST' }),
            400,
            'digest_not_supported',
            `${algorithm} sign`,
          )
          assertError(
            await verify({ keyId, message, signature: b64(randomBytes(64)), messageType: 'DIGEST' }),
            400,
            'digest_not_supported',
            `${algorithm} verify`,
          )
        }
      })
    })
  })

  // -------------------------------------------------------------------------------------------
  describe('signatures made outside the service verify against imported keys', () => {
    const message = Buffer.from(`signed elsewhere ${randomBytes(8).toString('hex')}`)
    const otherMessage = Buffer.from('not what was signed')

    async function importKey(algorithm: string, format: 'PEM' | 'RAW', keyMaterial: string): Promise<string> {
      const res = await call('POST', '/keys/import', {
        name: uniqueName(`imported-${algorithm}`),
        keyType: 'Signing',
        algorithm,
        format,
        keyMaterial,
      })
      assert.equal(res.status, 201, res.text)
      assert.equal(res.body.origin, 'Imported')
      assert.equal(res.body.algorithm, algorithm)
      return res.body.id
    }

    /** Valid for the signed message, invalid for another one. */
    async function assertServiceVerifies(
      keyId: string,
      signature: Buffer,
      options: Record<string, unknown>,
      what: string,
    ): Promise<void> {
      const expected = { valid: true, keyId, keyVersion: 1 }
      await assertVerify(
        { keyId, message: b64(message), signature: b64(signature), ...options },
        expected,
        what,
      )
      await assertVerify(
        { keyId, message: b64(otherMessage), signature: b64(signature), ...options },
        { ...expected, valid: false },
        `${what}, another message`,
      )
    }

    test('RSA-2048 from openssl: PSS with salt 32 verifies; salt lengths 0, 20 and max only when named in saltLength; PKCS1 verifies (RAW and DIGEST)', async () => {
      const pem = openssl(['genpkey', '-algorithm', 'RSA', '-pkeyopt', 'rsa_keygen_bits:2048']).toString()
      const keyId = await importKey('RSA-2048', 'PEM', pem)
      const f = files({ 'key.pem': pem, msg: message })
      const digest = b64(digestOf('sha256', message))
      for (const [saltlen, saltLength] of [
        ['0', 0],
        ['20', 20],
        ['32', 32],
        ['max', 222],
      ] as const) {
        const sig = openssl([
          'dgst',
          '-sha256',
          '-sign',
          f['key.pem']!,
          '-sigopt',
          'rsa_padding_mode:pss',
          '-sigopt',
          `rsa_pss_saltlen:${saltlen}`,
          f['msg']!,
        ])
        assert.equal(sig.length, 256)
        // Issue 15, defect 12: without saltLength only the service's own length (32) verifies.
        const byDefault = { valid: saltLength === 32, keyId, keyVersion: 1 }
        await assertVerify(
          { keyId, message: b64(message), signature: b64(sig) },
          byDefault,
          `PSS salt ${saltlen}`,
        )
        await assertVerify(
          { keyId, message: digest, messageType: 'DIGEST', signature: b64(sig) },
          byDefault,
          `PSS salt ${saltlen}, DIGEST`,
        )
        await assertServiceVerifies(keyId, sig, { saltLength }, `PSS salt ${saltlen} named`)
        await assertVerify(
          { keyId, message: digest, messageType: 'DIGEST', signature: b64(sig), saltLength },
          { valid: true, keyId, keyVersion: 1 },
          `PSS salt ${saltlen} named, DIGEST`,
        )
        const wrong = saltLength === 222 ? 221 : saltLength + 1
        await assertVerify(
          { keyId, message: b64(message), signature: b64(sig), saltLength: wrong },
          { valid: false, keyId, keyVersion: 1 },
          `PSS salt ${saltlen} checked as ${wrong}`,
        )
      }
      const pkcs1 = openssl(['dgst', '-sha256', '-sign', f['key.pem']!, f['msg']!])
      await assertServiceVerifies(keyId, pkcs1, { rsaPadding: 'PKCS1' }, 'PKCS1')
      await assertVerify(
        { keyId, message: digest, messageType: 'DIGEST', signature: b64(pkcs1), rsaPadding: 'PKCS1' },
        { valid: true, keyId, keyVersion: 1 },
        'PKCS1, DIGEST',
      )
      await assertVerify(
        { keyId, message: b64(message), signature: b64(pkcs1) },
        { valid: false, keyId, keyVersion: 1 },
        'a PKCS1 signature checked as PSS',
      )
    })

    for (const [algorithm, curve, hash] of [
      ['EC-P256', 'P-256', 'sha256'],
      ['EC-P384', 'P-384', 'sha384'],
    ] as const) {
      test(`${algorithm} from openssl: an ECDSA ${hash.toUpperCase()} DER signature verifies (RAW and DIGEST)`, async () => {
        const pem = openssl([
          'genpkey',
          '-algorithm',
          'EC',
          '-pkeyopt',
          `ec_paramgen_curve:${curve}`,
        ]).toString()
        const keyId = await importKey(algorithm, 'PEM', pem)
        const f = files({ 'key.pem': pem, msg: message })
        const sig = openssl(['dgst', `-${hash}`, '-sign', f['key.pem']!, f['msg']!])
        assert.equal(sig[0], 0x30)
        await assertServiceVerifies(keyId, sig, {}, 'DER')
        await assertVerify(
          { keyId, message: b64(digestOf(hash, message)), messageType: 'DIGEST', signature: b64(sig) },
          { valid: true, keyId, keyVersion: 1 },
          'DER, DIGEST',
        )
      })
    }

    test('Ed25519 from openssl: a pkeyutl -rawin signature verifies', async () => {
      const pem = openssl(['genpkey', '-algorithm', 'ED25519']).toString()
      const keyId = await importKey('Ed25519', 'PEM', pem)
      const f = files({ 'key.pem': pem, msg: message })
      const sig = openssl(['pkeyutl', '-sign', '-inkey', f['key.pem']!, '-rawin', '-in', f['msg']!])
      assert.equal(sig.length, 64)
      await assertServiceVerifies(keyId, sig, {}, 'Ed25519')
    })

    test('ML-DSA-65 from a noble RAW seed: a noble signature verifies', async () => {
      const seed = randomBytes(32)
      const { publicKey, secretKey } = ml_dsa65.keygen(seed)
      const keyId = await importKey('ML-DSA-65', 'RAW', b64(seed))
      const raw = unb64(await exportPublic(keyId, 'RAW', 1))
      assert.deepEqual(raw, Buffer.from(publicKey), "the service derives noble's public key")
      const sig = Buffer.from(ml_dsa65.sign(message, secretKey))
      await assertServiceVerifies(keyId, sig, {}, 'ML-DSA-65')
    })
  })

  // -------------------------------------------------------------------------------------------
  describe('key states (spec section 3)', () => {
    const message = Buffer.from('signed while the key was Active')
    const made = new Map<string, { keyId: string; signed: Signed }>()

    async function assertState(keyId: string, state: string): Promise<void> {
      const res = await call('GET', `/keys/${keyId}`)
      assert.equal(res.status, 200, res.text)
      assert.equal(res.body.state, state)
    }

    const verifyMade = (label: string) => {
      const { keyId, signed } = made.get(label)!
      return verify({
        keyId,
        keyVersion: signed.keyVersion,
        message: b64(message),
        signature: signed.signature,
      })
    }

    before(async () => {
      const expiresAt = new Date(clock.now().getTime() + DAY_MS).toISOString()
      for (const label of ['Active', 'Expired', 'Revoked', 'Pending Deletion', 'Destroyed']) {
        const keyId = await createKey('Ed25519', label === 'Expired' ? { expiresAt } : {})
        const signed = await sign({ keyId, message: b64(message) })
        made.set(label, { keyId, signed })
      }
      const revoked = await call('POST', `/keys/${made.get('Revoked')!.keyId}/revoke`)
      assert.equal(revoked.status, 200, revoked.text)
      const deleted = await call('DELETE', `/keys/${made.get('Pending Deletion')!.keyId}`)
      assert.equal(deleted.status, 200, deleted.text)
      clock.advance(2 * DAY_MS)
    })

    test('Active: sign works and the earlier signature verifies', async () => {
      const { keyId, signed } = made.get('Active')!
      await assertState(keyId, 'Active')
      await sign({ keyId, message: b64(message) })
      const res = await verifyMade('Active')
      assert.equal(res.status, 200, res.text)
      assert.deepEqual(res.body, { valid: true, keyId, keyVersion: signed.keyVersion })
    })

    for (const state of ['Expired', 'Revoked', 'Pending Deletion']) {
      test(`${state}: sign is 409 key_state_conflict (state ${state}); a signature made while Active still verifies`, async () => {
        const { keyId, signed } = made.get(state)!
        await assertState(keyId, state)
        assertConflict(
          await call('POST', '/sign', { keyId, message: b64(message) }),
          state,
          `sign (${state})`,
        )
        const res = await verifyMade(state)
        assert.equal(res.status, 200, res.text)
        assert.deepEqual(res.body, { valid: true, keyId, keyVersion: signed.keyVersion })
      })
    }

    test('Destroyed (7-day window, 8 days later): sign and verify are both 409 key_state_conflict', async () => {
      const { keyId } = made.get('Destroyed')!
      const deleted = await call('DELETE', `/keys/${keyId}?pendingWindowDays=7`)
      assert.equal(deleted.status, 200, deleted.text)
      assert.equal(deleted.body.state, 'Pending Deletion')
      const stillVerifies = await verifyMade('Destroyed')
      assert.equal(stillVerifies.status, 200, stillVerifies.text)
      assert.equal(stillVerifies.body.valid, true, 'verifiable while pending deletion')

      clock.advance(8 * DAY_MS)
      await assertState(keyId, 'Destroyed')
      assertConflict(await call('POST', '/sign', { keyId, message: b64(message) }), 'Destroyed', 'sign')
      assertConflict(await verifyMade('Destroyed'), 'Destroyed', 'verify')
    })
  })

  // -------------------------------------------------------------------------------------------
  describe('key lookup', () => {
    test('an Encryption key is 400 key_type_mismatch; an unknown or foreign key is 404 key_not_found', async () => {
      const message = b64('which key?')
      const signature = b64(randomBytes(64))
      const encryptionKey = await createKey('ML-KEM-512', {}, tenant, 'Encryption')
      assertError(
        await call('POST', '/sign', { keyId: encryptionKey, message }),
        400,
        'key_type_mismatch',
        'sign with an Encryption key',
      )
      assertError(
        await verify({ keyId: encryptionKey, message, signature }),
        400,
        'key_type_mismatch',
        'verify with an Encryption key',
      )
      const hmacKey = await createKey('HMAC-SHA256', {}, tenant, 'HMAC')
      assertError(
        await call('POST', '/sign', { keyId: hmacKey, message }),
        400,
        'key_type_mismatch',
        'sign with an HMAC key',
      )

      const unknownId = randomUUID()
      const unknown = await call('POST', '/sign', { keyId: unknownId, message })
      assertError(unknown, 404, 'key_not_found', 'sign with an unknown key')
      const unknownVerify = await verify({ keyId: unknownId, message, signature })
      assertError(unknownVerify, 404, 'key_not_found', 'verify with an unknown key')

      const foreignKey = await createKey('Ed25519', {}, otherTenant)
      const foreign = await call('POST', '/sign', { keyId: foreignKey, message })
      assertError(foreign, 404, 'key_not_found', "sign with another tenant's key")
      assert.deepEqual(foreign.body, unknown.body, "another tenant's key is indistinguishable from none")
      const foreignVerify = await verify({ keyId: foreignKey, message, signature })
      assertError(foreignVerify, 404, 'key_not_found', "verify with another tenant's key")
      assert.deepEqual(foreignVerify.body, unknownVerify.body)
    })
  })

  // -------------------------------------------------------------------------------------------
  describe('scopes', () => {
    test('encrypt:invoke and keys:read are 403 on /sign and /verify; encryption:write signs and verifies', async () => {
      const keyId = keys.get('Ed25519')!
      const message = b64('scoped')
      const signed = await sign({ keyId, message })

      for (const scope of ['encrypt:invoke', 'keys:read']) {
        const key = await createApiKey([scope])
        const s = await call('POST', '/sign', { keyId, message }, key)
        assertError(s, 403, 'insufficient_scope', `${scope}: sign`)
        assert.equal(s.text.includes('signature'), false)
        const v = await verify({ keyId, message, signature: signed.signature }, key)
        assertError(v, 403, 'insufficient_scope', `${scope}: verify`)
      }

      const writer = await createApiKey(['encryption:write'])
      const own = await sign({ keyId, message }, writer)
      assert.equal(own.keyId, keyId)
      await assertVerify(
        { keyId, message, signature: own.signature },
        { valid: true, keyId, keyVersion: own.keyVersion },
        'encryption:write verifies',
        writer,
      )
    })
  })

  // -------------------------------------------------------------------------------------------
  describe('audit', () => {
    test('sign and verify are recorded with the key and version, never the message or the signature; a refused sign is a failure', async () => {
      const keyId = await createKey('Ed25519')
      const marker = `MESSAGE-MARKER-${randomBytes(8).toString('hex')}`
      const message = Buffer.from(marker)
      const actor = `apikey:${tenant.apiKeyId}`

      const signed = await sign({ keyId, message: b64(message) })
      await assertVerify(
        { keyId, message: b64(message), signature: signed.signature },
        { valid: true, keyId, keyVersion: 1 },
        'valid',
      )
      await assertVerify(
        { keyId, message: b64(Buffer.from(`${marker}-other`)), signature: signed.signature },
        { valid: false, keyId, keyVersion: 1 },
        'invalid',
      )
      assert.equal((await call('POST', `/keys/${keyId}/revoke`)).status, 200)
      assertConflict(await call('POST', '/sign', { keyId, message: b64(message) }), 'Revoked', 'refused sign')

      const rows = await svc.sql<
        {
          actor: string
          action: string
          resource: string
          key_version: number | null
          outcome: string
          details: Record<string, unknown> | null
        }[]
      >`
        SELECT actor, action, resource, key_version, outcome, details FROM audit_log
        WHERE tenant_id = ${tenant.tenantId} AND resource = ${`key:${keyId}`}
          AND action IN ('crypto.sign', 'crypto.verify')
        ORDER BY id`
      assert.deepEqual(
        rows.map((r) => [r.action, r.resource, r.key_version, r.outcome, r.actor]),
        [
          ['crypto.sign', `key:${keyId}`, 1, 'success', actor],
          ['crypto.verify', `key:${keyId}`, 1, 'success', actor],
          ['crypto.verify', `key:${keyId}`, 1, 'success', actor],
          ['crypto.sign', `key:${keyId}`, null, 'failure', actor],
        ],
      )
      assert.equal(rows[1]!.details?.['valid'], true)
      assert.equal(rows[2]!.details?.['valid'], false)
      assert.equal(rows[3]!.details?.['error'], 'key_state_conflict')

      const [stored] = await svc.sql<{ text: string }[]>`
        SELECT coalesce(string_agg(a::text, E'\n'), '') AS text FROM audit_log a
        WHERE tenant_id = ${tenant.tenantId}`
      const signature = unb64(signed.signature)
      for (const secret of [
        marker,
        b64(message),
        message.toString('hex'),
        signed.signature,
        signature.toString('hex'),
        signature.toString('base64url'),
      ]) {
        assert.equal(stored!.text.includes(secret), false, `audit_log contains ${secret.slice(0, 40)}`)
      }
    })
  })

  // -------------------------------------------------------------------------------------------
  describe('RSA-PSS salt length (issue 15, defect 12)', () => {
    test("Wycheproof rsa_pss_2048_sha256_mgf1_32: every vector gives its expected result, RAW and DIGEST; 's_len changed' vectors verify only under their salt length", () => {
      const file = JSON.parse(
        readFileSync(join(VECTORS, 'rsa_pss_2048_sha256_mgf1_32_test.json'), 'utf8'),
      ) as WycheproofPss
      const spec = { kind: 'rsa', modulusLength: 2048 } as const
      const options = { messageType: 'RAW', rsaPadding: 'PSS', signatureFormat: 'DER' } as const
      let checked = 0
      const saltChanged: number[] = []
      for (const group of file.testGroups) {
        assert.equal(group.sLen, 32)
        const publicKey = createPublicKey(group.publicKeyPem)
        for (const t of group.tests) {
          const msg = Buffer.from(t.msg, 'hex')
          const sig = Buffer.from(t.sig, 'hex')
          const expected = t.result === 'valid'
          const what = `tcId ${t.tcId} (${t.comment})`
          assert.equal(verifySignature(spec, publicKey, msg, sig, options), expected, `${what}, RAW`)
          const digest = digestOf('sha256', msg)
          assert.equal(
            verifySignature(spec, publicKey, digest, sig, { ...options, messageType: 'DIGEST' }),
            expected,
            `${what}, DIGEST`,
          )
          const changed = /^s_len changed to (\d+)$/.exec(t.comment)
          if (changed) {
            const saltLength = Number(changed[1])
            saltChanged.push(saltLength)
            assert.equal(t.result, 'invalid', what)
            assert.equal(
              verifySignature(spec, publicKey, msg, sig, { ...options, saltLength }),
              true,
              `${what} named`,
            )
            assert.equal(
              verifySignature(spec, publicKey, digest, sig, {
                ...options,
                messageType: 'DIGEST',
                saltLength,
              }),
              true,
              `${what} named, DIGEST`,
            )
          }
          checked++
        }
      }
      assert.equal(checked, 108)
      assert.deepEqual(
        saltChanged.sort((a, b) => a - b),
        [0, 1, 20, 31, 33, 222],
      )
    })

    test('saltLength on sign and verify: a 20-byte salt verifies only as 20 (service and openssl); out of range is 400 naming the field', async () => {
      const keyId = keys.get('RSA-2048')!
      const message = Buffer.from(`salt ${randomBytes(8).toString('hex')}`)
      for (const messageType of ['RAW', 'DIGEST'] as const) {
        const input = messageType === 'RAW' ? message : digestOf('sha256', message)
        const signed = await sign({ keyId, message: b64(input), messageType, saltLength: 20 })
        assert.equal(signed.signingScheme, 'RSASSA-PSS-SHA256')
        const keyVersion = signed.keyVersion
        const body = { keyId, keyVersion, message: b64(input), messageType, signature: signed.signature }
        await assertVerify(body, { valid: false, keyId, keyVersion }, `${messageType}: default salt length`)
        await assertVerify(
          { ...body, saltLength: 20 },
          { valid: true, keyId, keyVersion },
          `${messageType}: salt length 20`,
        )
        const f = files({
          'key.pem': await exportPublic(keyId, 'PEM', keyVersion),
          msg: message,
          sig: unb64(signed.signature),
        })
        const args = ['dgst', '-sha256', '-verify', f['key.pem']!, '-sigopt', 'rsa_padding_mode:pss']
        assert.ok(
          opensslVerifies([...args, '-sigopt', 'rsa_pss_saltlen:20', '-signature', f['sig']!, f['msg']!]),
        )
        assert.ok(
          !opensslVerifies([...args, '-sigopt', 'rsa_pss_saltlen:32', '-signature', f['sig']!, f['msg']!]),
        )
      }

      const tooLong = await call('POST', '/sign', { keyId, message: b64(message), saltLength: 223 })
      assertError(tooLong, 400, 'validation_failed', 'salt 223 on RSA-2048')
      assert.match(tooLong.body.message, /body\/saltLength must be between 0 and 222/)
      const verifyTooLong = await verify({
        keyId,
        message: b64(message),
        signature: b64(randomBytes(256)),
        saltLength: 223,
      })
      assertError(verifyTooLong, 400, 'validation_failed', 'verify, salt 223 on RSA-2048')
      const pkcs1 = await call('POST', '/sign', {
        keyId,
        message: b64(message),
        rsaPadding: 'PKCS1',
        saltLength: 20,
      })
      assertError(pkcs1, 400, 'validation_failed', 'saltLength with PKCS1')
      assert.match(pkcs1.body.message, /body\/saltLength/)
      const ed = await call('POST', '/sign', {
        keyId: keys.get('Ed25519')!,
        message: b64(message),
        saltLength: 20,
      })
      assertError(ed, 400, 'validation_failed', 'saltLength on Ed25519')
      const huge = await call('POST', '/sign', { keyId, message: b64(message), saltLength: 100_000 })
      assertError(huge, 400, 'validation_failed', 'saltLength past the schema bound')
      assert.match(huge.body.message, /saltLength/)
    })
  })

  // -------------------------------------------------------------------------------------------
  describe('event loop', () => {
    // Structural, not timed (a delay bound fails on a busy machine): each signature is one task
    // of the crypto pool's worker threads, so the event loop never computed one.
    test('SLH-DSA-128s: 20 concurrent signatures are each made by a crypto-pool task, off the event loop', async () => {
      const keyId = await createKey('SLH-DSA-128s')
      const raw = unb64(await exportPublic(keyId, 'RAW', 1))
      const pool = svc.api.services.cryptoPool
      const messages = Array.from({ length: 20 }, (_, i) => Buffer.from(`concurrent message ${i}`))

      const tasksBefore = pool.completedTasks()
      const results = await Promise.all(
        messages.map((m) => call('POST', '/sign', { keyId, message: b64(m) })),
      )
      const completed = pool.completedTasks() - tasksBefore

      for (const [i, res] of results.entries()) {
        assert.equal(res.status, 200, `request ${i}: ${res.text}`)
        assert.equal(res.body.keyId, keyId)
        const sig = unb64(res.body.signature)
        assert.equal(slh_dsa_sha2_128s.verify(sig, messages[i]!, raw), true, `signature ${i} verifies`)
      }
      assert.equal(completed, 20, 'one crypto-pool task per signature')
      assert.deepEqual(
        { queued: pool.stats().queued, running: pool.stats().running },
        { queued: 0, running: 0 },
        'no task left behind',
      )
    })
  })
})
