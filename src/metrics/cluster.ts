import cluster from 'node:cluster'
import type { Logger } from 'pino'
import { AggregatorRegistry, Registry } from 'prom-client'

/**
 * /metrics of a cluster (docs/metrics.md). Any API process may receive a scrape; it asks the
 * primary, which asks every process (API and job processes) for its registry over cluster IPC
 * (prom-client's AggregatorRegistry) and answers with their aggregation: counters and histograms
 * are summed, so a total does not depend on which process answered and never goes back.
 *
 *   API process ──{kms:metrics:get id}──▶ primary ──prom-client:getMetricsReq──▶ every process
 *   API process ◀─{kms:metrics:text id}── primary ◀──prom-client:getMetricsRes── every process
 */

const GET = 'kms:metrics:get'
const ANSWER = 'kms:metrics:text'

interface GetMessage {
  type: typeof GET
  id: number
}
interface AnswerMessage {
  type: typeof ANSWER
  id: number
  text?: string
  error?: string
}

const isMessage = <T extends { type: string }>(message: unknown, type: T['type']): message is T =>
  typeof message === 'object' && message !== null && (message as { type?: unknown }).type === type

/** In the primary: answers the processes' requests for the cluster's metrics. */
export function serveClusterMetrics(logger: Logger): void {
  const aggregator = new AggregatorRegistry()
  cluster.on('message', (worker, message: unknown) => {
    if (!isMessage<GetMessage>(message, GET)) return
    const reply = (answer: Omit<AnswerMessage, 'type' | 'id'>) => {
      if (worker.isConnected())
        worker.send({ type: ANSWER, id: message.id, ...answer } satisfies AnswerMessage)
    }
    aggregator.clusterMetrics().then(
      (text) => reply({ text }),
      (err: Error) => {
        // A process that stopped answering (exiting, stuck) fails the scrape rather than
        // showing totals without its share, which would look like a counter reset.
        logger.warn({ err: { message: err.message } }, 'metrics: a process did not answer')
        reply({ error: err.message })
      },
    )
  })
}

/**
 * In a forked process, first thing: answers the primary's collection from `registry` once
 * `use` names it (until then with nothing, so a process still starting does not stall scrapes).
 */
export function joinClusterMetrics(): { use(registry: Registry): void } {
  // The constructor installs prom-client's listener for the primary's requests.
  new AggregatorRegistry()
  AggregatorRegistry.setRegistries([new Registry()])
  return {
    use(registry) {
      AggregatorRegistry.setRegistries([registry])
    },
  }
}

export class ClusterMetricsError extends Error {}

/** In a forked API process: the cluster's metrics, from the primary. */
export function createClusterScrape(timeoutMs = 10_000): () => Promise<string> {
  let next = 0
  const pending = new Map<number, { resolve(text: string): void; reject(error: Error): void }>()
  process.on('message', (message: unknown) => {
    if (!isMessage<AnswerMessage>(message, ANSWER)) return
    const waiter = pending.get(message.id)
    if (!waiter) return
    pending.delete(message.id)
    if (message.text !== undefined) waiter.resolve(message.text)
    else waiter.reject(new ClusterMetricsError(message.error ?? 'no answer'))
  })
  return () =>
    new Promise<string>((resolve, reject) => {
      const id = next++
      const timer = setTimeout(() => {
        pending.delete(id)
        reject(new ClusterMetricsError('the primary did not answer'))
      }, timeoutMs)
      pending.set(id, {
        resolve(text) {
          clearTimeout(timer)
          resolve(text)
        },
        reject(error) {
          clearTimeout(timer)
          reject(error)
        },
      })
      process.send?.({ type: GET, id } satisfies GetMessage)
    })
}
