import type { Queryable } from '../platform/database.ts'

/**
 * key_use_events, key_last_use, tag_suggestions and tag_suggestion_jobs (migration 0022): only
 * the intelligence module touches them.
 */
export interface LastUse {
  key_id: string
  last_attempt_at: Date
  last_success_at: Date | null
}

/** Each key's last use: the folded row and the events not folded yet, whichever is later. */
export async function lastUseOf(db: Queryable, tenantId: string): Promise<LastUse[]> {
  return db<LastUse[]>`
    SELECT key_id, max(last_attempt_at) AS last_attempt_at, max(last_success_at) AS last_success_at
    FROM (
      SELECT key_id, last_attempt_at, last_success_at FROM key_last_use WHERE tenant_id = ${tenantId}
      UNION ALL
      SELECT key_id, attempted_at, succeeded_at FROM key_use_events WHERE tenant_id = ${tenantId}
    ) uses
    GROUP BY key_id`
}

/**
 * Folds the appended events into one row per key, in one statement: the rows it deletes are
 * exactly the rows it folds (the statement's snapshot), so a concurrent append is folded next time.
 */
export async function foldKeyUse(db: Queryable): Promise<number> {
  const rows = await db`
    WITH moved AS (DELETE FROM key_use_events RETURNING *),
    folded AS (
      SELECT tenant_id, key_id, max(attempted_at) AS attempted_at, max(succeeded_at) AS succeeded_at
      FROM moved GROUP BY tenant_id, key_id
    )
    INSERT INTO key_last_use (tenant_id, key_id, last_attempt_at, last_success_at)
    SELECT tenant_id, key_id, attempted_at, succeeded_at FROM folded
    ON CONFLICT (tenant_id, key_id) DO UPDATE SET
      last_attempt_at = GREATEST(key_last_use.last_attempt_at, EXCLUDED.last_attempt_at),
      last_success_at = GREATEST(key_last_use.last_success_at, EXCLUDED.last_success_at)
    RETURNING key_id`
  return rows.length
}

export interface SuggestionRow {
  id: string
  tenant_id: string
  key_id: string
  label: string
  reason: string
  engine: 'builtin' | 'model'
  status: 'pending' | 'accepted' | 'rejected'
  job_id: string | null
  created_at: Date
  decided_at: Date | null
  decided_by: string | null
}

/** New suggestions; one per key and label ever (a rerun adds nothing twice). */
export async function insertSuggestions(
  db: Queryable,
  rows: ReadonlyArray<Omit<SuggestionRow, 'status' | 'decided_at' | 'decided_by'>>,
): Promise<SuggestionRow[]> {
  if (rows.length === 0) return []
  return db<SuggestionRow[]>`
    INSERT INTO tag_suggestions (id, tenant_id, key_id, label, reason, engine, status, job_id, created_at)
    SELECT id, tenant_id, key_id, label, reason, engine, 'pending', job_id, created_at
    FROM jsonb_to_recordset(${db.json(rows as never)}::jsonb) AS s(id uuid, tenant_id uuid, key_id uuid,
      label text, reason text, engine text, job_id uuid, created_at timestamptz)
    ON CONFLICT (tenant_id, key_id, label) DO NOTHING
    RETURNING *`
}

export async function listSuggestions(
  db: Queryable,
  tenantId: string,
  filter: { keyId?: string; status?: SuggestionRow['status'] },
  page: { limit: number; offset: number },
): Promise<{ rows: SuggestionRow[]; total: number }> {
  const where = db`tenant_id = ${tenantId}
    ${filter.keyId ? db`AND key_id = ${filter.keyId}` : db``}
    ${filter.status ? db`AND status = ${filter.status}` : db``}`
  const rows = await db<SuggestionRow[]>`
    SELECT * FROM tag_suggestions WHERE ${where} ORDER BY created_at DESC, id LIMIT ${page.limit} OFFSET ${page.offset}`
  const [counted] = await db<
    { total: number }[]
  >`SELECT count(*)::int AS total FROM tag_suggestions WHERE ${where}`
  return { rows, total: counted!.total }
}

