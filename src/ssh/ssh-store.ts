import type { Queryable } from '../data/database.ts'
import type { CertType } from './ssh-certificate.ts'

/** The only code that reads and writes the SSH CA tables (migration 0037). */

export const CA_TYPE_CONSTRAINT = 'ssh_certificate_authorities_tenant_type_key'
export const SERIAL_CONSTRAINT = 'ssh_certificates_ca_serial_key'

export interface SshCaRow {
  id: string
  tenant_id: string
  ca_type: CertType
  key_id: string
  key_version: number
  algorithm: string
  public_key: Buffer
  default_validity_seconds: number
  max_validity_seconds: number
  created_at: Date
  created_by: string
  updated_at: Date
  updated_by: string
}

export interface SshCertificateRow {
  id: string
  tenant_id: string
  ca_id: string
  /** uint64 in decimal (numeric). */
  serial: string
  cert_type: CertType
  key_identity: string
  principals: string[]
  valid_after: Date
  valid_before: Date
  public_key_type: string
  public_key_fingerprint: string
  critical_options: { forceCommand?: string; sourceAddress?: string }
  extensions: string[]
  certificate: string
  created_at: Date
  created_by: string
  revoked_at: Date | null
  revoked_by: string | null
  revocation_reason: string | null
}

export async function insertCa(db: Queryable, row: SshCaRow): Promise<void> {
  await db`INSERT INTO ssh_certificate_authorities ${db(row as never)}`
}

export async function findCa(db: Queryable, tenantId: string, id: string): Promise<SshCaRow | undefined> {
  const [row] = await db<SshCaRow[]>`
    SELECT * FROM ssh_certificate_authorities WHERE tenant_id = ${tenantId} AND id = ${id}`
  return row
}

export async function findCaOfType(
  db: Queryable,
  tenantId: string,
  type: CertType,
): Promise<SshCaRow | undefined> {
  const [row] = await db<SshCaRow[]>`
    SELECT * FROM ssh_certificate_authorities WHERE tenant_id = ${tenantId} AND ca_type = ${type}`
  return row
}

/** A CA by its id alone: the public routes (public key, KRL) have no tenant. */
export async function findPublishedCa(db: Queryable, id: string): Promise<SshCaRow | undefined> {
  const [row] = await db<SshCaRow[]>`SELECT * FROM ssh_certificate_authorities WHERE id = ${id}`
  return row
}

export async function listCas(db: Queryable, tenantId: string): Promise<SshCaRow[]> {
  return db<SshCaRow[]>`
    SELECT * FROM ssh_certificate_authorities WHERE tenant_id = ${tenantId} ORDER BY ca_type DESC`
}

export async function lockCa(db: Queryable, tenantId: string, id: string): Promise<SshCaRow | undefined> {
  const [row] = await db<SshCaRow[]>`
    SELECT * FROM ssh_certificate_authorities WHERE tenant_id = ${tenantId} AND id = ${id} FOR UPDATE`
  return row
}

export async function updateCa(
  db: Queryable,
  id: string,
  changes: Pick<SshCaRow, 'default_validity_seconds' | 'max_validity_seconds' | 'updated_at' | 'updated_by'>,
): Promise<SshCaRow> {
  const [row] = await db<SshCaRow[]>`
    UPDATE ssh_certificate_authorities SET ${db(changes as never)} WHERE id = ${id} RETURNING *`
  return row!
}

export async function insertCertificate(db: Queryable, row: SshCertificateRow): Promise<void> {
  await db`INSERT INTO ssh_certificates ${db({ ...row, critical_options: db.json(row.critical_options as never) } as never)}`
}

export async function findCertificate(
  db: Queryable,
  tenantId: string,
  id: string,
): Promise<SshCertificateRow | undefined> {
  const [row] = await db<SshCertificateRow[]>`
    SELECT * FROM ssh_certificates WHERE tenant_id = ${tenantId} AND id = ${id}`
  return row
}

export interface CertificateFilter {
  caType?: CertType | undefined
  revoked?: boolean | undefined
  /** Valid at `now`, not revoked, ending by this time. */
  expiringBy?: Date | undefined
  now: Date
}

export async function listCertificates(
  db: Queryable,
  tenantId: string,
  filter: CertificateFilter,
  page: { limit: number; offset: number },
): Promise<{ rows: SshCertificateRow[]; total: number }> {
  const conditions = [
    filter.caType === undefined ? db`` : db`AND cert_type = ${filter.caType}`,
    filter.revoked === undefined
      ? db``
      : filter.revoked
        ? db`AND revoked_at IS NOT NULL`
        : db`AND revoked_at IS NULL`,
    filter.expiringBy === undefined
      ? db``
      : db`AND revoked_at IS NULL AND valid_before > ${filter.now} AND valid_before <= ${filter.expiringBy}`,
  ]
  const where = db`WHERE tenant_id = ${tenantId} ${conditions[0]!} ${conditions[1]!} ${conditions[2]!}`
  const rows = await db<(SshCertificateRow & { total: number })[]>`
    SELECT *, count(*) OVER ()::int AS total FROM ssh_certificates ${where}
    ORDER BY created_at DESC, id DESC LIMIT ${page.limit} OFFSET ${page.offset}`
  if (rows.length > 0 || page.offset === 0) return { rows, total: rows[0]?.total ?? 0 }
  const [count] = await db<{ total: number }[]>`SELECT count(*)::int AS total FROM ssh_certificates ${where}`
  return { rows, total: count?.total ?? 0 }
}

/** Marks a certificate revoked; undefined when it was already (or is not the tenant's). */
export async function revokeCertificate(
  db: Queryable,
  tenantId: string,
  id: string,
  revocation: { revoked_at: Date; revoked_by: string; revocation_reason: string | null },
): Promise<SshCertificateRow | undefined> {
  const [row] = await db<SshCertificateRow[]>`
    UPDATE ssh_certificates SET ${db(revocation as never)}
    WHERE tenant_id = ${tenantId} AND id = ${id} AND revoked_at IS NULL
    RETURNING *`
  return row
}

/** Serials of the CA's revoked certificates still within their validity (a KRL's content). */
export async function revokedSerials(db: Queryable, caId: string, now: Date): Promise<bigint[]> {
  const rows = await db<{ serial: string }[]>`
    SELECT serial::text AS serial FROM ssh_certificates
    WHERE ca_id = ${caId} AND revoked_at IS NOT NULL AND valid_before > ${now}
    ORDER BY serial`
  return rows.map((row) => BigInt(row.serial))
}
