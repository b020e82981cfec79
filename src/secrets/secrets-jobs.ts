import type { ModuleJobs } from '../platform/module.ts'
import type { SecretService } from './secret-service.ts'

/** `secret-purge-sweep` (maintenance): purges secrets deleted longer ago than their restore window. */
export function secretsJobs(deps: { secrets: Pick<SecretService, 'purgeDue'> }): ModuleJobs {
  return {
    sweeps: [
      {
        name: 'secret-purge-sweep',
        queue: 'maintenance',
        async run(sweepId) {
          const purgedSecrets = await deps.secrets.purgeDue(sweepId)
          return { worked: purgedSecrets > 0, message: 'secret purge sweep', details: { purgedSecrets } }
        },
      },
    ],
  }
}
