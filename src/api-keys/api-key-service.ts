import { randomUUID } from 'node:crypto'
import type { ActorUse } from '../audit/audit-feed.ts'
import type { AuditLog } from '../audit/audit-log.ts'
import {
  isKeyIdEntry,
  type KeyOperation,
  type KeyRestriction,
  keyRestrictionOf,
  normalizeKeyEntries,
  type RestrictionExcess,
  restrictionExcess,
} from '../auth/key-restriction.ts'
import type { ApiKeyPrincipal, Principal } from '../auth/principal.ts'
import type { Actor } from '../auth/request-context.ts'
import type { Scope } from '../auth/scopes.ts'
import type { Queryable, Sql } from '../data/database.ts'
import { AppError, notFound, unauthorized } from '../platform/errors.ts'
import type { Authenticator } from './api-key-authenticator.ts'
import { generateApiKey } from './api-key-format.ts'
import {
  type ApiKeyRow,
  addApiKeyUses,
  getApiKey,
  insertApiKey,
  listApiKeys,
  lockTenantApiKeys,
  revokeApiKey,
  revokeDescendants,
} from './api-key-store.ts'

export interface ApiKeyView {
  id: string
  name: string
  scopes: string[]
  /** The first characters of the key, enough to recognise it in a list. */
  prefix: string
  createdAt: string
  createdBy: string
  /** The API key that created this one; null for keys made by the CLI or at tenant creation. */
  parentId: string | null
  expiresAt: string | null
  revokedAt: string | null
  /** Key ids and aliases the key may use, as given at creation; null: every key of the tenant. */
  keys: string[] | null
  /** Cryptographic operations the key may perform; null: every one its scopes allow. */
  operations: KeyOperation[] | null
  /** The latest audited request made with the key (audit records of actor `apikey:<id>`); null: none. */
  lastUsedAt: string | null
}

/** The audit feed's consumer that folds API keys' last use (seeded by migration 0035). */
const LAST_USE_FEED = { consumer: 'apikeys.last_use', actorPrefix: 'apikey:' }
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/

/** The API key a record's actor names (`apikey:<id>`); undefined for anything else. */
function apiKeyIdOfActor(actor: string): string | undefined {
  const id = actor.slice(LAST_USE_FEED.actorPrefix.length)
  return actor.startsWith(LAST_USE_FEED.actorPrefix) && UUID.test(id) ? id : undefined
}

/** The later of the folded last use and the latest record not folded yet. */
function laterOf(folded: Date | null, unfolded: Date | undefined): Date | null {
  if (!unfolded) return folded
  return folded && folded.getTime() >= unfolded.getTime() ? folded : unfolded
}

function toApiKeyView(row: ApiKeyRow, lastUsedAt: Date | null = row.last_used_at): ApiKeyView {
  return {
    id: row.id,
    name: row.name,
    scopes: row.scopes,
    prefix: `kms_${row.lookup_id.slice(0, 6)}`,
    createdAt: row.created_at.toISOString(),
    createdBy: row.created_by,
    parentId: row.parent_id,
    expiresAt: row.expires_at?.toISOString() ?? null,
    revokedAt: row.revoked_at?.toISOString() ?? null,
    keys: row.restricted_keys,
    operations: row.restricted_operations as KeyOperation[] | null,
    lastUsedAt: lastUsedAt?.toISOString() ?? null,
  }
}

/** The restriction an API key row carries (its principal's, its children's bound). */
export const restrictionOfRow = (row: ApiKeyRow): KeyRestriction | null =>
  keyRestrictionOf(row.restricted_keys, row.restricted_operations)

