import type { Floor } from './floor.ts'
import { runLoad } from './load.ts'
import {
  auditTotals,
  type CpuPerRequest,
  checkAudit,
  cpuMeter,
  type FloorMeasured,
  measureFloor,
  probeAnswers,
} from './measure.ts'
import { ACCEPTANCE_CONNECTIONS, type Scenario, type SweepTarget } from './scenarios.ts'
import type { ServiceUnderTest } from './service-under-test.ts'
import { setupApi } from './setup-api.ts'

/**
 * The connections sweep: one scenario at each connection count, the service then the HTTP floor
 * at the same count, short amount-based runs (every answer in, the audit count exact). Throughput
 * rises with connections until one process's event loop (or the commit) is the limit: the 32
 * connections of the scenario table are not where the service saturates.
 */
export interface SweepPoint {
  scenarioId: string
  title: string
  connections: number
  requestsPerSecond: number
  p50Ms: number
  p99Ms: number
  cpu: CpuPerRequest
  floor: FloorMeasured
  /** Service ÷ floor, both at this connection count. */
  floorRatio: number
  audit: string
  /** The issue's target, at ACCEPTANCE_CONNECTIONS only. */
  target?: string
  met?: boolean
}

export interface SweepOptions {
  connections: readonly number[]
  /** Seconds of each measured run (the service's and the floor's). */
  seconds: number
  /** Seconds of each floor's warm-up, and about that of the service's. */
  warmSeconds: number
  log(text: string): void
}

/** The target's cells of a point at the acceptance connection count. */
function targetOf(
  target: SweepTarget | undefined,
  connections: number,
  floorRatio: number,
  apiUs: number,
): Pick<SweepPoint, 'target' | 'met'> {
  if (!target || connections !== ACCEPTANCE_CONNECTIONS) return {}
  const parts = [`≥ ${target.floor * 100}% of floor`]
  let met = floorRatio >= target.floor
  if (target.apiCpuUs !== undefined) {
    parts.push(`API ≤ ${target.apiCpuUs} µs`)
    met &&= apiUs <= target.apiCpuUs
  }
  return { target: parts.join(', '), met }
}

export async function sweepScenario(
  svc: ServiceUnderTest,
  floors: readonly Floor[],
  scenario: Scenario,
  target: SweepTarget | undefined,
  options: SweepOptions,
): Promise<{ points: SweepPoint[]; failures: string[] }> {
  const tenant = await svc.createTenant()
  const prepared = await scenario.prepare(setupApi(svc.baseUrl, tenant))
  const answers = await probeAnswers(svc.baseUrl, tenant.apiKey, prepared.cycle)
  const points: SweepPoint[] = []
  const failures: string[] = []
  // Sizes the first warm-up; then each count's warm-up is sized from the previous count's rate.
  let rate = 2000
  let first = true
  for (const connections of options.connections) {
    const base = { baseUrl: svc.baseUrl, apiKey: tenant.apiKey, connections, cycle: prepared.cycle }
    // Amount-based, as the measured run: a duration-based warm-up would abandon requests whose
    // audit records land after the count below is taken.
    // The first count's warm-up is twice as long: the scenario's routes may not have run yet
    // (the sweep alone, --sweep-only), and its new keys are in no cache.
    const warmSeconds = options.warmSeconds * (first ? 2 : 1)
    first = false
    const warm = await runLoad({
      ...base,
      amount: Math.max(rate * warmSeconds, connections * prepared.cycle.length * 2),
    })
    if (warm.non2xx > 0 || warm.errors > 0) {
      throw new Error(
        `${scenario.id} at ${connections} connections: warm-up answered ${JSON.stringify(warm.statusCodes)}, ${warm.errors} errors`,
      )
    }
    const before = await auditTotals(svc, tenant.tenantId)
    const cpu = await cpuMeter(svc)
    const load = await runLoad({ ...base, amount: warm.requestsPerSecond * options.seconds })
    const cpuUsed = await cpu.stop(load.ok)
    const audit = await checkAudit(
      svc,
      tenant.tenantId,
      before,
      load,
      prepared.auditRecords,
      scenario.itemsPerRequest,
    )
    if (audit.failure) failures.push(`${scenario.id} at ${connections} connections: ${audit.failure}`)
    rate = load.requestsPerSecond
    const floor = await measureFloor(floors, scenario, prepared, answers, tenant.apiKey, {
      connections,
      seconds: options.seconds,
      warmSeconds: options.warmSeconds,
    })
    const floorRatio = load.requestsPerSecond / floor.load.requestsPerSecond
    const point: SweepPoint = {
      scenarioId: scenario.id,
      title: scenario.title,
      connections,
      requestsPerSecond: load.requestsPerSecond,
      p50Ms: load.latency.p50,
      p99Ms: load.latency.p99,
      cpu: cpuUsed,
      floor,
      floorRatio,
      audit: audit.text,
      ...targetOf(target, connections, floorRatio, cpuUsed.apiUs),
    }
    points.push(point)
    const us = (v: number | undefined) => (v === undefined ? '–' : v.toFixed(0))
    options.log(
      `  sweep ${scenario.id} ×${connections}: ${Math.round(load.requestsPerSecond)} req/s = ${(floorRatio * 100).toFixed(0)}% of floor ${Math.round(floor.load.requestsPerSecond)} (${floor.processes} process${floor.processes > 1 ? 'es' : ''})` +
        `, p50 ${load.latency.p50.toFixed(2)} ms (floor ${floor.load.latency.p50.toFixed(2)}), p99 ${load.latency.p99.toFixed(2)} ms` +
        `, CPU µs/req api ${us(cpuUsed.apiUs)} pg ${us(cpuUsed.postgresUs)} load ${us(cpuUsed.loadUs)} floor ${us(floor.floorUs)}` +
        `, audit ${audit.text}${point.target ? `; target ${point.target} ${point.met ? '✓' : '✗'}` : ''}`,
    )
  }
  return { points, failures }
}

/** The point with the highest service rate: where the service saturates. */
export function saturation(points: readonly SweepPoint[]): SweepPoint | undefined {
  let best: SweepPoint | undefined
  for (const point of points) {
    if (!best || point.requestsPerSecond > best.requestsPerSecond) best = point
  }
  return best
}
