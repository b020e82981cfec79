import type { KeyObject } from 'node:crypto'
import { type KeyOperation, restrictionAllows } from '../auth/key-restriction.ts'
import { type AlgorithmName, algorithmByName, type KeyType, type NodeKeySpec } from '../keys/algorithms.ts'
import { isAliasRef, keyIdOfRef } from '../keys/alias-name.ts'
import { keyNotAllowed, type RefCaller } from '../keys/alias-refs.ts'
import type { KeyCache } from '../keys/key-cache.ts'
import { keyReserved } from '../keys/key-service.ts'
import { type KeyState, keyState, requireState } from '../keys/key-state.ts'
import type { KeyIssuer, KeyRow } from '../keys/key-store.ts'
import type { Clock } from '../platform/clock.ts'
import { AppError, invalidField, notFound } from '../platform/errors.ts'
import type { KeyObjectCache, OpenedKeyVersion } from './key-object-cache.ts'
import type { XWingPrivateKey } from './xwing.ts'

/** A key version ready for one operation: its row, its KeyObjects and how node:crypto names it. */
export interface UsableKey {
  row: KeyRow
  version: number
  opened: OpenedKeyVersion
  spec: NodeKeySpec
}

interface KeyUse {
  /**
   * A key id or an alias (`alias/...`, the key it names now). Absent: the tenant's default key of
   * `keyType` (spec: the default key rule).
   */
  keyId?: string | undefined
  keyType: KeyType
  /** The operation as API-key restrictions name it (auth/key-restriction.ts). */
  keyOperation: KeyOperation
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
  /**
   * Another reference to the same key the caller gave (a body keyId beside the path's key): when
   * it names another key (or none), 400 naming `field`.
   */
  sameKeyAs?: { ref: string | undefined; field: string } | undefined
  /**
   * The certificate issuer signing (issuer-signer.ts). A key reserved for an issuer signs for it
   * alone: any other signature with it (a hand-made TBS through /sign) answers 409 key_reserved.
   */
  issuer?: KeyIssuer | undefined
}

/**
 * The one path every cryptographic operation takes to a key: the API-key restriction's
 * operations, the tenant-scoped lookup of the id or alias (another tenant's key or alias is
 * simply not found), the restriction's keys, the type check, the state check of spec section 3,
 * the version, then the cached KeyObjects.
 */
export interface KeyResolver {
  resolve(caller: RefCaller, use: KeyUse): Promise<UsableKey>
  /**
   * The key row alone (no state or version check), after the same restriction checks as resolve.
   * `keyId`: an id or an alias; absent: the default key of the type.
   */
  findRow(
    caller: RefCaller,
    keyId: string | undefined,
    keyType: KeyType,
    keyOperation: KeyOperation,
  ): Promise<KeyRow>
  /**
   * The id of the key a reference names in the tenant (an alias resolved, an id in lower case)
   * without any other check; undefined when it names none (a cross-check's comparison).
   */
  keyIdOf(tenantId: string, ref: string): Promise<string | undefined>
  open(tenantId: string, row: KeyRow, version: number): Promise<OpenedKeyVersion | undefined>
  state(row: KeyRow): KeyState
}

/**
 * The private (or secret) key of a version, for operations that need it: a public-key-only key
 * (imported without its private key) can verify and encrypt, never sign, decrypt or MAC.
 */
export function requireSecretKey(opened: OpenedKeyVersion): KeyObject {
  if (!opened.secretKey) throw publicKeyOnly()
  return opened.secretKey
}

/**
 * The key that opens envelopes of this version: the X-Wing private key of an X-Wing key, else
 * the private (or AES secret) KeyObject; null for a public-key-only key.
 */
export function decryptionKeyOf(opened: OpenedKeyVersion): KeyObject | XWingPrivateKey | null {
  return opened.xwing ? opened.xwing.privateKey : opened.secretKey
}

/** decryptionKeyOf, for decrypt, unwrap and re-encrypt: 409 public_key_only when there is none. */
export function requireDecryptionKey(opened: OpenedKeyVersion): KeyObject | XWingPrivateKey {
  const key = decryptionKeyOf(opened)
  if (!key) throw publicKeyOnly()
  return key
}

export const publicKeyOnly = () =>
  new AppError(
    409,
    'public_key_only',
    'This key holds only a public key: it can verify and encrypt, not sign, decrypt, unwrap or compute MACs',
  )

/**
 * A `found` callback that names the key in an operation's audit target: a refusal is then
 * recorded against the key id, whether the caller named the key by id, alias or not at all.
 */
export const namingKeyIn =
  (target: { keyId: string | null }) =>
  (row: KeyRow): void => {
    target.keyId = row.id
  }

/** 403: the caller's API key is restricted to operations this is not one of. */
const operationNotAllowed = (operation: KeyOperation) =>
  new AppError(
    403,
    'operation_not_allowed',
    `This API key is restricted to other operations than ${operation}`,
    {
      operation,
    },
  )

const withArticle = (keyType: string) => `${keyType === 'Signing' ? 'a' : 'an'} ${keyType}`

