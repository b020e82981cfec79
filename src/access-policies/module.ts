import type { Module } from '../platform/module.ts'
import { accessPoliciesJobs } from './access-policies-jobs.ts'
import { accessPolicyRoutes } from './access-policy-routes.ts'
import type { AccessPolicyService } from './access-policy-service.ts'

/** Who may sign in to the tenant’s applications; access requests. */
export function accessPoliciesModule(deps: { accessPolicies: AccessPolicyService }): Module {
  return {
    name: 'access-policies',
    routes: accessPolicyRoutes(deps.accessPolicies),
    jobs: accessPoliciesJobs(deps),
  }
}
