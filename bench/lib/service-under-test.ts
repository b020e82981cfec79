import { type ChildProcess, spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { closeSync, mkdirSync, openSync, readFileSync, rmSync } from 'node:fs'
import { request } from 'node:http'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import postgres from 'postgres'
import type { Authenticator } from '../../src/api-keys/api-key-authenticator.ts'
import { createApiKeyService } from '../../src/api-keys/api-key-service.ts'
import { createAuditLog } from '../../src/audit/audit-log.ts'
import { connectDatabase, type Sql } from '../../src/data/database.ts'
import { loadMasterKeyring } from '../../src/keyring/master-key.ts'
import { createLogger } from '../../src/platform/logger.ts'
import { createTenantService } from '../../src/tenants/tenant-service.ts'

export const PROJECT_ROOT = join(import.meta.dirname, '..', '..')
const ADMIN_DATABASE_URL = process.env['BENCH_DATABASE_URL'] ?? 'postgres://postgres@127.0.0.1:5432/postgres'
const REDIS_URL = process.env['BENCH_REDIS_URL'] ?? 'redis://127.0.0.1:6379'

/** The bench's own connections to the service's database (creating tenants, counting audit records). */
const BENCH_APPLICATION = 'kms-bench'

export interface BenchTenant {
  tenantId: string
  apiKey: string
}

/**
 * The service exactly as `npm start` runs it (`node src/main.ts`: the primary process, API
 * processes through node:cluster, audit on, default log level), on a fresh PostgreSQL database
 * that is dropped afterwards. The bench talks to it over HTTP only; it reaches the database
 * directly just to create tenants (as the CLI does) and to count audit records.
 */
export interface ServiceUnderTest {
  baseUrl: string
  sql: Sql
  createTenant(): Promise<BenchTenant>
  /** Resident set size in bytes of each API process (the primary too when it serves). */
  apiProcessRss(): Map<number, number>
  /** Pids of the processes that serve requests (the primary when it serves alone). */
  apiPids(): number[]
  /** True when the database runs inside the service (zero configuration: PGlite). */
  embeddedDatabase: boolean
  /**
   * Pids of the PostgreSQL backends serving the service (every client backend of its database
   * but the bench's own connections), for their CPU; undefined with the embedded database.
   */
  databaseBackendPids(): Promise<number[] | undefined>
  /** Event-loop delay p99 (ms) per API process since its previous scrape. */
  scrapeEventLoopP99(): Promise<Map<number, number>>
  stop(): Promise<void>
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer()
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const address = server.address()
      server.close(() => resolve(typeof address === 'object' && address ? address.port : 0))
    })
  })
}

function rssOf(pid: number): number | undefined {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8')
    const match = /VmRSS:\s+(\d+) kB/.exec(status)
    return match ? Number(match[1]) * 1024 : undefined
  } catch {
    return undefined
  }
}

function childrenOf(pid: number): number[] {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8')
      .trim()
      .split(/\s+/)
      .filter(Boolean)
      .map(Number)
  } catch {
    return []
  }
}

/** The service's main.ts marks the process it forks for background jobs in its environment. */
function isJobProcess(pid: number): boolean {
  try {
    return readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0').includes('KMS_PROCESS_KIND=jobs')
  } catch {
    return false
  }
}

/** One GET on a fresh connection: node:cluster hands each new connection to the next process. */
function getOnNewConnection(url: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = request(url, { agent: false, headers: { connection: 'close' } }, (res) => {
      let body = ''
      res.setEncoding('utf8')
      res.on('data', (chunk: string) => {
        body += chunk
      })
      res.on('end', () => resolve(body))
    })
    req.on('error', reject)
    req.end()
  })
}

async function waitForHealth(baseUrl: string, child: ChildProcess, logFile: string): Promise<void> {
  const deadline = Date.now() + 90_000
  while (Date.now() < deadline) {
    if (child.exitCode !== null) {
      throw new Error(
        `the service exited with ${child.exitCode}:\n${readFileSync(logFile, 'utf8').slice(-4000)}`,
      )
    }
    try {
      const body = await getOnNewConnection(`${baseUrl}/api/v1/health`)
      if (body.includes('"status"')) return
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 200))
  }
  throw new Error(
    `the service did not answer /api/v1/health within 90 s:\n${readFileSync(logFile, 'utf8').slice(-4000)}`,
  )
}

