import type { Queryable } from '../data/database.ts'
import type { MfaMethodSetting } from '../settings/settings-service.ts'

/** applications (migration 0011). Only the applications module touches it. */
export interface ApplicationRow {
  id: string
  tenant_id: string
  name: string
  application_type: 'spa' | 'traditional' | 'native' | 'machine_to_machine'
  client_id: string
  client_secret_sealed: Buffer | null
  client_secret_master_key_id: string | null
  client_secret_rotated_at: Date | null
  redirect_uris: string[]
  post_logout_redirect_uris: string[]
  resources: string[]
  /** Migration 0013: the application's own MFA methods (NULL: the tenant's) and login panel. */
  mfa_methods: Record<string, MfaMethodSetting> | null
  branding: { loginPanel: Record<string, unknown> } | null
  sign_up_enabled: boolean
  created_at: Date
  created_by: string
  updated_at: Date
  updated_by: string
}

export async function insertApplication(
  db: Queryable,
  row: Omit<ApplicationRow, 'created_at' | 'updated_at' | 'client_secret_rotated_at' | 'updated_by'>,
): Promise<ApplicationRow> {
  const [created] = await db<ApplicationRow[]>`
    INSERT INTO applications (id, tenant_id, name, application_type, client_id, client_secret_sealed,
      client_secret_master_key_id, client_secret_rotated_at, redirect_uris, post_logout_redirect_uris,
      resources, mfa_methods, branding, sign_up_enabled, created_by, updated_by)
    VALUES (${row.id}, ${row.tenant_id}, ${row.name}, ${row.application_type}, ${row.client_id},
      ${row.client_secret_sealed}, ${row.client_secret_master_key_id},
      ${row.client_secret_sealed ? new Date() : null}, ${row.redirect_uris}, ${row.post_logout_redirect_uris},
      ${row.resources}, ${jsonOrNull(db, row.mfa_methods)}, ${jsonOrNull(db, row.branding)},
      ${row.sign_up_enabled}, ${row.created_by}, ${row.created_by})
    RETURNING *`
  return created!
}

export async function getApplication(
  db: Queryable,
  tenantId: string,
  id: string,
): Promise<ApplicationRow | undefined> {
  const [row] = await db<
    ApplicationRow[]
  >`SELECT * FROM applications WHERE tenant_id = ${tenantId} AND id = ${id}`
  return row
}

export async function listApplications(
  db: Queryable,
  tenantId: string,
  page: { limit: number; offset: number },
): Promise<{ rows: ApplicationRow[]; total: number }> {
  const rows = await db<ApplicationRow[]>`
    SELECT * FROM applications WHERE tenant_id = ${tenantId}
    ORDER BY created_at, id LIMIT ${page.limit} OFFSET ${page.offset}`
  const [{ total }] =
    (await db`SELECT count(*)::int AS total FROM applications WHERE tenant_id = ${tenantId}`) as unknown as [
      { total: number },
    ]
  return { rows, total }
}

export async function updateApplication(
  db: Queryable,
  tenantId: string,
  id: string,
  change: {
    name: string
    redirectUris: string[]
    postLogoutRedirectUris: string[]
    resources: string[] | undefined
    /** undefined: kept; null: cleared. */
    mfaMethods: ApplicationRow['mfa_methods'] | undefined
    branding: ApplicationRow['branding'] | undefined
    signUpEnabled: boolean | undefined
    by: string
  },
): Promise<ApplicationRow | undefined> {
  const [row] = await db<ApplicationRow[]>`
    UPDATE applications SET name = ${change.name}, redirect_uris = ${change.redirectUris},
      post_logout_redirect_uris = ${change.postLogoutRedirectUris},
      resources = COALESCE(${change.resources ?? null}::text[], resources),
      mfa_methods = CASE WHEN ${change.mfaMethods === undefined} THEN mfa_methods
                         ELSE ${jsonOrNull(db, change.mfaMethods ?? null)}::jsonb END,
      branding = CASE WHEN ${change.branding === undefined} THEN branding
                      ELSE ${jsonOrNull(db, change.branding ?? null)}::jsonb END,
      sign_up_enabled = COALESCE(${change.signUpEnabled ?? null}::boolean, sign_up_enabled),
      updated_at = now(), updated_by = ${change.by}
    WHERE tenant_id = ${tenantId} AND id = ${id}
    RETURNING *`
  return row
}

