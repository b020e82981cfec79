import type { AuditLog } from '../audit/audit-log.ts'
import type { Actor } from '../auth/request-context.ts'
import type { CryptoPool } from '../crypto-pool/crypto-pool.ts'
import type { RandomSource } from '../entropy/random-source.ts'
import { ENCRYPT_STATES } from '../keys/key-state.ts'
import type { KeyRow } from '../keys/key-store.ts'
import { AppError } from '../platform/errors.ts'
import { chunked, failure, type ItemFailure, keyList, memo } from './batch-service.ts'
import {
  decryptionFailed,
  type EncryptResult,
  locateEnvelopeKey,
  type OpenRequest,
} from './crypto-service.ts'
import { type EnvelopePurpose, extraRandomBytes, NONCE_BYTES, sealingKey } from './envelope.ts'
import { type KeyResolver, requireDecryptionKey, type UsableKey } from './key-resolver.ts'
import { type AuditTarget, auditedOperation } from './operation-audit.ts'
import { type ReEncryptItem, reEncryptMany } from './re-encrypt-many.ts'

/**
 * Re-encryption (AWS KMS's ReEncrypt): an envelope sealed under one key (any version) opened and
 * sealed again under another key, or under the current version of the same key, without the
 * plaintext leaving the service (docs/crypto-operations.md, "Re-encrypt").
 */
export interface ReEncryptInput {
  /** The envelope, its source cross-checks (keyId, keyVersion) and its context, as /decrypt takes them. */
  source: OpenRequest
  /** `encrypt` for /encrypt answers, `wrap` for wrapped keys and data keys; the result keeps it. */
  purpose: EnvelopePurpose
  /** Absent: the tenant's default Encryption key. */
  destinationKeyId?: string | undefined
  /** The context the new envelope binds (the route defaults it to the source context). */
  destinationContext: Buffer
}

export interface ReEncryptResult extends EncryptResult {
  sourceKeyId: string
  sourceKeyVersion: number
}

type ItemResult<T> = ({ ok: true } & T) | ItemFailure

export interface ReEncryptService {
  reEncrypt(actor: Actor, input: ReEncryptInput): Promise<ReEncryptResult>
  /** Independent items; those that could not even be read arrive as the error to report for them. */
  reEncryptBatch(
    actor: Actor,
    items: readonly (ReEncryptInput | AppError)[],
  ): Promise<ItemResult<ReEncryptResult>[]>
}

const ACTION = 'crypto.re_encrypt'
const BATCH_ACTION = 'crypto.re_encrypt_batch'
/** What API-key restrictions call both sides of a re-encryption (auth/key-restriction.ts). */
const OPERATION = 're_encrypt'

/** A destination that can seal: its key version and how (sealingKey in envelope.ts). */
function sealingOf(key: UsableKey) {
  const sealing = sealingKey(key.spec.kind, key.opened)
  if (!sealing) throw new AppError(409, 'key_state_conflict', 'The key material is not available')
  return sealing
}

/**
 * The destination is resolved first and the source second, each through the checks its own
 * operation makes (encrypt: an Encryption key in an encrypting state, the default key when none
 * is named; decrypt: locateEnvelopeKey, any decrypting state, public-key-only refused), so a
 * bad destination is refused before anything is decrypted.
 */
