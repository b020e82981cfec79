/**
 * A per-process cache in front of the database for rows read on every request (API keys, key
 * rows). Entries live in groups (a tenant, an API key) so one invalidation drops everything a
 * change may have touched. Concurrent misses share one load. An invalidation bumps a generation
 * counter, so a load that started before it cannot store a stale value after it. The TTL bounds
 * staleness when an invalidation is missed (Redis down); callers wire invalidations to the bus.
 */
export interface ReadThroughCache<V> {
  get(group: string, key: string, load: () => Promise<V>): Promise<V>
  dropGroup(group: string): void
  clear(): void
}

interface Entry<V> {
  value: V
  fetchedAt: number
}

export function createReadThroughCache<V>(options: {
  ttlMs: number
  maxEntries: number
  now?: () => number
}): ReadThroughCache<V> {
  const now = options.now ?? Date.now
  const groups = new Map<string, Map<string, Entry<V>>>()
  const inflight = new Map<string, Promise<V>>()
  let entries = 0
  let generation = 0

  const dropGroup = (group: string) => {
    generation++
    const entriesOfGroup = groups.get(group)
    if (entriesOfGroup) {
      entries -= entriesOfGroup.size
      groups.delete(group)
    }
  }

  function store(group: string, key: string, value: V): void {
    // Oldest group first: a Map iterates in insertion order.
    while (entries >= options.maxEntries && groups.size > 0) {
      const oldest = groups.keys().next().value!
      entries -= groups.get(oldest)!.size
      groups.delete(oldest)
    }
    let entriesOfGroup = groups.get(group)
    if (!entriesOfGroup) {
      entriesOfGroup = new Map()
      groups.set(group, entriesOfGroup)
    }
    if (!entriesOfGroup.has(key)) entries++
    entriesOfGroup.set(key, { value, fetchedAt: now() })
  }

  return {
    get(group, key, load) {
      const cached = groups.get(group)?.get(key)
      if (cached && now() - cached.fetchedAt < options.ttlMs) return Promise.resolve(cached.value)
      const id = `${group}\u0000${key}`
      let pending = inflight.get(id)
      if (!pending) {
        const startedAt = generation
        pending = load()
          .then((value) => {
            if (generation === startedAt && options.ttlMs > 0) store(group, key, value)
            return value
          })
          .finally(() => {
            if (inflight.get(id) === pending) inflight.delete(id)
          })
        inflight.set(id, pending)
      }
      return pending
    },
    dropGroup(group) {
      dropGroup(group)
      // A load in flight for this group may have read the old row: later callers must not join it.
      for (const id of inflight.keys()) if (id.startsWith(`${group}\u0000`)) inflight.delete(id)
    },
    clear() {
      generation++
      groups.clear()
      inflight.clear()
      entries = 0
    },
  }
}
