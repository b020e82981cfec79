import { createPrivateKey, createPublicKey, createSecretKey, type KeyObject } from 'node:crypto'
import type { TenantKeks } from '../keyring/tenant-kek.ts'
import { materialAad } from '../keys/key-service.ts'
import { getKeyVersion } from '../keys/key-store.ts'
import type { Sql } from '../platform/database.ts'

/**
 * Opened key versions as KeyObjects (never raw bytes), cached per process: unsealing and
 * parsing a PKCS#8 key costs far more than the operation it serves. A version's material never
 * changes, so entries need no invalidation; destruction is enforced by the key's state, checked
 * on every operation before the cache is consulted.
 */
export interface OpenedKeyVersion {
  /** The private key, or the HMAC secret key. */
  secretKey: KeyObject
  publicKey: KeyObject | null
}

export interface KeyObjectCache {
  /** Undefined when the version does not exist or its material was erased. */
  get(tenantId: string, keyId: string, version: number): Promise<OpenedKeyVersion | undefined>
}

export function createKeyObjectCache(deps: {
  sql: Sql
  tenantKeks: TenantKeks
  maxEntries?: number
}): KeyObjectCache {
  const maxEntries = deps.maxEntries ?? 10_000
  const cache = new Map<string, OpenedKeyVersion>()

  return {
    async get(tenantId, keyId, version) {
      const cacheKey = `${tenantId}:${keyId}:${version}`
      const hit = cache.get(cacheKey)
      if (hit) {
        // Map order is insertion order: re-inserting keeps recently used entries at the end.
        cache.delete(cacheKey)
        cache.set(cacheKey, hit)
        return hit
      }
      const stored = await getKeyVersion(deps.sql, tenantId, keyId, version)
      if (!stored?.sealed_material) return undefined
      const secret = await deps.tenantKeks.open(
        tenantId,
        stored.sealed_material,
        materialAad(tenantId, keyId, version),
      )
      let opened: OpenedKeyVersion
      try {
        opened = stored.public_key
          ? {
              secretKey: createPrivateKey({ key: secret, format: 'der', type: 'pkcs8' }),
              publicKey: createPublicKey({ key: stored.public_key, format: 'der', type: 'spki' }),
            }
          : { secretKey: createSecretKey(secret), publicKey: null }
      } finally {
        secret.fill(0)
      }
      if (cache.size >= maxEntries) cache.delete(cache.keys().next().value!)
      cache.set(cacheKey, opened)
      return opened
    },
  }
}