interface CreateApiKeyInput {
  name: string
  scopes: readonly Scope[]
  expiresAt?: Date | null
  /**
   * Key ids (UUIDs) and aliases (`alias/<name>`) the key may use, at most 100; absent or null:
   * every key of the tenant. Key ids must be keys of the tenant; aliases need not exist yet.
   */
  keys?: readonly string[] | null | undefined
  /** Cryptographic operations the key may perform; absent or null: all its scopes allow. */
  operations?: readonly KeyOperation[] | null | undefined
  /**
   * The API key making the request, which becomes the new key's parent: the new key expires no
   * later than it and is revoked with it. Absent for the CLI, tenant creation and keys a team
   * member creates (no parent).
   */
  parent?: ApiKeyPrincipal | undefined
}

interface RevokedApiKeyView extends ApiKeyView {
  /** Keys revoked with this one because it created them, directly or through other keys. */
  revokedDescendants: string[]
}

export interface ApiKeyService {
  /** Creates the key inside `tx` when given (tenant creation), else in its own transaction. */
  create(actor: Actor, input: CreateApiKeyInput, tx?: Queryable): Promise<{ view: ApiKeyView; key: string }>
  list(
    tenantId: string,
    page: { limit: number; offset: number; includeRevoked: boolean },
  ): Promise<{ data: ApiKeyView[]; total: number }>
  get(tenantId: string, id: string): Promise<ApiKeyView>
  /**
   * Revokes the key and every key it minted, transitively, in one transaction. `by` is the API
   * key making the request (absent for the CLI): it must hold every scope of the key it revokes,
   * and be restricted no more than it.
   */
  revoke(actor: Actor, id: string, by?: Principal): Promise<RevokedApiKeyView>
  /**
   * The last-use sweep: folds the audit records made with API keys since the last fold into
   * their `last_used_at` (through the audit feed); the number of (tenant, key) uses folded.
   */
  foldLastUse(): Promise<number>
}

