import { createPrivateKey, createPublicKey, createSecretKey, type KeyObject } from 'node:crypto'
import type { Sql } from '../data/database.ts'
import type { TenantKeks } from '../keyring/tenant-kek.ts'
import { materialAad } from '../keys/key-service.ts'
import { getKeyVersion } from '../keys/key-store.ts'
import {
  isXWingSpki,
  type XWingPrivateKey,
  type XWingPublicKey,
  xwingKeyFromSeed,
  xwingPublicKey,
  xwingPublicKeyFromSpki,
  xwingSeedFromPkcs8,
} from './xwing.ts'

/**
 * Opened key versions as KeyObjects (never raw bytes), cached per process: unsealing and
 * parsing a PKCS#8 key costs far more than the operation it serves. A version's material never
 * changes, so entries need no invalidation; destruction is enforced by the key's state, checked
 * on every operation before the cache is consulted.
 */
export interface OpenedKeyVersion {
  /** The private key, or the HMAC or AES secret key; null for a public-key-only key. */
  secretKey: KeyObject | null
  publicKey: KeyObject | null
  /**
   * An X-Wing key (src/crypto/xwing.ts), which OpenSSL cannot hold as one KeyObject: its halves.
   * secretKey and publicKey are then null; privateKey is null for a public-key-only key.
   */
  xwing?: { privateKey: XWingPrivateKey | null; publicKey: XWingPublicKey }
}

/** An X-Wing version from its stored forms (the draft's SPKI and PKCS#8 of the seed). */
function openXWing(publicKeyDer: Buffer, secret: Buffer | null): OpenedKeyVersion {
  if (!secret) {
    const publicKey = xwingPublicKey(xwingPublicKeyFromSpki(publicKeyDer))
    return { secretKey: null, publicKey: null, xwing: { privateKey: null, publicKey } }
  }
  const seed = xwingSeedFromPkcs8(secret)
  try {
    const privateKey = xwingKeyFromSeed(seed)
    return { secretKey: null, publicKey: null, xwing: { privateKey, publicKey: privateKey.publicKey } }
  } finally {
    seed.fill(0)
  }
}

export interface KeyObjectCache {
  /** Undefined when the version does not exist or its material was erased. */
  get(tenantId: string, keyId: string, version: number): Promise<OpenedKeyVersion | undefined>
}

export function createKeyObjectCache(deps: {
  sql: Sql
  tenantKeks: TenantKeks
  /** Keys kept (each with the versions opened so far). */
  maxEntries?: number
}): KeyObjectCache {
  const maxEntries = deps.maxEntries ?? 10_000
  /**
   * By key id, least recently refreshed first (a Map iterates in insertion order). The id string
   * comes from the cached key row, so its hash is computed once, where a composite string key
   * was built and hashed on every operation.
   */
  const cache = new Map<string, { tenantId: string; versions: Map<number, OpenedKeyVersion>; used: number }>()
  let uses = 0

  function remember(tenantId: string, keyId: string, version: number, opened: OpenedKeyVersion) {
    const current = cache.get(keyId)
    if (current?.tenantId === tenantId) {
      current.versions.set(version, opened)
    } else {
      if (current) cache.delete(keyId)
      if (cache.size >= maxEntries) cache.delete(cache.keys().next().value!)
      cache.set(keyId, { tenantId, versions: new Map([[version, opened]]), used: ++uses })
    }
  }

  return {
    async get(tenantId, keyId, version) {
      const entry = cache.get(keyId)
      const hit = entry?.tenantId === tenantId ? entry.versions.get(version) : undefined
      if (hit) {
        // Moved to the back once it has aged by half the cache, not on every use: a delete and an
        // insert per operation cost more than the lookup, and a key in use still never reaches
        // the front, where eviction takes from.
        if (++uses - entry!.used > maxEntries / 2) {
          entry!.used = uses
          cache.delete(keyId)
          cache.set(keyId, entry!)
        }
        return hit
      }
      const stored = await getKeyVersion(deps.sql, tenantId, keyId, version)
      if (!stored) return undefined
      if (!stored.sealed_material) {
        // A public-key-only key keeps its public key; an erased (destroyed) version keeps nothing.
        if (!stored.public_key) return undefined
        const opened = isXWingSpki(stored.public_key)
          ? openXWing(stored.public_key, null)
          : {
              secretKey: null,
              publicKey: createPublicKey({ key: stored.public_key, format: 'der', type: 'spki' }),
            }
        remember(tenantId, keyId, version, opened)
        return opened
      }
      const secret = await deps.tenantKeks.open(
        tenantId,
        stored.sealed_material,
        materialAad(tenantId, keyId, version),
      )
      let opened: OpenedKeyVersion
      try {
        opened =
          stored.public_key && isXWingSpki(stored.public_key)
            ? openXWing(stored.public_key, secret)
            : stored.public_key
              ? {
                  secretKey: createPrivateKey({ key: secret, format: 'der', type: 'pkcs8' }),
                  publicKey: createPublicKey({ key: stored.public_key, format: 'der', type: 'spki' }),
                }
              : { secretKey: createSecretKey(secret), publicKey: null }
      } finally {
        secret.fill(0)
      }
      remember(tenantId, keyId, version, opened)
      return opened
    },
  }
}
