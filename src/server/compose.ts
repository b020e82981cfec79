import type { Redis } from 'ioredis'
import type { Logger } from 'pino'
import {
  type AccessPolicyService,
  createAccessPolicyService,
} from '../access-policies/access-policy-service.ts'
import { accessPoliciesModule } from '../access-policies/module.ts'
import { type Authenticator, createAuthenticator } from '../api-keys/api-key-authenticator.ts'
import { type ApiKeyService, createApiKeyService } from '../api-keys/api-key-service.ts'
import { apiKeysModule } from '../api-keys/module.ts'
import {
  type ApplicationService,
  createApplicationDirectory,
  createApplicationService,
} from '../applications/application-service.ts'
import { applicationsModule } from '../applications/module.ts'
import { type AuditLog, createAuditLog } from '../audit/audit-log.ts'
import { auditModule } from '../audit/module.ts'
import { loadAwareWriteConcurrency } from '../audit/write-concurrency.ts'
import type { PartnerAuthenticator } from '../auth/auth-hook.ts'
import { type BearerAuthenticator, createBearerAuthenticator } from '../auth/bearer-authenticator.ts'
import { type BillingService, createBillingService } from '../billing/billing-service.ts'
import { billingModule } from '../billing/module.ts'
import { stripeWebhook } from '../billing/payment-webhook.ts'
import { type CloudExportService, createCloudExportService } from '../cloud-export/cloud-export-service.ts'
import { createExportableKeys } from '../cloud-export/exportable-keys.ts'
import { cloudExportModule } from '../cloud-export/module.ts'
import { CLOUD_ADAPTERS } from '../cloud-export/providers/registry.ts'
import type { Config } from '../config.ts'
import { CONSOLE_DIST, loadConsoleFiles } from '../console/console-files.ts'
import { consoleModule } from '../console/module.ts'
import { type BatchService, createBatchService } from '../crypto/batch-service.ts'
import { type CryptoService, createCryptoService } from '../crypto/crypto-service.ts'
import { createIssuerSigner } from '../crypto/issuer-signer.ts'
import { createKeyObjectCache } from '../crypto/key-object-cache.ts'
import { createKeyResolver } from '../crypto/key-resolver.ts'
import { cryptoModule } from '../crypto/module.ts'
import { createRawAesService } from '../crypto/raw-aes-service.ts'
import { createReEncryptService } from '../crypto/re-encrypt-service.ts'
import { createSigningService, type SigningService } from '../crypto/signing-service.ts'
import { type CryptoPool, createCryptoPool } from '../crypto-pool/crypto-pool.ts'
import { connectDatabase, type Sql } from '../data/database.ts'
import { createInvalidationBus, type InvalidationBus } from '../data/invalidation-bus.ts'
import { createRedis, waitUntilReady } from '../data/redis.ts'
import { createEndUserService, type EndUserService } from '../endusers/enduser-service.ts'
import { endUsersModule } from '../endusers/module.ts'
import type { EntropyChain } from '../entropy/entropy-chain.ts'
import { createEntropyChainFromConfig } from '../entropy/entropy-from-config.ts'
import { federationModule } from '../federation/module.ts'
import { createFederationService, type FederationService } from '../federation/saml-service.ts'
import { healthModule } from '../health/module.ts'
import { createClientRateLimit } from '../http/client-rate-limit.ts'
import { type AccountService, createAccountService } from '../identity/accounts/account-service.ts'
import {
  createIdentity,
  createIdentityCore,
  createProviderCors,
  type Identity,
} from '../identity/identity-service.ts'
import { identityModule } from '../identity/module.ts'
import { createBuiltinEngine } from '../intelligence/builtin-engine.ts'
import { createIntelligenceService, type IntelligenceService } from '../intelligence/intelligence-service.ts'
import { createModelEngine } from '../intelligence/model-engine.ts'
import { intelligenceModule } from '../intelligence/module.ts'
import { jobNamespace } from '../jobs/job-namespace.ts'
import { createJobQueue, mailQueueOn } from '../jobs/job-queue.ts'
import { loadMasterKeyring, type MasterKeyring } from '../keyring/master-key.ts'
import { createTenantKeks, type TenantKeks } from '../keyring/tenant-kek.ts'
import { createAliasService } from '../keys/alias-service.ts'
import { createKeyCache } from '../keys/key-cache.ts'
import { createKeyService, type KeyService } from '../keys/key-service.ts'
import { existingKeyIds } from '../keys/key-store.ts'
import { keysModule } from '../keys/module.ts'
import { createMailer } from '../mail/mailer.ts'
import { createServiceMetrics, type ServiceMetrics } from '../metrics/service-metrics.ts'
import { createAllowList } from '../outbound/allow-list.ts'
import type { Resolver } from '../outbound/destination.ts'
import { createOutboundClient, type OutboundClient } from '../outbound/outbound-client.ts'
import { partnersModule } from '../partners/module.ts'
import { createPartnerAuthenticator } from '../partners/partner-authenticator.ts'
import {
  createPartnerSecrets,
  createPartnerService,
  type PartnerService,
} from '../partners/partner-service.ts'
import { createCaService } from '../pki/ca-service.ts'
import { createCertificateService } from '../pki/certificate-service.ts'
import { createCrlPublisher } from '../pki/crl-publisher.ts'
import { pkiModule } from '../pki/module.ts'
import { createOcspResponder } from '../pki/ocsp-responder.ts'
import { createCertificateRoleService } from '../pki/role-service.ts'
import { type Clock, systemClock } from '../platform/clock.ts'
import type { JobQueue, Module } from '../platform/module.ts'
import { rolesModule } from '../roles/module.ts'
import { createRoleService, type RoleService } from '../roles/role-service.ts'
import { rotationModule } from '../rotation/module.ts'
import { createRotationService, type RotationService } from '../rotation/rotation-service.ts'
import { createFolderService, type FolderService } from '../secrets/folder-service.ts'
import { secretsModule } from '../secrets/module.ts'
import { createSecretSealing } from '../secrets/secret-sealing.ts'
import { createSecretService, type SecretService } from '../secrets/secret-service.ts'
import { settingsModule } from '../settings/module.ts'
import { createSettingsService, type SettingsService } from '../settings/settings-service.ts'
import { signupModule } from '../signup/module.ts'
import { createSignupService, type SignupService } from '../signup/signup-service.ts'
import { createSmsSender } from '../sms/sms-sender.ts'
import { createSshServices, sshModule } from '../ssh/module.ts'
import { teamModule } from '../team/module.ts'
import { createTeamService, type TeamService } from '../team/team-service.ts'
import { tenantsModule } from '../tenants/module.ts'
import { createTenantService, type TenantService } from '../tenants/tenant-service.ts'
import { VERSION } from '../version.ts'
import { webhooksModule } from '../webhooks/module.ts'
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
  /** Jobs queued from any process (mail, webhook deliveries), opened on first use. */
  jobQueue: JobQueue & { close(): Promise<void> }
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
  /** Every module's routes, pages and jobs, in order (server/http.ts, server/jobs.ts). */
  modules: readonly Module[]

  /** Every HTTP request to another service goes through this client (src/outbound/). */
  outbound: OutboundClient
  close(): Promise<void>
}

