import { Redis } from 'ioredis'
import type { Logger } from 'pino'

/**
 * Redis carries cache invalidations and (later) background jobs. It is never on the path that
 * decides whether a request is allowed, so when it is down the API keeps serving: commands
 * fail fast instead of queueing, and the client keeps reconnecting in the background.
 */
export function createRedis(url: string, name: string, logger: Logger): Redis {
  const redis = new Redis(url, {
    connectionName: name,
    lazyConnect: false,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    connectTimeout: 2000,
    retryStrategy: (attempt) => Math.min(attempt * 100, 1000),
  })
  let down = false
  redis.on('error', (error: Error) => {
    if (down) return
    down = true
    logger.warn({ redis: name, err: { message: error.message } }, 'Redis unreachable; background work paused')
  })
  redis.on('ready', () => {
    if (down) logger.info({ redis: name }, 'Redis reachable again')
    down = false
  })
  return redis
}

/** Waits until the client is connected, or gives up quietly after `timeoutMs` (Redis is optional). */
export async function waitUntilReady(redis: Redis, timeoutMs: number): Promise<void> {
  if (redis.status === 'ready') return
  await new Promise<void>((resolve) => {
    const timer = setTimeout(done, timeoutMs)
    function done() {
      clearTimeout(timer)
      redis.off('ready', done)
      resolve()
    }
    redis.once('ready', done)
  })
}

export function isRedisReady(redis: Redis): boolean {
  return redis.status === 'ready'
}
