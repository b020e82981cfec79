import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { randomBytes, randomUUID } from 'node:crypto'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { gcm } from '@noble/ciphers/aes.js'
import { hmac } from '@noble/hashes/hmac.js'
import { sha256 } from '@noble/hashes/sha2.js'
import { ml_kem512, ml_kem768, ml_kem1024 } from '@noble/post-quantum/ml-kem.js'
import { type HttpResult, startTestService, type TestService } from '../helpers/service.ts'

/**
 * docs/envelope-format.md promises that anyone holding an exported private key can decrypt what
 * POST /encrypt returns without the service. This file holds a decryptor (and, for the reverse
 * direction, an encryptor) written from that page alone, with independent cryptography: noble
 * for ML-KEM, HMAC-SHA256 and AES-256-GCM, and the openssl CLI for RSA-OAEP-SHA256. It does not
 * read or import src/crypto/envelope.ts. Every constant below is quoted from the document.
 */

// ---- The document, as code -----------------------------------------------------------------

/** "The first 22 bytes are the **header**." */
const HEADER_LENGTH = 22
/** "format version: 0x01" */
const FORMAT_V1 = 0x01
/** "scheme: 0x01 = ML-KEM (512, 768 or 1024, as the key), 0x02 = RSA-OAEP-SHA256" */
const SCHEME_ML_KEM = 0x01
const SCHEME_RSA_OAEP_SHA256 = 0x02
/** "the 19 ASCII bytes of that string, without a terminator" */
const DEK_INFO = Buffer.from('kms/envelope/v1/dek', 'ascii')
/** "where "kms/envelope/v1" is those 15 ASCII bytes" */
const AAD_PREFIX = Buffer.from('kms/envelope/v1', 'ascii')
const NONCE_LENGTH = 12
const TAG_LENGTH = 16
const DEK_LENGTH = 32
/** "standard Base64 (RFC 4648 §4, with padding)" */
const STANDARD_BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/

type Kem = typeof ml_kem512
const KEMS: Record<string, Kem> = {
  'ML-KEM-512': ml_kem512,
  'ML-KEM-768': ml_kem768,
  'ML-KEM-1024': ml_kem1024,
}

interface Envelope {
  ciphertext: string
  encapsulatedKey: string
  nonce: string
  tag: string
  keyId?: string
  keyVersion?: number
}

/** What a key holder has after export-private: the ML-KEM seed expanded by noble, or a PKCS#8 file. */
type PrivateKey =
  | { kind: 'ml-kem'; algorithm: string; secretKey: Uint8Array; publicKey: Uint8Array }
  | { kind: 'rsa'; algorithm: string; pemPath: string }

interface Header {
  bytes: Buffer
  formatVersion: number
  scheme: number
  keyId: string
  keyVersion: number
}

function decodeBase64(value: string, field: string): Buffer {
  if (!STANDARD_BASE64.test(value)) throw new Error(`${field} is not standard Base64`)
  return Buffer.from(value, 'base64')
}

/** offset 0: version; 1: scheme; 2..17: the UUID's 16 bytes; 18..21: key version, uint32 big-endian. */
function parseHeader(encapsulatedKey: Buffer): Header {
  if (encapsulatedKey.length <= HEADER_LENGTH) throw new Error('encapsulatedKey shorter than its header')
  const bytes = encapsulatedKey.subarray(0, HEADER_LENGTH)
  const hex = bytes.subarray(2, 18).toString('hex')
  return {
    bytes,
    formatVersion: bytes[0]!,
    scheme: bytes[1]!,
    keyId: [hex.slice(0, 8), hex.slice(8, 12), hex.slice(12, 16), hex.slice(16, 20), hex.slice(20)].join('-'),
    keyVersion: bytes.readUInt32BE(18),
  }
}

/** DEK = HMAC-SHA256(key = ss, message = "kms/envelope/v1/dek" || header || 0x01) */
function mlKemDek(sharedSecret: Uint8Array, header: Uint8Array): Uint8Array {
  return hmac(sha256, sharedSecret, Buffer.concat([DEK_INFO, header, Buffer.from([0x01])]))
}

let workDir = ''

function openssl(args: string[]): Buffer {
  return execFileSync('openssl', args, { stdio: ['ignore', 'pipe', 'pipe'] })
}

