import type { Module } from '../platform/module.ts'
import type { PageSettings } from '../web/layout.ts'
import { federationJobs } from './federation-jobs.ts'
import { samlRoutes } from './saml-routes.ts'
import type { FederationService } from './saml-service.ts'
import { samlSurface } from './saml-surface.ts'

/** External SAML identity providers of the tenants' applications: their API and the SAML endpoints. */
export function federationModule(deps: {
  federation: FederationService
  pageSettings: PageSettings
}): Module {
  return {
    jobs: federationJobs(deps),
    name: 'federation',
    routes: samlRoutes(deps.federation),
    surface: samlSurface(deps),
  }
}
