import type { ApiKeyPrincipal } from '../auth/principal.ts'
import type { Scope } from '../auth/scopes.ts'
import type { Sql } from '../data/database.ts'
import type { InvalidationBus } from '../data/invalidation-bus.ts'
import { createReadThroughCache } from '../data/read-through-cache.ts'
import { apiKeyMatches, constantTimeEqual, lookupIdOf } from './api-key-format.ts'
import { restrictionOfRow } from './api-key-service.ts'
import { type ApiKeyRow, findApiKeyByLookupId } from './api-key-store.ts'

const API_KEY_INVALIDATION_TOPIC = 'api-key'

export interface Authenticator {
  authenticate(presented: string): Promise<ApiKeyPrincipal | undefined>
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
  const now = deps.now ?? Date.now
  const cache = createReadThroughCache<ApiKeyRow | null>({
    ttlMs: deps.ttlMs,
    maxEntries: deps.maxEntries ?? 50_000,
    now,
  })
  deps.bus.subscribe(API_KEY_INVALIDATION_TOPIC, (lookupId) => cache.dropGroup(lookupId))
  deps.bus.onResync(() => cache.clear())

  // The principal of a cached row is built once: the row object lives as long as its cache entry.
  const principals = new WeakMap<ApiKeyRow, ApiKeyPrincipal>()
  const principalOf = (row: ApiKeyRow): ApiKeyPrincipal => {
    let principal = principals.get(row)
    if (!principal) {
      principal = {
        kind: 'apiKey',
        tenantId: row.tenant_id,
        apiKeyId: row.id,
        scopes: new Set(row.scopes as Scope[]),
        keyRestriction: restrictionOfRow(row),
      }
      principals.set(row, principal)
    }
    return principal
  }

  // The key last verified against each cached row, so the next request with the same key is
  // compared in constant time without hashing it again (a SHA-256 per request cost 1.2-1.4 µs,
  // this compare 0.05 µs: bench/RESULTS.md). It lives only as long as the row's cache entry (the
  // TTL), in the process that already holds every request's header and the master key; the
  // database still stores the hash alone.
  const verified = new WeakMap<ApiKeyRow, string>()
  const matches = (presented: string, row: ApiKeyRow): boolean => {
    const known = verified.get(row)
    if (known !== undefined && constantTimeEqual(presented, known)) return true
    if (!apiKeyMatches(presented, row.secret_hash)) return false
    verified.set(row, presented)
    return true
  }

  // One query per key however many requests arrive at once.
  const load = (lookupId: string) =>
    cache.get(lookupId, '', async () => (await findApiKeyByLookupId(deps.sql, lookupId)) ?? null)

  return {
    async authenticate(presented) {
      const lookupId = lookupIdOf(presented)
      if (!lookupId) return undefined
      const row = await load(lookupId)
      if (!row || !matches(presented, row)) return undefined
      if (row.revoked_at) return undefined
      if (row.expires_at && row.expires_at.getTime() <= now()) return undefined
      return principalOf(row)
    },
    invalidate: (lookupId) => deps.bus.publish(API_KEY_INVALIDATION_TOPIC, lookupId),
  }
}
