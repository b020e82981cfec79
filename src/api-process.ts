import type { FastifyInstance } from 'fastify'
import type { Logger } from 'pino'
import { buildApp } from './app.ts'
import type { Config } from './config.ts'
import { createEventLoopMonitor } from './health/event-loop-monitor.ts'
import { startJobs } from './jobs/job-process.ts'
import type { JobRunner } from './jobs/job-runner.ts'
import { createServices, type ServiceOptions, type Services } from './services.ts'
import { signupPages } from './signup/signup-pages.ts'
import { invitationPages } from './team/invitation-pages.ts'
import { VERSION } from './version.ts'

export interface ApiProcess {
  app: FastifyInstance
  services: Services
  url: string
  /** Stops accepting, finishes in-flight requests, flushes the audit log, closes connections. */
  stop(): Promise<void>
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
    ],
  })
  const url = await app.listen({ host: config.host, port: config.port })
  // The issuer is the URL the service listens on unless ID_URL names the public one.
  services.identity.oidc.setIssuer(url)
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
