import type { FastifyInstance } from 'fastify'
import type { Logger } from 'pino'
import type { Config } from '../config.ts'
import { endUserSignUpPages } from '../endusers/enduser-signup-pages.ts'
import { createEventLoopMonitor } from '../health/event-loop-monitor.ts'
import type { JobRunner } from '../jobs/job-runner.ts'
import { signupPages } from '../signup/signup-pages.ts'
import { invitationPages } from '../team/invitation-pages.ts'
import { VERSION } from '../version.ts'
import { createServices, type ServiceOptions, type Services } from './compose.ts'
import { buildApp } from './http.ts'
import { startJobs } from './job-process.ts'

export interface ApiProcess {
  app: FastifyInstance
  services: Services
  url: string
  /** Stops accepting, finishes in-flight requests, flushes the audit log, closes connections. */
  stop(): Promise<void>
}

/** The listening URL as a usable origin: an unspecified address (`[::]`) is not one to send a browser to. */
function listeningOrigin(url: string): string {
  const origin = new URL(url)
  if (origin.hostname === '[::]' || origin.hostname === '0.0.0.0') origin.hostname = 'localhost'
  return origin.origin
}

export async function startApiProcess(
  config: Config,
  logger: Logger,
  databaseUrl: string,
  /**
   * jobs: run the background jobs in this process too (one-process deployments, tests).
   * scrape: where GET /metrics reads (a cluster's aggregation); this process's registry by default.
   */
  options: ServiceOptions & { jobs?: boolean; scrape?: () => Promise<string> } = {},
): Promise<ApiProcess> {
  const services = await createServices(config, logger, databaseUrl, 'api', options)
  // Serving processes only (the CLI builds the same services and needs no monitor).
  const eventLoop = createEventLoopMonitor(services.metrics.eventLoopDelay)
  const app = await buildApp({
    ...services,
    version: VERSION,
    redisPrefix: config.redisPrefix,
    signupRatePerHour: config.signupRatePerHour,
    bodyLimitBytes: config.bodyLimitBytes,
    accessLog: config.accessLog,
    entropyStatus: () => services.random.status(),
    scrape: options.scrape ?? (() => services.metrics.registry.metrics()),
    identityPages: [
      invitationPages({
        team: services.team,
        accounts: services.accounts,
        csrf: services.identity.csrf,
        pageSettings: services.identity.pageSettings,
      }),
      signupPages({
        signups: services.signups,
        csrf: services.identity.csrf,
        pageSettings: services.identity.pageSettings,
        limit: { redis: services.redis, prefix: config.redisPrefix, perHour: config.signupRatePerHour },
      }),
      endUserSignUpPages({
        endusers: services.endusers,
        accounts: services.accounts,
        clients: services.identity.clients,
        ...(services.identity.branding ? { branding: services.identity.branding } : {}),
        passwordPolicyOf: async (tenantId) => (await services.settings.getSecurity(tenantId)).passwordPolicy,
        csrf: services.identity.csrf,
        pageSettings: services.identity.pageSettings,
      }),
    ],
  })
  const url = await app.listen({ host: config.host, port: config.port })
  // The issuer is the URL the service listens on unless ID_URL names the public one. Either way it
  // is the one origin of everything the provider advertises (oidc-provider.ts pinnedToIssuer):
  // discovery through another host name still names it, and sign-in works through it only.
  if (!config.identity.idUrl) {
    const issuer = listeningOrigin(url)
    services.identity.oidc.setIssuer(issuer)
    logger.info(
      { issuer },
      `ID_URL is not set: the OpenID provider's issuer, its endpoints and the links it e-mails are at ${issuer}; ` +
        'clients must use that origin. Set ID_URL to the URL clients reach the service at (e.g. ID_URL=https://kms.example.com)',
    )
  }
  const jobs: JobRunner | undefined = options.jobs ? await startJobs(services) : undefined
  let stopping: Promise<void> | undefined
  return {
    app,
    services,
    url,
    stop() {
      stopping ??= (async () => {
        await app.close()
        await jobs?.stop()
        eventLoop.stop()
        await services.close()
      })()
      return stopping
    },
  }
}
