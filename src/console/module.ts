import type { Module } from '../platform/module.ts'
import type { ConsoleFiles } from './console-files.ts'
import { consoleRoutes } from './console-routes.ts'

/** The web console (console/, docs/console.md): its built files at /console/. */
export function consoleModule(deps: { files: ConsoleFiles }): Module {
  return { name: 'console', surface: consoleRoutes(deps) }
}
