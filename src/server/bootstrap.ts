import { randomBytes } from 'node:crypto'
import { chmodSync, mkdirSync, renameSync, rmSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import type { Logger } from 'pino'
import type { Authenticator } from '../api-keys/api-key-authenticator.ts'
import { createApiKeyService } from '../api-keys/api-key-service.ts'
import { createAuditLog } from '../audit/audit-log.ts'
import { ConfigError } from '../config.ts'
import type { Sql } from '../data/database.ts'
import type { InvalidationBus } from '../data/invalidation-bus.ts'
import { migrate } from '../data/migrations.ts'
import { createAccountService } from '../identity/accounts/account-service.ts'
import type { MasterKeyring } from '../keyring/master-key.ts'
import { systemClock } from '../platform/clock.ts'
import { createTeamService } from '../team/team-service.ts'
import { createTenantService } from '../tenants/tenant-service.ts'
import { countTenants } from '../tenants/tenant-store.ts'

const BOOTSTRAP_LOCK_ID = 7_301_952_211

/** Nothing to invalidate when the first key is created: no process has cached anything yet. */
const noCache: Authenticator = { authenticate: async () => undefined, invalidate: async () => {} }
const noBus: InvalidationBus = {
  publish: async () => {},
  subscribe: () => {},
  onResync: () => {},
  close: async () => {},
}

/** The first owner's address when KMS_BOOTSTRAP_OWNER_EMAIL does not name one. */
const DEFAULT_OWNER_EMAIL = 'owner@example.com'

export interface BootstrapOptions {
  /** Create the tenant `default` when the database has none. */
  bootstrap: boolean
  /** Where its full-scope key is written, mode 0600. Absent: the key goes to `print` alone. */
  keyFile?: string
  /**
   * The owner account made with it (so a person can sign in): its address, and where its
   * generated password is written (mode 0600, beside the key file unless told).
   */
  ownerEmail?: string
  ownerFile?: string
  /**
   * The operator's terminal, or nothing: the caller passes a writer only when stdout is a TTY.
   * Never the log stream, which is collected, shipped and kept where a key must not be.
   */
  print: (text: string) => void
}

/**
 * Runs once per start, before any API process: migrations, then on an empty database (when
 * bootstrapping is on) a default tenant whose full-scope API key is handed over once, to a file
 * only its owner can read and to the terminal if there is one; it is stored only as a hash.
 */
export async function prepareDatabase(
  deps: { sql: Sql; masterKeys: MasterKeyring; logger: Logger },
  options: BootstrapOptions,
): Promise<void> {
  const applied = await migrate(deps.sql)
  for (const m of applied) deps.logger.info({ migration: `${m.version}_${m.name}` }, 'migration applied')
  if (!options.bootstrap) {
    if ((await countTenants(deps.sql)) === 0) {
      deps.logger.info(
        'The database has no tenant and KMS_BOOTSTRAP is off: create one with `npm run kms-admin -- create-tenant --name NAME`',
      )
    }
    return
  }

  const audit = createAuditLog({ sql: deps.sql, logger: deps.logger, timeoutMs: 10_000 })
  const apiKeys = createApiKeyService({ sql: deps.sql, audit, authenticator: noCache })
  // The lock makes "empty?" and "create" one step when several instances start at once.
  const tenants = createTenantService({ sql: deps.sql, masterKeys: deps.masterKeys, apiKeys, audit })
  const accounts = createAccountService({ sql: deps.sql, masterKeys: deps.masterKeys, clock: systemClock })
  const team = createTeamService({
    sql: deps.sql,
    audit,
    accounts,
    tenants,
    masterKeys: deps.masterKeys,
    bus: noBus,
    clock: systemClock,
    linkBase: () => '',
    cacheTtlMs: 0,
  })
  const ownerEmail = options.ownerEmail ?? DEFAULT_OWNER_EMAIL
  const ownerPassword = randomBytes(15).toString('base64url')
  const ownerFile =
    options.ownerFile ?? (options.keyFile ? join(dirname(options.keyFile), 'bootstrap-owner') : undefined)
  // Read before the transaction: the embedded database has a single connection.
  const existing = await accounts.findTeamAccount(ownerEmail)
  const created = await deps.sql.begin(async (tx) => {
    await tx`SELECT pg_advisory_xact_lock(${BOOTSTRAP_LOCK_ID})`
    if ((await countTenants(tx)) > 0) return undefined
    const made = await tenants.create({ name: 'default', actor: 'system' }, tx)
    // The owner account, unless the address already has one; either way it becomes the owner.
    const owner =
      existing ??
      (await accounts.createTeamAccount(
        { email: ownerEmail, password: ownerPassword, displayName: 'Owner' },
        tx,
      ))
    await team.addMember(
      { tenantId: made.tenant.id, actor: 'system', requestId: null, clientIp: null },
      { accountId: owner.id, role: 'tenant:owner' },
      tx,
    )
    // Before the commit: credentials that cannot be handed over must not exist.
    if (options.keyFile) writeKeyFile(options.keyFile, made.apiKey.key)
    if (ownerFile && !existing) writeKeyFile(ownerFile, `${ownerEmail}\n${ownerPassword}`)
    return { ...made, ownerId: owner.id, ownerCreated: !existing }
  })
  if (!created) return
  deps.logger.warn(
    {
      tenantId: created.tenant.id,
      apiKeyId: created.apiKey.id,
      keyFile: options.keyFile ?? null,
      ownerAccountId: created.ownerId,
      ownerFile: ownerFile ?? null,
    },
    options.keyFile
      ? `Empty database: created the tenant "default". Its full-scope API key is in ${options.keyFile} ` +
          '(mode 0600, shown nowhere else): read it, keep it safe, then delete the file'
      : 'Empty database: created the tenant "default"',
  )
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
      ' or `npm run kms-admin -- create-api-key`.',
      '',
      ...(created.ownerCreated
        ? [
            ' Its owner, who signs in to the console (/console/, docs/console.md) through the',
            ' OpenID provider (docs/identity.md):',
            `   e-mail:   ${ownerEmail}`,
            `   password: ${ownerPassword}`,
            ' Change it with `npm run kms-admin -- reset-member-password`.',
          ]
        : [` Its owner is the existing account ${ownerEmail}.`]),
      rule,
      '',
    ].join('\n'),
  )
}

/** Owner-only from the first byte: written to a fresh temporary file with mode 0600, then renamed. */
function writeKeyFile(path: string, key: string): void {
  // (Also the owner's credentials file: the same rules.)
  try {
    mkdirSync(dirname(path), { recursive: true, mode: 0o700 })
    const tmp = `${path}.${process.pid}.tmp`
    rmSync(tmp, { force: true })
    writeFileSync(tmp, `${key}\n`, { mode: 0o600, flag: 'wx' })
    chmodSync(tmp, 0o600)
    renameSync(tmp, path)
  } catch (err) {
    const code = (err as { code?: string }).code ?? 'error'
    throw new ConfigError(
      `cannot write the bootstrap API key to ${path} (${code}): set KMS_BOOTSTRAP_KEY_FILE to a writable path`,
    )
  }
}
