import type { Queryable, Sql } from '../data/database.ts'

/**
 * key_last_use, tag_suggestions and tag_suggestion_jobs (migration 0022) and
 * tag_suggestion_turns (0031): only the intelligence module touches them. Keys and rotation
 * policies are read through the module's read model, the view intelligence_key_facts (0031),
 * and nowhere else here. A key's last use is the later of its folded row and the uses the audit
 * feed has not folded yet, which the caller reads in the same snapshot and passes in
 * (`keyedKeys`). (key_use_events, the previous release's meter, is no longer read: 0032.)
 */

/**
 * Folds uses of keys (key-use-meter.ts) into one row per key, a later time winning: in the
 * transaction that moves the feed's position, so each use is folded once, and folding one twice
 * would change nothing anyway.
 */
export async function addKeyUses(
  db: Queryable,
  uses: ReadonlyArray<{ tenant_id: string; key_id: string; attempted_at: Date; succeeded_at: Date | null }>,
): Promise<void> {
  if (uses.length === 0) return
  await db`
    INSERT INTO key_last_use (tenant_id, key_id, last_attempt_at, last_success_at)
    SELECT tenant_id, key_id, max(attempted_at), max(succeeded_at)
    FROM jsonb_to_recordset(${db.json(uses as never)}::jsonb)
      AS u(tenant_id uuid, key_id uuid, attempted_at timestamptz, succeeded_at timestamptz)
    GROUP BY tenant_id, key_id
    ON CONFLICT (tenant_id, key_id) DO UPDATE SET
      last_attempt_at = GREATEST(key_last_use.last_attempt_at, EXCLUDED.last_attempt_at),
      last_success_at = GREATEST(key_last_use.last_success_at, EXCLUDED.last_success_at)`
}

