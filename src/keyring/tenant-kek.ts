import { createSecretKey, type KeyObject, randomBytes } from 'node:crypto'
import type { Queryable, Sql } from '../data/database.ts'
import { AppError } from '../platform/errors.ts'
import { open, seal } from './aead.ts'
import type { MasterKeyring } from './master-key.ts'
import { type RewrapResult, rewrapEach } from './rewrap.ts'

/**
 * One key-encryption key per tenant, sealed by the master key. Everything a tenant stores
 * encrypted (key material, secret values) is sealed by its KEK, with an AAD naming the row.
 */
const KEK_BYTES = 32

const kekAad = (tenantId: string) => `kms:tenant-kek:v1:${tenantId}`

export interface WrappedKek {
  wrapped: Buffer
  masterKeyId: string
}

/**
 * The tenant's KEK is wrapped by a master key this process does not hold (a key file or
 * KMS_MASTER_KEY that lost it): nothing of the tenant's can be opened until the operator gives the
 * process that key. A 503 naming the cause, as `GET /health` does for the signing key, never a 500.
 */
class UnknownMasterKeyError extends AppError {
  constructor(masterKeyId: string) {
    super(
      503,
      'master_key_unavailable',
      'The key material cannot be opened: this service lacks the master key it is sealed under',
    )
    // For the operator's log only (http/error-handler.ts logs a 5xx's cause): which key it needs.
    this.cause = new Error(
      `the KEK is wrapped by master key ${masterKeyId}, which this process does not have`,
    )
  }
}

export function createWrappedKek(tenantId: string, masterKeys: MasterKeyring): WrappedKek {
  const kek = randomBytes(KEK_BYTES)
  try {
    const { primary } = masterKeys
    return { wrapped: seal(primary.key, kek, kekAad(tenantId)), masterKeyId: primary.id }
  } finally {
    kek.fill(0)
  }
}

function unwrapKek(tenantId: string, wrapped: WrappedKek, masterKeys: MasterKeyring): Buffer {
  const master = masterKeys.find(wrapped.masterKeyId)
  if (!master) throw new UnknownMasterKeyError(wrapped.masterKeyId)
  return open(master.key, wrapped.wrapped, kekAad(tenantId))
}

export interface TenantKeks {
  /** The tenant's KEK as a KeyObject; cached, since a KEK never changes (only its wrapping does). */
  get(tenantId: string, db?: Queryable): Promise<KeyObject>
  seal(tenantId: string, plaintext: Uint8Array, aad: string, db?: Queryable): Promise<Buffer>
  open(tenantId: string, blob: Uint8Array, aad: string, db?: Queryable): Promise<Buffer>
}

export function createTenantKeks(deps: {
  sql: Sql
  masterKeys: MasterKeyring
  maxCached?: number
}): TenantKeks {
  const cache = new Map<string, KeyObject>()
  const maxCached = deps.maxCached ?? 10_000

  async function get(tenantId: string, db: Queryable = deps.sql): Promise<KeyObject> {
    const cached = cache.get(tenantId)
    if (cached) return cached
    const [row] = await db<{ kek_wrapped: Buffer; kek_master_key_id: string }[]>`
      SELECT kek_wrapped, kek_master_key_id FROM tenants WHERE id = ${tenantId}`
    if (!row) throw new Error(`tenant ${tenantId} does not exist`)
    const raw = unwrapKek(
      tenantId,
      { wrapped: row.kek_wrapped, masterKeyId: row.kek_master_key_id },
      deps.masterKeys,
    )
    const key = createSecretKey(raw)
    raw.fill(0)
    if (cache.size >= maxCached) cache.delete(cache.keys().next().value!)
    cache.set(tenantId, key)
    return key
  }

  return {
    get,
    seal: async (tenantId, plaintext, aad, db) => seal(await get(tenantId, db), plaintext, aad),
    open: async (tenantId, blob, aad, db) => open(await get(tenantId, db), blob, aad),
  }
}

export interface RewrapProgress {
  done: number
  total: number
}

/**
 * Re-wraps every tenant KEK not yet under the primary master key. Each tenant is its own short
 * statement, guarded by the blob it read, so the run can be interrupted and resumed and never
 * blocks the API. KEKs under a key the keyring does not hold are counted as unreadable.
 */
export async function rewrapAllKeks(
  sql: Sql,
  masterKeys: MasterKeyring,
  onProgress: (progress: RewrapProgress) => void = () => {},
): Promise<RewrapProgress & RewrapResult> {
  const primaryId = masterKeys.primary.id
  const [{ total } = { total: 0 }] = await sql<{ total: number }[]>`
    SELECT count(*)::int AS total FROM tenants WHERE kek_master_key_id <> ${primaryId}`
  onProgress({ done: 0, total })
  const result = await rewrapEach({
    keyring: masterKeys,
    batch: async (primary, after, limit) =>
      (
        await sql<{ id: string; kek_wrapped: Buffer; kek_master_key_id: string }[]>`
          SELECT id, kek_wrapped, kek_master_key_id FROM tenants
          WHERE kek_master_key_id <> ${primary} AND (${after ?? null}::uuid IS NULL OR id > ${after ?? null}::uuid)
          ORDER BY id LIMIT ${limit}`
      ).map((row) => ({ id: row.id, sealed: row.kek_wrapped, masterKeyId: row.kek_master_key_id })),
    aad: (item) => kekAad(item.id),
    replace: async (item, resealed, primary) =>
      (
        await sql`
          UPDATE tenants SET kek_wrapped = ${resealed}, kek_master_key_id = ${primary.id}, kek_wrapped_at = now()
          WHERE id = ${item.id} AND kek_wrapped = ${item.sealed}`
      ).count === 1,
    progress: (done) => onProgress({ done, total }),
  })
  return { done: result.rewrapped, total, ...result }
}
