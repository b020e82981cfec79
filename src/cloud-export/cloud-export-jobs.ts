import { type ModuleJobs, sweep } from '../platform/module.ts'
import type { CloudExportService } from './cloud-export-service.ts'

/**
 * `cloud-export-sweep` (integrations: a slow cloud never holds up the other sweeps): pushes the
 * cloud KMS exports that are due, each claimed with a lease in PostgreSQL (two job processes
 * never push one export at once), retried by the export's own backoff.
 */
export function cloudExportJobs(deps: { cloudExports: Pick<CloudExportService, 'syncDue'> }): ModuleJobs {
  return {
    sweeps: [
      sweep(
        'cloud-export-sweep',
        'integrations',
        'cloud export sweep',
        () => deps.cloudExports.syncDue(),
        (result) => (result['attempted'] as number) > 0,
      ),
    ],
  }
}
