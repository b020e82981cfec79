import type { Queryable, Sql } from '../data/database.ts'
import type { NameConstraints } from './name-constraints.ts'

/** Data access for X.509 CAs, their roles, certificates and revocations (migration 0036). */

/** A CA row as the service sees it: the chain as DER certificates. */
export interface CaRow {
  id: string
  tenant_id: string
  name: string
  kind: 'root' | 'intermediate'
  status: 'pending' | 'active' | 'revoked'
  parent_id: string | null
  key_id: string
  key_version: number
  algorithm: string
  subject_der: Buffer
  subject: Record<string, string>
  path_length: number | null
  name_constraints: NameConstraints | null
  crl_urls: string[]
  issuer_urls: string[]
  ocsp_urls: string[]
  certificate: Buffer | null
  chain: Buffer[]
  csr: Buffer | null
  not_before: Date | null
  not_after: Date | null
  serial: string | null
  first_issued_at: Date | null
  crl_number: string
  crl_built_number: string
  crl_next_update: Date | null
  crl_stale: boolean
  crl_retry_at: Date | null
  created_at: Date
  created_by: string
  updated_at: Date
}

export interface RoleRow {
  tenant_id: string
  ca_id: string
  name: string
  settings: Record<string, unknown>
  created_at: Date
  updated_at: Date
}

export interface CertificateRow {
  tenant_id: string
  serial: string
  ca_id: string
  role: string
  common_name: string | null
  alt_names: { dns: string[]; ip: string[] }
  key_algorithm: string
  der: Buffer
  not_before: Date
  not_after: Date
  revoked_at: Date | null
  revocation_reason: string | null
  created_at: Date
  created_by: string
}

export interface RevocationRow {
  serial: string
  revoked_at: Date
  reason: string
}

export const CA_NAME_CONSTRAINT = 'certificate_authorities_name_key'
export const ROLE_CONSTRAINT = 'certificate_roles_pkey'

type NewCaRow = Omit<
  CaRow,
  'first_issued_at' | 'crl_number' | 'crl_built_number' | 'crl_next_update' | 'crl_stale' | 'crl_retry_at'
>

/** Every column but the CRL, which grows with revocations and only the public route reads. */
const CA_COLUMNS = [
  'id',
  'tenant_id',
  'name',
  'kind',
  'status',
  'parent_id',
  'key_id',
  'key_version',
  'algorithm',
  'subject_der',
  'subject',
  'path_length',
  'name_constraints',
  'crl_urls',
  'issuer_urls',
  'ocsp_urls',
  'certificate',
  'chain',
  'csr',
  'not_before',
  'not_after',
  'serial',
  'first_issued_at',
  'crl_number',
  'crl_built_number',
  'crl_next_update',
  'crl_stale',
  'crl_retry_at',
  'created_at',
  'created_by',
  'updated_at',
] as const

type StoredCaRow = Omit<CaRow, 'chain'> & { chain: string[] }
const fromStored = (row: StoredCaRow): CaRow => ({
  ...row,
  chain: row.chain.map((der) => Buffer.from(der, 'base64')),
})
const storedChain = (db: Queryable, chain: Buffer[]) => db.json(chain.map((der) => der.toString('base64')))

export async function insertCa(db: Queryable, row: NewCaRow): Promise<CaRow> {
  const [inserted] = await db<StoredCaRow[]>`
    INSERT INTO certificate_authorities ${db({
      ...row,
      chain: storedChain(db, row.chain),
      subject: db.json(row.subject),
      name_constraints: row.name_constraints ? db.json(row.name_constraints as never) : null,
    } as never)}
    RETURNING ${db(CA_COLUMNS)}`
  return fromStored(inserted!)
}

export async function getCa(db: Queryable, tenantId: string, id: string): Promise<CaRow | undefined> {
  const [row] = await db<StoredCaRow[]>`
    SELECT ${db(CA_COLUMNS)} FROM certificate_authorities WHERE tenant_id = ${tenantId} AND id = ${id}`
  return row && fromStored(row)
}

