import cluster, { type Worker } from 'node:cluster'
import { randomBytes } from 'node:crypto'
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import { type CeilingWork, prepare } from './ceiling-work.ts'

/**
 * The HTTP floor: a bare node:http server, in node:cluster processes like `npm start`, that does
 * for each request only the scenario's cryptographic work (the ceiling's own code) and answers
 * with the status, content type and size of the service's real answer to that request. No
 * framework, validation, authentication, key lookup, database or audit. Driven by the same load
 * generator with the same connections and the same request cycle as the service, the rate it
 * reaches is the most any HTTP service could reach on this machine; service ÷ floor is what the
 * service's own work costs, floor ÷ ceiling what HTTP and sharing the cores with the load
 * generator cost.
 *
 * The server is told per scenario (an IPC message to each of its processes) which routes the
 * cycle has and, for each, the work, how many items per request, and the answer to give.
 */

/** What the floor does for one method and path (query included) of a scenario's cycle. */
export interface FloorRoute {
  method: string
  path: string
  /** The cryptographic work of one item; absent for a request without any (an admin read). */
  work?: CeilingWork
  /** Operations of the work per request (1,000 for a batch). */
  items: number
  /** The service's answer to this request. */
  answer: { status: number; contentType: string; bytes: number }
}

export interface Floor {
  baseUrl: string
  processes: number
  /** Pids of the floor's server processes (for CPU per request). */
  pids(): number[]
  /** Sets the routes of the next scenario in every process; resolves once all are ready. */
  configure(routes: readonly FloorRoute[]): Promise<void>
  stop(): Promise<void>
}

const WORKER_FLAG = 'KMS_BENCH_FLOOR_WORKER'
/** Set for a floor of one process: it listens on its own socket (see startFloor). */
const ALONE_FLAG = 'KMS_BENCH_FLOOR_ALONE'

interface ConfigureMessage {
  kind: 'floor:configure'
  serial: number
  routes: FloorRoute[]
}
interface ConfiguredMessage {
  kind: 'floor:configured'
  serial: number
  error?: string
}

const routeKey = (method: string, path: string) => `${method} ${path}`

/**
 * A JSON answer of exactly `bytes` bytes: `{"r":"<base64>"}` (8 bytes of frame). The object is
 * built once and serialized per request, so the floor pays a JSON.stringify of the answer's size
 * as the service's serializer does; the content (Base64 text, no escapes) is what the service's
 * answers mostly are.
 */
function jsonAnswer(bytes: number): { r: string } {
  const text = randomBytes(Math.ceil(bytes * 0.75) + 3)
    .toString('base64')
    .slice(0, Math.max(0, bytes - 8))
  return { r: text }
}

interface ServedRoute {
  operate: (() => void) | undefined
  items: number
  status: number
  headers: Record<string, string | number>
  json: { r: string } | undefined
  binary: Buffer | undefined
}

function serve(port: number, alone: boolean): void {
  let routes = new Map<string, ServedRoute>()
  // One prepared operation per distinct work: key generation (ML-DSA) is not free.
  const operations = new Map<string, () => void>()
  const operationFor = (work: CeilingWork) => {
    const key = JSON.stringify(work)
    let operate = operations.get(key)
    if (!operate) {
      operate = prepare(work)
      operations.set(key, operate)
    }
    return operate
  }

  process.on('message', (message: ConfigureMessage) => {
    if (message?.kind !== 'floor:configure') return
    const reply: ConfiguredMessage = { kind: 'floor:configured', serial: message.serial }
    try {
      const next = new Map<string, ServedRoute>()
      for (const route of message.routes) {
        const isJson = route.answer.contentType.includes('json')
        const operate = route.work ? operationFor(route.work) : undefined
        // Warm the operation up, so the first requests do not pay for its JIT alone.
        if (operate) for (let i = 0; i < 3; i++) operate()
        next.set(routeKey(route.method, route.path), {
          operate,
          items: route.items,
          status: route.answer.status,
          headers: { 'content-type': route.answer.contentType },
          json: isJson ? jsonAnswer(route.answer.bytes) : undefined,
          binary: isJson ? undefined : randomBytes(route.answer.bytes),
        })
      }
      routes = next
    } catch (err) {
      reply.error = err instanceof Error ? err.message : String(err)
    }
    process.send!(reply)
  })

  const handle = (request: IncomingMessage, response: ServerResponse, body: Buffer) => {
    const route = routes.get(routeKey(request.method ?? '', request.url ?? ''))
    if (!route) {
      const text = JSON.stringify({ error: 'floor_route_unknown', path: request.url })
      response.writeHead(404, { 'content-type': 'application/json' }).end(text)
      return
    }
    // Parse what the service must parse: a JSON body is read as JSON, a binary one as bytes.
    if (body.length > 0 && String(request.headers['content-type'] ?? '').includes('json')) {
      JSON.parse(body.toString('utf8'))
    }
    if (route.operate) for (let i = 0; i < route.items; i++) route.operate()
    if (route.json) {
      response.writeHead(route.status, route.headers).end(JSON.stringify(route.json))
    } else {
      response.writeHead(route.status, route.headers).end(route.binary)
    }
  }

  createServer((request, response) => {
    const chunks: Buffer[] = []
    request.on('data', (chunk: Buffer) => chunks.push(chunk))
    request.on('end', () => {
      try {
        handle(request, response, chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks))
      } catch (err) {
        const text = JSON.stringify({ error: 'floor_failed', message: String(err) })
        response.writeHead(500, { 'content-type': 'application/json' }).end(text)
      }
    })
  }).listen({ port, host: '127.0.0.1', exclusive: alone }, () => process.send!({ kind: 'floor:listening' }))
}