export interface ServiceOptions {
  clock?: Clock
  /** Replaces DNS resolution for outbound requests (tests of the address policy). */
  resolve?: Resolver
  /** Where GET /metrics reads (a cluster's aggregation); this process's registry by default. */
  scrape?: () => Promise<string>
}

export async function createServices(
  config: Config,
  logger: Logger,
  databaseUrl: string,
  role: string,
  options: ServiceOptions = {},
): Promise<Services> {
  // Each component is built once, after everything it needs; no service is bound late. The
  // identity module's core (issuer, links, codes, sessions) and the applications' directory come
  // early because the modules the provider asks need them; the provider comes last.
  const clock = options.clock ?? systemClock
  const sql = connectDatabase({
    url: databaseUrl,
    poolSize: config.databasePoolSize,
    statementTimeoutMs: config.auditWriteTimeoutMs,
    applicationName: `kms-${role}`,
    logger,
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
    // It writes the records only: billing's usage and the keys' last use are folded from them by
    // those modules' sweeps (the audit feed, src/audit/audit-feed.ts).
  })
  const jobQueue = createJobQueue({
    redisUrl: config.redisUrl,
    prefix: async () => `${config.redisPrefix}jobs:${await jobNamespace(sql)}`,
    logger,
  })
  const mailQueue = mailQueueOn(jobQueue, config.mail.attempts)
  const mailer = createMailer(config.mail)
  const outbound = createOutboundClient({
    allow: createAllowList(config.outboundAllow),
    ...(options.resolve ? { resolve: options.resolve } : {}),
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
    // The keys module's store, for restrictions to key ids (the key service is built later).
    keyDirectory: { existingKeyIds: (tenantId, ids) => existingKeyIds(sql, tenantId, ids) },
  })
  const tenants = createTenantService({
    sql,
    masterKeys,
    apiKeys,
    audit,
    cache: { bus, ttlMs: config.apiKeyCacheTtlMs },
  })
  const accounts = createAccountService({ sql, masterKeys, clock })
  const identityCore = createIdentityCore({
    sql,
    bus,
    masterKeys,
    clock,
    config: config.identity,
    grantCacheTtlMs: config.apiKeyCacheTtlMs,
    audit,
    mailQueue,
    mailer,
    sms: createSmsSender(config.sms, outbound),
    // Forgot password and applications' sign-up: the tenant sign-up's bound per client address,
    // counted apart from it (a tenant's end-users should not use up new tenants' allowance).
    requestLimit: createClientRateLimit({
      redis,
      nameSpace: `${config.redisPrefix}self-service-rate:`,
      perHour: config.signupRatePerHour,
    }),
  })
  const linkBase = () => identityCore.issuer.url()
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
    linkBase,
    cacheTtlMs: config.apiKeyCacheTtlMs,
    // A removal ends the member's console grants for the tenant (the identity module's).
    grants: {
      destroyTenantGrants: (tx, accountId, tenantId) =>
        identityCore.destroyTenantGrantsOf(tx, accountId, tenantId),
      revoked: (grantIds) => identityCore.grantsRevoked(grantIds),
    },
  })
  const applicationDirectory = createApplicationDirectory({ sql, masterKeys, logger })
  const cors = createProviderCors({
    bus,
    clock,
    config: config.identity,
    redirectOrigins: () => applicationDirectory.redirectOrigins(),
  })
  const endusers = createEndUserService({
    sql,
    audit,
    accounts,
    links: identityCore.links,
    sessions: identityCore,
    applications: applicationDirectory,
    clock,
    masterKeys,
    mailQueue,
    mailer,
    linkBase,
  })
  const applications = createApplicationService({
    sql,
    audit,
    masterKeys,
    logger,
    creators: endusers,
    changed: (tenantId) => cors.changed(tenantId),
    directory: applicationDirectory,
  })
  const roles = createRoleService({
    sql,
    audit,
    directories: {
      applicationExists: (tenantId, id) => applicationDirectory.exists(tenantId, id),
      requireEndUser: async (actor, id) => {
        await endusers.get(actor, id)
      },
    },
  })
  const accessPolicies = createAccessPolicyService({
    sql,
    audit,
    clock,
    mailQueue,
    mailer,
    directories: {
      applicationExists: (tenantId, id) => applicationDirectory.exists(tenantId, id),
      endUserExists: (tenantId, id) => endusers.exists(tenantId, id),
      roleExists: (tenantId, id) => roles.exists(tenantId, id),
      roleIdsOf: (tenantId, endUserId) => roles.roleIdsOf(tenantId, endUserId),
      emailOf: async (accountId) => (await accounts.get(accountId))?.email,
      applicationName: async (applicationId) =>
        (await applicationDirectory.applicationOf(applicationId))?.name,
    },
  })
  const federation = createFederationService({
    sql,
    audit,
    clock,
    baseUrl: linkBase,
    directories: {
      applicationExists: (tenantId, id) => applicationDirectory.exists(tenantId, id),
      federatedAccount: (input) => endusers.federatedAccount(input),
    },
  })

  const cryptoPool = createCryptoPool({
    maxThreads: config.cryptoPool.threads,
    taskTimeoutMs: config.cryptoPool.taskTimeoutMs,
    tenantMaxQueue: config.cryptoPool.tenantMaxQueue,
    onTaskDone: metrics.poolTaskDone,
  })
  const keyCache = createKeyCache({ sql, bus, ttlMs: config.keyCacheTtlMs })
  const keyObjects = createKeyObjectCache({ sql, tenantKeks })
  const cloudExports = createCloudExportService({
    sql,
    clock,
    audit,
    tenantKeks,
    outbound,
    adapters: CLOUD_ADAPTERS,
    timeoutMs: config.cloudExportTimeoutMs,
    customEndpoints: config.cloudExportCustomEndpoints,
    logger: logger.child({ component: 'cloud-export' }),
    keys: createExportableKeys({ keyCache, keyObjects, clock }),
  })
  // A new key version makes the key's cloud exports due.
  const keys = createKeyService({
    sql,
    audit,
    tenantKeks,
    pool: cryptoPool,
    clock,
    keyCache,
    versionObserver: { versionAdded: (tx, event) => cloudExports.keyVersionAdded(tx, event) },
  })
  const random = createEntropyChainFromConfig(
    config.entropy,
    logger.child({ component: 'entropy' }),
    outbound,
  )
  const keyResolver = createKeyResolver({ keyCache, keyObjects, clock })
  const crypto = createCryptoService({ audit, keys: keyResolver, random })
  const signing = createSigningService({ audit, keys: keyResolver, pool: cryptoPool, random })
  const batches = createBatchService({ audit, keys: keyResolver, pool: cryptoPool, random })
  const reEncrypt = createReEncryptService({ audit, keys: keyResolver, pool: cryptoPool, random })
  const rawAes = createRawAesService({ audit, keys: keyResolver, random })
  const issuerSigner = createIssuerSigner({ keys: keyResolver, pool: cryptoPool, random })
  const webhooks = createWebhookService({
    sql,
    audit,
    outbound,
    tenantKeks,
    clock,
    timeoutMs: config.jobs.webhookTimeoutMs,
    retryScale: config.jobs.webhookRetryScale,
    userAgent: `kms-webhooks/${VERSION}`,
    // Partner events are signed with the partner's own secret.
    partnerSecrets: createPartnerSecrets({ sql, masterKeys }),
  })
  const rotation = createRotationService({ sql, audit, keys, keyCache, webhooks, outbound, clock })
  const crls = createCrlPublisher({ sql, signer: issuerSigner, clock })
  const cas = createCaService({ sql, audit, keys, signer: issuerSigner, crls, clock, publicUrl: linkBase })
  const pki = {
    cas,
    roles: createCertificateRoleService({ sql, audit, cas, clock }),
    certificates: createCertificateService({
      sql,
      audit,
      cas,
      signer: issuerSigner,
      crls,
      pool: cryptoPool,
      clock,
    }),
    ocsp: createOcspResponder({ sql, signer: issuerSigner, clock }),
  }
  const ssh = createSshServices({ sql, audit, keys, signer: issuerSigner, random, clock })
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
    signupBase: linkBase,
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
    linkBase,
  })
  const builtinEngine = createBuiltinEngine()
  const tagModel = config.tagModel
  const intelligence = createIntelligenceService({
    sql,
    clock,
    audit,
    directories: { keys },
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

  // The OpenID provider asks every module above (clients, roles, the authorization gate).
  const securityOf = (tenantId: string) => settings.getSecurity(tenantId)
  const identity = createIdentity(identityCore, {
    sql,
    bus,
    masterKeys,
    clock,
    config: config.identity,
    accounts,
    memberships: team,
    tenants,
    sessionPolicy: {
      accessTokenSecondsOf: async (tenantId) =>
        (await securityOf(tenantId)).sessionLifetimes.accessTokenSeconds,
      refreshTokenSecondsOf: async (tenantId) =>
        (await securityOf(tenantId)).sessionLifetimes.refreshTokenSeconds,
    },
    mfaPolicy: { methodsFor: async (tenantId) => (await securityOf(tenantId)).mfaMethods },
    branding: { panelOf: (tenantId) => settings.getBranding(tenantId) },
    audit,
    clients: applicationDirectory,
    cors,
    roles,
    accessPolicy: accessPolicies,
    endUsers: endusers,
    partners: { statusOf: async (accountId) => (await partners.partnerOfAccount(accountId))?.status },
    countSignIn: (kind, outcome, reason) => metrics.signIn(kind, outcome, reason),
  })
  const bearer = createBearerAuthenticator({ verifier: identity.verifier, memberships: team })
  const partnerCredentials = createPartnerAuthenticator({ partners, portalTokens: identity.verifier })
  metrics.watch({
    audit,
    cryptoPool,
    sql,
    databasePoolSize: config.databasePoolSize,
    entropyStatus: () => random.status(),
  })

  const pages = { csrf: identity.csrf, pageSettings: identity.pageSettings }
  const passwordPolicyOf = async (tenantId: string) => (await securityOf(tenantId)).passwordPolicy
  const jobLogger = logger.child({ component: 'jobs' })
  const signupLimit = { redis, prefix: config.redisPrefix, perHour: config.signupRatePerHour }
  /** Every module of the service, in the order their routes, pages and jobs are set up. */
  const modules: Module[] = [
    healthModule({
      sql,
      redis,
      version: VERSION,
      entropyStatus: () => random.status(),
      identity,
      scrape: options.scrape ?? (() => metrics.registry.metrics()),
    }),
    identityModule({
      identity,
      accounts,
      logger,
      endUsers: endusers,
      accessPolicy: accessPolicies,
      federation,
      passwordPolicyOf,
    }),
    tenantsModule({ tenants }),
    apiKeysModule({ apiKeys, audit }),
    auditModule({ audit }),
    keysModule({ keys, aliases: createAliasService({ sql, audit, clock, keyCache }) }),
    rotationModule({ rotation }),
    pkiModule(pki),
    sshModule(ssh),
    cloudExportModule({ cloudExports }),
    intelligenceModule({ intelligence, logger: jobLogger }),
    webhooksModule({
      webhooks,
      config: config.jobs,
      logger: jobLogger,
      onAttemptDone: metrics.jobDone,
    }),
    cryptoModule({ crypto, signing, batches, reEncrypt, rawAes }),
    secretsModule({ secrets, folders }),
    teamModule({ team, accounts, ...pages }),
    settingsModule({ settings }),
    applicationsModule({ applications }),
    endUsersModule({
      endusers,
      accounts,
      clients: identity.clients,
      branding: identity.branding,
      passwordPolicyOf,
      ...pages,
    }),
    rolesModule({ roles }),
    accessPoliciesModule({ accessPolicies }),
    federationModule({ federation, pageSettings: identity.pageSettings }),
    billingModule({ billing }),
    partnersModule({ partners, limits: { redis, prefix: config.redisPrefix } }),
    signupModule({ signups, limit: signupLimit, ...pages }),
    consoleModule({ files: loadConsoleFiles(CONSOLE_DIST) }),
  ]

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
    jobQueue,
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
    modules,

    outbound,
    async close() {
      random.close()
      await jobQueue.close()
      await audit.flush()
      await cryptoPool.destroy()
      await bus.close()
      redis.disconnect()
      await sql.end({ timeout: 5 })
    },
  }
}
