import type { Module } from '../platform/module.ts'
import { keyRoutes } from './key-routes.ts'
import type { KeyService } from './key-service.ts'
import { keysJobs } from './keys-jobs.ts'

/** Keys: their lifecycle, versions, import and export. */
export function keysModule(deps: { keys: KeyService }): Module {
  return { name: 'keys', routes: keyRoutes(deps.keys), jobs: keysJobs(deps) }
}
