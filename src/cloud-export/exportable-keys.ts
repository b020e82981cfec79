import type { KeyObjectCache } from '../crypto/key-object-cache.ts'
import type { AlgorithmName, KeyType } from '../keys/algorithms.ts'
import type { KeyCache } from '../keys/key-cache.ts'
import { keyState } from '../keys/key-state.ts'
import type { Clock } from '../platform/clock.ts'
import type { ExportableKeys } from './cloud-export-service.ts'

/**
 * Keys as the cloud export reads them: their description from the key cache, and the opened
 * material of a version, only for a key created exportable (the private key of any other key is
 * never handed to a cloud export). Built before the key service, which tells the cloud export of
 * every new version.
 */
export function createExportableKeys(deps: {
  keyCache: Pick<KeyCache, 'getKey'>
  keyObjects: Pick<KeyObjectCache, 'get'>
  clock: Clock
}): ExportableKeys {
  return {
    async describe(tenantId, keyId) {
      const row = await deps.keyCache.getKey(tenantId, keyId)
      if (!row) return undefined
      return {
        algorithm: row.algorithm as AlgorithmName,
        keyType: row.key_type as KeyType,
        currentVersion: row.current_version,
        state: keyState(row, deps.clock.now()),
        exportable: row.exportable,
      }
    },
    async material(tenantId, keyId, version) {
      if (!(await deps.keyCache.getKey(tenantId, keyId))?.exportable) return undefined
      const opened = await deps.keyObjects.get(tenantId, keyId, version)
      return opened?.publicKey && opened.secretKey
        ? { privateKey: opened.secretKey, publicKey: opened.publicKey }
        : undefined
    },
  }
}
