import type { Module } from '../platform/module.ts'
import { folderRoutes } from './folder-routes.ts'
import type { FolderService } from './folder-service.ts'
import { secretRoutes } from './secret-routes.ts'
import type { SecretService } from './secret-service.ts'
import { secretsJobs } from './secrets-jobs.ts'

/** Secrets and their folders. */
export function secretsModule(deps: { secrets: SecretService; folders: FolderService }): Module {
  return {
    jobs: secretsJobs(deps),
    name: 'secrets',
    routes: async (api) => {
      await api.register(secretRoutes(deps.secrets))
      await api.register(folderRoutes(deps.folders))
    },
  }
}
