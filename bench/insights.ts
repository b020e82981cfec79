/**
 * GET /api/v1/insights on a tenant of 10,000 and of 100,000 keys (issue 31, defect 6: it was
 * quadratic in the keys and ran on the event loop: 6.5 s per call at 10,000 keys, and another
 * tenant's GET /tenant waited 22 s behind four of them).
 *
 * Seeds each tenant straight into a fresh database (a realistic spread: ten purposes, three
 * environments, every key type, a third with a rotation policy, a quarter without labels), then
 * measures over real HTTP, in the same run:
 *  - the report, sequential calls: time per report, as a ratio to its ceiling (the report's SQL
 *    statement run directly through postgres.js), and this process's CPU time per report (the
 *    service's share of the work; the rest is PostgreSQL's) as a ratio to a GET /tenant's;
 *  - four concurrent reports of that tenant while another tenant sends GET /tenant back to back:
 *    that tenant's latencies and the event loop's longest hold (the largest lateness of a 10 ms
 *    timer: the service runs in this process, so its event loop is this one), as ratios to the
 *    same traffic measured first with no report anywhere;
 *  - one key's report (GET /keys/{id}/insights).
 *
 *   npm run bench:insights            (SIZES=10000,100000 ROUNDS=5 CONCURRENT=4 to change)
 */
import { performance } from 'node:perf_hooks'
import { insightCriteria } from '../src/intelligence/insights.ts'
import { runInsightQuery, tenantInsightQuery } from '../src/intelligence/intelligence-store.ts'
import { startTestService, type TenantWithKey } from '../test/helpers/service.ts'

const SIZES = (process.env['SIZES'] ?? '10000,100000').split(',').map(Number)
const ROUNDS = Number(process.env['ROUNDS'] ?? 5)
const CONCURRENT = Number(process.env['CONCURRENT'] ?? 4)
const BASELINE_MS = Number(process.env['BASELINE_MS'] ?? 5000)
const CPU_ROUNDS = 200

const percentile = (sorted: number[], p: number) =>
  sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? Number.NaN
const sortedOf = (samples: number[]) => [...samples].sort((a, b) => a - b)
const x = (a: number, b: number) => `${(a / b).toFixed(2)}x`
const cpuMs = (usage: NodeJS.CpuUsage) => (usage.user + usage.system) / 1000

async function timed(run: () => Promise<unknown>): Promise<number> {
  const started = performance.now()
  await run()
  return performance.now() - started
}