/** A key's attempt not folded yet (the audit feed's), passed into the report statements. */
export interface UnfoldedKeyUse {
  key_id: string
  attempted_at: Date
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
  status: 'running' | 'completed' | 'failed'
  key_ids: string[]
  batch_size: number
  batches_done: number
  /** Failed attempts at the current batch (migration 0031); 0 again once a batch commits. */
  batch_failures: number
  suggestions_created: number
  engine: string | null
  lease_until: Date | null
  created_at: Date
  created_by: string
  finished_at: Date | null
  /** Why the job failed. */
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

/**
 * A running job no other worker holds, leased to this one, taken fairly across tenants (issue
 * 31): the job of the tenant whose last claim is the oldest (a tenant never served first), the
 * tenant's oldest job first; the claim stamps the tenant's turn in the same statement. A worker
 * claims for one batch at a time, so a tenant with a long job gets every other batch at most
 * while others wait, never the whole run. (Ordering by the job's age alone let the oldest job,
 * and one that failed on every claim, hold the sweep.)
 */
export async function claimJob(db: Queryable, now: Date, leaseUntil: Date): Promise<JobRow | undefined> {
  const [row] = await db<JobRow[]>`
    WITH picked AS (
      SELECT j.id FROM tag_suggestion_jobs j
      LEFT JOIN tag_suggestion_turns t ON t.tenant_id = j.tenant_id
      WHERE j.status = 'running' AND (j.lease_until IS NULL OR j.lease_until <= ${now})
      ORDER BY t.served NULLS FIRST, j.created_at, j.id
      LIMIT 1 FOR UPDATE OF j SKIP LOCKED
    ), claimed AS (
      UPDATE tag_suggestion_jobs j SET lease_until = ${leaseUntil} FROM picked WHERE j.id = picked.id
      RETURNING j.*
    ), turn AS (
      INSERT INTO tag_suggestion_turns (tenant_id, served)
      SELECT tenant_id, nextval('tag_suggestion_turn_seq') FROM claimed
      ON CONFLICT (tenant_id) DO UPDATE SET served = EXCLUDED.served
    )
    SELECT * FROM claimed`
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
    SET batches_done = batches_done + 1, batch_failures = 0, error = NULL,
      suggestions_created = suggestions_created + ${input.created},
      engine = ${input.engine}, status = ${input.finished ? 'completed' : 'running'},
      finished_at = ${input.finished}, lease_until = CASE WHEN ${input.finished !== null} THEN NULL ELSE lease_until END
    WHERE id = ${input.id} AND lease_until = ${input.leaseUntil} AND batches_done = ${input.batchesDone}
    RETURNING *`
  return row
}

export async function releaseJob(db: Queryable, id: string, leaseUntil: Date): Promise<void> {
  await db`UPDATE tag_suggestion_jobs SET lease_until = NULL WHERE id = ${id} AND lease_until = ${leaseUntil}`
}

/**
 * A failed attempt at the job's current batch, under this worker's lease: the job waits until
 * `retryAt` (the lease is kept until then, so no worker takes it at once), or, at the
 * `maxFailures`th failure, is `failed` with `error`. Undefined when the lease was lost.
 */
export async function failBatch(
  db: Queryable,
  input: {
    id: string
    leaseUntil: Date
    batchesDone: number
    maxFailures: number
    error: string
    now: Date
    retryAt: Date
  },
): Promise<JobRow | undefined> {
  const [row] = await db<JobRow[]>`
    UPDATE tag_suggestion_jobs
    SET batch_failures = batch_failures + 1,
      status = CASE WHEN batch_failures + 1 >= ${input.maxFailures} THEN 'failed' ELSE status END,
      error = ${input.error},
      finished_at = CASE WHEN batch_failures + 1 >= ${input.maxFailures} THEN ${input.now}::timestamptz END,
      lease_until = CASE WHEN batch_failures + 1 >= ${input.maxFailures} THEN NULL ELSE ${input.retryAt}::timestamptz END
    WHERE id = ${input.id} AND lease_until = ${input.leaseUntil} AND batches_done = ${input.batchesDone}
      AND status = 'running'
    RETURNING *`
  return row
}

/**
 * The insights report (issue 31, defect 6), computed by PostgreSQL from the read model
 * `intelligence_key_facts` (migration 0031: keys and their rotation policies) and this module's
 * last-use tables, in one statement whose answer is bounded whatever the tenant's size: per
 * finding a count and the first `maxListed` keys by name, and at most `maxGroups` groups of keys
 * that share a purpose. The service's process does no work per key, so a large tenant's report
 * costs the event loop what a small one's does. Every step is a scan, a hash aggregate or a hash
 * join over the tenant's keys (or their words): linear, no pair of keys is ever compared.
 */
export interface InsightCriteria {
  now: Date
  /** An expired key's last attempt at or after this is recent (expired_key_in_use). */
  expiredInUseSince: Date
  /** Active keys expiring at or before this (expiring_soon). */
  expiringBy: Date
  /** Policies paused before this (rotation_paused_too_long). */
  pausedBefore: Date
  /** Keys last used (or, never used, created) at or before this (unused_key). */
  unusedSince: Date
  weakAlgorithms: readonly string[]
  /** Classical algorithms, and the key types that have a post-quantum counterpart. */
  classicalAlgorithms: readonly string[]
  typesWithCounterpart: readonly string[]
  /** Words too common to say two keys share a purpose. */
  genericWords: readonly string[]
  maxListed: number
  maxGroups: number
}

export interface InsightHitRow {
  code: string
  /** The algorithm of a weak_algorithm finding; null otherwise. */
  variant: string | null
  count: number
  keys: Array<{ id: string; name: string }>
}

export interface PurposeGroupRow {
  keyType: string
  algorithm: string
  /** `label:<label>` or a word. */
  mark: string
  count: number
  /** The group's first and last key by name: [name, id]. */
  first: [string, string]
  last: [string, string]
}

export interface InsightRows {
  /** Keys whose findings were evaluated: the tenant's, or the one key of a key's report. */
  examined: number
  findings: InsightHitRow[]
  groups: PurposeGroupRow[]
}

/**
 * A key's significant-word candidates, as the SQL array of its name and description split on
 * camelCase and on anything but ASCII letters and digits, lower-cased (the caller drops short,
 * numeric and generic words). Patterns are parameters: no backslash escaping in the SQL text.
 */
const wordsOf = (db: Queryable, alias: string) =>
  db`string_to_array(lower(regexp_replace(regexp_replace(${db(alias)}.name || ' ' || ${db(alias)}.description,
    ${'([a-z0-9])([A-Z])'}, ${'\\1 \\2'}, 'g'), ${'[^A-Za-z0-9]+'}, ' ', 'g') COLLATE "C"), ' ')`

/** Word `w` counts for a purpose: 3+ characters, not only digits, not generic. */
const significant = (db: Queryable, word: string, c: InsightCriteria) =>
  db`length(${db(word)}) >= 3 AND ${db(word)} !~ '^[0-9]+$' AND NOT (${db(word)} = ANY(${c.genericWords as string[]}::text[]))`

/**
 * keyState(key, now) === 'Active' / 'Expired' (key-state.ts), from the read model's timestamps
 * (activeAt and expiredAt are exported for test/intelligence/insights.test.ts, which compares them with
 * keyState() on every combination).
 */
const live = (db: Queryable, alias: string) =>
  db`(${db(alias)}.destroyed_at IS NULL AND ${db(alias)}.scheduled_deletion_date IS NULL AND ${db(alias)}.revoked_at IS NULL)`
export const activeAt = (db: Queryable, alias: string, now: Date) =>
  db`(${live(db, alias)} AND (${db(alias)}.expires_at IS NULL OR ${db(alias)}.expires_at > ${now}))`
export const expiredAt = (db: Queryable, alias: string, now: Date) =>
  db`(${live(db, alias)} AND ${db(alias)}.expires_at IS NOT NULL AND ${db(alias)}.expires_at <= ${now})`

/**
 * The keys examined with their last attempt and state: the tenant's, or one key. `unfolded`: the
 * attempts the audit feed has not folded into key_last_use yet, read in the same snapshot.
 */
function keyedKeys(
  db: Queryable,
  tenantId: string,
  keyId: string | null,
  now: Date,
  unfolded: readonly UnfoldedKeyUse[],
) {
  const one = (column: string) => (keyId ? db`AND ${db(column)} = ${keyId}` : db``)
  return db`
    SELECT f.id, f.name, f.description, f.key_type, f.algorithm, f.labels, f.created_at, f.expires_at,
      f.has_rotation_policy, f.rotation_paused_at, u.last_attempt_at,
      ${activeAt(db, 'f', now)} AS active, ${expiredAt(db, 'f', now)} AS expired
    FROM intelligence_key_facts f
    LEFT JOIN (
      SELECT key_id, max(attempted_at) AS last_attempt_at FROM (
        SELECT key_id, last_attempt_at AS attempted_at FROM key_last_use WHERE tenant_id = ${tenantId} ${one('key_id')}
        UNION ALL
        SELECT key_id, attempted_at FROM jsonb_to_recordset(${db.json(unfolded as never)}::jsonb)
          AS e(key_id uuid, attempted_at timestamptz) WHERE true ${one('key_id')}
      ) uses GROUP BY key_id
    ) u ON u.key_id = f.id
    WHERE f.tenant_id = ${tenantId} ${keyId ? db`AND f.id = ${keyId}` : db``}`
}

/** One row (code, variant, id, name) per key and finding, every finding but duplicate_purpose. */
function keyFindings(db: Queryable, c: InsightCriteria) {
  return db`
    SELECT 'expired_key_in_use'::text AS code, NULL::text AS variant, id, name FROM keyed
      WHERE expired AND last_attempt_at > expires_at AND last_attempt_at >= ${c.expiredInUseSince}
    UNION ALL
    SELECT 'weak_algorithm', algorithm, id, name FROM keyed
      WHERE active AND algorithm = ANY(${c.weakAlgorithms as string[]}::text[])
    UNION ALL
    SELECT 'no_rotation_policy', NULL, id, name FROM keyed WHERE active AND NOT has_rotation_policy
    UNION ALL
    SELECT 'expiring_soon', NULL, id, name FROM keyed WHERE active AND expires_at <= ${c.expiringBy}
    UNION ALL
    SELECT 'rotation_paused_too_long', NULL, id, name FROM keyed
      WHERE active AND rotation_paused_at < ${c.pausedBefore}
    UNION ALL
    SELECT 'unused_key', NULL, id, name FROM keyed
      WHERE active AND coalesce(last_attempt_at, created_at) <= ${c.unusedSince}
    UNION ALL
    SELECT 'post_quantum_candidate', NULL, id, name FROM keyed
      WHERE active AND key_type = ANY(${c.typesWithCounterpart as string[]}::text[])
        AND algorithm = ANY(${c.classicalAlgorithms as string[]}::text[])
    UNION ALL
    SELECT 'untagged_key', NULL, id, name FROM keyed WHERE active AND cardinality(labels) = 0`
}

/**
 * The tenant's report statement (not yet run: tests EXPLAIN it). Duplicate purpose by grouping:
 * every active key contributes one mark per label (`label:x`) and per significant word of its
 * name and description, each once (its first occurrence in the key's list: no hash of every
 * (key, mark) pair is needed); marks are grouped by (type, algorithm, mark), and a key belongs to
 * the finding when one of its marks has a group of two keys or more. That is exactly "shares a
 * label or a word with another key of its type and algorithm", found without comparing pairs.
 * The words are computed once per key (OFFSET 0 keeps the planner from inlining them into each
 * reference).
 */
export function tenantInsightQuery(
  db: Queryable,
  tenantId: string,
  c: InsightCriteria,
  unfolded: readonly UnfoldedKeyUse[] = [],
) {
  return db<[{ examined: number; findings: InsightHitRow[]; groups: PurposeGroupRow[] }]>`
    WITH keyed AS MATERIALIZED (${keyedKeys(db, tenantId, null, c.now, unfolded)}),
    marks AS MATERIALIZED (
      SELECT k.id, k.key_type, k.algorithm, 'label:' || l AS mark
      FROM keyed k CROSS JOIN LATERAL unnest(k.labels) WITH ORDINALITY AS t(l, i)
      WHERE k.active AND array_position(k.labels, l) = i
      UNION ALL
      SELECT k.id, k.key_type, k.algorithm, w
      FROM keyed k
      CROSS JOIN LATERAL (SELECT ${wordsOf(db, 'k')} AS words OFFSET 0) a
      CROSS JOIN LATERAL unnest(a.words) WITH ORDINALITY AS t(w, i)
      WHERE k.active AND ${significant(db, 'w', c)} AND array_position(a.words, w) = i
    ),
    shared AS MATERIALIZED (
      SELECT key_type, algorithm, mark, count(*)::int AS n
      FROM marks GROUP BY key_type, algorithm, mark HAVING count(*) >= 2
    ),
    largest AS (
      SELECT * FROM shared ORDER BY n DESC, key_type, algorithm, mark COLLATE "C" LIMIT ${c.maxGroups}
    ),
    hits AS MATERIALIZED (
      ${keyFindings(db, c)}
      UNION ALL
      SELECT 'duplicate_purpose'::text, NULL::text, k.id, k.name FROM keyed k
      WHERE EXISTS (
        SELECT 1 FROM marks m WHERE m.id = k.id AND EXISTS (
          SELECT 1 FROM shared s WHERE s.key_type = m.key_type AND s.algorithm = m.algorithm AND s.mark = m.mark))
    ),
    counted AS (SELECT code, variant, count(*)::int AS n FROM hits GROUP BY code, variant)
    SELECT
      (SELECT count(*)::int FROM keyed) AS examined,
      (SELECT coalesce(json_agg(json_build_object('code', c.code, 'variant', c.variant, 'count', c.n,
          'keys', listed.keys)), '[]'::json)
       FROM counted c CROSS JOIN LATERAL (
         SELECT coalesce(json_agg(json_build_object('id', t.id, 'name', t.name) ORDER BY t.name COLLATE "C", t.id),
           '[]'::json) AS keys
         FROM (
           SELECT h.id, h.name FROM hits h WHERE h.code = c.code AND h.variant IS NOT DISTINCT FROM c.variant
           ORDER BY h.name COLLATE "C", h.id LIMIT ${c.maxListed}
         ) t
       ) listed) AS findings,
      (SELECT coalesce(json_agg(json_build_object('keyType', g.key_type, 'algorithm', g.algorithm, 'mark', g.mark,
          'count', g.n, 'first', g.first, 'last', g.last) ORDER BY g.n DESC, g.key_type, g.algorithm,
          g.mark COLLATE "C"), '[]'::json)
       FROM (
         SELECT g.key_type, g.algorithm, g.mark, g.n,
           min(ARRAY[k.name, k.id::text] COLLATE "C") AS first, max(ARRAY[k.name, k.id::text] COLLATE "C") AS last
         FROM largest g JOIN marks m USING (key_type, algorithm, mark) JOIN keyed k ON k.id = m.id
         GROUP BY g.key_type, g.algorithm, g.mark, g.n
       ) g) AS groups`
}

/**
 * One key's findings only: the per-key rules on that key's row, and for duplicate purpose one
 * probe for another active key of its type and algorithm sharing a label or a word (LIMIT 1: it
 * stops at the first; a substring match prefilters the candidates before their words are
 * computed). Nothing is computed for the tenant's other keys.
 */
export function keyInsightQuery(
  db: Queryable,
  tenantId: string,
  keyId: string,
  c: InsightCriteria,
  unfolded: readonly UnfoldedKeyUse[] = [],
) {
  return db<[{ examined: number; findings: InsightHitRow[]; groups: PurposeGroupRow[] }]>`
    WITH keyed AS MATERIALIZED (${keyedKeys(db, tenantId, keyId, c.now, unfolded)}),
    hits AS (
      ${keyFindings(db, c)}
      UNION ALL
      SELECT 'duplicate_purpose', NULL, k.id, k.name
      FROM keyed k CROSS JOIN LATERAL (
        SELECT coalesce(array_agg(DISTINCT w), '{}') AS words
        FROM unnest(${wordsOf(db, 'k')}) AS w WHERE ${significant(db, 'w', c)}
      ) mine
      CROSS JOIN LATERAL (
        SELECT 1 FROM intelligence_key_facts o
        WHERE o.tenant_id = ${tenantId} AND o.id <> k.id AND o.key_type = k.key_type AND o.algorithm = k.algorithm
          AND ${activeAt(db, 'o', c.now)}
          AND (o.labels && k.labels OR (
            (o.name || ' ' || o.description) ILIKE ANY (SELECT '%' || w || '%' FROM unnest(mine.words) AS w)
            AND ${wordsOf(db, 'o')} && mine.words))
        LIMIT 1
      ) another
      WHERE k.active
    )
    SELECT
      (SELECT count(*)::int FROM keyed) AS examined,
      (SELECT coalesce(json_agg(json_build_object('code', code, 'variant', variant, 'count', 1,
          'keys', json_build_array(json_build_object('id', id, 'name', name)))), '[]'::json) FROM hits) AS findings,
      '[]'::json AS groups`
}

/**
 * The settings a report statement runs with, local to its transaction: its own statement bound
 * (the pool's is sized for the short writes of the request path); JIT off (on an early version of
 * the statement at 100,000 keys it spent 0.7 s compiling, for work that is string functions and
 * hashing, not expressions JIT speeds up); room for the hash aggregates. For the tenant's report
 * also no nested loops where a hash join can be had: the planner's row estimates for CTEs are
 * guesses (1 or 2 rows for tens of thousands), and a nested loop that rescans a CTE per row of
 * another is quadratic (10,000 keys of one purpose, before statistics existed, ran into the 30 s
 * bound instead of taking about 1 s). Nested loops remain where nothing else can run: over each
 * key's words (LATERAL unnest) and the bounded top-N lists.
 */
export async function applyInsightSettings(
  tx: Queryable,
  options: { statementTimeoutMs: number; tenantWide: boolean },
): Promise<void> {
  await tx`SELECT set_config('statement_timeout', ${String(options.statementTimeoutMs)}, true),
    set_config('jit', 'off', true), set_config('work_mem', '32MB', true),
    set_config('enable_nestloop', ${options.tenantWide ? 'off' : 'on'}, true)`
}

/**
 * Runs a report statement read-only, with applyInsightSettings, in one REPEATABLE READ snapshot:
 * `query` may read the audit feed's uses not folded yet first (the snapshot key_last_use is read
 * in, so a fold between the two reads neither hides nor repeats a use).
 */
export async function runInsightQuery(
  sql: Sql,
  options: { statementTimeoutMs: number; tenantWide: boolean },
  query: (tx: Queryable) => Promise<readonly unknown[]>,
): Promise<InsightRows> {
  return sql.begin('isolation level repeatable read read only', async (tx) => {
    await applyInsightSettings(tx, options)
    const [row] = await query(tx)
    return row as InsightRows
  }) as Promise<InsightRows>
}
