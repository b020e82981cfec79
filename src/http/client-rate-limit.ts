import { normalizeIP } from '@fastify/rate-limit'
import type { Redis } from 'ioredis'

/** Whether a request may go on; when not, how long until the client's window ends. */
export type RequestAdmission = { admitted: true } | { admitted: false; retryAfterSeconds: number }

/** A bound on requests per client address and hour, shared by every process. */
export interface ClientRateLimit {
  /** Counts the request, then says whether it is within the bound. */
  admit(clientIp: string): Promise<RequestAdmission>
}

const WINDOW_MS = 3600_000

/**
 * @fastify/rate-limit's fixed window (its Redis store's script): the first request of a window
 * starts its expiry, later ones only count; the answer is the count and the window's remaining
 * milliseconds. One script, so a crash between the two commands cannot leave a counter forever.
 */
const FIXED_WINDOW = `
local current = redis.call('INCR', KEYS[1])
if current == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
  ttl = tonumber(ARGV[1])
end
return {current, ttl}`

/**
 * The same per-client-IP limit as the sign-up routes' (`signupRateLimitOptions`: an hourly fixed
 * window per address in Redis, IPv6 counted per /64, keys under KMS_REDIS_PREFIX), for handlers
 * that must count only some requests (a form that passed its checks) and answer the refusal
 * themselves (an HTML page), which a route-wide plugin hook cannot do. Like the plugin's
 * `skipOnError`, a Redis failure admits the request: Redis is never what stops the service
 * answering (data/redis.ts).
 */
export function createClientRateLimit(deps: {
  redis: Redis
  /** `<KMS_REDIS_PREFIX><name>:`; every process of the deployment counts under it. */
  nameSpace: string
  perHour: number
}): ClientRateLimit {
  return {
    async admit(clientIp) {
      let answer: unknown
      try {
        answer = await deps.redis.eval(
          FIXED_WINDOW,
          1,
          `${deps.nameSpace}${normalizeIP(clientIp)}`,
          WINDOW_MS,
        )
      } catch {
        return { admitted: true }
      }
      const [current, ttl] = answer as [number, number]
      if (current <= deps.perHour) return { admitted: true }
      return { admitted: false, retryAfterSeconds: Math.max(1, Math.ceil(ttl / 1000)) }
    },
  }
}
