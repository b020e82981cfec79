import type { Sql } from '../platform/database.ts'
import type { InvalidationBus } from '../platform/invalidation-bus.ts'
import { apiKeyMatches, lookupIdOf } from './api-key-format.ts'
import { type ApiKeyRow, findApiKeyByLookupId } from './api-key-store.ts'
import type { Scope } from './scopes.ts'

/** Who is calling: established by the X-Api-Key header before any other check. */
export interface Principal {
  tenantId: string
  apiKeyId: string
  scopes: ReadonlySet<Scope>
}

export const API_KEY_INVALIDATION_TOPIC = 'api-key'

interface CacheEntry {
  row: ApiKeyRow | null
  fetchedAt: number
}

export interface Authenticator {
  authenticate(presented: string): Promise<Principal | undefined>
  /** Drops one key from this process's cache and tells the other processes to do the same. */
  invalidate(lookupId: string): Promise<void>
}

/**
 * API-key lookups are cached per process (hash, scopes, revocation) so a request costs no
 * database round trip. Revocations reach every process through the invalidation bus within
 * milliseconds; the TTL bounds staleness if Redis is down. Unknown lookup ids are cached too
 * (briefly), since they are attacker-supplied.
 */
export function createAuthenticator(deps: {
  sql: Sql
  bus: InvalidationBus
  ttlMs: number
  now?: () => number
  maxEntries?: number
}): Authenticator {
  const cache = new Map<string, CacheEntry>()
  const inflight = new Map<string, Promise<ApiKeyRow | null>>()
  const now = deps.now ?? Date.now
  const maxEntries = deps.maxEntries ?? 50_000

  // Bumped by every invalidation, so a lookup that started before it cannot cache a stale row.
  let generation = 0
  const drop = (lookupId: string) => {
    generation++
    cache.delete(lookupId)
    inflight.delete(lookupId)
  }
  deps.bus.subscribe(API_KEY_INVALIDATION_TOPIC, drop)
  deps.bus.onResync(() => {
    generation++
    cache.clear()
    inflight.clear()
  })

  async function load(lookupId: string): Promise<ApiKeyRow | null> {
    const cached = cache.get(lookupId)
    if (cached && now() - cached.fetchedAt < deps.ttlMs) return cached.row
    // One query per key however many requests arrive at once.
    let pending = inflight.get(lookupId)
    if (!pending) {
      const startedAt = generation
      const query = findApiKeyByLookupId(deps.sql, lookupId).then((row) => {
        const fetched = row ?? null
        if (generation === startedAt) {
          if (cache.size >= maxEntries) cache.delete(cache.keys().next().value!)
          cache.set(lookupId, { row: fetched, fetchedAt: now() })
        }
        return fetched
      })
      pending = query.finally(() => {
        if (inflight.get(lookupId) === pending) inflight.delete(lookupId)
      })
      inflight.set(lookupId, pending)
    }
    return pending
  }

  return {
    async authenticate(presented) {
      const lookupId = lookupIdOf(presented)
      if (!lookupId) return undefined
      const row = await load(lookupId)
      if (!row || !apiKeyMatches(presented, row.secret_hash)) return undefined
      if (row.revoked_at) return undefined
      if (row.expires_at && row.expires_at.getTime() <= now()) return undefined
      return { tenantId: row.tenant_id, apiKeyId: row.id, scopes: new Set(row.scopes as Scope[]) }
    },
    async invalidate(lookupId) {
      drop(lookupId)
      await deps.bus.publish(API_KEY_INVALIDATION_TOPIC, lookupId)
    },
  }
}
