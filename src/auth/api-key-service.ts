import { randomUUID } from 'node:crypto'
import type { AuditLog } from '../audit/audit-log.ts'
import type { Queryable, Sql } from '../platform/database.ts'
import { AppError, notFound } from '../platform/errors.ts'
import { generateApiKey } from './api-key-format.ts'
import { type ApiKeyRow, getApiKey, insertApiKey, listApiKeys, revokeApiKey } from './api-key-store.ts'
import type { Authenticator } from './authenticator.ts'
import type { Actor } from './request-context.ts'
import type { Scope } from './scopes.ts'

export interface ApiKeyView {
  id: string
  name: string
  scopes: string[]
  /** The first characters of the key, enough to recognise it in a list. */
  prefix: string
  createdAt: string
  createdBy: string
  expiresAt: string | null
  revokedAt: string | null
}

export function toApiKeyView(row: ApiKeyRow): ApiKeyView {
  return {
    id: row.id,
    name: row.name,
    scopes: row.scopes,
    prefix: `kms_${row.lookup_id.slice(0, 6)}`,
    createdAt: row.created_at.toISOString(),
    createdBy: row.created_by,
    expiresAt: row.expires_at?.toISOString() ?? null,
    revokedAt: row.revoked_at?.toISOString() ?? null,
  }
}

export interface CreateApiKeyInput {
  name: string
  scopes: readonly Scope[]
  expiresAt?: Date | null
}

export interface ApiKeyService {
  /** Creates the key inside `tx` when given (tenant creation), else in its own transaction. */
  create(actor: Actor, input: CreateApiKeyInput, tx?: Queryable): Promise<{ view: ApiKeyView; key: string }>
  list(
    tenantId: string,
    page: { limit: number; offset: number; includeRevoked: boolean },
  ): Promise<{ data: ApiKeyView[]; total: number }>
  get(tenantId: string, id: string): Promise<ApiKeyView>
  revoke(actor: Actor, id: string): Promise<ApiKeyView>
}

export function createApiKeyService(deps: {
  sql: Sql
  audit: AuditLog
  authenticator: Authenticator
}): ApiKeyService {
  async function insertWithAudit(db: Queryable, actor: Actor, input: CreateApiKeyInput) {
    if (input.expiresAt && input.expiresAt.getTime() <= Date.now()) {
      throw new AppError(400, 'validation_failed', 'expiresAt must be in the future')
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
    })
    await deps.audit.recordInTransaction(db, {
      ...actor,
      action: 'apikeys.create',
      resource: `apikey:${row.id}`,
      outcome: 'success',
      details: { scopes: row.scopes.join(' ') },
    })
    return { view: toApiKeyView(row), key: generated.key }
  }

  return {
    create(actor, input, tx) {
      if (tx) return insertWithAudit(tx, actor, input)
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
    async revoke(actor, id) {
      const result = await deps.sql.begin(async (tx) => {
        const revoked = await revokeApiKey(tx, actor.tenantId, id)
        if (!revoked) throw notFound('api_key_not_found', 'API key')
        if (revoked.changed) {
          await deps.audit.recordInTransaction(tx, {
            ...actor,
            action: 'apikeys.revoke',
            resource: `apikey:${id}`,
            outcome: 'success',
          })
        }
        return revoked.row
      })
      await deps.authenticator.invalidate(result.lookup_id)
      return toApiKeyView(result)
    },
  }
}
