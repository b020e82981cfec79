import assert from 'node:assert/strict'
import { createHash, createPublicKey, generateKeyPairSync, randomBytes } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, test } from 'node:test'
import { ml_kem768_x25519 } from '@noble/post-quantum/hybrid.js'
import {
  isXWingSpki,
  XWING,
  XWING_OID,
  XWingError,
  type XWingErrorCode,
  xwingCombiner,
  xwingDecapsulate,
  xwingEncapsulate,
  xwingGenerateKey,
  xwingKeyFromSeed,
  xwingPkcs8,
  xwingPublicKey,
  xwingPublicKeyFromSpki,
  xwingSeedFromPkcs8,
  xwingSpki,
} from '../../src/crypto/xwing.ts'
import { int, octets, oid, oidContent, seq, tlv } from '../helpers/der.ts'

/**
 * X-Wing (src/crypto/xwing.ts, node:crypto only) against the draft's own vectors
 * (test/vectors/xwing, copied from the draft's repository; SOURCE.txt) and against
 * @noble/post-quantum's ml_kem768_x25519, an independent implementation that is first checked
 * against the same vectors.
 *
 * What node:crypto allows: key generation from the seed (pk equal), decapsulation of the
 * vector's ciphertext (ss equal) and the X25519 half of EncapsulateDerand (ct_X equal). The
 * ML-KEM half of encapsulation takes no caller randomness in node (EncapsulateDerand cannot be
 * run), so encapsulation is checked across implementations instead: node encapsulates and noble
 * decapsulates, and the reverse.
 */

const VECTORS_DIR = join(import.meta.dirname, '..', 'vectors', 'xwing')

interface Vector {
  seed: string
  sk: string
  pk: string
  eseed: string
  ct: string
  ss: string
}
const VECTORS = (JSON.parse(readFileSync(join(VECTORS_DIR, 'test-vectors.json'), 'utf8')) as Vector[]).map(
  (v) => ({
    seed: Buffer.from(v.seed, 'hex'),
    sk: Buffer.from(v.sk, 'hex'),
    pk: Buffer.from(v.pk, 'hex'),
    eseed: Buffer.from(v.eseed, 'hex'),
    ct: Buffer.from(v.ct, 'hex'),
    ss: Buffer.from(v.ss, 'hex'),
  }),
)

const pemBody = (file: string) =>
  Buffer.from(
    readFileSync(join(VECTORS_DIR, file), 'utf8')
      .split('\n')
      .filter((line) => !line.startsWith('-----'))
      .join(''),
    'base64',
  )

/** A `random` that hands out the given bytes once, then refuses. */
function fixedRandom(bytes: Buffer): (length: number) => Buffer {
  let used = false
  return (length) => {
    assert.equal(used, false, 'random asked twice')
    assert.equal(length, bytes.length)
    used = true
    return Buffer.from(bytes)
  }
}

function throwsXWing(fn: () => unknown, code: XWingErrorCode): void {
  assert.throws(fn, (error: unknown) => {
    assert.ok(error instanceof XWingError, `expected an XWingError, got ${String(error)}`)
    assert.equal(error.code, code)
    return true
  })
}

const hex = (bytes: Uint8Array) => Buffer.from(bytes).toString('hex')

