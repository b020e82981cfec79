import type { Module } from '../platform/module.ts'
import { tenantRoutes } from './tenant-routes.ts'
import type { TenantService } from './tenant-service.ts'

/** Tenants: creation and the tenant itself. */
export function tenantsModule(deps: { tenants: TenantService }): Module {
  return { name: 'tenants', routes: tenantRoutes(deps.tenants) }
}
