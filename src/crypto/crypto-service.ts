import type { AuditLog } from '../audit/audit-log.ts'
import type { Actor } from '../auth/request-context.ts'
import type { RandomSource } from '../entropy/random-source.ts'
import { DECRYPT_STATES, ENCRYPT_STATES, requireState } from '../keys/key-state.ts'
import { AppError } from '../platform/errors.ts'
import {
  decodeHeader,
  EnvelopeError,
  type EnvelopePurpose,
  HEADER_BYTES,
  openEnvelope,
  SCHEME,
  type SealedEnvelope,
  sealEnvelope,
} from './envelope.ts'
import type { KeyResolver, UsableKey } from './key-resolver.ts'
import { auditedOperation, auditRefusals } from './operation-audit.ts'

export interface EncryptResult extends SealedEnvelope {
  keyId: string
  keyVersion: number
}

/** A sealed envelope handed back, with the caller's optional cross-checks and context. */
export interface OpenRequest {
  keyId?: string | undefined
  keyVersion?: number | undefined
  envelope: SealedEnvelope
  context: Buffer
}

export interface OpenResult {
  plaintext: Buffer
  keyId: string
  keyVersion: number
}

export interface DataKeyResult {
  plaintextDek: Buffer | null
  encryptedDek: SealedEnvelope
  keyId: string
  keyVersion: number
}

export interface CryptoService {
  encrypt(
    actor: Actor,
    input: { keyId?: string | undefined; plaintext: Buffer; context: Buffer },
  ): Promise<EncryptResult>
  decrypt(actor: Actor, input: OpenRequest): Promise<OpenResult>
  /** Wraps key material; the result opens only through unwrap, with the same context. */
  wrap(actor: Actor, input: { keyId: string; plaintext: Buffer; context: Buffer }): Promise<EncryptResult>
  unwrap(actor: Actor, input: OpenRequest & { keyId: string }): Promise<OpenResult>
  /** A fresh random data key, returned wrapped (unwrap recovers it) and optionally in plaintext. */
  generateDataKey(
    actor: Actor,
    input: { keyId?: string | undefined; keyBytes: number; withPlaintext: boolean; context: Buffer },
  ): Promise<DataKeyResult>
}

/** One answer for every way decryption can fail, so the error says nothing about which part was wrong. */
export const decryptionFailed = () =>
  new AppError(400, 'decryption_failed', 'The ciphertext cannot be decrypted with this key and context')

const ACTIONS = {
  encrypt: { seal: 'crypto.encrypt', open: 'crypto.decrypt' },
  wrap: { seal: 'crypto.wrap', open: 'crypto.unwrap' },
} as const

