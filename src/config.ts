import { availableParallelism } from 'node:os'
import { join, resolve } from 'node:path'
import { customEndpointOrigin } from './cloud-export/custom-endpoints.ts'
import { Credential } from './entropy/credential.ts'
import { ENTROPY_PROTOCOLS, type EntropyProtocol } from './entropy/entropy-client.ts'
import { AllowListError, createAllowList } from './outbound/allow-list.ts'

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
  /** Log every request at info level (otherwise at debug). */
  accessLog: boolean
  /**
   * KMS_DATA_PLANE: the HTTP adapter of the hot routes (docs/decisions.md, "A data plane without
   * the framework"): `node` (the default, `auto`) or `fastify`.
   */
  dataPlane: DataPlaneAdapter
  apiKeyCacheTtlMs: number
  /** Key rows read by cryptographic operations: the bound on staleness if Redis misses an invalidation. */
  keyCacheTtlMs: number
  /** Upper bound on one audit write (group commit) before the operation fails with 503. */
  auditWriteTimeoutMs: number
  bodyLimitBytes: number
  /** Create the tenant `default` on an empty database (default: on in development, off in production). */
  bootstrap: boolean
  /** Where that tenant's first API key is written (mode 0600): never into the log. */
  bootstrapKeyFile: string
  /** KMS_BOOTSTRAP_OWNER_EMAIL: the address of the owner account the bootstrap makes (password beside the key file). */
  bootstrapOwnerEmail: string
  shutdownGraceMs: number
  /** The quantum entropy chain (docs/entropy.md); no source configured means the CSPRNG alone. */
  entropy: EntropyConfig
  /** What `npm start` runs: API processes, the background job process, or both. */
  role: ProcessRole
  jobs: JobsConfig
  /** Value versions kept per secret, the current one included. */
  secretVersionsKept: number
  /**
   * KMS_OUTBOUND_ALLOW: host names and CIDR ranges outbound requests (webhooks) may reach although
   * they are not public addresses (docs/decisions.md, "Hardening: outbound requests"). Empty by default.
   */
  outboundAllow: string[]
  cryptoPool: CryptoPoolConfig
  identity: IdentityConfig
  mail: MailSettings
  sms: SmsSettings
  /** Stripe's webhook endpoint secret (`whsec_…`): absent, the payment webhook answers 404. */
  stripeWebhookSecret: string | undefined
  /** Partners' commission on their referrals' paid invoices, in basis points (2000 = 20%). */
  partnerCommissionBasisPoints: number
  /**
   * KMS_SIGNUP_RATE_PER_HOUR: sign-up requests (API and pages together) per client IP and hour;
   * and, counted apart, an application's sign-up and forgot-password pages together.
   */
  signupRatePerHour: number
  /** KMS_CLOUD_EXPORT_TIMEOUT_MS: each HTTP exchange with a cloud KMS during a push. */
  cloudExportTimeoutMs: number
  /**
   * KMS_CLOUD_EXPORT_CUSTOM_ENDPOINTS: origins besides the providers' own hosts that cloud
   * connections and targets may name (docs/cloud-export.md, "Endpoints"). Empty by default.
   */
  cloudExportCustomEndpoints: string[]
  /**
   * The language model that suggests key labels (docs/insights.md): an OpenAI-compatible
   * chat-completions endpoint. Absent: the built-in engine alone.
   */
  tagModel: { baseUrl: string; model: string; apiKey: string | undefined; timeoutMs: number } | undefined
}

/** Outbound e-mail (invitations): SMTP through nodemailer, sent by the job process. */
interface MailSettings {
  /** KMS_SMTP_URL: smtp:// or smtps:// with optional credentials; absent, sends fail as smtp_not_configured. */
  smtpUrl: string | undefined
  /** KMS_MAIL_FROM: the From header. */
  from: string
  /** KMS_SMTP_TIMEOUT_MS: connection, greeting and inactivity bound of one attempt. */
  timeoutMs: number
  /** KMS_SMTP_ATTEMPTS: attempts per send before it is marked failed (exponential back-off from 2 s). */
  attempts: number
}

/**
 * Outbound SMS (sign-in codes): a provider speaking Twilio's Messages API, reached through the
 * guarded outbound client. Absent, SMS codes fail as sms_not_configured.
 */
