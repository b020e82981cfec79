import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { Redis } from 'ioredis'
import { Type } from 'typebox'
import { access } from '../auth/access.ts'
import type { EntropyStatus } from '../entropy/entropy-chain.ts'
import { isDatabaseUp, type Sql } from '../platform/database.ts'
import { nameSchema } from '../platform/http-schemas.ts'
import { isRedisReady } from '../platform/redis.ts'

const Dependency = Type.Object({ status: Type.Enum(['up', 'down']) })

const HealthSchema = Type.Object({
  status: Type.Enum(['ok', 'degraded']),
  version: Type.String(),
  database: Dependency,
  redis: Dependency,
  entropy: Type.Object({
    source: Type.Enum(['qrng-primary', 'qrng-secondary', 'system-csprng'], {
      description: 'Entropy source in use: the one a nonce is drawn from now',
    }),
    sources: Type.Array(
      Type.Object({
        name: Type.Enum(['qrng-primary', 'qrng-secondary']),
        status: Type.Enum(['starting', 'up', 'down'], {
          description: 'starting: no batch fetched yet; down: failing, retried in the background',
        }),
      }),
      { description: 'The configured quantum sources (empty when none is configured)' },
    ),
  }),
})
nameSchema(HealthSchema, 'Health')

/**
 * Public and cheap: what a load balancer and an operator need (up, degraded, which entropy
 * source), nothing about internals. 200 while the API can serve (Redis down only pauses
 * background work); 503 when the database is down.
 */
export function healthRoutes(deps: {
  sql: Sql
  redis: Redis
  version: string
  entropyStatus: () => EntropyStatus
}) {
  const plugin: FastifyPluginAsyncTypebox = async (app) => {
    app.get(
      '/health',
      {
        config: { access: access.public() },
        schema: {
          tags: ['Health'],
          summary: 'Service health (no credential needed)',
          operationId: 'getHealth',
          security: [],
          response: {
            200: HealthSchema,
            503: { ...HealthSchema, description: 'The database is down' },
          },
        },
      },
      async (_request, reply) => {
        const database = (await isDatabaseUp(deps.sql)) ? 'up' : 'down'
        const redis = isRedisReady(deps.redis) ? 'up' : 'down'
        const status = database === 'up' && redis === 'up' ? 'ok' : 'degraded'
        const entropy = deps.entropyStatus()
        return reply.code(database === 'up' ? 200 : 503).send({
          status,
          version: deps.version,
          database: { status: database },
          redis: { status: redis },
          // Names and states only: never a URL, a credential or a failure detail.
          entropy: {
            source: entropy.source,
            sources: entropy.sources.map((s) => ({ name: s.name, status: s.state })),
          },
        })
      },
    )
  }
  return plugin
}
