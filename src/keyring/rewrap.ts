import { open, SealedBlobError, seal } from './aead.ts'
import type { MasterKey, MasterKeyring } from './master-key.ts'

/**
 * Re-wrapping what is sealed under the master keyring (docs/operations.md "Master key rotation").
 * Each domain owns its sealed rows and re-wraps them itself, through its own store, with the
 * loop below: the keyring module knows how to move a blob to the primary key, never whose table
 * it lives in.
 */

/** One blob sealed under a master key, as its owner's store reads it. */
export interface SealedItem {
  /** The row's key: batches are read in its order, after the last one seen. */
  id: string
  sealed: Buffer
  masterKeyId: string
}

export interface RewrapResult {
  /** Re-sealed under the primary key by this run. */
  rewrapped: number
  /**
   * Sealed by a master key the keyring does not hold (or that fails to open it): left as they
   * are, so that a run given the missing key can still move them.
   */
  unreadable: number
}

const NOTHING_REWRAPPED: RewrapResult = Object.freeze({ rewrapped: 0, unreadable: 0 })

function addResults(a: RewrapResult, b: RewrapResult): RewrapResult {
  return { rewrapped: a.rewrapped + b.rewrapped, unreadable: a.unreadable + b.unreadable }
}

/** What a domain exposes: `kms rotate-master-key` calls each owner in turn. */
export interface MasterKeySealed {
  /** What is sealed, as the operator reads it on stderr: "tenant KEKs", "application secrets". */
  what: string
  rewrapSealed(
    keyring: MasterKeyring,
    progress?: (done: number, total: number) => void,
  ): Promise<RewrapResult>
}

const BATCH = 100

/**
 * Moves every item the owner's `batch` returns to the keyring's primary key. Each item is one
 * guarded write (`replace` stores the new blob only if the row still holds the one read), so a run
 * can stop anywhere and be started again, runs can overlap, and a row changed meanwhile (its link
 * e-mailed, its secret rotated) is left to the change. Items are read by id, after the last one
 * seen, so unreadable ones are stepped over rather than read again forever.
 */
export async function rewrapEach<T extends SealedItem>(options: {
  keyring: MasterKeyring
  /** Up to `limit` items not sealed by `primaryId`, with an id after `after` (all when undefined), in id order. */
  batch(primaryId: string, after: string | undefined, limit: number): Promise<T[]>
  aad(item: T): string
  /**
   * Stores `resealed` (sealed by `primary`) if the row still holds `item.sealed`; false when it
   * changed meanwhile. `plaintext` is there for owners that keep more than the blob under the key
   * (a one-time code's HMAC); it is wiped afterwards.
   */
  replace(item: T, resealed: Buffer, primary: MasterKey, plaintext: Buffer): Promise<boolean>
  progress?: (done: number) => void
}): Promise<RewrapResult> {
  // One primary for the whole run: a key file changed meanwhile must not split the run over two keys.
  const primary = options.keyring.primary
  let rewrapped = 0
  let unreadable = 0
  let after: string | undefined
  for (;;) {
    const items = await options.batch(primary.id, after, BATCH)
    if (items.length === 0) break
    for (const item of items) {
      after = item.id
      const plaintext = openWith(options.keyring, item, options.aad(item))
      if (!plaintext) {
        unreadable++
        continue
      }
      try {
        const resealed = seal(primary.key, plaintext, options.aad(item))
        if (await options.replace(item, resealed, primary, plaintext)) rewrapped++
      } finally {
        plaintext.fill(0)
      }
    }
    options.progress?.(rewrapped)
    if (items.length < BATCH) break
  }
  return { rewrapped, unreadable }
}

function openWith(keyring: MasterKeyring, item: SealedItem, aad: string): Buffer | undefined {
  const master = keyring.find(item.masterKeyId)
  if (!master) return undefined
  try {
    return open(master.key, item.sealed, aad)
  } catch (err) {
    if (err instanceof SealedBlobError) return undefined
    throw err
  }
}

export interface RotationSummary extends RewrapResult {
  /** Per owner, by its `what`. */
  byOwner: Record<string, RewrapResult>
}

/**
 * One pass over every owner of sealed data, in turn. Each owner's rows are re-wrapped one by one
 * (see rewrapEach), so a pass interrupted anywhere is finished by the next one.
 */
export async function rewrapEverything(
  owners: readonly MasterKeySealed[],
  keyring: MasterKeyring,
  report: (line: string) => void = () => {},
): Promise<RotationSummary> {
  let total: RewrapResult = NOTHING_REWRAPPED
  const byOwner: Record<string, RewrapResult> = {}
  for (const owner of owners) {
    let counted = false
    const result = await owner.rewrapSealed(keyring, (done, of) => {
      counted = true
      report(`re-wrapped ${done}/${of} ${owner.what}`)
    })
    byOwner[owner.what] = result
    total = addResults(total, result)
    if (result.rewrapped > 0 && !counted) report(`re-wrapped ${result.rewrapped} ${owner.what}`)
    if (result.unreadable > 0)
      report(
        `${result.unreadable} ${owner.what} are sealed by a master key this command does not hold: left as they are`,
      )
  }
  return { ...total, byOwner }
}
