import type { Queryable } from '../data/database.ts'

/** access_policies and access_requests (migration 0014). Only the access-policies module touches them. */
export interface AccessPolicyRow {
  id: string
  tenant_id: string
  name: string
  description: string
  action: string
  priority: number
  application_ids: string[]
  enduser_ids: string[]
  role_ids: string[]
  ip_ranges: string[]
  created_at: Date
  created_by: string
  updated_at: Date
}

export type PolicyFields = Pick<
  AccessPolicyRow,
  | 'name'
  | 'description'
  | 'action'
  | 'priority'
  | 'application_ids'
  | 'enduser_ids'
  | 'role_ids'
  | 'ip_ranges'
>

export async function insertPolicy(
  db: Queryable,
  row: PolicyFields & Pick<AccessPolicyRow, 'id' | 'tenant_id' | 'created_by'>,
): Promise<AccessPolicyRow> {
  const [created] = await db<AccessPolicyRow[]>`
    INSERT INTO access_policies (id, tenant_id, name, description, action, priority, application_ids,
      enduser_ids, role_ids, ip_ranges, created_by)
    VALUES (${row.id}, ${row.tenant_id}, ${row.name}, ${row.description}, ${row.action}, ${row.priority},
      ${row.application_ids}::uuid[], ${row.enduser_ids}::uuid[], ${row.role_ids}::uuid[], ${row.ip_ranges}::text[],
      ${row.created_by})
    RETURNING *`
  return created!
}

export async function getPolicy(
  db: Queryable,
  tenantId: string,
  id: string,
  options: { lock?: boolean } = {},
): Promise<AccessPolicyRow | undefined> {
  const [row] = await db<AccessPolicyRow[]>`
    SELECT * FROM access_policies WHERE tenant_id = ${tenantId} AND id = ${id}
    ${options.lock ? db`FOR UPDATE` : db``}`
  return row
}

/** Every policy of the tenant in evaluation order. */
export async function policiesInOrder(db: Queryable, tenantId: string): Promise<AccessPolicyRow[]> {
  return db<AccessPolicyRow[]>`
    SELECT * FROM access_policies WHERE tenant_id = ${tenantId} ORDER BY priority`
}

export async function listPolicies(
  db: Queryable,
  tenantId: string,
  page: { limit: number; offset: number },
): Promise<{ rows: AccessPolicyRow[]; total: number }> {
  const rows = await db<AccessPolicyRow[]>`
    SELECT * FROM access_policies WHERE tenant_id = ${tenantId}
    ORDER BY priority LIMIT ${page.limit} OFFSET ${page.offset}`
  const [counted] = await db<{ total: number }[]>`
    SELECT count(*)::int AS total FROM access_policies WHERE tenant_id = ${tenantId}`
  return { rows, total: counted!.total }
}

export async function updatePolicy(
  db: Queryable,
  tenantId: string,
  id: string,
  fields: PolicyFields,
): Promise<AccessPolicyRow | undefined> {
  const [row] = await db<AccessPolicyRow[]>`
    UPDATE access_policies SET name = ${fields.name}, description = ${fields.description},
      action = ${fields.action}, priority = ${fields.priority},
      application_ids = ${fields.application_ids}::uuid[], enduser_ids = ${fields.enduser_ids}::uuid[],
      role_ids = ${fields.role_ids}::uuid[], ip_ranges = ${fields.ip_ranges}::text[], updated_at = now()
    WHERE tenant_id = ${tenantId} AND id = ${id}
    RETURNING *`
  return row
}

export async function deletePolicy(db: Queryable, tenantId: string, id: string): Promise<boolean> {
  const rows = await db`DELETE FROM access_policies WHERE tenant_id = ${tenantId} AND id = ${id} RETURNING id`
  return rows.length > 0
}

export type AccessRequestStatus = 'pending' | 'approved' | 'rejected' | 'expired'

export interface AccessRequestRow {
  id: string
  tenant_id: string
  application_id: string
  account_id: string
  policy_id: string | null
  status: AccessRequestStatus
  source_ip: string | null
  requested_at: Date
  expires_at: Date
  decided_at: Date | null
  decided_by: string | null
  reason: string | null
  access_expires_at: Date | null
  email_dispatch_status: 'queued' | 'sent' | 'failed' | null
  dispatch_error: string | null
}

