/**
 * `npm run bench`: the service as `npm start` runs it (real PostgreSQL and Redis, audit on),
 * driven by autocannon over keep-alive connections, against the raw node:crypto ceiling measured
 * in the same run on every core. Prints one row per scenario and writes bench/RESULTS.md.
 *
 *   npm run bench                      full run (about 10 minutes), writes bench/RESULTS.md
 *   npm run bench -- --quick           every scenario briefly (under 2 minutes), prints only
 *   npm run bench -- --only=encrypt-64-b,mixed --processes=1 --out=/tmp/r.md
 *
 * Exit status 1 when the harness itself fails: a request answered other than 2xx, an audit
 * count that is not exactly one record per acknowledged operation, or a service that would not
 * start. A target missed is a finding, reported in the table, not a failure of the run.
 */
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { performance } from 'node:perf_hooks'
import { measureCeiling } from './lib/ceiling.ts'
import { type LoadResult, runLoad } from './lib/load.ts'
import { describeMachine, machineMarkdown, markdownTable, type Row, textTable } from './lib/report.ts'
import { SCENARIOS, type Scenario } from './lib/scenarios.ts'
import { type ServiceUnderTest, startServiceUnderTest } from './lib/service-under-test.ts'
import { setupApi } from './lib/setup-api.ts'

interface Options {
  quick: boolean
  only?: Set<string>
  processes?: number
  out?: string
}

function parseArgs(argv: string[]): Options {
  const options: Options = { quick: false }
  for (const arg of argv) {
    const [flag, value] = arg.split('=', 2) as [string, string | undefined]
    if (flag === '--quick') options.quick = true
    else if (flag === '--only' && value) options.only = new Set(value.split(','))
    else if (flag === '--processes' && value && /^[1-9]\d*$/.test(value)) options.processes = Number(value)
    else if (flag === '--out' && value) options.out = value
    else if (flag === '--help' || flag === '-h') {
      process.stdout.write(
        readFileSync(new URL(import.meta.url), 'utf8')
          .split('*/')[0]!
          .replace(/^\/\*\*|^ \* ?/gm, ''),
      )
      process.exit(0)
    } else {
      process.stderr.write(`unknown argument ${arg} (see --help)\n`)
      process.exit(2)
    }
  }
  return options
}

const ENDURANCE_ID = 'endurance'
const HALF_RATE_ID = 'encrypt-64-b-half-rate'
const log = (text: string) => process.stdout.write(`${text}\n`)

async function auditTotals(
  svc: ServiceUnderTest,
  tenantId: string,
): Promise<{ records: number; items: number }> {
  const [row] = await svc.sql<{ records: string; items: string }[]>`
    SELECT count(*) AS records, coalesce(sum((details->>'items')::bigint), 0) AS items
    FROM audit_log WHERE tenant_id = ${tenantId}`
  return { records: Number(row!.records), items: Number(row!.items) }
}

/** Samples every API process's RSS while a load runs; the peak is the figure reported. */
function rssSampler(svc: ServiceUnderTest): { stop(): Map<number, number> } {
  const peaks = new Map<number, number>()
  const sample = () => {
    for (const [pid, rss] of svc.apiProcessRss()) peaks.set(pid, Math.max(peaks.get(pid) ?? 0, rss))
  }
  sample()
  const timer = setInterval(sample, 250)
  return {
    stop() {
      clearInterval(timer)
      sample()
      return peaks
    },
  }
}

const maxOf = (values: Iterable<number>) => Math.max(0, ...values)
const mb = (bytes: number) => bytes / 2 ** 20

interface Measured {
  row: Row
  load: LoadResult
  failures: string[]
}

