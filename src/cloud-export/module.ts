import type { Module } from '../platform/module.ts'
import { cloudExportJobs } from './cloud-export-jobs.ts'
import { cloudExportRoutes } from './cloud-export-routes.ts'
import type { CloudExportService } from './cloud-export-service.ts'

/** Cloud KMS connections and the keys exported to them. */
export function cloudExportModule(deps: { cloudExports: CloudExportService }): Module {
  return { name: 'cloud-export', routes: cloudExportRoutes(deps.cloudExports), jobs: cloudExportJobs(deps) }
}
