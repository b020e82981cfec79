import type { AuditLog } from '../audit/audit-log.ts'
import type { Actor } from '../auth/request-context.ts'
import type { Queryable, Sql } from '../data/database.ts'
import type { Clock } from '../platform/clock.ts'
import { AppError, isUniqueViolation, notFound } from '../platform/errors.ts'
import { isReservedAlias, MAX_ALIASES_PER_KEY, RESERVED_ALIAS_PREFIX } from './alias-name.ts'
import { allowedKeyIds, keyNotAllowed, requireKeyAllowed, resolveKeyRef } from './alias-refs.ts'
import {
  ALIAS_CONSTRAINT,
  type AliasRow,
  countAliasesOfKey,
  deleteAlias,
  getAlias,
  insertAlias,
  listAliases,
  moveAlias,
} from './alias-store.ts'
import type { KeyCache } from './key-cache.ts'
import { keyState, requireState } from './key-state.ts'
import { getKey, type KeyRow } from './key-store.ts'

/** An alias as the API shows it. */
interface AliasView {
  alias: string
  keyId: string
  createdAt: string
  updatedAt: string
}

interface AliasListRequest {
  /** A key reference: only its aliases. */
  keyId?: string | undefined
  limit: number
  /** The last alias of the previous page. */
  after: string | null
}

interface AliasListResult {
  data: AliasView[]
  /** The last alias of this page when there is a next one. */
  next: string | null
}

/**
 * Key aliases (docs/keys.md "Key aliases"): created, listed, moved to another key of the same
 * type, deleted; each change audited (`keys.alias_create`, `keys.alias_move`,
 * `keys.alias_delete`, with the key ids before and after) and dropped from the key caches of every
 * process (the invalidation bus) before the request is answered. A caller whose API key is
 * restricted to keys sees and changes the aliases of those keys only (403 key_not_allowed).
 */
export interface AliasService {
  create(actor: Actor, input: { alias: string; keyId: string }): Promise<AliasView>
  list(actor: Actor, request: AliasListRequest): Promise<AliasListResult>
  get(actor: Actor, alias: string): Promise<AliasView>
  move(actor: Actor, alias: string, input: { keyId: string }): Promise<AliasView>
  delete(actor: Actor, alias: string): Promise<void>
}

const toView = (row: AliasRow): AliasView => ({
  alias: row.alias,
  keyId: row.key_id,
  createdAt: row.created_at.toISOString(),
  updatedAt: row.updated_at.toISOString(),
})

const aliasNotFound = () => notFound('alias_not_found', 'Alias')
/** States a key may take an alias in: any but Destroyed (its aliases went with it). */
const ALIASABLE_STATES = ['Active', 'Expired', 'Revoked', 'Pending Deletion'] as const

