import assert from 'node:assert/strict'
import parsePrometheusTextFormat from 'parse-prometheus-text-format'

/** One sample line of a Prometheus text exposition. */
export interface Sample {
  name: string
  labels: Record<string, string>
  value: number
}

const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/
const SAMPLE_LINE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/
const LABEL_PAIR = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"(?:,|$)/gy

function parseLabels(text: string | undefined, line: string): Record<string, string> {
  const labels: Record<string, string> = {}
  if (!text) return labels
  LABEL_PAIR.lastIndex = 0
  let consumed = 0
  for (let m = LABEL_PAIR.exec(text); m; m = LABEL_PAIR.exec(text)) {
    assert.ok(!(m[1]! in labels), `duplicate label ${m[1]} in ${line}`)
    labels[m[1]!] = m[2]!.replace(/\\n/g, '\n').replace(/\\"/g, '"').replace(/\\\\/g, '\\')
    consumed = LABEL_PAIR.lastIndex
  }
  assert.equal(consumed, text.length, `malformed labels in ${line}`)
  return labels
}

/** Every sample line, parsed strictly (the label syntax, a numeric value). */
export function samples(text: string): Sample[] {
  const out: Sample[] = []
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue
    const match = SAMPLE_LINE.exec(line)
    assert.ok(match, `malformed sample line: ${line}`)
    const value = Number(match[3])
    assert.ok(!Number.isNaN(value) || match[3] === 'NaN', `value of ${line}`)
    out.push({ name: match[1]!, labels: parseLabels(match[2], line), value })
  }
  return out
}

/**
 * Checks a whole exposition as Prometheus would read it: parsed by a Prometheus text parser,
 * every family with a HELP and a TYPE, valid metric and label names, counters named `_total`,
 * no `quantile` label outside a summary, no series twice, histograms cumulative with `+Inf`
 * equal to `_count`. Returns the families by name and their samples.
 */
export function checkExposition(text: string): { types: Map<string, string>; samples: Sample[] } {
  assert.ok(text.endsWith('\n'), 'the exposition ends with a line feed')
  const families = parsePrometheusTextFormat(text)
  const types = new Map<string, string>()
  for (const family of families) {
    assert.ok(!types.has(family.name), `family ${family.name} appears twice (or its lines are not together)`)
    assert.match(family.name, METRIC_NAME)
    assert.ok(family.help.length > 0, `${family.name} has a HELP line`)
    assert.ok(
      ['COUNTER', 'GAUGE', 'HISTOGRAM'].includes(family.type),
      `${family.name} has type ${family.type}`,
    )
    // promtool's lint rules: `_total` on counters and only on them.
    if (family.type === 'COUNTER') assert.match(family.name, /_total$/, `counter ${family.name}`)
    else assert.doesNotMatch(family.name, /_total$/, `${family.type.toLowerCase()} ${family.name}`)
    types.set(family.name, family.type.toLowerCase())
  }
  assert.ok(types.size > 0)

  const all = samples(text)
  const seen = new Set<string>()
  const familyOf = (name: string) =>
    types.has(name) ? name : name.replace(/_(bucket|sum|count)$/, (_m) => '')
  for (const sample of all) {
    const family = familyOf(sample.name)
    const type = types.get(family)
    assert.ok(type, `${sample.name} belongs to a declared family`)
    if (family !== sample.name) assert.equal(type, 'histogram', `${sample.name}: suffix on a ${type}`)
    for (const label of Object.keys(sample.labels)) {
      assert.match(label, LABEL_NAME)
      assert.ok(!label.startsWith('__'), `reserved label ${label}`)
    }
    assert.ok(!('quantile' in sample.labels), `quantile label on ${type} ${sample.name}`)
    if (type === 'counter') assert.ok(sample.value >= 0, `${sample.name} is not negative`)
    const id = `${sample.name}${JSON.stringify(Object.entries(sample.labels).sort())}`
    assert.ok(!seen.has(id), `series ${id} appears twice`)
    seen.add(id)
  }

  // Histograms: buckets non-decreasing in `le`, ending at +Inf = _count.
  for (const [family, type] of types) {
    if (type !== 'histogram') continue
    const series = new Map<string, { le: number; value: number }[]>()
    const counts = new Map<string, number>()
    for (const s of all) {
      const { le, ...rest } = s.labels
      const key = JSON.stringify(Object.entries(rest).sort())
      if (s.name === `${family}_bucket`) {
        assert.ok(le !== undefined, `${s.name} has an le label`)
        series.set(key, [
          ...(series.get(key) ?? []),
          { le: le === '+Inf' ? Infinity : Number(le), value: s.value },
        ])
      } else if (s.name === `${family}_count`) counts.set(key, s.value)
    }
    for (const [key, buckets] of series) {
      const sorted = [...buckets].sort((a, b) => a.le - b.le)
      assert.equal(sorted.at(-1)?.le, Infinity, `${family}${key} has a +Inf bucket`)
      for (let i = 1; i < sorted.length; i++)
        assert.ok(sorted[i]!.value >= sorted[i - 1]!.value, `${family}${key} buckets are cumulative`)
      assert.equal(sorted.at(-1)!.value, counts.get(key), `${family}${key}: +Inf bucket equals _count`)
    }
  }
  return { types, samples: all }
}

/** Sum of the samples named `name` whose labels include `labels` (0 when there is none). */
export function total(list: readonly Sample[], name: string, labels: Record<string, string> = {}): number {
  let sum = 0
  for (const s of list) {
    if (s.name !== name) continue
    if (Object.entries(labels).every(([k, v]) => s.labels[k] === v)) sum += s.value
  }
  return sum
}

/** Whether some sample named `name` has `labels`. */
export function has(list: readonly Sample[], name: string, labels: Record<string, string> = {}): boolean {
  return list.some((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))
}