/** Pending requests of the account and application whose time ran out become `expired`. */
export async function lapsePending(
  db: Queryable,
  input: { applicationId: string; accountId: string; now: Date },
): Promise<void> {
  await db`
    UPDATE access_requests SET status = 'expired'
    WHERE application_id = ${input.applicationId} AND account_id = ${input.accountId}
      AND status = 'pending' AND expires_at <= ${input.now}`
}

/** The newest request of the account for the application that is pending or approved and still in time. */
export async function liveRequest(
  db: Queryable,
  input: { applicationId: string; accountId: string; now: Date },
): Promise<AccessRequestRow | undefined> {
  const [row] = await db<AccessRequestRow[]>`
    SELECT * FROM access_requests
    WHERE application_id = ${input.applicationId} AND account_id = ${input.accountId}
      AND ((status = 'pending' AND expires_at > ${input.now})
        OR (status = 'approved' AND access_expires_at > ${input.now}))
    ORDER BY requested_at DESC LIMIT 1`
  return row
}

/** Inserts a pending request; undefined when another one is already pending (a concurrent sign-in). */
export async function insertRequest(
  db: Queryable,
  row: Pick<
    AccessRequestRow,
    | 'id'
    | 'tenant_id'
    | 'application_id'
    | 'account_id'
    | 'policy_id'
    | 'source_ip'
    | 'requested_at'
    | 'expires_at'
  >,
): Promise<AccessRequestRow | undefined> {
  const [created] = await db<AccessRequestRow[]>`
    INSERT INTO access_requests (id, tenant_id, application_id, account_id, policy_id, status, source_ip,
      requested_at, expires_at)
    VALUES (${row.id}, ${row.tenant_id}, ${row.application_id}, ${row.account_id}, ${row.policy_id}, 'pending',
      ${row.source_ip}, ${row.requested_at}, ${row.expires_at})
    ON CONFLICT (application_id, account_id) WHERE status = 'pending' DO NOTHING
    RETURNING *`
  return created
}

export async function getRequest(
  db: Queryable,
  tenantId: string | undefined,
  id: string,
  options: { lock?: boolean } = {},
): Promise<AccessRequestRow | undefined> {
  const [row] = await db<AccessRequestRow[]>`
    SELECT * FROM access_requests WHERE id = ${id}
    ${tenantId ? db`AND tenant_id = ${tenantId}` : db``}
    ${options.lock ? db`FOR UPDATE` : db``}`
  return row
}

export async function listRequests(
  db: Queryable,
  tenantId: string,
  filter: { status?: AccessRequestStatus | undefined; now: Date },
  page: { limit: number; offset: number },
): Promise<{ rows: AccessRequestRow[]; total: number }> {
  // A pending request past its time is listed as expired, whether or not a sign-in has lapsed it yet.
  const where = !filter.status
    ? db`tenant_id = ${tenantId}`
    : filter.status === 'pending'
      ? db`tenant_id = ${tenantId} AND status = 'pending' AND expires_at > ${filter.now}`
      : filter.status === 'expired'
        ? db`tenant_id = ${tenantId} AND (status = 'expired' OR (status = 'pending' AND expires_at <= ${filter.now}))`
        : db`tenant_id = ${tenantId} AND status = ${filter.status}`
  const rows = await db<AccessRequestRow[]>`
    SELECT * FROM access_requests WHERE ${where}
    ORDER BY requested_at DESC, id LIMIT ${page.limit} OFFSET ${page.offset}`
  const [counted] = await db<{ total: number }[]>`
    SELECT count(*)::int AS total FROM access_requests WHERE ${where}`
  return { rows, total: counted!.total }
}

export async function decideRequest(
  db: Queryable,
  id: string,
  decision: {
    status: 'approved' | 'rejected'
    decidedAt: Date
    decidedBy: string
    reason: string | null
    accessExpiresAt: Date | null
  },
): Promise<AccessRequestRow> {
  const [row] = await db<AccessRequestRow[]>`
    UPDATE access_requests SET status = ${decision.status}, decided_at = ${decision.decidedAt},
      decided_by = ${decision.decidedBy}, reason = ${decision.reason},
      access_expires_at = ${decision.accessExpiresAt}, email_dispatch_status = 'queued', dispatch_error = NULL
    WHERE id = ${id}
    RETURNING *`
  return row!
}

export async function recordRequestEmail(
  db: Queryable,
  id: string,
  outcome: { status: 'sent' | 'failed'; error: string | null },
): Promise<void> {
  await db`
    UPDATE access_requests SET email_dispatch_status = ${outcome.status}, dispatch_error = ${outcome.error}
    WHERE id = ${id}`
}
