import cluster, { type Worker } from 'node:cluster'
import type { Logger } from 'pino'
import { type ApiProcess, startApiProcess } from './api-process.ts'
import { prepareDatabase } from './bootstrap.ts'
import { type Config, ConfigError, loadConfig } from './config.ts'
import { loadMasterKeyring } from './keyring/master-key.ts'
import { connectDatabase } from './platform/database.ts'
import { type EmbeddedPostgres, startEmbeddedPostgres } from './platform/embedded-postgres.ts'
import { createLogger } from './platform/logger.ts'

/**
 * `npm start`: the primary process prepares the database (embedded one if no DATABASE_URL,
 * migrations, first-start bootstrap) and then runs API processes, one per core by default,
 * sharing the port through node:cluster. SIGTERM/SIGINT shut everything down gracefully.
 */

/** Handed from the primary to the API processes it forks. */
const DATABASE_URL_FOR_WORKERS = 'KMS_RESOLVED_DATABASE_URL'

async function runApi(
  config: Config,
  logger: Logger,
  databaseUrl: string,
  afterStop: () => Promise<void> = async () => {},
): Promise<ApiProcess> {
  const api = await startApiProcess(config, logger, databaseUrl)
  const shutdown = (signal: string) => {
    logger.info({ signal }, 'shutting down: finishing in-flight requests and flushing the audit log')
    const timer = setTimeout(() => {
      logger.error('graceful shutdown timed out')
      process.exit(1)
    }, config.shutdownGraceMs)
    timer.unref()
    api
      .stop()
      .then(afterStop)
      .then(
        () => process.exit(0),
        (err: unknown) => {
          logger.error({ err }, 'shutdown failed')
          process.exit(1)
        },
      )
  }
  process.once('SIGTERM', () => shutdown('SIGTERM'))
  process.once('SIGINT', () => shutdown('SIGINT'))
  return api
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
      { bootstrap: config.bootstrap, print: (text) => process.stdout.write(text) },
    )
  } finally {
    await sql.end({ timeout: 5 })
  }

  if (config.apiProcesses === 1) {
    const db = embedded
    await runApi(config, logger, databaseUrl, async () => db?.stop())
    return
  }

  forkApiProcesses(config, logger, databaseUrl)
}

function forkApiProcesses(config: Config, logger: Logger, databaseUrl: string): void {
  let stopping = false
  const recentCrashes: number[] = []
  const fork = (): Worker => cluster.fork({ [DATABASE_URL_FOR_WORKERS]: databaseUrl })

  for (let i = 0; i < config.apiProcesses; i++) fork()
  logger.info({ processes: config.apiProcesses }, 'API processes started')

  cluster.on('exit', (worker, code, signal) => {
    if (stopping) {
      if (Object.keys(cluster.workers ?? {}).length === 0) process.exit(0)
      return
    }
    const now = Date.now()
    recentCrashes.push(now)
    while (recentCrashes.length > 0 && now - recentCrashes[0]! > 60_000) recentCrashes.shift()
    if (recentCrashes.length > 5) {
      logger.fatal('API processes keep crashing; giving up')
      process.exit(1)
    }
    logger.error({ pid: worker.process.pid, code, signal }, 'API process exited; starting a replacement')
    fork()
  })

  const shutdown = (signal: string) => {
    if (stopping) return
    stopping = true
    logger.info({ signal }, 'shutting down API processes')
    for (const worker of Object.values(cluster.workers ?? {})) worker?.process.kill('SIGTERM')
    setTimeout(() => {
      logger.error('API processes did not stop in time')
      process.exit(1)
    }, config.shutdownGraceMs + 5000).unref()
  }
  process.on('SIGTERM', () => shutdown('SIGTERM'))
  process.on('SIGINT', () => shutdown('SIGINT'))
}

async function main(): Promise<void> {
  const config = loadConfig()
  const logger = createLogger(config.logLevel, 'kms')
  if (cluster.isPrimary) return runPrimary(config, logger)
  const databaseUrl = process.env[DATABASE_URL_FOR_WORKERS]
  if (!databaseUrl) throw new Error(`${DATABASE_URL_FOR_WORKERS} missing in an API process`)
  await runApi(config, logger, databaseUrl)
}

main().catch((err: unknown) => {
  if (err instanceof ConfigError) {
    process.stderr.write(`Configuration error: ${err.message}\n`)
  } else {
    process.stderr.write(`Start failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`)
  }
  process.exit(1)
})
