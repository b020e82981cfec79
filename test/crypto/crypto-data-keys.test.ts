import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { generateKeyPairSync, randomBytes, randomUUID } from 'node:crypto'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { gcm } from '@noble/ciphers/aes.js'
import { hmac } from '@noble/hashes/hmac.js'
import { sha256, sha384, sha512 } from '@noble/hashes/sha2.js'
import { ml_kem512, ml_kem768, ml_kem1024 } from '@noble/post-quantum/ml-kem.js'
import { DAY_MS } from '../../src/platform/clock.ts'
import { apiClient, b64, mapConcurrently, unb64, uniqueName } from '../helpers/api-client.ts'
import { type ManualClock, manualClock } from '../helpers/manual-clock.ts'
import {
  type HttpResult,
  startTestService,
  type TenantWithKey,
  type TestService,
} from '../helpers/service.ts'

/**
 * Data keys, wrapping and MACs over real HTTP (docs/crypto-operations.md): generate-data-key and
 * the per-key data-key route, wrap/unwrap of caller material, one identical 400
 * decryption_failed for every way an unwrap can fail (every single-bit flip included), the
 * "wrap" purpose kept apart from /encrypt, rotation, HMACs checked against @noble/hashes and
 * RFC 4231, legacy (compact) mode of /encrypt and /decrypt, the key states of spec section 3
 * (a manual clock drives expiry and destruction), scopes, and audit records that carry no
 * secret.
 *
 * The compact form and the AAD labels are taken from docs/crypto-operations.md and the comment
 * at the top of src/crypto/envelope.ts; the independent decryptor below does not import the
 * service's code: noble for ML-KEM, HMAC-SHA256 and AES-256-GCM, the openssl CLI for RSA-OAEP.
 *
 * One service and one clock for the file; only the key-state tests move the clock.
 */

// ---- The format, as documented --------------------------------------------------------------

const HEADER_BYTES = 22
const NONCE_BYTES = 12
const TAG_BYTES = 16
const MAX_WRAP_BYTES = 64 * 1024
const SCHEME_ML_KEM = 0x01
const SCHEME_RSA_OAEP = 0x02
const DEK_INFO = Buffer.from('kms/envelope/v1/dek', 'ascii')
const WRAP_LABEL = Buffer.from('kms/wrap/v1', 'ascii')
const ENCRYPT_LABEL = Buffer.from('kms/envelope/v1', 'ascii')
const TAMPER_CONCURRENCY = 8

const ENCRYPTION_ALGORITHMS = [
  { algorithm: 'ML-KEM-512', scheme: SCHEME_ML_KEM, protectedBytes: 768 },
  { algorithm: 'ML-KEM-768', scheme: SCHEME_ML_KEM, protectedBytes: 1088 },
  { algorithm: 'ML-KEM-1024', scheme: SCHEME_ML_KEM, protectedBytes: 1568 },
  { algorithm: 'RSA-2048', scheme: SCHEME_RSA_OAEP, protectedBytes: 256 },
] as const

const KEMS = { 'ML-KEM-512': ml_kem512, 'ML-KEM-768': ml_kem768, 'ML-KEM-1024': ml_kem1024 } as const
type KemName = keyof typeof KEMS

const HMAC_ALGORITHMS = [
  { algorithm: 'HMAC-SHA256', hash: sha256, macBytes: 32, blockBytes: 64 },
  { algorithm: 'HMAC-SHA384', hash: sha384, macBytes: 48, blockBytes: 128 },
  { algorithm: 'HMAC-SHA512', hash: sha512, macBytes: 64, blockBytes: 128 },
] as const

/** RFC 4231 section 4: test cases 2, 6 and 7 (HMAC-SHA-256/384/512). */
const RFC4231 = {
  case2: {
    key: Buffer.from('Jefe', 'ascii'),
    data: Buffer.from('what do ya want for nothing?', 'ascii'),
    expected: {
      'HMAC-SHA256': '5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843',
      'HMAC-SHA384':
        'af45d2e376484031617f78d2b58a6b1b9c7ef464f5a01b47e42ec3736322445e8e2240ca5e69e2c78b3239ecfab21649',
      'HMAC-SHA512':
        '164b7a7bfcf819e2e395fbe73b56e0a387bd64222e831fd610270cd7ea2505549758bf75c05a994a6d034f65f8f0e6fdcaeab1a34d4a6b4b636e070a38bce737',
    },
  },
  case6: {
    key: Buffer.alloc(131, 0xaa),
    data: Buffer.from('Test Using Larger Than Block-Size Key - Hash Key First', 'ascii'),
    expected: {
      'HMAC-SHA256': '60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54',
      'HMAC-SHA384':
        '4ece084485813e9088d2c63a041bc5b44f9ef1012a2b588f3cd11f05033ac4c60c2ef6ab4030fe8296248df163f44952',
      'HMAC-SHA512':
        '80b24263c7c1a3ebb71493c1dd7be8b49b46d1f41b4aeec1121b013783f8f3526b56d037e05f2598bd0fd2215d6a1e5295e64f73f63f0aec8b915a985d786598',
    },
  },
  case7: {
    key: Buffer.alloc(131, 0xaa),
    data: Buffer.from(
      'This is a test using a larger than block-size key and a larger than block-size data. The key needs to be hashed before being used by the HMAC algorithm.',
      'ascii',
    ),
    expected: {
      'HMAC-SHA256': '9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2',
      'HMAC-SHA384':
        '6617178e941f020d351e2f254e8fd32c602420feb0b8fb9adccebb82461e99c5a678cc31e799176d3860e6110c46523e',
      'HMAC-SHA512':
        'e37b6a775dc87dbaa4dfa9f96e5e3ffddebd71f8867289865df5a32d20cdc944b6022cac3c4982b10d5eeb55c3e4de15134676fb6de0446065c97440fa8c6a58',
    },
  },
} as const

function flipBit(bytes: Buffer, bit: number): Buffer {
  const copy = Buffer.from(bytes)
  copy[bit >> 3]! ^= 1 << (bit & 7)
  return copy
}

/** Runs `work` over `items` with at most `limit` in flight; results in input order. */

/** compact = uint16 BE length of encapsulatedKey || encapsulatedKey || nonce (12) || tag (16) || ciphertext */
interface Compact {
  encapsulatedKey: Buffer
  header: Buffer
  protectedDek: Buffer
  nonce: Buffer
  tag: Buffer
  ciphertext: Buffer
}

function parseCompact(bytes: Buffer): Compact {
  assert.ok(bytes.length >= 2, 'a compact envelope starts with a 2-byte length')
  const keyLength = bytes.readUInt16BE(0)
  const nonceAt = 2 + keyLength
  const tagAt = nonceAt + NONCE_BYTES
  const ciphertextAt = tagAt + TAG_BYTES
  assert.ok(keyLength > HEADER_BYTES, `encapsulatedKey of ${keyLength} bytes holds a header`)
  assert.ok(bytes.length >= ciphertextAt, 'the compact envelope holds all its declared parts')
  const encapsulatedKey = bytes.subarray(2, nonceAt)
  return {
    encapsulatedKey,
    header: encapsulatedKey.subarray(0, HEADER_BYTES),
    protectedDek: encapsulatedKey.subarray(HEADER_BYTES),
    nonce: bytes.subarray(nonceAt, tagAt),
    tag: bytes.subarray(tagAt, ciphertextAt),
    ciphertext: bytes.subarray(ciphertextAt),
  }
}

/** What a key holder has after export-private: the expanded ML-KEM seed, or a PKCS#8 PEM file. */
type PrivateKey =
  | { kind: 'ml-kem'; algorithm: KemName; secretKey: Uint8Array }
  | { kind: 'rsa'; pemPath: string }

function openssl(args: string[]): Buffer {
  return execFileSync('openssl', args, { stdio: ['ignore', 'pipe', 'pipe'] })
}

/**
 * Opens a compact envelope outside the service: DEK from ML-KEM (HKDF-Expand as one HMAC) or
 * RSA-OAEP-SHA256 (openssl), then AES-256-GCM with AAD = label || header || context.
 */