export async function getSuggestion(
  db: Queryable,
  tenantId: string,
  id: string,
): Promise<SuggestionRow | undefined> {
  const [row] = await db<
    SuggestionRow[]
  >`SELECT * FROM tag_suggestions WHERE tenant_id = ${tenantId} AND id = ${id}`
  return row
}

/** Decides pending suggestions of the tenant (all, a key's, or one): only pending ones change. */
export async function decideSuggestions(
  db: Queryable,
  tenantId: string,
  where: { id?: string; keyId?: string; ids?: readonly string[] },
  decision: { status: 'accepted' | 'rejected'; at: Date; by: string },
): Promise<SuggestionRow[]> {
  return db<SuggestionRow[]>`
    UPDATE tag_suggestions SET status = ${decision.status}, decided_at = ${decision.at}, decided_by = ${decision.by}
    WHERE tenant_id = ${tenantId} AND status = 'pending'
      ${where.id ? db`AND id = ${where.id}` : db``}
      ${where.keyId ? db`AND key_id = ${where.keyId}` : db``}
      ${where.ids ? db`AND id = ANY(${where.ids as string[]}::uuid[])` : db``}
    RETURNING *`
}

export interface JobRow {
  id: string
  tenant_id: string
  status: 'running' | 'completed'
  key_ids: string[]
  batch_size: number
  batches_done: number
  suggestions_created: number
  engine: string | null
  lease_until: Date | null
  created_at: Date
  created_by: string
  finished_at: Date | null
  error: string | null
}

export async function insertJob(
  db: Queryable,
  row: Pick<JobRow, 'id' | 'tenant_id' | 'key_ids' | 'batch_size' | 'created_at' | 'created_by'>,
): Promise<JobRow> {
  const [created] = await db<JobRow[]>`
    INSERT INTO tag_suggestion_jobs (id, tenant_id, status, key_ids, batch_size, created_at, created_by)
    VALUES (${row.id}, ${row.tenant_id}, 'running', ${row.key_ids}::uuid[], ${row.batch_size}, ${row.created_at},
      ${row.created_by})
    RETURNING *`
  return created!
}

export async function getJob(db: Queryable, tenantId: string, id: string): Promise<JobRow | undefined> {
  const [row] = await db<
    JobRow[]
  >`SELECT * FROM tag_suggestion_jobs WHERE tenant_id = ${tenantId} AND id = ${id}`
  return row
}

/** A running job no other worker holds, leased to this one. */
export async function claimJob(db: Queryable, now: Date, leaseUntil: Date): Promise<JobRow | undefined> {
  const [row] = await db<JobRow[]>`
    UPDATE tag_suggestion_jobs SET lease_until = ${leaseUntil}
    WHERE id = (
      SELECT id FROM tag_suggestion_jobs
      WHERE status = 'running' AND (lease_until IS NULL OR lease_until <= ${now})
      ORDER BY created_at LIMIT 1 FOR UPDATE SKIP LOCKED)
    RETURNING *`
  return row
}

/**
 * One batch done: counted only if the job is still at `batchesDone` under this lease (a worker
 * that lost its lease, or a batch already counted, changes nothing).
 */
export async function advanceJob(
  db: Queryable,
  input: {
    id: string
    leaseUntil: Date
    batchesDone: number
    created: number
    engine: string
    finished: Date | null
  },
): Promise<JobRow | undefined> {
  const [row] = await db<JobRow[]>`
    UPDATE tag_suggestion_jobs
    SET batches_done = batches_done + 1, suggestions_created = suggestions_created + ${input.created},
      engine = ${input.engine}, status = ${input.finished ? 'completed' : 'running'},
      finished_at = ${input.finished}, lease_until = CASE WHEN ${input.finished !== null} THEN NULL ELSE lease_until END
    WHERE id = ${input.id} AND lease_until = ${input.leaseUntil} AND batches_done = ${input.batchesDone}
    RETURNING *`
  return row
}

export async function releaseJob(db: Queryable, id: string, leaseUntil: Date): Promise<void> {
  await db`UPDATE tag_suggestion_jobs SET lease_until = NULL WHERE id = ${id} AND lease_until = ${leaseUntil}`
}
