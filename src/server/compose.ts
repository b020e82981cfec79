import type { Redis } from 'ioredis'
import type { Logger } from 'pino'
import {
  type AccessPolicyService,
  createAccessPolicyService,
} from '../access-policies/access-policy-service.ts'
import { type Authenticator, createAuthenticator } from '../api-keys/api-key-authenticator.ts'
import { type ApiKeyService, createApiKeyService } from '../api-keys/api-key-service.ts'
import { type ApplicationService, createApplicationService } from '../applications/application-service.ts'
import { type AuditLog, createAuditLog } from '../audit/audit-log.ts'
import { loadAwareWriteConcurrency } from '../audit/write-concurrency.ts'
import type { PartnerAuthenticator } from '../auth/auth-hook.ts'
import { type BearerAuthenticator, createBearerAuthenticator } from '../auth/bearer-authenticator.ts'
import { type BillingService, createBillingService } from '../billing/billing-service.ts'
import { stripeWebhook } from '../billing/payment-webhook.ts'
import { usageMeter } from '../billing/usage-meter.ts'
import { type CloudExportService, createCloudExportService } from '../cloud-export/cloud-export-service.ts'
import { CLOUD_ADAPTERS } from '../cloud-export/providers/registry.ts'
import type { Config } from '../config.ts'
import { type BatchService, createBatchService } from '../crypto/batch-service.ts'
import { type CryptoService, createCryptoService } from '../crypto/crypto-service.ts'
import { createKeyObjectCache } from '../crypto/key-object-cache.ts'
import { createKeyResolver } from '../crypto/key-resolver.ts'
import { createSigningService, type SigningService } from '../crypto/signing-service.ts'
import { type CryptoPool, createCryptoPool } from '../crypto-pool/crypto-pool.ts'
import { connectDatabase, type Sql } from '../data/database.ts'
import { createInvalidationBus, type InvalidationBus } from '../data/invalidation-bus.ts'
import { createRedis, waitUntilReady } from '../data/redis.ts'
import { createEndUserService, type EndUserService } from '../endusers/enduser-service.ts'
import type { EntropyChain } from '../entropy/entropy-chain.ts'
import { createEntropyChainFromConfig } from '../entropy/entropy-from-config.ts'
import { createFederationService, type FederationService } from '../federation/saml-service.ts'
import { createClientRateLimit } from '../http/client-rate-limit.ts'
import { type AccountService, createAccountService } from '../identity/accounts/account-service.ts'
import { createIdentity, type Identity } from '../identity/identity-service.ts'
import { createBuiltinEngine } from '../intelligence/builtin-engine.ts'
import { createIntelligenceService, type IntelligenceService } from '../intelligence/intelligence-service.ts'
import { keyUseMeter } from '../intelligence/key-use-meter.ts'
import { createModelEngine } from '../intelligence/model-engine.ts'
import { jobNamespace } from '../jobs/job-namespace.ts'
import { loadMasterKeyring, type MasterKeyring } from '../keyring/master-key.ts'
import { createTenantKeks, type TenantKeks } from '../keyring/tenant-kek.ts'
import type { AlgorithmName, KeyType } from '../keys/algorithms.ts'
import { createKeyCache } from '../keys/key-cache.ts'
import { createKeyService, type KeyService } from '../keys/key-service.ts'
import { keyState } from '../keys/key-state.ts'
import { createMailQueue, type MailQueue } from '../mail/mail-queue.ts'
import { createMailer } from '../mail/mailer.ts'
import { createServiceMetrics, type ServiceMetrics } from '../metrics/service-metrics.ts'
import { createAllowList } from '../outbound/allow-list.ts'
import type { Resolver } from '../outbound/destination.ts'
import { createOutboundClient, type OutboundClient } from '../outbound/outbound-client.ts'
import { createPartnerAuthenticator } from '../partners/partner-authenticator.ts'
import { createPartnerService, type PartnerService } from '../partners/partner-service.ts'
import { type Clock, systemClock } from '../platform/clock.ts'
import { createRoleService, type RoleService } from '../roles/role-service.ts'
import { createRotationService, type RotationService } from '../rotation/rotation-service.ts'
import { createFolderService, type FolderService } from '../secrets/folder-service.ts'
import { createSecretSealing } from '../secrets/secret-sealing.ts'
import { createSecretService, type SecretService } from '../secrets/secret-service.ts'
import { createSettingsService, type SettingsService } from '../settings/settings-service.ts'
import { createSignupService, type SignupService } from '../signup/signup-service.ts'
import { createSmsSender } from '../sms/sms-sender.ts'
import { createTeamService, type TeamService } from '../team/team-service.ts'
import { createTenantService, type TenantService } from '../tenants/tenant-service.ts'
import { VERSION } from '../version.ts'
import { createWebhookService, type WebhookService } from '../webhooks/webhook-service.ts'

