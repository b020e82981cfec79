import type { Module } from '../platform/module.ts'
import { billingJobs } from './billing-jobs.ts'
import { billingRoutes } from './billing-routes.ts'
import type { BillingService } from './billing-service.ts'

/** Plans, subscriptions, usage and invoices. */
export function billingModule(deps: { billing: BillingService }): Module {
  return { name: 'billing', routes: billingRoutes(deps.billing), jobs: billingJobs(deps) }
}
