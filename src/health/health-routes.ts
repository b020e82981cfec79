import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { Redis } from 'ioredis'
import { Type } from 'typebox'
import { access } from '../auth/access.ts'
import { isDatabaseUp, type Sql } from '../data/database.ts'
import { isRedisReady } from '../data/redis.ts'
import type { EntropyStatus } from '../entropy/entropy-chain.ts'
import { nameSchema } from '../http/http-schemas.ts'
import type { Identity } from '../identity/identity-service.ts'
import { SigningKeyUnavailableError } from '../identity/oidc/signing-keys.ts'

const Dependency = Type.Object({ status: Type.Enum(['up', 'down']) })

const Check = Type.Object({
  status: Type.Enum(['ok', 'failed']),
  reason: Type.Optional(
    Type.String({ description: 'Why it failed, in words (no address, key or credential)' }),
  ),
})

/** Seconds a client (a load balancer, an orchestrator) is asked to wait before asking again after a 503. */
const HEALTH_RETRY_AFTER_SECONDS = 5

const HealthSchema = Type.Object({
  status: Type.Enum(['ok', 'degraded', 'unavailable'], {
    description:
      'ok: every check passes; degraded: only Redis is down (requests are served, background work waits); unavailable: a check the API cannot serve without failed (503)',
  }),
  version: Type.String(),
  checks: Type.Object(
    {
      database: Check,
      redis: Check,
      identitySigningKeys: Type.Optional({
        ...Check,
        description: 'The key that signs ID and access tokens opens (absent when the process has no sign-in)',
      }),
    },
    { description: 'Each dependency: ok, or failed and why' },
  ),
  database: { ...Dependency, description: 'Same as checks.database (up/down), kept for existing monitors' },
  redis: { ...Dependency, description: 'Same as checks.redis (up/down), kept for existing monitors' },
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

type CheckResult = { status: 'ok' } | { status: 'failed'; reason: string }

const ok: CheckResult = { status: 'ok' }

/**
 * The signing key is read once and cached (signing-keys.ts), so a passing check costs nothing; a
 * failing one is tried again at each call, and passes as soon as the key opens.
 */
async function signingKeysCheck(identity: Pick<Identity, 'signingKeys'>): Promise<CheckResult> {
  try {
    await identity.signingKeys.current()
    return ok
  } catch (err) {
    return {
      status: 'failed',
      reason:
        err instanceof SigningKeyUnavailableError
          ? `the current signing key is ${err.reason}`
          : 'the signing keys cannot be read',
    }
  }
}

/**
 * Public and cheap: what a load balancer and an operator need (each dependency's check, which
 * entropy source), nothing about internals. 200 while the API can serve: Redis down only pauses
 * background work and cross-process cache invalidation (`degraded`, docs/operations.md). 503 with
 * Retry-After (`unavailable`) when the database is down or, for a process with sign-in, the
 * signing key does not open: sign-in and every Bearer token would fail while the rest looked up.
 */
export function healthRoutes(deps: {
  sql: Sql
  redis: Redis
  version: string
  entropyStatus: () => EntropyStatus
  identity?: Pick<Identity, 'signingKeys'> | undefined
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
            503: {
              ...HealthSchema,
              description:
                'The database is down, or the signing key does not open (Retry-After says when to ask again)',
            },
          },
        },
      },
      async (_request, reply) => {
        const database: CheckResult = (await isDatabaseUp(deps.sql))
          ? ok
          : { status: 'failed', reason: 'the database does not answer' }
        const redis: CheckResult = isRedisReady(deps.redis)
          ? ok
          : { status: 'failed', reason: 'Redis is not connected' }
        // Without the database the keys cannot be read either: say so rather than wait on it.
        const identitySigningKeys: CheckResult | undefined = !deps.identity
          ? undefined
          : database.status === 'ok'
            ? await signingKeysCheck(deps.identity)
            : { status: 'failed', reason: 'the database does not answer' }
        const required = [database, ...(identitySigningKeys ? [identitySigningKeys] : [])]
        const status = required.some((check) => check.status === 'failed')
          ? 'unavailable'
          : redis.status === 'failed'
            ? 'degraded'
            : 'ok'
        if (status === 'unavailable') reply.header('retry-after', String(HEALTH_RETRY_AFTER_SECONDS))
        const entropy = deps.entropyStatus()
        return reply.code(status === 'unavailable' ? 503 : 200).send({
          status,
          version: deps.version,
          checks: { database, redis, ...(identitySigningKeys ? { identitySigningKeys } : {}) },
          database: { status: database.status === 'ok' ? 'up' : 'down' },
          redis: { status: redis.status === 'ok' ? 'up' : 'down' },
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
