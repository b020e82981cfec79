import type { ModuleJobs } from '../platform/module.ts'
import type { KeyService } from './key-service.ts'

/**
 * `key-lifecycle-sweep` (maintenance): records each key that passed its `expiresAt`
 * (`keys.expire`, once per expiry) and erases the material of keys past their deletion date
 * (`keys.destroy`).
 */
export function keysJobs(deps: { keys: Pick<KeyService, 'expireDue' | 'destroyDue'> }): ModuleJobs {
  return {
    sweeps: [
      {
        name: 'key-lifecycle-sweep',
        queue: 'maintenance',
        async run(sweepId) {
          const expired = await deps.keys.expireDue(sweepId)
          const destroyed = await deps.keys.destroyDue(sweepId)
          return {
            worked: expired > 0 || destroyed > 0,
            message: 'key lifecycle sweep',
            details: { expired, destroyed },
          }
        },
      },
    ],
  }
}