export async function replaceSecret(
  db: Queryable,
  tenantId: string,
  id: string,
  secret: { sealed: Buffer; masterKeyId: string; by: string },
): Promise<ApplicationRow | undefined> {
  const [row] = await db<ApplicationRow[]>`
    UPDATE applications SET client_secret_sealed = ${secret.sealed}, client_secret_master_key_id = ${secret.masterKeyId},
      client_secret_rotated_at = now(), updated_at = now(), updated_by = ${secret.by}
    WHERE tenant_id = ${tenantId} AND id = ${id} AND client_secret_sealed IS NOT NULL
    RETURNING *`
  return row
}

export async function deleteApplication(db: Queryable, tenantId: string, id: string): Promise<boolean> {
  const rows = await db`DELETE FROM applications WHERE tenant_id = ${tenantId} AND id = ${id}`
  return rows.count === 1
}

export async function getApplicationByClientId(
  db: Queryable,
  clientId: string,
): Promise<ApplicationRow | undefined> {
  const [row] = await db<ApplicationRow[]>`SELECT * FROM applications WHERE client_id = ${clientId}`
  return row
}

/** Redirect URIs of one tenant's applications, or of every tenant's (the CORS preflight's union). */
export async function listAllRedirectUris(
  db: Queryable,
  tenantId?: string,
): Promise<Pick<ApplicationRow, 'tenant_id' | 'redirect_uris' | 'post_logout_redirect_uris'>[]> {
  return tenantId
    ? db`SELECT tenant_id, redirect_uris, post_logout_redirect_uris FROM applications WHERE tenant_id = ${tenantId}`
    : db`SELECT tenant_id, redirect_uris, post_logout_redirect_uris FROM applications`
}

/** By id alone: the sign-in pages' links name an application, and the application names its tenant. */
export async function getApplicationById(db: Queryable, id: string): Promise<ApplicationRow | undefined> {
  const [row] = await db<ApplicationRow[]>`SELECT * FROM applications WHERE id = ${id}`
  return row
}

const jsonOrNull = (db: Queryable, value: object | null) => (value === null ? null : db.json(value as never))

/** Master key rotation: client secrets sealed under another key than `primaryId`, by id after `after`. */
export async function secretsToRewrap(
  db: Queryable,
  input: { primaryId: string; after: string | undefined; limit: number },
): Promise<{ id: string; sealed: Buffer; masterKeyId: string }[]> {
  const rows = await db<{ id: string; client_secret_sealed: Buffer; client_secret_master_key_id: string }[]>`
    SELECT id, client_secret_sealed, client_secret_master_key_id FROM applications
    WHERE client_secret_sealed IS NOT NULL AND client_secret_master_key_id IS DISTINCT FROM ${input.primaryId}
      AND (${input.after ?? null}::uuid IS NULL OR id > ${input.after ?? null}::uuid)
    ORDER BY id LIMIT ${input.limit}`
  return rows.map((row) => ({
    id: row.id,
    sealed: row.client_secret_sealed,
    masterKeyId: row.client_secret_master_key_id,
  }))
}

/**
 * The secret sealed anew, if the application still holds the blob the rotation read (its secret
 * not rotated meanwhile). Not a change of the application: its secret and timestamps stay.
 */
export async function replaceSealedSecret(
  db: Queryable,
  input: { id: string; from: Buffer; to: Buffer; masterKeyId: string },
): Promise<boolean> {
  const rows = await db`
    UPDATE applications SET client_secret_sealed = ${input.to}, client_secret_master_key_id = ${input.masterKeyId}
    WHERE id = ${input.id} AND client_secret_sealed = ${input.from}`
  return rows.count === 1
}
