import type { Module } from '../platform/module.ts'
import { aliasRoutes } from './alias-routes.ts'
import type { AliasService } from './alias-service.ts'
import { keyRoutes } from './key-routes.ts'
import type { KeyService } from './key-service.ts'
import { keysJobs } from './keys-jobs.ts'

/** Keys: their lifecycle, versions, aliases, import and export. */
export function keysModule(deps: { keys: KeyService; aliases: AliasService }): Module {
  return {
    name: 'keys',
    routes: async (app) => {
      await app.register(keyRoutes(deps.keys))
      await app.register(aliasRoutes(deps.aliases))
    },
    jobs: keysJobs(deps),
  }
}
