import type { Module } from '../platform/module.ts'
import { webhookRoutes } from './webhook-routes.ts'
import type { WebhookService } from './webhook-service.ts'
import { webhooksJobs } from './webhooks-jobs.ts'

/** Tenant webhooks: the signing secret and the deliveries. */
export function webhooksModule(
  deps: { webhooks: WebhookService } & Omit<Parameters<typeof webhooksJobs>[0], 'webhooks'>,
): Module {
  return { name: 'webhooks', routes: webhookRoutes(deps.webhooks), jobs: webhooksJobs(deps) }
}