const OAEP_SHA256 = [
  '-pkeyopt',
  'rsa_padding_mode:oaep',
  '-pkeyopt',
  'rsa_oaep_md:sha256',
  '-pkeyopt',
  'rsa_mgf1_md:sha256',
]

/** RSAES-OAEP with SHA-256, MGF1-SHA-256 and the (default) empty label, by the openssl CLI. */
function rsaOaep(operation: '-decrypt' | '-encrypt', pemPath: string, input: Uint8Array): Buffer {
  const inPath = join(workDir, `in-${randomBytes(6).toString('hex')}`)
  writeFileSync(inPath, input)
  try {
    return openssl(['pkeyutl', operation, '-inkey', pemPath, ...OAEP_SHA256, '-in', inPath])
  } finally {
    rmSync(inPath, { force: true })
  }
}

/** "Recover the DEK as above". */
function recoverDek(header: Buffer, protectedDek: Buffer, key: PrivateKey): Uint8Array {
  if (header[1] === SCHEME_ML_KEM) {
    if (key.kind !== 'ml-kem') throw new Error('scheme 0x01 needs an ML-KEM private key')
    const sharedSecret = KEMS[key.algorithm]!.decapsulate(protectedDek, key.secretKey)
    return mlKemDek(sharedSecret, header)
  }
  if (header[1] === SCHEME_RSA_OAEP_SHA256) {
    if (key.kind !== 'rsa') throw new Error('scheme 0x02 needs an RSA private key')
    const dek = rsaOaep('-decrypt', key.pemPath, protectedDek)
    if (dek.length !== DEK_LENGTH) throw new Error(`RSA-OAEP gave a ${dek.length}-byte DEK`)
    return dek
  }
  throw new Error(`unknown scheme 0x${header[1]!.toString(16)}`)
}

/** AES-256-GCM; AAD = "kms/envelope/v1" || header || UTF-8(context). noble takes ciphertext || tag. */
function aad(header: Uint8Array, context: string): Buffer {
  return Buffer.concat([AAD_PREFIX, header, Buffer.from(context, 'utf8')])
}

function openData(dek: Uint8Array, envelope: Envelope, header: Uint8Array, context: string): Buffer {
  const nonce = decodeBase64(envelope.nonce, 'nonce')
  const tag = decodeBase64(envelope.tag, 'tag')
  if (nonce.length !== NONCE_LENGTH) throw new Error('nonce is not 12 bytes')
  if (tag.length !== TAG_LENGTH) throw new Error('tag is not 16 bytes')
  const sealed = Buffer.concat([decodeBase64(envelope.ciphertext, 'ciphertext'), tag])
  return Buffer.from(gcm(dek, nonce, aad(header, context)).decrypt(sealed))
}

/** The whole of "Decrypting without the service": the header names the key and version to use. */
function decryptEnvelope(
  envelope: Envelope,
  context: string,
  privateKeyFor: (keyId: string, keyVersion: number) => PrivateKey,
): Buffer {
  const encapsulatedKey = decodeBase64(envelope.encapsulatedKey, 'encapsulatedKey')
  const header = parseHeader(encapsulatedKey)
  if (header.formatVersion !== FORMAT_V1) throw new Error(`format version ${header.formatVersion}`)
  const key = privateKeyFor(header.keyId, header.keyVersion)
  const dek = recoverDek(header.bytes, encapsulatedKey.subarray(HEADER_LENGTH), key)
  return openData(dek, envelope, header.bytes, context)
}

/** The reverse direction, also from the page: an envelope the service has never seen. */
function encryptEnvelope(
  keyId: string,
  keyVersion: number,
  key: PrivateKey,
  plaintext: Buffer,
  context: string,
): Envelope {
  const header = Buffer.alloc(HEADER_LENGTH)
  header[0] = FORMAT_V1
  header[1] = key.kind === 'ml-kem' ? SCHEME_ML_KEM : SCHEME_RSA_OAEP_SHA256
  Buffer.from(keyId.replaceAll('-', ''), 'hex').copy(header, 2)
  header.writeUInt32BE(keyVersion, 18)
  let dek: Uint8Array
  let protectedDek: Uint8Array
  if (key.kind === 'ml-kem') {
    const { cipherText, sharedSecret } = KEMS[key.algorithm]!.encapsulate(key.publicKey)
    dek = mlKemDek(sharedSecret, header)
    protectedDek = cipherText
  } else {
    dek = randomBytes(DEK_LENGTH)
    protectedDek = rsaOaep('-encrypt', key.pemPath, dek)
  }
  const nonce = randomBytes(NONCE_LENGTH)
  const sealed = gcm(dek, nonce, aad(header, context)).encrypt(plaintext)
  return {
    ciphertext: Buffer.from(sealed.subarray(0, sealed.length - TAG_LENGTH)).toString('base64'),
    encapsulatedKey: Buffer.concat([header, protectedDek]).toString('base64'),
    nonce: nonce.toString('base64'),
    tag: Buffer.from(sealed.subarray(sealed.length - TAG_LENGTH)).toString('base64'),
  }
}

