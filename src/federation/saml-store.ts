import type { Queryable } from '../data/database.ts'

/**
 * saml_identity_providers, saml_requests, saml_assertions_seen and federated_identities
 * (migrations 0015, 0025). Only the federation module touches them.
 */
export interface SamlIdpRow {
  id: string
  tenant_id: string
  name: string
  entity_id: string
  sso_url: string
  certificate: string
  certificate_sha256: string
  certificate_not_after: Date
  attribute_mapping: { email: string; name?: string }
  application_ids: string[]
  /** An owner or admin trusts its addresses enough to link to accounts that have credentials. */
  link_by_verified_email: boolean
  created_at: Date
  created_by: string
  updated_at: Date
}

export type SamlIdpFields = Pick<
  SamlIdpRow,
  | 'name'
  | 'entity_id'
  | 'sso_url'
  | 'certificate'
  | 'certificate_sha256'
  | 'certificate_not_after'
  | 'attribute_mapping'
  | 'application_ids'
  | 'link_by_verified_email'
>

export async function insertIdp(
  db: Queryable,
  row: SamlIdpFields & Pick<SamlIdpRow, 'id' | 'tenant_id' | 'created_by'>,
): Promise<SamlIdpRow> {
  const [created] = await db<SamlIdpRow[]>`
    INSERT INTO saml_identity_providers (id, tenant_id, name, entity_id, sso_url, certificate, certificate_sha256,
      certificate_not_after, attribute_mapping, application_ids, link_by_verified_email, created_by)
    VALUES (${row.id}, ${row.tenant_id}, ${row.name}, ${row.entity_id}, ${row.sso_url}, ${row.certificate},
      ${row.certificate_sha256}, ${row.certificate_not_after}, ${db.json(row.attribute_mapping)},
      ${row.application_ids}::uuid[], ${row.link_by_verified_email}, ${row.created_by})
    RETURNING *`
  return created!
}

/** By id; within a tenant when one is given (the ACS and metadata know the id only). */
export async function getIdp(
  db: Queryable,
  tenantId: string | undefined,
  id: string,
): Promise<SamlIdpRow | undefined> {
  const [row] = await db<SamlIdpRow[]>`
    SELECT * FROM saml_identity_providers WHERE id = ${id} ${tenantId ? db`AND tenant_id = ${tenantId}` : db``}`
  return row
}

export async function listIdps(
  db: Queryable,
  tenantId: string,
  page: { limit: number; offset: number },
): Promise<{ rows: SamlIdpRow[]; total: number }> {
  const rows = await db<SamlIdpRow[]>`
    SELECT * FROM saml_identity_providers WHERE tenant_id = ${tenantId}
    ORDER BY created_at, id LIMIT ${page.limit} OFFSET ${page.offset}`
  const [counted] = await db<{ total: number }[]>`
    SELECT count(*)::int AS total FROM saml_identity_providers WHERE tenant_id = ${tenantId}`
  return { rows, total: counted!.total }
}

/** The IdPs an application's sign-in page offers: those listing it, and those listing none. */
export async function idpsForApplication(
  db: Queryable,
  tenantId: string,
  applicationId: string,
): Promise<SamlIdpRow[]> {
  return db<SamlIdpRow[]>`
    SELECT * FROM saml_identity_providers
    WHERE tenant_id = ${tenantId} AND (application_ids = '{}' OR ${applicationId}::uuid = ANY (application_ids))
    ORDER BY name, id`
}

export async function updateIdp(
  db: Queryable,
  tenantId: string,
  id: string,
  fields: SamlIdpFields,
): Promise<SamlIdpRow | undefined> {
  const [row] = await db<SamlIdpRow[]>`
    UPDATE saml_identity_providers SET name = ${fields.name}, entity_id = ${fields.entity_id},
      sso_url = ${fields.sso_url}, certificate = ${fields.certificate},
      certificate_sha256 = ${fields.certificate_sha256}, certificate_not_after = ${fields.certificate_not_after},
      attribute_mapping = ${db.json(fields.attribute_mapping)}, application_ids = ${fields.application_ids}::uuid[],
      link_by_verified_email = ${fields.link_by_verified_email}, updated_at = now()
    WHERE tenant_id = ${tenantId} AND id = ${id}
    RETURNING *`
  return row
}

export async function deleteIdp(db: Queryable, tenantId: string, id: string): Promise<boolean> {
  const rows = await db`
    DELETE FROM saml_identity_providers WHERE tenant_id = ${tenantId} AND id = ${id} RETURNING id`
  return rows.length > 0
}

