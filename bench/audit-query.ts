/**
 * The audit log at 10M records (issue 33, part 2: a lean durable audit write): GET /api/v1/audit's
 * queries and the audit write's cost, before and after migration 0032, on the same data.
 *
 * Fills a throwaway database with ROWS audit records (default 10,000,000: generate_series, a few
 * minutes) over the last 90 days: one large tenant (~41% of the records), four medium ones
 * (~10% each) and 200 small ones (~0.1% each); 99.4% cryptographic operations (decrypt 35%,
 * encrypt 30%, mac 10%, ... unwrap 0.9%), the rest key and API-key administration (keys.create
 * 0.1%, apikeys.revoke 0.01%), 2% refusals. Then, on three schemas in turn:
 *
 *  - before: migrations up to 0031 (the (tenant_id, id), (tenant_id, action, id) and
 *    (tenant_id, occurred_at) indexes), with the code of the time (listAuditEntries and the
 *    audit insert with the usage and key-use meters' CTEs, copied below as they were);
 *  - after: migration 0032 applied (time index dropped, audit_time_map folded by the audit
 *    sweep over all records, no parallel scans), with the current code;
 *  - after, without the action index: what that index buys and costs.
 *
 * It measures each query of GET /audit's (listAuditEntries, limit 101 as the route asks for a
 * page of 100) by its median time over ROUNDS runs after a warm-up, on each schema. Then the
 * write's PostgreSQL CPU per record (the backend's user + system time from /proc/<pid>/stat, pid
 * from pg_backend_pid(): a local server) at batches of 1, 16 and 64 records (three tenants of
 * their own, two keys each, five cryptographic actions), each batch its own transaction as the
 * group commit writes it, with this process's CPU per record beside it: the statement with the
 * meters and the records-only one on the 0031 indexes, the records-only one on 0032's and
 * without the action index, alternated in WRITE_ROUNDS rounds on the same table (the indexes
 * are built again for each round), medians. And what the sweeps' folds cost (PostgreSQL CPU per record folded).
 * The database is dropped at the end, and on Ctrl-C.
 *
 *   node bench/audit-query.ts          (ROWS=1000000 ROUNDS=9 WRITE_ROUNDS=3 to change)
 */
import { readFileSync } from 'node:fs'
import { performance } from 'node:perf_hooks'
import postgres from 'postgres'
import { createAuditFeed } from '../src/audit/audit-feed.ts'
import {
  type AuditEntry,
  type AuditFilter,
  insertAuditEntries,
  listAuditEntries,
} from '../src/audit/audit-store.ts'
import type { Queryable, Sql } from '../src/data/database.ts'
import { loadMigrations, migrate } from '../src/data/migrations.ts'
import { createTestDatabase } from '../test/helpers/service.ts'

const ROWS = Number(process.env['ROWS'] ?? 10_000_000)
const ROUNDS = Number(process.env['ROUNDS'] ?? 9)
const CHUNK_ROWS = 1_000_000
const DAY_MS = 24 * 60 * 60_000
const LIMIT = 101

const db = await createTestDatabase()
let dropped = false
async function dropDatabase() {
  if (dropped) return
  dropped = true
  await db.drop()
}
for (const signal of ['SIGINT', 'SIGTERM'] as const)
  process.once(signal, () => {
    console.log(`\n${signal}: dropping ${db.name}`)
    void dropDatabase().finally(() => process.exit(130))
  })

