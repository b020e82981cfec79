import { type ModuleJobs, sweep } from '../platform/module.ts'
import type { KeyService } from './key-service.ts'

/**
 * `key-lifecycle-sweep` (maintenance): records each key that passed its `expiresAt`
 * (`keys.expire`, once per expiry) and erases the material of keys past their deletion date
 * (`keys.destroy`).
 */
export function keysJobs(deps: { keys: Pick<KeyService, 'expireDue' | 'destroyDue'> }): ModuleJobs {
  return {
    sweeps: [
      sweep('key-lifecycle-sweep', 'maintenance', 'key lifecycle sweep', async (sweepId) => ({
        expired: await deps.keys.expireDue(sweepId),
        destroyed: await deps.keys.destroyDue(sweepId),
      })),
    ],
  }
}
