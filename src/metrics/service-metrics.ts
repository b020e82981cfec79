import { collectDefaultMetrics, Registry } from 'prom-client'
import type { AuditObserver } from '../audit/audit-log.ts'
import type { Sql } from '../data/database.ts'
import type { EntropyStatus } from '../entropy/entropy-chain.ts'
import { registerEntropyMetrics } from './entropy-metrics.ts'
import {
  type CounterChild,
  CounterFamily,
  type HistogramChild,
  HistogramFamily,
  ReadFamily,
} from './families.ts'

/**
 * One process's metrics (docs/metrics.md): a registry of its own (several services may share a
 * test process) and the hooks the components call. A scrape of a cluster sums the processes'
 * registries (./cluster.ts), so counters are per process here and never carry a pid label;
 * only the process's own resource series (memory, CPU, event loop) do.
 */

/** Request durations: sub-millisecond encrypts to multi-second key generations. */
const REQUEST_SECONDS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]
/** Group-commit writes wait for a WAL flush: milliseconds, up to the write timeout. */
const AUDIT_WRITE_SECONDS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5]
const POOL_TASK_SECONDS = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30]
const JOB_SECONDS = [0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60]
/**
 * Lateness of a 10 ms timer: a healthy loop stays under a millisecond. Fine around the 20 ms
 * target (bench/RESULTS.md), so that a p99 read from the buckets is close to the true one.
 */
const EVENT_LOOP_SECONDS = [
  0.001, 0.0025, 0.005, 0.0075, 0.01, 0.0125, 0.015, 0.0175, 0.02, 0.0225, 0.025, 0.03, 0.04, 0.05, 0.075,
  0.1, 0.25, 0.5, 1, 2.5,
]

/** Route label of a request no route matched (a 404 from the router): bounded, unlike its URL. */
export const UNMATCHED_ROUTE = 'unmatched'

/** Counts and times one route's requests; bound to the route's label values once. */
type RouteRecorder = (method: string, statusCode: number, elapsedMs: number) => void

export interface HttpMetrics {
  /** A recorder for a route template (the router's URL, e.g. `/api/v1/keys/:keyId`). */
  route(template: string): RouteRecorder
  /** An error answered for a route, by the API's error code (the error path only). */
  error(template: string, method: string, statusCode: number, code: string): void
  /**
   * Names the HTTP adapter serving the data plane's routes (`kms_data_plane_info`), once at
   * start, with the count of requests it answered itself when it is not Fastify.
   */
  dataPlane(adapter: string, answered?: () => number): void
}

type PoolTaskOutcome = 'ok' | 'error' | 'timeout'
type JobOutcome = 'completed' | 'failed'

/** What the metrics read at scrape time from the process's components. */
interface MetricSources {
  audit: { stats(): { queued: number; writing: number } }
  cryptoPool: { stats(): { queued: number; running: number; completed: number }; threads: number }
  sql: Sql
  databasePoolSize: number
  entropyStatus: () => EntropyStatus
}

export interface ServiceMetrics {
  registry: Registry
  http: HttpMetrics
  audit: AuditObserver
  poolTaskDone(kind: string, durationMs: number, outcome: PoolTaskOutcome): void
  jobDone(queue: string, job: string, outcome: JobOutcome, seconds: number | undefined): void
  /** One event-loop lateness observation (./event-loop-monitor.ts). */
  eventLoopDelay(seconds: number): void
  /** One sign-in or failed sign-in (src/identity/sign-in/sign-in-events.ts); reason `none` for a success. */
  signIn(kind: string, outcome: 'success' | 'failure', reason: string): void
  /** Registers the series read from the components, once they exist. */
  watch(sources: MetricSources): void
}

