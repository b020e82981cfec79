import type { Queryable } from '../data/database.ts'

/**
 * What the OCSP responder reads (migration 0036): a CA by id alone (the responder is public and
 * names no tenant), and what the CA knows of a few serials.
 */

export interface OcspCaRow {
  id: string
  tenant_id: string
  status: 'pending' | 'active'
  key_id: string
  key_version: number
  algorithm: string
  certificate: Buffer | null
  not_after: Date | null
  /**
   * The CRL number last reserved: it rises when a CRL snapshots the revocations, and crl_stale
   * is set in the very transaction that records a revocation. Together they say whether the
   * revocations changed since a response was signed.
   */
  crl_number: string
  crl_stale: boolean
}

export async function getOcspCa(db: Queryable, id: string): Promise<OcspCaRow | undefined> {
  const [row] = await db<OcspCaRow[]>`
    SELECT id, tenant_id, status, key_id, key_version, algorithm, certificate, not_after,
           crl_number, crl_stale
    FROM certificate_authorities WHERE id = ${id}`
  return row
}

interface SerialStatus {
  /** The CA issued it and the service kept it. */
  stored: boolean
  /** The first revocation of the serial by the CA, if any. */
  revocation: { revokedAt: Date; reason: string } | null
}

/**
 * What the CA knows of each serial (lower-case hex, as stored), in one statement so that the
 * revocations and the stored certificates come from one snapshot. Serials it knows nothing of are
 * absent from the map.
 */
export async function serialStatuses(
  db: Queryable,
  ca: Pick<OcspCaRow, 'id' | 'tenant_id'>,
  serials: readonly string[],
): Promise<Map<string, SerialStatus>> {
  const rows = await db<
    Array<{ serial: string; stored: boolean; revoked_at: Date | null; reason: string | null }>
  >`
    SELECT serial, false AS stored, revoked_at, reason FROM certificate_revocations
    WHERE ca_id = ${ca.id} AND serial = ANY(${serials as string[]}::text[])
    UNION ALL
    SELECT serial, true AS stored, NULL, NULL FROM certificates
    WHERE tenant_id = ${ca.tenant_id} AND ca_id = ${ca.id} AND serial = ANY(${serials as string[]}::text[])`
  const statuses = new Map<string, SerialStatus>()
  for (const row of rows) {
    const known = statuses.get(row.serial) ?? { stored: false, revocation: null }
    if (row.stored) known.stored = true
    if (row.revoked_at && row.reason) known.revocation = { revokedAt: row.revoked_at, reason: row.reason }
    statuses.set(row.serial, known)
  }
  return statuses
}