export interface SmsSettings {
  /** KMS_SMS_URL: the API's base URL (default https://api.twilio.com). */
  url: string
  /** KMS_SMS_ACCOUNT_SID and KMS_SMS_AUTH_TOKEN: the account and its secret (HTTP Basic). */
  accountSid: string | undefined
  authToken: string | undefined
  /** KMS_SMS_FROM: the sender number (E.164) or messaging service name. */
  from: string | undefined
  /** KMS_SMS_TIMEOUT_MS: the whole exchange of one attempt. */
  timeoutMs: number
}

/** The OpenID provider and its pages (docs/identity.md). */
export interface IdentityConfig {
  /** ID_URL: the issuer; absent, the URL the process listens on (fine for one host, not behind a proxy). */
  idUrl: string | undefined
  /** KMS_CDN_HOST: the public CDN host the sign-in pages' Content-Security-Policy allows for styles and fonts. */
  cdnHost: string
  /** KMS_CONSOLE_REDIRECT_URIS: where the console client may be sent back to; default `<issuer>/console/callback`. */
  consoleRedirectUris: string[]
  /** KMS_PARTNER_PORTAL_REDIRECT_URIS: the partner portal client's; default `<issuer>/partner-portal/callback`. */
  partnerPortalRedirectUris: string[]
  /** KMS_ID_SIGNING_KEY_ROTATION_DAYS: age at which the job process rotates the token signing key. */
  signingKeyRotationDays: number
}

/** The crypto worker pool (src/crypto-pool): size, per-task deadline, per-tenant queue bound. */
interface CryptoPoolConfig {
  threads: number
  /** A task still running past this is stopped (its thread terminated): 503 crypto_task_timeout. */
  taskTimeoutMs: number
  /** Tasks one tenant may have waiting; one more is answered 429 crypto_busy. */
  tenantMaxQueue: number
}

const PROCESS_ROLES = ['all', 'api', 'worker'] as const
type ProcessRole = (typeof PROCESS_ROLES)[number]

export interface JobsConfig {
  /** How often the sweeps run: due rotations, expiries and deletions, lost webhook jobs. */
  sweepMs: number
  /** Webhook deliveries one job process sends at once. */
  concurrency: number
  /** Of those, at most this many for one tenant (KMS_WEBHOOK_TENANT_CONCURRENCY; half by default). */
  tenantConcurrency: number
  webhookTimeoutMs: number
  /** Multiplies the 1 s / 10 s / 60 s retry delays (1 in production). */
  webhookRetryScale: number
}

export interface EntropySourceConfig {
  url: string
  protocol: EntropyProtocol
  credential: Credential
}

