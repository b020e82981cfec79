/**
 * `npm run bench:memory`: where one API process's resident memory goes. Starts the service as
 * `npm start` runs it (one API process), reads its RSS, threads and anonymous memory from /proc
 * and the main isolate's heap from /metrics, right after the start and after 6 s of each of a
 * few scenarios. The heap series are the main thread's only: what RSS holds beyond them is the
 * crypto pool's threads (an isolate each), code and native buffers.
 */
import { readFileSync } from 'node:fs'
import { runLoad } from './lib/load.ts'
import { SCENARIOS } from './lib/scenarios.ts'
import { startServiceUnderTest } from './lib/service-under-test.ts'
import { setupApi } from './lib/setup-api.ts'

const MB = 2 ** 20
const svc = await startServiceUnderTest({ apiProcesses: 1 })

async function report(label: string): Promise<void> {
  const pid = svc.apiPids()[0]!
  const status = readFileSync(`/proc/${pid}/status`, 'utf8')
  const field = (text: string, name: string) => Number(new RegExp(`^${name}:\\s+(\\d+)`, 'm').exec(text)?.[1])
  const smaps = readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8')
  const metrics = await (await fetch(`${svc.baseUrl}/metrics`)).text()
  const series = (name: string) => {
    const line = metrics.split('\n').find((l) => l.startsWith(name))
    return line ? Number(line.split(' ').at(-1)) / MB : Number.NaN
  }
  process.stdout.write(
    `${label.padEnd(34)} RSS ${(field(status, 'VmRSS') / 1024).toFixed(0)} MB (anonymous ${(field(smaps, 'Anonymous') / 1024).toFixed(0)}), ` +
      `threads ${field(status, 'Threads')}; main heap ${series('nodejs_heap_size_total_bytes').toFixed(0)} MB ` +
      `(used ${series('nodejs_heap_size_used_bytes').toFixed(0)}), external ${series('nodejs_external_memory_bytes').toFixed(0)} MB\n`,
  )
}

try {
  await report('right after the start')
  for (const id of ['mac-hmac-sha256', 'encrypt-64-b', 'sign-ml-dsa-65', 'encrypt-1-mb-binary']) {
    const scenario = SCENARIOS.find((s) => s.id === id)!
    const tenant = await svc.createTenant()
    const prepared = await scenario.prepare(setupApi(svc.baseUrl, tenant))
    const base = { baseUrl: svc.baseUrl, apiKey: tenant.apiKey, cycle: prepared.cycle }
    await runLoad({ ...base, connections: scenario.connections, durationS: 6 })
    await report(`after 6 s of ${id}`)
  }
} finally {
  await svc.stop()
}
