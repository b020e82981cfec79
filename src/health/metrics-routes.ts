import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { EntropySourceName, EntropyStatus } from '../entropy/entropy-chain.ts'
import type { EventLoopDelay, EventLoopMonitor } from './event-loop-monitor.ts'

/** Prometheus text exposition format 0.0.4. */
const CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8'

type Labels = Record<string, string>

const escapeLabel = (value: string) => value.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n')

class Exposition {
  private readonly lines: string[] = []

  family(name: string, type: 'gauge' | 'counter', help: string, samples: [Labels, number][]): void {
    this.lines.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`)
    for (const [labels, value] of samples) {
      const text = Object.entries(labels)
        .map(([k, v]) => `${k}="${escapeLabel(v)}"`)
        .join(',')
      this.lines.push(`${name}${text ? `{${text}}` : ''} ${value}`)
    }
  }

  toString(): string {
    return `${this.lines.join('\n')}\n`
  }
}

/**
 * Per process: with several API processes each scrape reaches one of them, which the pid says.
 * The delay quantiles cover the time since this process's previous scrape.
 */
export function renderProcessMetrics(delay: EventLoopDelay): string {
  const out = new Exposition()
  out.family('process_pid', 'gauge', 'Process id of the API process that answered this scrape.', [
    [{}, process.pid],
  ])
  const memory = process.memoryUsage()
  out.family('process_resident_memory_bytes', 'gauge', 'Resident set size of this process.', [
    [{}, memory.rss],
  ])
  out.family('nodejs_memory_bytes', 'gauge', 'V8 heap and memory held outside it (Buffers, native).', [
    [{ kind: 'heap_total' }, memory.heapTotal],
    [{ kind: 'heap_used' }, memory.heapUsed],
    [{ kind: 'external' }, memory.external],
    [{ kind: 'array_buffers' }, memory.arrayBuffers],
  ])
  out.family(
    'nodejs_eventloop_delay_seconds',
    'gauge',
    'Event-loop delay since the previous scrape of this process, by quantile.',
    [
      [{ quantile: '0.5' }, delay.p50],
      [{ quantile: '0.9' }, delay.p90],
      [{ quantile: '0.99' }, delay.p99],
      [{ quantile: '1' }, delay.max],
    ],
  )
  return out.toString()
}

/**
 * Every configured source and every known reason is listed, zeros included, so a rate() over a
 * counter works from the first scrape and an alert can name a series before it first moves.
 */
export function renderEntropyMetrics(status: EntropyStatus): string {
  const out = new Exposition()
  const names: EntropySourceName[] = [...status.sources.map((s) => s.name), 'system-csprng']
  out.family(
    'kms_entropy_source_in_use',
    'gauge',
    'Entropy source a nonce is drawn from now (1 for the one in use).',
    names.map((name) => [{ source: name }, name === status.source ? 1 : 0]),
  )
  out.family(
    'kms_entropy_source_up',
    'gauge',
    'Whether a quantum source is up (0 while starting or down).',
    status.sources.map((s) => [{ source: s.name, protocol: s.protocol }, s.state === 'up' ? 1 : 0]),
  )
  out.family(
    'kms_entropy_pool_bytes',
    'gauge',
    'Prefetched bytes waiting in a quantum source pool.',
    status.sources.map((s) => [{ source: s.name }, s.poolBytes]),
  )
  out.family(
    'kms_entropy_bytes_served_total',
    'counter',
    'Random bytes served, by the source mixed into them (system-csprng: no quantum contribution).',
    [
      ...status.sources.map((s): [Labels, number] => [{ source: s.name }, s.bytesServed]),
      [{ source: 'system-csprng' }, status.csprngBytesServed],
    ],
  )
  out.family(
    'kms_entropy_batches_accepted_total',
    'counter',
    'Batches fetched from a quantum source that passed validation.',
    status.sources.map((s) => [{ source: s.name }, s.batchesAccepted]),
  )
  out.family(
    'kms_entropy_fetch_failures_total',
    'counter',
    'Fetches from a quantum source that got no usable answer (network, timeout, HTTP status).',
    status.sources.flatMap((s) =>
      Object.entries(s.fetchFailures).map(([reason, n]): [Labels, number] => [{ source: s.name, reason }, n]),
    ),
  )
  out.family(
    'kms_entropy_rejections_total',
    'counter',
    'Answers from a quantum source refused by validation, by reason.',
    status.sources.flatMap((s) =>
      Object.entries(s.rejections).map(([reason, n]): [Labels, number] => [{ source: s.name, reason }, n]),
    ),
  )
  return out.toString()
}

/**
 * GET /metrics at the root (the Prometheus convention), outside /api/v1 and its authentication,
 * like /api/v1/health. It carries counts and states only; restrict it at the network edge if
 * failure counts are considered sensitive. Hidden from the OpenAPI document: it is not API.
 */
export function metricsRoutes(deps: { entropyStatus: () => EntropyStatus; eventLoop: EventLoopMonitor }) {
  const plugin: FastifyPluginAsyncTypebox = async (app) => {
    app.get('/metrics', { schema: { hide: true } }, async (_request, reply) => {
      const text =
        renderProcessMetrics(deps.eventLoop.snapshotAndReset()) + renderEntropyMetrics(deps.entropyStatus())
      return reply.type(CONTENT_TYPE).send(text)
    })
  }
  return plugin
}
