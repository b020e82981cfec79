import type { AuditLog } from '../audit/audit-log.ts'
import type { KeyOperation } from '../auth/key-restriction.ts'
import type { Actor } from '../auth/request-context.ts'
import type { RandomSource } from '../entropy/random-source.ts'
import { isAliasRef } from '../keys/alias-name.ts'
import { DECRYPT_STATES, ENCRYPT_STATES, type KeyState, requireState } from '../keys/key-state.ts'
import type { KeyRow } from '../keys/key-store.ts'
import { AppError, invalidField } from '../platform/errors.ts'
import {
  decodeHeader,
  EnvelopeError,
  type EnvelopePurpose,
  HEADER_BYTES,
  openEnvelope,
  type SealedEnvelope,
  sealEnvelope,
  sealingKey,
} from './envelope.ts'
import { type KeyResolver, namingKeyIn, requireDecryptionKey, type UsableKey } from './key-resolver.ts'
import { type AuditTarget, auditedOperation } from './operation-audit.ts'

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

interface OpenResult {
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
  /** `keyId`: the path's key; `bodyKeyId`: the body's cross-check of it (400 when another key). */
  unwrap(
    actor: Actor,
    input: OpenRequest & { keyId: string; bodyKeyId?: string | undefined },
  ): Promise<OpenResult>
  /** A fresh random data key, returned wrapped (unwrap recovers it) and optionally in plaintext. */
  generateDataKey(
    actor: Actor,
    input: { keyId?: string | undefined; keyBytes: number; withPlaintext: boolean; context: Buffer },
  ): Promise<DataKeyResult>
}

/** One answer for every way decryption can fail, so the error says nothing about which part was wrong. */
export const decryptionFailed = () =>
  new AppError(400, 'decryption_failed', 'The ciphertext cannot be decrypted with this key and context')

/**
 * The checks every decryption makes before any cryptography, in one order shared by /decrypt,
 * unwrap and decrypt batches, so a batch item fails exactly as the single request would: the
 * header, the caller's keyId/keyVersion cross-checks, the key (any lookup failure: unknown,
 * another tenant's, wrong type), the version, then the state, the one failure told apart
 * (spec section 3), besides an API key's restriction (403). A keyId that is an alias must name
 * the envelope's key. `target` learns the key and version as they become known, for the audit.
 */
