import type { Aggregator, Metric, Registry } from 'prom-client'

export type FamilyType = 'counter' | 'gauge' | 'histogram'

/**
 * Metric families in the shape prom-client's Registry and AggregatorRegistry read (`name`,
 * `help`, `type`, `aggregator`, `get()`), with a cheaper write path than prom-client's own
 * Counter and Histogram: those hash the label object and validate it on every increment, while
 * a child here is bound to its labels once and an increment is a number addition. The request
 * path of a process doing ~10k requests a second pays only that (docs/metrics.md).
 */

type Labels = Record<string, string | number>

interface Sample {
  labels: Labels
  value: number
  metricName?: string
}

interface Family {
  readonly name: string
  readonly help: string
  readonly type: FamilyType
  readonly aggregator: Aggregator
  get(): Promise<{ name: string; help: string; type: FamilyType; aggregator: Aggregator; values: Sample[] }>
}

function register(registry: Registry, family: Family): void {
  // The Registry takes anything with these members (prom-client's "custom collector" shape).
  registry.registerMetric(family as unknown as Metric)
}

/**
 * A family's children by label values, each made on first use and kept: a hot path asks once and
 * keeps the child, so an increment never hashes labels.
 */
class ChildrenByLabels<L extends string, C> {
  private readonly labelNames: readonly L[]
  private readonly make: () => C
  private readonly entries = new Map<string, { labels: Labels; child: C }>()

  constructor(labelNames: readonly L[], make: () => C) {
    this.labelNames = labelNames
    this.make = make
  }

  get(values: Record<L, string>): C {
    const key = this.labelNames.map((name) => values[name]).join('\u0000')
    let entry = this.entries.get(key)
    if (!entry) {
      const labels: Labels = {}
      for (const name of this.labelNames) labels[name] = values[name]
      entry = { labels, child: this.make() }
      this.entries.set(key, entry)
    }
    return entry.child
  }

  all(): Iterable<{ labels: Labels; child: C }> {
    return this.entries.values()
  }
}

export class CounterChild {
  value = 0
  inc(by = 1): void {
    this.value += by
  }
}

export class CounterFamily<L extends string> implements Family {
  readonly type: FamilyType = 'counter'
  readonly name: string
  readonly help: string
  readonly aggregator: Aggregator
  private readonly children: ChildrenByLabels<L, CounterChild>

  constructor(
    registry: Registry,
    name: string,
    help: string,
    labelNames: readonly L[],
    aggregator: Aggregator = 'sum',
  ) {
    this.name = name
    this.help = help
    this.children = new ChildrenByLabels(labelNames, () => new CounterChild())
    this.aggregator = aggregator
    register(registry, this)
  }

  /** The child for these label values; callers on a hot path keep it instead of calling again. */
  labels(values: Record<L, string>): CounterChild {
    return this.children.get(values)
  }

  async get() {
    const values = [...this.children.all()].map(({ labels, child }) => ({ labels, value: child.value }))
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values }
  }
}

export class HistogramChild {
  /** Per bucket (not cumulative), the last one past the largest bound. */
  readonly counts: number[]
  sum = 0
  count = 0
  private readonly bounds: readonly number[]
  constructor(bounds: readonly number[]) {
    this.bounds = bounds
    this.counts = new Array<number>(bounds.length + 1).fill(0)
  }

  observe(value: number): void {
    const bounds = this.bounds
    let i = 0
    while (i < bounds.length && value > bounds[i]!) i++
    this.counts[i]!++
    this.sum += value
    this.count++
  }
}

export class HistogramFamily<L extends string> implements Family {
  readonly type: FamilyType = 'histogram'
  readonly name: string
  readonly help: string
  readonly aggregator: Aggregator
  private readonly bounds: readonly number[]
  private readonly children: ChildrenByLabels<L, HistogramChild>

  constructor(
    registry: Registry,
    name: string,
    help: string,
    labelNames: readonly L[],
    bounds: readonly number[],
    aggregator: Aggregator = 'sum',
  ) {
    this.name = name
    this.help = help
    this.bounds = bounds
    this.children = new ChildrenByLabels(labelNames, () => new HistogramChild(bounds))
    this.aggregator = aggregator
    register(registry, this)
  }

  /** As CounterFamily.labels. */
  labels(values: Record<L, string>): HistogramChild {
    return this.children.get(values)
  }

  async get() {
    const values: Sample[] = []
    for (const { labels, child } of this.children.all()) {
      let cumulative = 0
      this.bounds.forEach((bound, i) => {
        cumulative += child.counts[i]!
        values.push({
          labels: { ...labels, le: bound },
          value: cumulative,
          metricName: `${this.name}_bucket`,
        })
      })
      values.push({
        labels: { ...labels, le: '+Inf' },
        value: child.count,
        metricName: `${this.name}_bucket`,
      })
      values.push({ labels, value: child.sum, metricName: `${this.name}_sum` })
      values.push({ labels, value: child.count, metricName: `${this.name}_count` })
    }
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values }
  }
}

export type SampleList = readonly (readonly [Labels, number])[]

/**
 * A family read at scrape time from a component's own state (queue lengths, the entropy chain's
 * counters): nothing is paid between scrapes.
 */
export class ReadFamily implements Family {
  readonly name: string
  readonly help: string
  readonly type: FamilyType
  readonly aggregator: Aggregator
  private readonly read: () => SampleList | Promise<SampleList>

  constructor(
    registry: Registry,
    name: string,
    help: string,
    type: FamilyType,
    read: () => SampleList | Promise<SampleList>,
    aggregator: Aggregator = 'sum',
  ) {
    this.name = name
    this.help = help
    this.type = type
    this.read = read
    this.aggregator = aggregator
    register(registry, this)
  }

  async get() {
    const samples = await this.read()
    const values = samples.map(([labels, value]) => ({ labels, value }))
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values }
  }
}
