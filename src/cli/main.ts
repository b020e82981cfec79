import { randomBytes } from 'node:crypto'
import { parseArgs } from 'node:util'
import type { Logger } from 'pino'
import { isTenantRole, TENANT_ROLES } from '../auth/roles.ts'
import { isScope, SCOPES, type Scope } from '../auth/scopes.ts'
import { type Config, ConfigError, loadConfig } from '../config.ts'
import { connectDatabase, type Sql } from '../data/database.ts'
import { runningEmbeddedPostgres, startEmbeddedPostgres } from '../data/embedded-postgres.ts'
import { migrate } from '../data/migrations.ts'
import {
  defaultKeyFilePath,
  generateMasterKey,
  keyringFromRaw,
  readKeyFile,
  writeKeyFile,
} from '../keyring/master-key.ts'
import { AppError } from '../platform/errors.ts'
import { isUuid } from '../platform/ids.ts'
import { createLogger } from '../platform/logger.ts'
import { createServices, type Services } from '../server/compose.ts'
import { describeStartupFailure } from '../server/startup-failure.ts'
import { toTenantView } from '../tenants/tenant-service.ts'
import { rewrapSealed, unreadableMessage } from './master-key-rotation.ts'

/**
 * `npm run kms-admin -- <command>`: operator commands. Results go to stdout as JSON (lists as
 * `{data, total}`, like the API's), progress and errors to stderr. Exit codes: 0 done, 1 the
 * command failed (one line on stderr saying why), 2 the command line (one line, then the usage)
 * or a setting (one line) is wrong.
 */
const USAGE = `Usage: npm run kms-admin -- <command> [options]

Commands:
  create-tenant --name NAME [--scopes s1,s2]     Create a tenant and its first API key (full scope by default);
                                                 names are unique, ignoring case
  list-tenants                                   List tenants
  help                                           Show this text
  create-api-key --tenant ID --name NAME --scopes s1,s2 [--expires-at ISO]
  list-api-keys --tenant ID [--include-revoked]
  revoke-api-key --tenant ID --id KEY_ID         Revoke; every running process stops accepting it within 1 s
  generate-master-key                            Print a new random master key (base64)
  rotate-master-key                              Re-wrap everything sealed under the master key (tenant KEKs,
                                                 signing keys, client and webhook secrets, ...) under a new
                                                 one (see docs/operations.md)
  migrate                                        Apply pending database migrations
  create-member --tenant ID --email EMAIL --role ROLE
                                                 Make a person a team member (creating their account with a
                                                 generated password, printed once, if they have none)
  reset-member-password --email EMAIL [--reset-totp]
                                                 Give a team account a new generated password (printed once)
                                                 and end all its sessions and tokens, in every running
                                                 process within 1 s; --reset-totp also removes its authenticator
  rotate-id-signing-key                          New version of the key that signs ID and access tokens
  set-plan --tenant ID --plan PLAN               Move a tenant to another billing plan (free, pro, enterprise
                                                 by default; see docs/billing.md)
  issue-invoices [--period YYYY-MM]              Issue the invoices of a month that has ended (default: last
                                                 month); invoices that exist are left as they are
  mark-invoice-paid --id INVOICE_ID              Mark an open invoice paid
  create-partner --name NAME --email EMAIL       Create a partner of the partner programme
  create-partner-key --partner ID --name NAME    A partner API key (kmsp_…), printed once
  list-partners [--status STATUS]                Partners (pending, active, suspended, rejected)
  approve-partner --partner ID                   Approve a partner who signed up (pending → active)
  reject-partner --partner ID                    Reject a partner who signed up (pending → rejected)
  calculate-commissions [--period YYYY-MM]       Partners' commissions of a month that has ended (default:
                                                 last month), once per referral
  record-payout --partner ID --period YYYY-MM    Mark a partner's commissions of a month paid

Scopes: ${SCOPES.join(', ')}
Roles: ${TENANT_ROLES.join(', ')}`

class UsageError extends Error {}

/** Longer than any tenant creation takes between reading the primary key and committing. */
const STRAGGLER_WAIT_MS = 2000

function required(values: Record<string, unknown>, name: string): string {
  const value = values[name]
  if (typeof value !== 'string' || value.length === 0) throw new UsageError(`--${name} is required`)
  return value
}

function requiredId(values: Record<string, unknown>, name: string): string {
  const value = required(values, name)
  if (!isUuid(value)) throw new UsageError(`--${name} must be a UUID, got "${value}"`)
  return value
}

