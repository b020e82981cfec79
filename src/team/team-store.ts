import type { TenantRole } from '../auth/roles.ts'
import type { Queryable } from '../data/database.ts'

/** team_memberships and team_invitations (migration 0009). Only the team module touches them. */

export interface MembershipRow {
  tenant_id: string
  account_id: string
  role: TenantRole
  created_at: Date
  created_by: string
  updated_at: Date
}

export async function getMembership(
  db: Queryable,
  tenantId: string,
  accountId: string,
): Promise<MembershipRow | undefined> {
  const [row] = await db<MembershipRow[]>`
    SELECT * FROM team_memberships WHERE tenant_id = ${tenantId} AND account_id = ${accountId}`
  return row
}

export async function insertMembership(
  db: Queryable,
  row: { tenantId: string; accountId: string; role: TenantRole; createdBy: string },
): Promise<MembershipRow | undefined> {
  const [created] = await db<MembershipRow[]>`
    INSERT INTO team_memberships (tenant_id, account_id, role, created_by)
    VALUES (${row.tenantId}, ${row.accountId}, ${row.role}, ${row.createdBy})
    ON CONFLICT (tenant_id, account_id) DO NOTHING
    RETURNING *`
  return created
}

export async function listMemberships(db: Queryable, tenantId: string): Promise<MembershipRow[]> {
  return db<MembershipRow[]>`
    SELECT * FROM team_memberships WHERE tenant_id = ${tenantId} ORDER BY created_at, account_id`
}

export async function membershipsOfAccount(db: Queryable, accountId: string): Promise<MembershipRow[]> {
  return db<
    MembershipRow[]
  >`SELECT * FROM team_memberships WHERE account_id = ${accountId} ORDER BY created_at`
}

/** The tenant's memberships, locked: the last-owner rule is checked against what cannot change under it. */
export async function lockMemberships(db: Queryable, tenantId: string): Promise<MembershipRow[]> {
  return db<MembershipRow[]>`
    SELECT * FROM team_memberships WHERE tenant_id = ${tenantId} ORDER BY account_id FOR UPDATE`
}

export async function updateRole(
  db: Queryable,
  tenantId: string,
  accountId: string,
  role: TenantRole,
): Promise<MembershipRow | undefined> {
  const [row] = await db<MembershipRow[]>`
    UPDATE team_memberships SET role = ${role}, updated_at = now()
    WHERE tenant_id = ${tenantId} AND account_id = ${accountId}
    RETURNING *`
  return row
}

export async function deleteMembership(db: Queryable, tenantId: string, accountId: string): Promise<boolean> {
  const rows =
    await db`DELETE FROM team_memberships WHERE tenant_id = ${tenantId} AND account_id = ${accountId}`
  return rows.count === 1
}

// --- invitations ------------------------------------------------------------------------------

export interface InvitationRow {
  id: string
  tenant_id: string
  email: string
  email_normalized: string
  role: TenantRole
  token_hash: Buffer
  token_sealed: Buffer | null
  token_master_key_id: string | null
  created_by: string
  created_at: Date
  expires_at: Date
  consumed_at: Date | null
  consumed_by: string | null
  revoked_at: Date | null
  email_dispatch_status: 'queued' | 'sent' | 'failed'
  dispatch_error: string | null
  queued_at: Date
  dispatched_at: Date | null
  send_count: number
}

export async function insertInvitation(
  db: Queryable,
  row: {
    id: string
    tenantId: string
    email: string
    emailNormalized: string
    role: TenantRole
    tokenHash: Buffer
    tokenSealed: Buffer
    tokenMasterKeyId: string
    createdBy: string
    expiresAt: Date
  },
): Promise<InvitationRow> {
  const [created] = await db<InvitationRow[]>`
    INSERT INTO team_invitations (id, tenant_id, email, email_normalized, role, token_hash, token_sealed,
      token_master_key_id, created_by, expires_at, email_dispatch_status)
    VALUES (${row.id}, ${row.tenantId}, ${row.email}, ${row.emailNormalized}, ${row.role}, ${row.tokenHash},
      ${row.tokenSealed}, ${row.tokenMasterKeyId}, ${row.createdBy}, ${row.expiresAt}, 'queued')
    RETURNING *`
  return created!
}

export async function listInvitations(db: Queryable, tenantId: string): Promise<InvitationRow[]> {
  return db<InvitationRow[]>`
    SELECT * FROM team_invitations WHERE tenant_id = ${tenantId} ORDER BY created_at DESC, id LIMIT 1000`
}

export async function getInvitation(
  db: Queryable,
  tenantId: string,
  id: string,
): Promise<InvitationRow | undefined> {
  const [row] = await db<
    InvitationRow[]
  >`SELECT * FROM team_invitations WHERE tenant_id = ${tenantId} AND id = ${id}`
  return row
}

