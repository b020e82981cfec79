import { randomUUID } from 'node:crypto'
import type { ApiKeyService, ApiKeyView } from '../api-keys/api-key-service.ts'
import type { AuditLog } from '../audit/audit-log.ts'
import { SCOPES, type Scope } from '../auth/scopes.ts'
import type { Sql, Tx } from '../data/database.ts'
import type { InvalidationBus } from '../data/invalidation-bus.ts'
import { createReadThroughCache } from '../data/read-through-cache.ts'
import type { MasterKeyring } from '../keyring/master-key.ts'
import { createWrappedKek } from '../keyring/tenant-kek.ts'
import { AppError, invalidField, isUniqueViolation } from '../platform/errors.ts'
import { isUuid } from '../platform/ids.ts'
import { getTenant, insertTenant, listTenants as listTenantRows, type TenantRow } from './tenant-store.ts'

interface CreatedTenant {
  tenant: TenantRow
  apiKey: ApiKeyView & { key: string }
}

/** The unique index of migration 0006: names compare case-insensitively. */
const NAME_INDEX = 'tenants_name_unique_idx'
const MAX_NAME_LENGTH = 200

const tenantNameTaken = (name: string) =>
  new AppError(409, 'tenant_name_taken', `A tenant named "${name}" already exists (names ignore case)`, {
    name,
  })

/** Names are labels for people: printable, no surrounding spaces, at most 200 characters. */
function checkName(name: string): void {
  if (name.length === 0 || name.length > MAX_NAME_LENGTH)
    throw invalidField('name', `must be 1 to ${MAX_NAME_LENGTH} characters`)
  if (name.trim() !== name) throw invalidField('name', 'must not start or end with white space')
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what is refused
  if (/[\u0000-\u001f\u007f]/.test(name)) throw invalidField('name', 'must not contain control characters')
}

/**
 * A tenant is born with its KEK and one API key (full scope unless told otherwise), in one
 * transaction with their audit records: there is never a tenant nobody can reach. Names are
 * unique ignoring case (`tenant_name_taken`, 409).
 */
async function createTenantRow(
  deps: { sql: Sql; masterKeys: MasterKeyring; apiKeys: ApiKeyService; audit: AuditLog },
  input: { name: string; actor: string; scopes?: readonly Scope[] },
  withKey: boolean,
  inTransaction?: Tx,
): Promise<{ tenant: TenantRow; apiKey: CreatedTenant['apiKey'] | null }> {
  type Created = { tenant: TenantRow; apiKey: CreatedTenant['apiKey'] | null }
  checkName(input.name)
  const id = randomUUID()
  const kek = createWrappedKek(id, deps.masterKeys)
  const run = async (tx: Tx): Promise<Created> => {
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
    if (!withKey) return { tenant, apiKey: null }
    const { view, key } = await deps.apiKeys.create(
      actor,
      { name: 'initial full-scope key', scopes: input.scopes ?? SCOPES },
      tx,
    )
    return { tenant, apiKey: { ...view, key } }
  }
  try {
    return await (inTransaction ? run(inTransaction) : deps.sql.begin(run))
  } catch (err) {
    // The index decides, not a prior SELECT: two concurrent creations of one name cannot both win.
    if (isUniqueViolation(err, NAME_INDEX)) throw tenantNameTaken(input.name)
    throw err
  }
}

export interface TenantView {
  id: string
  name: string
  createdAt: string
}

export const toTenantView = (row: TenantRow): TenantView => ({
  id: row.id,
  name: row.name,
  createdAt: row.created_at.toISOString(),
})

const TENANT_INVALIDATION_TOPIC = 'tenant'

export interface TenantService {
  /** A tenant with its KEK and one API key (full scope unless told otherwise). 409 `tenant_name_taken`. */
  create(input: { name: string; actor: string; scopes?: readonly Scope[] }, tx?: Tx): Promise<CreatedTenant>
  /**
   * A tenant with its KEK and no API key, in the caller's transaction: self-service sign-up
   * (src/signup), whose owner membership, made in the same transaction, is how it is reached.
   * Call `created` after commit. 409 `tenant_name_taken`.
   */
  createForOwner(input: { name: string; actor: string }, tx: Tx): Promise<TenantView>
  /** After the commit of `createForOwner`: every process forgets what it cached of this id. */
  created(id: string): Promise<void>
  /**
   * The tenant as this process last read it: cached, unknown ids too (they arrive in tokens and
   * paths chosen by callers), dropped in every process over the invalidation bus on a change.
   */
  get(id: string): Promise<TenantView | undefined>
  /** Every tenant, oldest first, in the `{data, total}` shape of the API's lists. */
  list(): Promise<{ data: TenantView[]; total: number }>
}

/**
 * One tenant service for the API processes, the CLI and the bootstrap. The CLI and bootstrap pass
 * no bus: they read once and exit, so they get no cache.
 */
export function createTenantService(deps: {
  sql: Sql
  masterKeys: MasterKeyring
  apiKeys: ApiKeyService
  audit: AuditLog
  cache?: { bus: InvalidationBus; ttlMs: number; now?: () => number }
}): TenantService {
  const cache = deps.cache
    ? createReadThroughCache<TenantView | null>({
        ttlMs: deps.cache.ttlMs,
        maxEntries: 20_000,
        ...(deps.cache.now ? { now: deps.cache.now } : {}),
      })
    : undefined
  if (cache && deps.cache) {
    deps.cache.bus.subscribe(TENANT_INVALIDATION_TOPIC, (id) => cache.dropGroup(id))
    deps.cache.bus.onResync(() => cache.clear())
  }
  const load = async (id: string) => {
    const row = await getTenant(deps.sql, id)
    return row ? toTenantView(row) : null
  }
  return {
    async create(input, tx) {
      const { tenant, apiKey } = await createTenantRow(deps, input, true, tx)
      // A negative entry for this id may exist in some process (a token or path named it first).
      if (deps.cache && !tx) await deps.cache.bus.publish(TENANT_INVALIDATION_TOPIC, tenant.id)
      return { tenant, apiKey: apiKey! }
    },
    async createForOwner(input, tx) {
      return toTenantView((await createTenantRow(deps, input, false, tx)).tenant)
    },
    async created(id) {
      if (deps.cache) await deps.cache.bus.publish(TENANT_INVALIDATION_TOPIC, id)
    },
    async get(id) {
      if (!isUuid(id)) return undefined
      const view = cache ? await cache.get(id, '', () => load(id)) : await load(id)
      return view ?? undefined
    },
    async list() {
      const data = (await listTenantRows(deps.sql)).map(toTenantView)
      return { data, total: data.length }
    },
  }
}