export async function caNameTaken(db: Queryable, tenantId: string, name: string): Promise<boolean> {
  const [found] = await db`
    SELECT 1 FROM certificate_authorities WHERE tenant_id = ${tenantId} AND name = ${name}`
  return found !== undefined
}

/** A CA by id alone: the public routes (its certificate and CRL) name no tenant. */
export async function getPublicCa(
  db: Queryable,
  id: string,
): Promise<{ certificate: Buffer | null; crl: Buffer | null } | undefined> {
  const [row] = await db<{ certificate: Buffer | null; crl: Buffer | null }[]>`
    SELECT certificate, crl FROM certificate_authorities WHERE id = ${id}`
  return row
}

export async function listCas(
  db: Queryable,
  tenantId: string,
  page: { limit: number; offset: number },
): Promise<{ rows: CaRow[]; total: number }> {
  const rows = await db<StoredCaRow[]>`
    SELECT ${db(CA_COLUMNS)} FROM certificate_authorities WHERE tenant_id = ${tenantId}
    ORDER BY created_at, id LIMIT ${page.limit} OFFSET ${page.offset}`
  const [count] = await db<{ n: string }[]>`
    SELECT count(*) AS n FROM certificate_authorities WHERE tenant_id = ${tenantId}`
  return { rows: rows.map(fromStored), total: Number(count!.n) }
}

export async function updateCa(
  db: Queryable,
  tenantId: string,
  id: string,
  changes: Partial<
    Pick<
      CaRow,
      | 'crl_urls'
      | 'issuer_urls'
      | 'ocsp_urls'
      | 'status'
      | 'certificate'
      | 'chain'
      | 'csr'
      | 'subject_der'
      | 'not_before'
      | 'not_after'
      | 'path_length'
      | 'updated_at'
    >
  >,
  /** Only while no certificate was issued (the URLs every certificate carries). */
  onlyBeforeIssuance = false,
): Promise<CaRow | undefined> {
  const values = changes.chain ? { ...changes, chain: storedChain(db, changes.chain) } : changes
  const [row] = await db<StoredCaRow[]>`
    UPDATE certificate_authorities SET ${db(values as never)}
    WHERE tenant_id = ${tenantId} AND id = ${id} ${onlyBeforeIssuance ? db`AND first_issued_at IS NULL` : db``}
    RETURNING ${db(CA_COLUMNS)}`
  return row && fromStored(row)
}

type CaUrls = 'crl_urls' | 'issuer_urls' | 'ocsp_urls'

/**
 * The URLs a certificate of the CA carries, fixed by its first issuance: the first marks the CA
 * (taking its row's lock once) and reads them under that lock, so a concurrent change of the URLs
 * either comes before (and is used) or after (and is refused); later issuances take no lock.
 */
export async function claimUrls(
  db: Queryable,
  ca: Pick<CaRow, 'id' | CaUrls | 'first_issued_at'>,
  now: Date,
): Promise<Pick<CaRow, CaUrls>> {
  if (ca.first_issued_at) return ca
  const [row] = await db<Pick<CaRow, CaUrls>[]>`
    UPDATE certificate_authorities SET first_issued_at = ${now}
    WHERE id = ${ca.id} AND first_issued_at IS NULL RETURNING crl_urls, issuer_urls, ocsp_urls`
  if (row) return row
  const [fixed] = await db<Pick<CaRow, CaUrls>[]>`
    SELECT crl_urls, issuer_urls, ocsp_urls FROM certificate_authorities WHERE id = ${ca.id}`
  return fixed!
}

/** A CA of the tenant whose certificate (signed by `parentId`) was revoked issues nothing more. */
export async function markCaRevoked(
  db: Queryable,
  parentId: string,
  serial: string,
  now: Date,
): Promise<void> {
  await db`
    UPDATE certificate_authorities SET status = 'revoked', updated_at = ${now}
    WHERE parent_id = ${parentId} AND serial = ${serial}`
}

