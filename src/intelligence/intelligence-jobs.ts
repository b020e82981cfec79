import type { Logger } from 'pino'
import type { ModuleJobs } from '../platform/module.ts'
import type { IntelligenceService } from './intelligence-service.ts'

/** Batches one tag-suggestion tick works through at most (the next tick goes on). */
const SUGGESTION_BATCHES_PER_TICK = 20

/**
 * - `key-use-fold-sweep` (maintenance): folds the uses of keys audited since the last fold into
 *   each key's last use (the audit feed: each use once, whichever sweep gets there);
 * - `tag-suggestion-sweep` (integrations: a language model may be slow): works on bulk
 *   tag-suggestion jobs, batch by batch, each batch committed with its progress under the job's
 *   lease. A failed batch is retried later (or fails its job): said as a warning (`logger`; a
 *   sweep's result is logged at info), and the tick goes on.
 */
export function intelligenceJobs(deps: {
  intelligence: Pick<IntelligenceService, 'runJobs' | 'foldKeyUse'>
  logger: Pick<Logger, 'warn'>
}): ModuleJobs {
  return {
    sweeps: [
      {
        name: 'key-use-fold-sweep',
        queue: 'maintenance',
        async run() {
          const foldedKeyUse = await deps.intelligence.foldKeyUse()
          // Runs at every sweep while keys are used: not worth a line.
          return { worked: false, details: { foldedKeyUse } }
        },
      },
      {
        name: 'tag-suggestion-sweep',
        queue: 'integrations',
        async run() {
          const result = await deps.intelligence.runJobs({ maxBatches: SUGGESTION_BATCHES_PER_TICK })
          if (result.failed > 0) {
            deps.logger.warn(result, 'tag suggestion sweep: batches failed')
            return { worked: false, details: result }
          }
          return { worked: result.batches > 0, message: 'tag suggestion sweep', details: result }
        },
      },
    ],
  }
}
