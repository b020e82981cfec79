import { randomUUID } from 'node:crypto'
import type { Redis } from 'ioredis'
import type { Logger } from 'pino'

/**
 * Tells every process that something it may have cached changed (an API key revoked, later a
 * key rotated). Redis pub/sub is at-most-once: a process that was disconnected may have missed
 * messages, so on every (re)subscription it is asked to drop whatever it caches ("resync").
 * Caches also keep a short TTL as a safety net for a Redis that is down.
 */
export interface InvalidationBus {
  /**
   * Runs this process's handlers at once (before the promise settles), then tells the other
   * processes. A process ignores its own message when Redis echoes it back.
   */
  publish(topic: string, message: string): Promise<void>
  subscribe(topic: string, handler: (message: string) => void): void
  onResync(handler: () => void): void
  close(): Promise<void>
}

export function createInvalidationBus(deps: {
  publisher: Redis
  subscriber: Redis
  prefix: string
  logger: Logger
}): InvalidationBus {
  const { publisher, subscriber, logger } = deps
  const handlers = new Map<string, Set<(message: string) => void>>()
  const resyncHandlers = new Set<() => void>()
  const channelOf = (topic: string) => `${deps.prefix}invalidate:${topic}`
  const channels = () => [...handlers.keys()].map(channelOf)

  // Messages travel as `<origin> <message>`; messages are ids, which hold no space.
  const origin = randomUUID()
  const deliver = (topic: string, message: string) => {
    for (const handler of handlers.get(topic) ?? []) handler(message)
  }

  subscriber.on('message', (channel: string, raw: string) => {
    const space = raw.indexOf(' ')
    if (space >= 0 && raw.slice(0, space) === origin) return
    deliver(channel.slice(channelOf('').length), space >= 0 ? raw.slice(space + 1) : raw)
  })
  subscriber.on('ready', () => {
    const list = channels()
    if (list.length > 0) {
      subscriber.subscribe(...list).catch((err: Error) => logger.warn({ err }, 'resubscribe failed'))
    }
    for (const handler of resyncHandlers) handler()
  })

  return {
    async publish(topic, message) {
      deliver(topic, message)
      try {
        await publisher.publish(channelOf(topic), `${origin} ${message}`)
      } catch (err) {
        // Not fatal: the database is the source of truth and caches expire on their own.
        logger.warn({ err: { message: (err as Error).message }, topic }, 'invalidation not published')
      }
    },
    subscribe(topic, handler) {
      let set = handlers.get(topic)
      if (!set) {
        set = new Set()
        handlers.set(topic, set)
        if (subscriber.status === 'ready') {
          subscriber
            .subscribe(channelOf(topic))
            .catch((err: Error) => logger.warn({ err }, 'subscribe failed'))
        }
      }
      set.add(handler)
    },
    onResync(handler) {
      resyncHandlers.add(handler)
    },
    async close() {
      subscriber.disconnect()
    },
  }
}