export function createCryptoService(deps: {
  audit: AuditLog
  keys: KeyResolver
  random: RandomSource
}): CryptoService {
  const { audit, keys } = deps

  function seal(purpose: EnvelopePurpose, key: UsableKey, plaintext: Buffer, context: Buffer) {
    if (!key.opened.publicKey)
      throw new AppError(409, 'key_state_conflict', 'The key material is not available')
    return sealEnvelope({
      purpose,
      header: {
        scheme: key.spec.kind === 'rsa' ? SCHEME.rsaOaep : SCHEME.mlKem,
        keyId: key.row.id,
        keyVersion: key.version,
      },
      publicKey: key.opened.publicKey,
      plaintext,
      context,
      random: (length) => deps.random.bytes(length),
    })
  }

  function sealWith(
    actor: Actor,
    purpose: EnvelopePurpose,
    input: { keyId?: string | undefined; plaintext: Buffer; context: Buffer },
  ): Promise<EncryptResult> {
    const action = ACTIONS[purpose].seal
    return auditedOperation(audit, actor, { action, keyId: input.keyId ?? null }, async () => {
      const key = await keys.resolve(actor.tenantId, {
        keyId: input.keyId,
        keyType: 'Encryption',
        states: ENCRYPT_STATES,
        operation: purpose,
      })
      const sealed = seal(purpose, key, input.plaintext, input.context)
      return {
        result: { ...sealed, keyId: key.row.id, keyVersion: key.version },
        record: {
          action,
          keyId: key.row.id,
          keyVersion: key.version,
          details: { bytes: input.plaintext.length },
        },
      }
    })
  }

  /**
   * The envelope names its key and version; the caller's keyId/keyVersion only cross-check them.
   * Every mismatch, unknown key, other tenant's key or failed authentication is the same
   * decryption_failed; only a state that forbids decryption is told apart (spec section 3).
   */
  async function openWith(actor: Actor, purpose: EnvelopePurpose, input: OpenRequest): Promise<OpenResult> {
    const action = ACTIONS[purpose].open
    const header = decodeHeader(input.envelope.encapsulatedKey.subarray(0, HEADER_BYTES))
    const refuse = async (keyId: string | null, keyVersion: number | null) => {
      await audit.record({
        ...actor,
        action,
        resource: keyId ? `key:${keyId}` : null,
        keyVersion,
        outcome: 'failure',
        details: { error: 'decryption_failed' },
      })
      return decryptionFailed()
    }
    if (
      !header ||
      (input.keyId && input.keyId.toLowerCase() !== header.keyId) ||
      (input.keyVersion !== undefined && input.keyVersion !== header.keyVersion)
    ) {
      throw await refuse(input.keyId ?? null, null)
    }
    let row: Awaited<ReturnType<KeyResolver['findRow']>>
    try {
      row = await keys.findRow(actor.tenantId, header.keyId, 'Encryption')
    } catch (error) {
      if (error instanceof AppError && error.statusCode < 500)
        throw await refuse(header.keyId, header.keyVersion)
      throw error
    }
    if (header.keyVersion > row.current_version) throw await refuse(row.id, header.keyVersion)
    const state = keys.state(row)
    if (!DECRYPT_STATES.includes(state)) {
      await audit.record({
        ...actor,
        action,
        resource: `key:${row.id}`,
        keyVersion: header.keyVersion,
        outcome: 'failure',
        details: { error: 'key_state_conflict' },
      })
      requireState(state, DECRYPT_STATES, purpose === 'wrap' ? 'unwrap' : 'decrypt')
    }
    const opened = await keys.open(actor.tenantId, row, header.keyVersion)
    if (!opened) throw await refuse(row.id, header.keyVersion)
    let plaintext: Buffer
    try {
      plaintext = openEnvelope({
        purpose,
        envelope: input.envelope,
        privateKey: opened.secretKey,
        context: input.context,
      })
    } catch (error) {
      if (error instanceof EnvelopeError) throw await refuse(row.id, header.keyVersion)
      throw error
    }
    await audit.record({
      ...actor,
      action,
      resource: `key:${row.id}`,
      keyVersion: header.keyVersion,
      outcome: 'success',
    })
    return { plaintext, keyId: row.id, keyVersion: header.keyVersion }
  }

  return {
    encrypt: (actor, input) => sealWith(actor, 'encrypt', input),
    decrypt: (actor, input) => openWith(actor, 'encrypt', input),
    wrap: (actor, input) => sealWith(actor, 'wrap', input),
    async unwrap(actor, input) {
      // The path names a key resource: like every /keys/{keyId} route, an unknown key or another
      // tenant's is 404. Whether the wrapped material belongs to it is then decryption_failed.
      await auditRefusals(audit, actor, { action: 'crypto.unwrap', keyId: input.keyId }, () =>
        keys.findRow(actor.tenantId, input.keyId, 'Encryption'),
      )
      return openWith(actor, 'wrap', input)
    },

    generateDataKey(actor, input) {
      const action = 'crypto.generate_data_key'
      return auditedOperation(audit, actor, { action, keyId: input.keyId ?? null }, async () => {
        const key = await keys.resolve(actor.tenantId, {
          keyId: input.keyId,
          keyType: 'Encryption',
          states: ENCRYPT_STATES,
          operation: 'generate data keys',
        })
        const dek = deps.random.bytes(input.keyBytes)
        try {
          const encryptedDek = seal('wrap', key, dek, input.context)
          return {
            result: {
              plaintextDek: input.withPlaintext ? Buffer.from(dek) : null,
              encryptedDek,
              keyId: key.row.id,
              keyVersion: key.version,
            },
            record: {
              action,
              keyId: key.row.id,
              keyVersion: key.version,
              details: { keyBytes: input.keyBytes, withPlaintext: input.withPlaintext },
            },
          }
        } finally {
          dek.fill(0)
        }
      })
    },
  }
}
