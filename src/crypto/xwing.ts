import {
  createHash,
  createPrivateKey,
  createPublicKey,
  decapsulate,
  diffieHellman,
  encapsulate,
  type KeyObject,
  randomBytes,
} from 'node:crypto'

/**
 * X-Wing, the hybrid KEM of ML-KEM-768 and X25519 (draft-connolly-cfrg-xwing-kem, -10 as read;
 * -11 of 2026-09-23 keeps the construction and vectors; draft-irtf-cfrg-concrete-hybrid-kems
 * calls the same KEM MLKEM768-X25519; HPKE KEM id 0x647A), on node:crypto alone:
 *
 *   expandDecapsulationKey(sk) : expanded = SHAKE256(sk, 96 bytes)
 *                                (pk_M, sk_M) = ML-KEM-768.KeyGen_internal(d = expanded[0:32], z = expanded[32:64])
 *                                sk_X = expanded[64:96], pk_X = X25519(sk_X, 9)
 *   public key  pk = pk_M (1184) || pk_X (32)                  = 1216 bytes
 *   ciphertext  ct = ct_M (1088) || ct_X (32)                  = 1120 bytes
 *   Combiner    ss = SHA3-256(ss_M || ss_X || ct_X || pk_X || "\.//^\")   (label 5c2e2f2f5e5c)
 *   Encapsulate : ek_X = random(32), ct_X = X25519(ek_X, 9), ss_X = X25519(ek_X, pk_X),
 *                 (ss_M, ct_M) = ML-KEM-768.Encaps(pk_M)
 *   Decapsulate : ss_M = ML-KEM-768.Decaps(sk_M, ct_M), ss_X = X25519(sk_X, ct_X)
 *
 * The private key is the 32-byte seed `sk`; node builds the ML-KEM key from the FIPS 203 seed
 * d || z (format raw-seed) and the X25519 key from sk_X (raw-private), so keys live as KeyObjects.
 * Node's ML-KEM takes no caller randomness: encapsulation cannot be derandomised (the draft's
 * EncapsulateDerand), only its X25519 half, through `random`.
 *
 * Two deliberate departures, both on inputs no honest party produces (docs/decisions.md):
 * - OpenSSL refuses an all-zero X25519 output (RFC 7748 §6.1's optional check), so a public key
 *   whose pk_X is a low-order point is refused when parsed, and a ciphertext whose ct_X is one
 *   fails to decapsulate, where the draft's reference code (which has no check) would return a
 *   secret. noble's ml_kem768_x25519 refuses both the same way.
 * - ML-KEM's encapsulation key check (FIPS 203 §7.2, which the draft requires) is node's:
 *   createPublicKey refuses a non-canonical pk_M.
 * Errors carry fixed messages: no key, seed or secret bytes ever reach one.
 */

export const XWING = {
  seedBytes: 32,
  publicKeyBytes: 1216,
  ciphertextBytes: 1120,
  sharedSecretBytes: 32,
  mlKemPublicKeyBytes: 1184,
  mlKemCiphertextBytes: 1088,
  x25519Bytes: 32,
} as const

/** XWingLabel: the 6 ASCII bytes `\./` `/^\`. */
const LABEL = Buffer.from('5c2e2f2f5e5c', 'hex')

/** id-XWing, the draft's OID for SubjectPublicKeyInfo and OneAsymmetricKey (parameters absent). */
export const XWING_OID = '1.3.6.1.4.1.62253.25722'

export type XWingErrorCode =
  | 'invalid_private_key'
  | 'invalid_public_key'
  | 'invalid_ciphertext'
  | 'decapsulation_failed'

export class XWingError extends Error {
  readonly code: XWingErrorCode
  constructor(code: XWingErrorCode, message: string) {
    super(message)
    this.code = code
  }
}

/** An X-Wing encapsulation key: its encoding and its two halves as node KeyObjects. */
export interface XWingPublicKey {
  /** pk_M || pk_X, 1216 bytes. */
  readonly bytes: Buffer
  readonly mlKem: KeyObject
  readonly x25519: KeyObject
}

/** An X-Wing decapsulation key, expanded from its seed (the draft's cached expanded key). */
export interface XWingPrivateKey {
  readonly mlKem: KeyObject
  readonly x25519: KeyObject
  readonly publicKey: XWingPublicKey
}

const x25519Public = (raw: Buffer) =>
  createPublicKey({ key: raw, format: 'raw-public', asymmetricKeyType: 'x25519' })

/** A fixed, public scalar: X25519 of it and a point is all-zero exactly when the point has low order. */
const PROBE = createPrivateKey({
  key: Buffer.alloc(32, 0x5a),
  format: 'raw-private',
  asymmetricKeyType: 'x25519',
})

