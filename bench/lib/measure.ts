import { randomBytes } from 'node:crypto'
import { cpuBetween, pidsNamed, readCpu } from './cpu-usage.ts'
import { type Floor, floorRoutes } from './floor.ts'
import { type LoadResult, type RequestSpec, runLoad } from './load.ts'
import type { PreparedScenario, Scenario } from './scenarios.ts'
import type { ServiceUnderTest } from './service-under-test.ts'

/**
 * What every measured run of the bench shares (the scenario table, the connections sweep): the
 * audit count, CPU per request from /proc, peak RSS, and the HTTP floor's run.
 */

export const maxOf = (values: Iterable<number>) => Math.max(0, ...values)
export const mb = (bytes: number) => bytes / 2 ** 20

export interface AuditTotals {
  records: number
  items: number
}

export async function auditTotals(svc: ServiceUnderTest, tenantId: string): Promise<AuditTotals> {
  const [row] = await svc.sql<{ records: string; items: string }[]>`
    SELECT count(*) AS records, coalesce(sum((details->>'items')::bigint), 0) AS items
    FROM audit_log WHERE tenant_id = ${tenantId}`
  return { records: Number(row!.records), items: Number(row!.items) }
}

/** The audit log must hold exactly one record per acknowledged operation (a batch is one). */
export async function checkAudit(
  svc: ServiceUnderTest,
  tenantId: string,
  before: AuditTotals,
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

/** Samples every API process's RSS while a load runs; the peak is the figure reported. */
export function rssSampler(svc: ServiceUnderTest): { stop(): Map<number, number> } {
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

/** CPU µs per answered request of the API processes, PostgreSQL and the bench process. */
export interface CpuPerRequest {
  apiUs: number
  /**
   * The service's own PostgreSQL backends (ServiceUnderTest.databaseBackendPids); undefined when
   * the database runs inside the service (zero configuration) or not on this machine.
   */
  postgresUs: number | undefined
  loadUs: number
}

export interface CpuMeter {
  stop(requests: number): Promise<CpuPerRequest>
}

/**
 * Starts counting. The API pids are read at the start (a crashed and replaced API process would
 * count from zero). PostgreSQL: the backends of the service's connections, listed from
 * pg_stat_activity at the start and again at the stop; a backend opened during the run counts
 * from zero, one that closed before the stop is lost (the pools keep theirs for 30 s idle).
 * PostgreSQL's shared processes (WAL writer, checkpointer, autovacuum) and every other
 * database's backends are not counted.
 */
export async function cpuMeter(svc: ServiceUnderTest): Promise<CpuMeter> {
  const api = svc.apiPids()
  const backendsBefore = await svc.databaseBackendPids()
  const pgBefore = backendsBefore ? readCpu(pidsNamed(backendsBefore, 'postgres')) : undefined
  const apiBefore = readCpu(api)
  const loadBefore = process.cpuUsage()
  return {
    async stop(requests) {
      const apiSeconds = cpuBetween(apiBefore, readCpu(api))
      const load = process.cpuUsage(loadBefore)
      let pgSeconds: number | undefined
      if (pgBefore) {
        const backendsAfter = (await svc.databaseBackendPids()) ?? []
        const pgAfter = readCpu(pidsNamed(new Set([...pgBefore.keys(), ...backendsAfter]), 'postgres'))
        // No backend found on this machine: the server is elsewhere, its CPU is not measured.
        if (pgBefore.size > 0 || pgAfter.size > 0) pgSeconds = cpuBetween(pgBefore, pgAfter)
      }
      const perRequest = (seconds: number) => (requests > 0 ? (seconds * 1e6) / requests : Number.NaN)
      return {
        apiUs: perRequest(apiSeconds),
        postgresUs: pgSeconds === undefined ? undefined : perRequest(pgSeconds),
        loadUs: perRequest((load.user + load.system) / 1e6),
      }
    },
  }
}

export interface Answer {
  status: number
  contentType: string
  bytes: number
}

/**
 * Each request of the cycle sent to the service once (headers and body as the load generator
 * sends them): the floor answers it with the same status, content type and size.
 */
export async function probeAnswers(
  baseUrl: string,
  apiKey: string,
  cycle: readonly RequestSpec[],
): Promise<Answer[]> {
  const answers: Answer[] = []
  for (const spec of cycle) {
    const body =
      typeof spec.body === 'string'
        ? spec.body.replaceAll('[<id>]', `probe-${randomBytes(6).toString('hex')}`)
        : spec.body
    const response = await fetch(`${baseUrl}${spec.path}`, {
      method: spec.method,
      headers: { 'x-api-key': apiKey, 'content-type': 'application/json', ...spec.headers },
      ...(body !== undefined ? { body: typeof body === 'string' ? body : new Uint8Array(body) } : {}),
    })
    const bytes = (await response.arrayBuffer()).byteLength
    if (!response.ok) throw new Error(`probe ${spec.method} ${spec.path}: ${response.status}`)
    answers.push({
      status: response.status,
      contentType: response.headers.get('content-type') ?? 'application/octet-stream',
      bytes,
    })
  }
  return answers
}

export interface FloorMeasured {
  load: LoadResult
  processes: number
  floorUs: number
  loadUs: number
  /** The warm-up rates by process count, `1: 20000, 2: 18000`, when there was a choice. */
  warmRates?: string
}

export interface FloorRun {
  connections: number
  /** Seconds of the measured run (sized from the warm-up's rate). */
  seconds: number
  /** Seconds of each floor's warm-up (doubled for a floor's first scenario). */
  warmSeconds: number
}

const warmedFloors = new WeakSet<Floor>()

/**
 * The floor's run for a scenario: configured with the cycle's routes, warmed up and measured as
 * the service is (an amount sized from a warm-up). With several floors (1 process and one per
 * core), each runs and the faster counts: on 2 cores shared with the load generator, one
 * process can beat two for cheap requests.
 */
export async function measureFloor(
  floors: readonly Floor[],
  scenario: Scenario,
  prepared: PreparedScenario,
  answers: readonly Answer[],
  apiKey: string,
  run: FloorRun,
): Promise<FloorMeasured> {
  const works = prepared.floorWork ?? prepared.cycle.map(() => scenario.ceiling)
  const routes = floorRoutes(prepared.cycle, works, scenario.itemsPerRequest, answers)
  const base = { apiKey, connections: run.connections, cycle: prepared.cycle }
  const failed = (load: LoadResult) =>
    new Error(`${scenario.id}: the floor answered ${JSON.stringify(load.statusCodes)}, ${load.errors} errors`)
  // Each floor is warmed by time, not by the service's request count: a floor process is cold
  // for its first second (JIT of the server and the operation), and a cheap scenario's capped
  // warm-up amount ended before that (MAC: 4,000 req/s measured, 20,000+ once warm). The
  // warm-up rates pick the floor that is measured, so trying both process counts costs one
  // warm-up more, not a second measured run.
  let chosen: { floor: Floor; rate: number } | undefined
  const rates: string[] = []
  for (const floor of floors) {
    await floor.configure(routes)
    // A floor's first scenario also warms its HTTP server: twice as long, or the choice between
    // process counts is made on cold processes (one run: 4,072 req/s against 1,195).
    const warmSeconds = run.warmSeconds * (warmedFloors.has(floor) ? 1 : 2)
    warmedFloors.add(floor)
    const warm = await runLoad({ ...base, baseUrl: floor.baseUrl, durationS: warmSeconds })
    if (warm.non2xx > 0 || warm.errors > 0) throw failed(warm)
    rates.push(`${floor.processes}: ${Math.round(warm.requestsPerSecond)}`)
    if (!chosen || warm.requestsPerSecond > chosen.rate) chosen = { floor, rate: warm.requestsPerSecond }
  }
  const { floor, rate } = chosen!
  const pids = floor.pids()
  const cpuBefore = readCpu(pids)
  const loadBefore = process.cpuUsage()
  const load = await runLoad({ ...base, baseUrl: floor.baseUrl, amount: rate * run.seconds })
  const floorSeconds = cpuBetween(cpuBefore, readCpu(pids))
  const loadCpu = process.cpuUsage(loadBefore)
  if (load.non2xx > 0 || load.errors > 0) throw failed(load)
  return {
    load,
    processes: floor.processes,
    floorUs: (floorSeconds * 1e6) / load.ok,
    loadUs: (loadCpu.user + loadCpu.system) / load.ok,
    ...(floors.length > 1 ? { warmRates: rates.join(', ') } : {}),
  }
}