describe('X-Wing: the draft test vectors', () => {
  test('there are the draft appendix three vectors, each with the draft sizes', () => {
    assert.equal(VECTORS.length, 3)
    for (const v of VECTORS) {
      assert.equal(v.seed.length, XWING.seedBytes)
      assert.equal(v.pk.length, XWING.publicKeyBytes)
      assert.equal(v.ct.length, XWING.ciphertextBytes)
      assert.equal(v.ss.length, XWING.sharedSecretBytes)
      assert.equal(v.eseed.length, 64)
    }
  })

  test('the independent implementation (noble) reproduces every vector, encapsulation included', () => {
    for (const v of VECTORS) {
      const keys = ml_kem768_x25519.keygen(v.seed)
      assert.equal(hex(keys.secretKey), hex(v.sk))
      assert.equal(hex(keys.publicKey), hex(v.pk))
      const { sharedSecret, cipherText } = ml_kem768_x25519.encapsulate(v.pk, v.eseed)
      assert.equal(hex(cipherText), hex(v.ct))
      assert.equal(hex(sharedSecret), hex(v.ss))
      assert.equal(hex(ml_kem768_x25519.decapsulate(v.ct, v.sk)), hex(v.ss))
    }
  })

  test('key generation from the seed gives the vector public key (the seed is the private key)', () => {
    for (const v of VECTORS) {
      assert.equal(hex(v.sk), hex(v.seed), 'the draft: sk is the seed')
      const key = xwingKeyFromSeed(v.seed)
      assert.equal(hex(key.publicKey.bytes), hex(v.pk))
      assert.equal(key.mlKem.asymmetricKeyType, 'ml-kem-768')
      assert.equal(key.x25519.asymmetricKeyType, 'x25519')
      assert.equal(key.mlKem.type, 'private')
      assert.equal(key.publicKey.mlKem.type, 'public')
    }
  })

  test('decapsulating the vector ciphertext gives the vector shared secret', () => {
    for (const v of VECTORS) {
      assert.equal(hex(xwingDecapsulate(xwingKeyFromSeed(v.sk), v.ct)), hex(v.ss))
    }
  })

  test('the vector public key parses to the same bytes and KeyObjects as the generated one', () => {
    for (const v of VECTORS) {
      const parsed = xwingPublicKey(v.pk)
      const generated = xwingKeyFromSeed(v.seed).publicKey
      assert.equal(hex(parsed.bytes), hex(v.pk))
      assert.ok(parsed.mlKem.equals(generated.mlKem))
      assert.ok(parsed.x25519.equals(generated.x25519))
    }
  })

  test('encapsulation with the vector X25519 randomness (eseed[32:64]) gives the vector ct_X, and noble opens the result', () => {
    for (const v of VECTORS) {
      const { sharedKey, ciphertext } = xwingEncapsulate(
        xwingPublicKey(v.pk),
        fixedRandom(v.eseed.subarray(32)),
      )
      assert.equal(ciphertext.length, XWING.ciphertextBytes)
      assert.equal(sharedKey.length, XWING.sharedSecretBytes)
      assert.equal(hex(ciphertext.subarray(1088)), hex(v.ct.subarray(1088)), 'ct_X is the vector one')
      // ct_M comes from OpenSSL's own coins (node's ML-KEM takes none), so it and ss differ from the vector.
      assert.notEqual(hex(ciphertext.subarray(0, 1088)), hex(v.ct.subarray(0, 1088)))
      assert.equal(hex(ml_kem768_x25519.decapsulate(ciphertext, v.sk)), hex(sharedKey))
    }
  })

  test('the combiner is SHA3-256 over ss_M, ss_X, ct_X, pk_X and the label 5c2e2f2f5e5c', () => {
    const [ssM, ssX, ctX, pkX] = [1, 2, 3, 4].map((n) => Buffer.alloc(32, n)) as [
      Buffer,
      Buffer,
      Buffer,
      Buffer,
    ]
    const expected = createHash('sha3-256')
      .update(Buffer.concat([ssM, ssX, ctX, pkX, Buffer.from('\\.//^\\', 'ascii')]))
      .digest()
    assert.equal(Buffer.from('\\.//^\\', 'ascii').toString('hex'), '5c2e2f2f5e5c')
    assert.equal(hex(xwingCombiner(ssM, ssX, ctX, pkX)), hex(expected))
  })
})

