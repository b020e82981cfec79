import { createCipheriv, createDecipheriv, type KeyObject, randomBytes } from 'node:crypto'

/**
 * AES-256-GCM sealing used for every at-rest wrapping in the key hierarchy
 * (master key → tenant KEK → key material). Layout: version (1) | nonce (12) | ciphertext | tag (16).
 * The AAD names what the blob is and whom it belongs to, so a blob moved to another row fails to open.
 */
const FORMAT_VERSION = 1
const NONCE_BYTES = 12
const TAG_BYTES = 16

export class SealedBlobError extends Error {
  constructor() {
    super('sealed blob failed authentication')
  }
}

export function seal(key: KeyObject, plaintext: Uint8Array, aad: string): Buffer {
  const nonce = randomBytes(NONCE_BYTES)
  const cipher = createCipheriv('aes-256-gcm', key, nonce)
  cipher.setAAD(Buffer.from(aad, 'utf8'))
  const body = Buffer.concat([cipher.update(plaintext), cipher.final()])
  return Buffer.concat([Buffer.of(FORMAT_VERSION), nonce, body, cipher.getAuthTag()])
}

export function open(key: KeyObject, blob: Uint8Array, aad: string): Buffer {
  if (blob.length < 1 + NONCE_BYTES + TAG_BYTES || blob[0] !== FORMAT_VERSION) throw new SealedBlobError()
  const nonce = blob.subarray(1, 1 + NONCE_BYTES)
  const tag = blob.subarray(blob.length - TAG_BYTES)
  const body = blob.subarray(1 + NONCE_BYTES, blob.length - TAG_BYTES)
  const decipher = createDecipheriv('aes-256-gcm', key, nonce)
  decipher.setAAD(Buffer.from(aad, 'utf8'))
  decipher.setAuthTag(tag)
  try {
    return Buffer.concat([decipher.update(body), decipher.final()])
  } catch {
    throw new SealedBlobError()
  }
}