/** The largest lateness of a 10 ms interval timer while `work` runs: how long the loop was held. */
async function loopLag<T>(work: () => Promise<T>): Promise<{ result: T; maxLagMs: number }> {
  let maxLagMs = 0
  let expected = performance.now() + 10
  const timer = setInterval(() => {
    const now = performance.now()
    maxLagMs = Math.max(maxLagMs, now - expected)
    expected = now + 10
  }, 10)
  try {
    return { result: await work(), maxLagMs }
  } finally {
    clearInterval(timer)
  }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

const svc = await startTestService()
try {
  const get = async (tenant: TenantWithKey, path: string) => {
    const response = await svc.request('GET', `/api/v1${path}`, { key: tenant.key })
    if (response.status !== 200) throw new Error(`GET ${path}: ${response.status} ${response.text}`)
    return response.body
  }
  const other = await svc.createTenant()
  for (let i = 0; i < 200; i++) await get(other, '/tenant') // warm-up: connections, plans, JIT

  /** The other tenant's GET /tenant back to back while `work` runs: latencies, the loop's hold. */
  async function otherTenantDuring(work: () => Promise<unknown>) {
    let running = true
    const samples: number[] = []
    const traffic = (async () => {
      while (running) samples.push(await timed(() => get(other, '/tenant')))
    })()
    const { result: wallMs, maxLagMs } = await loopLag(() =>
      timed(() =>
        work().finally(() => {
          running = false
        }),
      ),
    )
    await traffic
    const sorted = sortedOf(samples)
    return {
      wallMs,
      maxLagMs,
      requests: samples.length,
      p50: percentile(sorted, 50),
      p99: percentile(sorted, 99),
      max: sorted.at(-1) ?? Number.NaN,
    }
  }

  // The baseline: the same traffic with no report anywhere. Its tail is this process's own
  // (garbage collection of a service and a load generator sharing one heap, the host's other
  // work), so what the reports add is the ratio to it.
  const baseline = await otherTenantDuring(() => sleep(BASELINE_MS))
  console.log(
    `baseline, another tenant's GET /tenant back to back with no report (${baseline.requests} in ${BASELINE_MS / 1000} s): p50 ${baseline.p50.toFixed(2)} ms, p99 ${baseline.p99.toFixed(2)} ms, max ${baseline.max.toFixed(1)} ms; event loop held at most ${baseline.maxLagMs.toFixed(1)} ms`,
  )
  // This process's CPU per GET /tenant, less its CPU over as long doing nothing (its timers).
  const quietBefore = process.cpuUsage()
  const quietWall = await timed(() => sleep(2000))
  const quietPerMs = cpuMs(process.cpuUsage(quietBefore)) / quietWall
  const requestBefore = process.cpuUsage()
  const requestWall = await timed(async () => {
    for (let i = 0; i < CPU_ROUNDS; i++) await get(other, '/tenant')
  })
  const requestCpu = (cpuMs(process.cpuUsage(requestBefore)) - quietPerMs * requestWall) / CPU_ROUNDS
  console.log(`this process's CPU per GET /tenant: ${requestCpu.toFixed(2)} ms\n`)

  const rows: string[] = []
  for (const size of SIZES) {
    const tenant = await svc.createTenant()
    console.log(`seeding ${size.toLocaleString()} keys into one tenant ...`)
    const seedStarted = performance.now()
    await svc.sql.begin(async (tx) => {
      await tx`SET LOCAL statement_timeout = 0`
      await tx`
        INSERT INTO keys (id, tenant_id, name, description, key_type, algorithm, origin, labels,
                          created_at, created_by, updated_at, expires_at, revoked_at)
        SELECT gen_random_uuid(), ${tenant.tenantId},
               (ARRAY['payments','billing','jwt','backup','orders','customerPii','audit-log','webhook','database','tls'])[1 + i % 10]
                 || '-' || (ARRAY['prod','staging','dev'])[1 + i % 3] || '-' || lpad(i::text, 7, '0'),
               (ARRAY['Signs payment authorisations sent to the card processor',
                      'Encrypts nightly database backups kept for seven years',
                      'Access tokens for the customer login', '',
                      'Authenticates webhook deliveries to subscriber endpoints',
                      'Order events on the Kafka bus'])[1 + i % 6],
               (ARRAY['Encryption','Signing','HMAC'])[1 + i % 3],
               CASE i % 3
                 WHEN 0 THEN (ARRAY['ML-KEM-768','RSA-3072','RSA-2048'])[1 + (i / 3) % 3]
                 WHEN 1 THEN (ARRAY['ML-DSA-65','EC-P256','Ed25519'])[1 + (i / 3) % 3]
                 ELSE 'HMAC-SHA256' END,
               'Generated',
               CASE WHEN i % 4 = 0 THEN '{}'::text[] ELSE ARRAY['team-' || (i % 20), 'tier-' || (i % 3)] END,
               now() - make_interval(days => i % 200), 'bench', now(),
               CASE WHEN i % 50 = 0 THEN now() + interval '10 days' END,
               CASE WHEN i % 97 = 0 THEN now() END
        FROM generate_series(1, ${size}) AS i`
      await tx`
        INSERT INTO rotation_policies (key_id, tenant_id, frequency, paused_at, created_at, updated_at)
        SELECT id, tenant_id, 'Quarterly',
               CASE WHEN right(name, 1) = '7' THEN now() - interval '40 days' END, now(), now()
        FROM keys WHERE tenant_id = ${tenant.tenantId} AND right(name, 1) IN ('1', '4', '7')`
      await tx`ANALYZE keys`
      await tx`ANALYZE rotation_policies`
    })
    await svc.sql`VACUUM keys`
    console.log(`seeded in ${((performance.now() - seedStarted) / 1000).toFixed(1)} s`)
    const probe = await svc.request('POST', '/api/v1/keys', {
      key: tenant.key,
      body: { name: 'payments-probe', keyType: 'Signing', algorithm: 'ML-DSA-65' },
    })
    if (probe.status !== 201) throw new Error(`POST /keys: ${probe.status} ${probe.text}`)

    // The ceiling: the same statement straight through postgres.js, as the service runs it.
    const ceilingSamples: number[] = []
    for (let i = 0; i < ROUNDS + 1; i++) {
      const took = await timed(() =>
        runInsightQuery(svc.sql, { statementTimeoutMs: 300_000, tenantWide: true }, (tx) =>
          tenantInsightQuery(tx, tenant.tenantId, insightCriteria(new Date())),
        ),
      )
      if (i > 0) ceilingSamples.push(took) // the first warms the caches
    }
    const ceiling = percentile(sortedOf(ceilingSamples), 50)

    // Sequential reports: time, the loop's hold, and (a second series, no timer running) CPU.
    const reportSamples: number[] = []
    let reportLag = 0
    let answerBytes = 0
    for (let i = 0; i < ROUNDS; i++) {
      const { result, maxLagMs } = await loopLag(() =>
        timed(async () => {
          answerBytes = JSON.stringify(await get(tenant, '/insights')).length
        }),
      )
      reportSamples.push(result)
      reportLag = Math.max(reportLag, maxLagMs)
    }
    const report = percentile(sortedOf(reportSamples), 50)
    const cpuBefore = process.cpuUsage()
    const cpuWall = await timed(async () => {
      for (let i = 0; i < ROUNDS; i++) await get(tenant, '/insights')
    })
    const cpuPerReport = (cpuMs(process.cpuUsage(cpuBefore)) - quietPerMs * cpuWall) / ROUNDS

    // Four reports at once, and the other tenant asking meanwhile, back to back.
    const during = await otherTenantDuring(() =>
      Promise.all(Array.from({ length: CONCURRENT }, () => get(tenant, '/insights'))),
    )

    const oneSamples: number[] = []
    for (let i = 0; i < ROUNDS; i++)
      oneSamples.push(await timed(() => get(tenant, `/keys/${probe.body.id}/insights`)))
    const one = percentile(sortedOf(oneSamples), 50)

    console.log(
      [
        `${size.toLocaleString()} keys (answer ${(answerBytes / 1024).toFixed(1)} KiB):`,
        `  report p50 ${report.toFixed(1)} ms = ${x(report, ceiling)} its SQL alone (${ceiling.toFixed(1)} ms); event loop held at most ${reportLag.toFixed(1)} ms`,
        `  this process's CPU per report: ${cpuPerReport.toFixed(1)} ms = ${x(cpuPerReport, requestCpu)} a GET /tenant's, ${((cpuPerReport / report) * 100).toFixed(1)}% of the report's time`,
        `  ${CONCURRENT} concurrent reports: ${during.wallMs.toFixed(1)} ms for all (${x(during.wallMs, report)} one report)`,
        `  the other tenant meanwhile (${during.requests} requests): p50 ${during.p50.toFixed(2)} ms (${x(during.p50, baseline.p50)} baseline), p99 ${during.p99.toFixed(2)} ms (${x(during.p99, baseline.p99)}), max ${during.max.toFixed(1)} ms (${x(during.max, baseline.max)}); event loop held at most ${during.maxLagMs.toFixed(1)} ms (${x(during.maxLagMs, baseline.maxLagMs)})`,
        `  one key's report p50 ${one.toFixed(2)} ms = ${x(one, baseline.p50)} a GET /tenant\n`,
      ].join('\n'),
    )
    rows.push(
      `| ${size.toLocaleString()} | ${report.toFixed(0)} | ${x(report, ceiling)} | ${cpuPerReport.toFixed(1)} (${x(cpuPerReport, requestCpu)}) | ${during.wallMs.toFixed(0)} | ${during.p50.toFixed(2)} (${x(during.p50, baseline.p50)}) | ${during.p99.toFixed(1)} (${x(during.p99, baseline.p99)}) | ${during.max.toFixed(1)} (${x(during.max, baseline.max)}) | ${during.maxLagMs.toFixed(1)} (${x(during.maxLagMs, baseline.maxLagMs)}) | ${one.toFixed(2)} |`,
    )
  }
  console.log(
    `baseline (no report): other tenant p50 ${baseline.p50.toFixed(2)} ms, p99 ${baseline.p99.toFixed(1)} ms, max ${baseline.max.toFixed(1)} ms, event loop held ${baseline.maxLagMs.toFixed(1)} ms; CPU per GET /tenant ${requestCpu.toFixed(2)} ms`,
  )
  console.log(
    `| keys | report p50 ms | ÷ SQL alone | API CPU ms per report (÷ GET /tenant) | ${CONCURRENT} concurrent, ms | other tenant p50 ms (÷ baseline) | p99 ms (÷) | max ms (÷) | loop held ms (÷) | one key p50 ms |`,
  )
  console.log('|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|')
  for (const row of rows) console.log(row)
} finally {
  await svc.stop()
}
process.exit(0)