export function createApiKeyService(deps: {
  sql: Sql
  audit: AuditLog
  authenticator: Authenticator
  /** The tenant's API-key policy (src/settings): the longest lifetime of a new key, if any. */
  apiKeyPolicy?: { maxLifetimeDaysOf(tenantId: string): Promise<number | null> }
  /** The keys module's answer to "which of these ids are keys of the tenant" (restrictions). */
  keyDirectory?: { existingKeyIds(tenantId: string, ids: readonly string[]): Promise<ReadonlySet<string>> }
  now?: () => number
}): ApiKeyService {
  const now = deps.now ?? Date.now
  const lastUses = deps.audit.feed.actorUses(LAST_USE_FEED)

  /** The latest use per API key id among records not folded yet. */
  const latestById = (uses: readonly ActorUse[]): Map<string, Date> => {
    const latest = new Map<string, Date>()
    for (const use of uses) {
      const id = apiKeyIdOfActor(use.actor)
      if (id) latest.set(id, laterOf(latest.get(id) ?? null, use.lastAt)!)
    }
    return latest
  }

  /**
   * Rows with their last use: the folded column and the records not folded yet, read in one
   * snapshot (a fold committing in between would otherwise hide the records it moved).
   */
  function withLastUse<T>(
    read: (db: Queryable) => Promise<T>,
    rowsOf: (result: T) => readonly ApiKeyRow[],
    tenantId: string,
    oneKey?: string,
  ): Promise<{ result: T; lastUse: Map<string, Date> }> {
    return deps.sql.begin('isolation level repeatable read read only', async (tx) => {
      const result = await read(tx)
      if (rowsOf(result).length === 0) return { result, lastUse: new Map() }
      const uses = await lastUses.unfolded(tx, tenantId, oneKey ? `apikey:${oneKey}` : undefined)
      return { result, lastUse: latestById(uses) }
    })
  }

  const viewWith = (lastUse: Map<string, Date>) => (row: ApiKeyRow) =>
    toApiKeyView(row, laterOf(row.last_used_at, lastUse.get(row.id)))

  async function viewOf(tenantId: string, id: string): Promise<ApiKeyView> {
    const { result: row, lastUse } = await withLastUse(
      (db) => getApiKey(db, tenantId, id),
      (row) => (row ? [row] : []),
      tenantId,
      id,
    )
    if (!row) throw notFound('api_key_not_found', 'API key')
    return viewWith(lastUse)(row)
  }

  /** The restriction asked for, normalised: key ids in lower case, each entry once. */
  const requestedRestriction = (input: CreateApiKeyInput): KeyRestriction | null =>
    keyRestrictionOf(
      input.keys ? normalizeKeyEntries(input.keys) : null,
      input.operations ? [...new Set(input.operations)] : null,
    )

  /**
   * Key ids of the restriction must be keys of the tenant now (400 naming each entry that is
   * not, by its place in the request); aliases need not exist yet.
   */
  async function requireTenantKeys(tenantId: string, input: CreateApiKeyInput): Promise<void> {
    const given = input.keys ?? []
    const ids = [...new Set(given.filter(isKeyIdEntry).map((entry) => entry.toLowerCase()))]
    if (ids.length === 0) return
    if (!deps.keyDirectory) throw new Error('API-key restrictions to key ids need the key directory')
    const existing = await deps.keyDirectory.existingKeyIds(tenantId, ids)
    const fields = given.flatMap((entry, index) =>
      isKeyIdEntry(entry) && !existing.has(entry.toLowerCase())
        ? [{ path: `body/keys/${index}`, message: `${entry} is not a key of this tenant` }]
        : [],
    )
    if (fields.length > 0)
      throw new AppError(400, 'validation_failed', fields.map((f) => `${f.path} ${f.message}`).join('; '), {
        fields,
      })
  }

  /** A restriction wider than the bound is refused (403), recorded as the scope hook's refusals are. */
  async function refuseWiderRestriction(
    actor: Actor,
    operation: string,
    resource: string | null,
    excess: RestrictionExcess[],
    bound: KeyRestriction,
    message: string,
  ): Promise<never> {
    const said = excess.map((e) =>
      e.entries === null
        ? `${e.field} unrestricted, where the caller's are restricted`
        : `${e.field} outside the caller's: ${e.entries.join(', ')}`,
    )
    await deps.audit
      .record({
        ...actor,
        action: 'authorization.denied',
        resource,
        outcome: 'denied',
        details: { operation, widerRestriction: excess.map((e) => e.field).join(' ') },
      })
      .catch(() => {})
    throw new AppError(403, 'restriction_escalation', `${message}: ${said.join('; ')}`, {
      wider: excess.map((e) => ({ field: e.field, entries: e.entries })),
      allowedKeys: bound.keys,
      allowedOperations: bound.operations,
    })
  }

  /**
   * The parent as it is now, under the tenant's API-key lock: it may have been revoked or have
   * expired since the request was authenticated, and a child made then would outlive it.
   */
  async function liveParent(db: Queryable, actor: Actor, parent: ApiKeyPrincipal): Promise<ApiKeyRow> {
    const row = await getApiKey(db, actor.tenantId, parent.apiKeyId)
    if (!row || row.revoked_at || (row.expires_at && row.expires_at.getTime() <= now())) throw unauthorized()
    return row
  }

  /** A child of an expiring key expires no later than it (refused, not capped: no silent changes). */
  function requireWithinParent(parent: ApiKeyRow, expiresAt: Date | null | undefined): void {
    if (!parent.expires_at) return
    if (expiresAt && expiresAt.getTime() <= parent.expires_at.getTime()) return
    const bound = parent.expires_at.toISOString()
    const path = 'body/expiresAt'
    const message = expiresAt
      ? `must be no later than ${bound}, when the API key creating it expires`
      : `is required and must be no later than ${bound}, when the API key creating it expires`
    throw new AppError(400, 'validation_failed', `${path} ${message}`, {
      fields: [{ path, message }],
      maxExpiresAt: bound,
    })
  }

  async function insertWithAudit(
    db: Queryable,
    actor: Actor,
    input: CreateApiKeyInput,
    restriction: KeyRestriction | null,
  ) {
    if (input.expiresAt && input.expiresAt.getTime() <= now()) {
      throw new AppError(400, 'validation_failed', 'expiresAt must be in the future')
    }
    let parentId: string | null = null
    if (input.parent) {
      await lockTenantApiKeys(db, actor.tenantId)
      const parent = await liveParent(db, actor, input.parent)
      requireWithinParent(parent, input.expiresAt)
      parentId = parent.id
    }
    // The lookup id has ~71 random bits: a collision would surface as a unique violation, not a wrong key.
    const generated = generateApiKey()
    const row = await insertApiKey(db, {
      id: randomUUID(),
      tenant_id: actor.tenantId,
      lookup_id: generated.lookupId,
      secret_hash: generated.secretHash,
      name: input.name,
      scopes: [...new Set(input.scopes)],
      created_by: actor.actor,
      expires_at: input.expiresAt ?? null,
      parent_id: parentId,
      restricted_keys: restriction?.keys ? [...restriction.keys] : null,
      restricted_operations: restriction?.operations ? [...restriction.operations] : null,
    })
    await deps.audit.recordInTransaction(db, {
      ...actor,
      action: 'apikeys.create',
      resource: `apikey:${row.id}`,
      outcome: 'success',
      details: {
        scopes: row.scopes.join(' '),
        parentId,
        expiresAt: row.expires_at?.toISOString() ?? null,
        ...(row.restricted_keys ? { keys: row.restricted_keys.join(' ') } : {}),
        ...(row.restricted_operations ? { operations: row.restricted_operations.join(' ') } : {}),
      },
    })
    return { view: toApiKeyView(row), key: generated.key }
  }

  /** A refused revocation is recorded like the scope hook's refusals (nothing ran). */
  async function refuseRevocation(actor: Actor, id: string, missing: string[]): Promise<never> {
    await deps.audit
      .record({
        ...actor,
        action: 'authorization.denied',
        resource: `apikey:${id}`,
        outcome: 'denied',
        details: { operation: 'apikeys.revoke', requiredScope: missing.join(' ') },
      })
      .catch(() => {})
    throw new AppError(
      403,
      'scope_escalation',
      'An API key cannot revoke a key holding scopes it does not hold',
      {
        missingScopes: missing,
      },
    )
  }

  /** A tenant with a maximum lifetime refuses keys that never expire or expire after it. */
  async function requireWithinPolicy(tenantId: string, expiresAt: Date | null | undefined): Promise<void> {
    const maxDays = await deps.apiKeyPolicy?.maxLifetimeDaysOf(tenantId)
    if (maxDays === undefined || maxDays === null) return
    const bound = new Date(now() + maxDays * 86_400_000)
    if (expiresAt && expiresAt.getTime() <= bound.getTime()) return
    const path = 'body/expiresAt'
    const days = maxDays === 1 ? '1 day' : `${maxDays} days`
    const message = `${expiresAt ? 'must be' : 'is required and must be'} no later than ${bound.toISOString()} (the tenant's API-key policy: keys live up to ${days})`
    throw new AppError(400, 'validation_failed', `${path} ${message}`, {
      fields: [{ path, message }],
      maxLifetimeDays: maxDays,
      maxExpiresAt: bound.toISOString(),
    })
  }

  return {
    async create(actor, input, tx) {
      const restriction = requestedRestriction(input)
      // A tenant's first key is made in the tenant's own transaction, before any policy or key exists.
      if (tx) return insertWithAudit(tx, actor, input, restriction)
      // A restricted parent mints keys restricted at least as much. Its restriction is fixed at
      // its creation, so the authenticated principal's is its row's (the row is read again, under
      // the tenant's lock, for revocation and expiry). Checked before the key ids exist: a
      // restricted key learns nothing of keys outside its list.
      const bound = input.parent?.keyRestriction
      if (bound) {
        const excess = restrictionExcess(restriction, bound)
        if (excess.length > 0)
          return refuseWiderRestriction(
            actor,
            'apikeys.create',
            null,
            excess,
            bound,
            'A restricted API key cannot create a key it restricts less than itself',
          )
      }
      // Read before the transaction (the embedded database has one connection).
      await requireTenantKeys(actor.tenantId, input)
      await requireWithinPolicy(actor.tenantId, input.expiresAt)
      return deps.sql.begin((t) => insertWithAudit(t, actor, input, restriction))
    },
    async list(tenantId, page) {
      const { result, lastUse } = await withLastUse(
        (db) => listApiKeys(db, tenantId, page),
        (result) => result.rows,
        tenantId,
      )
      return { data: result.rows.map(viewWith(lastUse)), total: result.total }
    },
    get: viewOf,
    foldLastUse: () =>
      lastUses.fold((tx, uses) =>
        addApiKeyUses(
          tx,
          uses.flatMap((use) => {
            const id = apiKeyIdOfActor(use.actor)
            return id ? [{ tenant_id: use.tenantId, api_key_id: id, used_at: use.lastAt }] : []
          }),
        ),
      ),
    async revoke(actor, id, by) {
      const result = await deps.sql.begin(async (tx) => {
        await lockTenantApiKeys(tx, actor.tenantId)
        const target = await getApiKey(tx, actor.tenantId, id)
        if (!target) throw notFound('api_key_not_found', 'API key')
        // Descendants hold subsets of the target's scopes (a key grants only what it holds), so
        // holding the target's scopes covers everything this revokes.
        const missing = by ? target.scopes.filter((scope) => !by.scopes.has(scope as Scope)) : []
        if (missing.length > 0) return { refused: missing } as const
        // Likewise its restriction: descendants are restricted at least as much as the target.
        const bound = by?.kind === 'apiKey' ? by.keyRestriction : null
        const excess = bound ? restrictionExcess(restrictionOfRow(target), bound) : []
        if (bound && excess.length > 0) return { refused: null, wider: { excess, bound } } as const
        const revoked = await revokeApiKey(tx, actor.tenantId, id)
        if (!revoked) throw notFound('api_key_not_found', 'API key')
        // Walked even when the key itself was revoked already: keys it minted before revocation
        // cascaded (or before this rule existed) are revoked now.
        const descendants = await revokeDescendants(tx, actor.tenantId, id)
        const descendantIds = descendants.map((row) => row.id)
        if (revoked.changed || descendants.length > 0) {
          await deps.audit.recordInTransaction(tx, {
            ...actor,
            action: 'apikeys.revoke',
            resource: `apikey:${id}`,
            outcome: 'success',
            details: {
              alreadyRevoked: !revoked.changed,
              revokedDescendants: descendantIds.join(' '),
            },
          })
        }
        for (const descendant of descendants) {
          await deps.audit.recordInTransaction(tx, {
            ...actor,
            action: 'apikeys.revoke',
            resource: `apikey:${descendant.id}`,
            outcome: 'success',
            details: { reason: 'ancestor_revoked', revokedWith: id, parentId: descendant.parent_id },
          })
        }
        return { row: revoked.row, descendants, refused: null, wider: null }
      })
      if (result.refused) return refuseRevocation(actor, id, result.refused)
      if (result.wider)
        return refuseWiderRestriction(
          actor,
          'apikeys.revoke',
          `apikey:${id}`,
          result.wider.excess,
          result.wider.bound,
          'A restricted API key cannot revoke a key restricted less than itself',
        )
      // After commit, on every process: a cached row would otherwise keep a revoked key working.
      for (const row of [result.row, ...result.descendants])
        await deps.authenticator.invalidate(row.lookup_id)
      const view = await viewOf(actor.tenantId, id)
      return { ...view, revokedDescendants: result.descendants.map((row) => row.id) }
    },
  }
}