export interface EntropyConfig {
  primary: EntropySourceConfig | undefined
  secondary: EntropySourceConfig | undefined
  timeoutMs: number
  poolBytes: number
  refillIntervalMs: number
  retryMs: number
  retryMaxMs: number
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

export type DataPlaneAdapter = 'node' | 'fastify'

/**
 * `auto` is node:http. uWebSockets.js is not offered: no published build runs on this runtime's
 * glibc (2.36) and none ships its sources (docs/decisions.md); asking for it is an error, not a
 * silent fallback.
 */
function dataPlaneAdapter(env: NodeJS.ProcessEnv): DataPlaneAdapter {
  const value = (env['KMS_DATA_PLANE'] || 'auto').toLowerCase()
  if (value === 'auto' || value === 'node') return 'node'
  if (value === 'fastify') return 'fastify'
  throw new ConfigError(
    `KMS_DATA_PLANE must be one of: auto, node, fastify (got ${JSON.stringify(value.slice(0, 40))}; ` +
      'uWebSockets.js has no build for this runtime, docs/decisions.md)',
  )
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

/**
 * One remote source from KMS_ENTROPY_<ROLE>_{URL,PROTOCOL,CREDENTIAL}. Messages never echo the
 * URL or the credential: either could hold a secret.
 */
function entropySource(
  env: NodeJS.ProcessEnv,
  role: 'PRIMARY' | 'SECONDARY',
): EntropySourceConfig | undefined {
  const names = {
    url: `KMS_ENTROPY_${role}_URL`,
    protocol: `KMS_ENTROPY_${role}_PROTOCOL`,
    credential: `KMS_ENTROPY_${role}_CREDENTIAL`,
  }
  const rawUrl = env[names.url] || undefined
  const protocol = env[names.protocol] || undefined
  const credential = env[names.credential] || undefined
  if (rawUrl === undefined) {
    if (protocol !== undefined || credential !== undefined) {
      throw new ConfigError(`${names.protocol} and ${names.credential} need ${names.url}`)
    }
    return undefined
  }
  let url: URL
  try {
    url = new URL(rawUrl)
  } catch {
    throw new ConfigError(`${names.url} must be an absolute http:// or https:// URL`)
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new ConfigError(`${names.url} must be an http:// or https:// URL, got scheme "${url.protocol}"`)
  }
  if (url.username !== '' || url.password !== '') {
    throw new ConfigError(
      `${names.url} must not contain a user or password; put the secret in ${names.credential}`,
    )
  }
  if (url.search !== '' || url.hash !== '') {
    throw new ConfigError(`${names.url} must not have a query or fragment (the protocol adds its own query)`)
  }
  if (!ENTROPY_PROTOCOLS.includes(protocol as EntropyProtocol)) {
    throw new ConfigError(
      `${names.protocol} must be one of ${ENTROPY_PROTOCOLS.join(', ')}, got "${protocol ?? ''}"`,
    )
  }
  if (credential === undefined) {
    throw new ConfigError(`${names.credential} is required (the AQN x-api-key or the Qrypt bearer token)`)
  }
  // Goes into a request header verbatim: no spaces, control characters or non-ASCII.
  if (!/^[\x21-\x7e]+$/.test(credential)) {
    throw new ConfigError(`${names.credential} must be printable ASCII without spaces`)
  }
  return { url: url.href, protocol: protocol as EntropyProtocol, credential: new Credential(credential) }
}

function entropyConfig(env: NodeJS.ProcessEnv): EntropyConfig {
  const primary = entropySource(env, 'PRIMARY')
  const secondary = entropySource(env, 'SECONDARY')
  if (secondary && !primary) {
    throw new ConfigError('KMS_ENTROPY_SECONDARY_URL is set but KMS_ENTROPY_PRIMARY_URL is not')
  }
  const retryMs = integer(env, 'KMS_ENTROPY_RETRY_MS', 5000, 10, 3_600_000)
  const retryMaxMs = integer(env, 'KMS_ENTROPY_RETRY_MAX_MS', 60_000, 10, 3_600_000)
  if (retryMaxMs < retryMs) {
    throw new ConfigError(
      `KMS_ENTROPY_RETRY_MAX_MS (${retryMaxMs}) must be at least KMS_ENTROPY_RETRY_MS (${retryMs})`,
    )
  }
  return {
    primary,
    secondary,
    timeoutMs: integer(env, 'KMS_ENTROPY_TIMEOUT_MS', 2000, 50, 60_000),
    // At least two Qrypt blocks, so that a pool below half can always take one.
    poolBytes: integer(env, 'KMS_ENTROPY_POOL_BYTES', 32 * 1024, 2048, 1024 * 1024),
    refillIntervalMs: integer(env, 'KMS_ENTROPY_REFILL_INTERVAL_MS', 1000, 10, 600_000),
    retryMs,
    retryMaxMs,
  }
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
    // One core is left to PostgreSQL, the crypto threads and the kernel: on 2 cores one API process
    // served 40% more small operations than two (each paid 60% more CPU per request fighting
    // for the cores); two did 15-25% better only on 1 MB bodies (bench/RESULTS.md, step 12).
    apiProcesses: integer(env, 'KMS_API_PROCESSES', Math.max(1, availableParallelism() - 1), 1, 256),
    logLevel: env['LOG_LEVEL'] || 'info',
    accessLog: flag(env, 'KMS_ACCESS_LOG', false),
    dataPlane: dataPlaneAdapter(env),
    apiKeyCacheTtlMs: integer(env, 'KMS_API_KEY_CACHE_TTL_MS', 5000, 0, 600_000),
    keyCacheTtlMs: integer(env, 'KMS_KEY_CACHE_TTL_MS', 2000, 0, 600_000),
    auditWriteTimeoutMs: integer(env, 'KMS_AUDIT_WRITE_TIMEOUT_MS', 5000, 100, 120_000),
    bodyLimitBytes: integer(env, 'KMS_BODY_LIMIT_BYTES', 1024 * 1024, 1024, 64 * 1024 * 1024),
    bootstrap: flag(env, 'KMS_BOOTSTRAP', !production),
    bootstrapKeyFile: resolve(
      env['KMS_BOOTSTRAP_KEY_FILE'] || join(env['KMS_DATA_DIR'] || 'data', 'bootstrap-api-key'),
    ),
    bootstrapOwnerEmail: env['KMS_BOOTSTRAP_OWNER_EMAIL'] || 'owner@example.com',
    shutdownGraceMs: integer(env, 'KMS_SHUTDOWN_GRACE_MS', 10_000, 0, 600_000),
    entropy: entropyConfig(env),
    role: role(env),
    secretVersionsKept: integer(env, 'KMS_SECRET_VERSIONS_KEPT', 10, 1, 1000),
    outboundAllow: outboundAllow(env),
    cryptoPool: {
      threads: integer(env, 'KMS_CRYPTO_THREADS', Math.max(1, availableParallelism()), 1, 256),
      taskTimeoutMs: integer(env, 'KMS_CRYPTO_TASK_TIMEOUT_MS', 30_000, 10, 600_000),
      tenantMaxQueue: integer(env, 'KMS_CRYPTO_TENANT_QUEUE', 64, 1, 10_000),
    },
    jobs: jobsConfig(env),
    identity: identityConfig(env),
    mail: mailConfig(env),
    sms: smsConfig(env),
    stripeWebhookSecret: env['KMS_STRIPE_WEBHOOK_SECRET'] || undefined,
    partnerCommissionBasisPoints: integer(env, 'KMS_PARTNER_COMMISSION_BPS', 2000, 0, 10_000),
    signupRatePerHour: integer(env, 'KMS_SIGNUP_RATE_PER_HOUR', 20, 1, 1_000_000),
    cloudExportTimeoutMs: integer(env, 'KMS_CLOUD_EXPORT_TIMEOUT_MS', 15_000, 100, 120_000),
    cloudExportCustomEndpoints: cloudExportCustomEndpoints(env),
    tagModel: tagModelConfig(env),
  }
}

function tagModelConfig(env: NodeJS.ProcessEnv): Config['tagModel'] {
  const timeoutMs = integer(env, 'KMS_TAG_MODEL_TIMEOUT_MS', 10_000, 100, 120_000)
  const baseUrl = env['KMS_TAG_MODEL_URL'] || undefined
  if (baseUrl === undefined) return undefined
  absoluteHttpUrl('KMS_TAG_MODEL_URL', baseUrl)
  const model = env['KMS_TAG_MODEL'] || ''
  if (!/^[A-Za-z0-9._:/-]{1,200}$/.test(model))
    throw new ConfigError(
      'KMS_TAG_MODEL must name the model (e.g. gpt-4o-mini, llama3.1:8b) when KMS_TAG_MODEL_URL is set',
    )
  return {
    baseUrl: baseUrl.replace(/\/+$/, ''),
    model,
    apiKey: env['KMS_TAG_MODEL_API_KEY'] || undefined,
    timeoutMs,
  }
}

function mailConfig(env: NodeJS.ProcessEnv): MailSettings {
  const smtpUrl = env['KMS_SMTP_URL'] || undefined
  if (smtpUrl !== undefined) {
    let protocol = ''
    try {
      protocol = new URL(smtpUrl).protocol
    } catch {
      // reported below
    }
    if (protocol !== 'smtp:' && protocol !== 'smtps:') {
      throw new ConfigError('KMS_SMTP_URL must be an smtp:// or smtps:// URL')
    }
  }
  return {
    smtpUrl,
    from: env['KMS_MAIL_FROM'] || 'KMS <no-reply@localhost>',
    timeoutMs: integer(env, 'KMS_SMTP_TIMEOUT_MS', 30_000, 100, 120_000),
    attempts: integer(env, 'KMS_SMTP_ATTEMPTS', 3, 1, 10),
  }
}

function smsConfig(env: NodeJS.ProcessEnv): SmsSettings {
  const url = env['KMS_SMS_URL'] || 'https://api.twilio.com'
  absoluteHttpUrl('KMS_SMS_URL', url)
  return {
    url,
    accountSid: env['KMS_SMS_ACCOUNT_SID'] || undefined,
    authToken: env['KMS_SMS_AUTH_TOKEN'] || undefined,
    from: env['KMS_SMS_FROM'] || undefined,
    timeoutMs: integer(env, 'KMS_SMS_TIMEOUT_MS', 10_000, 100, 60_000),
  }
}

function identityConfig(env: NodeJS.ProcessEnv): IdentityConfig {
  const idUrl = env['ID_URL'] || undefined
  if (idUrl !== undefined) absoluteHttpUrl('ID_URL', idUrl)
  const consoleRedirectUris = list(env['KMS_CONSOLE_REDIRECT_URIS'])
  for (const uri of consoleRedirectUris) absoluteHttpUrl('KMS_CONSOLE_REDIRECT_URIS', uri)
  const partnerPortalRedirectUris = list(env['KMS_PARTNER_PORTAL_REDIRECT_URIS'])
  for (const uri of partnerPortalRedirectUris) absoluteHttpUrl('KMS_PARTNER_PORTAL_REDIRECT_URIS', uri)
  const cdnHost = env['KMS_CDN_HOST'] || 'cdn.jsdelivr.net'
  if (!/^[a-z0-9.-]{1,253}(:\d{1,5})?$/i.test(cdnHost)) {
    throw new ConfigError(`KMS_CDN_HOST must be a host name (optionally with a port), got "${cdnHost}"`)
  }
  return {
    idUrl: idUrl?.replace(/\/+$/, ''),
    cdnHost,
    consoleRedirectUris,
    partnerPortalRedirectUris,
    signingKeyRotationDays: integer(env, 'KMS_ID_SIGNING_KEY_ROTATION_DAYS', 30, 1, 3650),
  }
}

function absoluteHttpUrl(name: string, value: string): void {
  let url: URL
  try {
    url = new URL(value)
  } catch {
    throw new ConfigError(`${name} must be an absolute http(s) URL, got "${value}"`)
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new ConfigError(`${name} must be an absolute http(s) URL, got "${value}"`)
  }
}

function jobsConfig(env: NodeJS.ProcessEnv): JobsConfig {
  const concurrency = integer(env, 'KMS_WORKER_CONCURRENCY', 10, 1, 1000)
  return {
    sweepMs: integer(env, 'KMS_JOB_SWEEP_MS', 30_000, 50, 3_600_000),
    concurrency,
    tenantConcurrency: integer(
      env,
      'KMS_WEBHOOK_TENANT_CONCURRENCY',
      Math.max(1, Math.floor(concurrency / 2)),
      1,
      concurrency,
    ),
    webhookTimeoutMs: integer(env, 'KMS_WEBHOOK_TIMEOUT_MS', 10_000, 100, 120_000),
    webhookRetryScale: fraction(env, 'KMS_WEBHOOK_RETRY_SCALE', 1),
  }
}

function outboundAllow(env: NodeJS.ProcessEnv): string[] {
  const entries = list(env['KMS_OUTBOUND_ALLOW'])
  try {
    createAllowList(entries)
  } catch (error) {
    if (error instanceof AllowListError) throw new ConfigError(`KMS_OUTBOUND_ALLOW: ${error.message}`)
    throw error
  }
  return entries
}

function cloudExportCustomEndpoints(env: NodeJS.ProcessEnv): string[] {
  return list(env['KMS_CLOUD_EXPORT_CUSTOM_ENDPOINTS']).map((entry) => {
    const origin = customEndpointOrigin(entry)
    if (origin === undefined)
      throw new ConfigError(
        `KMS_CLOUD_EXPORT_CUSTOM_ENDPOINTS: "${entry}" is not an https origin such as https://kms.internal.example:8443 (http only on loopback; no path)`,
      )
    return origin
  })
}

function role(env: NodeJS.ProcessEnv): ProcessRole {
  const raw = env['KMS_ROLE'] || 'all'
  if (!(PROCESS_ROLES as readonly string[]).includes(raw)) {
    throw new ConfigError(`KMS_ROLE must be one of ${PROCESS_ROLES.join(', ')}, got "${raw}"`)
  }
  return raw as ProcessRole
}

/** A number in (0, 1]. */
function fraction(env: NodeJS.ProcessEnv, name: string, fallback: number): number {
  const raw = env[name]
  if (raw === undefined || raw === '') return fallback
  const value = Number(raw)
  if (!Number.isFinite(value) || value <= 0 || value > 1) {
    throw new ConfigError(`${name} must be a number greater than 0 and at most 1, got "${raw}"`)
  }
  return value
}
