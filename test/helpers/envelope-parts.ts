import assert from 'node:assert/strict'
import { constants, type KeyObject, privateDecrypt, randomBytes } from 'node:crypto'
import { gcm } from '@noble/ciphers/aes.js'
import { hmac } from '@noble/hashes/hmac.js'
import { sha256 } from '@noble/hashes/sha2.js'

/**
 * The service's envelopes taken apart and opened OUTSIDE the service: a second implementation of
 * docs/envelope-format.md, written from that page with independent cryptography (noble's
 * HMAC-SHA256 and AES-256-GCM, node:crypto's RSA-OAEP). It imports nothing from src/: the point is
 * that the page alone is enough. What is here is common to every scheme (the parts, the compact
 * form, the labels, the header, the HKDF-Expand step of the KEM schemes, the data part); how a
 * scheme's DEK comes back is a `DekRecovery`, made by the test that holds the private key (the
 * KEM and RSA-OAEP ones, used by several tests, are below).
 */

/** "The first 22 bytes are the **header**." */
export const HEADER_BYTES = 22
/** "format version: 0x01" */
export const FORMAT_V1 = 0x01
/** The scheme byte (offset 1). */
export const SCHEMES = { mlKem: 0x01, rsaOaep: 0x02, aesGcm: 0x03, xWing: 0x04 } as const
/** "`"kms/envelope/v1/dek"` is the 19 ASCII bytes of that string, without a terminator." */
export const DEK_INFO = Buffer.from('kms/envelope/v1/dek', 'ascii')
/** The AAD's first bytes: `"kms/envelope/v1"` for /encrypt, `"kms/wrap/v1"` for wrapped keys and data keys. */
export const LABELS = {
  encrypt: Buffer.from('kms/envelope/v1', 'ascii'),
  wrap: Buffer.from('kms/wrap/v1', 'ascii'),
} as const
export type Purpose = keyof typeof LABELS
export const NONCE_BYTES = 12
export const TAG_BYTES = 16
export const DEK_BYTES = 32

/** An envelope's four parts as bytes. */
export interface Parts {
  encapsulatedKey: Buffer
  nonce: Buffer
  tag: Buffer
  ciphertext: Buffer
}

type Field = keyof Parts

/**
 * Bytes of one Base64 field of an API answer (/encrypt, a batch item, /re-encrypt). Answers come
 * typed as records, interfaces or `any`, hence `object`; the field is checked to be a string.
 */
function field(answer: object, name: Field): Buffer {
  const value = (answer as Partial<Record<Field, unknown>>)[name]
  assert.equal(typeof value, 'string', `the answer's ${name} is a string`)
  return Buffer.from(value as string, 'base64')
}

/** The four Base64 fields of an answer, as bytes. */
export const partsOf = (answer: object): Parts => ({
  encapsulatedKey: field(answer, 'encapsulatedKey'),
  nonce: field(answer, 'nonce'),
  tag: field(answer, 'tag'),
  ciphertext: field(answer, 'ciphertext'),
})

/** The four fields as /decrypt takes them (standard Base64). */
export const bodyOf = (parts: Parts) => ({
  ciphertext: parts.ciphertext.toString('base64'),
  encapsulatedKey: parts.encapsulatedKey.toString('base64'),
  nonce: parts.nonce.toString('base64'),
  tag: parts.tag.toString('base64'),
})

/** The compact form: uint16 BE length n || encapsulatedKey (n) || nonce (12) || tag (16) || ciphertext. */
export function fromCompact(bytes: Buffer): Parts {
  const n = bytes.readUInt16BE(0)
  return {
    encapsulatedKey: bytes.subarray(2, 2 + n),
    nonce: bytes.subarray(2 + n, 2 + n + NONCE_BYTES),
    tag: bytes.subarray(2 + n + NONCE_BYTES, 2 + n + NONCE_BYTES + TAG_BYTES),
    ciphertext: bytes.subarray(2 + n + NONCE_BYTES + TAG_BYTES),
  }
}

export function toCompact(parts: Parts): Buffer {
  const length = Buffer.alloc(2)
  length.writeUInt16BE(parts.encapsulatedKey.length)
  return Buffer.concat([length, parts.encapsulatedKey, parts.nonce, parts.tag, parts.ciphertext])
}

// ---- The header -----------------------------------------------------------------------------

/** The key and version an envelope is sealed to, as the header must name them. */
export interface Expected {
  keyId: string
  keyVersion: number
}

/** version (1) || scheme (1) || the key id's 16 bytes || key version (uint32 BE). */
export function headerBytes(scheme: number, keyId: string, keyVersion: number): Buffer {
  const out = Buffer.alloc(HEADER_BYTES)
  out[0] = FORMAT_V1
  out[1] = scheme
  Buffer.from(keyId.replaceAll('-', ''), 'hex').copy(out, 2)
  out.writeUInt32BE(keyVersion, 18)
  return out
}

/** What the header of an encapsulatedKey says; the key id written as a UUID. */
export function headerOf(encapsulatedKey: Buffer): { scheme: number; keyId: string; keyVersion: number } {
  const hex = encapsulatedKey.subarray(2, 18).toString('hex')
  return {
    scheme: encapsulatedKey[1]!,
    keyId: [hex.slice(0, 8), hex.slice(8, 12), hex.slice(12, 16), hex.slice(16, 20), hex.slice(20)].join('-'),
    keyVersion: encapsulatedKey.readUInt32BE(18),
  }
}

/**
 * Asserts the header (format version 1, the scheme, and when given the key id and version) and
 * splits the encapsulatedKey into the header and the protected DEK.
 */