/** The audit log must hold exactly one record per acknowledged operation (a batch is one). */
async function checkAudit(
  svc: ServiceUnderTest,
  tenantId: string,
  before: { records: number; items: number },
  load: LoadResult,
  perCycle: readonly number[],
  itemsPerRequest: number,
): Promise<{ text: string; failure?: string }> {
  if (load.non2xx > 0 || load.errors > 0) {
    return {
      text: 'not checked',
      failure: `${load.non2xx} non-2xx answers and ${load.errors} errors: ${JSON.stringify(load.statusCodes)}`,
    }
  }
  const after = await auditTotals(svc, tenantId)
  const cycles = load.ok / perCycle.length
  const expected = cycles * perCycle.reduce((a, b) => a + b, 0)
  const records = after.records - before.records
  if (records !== expected) {
    return {
      text: `✗ ${records}/${expected}`,
      failure: `audit: ${records} records for ${expected} operations`,
    }
  }
  if (itemsPerRequest > 1) {
    const items = after.items - before.items
    if (items !== load.ok * itemsPerRequest) {
      return {
        text: `✗ items ${items}`,
        failure: `audit: ${items} items recorded for ${load.ok * itemsPerRequest}`,
      }
    }
  }
  return { text: `✓ ${records.toLocaleString('en-US')}` }
}

async function runScenario(svc: ServiceUnderTest, scenario: Scenario, options: Options): Promise<Measured> {
  const started = performance.now()
  const tenant = await svc.createTenant()
  const prepared = await scenario.prepare(setupApi(svc.baseUrl, tenant))
  const ceiling = scenario.ceiling
    ? await measureCeiling(scenario.ceiling, { durationMs: options.quick ? 800 : 3000 })
    : undefined
  const ceilingRequests = ceiling ? ceiling.opsPerSecond / scenario.itemsPerRequest : 1000
  const base = {
    baseUrl: svc.baseUrl,
    apiKey: tenant.apiKey,
    connections: scenario.connections,
    cycle: prepared.cycle,
  }

  // Warm-up: JIT, connections, caches; its rate sizes the measured run.
  // Sized from the ceiling, capped: a cheap operation (MAC) would otherwise warm up for a minute.
  const warmAmount = Math.min(
    ceilingRequests * 0.25 * (options.quick ? 0.5 : 2),
    options.quick ? 2000 : 10_000,
  )
  const warm = await runLoad({ ...base, amount: Math.max(1, warmAmount) })
  if (warm.non2xx > 0 || warm.errors > 0) {
    throw new Error(
      `${scenario.id}: warm-up answered ${JSON.stringify(warm.statusCodes)}, ${warm.errors} errors`,
    )
  }
  const seconds = options.quick ? scenario.seconds.quick : scenario.seconds.full
  const before = await auditTotals(svc, tenant.tenantId)
  const measureEventLoop = scenario.id === 'mixed'
  if (measureEventLoop) await svc.scrapeEventLoopP99() // starts a fresh window in each process
  const rss = rssSampler(svc)
  const load = await runLoad({ ...base, amount: warm.requestsPerSecond * seconds })
  const peaks = rss.stop()
  const eventLoop = measureEventLoop ? await svc.scrapeEventLoopP99() : undefined
  const audit = await checkAudit(
    svc,
    tenant.tenantId,
    before,
    load,
    prepared.auditRecords,
    scenario.itemsPerRequest,
  )

  const itemsPerSecond = load.requestsPerSecond * scenario.itemsPerRequest
  const ratio = ceiling ? itemsPerSecond / ceiling.opsPerSecond : undefined
  const row: Row = {
    scenario: scenario.title,
    requestsPerSecond: load.requestsPerSecond,
    itemsPerSecond,
    ...(scenario.bytesPerItem ? { megabytesPerSecond: mb(itemsPerSecond * scenario.bytesPerItem) } : {}),
    p50Ms: load.latency.p50,
    p99Ms: load.latency.p99,
    ...(ceiling ? { ceilingItemsPerSecond: ceiling.opsPerSecond } : {}),
    ...(ratio !== undefined ? { ratio } : {}),
    ...(scenario.target !== undefined && ratio !== undefined
      ? { target: `≥ ${scenario.target * 100}%`, met: ratio >= scenario.target }
      : {}),
    peakRssMb: mb(maxOf(peaks.values())),
    audit: audit.text,
  }
  if (eventLoop) {
    const p99 = maxOf(eventLoop.values())
    row.note = `event-loop delay p99 ${p99.toFixed(1)} ms (worst API process; target ≤ 20 ms)`
    row.target = `loop p99 ${p99.toFixed(1)} ms ≤ 20`
    row.met = p99 <= 20
  }
  log(
    `  ${scenario.id}: ${Math.round(load.requestsPerSecond)} req/s, ${Math.round(itemsPerSecond)} items/s` +
      `${ratio !== undefined ? ` = ${(ratio * 100).toFixed(0)}% of ${Math.round(ceiling!.opsPerSecond)}` : ''}` +
      `, p99 ${load.latency.p99.toFixed(2)} ms, audit ${audit.text} (${((performance.now() - started) / 1000).toFixed(1)} s)`,
  )
  return { row, load, failures: audit.failure ? [`${scenario.id}: ${audit.failure}`] : [] }
}