export interface SamlRequestRow {
  id: string
  idp_id: string
  interaction_uid: string
  created_at: Date
  expires_at: Date
  answered_at: Date | null
  account_id: string | null
  completed_at: Date | null
}

export async function insertSamlRequest(
  db: Queryable,
  row: Pick<SamlRequestRow, 'id' | 'idp_id' | 'interaction_uid' | 'created_at' | 'expires_at'>,
): Promise<void> {
  await db`
    INSERT INTO saml_requests (id, idp_id, interaction_uid, created_at, expires_at)
    VALUES (${row.id}, ${row.idp_id}, ${row.interaction_uid}, ${row.created_at}, ${row.expires_at})`
}

/** An AuthnRequest of this IdP that no response has answered yet and is still in time. */
export async function openSamlRequest(
  db: Queryable,
  idpId: string,
  id: string,
  now: Date,
): Promise<SamlRequestRow | undefined> {
  const [row] = await db<SamlRequestRow[]>`
    SELECT * FROM saml_requests
    WHERE id = ${id} AND idp_id = ${idpId} AND answered_at IS NULL AND expires_at > ${now}`
  return row
}

/** Whether this service sent the request (answered or not). */
export async function requestExists(db: Queryable, idpId: string, id: string): Promise<boolean> {
  const rows = await db`SELECT 1 FROM saml_requests WHERE id = ${id} AND idp_id = ${idpId}`
  return rows.length > 0
}

/** The one response accepted for a request: false when another got there first (a replay). */
export async function answerSamlRequest(
  db: Queryable,
  input: { idpId: string; id: string; now: Date },
): Promise<SamlRequestRow | undefined> {
  const [row] = await db<SamlRequestRow[]>`
    UPDATE saml_requests SET answered_at = ${input.now}
    WHERE id = ${input.id} AND idp_id = ${input.idpId} AND answered_at IS NULL AND expires_at > ${input.now}
    RETURNING *`
  return row
}

export async function setRequestAccount(db: Queryable, id: string, accountId: string): Promise<void> {
  await db`UPDATE saml_requests SET account_id = ${accountId} WHERE id = ${id}`
}

/** The sign-in that sent the request takes its account, once. */
export async function takeRequestResult(
  db: Queryable,
  input: { id: string; interactionUid: string; now: Date },
): Promise<string | undefined> {
  const [row] = await db<{ account_id: string }[]>`
    UPDATE saml_requests SET completed_at = ${input.now}
    WHERE id = ${input.id} AND interaction_uid = ${input.interactionUid} AND account_id IS NOT NULL
      AND completed_at IS NULL AND expires_at > ${input.now}
    RETURNING account_id`
  return row?.account_id
}

/** false: the assertion was seen before (a replay). */
export async function markAssertionSeen(
  db: Queryable,
  input: { idpId: string; assertionId: string; expiresAt: Date },
): Promise<boolean> {
  const rows = await db`
    INSERT INTO saml_assertions_seen (idp_id, assertion_id, expires_at)
    VALUES (${input.idpId}, ${input.assertionId}, ${input.expiresAt})
    ON CONFLICT DO NOTHING RETURNING assertion_id`
  return rows.length > 0
}

export async function findFederatedAccount(
  db: Queryable,
  idpId: string,
  nameId: string,
): Promise<string | undefined> {
  const [row] = await db<{ account_id: string }[]>`
    UPDATE federated_identities SET last_sign_in_at = now()
    WHERE idp_id = ${idpId} AND name_id = ${nameId} RETURNING account_id`
  return row?.account_id
}

export async function linkFederatedAccount(
  db: Queryable,
  row: { idpId: string; nameId: string; tenantId: string; accountId: string },
): Promise<void> {
  await db`
    INSERT INTO federated_identities (idp_id, name_id, tenant_id, account_id)
    VALUES (${row.idpId}, ${row.nameId}, ${row.tenantId}, ${row.accountId})
    ON CONFLICT (idp_id, name_id) DO NOTHING`
}

/** Requests and assertion ids past their time. */
export async function sweepSaml(db: Queryable, now: Date): Promise<number> {
  const requests = await db`DELETE FROM saml_requests WHERE expires_at <= ${now} RETURNING id`
  const assertions =
    await db`DELETE FROM saml_assertions_seen WHERE expires_at <= ${now} RETURNING assertion_id`
  return requests.length + assertions.length
}
