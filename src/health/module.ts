import type { Module } from '../platform/module.ts'
import { healthRoutes } from './health-routes.ts'
import { metricsRoutes } from './metrics-routes.ts'

/** GET /api/v1/health and GET /metrics. */
export function healthModule(
  deps: Parameters<typeof healthRoutes>[0] & Parameters<typeof metricsRoutes>[0],
): Module {
  return { name: 'health', routes: healthRoutes(deps), surface: metricsRoutes(deps) }
}
