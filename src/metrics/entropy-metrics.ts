import { Registry } from 'prom-client'
import type { EntropySourceName, EntropyStatus } from '../entropy/entropy-chain.ts'
import { ReadFamily, type SampleList } from './families.ts'

/**
 * The entropy chain's state and counters (docs/entropy.md), read at scrape time. Every configured
 * source and every known reason is listed, zeros included, so a rate() over a counter works from
 * the first scrape and an alert can name a series before it first moves.
 *
 * Across API processes (each has its own chain): counters and pool bytes are summed; a source is
 * `in_use` if any process draws from it (max) and `up` only if every process sees it up (min).
 */
export function registerEntropyMetrics(registry: Registry, status: () => EntropyStatus): void {
  new ReadFamily(
    registry,
    'kms_entropy_source_in_use',
    'Entropy source a nonce is drawn from now (1 for the one in use).',
    'gauge',
    () => {
      const s = status()
      const names: EntropySourceName[] = [...s.sources.map((source) => source.name), 'system-csprng']
      return names.map((name) => [{ source: name }, name === s.source ? 1 : 0] as const)
    },
    'max',
  )
  new ReadFamily(
    registry,
    'kms_entropy_source_up',
    'Whether a quantum source is up (0 while starting or down).',
    'gauge',
    () =>
      status().sources.map(
        (s) => [{ source: s.name, protocol: s.protocol }, s.state === 'up' ? 1 : 0] as const,
      ),
    'min',
  )
  new ReadFamily(
    registry,
    'kms_entropy_pool_bytes',
    'Prefetched bytes waiting in a quantum source pool.',
    'gauge',
    () => status().sources.map((s) => [{ source: s.name }, s.poolBytes] as const),
  )
  new ReadFamily(
    registry,
    'kms_entropy_bytes_served_total',
    'Random bytes served, by the source mixed into them (system-csprng: no quantum contribution).',
    'counter',
    (): SampleList => {
      const s = status()
      return [
        ...s.sources.map((source) => [{ source: source.name }, source.bytesServed] as const),
        [{ source: 'system-csprng' }, s.csprngBytesServed],
      ]
    },
  )
  new ReadFamily(
    registry,
    'kms_entropy_batches_accepted_total',
    'Batches fetched from a quantum source that passed validation.',
    'counter',
    () => status().sources.map((s) => [{ source: s.name }, s.batchesAccepted] as const),
  )
  new ReadFamily(
    registry,
    'kms_entropy_fetch_failures_total',
    'Fetches from a quantum source that got no usable answer (network, timeout, HTTP status).',
    'counter',
    () =>
      status().sources.flatMap((s) =>
        Object.entries(s.fetchFailures).map(([reason, n]) => [{ source: s.name, reason }, n] as const),
      ),
  )
  new ReadFamily(
    registry,
    'kms_entropy_rejections_total',
    'Answers from a quantum source refused by validation, by reason.',
    'counter',
    () =>
      status().sources.flatMap((s) =>
        Object.entries(s.rejections).map(([reason, n]) => [{ source: s.name, reason }, n] as const),
      ),
  )
}

/** The entropy series alone, for one status (tests of the chain). */
export async function renderEntropyMetrics(status: EntropyStatus): Promise<string> {
  const registry = new Registry()
  registerEntropyMetrics(registry, () => status)
  return registry.metrics()
}
