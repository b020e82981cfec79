import type { Sql } from '../data/database.ts'
import type { InvalidationBus } from '../data/invalidation-bus.ts'
import { createReadThroughCache } from '../data/read-through-cache.ts'
import type { KeyType } from './algorithms.ts'
import { getAlias } from './alias-store.ts'
import { getDefaultKey, getKey, type KeyRow } from './key-store.ts'

const KEY_INVALIDATION_TOPIC = 'key'

/**
 * Key rows as the cryptographic operations read them, cached per process so an operation costs
 * no database round trip. Every committed change to a tenant's keys drops that tenant's entries
 * here at once and in the other processes through the bus (a default moving from one key to
 * another touches two rows, so the unit is the tenant). The TTL bounds staleness if an
 * invalidation is missed while Redis is down. Time-driven states (Expired, Destroyed) are
 * derived from the row and the clock at each use, so they need no invalidation.
 *
 * Aliases are cached the same way, in the tenant's group: creating, moving or deleting one
 * invalidates the tenant (alias-service.ts), here and in the other processes.
 */
export interface KeyCache {
  getKey(tenantId: string, keyId: string): Promise<KeyRow | undefined>
  getDefaultKey(tenantId: string, keyType: KeyType): Promise<KeyRow | undefined>
  /** The id of the key `alias` names in the tenant; undefined: no such alias. */
  getAliasTarget(tenantId: string, alias: string): Promise<string | undefined>
  /** Call after the change has committed, before answering the request that made it. */
  invalidateTenant(tenantId: string): Promise<void>
}

export function createKeyCache(deps: {
  sql: Sql
  bus: InvalidationBus
  ttlMs: number
  maxEntries?: number
  now?: () => number
}): KeyCache {
  const options = {
    ttlMs: deps.ttlMs,
    maxEntries: deps.maxEntries ?? 100_000,
    ...(deps.now ? { now: deps.now } : {}),
  }
  const cache = createReadThroughCache<KeyRow | undefined>(options)
  const aliases = createReadThroughCache<string | undefined>(options)
  deps.bus.subscribe(KEY_INVALIDATION_TOPIC, (tenantId) => {
    cache.dropGroup(tenantId)
    aliases.dropGroup(tenantId)
  })
  deps.bus.onResync(() => {
    cache.clear()
    aliases.clear()
  })

  return {
    // Unknown ids are cached as well: ids are chosen by the server, so an id unknown in a tenant
    // stays unknown until a key is created there, and creation invalidates the tenant.
    getKey: (tenantId, keyId) => cache.get(tenantId, keyId, () => getKey(deps.sql, tenantId, keyId)),
    getDefaultKey: (tenantId, keyType) =>
      cache.get(tenantId, `default:${keyType}`, () => getDefaultKey(deps.sql, tenantId, keyType)),
    // Unknown aliases too: creating one invalidates the tenant.
    getAliasTarget: (tenantId, alias) =>
      aliases.get(tenantId, alias, async () => (await getAlias(deps.sql, tenantId, alias))?.key_id),
    invalidateTenant: (tenantId) => deps.bus.publish(KEY_INVALIDATION_TOPIC, tenantId),
  }
}