function checkLength(bytes: Buffer, expected: number, code: XWingErrorCode, what: string): void {
  // Any Uint8Array: a Buffer posted to a worker thread arrives as a plain Uint8Array.
  if (!(bytes instanceof Uint8Array) || bytes.length !== expected) {
    throw new XWingError(code, `An X-Wing ${what} is ${expected} bytes, not ${bytes?.length ?? 0}`)
  }
}

/** GenerateKeyPairDerand: the key pair of a 32-byte seed (the decapsulation key itself). */
export function xwingKeyFromSeed(seed: Buffer): XWingPrivateKey {
  checkLength(seed, XWING.seedBytes, 'invalid_private_key', 'seed')
  const expanded = createHash('shake256', { outputLength: 96 }).update(seed).digest()
  try {
    const mlKem = createPrivateKey({
      key: expanded.subarray(0, 64),
      format: 'raw-seed',
      asymmetricKeyType: 'ml-kem-768',
    })
    const x25519 = createPrivateKey({
      key: expanded.subarray(64, 96),
      format: 'raw-private',
      asymmetricKeyType: 'x25519',
    })
    const mlKemPublic = createPublicKey(mlKem)
    const x25519PublicKey = createPublicKey(x25519)
    const bytes = Buffer.concat([
      mlKemPublic.export({ format: 'raw-public' }),
      x25519PublicKey.export({ format: 'raw-public' }),
    ])
    return { mlKem, x25519, publicKey: { bytes, mlKem: mlKemPublic, x25519: x25519PublicKey } }
  } finally {
    expanded.fill(0)
  }
}

/** A fresh key pair: the seed (what is stored) and the expanded key. */
export function xwingGenerateKey(random: (length: number) => Buffer = randomBytes): {
  seed: Buffer
  privateKey: XWingPrivateKey
} {
  const seed = random(XWING.seedBytes)
  return { seed, privateKey: xwingKeyFromSeed(seed) }
}

/**
 * An encapsulation key from its 1216 bytes. Refused: a wrong length, an ML-KEM half that fails
 * FIPS 203's encapsulation key check, an X25519 half of low order (every encapsulation to it fails).
 */
export function xwingPublicKey(bytes: Buffer): XWingPublicKey {
  checkLength(bytes, XWING.publicKeyBytes, 'invalid_public_key', 'public key')
  const owned = Buffer.from(bytes)
  let mlKem: KeyObject
  try {
    mlKem = createPublicKey({
      key: owned.subarray(0, XWING.mlKemPublicKeyBytes),
      format: 'raw-public',
      asymmetricKeyType: 'ml-kem-768',
    })
  } catch {
    throw new XWingError(
      'invalid_public_key',
      'The ML-KEM-768 half of the X-Wing public key fails the FIPS 203 encapsulation key check',
    )
  }
  // Any 32 bytes are an X25519 u-coordinate (RFC 7748 masks the top bit); only low order is refused.
  const x25519 = x25519Public(owned.subarray(XWING.mlKemPublicKeyBytes))
  try {
    diffieHellman({ privateKey: PROBE, publicKey: x25519 })
  } catch {
    throw new XWingError(
      'invalid_public_key',
      'The X25519 half of the X-Wing public key is a low-order point',
    )
  }
  return { bytes: owned, mlKem, x25519 }
}

/** The draft's Combiner: SHA3-256(ss_M || ss_X || ct_X || pk_X || XWingLabel). */
export function xwingCombiner(ssM: Buffer, ssX: Buffer, ctX: Buffer, pkX: Buffer): Buffer {
  return createHash('sha3-256').update(ssM).update(ssX).update(ctX).update(pkX).update(LABEL).digest()
}

/**
 * Encapsulate: a fresh 32-byte shared secret and its 1120-byte ciphertext. `random` gives the
 * X25519 ephemeral secret ek_X (32 bytes); ML-KEM's coins come from OpenSSL's own generator.
 */
export function xwingEncapsulate(
  publicKey: XWingPublicKey,
  random: (length: number) => Buffer = randomBytes,
): { sharedKey: Buffer; ciphertext: Buffer } {
  const ekBytes = random(XWING.x25519Bytes)
  let ssX: Buffer
  let ctX: Buffer
  try {
    const ephemeral = createPrivateKey({ key: ekBytes, format: 'raw-private', asymmetricKeyType: 'x25519' })
    ctX = createPublicKey(ephemeral).export({ format: 'raw-public' })
    ssX = diffieHellman({ privateKey: ephemeral, publicKey: publicKey.x25519 })
  } catch {
    // Only a low-order pk_X makes X25519 fail, and xwingPublicKey refuses those.
    throw new XWingError(
      'invalid_public_key',
      'The X25519 half of the X-Wing public key is a low-order point',
    )
  } finally {
    ekBytes.fill(0)
  }
  let ssM: Buffer | undefined
  try {
    const encapsulated = encapsulate(publicKey.mlKem)
    ssM = encapsulated.sharedKey
    const pkX = publicKey.bytes.subarray(XWING.mlKemPublicKeyBytes)
    return {
      sharedKey: xwingCombiner(ssM, ssX, ctX, pkX),
      ciphertext: Buffer.concat([encapsulated.ciphertext, ctX]),
    }
  } finally {
    ssM?.fill(0)
    ssX.fill(0)
  }
}

