/**
 * `npm run bench:cpu -- [--rate=2000] [--seconds=8] [--rounds=3] [--only=mac-hmac-sha256,...]`:
 * what one request costs the API process in CPU, measured where the machine is not saturated.
 *
 * At saturation on 2 cores shared with the load generator, CPU per request grows with the
 * contention (cold caches, preemption: the bare floor server itself measured 41-72 µs per MAC
 * in one hour), so `bench.ts` reads rates there and this script reads costs: the same scenario
 * at a fixed request rate (autocannon's overallRate, 128 connections), the API processes' CPU
 * from /proc divided by the requests answered, beside the bare node:http floor's at the same
 * rate. Each round starts the service once per data-plane adapter (KMS_DATA_PLANE: node, then
 * fastify, alternating), so the two are compared on the same machine minutes apart.
 */
import { availableParallelism } from 'node:os'
import { cpuBetween, readCpu } from './lib/cpu-usage.ts'
import { floorRoutes, startFloor } from './lib/floor.ts'
import { runLoad } from './lib/load.ts'
import { probeAnswers } from './lib/measure.ts'
import { SCENARIOS } from './lib/scenarios.ts'
import { freePort, startServiceUnderTest } from './lib/service-under-test.ts'
import { setupApi } from './lib/setup-api.ts'

const option = (name: string, fallback: string) =>
  process.argv.find((a) => a.startsWith(`--${name}=`))?.split('=')[1] ?? fallback
const rate = Number(option('rate', '2000'))
const seconds = Number(option('seconds', '8'))
const rounds = Number(option('rounds', '3'))
const connections = Number(option('connections', '128'))
const only = option('only', 'mac-hmac-sha256,encrypt-64-b,sign-ed25519').split(',')
const adapters = option('adapters', 'node,fastify').split(',')
const scenarios = only.map((id) => {
  const scenario = SCENARIOS.find((s) => s.id === id)
  if (!scenario) throw new Error(`unknown scenario ${id}`)
  return scenario
})
if (!(rate > 0 && seconds > 0 && rounds > 0 && connections > 0))
  throw new Error('bad --rate, --seconds, --rounds or --connections')

const log = (text: string) => process.stdout.write(`${text}\n`)
log(
  `API CPU per request at ${rate} req/s over ${connections} connections, ${seconds} s per run, ` +
    `${rounds} round(s), adapters ${adapters.join(' / ')}, ${availableParallelism()} cores`,
)

interface Cell {
  apiUs: number[]
  floorUs: number[]
}
const results = new Map<string, Cell>()
const cell = (key: string) => {
  let c = results.get(key)
  if (!c) {
    c = { apiUs: [], floorUs: [] }
    results.set(key, c)
  }
  return c
}

const floor = await startFloor({ processes: 1, port: await freePort() })
try {
  for (let round = 1; round <= rounds; round++) {
    for (const adapter of adapters) {
      const svc = await startServiceUnderTest({ apiProcesses: 1, env: { KMS_DATA_PLANE: adapter } })
      try {
        for (const scenario of scenarios) {
          const tenant = await svc.createTenant()
          const prepared = await scenario.prepare(setupApi(svc.baseUrl, tenant))
          const base = { apiKey: tenant.apiKey, connections, cycle: prepared.cycle }
          // Warm: JIT, connections and caches, at full speed.
          await runLoad({ ...base, baseUrl: svc.baseUrl, durationS: 3 })
          const api = svc.apiPids()
          const before = readCpu(api)
          const load = await runLoad({ ...base, baseUrl: svc.baseUrl, durationS: seconds, overallRate: rate })
          const apiUs = (cpuBetween(before, readCpu(api)) * 1e6) / load.ok
          if (load.non2xx > 0 || load.errors > 0)
            throw new Error(`${scenario.id}: ${JSON.stringify(load.statusCodes)}`)

          const answers = await probeAnswers(svc.baseUrl, tenant.apiKey, prepared.cycle)
          const works = prepared.floorWork ?? prepared.cycle.map(() => scenario.ceiling)
          await floor.configure(floorRoutes(prepared.cycle, works, scenario.itemsPerRequest, answers))
          await runLoad({ ...base, baseUrl: floor.baseUrl, durationS: 2 })
          const floorBefore = readCpu(floor.pids())
          const floorLoad = await runLoad({
            ...base,
            baseUrl: floor.baseUrl,
            durationS: seconds,
            overallRate: rate,
          })
          const floorUs = (cpuBetween(floorBefore, readCpu(floor.pids())) * 1e6) / floorLoad.ok

          const c = cell(`${scenario.id}|${adapter}`)
          c.apiUs.push(apiUs)
          c.floorUs.push(floorUs)
          log(
            `  round ${round} ${adapter.padEnd(7)} ${scenario.id.padEnd(18)} ${Math.round(load.requestsPerSecond)} req/s: ` +
              `API ${apiUs.toFixed(1)} µs/req, floor ${floorUs.toFixed(1)} µs/req (${(apiUs / floorUs).toFixed(2)}×)`,
          )
        }
      } finally {
        await svc.stop()
      }
    }
  }
} finally {
  await floor.stop()
}

const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.floor(sorted.length / 2)]!
}
log('\n| scenario | adapter | API CPU µs/req (median, all runs) | floor CPU µs/req | API ÷ floor |')
log('|---|---|--:|--:|--:|')
for (const scenario of scenarios) {
  for (const adapter of adapters) {
    const c = results.get(`${scenario.id}|${adapter}`)
    if (!c) continue
    log(
      `| ${scenario.title} | ${adapter} | ${median(c.apiUs).toFixed(1)} (${c.apiUs.map((v) => v.toFixed(0)).join(', ')}) | ` +
        `${median(c.floorUs).toFixed(1)} | ${(median(c.apiUs) / median(c.floorUs)).toFixed(2)} |`,
    )
  }
}
