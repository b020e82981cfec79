import assert from 'node:assert/strict'
import {
  constants,
  createPrivateKey,
  type KeyObject,
  privateDecrypt,
  randomBytes,
  randomUUID,
} from 'node:crypto'
import { after, before, describe, test } from 'node:test'
import { gcm } from '@noble/ciphers/aes.js'
import { hmac } from '@noble/hashes/hmac.js'
import { sha256 } from '@noble/hashes/sha2.js'
import { ml_kem512, ml_kem768, ml_kem1024 } from '@noble/post-quantum/ml-kem.js'
import { apiClient, b64, mapConcurrently, unb64, uniqueName } from '../helpers/api-client.ts'
import { type AuditView, startTestService, type TenantWithKey, type TestService } from '../helpers/service.ts'

/**
 * The binary transport of POST /api/v1/encrypt and /decrypt (docs/crypto-operations.md, "Binary
 * bodies"): raw plaintext in, the compact envelope of docs/envelope-format.md ("The compact form")
 * out, and back. Round trips for every ML-KEM parameter set and RSA-2048; a decryptor written from
 * the documents alone (noble for ML-KEM, HMAC and AES-GCM, node:crypto for RSA-OAEP) that opens
 * what the service returns; interoperation with the JSON transport in both directions; the
 * default key; one identical 400 decryption_failed for every tampering; rotation; header
 * validation and a fuzz of both routes; the 10 MiB limit; scopes and tenant isolation; audit
 * records without data; 415 on every other route; and the OpenAPI document.
 */

const MIB = 1024 * 1024
const BODY_LIMIT = 10 * MIB
const DECRYPT_BODY_LIMIT = BODY_LIMIT + 64 * 1024
const BINARY = 'application/octet-stream'

// ---- docs/envelope-format.md, as code (nothing here imports src/crypto) ----------------------

/** "The first 22 bytes are the **header**." */
const HEADER_LENGTH = 22
const NONCE_LENGTH = 12
const TAG_LENGTH = 16
const DEK_LENGTH = 32
/** "offset 0, length 2: n = length of encapsulatedKey, unsigned 16-bit big-endian" */
const PREFIX_LENGTH = 2
const AAD_LABEL = Buffer.from('kms/envelope/v1', 'ascii')
const DEK_INFO = Buffer.from('kms/envelope/v1/dek', 'ascii')
const SCHEME_ML_KEM = 0x01
const SCHEME_RSA_OAEP = 0x02

const KEMS = { 'ML-KEM-512': ml_kem512, 'ML-KEM-768': ml_kem768, 'ML-KEM-1024': ml_kem1024 } as const

/** The algorithms under test, their scheme byte and the length of their protected DEK. */
const ALGORITHMS = [
  { algorithm: 'ML-KEM-512', scheme: SCHEME_ML_KEM, protectedBytes: 768 },
  { algorithm: 'ML-KEM-768', scheme: SCHEME_ML_KEM, protectedBytes: 1088 },
  { algorithm: 'ML-KEM-1024', scheme: SCHEME_ML_KEM, protectedBytes: 1568 },
  { algorithm: 'RSA-2048', scheme: SCHEME_RSA_OAEP, protectedBytes: 256 },
] as const

const SIZES = [0, 1, 64, 4096, MIB]
/** undefined: no X-Encryption-Context header at all. */
const CONTEXTS: (string | undefined)[] = [undefined, 'orders/42', 'héllo ✓ 🔐']

interface Parts {
  encapsulatedKey: Buffer
  nonce: Buffer
  tag: Buffer
  ciphertext: Buffer
}

/** The compact form, split by the table of the document. */
function unframe(bytes: Buffer): Parts {
  assert.ok(bytes.length >= PREFIX_LENGTH, 'the compact envelope has its length prefix')
  const n = bytes.readUInt16BE(0)
  const nonceAt = PREFIX_LENGTH + n
  assert.ok(bytes.length >= nonceAt + NONCE_LENGTH + TAG_LENGTH, 'the compact envelope holds its parts')
  return {
    encapsulatedKey: bytes.subarray(PREFIX_LENGTH, nonceAt),
    nonce: bytes.subarray(nonceAt, nonceAt + NONCE_LENGTH),
    tag: bytes.subarray(nonceAt + NONCE_LENGTH, nonceAt + NONCE_LENGTH + TAG_LENGTH),
    ciphertext: bytes.subarray(nonceAt + NONCE_LENGTH + TAG_LENGTH),
  }
}

/** The compact form, built by the same table from separate parts. */
function frame(parts: Parts): Buffer {
  const prefix = Buffer.alloc(PREFIX_LENGTH)
  prefix.writeUInt16BE(parts.encapsulatedKey.length)
  return Buffer.concat([prefix, parts.encapsulatedKey, parts.nonce, parts.tag, parts.ciphertext])
}

const uuidHex = (uuid: string) => uuid.replaceAll('-', '')

/** What a key holder has after export-private. */
type PrivateKey =
  | { kind: 'ml-kem'; algorithm: keyof typeof KEMS; secretKey: Uint8Array }
  | { kind: 'rsa'; key: KeyObject }

/** "Decrypting without the service", steps 1 and 3, on a compact envelope. */
function decryptIndependently(compact: Buffer, context: string, key: PrivateKey): Buffer {
  const { encapsulatedKey, nonce, tag, ciphertext } = unframe(compact)
  const header = encapsulatedKey.subarray(0, HEADER_LENGTH)
  const protectedDek = encapsulatedKey.subarray(HEADER_LENGTH)
  let dek: Uint8Array
  if (header[1] === SCHEME_ML_KEM) {
    assert.equal(key.kind, 'ml-kem', 'scheme 0x01 is ML-KEM')
    if (key.kind !== 'ml-kem') throw new Error('unreachable')
    const sharedSecret = KEMS[key.algorithm].decapsulate(protectedDek, key.secretKey)
    // DEK = HMAC-SHA256(key = ss, message = "kms/envelope/v1/dek" || header || 0x01)
    dek = hmac(sha256, sharedSecret, Buffer.concat([DEK_INFO, header, Buffer.of(0x01)]))
  } else {
    assert.equal(header[1], SCHEME_RSA_OAEP, 'scheme 0x02 is RSA-OAEP-SHA256')
    if (key.kind !== 'rsa') throw new Error('scheme 0x02 needs an RSA key')
    dek = privateDecrypt(
      { key: key.key, padding: constants.RSA_PKCS1_OAEP_PADDING, oaepHash: 'sha256' },
      protectedDek,
    )
  }
  assert.equal(dek.length, DEK_LENGTH, 'the DEK is 32 bytes')
  // AAD = "kms/envelope/v1" || header || UTF-8(context); noble takes ciphertext || tag.
  const aad = Buffer.concat([AAD_LABEL, header, Buffer.from(context, 'utf8')])
  return Buffer.from(gcm(dek, nonce, aad).decrypt(Buffer.concat([ciphertext, tag])))
}

/** Standard Base64 of the UTF-8 bytes: what X-Encryption-Context carries. */
const contextHeader = (context: string) => Buffer.from(context, 'utf8').toString('base64')

function flipBit(bytes: Buffer, index: number, mask = 0x01): Buffer {
  const copy = Buffer.from(bytes)
  copy[index]! ^= mask
  return copy
}

