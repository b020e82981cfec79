import type { AuditLog } from '../audit/audit-log.ts'
import type { Actor } from '../auth/request-context.ts'
import type { CryptoPool } from '../crypto-pool/crypto-pool.ts'
import type { RandomSource } from '../entropy/random-source.ts'
import { isAliasRef } from '../keys/alias-name.ts'
import { ENCRYPT_STATES } from '../keys/key-state.ts'
import type { KeyRow } from '../keys/key-store.ts'
import { AppError } from '../platform/errors.ts'
import {
  decryptionFailed,
  type EncryptResult,
  locateEnvelopeKey,
  type OpenRequest,
} from './crypto-service.ts'
import { type EnvelopeKey, extraRandomBytes, NONCE_BYTES, sealingKey } from './envelope.ts'
import { type OpenItem, openMany, type SealItem, sealMany } from './envelope-batch.ts'
import { decryptionKeyOf, type KeyResolver, publicKeyOnly } from './key-resolver.ts'

export type ItemFailure = { ok: false; error: string; message: string }
type ItemResult<T> = ({ ok: true } & T) | ItemFailure

export interface EncryptItem {
  keyId?: string | undefined
  plaintext: Buffer
  context: Buffer
}

export interface BatchService {
  /** Items that could not even be read arrive as the error to report for them. */
  encrypt(actor: Actor, items: readonly (EncryptItem | AppError)[]): Promise<ItemResult<EncryptResult>[]>
  decrypt(
    actor: Actor,
    items: readonly (OpenRequest | AppError)[],
  ): Promise<ItemResult<{ plaintext: Buffer; keyId: string; keyVersion: number }>[]>
}

/** DESIGN: up to 1,000 items per batch request. */
export const MAX_BATCH_ITEMS = 1000
/**
 * Below this many items a batch runs inline: handing a task to a worker thread costs more than
 * a few envelope operations (DESIGN: 1 item per task gave 14k ops/s, 10 per task 53k/s).
 */
const MIN_POOLED_ITEMS = 10
/**
 * Two chunks per pool thread, so a thread finds its next chunk queued while the main thread
 * handles the previous one's results, and at most 250 items per chunk (~25 ms of ML-KEM on a
 * busy core: what another tenant may wait for a thread). Not more chunks: every chunk is a task
 * in the tenant's bounded queue, and 1,000 items in chunks of 100 put 8 concurrent batches of one
 * tenant past its 64 tasks, so half of them failed with 429 crypto_busy after part of their work
 * (docs/decisions.md, "Performance: batch chunks").
 */
const MAX_CHUNK_ITEMS = 250
const CHUNKS_PER_THREAD = 2

export const failure = (error: AppError): ItemFailure => ({
  ok: false,
  error: error.code,
  message: error.message,
})

/**
 * The items' work inline (a few items), or in chunks over the crypto pool's `threads` threads.
 * Shared by the batches and re-encrypt batches (re-encrypt-service.ts).
 */
export async function chunked<I, R>(
  threads: number,
  items: readonly I[],
  inline: (items: readonly I[]) => R[],
  pooled: (items: I[]) => Promise<R[]>,
): Promise<R[]> {
  if (items.length < MIN_POOLED_ITEMS) return inline(items)
  const size = Math.min(
    MAX_CHUNK_ITEMS,
    Math.max(MIN_POOLED_ITEMS, Math.ceil(items.length / (CHUNKS_PER_THREAD * threads))),
  )
  const chunks: I[][] = []
  for (let i = 0; i < items.length; i += size) chunks.push(items.slice(i, i + size))
  return (await Promise.all(chunks.map(pooled))).flat()
}

/** Memoised per batch: each distinct key (and version) is looked up and opened once. */
export function memo<T>(load: (id: string) => Promise<T>) {
  const seen = new Map<string, Promise<T>>()
  return (id: string) => {
    let value = seen.get(id)
    if (!value) {
      value = load(id)
      // A rejection is read per item; keep Node from reporting it as unhandled meanwhile.
      value.catch(() => {})
      seen.set(id, value)
    }
    return value
  }
}

/** KeyObjects (and X-Wing keys) of a batch, each passed once to the worker threads and referenced by index. */
export function keyList() {
  const list: EnvelopeKey[] = []
  const index = new Map<EnvelopeKey, number>()
  return {
    list,
    indexOf(key: EnvelopeKey) {
      let at = index.get(key)
      if (at === undefined) {
        at = list.push(key) - 1
        index.set(key, at)
      }
      return at
    },
  }
}

/**
 * Batches: independent items, results in request order, one item's failure never fails the
 * others. Keys are resolved once per distinct key; the envelope work is split into chunks over
 * the crypto pool. Audit: one record per (key, version, outcome) of each batch, with its item
 * count, so a 1,000-item batch on one key is one record, not 1,000.
 */