function parseScopes(raw: string | undefined): Scope[] | undefined {
  if (raw === undefined) return undefined
  const scopes = raw.split(',').map((s) => s.trim())
  const unknown = scopes.filter((s) => !isScope(s))
  if (unknown.length > 0) throw new UsageError(`unknown scope(s): ${unknown.join(', ')}`)
  return scopes as Scope[]
}

/** A generated password, shown once to the operator (never taken from the command line, where `ps` shows it). */
const newPassword = () => randomBytes(15).toString('base64url')

const print = (value: unknown) => process.stdout.write(`${JSON.stringify(value, null, 2)}\n`)
const progress = (text: string) => process.stderr.write(`${text}\n`)

interface Database {
  url: string
  /** A small connection of the CLI's own, for migrations before the services start. */
  sql: Sql
  close(): Promise<void>
}

/** The configured database, else the embedded one: through the running service's socket, or opened here. */
async function openDatabase(config: Config): Promise<Database> {
  const connect = (url: string) =>
    connectDatabase({ url, poolSize: 1, statementTimeoutMs: 60_000, applicationName: 'kms-cli' })
  const existing = config.databaseUrl ?? (await runningEmbeddedPostgres(config.dataDir))
  if (existing) {
    const sql = connect(existing)
    return { url: existing, sql, close: () => sql.end({ timeout: 5 }) }
  }
  const embedded = await startEmbeddedPostgres(config.dataDir)
  const sql = connect(embedded.url)
  return {
    url: embedded.url,
    sql,
    async close() {
      await sql.end({ timeout: 5 })
      await embedded.stop()
    },
  }
}

/** The same components an API process has (src/server/compose.ts), on the CLI's database. */
async function withServices<T>(
  config: Config,
  logger: Logger,
  run: (services: Services) => Promise<T>,
): Promise<T> {
  const db = await openDatabase(config)
  try {
    await migrate(db.sql)
    // The embedded database takes one connection per client.
    const services = await createServices({ ...config, databasePoolSize: 1 }, logger, db.url, 'cli')
    try {
      return await run(services)
    } finally {
      await services.close()
    }
  } finally {
    await db.close()
  }
}

const cliActor = (tenantId: string) => ({ tenantId, actor: 'cli', requestId: null, clientIp: null })

/**
 * Re-wraps everything sealed under the master keyring (master-key-rotation.ts lists the owners),
 * then, for a key file, drops the old keys. Items no key given here opens are reported and make
 * the command fail (exit 1) once everything else is done.
 */
async function rotateMasterKey(config: Config, logger: Logger): Promise<void> {
  if (config.masterKey) {
    // Environment-configured: the operator already set KMS_MASTER_KEY to the new key and
    // KMS_MASTER_KEY_PREVIOUS to the old one(s); every process can unwrap both during the run.
    await withServices(config, logger, async (services) => {
      const summary = await rewrapSealed(services, services.masterKeys, progress)
      print({
        masterKeyId: services.masterKeys.primary.id,
        rewrapped: summary.rewrapped,
        unreadable: summary.unreadable,
      })
      if (summary.unreadable > 0) throw new Error(unreadableMessage(summary))
    })
    return
  }
  const path = config.masterKeyFile ?? defaultKeyFilePath(config.dataDir)
  const old = readKeyFile(path)
  const fresh = generateMasterKey()
  // 1. The new key goes first in the file, the old ones stay: running processes re-read the file
  //    when they meet the new key id (or need the primary), and can still open what is not yet
  //    re-wrapped.
  writeKeyFile(path, [fresh, ...old])
  progress(`added a new primary master key to ${path}`)
  await withServices(config, logger, async (services) => {
    const keyring = keyringFromRaw([fresh, ...old])
    const first = await rewrapSealed(services, keyring, progress)
    // 2. Something sealed by a process that read the primary key before step 1 and stored it
    //    after the pass above read its rows is still under an old key: a second pass, once no
    //    process can still be holding the old primary, moves it.
    await new Promise((resolve) => setTimeout(resolve, STRAGGLER_WAIT_MS))
    const stragglers = await rewrapSealed(services, keyring, progress)
    // 3. Nothing an old key opens is left under it: the old keys can go. (What none of them
    //    opens is no worse off without them.)
    writeKeyFile(path, [fresh])
    progress('removed the retired master key(s) from the key file')
    print({
      masterKeyId: keyring.primary.id,
      rewrapped: first.rewrapped + stragglers.rewrapped,
      unreadable: stragglers.unreadable,
      keyFile: path,
    })
    if (stragglers.unreadable > 0) throw new Error(unreadableMessage(stragglers))
  })
}

