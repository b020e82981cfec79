import type { Module } from '../platform/module.ts'
import { roleRoutes } from './role-routes.ts'
import type { RoleService } from './role-service.ts'

/** Roles of applications and their assignment to end-users. */
export function rolesModule(deps: { roles: RoleService }): Module {
  return { name: 'roles', routes: roleRoutes(deps.roles) }
}