/** A small deterministic generator, so a failing fuzz case can be replayed from its seed. */
function mulberry32(seed: number): () => number {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

interface BinaryResult {
  status: number
  headers: Headers
  bytes: Buffer
  text: string
  // biome-ignore lint/suspicious/noExplicitAny: parsed JSON error of any shape; each test asserts the fields it reads
  body: any
}

describe('binary bodies on POST /encrypt and /decrypt', () => {
  let svc: TestService
  let tenant: TenantWithKey
  let otherTenant: TenantWithKey
  /** One key per algorithm, by algorithm name. */
  const keys = new Map<string, { id: string; name: string }>()

  before(async () => {
    svc = await startTestService()
    tenant = await svc.createTenant()
    otherTenant = await svc.createTenant()
    const created = await Promise.all(
      // Exportable: the tests decrypt outside the service with the exported private key.
      ALGORITHMS.map(({ algorithm }) => api.createKey('Encryption', algorithm, { exportable: true }, tenant)),
    )
    for (const [i, { algorithm }] of ALGORITHMS.entries()) keys.set(algorithm, created[i]!)
  })

  after(async () => {
    await svc?.stop()
  })

  const api = apiClient(() => ({ svc, tenant }))
  const call = api.call
  const keyIdOf = (algorithm: string) => keys.get(algorithm)!.id

  /** One POST with a raw body; the JSON error parsed when the answer is JSON. */
  async function send(
    path: string,
    body: Uint8Array | string | undefined,
    options: { headers?: Record<string, string>; by?: TenantWithKey | string; contentType?: string } = {},
  ): Promise<BinaryResult> {
    const by = options.by ?? tenant
    const headers: Record<string, string> = {
      'x-api-key': typeof by === 'string' ? by : by.key,
      'content-type': options.contentType ?? BINARY,
      ...options.headers,
    }
    const response = await fetch(new URL(`/api/v1${path}`, svc.baseUrl), {
      method: 'POST',
      headers,
      ...(body === undefined ? {} : { body: typeof body === 'string' ? body : new Uint8Array(body) }),
    })
    const bytes = Buffer.from(await response.arrayBuffer())
    const text = bytes.toString('utf8')
    let parsed: unknown
    if ((response.headers.get('content-type') ?? '').startsWith('application/json')) {
      try {
        parsed = JSON.parse(text)
      } catch {
        parsed = undefined
      }
    }
    return { status: response.status, headers: response.headers, bytes, text, body: parsed }
  }

  const encryptHeaders = (keyId: string | undefined, context: string | undefined) => ({
    ...(keyId === undefined ? {} : { 'x-key-id': keyId }),
    ...(context === undefined ? {} : { 'x-encryption-context': contextHeader(context) }),
  })

  /** A binary encrypt that must succeed; the compact envelope and the response headers. */
  async function encryptBinary(
    keyId: string | undefined,
    plaintext: Buffer,
    context?: string,
    by: TenantWithKey | string = tenant,
  ): Promise<{ envelope: Buffer; keyId: string; keyVersion: number; requestId: string }> {
    const res = await send('/encrypt', plaintext, { headers: encryptHeaders(keyId, context), by })
    assert.equal(res.status, 200, res.text.slice(0, 300))
    assert.equal(res.headers.get('content-type'), BINARY)
    const id = res.headers.get('x-key-id')
    const version = res.headers.get('x-key-version')
    assert.ok(id, 'X-Key-Id names the key')
    assert.match(version ?? '', /^[1-9][0-9]*$/, 'X-Key-Version is the version number')
    return {
      envelope: res.bytes,
      keyId: id,
      keyVersion: Number(version),
      requestId: res.headers.get('x-request-id')!,
    }
  }

  function decryptBinary(
    envelope: Buffer,
    options: { context?: string; keyId?: string; keyVersion?: string; by?: TenantWithKey | string } = {},
  ): Promise<BinaryResult> {
    return send('/decrypt', envelope, {
      headers: {
        ...encryptHeaders(options.keyId, options.context),
        ...(options.keyVersion === undefined ? {} : { 'x-key-version': options.keyVersion }),
      },
      by: options.by ?? tenant,
    })
  }

  /** A binary decrypt that must succeed with exactly these bytes, key and version. */
  async function assertOpens(
    envelope: Buffer,
    expected: { plaintext: Buffer; keyId: string; keyVersion: number },
    options: { context?: string; keyId?: string; keyVersion?: string; by?: TenantWithKey | string } = {},
  ): Promise<BinaryResult> {
    const res = await decryptBinary(envelope, options)
    assert.equal(res.status, 200, res.text.slice(0, 300))
    assert.equal(res.headers.get('content-type'), BINARY)
    assert.equal(res.headers.get('cache-control'), 'no-store')
    assert.equal(res.headers.get('x-key-id'), expected.keyId)
    assert.equal(res.headers.get('x-key-version'), String(expected.keyVersion))
    assert.equal(res.bytes.length, expected.plaintext.length, 'the plaintext has its length')
    assert.ok(res.bytes.equals(expected.plaintext), 'the plaintext comes back unchanged')
    return res
  }

  /** The response for an assertion message: JSON as text, binary as its length. */
  const shown = (res: BinaryResult) =>
    res.body === undefined
      ? `${res.status} ${res.headers.get('content-type')}, ${res.bytes.length} bytes`
      : `${res.status} ${res.text.slice(0, 300)}`

  function assertDecryptionFailed(res: BinaryResult, what: string): void {
    assert.equal(res.status, 400, `${what}: ${shown(res)}`)
    assert.match(res.headers.get('content-type') ?? '', /^application\/json/, what)
    assert.deepEqual(Object.keys(res.body ?? {}).sort(), ['error', 'message'], what)
    assert.equal(res.body.error, 'decryption_failed', what)
    assert.equal(res.headers.get('x-key-id'), null, `${what}: no key is named`)
    assert.equal(res.headers.get('x-key-version'), null, `${what}: no version is named`)
  }

  function assertValidationFailed(res: BinaryResult, header: string, what: string): void {
    assert.equal(res.status, 400, `${what}: ${shown(res)}`)
    assert.match(res.headers.get('content-type') ?? '', /^application\/json/, what)
    assert.equal(res.body.error, 'validation_failed', `${what}: ${res.text}`)
    assert.equal(typeof res.body.message, 'string', what)
    assert.ok(Array.isArray(res.body.fields), `${what}: fields`)
    assert.ok(
      res.body.fields.some((f: { path: string }) => f.path === `headers/${header}`),
      `${what}: names headers/${header}: ${res.text}`,
    )
  }

  async function exportPrivateKey(
    key: { id: string; name: string },
    algorithm: string,
    version: number,
  ): Promise<PrivateKey> {
    const mlKem = algorithm.startsWith('ML-KEM')
    const format = mlKem ? 'RAW' : 'PEM'
    const res = await call('POST', `/keys/${key.id}/export-private`, { confirm: key.name, format, version })
    assert.equal(res.status, 200, res.text)
    if (mlKem) {
      // "the 64-byte seed (format: "RAW"), which is d || z as FIPS 203 ML-KEM.KeyGen_internal(d, z) takes them"
      const seed = unb64(res.body.privateKey)
      assert.equal(seed.length, 64)
      const name = algorithm as keyof typeof KEMS
      return { kind: 'ml-kem', algorithm: name, secretKey: KEMS[name].keygen(new Uint8Array(seed)).secretKey }
    }
    assert.match(res.body.privateKey, /^-----BEGIN PRIVATE KEY-----\n/)
    return { kind: 'rsa', key: createPrivateKey(res.body.privateKey) }
  }

  async function createApiKey(scopes: string[]): Promise<string> {
    const res = await call('POST', '/api-keys', { name: uniqueName('binary-scoped'), scopes })
    assert.equal(res.status, 201, res.text)
    return res.body.key
  }

  // ---- 1. Round trips ----------------------------------------------------------------------

  describe('round trips', () => {
    for (const { algorithm, scheme, protectedBytes } of ALGORITHMS) {
      test(`${algorithm}: sizes 0 B to 1 MiB, with and without a context, binary in and binary out`, async () => {
        const keyId = keyIdOf(algorithm)
        for (const size of SIZES) {
          const plaintext = randomBytes(size)
          for (const context of CONTEXTS) {
            const what = `${size} bytes, context ${JSON.stringify(context)}`
            const sealed = await encryptBinary(keyId, plaintext, context)
            assert.equal(sealed.keyId, keyId, what)
            assert.equal(sealed.keyVersion, 1, what)
            const n = HEADER_LENGTH + protectedBytes
            assert.equal(sealed.envelope.length, PREFIX_LENGTH + n + NONCE_LENGTH + TAG_LENGTH + size, what)
            assert.equal(sealed.envelope.readUInt16BE(0), n, `${what}: the length prefix`)
            assert.equal(sealed.envelope[2], 0x01, `${what}: format version`)
            assert.equal(sealed.envelope[3], scheme, `${what}: scheme`)
            if (size >= 64) {
              const { ciphertext } = unframe(sealed.envelope)
              assert.ok(!ciphertext.equals(plaintext), `${what}: the ciphertext is not the plaintext`)
            }
            await assertOpens(sealed.envelope, { plaintext, keyId, keyVersion: 1 }, { context })
            // The cross-checks, when given and right, change nothing.
            await assertOpens(
              sealed.envelope,
              { plaintext, keyId, keyVersion: 1 },
              { context, keyId, keyVersion: '1' },
            )
          }
        }
        // Each encryption is fresh: the same plaintext never gives the same bytes.
        const plaintext = Buffer.from('same plaintext twice')
        const first = await encryptBinary(keyId, plaintext, 'héllo ✓ 🔐')
        const second = await encryptBinary(keyId, plaintext, 'héllo ✓ 🔐')
        assert.ok(!first.envelope.equals(second.envelope))
        assert.ok(!unframe(first.envelope).nonce.equals(unframe(second.envelope).nonce), 'a fresh nonce')
      })
    }

    test('an empty body encrypts the empty plaintext, with or without Content-Length', async () => {
      const keyId = keyIdOf('ML-KEM-512')
      for (const body of [undefined, Buffer.alloc(0)]) {
        const res = await send('/encrypt', body, { headers: { 'x-key-id': keyId } })
        assert.equal(res.status, 200, res.text)
        assert.equal(unframe(res.bytes).ciphertext.length, 0)
        await assertOpens(res.bytes, { plaintext: Buffer.alloc(0), keyId, keyVersion: 1 })
      }
    })

    test('an empty X-Encryption-Context is the empty context, the same as none', async () => {
      const keyId = keyIdOf('ML-KEM-768')
      const plaintext = Buffer.from('empty context')
      const withEmpty = await encryptBinary(keyId, plaintext, '')
      await assertOpens(withEmpty.envelope, { plaintext, keyId, keyVersion: 1 })
      const withNone = await encryptBinary(keyId, plaintext)
      await assertOpens(withNone.envelope, { plaintext, keyId, keyVersion: 1 }, { context: '' })
    })

    test('a context of exactly 8,192 characters is accepted and round-trips', async () => {
      const keyId = keyIdOf('ML-KEM-512')
      const plaintext = Buffer.from('long context')
      const context = 'c'.repeat(8192)
      const sealed = await encryptBinary(keyId, plaintext, context)
      await assertOpens(sealed.envelope, { plaintext, keyId, keyVersion: 1 }, { context })
      assertDecryptionFailed(
        await decryptBinary(sealed.envelope, { context: context.slice(1) }),
        'one character less',
      )
    })

    test('the media type is read case-insensitively and with parameters', async () => {
      const keyId = keyIdOf('ML-KEM-512')
      const plaintext = Buffer.from('media type')
      for (const contentType of ['Application/Octet-Stream', 'application/octet-stream; charset=binary']) {
        const res = await send('/encrypt', plaintext, { headers: { 'x-key-id': keyId }, contentType })
        assert.equal(res.status, 200, `${contentType}: ${res.text}`)
        assert.equal(res.headers.get('content-type'), BINARY)
        await assertOpens(res.bytes, { plaintext, keyId, keyVersion: 1 })
      }
    })
  })

  // ---- 2. Independent decryption -----------------------------------------------------------

  describe('decrypting a binary envelope without the service (docs/envelope-format.md)', () => {
    for (const { algorithm, scheme, protectedBytes } of ALGORITHMS) {
      test(`${algorithm}: header bytes, the DEK and AAD = "kms/envelope/v1" || header || context`, async () => {
        const key = keys.get(algorithm)!
        const privateKey = await exportPrivateKey(key, algorithm, 1)
        const plaintexts = [Buffer.alloc(0), randomBytes(1), randomBytes(4096), Buffer.from('Grüße ✓ 🔐')]
        for (const plaintext of plaintexts) {
          for (const context of CONTEXTS) {
            const what = `${plaintext.length} bytes, context ${JSON.stringify(context)}`
            const { envelope } = await encryptBinary(key.id, plaintext, context)
            const parts = unframe(envelope)
            const header = parts.encapsulatedKey.subarray(0, HEADER_LENGTH)
            assert.equal(parts.encapsulatedKey.length, HEADER_LENGTH + protectedBytes, what)
            assert.equal(header[0], 0x01, `${what}: byte 0 is the format version 0x01`)
            assert.equal(header[1], scheme, `${what}: byte 1 is the scheme`)
            assert.equal(header.subarray(2, 18).toString('hex'), uuidHex(key.id), `${what}: key id bytes`)
            assert.equal(header.readUInt32BE(18), 1, `${what}: key version, big-endian`)
            assert.equal(parts.ciphertext.length, plaintext.length, `${what}: ciphertext length`)

            const opened = decryptIndependently(envelope, context ?? '', privateKey)
            assert.ok(opened.equals(plaintext), `${what}: the document's decryptor recovers the plaintext`)

            // The AAD is exactly label || header || context: any other composition fails.
            const wrongAads: [string, Buffer][] = [
              ['without the label', Buffer.concat([header, Buffer.from(context ?? '', 'utf8')])],
              [
                'with the wrap label',
                Buffer.concat([Buffer.from('kms/wrap/v1'), header, Buffer.from(context ?? '', 'utf8')]),
              ],
              ['without the header', Buffer.concat([AAD_LABEL, Buffer.from(context ?? '', 'utf8')])],
              ['with another context', Buffer.concat([AAD_LABEL, header, Buffer.from(`${context ?? ''}x`)])],
            ]
            const dek = recoverDekFor(parts, privateKey)
            const sealed = Buffer.concat([parts.ciphertext, parts.tag])
            assert.ok(
              Buffer.from(gcm(dek, parts.nonce, aadOf(header, context)).decrypt(sealed)).equals(plaintext),
            )
            for (const [how, aad] of wrongAads) {
              assert.throws(
                () => gcm(dek, parts.nonce, aad).decrypt(sealed),
                /invalid tag/,
                `${what}: AAD ${how}`,
              )
            }
          }
        }
      })
    }

    function aadOf(header: Buffer, context: string | undefined): Buffer {
      return Buffer.concat([AAD_LABEL, header, Buffer.from(context ?? '', 'utf8')])
    }

    function recoverDekFor(parts: Parts, key: PrivateKey): Uint8Array {
      const header = parts.encapsulatedKey.subarray(0, HEADER_LENGTH)
      const protectedDek = parts.encapsulatedKey.subarray(HEADER_LENGTH)
      if (key.kind === 'ml-kem') {
        const ss = KEMS[key.algorithm].decapsulate(protectedDek, key.secretKey)
        return hmac(sha256, ss, Buffer.concat([DEK_INFO, header, Buffer.of(0x01)]))
      }
      return privateDecrypt(
        { key: key.key, padding: constants.RSA_PKCS1_OAEP_PADDING, oaepHash: 'sha256' },
        protectedDek,
      )
    }
  })

  // ---- 3. Interoperation with the JSON transport ---------------------------------------------

  describe('interoperation with JSON', () => {
    for (const { algorithm } of ALGORITHMS) {
      test(`${algorithm}: binary → JSON legacy and standard, JSON standard and legacy → binary`, async () => {
        const keyId = keyIdOf(algorithm)
        for (const context of CONTEXTS) {
          const what = `context ${JSON.stringify(context)}`
          const plaintext = randomBytes(777)
          const jsonContext = context === undefined ? {} : { context }

          // Binary encrypt → JSON /decrypt, legacy mode: the Base64 of the binary body.
          const sealed = await encryptBinary(keyId, plaintext, context)
          const legacy = await call('POST', '/decrypt', {
            mode: 'legacy',
            ciphertext: b64(sealed.envelope),
            ...jsonContext,
          })
          assert.equal(legacy.status, 200, `${what}: ${legacy.text}`)
          assert.ok(unb64(legacy.body.plaintext).equals(plaintext), `${what}: legacy JSON decrypt`)
          assert.equal(legacy.body.keyId, keyId)
          assert.equal(legacy.body.keyVersion, 1)

          // ...and its parts, split by the document's table, through JSON standard mode.
          const parts = unframe(sealed.envelope)
          const standard = await call('POST', '/decrypt', {
            ciphertext: b64(parts.ciphertext),
            encapsulatedKey: b64(parts.encapsulatedKey),
            nonce: b64(parts.nonce),
            tag: b64(parts.tag),
            ...jsonContext,
          })
          assert.equal(standard.status, 200, `${what}: ${standard.text}`)
          assert.ok(unb64(standard.body.plaintext).equals(plaintext), `${what}: standard JSON decrypt`)

          // JSON standard encrypt → framed here → binary decrypt.
          const json = await call('POST', '/encrypt', { keyId, plaintext: b64(plaintext), ...jsonContext })
          assert.equal(json.status, 200, json.text)
          const framed = frame({
            encapsulatedKey: unb64(json.body.encapsulatedKey),
            nonce: unb64(json.body.nonce),
            tag: unb64(json.body.tag),
            ciphertext: unb64(json.body.ciphertext),
          })
          await assertOpens(framed, { plaintext, keyId, keyVersion: 1 }, { context })

          // JSON legacy encrypt → Base64-decoded → binary decrypt.
          const jsonLegacy = await call('POST', '/encrypt', {
            keyId,
            plaintext: b64(plaintext),
            mode: 'legacy',
            ...jsonContext,
          })
          assert.equal(jsonLegacy.status, 200, jsonLegacy.text)
          assert.equal(jsonLegacy.body.mode, 'legacy')
          await assertOpens(
            unb64(jsonLegacy.body.ciphertext),
            { plaintext, keyId, keyVersion: 1 },
            { context },
          )

          // The context must match in either direction.
          if (context !== undefined) {
            const wrong = await call('POST', '/decrypt', {
              mode: 'legacy',
              ciphertext: b64(sealed.envelope),
              context: `${context}!`,
            })
            assert.equal(wrong.status, 400, wrong.text)
            assert.equal(wrong.body.error, 'decryption_failed')
            assertDecryptionFailed(await decryptBinary(framed), `${what}: JSON envelope without its context`)
          }
        }
      })
    }

    test('a wrapped key (label kms/wrap/v1) does not open through binary /decrypt, nor the reverse', async () => {
      const keyId = keyIdOf('ML-KEM-768')
      const wrapped = await call('POST', `/keys/${keyId}/wrap`, { plaintext: b64(randomBytes(32)) })
      assert.equal(wrapped.status, 200, wrapped.text)
      assertDecryptionFailed(await decryptBinary(unb64(wrapped.body.wrappedKey)), 'a wrapped key')

      const sealed = await encryptBinary(keyId, randomBytes(32))
      const unwrapped = await call('POST', `/keys/${keyId}/unwrap`, { wrappedKey: b64(sealed.envelope) })
      assert.equal(unwrapped.status, 400, unwrapped.text)
      assert.equal(unwrapped.body.error, 'decryption_failed')
    })
  })

  // ---- 4. The default key --------------------------------------------------------------------

  describe('the default key', () => {
    test('without X-Key-Id the tenant default Encryption key is used and named in X-Key-Id', async () => {
      const own = await svc.createTenant()
      const first = await api.createKey('Encryption', 'ML-KEM-768', { isDefault: true }, own)
      const second = await api.createKey('Encryption', 'RSA-2048', {}, own)
      const plaintext = Buffer.from('to the default key')

      const byFirst = await encryptBinary(undefined, plaintext, 'héllo ✓ 🔐', own)
      assert.equal(byFirst.keyId, first.id, 'X-Key-Id names the default key')
      assert.equal(byFirst.keyVersion, 1)
      assert.equal(
        unframe(byFirst.envelope).encapsulatedKey.subarray(2, 18).toString('hex'),
        uuidHex(first.id),
      )
      assert.equal(byFirst.envelope[3], SCHEME_ML_KEM)

      const patched = await call('PATCH', `/keys/${second.id}`, { isDefault: true }, own)
      assert.equal(patched.status, 200, patched.text)
      const bySecond = await encryptBinary(undefined, plaintext, undefined, own)
      assert.equal(bySecond.keyId, second.id, 'the new default takes over')
      assert.equal(bySecond.envelope[3], SCHEME_RSA_OAEP)

      // Decryption follows the envelope, whichever key is the default now.
      await assertOpens(
        byFirst.envelope,
        { plaintext, keyId: first.id, keyVersion: 1 },
        { context: 'héllo ✓ 🔐', by: own },
      )
      await assertOpens(bySecond.envelope, { plaintext, keyId: second.id, keyVersion: 1 }, { by: own })
    })

    test('the refusals of binary encrypt are those of JSON encrypt, byte for byte', async () => {
      const own = await svc.createTenant()
      const signing = await api.createKey('Signing', 'ML-DSA-65', {}, own)
      const foreign = keyIdOf('ML-KEM-512')
      const cases: [string, string | undefined][] = [
        ['no keyId and no default key', undefined],
        ['an unknown key id', randomUUID()],
        ["another tenant's key id", foreign],
        ['a Signing key', signing.id],
      ]
      for (const [what, keyId] of cases) {
        const json = await call('POST', '/encrypt', { plaintext: b64('x'), ...(keyId ? { keyId } : {}) }, own)
        assert.ok(json.status >= 400 && json.status < 500, `${what}: JSON ${json.text}`)
        const binary = await send('/encrypt', Buffer.from('x'), {
          headers: keyId ? { 'x-key-id': keyId } : {},
          by: own,
        })
        assert.equal(binary.status, json.status, `${what}: ${shown(binary)} vs ${json.text}`)
        assert.equal(binary.text, json.text, `${what}: the same error body`)
        assert.match(binary.headers.get('content-type') ?? '', /^application\/json/, what)
        if (what.startsWith('no keyId')) assert.equal(binary.body.error, 'no_default_key')
      }
    })
  })

  // ---- 5. Tampering --------------------------------------------------------------------------

  describe('tampering', () => {
    for (const algorithm of ['ML-KEM-768', 'RSA-2048']) {
      test(`${algorithm}: every bit flip and every mismatch is the same 400 decryption_failed`, async () => {
        const keyId = keyIdOf(algorithm)
        const other = keyIdOf(algorithm === 'RSA-2048' ? 'ML-KEM-512' : 'RSA-2048')
        const context = 'héllo ✓ 🔐'
        const plaintext = randomBytes(100)
        const { envelope } = await encryptBinary(keyId, plaintext, context)
        await assertOpens(envelope, { plaintext, keyId, keyVersion: 1 }, { context })
        const unbound = (await encryptBinary(keyId, plaintext)).envelope
        await assertOpens(unbound, { plaintext, keyId, keyVersion: 1 })

        const reference = await decryptBinary(envelope, { context: 'not the context' })
        assertDecryptionFailed(reference, 'wrong context')

        const n = envelope.readUInt16BE(0)
        const nonceAt = PREFIX_LENGTH + n
        const tagAt = nonceAt + NONCE_LENGTH
        const ciphertextAt = tagAt + TAG_LENGTH
        const positions: [string, number, number][] = [
          ['length prefix, high byte', 0, 0x01],
          ['length prefix, high bit', 0, 0x80],
          ['length prefix, low byte', 1, 0x01],
          ['length prefix, low byte bit 3', 1, 0x08],
          ['format version', 2, 0x01],
          ['format version, high bit', 2, 0x80],
          ['scheme', 3, 0x01],
          ['scheme to the other scheme', 3, 0x03],
          ['key id, first byte', 4, 0x01],
          ['key id, middle byte', 12, 0x10],
          ['key id, last byte', 19, 0x80],
          ['key version, high byte', 20, 0x80],
          ['key version, byte 2', 22, 0x01],
          ['key version, low byte (to 0)', 23, 0x01],
          ['key version, low byte (to 3)', 23, 0x02],
          ['protected DEK, first byte', 24, 0x01],
          ['protected DEK, middle byte', 24 + Math.floor((n - HEADER_LENGTH) / 2), 0x40],
          ['protected DEK, last byte', nonceAt - 1, 0x80],
          ['nonce, first byte', nonceAt, 0x01],
          ['nonce, last byte', tagAt - 1, 0x80],
          ['tag, first byte', tagAt, 0x01],
          ['tag, last byte', ciphertextAt - 1, 0x80],
          ['ciphertext, first byte', ciphertextAt, 0x01],
          ['ciphertext, middle byte', ciphertextAt + 50, 0x04],
          ['ciphertext, last byte', envelope.length - 1, 0x80],
        ]
        const cases: [string, Buffer, Parameters<typeof decryptBinary>[1]][] = positions.map(
          ([what, index, mask]) => [`bit flip: ${what}`, flipBit(envelope, index, mask), { context }],
        )
        const truncations = [1, 2, 3, PREFIX_LENGTH + HEADER_LENGTH, nonceAt, tagAt, ciphertextAt - 1]
        cases.push(
          ['wrong context', envelope, { context: 'héllo ✓ 🔒' }],
          ['context differing in case', envelope, { context: 'HÉLLO ✓ 🔐' }],
          ['missing context', envelope, {}],
          ['a context where none was used', unbound, { context }],
          ...truncations.map((length): [string, Buffer, { context: string }] => [
            `truncated to ${length} bytes`,
            envelope.subarray(0, length),
            { context },
          ]),
          ['the last byte cut', envelope.subarray(0, envelope.length - 1), { context }],
          ['a byte appended', Buffer.concat([envelope, Buffer.of(0)]), { context }],
          ['an empty body', Buffer.alloc(0), { context }],
          ['the envelope twice', Buffer.concat([envelope, envelope]), { context }],
          ['random bytes (short)', randomBytes(17), {}],
          ['random bytes (envelope-sized)', randomBytes(envelope.length), { context }],
          [
            'random bytes after a valid header',
            Buffer.concat([
              envelope.subarray(0, PREFIX_LENGTH + HEADER_LENGTH),
              randomBytes(envelope.length),
            ]),
            { context },
          ],
          ['X-Key-Id of another key', envelope, { context, keyId: other }],
          ['X-Key-Id of an unknown key', envelope, { context, keyId: randomUUID() }],
          ['X-Key-Version 2 for a version-1 envelope', envelope, { context, keyVersion: '2' }],
          ['X-Key-Version 2147483647', envelope, { context, keyVersion: '2147483647' }],
        )
        // The cross-checks and the context are right: only the bytes are wrong.
        assert.ok(cases.length >= 40, `${cases.length} cases`)
        const results = await mapConcurrently(cases, 8, async ([what, bytes, options]) => ({
          what,
          res: await decryptBinary(bytes, options),
        }))
        for (const { what, res } of results) {
          assertDecryptionFailed(res, what)
          assert.equal(res.text, reference.text, `${what}: the body is identical to every other failure`)
          assert.ok(!res.bytes.includes(plaintext), `${what}: no plaintext`)
        }
        // The untouched envelope still opens: nothing above was destructive.
        await assertOpens(envelope, { plaintext, keyId, keyVersion: 1 }, { context, keyId, keyVersion: '1' })
      })
    }

    test('the failure of a binary decrypt is the failure of a JSON decrypt', async () => {
      const keyId = keyIdOf('ML-KEM-512')
      const { envelope } = await encryptBinary(keyId, Buffer.from('compare'), 'a')
      const binary = await decryptBinary(envelope, { context: 'b' })
      const json = await call('POST', '/decrypt', { mode: 'legacy', ciphertext: b64(envelope), context: 'b' })
      assertDecryptionFailed(binary, 'binary')
      assert.equal(json.status, 400)
      assert.equal(binary.text, json.text)
    })
  })

  // ---- 6. Rotation ---------------------------------------------------------------------------

  describe('rotation', () => {
    for (const algorithm of ['ML-KEM-1024', 'RSA-2048']) {
      test(`${algorithm}: version 1 before and 2 after a rotation; both envelopes open`, async () => {
        const key = await api.createKey('Encryption', algorithm)
        const plaintext1 = Buffer.from(`before rotation ${randomUUID()}`)
        const plaintext2 = Buffer.from(`after rotation ${randomUUID()}`)
        const context = 'héllo ✓ 🔐'
        const v1 = await encryptBinary(key.id, plaintext1, context)
        assert.equal(v1.keyVersion, 1)

        const rotated = await call('POST', `/keys/${key.id}/rotate`)
        assert.equal(rotated.status, 200, rotated.text)
        assert.equal(rotated.body.version, 2)

        const v2 = await encryptBinary(key.id, plaintext2, context)
        assert.equal(v2.keyId, key.id)
        assert.equal(v2.keyVersion, 2, 'X-Key-Version is 2 after the rotation')
        assert.deepEqual([...v2.envelope.subarray(20, 24)], [0, 0, 0, 2], 'the header names version 2')
        assert.deepEqual([...v1.envelope.subarray(20, 24)], [0, 0, 0, 1])

        await assertOpens(v1.envelope, { plaintext: plaintext1, keyId: key.id, keyVersion: 1 }, { context })
        await assertOpens(v2.envelope, { plaintext: plaintext2, keyId: key.id, keyVersion: 2 }, { context })
        await assertOpens(
          v1.envelope,
          { plaintext: plaintext1, keyId: key.id, keyVersion: 1 },
          { context, keyId: key.id.toUpperCase(), keyVersion: '1' },
        )
        await assertOpens(
          v2.envelope,
          { plaintext: plaintext2, keyId: key.id, keyVersion: 2 },
          { context, keyId: key.id, keyVersion: '2' },
        )
        assertDecryptionFailed(await decryptBinary(v1.envelope, { context, keyVersion: '2' }), 'v1 as 2')
        assertDecryptionFailed(await decryptBinary(v2.envelope, { context, keyVersion: '1' }), 'v2 as 1')
        // A version-1 header over a version-2 envelope: the header is authenticated.
        const relabelled = Buffer.from(v2.envelope)
        relabelled.writeUInt32BE(1, 20)
        assertDecryptionFailed(await decryptBinary(relabelled, { context }), 'v2 envelope relabelled as v1')
      })
    }
  })

  // ---- 7. Header validation and fuzz -----------------------------------------------------------

  describe('header validation', () => {
    test('an X-Key-Id that is not a UUID is 400 validation_failed on both routes', async () => {
      const keyId = keyIdOf('ML-KEM-512')
      const { envelope } = await encryptBinary(keyId, Buffer.from('x'))
      const bad = [
        '',
        'not-a-uuid',
        '1234',
        uuidHex(keyId),
        `urn:uuid:${keyId}`,
        `${keyId}x`,
        `{${keyId}}`,
        `${keyId}, ${keyId}`,
        keyId.replace(/[0-9a-f]/, 'g'),
      ]
      for (const value of bad) {
        const what = `X-Key-Id ${JSON.stringify(value)}`
        const enc = await send('/encrypt', Buffer.from('x'), { headers: { 'x-key-id': value } })
        assertValidationFailed(enc, 'x-key-id', `encrypt, ${what}`)
        const dec = await send('/decrypt', envelope, { headers: { 'x-key-id': value } })
        assertValidationFailed(dec, 'x-key-id', `decrypt, ${what}`)
      }
    })

    test('an X-Key-Version that is not an integer from 1 to 2^31 - 1 is 400 validation_failed', async () => {
      const keyId = keyIdOf('ML-KEM-512')
      const { envelope } = await encryptBinary(keyId, Buffer.from('x'))
      for (const value of [
        '',
        '0',
        '-1',
        'abc',
        'one',
        '1.5',
        '2147483648',
        '99999999999999999999',
        'true',
      ]) {
        const res = await send('/decrypt', envelope, { headers: { 'x-key-version': value } })
        assertValidationFailed(res, 'x-key-version', `X-Key-Version ${JSON.stringify(value)}`)
      }
    })

    test('an X-Encryption-Context that is not canonical Base64 of at most 8,192 characters of UTF-8 is 400', async () => {
      const keyId = keyIdOf('ML-KEM-512')
      const { envelope } = await encryptBinary(keyId, Buffer.from('x'), 'hi')
      const bad: [string, string][] = [
        ['missing padding', 'aGk'],
        ['too much padding', 'aGk=='],
        ['non-zero trailing bits', 'aGl='],
        ['URL-safe alphabet', Buffer.from([0xfb, 0xff]).toString('base64url')],
        ['a space inside', 'aG k='],
        ['not Base64 at all', 'héllo'],
        ['only padding', '===='],
        ['invalid UTF-8 (0xff 0xfe)', Buffer.from([0xff, 0xfe]).toString('base64')],
        ['a truncated UTF-8 sequence', Buffer.from([0x61, 0xc3]).toString('base64')],
        ['an encoded surrogate', Buffer.from([0xed, 0xa0, 0x80]).toString('base64')],
        ['an overlong encoding', Buffer.from([0xc0, 0xaf]).toString('base64')],
        ['8,193 characters', contextHeader('a'.repeat(8193))],
      ]
      for (const [what, value] of bad) {
        const enc = await send('/encrypt', Buffer.from('x'), {
          headers: { 'x-key-id': keyId, 'x-encryption-context': value },
        })
        assertValidationFailed(enc, 'x-encryption-context', `encrypt, ${what}`)
        const dec = await send('/decrypt', envelope, { headers: { 'x-encryption-context': value } })
        assertValidationFailed(dec, 'x-encryption-context', `decrypt, ${what}`)
      }
      // The canonical form of the same context opens it.
      await assertOpens(envelope, { plaintext: Buffer.from('x'), keyId, keyVersion: 1 }, { context: 'hi' })
    })

    test('a context of 8,193 characters beginning with U+FEFF is refused as in JSON', async () => {
      const keyId = keyIdOf('ML-KEM-512')
      const context = `\uFEFF${'a'.repeat(8192)}`
      assert.equal(context.length, 8193)
      const json = await call('POST', '/encrypt', { keyId, plaintext: b64('x'), context })
      assert.equal(json.status, 400, json.text)
      assert.equal(json.body.error, 'validation_failed')
      const res = await send('/encrypt', Buffer.from('x'), {
        headers: { 'x-key-id': keyId, 'x-encryption-context': contextHeader(context) },
      })
      assertValidationFailed(res, 'x-encryption-context', 'BOM + 8,192 characters')
    })

    test('an X-Key-Version in another notation than a decimal integer is refused', async () => {
      const keyId = keyIdOf('ML-KEM-512')
      const { envelope } = await encryptBinary(keyId, Buffer.from('x'))
      for (const value of ['0x1', '1e0', '+1', '1.0', '01', '2147483648']) {
        const res = await send('/decrypt', envelope, { headers: { 'x-key-version': value } })
        assertValidationFailed(res, 'x-key-version', `X-Key-Version ${JSON.stringify(value)}`)
      }
    })

    test('a JSON request carrying a binary header is 400 validation_failed naming the header', async () => {
      const keyId = keyIdOf('ML-KEM-512')
      const json = await call('POST', '/encrypt', { keyId, plaintext: b64('json'), context: 'c' })
      assert.equal(json.status, 200, json.text)
      const encryptBody = JSON.stringify({ keyId, plaintext: b64('json'), context: 'c' })
      const decryptBody = JSON.stringify({
        ciphertext: json.body.ciphertext,
        encapsulatedKey: json.body.encapsulatedKey,
        nonce: json.body.nonce,
        tag: json.body.tag,
        context: 'c',
      })
      const valid: Record<string, string> = {
        'x-key-id': keyId,
        'x-key-version': '1',
        'x-encryption-context': contextHeader('c'),
      }
      const routes: [string, string, string[]][] = [
        ['/encrypt', encryptBody, ['x-key-id', 'x-encryption-context']],
        ['/decrypt', decryptBody, ['x-key-id', 'x-key-version', 'x-encryption-context']],
      ]
      for (const [path, body, headers] of routes) {
        for (const header of headers) {
          const res = await send(path, body, {
            contentType: 'application/json',
            headers: { [header]: valid[header]! },
          })
          assertValidationFailed(res, header, `JSON ${path} with ${header}`)
          assert.match(res.body.message, new RegExp(header), `${path}: the message names ${header}`)
        }
        const all = await send(path, body, {
          contentType: 'application/json',
          headers: Object.fromEntries(headers.map((h) => [h, valid[h]!])),
        })
        for (const header of headers) assertValidationFailed(all, header, `JSON ${path} with all headers`)
        assert.equal(all.body.fields.length, headers.length, `${path}: one field per header`)
        // Without the headers the same JSON request succeeds.
        const plain = await send(path, body, { contentType: 'application/json' })
        assert.equal(plain.status, 200, `${path}: ${plain.text}`)
      }
      // X-Key-Version belongs to decrypt only: encrypt's JSON requests ignore it, as every unrelated header.
      const ignored = await send('/encrypt', encryptBody, {
        contentType: 'application/json',
        headers: { 'x-key-version': '1' },
      })
      assert.equal(ignored.status, 200, ignored.text)
    })

    test('fuzz: 200 random header and body combinations on both routes never give a 5xx', async () => {
      const seed = Number(process.env['KMS_FUZZ_SEED'] ?? randomBytes(4).readUInt32BE(0))
      const rng = mulberry32(seed)
      const int = (n: number) => Math.floor(rng() * n)
      const pick = <T>(items: readonly T[]): T => items[int(items.length)]!
      const bytes = (n: number) => Buffer.from(Array.from({ length: n }, () => int(256)))
      const junk = () => {
        // Visible ASCII: what a header value can carry without the client refusing it.
        const length = int(80)
        let out = ''
        for (let i = 0; i < length; i++) out += String.fromCharCode(0x21 + int(0x7e - 0x21 + 1))
        return out
      }

      const keyId = keyIdOf('ML-KEM-512')
      const plaintext = Buffer.from('fuzz plaintext')
      const context = 'fuzz ✓'
      const valid = (await encryptBinary(keyId, plaintext, context)).envelope
      const validNoContext = (await encryptBinary(keyId, plaintext)).envelope
      const mutate = (envelope: Buffer) => {
        const copy = Buffer.from(envelope)
        const flips = 1 + int(4)
        for (let i = 0; i < flips; i++) copy[int(copy.length)]! ^= 1 << int(8)
        return rng() < 0.3 ? copy.subarray(0, int(copy.length)) : copy
      }

      const keyIds = () =>
        pick([
          keyId,
          keyId.toUpperCase(),
          keyIdOf('RSA-2048'),
          randomUUID(),
          '',
          'not-a-uuid',
          uuidHex(keyId),
          `${keyId},${keyId}`,
          '00000000-0000-0000-0000-000000000000',
          junk(),
        ])
      const versions = () =>
        pick([
          '1',
          '2',
          '0',
          '-1',
          '2147483647',
          '2147483648',
          '1.5',
          'abc',
          '',
          '99999999999999999999',
          junk(),
        ])
      const contexts = () =>
        pick([
          contextHeader(context),
          contextHeader('other'),
          '',
          'aGk',
          Buffer.from([0xff]).toString('base64'),
          bytes(int(40)).toString('base64'),
          contextHeader('x'.repeat(8193)),
          junk(),
        ])
      const bodies = () =>
        pick([
          Buffer.alloc(0),
          bytes(int(64)),
          bytes(int(4096)),
          valid,
          validNoContext,
          mutate(valid),
          mutate(valid),
          Buffer.concat([valid.subarray(0, 24), bytes(int(2000))]),
        ])
      const contentTypes = [
        BINARY,
        BINARY,
        BINARY,
        BINARY,
        `${BINARY}; x=y`,
        'application/json',
        'text/plain',
      ]

      const cases = Array.from({ length: 200 }, (_, i) => {
        const path = rng() < 0.5 ? '/encrypt' : '/decrypt'
        const headers: Record<string, string> = {}
        if (rng() < 0.5) headers['x-key-id'] = keyIds()
        if (rng() < 0.5) headers['x-encryption-context'] = contexts()
        if (rng() < 0.4) headers['x-key-version'] = versions()
        return { i, path, headers, body: bodies(), contentType: pick(contentTypes) }
      })
      const results = await mapConcurrently(cases, 8, async (c) => ({
        c,
        res: await send(c.path, c.body, { headers: c.headers, contentType: c.contentType }),
      }))
      const statuses = new Map<number, number>()
      for (const { c, res } of results) {
        const what = `seed ${seed}, case ${c.i}: ${c.path} ${c.contentType} ${JSON.stringify(c.headers)} body ${c.body.length} bytes → ${res.status} ${res.text.slice(0, 200)}`
        statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1)
        assert.ok(res.status < 500, what)
        if (res.status === 200) {
          assert.equal(res.headers.get('content-type'), BINARY, what)
          assert.ok(res.headers.get('x-key-id'), what)
          if (c.path === '/decrypt') {
            // Only the untouched envelopes can open, and only to their own plaintext.
            assert.ok(res.bytes.equals(plaintext), `${what}: a 200 decrypt gives the plaintext`)
            assert.ok(
              c.body.equals(valid) || c.body.equals(validNoContext),
              `${what}: opened a forged envelope`,
            )
          } else {
            assert.equal(unframe(res.bytes).ciphertext.length, c.body.length, what)
          }
        } else {
          assert.ok(res.status >= 400 && res.status < 500, what)
          assert.match(res.headers.get('content-type') ?? '', /^application\/json/, what)
          assert.equal(typeof res.body?.error, 'string', what)
          assert.equal(typeof res.body?.message, 'string', what)
        }
      }
      assert.ok((statuses.get(400) ?? 0) > 0, `some requests were refused: ${JSON.stringify([...statuses])}`)
      // The service is still well after the fuzz.
      const healthy = await encryptBinary(keyId, plaintext, context)
      await assertOpens(healthy.envelope, { plaintext, keyId, keyVersion: 1 }, { context })
    })
  })

  // ---- 8. Limits -----------------------------------------------------------------------------

  describe('limits', () => {
    test('a binary encrypt body of 10 MiB + 1 byte is 413 payload_too_large; decrypt 10 MiB + 64 KiB + 1', async () => {
      const keyId = keyIdOf('ML-KEM-768')
      const enc = await send('/encrypt', Buffer.alloc(BODY_LIMIT + 1, 0x61), {
        headers: { 'x-key-id': keyId },
      })
      assert.equal(enc.status, 413, shown(enc))
      assert.match(enc.headers.get('content-type') ?? '', /^application\/json/)
      assert.equal(enc.body.error, 'payload_too_large')
      assert.equal(typeof enc.body.message, 'string')

      const dec = await send('/decrypt', Buffer.alloc(DECRYPT_BODY_LIMIT + 1, 0x61))
      assert.equal(dec.status, 413, shown(dec))
      assert.equal(dec.body.error, 'payload_too_large')
    })

    test('a streamed body without Content-Length has the same limit: 10 MiB is 200, one byte more is 413', async () => {
      const keyId = keyIdOf('ML-KEM-512')
      const streamed = async (total: number) => {
        const body = new ReadableStream<Uint8Array>({
          start(controller) {
            for (let left = total; left > 0; left -= 64 * 1024) {
              controller.enqueue(new Uint8Array(Math.min(left, 64 * 1024)).fill(0x62))
            }
            controller.close()
          },
        })
        const response = await fetch(new URL('/api/v1/encrypt', svc.baseUrl), {
          method: 'POST',
          headers: { 'x-api-key': tenant.key, 'content-type': BINARY, 'x-key-id': keyId },
          body,
          duplex: 'half',
        })
        return {
          status: response.status,
          type: response.headers.get('content-type'),
          bytes: Buffer.from(await response.arrayBuffer()),
        }
      }
      const fits = await streamed(BODY_LIMIT)
      assert.equal(fits.status, 200, fits.bytes.toString().slice(0, 300))
      assert.equal(fits.type, BINARY)
      assert.equal(unframe(fits.bytes).ciphertext.length, BODY_LIMIT)
      await assertOpens(fits.bytes, { plaintext: Buffer.alloc(BODY_LIMIT, 0x62), keyId, keyVersion: 1 })
      const over = await streamed(BODY_LIMIT + 1)
      assert.equal(over.status, 413, over.bytes.toString().slice(0, 300))
      assert.equal(JSON.parse(over.bytes.toString()).error, 'payload_too_large')
    })

    test('a binary encrypt body of exactly 10 MiB is accepted and round-trips', async () => {
      const keyId = keyIdOf('ML-KEM-768')
      const plaintext = randomBytes(BODY_LIMIT)
      const sealed = await encryptBinary(keyId, plaintext, 'héllo ✓ 🔐')
      assert.equal(unframe(sealed.envelope).ciphertext.length, BODY_LIMIT)
      assert.ok(sealed.envelope.length <= DECRYPT_BODY_LIMIT, 'the envelope fits the decrypt limit')
      await assertOpens(sealed.envelope, { plaintext, keyId, keyVersion: 1 }, { context: 'héllo ✓ 🔐' })
    })
  })

  // ---- 9. Scopes and tenant isolation ----------------------------------------------------------

  describe('scopes and tenants', () => {
    test('encrypt:invoke or encryption:write alone may use the binary routes; keys:read gets 403', async () => {
      const keyId = keyIdOf('ML-KEM-768')
      const plaintext = Buffer.from(`scoped ${randomUUID()}`)
      for (const scope of ['encrypt:invoke', 'encryption:write']) {
        const apiKey = await createApiKey([scope])
        const sealed = await encryptBinary(keyId, plaintext, 'ctx', apiKey)
        await assertOpens(
          sealed.envelope,
          { plaintext, keyId, keyVersion: 1 },
          { context: 'ctx', by: apiKey },
        )
      }
      const reader = await createApiKey(['keys:read'])
      const sealed = await encryptBinary(keyId, plaintext, 'ctx')
      const enc = await send('/encrypt', plaintext, { headers: encryptHeaders(keyId, 'ctx'), by: reader })
      assert.equal(enc.status, 403, shown(enc))
      assert.equal(enc.body.error, 'insufficient_scope')
      const dec = await decryptBinary(sealed.envelope, { context: 'ctx', by: reader })
      assert.equal(dec.status, 403, shown(dec))
      assert.equal(dec.body.error, 'insufficient_scope')
      assert.ok(!dec.bytes.includes(plaintext), 'no plaintext in the refusal')
      assert.equal(dec.headers.get('x-key-id'), null)
    })

    test("tenant B neither decrypts tenant A's binary envelope nor encrypts with A's key", async () => {
      const keyId = keyIdOf('ML-KEM-512')
      const plaintext = Buffer.from(`tenant A secret ${randomUUID()}`)
      const { envelope } = await encryptBinary(keyId, plaintext, 'ctx')
      const reference = await decryptBinary(envelope, { context: 'wrong' })
      assertDecryptionFailed(reference, 'reference')

      for (const [what, options] of [
        ['no cross-check', { context: 'ctx' }],
        ["naming A's key", { context: 'ctx', keyId }],
        ["naming A's key and version", { context: 'ctx', keyId, keyVersion: '1' }],
      ] as const) {
        const res = await decryptBinary(envelope, { ...options, by: otherTenant })
        assertDecryptionFailed(res, `tenant B, ${what}`)
        assert.equal(res.text, reference.text, `tenant B, ${what}: the same body as any failure`)
      }

      const json = await call('POST', '/encrypt', { keyId, plaintext: b64(plaintext) }, otherTenant)
      const binary = await send('/encrypt', plaintext, { headers: { 'x-key-id': keyId }, by: otherTenant })
      assert.ok(json.status >= 400 && json.status < 500, json.text)
      assert.equal(binary.status, json.status, shown(binary))
      assert.equal(binary.text, json.text, "the same error as JSON encrypt with another tenant's key")
      const unknown = await send('/encrypt', plaintext, {
        headers: { 'x-key-id': randomUUID() },
        by: otherTenant,
      })
      assert.equal(unknown.text, binary.text, 'indistinguishable from an unknown key')
      // A still decrypts.
      await assertOpens(envelope, { plaintext, keyId, keyVersion: 1 }, { context: 'ctx' })
    })
  })

  // ---- 10. Audit -----------------------------------------------------------------------------

  describe('audit', () => {
    test('each binary operation is one record naming the key and version, never the data', async () => {
      const own = await svc.createTenant()
      const key = await api.createKey('Encryption', 'ML-KEM-768', {}, own)
      const marker = `BINARY-PLAINTEXT-${randomBytes(8).toString('hex')}`
      const context = `BINARY-CONTEXT-${randomBytes(8).toString('hex')} héllo ✓ 🔐`
      const plaintext = Buffer.from(marker)
      const v1 = await encryptBinary(key.id, plaintext, context, own)
      const rotated = await call('POST', `/keys/${key.id}/rotate`, undefined, own)
      assert.equal(rotated.status, 200, rotated.text)

      const count = async () => {
        const [row] = await svc.sql<{ n: number; last: string | null }[]>`
          SELECT count(*)::int AS n, max(id)::text AS last FROM audit_log WHERE tenant_id = ${own.tenantId}`
        return row!
      }
      const start = await count()

      const expected: [string, number, string][] = []
      const e2 = await encryptBinary(key.id, plaintext, context, own)
      expected.push(['crypto.encrypt', 2, e2.requestId])
      const e3 = await encryptBinary(key.id, plaintext, undefined, own)
      expected.push(['crypto.encrypt', 2, e3.requestId])
      for (const [sealed, ctx, version] of [
        [v1, context, 1],
        [e2, context, 2],
        [e3, undefined, 2],
      ] as const) {
        const res = await assertOpens(
          sealed.envelope,
          { plaintext, keyId: key.id, keyVersion: version },
          { by: own, ...(ctx === undefined ? {} : { context: ctx }) },
        )
        expected.push(['crypto.decrypt', version, res.headers.get('x-request-id')!])
      }

      const end = await count()
      assert.equal(end.n - start.n, expected.length, 'exactly one new record per operation')
      const rows = await svc.sql<
        {
          action: string
          resource: string | null
          key_version: number | null
          outcome: string
          request_id: string
          actor: string
        }[]
      >`SELECT action, resource, key_version, outcome, request_id, actor FROM audit_log
        WHERE tenant_id = ${own.tenantId} AND id > ${start.last} ORDER BY id`
      assert.deepEqual(
        rows.map((r) => [r.action, r.resource, r.key_version, r.outcome, r.actor, r.request_id]),
        expected.map(([action, version, requestId]) => [
          action,
          `key:${key.id}`,
          version,
          'success',
          `apikey:${own.apiKeyId}`,
          requestId,
        ]),
      )

      // The API's view agrees.
      const view = await call(
        'GET',
        `/audit?${new URLSearchParams({ resource: `key:${key.id}` })}`,
        undefined,
        own,
      )
      assert.equal(view.status, 200, view.text)
      const records = view.body.data as AuditView[]
      assert.equal(records.filter((r) => r.action === 'crypto.encrypt').length, 3)
      assert.equal(records.filter((r) => r.action === 'crypto.decrypt').length, 3)

      // Neither the stored rows nor the API's view hold the plaintext, the context or the envelope.
      const [stored] = await svc.sql<{ text: string }[]>`
        SELECT coalesce(string_agg(a::text, E'\n'), '') AS text FROM audit_log a WHERE tenant_id = ${own.tenantId}`
      const secrets = [
        marker,
        b64(plaintext),
        plaintext.toString('hex'),
        context,
        'BINARY-CONTEXT-',
        contextHeader(context),
        ...[v1, e2, e3].flatMap((s) => [
          b64(s.envelope).slice(0, 64),
          s.envelope.toString('hex').slice(0, 64),
        ]),
      ]
      for (const [where, text] of [
        ['audit_log rows', stored!.text],
        ['GET /audit', view.text],
      ] as const) {
        assert.ok(text.length > 0, where)
        for (const secret of secrets) {
          assert.equal(text.includes(secret), false, `${where} contains ${secret.slice(0, 40)}`)
        }
      }
    })
  })

  // ---- 11. Other routes ----------------------------------------------------------------------

  describe('other routes', () => {
    test('application/octet-stream is 415 unsupported_media_type everywhere but /encrypt, /decrypt and their batches', async () => {
      const keyId = keyIdOf('ML-KEM-512')
      const before = await svc.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM keys`
      const paths = [
        '/keys',
        '/sign',
        '/verify',
        '/generate-data-key',
        `/keys/${keyId}/wrap`,
        `/keys/${keyId}/unwrap`,
        `/keys/${keyId}/data-key`,
        '/api-keys',
      ]
      for (const path of paths) {
        const body = JSON.stringify({ name: 'octet', keyType: 'Encryption', algorithm: 'ML-KEM-512' })
        for (const payload of [Buffer.from(body), randomBytes(64)]) {
          const res = await send(path, payload, { headers: { 'x-key-id': keyId } })
          assert.equal(res.status, 415, `${path}: ${res.text}`)
          assert.equal(res.body.error, 'unsupported_media_type', path)
          assert.equal(typeof res.body.message, 'string', path)
        }
      }
      const afterRows = await svc.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM keys`
      assert.equal(afterRows[0]!.n, before[0]!.n, 'no key was created')
    })
  })

  // ---- 12. OpenAPI ---------------------------------------------------------------------------

  describe('OpenAPI', () => {
    test('/encrypt and /decrypt document both media types and their headers', async () => {
      const doc = await svc.request('GET', '/api/v1/openapi.json')
      assert.equal(doc.status, 200, doc.text.slice(0, 300))
      const expectedHeaders: Record<string, string[]> = {
        '/api/v1/encrypt': ['x-encryption-context', 'x-key-id'],
        '/api/v1/decrypt': ['x-encryption-context', 'x-key-id', 'x-key-version'],
      }
      for (const [path, headers] of Object.entries(expectedHeaders)) {
        const operation = doc.body.paths?.[path]?.post
        assert.ok(operation, `${path} is documented`)
        assert.deepEqual(
          Object.keys(operation.requestBody?.content ?? {}).sort(),
          ['application/json', BINARY],
          `${path}: request body media types`,
        )
        assert.deepEqual(
          Object.keys(operation.responses?.['200']?.content ?? {}).sort(),
          ['application/json', BINARY],
          `${path}: 200 response media types`,
        )
        assert.ok(operation.responses?.['415'], `${path}: 415 is documented`)
        const params = (operation.parameters ?? []).filter((p: { in: string }) => p.in === 'header')
        assert.deepEqual(params.map((p: { name: string }) => p.name.toLowerCase()).sort(), headers, path)
        for (const p of params) assert.notEqual(p.required, true, `${path}: ${p.name} is optional`)
        const byName = (name: string) => params.find((p: { name: string }) => p.name.toLowerCase() === name)
        // A key id (UUID) or an alias (docs/keys.md "Key aliases").
        assert.match(byName('x-key-id').schema.pattern, /\[0-9a-fA-F\]\{8\}.*\|alias\//, `${path}: x-key-id`)
        assert.equal(byName('x-encryption-context').schema.type, 'string', path)
        if (path.endsWith('/decrypt')) {
          // A decimal integer from 1, written as a string pattern so no other notation is coerced.
          assert.equal(byName('x-key-version').schema.type, 'string')
          assert.equal(byName('x-key-version').schema.pattern, '^[1-9][0-9]{0,9}$')
        }
      }
      // Other routes keep JSON only.
      for (const path of ['/api/v1/sign', '/api/v1/keys']) {
        const content = doc.body.paths?.[path]?.post?.requestBody?.content ?? {}
        assert.deepEqual(Object.keys(content), ['application/json'], `${path}: JSON only`)
      }
    })
  })
})