export async function runCli(argv: string[]): Promise<void> {
  const [command, ...rest] = argv
  if (command === 'help' || command === '--help' || command === '-h') {
    process.stdout.write(`${USAGE}\n`)
    return
  }
  // No command is a mistake, not a request for help: scripts must not mistake it for success.
  if (command === undefined) throw new UsageError('no command given')
  const { values } = parseArgs({
    args: rest,
    options: {
      name: { type: 'string' },
      tenant: { type: 'string' },
      scopes: { type: 'string' },
      id: { type: 'string' },
      'expires-at': { type: 'string' },
      'include-revoked': { type: 'boolean', default: false },
      email: { type: 'string' },
      role: { type: 'string' },
      'reset-totp': { type: 'boolean', default: false },
      plan: { type: 'string' },
      period: { type: 'string' },
      partner: { type: 'string' },
      status: { type: 'string' },
    },
    strict: true,
  })
  const config = loadConfig()
  // Logs go to stderr so stdout stays machine-readable.
  const logger = createLogger(process.env['LOG_LEVEL'] ?? 'warn', 'kms-cli', 2)

  switch (command) {
    case 'create-tenant': {
      const name = required(values, 'name')
      const scopes = parseScopes(values.scopes)
      await withServices(config, logger, async (deps) => {
        const created = await deps.tenants.create({ name, actor: 'cli', ...(scopes ? { scopes } : {}) })
        print({
          tenantId: created.tenant.id,
          name: created.tenant.name,
          createdAt: toTenantView(created.tenant).createdAt,
          apiKey: { id: created.apiKey.id, key: created.apiKey.key, scopes: created.apiKey.scopes },
        })
      })
      return
    }
    case 'list-tenants':
      await withServices(config, logger, async ({ tenants }) => {
        print(await tenants.list())
      })
      return
    case 'create-api-key': {
      const tenantId = requiredId(values, 'tenant')
      const name = required(values, 'name')
      const scopes = parseScopes(required(values, 'scopes'))!
      const expiresRaw = values['expires-at']
      const expiresAt = expiresRaw ? new Date(expiresRaw) : null
      if (expiresAt && Number.isNaN(expiresAt.getTime()))
        throw new UsageError('--expires-at is not a timestamp')
      await withServices(config, logger, async ({ apiKeys }) => {
        const { view, key } = await apiKeys.create(cliActor(tenantId), { name, scopes, expiresAt })
        print({ ...view, key })
      })
      return
    }
    case 'list-api-keys': {
      const tenantId = requiredId(values, 'tenant')
      await withServices(config, logger, async ({ apiKeys }) => {
        print(
          await apiKeys.list(tenantId, { limit: 1000, offset: 0, includeRevoked: values['include-revoked'] }),
        )
      })
      return
    }
    case 'revoke-api-key': {
      const tenantId = requiredId(values, 'tenant')
      const id = requiredId(values, 'id')
      await withServices(config, logger, async ({ apiKeys }) =>
        print(await apiKeys.revoke(cliActor(tenantId), id)),
      )
      return
    }
    case 'generate-master-key':
      print({ masterKey: generateMasterKey().toString('base64') })
      return
    case 'rotate-master-key':
      await rotateMasterKey(config, logger)
      return
    case 'create-member': {
      const tenantId = requiredId(values, 'tenant')
      const email = required(values, 'email')
      const role = required(values, 'role')
      if (!isTenantRole(role)) throw new UsageError(`--role must be one of ${TENANT_ROLES.join(', ')}`)
      await withServices(config, logger, async ({ accounts, team, tenants }) => {
        if (!(await tenants.get(tenantId))) throw new Error(`no tenant ${tenantId}`)
        const existing = await accounts.findTeamAccount(email)
        const password = existing ? undefined : newPassword()
        const account = existing ?? (await accounts.createTeamAccount({ email, password: password! }))
        await team.addMember(cliActor(tenantId), { accountId: account.id, role })
        print({
          accountId: account.id,
          email: account.email,
          tenantId,
          role,
          ...(password ? { password } : {}),
        })
      })
      return
    }
    case 'reset-member-password': {
      const email = required(values, 'email')
      await withServices(config, logger, async ({ accounts, identity }) => {
        const account = await accounts.findTeamAccount(email)
        if (!account) throw new Error(`no team account for ${email}`)
        const password = newPassword()
        await accounts.setPassword(account.id, password)
        if (values['reset-totp']) await accounts.resetTotp(account.id)
        // The remedy for a compromised account, with or without --reset-totp: whoever holds its
        // sessions, refresh or access tokens loses them, and every running process forgets its
        // grants over the bus (as a reset through the e-mailed link does).
        await identity.endSessionsOf(account.id)
        print({
          accountId: account.id,
          email: account.email,
          password,
          totpReset: values['reset-totp'],
          sessionsEnded: true,
        })
      })
      return
    }
    case 'set-plan': {
      const tenantId = requiredId(values, 'tenant')
      const plan = required(values, 'plan')
      await withServices(config, logger, async ({ billing, tenants }) => {
        if (!(await tenants.get(tenantId))) throw new Error(`no tenant ${tenantId}`)
        print(await billing.changePlan(cliActor(tenantId), plan))
      })
      return
    }
    case 'issue-invoices': {
      const period = values.period
      if (period !== undefined && !/^[0-9]{4}-(0[1-9]|1[0-2])$/.test(period))
        throw new UsageError('--period must be a month as YYYY-MM')
      await withServices(config, logger, async ({ billing }) => print(await billing.issueInvoices(period)))
      return
    }
    case 'mark-invoice-paid': {
      const id = requiredId(values, 'id')
      await withServices(config, logger, async ({ billing }) => print(await billing.markPaid(id, 'cli')))
      return
    }
    case 'create-partner': {
      const name = required(values, 'name')
      const email = required(values, 'email')
      await withServices(config, logger, async ({ partners }) =>
        print(await partners.createPartner({ name, email }, 'cli')),
      )
      return
    }
    case 'create-partner-key': {
      const partnerId = requiredId(values, 'partner')
      const name = required(values, 'name')
      await withServices(config, logger, async ({ partners }) =>
        print({ partnerId, ...(await partners.createKey(partnerId, name, 'cli')) }),
      )
      return
    }
    case 'list-partners': {
      const status = values.status
      const statuses = ['pending', 'active', 'suspended', 'rejected'] as const
      if (status !== undefined && !(statuses as readonly string[]).includes(status))
        throw new UsageError(`--status must be one of ${statuses.join(', ')}`)
      await withServices(config, logger, async ({ partners }) => {
        const list = await partners.list(status as (typeof statuses)[number] | undefined)
        print({ data: list, total: list.length })
      })
      return
    }
    case 'approve-partner':
    case 'reject-partner': {
      const partnerId = requiredId(values, 'partner')
      const decision = command === 'approve-partner' ? 'approve' : 'reject'
      await withServices(config, logger, async ({ partners }) =>
        print(await partners.decide(partnerId, decision, 'cli')),
      )
      return
    }
    case 'calculate-commissions': {
      const period = values.period
      if (period !== undefined && !/^[0-9]{4}-(0[1-9]|1[0-2])$/.test(period))
        throw new UsageError('--period must be a month as YYYY-MM')
      await withServices(config, logger, async ({ partners }) =>
        print(await partners.calculateCommissions(period)),
      )
      return
    }
    case 'record-payout': {
      const partnerId = requiredId(values, 'partner')
      const period = required(values, 'period')
      if (!/^[0-9]{4}-(0[1-9]|1[0-2])$/.test(period))
        throw new UsageError('--period must be a month as YYYY-MM')
      await withServices(config, logger, async ({ partners }) =>
        print(await partners.recordPayout(partnerId, period, 'cli')),
      )
      return
    }
    case 'rotate-id-signing-key':
      await withServices(config, logger, async ({ identity }) => {
        print({ version: await identity.signingKeys.rotate() })
      })
      return
    case 'migrate': {
      const db = await openDatabase(config)
      try {
        const applied = await migrate(db.sql)
        print({ applied: applied.map((m) => `${m.version}_${m.name}`) })
      } finally {
        await db.close()
      }
      return
    }
    default:
      throw new UsageError(`unknown command "${command}"`)
  }
}

runCli(process.argv.slice(2)).then(
  () => process.exit(0),
  (err: unknown) => {
    const parseError = (err as { code?: string }).code?.startsWith('ERR_PARSE_ARGS')
    if (err instanceof UsageError || parseError) {
      process.stderr.write(`kms: ${(err as Error).message}\n\n${USAGE}\n`)
      process.exit(2)
    }
    process.stderr.write(`kms: ${failureLine(err)}\n`)
    // A bad setting is wrong input from the operator, like a wrong command line; no usage, though,
    // since the command line was right.
    process.exit(err instanceof ConfigError ? 2 : 1)
  },
)

/** One line: the service's error code and message, or the cause of a failed start, never a stack. */
function failureLine(err: unknown): string {
  if (err instanceof AppError) return `${err.code}: ${err.message}`
  const code = (err as { code?: unknown }).code
  if (code === '23503') return 'no such tenant'
  let databaseUrl: string | undefined
  try {
    databaseUrl = loadConfig().databaseUrl
  } catch {
    databaseUrl = undefined
  }
  return describeStartupFailure(err, { databaseUrl }).message.replace(/^start failed: /, '')
}