function openCompact(
  compact: Compact,
  key: PrivateKey,
  label: Buffer,
  context: string,
  workDir: string,
): Buffer {
  let dek: Uint8Array
  if (compact.header[1] === SCHEME_ML_KEM) {
    assert.equal(key.kind, 'ml-kem')
    if (key.kind !== 'ml-kem') throw new Error('unreachable')
    const sharedSecret = KEMS[key.algorithm].decapsulate(compact.protectedDek, key.secretKey)
    dek = hmac(sha256, sharedSecret, Buffer.concat([DEK_INFO, compact.header, Buffer.of(0x01)]))
  } else {
    assert.equal(compact.header[1], SCHEME_RSA_OAEP)
    if (key.kind !== 'rsa') throw new Error('scheme 0x02 needs an RSA key')
    const inPath = join(workDir, `in-${randomBytes(6).toString('hex')}`)
    writeFileSync(inPath, compact.protectedDek)
    try {
      dek = openssl([
        'pkeyutl',
        '-decrypt',
        '-inkey',
        key.pemPath,
        '-pkeyopt',
        'rsa_padding_mode:oaep',
        '-pkeyopt',
        'rsa_oaep_md:sha256',
        '-pkeyopt',
        'rsa_mgf1_md:sha256',
        '-in',
        inPath,
      ])
    } finally {
      rmSync(inPath, { force: true })
    }
  }
  assert.equal(dek.length, 32, 'the DEK is 32 bytes')
  const aad = Buffer.concat([label, compact.header, Buffer.from(context, 'utf8')])
  const sealed = Buffer.concat([compact.ciphertext, compact.tag])
  return Buffer.from(gcm(dek, compact.nonce, aad).decrypt(sealed))
}

interface KeyRef {
  id: string
  name: string
}

