import type { Module } from '../platform/module.ts'
import { applicationRoutes } from './application-routes.ts'
import type { ApplicationService } from './application-service.ts'

/** The tenant’s applications (OpenID clients). */
export function applicationsModule(deps: { applications: ApplicationService }): Module {
  return { name: 'applications', routes: applicationRoutes(deps.applications) }
}
