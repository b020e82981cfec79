/**
 * A bounded store of prefetched (already conditioned) remote bytes. Bytes are consume-once:
 * whatever is handed out is zeroed in the pool at once, and a batch added is zeroed in the
 * caller's buffer. Taken from the top like a stack: order does not matter for random bytes and
 * it keeps take() to one pass with no bookkeeping.
 */
export interface EntropyPool {
  readonly capacity: number
  available(): number
  free(): number
  /** Copies as much of `bytes` as fits, wipes `bytes`, returns how many bytes were kept. */
  add(bytes: Buffer): number
  /** XORs `target.length` pooled bytes into `target`; false (and nothing consumed) if too few. */
  xorInto(target: Buffer): boolean
  /** Wipes everything. */
  clear(): void
}

export function createEntropyPool(capacity: number): EntropyPool {
  if (!Number.isSafeInteger(capacity) || capacity < 1) throw new RangeError('pool capacity must be positive')
  const store = Buffer.alloc(capacity)
  let fill = 0
  return {
    capacity,
    available: () => fill,
    free: () => capacity - fill,
    add(bytes) {
      const kept = Math.min(bytes.length, capacity - fill)
      bytes.copy(store, fill, 0, kept)
      fill += kept
      bytes.fill(0)
      return kept
    },
    xorInto(target) {
      const n = target.length
      if (n > fill) return false
      const start = fill - n
      for (let i = 0; i < n; i++) target[i]! ^= store[start + i]!
      store.fill(0, start, fill)
      fill = start
      return true
    },
    clear() {
      store.fill(0, 0, fill)
      fill = 0
    },
  }
}
