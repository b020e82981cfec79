/**
 * `npm run bench:profile -- [scenario id] [--seconds=N]`: where the service's time goes.
 *
 * Starts the service with one API process under `node --cpu-prof`, drives one scenario of the
 * bench for a while, stops the service and prints the share of time per activity (cryptography,
 * logging, database, serialization, parsing, ...) and the functions with the most self time.
 * The .cpuprofile it writes opens as a flame graph in Chrome DevTools (Performance panel) or
 * https://www.speedscope.app.
 */
import { mkdirSync, readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { type LoadResult, runLoad } from './lib/load.ts'
import { SCENARIOS } from './lib/scenarios.ts'
import { PROJECT_ROOT, startServiceUnderTest } from './lib/service-under-test.ts'
import { setupApi } from './lib/setup-api.ts'

interface ProfileNode {
  id: number
  callFrame: { functionName: string; url: string; lineNumber: number }
  children?: number[]
}
interface CpuProfile {
  nodes: ProfileNode[]
  samples: number[]
  timeDeltas: number[]
}

const args = process.argv.slice(2)
const scenarioId = args.find((a) => !a.startsWith('--')) ?? 'encrypt-64-b'
const seconds = Number(args.find((a) => a.startsWith('--seconds='))?.split('=')[1] ?? 10)
const scenario = SCENARIOS.find((s) => s.id === scenarioId)
if (!scenario) {
  process.stderr.write(`unknown scenario ${scenarioId}; one of: ${SCENARIOS.map((s) => s.id).join(', ')}\n`)
  process.exit(2)
}

const profileDir = join(PROJECT_ROOT, 'data', 'profiles', `${scenarioId}-${Date.now()}`)
mkdirSync(profileDir, { recursive: true })
const svc = await startServiceUnderTest({
  apiProcesses: 1,
  env: { NODE_OPTIONS: `--cpu-prof --cpu-prof-dir=${profileDir}` },
})
let load: LoadResult
try {
  const tenant = await svc.createTenant()
  const api = setupApi(svc.baseUrl, tenant)
  const prepared = await scenario.prepare(api)
  process.stdout.write(`profiling ${scenarioId} for ${seconds} s (one API process) ...\n`)
  load = await runLoad({
    baseUrl: svc.baseUrl,
    apiKey: tenant.apiKey,
    connections: scenario.connections,
    cycle: prepared.cycle,
    durationS: seconds,
  })
} finally {
  await svc.stop()
}
process.stdout.write(
  `${Math.round(load.requestsPerSecond)} req/s, p50 ${load.latency.p50.toFixed(2)} ms, p99 ${load.latency.p99.toFixed(2)} ms\n`,
)

const file = readdirSync(profileDir).find((f) => f.endsWith('.cpuprofile'))
if (!file) {
  process.stderr.write(`no profile written in ${profileDir}\n`)
  process.exit(1)
}
const profile = JSON.parse(readFileSync(join(profileDir, file), 'utf8')) as CpuProfile
const byId = new Map(profile.nodes.map((n) => [n.id, n]))
const selfUs = new Map<number, number>()
for (const [i, id] of profile.samples.entries()) {
  selfUs.set(id, (selfUs.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0))
}
const total = [...selfUs.values()].reduce((a, b) => a + b, 0)

/**
 * What a sample was doing: the stack is searched for every activity it shows, and the first of
 * this list wins (a log write inside a Fastify hook is logging; a socket write inside postgres.js
 * is the database).
 */
const ACTIVITIES: [string, (url: string, name: string) => boolean][] = [
  ['cryptography (node:crypto)', (url) => url.startsWith('node:internal/crypto')],
  ['logging (pino)', (url) => /node_modules\/(pino|sonic-boom|@pinojs)\//.test(url)],
  ['database (postgres.js)', (url) => url.includes('node_modules/postgres/')],
  ['redis (ioredis)', (url) => url.includes('node_modules/ioredis/')],
  ['response serialization', (url, name) => url.includes('fast-json-stringify') || name === 'serialize'],
  ['body parsing', (url) => /secure-json-parse|content-type-parser/.test(url)],
  ['schema validation', (url) => url.includes('node_modules/ajv') || url.includes('src/platform/validation')],
  ['authentication', (url) => url.includes('/src/auth/')],
  ['audit', (url) => url.includes('/src/audit/')],
  ['crypto service code', (url) => url.includes('/src/crypto')],
  ['entropy', (url) => url.includes('/src/entropy/')],
  ['other project code', (url) => url.includes('/src/') && !url.includes('node_modules')],
  ['fastify', (url) => /node_modules\/(fastify|find-my-way|@fastify|avvio|light-my-request)/.test(url)],
  ['HTTP and sockets (node)', (url) => /^node:(_http|net|internal\/(streams|stream_base|http))/.test(url)],
  ['module loading (start-up)', (url) => url.startsWith('node:internal/modules')],
]
const parentOf = new Map<number, number>()
for (const node of profile.nodes) for (const child of node.children ?? []) parentOf.set(child, node.id)

function activityOf(id: number): string {
  const leaf = byId.get(id)!.callFrame.functionName
  if (leaf === '(idle)') return 'idle'
  if (leaf === '(garbage collector)') return 'garbage collection'
  let best = ACTIVITIES.length
  for (let cur: number | undefined = id; cur !== undefined; cur = parentOf.get(cur)) {
    const { url, functionName } = byId.get(cur)!.callFrame
    for (let i = 0; i < best; i++) if (ACTIVITIES[i]![1](url, functionName)) best = i
  }
  return ACTIVITIES[best]?.[0] ?? 'other (native, node internals)'
}

const functions = new Map<string, number>()
const areas = new Map<string, number>()
for (const [id, us] of selfUs) {
  const node = byId.get(id)!
  const { functionName, url, lineNumber } = node.callFrame
  const where = url ? `${url.replace(/^.*\/(node_modules|src)\//, '$1/')}:${lineNumber + 1}` : ''
  const key = `${functionName || '(anonymous)'} ${where}`
  functions.set(key, (functions.get(key) ?? 0) + us)
  const a = activityOf(id)
  areas.set(a, (areas.get(a) ?? 0) + us)
}
const pct = (us: number) => `${((us / total) * 100).toFixed(1).padStart(5)}%`
process.stdout.write('\ntime by activity\n')
for (const [name, us] of [...areas].sort((a, b) => b[1] - a[1]).slice(0, 20)) {
  process.stdout.write(`${pct(us)}  ${name}\n`)
}
process.stdout.write('\nfunctions with the most self time\n')
for (const [name, us] of [...functions].sort((a, b) => b[1] - a[1]).slice(0, 30)) {
  process.stdout.write(`${pct(us)}  ${name}\n`)
}
process.stdout.write(`\nprofile: ${join(profileDir, file)}\n`)
