import { createCipheriv, createDecipheriv } from 'node:crypto'
import type { AuditLog } from '../audit/audit-log.ts'
import type { Actor } from '../auth/request-context.ts'
import type { RandomSource } from '../entropy/random-source.ts'
import { DECRYPT_STATES, ENCRYPT_STATES } from '../keys/key-state.ts'
import { AppError, invalidField } from '../platform/errors.ts'
import { decryptionFailed } from './crypto-service.ts'
import { aesGcmCipher, joined, NONCE_BYTES } from './envelope.ts'
import { type KeyResolver, namingKeyIn, requireSecretKey, type UsableKey } from './key-resolver.ts'
import { type AuditTarget, auditedOperation } from './operation-audit.ts'

/**
 * Raw AES-GCM with an AES key (Google Cloud KMS's RawEncrypt/RawDecrypt): the caller's bytes,
 * additional authenticated data and IV as they are, no envelope. For data another system
 * encrypted (or will decrypt) with AES-GCM under an imported key. /encrypt and /decrypt with the
 * same key use the service's envelope instead, and are what new integrations should use.
 */
export interface RawAesService {
  encrypt(actor: Actor, input: RawEncryptInput): Promise<RawEncryptResult>
  decrypt(actor: Actor, input: RawDecryptInput): Promise<RawDecryptResult>
}

interface RawEncryptInput {
  keyId: string
  plaintext: Buffer
  aad: Buffer
}

interface RawEncryptResult {
  ciphertext: Buffer
  iv: Buffer
  tag: Buffer
  keyId: string
  keyVersion: number
}

interface RawDecryptInput {
  keyId: string
  /** The raw-encrypt answer's keyId, sent back: must name the same key as `keyId`. */
  bodyKeyId?: string | undefined
  /** Absent: the current version. */
  keyVersion?: number | undefined
  ciphertext: Buffer
  iv: Buffer
  tag: Buffer
  aad: Buffer
}

interface RawDecryptResult {
  plaintext: Buffer
  keyId: string
  keyVersion: number
}

/** The tag is always the full 16 bytes: truncated GCM tags weaken authentication (SP 800-38D, appendix C). */
export const RAW_TAG_BYTES = 16
/**
 * Decryption takes IVs of 1 to 128 bytes (SP 800-38D allows any length; other than 12 bytes the
 * IV goes through GHASH), for data from systems that used 16-byte or longer IVs; encryption always
 * draws a 12-byte one. 128 bytes (1,024 bits) is OpenSSL's limit (GCM_IV_MAX_SIZE): node:crypto
 * refuses a longer IV, which would otherwise surface as a decryption failure of authentic data.
 */
export const RAW_IV_BYTES = { min: 1, max: 128 } as const

function requireLength(bytes: Buffer, field: string, min: number, max: number, what: string): void {
  if (bytes.length < min || bytes.length > max) {
    const range = min === max ? `${min}` : `${min} to ${max}`
    throw invalidField(field, `must be ${range} bytes (${what}), not ${bytes.length}`)
  }
}

const notAnAesKey = (algorithm: string) =>
  new AppError(400, 'key_type_mismatch', `Raw AES-GCM needs an AES-GCM key, not ${algorithm}`)

export function createRawAesService(deps: {
  audit: AuditLog
  keys: KeyResolver
  random: RandomSource
}): RawAesService {
  const { audit, keys } = deps

  function aesKeyOf(key: UsableKey) {
    if (key.spec.kind !== 'aes-gcm') throw notAnAesKey(key.row.algorithm)
    return requireSecretKey(key.opened)
  }

  return {
    encrypt(actor, input) {
      const action = 'crypto.raw_encrypt'
      const target: AuditTarget = { action, keyId: input.keyId, keyVersion: null }
      return auditedOperation(audit, actor, target, async () => {
        const key = await keys.resolve(actor, {
          keyId: input.keyId,
          keyType: 'Encryption',
          keyOperation: 'encrypt',
          states: ENCRYPT_STATES,
          operation: 'encrypt',
          found: namingKeyIn(target),
        })
        target.keyVersion = key.version
        const secret = aesKeyOf(key)
        const iv = deps.random.bytes(NONCE_BYTES)
        const cipher = createCipheriv(aesGcmCipher(secret), secret, iv)
        cipher.setAAD(input.aad)
        const ciphertext = joined(cipher.update(input.plaintext), cipher.final())
        return {
          result: {
            ciphertext,
            iv,
            tag: cipher.getAuthTag(),
            keyId: key.row.id,
            keyVersion: key.version,
          },
          record: {
            action,
            keyId: key.row.id,
            keyVersion: key.version,
            details: { bytes: input.plaintext.length, aadBytes: input.aad.length },
          },
        }
      })
    },

    decrypt(actor, input) {
      const action = 'crypto.raw_decrypt'
      const target: AuditTarget = { action, keyId: input.keyId, keyVersion: input.keyVersion ?? null }
      return auditedOperation(audit, actor, target, async () => {
        const key = await keys.resolve(actor, {
          keyId: input.keyId,
          keyType: 'Encryption',
          keyOperation: 'decrypt',
          states: DECRYPT_STATES,
          operation: 'decrypt',
          version: input.keyVersion,
          sameKeyAs:
            input.bodyKeyId === undefined ? undefined : { ref: input.bodyKeyId, field: 'body/keyId' },
          found: namingKeyIn(target),
        })
        target.keyVersion = key.version
        const secret = aesKeyOf(key)
        // After the key: like every /keys/{keyId} route, another tenant's key is 404 whatever the body.
        requireLength(input.iv, 'body/iv', RAW_IV_BYTES.min, RAW_IV_BYTES.max, 'the IV')
        requireLength(input.tag, 'body/tag', RAW_TAG_BYTES, RAW_TAG_BYTES, 'a full GCM tag')
        let plaintext: Buffer
        try {
          const decipher = createDecipheriv(aesGcmCipher(secret), secret, input.iv, {
            authTagLength: RAW_TAG_BYTES,
          })
          decipher.setAAD(input.aad)
          decipher.setAuthTag(input.tag)
          plaintext = joined(decipher.update(input.ciphertext), decipher.final())
        } catch {
          throw decryptionFailed()
        }
        return {
          result: { plaintext, keyId: key.row.id, keyVersion: key.version },
          record: { action, keyId: key.row.id, keyVersion: key.version },
        }
      })
    },
  }
}