// ---- Test data ------------------------------------------------------------------------------

interface Case {
  algorithm: string
  scheme: number
  /** "768 / 1088 / 1568 bytes for ML-KEM-512/768/1024"; "modulus size: 256 / 384 / 512 bytes". */
  protectedLength: number
}

const CASES: Case[] = [
  { algorithm: 'ML-KEM-512', scheme: SCHEME_ML_KEM, protectedLength: 768 },
  { algorithm: 'ML-KEM-768', scheme: SCHEME_ML_KEM, protectedLength: 1088 },
  { algorithm: 'ML-KEM-1024', scheme: SCHEME_ML_KEM, protectedLength: 1568 },
  { algorithm: 'RSA-2048', scheme: SCHEME_RSA_OAEP_SHA256, protectedLength: 256 },
  { algorithm: 'RSA-3072', scheme: SCHEME_RSA_OAEP_SHA256, protectedLength: 384 },
]

const PLAINTEXTS: { name: string; bytes: Buffer }[] = [
  { name: 'empty', bytes: Buffer.alloc(0) },
  { name: '1 byte', bytes: randomBytes(1) },
  { name: '1000 random bytes', bytes: randomBytes(1000) },
  { name: 'UTF-8 text', bytes: Buffer.from('Grüße aus Zürich — 東京の鍵 ✓ 🔐', 'utf8') },
]

/** undefined: the request carries no context, which the document says is the empty context. */
const CONTEXTS: (string | undefined)[] = [undefined, 'orders/42', 'région/東京']

const uuidBytes = (uuid: string): Buffer => Buffer.from(uuid.replaceAll('-', ''), 'hex')

function flipBit(buffer: Buffer, index: number, mask = 0x01): Buffer {
  const copy = Buffer.from(buffer)
  copy[index]! ^= mask
  return copy
}

function withBytes(
  envelope: Envelope,
  field: 'ciphertext' | 'encapsulatedKey' | 'nonce' | 'tag',
  bytes: Buffer,
) {
  return { ...envelope, [field]: bytes.toString('base64') }
}

function assertAuthenticationFails(run: () => unknown, what: string): void {
  assert.throws(run, /aes-gcm: invalid tag/, what)
}

function assertDecryptionFailed(res: HttpResult, what: string): void {
  assert.equal(res.status, 400, `${what}: ${res.text}`)
  assert.equal(res.body.error, 'decryption_failed', `${what}: ${res.text}`)
  assert.equal(res.body.plaintext, undefined, what)
}

// ---- Tests ----------------------------------------------------------------------------------

