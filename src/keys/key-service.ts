import { randomUUID } from 'node:crypto'
import type { AuditLog } from '../audit/audit-log.ts'
import type { Actor } from '../auth/request-context.ts'
import type { CryptoPool } from '../crypto-pool/crypto-pool.ts'
import type { Queryable, Sql } from '../data/database.ts'
import type { TenantKeks } from '../keyring/tenant-kek.ts'
import { type Clock, DAY_MS } from '../platform/clock.ts'
import { AppError, invalidField, isUniqueViolation, notFound } from '../platform/errors.ts'
import {
  type Algorithm,
  type AlgorithmName,
  algorithmByName,
  algorithmsFor,
  DEFAULT_ALGORITHM,
  isSymmetric,
  type KeyType,
} from './algorithms.ts'
import { allowedKeyIds, resolveKeyRef } from './alias-refs.ts'
import { aliasesOfKeys, deleteAliasesOfKeys } from './alias-store.ts'
import type { KeyCache } from './key-cache.ts'
import {
  exportPrivate,
  exportPublic,
  generateMaterial,
  type ImportFormat,
  type KeyMaterial,
  KeyMaterialError,
  type PrivateExport,
  type PrivateFormat,
  type PublicExport,
  type PublicFormat,
} from './key-material.ts'
import { type KeyState, keyState, requireState, stateConflict } from './key-state.ts'
import {
  allKeys,
  clearDefault,
  countActiveExpiringBy,
  countKeys,
  countKeysInUse,
  destroyDueKeys,
  getDefaultKey,
  getKey,
  getKeyVersion,
  insertKey,
  insertKeyVersion,
  KEY_NAME_CONSTRAINT,
  type KeyChanges,
  type KeyIssuer,
  type KeyListFilter,
  type KeyListPosition,
  type KeyRow,
  type KeySort,
  listKeys,
  listKeyVersions,
  lockDefaultSlot,
  markExpired,
  nextDeletionDate,
  updateKey,
} from './key-store.ts'

/** The key record of the API (spec 2.2 plus id, version, origin, updatedAt). */
export interface KeyView {
  id: string
  name: string
  description: string
  keyType: KeyType
  algorithm: AlgorithmName
  isPostQuantum: boolean
  isActive: boolean
  isDefault: boolean
  isFavorite: boolean
  labels: string[]
  state: KeyState
  version: number
  origin: 'Generated' | 'Imported'
  /** Whether the private key may be exported (keys:export); fixed at creation or import. */
  exportable: boolean
  /** Imported without its private key: verifies and encrypts only. */
  publicOnly: boolean
  /** The certificate issuer the key signs for alone (docs/pki.md); null: an ordinary key. */
  reservedFor: KeyIssuer | null
  /** The key's aliases (docs/keys.md "Key aliases"), in alias order. */
  aliases: string[]
  createdAt: string
  updatedAt: string
  expiresAt: string | null
  lastRotatedAt: string | null
  /** When the rotation policy rotates next; null without a policy or while it is paused. */
  nextRotationAt: string | null
  scheduledDeletionDate: string | null
}

function toKeyView(row: KeyRow, now: Date, aliases: string[]): KeyView {
  const state = keyState(row, now)
  return {
    id: row.id,
    name: row.name,
    description: row.description,
    keyType: row.key_type as KeyType,
    algorithm: row.algorithm as AlgorithmName,
    isPostQuantum: algorithmByName(row.algorithm as AlgorithmName).isPostQuantum,
    isActive: state === 'Active',
    isDefault: row.is_default && state !== 'Destroyed',
    isFavorite: row.is_favorite,
    labels: row.labels,
    state,
    version: row.current_version,
    origin: row.origin,
    exportable: row.exportable,
    publicOnly: row.public_only,
    reservedFor: row.reserved_for,
    aliases,
    createdAt: row.created_at.toISOString(),
    updatedAt: row.updated_at.toISOString(),
    expiresAt: row.expires_at?.toISOString() ?? null,
    lastRotatedAt: row.last_rotated_at?.toISOString() ?? null,
    nextRotationAt: row.next_rotation_at?.toISOString() ?? null,
    scheduledDeletionDate: row.scheduled_deletion_date?.toISOString() ?? null,
  }
}

interface KeyAttributes {
  name: string
  keyType: KeyType
  algorithm?: AlgorithmName | undefined
  description?: string | undefined
  labels?: string[] | undefined
  expiresAt?: Date | undefined
  isDefault?: boolean | undefined
  /** Allows private-key export; default false; cannot be changed afterwards. */
  exportable?: boolean | undefined
  /** A key created for a certificate authority: it signs through that issuer only. */
  reservedFor?: KeyIssuer | undefined
}

/**
 * What the service needs to know of the caller for decisions beyond the route's scope. Changing
 * which key callers that omit keyId use (the tenant's default) needs more than keys:write: the
 * routes declare which scopes (key-routes.ts, condition DEFAULT_KEY), the service tells when a
 * request changes the default.
 */