export async function getInvitationById(db: Queryable, id: string): Promise<InvitationRow | undefined> {
  const [row] = await db<InvitationRow[]>`SELECT * FROM team_invitations WHERE id = ${id}`
  return row
}

export async function findInvitationByToken(
  db: Queryable,
  tokenHash: Buffer,
): Promise<InvitationRow | undefined> {
  const [row] = await db<InvitationRow[]>`
    SELECT * FROM team_invitations
    WHERE token_hash = ${tokenHash} AND consumed_at IS NULL AND revoked_at IS NULL AND expires_at > now()`
  return row
}

/** Single use: only one caller can consume a live invitation. */
export async function consumeInvitation(
  db: Queryable,
  tokenHash: Buffer,
  accountId: string,
): Promise<InvitationRow | undefined> {
  const [row] = await db<InvitationRow[]>`
    UPDATE team_invitations SET consumed_at = now(), consumed_by = ${accountId}, token_sealed = NULL
    WHERE token_hash = ${tokenHash} AND consumed_at IS NULL AND revoked_at IS NULL AND expires_at > now()
    RETURNING *`
  return row
}

/** A new token for a live invitation (the old link dies), queued again. */
export async function renewInvitation(
  db: Queryable,
  input: {
    tenantId: string
    id: string
    tokenHash: Buffer
    tokenSealed: Buffer
    tokenMasterKeyId: string
    expiresAt: Date
  },
): Promise<InvitationRow | undefined> {
  const [row] = await db<InvitationRow[]>`
    UPDATE team_invitations SET token_hash = ${input.tokenHash}, token_sealed = ${input.tokenSealed},
      token_master_key_id = ${input.tokenMasterKeyId}, expires_at = ${input.expiresAt},
      email_dispatch_status = 'queued', dispatch_error = NULL, queued_at = now(), dispatched_at = NULL,
      send_count = send_count + 1
    WHERE tenant_id = ${input.tenantId} AND id = ${input.id} AND consumed_at IS NULL AND revoked_at IS NULL
    RETURNING *`
  return row
}

export async function revokeInvitation(
  db: Queryable,
  tenantId: string,
  id: string,
): Promise<InvitationRow | undefined> {
  const [row] = await db<InvitationRow[]>`
    UPDATE team_invitations SET revoked_at = now(), token_sealed = NULL
    WHERE tenant_id = ${tenantId} AND id = ${id} AND consumed_at IS NULL AND revoked_at IS NULL
    RETURNING *`
  return row
}

/** The outcome of one send, for the send it belongs to (a resend in between makes it moot). */
export async function recordDispatch(
  db: Queryable,
  input: { id: string; sendCount: number; status: 'sent' | 'failed'; error: string | null },
): Promise<InvitationRow | undefined> {
  const [row] = await db<InvitationRow[]>`
    UPDATE team_invitations SET email_dispatch_status = ${input.status}, dispatch_error = ${input.error},
      dispatched_at = now(), token_sealed = NULL
    WHERE id = ${input.id} AND send_count = ${input.sendCount} AND email_dispatch_status = 'queued'
    RETURNING *`
  return row
}

/** Queued sends older than `before`: their job was lost (Redis restarted empty). */
export async function overdueInvitations(
  db: Queryable,
  before: Date,
): Promise<Array<{ id: string; send_count: number }>> {
  return db<{ id: string; send_count: number }[]>`
    SELECT id, send_count FROM team_invitations
    WHERE email_dispatch_status = 'queued' AND queued_at < ${before} AND revoked_at IS NULL AND consumed_at IS NULL
    LIMIT 1000`
}

/** Master key rotation: invitation links still sealed under another key than `primaryId`, by id after `after`. */
export async function invitationsToRewrap(
  db: Queryable,
  input: { primaryId: string; after: string | undefined; limit: number },
): Promise<{ id: string; sealed: Buffer; masterKeyId: string }[]> {
  const rows = await db<{ id: string; token_sealed: Buffer; token_master_key_id: string }[]>`
    SELECT id, token_sealed, token_master_key_id FROM team_invitations
    WHERE token_sealed IS NOT NULL AND token_master_key_id <> ${input.primaryId}
      AND (${input.after ?? null}::uuid IS NULL OR id > ${input.after ?? null}::uuid)
    ORDER BY id LIMIT ${input.limit}`
  return rows.map((row) => ({ id: row.id, sealed: row.token_sealed, masterKeyId: row.token_master_key_id }))
}

/** The link sealed anew, if the row still holds the blob the rotation read (not sent or renewed meanwhile). */
export async function replaceSealedInvitation(
  db: Queryable,
  input: { id: string; from: Buffer; to: Buffer; masterKeyId: string },
): Promise<boolean> {
  const rows = await db`
    UPDATE team_invitations SET token_sealed = ${input.to}, token_master_key_id = ${input.masterKeyId}
    WHERE id = ${input.id} AND token_sealed = ${input.from}`
  return rows.count === 1
}