export async function insertRole(db: Queryable, row: RoleRow): Promise<RoleRow> {
  const [inserted] = await db<RoleRow[]>`
    INSERT INTO certificate_roles ${db({ ...row, settings: db.json(row.settings as never) } as never)}
    RETURNING *`
  return inserted!
}

export async function getRole(
  db: Queryable,
  tenantId: string,
  caId: string,
  name: string,
): Promise<RoleRow | undefined> {
  const [row] = await db<RoleRow[]>`
    SELECT * FROM certificate_roles WHERE tenant_id = ${tenantId} AND ca_id = ${caId} AND name = ${name}`
  return row
}

export async function listRoles(db: Queryable, tenantId: string, caId: string): Promise<RoleRow[]> {
  return db<RoleRow[]>`
    SELECT * FROM certificate_roles WHERE tenant_id = ${tenantId} AND ca_id = ${caId} ORDER BY name`
}

export async function updateRole(
  db: Queryable,
  tenantId: string,
  caId: string,
  name: string,
  settings: Record<string, unknown>,
  now: Date,
): Promise<RoleRow | undefined> {
  const [row] = await db<RoleRow[]>`
    UPDATE certificate_roles SET settings = ${db.json(settings as never)}, updated_at = ${now}
    WHERE tenant_id = ${tenantId} AND ca_id = ${caId} AND name = ${name} RETURNING *`
  return row
}

export async function deleteRole(
  db: Queryable,
  tenantId: string,
  caId: string,
  name: string,
): Promise<boolean> {
  const rows = await db`
    DELETE FROM certificate_roles WHERE tenant_id = ${tenantId} AND ca_id = ${caId} AND name = ${name}
    RETURNING name`
  return rows.length > 0
}

export async function insertCertificate(db: Queryable, row: CertificateRow): Promise<void> {
  await db`INSERT INTO certificates ${db({ ...row, alt_names: db.json(row.alt_names) } as never)}`
}

export async function getCertificate(
  db: Queryable,
  tenantId: string,
  serial: string,
  lock: 'none' | 'for update' = 'none',
): Promise<CertificateRow | undefined> {
  const [row] = await db<CertificateRow[]>`
    SELECT * FROM certificates WHERE tenant_id = ${tenantId} AND serial = ${serial}
    ${lock === 'for update' ? db`FOR UPDATE` : db``}`
  return row
}

export async function listCertificates(
  db: Queryable,
  tenantId: string,
  filter: {
    caId?: string | undefined
    status?: 'valid' | 'revoked' | 'expired' | undefined
    endingBefore?: Date | undefined
    now: Date
    limit: number
    offset: number
  },
): Promise<{ rows: CertificateRow[]; total: number }> {
  const { now } = filter
  const where = db`
    tenant_id = ${tenantId}
    ${filter.caId ? db`AND ca_id = ${filter.caId}` : db``}
    ${
      filter.status === 'revoked'
        ? db`AND revoked_at IS NOT NULL`
        : filter.status === 'expired'
          ? db`AND revoked_at IS NULL AND not_after <= ${now}`
          : filter.status === 'valid'
            ? db`AND revoked_at IS NULL AND not_after > ${now}`
            : db``
    }
    ${filter.endingBefore ? db`AND revoked_at IS NULL AND not_after > ${now} AND not_after <= ${filter.endingBefore}` : db``}`
  const rows = await db<CertificateRow[]>`
    SELECT * FROM certificates WHERE ${where}
    ORDER BY created_at DESC, serial LIMIT ${filter.limit} OFFSET ${filter.offset}`
  const [count] = await db<{ n: string }[]>`SELECT count(*) AS n FROM certificates WHERE ${where}`
  return { rows, total: Number(count!.n) }
}