/** p99 of single encrypts offered at half the rate the saturated run reached. */
async function runHalfRate(svc: ServiceUnderTest, maxRate: number, options: Options): Promise<Measured> {
  const encrypt = SCENARIOS.find((s) => s.id === 'encrypt-64-b')!
  const tenant = await svc.createTenant()
  const prepared = await encrypt.prepare(setupApi(svc.baseUrl, tenant))
  const rate = Math.max(10, Math.round(maxRate / 2))
  const seconds = options.quick ? 3 : 15
  const connections = 16
  const before = await auditTotals(svc, tenant.tenantId)
  const rss = rssSampler(svc)
  const load = await runLoad({
    baseUrl: svc.baseUrl,
    apiKey: tenant.apiKey,
    connections,
    cycle: prepared.cycle,
    amount: rate * seconds,
    overallRate: rate,
  })
  const peaks = rss.stop()
  const audit = await checkAudit(svc, tenant.tenantId, before, load, prepared.auditRecords, 1)
  log(
    `  ${HALF_RATE_ID}: offered ${rate} req/s, p50 ${load.latency.p50.toFixed(2)} ms, p99 ${load.latency.p99.toFixed(2)} ms`,
  )
  return {
    row: {
      scenario: `encrypt 64 B at half max rate (${rate} req/s)`,
      requestsPerSecond: load.requestsPerSecond,
      itemsPerSecond: load.requestsPerSecond,
      p50Ms: load.latency.p50,
      p99Ms: load.latency.p99,
      target: 'p99 ≤ 10 ms',
      met: load.latency.p99 <= 10,
      peakRssMb: mb(maxOf(peaks.values())),
      audit: audit.text,
    },
    load,
    failures: audit.failure ? [`${HALF_RATE_ID}: ${audit.failure}`] : [],
  }
}

/**
 * Memory over a long run: 1,000,000 single encrypts (full run), RSS read at the halfway mark and
 * at the end. The target: at most 300 MB per process, and under 10% growth in the second half.
 */
async function runEndurance(svc: ServiceUnderTest, options: Options): Promise<Measured> {
  const encrypt = SCENARIOS.find((s) => s.id === 'encrypt-64-b')!
  const tenant = await svc.createTenant()
  const prepared = await encrypt.prepare(setupApi(svc.baseUrl, tenant))
  const total = options.quick ? 20_000 : 1_000_000
  const base = { baseUrl: svc.baseUrl, apiKey: tenant.apiKey, connections: 32, cycle: prepared.cycle }
  const before = await auditTotals(svc, tenant.tenantId)
  const rss = rssSampler(svc)
  const halves: LoadResult[] = []
  const rssAt: Map<number, number>[] = []
  for (let half = 0; half < 2; half++) {
    halves.push(await runLoad({ ...base, amount: total / 2 }))
    rssAt.push(svc.apiProcessRss())
    log(
      `  ${ENDURANCE_ID}: ${((half + 1) * total) / 2} operations, RSS ${[...rssAt[half]!.values()].map((b) => mb(b).toFixed(0)).join(' / ')} MB`,
    )
  }
  const peaks = rss.stop()
  const [first, second] = halves as [LoadResult, LoadResult]
  const combined: LoadResult = {
    ...second,
    sent: first.sent + second.sent,
    ok: first.ok + second.ok,
    non2xx: first.non2xx + second.non2xx,
    errors: first.errors + second.errors,
    elapsedS: first.elapsedS + second.elapsedS,
  }
  combined.requestsPerSecond = combined.ok / combined.elapsedS
  const audit = await checkAudit(svc, tenant.tenantId, before, combined, prepared.auditRecords, 1)
  // Growth per process between the halfway mark and the end.
  let worstGrowth = 0
  for (const [pid, end] of rssAt[1]!) {
    const middle = rssAt[0]!.get(pid)
    if (middle) worstGrowth = Math.max(worstGrowth, end / middle - 1)
  }
  const peakMb = mb(maxOf(peaks.values()))
  return {
    row: {
      scenario: `${total.toLocaleString('en-US')} encrypts: RSS growth ${(worstGrowth * 100).toFixed(1)}% in 2nd half`,
      requestsPerSecond: combined.requestsPerSecond,
      itemsPerSecond: combined.requestsPerSecond,
      p50Ms: second.latency.p50,
      p99Ms: second.latency.p99,
      target: 'RSS ≤ 300 MB, growth < 10%',
      met: peakMb <= 300 && worstGrowth < 0.1,
      peakRssMb: peakMb,
      audit: audit.text,
    },
    load: combined,
    failures: audit.failure ? [`${ENDURANCE_ID}: ${audit.failure}`] : [],
  }
}

