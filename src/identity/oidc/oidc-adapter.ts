import type { Adapter, AdapterFactory, AdapterPayload } from 'oidc-provider'
import type { Sql } from '../../data/database.ts'
import { consumeModel, destroyByGrant, destroyModel, findModel, upsertModel } from './oidc-store.ts'

/**
 * oidc-provider's storage in PostgreSQL: one row per model instance (sessions, interactions,
 * codes, tokens, grants), JSONB payload, expiry (expired rows read as absent and are swept by the
 * job process). Clients are not stored here: the console is configured, tenants' applications
 * come from their own table on every lookup (the provider keeps a parsed client per distinct
 * metadata, so a changed application is a new client at once, in every process). Destroying a grant tells every process (`onGrantRevoked`), so an
 * access token of that grant stops working everywhere at once.
 */
export function createOidcAdapterFactory(deps: {
  sql: Sql
  onGrantRevoked: (grantId: string) => Promise<void>
  /** A tenant's application as client metadata, read from its table on every lookup. */
  findClient: (clientId: string) => Promise<AdapterPayload | undefined>
}): AdapterFactory {
  const { sql } = deps
  return (model: string): Adapter => ({
    async upsert(id, payload, expiresIn) {
      const expiresAt = expiresIn ? new Date(Date.now() + expiresIn * 1000) : null
      await upsertModel(sql, { model, id, payload: payload as Record<string, unknown>, expiresAt })
    },
    async find(id) {
      if (model === 'Client') return deps.findClient(id)
      return toPayload(await findModel(sql, model, 'id', id))
    },
    async findByUid(uid) {
      return toPayload(await findModel(sql, model, 'uid', uid))
    },
    async findByUserCode(userCode) {
      return toPayload(await findModel(sql, model, 'user_code', userCode))
    },
    async consume(id) {
      await consumeModel(sql, model, id)
    },
    async destroy(id) {
      await destroyModel(sql, model, id)
      if (model === 'Grant') await deps.onGrantRevoked(id)
    },
    async revokeByGrantId(grantId) {
      await destroyByGrant(sql, grantId)
      await deps.onGrantRevoked(grantId)
    },
  })
}

function toPayload(
  row: { payload: Record<string, unknown>; consumed_at: Date | null } | undefined,
): AdapterPayload | undefined {
  if (!row) return undefined
  const payload = row.payload as AdapterPayload
  return row.consumed_at ? { ...payload, consumed: Math.floor(row.consumed_at.getTime() / 1000) } : payload
}