export async function locateEnvelopeKey(
  input: OpenRequest,
  findRow: (keyId: string) => Promise<KeyRow>,
  stateOf: (row: KeyRow) => KeyState,
  operation: string,
  target: Pick<AuditTarget, 'keyId' | 'keyVersion'>,
): Promise<{ row: KeyRow; version: number }> {
  const header = decodeHeader(input.envelope.encapsulatedKey.subarray(0, HEADER_BYTES))
  if (
    !header ||
    (input.keyId && !isAliasRef(input.keyId) && input.keyId.toLowerCase() !== header.keyId) ||
    (input.keyVersion !== undefined && input.keyVersion !== header.keyVersion)
  ) {
    throw decryptionFailed()
  }
  target.keyId = header.keyId
  target.keyVersion = header.keyVersion
  let row: KeyRow
  try {
    row = await findRow(header.keyId)
  } catch (error) {
    if (error instanceof AppError && error.statusCode < 500 && error.statusCode !== 403)
      throw decryptionFailed()
    throw error
  }
  // Unwrap's findRow is the path's key, whatever the envelope names.
  if (row.id !== header.keyId || header.keyVersion > row.current_version) throw decryptionFailed()
  if (input.keyId && isAliasRef(input.keyId)) {
    let named: KeyRow
    try {
      named = await findRow(input.keyId)
    } catch (error) {
      if (error instanceof AppError && error.statusCode < 500) throw decryptionFailed()
      throw error
    }
    if (named.id !== row.id) throw decryptionFailed()
  }
  requireState(stateOf(row), DECRYPT_STATES, operation)
  return { row, version: header.keyVersion }
}

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
    const sealing = sealingKey(key.spec.kind, key.opened)
    if (!sealing) throw new AppError(409, 'key_state_conflict', 'The key material is not available')
    return sealEnvelope({
      purpose,
      header: { scheme: sealing.scheme, keyId: key.row.id, keyVersion: key.version },
      key: sealing.key,
      plaintext,
      context,
      random: (length) => deps.random.bytes(length),
    })
  }

  /**
   * The encryption key an operation uses, named in `target` as soon as it is known: a request
   * without keyId goes to the tenant default, and a refusal (a revoked or expired default) is
   * recorded against the key it resolved to, not against nothing.
   */
  async function resolveSealingKey(
    actor: Actor,
    keyId: string | undefined,
    operation: string,
    target: AuditTarget,
    keyOperation: KeyOperation,
  ): Promise<UsableKey> {
    const key = await keys.resolve(actor, {
      keyId,
      keyType: 'Encryption',
      keyOperation,
      states: ENCRYPT_STATES,
      operation,
      found: namingKeyIn(target),
    })
    target.keyVersion = key.version
    return key
  }

  function sealWith(
    actor: Actor,
    purpose: EnvelopePurpose,
    input: { keyId?: string | undefined; plaintext: Buffer; context: Buffer },
  ): Promise<EncryptResult> {
    const action = ACTIONS[purpose].seal
    const target: AuditTarget = { action, keyId: input.keyId ?? null, keyVersion: null }
    return auditedOperation(audit, actor, target, async () => {
      const key = await resolveSealingKey(actor, input.keyId, purpose, target, purpose)
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
   * Decrypt and unwrap. For unwrap the path names the key resource: like every /keys/{keyId}
   * route an unknown or other tenant's key is 404, and material it did not wrap is then
   * decryption_failed like every other mismatch.
   */
  function openWith(
    actor: Actor,
    purpose: EnvelopePurpose,
    input: OpenRequest,
    pathKeyId?: string,
    bodyKeyId?: string,
  ): Promise<OpenResult> {
    const action = ACTIONS[purpose].open
    const target: AuditTarget = { action, keyId: pathKeyId ?? input.keyId ?? null, keyVersion: null }
    return auditedOperation(audit, actor, target, async () => {
      const keyOperation = purpose === 'wrap' ? 'unwrap' : 'decrypt'
      const pathRow = pathKeyId ? await keys.findRow(actor, pathKeyId, 'Encryption', keyOperation) : undefined
      if (
        pathRow &&
        bodyKeyId !== undefined &&
        (await keys.keyIdOf(actor.tenantId, bodyKeyId)) !== pathRow.id
      )
        throw invalidField('body/keyId', `names key ${bodyKeyId}, but the path names key ${pathKeyId}`)
      const { row, version } = await locateEnvelopeKey(
        input,
        pathRow ? async () => pathRow : (keyId) => keys.findRow(actor, keyId, 'Encryption', keyOperation),
        keys.state,
        purpose === 'wrap' ? 'unwrap' : 'decrypt',
        target,
      )
      const opened = await keys.open(actor.tenantId, row, version)
      if (!opened) throw decryptionFailed()
      let plaintext: Buffer
      try {
        plaintext = openEnvelope({
          purpose,
          envelope: input.envelope,
          privateKey: requireDecryptionKey(opened),
          context: input.context,
        })
      } catch (error) {
        if (error instanceof EnvelopeError) throw decryptionFailed()
        throw error
      }
      return {
        result: { plaintext, keyId: row.id, keyVersion: version },
        record: { action, keyId: row.id, keyVersion: version },
      }
    })
  }

  return {
    encrypt: (actor, input) => sealWith(actor, 'encrypt', input),
    decrypt: (actor, input) => openWith(actor, 'encrypt', input),
    wrap: (actor, input) => sealWith(actor, 'wrap', input),
    unwrap: (actor, input) => openWith(actor, 'wrap', input, input.keyId, input.bodyKeyId),

    generateDataKey(actor, input) {
      const action = 'crypto.generate_data_key'
      const target: AuditTarget = { action, keyId: input.keyId ?? null, keyVersion: null }
      return auditedOperation(audit, actor, target, async () => {
        const key = await resolveSealingKey(
          actor,
          input.keyId,
          'generate data keys',
          target,
          'generate_data_key',
        )
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
