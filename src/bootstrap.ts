import type { Logger } from 'pino'
import { createAuditLog } from './audit/audit-log.ts'
import { createApiKeyService } from './auth/api-key-service.ts'
import type { Authenticator } from './auth/authenticator.ts'
import type { MasterKeyring } from './keyring/master-key.ts'
import type { Sql } from './platform/database.ts'
import { migrate } from './platform/migrations.ts'
import { createTenant } from './tenants/tenant-service.ts'
import { countTenants } from './tenants/tenant-store.ts'

const BOOTSTRAP_LOCK_ID = 7_301_952_211

/** Nothing to invalidate when the first key is created: no process has cached anything yet. */
const noCache: Authenticator = { authenticate: async () => undefined, invalidate: async () => {} }

/**
 * Runs once per start, before any API process: migrations, then on an empty database a default
 * tenant whose full-scope API key is printed once (it is stored only as a hash).
 */
export async function prepareDatabase(
  deps: { sql: Sql; masterKeys: MasterKeyring; logger: Logger },
  options: { bootstrap: boolean; print: (text: string) => void },
): Promise<void> {
  const applied = await migrate(deps.sql)
  for (const m of applied) deps.logger.info({ migration: `${m.version}_${m.name}` }, 'migration applied')
  if (!options.bootstrap) return

  const audit = createAuditLog({ sql: deps.sql, logger: deps.logger, timeoutMs: 10_000 })
  const apiKeys = createApiKeyService({ sql: deps.sql, audit, authenticator: noCache })
  // The lock makes "empty?" and "create" one step when several instances start at once.
  const created = await deps.sql.begin(async (tx) => {
    await tx`SELECT pg_advisory_xact_lock(${BOOTSTRAP_LOCK_ID})`
    if ((await countTenants(tx)) > 0) return undefined
    return createTenant(
      { sql: deps.sql, masterKeys: deps.masterKeys, apiKeys, audit },
      { name: 'default', actor: 'system' },
      tx,
    )
  })
  if (!created) return
  const rule = '='.repeat(78)
  options.print(
    [
      rule,
      ' Empty database: created the tenant "default".',
      ` Tenant id: ${created.tenant.id}`,
      ' Its full-scope API key, shown this once (only a hash is stored):',
      '',
      `   ${created.apiKey.key}`,
      '',
      ' Use it as the X-Api-Key header. Create narrower keys with POST /api/v1/api-keys',
      ' or `npm run kms -- create-api-key`.',
      rule,
      '',
    ].join('\n'),
  )
}
