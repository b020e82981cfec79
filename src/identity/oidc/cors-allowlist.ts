import type { InvalidationBus } from '../../data/invalidation-bus.ts'
import type { Clock } from '../../platform/clock.ts'

const CORS_TOPIC = 'cors-allowlist'
/** Spec 8: an allow-list is rebuilt at most 5 minutes after it was read. */
const CORS_TTL_MS = 5 * 60_000

/** http or https, localhost or 127.0.0.1, any port: allowed in every environment (spec 4.4). */
const LOCAL_ORIGIN = /^https?:\/\/(localhost|127\.0\.0\.1)(:\d{1,5})?$/

/** Whose lists: a tenant's applications, or the console (the service's own client). */
export const CONSOLE_LIST = 'console'

export interface CorsAllowlist {
  /**
   * Loads the lists when they are missing or older than 5 minutes. The provider decides CORS in a
   * synchronous callback, so the surface calls this before handing a cross-origin request on.
   */
  ready(): Promise<void>
  /** Whether `origin` may call the provider for a client of this tenant (or `CONSOLE_LIST`); needs ready(). */
  allows(owner: string, origin: string): boolean
  /** Whether any tenant, or the console, allows `origin`: what a preflight (which names no client) can know. */
  allowsAnywhere(origin: string): boolean
  /** After an application is saved or deleted: every process rebuilds its lists on next use. */
  changed(tenantId: string): Promise<void>
}

/**
 * The provider's CORS allow-lists (spec 4.4): per tenant, the origins of every redirect and
 * post-logout redirect URI of its applications, plus local origins. Held in memory for at most
 * 5 minutes and dropped in every process over the bus when an application changes.
 */
export function createCorsAllowlist(deps: {
  bus: InvalidationBus
  clock: Clock
  /** Origins per tenant, from every tenant's applications. */
  load: () => Promise<Map<string, Set<string>>>
  /** The console's own origins (its redirect URIs). */
  consoleOrigins: () => readonly string[]
}): CorsAllowlist {
  let snapshot: { byOwner: Map<string, Set<string>>; all: Set<string>; expiresAt: number } | undefined
  let loading: Promise<void> | undefined
  // A load that began before a change must not install what it read.
  let generation = 0
  const drop = () => {
    generation++
    snapshot = undefined
    loading = undefined
  }
  deps.bus.subscribe(CORS_TOPIC, drop)
  deps.bus.onResync(drop)

  return {
    async ready() {
      const fresh = () => snapshot !== undefined && snapshot.expiresAt > deps.clock.now().getTime()
      // A change during a load discards what it read; the next load reads again.
      for (let attempt = 0; attempt < 3 && !fresh(); attempt++) {
        if (!loading) {
          const started = generation
          const load: Promise<void> = (async () => {
            const byOwner = await deps.load()
            byOwner.set(CONSOLE_LIST, new Set(deps.consoleOrigins()))
            const all = new Set([...byOwner.values()].flatMap((origins) => [...origins]))
            if (generation === started)
              snapshot = { byOwner, all, expiresAt: deps.clock.now().getTime() + CORS_TTL_MS }
          })().finally(() => {
            if (loading === load) loading = undefined
          })
          loading = load
        }
        await loading
      }
    },
    allows(owner, origin) {
      if (LOCAL_ORIGIN.test(origin)) return true
      return snapshot?.byOwner.get(owner)?.has(origin) ?? false
    },
    allowsAnywhere(origin) {
      if (LOCAL_ORIGIN.test(origin)) return true
      return snapshot?.all.has(origin) ?? false
    },
    async changed(tenantId) {
      drop()
      await deps.bus.publish(CORS_TOPIC, tenantId).catch(() => {})
    },
  }
}