export function createServiceMetrics(options: { kind: string; pid?: number }): ServiceMetrics {
  const registry = new Registry()
  const processLabels = { pid: String(options.pid ?? process.pid), process_kind: options.kind }
  // Memory, CPU, handles, GC per process (pid and kind labels).
  collectDefaultMetrics({ register: registry, labels: processLabels })
  // Gauges named like counters (`promtool check metrics` refuses them); the same counts are
  // in nodejs_active_handles, nodejs_active_requests and nodejs_active_resources by type.
  // Node's own event-loop lag gauges are reset at each scrape and read NaN ("Nan" in prom-client's
  // text) when a scrape follows another with no sample between; kms_eventloop_delay_seconds
  // below is the event-loop series.
  for (const name of [
    'nodejs_active_handles_total',
    'nodejs_active_requests_total',
    'nodejs_active_resources_total',
    ...['', '_min', '_max', '_mean', '_stddev', '_p50', '_p90', '_p99'].map(
      (s) => `nodejs_eventloop_lag${s}_seconds`,
    ),
  ])
    registry.removeSingleMetric(name)

  const eventLoop = new HistogramFamily(
    registry,
    'kms_eventloop_delay_seconds',
    'Lateness of a timer due every 10 ms in this process: how long a request waited for the event loop.',
    ['pid', 'process_kind'],
    EVENT_LOOP_SECONDS,
  ).labels(processLabels)

  const requests = new CounterFamily(
    registry,
    'kms_http_requests_total',
    'HTTP requests answered, by route template, method and status code.',
    ['route', 'method', 'status'],
  )
  const durations = new HistogramFamily(
    registry,
    'kms_http_request_duration_seconds',
    'Time from receiving a request to finishing its answer, by route template and method.',
    ['route', 'method'],
    REQUEST_SECONDS,
  )
  const errors = new CounterFamily(
    registry,
    'kms_http_errors_total',
    'Requests answered with an error, by route template, method, status code and the API error code.',
    ['route', 'method', 'status', 'error'],
  )

  let dataPlaneAdapter: string | undefined
  let dataPlaneAnswered: (() => number) | undefined
  new ReadFamily(
    registry,
    'kms_data_plane_info',
    'The HTTP adapter that serves the data plane (encrypt, decrypt, batches, sign, verify, MAC, data keys): ' +
      'node (node:http, without the framework) or fastify. Always 1.',
    'gauge',
    () => (dataPlaneAdapter ? [[{ adapter: dataPlaneAdapter }, 1]] : []),
    'max',
  )
  new ReadFamily(
    registry,
    'kms_data_plane_requests_total',
    "Requests the node:http data plane answered itself; the rest of its routes' requests (another " +
      'media type, an encoded path, a body over the limit) were handed to Fastify.',
    'counter',
    () =>
      dataPlaneAdapter && dataPlaneAnswered ? [[{ adapter: dataPlaneAdapter }, dataPlaneAnswered()]] : [],
  )

  const http: HttpMetrics = {
    route(route) {
      // Children per method and status, made on first use and kept: a request pays two map
      // reads, an addition and a bucket search, and allocates nothing.
      const byMethod = new Map<string, { duration: HistogramChild; byStatus: Map<number, CounterChild> }>()
      return (method, statusCode, elapsedMs) => {
        let m = byMethod.get(method)
        if (!m) {
          m = { duration: durations.labels({ route, method }), byStatus: new Map() }
          byMethod.set(method, m)
        }
        let count = m.byStatus.get(statusCode)
        if (!count) {
          count = requests.labels({ route, method, status: String(statusCode) })
          m.byStatus.set(statusCode, count)
        }
        count.inc()
        m.duration.observe(elapsedMs / 1000)
      }
    },
    dataPlane(adapter, answered) {
      dataPlaneAdapter = adapter
      dataPlaneAnswered = answered
    },
    error(route, method, statusCode, error) {
      errors.labels({ route, method, status: String(statusCode), error }).inc()
    },
  }

  const auditRecords = new CounterFamily(
    registry,
    'kms_audit_records_total',
    'Audit records made, by action and outcome.',
    ['action', 'outcome'],
  )
  const cryptoOperations = new CounterFamily(
    registry,
    'kms_crypto_operations_total',
    'Cryptographic operations, by operation and outcome (a batch counts its items), as audited.',
    ['operation', 'outcome'],
  )
  const auditWrites = new HistogramFamily(
    registry,
    'kms_audit_write_duration_seconds',
    'Duration of one group-commit write of audit records, by result.',
    ['result'],
    AUDIT_WRITE_SECONDS,
  )
  const auditWritten = new CounterFamily(
    registry,
    'kms_audit_written_records_total',
    'Audit records written by group commit, by result (failed: the operation was refused with 503).',
    ['result'],
  )
  type AuditChildren = { records: CounterChild; operations: CounterChild | undefined }
  // Nested by action then outcome: a record pays two map reads and allocates nothing.
  const byAction = new Map<string, Map<string, AuditChildren>>()
  const audit: AuditObserver = {
    recorded(entry) {
      let byOutcome = byAction.get(entry.action)
      if (!byOutcome) {
        byOutcome = new Map()
        byAction.set(entry.action, byOutcome)
      }
      let children = byOutcome.get(entry.outcome)
      if (!children) {
        const crypto = entry.action.startsWith('crypto.')
        children = {
          records: auditRecords.labels({ action: entry.action, outcome: entry.outcome }),
          operations: crypto
            ? cryptoOperations.labels({
                operation: entry.action.slice('crypto.'.length),
                outcome: entry.outcome,
              })
            : undefined,
        }
        byOutcome.set(entry.outcome, children)
      }
      children.records.inc()
      if (children.operations) {
        const items = entry.details?.['items']
        children.operations.inc(typeof items === 'number' ? items : 1)
      }
    },
    written(seconds, records, ok) {
      const result = ok ? 'ok' : 'failed'
      auditWrites.labels({ result }).observe(seconds)
      auditWritten.labels({ result }).inc(records)
    },
  }

  const poolTasks = new HistogramFamily(
    registry,
    'kms_crypto_pool_task_duration_seconds',
    'Crypto worker-pool tasks from submission to result (queue wait included), by task kind and outcome.',
    ['kind', 'outcome'],
    POOL_TASK_SECONDS,
  )
  const jobs = new CounterFamily(
    registry,
    'kms_jobs_total',
    'Background jobs finished, by queue, job name and outcome.',
    ['queue', 'job', 'outcome'],
  )
  const jobDurations = new HistogramFamily(
    registry,
    'kms_job_duration_seconds',
    'Run time of background jobs, by queue and job name.',
    ['queue', 'job'],
    JOB_SECONDS,
  )

  const signIns = new CounterFamily(
    registry,
    'kms_sign_ins_total',
    'Sign-ins through the OpenID provider, by kind (member, enduser, partner), outcome and reason (a bounded set; none for a success).',
    ['kind', 'outcome', 'reason'],
  )

  return {
    registry,
    http,
    audit,
    signIn(kind, outcome, reason) {
      signIns.labels({ kind, outcome, reason }).inc()
    },
    poolTaskDone(kind, durationMs, outcome) {
      poolTasks.labels({ kind, outcome }).observe(durationMs / 1000)
    },
    jobDone(queue, job, outcome, seconds) {
      jobs.labels({ queue, job, outcome }).inc()
      if (seconds !== undefined) jobDurations.labels({ queue, job }).observe(seconds)
    },
    eventLoopDelay(seconds) {
      eventLoop.observe(seconds)
    },
    watch(sources) {
      watchSources(registry, options.kind, sources)
    },
  }
}

