import type { Logger } from 'pino'
import type { Config } from '../config.ts'
import { createEventLoopMonitor } from '../health/event-loop-monitor.ts'
import { jobNamespace } from '../jobs/job-namespace.ts'
import { type JobRunner, startJobRunner } from '../jobs/job-runner.ts'
import type { ServiceOptions, Services } from './compose.ts'
import { createServices } from './compose.ts'

/** The job runner over every module's jobs (sweeps, mail, queues), in a process's services. */
export async function startJobs(services: Services): Promise<JobRunner> {
  const { config } = services
  return startJobRunner({
    redisUrl: config.redisUrl,
    prefix: config.redisPrefix,
    namespace: await jobNamespace(services.sql),
    config: config.jobs,
    logger: services.logger.child({ component: 'jobs' }),
    modules: services.modules.flatMap((module) => (module.jobs ? [module.jobs] : [])),
    // Inside the process's shutdown grace period, leaving time to close connections.
    closeTimeoutMs: Math.max(500, config.shutdownGraceMs - 2000),
    onJobDone: services.metrics.jobDone,
  })
}

export interface JobProcess {
  services: Services
  /** Finishes the running jobs, then closes connections. */
  stop(): Promise<void>
}

/** A process that runs background jobs only (KMS_ROLE=worker, or the job process of `all`). */
export async function startJobProcess(
  config: Config,
  logger: Logger,
  databaseUrl: string,
  options: ServiceOptions = {},
): Promise<JobProcess> {
  const services = await createServices(config, logger, databaseUrl, 'jobs', options)
  const eventLoop = createEventLoopMonitor(services.metrics.eventLoopDelay)
  const runner = await startJobs(services)
  let stopping: Promise<void> | undefined
  return {
    services,
    stop() {
      stopping ??= (async () => {
        await runner.stop()
        eventLoop.stop()
        await services.close()
      })()
      return stopping
    },
  }
}
