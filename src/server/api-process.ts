import type { FastifyInstance } from 'fastify'
import type { Logger } from 'pino'
import type { Config } from '../config.ts'
import { createEventLoopMonitor } from '../health/event-loop-monitor.ts'
import type { JobRunner } from '../jobs/job-runner.ts'
import { VERSION } from '../version.ts'
import { createServices, type ServiceOptions, type Services } from './compose.ts'
import { buildHttp } from './http.ts'
import { startJobs } from './jobs.ts'

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
  /** jobs: run the background jobs in this process too (one-process deployments, tests). */
  options: ServiceOptions & { jobs?: boolean } = {},
): Promise<ApiProcess> {
  const services = await createServices(config, logger, databaseUrl, 'api', options)
  // Serving processes only (the CLI builds the same services and needs no monitor).
  const eventLoop = createEventLoopMonitor(services.metrics.eventLoopDelay)
  const app = await buildHttp({
    logger,
    metrics: services.metrics,
    authentication: {
      authenticator: services.authenticator,
      audit: services.audit,
      bearer: services.bearer,
      partners: services.partnerCredentials,
    },
    pageSettings: services.identity.pageSettings,
    version: VERSION,
    bodyLimitBytes: config.bodyLimitBytes,
    accessLog: config.accessLog,
    dataPlane: config.dataPlane,
    modules: services.modules,
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