export function checkHeader(
  encapsulatedKey: Buffer,
  scheme: number,
  expected?: Expected,
): { header: Buffer; protectedDek: Buffer } {
  assert.ok(encapsulatedKey.length > HEADER_BYTES, 'encapsulatedKey is longer than its header')
  const header = encapsulatedKey.subarray(0, HEADER_BYTES)
  assert.equal(header[0], FORMAT_V1, 'format version 1')
  assert.equal(header[1], scheme, `scheme 0x${scheme.toString(16).padStart(2, '0')}`)
  if (expected) {
    assert.equal(header.subarray(2, 18).toString('hex'), expected.keyId.replaceAll('-', ''), 'the key id')
    assert.equal(header.readUInt32BE(18), expected.keyVersion, 'the key version')
  }
  return { header, protectedDek: encapsulatedKey.subarray(HEADER_BYTES) }
}

// ---- The DEK --------------------------------------------------------------------------------

/**
 * ML-KEM and X-Wing: DEK = HKDF-Expand-SHA256(PRK = ss, info = "kms/envelope/v1/dek" || header,
 * L = 32), a single block: HMAC-SHA256(ss, info || 0x01).
 */
export const dekFromSharedSecret = (sharedSecret: Uint8Array, header: Uint8Array): Uint8Array =>
  hmac(sha256, sharedSecret, Buffer.concat([DEK_INFO, header, Buffer.of(0x01)]))

/** How one scheme's DEK comes back from the protected DEK (the bytes after the header). */
export interface DekRecovery {
  scheme: number
  /** The protected DEK's length for this key, when the test knows it. */
  protectedDekBytes?: number
  recover(protectedDek: Buffer, header: Buffer): Uint8Array
}

/** A KEM scheme (ML-KEM 0x01, X-Wing 0x04): the caller's decapsulation, then HKDF-Expand. */
export const kemRecovery = (
  scheme: number,
  decapsulate: (cipherText: Uint8Array) => Uint8Array,
  cipherTextBytes?: number,
): DekRecovery => ({
  scheme,
  ...(cipherTextBytes === undefined ? {} : { protectedDekBytes: cipherTextBytes }),
  recover: (protectedDek, header) => dekFromSharedSecret(decapsulate(protectedDek), header),
})

/** Scheme 0x02: RSAES-OAEP with SHA-256, MGF1-SHA-256 and an empty label, by node:crypto. */
export const rsaOaepRecovery = (privateKey: KeyObject | string, modulusBytes?: number): DekRecovery => ({
  scheme: SCHEMES.rsaOaep,
  ...(modulusBytes === undefined ? {} : { protectedDekBytes: modulusBytes }),
  recover: (protectedDek) =>
    privateDecrypt(
      { key: privateKey, padding: constants.RSA_PKCS1_OAEP_PADDING, oaepHash: 'sha256' },
      protectedDek,
    ),
})

// ---- The data -------------------------------------------------------------------------------

/** AAD = label || header || UTF-8(context). */
export const aadOf = (purpose: Purpose, header: Uint8Array, context: string): Buffer =>
  Buffer.concat([LABELS[purpose], header, Buffer.from(context, 'utf8')])

/** AES-256-GCM with the DEK (noble, which takes ciphertext || tag). */
export function openData(
  parts: Parts,
  dek: Uint8Array,
  header: Uint8Array,
  purpose: Purpose,
  context: string,
): Buffer {
  assert.equal(parts.nonce.length, NONCE_BYTES, 'a 12-byte nonce')
  assert.equal(parts.tag.length, TAG_BYTES, 'a 16-byte tag')
  const sealed = Buffer.concat([parts.ciphertext, parts.tag])
  return Buffer.from(gcm(dek, parts.nonce, aadOf(purpose, header, context)).decrypt(sealed))
}

/**
 * The whole of "Decrypting without the service": the header checked, the DEK recovered by the
 * scheme's `recovery`, the data opened. Throws (an assertion, or noble's "invalid tag") when
 * anything does not match.
 */
export function openEnvelope(
  parts: Parts,
  recovery: DekRecovery,
  options: { purpose?: Purpose; context?: string; expected?: Expected } = {},
): Buffer {
  const { header, protectedDek } = checkHeader(parts.encapsulatedKey, recovery.scheme, options.expected)
  if (recovery.protectedDekBytes !== undefined) {
    assert.equal(protectedDek.length, recovery.protectedDekBytes, 'the protected DEK length')
  }
  const dek = recovery.recover(protectedDek, header)
  assert.equal(dek.length, DEK_BYTES, 'a 32-byte DEK')
  return openData(parts, dek, header, options.purpose ?? 'encrypt', options.context ?? '')
}

/** The reverse direction: an envelope sealed outside the service under `header`, with the DEK given. */
export function sealEnvelope(input: {
  header: Buffer
  protectedDek: Uint8Array
  dek: Uint8Array
  plaintext: Uint8Array
  context: string
  purpose?: Purpose
  nonce?: Uint8Array
}): Parts {
  const nonce = Buffer.from(input.nonce ?? randomBytes(NONCE_BYTES))
  const aad = aadOf(input.purpose ?? 'encrypt', input.header, input.context)
  const sealed = Buffer.from(gcm(input.dek, nonce, aad).encrypt(input.plaintext))
  return {
    encapsulatedKey: Buffer.concat([input.header, input.protectedDek]),
    nonce,
    tag: sealed.subarray(sealed.length - TAG_BYTES),
    ciphertext: sealed.subarray(0, sealed.length - TAG_BYTES),
  }
}
