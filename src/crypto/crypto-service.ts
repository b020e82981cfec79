import type { AuditLog } from '../audit/audit-log.ts'
import type { Actor } from '../auth/request-context.ts'
import type { RandomSource } from '../entropy/random-source.ts'
import type { KeyType } from '../keys/algorithms.ts'
import { DECRYPT_STATES, ENCRYPT_STATES, keyState, requireState } from '../keys/key-state.ts'
import { getDefaultKey, getKey, type KeyRow } from '../keys/key-store.ts'
import type { Clock } from '../platform/clock.ts'
import type { Sql } from '../platform/database.ts'
import { AppError, notFound } from '../platform/errors.ts'
import { decodeHeader, EnvelopeError, HEADER_BYTES, openEnvelope, SCHEME, sealEnvelope } from './envelope.ts'
import type { KeyObjectCache } from './key-object-cache.ts'

export interface EncryptResult {
  ciphertext: Buffer
  encapsulatedKey: Buffer
  nonce: Buffer
  tag: Buffer
  keyId: string
  keyVersion: number
}

export interface DecryptInput {
  keyId?: string | undefined
  keyVersion?: number | undefined
  ciphertext: Buffer
  encapsulatedKey: Buffer
  nonce: Buffer
  tag: Buffer
  context: Buffer
}

export interface CryptoService {
  encrypt(
    actor: Actor,
    input: { keyId?: string | undefined; plaintext: Buffer; context: Buffer },
  ): Promise<EncryptResult>
  decrypt(
    actor: Actor,
    input: DecryptInput,
  ): Promise<{ plaintext: Buffer; keyId: string; keyVersion: number }>
}

/** One answer for every way decryption can fail, so the error says nothing about which part was wrong. */
export const decryptionFailed = () =>
  new AppError(400, 'decryption_failed', 'The ciphertext cannot be decrypted with this key and context')

export function createCryptoService(deps: {
  sql: Sql
  audit: AuditLog
  keyObjects: KeyObjectCache
  random: RandomSource
  clock: Clock
}): CryptoService {
  const { sql, audit } = deps

  async function resolveKey(tenantId: string, keyId: string | undefined, keyType: KeyType): Promise<KeyRow> {
    if (keyId) {
      const row = await getKey(sql, tenantId, keyId)
      if (!row) throw notFound('key_not_found', 'Key')
      if (row.key_type !== keyType) {
        throw new AppError(
          400,
          'key_type_mismatch',
          `This operation needs an ${keyType} key, not a ${row.key_type} key`,
        )
      }
      return row
    }
    const row = await getDefaultKey(sql, tenantId, keyType)
    if (!row) {
      throw new AppError(
        409,
        'no_default_key',
        `The tenant has no default ${keyType} key: pass keyId or set a default`,
      )
    }
    return row
  }

  return {
    async encrypt(actor, input) {
      const row = await resolveKey(actor.tenantId, input.keyId, 'Encryption')
      requireState(keyState(row, deps.clock.now()), ENCRYPT_STATES, 'encrypt')
      const version = row.current_version
      const opened = await deps.keyObjects.get(actor.tenantId, row.id, version)
      if (!opened?.publicKey)
        throw new AppError(409, 'key_state_conflict', 'The key material is not available')
      const sealed = sealEnvelope({
        header: {
          scheme: row.algorithm.startsWith('ML-KEM') ? SCHEME.mlKem : SCHEME.rsaOaep,
          keyId: row.id,
          keyVersion: version,
        },
        publicKey: opened.publicKey,
        plaintext: input.plaintext,
        context: input.context,
        random: (length) => deps.random.bytes(length),
      })
      // Acknowledged once the record is durable (group commit).
      await audit.record({
        ...actor,
        action: 'crypto.encrypt',
        resource: `key:${row.id}`,
        keyVersion: version,
        outcome: 'success',
        details: { bytes: input.plaintext.length },
      })
      return { ...sealed, keyId: row.id, keyVersion: version }
    },

    async decrypt(actor, input) {
      const header = decodeHeader(input.encapsulatedKey.subarray(0, HEADER_BYTES))
      const refuse = async (keyId: string | null, keyVersion: number | null) => {
        await audit.record({
          ...actor,
          action: 'crypto.decrypt',
          resource: keyId ? `key:${keyId}` : null,
          keyVersion,
          outcome: 'failure',
          details: { reason: 'decryption_failed' },
        })
        return decryptionFailed()
      }
      // A key named by the caller must be the one the envelope names; another tenant's key,
      // an unknown key and a wrong key all fail alike.
      if (
        !header ||
        (input.keyId && input.keyId.toLowerCase() !== header.keyId) ||
        (input.keyVersion !== undefined && input.keyVersion !== header.keyVersion)
      ) {
        throw await refuse(input.keyId ?? null, null)
      }
      const row = await getKey(sql, actor.tenantId, header.keyId)
      if (row?.key_type !== 'Encryption' || header.keyVersion > row.current_version) {
        throw await refuse(header.keyId, header.keyVersion)
      }
      requireState(keyState(row, deps.clock.now()), DECRYPT_STATES, 'decrypt')
      const opened = await deps.keyObjects.get(actor.tenantId, row.id, header.keyVersion)
      if (!opened) throw await refuse(row.id, header.keyVersion)
      let plaintext: Buffer
      try {
        plaintext = openEnvelope({ envelope: input, privateKey: opened.secretKey, context: input.context })
      } catch (error) {
        if (error instanceof EnvelopeError) throw await refuse(row.id, header.keyVersion)
        throw error
      }
      await audit.record({
        ...actor,
        action: 'crypto.decrypt',
        resource: `key:${row.id}`,
        keyVersion: header.keyVersion,
        outcome: 'success',
      })
      return { plaintext, keyId: row.id, keyVersion: header.keyVersion }
    },
  }
}
