/**
 * `npm run bench`: the service as `npm start` runs it (real PostgreSQL and Redis, audit on),
 * driven by autocannon over keep-alive connections, against the raw node:crypto ceiling measured
 * in the same run on every core. Prints one row per scenario and writes bench/RESULTS.md.
 *
 *   npm run bench                      full run with the connections sweep (about 22 minutes),
 *                                      writes bench/RESULTS.md
 *   npm run bench -- --quick           every scenario briefly (3-4 minutes), prints only
 *   npm run bench -- --sweep           also the connections sweep (the default of a full run)
 *   npm run bench -- --sweep-only --only=mac-hmac-sha256   the sweep alone, of MAC
 *   npm run bench -- --only=encrypt-64-b,mixed --processes=1 --out=/tmp/r.md
 *   npm run bench -- --zero-config     the service with nothing configured (embedded PGlite, one
 *                                      process, no Redis); its own block of bench/RESULTS.md
 *   npm run bench -- --floor-only      ceiling and HTTP floor rows only (npm run bench:floor)
 *
 * Every scenario row has three measurements from the same run: the ceiling (lib/ceiling.ts), the
 * HTTP floor (lib/floor.ts: a bare node:http server doing only the scenario's crypto, sent the
 * same request cycle) and the service, with both ratios, and the CPU µs each request cost the
 * API processes, PostgreSQL (the service's own backends), the load generator and the floor's
 * processes. Every rate is answers ÷ the time from the start of the run to its last answer.
 *
 * The connections sweep (lib/sweep.ts): the small operations (encrypt and decrypt 64 B, sign and
 * verify Ed25519 and EC P-256, data key) and MAC at 8, 32, 128 and 256 connections, each against
 * the floor at the same count; the scenario table gives each one's best rate over the sweep beside
 * its 32-connection rate, and the sweep table the issue's targets at 128 connections.
 *
 * Other flags: --floor-processes=N|best (default best: a 1-process and a one-per-core floor are
 * warmed up, the faster is measured), --seconds=N (measured seconds per scenario instead of its own),
 * --sweep=8,128 (the sweep at these connection counts), --sweep-seconds=N (measured seconds per
 * sweep run: default 3, 2 with --quick), --no-sweep (a full run without it).
 *
 * Exit status 1 when the harness itself fails: a request answered other than 2xx, an audit
 * count that is not exactly one record per acknowledged operation, or a service that would not
 * start. A target missed is a finding, reported in the table, not a failure of the run.
 */

import { readFileSync, writeFileSync } from 'node:fs'
import { availableParallelism } from 'node:os'
import { join } from 'node:path'
import { performance } from 'node:perf_hooks'
import { type CeilingResult, measureCeiling } from './lib/ceiling.ts'
import { type Floor, startFloor } from './lib/floor.ts'
import { type LoadResult, runLoad } from './lib/load.ts'
import {
  type Answer,
  auditTotals,
  type CpuPerRequest,
  checkAudit,
  cpuMeter,
  type FloorMeasured,
  maxOf,
  mb,
  measureFloor,
  probeAnswers,
  rssSampler,
} from './lib/measure.ts'
import {
  describeMachine,
  type FloorOnlyRow,
  floorMarkdownTable,
  floorTextTable,
  machineMarkdown,
  markdownTable,
  type Row,
  type SweepRow,
  sweepMarkdownTable,
  sweepTextTable,
  textTable,
} from './lib/report.ts'
import {
  ACCEPTANCE_CONNECTIONS,
  type PreparedScenario,
  SCENARIOS,
  type Scenario,
  SWEEP_CONNECTIONS,
  SWEEP_TARGETS,
  type Target,
} from './lib/scenarios.ts'
import { freePort, type ServiceUnderTest, startServiceUnderTest } from './lib/service-under-test.ts'
import { setupApi } from './lib/setup-api.ts'
import { type SweepPoint, saturation, sweepScenario } from './lib/sweep.ts'