/** The composition root: every long-lived component of a process, built once, passed explicitly. */
export interface Services {
  config: Config
  logger: Logger
  sql: Sql
  redis: Redis
  bus: InvalidationBus
  masterKeys: MasterKeyring
  tenantKeks: TenantKeks
  audit: AuditLog
  authenticator: Authenticator
  apiKeys: ApiKeyService
  tenants: TenantService
  /** Accounts of people who sign in (team members; end-users later). */
  accounts: AccountService
  /** The OpenID provider, its pages' parts and the access-token verifier. */
  identity: Identity
  /** `Authorization: Bearer` access tokens of team members. */
  bearer: BearerAuthenticator
  /** Members, roles (the Bearer path's roleOf), invitations. */
  team: TeamService
  /** Outbound e-mail jobs (BullMQ), opened on first use. */
  mailQueue: MailQueue
  /** Tenant security settings (MFA methods, password policy, session lifetimes, API-key policy). */
  settings: SettingsService
  /** The tenant's applications (OpenID clients). */
  applications: ApplicationService
  /** The people who use the tenant's applications (their accounts are the identity module's). */
  endusers: EndUserService
  /** Roles of applications and their assignment to end-users. */
  roles: RoleService
  /** Who may sign in to the tenant's applications; access requests and their approval. */
  accessPolicies: AccessPolicyService
  /** External SAML identity providers of tenants' applications. */
  federation: FederationService
  /** Plans, subscriptions, the usage meter's reports. */
  billing: BillingService
  /** The partner programme: partners, their keys and codes, referrals and commissions. */
  partners: PartnerService
  /** Self-service sign-up of tenants and partners. */
  signups: SignupService
  /** Insights about keys and their tag suggestions. */
  intelligence: IntelligenceService
  /** Cloud KMS connections and key exports (pushed by the job process). */
  cloudExports: CloudExportService
  /** Partner API keys and partner portal sessions, on /api/v1/partners/*. */
  partnerCredentials: PartnerAuthenticator
  clock: Clock
  cryptoPool: CryptoPool
  keys: KeyService
  random: EntropyChain
  crypto: CryptoService
  signing: SigningService
  batches: BatchService
  rotation: RotationService
  webhooks: WebhookService
  folders: FolderService
  secrets: SecretService
  /** This process's metrics registry and the hooks the components report to. */
  metrics: ServiceMetrics

  /** Every HTTP request to another service goes through this client (src/outbound/). */
  outbound: OutboundClient
  close(): Promise<void>
}

export interface ServiceOptions {
  clock?: Clock
  /** Replaces DNS resolution for outbound requests (tests of the address policy). */
  resolve?: Resolver
}

