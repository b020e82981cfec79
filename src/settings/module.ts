import type { Module } from '../platform/module.ts'
import { settingsRoutes } from './settings-routes.ts'
import type { SettingsService } from './settings-service.ts'

/** Tenant security settings and branding. */
export function settingsModule(deps: { settings: SettingsService }): Module {
  return { name: 'settings', routes: settingsRoutes(deps.settings) }
}