interface Options {
  quick: boolean
  only?: Set<string>
  processes?: number
  out?: string
  zeroConfig: boolean
  floorOnly: boolean
  /** Floor process counts to try per scenario; the fastest counts. */
  floorProcesses: number[]
  seconds?: number
  /** The connections sweep: on with these counts, off (undefined), or the default of the mode. */
  sweep?: readonly number[] | 'off'
  /** The sweep alone: no scenario table, endurance or half-rate run. */
  sweepOnly: boolean
  sweepSeconds?: number
}

function parseArgs(argv: string[]): Options {
  const options: Options = {
    quick: false,
    zeroConfig: false,
    floorOnly: false,
    floorProcesses: [...new Set([1, availableParallelism()])],
    sweepOnly: false,
  }
  for (const arg of argv) {
    const [flag, value] = arg.split('=', 2) as [string, string | undefined]
    if (flag === '--quick') options.quick = true
    else if (flag === '--only' && value) options.only = new Set(value.split(','))
    else if (flag === '--processes' && value && /^[1-9]\d*$/.test(value)) options.processes = Number(value)
    else if (flag === '--out' && value) options.out = value
    else if (flag === '--zero-config' && value === undefined) options.zeroConfig = true
    else if (flag === '--floor-only' && value === undefined) options.floorOnly = true
    else if (flag === '--floor-processes' && value === 'best')
      options.floorProcesses = [...new Set([1, availableParallelism()])]
    else if (flag === '--floor-processes' && value && /^[1-9]\d*$/.test(value))
      options.floorProcesses = [Number(value)]
    else if (flag === '--seconds' && value && /^\d+(\.\d+)?$/.test(value) && Number(value) > 0)
      options.seconds = Number(value)
    else if (flag === '--sweep' && value === undefined) options.sweep = SWEEP_CONNECTIONS
    else if (flag === '--sweep' && value && /^[1-9]\d*(,[1-9]\d*)*$/.test(value))
      options.sweep = [...new Set(value.split(',').map(Number))]
    else if (flag === '--no-sweep' && value === undefined) options.sweep = 'off'
    else if (flag === '--sweep-only' && value === undefined) options.sweepOnly = true
    else if (flag === '--sweep-seconds' && value && /^\d+(\.\d+)?$/.test(value) && Number(value) > 0)
      options.sweepSeconds = Number(value)
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
  if (options.zeroConfig && options.processes) {
    // Zero configuration is one process by definition (the embedded database): say so, not ignore.
    process.stderr.write(
      '--processes does not apply to --zero-config (the embedded database runs one process)\n',
    )
    process.exit(2)
  }
  if (options.sweepOnly && options.sweep === 'off') {
    process.stderr.write('--sweep-only and --no-sweep contradict each other\n')
    process.exit(2)
  }
  if (options.floorOnly && (options.sweepOnly || Array.isArray(options.sweep))) {
    process.stderr.write('--floor-only does not run the connections sweep\n')
    process.exit(2)
  }
  if (options.sweepOnly && options.sweep === undefined) options.sweep = SWEEP_CONNECTIONS
  // A full run of every scenario sweeps; --quick, --only and --zero-config only when asked.
  if (options.sweep === undefined) {
    const everything = !options.quick && !options.only && !options.zeroConfig && !options.floorOnly
    options.sweep = everything ? SWEEP_CONNECTIONS : 'off'
  }
  return options
}

const ENDURANCE_ID = 'endurance'
const HALF_RATE_ID = 'encrypt-64-b-half-rate'
const log = (text: string) => process.stdout.write(`${text}\n`)

interface Measured {
  row: Row
  load: LoadResult
  failures: string[]
}

const cpuCells = (cpu: CpuPerRequest) => ({
  apiCpuUs: cpu.apiUs,
  ...(cpu.postgresUs !== undefined ? { postgresCpuUs: cpu.postgresUs } : {}),
  loadCpuUs: cpu.loadUs,
})

/** Warm-up requests: sized from the ceiling, capped (a cheap MAC would otherwise warm for a minute). */
function warmAmountOf(scenario: Scenario, ceiling: CeilingResult | undefined, options: Options): number {
  const ceilingRequests = ceiling ? ceiling.opsPerSecond / scenario.itemsPerRequest : 1000
  return Math.min(ceilingRequests * 0.25 * (options.quick ? 0.5 : 2), options.quick ? 2000 : 10_000)
}

const secondsOf = (scenario: Scenario, options: Options) =>
  options.seconds ?? (options.quick ? scenario.seconds.quick : scenario.seconds.full)

/**
 * The floor's run for a scenario's row: the scenario's connections; 5 s at most, as the floor does
 * the same work however long it runs (the service's 60 s of key creation is about its tables
 * growing).
 */
const floorRunOf = (scenario: Scenario, options: Options) => ({
  connections: scenario.connections,
  seconds: Math.min(secondsOf(scenario, options), 5),
  warmSeconds: options.quick ? 1 : 2,
})

/** The floor's run for a scenario at its own connections, with the warm-up rates it chose by. */
async function scenarioFloor(
  floors: readonly Floor[],
  scenario: Scenario,
  prepared: PreparedScenario,
  answers: readonly Answer[],
  apiKey: string,
  options: Options,
): Promise<FloorMeasured> {
  const floor = await measureFloor(floors, scenario, prepared, answers, apiKey, floorRunOf(scenario, options))
  if (floor.warmRates) log(`    floor warm-up req/s by process count: ${floor.warmRates}`)
  return floor
}

async function runScenario(
  svc: ServiceUnderTest,
  floors: readonly Floor[],
  scenario: Scenario,
  options: Options,
): Promise<Measured & { floorProcesses: number }> {
  const started = performance.now()
  const tenant = await svc.createTenant()
  const prepared = await scenario.prepare(setupApi(svc.baseUrl, tenant))
  const answers = await probeAnswers(svc.baseUrl, tenant.apiKey, prepared.cycle)
  const ceiling = scenario.ceiling
    ? await measureCeiling(scenario.ceiling, { durationMs: options.quick ? 800 : 3000 })
    : undefined
  const base = {
    baseUrl: svc.baseUrl,
    apiKey: tenant.apiKey,
    connections: scenario.connections,
    cycle: prepared.cycle,
  }

  // Warm-up: JIT, connections, caches; its rate sizes the measured run.
  const warmAmount = warmAmountOf(scenario, ceiling, options)
  const warm = await runLoad({ ...base, amount: Math.max(1, warmAmount) })
  if (warm.non2xx > 0 || warm.errors > 0) {
    throw new Error(
      `${scenario.id}: warm-up answered ${JSON.stringify(warm.statusCodes)}, ${warm.errors} errors`,
    )
  }
  const seconds = secondsOf(scenario, options)
  const before = await auditTotals(svc, tenant.tenantId)
  const measureEventLoop = scenario.id === 'mixed'
  if (measureEventLoop) await svc.scrapeEventLoopP99() // starts a fresh window in each process
  const rss = rssSampler(svc)
  const cpu = await cpuMeter(svc)
  const load = await runLoad({ ...base, amount: warm.requestsPerSecond * seconds })
  const cpuUsed = await cpu.stop(load.ok)
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
  // The floor runs while the service idles: the same cycle, connections and amount sizing.
  const floor = await scenarioFloor(floors, scenario, prepared, answers, tenant.apiKey, options)

  const itemsPerSecond = load.requestsPerSecond * scenario.itemsPerRequest
  const floorItemsPerSecond = floor.load.requestsPerSecond * scenario.itemsPerRequest
  const ratio = ceiling ? itemsPerSecond / ceiling.opsPerSecond : undefined
  const row: Row = {
    scenario: scenario.title,
    connections: scenario.connections,
    requestsPerSecond: load.requestsPerSecond,
    itemsPerSecond,
    ...(scenario.bytesPerItem ? { megabytesPerSecond: mb(itemsPerSecond * scenario.bytesPerItem) } : {}),
    p50Ms: load.latency.p50,
    p99Ms: load.latency.p99,
    ...(ceiling ? { ceilingItemsPerSecond: ceiling.opsPerSecond } : {}),
    ...(ratio !== undefined ? { ratio } : {}),
    floorItemsPerSecond,
    floorRatio: itemsPerSecond / floorItemsPerSecond,
    ...targetCells(scenario.target, { ceiling: ratio, floor: itemsPerSecond / floorItemsPerSecond }),
    ...cpuCells(cpuUsed),
    floorCpuUs: floor.floorUs,
    peakRssMb: mb(maxOf(peaks.values())),
    audit: audit.text,
  }
  if (eventLoop) {
    const p99 = maxOf(eventLoop.values())
    row.note = `event-loop delay p99 ${p99.toFixed(1)} ms (worst API process; target ≤ 20 ms)`
    row.target = `loop p99 ${p99.toFixed(1)} ms ≤ 20`
    row.met = p99 <= 20
  }
  const us = (v: number | undefined) => (v === undefined ? '–' : v.toFixed(0))
  log(
    `  ${scenario.id}: ${Math.round(load.requestsPerSecond)} req/s, ${Math.round(itemsPerSecond)} items/s` +
      `${ratio !== undefined ? ` = ${(ratio * 100).toFixed(0)}% of ceiling ${Math.round(ceiling!.opsPerSecond)}` : ''}` +
      `, ${((itemsPerSecond / floorItemsPerSecond) * 100).toFixed(0)}% of floor ${Math.round(floorItemsPerSecond)} (${floor.processes} process${floor.processes > 1 ? 'es' : ''})` +
      `, p99 ${load.latency.p99.toFixed(2)} ms, CPU µs/req api ${us(cpuUsed.apiUs)} pg ${us(cpuUsed.postgresUs)} load ${us(cpuUsed.loadUs)} floor ${us(floor.floorUs)}` +
      `, audit ${audit.text} (${((performance.now() - started) / 1000).toFixed(1)} s)`,
  )
  return {
    row,
    load,
    failures: audit.failure ? [`${scenario.id}: ${audit.failure}`] : [],
    floorProcesses: floor.processes,
  }
}

/** `--floor-only` (npm run bench:floor): the ceiling and the floor, no service measurement. */
async function runFloorOnly(
  svc: ServiceUnderTest,
  floors: readonly Floor[],
  scenario: Scenario,
  options: Options,
): Promise<FloorOnlyRow> {
  const tenant = await svc.createTenant()
  const prepared = await scenario.prepare(setupApi(svc.baseUrl, tenant))
  const answers = await probeAnswers(svc.baseUrl, tenant.apiKey, prepared.cycle)
  const ceiling = await measureCeiling(scenario.ceiling!, { durationMs: options.quick ? 800 : 3000 })
  const floor = await scenarioFloor(floors, scenario, prepared, answers, tenant.apiKey, options)
  const items = floor.load.requestsPerSecond * scenario.itemsPerRequest
  log(
    `  ${scenario.id}: floor ${Math.round(items)} items/s = ${((items / ceiling.opsPerSecond) * 100).toFixed(0)}% of ${Math.round(ceiling.opsPerSecond)} (${floor.processes} process${floor.processes > 1 ? 'es' : ''}), floor ${floor.floorUs.toFixed(0)} µs/req`,
  )
  return {
    scenario: scenario.title,
    ceilingItemsPerSecond: ceiling.opsPerSecond,
    floorItemsPerSecond: items,
    p50Ms: floor.load.latency.p50,
    p99Ms: floor.load.latency.p99,
    floorCpuUs: floor.floorUs,
    loadCpuUs: floor.loadUs,
    processes: floor.processes,
  }
}

/** The issue's target of a scenario against the ratio it names (÷ floor or ÷ ceiling). */
function targetCells(
  target: Target | undefined,
  ratios: { ceiling: number | undefined; floor: number },
): Pick<Row, 'target' | 'met'> {
  const ratio = target ? ratios[target.of] : undefined
  if (!target || ratio === undefined) return {}
  return { target: `≥ ${target.ratio * 100}% of ${target.of}`, met: ratio >= target.ratio }
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
  const cpu = await cpuMeter(svc)
  const load = await runLoad({
    baseUrl: svc.baseUrl,
    apiKey: tenant.apiKey,
    connections,
    cycle: prepared.cycle,
    amount: rate * seconds,
    overallRate: rate,
  })
  const cpuUsed = await cpu.stop(load.ok)
  const peaks = rss.stop()
  const audit = await checkAudit(svc, tenant.tenantId, before, load, prepared.auditRecords, 1)
  log(
    `  ${HALF_RATE_ID}: offered ${rate} req/s, p50 ${load.latency.p50.toFixed(2)} ms, p99 ${load.latency.p99.toFixed(2)} ms`,
  )
  return {
    row: {
      scenario: `encrypt 64 B at half max rate (${rate} req/s)`,
      connections,
      requestsPerSecond: load.requestsPerSecond,
      itemsPerSecond: load.requestsPerSecond,
      p50Ms: load.latency.p50,
      p99Ms: load.latency.p99,
      target: 'p99 ≤ 10 ms',
      met: load.latency.p99 <= 10,
      ...cpuCells(cpuUsed),
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
  const cpu = await cpuMeter(svc)
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
  const cpuUsed = await cpu.stop(first.ok + second.ok)
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
      connections: base.connections,
      requestsPerSecond: combined.requestsPerSecond,
      itemsPerSecond: combined.requestsPerSecond,
      p50Ms: second.latency.p50,
      p99Ms: second.latency.p99,
      target: 'RSS ≤ 300 MB, growth < 10%',
      met: peakMb <= 300 && worstGrowth < 0.1,
      ...cpuCells(cpuUsed),
      peakRssMb: peakMb,
      audit: audit.text,
    },
    load: combined,
    failures: audit.failure ? [`${ENDURANCE_ID}: ${audit.failure}`] : [],
  }
}

function sweepRowOf(point: SweepPoint): SweepRow {
  return {
    scenario: point.title,
    connections: point.connections,
    requestsPerSecond: point.requestsPerSecond,
    floorRequestsPerSecond: point.floor.load.requestsPerSecond,
    p50Ms: point.p50Ms,
    p99Ms: point.p99Ms,
    floorP50Ms: point.floor.load.latency.p50,
    floorP99Ms: point.floor.load.latency.p99,
    apiCpuUs: point.cpu.apiUs,
    postgresCpuUs: point.cpu.postgresUs,
    loadCpuUs: point.cpu.loadUs,
    floorCpuUs: point.floor.floorUs,
    floorProcesses: point.floor.processes,
    ...(point.target ? { target: point.target, met: point.met ?? false } : {}),
    audit: point.audit,
  }
}

const MAIN_BLOCK = 'bench'
const ZERO_CONFIG_BLOCK = 'bench:zero-config'

function writeResults(path: string, name: string, body: string): void {
  // Only the generated block is replaced: the notes around it (the optimisation log) stay.
  const begin = `<!-- ${name}:begin -->`
  const end = `<!-- ${name}:end -->`
  let current = ''
  try {
    current = readFileSync(path, 'utf8')
  } catch {}
  const block = `${begin}\n${body}${end}`
  const start = current.indexOf(begin)
  const stop = current.indexOf(end)
  let next: string
  if (start >= 0 && stop > start) next = current.slice(0, start) + block + current.slice(stop + end.length)
  else if (name === MAIN_BLOCK) next = `# Benchmark results\n\n${block}\n${current}`
  else {
    // A new block goes right after the main one (the analysis follows both), else at the end.
    const heading = `### Zero-configuration start (\`npm run bench -- --zero-config\`)\n\n${block}\n`
    const mainEnd = `<!-- ${MAIN_BLOCK}:end -->`
    const at = current.indexOf(mainEnd)
    next =
      at >= 0
        ? `${current.slice(0, at + mainEnd.length)}\n\n${heading}${current.slice(at + mainEnd.length)}`
        : `${current}${current ? '\n' : '# Benchmark results\n\n'}${heading}`
  }
  writeFileSync(path, next)
}

async function main(): Promise<void> {
  const options = parseArgs(process.argv.slice(2))
  const wanted = (id: string) => !options.only || options.only.has(id)
  const scenarios = SCENARIOS.filter((s) => wanted(s.id))
  const sweepConnections = Array.isArray(options.sweep) ? (options.sweep as readonly number[]) : undefined
  const swept = sweepConnections ? SCENARIOS.filter((s) => s.id in SWEEP_TARGETS && wanted(s.id)) : []
  const sweepSeconds = options.sweepSeconds ?? (options.quick ? 2 : 3)
  const mode =
    `${options.quick ? 'quick' : 'full'} run${options.zeroConfig ? ', zero configuration' : ''}` +
    `${options.sweepOnly ? ', connections sweep only' : sweepConnections ? ', with the connections sweep' : ''}`
  log(
    options.zeroConfig
      ? `kms bench (${mode}): starting the service (npm start with only PORT, HOST and KMS_DATA_DIR)`
      : `kms bench (${mode}): starting the service (npm start, KMS_API_PROCESSES=${options.processes ?? 'default'})`,
  )
  const svc = await startServiceUnderTest({
    ...(options.processes ? { apiProcesses: options.processes } : {}),
    zeroConfig: options.zeroConfig,
  })
  const rows: Row[] = []
  const rowsById = new Map<string, Row>()
  const sweepPoints: SweepPoint[] = []
  const floorRows: FloorOnlyRow[] = []
  const failures: string[] = []
  const floorWins = new Map<number, string[]>()
  const floors: Floor[] = []
  let machine: ReturnType<typeof describeMachine> | undefined
  const started = performance.now()
  try {
    for (const processes of options.floorProcesses) {
      floors.push(await startFloor({ processes, port: await freePort() }))
    }
    const [pg] = await svc.sql<{ server_version: string }[]>`SHOW server_version`
    machine = describeMachine(`${pg!.server_version}${svc.embeddedDatabase ? ' (embedded PGlite)' : ''}`)
    log(
      `service up at ${svc.baseUrl}, API processes: ${svc.apiPids().length}; floor processes: ${options.floorProcesses.join(' and ')}; ${machine.cores} cores, Node ${machine.node}, OpenSSL ${machine.openssl}`,
    )
    if (options.floorOnly) {
      for (const scenario of scenarios) {
        if (scenario.ceiling) floorRows.push(await runFloorOnly(svc, floors, scenario, options))
      }
    } else {
      // The memory run goes first, on fresh processes: it asks whether serving a million
      // operations grows memory, which the high-water marks left by 1 MB bodies and batches would hide.
      if (wanted(ENDURANCE_ID) && !options.sweepOnly) {
        const measured = await runEndurance(svc, options)
        rows.push(measured.row)
        failures.push(...measured.failures)
      }
      let encryptRate: number | undefined
      for (const scenario of options.sweepOnly ? [] : scenarios) {
        const measured = await runScenario(svc, floors, scenario, options)
        rows.push(measured.row)
        rowsById.set(scenario.id, measured.row)
        failures.push(...measured.failures)
        floorWins.set(measured.floorProcesses, [
          ...(floorWins.get(measured.floorProcesses) ?? []),
          scenario.id,
        ])
        if (scenario.id === 'encrypt-64-b') encryptRate = measured.load.requestsPerSecond
      }
      if (wanted(HALF_RATE_ID) && encryptRate) {
        const measured = await runHalfRate(svc, encryptRate, options)
        rows.push(measured.row)
        failures.push(...measured.failures)
      }
      if (sweepConnections) {
        log(
          swept.length === 0
            ? 'connections sweep: none of the chosen scenarios is swept (the small operations and MAC are)'
            : `connections sweep: ${swept.map((s) => s.id).join(', ')} at ${sweepConnections.join(', ')} connections, ${sweepSeconds} s runs`,
        )
      }
      for (const scenario of swept) {
        const sweep = await sweepScenario(svc, floors, scenario, SWEEP_TARGETS[scenario.id], {
          connections: sweepConnections!,
          seconds: sweepSeconds,
          warmSeconds: 1,
          log,
        })
        sweepPoints.push(...sweep.points)
        failures.push(...sweep.failures)
        const best = saturation(sweep.points)
        const row = rowsById.get(scenario.id)
        if (row && best) {
          row.saturated = {
            requestsPerSecond: best.requestsPerSecond,
            connections: best.connections,
            floorRatio: best.floorRatio,
          }
        }
      }
    }
  } finally {
    await Promise.all(floors.map((floor) => floor.stop()))
    await svc.stop()
  }

  if (options.floorOnly) {
    log(`\n${floorTextTable(floorRows)}`)
    log(`finished in ${((performance.now() - started) / 1000).toFixed(0)} s`)
    if (options.out && machine) {
      writeResults(
        options.out,
        'bench:floor',
        `${machineMarkdown(machine, mode)}\n${floorMarkdownTable(floorRows)}`,
      )
      log(`results written to ${options.out}`)
    }
    return
  }
  const sweepRows = sweepPoints.map(sweepRowOf)
  if (rows.length > 0) log(`\n${textTable(rows)}`)
  if (sweepRows.length > 0) log(`\nconnections sweep\n${sweepTextTable(sweepRows)}`)
  const notes = rows.filter((r) => r.note).map((r) => `${r.scenario}: ${r.note}`)
  notes.push(
    "req/s: answers ÷ the time from the start of the run to its last answer, at the row's connections (conns)",
  )
  if (sweepRows.length > 0) {
    notes.push(
      `Connections sweep: per scenario and connection count, a ${sweepSeconds} s amount-based run of the service (audit checked), then the HTTP floor at the same count (the faster of its process counts after a 1 s warm-up); the issue's targets are read at ${ACCEPTANCE_CONNECTIONS} connections` +
        (rows.some((r) => r.saturated)
          ? '; in the scenario table, saturated req/s is the best rate of the sweep @ its connection count, and saturated ÷ floor the floor at that count'
          : ''),
    )
  }
  if (floors.length > 1 && floorWins.size === 0) {
    notes.push(`HTTP floor: the faster of ${options.floorProcesses.join(' and ')} processes, per run`)
  } else if (floors.length > 1) {
    const wins = [...floorWins].map(([n, ids]) => `${n} process${n > 1 ? 'es' : ''} for ${ids.join(', ')}`)
    notes.push(
      `HTTP floor: the faster of ${options.floorProcesses.join(' and ')} processes; ${wins.join('; ')}`,
    )
  } else {
    notes.push(
      `HTTP floor: ${options.floorProcesses[0]} process${options.floorProcesses[0]! > 1 ? 'es' : ''}`,
    )
  }
  if (svc.embeddedDatabase)
    notes.push('PG µs/req: the embedded database runs inside the API process, so its CPU is in API µs/req')
  else
    notes.push(
      "PG µs/req: the CPU of the service's own PostgreSQL backends (the client backends of the bench database, listed at the start and end of each run; one opened meanwhile counts from zero), not the server's shared processes (WAL writer, checkpointer, autovacuum) nor other databases' backends",
    )
  for (const note of notes) log(note)
  log(`finished in ${((performance.now() - started) / 1000).toFixed(0)} s`)
  const out =
    options.out ??
    (options.quick || options.only || options.sweepOnly ? undefined : join(import.meta.dirname, 'RESULTS.md'))
  if (out && machine) {
    const tables = [
      ...(rows.length > 0 ? [markdownTable(rows)] : []),
      ...(sweepRows.length > 0
        ? [
            `Connections sweep (${sweepConnections!.join(', ')} connections):\n\n${sweepMarkdownTable(sweepRows)}`,
          ]
        : []),
    ]
    writeResults(
      out,
      options.zeroConfig ? ZERO_CONFIG_BLOCK : MAIN_BLOCK,
      `${machineMarkdown(machine, mode)}\n${tables.join('\n')}\n${notes.map((n) => `- ${n}`).join('\n')}\n`,
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