/**
 * Records a revocation (at most once per serial and CA) and marks the CA's CRL stale, in the
 * caller's transaction. The stale mark takes the CA row's lock, so a CRL build's snapshot of
 * the revocations (lockForCrl) sees every revocation committed before it.
 */
export async function insertRevocation(
  db: Queryable,
  row: RevocationRow & { tenant_id: string; ca_id: string; listed_until: Date },
): Promise<boolean> {
  const inserted = await db`
    INSERT INTO certificate_revocations ${db(row as never)} ON CONFLICT DO NOTHING RETURNING serial`
  if (inserted.length === 0) return false
  await db`UPDATE certificate_authorities SET crl_stale = true WHERE id = ${row.ca_id}`
  return true
}

export async function markRevoked(
  db: Queryable,
  tenantId: string,
  serial: string,
  revokedAt: Date,
  reason: string,
): Promise<CertificateRow> {
  const [row] = await db<CertificateRow[]>`
    UPDATE certificates SET revoked_at = ${revokedAt}, revocation_reason = ${reason}
    WHERE tenant_id = ${tenantId} AND serial = ${serial} RETURNING *`
  return row!
}

export async function getRevocation(
  db: Queryable,
  caId: string,
  serial: string,
): Promise<RevocationRow | undefined> {
  const [row] = await db<RevocationRow[]>`
    SELECT serial, revoked_at, reason FROM certificate_revocations WHERE ca_id = ${caId} AND serial = ${serial}`
  return row
}

/**
 * The next CRL's number and what it lists, in one short transaction on the CA's row: numbers
 * increase with the snapshots they describe, whatever builds race (a revocation and the job).
 */
export async function reserveCrl(
  sql: Sql,
  caId: string,
  now: Date,
): Promise<{ crlNumber: bigint; entries: RevocationRow[] }> {
  return sql.begin(async (tx) => {
    const [row] = await tx<{ crl_number: string }[]>`
      UPDATE certificate_authorities SET crl_number = crl_number + 1, crl_stale = false
      WHERE id = ${caId} RETURNING crl_number`
    const entries = await tx<RevocationRow[]>`
      SELECT serial, revoked_at, reason FROM certificate_revocations
      WHERE ca_id = ${caId} AND listed_until > ${now} ORDER BY revoked_at, serial`
    return { crlNumber: BigInt(row!.crl_number), entries }
  }) as Promise<{ crlNumber: bigint; entries: RevocationRow[] }>
}

/** Keeps a built CRL unless a newer one (a higher number) is already kept. */
export async function storeCrl(
  db: Queryable,
  caId: string,
  crl: { der: Buffer; number: bigint; nextUpdate: Date },
): Promise<void> {
  await db`
    UPDATE certificate_authorities
    SET crl = ${crl.der}, crl_built_number = ${crl.number.toString()}, crl_next_update = ${crl.nextUpdate},
      crl_retry_at = NULL
    WHERE id = ${caId} AND crl_built_number < ${crl.number.toString()}`
}

/** A build that failed: a sweep tries again from `retryAt`. */
export async function markCrlStale(db: Queryable, caId: string, retryAt: Date): Promise<void> {
  await db`UPDATE certificate_authorities SET crl_stale = true, crl_retry_at = ${retryAt} WHERE id = ${caId}`
}

/**
 * Active CAs whose CRL is stale or ends before `horizon`, soonest end first; a CA whose last build
 * failed waits for its retry time.
 */
export async function crlsDue(
  db: Queryable,
  now: Date,
  horizon: Date,
  limit: number,
): Promise<Array<Pick<CaRow, 'id' | 'tenant_id'>>> {
  return db<Array<Pick<CaRow, 'id' | 'tenant_id'>>>`
    SELECT id, tenant_id FROM certificate_authorities
    WHERE status = 'active' AND (crl_retry_at IS NULL OR crl_retry_at <= ${now})
      AND (crl_stale OR crl_next_update IS NULL OR crl_next_update < ${horizon})
    ORDER BY crl_next_update NULLS FIRST LIMIT ${limit}`
}
