import cluster, { type Worker } from 'node:cluster'
import type { Logger } from 'pino'
import { type Config, loadConfig } from './config.ts'
import { connectDatabase, installDatabaseFaultGuard } from './data/database.ts'
import { type EmbeddedPostgres, startEmbeddedPostgres } from './data/embedded-postgres.ts'
import { loadMasterKeyring } from './keyring/master-key.ts'
import { createClusterScrape, joinClusterMetrics, serveClusterMetrics } from './metrics/cluster.ts'
import { createLogger } from './platform/logger.ts'
import { type ApiProcess, startApiProcess } from './server/api-process.ts'
import { prepareDatabase } from './server/bootstrap.ts'
import { startJobProcess } from './server/jobs.ts'
import {
  describeStartupFailure,
  isStartupFailureMessage,
  logStartupFailure,
  type StartupContext,
  type StartupFailureMessage,
} from './server/startup-failure.ts'

/**
 * `npm start`: the primary process prepares the database (embedded one if no DATABASE_URL,
 * migrations, first-start bootstrap) and then runs, as KMS_ROLE says: API processes, one per
 * core by default, sharing the port through node:cluster (`api`); one background job process
 * (`worker`); or both (`all`, the default). SIGTERM/SIGINT shut everything down gracefully: API
 * processes finish their requests, the job process its running jobs.
 */

/** Handed from the primary to the processes it forks. */
const DATABASE_URL_FOR_WORKERS = 'KMS_RESOLVED_DATABASE_URL'
const PROCESS_KIND = 'KMS_PROCESS_KIND'
type ProcessKind = 'api' | 'jobs'

/** Runs until SIGTERM/SIGINT, then stops within the grace period. */
function stopOnSignal(logger: Logger, graceMs: number, stop: () => Promise<void>, message: string): void {
  const shutdown = (signal: string) => {
    logger.info({ signal }, message)
    const timer = setTimeout(() => {
      logger.error('graceful shutdown timed out')
      process.exit(1)
    }, graceMs)
    timer.unref()
    stop().then(
      () => process.exit(0),
      (err: unknown) => {
        logger.error({ err }, 'shutdown failed')
        process.exit(1)
      },
    )
  }
  process.once('SIGTERM', () => shutdown('SIGTERM'))
  process.once('SIGINT', () => shutdown('SIGINT'))
}

/** A signal during a start that then fails: main() reports the failure and exits, not the shutdown. */
const startFailed = () => new Promise<void>(() => {})

async function runJobs(config: Config, logger: Logger, databaseUrl: string, afterStop = async () => {}) {
  // The handlers go in before the start: a signal during start-up (the API may already listen
  // while the jobs start) waits for the start to finish, then stops, instead of killing the process.
  const started = startJobProcess(config, logger, databaseUrl)
  stopOnSignal(
    logger,
    config.shutdownGraceMs,
    () => started.then((jobs) => jobs.stop().then(afterStop), startFailed),
    'shutting down: finishing running jobs',
  )
  return started
}

async function runApi(
  config: Config,
  logger: Logger,
  databaseUrl: string,
  afterStop: () => Promise<void> = async () => {},
  options: { jobs?: boolean; scrape?: () => Promise<string> } = {},
): Promise<ApiProcess> {
  // Handlers before the start, as in runJobs: the service logs that it listens before the jobs
  // beside it have started, and a SIGTERM in between must still shut it down gracefully.
  const started = startApiProcess(config, logger, databaseUrl, options)
  stopOnSignal(
    logger,
    config.shutdownGraceMs,
    () => started.then((api) => api.stop().then(afterStop), startFailed),
    'shutting down: finishing in-flight requests and flushing the audit log',
  )
  return started
}

async function runPrimary(config: Config, logger: Logger): Promise<void> {
  let embedded: EmbeddedPostgres | undefined
  let databaseUrl = config.databaseUrl
  if (!databaseUrl) {
    embedded = await startEmbeddedPostgres(config.dataDir)
    databaseUrl = embedded.url
    // PGlite is one database session multiplexed; each API process keeps one connection.
    config = { ...config, databasePoolSize: 1, apiProcesses: 1 }
    logger.warn(
      { dataDir: config.dataDir },
      'No DATABASE_URL: using the embedded PostgreSQL (PGlite) in the data directory, one API process. ' +
        'Set DATABASE_URL to a PostgreSQL server for production.',
    )
  }

  if (!process.env['REDIS_URL']) {
    // The default is a Redis on this machine, perhaps another service's: the keys this one writes
    // there (and the prefix that keeps them apart) should not be a surprise.
    logger.warn(
      { redisUrl: config.redisUrl, redisPrefix: config.redisPrefix },
      `No REDIS_URL: using the Redis at ${config.redisUrl} under the key prefix ${config.redisPrefix} ` +
        '(KMS_REDIS_PREFIX). Set REDIS_URL for production; deployments sharing a Redis need distinct prefixes.',
    )
  }

  const { keyring } = loadMasterKeyring(config, logger)
  const sql = connectDatabase({
    url: databaseUrl,
    poolSize: 1,
    statementTimeoutMs: 60_000,
    applicationName: 'kms-start',
  })
  try {
    await prepareDatabase(
      { sql, masterKeys: keyring, logger },
      {
        bootstrap: config.bootstrap,
        keyFile: config.bootstrapKeyFile,
        ownerEmail: config.bootstrapOwnerEmail,
        // The key itself reaches a terminal only: piped or collected stdout is a log stream.
        print: (text) => {
          if (process.stdout.isTTY) process.stdout.write(text)
        },
      },
    )
  } finally {
    await sql.end({ timeout: 5 })
  }

  const db = embedded
  if (config.role === 'worker') {
    await runJobs(config, logger, databaseUrl, async () => db?.stop())
    return
  }
  // One process (and always with the embedded database): the jobs run beside the API.
  if (config.apiProcesses === 1) {
    await runApi(config, logger, databaseUrl, async () => db?.stop(), { jobs: config.role === 'all' })
    return
  }

  forkProcesses(config, logger, databaseUrl)
}