if (cluster.isWorker && process.env[WORKER_FLAG]) {
  serve(Number(process.env[WORKER_FLAG]), process.env[ALONE_FLAG] === '1')
}

/**
 * Starts a floor of `processes` node:cluster processes on a port of its own. Several processes
 * share the port as `npm start`'s API processes do: the primary (here the bench process) accepts
 * each connection and hands it to the next process. A floor of one process listens on its own
 * socket, as the service's single API process does: through the primary, each new connection
 * waited for a round trip between the bench's event loop, busy generating load, and the busy floor
 * process; opening 256 connections took up to 1.7 s, which a short run at 128 or 256 connections
 * counted against the floor (a 1-process MAC floor at 256 connections, runs of ~1.5 s: 20,000-
 * 29,000 req/s through the primary with answers up to 1.7 s late, 30,600-31,700 listening alone;
 * at 32 connections the two were alike).
 */
export async function startFloor(options: { processes: number; port: number }): Promise<Floor> {
  cluster.setupPrimary({ exec: new URL(import.meta.url).pathname, silent: false })
  const workers: Worker[] = []
  const listening: Promise<void>[] = []
  for (let i = 0; i < options.processes; i++) {
    const worker = cluster.fork({
      [WORKER_FLAG]: String(options.port),
      ...(options.processes === 1 ? { [ALONE_FLAG]: '1' } : {}),
    })
    workers.push(worker)
    listening.push(
      new Promise((resolve, reject) => {
        // The process says so itself: a socket of its own is no event of the cluster's.
        const onMessage = (message: { kind?: string }) => {
          if (message?.kind !== 'floor:listening') return
          worker.off('message', onMessage)
          resolve()
        }
        worker.on('message', onMessage)
        worker.once('exit', (code) => reject(new Error(`a floor process exited with ${code} at start`)))
      }),
    )
  }
  await Promise.all(listening)
  let serial = 0
  return {
    baseUrl: `http://127.0.0.1:${options.port}`,
    processes: options.processes,
    pids: () => workers.map((w) => w.process.pid!).filter(Boolean),
    async configure(routes) {
      const id = ++serial
      await Promise.all(
        workers.map(
          (worker) =>
            new Promise<void>((resolve, reject) => {
              const onMessage = (message: ConfiguredMessage) => {
                if (message?.kind !== 'floor:configured' || message.serial !== id) return
                worker.off('message', onMessage)
                if (message.error) reject(new Error(`floor: ${message.error}`))
                else resolve()
              }
              worker.on('message', onMessage)
              const message: ConfigureMessage = { kind: 'floor:configure', serial: id, routes: [...routes] }
              worker.send(message)
            }),
        ),
      )
    },
    async stop() {
      await Promise.all(
        workers.map(
          (worker) =>
            new Promise<void>((resolve) => {
              if (worker.isDead()) return resolve()
              worker.removeAllListeners('exit')
              worker.once('exit', () => resolve())
              worker.kill()
            }),
        ),
      )
    },
  }
}

/**
 * The floor's routes for a cycle: one per method and path. Requests that share one (a decrypt
 * cycle's eight envelopes) share the answer, sized as the mean of the service's answers to them.
 */
export function floorRoutes(
  cycle: readonly { method: string; path: string }[],
  works: readonly (CeilingWork | undefined)[],
  items: number,
  answers: readonly { status: number; contentType: string; bytes: number }[],
): FloorRoute[] {
  const grouped = new Map<string, { route: FloorRoute; sizes: number[] }>()
  cycle.forEach((spec, i) => {
    const key = routeKey(spec.method, spec.path)
    const answer = answers[i]!
    const existing = grouped.get(key)
    if (existing) {
      existing.sizes.push(answer.bytes)
      return
    }
    const work = works[i]
    grouped.set(key, {
      route: {
        method: spec.method,
        path: spec.path,
        ...(work ? { work } : {}),
        items,
        answer: { ...answer },
      },
      sizes: [answer.bytes],
    })
  })
  return [...grouped.values()].map(({ route, sizes }) => ({
    ...route,
    answer: { ...route.answer, bytes: Math.round(sizes.reduce((a, b) => a + b, 0) / sizes.length) },
  }))
}