function watchSources(registry: Registry, kind: string, sources: MetricSources): void {
  new ReadFamily(
    registry,
    'kms_audit_queued_records',
    'Audit records waiting for the next group-commit write.',
    'gauge',
    () => [[{}, sources.audit.stats().queued]],
  )
  new ReadFamily(
    registry,
    'kms_audit_writing_records',
    'Audit records in group-commit writes in flight.',
    'gauge',
    () => [[{}, sources.audit.stats().writing]],
  )
  new ReadFamily(
    registry,
    'kms_crypto_pool_queued_tasks',
    'Tasks waiting for a crypto worker thread.',
    'gauge',
    () => [[{}, sources.cryptoPool.stats().queued]],
  )
  new ReadFamily(
    registry,
    'kms_crypto_pool_running_tasks',
    'Tasks running on crypto worker threads.',
    'gauge',
    () => [[{}, sources.cryptoPool.stats().running]],
  )
  new ReadFamily(
    registry,
    'kms_crypto_pool_max_threads',
    'Crypto worker threads a process may run.',
    'gauge',
    () => [[{}, sources.cryptoPool.threads]],
  )
  new ReadFamily(
    registry,
    'kms_crypto_pool_tasks_completed_total',
    'Tasks the crypto worker threads have finished.',
    'counter',
    () => [[{}, sources.cryptoPool.stats().completed]],
  )
  new ReadFamily(
    registry,
    'kms_db_pool_max_connections',
    'Connections the database pools of the service processes may open (DATABASE_POOL_SIZE per process).',
    'gauge',
    () => [[{ process_kind: kind }, sources.databasePoolSize]],
  )
  new ReadFamily(
    registry,
    'kms_db_connections',
    "The service's connections to its database as PostgreSQL sees them (pg_stat_activity), by process " +
      'kind and state: active = running a statement, idle = open in a pool.',
    'gauge',
    () => databaseConnections(sources.sql),
    // Every process reads the same server-wide view: not summed.
    'max',
  )
  registerEntropyMetrics(registry, sources.entropyStatus)
}

/**
 * postgres.js exposes no pool counters, and wrapping every query would put a cost on each; the
 * server's own view costs one query per scrape. Bounded so a slow database cannot hold the scrape;
 * when it cannot be read the series is left out (the database's state shows on /api/v1/health).
 */
async function databaseConnections(sql: Sql): Promise<[Record<string, string>, number][]> {
  let timer: NodeJS.Timeout | undefined
  try {
    const rows = await Promise.race([
      sql<{ application: string; state: string; n: number }[]>`
        SELECT application_name AS application, coalesce(state, 'unknown') AS state, count(*)::int AS n
        FROM pg_stat_activity
        WHERE datname = current_database() AND application_name IN ('kms-api', 'kms-jobs')
        GROUP BY 1, 2`,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error('timeout')), 1000)
      }),
    ])
    const out: [Record<string, string>, number][] = []
    for (const application of ['kms-api', 'kms-jobs']) {
      for (const state of ['active', 'idle', 'idle in transaction']) {
        const row = rows.find((r) => r.application === application && r.state === state)
        out.push([{ process_kind: application.slice('kms-'.length), state }, row?.n ?? 0])
      }
    }
    return out
  } catch {
    return []
  } finally {
    clearTimeout(timer)
  }
}
