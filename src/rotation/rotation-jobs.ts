import type { ModuleJobs } from '../platform/module.ts'
import { createDeliveryScheduler } from '../webhooks/webhooks-jobs.ts'
import type { RotationService } from './rotation-service.ts'

/**
 * `rotation-sweep` (maintenance): rotates each key whose policy is due, once (row lock +
 * re-check), and hands the webhook deliveries of the rotations to the webhooks' scheduler.
 */
export function rotationJobs(deps: { rotation: Pick<RotationService, 'rotateDue'> }): ModuleJobs {
  return {
    sweeps: [
      {
        name: 'rotation-sweep',
        queue: 'maintenance',
        async run(sweepId, jobs) {
          const result = await deps.rotation.rotateDue(sweepId)
          // The rotations are committed: a delivery that could not be queued (Redis away) is
          // pending in the outbox and the webhook sweep sends it; the sweep still says what it did.
          let notQueued: string | undefined
          await createDeliveryScheduler(jobs)
            .schedule(result.deliveries)
            .catch((err: Error) => {
              notQueued = err.message
            })
          return {
            worked: result.rotated > 0 || result.skipped > 0,
            // Read as is by the tests and the operators' log queries: `rotated`, `skipped`.
            message: 'rotation sweep',
            details: {
              rotated: result.rotated,
              skipped: result.skipped,
              deliveries: result.deliveries.length,
              ...(notQueued === undefined ? {} : { deliveriesNotQueued: notQueued }),
            },
          }
        },
      },
    ],
  }
}