/**
 * Decapsulate: the 32-byte shared secret of a 1120-byte ciphertext. ML-KEM rejects implicitly
 * (a tampered ct_M yields an unrelated secret, not an error); a low-order ct_X is refused.
 */
export function xwingDecapsulate(privateKey: XWingPrivateKey, ciphertext: Buffer): Buffer {
  checkLength(ciphertext, XWING.ciphertextBytes, 'invalid_ciphertext', 'ciphertext')
  const ctM = ciphertext.subarray(0, XWING.mlKemCiphertextBytes)
  const ctX = ciphertext.subarray(XWING.mlKemCiphertextBytes)
  let ssX: Buffer
  try {
    ssX = diffieHellman({ privateKey: privateKey.x25519, publicKey: x25519Public(ctX) })
  } catch {
    throw new XWingError(
      'decapsulation_failed',
      'The X25519 half of the X-Wing ciphertext is a low-order point',
    )
  }
  let ssM: Buffer
  try {
    ssM = decapsulate(privateKey.mlKem, ctM)
  } catch {
    ssX.fill(0)
    throw new XWingError('decapsulation_failed', 'The X-Wing ciphertext cannot be decapsulated')
  }
  try {
    const pkX = privateKey.publicKey.bytes.subarray(XWING.mlKemPublicKeyBytes)
    return xwingCombiner(ssM, ssX, ctX, pkX)
  } finally {
    ssM.fill(0)
    ssX.fill(0)
  }
}

// ---------------------------------------------------------------------------------------------
// X.509 encodings (the draft's "Use in X.509"): id-XWing, parameters absent, the key bytes as is.
// Both structures have one fixed length, so each is a constant prefix and the key bytes.
// ---------------------------------------------------------------------------------------------

/** AlgorithmIdentifier: SEQUENCE (13 bytes) { OBJECT IDENTIFIER (11 bytes) 1.3.6.1.4.1.62253.25722 }. */
const ALGORITHM_ID = '300d' + '060b' + '2b0601040183e62d81c87a'
/** SEQUENCE (1236) { AlgorithmIdentifier, BIT STRING (1217: 0 unused bits, pk) }: 1240 bytes in all. */
const SPKI_PREFIX = Buffer.from(`308204d4${ALGORITHM_ID}038204c100`, 'hex')
/** SEQUENCE (52) { INTEGER 0, AlgorithmIdentifier, OCTET STRING (32) seed }: 54 bytes, no publicKey. */
const PKCS8_PREFIX = Buffer.from(`3034020100${ALGORITHM_ID}0420`, 'hex')

/** The SubjectPublicKeyInfo DER of an encapsulation key. */
export function xwingSpki(publicKey: Buffer): Buffer {
  checkLength(publicKey, XWING.publicKeyBytes, 'invalid_public_key', 'public key')
  return Buffer.concat([SPKI_PREFIX, publicKey])
}

/** Whether a SubjectPublicKeyInfo DER is an X-Wing one (id-XWing, 1216 key bytes); node cannot parse these. */
export function isXWingSpki(der: Uint8Array): boolean {
  return (
    der.length === SPKI_PREFIX.length + XWING.publicKeyBytes &&
    SPKI_PREFIX.equals(der.subarray(0, SPKI_PREFIX.length))
  )
}

/** The 1216 public key bytes of an X-Wing SubjectPublicKeyInfo DER; anything else is refused. */
export function xwingPublicKeyFromSpki(der: Uint8Array): Buffer {
  if (!isXWingSpki(der)) {
    throw new XWingError('invalid_public_key', 'The key is not an X-Wing SubjectPublicKeyInfo')
  }
  return Buffer.from(der.subarray(SPKI_PREFIX.length))
}

/** The OneAsymmetricKey (PKCS#8 v1) DER of a decapsulation key: the seed, as the draft stores it. */
export function xwingPkcs8(seed: Buffer): Buffer {
  checkLength(seed, XWING.seedBytes, 'invalid_private_key', 'seed')
  return Buffer.concat([PKCS8_PREFIX, seed])
}

/** The 32-byte seed of an X-Wing OneAsymmetricKey DER (publicKey absent, as the draft requires). */
export function xwingSeedFromPkcs8(der: Uint8Array): Buffer {
  if (
    der.length !== PKCS8_PREFIX.length + XWING.seedBytes ||
    !PKCS8_PREFIX.equals(der.subarray(0, PKCS8_PREFIX.length))
  ) {
    throw new XWingError('invalid_private_key', 'The key is not an X-Wing PKCS#8 private key')
  }
  return Buffer.from(der.subarray(PKCS8_PREFIX.length))
}