describe('data keys, wrapping and MACs', () => {
  let svc: TestService
  let clock: ManualClock
  let tenant: TenantWithKey
  let otherTenant: TenantWithKey
  let workDir = ''
  /** One Encryption key per algorithm, never rotated nor moved out of Active. */
  const keys = new Map<string, KeyRef>()

  before(async () => {
    workDir = mkdtempSync(join(tmpdir(), 'kms-data-keys-'))
    clock = manualClock(new Date('2030-01-01T00:00:00Z'))
    svc = await startTestService({}, { clock })
    tenant = await svc.createTenant()
    otherTenant = await svc.createTenant()
    for (const { algorithm } of ENCRYPTION_ALGORITHMS)
      keys.set(algorithm, await createKey('Encryption', algorithm, { exportable: true }))
  })

  after(async () => {
    await svc?.stop()
    if (workDir) rmSync(workDir, { recursive: true, force: true })
  })

  const { call, createKey } = apiClient(() => ({ svc, tenant }))

  async function ok(method: string, path: string, body?: unknown, by: TenantWithKey | string = tenant) {
    const res = await call(method, path, body, by)
    assert.equal(res.status, 200, `${method} ${path}: ${res.text}`)
    return res
  }

  const wrap = (keyId: string, plaintext: Buffer, context?: string, by: TenantWithKey | string = tenant) =>
    call(
      'POST',
      `/keys/${keyId}/wrap`,
      { plaintext: b64(plaintext), ...(context === undefined ? {} : { context }) },
      by,
    )

  const unwrap = (keyId: string, wrappedKey: string, context?: string, by: TenantWithKey | string = tenant) =>
    call('POST', `/keys/${keyId}/unwrap`, { wrappedKey, ...(context === undefined ? {} : { context }) }, by)

  /** Unwraps and asserts success: the bytes, the key and the version. */
  async function assertUnwraps(
    keyId: string,
    wrappedKey: string,
    expected: { plaintext?: Buffer; length?: number; keyVersion: number },
    context?: string,
    by: TenantWithKey | string = tenant,
  ): Promise<Buffer> {
    const res = await unwrap(keyId, wrappedKey, context, by)
    assert.equal(res.status, 200, res.text)
    assert.deepEqual(Object.keys(res.body).sort(), ['keyId', 'keyVersion', 'plaintext'])
    const plaintext = unb64(res.body.plaintext)
    if (expected.plaintext) assert.ok(plaintext.equals(expected.plaintext), 'unwrap returns the same bytes')
    if (expected.length !== undefined) assert.equal(plaintext.length, expected.length)
    assert.equal(res.body.keyId, keyId)
    assert.equal(res.body.keyVersion, expected.keyVersion)
    return plaintext
  }

  function assertDecryptionFailed(res: HttpResult, what: string): void {
    assert.equal(res.status, 400, `${what}: ${res.text}`)
    assert.equal(res.body.error, 'decryption_failed', `${what}: ${res.text}`)
    assert.equal(res.body.plaintext, undefined, what)
  }

  function assertValidationFailed(res: HttpResult, what: string): void {
    assert.equal(res.status, 400, `${what}: ${res.text}`)
    assert.equal(res.body.error, 'validation_failed', `${what}: ${res.text}`)
  }

  function assertConflict(res: HttpResult, state: string, what: string): void {
    assert.equal(res.status, 409, `${what}: ${res.text}`)
    assert.equal(res.body.error, 'key_state_conflict', `${what}: ${res.text}`)
    assert.equal(res.body.state, state, what)
  }

  async function createApiKey(scopes: string[]): Promise<string> {
    const res = await call('POST', '/api-keys', { name: uniqueName('scoped'), scopes })
    assert.equal(res.status, 201, res.text)
    return res.body.key
  }

  async function exportPrivate(key: KeyRef, format: 'RAW' | 'PEM', version?: number) {
    const res = await call('POST', `/keys/${key.id}/export-private`, {
      confirm: key.name,
      format,
      ...(version === undefined ? {} : { version }),
    })
    assert.equal(res.status, 200, res.text)
    return res.body.privateKey as string
  }

  /** The exported private key as an outside key holder would use it. */
  async function holderKey(algorithm: string, key: KeyRef): Promise<PrivateKey> {
    if (algorithm in KEMS) {
      const seed = unb64(await exportPrivate(key, 'RAW'))
      assert.equal(seed.length, 64, 'the ML-KEM seed is 64 bytes')
      const pair = KEMS[algorithm as KemName].keygen(new Uint8Array(seed))
      return { kind: 'ml-kem', algorithm: algorithm as KemName, secretKey: pair.secretKey }
    }
    const pem = await exportPrivate(key, 'PEM')
    assert.match(pem, /^-----BEGIN PRIVATE KEY-----\n/)
    const pemPath = join(workDir, `${key.id}.pem`)
    writeFileSync(pemPath, pem, { mode: 0o600 })
    return { kind: 'rsa', pemPath }
  }

  // ---- 1. generate-data-key ------------------------------------------------------------------

  describe('POST /generate-data-key', () => {
    for (const { algorithm } of ENCRYPTION_ALGORITHMS) {
      test(`${algorithm}: a 32-byte data key that unwrap recovers without a context, and with no other`, async () => {
        const key = keys.get(algorithm)!
        const res = await ok('POST', '/generate-data-key', { keyId: key.id })
        assert.deepEqual(Object.keys(res.body).sort(), [
          'encryptedDek',
          'keyBytes',
          'keyId',
          'keyVersion',
          'plaintextDek',
        ])
        const dek = unb64(res.body.plaintextDek)
        assert.equal(dek.length, 32)
        assert.equal(res.body.keyBytes, 32)
        assert.equal(res.body.keyId, key.id)
        assert.equal(res.body.keyVersion, 1)
        assert.equal(res.headers.get('cache-control'), 'no-store')

        await assertUnwraps(key.id, res.body.encryptedDek, { plaintext: dek, keyVersion: 1 })
        // "empty when the request had none": an empty context is the same AAD as no context.
        await assertUnwraps(key.id, res.body.encryptedDek, { plaintext: dek, keyVersion: 1 }, '')
        for (const context of ['x', ' ', 'default', 'kms/wrap/v1', 'région/東京']) {
          assertDecryptionFailed(
            await unwrap(key.id, res.body.encryptedDek, context),
            `context ${JSON.stringify(context)}`,
          )
        }

        const again = await ok('POST', '/generate-data-key', { keyId: key.id })
        assert.notEqual(again.body.plaintextDek, res.body.plaintextDek, 'two calls give different keys')
        assert.notEqual(again.body.encryptedDek, res.body.encryptedDek)
        await assertUnwraps(key.id, again.body.encryptedDek, {
          plaintext: unb64(again.body.plaintextDek),
          keyVersion: 1,
        })
      })
    }

    test('without keyId the tenant default Encryption key is used; with no default, 409 no_default_key', async () => {
      const own = await svc.createTenant()
      const none = await call('POST', '/generate-data-key', {}, own)
      assert.equal(none.status, 409, none.text)
      assert.equal(none.body.error, 'no_default_key')

      await createKey('Encryption', 'RSA-2048', {}, own)
      const stillNone = await call('POST', '/generate-data-key', {}, own)
      assert.equal(stillNone.status, 409, stillNone.text)
      assert.equal(stillNone.body.error, 'no_default_key')

      const byDefault = await createKey('Encryption', 'ML-KEM-768', { isDefault: true }, own)
      const res = await ok('POST', '/generate-data-key', {}, own)
      assert.equal(res.body.keyId, byDefault.id)
      assert.equal(res.body.keyVersion, 1)
      assert.equal(res.body.keyBytes, 32)
      const dek = unb64(res.body.plaintextDek)
      assert.equal(dek.length, 32)
      await assertUnwraps(
        byDefault.id,
        res.body.encryptedDek,
        { plaintext: dek, keyVersion: 1 },
        undefined,
        own,
      )
    })

    for (const { algorithm, scheme, protectedBytes } of ENCRYPTION_ALGORITHMS) {
      test(`${algorithm}: encryptedDek opens outside the service with the exported private key`, async () => {
        const key = await createKey('Encryption', algorithm, { exportable: true })
        const privateKey = await holderKey(algorithm, key)
        const res = await ok('POST', '/generate-data-key', { keyId: key.id })
        const dek = unb64(res.body.plaintextDek)

        const bytes = unb64(res.body.encryptedDek)
        const compact = parseCompact(bytes)
        assert.equal(bytes.readUInt16BE(0), HEADER_BYTES + protectedBytes, 'length prefix')
        assert.equal(bytes.length, 2 + HEADER_BYTES + protectedBytes + NONCE_BYTES + TAG_BYTES + 32)
        assert.equal(compact.header[0], 0x01, 'format version')
        assert.equal(compact.header[1], scheme, 'scheme')
        assert.equal(compact.header.subarray(2, 18).toString('hex'), key.id.replaceAll('-', ''), 'key id')
        assert.equal(compact.header.readUInt32BE(18), 1, 'key version')
        assert.equal(compact.ciphertext.length, 32)

        const opened = openCompact(compact, privateKey, WRAP_LABEL, '', workDir)
        assert.ok(opened.equals(dek), 'the independent decryptor yields plaintextDek')
        // The purpose label is in the AAD: the /encrypt label does not open it.
        assert.throws(
          () => openCompact(compact, privateKey, ENCRYPT_LABEL, '', workDir),
          /invalid tag/,
          'kms/envelope/v1 instead of kms/wrap/v1',
        )

        // A per-key data key with a context opens with exactly that context.
        const context = 'bucket=invoices/2030'
        const perKey = await ok('POST', `/keys/${key.id}/data-key`, { keyBytes: 16, context })
        const perKeyCompact = parseCompact(unb64(perKey.body.encryptedDek))
        const perKeyDek = openCompact(perKeyCompact, privateKey, WRAP_LABEL, context, workDir)
        assert.ok(perKeyDek.equals(unb64(perKey.body.plaintextDek)))
        assert.equal(perKeyDek.length, 16)
        assert.throws(() => openCompact(perKeyCompact, privateKey, WRAP_LABEL, '', workDir), /invalid tag/)
      })
    }
  })

  // ---- 2. POST /keys/{keyId}/data-key ----------------------------------------------------------

  describe('POST /keys/{keyId}/data-key', () => {
    const context = 'table=payments;column=card'

    test('keyBytes 16, 24 and 32 give keys of that length, which unwrap recovers with the context', async () => {
      for (const algorithm of ['ML-KEM-768', 'RSA-2048']) {
        const key = keys.get(algorithm)!
        for (const keyBytes of [16, 24, 32]) {
          const what = `${algorithm} keyBytes ${keyBytes}`
          const res = await ok('POST', `/keys/${key.id}/data-key`, { keyBytes, withPlaintext: true, context })
          assert.deepEqual(
            Object.keys(res.body).sort(),
            ['encryptedDek', 'keyBytes', 'keyId', 'keyVersion', 'plaintextDek'],
            what,
          )
          const dek = unb64(res.body.plaintextDek)
          assert.equal(dek.length, keyBytes, what)
          assert.equal(res.body.keyBytes, keyBytes, what)
          assert.equal(res.body.keyId, key.id, what)
          assert.equal(res.body.keyVersion, 1, what)
          await assertUnwraps(key.id, res.body.encryptedDek, { plaintext: dek, keyVersion: 1 }, context)
        }
      }
    })

    test('withPlaintext false omits plaintextDek; unwrap with the same context recovers a key of the right length', async () => {
      const key = keys.get('ML-KEM-512')!
      for (const keyBytes of [16, 24, 32]) {
        const res = await ok('POST', `/keys/${key.id}/data-key`, { keyBytes, withPlaintext: false, context })
        assert.deepEqual(Object.keys(res.body).sort(), ['encryptedDek', 'keyBytes', 'keyId', 'keyVersion'])
        assert.equal(res.body.plaintextDek, undefined)
        assert.equal(res.body.keyBytes, keyBytes)
        await assertUnwraps(key.id, res.body.encryptedDek, { length: keyBytes, keyVersion: 1 }, context)
      }
    })

    test('defaults: keyBytes 32 and withPlaintext true', async () => {
      const key = keys.get('ML-KEM-1024')!
      const res = await ok('POST', `/keys/${key.id}/data-key`, {})
      assert.equal(res.body.keyBytes, 32)
      const dek = unb64(res.body.plaintextDek)
      assert.equal(dek.length, 32)
      await assertUnwraps(key.id, res.body.encryptedDek, { plaintext: dek, keyVersion: 1 })

      const withContextOnly = await ok('POST', `/keys/${key.id}/data-key`, { context })
      assert.equal(withContextOnly.body.keyBytes, 32)
      assert.equal(unb64(withContextOnly.body.plaintextDek).length, 32)
    })

    test('keyBytes 8, 33 or "32" is 400 validation_failed', async () => {
      const key = keys.get('ML-KEM-768')!
      for (const keyBytes of [8, 33, '32']) {
        assertValidationFailed(
          await call('POST', `/keys/${key.id}/data-key`, { keyBytes }),
          `keyBytes ${JSON.stringify(keyBytes)}`,
        )
      }
    })

    test('unwrap with a different context or no context is 400 decryption_failed', async () => {
      for (const algorithm of ['ML-KEM-768', 'RSA-2048']) {
        const key = keys.get(algorithm)!
        const res = await ok('POST', `/keys/${key.id}/data-key`, { keyBytes: 24, context })
        await assertUnwraps(
          key.id,
          res.body.encryptedDek,
          { plaintext: unb64(res.body.plaintextDek), keyVersion: 1 },
          context,
        )
        for (const other of [undefined, '', `${context} `, context.toUpperCase(), 'table=payments']) {
          assertDecryptionFailed(
            await unwrap(key.id, res.body.encryptedDek, other),
            `${algorithm}: context ${JSON.stringify(other)}`,
          )
        }
      }
    })

    test('the response carries cache-control: no-store', async () => {
      const key = keys.get('RSA-2048')!
      for (const body of [{}, { withPlaintext: false }, { keyBytes: 16, context }]) {
        const res = await ok('POST', `/keys/${key.id}/data-key`, body)
        assert.equal(res.headers.get('cache-control'), 'no-store', JSON.stringify(body))
      }
    })
  })

  // ---- 3. wrap and unwrap ----------------------------------------------------------------------

  describe('wrap and unwrap', () => {
    test('key material of 1 byte, 32 bytes, a PKCS#8 private key of over 4 KiB and 64 KiB round-trips, with and without context', async () => {
      const pkcs8 = generateKeyPairSync('ml-dsa-87').privateKey.export({ type: 'pkcs8', format: 'der' })
      assert.ok(pkcs8.length > 4096, `PKCS#8 of ${pkcs8.length} bytes`)
      const materials: [string, Buffer][] = [
        ['1 byte', randomBytes(1)],
        ['32 bytes', randomBytes(32)],
        [`PKCS#8 (${pkcs8.length} bytes)`, pkcs8],
        ['64 KiB', randomBytes(MAX_WRAP_BYTES)],
      ]
      for (const algorithm of ['ML-KEM-768', 'RSA-2048']) {
        const key = keys.get(algorithm)!
        for (const [name, material] of materials) {
          for (const context of [undefined, 'kek-for=db-7', 'Zoë/東京/🔐']) {
            const what = `${algorithm} ${name} context ${JSON.stringify(context)}`
            const res = await wrap(key.id, material, context)
            assert.equal(res.status, 200, `${what}: ${res.text}`)
            assert.deepEqual(Object.keys(res.body).sort(), ['keyId', 'keyVersion', 'wrappedKey'], what)
            assert.equal(res.body.keyId, key.id, what)
            assert.equal(res.body.keyVersion, 1, what)
            assert.equal(parseCompact(unb64(res.body.wrappedKey)).ciphertext.length, material.length, what)
            await assertUnwraps(key.id, res.body.wrappedKey, { plaintext: material, keyVersion: 1 }, context)
          }
        }
      }
    })

    test('wrong or missing context, truncation, another key and material of another tenant are one identical 400 decryption_failed; a key id of another tenant is 404', async () => {
      const key = keys.get('ML-KEM-768')!
      const sibling = keys.get('ML-KEM-512')!
      const rsaSibling = keys.get('RSA-2048')!
      const foreign = await createKey('Encryption', 'ML-KEM-768', {}, otherTenant)
      const material = randomBytes(32)
      const context = 'kek-for=db-7'
      const wrapped: string = (
        await ok('POST', `/keys/${key.id}/wrap`, { plaintext: b64(material), context })
      ).body.wrappedKey
      const unbound: string = (await ok('POST', `/keys/${key.id}/wrap`, { plaintext: b64(material) })).body
        .wrappedKey
      const fromSibling: string = (
        await ok('POST', `/keys/${sibling.id}/wrap`, { plaintext: b64(material), context })
      ).body.wrappedKey
      const fromForeign: string = (
        await ok('POST', `/keys/${foreign.id}/wrap`, { plaintext: b64(material), context }, otherTenant)
      ).body.wrappedKey
      await assertUnwraps(key.id, wrapped, { plaintext: material, keyVersion: 1 }, context)
      await assertUnwraps(key.id, unbound, { plaintext: material, keyVersion: 1 })
      await assertUnwraps(
        foreign.id,
        fromForeign,
        { plaintext: material, keyVersion: 1 },
        context,
        otherTenant,
      )

      const reference = await unwrap(key.id, wrapped, 'kek-for=db-8')
      assertDecryptionFailed(reference, 'reference')
      assert.deepEqual(Object.keys(reference.body).sort(), ['error', 'message'])

      const bytes = unb64(wrapped)
      const cases: {
        what: string
        keyId: string
        wrappedKey: string
        context?: string
        by?: TenantWithKey
      }[] = [
        { what: 'wrong context', keyId: key.id, wrappedKey: wrapped, context: 'KEK-FOR=DB-7' },
        { what: 'missing context', keyId: key.id, wrappedKey: wrapped },
        { what: 'empty context', keyId: key.id, wrappedKey: wrapped, context: '' },
        { what: 'a context the wrap lacked', keyId: key.id, wrappedKey: unbound, context },
        ...[1, 16, 17, 29, 2 + HEADER_BYTES, bytes.length - 32, bytes.length - 1].map((length) => ({
          what: `truncated to ${length} bytes`,
          keyId: key.id,
          wrappedKey: b64(bytes.subarray(0, length)),
          context,
        })),
        { what: 'empty', keyId: key.id, wrappedKey: '', context },
        {
          what: 'extended by one byte',
          keyId: key.id,
          wrappedKey: b64(Buffer.concat([bytes, Buffer.of(0)])),
          context,
        },
        { what: "another key's wrappedKey at this key", keyId: key.id, wrappedKey: fromSibling, context },
        { what: "this key's wrappedKey at another key", keyId: sibling.id, wrappedKey: wrapped, context },
        { what: "this key's wrappedKey at an RSA key", keyId: rsaSibling.id, wrappedKey: wrapped, context },
        { what: "another tenant's wrappedKey at this key", keyId: key.id, wrappedKey: fromForeign, context },
        {
          what: "this tenant's wrappedKey at another tenant's key",
          keyId: foreign.id,
          wrappedKey: wrapped,
          context,
          by: otherTenant,
        },
      ]
      for (const c of cases) {
        const res = await unwrap(c.keyId, c.wrappedKey, c.context, c.by ?? tenant)
        assert.equal(res.status, 400, `${c.what}: ${res.text}`)
        assert.equal(res.text, reference.text, c.what)
      }
      // The path names a key resource: another tenant's key id is 404, exactly as an unknown id.
      const atForeignKey = await unwrap(foreign.id, fromForeign, context, tenant)
      const atUnknownKey = await unwrap(randomUUID(), fromForeign, context, tenant)
      // ...and so is this tenant's key id used by another tenant, with this tenant's material.
      const byOtherTenant = await unwrap(key.id, wrapped, context, otherTenant)
      for (const res of [atForeignKey, byOtherTenant]) {
        assert.equal(res.status, 404, res.text)
        assert.equal(res.text, atUnknownKey.text)
      }
      assert.equal(atUnknownKey.body.error, 'key_not_found')
      await assertUnwraps(key.id, wrapped, { plaintext: material, keyVersion: 1 }, context)
    })

    test('every single-bit flip of a wrappedKey is the same 400 decryption_failed', async () => {
      const key = keys.get('ML-KEM-512')!
      const material = randomBytes(1)
      const context = 'flip'
      const wrapped: string = (
        await ok('POST', `/keys/${key.id}/wrap`, { plaintext: b64(material), context })
      ).body.wrappedKey
      await assertUnwraps(key.id, wrapped, { plaintext: material, keyVersion: 1 }, context)
      const reference = await unwrap(key.id, wrapped, 'not-flip')
      assertDecryptionFailed(reference, 'reference')

      const bytes = unb64(wrapped)
      const bits = Array.from({ length: bytes.length * 8 }, (_, bit) => bit)
      const outcomes = await mapConcurrently(bits, TAMPER_CONCURRENCY, async (bit) => {
        const res = await unwrap(key.id, b64(flipBit(bytes, bit)), context)
        return { bit, status: res.status, text: res.text }
      })
      const deviations = outcomes.filter((o) => o.status !== 400 || o.text !== reference.text)
      assert.deepEqual(
        deviations.slice(0, 10),
        [],
        `${deviations.length} of ${outcomes.length} bit flips answered differently from ${reference.text}`,
      )
      assert.equal(outcomes.length, (2 + HEADER_BYTES + 768 + NONCE_BYTES + TAG_BYTES + 1) * 8)
      await assertUnwraps(key.id, wrapped, { plaintext: material, keyVersion: 1 }, context)
    })

    test('more than 64 KiB of key material is 400', async () => {
      // 64 KiB exactly is wrapped in the round-trip test above; 64 KiB + 1 and + 2 bytes still fit
      // the Base64 length of the schema, so the decoded length must be checked too.
      const key = keys.get('ML-KEM-768')!
      for (const length of [
        MAX_WRAP_BYTES + 1,
        MAX_WRAP_BYTES + 2,
        MAX_WRAP_BYTES + 3,
        MAX_WRAP_BYTES + 1024,
        2 * MAX_WRAP_BYTES,
      ]) {
        const res = await wrap(key.id, randomBytes(length))
        assertValidationFailed(res, `${length} bytes`)
        assert.equal(res.body.wrappedKey, undefined)
      }
    })

    test('domain separation: /encrypt output does not unwrap, and wrapped keys do not /decrypt', async () => {
      for (const algorithm of ['ML-KEM-768', 'RSA-2048']) {
        const key = keys.get(algorithm)!
        const material = randomBytes(32)
        for (const context of [undefined, 'purpose-test']) {
          const what = `${algorithm} context ${JSON.stringify(context)}`
          const withContext = context === undefined ? {} : { context }
          const legacy = await ok('POST', '/encrypt', {
            keyId: key.id,
            plaintext: b64(material),
            mode: 'legacy',
            ...withContext,
          })
          const wrapped = await ok('POST', `/keys/${key.id}/wrap`, {
            plaintext: b64(material),
            ...withContext,
          })
          const dataKey = await ok('POST', `/keys/${key.id}/data-key`, withContext)

          // Each opens through its own route...
          const decrypted = await ok('POST', '/decrypt', {
            ciphertext: legacy.body.ciphertext,
            mode: 'legacy',
            ...withContext,
          })
          assert.ok(unb64(decrypted.body.plaintext).equals(material), what)
          await assertUnwraps(
            key.id,
            wrapped.body.wrappedKey,
            { plaintext: material, keyVersion: 1 },
            context,
          )

          // ...and never through the other.
          assertDecryptionFailed(
            await unwrap(key.id, legacy.body.ciphertext, context),
            `${what}: /encrypt legacy output at unwrap`,
          )
          for (const [name, compact] of [
            ['wrappedKey', wrapped.body.wrappedKey],
            ['encryptedDek', dataKey.body.encryptedDek],
          ]) {
            assertDecryptionFailed(
              await call('POST', '/decrypt', { ciphertext: compact, mode: 'legacy', ...withContext }),
              `${what}: ${name} at /decrypt`,
            )
            assertDecryptionFailed(
              await call('POST', '/decrypt', {
                keyId: key.id,
                ciphertext: compact,
                mode: 'legacy',
                ...withContext,
              }),
              `${what}: ${name} at /decrypt naming the key`,
            )
          }
        }
      }
    })
  })

  // ---- 4. rotation ----------------------------------------------------------------------------

  describe('rotation', () => {
    for (const algorithm of ['ML-KEM-768', 'RSA-2048']) {
      test(`${algorithm}: v1 wrapped keys and data keys still unwrap as version 1; new ones are version 2`, async () => {
        const key = await createKey('Encryption', algorithm)
        const context = 'rotation'
        const material = randomBytes(48)
        const v1Wrap = await ok('POST', `/keys/${key.id}/wrap`, { plaintext: b64(material), context })
        const v1DataKey = await ok('POST', `/keys/${key.id}/data-key`, { keyBytes: 24, context })
        const v1Generated = await ok('POST', '/generate-data-key', { keyId: key.id })
        for (const res of [v1Wrap, v1DataKey, v1Generated]) assert.equal(res.body.keyVersion, 1)

        const rotated = await ok('POST', `/keys/${key.id}/rotate`)
        assert.equal(rotated.body.version, 2)

        await assertUnwraps(key.id, v1Wrap.body.wrappedKey, { plaintext: material, keyVersion: 1 }, context)
        await assertUnwraps(
          key.id,
          v1DataKey.body.encryptedDek,
          { plaintext: unb64(v1DataKey.body.plaintextDek), keyVersion: 1 },
          context,
        )
        await assertUnwraps(key.id, v1Generated.body.encryptedDek, {
          plaintext: unb64(v1Generated.body.plaintextDek),
          keyVersion: 1,
        })

        const v2Wrap = await ok('POST', `/keys/${key.id}/wrap`, { plaintext: b64(material), context })
        const v2DataKey = await ok('POST', `/keys/${key.id}/data-key`, { keyBytes: 16, context })
        const v2Generated = await ok('POST', '/generate-data-key', { keyId: key.id })
        for (const [res, compact] of [
          [v2Wrap, v2Wrap.body.wrappedKey],
          [v2DataKey, v2DataKey.body.encryptedDek],
          [v2Generated, v2Generated.body.encryptedDek],
        ] as const) {
          assert.equal(res.body.keyVersion, 2)
          assert.equal(parseCompact(unb64(compact)).header.readUInt32BE(18), 2, 'the header names version 2')
        }
        await assertUnwraps(key.id, v2Wrap.body.wrappedKey, { plaintext: material, keyVersion: 2 }, context)
        await assertUnwraps(
          key.id,
          v2DataKey.body.encryptedDek,
          { plaintext: unb64(v2DataKey.body.plaintextDek), keyVersion: 2 },
          context,
        )
        await assertUnwraps(key.id, v2Generated.body.encryptedDek, {
          plaintext: unb64(v2Generated.body.plaintextDek),
          keyVersion: 2,
        })
      })
    }
  })

  // ---- 5. MACs --------------------------------------------------------------------------------

  describe('MACs', () => {
    const mac = (keyId: string, data: Buffer, by: TenantWithKey | string = tenant) =>
      call('POST', `/keys/${keyId}/mac`, { data: b64(data) }, by)
    const verifyMac = (
      keyId: string,
      data: Buffer,
      macValue: string,
      keyVersion?: number,
      by: TenantWithKey | string = tenant,
    ) =>
      call(
        'POST',
        `/keys/${keyId}/mac/verify`,
        { data: b64(data), mac: macValue, ...(keyVersion === undefined ? {} : { keyVersion }) },
        by,
      )

    async function assertVerify(
      res: Promise<HttpResult>,
      expected: { valid: boolean; keyId: string; keyVersion: number },
      what: string,
    ) {
      const r = await res
      assert.equal(r.status, 200, `${what}: ${r.text}`)
      assert.deepEqual(r.body, expected, what)
    }

    for (const { algorithm, hash, macBytes } of HMAC_ALGORITHMS) {
      test(`${algorithm}: the MAC equals an independent HMAC with the exported secret, and verifies`, async () => {
        const key = await createKey('HMAC', algorithm, { exportable: true })
        for (const data of [Buffer.alloc(0), randomBytes(1), randomBytes(1000)]) {
          const res = await mac(key.id, data)
          assert.equal(res.status, 200, res.text)
          assert.deepEqual(Object.keys(res.body).sort(), ['algorithm', 'keyId', 'keyVersion', 'mac'])
          assert.equal(res.body.keyId, key.id)
          assert.equal(res.body.keyVersion, 1)
          assert.equal(res.body.algorithm, algorithm)
          const value = unb64(res.body.mac)
          assert.equal(value.length, macBytes)

          const secret = unb64(await exportPrivate(key, 'RAW'))
          assert.equal(secret.length, macBytes, 'a generated secret is the hash length')
          assert.ok(value.equals(Buffer.from(hmac(hash, secret, data))), `${data.length}-byte data`)

          await assertVerify(
            verifyMac(key.id, data, res.body.mac),
            { valid: true, keyId: key.id, keyVersion: 1 },
            'the MAC verifies',
          )
        }
      })

      test(`${algorithm}: a wrong, bit-flipped, truncated or empty MAC, or other data, is 200 {valid: false}`, async () => {
        const key = await createKey('HMAC', algorithm)
        const data = randomBytes(64)
        const res = await mac(key.id, data)
        assert.equal(res.status, 200, res.text)
        const value = unb64(res.body.mac)
        const invalid = { valid: false, keyId: key.id, keyVersion: 1 }

        const cases: [string, Buffer, string][] = [
          ['a wrong MAC', data, b64(randomBytes(macBytes))],
          ['a truncated MAC (one byte short)', data, b64(value.subarray(0, -1))],
          ['a truncated MAC (half)', data, b64(value.subarray(0, macBytes / 2))],
          ['a MAC extended by one byte', data, b64(Buffer.concat([value, Buffer.of(0)]))],
          ['an empty MAC', data, ''],
          ['other data', randomBytes(64), res.body.mac],
          ['the data with one more byte', Buffer.concat([data, Buffer.of(0)]), res.body.mac],
          ['empty data', Buffer.alloc(0), res.body.mac],
          ...Array.from({ length: macBytes * 8 }, (_, bit): [string, Buffer, string] => [
            `MAC bit ${bit} flipped`,
            data,
            b64(flipBit(value, bit)),
          ]),
        ]
        const outcomes = await mapConcurrently(cases, TAMPER_CONCURRENCY, async ([what, d, m]) => ({
          what,
          res: await verifyMac(key.id, d, m),
        }))
        for (const { what, res: r } of outcomes) {
          assert.equal(r.status, 200, `${what}: ${r.text}`)
          assert.deepEqual(r.body, invalid, what)
        }
        await assertVerify(verifyMac(key.id, data, res.body.mac), { ...invalid, valid: true }, 'the original')
      })
    }

    test('after rotation a v1 MAC verifies with keyVersion 1 and without keyVersion (every version tried), not with keyVersion 2', async () => {
      const { algorithm, hash } = HMAC_ALGORITHMS[1]
      const key = await createKey('HMAC', algorithm, { exportable: true })
      const data = Buffer.from('rotate me')
      const v1 = await mac(key.id, data)
      assert.equal(v1.status, 200, v1.text)
      assert.equal(v1.body.keyVersion, 1)

      assert.equal((await ok('POST', `/keys/${key.id}/rotate`)).body.version, 2)
      const v2 = await mac(key.id, data)
      assert.equal(v2.status, 200, v2.text)
      assert.equal(v2.body.keyVersion, 2)
      assert.notEqual(v2.body.mac, v1.body.mac, 'the new version has a new secret')

      await assertVerify(
        verifyMac(key.id, data, v1.body.mac, 1),
        { valid: true, keyId: key.id, keyVersion: 1 },
        'v1 MAC, keyVersion 1',
      )
      // Without keyVersion every version is tried, newest first (issue 35): the answer names v1.
      await assertVerify(
        verifyMac(key.id, data, v1.body.mac),
        { valid: true, keyId: key.id, keyVersion: 1 },
        'v1 MAC, no keyVersion',
      )
      await assertVerify(
        verifyMac(key.id, data, v1.body.mac, 2),
        { valid: false, keyId: key.id, keyVersion: 2 },
        'v1 MAC, keyVersion 2',
      )
      await assertVerify(
        verifyMac(key.id, data, v2.body.mac),
        { valid: true, keyId: key.id, keyVersion: 2 },
        'v2 MAC, default version',
      )
      await assertVerify(
        verifyMac(key.id, data, v2.body.mac, 1),
        { valid: false, keyId: key.id, keyVersion: 1 },
        'v2 MAC, keyVersion 1',
      )

      for (const [version, res] of [
        [1, v1],
        [2, v2],
      ] as const) {
        const secret = unb64(await exportPrivate(key, 'RAW', version))
        assert.ok(unb64(res.body.mac).equals(Buffer.from(hmac(hash, secret, data))), `v${version} secret`)
      }
    })

    test('a key that is not an HMAC key is 400 key_type_mismatch on mac and mac/verify', async () => {
      const encryption = keys.get('ML-KEM-768')!
      const signing = await createKey('Signing', 'Ed25519')
      const macValue = b64(randomBytes(32))
      for (const key of [encryption, signing]) {
        for (const res of [
          await mac(key.id, randomBytes(8)),
          await verifyMac(key.id, randomBytes(8), macValue),
        ]) {
          assert.equal(res.status, 400, res.text)
          assert.equal(res.body.error, 'key_type_mismatch')
        }
      }
    })

    test('RFC 4231 test cases 2, 6 and 7 through imported keys equivalent under RFC 2104', async () => {
      // Imported secrets are 16 to 1,024 bytes, so "Jefe" (4 bytes) is not accepted as it stands...
      for (const { algorithm } of HMAC_ALGORITHMS) {
        for (const secret of [RFC4231.case2.key]) {
          const res = await call('POST', '/keys/import', {
            name: uniqueName('rfc4231-refused'),
            keyType: 'HMAC',
            algorithm,
            format: 'RAW',
            keyMaterial: b64(secret),
          })
          assert.equal(res.status, 400, `${algorithm} ${secret.length}-byte secret: ${res.text}`)
          assert.equal(res.body.error, 'key_size_mismatch')
        }
      }
      // ...but RFC 2104 defines HMAC with K zero-padded to the block size B, and with H(K) for a K
      // longer than B: those keys are the same HMAC key, and within the accepted sizes. The
      // 131-byte key of cases 6 and 7 is accepted as it stands, and hashed down as RFC 2104 says.
      for (const { algorithm, hash, blockBytes } of HMAC_ALGORITHMS) {
        const padded = Buffer.concat([RFC4231.case2.key, Buffer.alloc(blockBytes - RFC4231.case2.key.length)])
        const hashed = Buffer.from(hash(RFC4231.case6.key))
        for (const [name, secret, cases] of [
          ['case 2, key zero-padded', padded, [RFC4231.case2]],
          ['cases 6 and 7, key hashed', hashed, [RFC4231.case6, RFC4231.case7]],
          ['cases 6 and 7, the 131-byte key itself', RFC4231.case6.key, [RFC4231.case6, RFC4231.case7]],
        ] as const) {
          const what = `${algorithm} ${name}`
          const keyName = uniqueName('rfc4231')
          const imported = await call('POST', '/keys/import', {
            name: keyName,
            keyType: 'HMAC',
            algorithm,
            format: 'RAW',
            keyMaterial: b64(secret),
          })
          assert.equal(imported.status, 201, `${what}: ${imported.text}`)
          for (const c of cases) {
            const expected = c.expected[algorithm]
            // The constants above, checked against noble with the RFC's own key.
            assert.equal(Buffer.from(hmac(hash, c.key, c.data)).toString('hex'), expected, what)
            const res = await mac(imported.body.id, c.data)
            assert.equal(res.status, 200, `${what}: ${res.text}`)
            assert.equal(unb64(res.body.mac).toString('hex'), expected, what)
            await assertVerify(
              verifyMac(imported.body.id, c.data, b64(Buffer.from(expected, 'hex'))),
              { valid: true, keyId: imported.body.id, keyVersion: 1 },
              what,
            )
          }
        }
      }
    })
  })

  // ---- 6. legacy mode -------------------------------------------------------------------------

  describe('legacy mode of /encrypt and /decrypt', () => {
    const legacyEncrypt = (keyId: string, plaintext: Buffer, context?: string) =>
      ok('POST', '/encrypt', {
        keyId,
        plaintext: b64(plaintext),
        mode: 'legacy',
        ...(context === undefined ? {} : { context }),
      })

    test('/encrypt in legacy mode answers ciphertext, keyId, keyVersion and mode, without the separate parts', async () => {
      for (const algorithm of ['ML-KEM-768', 'RSA-2048']) {
        const key = keys.get(algorithm)!
        const res = await legacyEncrypt(key.id, Buffer.from('legacy'))
        assert.deepEqual(Object.keys(res.body).sort(), ['ciphertext', 'keyId', 'keyVersion', 'mode'])
        assert.equal(res.body.mode, 'legacy')
        assert.equal(res.body.keyId, key.id)
        assert.equal(res.body.keyVersion, 1)
        for (const field of ['encapsulatedKey', 'nonce', 'tag'])
          assert.equal(res.body[field], undefined, field)
      }
    })

    test('/decrypt in legacy mode returns the plaintext, with and without context', async () => {
      for (const algorithm of ['ML-KEM-768', 'RSA-2048']) {
        const key = keys.get(algorithm)!
        for (const context of [undefined, 'legacy/ctx', 'Zoë/東京']) {
          const what = `${algorithm} context ${JSON.stringify(context)}`
          const plaintext = randomBytes(100)
          const res = await legacyEncrypt(key.id, plaintext, context)
          const dec = await ok('POST', '/decrypt', {
            ciphertext: res.body.ciphertext,
            mode: 'legacy',
            ...(context === undefined ? {} : { context }),
          })
          assert.deepEqual(Object.keys(dec.body).sort(), ['keyId', 'keyVersion', 'plaintext'], what)
          assert.ok(unb64(dec.body.plaintext).equals(plaintext), what)
          assert.equal(dec.body.keyId, key.id, what)
          assert.equal(dec.body.keyVersion, 1, what)
        }
      }
    })

    test('the compact string splits per the documented layout into the parts a standard decrypt accepts', async () => {
      for (const { algorithm, scheme, protectedBytes } of ENCRYPTION_ALGORITHMS) {
        const key = keys.get(algorithm)!
        const plaintext = Buffer.from(`split me: ${algorithm}`)
        const context = 'split'
        const res = await legacyEncrypt(key.id, plaintext, context)
        const bytes = unb64(res.body.ciphertext)
        const parts = parseCompact(bytes)
        assert.equal(bytes.readUInt16BE(0), HEADER_BYTES + protectedBytes, algorithm)
        assert.equal(parts.nonce.length, NONCE_BYTES)
        assert.equal(parts.tag.length, TAG_BYTES)
        assert.equal(parts.ciphertext.length, plaintext.length, 'the rest is the ciphertext')
        assert.equal(parts.header[0], 0x01)
        assert.equal(parts.header[1], scheme)
        assert.equal(parts.header.subarray(2, 18).toString('hex'), key.id.replaceAll('-', ''))
        assert.equal(parts.header.readUInt32BE(18), 1)

        const standard = await ok('POST', '/decrypt', {
          ciphertext: b64(parts.ciphertext),
          encapsulatedKey: b64(parts.encapsulatedKey),
          nonce: b64(parts.nonce),
          tag: b64(parts.tag),
          context,
        })
        assert.ok(unb64(standard.body.plaintext).equals(plaintext), algorithm)
        assert.equal(standard.body.keyId, key.id)
        assert.equal(standard.body.keyVersion, 1)

        // And the other way: standard parts framed by hand decrypt in legacy mode.
        const std = await ok('POST', '/encrypt', { keyId: key.id, plaintext: b64(plaintext), context })
        const length = Buffer.alloc(2)
        length.writeUInt16BE(unb64(std.body.encapsulatedKey).length)
        const framed = Buffer.concat([
          length,
          unb64(std.body.encapsulatedKey),
          unb64(std.body.nonce),
          unb64(std.body.tag),
          unb64(std.body.ciphertext),
        ])
        const legacy = await ok('POST', '/decrypt', { ciphertext: b64(framed), mode: 'legacy', context })
        assert.ok(unb64(legacy.body.plaintext).equals(plaintext), `${algorithm}: framed by hand`)
      }
    })

    test('a legacy string in standard mode, or standard parts in legacy mode, is 400 validation_failed', async () => {
      const key = keys.get('ML-KEM-768')!
      const plaintext = Buffer.from('mode mix')
      const legacy = await legacyEncrypt(key.id, plaintext)
      for (const mode of [undefined, 'standard']) {
        const res = await call('POST', '/decrypt', {
          ciphertext: legacy.body.ciphertext,
          ...(mode === undefined ? {} : { mode }),
        })
        assertValidationFailed(res, `legacy string, mode ${mode}`)
        assert.equal(res.body.plaintext, undefined)
      }

      const std = await ok('POST', '/encrypt', { keyId: key.id, plaintext: b64(plaintext) })
      const { ciphertext, encapsulatedKey, nonce, tag } = std.body
      for (const extra of [{ encapsulatedKey, nonce, tag }, { encapsulatedKey }, { nonce }, { tag }]) {
        const res = await call('POST', '/decrypt', { ciphertext, mode: 'legacy', ...extra })
        assertValidationFailed(res, `legacy mode with ${Object.keys(extra).join(', ')}`)
        assert.equal(res.body.plaintext, undefined)
      }
      const compactWithParts = await call('POST', '/decrypt', {
        ciphertext: legacy.body.ciphertext,
        mode: 'legacy',
        encapsulatedKey,
        nonce,
        tag,
      })
      assertValidationFailed(compactWithParts, 'a legacy string with the standard parts')
    })

    test('a tampered legacy string is 400 decryption_failed', async () => {
      const key = keys.get('ML-KEM-512')!
      const context = 'tamper'
      const plaintext = randomBytes(8)
      const res = await legacyEncrypt(key.id, plaintext, context)
      const bytes = unb64(res.body.ciphertext)
      // One bit of every byte: the length prefix, the header, the ML-KEM ciphertext, nonce, tag, data.
      const tampered = Array.from({ length: bytes.length }, (_, i) => ({
        what: `byte ${i} bit ${i % 8}`,
        ciphertext: b64(flipBit(bytes, i * 8 + (i % 8))),
      }))
      tampered.push(
        { what: 'truncated by one byte', ciphertext: b64(bytes.subarray(0, -1)) },
        { what: 'truncated to the header', ciphertext: b64(bytes.subarray(0, 2 + HEADER_BYTES)) },
        { what: 'extended by one byte', ciphertext: b64(Buffer.concat([bytes, Buffer.of(1)])) },
      )
      const outcomes = await mapConcurrently(tampered, TAMPER_CONCURRENCY, async (t) => ({
        what: t.what,
        res: await call('POST', '/decrypt', { ciphertext: t.ciphertext, mode: 'legacy', context }),
      }))
      for (const { what, res: r } of outcomes) assertDecryptionFailed(r, what)
      assertDecryptionFailed(
        await call('POST', '/decrypt', {
          ciphertext: res.body.ciphertext,
          mode: 'legacy',
          context: 'tamper!',
        }),
        'another context',
      )
      const untouched = await ok('POST', '/decrypt', {
        ciphertext: res.body.ciphertext,
        mode: 'legacy',
        context,
      })
      assert.ok(unb64(untouched.body.plaintext).equals(plaintext))
    })

    test('a legacy string of 1 byte (or 0 or 2) is 400 decryption_failed, not 500', async () => {
      for (const bytes of [Buffer.of(0x00), Buffer.of(0xff), Buffer.alloc(0), Buffer.of(0x00, 0x16)]) {
        const res = await call('POST', '/decrypt', { ciphertext: b64(bytes), mode: 'legacy' })
        assertDecryptionFailed(res, `${bytes.length} bytes ${bytes.toString('hex')}`)
      }
    })
  })

  // ---- 7. key states --------------------------------------------------------------------------

  describe('key states (spec section 3)', () => {
    const STATES = ['Expired', 'Revoked', 'Pending Deletion', 'Destroyed'] as const
    type State = (typeof STATES)[number]
    const context = 'made-while-active'
    interface Fixture {
      encryption: KeyRef
      hmacKey: KeyRef
      material: Buffer
      wrappedKey: string
      dataKey: { plaintextDek: Buffer; encryptedDek: string }
      generated: { plaintextDek: Buffer; encryptedDek: string }
      data: Buffer
      mac: string
    }
    const fixtures = new Map<State, Fixture>()

    before(async () => {
      for (const state of STATES) {
        const extra =
          state === 'Expired' ? { expiresAt: new Date(clock.now().getTime() + DAY_MS).toISOString() } : {}
        const encryption = await createKey('Encryption', 'ML-KEM-768', extra)
        const hmacKey = await createKey('HMAC', 'HMAC-SHA256', extra)
        const material = randomBytes(32)
        const wrapped = await ok('POST', `/keys/${encryption.id}/wrap`, { plaintext: b64(material), context })
        const dataKey = await ok('POST', `/keys/${encryption.id}/data-key`, { keyBytes: 16, context })
        const generated = await ok('POST', '/generate-data-key', { keyId: encryption.id })
        const data = randomBytes(40)
        const macRes = await ok('POST', `/keys/${hmacKey.id}/mac`, { data: b64(data) })
        fixtures.set(state, {
          encryption,
          hmacKey,
          material,
          wrappedKey: wrapped.body.wrappedKey,
          dataKey: {
            plaintextDek: unb64(dataKey.body.plaintextDek),
            encryptedDek: dataKey.body.encryptedDek,
          },
          generated: {
            plaintextDek: unb64(generated.body.plaintextDek),
            encryptedDek: generated.body.encryptedDek,
          },
          data,
          mac: macRes.body.mac,
        })
      }
      const both = (state: State) => [fixtures.get(state)!.encryption, fixtures.get(state)!.hmacKey]
      for (const key of both('Revoked')) await ok('POST', `/keys/${key.id}/revoke`)
      // Pending Deletion: the default 30-day window; Destroyed: 7 days, then 8 days pass.
      for (const key of both('Pending Deletion')) await ok('DELETE', `/keys/${key.id}`)
      for (const key of both('Destroyed')) await ok('DELETE', `/keys/${key.id}?pendingWindowDays=7`)
      clock.advance(8 * DAY_MS)
      for (const state of STATES) {
        const { encryption, hmacKey } = fixtures.get(state)!
        for (const key of [encryption, hmacKey]) {
          const res = await ok('GET', `/keys/${key.id}`)
          assert.equal(res.body.state, state, `${key.name} is ${state}`)
        }
      }
    })

    async function assertNewOperationsRefused(state: State): Promise<void> {
      const { encryption, hmacKey } = fixtures.get(state)!
      assertConflict(
        await call('POST', `/keys/${encryption.id}/wrap`, { plaintext: b64(randomBytes(32)), context }),
        state,
        `${state}: wrap`,
      )
      assertConflict(
        await call('POST', `/keys/${encryption.id}/data-key`, { keyBytes: 32, context }),
        state,
        `${state}: data-key`,
      )
      assertConflict(
        await call('POST', '/generate-data-key', { keyId: encryption.id }),
        state,
        `${state}: generate-data-key`,
      )
      assertConflict(
        await call('POST', `/keys/${hmacKey.id}/mac`, { data: b64(randomBytes(8)) }),
        state,
        `${state}: mac`,
      )
    }

    for (const state of ['Expired', 'Revoked', 'Pending Deletion'] as const) {
      test(`${state}: wrap, data-key, generate-data-key and mac are 409 key_state_conflict`, async () => {
        await assertNewOperationsRefused(state)
      })

      test(`${state}: unwrap of material wrapped while Active and mac/verify still work`, async () => {
        const f = fixtures.get(state)!
        await assertUnwraps(f.encryption.id, f.wrappedKey, { plaintext: f.material, keyVersion: 1 }, context)
        await assertUnwraps(
          f.encryption.id,
          f.dataKey.encryptedDek,
          { plaintext: f.dataKey.plaintextDek, keyVersion: 1 },
          context,
        )
        await assertUnwraps(f.encryption.id, f.generated.encryptedDek, {
          plaintext: f.generated.plaintextDek,
          keyVersion: 1,
        })
        const verified = await ok('POST', `/keys/${f.hmacKey.id}/mac/verify`, {
          data: b64(f.data),
          mac: f.mac,
        })
        assert.deepEqual(verified.body, { valid: true, keyId: f.hmacKey.id, keyVersion: 1 })
        const wrong = await ok('POST', `/keys/${f.hmacKey.id}/mac/verify`, {
          data: b64(randomBytes(40)),
          mac: f.mac,
        })
        assert.equal(wrong.body.valid, false)
      })
    }

    test('Destroyed: wrap, data-key, generate-data-key and mac are 409 key_state_conflict', async () => {
      await assertNewOperationsRefused('Destroyed')
    })

    test('Destroyed: unwrap and mac/verify are 409 key_state_conflict too', async () => {
      const f = fixtures.get('Destroyed')!
      assertConflict(await unwrap(f.encryption.id, f.wrappedKey, context), 'Destroyed', 'unwrap wrappedKey')
      assertConflict(
        await unwrap(f.encryption.id, f.dataKey.encryptedDek, context),
        'Destroyed',
        'unwrap data-key encryptedDek',
      )
      assertConflict(
        await unwrap(f.encryption.id, f.generated.encryptedDek),
        'Destroyed',
        'unwrap generate-data-key encryptedDek',
      )
      assertConflict(
        await call('POST', `/keys/${f.hmacKey.id}/mac/verify`, { data: b64(f.data), mac: f.mac }),
        'Destroyed',
        'mac/verify',
      )
      assertConflict(
        await call('POST', `/keys/${f.hmacKey.id}/mac/verify`, {
          data: b64(f.data),
          mac: f.mac,
          keyVersion: 1,
        }),
        'Destroyed',
        'mac/verify with keyVersion 1',
      )
    })
  })

  // ---- 8. scopes ------------------------------------------------------------------------------

  describe('scopes', () => {
    test('encrypt:invoke alone is 403 on every data-key, wrap and MAC route but may /encrypt; encryption:write may do all', async () => {
      const key = keys.get('ML-KEM-768')!
      const hmacKey = await createKey('HMAC', 'HMAC-SHA256')
      const material = randomBytes(32)
      const wrapped: string = (await ok('POST', `/keys/${key.id}/wrap`, { plaintext: b64(material) })).body
        .wrappedKey
      const data = randomBytes(16)
      const macValue: string = (await ok('POST', `/keys/${hmacKey.id}/mac`, { data: b64(data) })).body.mac

      const requests: [string, string, Record<string, unknown>][] = [
        ['POST', `/keys/${key.id}/data-key`, {}],
        ['POST', '/generate-data-key', { keyId: key.id }],
        ['POST', `/keys/${key.id}/wrap`, { plaintext: b64(material) }],
        ['POST', `/keys/${key.id}/unwrap`, { wrappedKey: wrapped }],
        ['POST', `/keys/${hmacKey.id}/mac`, { data: b64(data) }],
        ['POST', `/keys/${hmacKey.id}/mac/verify`, { data: b64(data), mac: macValue }],
      ]

      const invoker = await createApiKey(['encrypt:invoke'])
      for (const [method, path, body] of requests) {
        const res = await call(method, path, body, invoker)
        assert.equal(res.status, 403, `encrypt:invoke ${path}: ${res.text}`)
        assert.equal(res.body.error, 'insufficient_scope', path)
        assert.equal(res.text.includes(b64(material)), false, path)
      }
      const encrypted = await ok('POST', '/encrypt', { keyId: key.id, plaintext: b64(material) }, invoker)
      assert.equal(encrypted.body.keyId, key.id)

      const writer = await createApiKey(['encryption:write'])
      for (const [method, path, body] of requests) {
        const res = await call(method, path, body, writer)
        assert.equal(res.status, 200, `encryption:write ${path}: ${res.text}`)
      }
      await assertUnwraps(key.id, wrapped, { plaintext: material, keyVersion: 1 }, undefined, writer)
      await ok('POST', '/encrypt', { keyId: key.id, plaintext: b64(material) }, writer)
    })
  })

  // ---- 9. audit -------------------------------------------------------------------------------

  describe('audit', () => {
    test('each operation is recorded with action, key, version and outcome; no record holds a secret', async () => {
      const own = await svc.createTenant()
      const encryption = await createKey('Encryption', 'ML-KEM-768', { isDefault: true }, own)
      const hmacKey = await createKey('HMAC', 'HMAC-SHA512', {}, own)
      const context = `CONTEXT-MARKER-${randomBytes(8).toString('hex')}`
      const material = randomBytes(48)
      const data = Buffer.from(`DATA-MARKER-${randomBytes(8).toString('hex')}`)
      const E = `key:${encryption.id}`
      const H = `key:${hmacKey.id}`

      const generated = await ok('POST', '/generate-data-key', {}, own)
      const dataKey = await ok('POST', `/keys/${encryption.id}/data-key`, { keyBytes: 24, context }, own)
      const hidden = await ok(
        'POST',
        `/keys/${encryption.id}/data-key`,
        { keyBytes: 32, withPlaintext: false, context },
        own,
      )
      const wrapped = await ok(
        'POST',
        `/keys/${encryption.id}/wrap`,
        { plaintext: b64(material), context },
        own,
      )
      await assertUnwraps(
        encryption.id,
        wrapped.body.wrappedKey,
        { plaintext: material, keyVersion: 1 },
        context,
        own,
      )
      const hiddenDek = await assertUnwraps(
        encryption.id,
        hidden.body.encryptedDek,
        { length: 32, keyVersion: 1 },
        context,
        own,
      )
      await assertUnwraps(
        encryption.id,
        generated.body.encryptedDek,
        { plaintext: unb64(generated.body.plaintextDek), keyVersion: 1 },
        undefined,
        own,
      )
      assertDecryptionFailed(
        await unwrap(encryption.id, dataKey.body.encryptedDek, `${context}-wrong`, own),
        'unwrap with a wrong context',
      )
      const macRes = await ok('POST', `/keys/${hmacKey.id}/mac`, { data: b64(data) }, own)
      const good = await ok(
        'POST',
        `/keys/${hmacKey.id}/mac/verify`,
        { data: b64(data), mac: macRes.body.mac },
        own,
      )
      assert.equal(good.body.valid, true)
      const flipped = b64(flipBit(unb64(macRes.body.mac), 3))
      const bad = await ok('POST', `/keys/${hmacKey.id}/mac/verify`, { data: b64(data), mac: flipped }, own)
      assert.equal(bad.body.valid, false)
      const refused = await call(
        'POST',
        `/keys/${hmacKey.id}/wrap`,
        { plaintext: b64(material), context },
        own,
      )
      assert.equal(refused.status, 400, refused.text)
      assert.equal(refused.body.error, 'key_type_mismatch')

      const rows = await svc.sql<
        {
          action: string
          resource: string | null
          key_version: number | null
          outcome: string
          details: unknown
        }[]
      >`
        SELECT action, resource, key_version, outcome, details FROM audit_log
        WHERE tenant_id = ${own.tenantId} AND action LIKE 'crypto.%' ORDER BY id`
      assert.deepEqual(
        rows.map((r) => [r.action, r.resource, r.key_version, r.outcome]),
        [
          ['crypto.generate_data_key', E, 1, 'success'],
          ['crypto.generate_data_key', E, 1, 'success'],
          ['crypto.generate_data_key', E, 1, 'success'],
          ['crypto.wrap', E, 1, 'success'],
          ['crypto.unwrap', E, 1, 'success'],
          ['crypto.unwrap', E, 1, 'success'],
          ['crypto.unwrap', E, 1, 'success'],
          ['crypto.unwrap', E, 1, 'failure'],
          ['crypto.mac', H, 1, 'success'],
          ['crypto.mac_verify', H, 1, 'success'],
          ['crypto.mac_verify', H, 1, 'success'],
          ['crypto.wrap', H, null, 'failure'],
        ],
      )
      assert.deepEqual(rows[7]!.details, { error: 'decryption_failed' })
      assert.deepEqual(rows[11]!.details, { error: 'key_type_mismatch' })
      assert.deepEqual(
        rows.slice(9, 11).map((r) => (r.details as { valid?: unknown } | null)?.valid),
        [true, false],
      )

      const [stored] = await svc.sql<{ text: string }[]>`
        SELECT coalesce(string_agg(row_to_json(a)::text, E'\n'), '') AS text FROM audit_log a
        WHERE tenant_id = ${own.tenantId}`
      const text = stored!.text
      assert.ok(text.includes(encryption.id) && text.includes(hmacKey.id), 'the rows were found')
      const binaries: [string, Buffer][] = [
        ['generate-data-key plaintextDek', unb64(generated.body.plaintextDek)],
        ['generate-data-key encryptedDek', unb64(generated.body.encryptedDek)],
        ['data-key plaintextDek', unb64(dataKey.body.plaintextDek)],
        ['data-key encryptedDek', unb64(dataKey.body.encryptedDek)],
        ['withPlaintext false encryptedDek', unb64(hidden.body.encryptedDek)],
        ['withPlaintext false data key', hiddenDek],
        ['wrapped material', material],
        ['wrappedKey', unb64(wrapped.body.wrappedKey)],
        ['MAC', unb64(macRes.body.mac)],
        ['flipped MAC', unb64(flipped)],
        ['MAC data', data],
        ['context', Buffer.from(context)],
      ]
      const forms = (bytes: Buffer) => [
        bytes.toString('base64'),
        bytes.toString('hex'),
        bytes.toString('base64url'),
      ]
      for (const [what, bytes] of binaries) {
        for (const form of forms(bytes)) {
          assert.equal(
            text.includes(form),
            false,
            `the audit rows contain the ${what} (${form.slice(0, 24)}…)`,
          )
        }
      }
      for (const marker of [context, data.toString('utf8')]) {
        assert.equal(text.includes(marker), false, `the audit rows contain ${marker}`)
      }
    })
  })
})
