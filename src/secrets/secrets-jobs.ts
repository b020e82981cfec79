import { type ModuleJobs, sweep } from '../platform/module.ts'
import type { SecretService } from './secret-service.ts'

/** `secret-purge-sweep` (maintenance): purges secrets deleted longer ago than their restore window. */
export function secretsJobs(deps: { secrets: Pick<SecretService, 'purgeDue'> }): ModuleJobs {
  return {
    sweeps: [
      sweep('secret-purge-sweep', 'maintenance', 'secret purge sweep', async (sweepId) => ({
        purgedSecrets: await deps.secrets.purgeDue(sweepId),
      })),
    ],
  }
}