describe('X-Wing: the draft X.509 example (seed 00..1f)', () => {
  const seed = Buffer.from(Array.from({ length: 32 }, (_, i) => i))

  test('the SubjectPublicKeyInfo of the key from seed 00..1f is the draft example, byte for byte', () => {
    const spki = pemBody('xwing.pub')
    assert.equal(hex(xwingSpki(xwingKeyFromSeed(seed).publicKey.bytes)), hex(spki))
    assert.equal(hex(xwingPublicKeyFromSpki(spki)), hex(xwingKeyFromSeed(seed).publicKey.bytes))
  })

  test('the OneAsymmetricKey of seed 00..1f is the draft example, and reads back to the seed', () => {
    const pkcs8 = pemBody('xwing.priv')
    assert.equal(hex(xwingPkcs8(seed)), hex(pkcs8))
    assert.equal(hex(xwingSeedFromPkcs8(pkcs8)), hex(seed))
  })

  test('both structures are id-XWing (1.3.6.1.4.1.62253.25722, parameters absent) around the raw key bytes', () => {
    assert.equal(XWING_OID, '1.3.6.1.4.1.62253.25722')
    const algorithm = seq(oid(oidContent(XWING_OID)))
    const { publicKey } = xwingKeyFromSeed(seed)
    const spki = seq(algorithm, tlv(0x03, Buffer.of(0), publicKey.bytes))
    assert.equal(hex(xwingSpki(publicKey.bytes)), hex(spki))
    assert.equal(hex(xwingPkcs8(seed)), hex(seq(int(0), algorithm, octets(seed))))
  })

  test('isXWingSpki tells an X-Wing SubjectPublicKeyInfo from ML-KEM-768 and X25519 ones (which node parses)', () => {
    assert.equal(isXWingSpki(pemBody('xwing.pub')), true)
    const mlKem = generateKeyPairSync('ml-kem-768').publicKey.export({ format: 'der', type: 'spki' })
    const x25519 = generateKeyPairSync('x25519').publicKey.export({ format: 'der', type: 'spki' })
    assert.equal(isXWingSpki(mlKem), false)
    assert.equal(isXWingSpki(x25519), false)
    assert.equal(isXWingSpki(pemBody('xwing.pub').subarray(1)), false)
    assert.throws(() => createPublicKey({ key: pemBody('xwing.pub'), format: 'der', type: 'spki' }))
  })

  test('a SubjectPublicKeyInfo or PKCS#8 of another algorithm, or cut short, is refused', () => {
    const spki = pemBody('xwing.pub')
    const pkcs8 = pemBody('xwing.priv')
    throwsXWing(() => xwingPublicKeyFromSpki(spki.subarray(0, spki.length - 1)), 'invalid_public_key')
    throwsXWing(() => xwingPublicKeyFromSpki(Buffer.concat([spki, Buffer.of(0)])), 'invalid_public_key')
    const otherOid = Buffer.from(spki)
    otherOid[18] = (otherOid[18]! + 1) & 0xff // last byte of the OID: 25722 becomes another arc
    throwsXWing(() => xwingPublicKeyFromSpki(otherOid), 'invalid_public_key')
    throwsXWing(() => xwingSeedFromPkcs8(pkcs8.subarray(0, pkcs8.length - 1)), 'invalid_private_key')
    const version1 = Buffer.from(pkcs8)
    version1[4] = 1 // OneAsymmetricKey v2 would carry a publicKey, which the draft forbids
    throwsXWing(() => xwingSeedFromPkcs8(version1), 'invalid_private_key')
    throwsXWing(() => xwingSeedFromPkcs8(spki), 'invalid_private_key')
  })
})

describe('X-Wing: node:crypto and noble agree on fresh keys', () => {
  test('node encapsulates, noble decapsulates the same secret (8 fresh keys)', () => {
    for (let i = 0; i < 8; i++) {
      const { seed, privateKey } = xwingGenerateKey()
      assert.equal(hex(ml_kem768_x25519.keygen(seed).publicKey), hex(privateKey.publicKey.bytes))
      const { sharedKey, ciphertext } = xwingEncapsulate(privateKey.publicKey)
      assert.equal(hex(ml_kem768_x25519.decapsulate(ciphertext, seed)), hex(sharedKey))
      assert.equal(hex(xwingDecapsulate(privateKey, ciphertext)), hex(sharedKey))
    }
  })

  test('noble encapsulates, node decapsulates the same secret (8 fresh keys)', () => {
    for (let i = 0; i < 8; i++) {
      const seed = randomBytes(32)
      const { publicKey } = ml_kem768_x25519.keygen(seed)
      const { sharedSecret, cipherText } = ml_kem768_x25519.encapsulate(publicKey)
      assert.equal(hex(xwingDecapsulate(xwingKeyFromSeed(seed), Buffer.from(cipherText))), hex(sharedSecret))
    }
  })

  test('keys and ciphertexts that crossed a thread boundary (structured clone: Uint8Array, not Buffer) still work', () => {
    const { seed, privateKey } = xwingGenerateKey()
    const cloned = structuredClone(privateKey)
    assert.equal(Buffer.isBuffer(cloned.publicKey.bytes), false)
    const { sharedKey, ciphertext } = xwingEncapsulate(cloned.publicKey)
    const plainCiphertext = new Uint8Array(ciphertext) as Buffer
    assert.equal(hex(xwingDecapsulate(cloned, plainCiphertext)), hex(sharedKey))
    assert.equal(hex(ml_kem768_x25519.decapsulate(ciphertext, seed)), hex(sharedKey))
  })

  test('two encapsulations to one key give different ciphertexts and secrets', () => {
    const { privateKey } = xwingGenerateKey()
    const a = xwingEncapsulate(privateKey.publicKey)
    const b = xwingEncapsulate(privateKey.publicKey)
    assert.notEqual(hex(a.ciphertext), hex(b.ciphertext))
    assert.notEqual(hex(a.sharedKey), hex(b.sharedKey))
  })

  test('a tampered ML-KEM half is rejected implicitly: the same unrelated secret in node and noble', () => {
    const seed = VECTORS[0]!.seed
    const tampered = Buffer.from(VECTORS[0]!.ct)
    tampered[100]! ^= 0x01
    const fromNode = xwingDecapsulate(xwingKeyFromSeed(seed), tampered)
    assert.notEqual(hex(fromNode), hex(VECTORS[0]!.ss))
    assert.equal(hex(fromNode), hex(ml_kem768_x25519.decapsulate(tampered, seed)))
  })

  test('a tampered X25519 half changes the secret the same way in node and noble', () => {
    const seed = VECTORS[1]!.seed
    const tampered = Buffer.from(VECTORS[1]!.ct)
    tampered[1100]! ^= 0x01
    const fromNode = xwingDecapsulate(xwingKeyFromSeed(seed), tampered)
    assert.notEqual(hex(fromNode), hex(VECTORS[1]!.ss))
    assert.equal(hex(fromNode), hex(ml_kem768_x25519.decapsulate(tampered, seed)))
  })
})