export interface KeyCaller {
  /** The scopes the caller lacks to change the tenant's default key; none: allowed. */
  missingForDefault: readonly string[]
}

interface ImportInput extends KeyAttributes {
  format: ImportFormat
  material: string | Record<string, unknown>
  password?: string | undefined
  /** The material is a public key: the key verifies and encrypts only. */
  publicOnly?: boolean | undefined
}

interface KeyPatch {
  name?: string | undefined
  description?: string | undefined
  labels?: string[] | undefined
  /** null clears the expiration. */
  expiresAt?: Date | null | undefined
  isDefault?: boolean | undefined
  isFavorite?: boolean | undefined
}

interface KeyListRequest {
  filter: KeyListFilter
  sort: KeySort
  descending: boolean
  limit: number
  after: KeyListPosition | null
}

interface KeyListResult {
  data: KeyView[]
  /** Exact up to TOTAL_COUNT_CAP; a lower bound past it (totalIsExact false). */
  total: number
  totalIsExact: boolean
  next: KeyListPosition | null
  /** Active keys expiring within EXPIRY_ALERT_DAYS; absent when there are none. */
  expiringSoon: number
}

interface KeyVersionView {
  version: number
  createdAt: string
  state: KeyState
  isCurrent: boolean
}

/** A key as read for an operation, with its state at the time `now` it was read. */
interface LoadedKey {
  row: KeyRow
  state: KeyState
  now: Date
  /** The alias the caller named the key by; null: by its id. */
  alias: string | null
}

/** A public-key-only key has no private key to generate: rotation and rotation policies refuse it. */
/**
 * Refuses rotating a key that cannot be rotated by generation: a public-key-only key (no private
 * key to replace), and a certificate authority's key, whose certificate certifies one version (a
 * new version would sign nothing: a new key means a new CA).
 */
export function requireRotatable(row: KeyRow): void {
  if (row.public_only)
    throw new AppError(
      409,
      'public_key_only',
      'A key imported without its private key cannot be rotated by generation',
    )
  if (row.reserved_for)
    throw new AppError(
      409,
      'key_reserved',
      'This key signs for a certificate authority, whose certificate certifies this key: create a new CA instead of rotating it',
      { reservedFor: row.reserved_for },
    )
}

/**
 * 403: a CA on an existing key (`keyId`) reserves that key for good, a change of the key's
 * lifecycle: it needs keys:write besides the CA scope (the routes' `existingKey` condition).
 */
export function requireKeyWriteForExistingKey(missing: readonly string[]): void {
  if (missing.length === 0) return
  throw new AppError(
    403,
    'insufficient_scope',
    `A CA on an existing key (keyId) reserves that key for it: that also needs the scope ${missing.join(', ')}`,
    { requiredScope: missing[0] },
  )
}

/**
 * 400 naming `field` unless `key` can back a certificate authority signing with `algorithms`: a
 * Signing key of one of them, not exportable, holding its private key. `reserve` checks the key
 * again under its row lock (and what a view does not show: its origin, a rotation policy).
 */
export function requireIssuerKey<A extends string>(
  key: KeyView,
  algorithms: readonly A[],
  field: string,
): asserts key is KeyView & { algorithm: A } {
  if (key.keyType !== 'Signing' || !(algorithms as readonly string[]).includes(key.algorithm))
    throw invalidField(
      field,
      `must name a Signing key of ${algorithms.join(', ')} (it is a ${key.algorithm} key)`,
    )
  if (key.exportable)
    throw invalidField(field, 'names an exportable key: a CA key must never leave the service')
  if (key.publicOnly) throw invalidField(field, 'names a public-key-only key, which cannot sign')
}

/** 409: the key signs for a certificate authority, through it alone (docs/pki.md). */
export const keyReserved = (issuer: KeyIssuer) =>
  new AppError(
    409,
    'key_reserved',
    `This key signs for ${issuer === 'pki' ? 'an X.509' : 'an SSH'} certificate authority only: issue certificates through it instead`,
    { reservedFor: issuer },
  )

export const EXPIRY_ALERT_DAYS = 30
const TOTAL_COUNT_CAP = 1000
export const DELETION_WINDOW_DAYS = { min: 7, max: 30, default: 30 } as const

