import { type AlgorithmName, algorithmByName, type KeyType, type NodeKeySpec } from '../keys/algorithms.ts'
import type { KeyCache } from '../keys/key-cache.ts'
import { type KeyState, keyState, requireState } from '../keys/key-state.ts'
import type { KeyRow } from '../keys/key-store.ts'
import type { Clock } from '../platform/clock.ts'
import { AppError, notFound } from '../platform/errors.ts'
import type { KeyObjectCache, OpenedKeyVersion } from './key-object-cache.ts'

/** A key version ready for one operation: its row, its KeyObjects and how node:crypto names it. */
export interface UsableKey {
  row: KeyRow
  version: number
  opened: OpenedKeyVersion
  spec: NodeKeySpec
}

interface KeyUse {
  /** Absent: the tenant's default key of `keyType` (spec: the default key rule). */
  keyId?: string | undefined
  keyType: KeyType
  /** States that permit the operation (key-state.ts). */
  states: readonly KeyState[]
  /** Verb for the state-conflict message, e.g. "sign". */
  operation: string
  /** Absent: the current version. */
  version?: number | undefined
  /**
   * Told the row as soon as it is found, before the state and version checks: an operation on
   * the default key names that key in the record of a refusal (operation-audit.ts AuditTarget).
   */
  found?: ((row: KeyRow) => void) | undefined
}

/**
 * The one path every cryptographic operation takes to a key: tenant-scoped lookup (another
 * tenant's key is simply not found), the type check, the state check of spec section 3, the
 * version, then the cached KeyObjects.
 */
export interface KeyResolver {
  resolve(tenantId: string, use: KeyUse): Promise<UsableKey>
  /** The key row alone (no state or version check). */
  findRow(tenantId: string, keyId: string | undefined, keyType: KeyType): Promise<KeyRow>
  open(tenantId: string, row: KeyRow, version: number): Promise<OpenedKeyVersion | undefined>
  state(row: KeyRow): KeyState
}

const withArticle = (keyType: string) => `${keyType === 'Signing' ? 'a' : 'an'} ${keyType}`

const keySpec = (row: KeyRow): NodeKeySpec => algorithmByName(row.algorithm as AlgorithmName).spec

export function createKeyResolver(deps: {
  keyCache: KeyCache
  keyObjects: KeyObjectCache
  clock: Clock
}): KeyResolver {
  async function findRow(tenantId: string, keyId: string | undefined, keyType: KeyType): Promise<KeyRow> {
    if (keyId) {
      const row = await deps.keyCache.getKey(tenantId, keyId)
      if (!row) throw notFound('key_not_found', 'Key')
      if (row.key_type !== keyType) {
        throw new AppError(
          400,
          'key_type_mismatch',
          `This operation needs ${withArticle(keyType)} key, not ${withArticle(row.key_type)} key`,
        )
      }
      return row
    }
    const row = await deps.keyCache.getDefaultKey(tenantId, keyType)
    if (!row) {
      throw new AppError(
        409,
        'no_default_key',
        `The tenant has no default ${keyType} key: pass keyId or set a default`,
      )
    }
    return row
  }

  const state = (row: KeyRow) => keyState(row, deps.clock.now())
  const open = (tenantId: string, row: KeyRow, version: number) =>
    deps.keyObjects.get(tenantId, row.id, version)

  return {
    findRow,
    open,
    state,
    async resolve(tenantId, use) {
      const row = await findRow(tenantId, use.keyId, use.keyType)
      use.found?.(row)
      requireState(state(row), use.states, use.operation)
      const version = use.version ?? row.current_version
      if (version > row.current_version)
        throw notFound('key_version_not_found', `Version ${version} of the key`)
      const opened = await open(tenantId, row, version)
      // Material is erased only with the whole key, which the state check has already refused.
      if (!opened) throw new AppError(409, 'key_state_conflict', 'The key material is not available')
      return { row, version, opened, spec: keySpec(row) }
    },
  }
}
