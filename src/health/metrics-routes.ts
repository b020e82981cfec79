import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Registry } from 'prom-client'
import { ClusterMetricsError } from '../metrics/cluster.ts'
import { UNAVAILABLE_RETRY_AFTER_SECONDS } from '../platform/errors.ts'

export { renderEntropyMetrics } from '../metrics/entropy-metrics.ts'

/**
 * GET /metrics at the root (the Prometheus convention), outside /api/v1 and its authentication,
 * like /api/v1/health. It carries counts and states only; restrict it at the network edge if
 * failure counts are considered sensitive. Hidden from the OpenAPI document: it is not API.
 *
 * `scrape` gives this process's registry, or in a cluster the aggregation over every process
 * (src/metrics/cluster.ts), so whichever process answers, the totals are the cluster's.
 */
export function metricsRoutes(deps: { scrape: () => Promise<string> }) {
  const plugin: FastifyPluginAsyncTypebox = async (app) => {
    app.get('/metrics', { schema: { hide: true } }, async (_request, reply) => {
      try {
        const text = await deps.scrape()
        return reply.type(Registry.PROMETHEUS_CONTENT_TYPE).send(text)
      } catch (error) {
        if (!(error instanceof ClusterMetricsError)) throw error
        return reply
          .code(503)
          .header('retry-after', String(UNAVAILABLE_RETRY_AFTER_SECONDS))
          .send({ error: 'metrics_unavailable', message: 'Not every process answered; retry the scrape' })
      }
    })
  }
  return plugin
}
