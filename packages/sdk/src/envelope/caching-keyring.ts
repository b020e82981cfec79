import { ByteWriter, utf8 } from '../bytes.ts'
import { canonicalContext, type EncryptionContext } from './context.ts'
import type { EncryptedDataKey } from './format.ts'
import type { DataKeyMaterial, Keyring } from './keyring.ts'

export interface CachingKeyringOptions {
  /** A cached data key is used for this long after the inner keyring gave it (ms). */
  maxAgeMs: number
  /** Messages one cached data key may encrypt. */
  maxMessages: number
  /** Plaintext bytes one cached data key may encrypt, over all its messages. */
  maxBytes: number
  /** Data keys kept, in each of the two caches (the least recently used goes first); default 100. */
  maxEntries?: number
  /** Milliseconds; default Date.now. */
  clock?: () => number
}

interface EncryptEntry {
  material: DataKeyMaterial
  createdAt: number
  messages: number
  bytes: number
}

interface DecryptEntry {
  dataKey: Uint8Array
  createdAt: number
}

const copyMaterial = (m: DataKeyMaterial): DataKeyMaterial => ({
  dataKey: m.dataKey.slice(),
  encryptedDataKeys: m.encryptedDataKeys.map((e) => ({ ...e, encryptedDataKey: e.encryptedDataKey.slice() })),
})

function checkBound(name: string, value: number, min: number): void {
  if (!Number.isSafeInteger(value) || value < min)
    throw new TypeError(`${name} must be an integer of at least ${min} (is ${value})`)
}

/** A bounded least-recently-used map whose evicted values are wiped. */
class Lru<V> {
  private readonly map = new Map<string, V>()
  private readonly max: number
  private readonly wipe: (value: V) => void

  constructor(max: number, wipe: (value: V) => void) {
    this.max = max
    this.wipe = wipe
  }

  get(key: string): V | undefined {
    const value = this.map.get(key)
    if (value !== undefined) {
      this.map.delete(key)
      this.map.set(key, value)
    }
    return value
  }

  set(key: string, value: V): void {
    this.delete(key)
    this.map.set(key, value)
    while (this.map.size > this.max) this.delete(this.map.keys().next().value!)
  }

  delete(key: string): void {
    const value = this.map.get(key)
    if (value === undefined) return
    this.map.delete(key)
    this.wipe(value)
  }
}

/** The decrypt cache's key: the context and every encrypted data key of the message, hashed. */
async function decryptKey(edks: readonly EncryptedDataKey[], context: EncryptionContext): Promise<string> {
  const writer = new ByteWriter().bytes(utf8(canonicalContext(context))).u16(edks.length)
  for (const edk of edks)
    writer
      .lengthPrefixed(utf8(edk.providerId))
      .lengthPrefixed(utf8(edk.providerInfo))
      .lengthPrefixed(edk.encryptedDataKey)
  const digest = new Uint8Array(await crypto.subtle.digest('SHA-256', writer.finish()))
  return Array.from(digest, (b) => b.toString(16).padStart(2, '0')).join('')
}

/**
 * Reuses data keys to spare the inner keyring (and the service) a call per message. Off unless
 * asked for. Encryption reuses a data key per context while it is younger than maxAgeMs and
 * has encrypted fewer than maxMessages messages and, with this message, at most maxBytes bytes;
 * a message of unknown size (a stream whose plaintextLength is not stated) never uses the cache.
 * Decryption reuses what one message's encrypted data keys and context gave, for maxAgeMs.
 * Each message still has its own message id, hence its own derived key.
 */
export function createCachingKeyring(inner: Keyring, options: CachingKeyringOptions): Keyring {
  checkBound('maxAgeMs', options.maxAgeMs, 1)
  checkBound('maxMessages', options.maxMessages, 1)
  checkBound('maxBytes', options.maxBytes, 1)
  checkBound('maxEntries', options.maxEntries ?? 100, 1)
  const clock = options.clock ?? Date.now
  const maxEntries = options.maxEntries ?? 100
  const encryptCache = new Lru<EncryptEntry>(maxEntries, (e) => e.material.dataKey.fill(0))
  const decryptCache = new Lru<DecryptEntry>(maxEntries, (e) => e.dataKey.fill(0))
  const fresh = (createdAt: number) => clock() - createdAt < options.maxAgeMs

  return {
    async generateDataKey(context, usage) {
      const length = usage?.plaintextLength
      if (length === undefined || length > options.maxBytes) return inner.generateDataKey(context, usage)
      const key = canonicalContext(context)
      const entry = encryptCache.get(key)
      if (
        entry &&
        fresh(entry.createdAt) &&
        entry.messages < options.maxMessages &&
        entry.bytes + length <= options.maxBytes
      ) {
        entry.messages++
        entry.bytes += length
        return copyMaterial(entry.material)
      }
      encryptCache.delete(key)
      const material = await inner.generateDataKey(context, usage)
      encryptCache.set(key, {
        material: copyMaterial(material),
        createdAt: clock(),
        messages: 1,
        bytes: length,
      })
      return material
    },

    async decryptDataKey(encryptedDataKeys, context) {
      const key = await decryptKey(encryptedDataKeys, context)
      const entry = decryptCache.get(key)
      if (entry && fresh(entry.createdAt)) return entry.dataKey.slice()
      decryptCache.delete(key)
      const dataKey = await inner.decryptDataKey(encryptedDataKeys, context)
      decryptCache.set(key, { dataKey: dataKey.slice(), createdAt: clock() })
      return dataKey
    },
  }
}
