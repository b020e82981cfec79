import { availableParallelism } from 'node:os'
import { resolve } from 'node:path'

/** Everything the service reads from its environment, parsed once at start. */
export interface Config {
  host: string
  port: number
  /** Absent: the service runs an embedded PostgreSQL (PGlite) in `dataDir`. */
  databaseUrl: string | undefined
  databasePoolSize: number
  dataDir: string
  redisUrl: string
  /** Prefix of every Redis key and channel, so several deployments can share one Redis. */
  redisPrefix: string
  masterKey: string | undefined
  previousMasterKeys: string[]
  masterKeyFile: string | undefined
  production: boolean
  apiProcesses: number
  logLevel: string
  apiKeyCacheTtlMs: number
  /** Upper bound on one audit write (group commit) before the operation fails with 503. */
  auditWriteTimeoutMs: number
  bodyLimitBytes: number
  bootstrap: boolean
  shutdownGraceMs: number
}

export class ConfigError extends Error {}

function integer(env: NodeJS.ProcessEnv, name: string, fallback: number, min: number, max: number): number {
  const raw = env[name]
  if (raw === undefined || raw === '') return fallback
  const value = Number(raw)
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new ConfigError(`${name} must be an integer between ${min} and ${max}, got "${raw}"`)
  }
  return value
}

function flag(env: NodeJS.ProcessEnv, name: string, fallback: boolean): boolean {
  const raw = env[name]
  if (raw === undefined || raw === '') return fallback
  if (['1', 'true', 'yes', 'on'].includes(raw.toLowerCase())) return true
  if (['0', 'false', 'no', 'off'].includes(raw.toLowerCase())) return false
  throw new ConfigError(`${name} must be true or false, got "${raw}"`)
}

function list(raw: string | undefined): string[] {
  return (raw ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s.length > 0)
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const production = env['NODE_ENV'] === 'production'
  return {
    host: env['HOST'] || '127.0.0.1',
    port: integer(env, 'PORT', 8080, 0, 65535),
    databaseUrl: env['DATABASE_URL'] || undefined,
    databasePoolSize: integer(env, 'DATABASE_POOL_SIZE', 10, 1, 200),
    dataDir: resolve(env['KMS_DATA_DIR'] || 'data'),
    redisUrl: env['REDIS_URL'] || 'redis://127.0.0.1:6379',
    redisPrefix: env['KMS_REDIS_PREFIX'] || 'kms:',
    masterKey: env['KMS_MASTER_KEY'] || undefined,
    previousMasterKeys: list(env['KMS_MASTER_KEY_PREVIOUS']),
    masterKeyFile: env['KMS_MASTER_KEY_FILE'] || undefined,
    production,
    apiProcesses: integer(env, 'KMS_API_PROCESSES', availableParallelism(), 1, 256),
    logLevel: env['LOG_LEVEL'] || 'info',
    apiKeyCacheTtlMs: integer(env, 'KMS_API_KEY_CACHE_TTL_MS', 5000, 0, 600_000),
    auditWriteTimeoutMs: integer(env, 'KMS_AUDIT_WRITE_TIMEOUT_MS', 5000, 100, 120_000),
    bodyLimitBytes: integer(env, 'KMS_BODY_LIMIT_BYTES', 1024 * 1024, 1024, 64 * 1024 * 1024),
    bootstrap: flag(env, 'KMS_BOOTSTRAP', true),
    shutdownGraceMs: integer(env, 'KMS_SHUTDOWN_GRACE_MS', 10_000, 0, 600_000),
  }
}