describe('envelope format v1: a decryptor written from docs/envelope-format.md alone', () => {
  let svc: TestService
  let apiKey: string
  /** Exported private keys by "keyId/version": the decryptor picks one from the header. */
  const exported = new Map<string, PrivateKey>()

  const call = (method: string, path: string, body?: unknown) =>
    svc.request(method, `/api/v1${path}`, { key: apiKey, ...(body === undefined ? {} : { body }) })

  const lookup = (keyId: string, keyVersion: number): PrivateKey => {
    const key = exported.get(`${keyId}/${keyVersion}`)
    if (!key) throw new Error(`no exported private key for ${keyId} version ${keyVersion}`)
    return key
  }

  async function createKey(algorithm: string): Promise<{ id: string; name: string }> {
    const name = `envelope-${algorithm.toLowerCase()}-${randomBytes(3).toString('hex')}`
    const res = await call('POST', '/keys', { name, keyType: 'Encryption', algorithm, exportable: true })
    assert.equal(res.status, 201, res.text)
    assert.equal(res.body.algorithm, algorithm)
    assert.equal(res.body.version, 1)
    return { id: res.body.id, name }
  }

  async function exportPrivateKey(key: { id: string; name: string }, algorithm: string, version: number) {
    const format = algorithm.startsWith('ML-KEM') ? 'RAW' : 'PEM'
    const res = await call('POST', `/keys/${key.id}/export-private`, { confirm: key.name, format, version })
    assert.equal(res.status, 200, res.text)
    const material: string = res.body.privateKey
    let privateKey: PrivateKey
    if (format === 'RAW') {
      // "the 64-byte seed (format: "RAW"), which FIPS 203 ML-KEM.KeyGen_internal(d, z) expands"
      const seed = decodeBase64(material, 'privateKey')
      assert.equal(seed.length, 64, 'the ML-KEM seed is 64 bytes')
      const pair = KEMS[algorithm]!.keygen(new Uint8Array(seed))
      privateKey = { kind: 'ml-kem', algorithm, secretKey: pair.secretKey, publicKey: pair.publicKey }
    } else {
      assert.match(material, /^-----BEGIN PRIVATE KEY-----\n/, 'PKCS#8 PEM')
      const pemPath = join(workDir, `${key.id}-v${version}.pem`)
      writeFileSync(pemPath, material, { mode: 0o600 })
      privateKey = { kind: 'rsa', algorithm, pemPath }
    }
    exported.set(`${key.id}/${version}`, privateKey)
    return privateKey
  }

  async function encrypt(keyId: string, plaintext: Buffer, context?: string): Promise<Envelope> {
    const res = await call('POST', '/encrypt', {
      keyId,
      plaintext: plaintext.toString('base64'),
      ...(context === undefined ? {} : { context }),
    })
    assert.equal(res.status, 200, res.text)
    return res.body
  }

  /** POST /decrypt with the envelope fields only: the service reads the key from the header too. */
  function serviceDecrypt(envelope: Envelope, context?: string, extra: Record<string, unknown> = {}) {
    const { ciphertext, encapsulatedKey, nonce, tag } = envelope
    return call('POST', '/decrypt', {
      ciphertext,
      encapsulatedKey,
      nonce,
      tag,
      ...(context === undefined ? {} : { context }),
      ...extra,
    })
  }

  before(async () => {
    workDir = mkdtempSync(join(tmpdir(), 'kms-envelope-'))
    svc = await startTestService()
    apiKey = (await svc.createTenant()).key
  })

  after(async () => {
    await svc?.stop()
    if (workDir) rmSync(workDir, { recursive: true, force: true })
  })

  for (const c of CASES) {
    describe(c.algorithm, () => {
      let key: { id: string; name: string }
      let privateKey: PrivateKey

      before(async () => {
        key = await createKey(c.algorithm)
        privateKey = await exportPrivateKey(key, c.algorithm, 1)
      })

      test(`the header is 01 ${c.scheme.toString(16).padStart(2, '0')} <key id> <version 1> and the protected DEK is ${c.protectedLength} bytes`, async () => {
        for (const { name, bytes } of PLAINTEXTS) {
          const envelope = await encrypt(key.id, bytes, 'région/東京')
          for (const field of ['ciphertext', 'encapsulatedKey', 'nonce', 'tag'] as const) {
            assert.equal(typeof envelope[field], 'string', `${name}: ${field}`)
            assert.match(envelope[field], STANDARD_BASE64, `${name}: ${field} is standard padded Base64`)
          }
          const encapsulatedKey = decodeBase64(envelope.encapsulatedKey, 'encapsulatedKey')
          assert.equal(
            encapsulatedKey.length,
            HEADER_LENGTH + c.protectedLength,
            `${name}: encapsulatedKey length`,
          )
          const header = parseHeader(encapsulatedKey)
          assert.equal(header.formatVersion, FORMAT_V1, `${name}: byte 0`)
          assert.equal(header.scheme, c.scheme, `${name}: byte 1`)
          assert.ok(
            header.bytes.subarray(2, 18).equals(uuidBytes(key.id)),
            `${name}: bytes 2..17 are the UUID`,
          )
          assert.equal(header.keyId, key.id, name)
          assert.equal(header.keyVersion, 1, `${name}: bytes 18..21`)
          assert.equal(envelope.keyId, header.keyId, `${name}: keyId repeats the header`)
          assert.equal(envelope.keyVersion, header.keyVersion, `${name}: keyVersion repeats the header`)
          assert.equal(decodeBase64(envelope.nonce, 'nonce').length, NONCE_LENGTH, `${name}: nonce`)
          assert.equal(decodeBase64(envelope.tag, 'tag').length, TAG_LENGTH, `${name}: tag`)
          assert.equal(
            decodeBase64(envelope.ciphertext, 'ciphertext').length,
            bytes.length,
            `${name}: ciphertext has the plaintext's length`,
          )
          const dek = recoverDek(header.bytes, encapsulatedKey.subarray(HEADER_LENGTH), privateKey)
          assert.equal(dek.length, DEK_LENGTH, `${name}: the DEK is 32 bytes`)
        }
      })

      test('decrypts every plaintext with and without a context, and POST /decrypt agrees', async () => {
        for (const { name, bytes } of PLAINTEXTS) {
          for (const context of CONTEXTS) {
            const what = `${name}, context ${JSON.stringify(context)}`
            const envelope = await encrypt(key.id, bytes, context)
            const mine = decryptEnvelope(envelope, context ?? '', lookup)
            assert.ok(mine.equals(bytes), `${what}: the document decryptor recovers the plaintext`)

            const res = await serviceDecrypt(envelope, context)
            assert.equal(res.status, 200, `${what}: ${res.text}`)
            assert.ok(
              decodeBase64(res.body.plaintext, 'plaintext').equals(mine),
              `${what}: the service agrees`,
            )
            assert.equal(res.body.keyId, key.id, what)
            assert.equal(res.body.keyVersion, 1, what)
          }
        }
        // "context ... (empty when the request had none)": an absent and an empty context are the same AAD.
        const noContext = await encrypt(key.id, PLAINTEXTS[3]!.bytes)
        const emptyContext = await encrypt(key.id, PLAINTEXTS[3]!.bytes, '')
        for (const [envelope, context] of [
          [noContext, ''],
          [emptyContext, undefined],
        ] as const) {
          assert.ok(decryptEnvelope(envelope, '', lookup).equals(PLAINTEXTS[3]!.bytes))
          const res = await serviceDecrypt(envelope, context, { keyId: key.id })
          assert.equal(res.status, 200, res.text)
          assert.ok(decodeBase64(res.body.plaintext, 'plaintext').equals(PLAINTEXTS[3]!.bytes))
        }
      })

      test('a wrong context, a changed header byte or a flipped bit fails authentication', async () => {
        const context = 'région/東京'
        const plaintext = PLAINTEXTS[2]!.bytes
        const envelope = await encrypt(key.id, plaintext, context)
        assert.ok(
          decryptEnvelope(envelope, context, lookup).equals(plaintext),
          'the untouched envelope opens',
        )

        for (const wrong of ['', 'région/東京 ', 'region/東京', 'région/東亰', 'RÉGION/東京', 'orders/42']) {
          assertAuthenticationFails(
            () => decryptEnvelope(envelope, wrong, lookup),
            `context ${JSON.stringify(wrong)}`,
          )
        }
        const unbound = await encrypt(key.id, plaintext)
        assert.ok(decryptEnvelope(unbound, '', lookup).equals(plaintext))
        assertAuthenticationFails(
          () => decryptEnvelope(unbound, context, lookup),
          'a context the request lacked',
        )

        // Every header byte is inside the AAD: with the right DEK, any changed header byte fails.
        const encapsulatedKey = decodeBase64(envelope.encapsulatedKey, 'encapsulatedKey')
        const header = encapsulatedKey.subarray(0, HEADER_LENGTH)
        const protectedDek = encapsulatedKey.subarray(HEADER_LENGTH)
        const dek = recoverDek(header, protectedDek, privateKey)
        assert.ok(openData(dek, envelope, header, context).equals(plaintext))
        const version2 = Buffer.from(header)
        version2.writeUInt32BE(2, 18)
        const tamperedHeaders = [
          version2,
          ...Array.from({ length: HEADER_LENGTH }, (_, i) => flipBit(header, i)),
        ]
        for (const [i, tampered] of tamperedHeaders.entries()) {
          assertAuthenticationFails(
            () => openData(dek, envelope, tampered, context),
            `header #${i} in the AAD`,
          )
        }
        if (privateKey.kind === 'ml-kem') {
          // ...and inside the KDF input: the DEK derived under a changed header does not open it either.
          const sharedSecret = KEMS[c.algorithm]!.decapsulate(protectedDek, privateKey.secretKey)
          assert.ok(Buffer.from(mlKemDek(sharedSecret, header)).equals(Buffer.from(dek)))
          for (const [i, tampered] of tamperedHeaders.entries()) {
            const otherDek = mlKemDek(sharedSecret, tampered)
            assert.ok(!Buffer.from(otherDek).equals(Buffer.from(dek)), `header #${i} changes the DEK`)
            assertAuthenticationFails(
              () => openData(otherDek, envelope, header, context),
              `header #${i} in the KDF`,
            )
            assertAuthenticationFails(() => openData(otherDek, envelope, tampered, context), `header #${i}`)
          }
        }

        // The whole decryptor, handed the right key material regardless of what the header now says.
        const sameKey = () => privateKey
        const keyVersion2 = withBytes(envelope, 'encapsulatedKey', Buffer.concat([version2, protectedDek]))
        assertAuthenticationFails(() => decryptEnvelope(keyVersion2, context, sameKey), 'key version 2')
        const otherKeyId = Buffer.from(header)
        uuidBytes(randomUUID()).copy(otherKeyId, 2)
        const keyIdChanged = withBytes(envelope, 'encapsulatedKey', Buffer.concat([otherKeyId, protectedDek]))
        assertAuthenticationFails(() => decryptEnvelope(keyIdChanged, context, sameKey), 'another key id')
        const ciphertext = decodeBase64(envelope.ciphertext, 'ciphertext')
        const tag = decodeBase64(envelope.tag, 'tag')
        const nonce = decodeBase64(envelope.nonce, 'nonce')
        const flipped: [string, Envelope][] = [
          ['ciphertext bit', withBytes(envelope, 'ciphertext', flipBit(ciphertext, 500))],
          ['tag bit', withBytes(envelope, 'tag', flipBit(tag, 15, 0x80))],
          ['nonce bit', withBytes(envelope, 'nonce', flipBit(nonce, 0))],
        ]
        for (const [what, changed] of flipped)
          assertAuthenticationFails(() => decryptEnvelope(changed, context, lookup), what)
        const dekFlipped = withBytes(envelope, 'encapsulatedKey', flipBit(encapsulatedKey, HEADER_LENGTH + 7))
        if (privateKey.kind === 'ml-kem') {
          // ML-KEM's implicit rejection yields an unrelated secret, so AES-GCM is what refuses.
          assertAuthenticationFails(() => decryptEnvelope(dekFlipped, context, lookup), 'protected DEK bit')
        } else {
          assert.throws(() => decryptEnvelope(dekFlipped, context, lookup), 'protected DEK bit: OAEP refuses')
        }

        // "The service answers every failure ... with the same 400 decryption_failed".
        const refusals: [string, Envelope, string | undefined][] = [
          ['wrong context', envelope, 'région/東亰'],
          ['no context', envelope, undefined],
          ['key version 2', keyVersion2, context],
          ['another key id', keyIdChanged, context],
          [
            'format version byte',
            withBytes(envelope, 'encapsulatedKey', flipBit(encapsulatedKey, 0, 0x03)),
            context,
          ],
          ['scheme byte', withBytes(envelope, 'encapsulatedKey', flipBit(encapsulatedKey, 1, 0x03)), context],
          ['key id bit', withBytes(envelope, 'encapsulatedKey', flipBit(encapsulatedKey, 10)), context],
          ['protected DEK bit', dekFlipped, context],
          ...flipped.map(([what, changed]): [string, Envelope, string] => [what, changed, context]),
        ]
        for (const [what, changed, ctx] of refusals)
          assertDecryptionFailed(await serviceDecrypt(changed, ctx), what)
      })

      test('POST /decrypt opens an envelope built from the document', async () => {
        for (const context of CONTEXTS) {
          for (const { name, bytes } of PLAINTEXTS) {
            const what = `${name}, context ${JSON.stringify(context)}`
            const envelope = encryptEnvelope(key.id, 1, privateKey, bytes, context ?? '')
            assert.ok(decryptEnvelope(envelope, context ?? '', lookup).equals(bytes), `${what}: round trip`)
            const res = await serviceDecrypt(envelope, context)
            assert.equal(res.status, 200, `${what}: ${res.text}`)
            assert.ok(decodeBase64(res.body.plaintext, 'plaintext').equals(bytes), what)
            assert.equal(res.body.keyId, key.id, what)
            assert.equal(res.body.keyVersion, 1, what)
          }
        }
      })

      test('after rotation the header says version 2; each envelope opens with its own version', async () => {
        const rotating = await createKey(c.algorithm)
        const v1Key = await exportPrivateKey(rotating, c.algorithm, 1)
        const plaintext1 = Buffer.from(`before rotation: ${randomUUID()}`)
        const v1 = await encrypt(rotating.id, plaintext1, 'région/東京')

        const rotated = await call('POST', `/keys/${rotating.id}/rotate`)
        assert.equal(rotated.status, 200, rotated.text)
        assert.equal(rotated.body.version, 2)
        const v2Key = await exportPrivateKey(rotating, c.algorithm, 2)
        const plaintext2 = Buffer.from(`after rotation: ${randomUUID()}`)
        const v2 = await encrypt(rotating.id, plaintext2, 'région/東京')

        const h1 = parseHeader(decodeBase64(v1.encapsulatedKey, 'encapsulatedKey'))
        const h2 = parseHeader(decodeBase64(v2.encapsulatedKey, 'encapsulatedKey'))
        assert.equal(h1.keyVersion, 1)
        assert.equal(h2.keyVersion, 2, 'the header names version 2')
        assert.equal(v2.keyVersion, 2)
        assert.ok(h2.bytes.subarray(0, 2).equals(h1.bytes.subarray(0, 2)), 'same format version and scheme')
        assert.equal(h2.keyId, rotating.id)
        assert.equal(h2.bytes.readUInt32BE(18), 2)
        assert.deepEqual([...h2.bytes.subarray(18)], [0, 0, 0, 2], 'big-endian')

        // The decryptor picks the version the header names.
        assert.ok(decryptEnvelope(v1, 'région/東京', lookup).equals(plaintext1), 'v1 envelope, v1 key')
        assert.ok(decryptEnvelope(v2, 'région/東京', lookup).equals(plaintext2), 'v2 envelope, v2 key')
        // The versions' materials differ: the other version's key does not open either envelope.
        const failsWith = (envelope: Envelope, material: PrivateKey, what: string) => {
          if (material.kind === 'ml-kem') {
            assertAuthenticationFails(() => decryptEnvelope(envelope, 'région/東京', () => material), what)
          } else {
            assert.throws(() => decryptEnvelope(envelope, 'région/東京', () => material), what)
          }
        }
        failsWith(v1, v2Key, 'v1 envelope, v2 key')
        failsWith(v2, v1Key, 'v2 envelope, v1 key')

        for (const [envelope, plaintext, version] of [
          [v1, plaintext1, 1],
          [v2, plaintext2, 2],
        ] as const) {
          const res = await serviceDecrypt(envelope, 'région/東京')
          assert.equal(res.status, 200, res.text)
          assert.ok(decodeBase64(res.body.plaintext, 'plaintext').equals(plaintext), `v${version}`)
          assert.equal(res.body.keyVersion, version)
        }
      })
    })
  }

  test('any key version the header can hold, up to 2^32 - 1, is refused with 400 decryption_failed', async () => {
    // "key version: unsigned 32-bit big-endian integer (>= 1)" and "The service answers every failure
    // ... with the same 400 decryption_failed": a version the key never had is one more wrong key.
    for (const algorithm of ['ML-KEM-512', 'RSA-2048']) {
      const key = await createKey(algorithm)
      await exportPrivateKey(key, algorithm, 1)
      const plaintext = randomBytes(33)
      const envelope = await encrypt(key.id, plaintext, 'région/東京')
      assert.ok(decryptEnvelope(envelope, 'région/東京', lookup).equals(plaintext))
      const encapsulatedKey = decodeBase64(envelope.encapsulatedKey, 'encapsulatedKey')
      for (const version of [0, 2, 2 ** 31 - 1, 2 ** 31, 2 ** 32 - 1]) {
        const changed = Buffer.from(encapsulatedKey)
        changed.writeUInt32BE(version, 18)
        const res = await serviceDecrypt(withBytes(envelope, 'encapsulatedKey', changed), 'région/東京')
        assertDecryptionFailed(res, `${algorithm}: header key version ${version}`)
      }
    }
  })
})