export function createBatchService(deps: {
  audit: AuditLog
  keys: KeyResolver
  pool: CryptoPool
  random: RandomSource
}): BatchService {
  const { keys, pool } = deps

  function auditTally(action: string) {
    const groups = new Map<
      string,
      {
        keyId: string | null
        keyVersion: number | null
        error: string | null
        alias: string | null
        items: number
      }
    >()
    return {
      /** `keyId`: the key's id, or the reference given when none was found; `ref`: as given. */
      count(keyId: string | null, keyVersion: number | null, error: string | null, ref?: string) {
        // Records name key ids; the alias an item named its key by goes in the details.
        const alias = ref && isAliasRef(ref) ? ref : isAliasRef(keyId) ? keyId : null
        if (isAliasRef(keyId)) keyId = null
        const id = `${keyId}|${keyVersion}|${error}|${alias}`
        const group = groups.get(id)
        if (group) group.items++
        else groups.set(id, { keyId, keyVersion, error, alias, items: 1 })
      },
      write(actor: Actor) {
        return Promise.all(
          [...groups.values()].map((g) =>
            deps.audit.record({
              ...actor,
              action,
              resource: g.keyId ? `key:${g.keyId}` : null,
              keyVersion: g.keyVersion,
              outcome: g.error ? 'failure' : 'success',
              details: {
                items: g.items,
                ...(g.error ? { error: g.error } : {}),
                ...(g.alias ? { alias: g.alias } : {}),
              },
            }),
          ),
        )
      },
    }
  }

  return {
    async encrypt(actor, items) {
      const results: ItemResult<EncryptResult>[] = new Array(items.length)
      const tally = auditTally('crypto.encrypt_batch')
      // The key each reference named, for the records of refusals that came after it was found.
      const found = new Map<string, string>()
      const resolveKey = memo((keyId) =>
        keys.resolve(actor, {
          keyId: keyId || undefined,
          keyType: 'Encryption',
          keyOperation: 'encrypt',
          found: (row) => {
            found.set(keyId, row.id)
          },
          states: ENCRYPT_STATES,
          operation: 'encrypt',
        }),
      )
      const keyObjects = keyList()
      const work: { at: number; keyId: string; keyVersion: number; item: SealItem }[] = []
      for (const [at, item] of items.entries()) {
        if (item instanceof AppError) {
          results[at] = failure(item)
          tally.count(null, null, item.code)
          continue
        }
        try {
          const key = await resolveKey(item.keyId ?? '')
          const sealing = sealingKey(key.spec.kind, key.opened)
          if (!sealing) throw new AppError(409, 'key_state_conflict', 'The key material is not available')
          work.push({
            at,
            keyId: key.row.id,
            keyVersion: key.version,
            item: {
              key: keyObjects.indexOf(sealing.key),
              purpose: 'encrypt',
              header: { scheme: sealing.scheme, keyId: key.row.id, keyVersion: key.version },
              plaintext: item.plaintext,
              context: item.context,
              random: deps.random.bytes(NONCE_BYTES + extraRandomBytes(sealing.scheme)),
            },
          })
        } catch (error) {
          if (!(error instanceof AppError) || error.statusCode >= 500) throw error
          results[at] = failure(error)
          tally.count(found.get(item.keyId ?? '') ?? item.keyId ?? null, null, error.code, item.keyId)
        }
      }
      const sealed = await chunked(
        pool.threads,
        work.map((w) => w.item),
        (chunk) => sealMany(keyObjects.list, chunk),
        (chunk) => pool.sealMany(actor.tenantId, keyObjects.list, chunk),
      )
      for (const [i, w] of work.entries()) {
        results[w.at] = { ok: true, ...sealed[i]!, keyId: w.keyId, keyVersion: w.keyVersion }
        tally.count(w.keyId, w.keyVersion, null, (items[w.at] as EncryptItem).keyId)
      }
      await tally.write(actor)
      return results
    },

    async decrypt(actor, items) {
      type Opened = { plaintext: Buffer; keyId: string; keyVersion: number }
      const results: ItemResult<Opened>[] = new Array(items.length)
      const tally = auditTally('crypto.decrypt_batch')
      const findRow = memo((keyId) => keys.findRow(actor, keyId, 'Encryption', 'decrypt'))
      const openVersion = memo(async (id) => {
        const [keyId, version] = id.split('/') as [string, string]
        return keys.open(actor.tenantId, await findRow(keyId), Number(version))
      })
      const keyObjects = keyList()
      const work: { at: number; keyId: string; keyVersion: number; item: OpenItem }[] = []
      const refuse = (at: number, error: AppError, keyId: string | null, keyVersion: number | null) => {
        results[at] = failure(error)
        tally.count(keyId, keyVersion, error.code)
      }
      for (const [at, item] of items.entries()) {
        if (item instanceof AppError) {
          refuse(at, item, null, null)
          continue
        }
        // The single /decrypt's checks, so an item fails exactly as that request would.
        const target: { keyId: string | null; keyVersion?: number | null } = { keyId: item.keyId ?? null }
        let located: { row: KeyRow; version: number }
        try {
          located = await locateEnvelopeKey(item, findRow, keys.state, 'decrypt', target)
        } catch (error) {
          if (!(error instanceof AppError) || error.statusCode >= 500) throw error
          refuse(at, error, target.keyId, target.keyVersion ?? null)
          continue
        }
        const { row, version } = located
        const opened = await openVersion(`${row.id}/${version}`)
        if (!opened) {
          refuse(at, decryptionFailed(), row.id, version)
          continue
        }
        const decryptionKey = decryptionKeyOf(opened)
        if (!decryptionKey) {
          refuse(at, publicKeyOnly(), row.id, version)
          continue
        }
        work.push({
          at,
          keyId: row.id,
          keyVersion: version,
          item: {
            key: keyObjects.indexOf(decryptionKey),
            purpose: 'encrypt',
            envelope: item.envelope,
            context: item.context,
          },
        })
      }
      const plaintexts = await chunked(
        pool.threads,
        work.map((w) => w.item),
        (chunk) => openMany(keyObjects.list, chunk),
        (chunk) => pool.openMany(actor.tenantId, keyObjects.list, chunk),
      )
      for (const [i, w] of work.entries()) {
        const plaintext = plaintexts[i]
        if (plaintext) {
          results[w.at] = { ok: true, plaintext, keyId: w.keyId, keyVersion: w.keyVersion }
          tally.count(w.keyId, w.keyVersion, null)
        } else refuse(w.at, decryptionFailed(), w.keyId, w.keyVersion)
      }
      await tally.write(actor)
      return results
    },
  }
}
