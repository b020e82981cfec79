/**
 * `npm run bench:floor`: how close to the raw ceiling any HTTP service can get on this machine.
 *
 * Runs a bare node:http server, one process per core like `npm start`, that does each
 * scenario's cryptographic work (the ceiling's own code) per request and answers with a body of
 * the size the service's answer has, with nothing else: no framework, validation,
 * authentication, key lookup, database or audit. It is driven by the bench's own load generator
 * with the bench's connection counts. The ratio it reaches is the most the service could reach
 * with all of its own work removed; the gap between this floor and the ceiling is HTTP, the
 * load generator and the kernel sharing the cores (bench/RESULTS.md, "What bounds the ratios").
 *
 *   npm run bench:floor                 every floor scenario, 5 s each
 *   npm run bench:floor -- --seconds=10
 */
import cluster from 'node:cluster'
import { randomBytes } from 'node:crypto'
import { createServer } from 'node:http'
import { availableParallelism } from 'node:os'
import { measureCeiling } from './lib/ceiling.ts'
import { type CeilingWork, prepare } from './lib/ceiling-work.ts'
import { type RequestSpec, runLoad } from './lib/load.ts'

interface FloorScenario {
  id: string
  work: CeilingWork
  /** Ceiling operations per request. */
  items: number
  connections: number
  request: RequestSpec
  /** Bytes of the answer the service gives (an envelope, JSON or raw). */
  responseBytes: number
}

const b64 = (bytes: number) => randomBytes(bytes).toString('base64')
const json = (value: unknown) => JSON.stringify(value)
const MB = 1 << 20

const SCENARIOS: FloorScenario[] = [
  {
    id: 'encrypt-64-b',
    work: { kind: 'encrypt', bytes: 64 },
    items: 1,
    connections: 32,
    request: { method: 'POST', path: '/json', body: json({ plaintext: b64(64) }) },
    responseBytes: 1600,
  },
  {
    id: 'decrypt-64-b',
    work: { kind: 'decrypt', bytes: 64 },
    items: 1,
    connections: 32,
    request: { method: 'POST', path: '/json', body: json({ ciphertext: b64(1200), nonce: b64(12) }) },
    responseBytes: 150,
  },
  {
    id: 'encrypt-1-mb-binary',
    work: { kind: 'encrypt', bytes: MB },
    items: 1,
    connections: 8,
    request: {
      method: 'POST',
      path: '/binary',
      headers: { 'content-type': 'application/octet-stream' },
      body: randomBytes(MB),
    },
    responseBytes: MB + 1200,
  },
  {
    id: 'encrypt-batch',
    work: { kind: 'encrypt', bytes: 64 },
    items: 1000,
    connections: 8,
    request: {
      method: 'POST',
      path: '/json',
      body: json({ items: Array.from({ length: 1000 }, () => ({ plaintext: b64(64) })) }),
    },
    responseBytes: 1000 * 1600,
  },
]

const PORT = Number(process.env['FLOOR_PORT'] ?? 18_977)

function serve(): void {
  const operations = new Map(SCENARIOS.map((s) => [s.id, prepare(s.work)]))
  const answers = new Map(SCENARIOS.map((s) => [s.id, randomBytes(s.responseBytes)]))
  createServer((request, response) => {
    const id = request.headers['x-floor-scenario'] as string
    const scenario = SCENARIOS.find((s) => s.id === id)
    const chunks: Buffer[] = []
    request.on('data', (chunk: Buffer) => chunks.push(chunk))
    request.on('end', () => {
      if (!scenario) {
        response.writeHead(404).end()
        return
      }
      const body = Buffer.concat(chunks)
      // Parse what the service would parse, and serialize an answer of the service's size.
      if (request.url === '/json') JSON.parse(body.toString('utf8'))
      const operate = operations.get(id)!
      for (let i = 0; i < scenario.items; i++) operate()
      const answer = answers.get(id)!
      if (request.url === '/json') {
        const text = JSON.stringify({ result: answer.toString('base64') })
        response.writeHead(200, { 'content-type': 'application/json' }).end(text)
      } else {
        response.writeHead(200, { 'content-type': 'application/octet-stream' }).end(answer)
      }
    })
  }).listen(PORT, '127.0.0.1')
}

async function main(): Promise<void> {
  const secondsArg = process.argv.find((a) => a.startsWith('--seconds='))
  const seconds = secondsArg ? Number(secondsArg.split('=')[1]) : 5
  if (!Number.isFinite(seconds) || seconds <= 0) {
    process.stderr.write('usage: npm run bench:floor -- [--seconds=N]\n')
    process.exit(2)
  }
  const processes = availableParallelism()
  for (let i = 0; i < processes; i++) cluster.fork()
  await new Promise((resolve) => setTimeout(resolve, 1500))
  process.stdout.write(
    `bare node:http, ${processes} processes, crypto only; ceiling = the same work on ${processes} threads\n`,
  )
  let failed = false
  try {
    for (const scenario of SCENARIOS) {
      const ceiling = await measureCeiling(scenario.work, { durationMs: 2000 })
      const request = {
        ...scenario.request,
        headers: { ...scenario.request.headers, 'x-floor-scenario': scenario.id },
      }
      const base = {
        baseUrl: `http://127.0.0.1:${PORT}`,
        apiKey: 'none',
        connections: scenario.connections,
        cycle: [request],
      }
      await runLoad({ ...base, durationS: 1 })
      const load = await runLoad({ ...base, durationS: seconds })
      if (load.non2xx > 0 || load.errors > 0) failed = true
      const items = load.requestsPerSecond * scenario.items
      process.stdout.write(
        `  ${scenario.id.padEnd(22)} ${Math.round(load.requestsPerSecond).toString().padStart(7)} req/s ` +
          `${Math.round(items).toString().padStart(8)} items/s = ${((items / ceiling.opsPerSecond) * 100).toFixed(0).padStart(3)}% ` +
          `of ${Math.round(ceiling.opsPerSecond)}, p99 ${load.latency.p99.toFixed(1)} ms\n`,
      )
    }
  } finally {
    for (const worker of Object.values(cluster.workers ?? {})) worker?.kill()
  }
  if (failed) {
    process.stderr.write('some requests failed\n')
    process.exit(1)
  }
}

if (cluster.isPrimary) await main()
else serve()