export function createAliasService(deps: {
  sql: Sql
  audit: AuditLog
  clock: Clock
  keyCache: Pick<KeyCache, 'invalidateTenant'>
}): AliasService {
  const { sql, audit, clock } = deps

  /** The key an alias is to name, locked for the rest of the transaction; 409 unless it can take one more. */
  async function lockTarget(tx: Queryable, actor: Actor, keyId: string, now: Date): Promise<KeyRow> {
    const key = await getKey(tx, actor.tenantId, keyId, 'for update')
    if (!key) throw notFound('key_not_found', 'Key')
    requireState(keyState(key, now), ALIASABLE_STATES, 'take an alias')
    if ((await countAliasesOfKey(tx, actor.tenantId, key.id)) >= MAX_ALIASES_PER_KEY) {
      throw new AppError(409, 'too_many_aliases', `A key carries at most ${MAX_ALIASES_PER_KEY} aliases`, {
        limit: MAX_ALIASES_PER_KEY,
      })
    }
    return key
  }

  /** The alias, locked, which the caller may see (the key it names is one it may use). */
  async function lockAlias(tx: Queryable, actor: Actor, alias: string): Promise<AliasRow> {
    const row = await getAlias(tx, actor.tenantId, alias, 'for update')
    if (!row) throw actor.keyRestriction?.keys ? keyNotAllowed() : aliasNotFound()
    await requireKeyAllowed(tx, actor, row.key_id)
    return row
  }

  async function changed(actor: Actor): Promise<void> {
    await deps.keyCache.invalidateTenant(actor.tenantId)
  }

  async function get(actor: Actor, alias: string): Promise<AliasView> {
    const row = await getAlias(sql, actor.tenantId, alias)
    if (!row) throw actor.keyRestriction?.keys ? keyNotAllowed() : aliasNotFound()
    await requireKeyAllowed(sql, actor, row.key_id)
    return toView(row)
  }

  return {
    async create(actor, input) {
      if (isReservedAlias(input.alias)) {
        throw new AppError(
          400,
          'alias_reserved',
          `Aliases under ${RESERVED_ALIAS_PREFIX} are reserved for the service`,
        )
      }
      const target = await resolveKeyRef(sql, actor, input.keyId)
      const now = clock.now()
      try {
        const row = await sql.begin(async (tx) => {
          const key = await lockTarget(tx, actor, target.id, now)
          const inserted = await insertAlias(tx, {
            tenant_id: actor.tenantId,
            alias: input.alias,
            key_id: key.id,
            created_at: now,
            created_by: actor.actor,
            updated_at: now,
          })
          await audit.recordInTransaction(tx, {
            ...actor,
            action: 'keys.alias_create',
            resource: `key:${key.id}`,
            outcome: 'success',
            details: { alias: input.alias, keyId: key.id },
          })
          return inserted
        })
        await changed(actor)
        return toView(row)
      } catch (error) {
        if (isUniqueViolation(error, ALIAS_CONSTRAINT)) {
          throw new AppError(409, 'alias_exists', `The tenant already has the alias ${input.alias}`)
        }
        throw error
      }
    },

    async list(actor, request) {
      const keyIds = request.keyId
        ? [(await resolveKeyRef(sql, actor, request.keyId)).id]
        : await allowedKeyIds(sql, actor)
      const rows =
        keyIds?.length === 0
          ? []
          : await listAliases(sql, actor.tenantId, { keyIds, after: request.after, limit: request.limit })
      const page = rows.slice(0, request.limit)
      return {
        data: page.map(toView),
        next: rows.length > request.limit ? (page.at(-1)?.alias ?? null) : null,
      }
    },

    get,

    async move(actor, alias, input) {
      const target = await resolveKeyRef(sql, actor, input.keyId)
      const now = clock.now()
      const moved = await sql.begin(async (tx) => {
        const current = await lockAlias(tx, actor, alias)
        if (current.key_id === target.id) return null
        // Both keys locked, in id order (two moves in opposite directions cannot deadlock).
        const [first, second] = [current.key_id, target.id].sort()
        const locked = new Map<string, KeyRow>()
        for (const id of [first!, second!]) {
          const key =
            id === target.id
              ? await lockTarget(tx, actor, id, now)
              : await getKey(tx, actor.tenantId, id, 'for update')
          if (key) locked.set(id, key)
        }
        const from = locked.get(current.key_id)
        const to = locked.get(target.id)!
        // Callers that encrypt under the alias must not find a signing key behind it tomorrow.
        if (from && from.key_type !== to.key_type) {
          throw new AppError(
            400,
            'key_type_mismatch',
            `The alias names a key of type ${from.key_type}: it can move only to another ${from.key_type} key, not to a ${to.key_type} key`,
            { keyType: from.key_type },
          )
        }
        const row = await moveAlias(tx, actor.tenantId, alias, to.id, now)
        await audit.recordInTransaction(tx, {
          ...actor,
          action: 'keys.alias_move',
          resource: `key:${to.id}`,
          outcome: 'success',
          details: { alias, previousKeyId: current.key_id, keyId: to.id },
        })
        return row
      })
      // Already there: nothing changed, nothing recorded.
      if (!moved) return get(actor, alias)
      await changed(actor)
      return toView(moved)
    },

    async delete(actor, alias) {
      await sql.begin(async (tx) => {
        const current = await lockAlias(tx, actor, alias)
        await deleteAlias(tx, actor.tenantId, alias)
        await audit.recordInTransaction(tx, {
          ...actor,
          action: 'keys.alias_delete',
          resource: `key:${current.key_id}`,
          outcome: 'success',
          details: { alias, previousKeyId: current.key_id },
        })
      })
      await changed(actor)
    },
  }
}