function writeResults(path: string, body: string): void {
  // Only the generated block is replaced: the notes around it (the optimisation log) stay.
  const begin = '<!-- bench:begin -->'
  const end = '<!-- bench:end -->'
  let current = ''
  try {
    current = readFileSync(path, 'utf8')
  } catch {}
  const block = `${begin}\n${body}${end}`
  const start = current.indexOf(begin)
  const stop = current.indexOf(end)
  const next =
    start >= 0 && stop > start
      ? current.slice(0, start) + block + current.slice(stop + end.length)
      : `# Benchmark results\n\n${block}\n`
  writeFileSync(path, next)
}

async function main(): Promise<void> {
  const options = parseArgs(process.argv.slice(2))
  const wanted = (id: string) => !options.only || options.only.has(id)
  const scenarios = SCENARIOS.filter((s) => wanted(s.id))
  const mode = options.quick ? 'quick' : 'full'
  log(
    `kms bench (${mode}): starting the service (npm start, KMS_API_PROCESSES=${options.processes ?? 'default'})`,
  )
  const svc = await startServiceUnderTest(options.processes ? { apiProcesses: options.processes } : {})
  const rows: Row[] = []
  const failures: string[] = []
  let machine: ReturnType<typeof describeMachine> | undefined
  const started = performance.now()
  try {
    const [pg] = await svc.sql<{ server_version: string }[]>`SHOW server_version`
    machine = describeMachine(pg!.server_version)
    log(
      `service up at ${svc.baseUrl}, API processes: ${svc.apiProcessRss().size}; ${machine.cores} cores, Node ${machine.node}, OpenSSL ${machine.openssl}`,
    )
    // The memory run goes first, on fresh processes: it asks whether serving a million operations
    // grows memory, which the high-water marks left by 1 MB bodies and batches would hide.
    if (wanted(ENDURANCE_ID)) {
      const measured = await runEndurance(svc, options)
      rows.push(measured.row)
      failures.push(...measured.failures)
    }
    let encryptRate: number | undefined
    for (const scenario of scenarios) {
      const measured = await runScenario(svc, scenario, options)
      rows.push(measured.row)
      failures.push(...measured.failures)
      if (scenario.id === 'encrypt-64-b') encryptRate = measured.load.requestsPerSecond
    }
    if (wanted(HALF_RATE_ID) && encryptRate) {
      const measured = await runHalfRate(svc, encryptRate, options)
      rows.push(measured.row)
      failures.push(...measured.failures)
    }
  } finally {
    await svc.stop()
  }

  log(`\n${textTable(rows)}`)
  const notes = rows.filter((r) => r.note).map((r) => `${r.scenario}: ${r.note}`)
  for (const note of notes) log(note)
  log(`finished in ${((performance.now() - started) / 1000).toFixed(0)} s`)
  const out =
    options.out ?? (options.quick || options.only ? undefined : join(import.meta.dirname, 'RESULTS.md'))
  if (out && machine) {
    writeResults(
      out,
      `${machineMarkdown(machine, mode)}\n${markdownTable(rows)}\n${notes.map((n) => `- ${n}`).join('\n')}\n`,
    )
    log(`results written to ${out}`)
  }
  if (failures.length > 0) {
    for (const failure of failures) process.stderr.write(`FAILED ${failure}\n`)
    process.exit(1)
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`bench failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`)
  process.exit(1)
})
