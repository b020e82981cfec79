import { randomUUID } from 'node:crypto'
import type { AuditLog } from '../audit/audit-log.ts'
import type { ApiKeyPrincipal, Principal } from '../auth/principal.ts'
import type { Actor } from '../auth/request-context.ts'
import type { Scope } from '../auth/scopes.ts'
import type { Queryable, Sql } from '../data/database.ts'
import { AppError, notFound, unauthorized } from '../platform/errors.ts'
import type { Authenticator } from './api-key-authenticator.ts'
import { generateApiKey } from './api-key-format.ts'
import {
  type ApiKeyRow,
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
}

function toApiKeyView(row: ApiKeyRow): ApiKeyView {
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
  }
}

interface CreateApiKeyInput {
  name: string
  scopes: readonly Scope[]
  expiresAt?: Date | null
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
   * key making the request (absent for the CLI): it must hold every scope of the key it revokes.
   */
  revoke(actor: Actor, id: string, by?: Principal): Promise<RevokedApiKeyView>
}

export function createApiKeyService(deps: {
  sql: Sql
  audit: AuditLog
  authenticator: Authenticator
  /** The tenant's API-key policy (src/settings): the longest lifetime of a new key, if any. */
  apiKeyPolicy?: { maxLifetimeDaysOf(tenantId: string): Promise<number | null> }
  now?: () => number
}): ApiKeyService {
  const now = deps.now ?? Date.now

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

  async function insertWithAudit(db: Queryable, actor: Actor, input: CreateApiKeyInput) {
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
      // A tenant's first key is made in the tenant's own transaction, before any policy exists.
      if (tx) return insertWithAudit(tx, actor, input)
      // Read before the transaction (the embedded database has one connection).
      await requireWithinPolicy(actor.tenantId, input.expiresAt)
      return deps.sql.begin((t) => insertWithAudit(t, actor, input))
    },
    async list(tenantId, page) {
      const { rows, total } = await listApiKeys(deps.sql, tenantId, page)
      return { data: rows.map(toApiKeyView), total }
    },
    async get(tenantId, id) {
      const row = await getApiKey(deps.sql, tenantId, id)
      if (!row) throw notFound('api_key_not_found', 'API key')
      return toApiKeyView(row)
    },
    async revoke(actor, id, by) {
      const result = await deps.sql.begin(async (tx) => {
        await lockTenantApiKeys(tx, actor.tenantId)
        const target = await getApiKey(tx, actor.tenantId, id)
        if (!target) throw notFound('api_key_not_found', 'API key')
        // Descendants hold subsets of the target's scopes (a key grants only what it holds), so
        // holding the target's scopes covers everything this revokes.
        const missing = by ? target.scopes.filter((scope) => !by.scopes.has(scope as Scope)) : []
        if (missing.length > 0) return { refused: missing } as const
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
        return { row: revoked.row, descendants, refused: null }
      })
      if (result.refused) return refuseRevocation(actor, id, result.refused)
      // After commit, on every process: a cached row would otherwise keep a revoked key working.
      for (const row of [result.row, ...result.descendants])
        await deps.authenticator.invalidate(row.lookup_id)
      return { ...toApiKeyView(result.row), revokedDescendants: result.descendants.map((row) => row.id) }
    },
  }
}