export async function startServiceUnderTest(options: {
  apiProcesses?: number
  env?: Record<string, string>
  /**
   * `npm start` with nothing configured but PORT, HOST and a fresh KMS_DATA_DIR: the embedded
   * PGlite database on a Unix socket in the data directory, one process, no Redis, a generated
   * master key file and the bootstrap tenant.
   */
  zeroConfig?: boolean
}): Promise<ServiceUnderTest> {
  const zeroConfig = options.zeroConfig === true
  const dbName = `kms_bench_${randomBytes(5).toString('hex')}`
  const workDir = join(tmpdir(), dbName)
  let databaseUrl: string
  if (zeroConfig) {
    // The URL the service's embedded PostgreSQL answers on (src/data/embedded-postgres.ts).
    databaseUrl = `postgres://postgres@localhost/postgres?host=${encodeURIComponent(join(workDir, 'run'))}`
  } else {
    const admin = postgres(ADMIN_DATABASE_URL, { max: 1, onnotice: () => {} })
    await admin.unsafe(`CREATE DATABASE ${dbName}`)
    await admin.end()
    const dbUrl = new URL(ADMIN_DATABASE_URL)
    dbUrl.pathname = `/${dbName}`
    databaseUrl = dbUrl.toString()
  }

  mkdirSync(workDir, { recursive: true })
  const logFile = join(workDir, 'service.log')
  const logFd = openSync(logFile, 'a')
  const port = await freePort()
  const masterKey = zeroConfig ? undefined : randomBytes(32).toString('base64')
  const env: Record<string, string> = zeroConfig
    ? { KMS_DATA_DIR: workDir, PORT: String(port), HOST: '127.0.0.1' }
    : {
        DATABASE_URL: databaseUrl,
        REDIS_URL,
        KMS_REDIS_PREFIX: `${dbName}:`,
        KMS_MASTER_KEY: masterKey!,
        KMS_DATA_DIR: workDir,
        PORT: String(port),
        HOST: '127.0.0.1',
        KMS_BOOTSTRAP: 'false',
        ...(options.apiProcesses ? { KMS_API_PROCESSES: String(options.apiProcesses) } : {}),
        ...options.env,
      }
  // Zero configuration means none inherited either: the bench's own environment may hold the
  // service's settings (a developer's shell, the test helpers).
  const inherited = Object.fromEntries(
    Object.entries(process.env).filter(
      ([name]) =>
        !zeroConfig || !(name.startsWith('KMS_') || ['DATABASE_URL', 'REDIS_URL', 'NODE_ENV'].includes(name)),
    ),
  )
  // The service's log goes to a file: a pipe read by the bench would cost the load generator CPU.
  const child = spawn(process.execPath, ['src/main.ts'], {
    cwd: PROJECT_ROOT,
    env: { ...inherited, ...env },
    stdio: ['ignore', logFd, logFd],
  })
  closeSync(logFd)
  const baseUrl = `http://127.0.0.1:${port}`
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()))

  const sql = connectDatabase({
    url: databaseUrl,
    // PGlite is one session multiplexed over its socket's connections: one is plenty.
    poolSize: zeroConfig ? 1 : 2,
    statementTimeoutMs: 120_000,
    applicationName: BENCH_APPLICATION,
  })
  const cleanUp = async () => {
    await sql.end({ timeout: 5 })
    if (zeroConfig) {
      rmSync(workDir, { recursive: true, force: true })
      return
    }
    const a = postgres(ADMIN_DATABASE_URL, { max: 1, onnotice: () => {} })
    await a.unsafe(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`)
    await a.end()
    rmSync(workDir, { recursive: true, force: true })
  }
  try {
    await waitForHealth(baseUrl, child, logFile)
  } catch (err) {
    child.kill('SIGKILL')
    await exited
    await cleanUp()
    throw err
  }

  const logger = createLogger('silent', 'kms-bench')
  const { keyring: masterKeys } = loadMasterKeyring(
    // Zero configuration: the key file the service generated in its data directory.
    { masterKey, previousMasterKeys: [], masterKeyFile: undefined, dataDir: workDir, production: false },
    logger,
  )
  const audit = createAuditLog({ sql, logger, timeoutMs: 10_000 })
  // A new tenant's key is in no process's cache yet: nothing to invalidate.
  const noCache: Authenticator = { authenticate: async () => undefined, invalidate: async () => {} }
  const apiKeys = createApiKeyService({ sql, audit, authenticator: noCache })
  const apiPids = () => {
    // The job process (KMS_ROLE=all) serves no requests: it is not an API process.
    const workers = childrenOf(child.pid!).filter((pid) => !isJobProcess(pid))
    // With one API process the primary serves requests itself (no cluster workers).
    return workers.length > 0 ? workers : [child.pid!]
  }

  let eventLoopWindow = new Map<number, [number, number][]>()
  return {
    baseUrl,
    sql,
    embeddedDatabase: zeroConfig,
    apiPids,
    databaseBackendPids: async () => (zeroConfig ? undefined : serviceBackendPids(sql, BENCH_APPLICATION)),
    async createTenant() {
      const created = await createTenantService({ sql, masterKeys, apiKeys, audit }).create({
        name: `bench-${randomBytes(4).toString('hex')}`,
        actor: 'bench',
      })
      return { tenantId: created.tenant.id, apiKey: created.apiKey.key }
    },
    apiProcessRss() {
      const out = new Map<number, number>()
      for (const pid of apiPids()) {
        const rss = rssOf(pid)
        if (rss !== undefined) out.set(pid, rss)
      }
      return out
    },
    async scrapeEventLoopP99() {
      // One scrape shows every process (the primary aggregates the cluster): each API process's
      // event-loop histogram, by pid. The p99 is of the observations since the previous call.
      const current = eventLoopBuckets(await getOnNewConnection(`${baseUrl}/metrics`))
      const out = new Map<number, number>()
      for (const [pid, buckets] of current) {
        const before = eventLoopWindow.get(pid)
        const delta = buckets.map(
          ([le, count], i) => [le, count - (before?.[i]?.[1] ?? 0)] as [number, number],
        )
        const p99 = quantileOf(delta, 0.99)
        if (p99 !== undefined) out.set(pid, p99 * 1000)
      }
      eventLoopWindow = current
      return out
    },
    async stop() {
      child.kill('SIGTERM')
      const timer = setTimeout(() => child.kill('SIGKILL'), 30_000)
      await exited
      clearTimeout(timer)
      await cleanUp()
    },
  }
}

/**
 * The client backends of `sql`'s database but those of `exceptApplication` (and the asking
 * connection): the service's own connections (its API processes, `kms-api`, and its job process,
 * `kms-jobs`, in a bench database nothing else uses). PostgreSQL's shared processes (WAL writer,
 * checkpointer, autovacuum) and other databases' backends are not among them.
 */
export async function serviceBackendPids(sql: Sql, exceptApplication: string): Promise<number[]> {
  const rows = await sql<{ pid: number }[]>`
    SELECT pid FROM pg_stat_activity
    WHERE datname = current_database() AND backend_type = 'client backend'
      AND pid <> pg_backend_pid() AND application_name <> ${exceptApplication}`
  return rows.map((row) => Number(row.pid))
}

/** Cumulative buckets `[le, count]` of kms_eventloop_delay_seconds per API process, by pid. */
function eventLoopBuckets(text: string): Map<number, [number, number][]> {
  const out = new Map<number, [number, number][]>()
  const line = /^kms_eventloop_delay_seconds_bucket\{([^}]*)\}\s+(\S+)$/gm
  for (const match of text.matchAll(line)) {
    const labels = Object.fromEntries([...match[1]!.matchAll(/(\w+)="([^"]*)"/g)].map((m) => [m[1], m[2]]))
    if (labels['process_kind'] !== 'api') continue
    const pid = Number(labels['pid'])
    const le = labels['le'] === '+Inf' ? Number.POSITIVE_INFINITY : Number(labels['le'])
    const list = out.get(pid) ?? []
    list.push([le, Number(match[2])])
    out.set(pid, list)
  }
  for (const list of out.values()) list.sort((a, b) => a[0] - b[0])
  return out
}

/** The q-quantile of cumulative buckets, interpolated within its bucket as Prometheus's histogram_quantile does. */
function quantileOf(buckets: [number, number][], q: number): number | undefined {
  const total = buckets.at(-1)?.[1] ?? 0
  if (total <= 0) return undefined
  const rank = q * total
  let lower = 0
  let below = 0
  for (const [le, count] of buckets) {
    if (count >= rank) {
      if (!Number.isFinite(le)) return lower
      return lower + ((le - lower) * (rank - below)) / Math.max(count - below, 1)
    }
    lower = le
    below = count
  }
  return lower
}
