import { type ChildProcess, spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { join } from 'node:path'
import postgres from 'postgres'
import type { Scope } from '../../src/auth/scopes.ts'
import { type Config, loadConfig } from '../../src/config.ts'
import { connectDatabase, type Sql } from '../../src/data/database.ts'
import { loadMasterKeyring } from '../../src/keyring/master-key.ts'
import type { Resolver } from '../../src/outbound/destination.ts'
import type { Clock } from '../../src/platform/clock.ts'
import { createLogger } from '../../src/platform/logger.ts'
import { type ApiProcess, startApiProcess } from '../../src/server/api-process.ts'
import { prepareDatabase } from '../../src/server/bootstrap.ts'

/**
 * Test harness: every test file gets its own PostgreSQL database on the real server, its own
 * Redis key prefix on the real Redis, and a real service listening on a real port.
 */
export const ADMIN_DATABASE_URL =
  process.env['TEST_DATABASE_URL'] ?? 'postgres://postgres@127.0.0.1:5432/postgres'
export const REDIS_URL = process.env['TEST_REDIS_URL'] ?? 'redis://127.0.0.1:6379'
export const PROJECT_ROOT = join(import.meta.dirname, '..', '..')
export const NODE_BIN = process.execPath

export interface TestDatabase {
  url: string
  name: string
  drop(): Promise<void>
}

export async function createTestDatabase(): Promise<TestDatabase> {
  const name = `kms_test_${randomBytes(6).toString('hex')}`
  const admin = postgres(ADMIN_DATABASE_URL, { max: 1, onnotice: () => {} })
  await admin.unsafe(`CREATE DATABASE ${name}`)
  await admin.end()
  const url = new URL(ADMIN_DATABASE_URL)
  url.pathname = `/${name}`
  return {
    url: url.toString(),
    name,
    async drop() {
      const a = postgres(ADMIN_DATABASE_URL, { max: 1, onnotice: () => {} })
      await a.unsafe(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
      await a.end()
    },
  }
}

/** Environment for a service under test: its own database and Redis prefix, a fixed master key. */
export function testEnv(db: TestDatabase, extra: Record<string, string> = {}): Record<string, string> {
  return {
    DATABASE_URL: db.url,
    REDIS_URL,
    KMS_REDIS_PREFIX: `${db.name}:`,
    KMS_MASTER_KEY: randomBytes(32).toString('base64'),
    KMS_DATA_DIR: join(PROJECT_ROOT, 'data', 'test', db.name),
    PORT: '0',
    HOST: '127.0.0.1',
    LOG_LEVEL: 'silent',
    KMS_API_PROCESSES: '1',
    KMS_BOOTSTRAP: 'false',
    ...extra,
  }
}

export interface TenantWithKey {
  tenantId: string
  apiKeyId: string
  key: string
}

/** One record as GET /api/v1/audit returns it. */
export interface AuditView {
  actor: string
  action: string
  resource: string | null
  keyVersion: number | null
  outcome: string
  details: Record<string, unknown> | null
}

export interface HttpResult {
  status: number
  headers: Headers
  // biome-ignore lint/suspicious/noExplicitAny: parsed JSON of any shape; each test asserts the fields it reads
  body: any
  text: string
}

export interface TestService {
  baseUrl: string
  config: Config
  /** The environment the service runs with: another process given it joins the same deployment. */
  env: Record<string, string>
  db: TestDatabase
  api: ApiProcess
  /** A direct connection to the service's database, for assertions on what was stored. */
  sql: Sql
  createTenant(scopes?: readonly Scope[]): Promise<TenantWithKey>
  request(
    method: string,
    path: string,
    options?: { key?: string; body?: unknown; rawBody?: string; headers?: Record<string, string> },
  ): Promise<HttpResult>
  stop(): Promise<void>
}

/**
 * Starts a service on its own fresh database. `clock` replaces the service's time source, so a
 * test can move time forward (key expiry, scheduled deletion) instead of waiting.
 */
export async function startTestService(
  extraEnv: Record<string, string> = {},
  /** jobs: run the background jobs (BullMQ workers) in the service's process. */
  options: { clock?: Clock; jobs?: boolean; resolve?: Resolver } = {},
): Promise<TestService> {
  const db = await createTestDatabase()
  const env = testEnv(db, extraEnv)
  const config = loadConfig(env)
  const logger = createLogger(process.env['TEST_LOG_LEVEL'] ?? 'silent', 'kms-test')
  const sql = connectDatabase({
    url: db.url,
    poolSize: 4,
    statementTimeoutMs: 10_000,
    applicationName: 'kms-test',
  })
  const { keyring: masterKeys } = loadMasterKeyring(config, logger)
  await prepareDatabase({ sql, masterKeys, logger }, { bootstrap: false, print: () => {} })
  const api = await startApiProcess(config, logger, db.url, options)
  const baseUrl = api.url

  return {
    baseUrl,
    config,
    env,
    db,
    api,
    sql,
    async createTenant(scopes) {
      const created = await api.services.tenants.create({
        name: `tenant-${randomBytes(8).toString('hex')}`,
        actor: 'test',
        ...(scopes ? { scopes } : {}),
      })
      return { tenantId: created.tenant.id, apiKeyId: created.apiKey.id, key: created.apiKey.key }
    },
    request: (method, path, options = {}) => httpRequest(baseUrl, method, path, options),
    async stop() {
      await api.stop()
      await sql.end({ timeout: 5 })
      await db.drop()
    },
  }
}

export async function httpRequest(
  baseUrl: string,
  method: string,
  path: string,
  options: { key?: string; body?: unknown; rawBody?: string; headers?: Record<string, string> } = {},
): Promise<HttpResult> {
  const headers: Record<string, string> = { ...options.headers }
  if (options.key !== undefined) headers['x-api-key'] = options.key
  let body: string | undefined = options.rawBody
  if (options.body !== undefined) {
    body = JSON.stringify(options.body)
    headers['content-type'] ??= 'application/json'
  }
  const response = await fetch(new URL(path, baseUrl), { method, headers, body })
  const text = await response.text()
  let parsed: unknown
  try {
    parsed = text.length > 0 ? JSON.parse(text) : undefined
  } catch {
    parsed = undefined
  }
  return { status: response.status, headers: response.headers, body: parsed, text }
}

/** Polls until `condition` holds; fails after `timeoutMs` naming what it waited for. No timing is asserted. */
export async function waitFor(
  condition: () => boolean | Promise<boolean>,
  what: string,
  timeoutMs = 15_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
}

export interface CliResult {
  code: number | null
  stdout: string
  stderr: string
}

/** Runs `npm run kms-admin -- <args>` as an operator would (the same entry point, without npm's banner). */
export function runCli(args: string[], env: Record<string, string>): Promise<CliResult> {
  return new Promise((resolve) => {
    const child = spawn(NODE_BIN, ['src/cli/main.ts', ...args], {
      cwd: PROJECT_ROOT,
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (c: Buffer) => {
      stdout += c.toString()
    })
    child.stderr.on('data', (c: Buffer) => {
      stderr += c.toString()
    })
    child.once('exit', (code) => resolve({ code, stdout, stderr }))
  })
}

export interface SpawnedService {
  baseUrl: string
  child: ChildProcess
  output(): string
  stop(signal?: NodeJS.Signals): Promise<number | null>
}

/** Runs `node src/main.ts` as `npm start` does, and waits until it listens. */
export async function spawnService(env: Record<string, string>, timeoutMs = 60_000): Promise<SpawnedService> {
  const child = spawn(NODE_BIN, ['src/main.ts'], {
    cwd: PROJECT_ROOT,
    // The listening address is read from the log, so the log must be on.
    env: { ...process.env, ...env, LOG_LEVEL: 'info' },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let output = ''
  child.stdout!.on('data', (chunk: Buffer) => {
    output += chunk.toString()
  })
  child.stderr!.on('data', (chunk: Buffer) => {
    output += chunk.toString()
  })
  const exited = new Promise<number | null>((resolve) =>
    child.once('exit', (code, signal) => {
      // A death by signal is worth seeing in the output of the test that asserts the exit code.
      if (signal) output += `\n[test harness] the service died of ${signal}\n`
      resolve(code)
    }),
  )
  const baseUrl = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`service did not start in time:\n${output}`)), timeoutMs)
    const poll = setInterval(() => {
      const match = /Server listening at (http:\/\/127\.0\.0\.1:\d+)/.exec(output)
      if (match) {
        clearInterval(poll)
        clearTimeout(timer)
        resolve(match[1]!)
      }
    }, 50)
    void exited.then((code) => {
      clearInterval(poll)
      clearTimeout(timer)
      reject(new Error(`service exited with ${code} before listening:\n${output}`))
    })
  })
  return {
    baseUrl,
    child,
    output: () => output,
    async stop(signal = 'SIGTERM') {
      if (child.exitCode !== null) return child.exitCode
      child.kill(signal)
      return exited
    },
  }
}