export async function createServices(
  config: Config,
  logger: Logger,
  databaseUrl: string,
  role: string,
  options: ServiceOptions = {},
): Promise<Services> {
  const clock = options.clock ?? systemClock
  const sql = connectDatabase({
    url: databaseUrl,
    poolSize: config.databasePoolSize,
    statementTimeoutMs: config.auditWriteTimeoutMs,
    applicationName: `kms-${role}`,
  })
  const redis = createRedis(config.redisUrl, `kms-${role}`, logger)
  const subscriber = createRedis(config.redisUrl, `kms-${role}-sub`, logger)
  const bus = createInvalidationBus({ publisher: redis, subscriber, prefix: config.redisPrefix, logger })
  // Redis is optional for serving, but a process that starts with it should be subscribed first.
  await Promise.all([waitUntilReady(redis, 2000), waitUntilReady(subscriber, 2000)])
  const { keyring: masterKeys } = loadMasterKeyring(config, logger)
  const tenantKeks = createTenantKeks({ sql, masterKeys })
  const metrics = createServiceMetrics({ kind: role })
  const audit = createAuditLog({
    sql,
    logger,
    timeoutMs: config.auditWriteTimeoutMs,
    observer: metrics.audit,
    // Four writes in flight while there is CPU to spare, one while the machine is saturated
    // (audit/write-concurrency.ts).
    maxConcurrentWrites: loadAwareWriteConcurrency({ idle: 4, busy: 1, threshold: 0.7, windowMs: 100 }),
    // Billing's usage meter rides on every audit write (src/billing/usage-meter.ts).
    companions: [usageMeter, keyUseMeter],
  })
  const authenticator = createAuthenticator({ sql, bus, ttlMs: config.apiKeyCacheTtlMs })
  const settings = createSettingsService({ sql, audit })
  const apiKeys = createApiKeyService({
    sql,
    audit,
    authenticator,
    apiKeyPolicy: {
      maxLifetimeDaysOf: async (tenantId) =>
        (await settings.getSecurity(tenantId)).apiKeyPolicy.maxLifetimeDays,
    },
  })
  const tenants = createTenantService({
    sql,
    masterKeys,
    apiKeys,
    audit,
    cache: { bus, ttlMs: config.apiKeyCacheTtlMs },
  })
  const accounts = createAccountService({ sql, masterKeys, clock })
  const mailQueue = createMailQueue({
    redisUrl: config.redisUrl,
    prefix: async () => `${config.redisPrefix}jobs:${await jobNamespace(sql)}`,
    attempts: config.mail.attempts,
    logger,
  })
  const mailer = createMailer(config.mail)
  const outbound = createOutboundClient({
    allow: createAllowList(config.outboundAllow),
    ...(options.resolve ? { resolve: options.resolve } : {}),
  })
  // The identity module, the team, applications, end-users and roles need each other's answers
  // (member roles; the issuer for links; clients; role claims): late-bound here, once.
  let identity: Identity | undefined
  let applications: ApplicationService | undefined
  let roles: RoleService | undefined
  let accessPolicies: AccessPolicyService | undefined
  const team = createTeamService({
    sql,
    audit,
    accounts,
    tenants,
    masterKeys,
    bus,
    clock,
    mailQueue,
    mailer,
    linkBase: () => identity!.oidc.issuer(),
    cacheTtlMs: config.apiKeyCacheTtlMs,
    // A removal ends the member's console grants for the tenant (the identity module's).
    grants: {
      destroyTenantGrants: (tx, accountId, tenantId) =>
        identity!.destroyTenantGrantsOf(tx, accountId, tenantId),
      revoked: (grantIds) => identity!.grantsRevoked(grantIds),
    },
  })
  const memberships = team
  identity = createIdentity({
    sql,
    bus,
    masterKeys,
    clock,
    config: config.identity,
    accounts,
    memberships,
    tenants,
    sessionPolicy: {
      accessTokenSecondsOf: async (tenantId) =>
        (await settings.getSecurity(tenantId)).sessionLifetimes.accessTokenSeconds,
      refreshTokenSecondsOf: async (tenantId) =>
        (await settings.getSecurity(tenantId)).sessionLifetimes.refreshTokenSeconds,
    },
    mfaPolicy: {
      methodsFor: async (tenantId) => (await settings.getSecurity(tenantId)).mfaMethods,
    },
    branding: { panelOf: (tenantId) => settings.getBranding(tenantId) },
    grantCacheTtlMs: config.apiKeyCacheTtlMs,
    audit,
    mailQueue,
    mailer,
    sms: createSmsSender(config.sms, outbound),
    clients: {
      clientOf: (clientId) => applications!.clientOf(clientId),
      applicationOf: (applicationId) => applications!.applicationOf(applicationId),
      redirectOrigins: () => applications!.redirectOrigins(),
    },
    roles: {
      roleNamesFor: (tenantId, accountId, applicationId) =>
        roles!.roleNamesFor(tenantId, accountId, applicationId),
    },
    // The authorization gate asks these modules, built further down (the Modules issue removes
    // this late binding).
    accessPolicy: {
      decideSignIn: (attempt) => accessPolicies!.decideSignIn(attempt),
      allowsSignIn: (attempt) => accessPolicies!.allowsSignIn(attempt),
      allowsRefresh: (attempt) => accessPolicies!.allowsRefresh(attempt),
    },
    endUsers: {
      recordSignIn: (tenantId, accountId, applicationId) =>
        endusers.recordSignIn(tenantId, accountId, applicationId),
    },
    partners: { statusOf: async (accountId) => (await partners.partnerOfAccount(accountId))?.status },
    countSignIn: (kind, outcome, reason) => metrics.signIn(kind, outcome, reason),
    // Forgot password and applications' sign-up: the tenant sign-up's bound per client address,
    // counted apart from it (a tenant's end-users should not use up new tenants' allowance).
    requestLimit: createClientRateLimit({
      redis,
      nameSpace: `${config.redisPrefix}self-service-rate:`,
      perHour: config.signupRatePerHour,
    }),
  })
  const endusers = createEndUserService({
    sql,
    audit,
    accounts,
    links: identity.links,
    sessions: identity,
    applications: { exists: (tenantId, id) => applications!.exists(tenantId, id) },
    clock,
    masterKeys,
    mailQueue,
    mailer,
    linkBase: () => identity!.oidc.issuer(),
  })
  applications = createApplicationService({
    sql,
    audit,
    masterKeys,
    logger,
    creators: endusers,
    changed: (tenantId) => identity!.cors.changed(tenantId),
  })
  roles = createRoleService({
    sql,
    audit,
    directories: {
      applicationExists: (tenantId, id) => applications!.exists(tenantId, id),
      requireEndUser: async (actor, id) => {
        await endusers.get(actor, id)
      },
    },
  })
  accessPolicies = createAccessPolicyService({
    sql,
    audit,
    clock,
    mailQueue,
    mailer,
    directories: {
      applicationExists: (tenantId, id) => applications!.exists(tenantId, id),
      endUserExists: (tenantId, id) => endusers.exists(tenantId, id),
      roleExists: (tenantId, id) => roles!.exists(tenantId, id),
      roleIdsOf: (tenantId, endUserId) => roles!.roleIdsOf(tenantId, endUserId),
      emailOf: async (accountId) => (await accounts.get(accountId))?.email,
      applicationName: async (applicationId) => (await applications!.applicationOf(applicationId))?.name,
    },
  })
  const federation = createFederationService({
    sql,
    audit,
    clock,
    baseUrl: () => identity!.oidc.issuer(),
    directories: {
      applicationExists: (tenantId, id) => applications!.exists(tenantId, id),
      federatedAccount: (input) => endusers.federatedAccount(input),
    },
  })
  const bearer = createBearerAuthenticator({ verifier: identity.verifier, memberships })
  const cryptoPool = createCryptoPool({
    maxThreads: config.cryptoPool.threads,
    taskTimeoutMs: config.cryptoPool.taskTimeoutMs,
    tenantMaxQueue: config.cryptoPool.tenantMaxQueue,
    onTaskDone: metrics.poolTaskDone,
  })
  const keyCache = createKeyCache({ sql, bus, ttlMs: config.keyCacheTtlMs })
  // A new key version makes the key's cloud exports due (built further down: late-bound).
  let cloudExports: CloudExportService | undefined
  const keys = createKeyService({
    sql,
    audit,
    tenantKeks,
    pool: cryptoPool,
    clock,
    keyCache,
    versionObserver: { versionAdded: (tx, event) => cloudExports!.keyVersionAdded(tx, event) },
  })
  const random = createEntropyChainFromConfig(
    config.entropy,
    logger.child({ component: 'entropy' }),
    outbound,
  )
  const keyObjects = createKeyObjectCache({ sql, tenantKeks })
  const keyResolver = createKeyResolver({ keyCache, keyObjects, clock })
  const crypto = createCryptoService({ audit, keys: keyResolver, random })
  const signing = createSigningService({ audit, keys: keyResolver, pool: cryptoPool, random })
  const batches = createBatchService({ audit, keys: keyResolver, pool: cryptoPool, random })
  const webhooks = createWebhookService({
    sql,
    audit,
    outbound,
    tenantKeks,
    clock,
    timeoutMs: config.jobs.webhookTimeoutMs,
    retryScale: config.jobs.webhookRetryScale,
    userAgent: `kms-webhooks/${VERSION}`,
    // Partner events are signed with the partner's secret (src/partners), built further down.
    partnerSecrets: () => partners,
  })
  const rotation = createRotationService({ sql, audit, keys, keyCache, webhooks, outbound, clock })
  const folders = createFolderService({ sql, audit, clock })
  const secrets = createSecretService({
    sql,
    audit,
    sealing: createSecretSealing(tenantKeks),
    folders,
    clock,
    versionsKept: config.secretVersionsKept,
  })
  const billing = createBillingService({
    sql,
    audit,
    clock,
    webhooks: config.stripeWebhookSecret ? [stripeWebhook(config.stripeWebhookSecret)] : [],
    sources: {
      keysInUse: (tenantId) => keys.countInUse(tenantId),
      secretsInUse: (tenantId) => secrets.countInUse(tenantId),
      endUsers: (tenantId) => endusers.count(tenantId),
    },
  })
  const partners = createPartnerService({
    sql,
    clock,
    signupBase: () => identity!.oidc.issuer(),
    commissionBasisPoints: config.partnerCommissionBasisPoints,
    invoices: billing,
    masterKeys,
    outbound,
    outbox: webhooks,
    mailQueue,
    mailer,
  })
  // A referred tenant's first paid invoice converts its referral.
  billing.onInvoicePaid(async ({ tenantId, first }) => {
    if (first) await partners.convert(tenantId)
  })
  const signups = createSignupService({
    sql,
    clock,
    masterKeys,
    audit,
    accounts,
    directories: { tenants, team, partners },
    mailQueue,
    mailer,
    linkBase: () => identity!.oidc.issuer(),
  })
  const partnerCredentials = createPartnerAuthenticator({ partners, portalTokens: identity.verifier })
  cloudExports = createCloudExportService({
    sql,
    clock,
    audit,
    tenantKeks,
    outbound,
    adapters: CLOUD_ADAPTERS,
    timeoutMs: config.cloudExportTimeoutMs,
    customEndpoints: config.cloudExportCustomEndpoints,
    logger: logger.child({ component: 'cloud-export' }),
    keys: {
      async describe(tenantId, keyId) {
        const row = await keyCache.getKey(tenantId, keyId)
        if (!row) return undefined
        return {
          algorithm: row.algorithm as AlgorithmName,
          keyType: row.key_type as KeyType,
          currentVersion: row.current_version,
          state: keyState(row, clock.now()),
          exportable: row.exportable,
        }
      },
      async material(tenantId, keyId, version) {
        // The private key of a key not created exportable is never handed to a cloud export.
        if (!(await keyCache.getKey(tenantId, keyId))?.exportable) return undefined
        const opened = await keyObjects.get(tenantId, keyId, version)
        return opened?.publicKey ? { privateKey: opened.secretKey, publicKey: opened.publicKey } : undefined
      },
    },
  })
  const builtinEngine = createBuiltinEngine()
  const tagModel = config.tagModel
  const intelligence = createIntelligenceService({
    sql,
    clock,
    audit,
    directories: { keys, rotation },
    engine: tagModel
      ? createModelEngine({
          baseUrl: tagModel.baseUrl,
          model: tagModel.model,
          ...(tagModel.apiKey ? { apiKey: tagModel.apiKey } : {}),
          timeoutMs: tagModel.timeoutMs,
          // The operator named this host: it may be on-premises (an Ollama or vLLM next door).
          outbound: outbound.withAllowed(createAllowList([new URL(tagModel.baseUrl).hostname])),
          fallback: builtinEngine,
          onFallback: (reason) =>
            logger.warn({ reason }, 'tag suggestions: the model failed, the built-in engine answered'),
        })
      : builtinEngine,
  })
  metrics.watch({
    audit,
    cryptoPool,
    sql,
    databasePoolSize: config.databasePoolSize,
    entropyStatus: () => random.status(),
  })

  return {
    config,
    logger,
    sql,
    redis,
    bus,
    masterKeys,
    tenantKeks,
    audit,
    authenticator,
    apiKeys,
    tenants,
    accounts,
    identity,
    bearer,
    team,
    mailQueue,
    settings,
    applications,
    endusers,
    roles,
    accessPolicies,
    federation,
    billing,
    partners,
    signups,
    partnerCredentials,
    cloudExports,
    intelligence,
    clock,
    cryptoPool,
    keys,
    random,
    crypto,
    signing,
    batches,
    rotation,
    webhooks,
    folders,
    secrets,
    metrics,

    outbound,
    async close() {
      random.close()
      await mailQueue.close()
      await audit.flush()
      await cryptoPool.destroy()
      await bus.close()
      redis.disconnect()
      await sql.end({ timeout: 5 })
    },
  }
}