export function createReEncryptService(deps: {
  audit: AuditLog
  keys: KeyResolver
  pool: CryptoPool
  random: RandomSource
}): ReEncryptService {
  const { audit, keys, pool } = deps

  const resolveDestination = (actor: Actor, keyId: string | undefined, found?: (row: KeyRow) => void) =>
    keys.resolve(actor, {
      keyId,
      keyType: 'Encryption',
      keyOperation: OPERATION,
      states: ENCRYPT_STATES,
      operation: 'encrypt',
      found,
    })

  /** The work item of one re-encryption: key list indexes, the destination header, its randomness. */
  function workItem(
    list: ReturnType<typeof keyList>,
    input: ReEncryptInput,
    source: { secretKey: ReturnType<typeof requireDecryptionKey> },
    destination: UsableKey,
  ): ReEncryptItem {
    const sealing = sealingOf(destination)
    return {
      open: {
        key: list.indexOf(source.secretKey),
        purpose: input.purpose,
        envelope: input.source.envelope,
        context: input.source.context,
      },
      seal: {
        key: list.indexOf(sealing.key),
        purpose: input.purpose,
        header: { scheme: sealing.scheme, keyId: destination.row.id, keyVersion: destination.version },
        context: input.destinationContext,
        random: deps.random.bytes(NONCE_BYTES + extraRandomBytes(sealing.scheme)),
      },
    }
  }

  return {
    reEncrypt(actor, input) {
      const target: AuditTarget = { action: ACTION, keyId: input.destinationKeyId ?? null, keyVersion: null }
      return auditedOperation(audit, actor, target, async () => {
        // A refusal of the destination is recorded against it; any later one against the source.
        const destination = await resolveDestination(actor, input.destinationKeyId, (row) => {
          target.keyId = row.id
        })
        target.keyVersion = destination.version
        sealingOf(destination)
        target.keyId = input.source.keyId ?? null
        target.keyVersion = null
        const { row, version } = await locateEnvelopeKey(
          input.source,
          (keyId) => keys.findRow(actor, keyId, 'Encryption', OPERATION),
          keys.state,
          'decrypt',
          target,
        )
        const opened = await keys.open(actor.tenantId, row, version)
        if (!opened) throw decryptionFailed()
        const list = keyList()
        const item = workItem(list, input, { secretKey: requireDecryptionKey(opened) }, destination)
        const [sealed] = reEncryptMany(list.list, [item])
        if (!sealed) throw decryptionFailed()
        const result: ReEncryptResult = {
          ...sealed,
          keyId: destination.row.id,
          keyVersion: destination.version,
          sourceKeyId: row.id,
          sourceKeyVersion: version,
        }
        return {
          result,
          record: {
            action: ACTION,
            keyId: row.id,
            keyVersion: version,
            details: {
              purpose: input.purpose,
              sourceKeyId: row.id,
              sourceKeyVersion: version,
              destinationKeyId: destination.row.id,
              destinationKeyVersion: destination.version,
            },
          },
        }
      })
    },

    async reEncryptBatch(actor, items) {
      const results: ItemResult<ReEncryptResult>[] = new Array(items.length)
      const tally = auditTally(audit)
      const destinationOf = memo((keyId) => resolveDestination(actor, keyId || undefined))
      const findRow = memo((keyId) => keys.findRow(actor, keyId, 'Encryption', OPERATION))
      const openVersion = memo(async (id) => {
        const [keyId, version] = id.split('/') as [string, string]
        return keys.open(actor.tenantId, await findRow(keyId), Number(version))
      })
      const list = keyList()
      const work: { at: number; source: KeyRow; sourceVersion: number; destination: UsableKey }[] = []
      const workItems: ReEncryptItem[] = []
      for (const [at, item] of items.entries()) {
        const refuse = (error: unknown, source: Target, destination: Target) => {
          if (!(error instanceof AppError) || error.statusCode >= 500) throw error
          results[at] = failure(error)
          tally.count(source, destination, error.code)
        }
        if (item instanceof AppError) {
          refuse(item, NO_KEY, NO_KEY)
          continue
        }
        let destination: UsableKey
        try {
          destination = await destinationOf(item.destinationKeyId ?? '')
          sealingOf(destination)
        } catch (error) {
          refuse(error, NO_KEY, { keyId: item.destinationKeyId ?? null, keyVersion: null })
          continue
        }
        const to = { keyId: destination.row.id, keyVersion: destination.version }
        // The single /re-encrypt's checks, so an item fails exactly as that request would.
        const target: { keyId: string | null; keyVersion?: number | null } = {
          keyId: item.source.keyId ?? null,
        }
        try {
          const { row, version } = await locateEnvelopeKey(
            item.source,
            findRow,
            keys.state,
            'decrypt',
            target,
          )
          const opened = await openVersion(`${row.id}/${version}`)
          if (!opened) throw decryptionFailed()
          workItems.push(workItem(list, item, { secretKey: requireDecryptionKey(opened) }, destination))
          work.push({ at, source: row, sourceVersion: version, destination })
        } catch (error) {
          refuse(error, { keyId: target.keyId, keyVersion: target.keyVersion ?? null }, to)
        }
      }
      const sealed = await chunked(
        pool.threads,
        workItems,
        (chunk) => reEncryptMany(list.list, chunk),
        (chunk) => pool.reEncryptMany(actor.tenantId, list.list, chunk),
      )
      for (const [i, w] of work.entries()) {
        const from = { keyId: w.source.id, keyVersion: w.sourceVersion }
        const to = { keyId: w.destination.row.id, keyVersion: w.destination.version }
        const envelope = sealed[i]
        if (envelope) {
          results[w.at] = {
            ok: true,
            ...envelope,
            ...to,
            sourceKeyId: from.keyId,
            sourceKeyVersion: from.keyVersion,
          }
          tally.count(from, to, null)
        } else {
          const error = decryptionFailed()
          results[w.at] = failure(error)
          tally.count(from, to, error.code)
        }
      }
      await tally.write(actor)
      return results
    },
  }
}

interface Target {
  keyId: string | null
  keyVersion: number | null
}
const NO_KEY: Target = { keyId: null, keyVersion: null }

/**
 * The audit of a re-encrypt batch: one record per (source key and version, destination key and
 * version, outcome) with its item count, as the other batches count theirs. The record's resource
 * is the source key (a refusal before the source is known: the destination's, or none).
 */
function auditTally(audit: AuditLog) {
  const groups = new Map<string, { from: Target; to: Target; error: string | null; items: number }>()
  return {
    count(from: Target, to: Target, error: string | null) {
      const id = `${from.keyId}|${from.keyVersion}|${to.keyId}|${to.keyVersion}|${error}`
      const group = groups.get(id)
      if (group) group.items++
      else groups.set(id, { from, to, error, items: 1 })
    },
    write(actor: Actor) {
      return Promise.all(
        [...groups.values()].map(({ from, to, error, items }) => {
          const resource = from.keyId ?? to.keyId
          return audit.record({
            ...actor,
            action: BATCH_ACTION,
            resource: resource ? `key:${resource}` : null,
            keyVersion: from.keyId ? from.keyVersion : to.keyVersion,
            outcome: error ? 'failure' : 'success',
            details: {
              items,
              ...(from.keyId ? { sourceKeyId: from.keyId, sourceKeyVersion: from.keyVersion } : {}),
              ...(to.keyId ? { destinationKeyId: to.keyId, destinationKeyVersion: to.keyVersion } : {}),
              ...(error ? { error } : {}),
            },
          })
        }),
      )
    },
  }
}