const keySpec = (row: KeyRow): NodeKeySpec => algorithmByName(row.algorithm as AlgorithmName).spec

export function createKeyResolver(deps: {
  keyCache: KeyCache
  keyObjects: KeyObjectCache
  clock: Clock
}): KeyResolver {
  async function keyIdOf(tenantId: string, ref: string): Promise<string | undefined> {
    return isAliasRef(ref) ? deps.keyCache.getAliasTarget(tenantId, ref) : keyIdOfRef(ref)
  }

  /**
   * Whether the restriction admits the key: by its id, or by an alias of the list that names it
   * now (an alias in a restriction follows the alias, as AWS KMS's alias conditions do).
   */
  async function keyAllowed(caller: RefCaller, row: KeyRow): Promise<boolean> {
    const keys = caller.keyRestriction?.keys
    if (!keys || keys.includes(row.id)) return true
    const aliases: string[] = []
    for (const entry of keys) {
      if (isAliasRef(entry) && (await deps.keyCache.getAliasTarget(row.tenant_id, entry)) === row.id)
        aliases.push(entry)
    }
    return restrictionAllows(caller.keyRestriction, { id: row.id, aliases }, null)
  }

  /**
   * The row a reference (or the default rule) names, after the restriction's operations; the
   * restriction's keys are checked apart (requireAllowed), once the caller has been told the row.
   */
  async function locate(
    caller: RefCaller,
    keyId: string | undefined,
    keyType: KeyType,
    keyOperation: KeyOperation,
  ): Promise<KeyRow> {
    const restriction = caller.keyRestriction
    // First, before any lookup: an operation the API key may not do at all.
    if (restriction?.operations && !restriction.operations.includes(keyOperation))
      throw operationNotAllowed(keyOperation)
    let row: KeyRow | undefined
    if (keyId) {
      // A key id costs no lookup (the common case, on the encrypt path); an alias one cached read.
      const id = isAliasRef(keyId)
        ? await deps.keyCache.getAliasTarget(caller.tenantId, keyId)
        : keyIdOfRef(keyId)
      row = id ? await deps.keyCache.getKey(caller.tenantId, id) : undefined
      if (!row) throw restriction?.keys ? keyNotAllowed() : notFound('key_not_found', 'Key')
    } else {
      row = await deps.keyCache.getDefaultKey(caller.tenantId, keyType)
      if (!row) {
        throw new AppError(
          409,
          'no_default_key',
          `The tenant has no default ${keyType} key: pass keyId or set a default`,
        )
      }
    }
    return row
  }

  /** Before the type check: a restricted key learns nothing of the keys outside its list. */
  async function requireAllowed(caller: RefCaller, row: KeyRow): Promise<void> {
    if (caller.keyRestriction?.keys && !(await keyAllowed(caller, row))) throw keyNotAllowed()
  }

  function requireType(row: KeyRow, keyType: KeyType): void {
    if (row.key_type !== keyType) {
      throw new AppError(
        400,
        'key_type_mismatch',
        `This operation needs ${withArticle(keyType)} key, not ${withArticle(row.key_type)} key`,
      )
    }
  }

  async function findRow(
    caller: RefCaller,
    keyId: string | undefined,
    keyType: KeyType,
    keyOperation: KeyOperation,
  ): Promise<KeyRow> {
    const row = await locate(caller, keyId, keyType, keyOperation)
    if (caller.keyRestriction?.keys) await requireAllowed(caller, row)
    requireType(row, keyType)
    return row
  }

  const state = (row: KeyRow) => keyState(row, deps.clock.now())
  const open = (tenantId: string, row: KeyRow, version: number) =>
    deps.keyObjects.get(tenantId, row.id, version)

  return {
    findRow,
    keyIdOf,
    open,
    state,
    async resolve(caller, use) {
      const row = await locate(caller, use.keyId, use.keyType, use.keyOperation)
      use.found?.(row)
      if (caller.keyRestriction?.keys) await requireAllowed(caller, row)
      requireType(row, use.keyType)
      if (
        use.sameKeyAs?.ref !== undefined &&
        (await keyIdOf(caller.tenantId, use.sameKeyAs.ref)) !== row.id
      ) {
        throw invalidField(
          use.sameKeyAs.field,
          `names key ${use.sameKeyAs.ref}, but the path names key ${use.keyId ?? row.id}`,
        )
      }
      if ((row.reserved_for ?? undefined) !== use.issuer && use.keyOperation === 'sign') {
        if (row.reserved_for) throw keyReserved(row.reserved_for)
        throw new AppError(409, 'key_not_reserved', 'The key is not reserved for this certificate authority')
      }
      requireState(state(row), use.states, use.operation)
      const version = use.version ?? row.current_version
      if (version > row.current_version)
        throw notFound('key_version_not_found', `Version ${version} of the key`)
      const opened = await open(caller.tenantId, row, version)
      // Material is erased only with the whole key, which the state check has already refused.
      if (!opened) throw new AppError(409, 'key_state_conflict', 'The key material is not available')
      return { row, version, opened, spec: keySpec(row) }
    },
  }
}
