import { randomUUID } from 'node:crypto'
import type { AuditLog } from '../audit/audit-log.ts'
import type { ApiKeyService, ApiKeyView } from '../auth/api-key-service.ts'
import { SCOPES, type Scope } from '../auth/scopes.ts'
import type { MasterKeyring } from '../keyring/master-key.ts'
import { createWrappedKek } from '../keyring/tenant-kek.ts'
import type { Sql, Tx } from '../platform/database.ts'
import { insertTenant, type TenantRow } from './tenant-store.ts'

export interface CreatedTenant {
  tenant: TenantRow
  apiKey: ApiKeyView & { key: string }
}

/**
 * A tenant is born with its KEK and one API key (full scope unless told otherwise), in one
 * transaction with their audit records: there is never a tenant nobody can reach.
 */
export async function createTenant(
  deps: { sql: Sql; masterKeys: MasterKeyring; apiKeys: ApiKeyService; audit: AuditLog },
  input: { name: string; actor: string; scopes?: readonly Scope[] },
  inTransaction?: Tx,
): Promise<CreatedTenant> {
  const id = randomUUID()
  const kek = createWrappedKek(id, deps.masterKeys)
  const run = async (tx: Tx): Promise<CreatedTenant> => {
    const tenant = await insertTenant(tx, {
      id,
      name: input.name,
      kekWrapped: kek.wrapped,
      kekMasterKeyId: kek.masterKeyId,
    })
    const actor = { tenantId: id, actor: input.actor, requestId: null, clientIp: null }
    await deps.audit.recordInTransaction(tx, {
      ...actor,
      action: 'tenants.create',
      resource: `tenant:${id}`,
      outcome: 'success',
    })
    const { view, key } = await deps.apiKeys.create(
      actor,
      { name: 'initial full-scope key', scopes: input.scopes ?? SCOPES },
      tx,
    )
    return { tenant, apiKey: { ...view, key } }
  }
  return inTransaction ? run(inTransaction) : deps.sql.begin(run)
}
