/**
 * Key list latency with 100,000 keys in one tenant (issue: first page under 50 ms).
 *
 * Seeds the keys straight into a fresh database, then times sequential GET /api/v1/keys
 * requests over real HTTP for the default first page, every sort order, filters and a deep
 * page reached through the cursor. The ceiling is the same page's SQL run directly through
 * postgres.js in the same run, so the printed ratio is what HTTP, auth and serialisation add.
 *
 *   npm run bench:key-list            (KEYS=100000 ROUNDS=100 to change the size)
 */
import { performance } from 'node:perf_hooks'
import { listKeys } from '../src/keys/key-store.ts'
import { startTestService } from '../test/helpers/service.ts'

const KEYS = Number(process.env['KEYS'] ?? 100_000)
const ROUNDS = Number(process.env['ROUNDS'] ?? 100)
const BUDGET_MS = 50

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? Number.NaN
}

async function time(
  rounds: number,
  run: () => Promise<void>,
): Promise<{ p50: number; p95: number; p99: number }> {
  for (let i = 0; i < 5; i++) await run() // warm-up: plans, connections, JIT
  const samples: number[] = []
  for (let i = 0; i < rounds; i++) {
    const started = performance.now()
    await run()
    samples.push(performance.now() - started)
  }
  samples.sort((a, b) => a - b)
  return { p50: percentile(samples, 50), p95: percentile(samples, 95), p99: percentile(samples, 99) }
}

const svc = await startTestService()
let failed = false
try {
  const tenant = await svc.createTenant()
  console.log(`seeding ${KEYS.toLocaleString()} keys into one tenant ...`)
  const seeded = performance.now()
  // Realistic spread: every algorithm, 1% favourites, labels, a few expiring, revoked or pending.
  await svc.sql.begin(async (tx) => {
    // Building the trigram indexes for 100,000 rows takes longer than the usual statement bound.
    await tx`SET LOCAL statement_timeout = 0`
    await tx`
    INSERT INTO keys (id, tenant_id, name, description, key_type, algorithm, origin, is_favorite, labels,
                      current_version, created_at, created_by, updated_at, expires_at, revoked_at,
                      scheduled_deletion_date)
    SELECT gen_random_uuid(), ${tenant.tenantId}, 'key-' || lpad(i::text, 7, '0'), 'bench key ' || i,
           (ARRAY['Encryption','Signing','HMAC'])[1 + i % 3],
           (ARRAY['ML-KEM-768','ML-DSA-65','HMAC-SHA256'])[1 + i % 3], 'Generated',
           i % 100 = 0, ARRAY['team-' || (i % 20), 'env-' || (i % 3)],
           1 + i % 5, date_trunc('milliseconds', now() - make_interval(secs => i)), 'bench',
           now(), CASE WHEN i % 50 = 0 THEN now() + interval '10 days' END,
           CASE WHEN i % 97 = 0 THEN now() END,
           CASE WHEN i % 89 = 0 THEN now() + interval '20 days' END
    FROM generate_series(1, ${KEYS}) AS i`
    await tx`ANALYZE keys`
  })
  // Index-only counts need the visibility map that autovacuum would build in production.
  await svc.sql`VACUUM keys`
  console.log(
    `seeded in ${((performance.now() - seeded) / 1000).toFixed(1)} s; ${ROUNDS} requests per case\n`,
  )

  const get = async (query: string) => {
    const response = await svc.request('GET', `/api/v1/keys${query}`, { key: tenant.key })
    if (response.status !== 200) throw new Error(`GET /keys${query}: ${response.status} ${response.text}`)
    return response.body as { data: unknown[]; nextCursor: string | null; total: number }
  }
  // A cursor 2,000 pages in (limit 50), to show deep pages cost what the first one costs.
  let deep = await get('?limit=1000')
  for (let i = 0; i < 99 && deep.nextCursor; i++) deep = await get(`?limit=1000&cursor=${deep.nextCursor}`)

  const cases: [string, string][] = [
    ['first page (default: favourites, newest first)', ''],
    ['sort=name asc', '?sort=name&order=asc'],
    ['sort=algorithm desc', '?sort=algorithm'],
    ['sort=purpose asc', '?sort=purpose&order=asc'],
    ['sort=version desc', '?sort=version'],
    ['sort=status asc', '?sort=status&order=asc'],
    ['filter status=Active', '?status=Active'],
    ['filter label=team-7', '?label=team-7'],
    ['search "key-00042"', '?search=key-00042'],
    ['page 2,000 via cursor', deep.nextCursor ? `?limit=50&cursor=${deep.nextCursor}` : ''],
  ]

  const now = new Date()
  const ceiling = await time(ROUNDS, async () => {
    await listKeys(svc.sql, tenant.tenantId, {
      filter: {},
      sort: 'createdAt',
      descending: true,
      limit: 50,
      after: null,
      now,
    })
  })
  console.log(`ceiling: the default page's SQL alone  p50 ${ceiling.p50.toFixed(2)} ms\n`)
  console.log(
    `${'case'.padEnd(48)} ${'p50 ms'.padStart(8)} ${'p95 ms'.padStart(8)} ${'p99 ms'.padStart(8)}  x ceiling`,
  )
  for (const [name, query] of cases) {
    const result = await time(ROUNDS, async () => {
      await get(query)
    })
    const ratio = result.p50 / ceiling.p50
    console.log(
      `${name.padEnd(48)} ${result.p50.toFixed(2).padStart(8)} ${result.p95.toFixed(2).padStart(8)} ${result.p99.toFixed(2).padStart(8)}  ${ratio.toFixed(1)}`,
    )
    if (name.startsWith('first page') && result.p50 >= BUDGET_MS) failed = true
  }
  console.log(
    failed
      ? `\nFAIL: the first page's median is over the ${BUDGET_MS} ms budget`
      : `\nOK: first page under the ${BUDGET_MS} ms budget with ${KEYS.toLocaleString()} keys`,
  )
} finally {
  await svc.stop()
}
process.exit(failed ? 1 : 0)