describe('X-Wing: malformed input is a clean XWingError', () => {
  const { privateKey } = xwingGenerateKey()
  const { ciphertext } = xwingEncapsulate(privateKey.publicKey)

  test('a seed of other than 32 bytes is refused', () => {
    for (const length of [0, 1, 31, 33, 64])
      throwsXWing(() => xwingKeyFromSeed(Buffer.alloc(length, 7)), 'invalid_private_key')
    throwsXWing(() => xwingPkcs8(Buffer.alloc(31)), 'invalid_private_key')
  })

  test('a public key of other than 1216 bytes is refused', () => {
    for (const length of [0, 32, 1184, 1215, 1217]) {
      throwsXWing(() => xwingPublicKey(Buffer.alloc(length)), 'invalid_public_key')
    }
    throwsXWing(() => xwingPublicKey(privateKey.publicKey.bytes.subarray(1)), 'invalid_public_key')
    throwsXWing(() => xwingSpki(Buffer.alloc(1184)), 'invalid_public_key')
  })

  test('a ciphertext of other than 1120 bytes is refused', () => {
    for (const bad of [
      Buffer.alloc(0),
      ciphertext.subarray(0, 1088),
      ciphertext.subarray(1),
      Buffer.concat([ciphertext, Buffer.of(0)]),
    ]) {
      throwsXWing(() => xwingDecapsulate(privateKey, bad), 'invalid_ciphertext')
    }
  })

  test('an ML-KEM half that fails the FIPS 203 encapsulation key check is refused', () => {
    const bad = Buffer.from(privateKey.publicKey.bytes)
    bad[0] = 0xff // with bad[1] = 0xff, the first 12-bit coefficient is 0xfff = 4095, at or above q = 3329
    bad[1] = 0xff
    throwsXWing(() => xwingPublicKey(bad), 'invalid_public_key')
    assert.throws(() => ml_kem768_x25519.encapsulate(bad), 'noble refuses it too')
  })

  test('a low-order X25519 half of the public key is refused (node would fail every encapsulation to it)', () => {
    for (const point of ['00', '01', 'e0eb7a7c3b41b8ae1656e3faf19fc46ada098deb9c32b1fd866205165f49b800']) {
      const bad = Buffer.from(privateKey.publicKey.bytes)
      Buffer.from(point.padEnd(64, '0'), 'hex').copy(bad, 1184)
      throwsXWing(() => xwingPublicKey(bad), 'invalid_public_key')
      assert.throws(() => ml_kem768_x25519.encapsulate(bad), 'noble cannot encapsulate to it either')
    }
  })

  test('a low-order X25519 half of the ciphertext fails decapsulation, in node as in noble', () => {
    // The draft's Decapsulate has no such check (its reference X25519 returns the all-zero
    // secret); OpenSSL and noble both refuse an all-zero X25519 output (RFC 7748 §6.1).
    for (const v of VECTORS) {
      for (const point of ['00', '01', 'e0eb7a7c3b41b8ae1656e3faf19fc46ada098deb9c32b1fd866205165f49b800']) {
        const bad = Buffer.from(v.ct)
        Buffer.from(point.padEnd(64, '0'), 'hex').copy(bad, 1088)
        throwsXWing(() => xwingDecapsulate(xwingKeyFromSeed(v.seed), bad), 'decapsulation_failed')
        assert.throws(() => ml_kem768_x25519.decapsulate(bad, v.seed))
      }
    }
    const bad = Buffer.from(ciphertext)
    bad.fill(0, 1088)
    throwsXWing(() => xwingDecapsulate(privateKey, bad), 'decapsulation_failed')
  })

  test('error messages carry no key or ciphertext bytes', () => {
    const seed = Buffer.alloc(31, 0xab)
    try {
      xwingKeyFromSeed(seed)
      assert.fail('expected a refusal')
    } catch (error) {
      assert.ok(error instanceof XWingError)
      assert.doesNotMatch(error.message, /abab/i)
      assert.equal(error.message, 'An X-Wing seed is 32 bytes, not 31')
    }
  })
})