export interface KeyService {
  /** Keys not destroyed (billing's usage report). */
  countInUse(tenantId: string): Promise<number>
  create(actor: Actor, input: KeyAttributes, caller: KeyCaller): Promise<KeyView>
  import(actor: Actor, input: ImportInput, caller: KeyCaller): Promise<KeyView>
  get(actor: Actor, id: string): Promise<KeyView>
  list(actor: Actor, request: KeyListRequest): Promise<KeyListResult>
  update(actor: Actor, id: string, patch: KeyPatch, caller: KeyCaller): Promise<KeyView>
  rotate(actor: Actor, id: string): Promise<KeyView>
  revoke(actor: Actor, id: string): Promise<KeyView>
  scheduleDeletion(actor: Actor, id: string, windowDays: number): Promise<KeyView>
  cancelDeletion(actor: Actor, id: string): Promise<KeyView>
  versions(actor: Actor, id: string): Promise<{ data: KeyVersionView[] }>
  /**
   * Every key of the tenant (insights, tag suggestions), oldest first, at most `limit`: the
   * caller is a background job or a report, not a page.
   */
  snapshot(tenantId: string, limit: number): Promise<KeyView[]>
  /**
   * Adds labels to a key (accepted tag suggestions): a set union on the locked row, capped at the
   * key's 50 labels (409 `too_many_labels`), audited as `keys.update`.
   */
  addLabels(actor: Actor, id: string, labels: readonly string[]): Promise<KeyView>
  /**
   * Reserves an existing key for a certificate issuer (a CA created on `keyId`): from then on it
   * signs through that issuer only (`/sign` answers 409 key_reserved). Only an Active Signing key
   * that is not exportable, holds its private key and is not reserved yet (409 key_reserved).
   */
  reserve(actor: Actor, ref: string, issuer: KeyIssuer): Promise<KeyView>
  /**
   * Gives a key back that `reserve` took for a CA whose creation then failed (audited as
   * `keys.release`); a key reserved for another issuer, or not reserved, is left as it is.
   */
  release(actor: Actor, id: string, issuer: KeyIssuer): Promise<void>
  exportPublic(
    actor: Actor,
    id: string,
    format: PublicFormat,
    version?: number,
  ): Promise<{ key: KeyView; version: number; exported: PublicExport }>
  exportPrivate(
    actor: Actor,
    id: string,
    request: {
      confirm: string
      format: PrivateFormat
      password?: string | undefined
      version?: number | undefined
    },
  ): Promise<{ key: KeyView; version: number; exported: PrivateExport }>
  /** Erases the material of every key (of every tenant) whose deletion date has passed. */
  destroyDue(requestId?: string | null): Promise<number>
  /** Fresh material for a new version of a key of this algorithm (key pairs in the pool). */
  newMaterial(tenantId: string, algorithm: AlgorithmName): Promise<KeyMaterial>
  /**
   * Adds `material` as the next version of a key the caller's transaction has locked (a
   * rotation policy's path). The caller records the audit and drops caches after commit.
   */
  addVersion(
    tx: Queryable,
    locked: KeyRow,
    material: KeyMaterial,
    now: Date,
    /** Other changes to the key row, made in the same update (the next rotation time). */
    also?: Omit<KeyChanges, 'updated_at'>,
  ): Promise<KeyRow>
  /**
   * Records, once per key, that its expiry time has passed (audit `keys.expire`). The state is
   * Expired from that moment whether or not this ran: it is derived from expires_at at each use.
   */
  expireDue(requestId?: string | null): Promise<number>
}

/** The AAD that binds sealed material to its tenant, key and version. */
export const materialAad = (tenantId: string, keyId: string, version: number) =>
  `kms:key-material:v1:${tenantId}:${keyId}:${version}`

const keyNotFound = () => notFound('key_not_found', 'Key')
/** The labels schema's bound (key-schemas.ts). */
const MAX_LABELS = 50