function forkProcesses(config: Config, logger: Logger, databaseUrl: string): void {
  let stopping = false
  let failedToStart = false
  let serving = false
  cluster.once('listening', () => {
    serving = true
  })
  const recentCrashes: number[] = []
  const kinds = new Map<number, ProcessKind>()
  const fork = (kind: ProcessKind): Worker => {
    const worker = cluster.fork({ [DATABASE_URL_FOR_WORKERS]: databaseUrl, [PROCESS_KIND]: kind })
    kinds.set(worker.id, kind)
    worker.on('message', (message: unknown) => {
      if (!isStartupFailureMessage(message) || stopping) return
      // Once the service has served, a replacement that fails to start is one more crash, and the
      // crash limit below decides.
      if (serving) {
        logger.error({ kind, cause: message.failure.message }, 'a replacement process failed to start')
        return
      }
      // At the first start a process that cannot start (port in use, database unreachable) would
      // fail again if replaced: report the cause once and stop, instead of crash-looping.
      stopping = true
      failedToStart = true
      logStartupFailure(message.failure)
      // Exit once the others have: a primary gone under a process still starting breaks that
      // process's IPC channel mid-listen, and Node prints the error with its stack.
      for (const other of Object.values(cluster.workers ?? {})) other?.process.kill('SIGTERM')
      setTimeout(() => process.exit(1), config.shutdownGraceMs + 5000).unref()
    })
    return worker
  }

  // Scrapes reach one API process; the primary gathers every process's metrics for it.
  serveClusterMetrics(logger)
  for (let i = 0; i < config.apiProcesses; i++) fork('api')
  if (config.role === 'all') fork('jobs')
  logger.info({ processes: config.apiProcesses, jobs: config.role === 'all' }, 'API processes started')

  cluster.on('exit', (worker, code, signal) => {
    const kind = kinds.get(worker.id) ?? 'api'
    kinds.delete(worker.id)
    if (stopping) {
      if (Object.keys(cluster.workers ?? {}).length === 0) process.exit(failedToStart ? 1 : 0)
      return
    }
    const now = Date.now()
    recentCrashes.push(now)
    while (recentCrashes.length > 0 && now - recentCrashes[0]! > 60_000) recentCrashes.shift()
    if (recentCrashes.length > 5) {
      logger.fatal('processes keep crashing; giving up')
      process.exit(1)
    }
    logger.error({ pid: worker.process.pid, kind, code, signal }, 'process exited; starting a replacement')
    fork(kind)
  })

  const shutdown = (signal: string) => {
    if (stopping) return
    stopping = true
    logger.info({ signal }, 'shutting down the API and job processes')
    for (const worker of Object.values(cluster.workers ?? {})) worker?.process.kill('SIGTERM')
    setTimeout(() => {
      logger.error('processes did not stop in time')
      process.exit(1)
    }, config.shutdownGraceMs + 5000).unref()
  }
  process.on('SIGTERM', () => shutdown('SIGTERM'))
  process.on('SIGINT', () => shutdown('SIGINT'))
}

/** What a start-up failure message may name; filled in as soon as the configuration is read. */
let startupContext: StartupContext = {}

async function main(): Promise<void> {
  const config = loadConfig()
  startupContext = {
    host: config.host,
    port: config.port,
    databaseUrl: config.databaseUrl ?? process.env[DATABASE_URL_FOR_WORKERS],
  }
  const logger = createLogger(config.logLevel, 'kms')
  // A database outage must not end a process (postgres.js faults, data/database.ts).
  installDatabaseFaultGuard(logger)
  if (cluster.isPrimary) return runPrimary(config, logger)
  const databaseUrl = process.env[DATABASE_URL_FOR_WORKERS]
  if (!databaseUrl) throw new Error(`${DATABASE_URL_FOR_WORKERS} missing in a forked process`)
  // Answers the primary's metric collection from the start (with nothing until the services exist).
  const metrics = joinClusterMetrics()
  if (process.env[PROCESS_KIND] === 'jobs') {
    const jobs = await runJobs(config, logger, databaseUrl)
    metrics.use(jobs.services.metrics.registry)
  } else {
    const api = await runApi(config, logger, databaseUrl, undefined, { scrape: createClusterScrape() })
    metrics.use(api.services.metrics.registry)
  }
}

// Anything that stops the start (port in use, database unreachable, bad configuration, no
// master key in production) ends as one JSON log line naming the cause and the fix, exit code 1.
main().catch((err: unknown) => {
  const failure = describeStartupFailure(err, startupContext)
  if (cluster.isWorker && process.send) {
    // The primary reports it, once for all the processes that fail alike.
    const message: StartupFailureMessage = { kind: 'kms:startup-failure', failure }
    process.send(message, () => process.exit(1))
    return
  }
  logStartupFailure(failure)
  process.exit(1)
})
