import type { Logger } from 'pino'
import type { Module } from '../platform/module.ts'
import { intelligenceJobs } from './intelligence-jobs.ts'
import { intelligenceRoutes } from './intelligence-routes.ts'
import type { IntelligenceService } from './intelligence-service.ts'

/** Insights about keys and their tag suggestions. */
export function intelligenceModule(deps: {
  intelligence: IntelligenceService
  logger: Pick<Logger, 'warn'>
}): Module {
  return { name: 'intelligence', routes: intelligenceRoutes(deps.intelligence), jobs: intelligenceJobs(deps) }
}
