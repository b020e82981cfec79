import { createRequire } from 'node:module'
import { performance } from 'node:perf_hooks'
import autocannon from 'autocannon'

/**
 * autocannon keeps every response body as a string (`body += chunk`) for its verifyBody and
 * expectBody options, which this harness does not use (it checks status codes and the audit
 * log). For a 1 MB binary response that UTF-8 decoding and concatenation is the load
 * generator's whole CPU: a bare Node echo server answered 74 req/s of 1 MB with it and 950
 * without (bench/RESULTS.md, step 10). So the harness drops the bodies as they arrive.
 */
const pipelinedRequestsQueue = createRequire(import.meta.url)('autocannon/lib/pipelinedRequestsQueue.js') as {
  prototype: { addBody(data: unknown): void }
}
pipelinedRequestsQueue.prototype.addBody = () => {}

/** One request of a cycle; every body is built once, so the load generator only writes bytes. */
export interface RequestSpec {
  method: 'GET' | 'POST'
  path: string
  /** Replace or add to the defaults (the API key, Content-Type application/json). */
  headers?: Record<string, string>
  body?: string | Buffer
}

export interface LoadOptions {
  baseUrl: string
  apiKey: string
  connections: number
  /** The requests each connection sends in turn, round and round. */
  cycle: readonly RequestSpec[]
  /**
   * Requests to send in all. Rounded up to whole cycles on every connection, so each request of
   * the cycle is sent equally often and every request sent is answered before the run ends
   * (which is what lets the audit count be exact).
   */
  amount?: number
  /**
   * Instead of an amount: run this long (in-flight requests at the end are abandoned, so the
   * audit log may hold a few more records than answers). Timed the same way: answers ÷ the time
   * to the last answer.
   */
  durationS?: number
  /** Requests per second over all connections (open-ended when absent). */
  overallRate?: number
  /**
   * The clock the run is timed with, in milliseconds (default performance.now). Read once at the
   * start, once per answer and once when autocannon reports completion; a test injects its own to
   * check which readings the figures come from.
   */
  now?: () => number
}

export interface LoadResult {
  sent: number
  ok: number
  non2xx: number
  errors: number
  /**
   * Seconds from the start of the run (just before the first connection is opened) to its last
   * answer: `(lastAnswerAt - startedAt) / 1000`. Not to autocannon's completion callback, which
   * fires on its next 1-second sampling tick after the last answer: timed to that, every run
   * lasted a whole number of seconds and the rates were quantised (4,032 MAC requests answered
   * well within a second read as 4,032 ÷ 1.0055 s).
   */
  elapsedS: number
  /** Answered 2xx requests per second: ok ÷ elapsedS. */
  requestsPerSecond: number
  /** The clock's readings (ms): the start, the last answer (any status) and the completion callback. */
  startedAt: number
  /** The start when nothing was answered. */
  lastAnswerAt: number
  finishedAt: number
  /** Milliseconds, from every answered request (autocannon's own histogram rounds to 1 ms). */
  latency: { p50: number; p99: number; max: number }
  statusCodes: Record<string, number>
}

/** Rounds an amount up so that every connection sends whole cycles. */
function wholeCycles(amount: number, connections: number, cycleLength: number): number {
  const unit = connections * cycleLength
  return Math.max(unit, Math.ceil(amount / unit) * unit)
}

function percentile(sorted: Float64Array, p: number): number {
  if (sorted.length === 0) return Number.NaN
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!
}

export async function runLoad(options: LoadOptions): Promise<LoadResult> {
  const now = options.now ?? (() => performance.now())
  const headers = { 'x-api-key': options.apiKey, 'content-type': 'application/json' }
  const amount =
    options.amount === undefined
      ? undefined
      : wholeCycles(options.amount, options.connections, options.cycle.length)
  let latencies = new Float64Array(amount ?? 1 << 16)
  let count = 0
  let answers = 0
  let finish: (result: autocannon.Result) => void = () => {}
  let fail: (error: Error) => void = () => {}
  const done = new Promise<autocannon.Result>((resolve, reject) => {
    finish = resolve
    fail = reject
  })
  // The start: autocannon opens its connections and sends the first requests once it returns.
  const startedAt = now()
  let lastAnswerAt = startedAt
  let finishedAt = startedAt
  const instance = autocannon(
    {
      url: options.baseUrl,
      connections: options.connections,
      pipelining: 1,
      timeout: 60,
      ...(amount !== undefined ? { amount } : { duration: options.durationS ?? 10 }),
      ...(options.overallRate ? { overallRate: options.overallRate } : {}),
      // Only when asked for: autocannon then rebuilds every request through a string, which
      // corrupts binary bodies and costs the load generator a copy and a scan of every body.
      idReplacement: options.cycle.some(
        (spec) => typeof spec.body === 'string' && spec.body.includes('[<id>]'),
      ),
      requests: options.cycle.map((spec) => ({
        method: spec.method,
        path: spec.path,
        headers: spec.headers ? { ...headers, ...spec.headers } : headers,
        ...(spec.body !== undefined ? { body: spec.body } : {}),
      })),
    },
    (err, result) => {
      finishedAt = now()
      if (err) fail(err)
      else finish(result)
    },
  )
  instance.on('response', (_client: unknown, statusCode: number, _bytes: number, responseTime: number) => {
    // Every answer moves the end of the run, whatever its status: the run lasted until then.
    lastAnswerAt = now()
    answers++
    if (statusCode < 200 || statusCode >= 300) return
    if (count === latencies.length) {
      const grown = new Float64Array(latencies.length * 2)
      grown.set(latencies)
      latencies = grown
    }
    latencies[count++] = responseTime
  })
  const result = await done
  // Nothing answered: the run lasted until autocannon gave up (and its rate is 0).
  const elapsedS = ((answers > 0 ? lastAnswerAt : finishedAt) - startedAt) / 1000
  const sorted = latencies.subarray(0, count).sort()
  const statusCodes: Record<string, number> = {}
  for (const [code, { count: n }] of Object.entries(
    (result as unknown as { statusCodeStats: Record<string, { count: number }> }).statusCodeStats ?? {},
  )) {
    statusCodes[code] = n
  }
  // `count` is autocannon's 2xx count, from the same events: the answers and the rate agree.
  return {
    sent: result.requests.sent,
    ok: count,
    non2xx: result.non2xx,
    errors: result.errors + result.timeouts,
    elapsedS,
    requestsPerSecond: elapsedS > 0 ? count / elapsedS : 0,
    startedAt,
    lastAnswerAt,
    finishedAt,
    latency: {
      p50: percentile(sorted, 50),
      p99: percentile(sorted, 99),
      max: sorted[count - 1] ?? Number.NaN,
    },
    statusCodes,
  }
}