export function createKeyService(deps: {
  sql: Sql
  audit: AuditLog
  tenantKeks: TenantKeks
  pool: CryptoPool
  clock: Clock
  /** Told of every committed change, so cached rows never outlive it. */
  keyCache: Pick<KeyCache, 'invalidateTenant'>
  /**
   * Told of each new version in the transaction that adds it (rotations by the API and by
   * policies): the cloud exports become due for it (src/cloud-export). Must be quick and must
   * not fail but with the database.
   */
  versionObserver?: {
    versionAdded(
      tx: Queryable,
      event: { tenantId: string; keyId: string; version: number; now: Date },
    ): Promise<void>
  }
}): KeyService {
  const { sql, audit, clock } = deps

  function resolveAlgorithm(keyType: KeyType, requested: AlgorithmName | undefined): Algorithm {
    const name = requested ?? DEFAULT_ALGORITHM[keyType]
    if (!name) {
      throw new AppError(400, 'algorithm_required', `${keyType} keys have no default algorithm; name one`, {
        allowedAlgorithms: algorithmsFor(keyType),
      })
    }
    const algorithm = algorithmByName(name)
    if (!algorithm.keyTypes.includes(keyType)) {
      throw new AppError(400, 'invalid_algorithm', `${name} is not an algorithm for ${keyType} keys`, {
        allowedAlgorithms: algorithmsFor(keyType),
      })
    }
    return algorithm
  }

  function requireFuture(date: Date | null | undefined, field: string, now: Date): void {
    if (date && date.getTime() <= now.getTime()) {
      throw invalidField(field, 'must be in the future')
    }
  }

  function nameTaken(): AppError {
    return new AppError(409, 'key_name_taken', 'A key with this name already exists in the tenant')
  }

  function keyMaterialRefused(error: unknown): unknown {
    if (error instanceof KeyMaterialError) return new AppError(400, error.code, error.message)
    return error
  }

  /** 403 for a default change the caller may not make, recorded (outcome denied) before it is thrown. */
  async function refuseDefaultChange(actor: Actor, resource: string | null, missing: readonly string[]) {
    await audit
      .record({
        ...actor,
        action: 'keys.default_change',
        resource,
        outcome: 'denied',
        details: { requiredScope: missing.join(' ') },
      })
      .catch(() => {})
    return new AppError(
      403,
      'insufficient_scope',
      `Changing the tenant's default key needs the scopes ${missing.join(', ')} besides keys:write`,
      { requiredScope: missing[0] ?? null, missingScopes: missing },
    )
  }

  /**
   * Makes `keyId` the default of its type (or, with isDefault false, leaves the type without
   * one) and records the change apart from the create/update record: callers that omit keyId
   * encrypt to this key from now on. The caller holds the default-slot lock.
   */
  async function changeDefault(
    tx: Queryable,
    actor: Actor,
    keyType: string,
    keyId: string,
    isDefault: boolean,
    now: Date,
  ): Promise<void> {
    const previous = await getDefaultKey(tx, actor.tenantId, keyType)
    if (isDefault) await clearDefault(tx, actor.tenantId, keyType, now)
    await audit.recordInTransaction(tx, {
      ...actor,
      action: 'keys.default_change',
      resource: `key:${keyId}`,
      outcome: 'success',
      details: { keyType, isDefault, previousDefault: previous?.id ?? null },
    })
  }

  /** A key with its state now; a key found past its deletion date is destroyed first. */
  /**
   * A key with its state now; a key found past its deletion date is destroyed first. `ref`: the
   * key id or an alias (alias-refs.ts: an API key restricted to keys reaches its keys only).
   */
  async function load(actor: Actor, ref: string): Promise<LoadedKey> {
    const now = clock.now()
    const { id, alias } = await resolveKeyRef(sql, actor, ref)
    let row = await getKey(sql, actor.tenantId, id)
    if (!row) throw keyNotFound()
    if (!row.destroyed_at && keyState(row, now) === 'Destroyed') {
      await destroy(actor.tenantId, actor.requestId, now, id)
      row = (await getKey(sql, actor.tenantId, id)) ?? row
    }
    return { row, state: keyState(row, now), now, alias }
  }

  /** Key views with their aliases (one query for all of them). */
  async function viewsOf(tenantId: string, rows: readonly KeyRow[], now: Date): Promise<KeyView[]> {
    const aliases = await aliasesOfKeys(
      sql,
      tenantId,
      rows.map((row) => row.id),
    )
    return rows.map((row) => toKeyView(row, now, aliases.get(row.id) ?? []))
  }

  async function viewOf(row: KeyRow, now: Date): Promise<KeyView> {
    return (await viewsOf(row.tenant_id, [row], now))[0]!
  }

  async function destroy(tenantId: string | null, requestId: string | null, now: Date, keyId?: string) {
    // The common case, nothing due, costs one indexed read instead of a write transaction.
    if (!keyId) {
      const next = await nextDeletionDate(sql, tenantId)
      if (!next || next.getTime() > now.getTime()) return 0
    }
    const destroyed = await sql.begin(async (tx) => {
      const destroyed = await destroyDueKeys(tx, tenantId, now, keyId)
      // A destroyed key's aliases go with it: they name nothing from now on.
      for (const removed of await deleteAliasesOfKeys(tx, destroyed)) {
        await audit.recordInTransaction(tx, {
          tenantId: removed.tenant_id,
          actor: 'system',
          requestId,
          action: 'keys.alias_delete',
          resource: `key:${removed.key_id}`,
          outcome: 'success',
          details: { alias: removed.alias, previousKeyId: removed.key_id, reason: 'key destroyed' },
        })
      }
      for (const key of destroyed) {
        await audit.recordInTransaction(tx, {
          tenantId: key.tenant_id,
          actor: 'system',
          requestId,
          action: 'keys.destroy',
          resource: `key:${key.id}`,
          keyVersion: key.current_version,
          outcome: 'success',
          details: { reason: 'scheduled deletion date passed' },
        })
      }
      return destroyed
    })
    for (const tenant of new Set(destroyed.map((key) => key.tenant_id))) {
      await deps.keyCache.invalidateTenant(tenant)
    }
    return destroyed.length
  }

  async function persistNewKey(
    actor: Actor,
    input: KeyAttributes,
    algorithm: Algorithm,
    material: KeyMaterial,
    origin: 'Generated' | 'Imported',
    now: Date,
  ): Promise<KeyView> {
    const id = randomUUID()
    try {
      const sealed = material.secret
        ? await deps.tenantKeks.seal(actor.tenantId, material.secret, materialAad(actor.tenantId, id, 1))
        : null
      const row = await sql.begin(async (tx) => {
        if (input.isDefault) {
          await lockDefaultSlot(tx, actor.tenantId, input.keyType)
          await changeDefault(tx, actor, input.keyType, id, true, now)
        }
        const inserted = await insertKey(tx, {
          id,
          tenant_id: actor.tenantId,
          name: input.name,
          description: input.description ?? '',
          key_type: input.keyType,
          algorithm: algorithm.name,
          origin,
          is_default: input.isDefault ?? false,
          is_favorite: false,
          exportable: input.exportable ?? false,
          public_only: material.secret === null,
          reserved_for: input.reservedFor ?? null,
          labels: normaliseLabels(input.labels),
          current_version: 1,
          created_at: now,
          created_by: actor.actor,
          updated_at: now,
          last_rotated_at: null,
          expires_at: input.expiresAt ?? null,
        })
        await insertKeyVersion(tx, {
          key_id: id,
          version: 1,
          tenant_id: actor.tenantId,
          created_at: now,
          public_key: material.publicKey,
          sealed_material: sealed,
          destroyed_at: null,
        })
        await audit.recordInTransaction(tx, {
          ...actor,
          action: origin === 'Imported' ? 'keys.import' : 'keys.create',
          resource: `key:${id}`,
          keyVersion: 1,
          outcome: 'success',
          details: {
            algorithm: algorithm.name,
            keyType: input.keyType,
            isDefault: input.isDefault ?? false,
            exportable: input.exportable ?? false,
            ...(material.secret === null ? { publicOnly: true } : {}),
          },
        })
        return inserted
      })
      await deps.keyCache.invalidateTenant(actor.tenantId)
      return toKeyView(row, now, [])
    } catch (error) {
      if (isUniqueViolation(error, KEY_NAME_CONSTRAINT)) throw nameTaken()
      throw error
    } finally {
      material.secret?.fill(0)
    }
  }

  async function generate(tenantId: string, algorithm: Algorithm): Promise<KeyMaterial> {
    // An HMAC or AES secret is random bytes: not worth a thread hop. Every key pair goes to the pool.
    return isSymmetric(algorithm.spec)
      ? generateMaterial(algorithm.name)
      : deps.pool.generateKey(tenantId, algorithm.name)
  }

  /** Seals the material as the key's next version and inserts it; the key row's changes to make. */
  async function versionChanges(tx: Queryable, locked: KeyRow, material: KeyMaterial, now: Date) {
    const version = locked.current_version + 1
    if (!material.secret) throw new Error('a new version needs its private key')
    const sealed = await deps.tenantKeks.seal(
      locked.tenant_id,
      material.secret,
      materialAad(locked.tenant_id, locked.id, version),
      tx,
    )
    await insertKeyVersion(tx, {
      key_id: locked.id,
      version,
      tenant_id: locked.tenant_id,
      created_at: now,
      public_key: material.publicKey,
      sealed_material: sealed,
      destroyed_at: null,
    })
    await deps.versionObserver?.versionAdded(tx, {
      tenantId: locked.tenant_id,
      keyId: locked.id,
      version,
      now,
    })
    return { current_version: version, last_rotated_at: now, updated_at: now }
  }

  /**
   * Runs a lifecycle change on the loaded key, re-read under a row lock, with its audit record,
   * in one transaction. The change sees the state at the time the key was loaded.
   */
  async function transition(
    actor: Actor,
    loaded: LoadedKey,
    action: string,
    change: (row: KeyRow, state: KeyState, tx: Queryable, now: Date) => Promise<KeyChanges | null>,
    options: { lockDefaultSlot?: boolean; details?: Record<string, string | number | boolean | null> } = {},
  ): Promise<KeyView> {
    const { now } = loaded
    const { id, key_type: keyType } = loaded.row
    try {
      const row = await sql.begin(async (tx) => {
        // The default-slot lock comes before the row lock, always, so the two never deadlock.
        if (options.lockDefaultSlot) await lockDefaultSlot(tx, actor.tenantId, keyType)
        const locked = await getKey(tx, actor.tenantId, id, 'for update')
        if (!locked) throw keyNotFound()
        const changes = await change(locked, keyState(locked, now), tx, now)
        if (!changes) return locked
        const updated = await updateKey(tx, actor.tenantId, id, changes)
        await audit.recordInTransaction(tx, {
          ...actor,
          action,
          resource: `key:${id}`,
          keyVersion: updated.current_version,
          outcome: 'success',
          // The alias the caller named the key by (rotation by alias), beside the key id.
          details: loaded.alias ? { ...options.details, alias: loaded.alias } : (options.details ?? null),
        })
        return updated
      })
      await deps.keyCache.invalidateTenant(actor.tenantId)
      return viewOf(row, now)
    } catch (error) {
      if (isUniqueViolation(error, KEY_NAME_CONSTRAINT)) throw nameTaken()
      throw error
    }
  }

  async function importKey(actor: Actor, input: ImportInput, caller: KeyCaller): Promise<KeyView> {
    const now = clock.now()
    const algorithm = resolveAlgorithm(input.keyType, input.algorithm)
    requireFuture(input.expiresAt, 'body/expiresAt', now)
    // Before the material is parsed: importing one's own key pair as the default is the attack.
    const missing = input.isDefault ? caller.missingForDefault : []
    if (missing.length > 0) throw await refuseDefaultChange(actor, null, missing)
    let material: KeyMaterial
    try {
      material = await deps.pool.importKey(actor.tenantId, {
        algorithm: algorithm.name,
        format: input.format,
        material: input.material,
        password: input.password,
        publicOnly: input.publicOnly ?? false,
      })
    } catch (error) {
      throw keyMaterialRefused(error)
    }
    return persistNewKey(actor, input, algorithm, material, 'Imported', now)
  }

  return {
    countInUse: (tenantId) => countKeysInUse(sql, tenantId),
    async create(actor, input, caller) {
      const now = clock.now()
      const algorithm = resolveAlgorithm(input.keyType, input.algorithm)
      requireFuture(input.expiresAt, 'body/expiresAt', now)
      const missing = input.isDefault ? caller.missingForDefault : []
      if (missing.length > 0) throw await refuseDefaultChange(actor, null, missing)
      return persistNewKey(
        actor,
        input,
        algorithm,
        await generate(actor.tenantId, algorithm),
        'Generated',
        now,
      )
    },

    async import(actor, input, caller) {
      try {
        return await importKey(actor, input, caller)
      } catch (error) {
        // A refused import is recorded (who tried, what, why); never the material or password.
        // A failure to write the record is logged by the audit log; the refusal stands.
        if (error instanceof AppError) {
          await audit
            .record({
              ...actor,
              action: 'keys.import',
              resource: null,
              outcome: 'failure',
              details: {
                reason: error.code,
                format: input.format,
                keyType: input.keyType,
                algorithm: input.algorithm ?? null,
              },
            })
            .catch(() => {})
        }
        throw error
      }
    },

    async get(actor, ref) {
      const { row, now } = await load(actor, ref)
      return viewOf(row, now)
    },

    async list(actor, request) {
      const now = clock.now()
      // Keys past their deletion date are destroyed before anyone sees them listed.
      await destroy(actor.tenantId, actor.requestId, now)
      // An API key restricted to keys lists those keys only.
      const allowed = await allowedKeyIds(sql, actor)
      if (allowed) request = { ...request, filter: { ...request.filter, ids: allowed } }
      // One snapshot for the page and its counts. Custom plans: a generic plan cannot know how
      // selective a search pattern or label is, and picks a full index walk for rare matches.
      const [rows, total, expiringSoon] = await sql.begin(
        'isolation level repeatable read read only',
        async (tx) => {
          await tx`SET LOCAL plan_cache_mode = force_custom_plan`
          return [
            await listKeys(tx, actor.tenantId, { ...request, now }),
            await countKeys(tx, actor.tenantId, request.filter, now, TOTAL_COUNT_CAP + 1),
            await countActiveExpiringBy(
              tx,
              actor.tenantId,
              now,
              new Date(now.getTime() + EXPIRY_ALERT_DAYS * DAY_MS),
              request.filter.ids,
            ),
          ] as const
        },
      )
      const page = rows.slice(0, request.limit)
      const last = page.at(-1)
      const next =
        rows.length > request.limit && last
          ? { favorite: last.is_favorite, value: last.sort_value, id: last.id }
          : null
      return {
        data: await viewsOf(actor.tenantId, page, now),
        total: Math.min(total, TOTAL_COUNT_CAP),
        totalIsExact: total <= TOTAL_COUNT_CAP,
        next,
        expiringSoon,
      }
    },

    async update(actor, id, patch, caller) {
      const fields = Object.entries(patch)
        .filter(([, value]) => value !== undefined)
        .map(([field]) => field)
      const loaded = await load(actor, id)
      // Decided on the locked row (the default may have moved since the key was read); a
      // refusal is recorded once the transaction has rolled back.
      const refusal: { missing: readonly string[] | null } = { missing: null }
      try {
        return await transition(
          actor,
          loaded,
          'keys.update',
          async (locked, state, tx, now) => {
            if (patch.isDefault !== undefined && patch.isDefault !== locked.is_default) {
              const missing = caller.missingForDefault
              if (missing.length > 0) {
                refusal.missing = missing
                throw new AppError(403, 'insufficient_scope', 'refused default change')
              }
            }
            return updateChanges(locked, state, tx, now)
          },
          {
            lockDefaultSlot: patch.isDefault !== undefined,
            details: { fields: fields.join(',') },
          },
        )
      } catch (error) {
        if (refusal.missing) throw await refuseDefaultChange(actor, `key:${loaded.row.id}`, refusal.missing)
        throw error
      }

      async function updateChanges(
        locked: KeyRow,
        state: KeyState,
        tx: Queryable,
        now: Date,
      ): Promise<KeyChanges> {
        requireState(state, ['Active', 'Expired', 'Revoked', 'Pending Deletion'], 'change its attributes')
        if (patch.expiresAt !== undefined) {
          // Expired is terminal (DESIGN): a new expiry cannot bring a key back.
          requireState(state, ['Active'], 'change its expiration')
          requireFuture(patch.expiresAt, 'body/expiresAt', now)
        }
        if (patch.isDefault === true) requireState(state, ['Active'], 'become the default key')
        if (patch.isDefault !== undefined && patch.isDefault !== locked.is_default) {
          await changeDefault(tx, actor, locked.key_type, locked.id, patch.isDefault, now)
        }
        const changes: KeyChanges = { updated_at: now }
        if (patch.name !== undefined) changes.name = patch.name
        if (patch.description !== undefined) changes.description = patch.description
        if (patch.labels !== undefined) changes.labels = normaliseLabels(patch.labels)
        if (patch.expiresAt !== undefined) {
          changes.expires_at = patch.expiresAt
          // A new expiry is a new transition for the lifecycle job to act on.
          changes.expired_at = null
        }
        if (patch.isDefault !== undefined) changes.is_default = patch.isDefault
        if (patch.isFavorite !== undefined) changes.is_favorite = patch.isFavorite
        return changes
      }
    },

    async rotate(actor, id) {
      const loaded = await load(actor, id)
      requireState(loaded.state, ['Active'], 'rotate')
      requireRotatable(loaded.row)
      const material = await generate(actor.tenantId, algorithmByName(loaded.row.algorithm as AlgorithmName))
      try {
        return await transition(actor, loaded, 'keys.rotate', async (locked, lockedState, tx, now) => {
          requireState(lockedState, ['Active'], 'rotate')
          return versionChanges(tx, locked, material, now)
        })
      } finally {
        material.secret?.fill(0)
      }
    },

    newMaterial: (tenantId, algorithm) => generate(tenantId, algorithmByName(algorithm)),

    async addVersion(tx, locked, material, now, also = {}) {
      const changes = await versionChanges(tx, locked, material, now)
      return updateKey(tx, locked.tenant_id, locked.id, { ...also, ...changes })
    },

    revoke: async (actor, id) =>
      transition(actor, await load(actor, id), 'keys.revoke', async (_row, state, _tx, now) => {
        requireState(state, ['Active'], 'revoke')
        return { revoked_at: now, updated_at: now }
      }),

    scheduleDeletion: async (actor, id, windowDays) =>
      transition(
        actor,
        await load(actor, id),
        'keys.schedule_deletion',
        async (_row, state, _tx, now) => {
          requireState(state, ['Active', 'Expired', 'Revoked'], 'schedule its deletion')
          return { scheduled_deletion_date: new Date(now.getTime() + windowDays * DAY_MS), updated_at: now }
        },
        { details: { windowDays } },
      ),

    cancelDeletion: async (actor, id) =>
      transition(actor, await load(actor, id), 'keys.cancel_deletion', async (_row, state, _tx, now) => {
        requireState(state, ['Pending Deletion'], 'cancel its deletion')
        return { scheduled_deletion_date: null, updated_at: now }
      }),

    async snapshot(tenantId, limit) {
      const now = clock.now()
      return viewsOf(tenantId, await allKeys(sql, tenantId, limit), now)
    },

    async reserve(actor, ref, issuer) {
      return transition(
        actor,
        await load(actor, ref),
        'keys.reserve',
        async (locked, state, _tx, now) => {
          requireState(state, ['Active'], 'sign for a certificate authority')
          if (locked.reserved_for) throw keyReserved(locked.reserved_for)
          if (locked.key_type !== 'Signing' || locked.exportable || locked.public_only)
            throw new AppError(
              409,
              'key_not_reservable',
              'A certificate authority needs a Signing key that is not exportable and holds its private key',
            )
          // An imported key's private key exists outside the service too: its holder could sign
          // certificates with no role, no audit and no revocation. A CA key is generated here.
          // A CA's key is never rotated (requireRotatable): a schedule would only fail.
          if (locked.next_rotation_at)
            throw new AppError(
              409,
              'key_not_reservable',
              'The key has a rotation policy: a certificate authority’s key is never rotated; delete the policy first',
            )
          if (locked.origin === 'Imported')
            throw new AppError(
              409,
              'key_not_reservable',
              'An imported key exists outside the service: a certificate authority needs a key generated by the service',
            )
          return { reserved_for: issuer, updated_at: now }
        },
        { details: { reservedFor: issuer } },
      )
    },

    async release(actor, id, issuer) {
      await transition(
        actor,
        await load(actor, id),
        'keys.release',
        async (locked, _state, _tx, now) =>
          locked.reserved_for === issuer ? { reserved_for: null, updated_at: now } : null,
        { details: { reservedFor: issuer } },
      )
    },

    async addLabels(actor, id, labels) {
      return transition(
        actor,
        await load(actor, id),
        'keys.update',
        async (locked, state, _tx, now) => {
          requireState(state, ['Active', 'Expired', 'Revoked', 'Pending Deletion'], 'change its labels')
          const merged = [...new Set([...locked.labels, ...labels])]
          if (merged.length === locked.labels.length) return null
          if (merged.length > MAX_LABELS)
            throw new AppError(409, 'too_many_labels', `A key carries at most ${MAX_LABELS} labels`, {
              limit: MAX_LABELS,
            })
          return { labels: merged, updated_at: now }
        },
        { details: { fields: 'labels' } },
      )
    },

    async versions(actor, ref) {
      const { row, state } = await load(actor, ref)
      const id = row.id
      const versions = await listKeyVersions(sql, actor.tenantId, id)
      return {
        data: versions.map((v) => ({
          version: v.version,
          createdAt: v.created_at.toISOString(),
          state: v.destroyed_at ? 'Destroyed' : state,
          isCurrent: v.version === row.current_version,
        })),
      }
    },

    async exportPublic(actor, ref, format, requestedVersion) {
      const { row, state, now } = await load(actor, ref)
      const id = row.id
      const algorithm = algorithmByName(row.algorithm as AlgorithmName)
      if (isSymmetric(algorithm.spec)) {
        throw new AppError(
          409,
          'no_public_key',
          `${algorithm.name} keys are symmetric and have no public key`,
        )
      }
      if (state === 'Destroyed') throw stateConflict(state, 'export its public key')
      const version = requestedVersion ?? row.current_version
      const stored = await getKeyVersion(sql, actor.tenantId, id, version)
      if (!stored) throw notFound('key_version_not_found', `Version ${version} of the key`)
      if (!stored.public_key) throw stateConflict('Destroyed', 'export its public key')
      let exported: ReturnType<typeof exportPublic>
      try {
        exported = exportPublic(stored.public_key, algorithm, row.key_type, format, `${id}:${version}`)
      } catch (error) {
        // X-Wing keys have no JWK form (format_not_supported).
        throw keyMaterialRefused(error)
      }
      return { key: await viewOf(row, now), version, exported }
    },

    async exportPrivate(actor, ref, request) {
      const { row, state, now } = await load(actor, ref)
      const id = row.id
      // Every attempt is recorded at warning level: key material leaving the service, or an
      // attempt at it, is what an auditor looks for first.
      const refuse = async (error: AppError) => {
        await audit.record({
          ...actor,
          action: 'keys.export_private',
          resource: `key:${id}`,
          outcome: 'failure',
          details: { level: 'warning', reason: error.code },
        })
        return error
      }
      if (row.public_only) {
        throw await refuse(
          new AppError(
            409,
            'public_key_only',
            'The key was imported without its private key: there is none to export',
          ),
        )
      }
      // First: a key not created exportable never leaves, whatever else the request says.
      if (!row.exportable) {
        throw await refuse(
          new AppError(
            409,
            'key_not_exportable',
            'The key was not created or imported with exportable: true; its private key cannot be exported',
          ),
        )
      }
      if (request.confirm !== row.name) {
        throw await refuse(
          new AppError(400, 'confirmation_mismatch', "Private key export needs the key's name in confirm"),
        )
      }
      if (state !== 'Active' && state !== 'Expired')
        throw await refuse(stateConflict(state, 'export its private key'))
      const version = request.version ?? row.current_version
      const stored = await getKeyVersion(sql, actor.tenantId, id, version)
      if (!stored) throw notFound('key_version_not_found', `Version ${version} of the key`)
      if (!stored.sealed_material) throw stateConflict('Destroyed', 'export its private key')
      const algorithm = algorithmByName(row.algorithm as AlgorithmName)
      const secret = await deps.tenantKeks.open(
        actor.tenantId,
        stored.sealed_material,
        materialAad(actor.tenantId, id, version),
      )
      let exported: PrivateExport
      try {
        // A password means a 600,000-iteration KDF: in the pool, off the event loop.
        exported =
          request.password === undefined
            ? exportPrivate(secret, algorithm, request.format, undefined)
            : await deps.pool.exportPrivate(actor.tenantId, {
                secret,
                algorithm: algorithm.name,
                format: request.format,
                password: request.password,
              })
      } catch (error) {
        throw keyMaterialRefused(error)
      } finally {
        secret.fill(0)
      }
      // Acknowledged only once the record is durable: no unaudited private key leaves.
      await audit.record({
        ...actor,
        action: 'keys.export_private',
        resource: `key:${id}`,
        keyVersion: version,
        outcome: 'success',
        details: { level: 'warning', format: request.format, encrypted: exported.encrypted },
      })
      return { key: await viewOf(row, now), version, exported }
    },

    destroyDue: (requestId) => destroy(null, requestId ?? null, clock.now()),

    async expireDue(requestId) {
      const now = clock.now()
      const expired = await sql.begin(async (tx) => {
        const rows = await markExpired(tx, now)
        for (const row of rows) {
          await audit.recordInTransaction(tx, {
            tenantId: row.tenant_id,
            actor: 'system:lifecycle',
            action: 'keys.expire',
            resource: `key:${row.id}`,
            keyVersion: row.current_version,
            outcome: 'success',
            requestId: requestId ?? null,
            details: { expiresAt: row.expires_at.toISOString() },
          })
        }
        return rows
      })
      for (const tenantId of new Set(expired.map((row) => row.tenant_id))) {
        await deps.keyCache.invalidateTenant(tenantId)
      }
      return expired.length
    },
  }
}

/** Labels are a set: duplicates collapse, order of first appearance is kept. */
function normaliseLabels(labels: readonly string[] | undefined): string[] {
  return [...new Set(labels ?? [])]
}