const sql = postgres(db.url, {
  max: 1,
  onnotice: () => {},
  connection: { application_name: 'audit-query-bench' },
})
const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`
const median = (samples: number[]) => [...samples].sort((a, b) => a - b)[Math.floor(samples.length / 2)]!

async function timed<T>(run: () => Promise<T>): Promise<{ ms: number; result: T }> {
  const started = performance.now()
  const result = await run()
  return { ms: performance.now() - started, result }
}

/** CPU seconds (user + system) of a local process, from /proc (USER_HZ: 100 ticks a second). */
function cpuSecondsOf(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
  return (Number(fields[11]) + Number(fields[12])) / 100
}

// ---------------------------------------------------------------------------------------------
// The code before 0032, as it was (src/audit/audit-store.ts, src/billing/usage-meter.ts and
// src/intelligence/key-use-meter.ts at 86ca5cb): the list query, and the insert with the meters.

async function listBefore(db: Queryable, tenantId: string, filter: AuditFilter) {
  const conditions = [db`tenant_id = ${tenantId}`]
  if (filter.action) conditions.push(db`action = ${filter.action}`)
  if (filter.resource) conditions.push(db`resource = ${filter.resource}`)
  if (filter.outcome) conditions.push(db`outcome = ${filter.outcome}`)
  if (filter.from) conditions.push(db`occurred_at >= ${filter.from}`)
  if (filter.to) conditions.push(db`occurred_at < ${filter.to}`)
  if (filter.before) conditions.push(db`id < ${filter.before}`)
  const where = conditions.reduce((acc, c) => db`${acc} AND ${c}`)
  return db`
    SELECT id::text AS id, tenant_id, occurred_at, actor, action, resource, key_version, outcome,
           request_id, client_ip, details
    FROM audit_log WHERE ${where} ORDER BY audit_log.id DESC LIMIT ${filter.limit}`
}

type MeterRecord = {
  tenant_id: string
  occurred_at: Date
  action: string
  resource: string | null
  outcome: string
  details: AuditEntry['details']
}

function usageMeterBefore(db: Queryable, records: MeterRecord[]) {
  let counts: Map<string, { tenant_id: string; period: string; kind: string; count: number }> | undefined
  for (const record of records) {
    if (record.outcome !== 'success' || !record.action.startsWith('crypto.')) continue
    const batch = record.action.endsWith('_batch')
    const kind = record.action.slice('crypto.'.length, batch ? -'_batch'.length : undefined)
    const items = batch ? Number(record.details?.['items'] ?? 0) : 1
    if (!(items > 0)) continue
    const period = record.occurred_at.toISOString().slice(0, 7)
    const key = `${record.tenant_id}|${period}|${kind}`
    counts ??= new Map()
    const entry = counts.get(key)
    if (entry) entry.count += items
    else counts.set(key, { tenant_id: record.tenant_id, period, kind, count: items })
  }
  if (!counts) return undefined
  return db`metered AS (
      INSERT INTO usage_counters (tenant_id, period, kind, count)
      SELECT tenant_id, period, kind, count
      FROM jsonb_to_recordset(${db.json([...counts.values()])}::jsonb) AS m(tenant_id uuid, period text, kind text, count bigint)
    )`
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i
function keyUseMeterBefore(db: Queryable, records: MeterRecord[]) {
  let uses:
    | Map<string, { tenant_id: string; key_id: string; attempted_at: Date; succeeded_at: Date | null }>
    | undefined
  for (const record of records) {
    if (!record.action.startsWith('crypto.') || !record.resource?.startsWith('key:')) continue
    const keyId = record.resource.slice('key:'.length)
    if (!UUID.test(keyId)) continue
    const id = `${record.tenant_id}|${keyId}`
    uses ??= new Map()
    const use = uses.get(id)
    const succeeded = record.outcome === 'success' ? record.occurred_at : null
    if (!use)
      uses.set(id, {
        tenant_id: record.tenant_id,
        key_id: keyId,
        attempted_at: record.occurred_at,
        succeeded_at: succeeded,
      })
    else {
      if (record.occurred_at > use.attempted_at) use.attempted_at = record.occurred_at
      if (succeeded && (!use.succeeded_at || succeeded > use.succeeded_at)) use.succeeded_at = succeeded
    }
  }
  if (!uses) return undefined
  return db`used AS (
      INSERT INTO key_use_events (tenant_id, key_id, attempted_at, succeeded_at)
      SELECT tenant_id, key_id, attempted_at, succeeded_at
      FROM jsonb_to_recordset(${db.json([...uses.values()] as never)}::jsonb)
        AS u(tenant_id uuid, key_id uuid, attempted_at timestamptz, succeeded_at timestamptz)
    )`
}

async function insertBefore(db: Queryable, entries: readonly AuditEntry[]) {
  const now = new Date()
  const records = entries.map((e) => ({
    tenant_id: e.tenantId,
    occurred_at: e.occurredAt ?? now,
    actor: e.actor,
    action: e.action,
    resource: e.resource ?? null,
    key_version: e.keyVersion ?? null,
    outcome: e.outcome,
    request_id: e.requestId ?? null,
    client_ip: e.clientIp ?? null,
    details: e.details ?? null,
  }))
  const clauses = [usageMeterBefore(db, records), keyUseMeterBefore(db, records)].flatMap((c) => c ?? [])
  const withClause =
    clauses.length === 0
      ? db``
      : clauses.slice(1).reduce((all, clause) => db`${all}, ${clause}`, db`WITH ${clauses[0]!}`)
  await db`
    ${withClause}
    INSERT INTO audit_log (tenant_id, occurred_at, actor, action, resource, key_version, outcome,
                           request_id, client_ip, details)
    SELECT tenant_id, occurred_at, actor, action, resource, key_version, outcome, request_id, client_ip,
           details
    FROM jsonb_to_recordset(${db.json(records)}::jsonb) AS r(
      tenant_id uuid, occurred_at timestamptz, actor text, action text, resource text,
      key_version integer, outcome text, request_id text, client_ip text, details jsonb)`
}

// ---------------------------------------------------------------------------------------------
// The data.

const tenantOf = (name: string) => `md5('bench-tenant-${name}')::uuid`

/** The secondary indexes of 0031 by name: CREATE INDEX statements (pg_indexes.indexdef). */
const indexesBefore = new Map<string, string>()

async function fill(): Promise<void> {
  const spanMs = 90 * DAY_MS
  const start = new Date(Date.now() - spanMs)
  const stepUs = (spanMs * 1000) / ROWS
  // The secondary indexes are built after the fill (the same definitions): minutes, not hours.
  const indexes = await sql<{ name: string; definition: string }[]>`
    SELECT indexname AS name, indexdef AS definition FROM pg_indexes
    WHERE tablename = 'audit_log' AND indexname <> 'audit_log_pkey'`
  for (const index of indexes) {
    indexesBefore.set(index.name, index.definition)
    await sql.unsafe(`DROP INDEX ${index.name}`)
  }
  await sql`SET maintenance_work_mem = '1GB'`
  for (let from = 1; from <= ROWS; from += CHUNK_ROWS) {
    const to = Math.min(ROWS, from + CHUNK_ROWS - 1)
    const { ms } = await timed(() =>
      sql.unsafe(
        `
      INSERT INTO audit_log (tenant_id, occurred_at, actor, action, resource, key_version, outcome,
                             request_id, client_ip, details)
      SELECT t.tenant, $1::timestamptz + (g * $2::float8 + (g * 7919) % 20000) * interval '1 microsecond',
        'apikey:' || md5(t.tenant::text || (g % 5))::uuid,
        a.action,
        CASE WHEN a.action LIKE 'apikeys.%' THEN 'apikey:' || md5(g::text)::uuid
             ELSE 'key:' || md5(t.tenant::text || ((g / 7) % t.keys))::uuid END,
        1 + g % 3, o.outcome, md5(g::text)::uuid::text, '10.0.' || (g % 256) || '.' || ((g / 256) % 256),
        CASE WHEN o.outcome <> 'success' THEN '{"error": "decryption_failed"}'::jsonb
             WHEN a.action LIKE '%\\_batch' THEN jsonb_build_object('items', 10 + g % 50) END
      FROM generate_series(${from}::bigint, ${to}::bigint) AS g
      CROSS JOIN LATERAL (SELECT (hashint8(g) & 1023) % 1000 AS b) AS tb
      CROSS JOIN LATERAL (SELECT
        CASE WHEN tb.b < 400 THEN ${tenantOf('large')}
             WHEN tb.b < 800 THEN md5('bench-tenant-medium-' || (tb.b % 4))::uuid
             ELSE md5('bench-tenant-small-' || (tb.b - 800))::uuid END AS tenant,
        CASE WHEN tb.b < 400 THEN 2000 WHEN tb.b < 800 THEN 500 ELSE 20 END AS keys) AS t
      CROSS JOIN LATERAL (SELECT (hashint8(g + 7777777) & 1048575) % 10000 AS h) AS th
      CROSS JOIN LATERAL (SELECT CASE
        WHEN th.h < 3000 THEN 'crypto.encrypt' WHEN th.h < 6500 THEN 'crypto.decrypt'
        WHEN th.h < 7500 THEN 'crypto.mac' WHEN th.h < 8000 THEN 'crypto.mac_verify'
        WHEN th.h < 8500 THEN 'crypto.sign' WHEN th.h < 9000 THEN 'crypto.verify'
        WHEN th.h < 9400 THEN 'crypto.generate_data_key' WHEN th.h < 9600 THEN 'crypto.encrypt_batch'
        WHEN th.h < 9750 THEN 'crypto.decrypt_batch' WHEN th.h < 9850 THEN 'crypto.wrap'
        WHEN th.h < 9940 THEN 'crypto.unwrap' WHEN th.h < 9950 THEN 'keys.create'
        WHEN th.h < 9955 THEN 'keys.rotate' WHEN th.h < 9960 THEN 'apikeys.create'
        WHEN th.h < 9980 THEN 'keys.update' WHEN th.h < 9999 THEN 'secrets.read'
        ELSE 'apikeys.revoke' END AS action) AS a
      CROSS JOIN LATERAL (SELECT CASE WHEN (hashint8(-g) & 1023) % 1000 < 15 THEN 'failure'
        WHEN (hashint8(-g) & 1023) % 1000 < 20 THEN 'denied' ELSE 'success' END AS outcome) AS o`,
        [start.toISOString(), stepUs],
      ),
    )
    console.log(`  records ${from.toLocaleString()}-${to.toLocaleString()}: ${seconds(ms)}`)
  }
  for (const index of indexes) {
    const { ms } = await timed(() => sql.unsafe(index.definition))
    console.log(`  ${index.name}: ${seconds(ms)}`)
  }
  await sql`VACUUM ANALYZE audit_log`
}

async function sizes(): Promise<string> {
  const rows = await sql<{ name: string; size: string }[]>`
    SELECT c.relname AS name, pg_size_pretty(pg_relation_size(c.oid)) AS size
    FROM pg_class c WHERE c.oid = 'audit_log'::regclass
       OR c.oid IN (SELECT indexrelid FROM pg_index WHERE indrelid = 'audit_log'::regclass)
    ORDER BY c.relname`
  return rows.map((r) => `${r.name} ${r.size}`).join(', ')
}

// ---------------------------------------------------------------------------------------------
// The measures.

interface QueryCase {
  name: string
  tenant: string
  filter: Omit<AuditFilter, 'limit'>
}

async function queryCases(): Promise<QueryCase[]> {
  const [t] = await sql<{ large: string; small: string; newest: Date; middle: string; resource: string }[]>`
    SELECT ${sql.unsafe(tenantOf('large'))}::text AS large, md5('bench-tenant-small-7')::uuid::text AS small,
      (SELECT max(occurred_at) FROM audit_log) AS newest,
      (SELECT id::text FROM audit_log ORDER BY id DESC OFFSET ${Math.floor(ROWS / 2)} LIMIT 1) AS middle,
      'key:' || md5(${sql.unsafe(tenantOf('large'))}::text || 17)::uuid AS resource`
  const { large, small, newest, middle, resource } = t!
  const ago = (days: number) => new Date(newest.getTime() - days * DAY_MS)
  return [
    { name: 'newest page, large tenant', tenant: large, filter: {} },
    { name: 'newest page, small tenant', tenant: small, filter: {} },
    { name: 'action common (crypto.decrypt 35%)', tenant: large, filter: { action: 'crypto.decrypt' } },
    { name: 'action rare (keys.create 0.1%)', tenant: large, filter: { action: 'keys.create' } },
    { name: 'action very rare (apikeys.revoke 0.01%)', tenant: large, filter: { action: 'apikeys.revoke' } },
    { name: 'action crypto.unwrap (0.9%), small tenant', tenant: small, filter: { action: 'crypto.unwrap' } },
    { name: 'action absent (crypto.export)', tenant: large, filter: { action: 'crypto.export' } },
    { name: 'resource (one of 2,000 keys)', tenant: large, filter: { resource } },
    { name: 'time: last hour', tenant: large, filter: { from: ago(1 / 24) } },
    { name: 'time: one day, 30 days ago', tenant: large, filter: { from: ago(31), to: ago(30) } },
    {
      name: 'time: one day, 30 days ago, small tenant',
      tenant: small,
      filter: { from: ago(31), to: ago(30) },
    },
    { name: 'time: 30 days ending 30 days ago', tenant: large, filter: { from: ago(60), to: ago(30) } },
    { name: 'time: the oldest day', tenant: large, filter: { from: ago(90), to: ago(89) } },
    { name: 'time: to 60 days ago, small tenant', tenant: small, filter: { to: ago(60) } },
    { name: 'before cursor (mid-table)', tenant: large, filter: { before: middle } },
    { name: 'before cursor + action rare', tenant: large, filter: { before: middle, action: 'keys.create' } },
    {
      name: 'time + action rare (one day, 30 days ago)',
      tenant: large,
      filter: { from: ago(31), to: ago(30), action: 'keys.create' },
    },
  ]
}

type Lister = (db: Queryable, tenantId: string, filter: AuditFilter) => Promise<readonly unknown[]>

async function measureQueries(
  cases: QueryCase[],
  list: Lister,
): Promise<Map<string, { ms: number; rows: number }>> {
  const out = new Map<string, { ms: number; rows: number }>()
  for (const c of cases) {
    const samples: number[] = []
    let rows = 0
    for (let i = 0; i < ROUNDS + 2; i++) {
      const { ms, result } = await timed(() => list(sql, c.tenant, { ...c.filter, limit: LIMIT }))
      rows = result.length
      if (i >= 2) samples.push(ms) // two warm-up runs: caches, the prepared statement
    }
    out.set(c.name, { ms: median(samples), rows })
  }
  return out
}

const WRITE_TENANTS = ['a', 'b', 'c'].map((name) => `bench-writer-${name}`)
const WRITE_ACTIONS = [
  'crypto.decrypt',
  'crypto.encrypt',
  'crypto.mac',
  'crypto.sign',
  'crypto.encrypt_batch',
]

async function writeBatches(): Promise<(size: number, i: number) => AuditEntry[]> {
  const tenants = (
    await sql<{ id: string }[]>`SELECT md5(n)::uuid::text AS id FROM unnest(${WRITE_TENANTS}::text[]) AS n`
  ).map((r) => r.id)
  const keys = (
    await sql<
      { id: string }[]
    >`SELECT md5('bench-key-' || k)::uuid::text AS id FROM generate_series(1, 50) AS k`
  ).map((r) => r.id)
  return (size, i) =>
    Array.from({ length: size }, (_, j) => {
      const n = i * size + j
      const action = WRITE_ACTIONS[n % WRITE_ACTIONS.length]!
      return {
        tenantId: tenants[n % tenants.length]!,
        actor: `apikey:${keys[n % 7]}`,
        action,
        resource: `key:${keys[n % 6]}`, // two keys per tenant
        keyVersion: 1,
        outcome: 'success',
        requestId: keys[(n * 13) % keys.length]!,
        clientIp: '10.1.2.3',
        details: action.endsWith('_batch') ? { items: 10 } : null,
      }
    })
}

type Writer = (db: Queryable, entries: readonly AuditEntry[]) => Promise<void>
const WRITE_SIZES = [1, 16, 64] as const
/** Records per measure at each batch size: enough CPU ticks (10 ms) for a percent or two. */
const WRITE_RECORDS: Record<(typeof WRITE_SIZES)[number], number> = { 1: 6_000, 16: 64_000, 64: 96_000 }

/** Rounds of the write measures; the median of each is reported. */
const WRITE_ROUNDS = Number(process.env['WRITE_ROUNDS'] ?? 3)

type WriteCost = Map<number, { pg: number; client: number }>
const WRITE_VARIANTS = [
  'meters, 3 indexes',
  'records, 3 indexes',
  'records, 0032',
  'records, 0032 without action index',
] as const

/**
 * The write's cost on the schemas, alternated on the same table (the last step, after every
 * query): each round builds the 0031 indexes again, measures the statement of the time with the
 * meters and the current one (records only), drops the time index (0032's) and measures, drops
 * the action index and measures; at each batch size. Then the records written are deleted. The
 * median of WRITE_ROUNDS rounds per variant and size.
 */
async function measureWrites(): Promise<Record<(typeof WRITE_VARIANTS)[number], WriteCost>> {
  const [mark] = await sql<{ id: string }[]>`SELECT max(id)::text AS id FROM audit_log`
  const batchOf = await writeBatches()
  const [backend] = await sql<{ pid: number }[]>`SELECT pg_backend_pid() AS pid`
  const pid = backend!.pid
  const samples = new Map<string, Array<{ pg: number; client: number }>>()
  async function measure(variant: (typeof WRITE_VARIANTS)[number], write: Writer) {
    for (let i = 0; i < 50; i++) await write(sql, batchOf(16, i)) // warm-up
    for (const size of WRITE_SIZES) {
      const statements = WRITE_RECORDS[size] / size
      const pgBefore = cpuSecondsOf(pid)
      const clientBefore = process.cpuUsage()
      for (let i = 0; i < statements; i++) await write(sql, batchOf(size, i))
      const client = process.cpuUsage(clientBefore)
      const pg = cpuSecondsOf(pid) - pgBefore
      const key = `${variant}|${size}`
      samples.set(key, [
        ...(samples.get(key) ?? []),
        { pg: (pg * 1e6) / WRITE_RECORDS[size], client: (client.user + client.system) / WRITE_RECORDS[size] },
      ])
    }
  }
  // Index builds in parallel again (0032 turned parallel scans of audit_log off).
  await sql`ALTER TABLE audit_log RESET (parallel_workers)`
  await sql`SET maintenance_work_mem = '1GB'`
  for (let round = 1; round <= WRITE_ROUNDS; round++) {
    console.log(`  round ${round} of ${WRITE_ROUNDS}`)
    await sql.unsafe(indexesBefore.get('audit_log_tenant_action_idx')!)
    await sql.unsafe(indexesBefore.get('audit_log_tenant_time_idx')!)
    await measure('meters, 3 indexes', insertBefore)
    await measure('records, 3 indexes', insertAuditEntries)
    await sql`DROP INDEX audit_log_tenant_time_idx`
    await measure('records, 0032', insertAuditEntries)
    await sql`DROP INDEX audit_log_tenant_action_idx`
    await measure('records, 0032 without action index', insertAuditEntries)
    await sql`DELETE FROM audit_log WHERE id > ${mark!.id}`
    await sql`VACUUM audit_log`
  }
  const out = {} as Record<(typeof WRITE_VARIANTS)[number], WriteCost>
  for (const variant of WRITE_VARIANTS)
    out[variant] = new Map(
      WRITE_SIZES.map((size) => {
        const list = samples.get(`${variant}|${size}`) ?? []
        return [size, { pg: median(list.map((x) => x.pg)), client: median(list.map((x) => x.client)) }]
      }),
    )
  return out
}

/** Records folded per consumer to measure what a sweep's fold costs PostgreSQL. */
const FOLD_RECORDS = Math.min(1_000_000, ROWS)

/**
 * PostgreSQL CPU per record of the sweeps' folds (usage counts, key uses), over the newest
 * FOLD_RECORDS records, for consumers of the bench's own (nothing applied: what is measured is
 * the feed's reading, which is the whole of a fold's work but a few rows written).
 */
async function measureFolds(feed: ReturnType<typeof createAuditFeed>) {
  const [backend] = await sql<{ pid: number }[]>`SELECT pg_backend_pid() AS pid`
  const [last] = await sql<{ id: string }[]>`SELECT max(id)::text AS id FROM audit_log`
  const from = BigInt(last!.id) - BigInt(FOLD_RECORDS)
  const out: Record<string, { cpuUs: number; wallMs: number }> = {}
  const folds = {
    'usage counts': (consumer: string) =>
      feed.operationCounts({ consumer, actionPrefix: 'crypto.' }).fold(async () => {}),
    'key uses': (consumer: string) =>
      feed.resourceUses({ consumer, actionPrefix: 'crypto.', resourcePrefix: 'key:' }).fold(async () => {}),
  }
  for (const [name, fold] of Object.entries(folds)) {
    const consumer = `bench.${name.replace(' ', '_')}`
    await sql`INSERT INTO audit_feed_cursors (consumer, position, settled)
      VALUES (${consumer}, ${String(from)}, ${last!.id})`
    const cpuBefore = cpuSecondsOf(backend!.pid)
    const { ms } = await timed(() => fold(consumer))
    out[name] = { cpuUs: ((cpuSecondsOf(backend!.pid) - cpuBefore) * 1e6) / FOLD_RECORDS, wallMs: ms }
  }
  return out
}

// ---------------------------------------------------------------------------------------------

try {
  console.log(`database ${db.name}: migrations up to 0031 (the schema before issue 33, part 2)`)
  await migrate(
    sql as unknown as Sql,
    loadMigrations().filter((m) => m.version <= 31),
  )
  console.log(`filling audit_log with ${ROWS.toLocaleString()} records ...`)
  const filled = await timed(fill)
  console.log(`filled in ${seconds(filled.ms)}: ${await sizes()}`)
  const cases = await queryCases()

  console.log('before: queries ...')
  const queriesBefore = await measureQueries(cases, listBefore)

  console.log('migration 0032 ...')
  const migrated = await timed(() => migrate(sql as unknown as Sql))
  const feed = createAuditFeed({ sql: sql as unknown as Sql })
  const [backend] = await sql<{ pid: number }[]>`SELECT pg_backend_pid() AS pid`
  const mapCpuBefore = cpuSecondsOf(backend!.pid)
  let mapped = 0
  const mapping = await timed(async () => {
    for (;;) {
      const n = await feed.foldTimeMap()
      mapped += n
      if (n === 0) break
    }
  })
  const mapCpuUs = ((cpuSecondsOf(backend!.pid) - mapCpuBefore) * 1e6) / mapped
  await sql`VACUUM ANALYZE audit_log`
  await sql`ANALYZE audit_time_map`
  const [ranges] = await sql<{ n: number }[]>`SELECT count(*)::int AS n FROM audit_time_map`
  console.log(
    `migrated in ${seconds(migrated.ms)}; time map: ${mapped.toLocaleString()} records in ${ranges!.n.toLocaleString()} ranges, ${seconds(mapping.ms)}; ${await sizes()}`,
  )
  console.log("after: the sweeps' folds ...")
  const folds = await measureFolds(feed)
  console.log('after: queries ...')
  const queriesAfter = await measureQueries(cases, listAuditEntries)

  await sql`DROP INDEX audit_log_tenant_action_idx`
  console.log('after, without the action index: queries ...')
  const queriesNoAction = await measureQueries(cases, listAuditEntries)
  console.log('writes, on each schema in turn ...')
  const writes = await measureWrites()

  const ms = (m: { ms: number; rows: number } | undefined) =>
    m ? `${m.ms < 10 ? m.ms.toFixed(2) : m.ms.toFixed(0)} ms${m.rows === LIMIT ? '' : ` (${m.rows})`}` : ''
  console.log(
    `\nGET /api/v1/audit at ${ROWS.toLocaleString()} records (listAuditEntries, limit ${LIMIT}; median of ${ROUNDS}; rows in parentheses when fewer than ${LIMIT})\n`,
  )
  console.log('| query | before (0031) | after (0032) | after, no action index |')
  console.log('|---|---:|---:|---:|')
  for (const c of cases)
    console.log(
      `| ${c.name} | ${ms(queriesBefore.get(c.name))} | ${ms(queriesAfter.get(c.name))} | ${ms(queriesNoAction.get(c.name))} |`,
    )
  const us = (w: { pg: number; client: number } | undefined) =>
    w ? `${w.pg.toFixed(1)} (${w.client.toFixed(1)})` : ''
  console.log(
    `\nThe audit write: PostgreSQL backend CPU µs per record (this process, client, in parentheses), one transaction per batch; median of ${WRITE_ROUNDS}\n`,
  )
  console.log(
    '| records per batch | before: meters + 3 indexes | records only, 3 indexes | after: records only, tenant + action indexes | after, no action index |',
  )
  console.log('|---:|---:|---:|---:|---:|')
  for (const size of WRITE_SIZES)
    console.log(`| ${size} | ${WRITE_VARIANTS.map((variant) => us(writes[variant].get(size))).join(' | ')} |`)
  console.log(
    `\nThe sweeps' folds (background), PostgreSQL CPU per record folded: ${Object.entries(folds)
      .map(
        ([name, f]) =>
          `${name} ${f.cpuUs.toFixed(2)} µs (${FOLD_RECORDS.toLocaleString()} records in ${seconds(f.wallMs)})`,
      )
      .join(
        ', ',
      )}, time map ${mapCpuUs.toFixed(2)} µs (all ${mapped.toLocaleString()} records in ${seconds(mapping.ms)})`,
  )
  console.log(
    `\nfill ${seconds(filled.ms)}, migration 0032 ${seconds(migrated.ms)}, time map ${seconds(mapping.ms)}`,
  )
} finally {
  await sql.end({ timeout: 5 })
  await dropDatabase()
}
