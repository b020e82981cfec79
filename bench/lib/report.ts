import { execFileSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { availableParallelism, cpus, totalmem } from 'node:os'

export interface Row {
  scenario: string
  /** The load generator's connections for this row's run. */
  connections?: number
  requestsPerSecond: number
  itemsPerSecond: number
  /** Plaintext MB/s, for scenarios sized in bytes. */
  megabytesPerSecond?: number
  p50Ms: number
  p99Ms: number
  ceilingItemsPerSecond?: number
  /** Service ÷ ceiling. */
  ratio?: number
  /** The HTTP floor's items per second (bench/lib/floor.ts) and service ÷ floor. */
  floorItemsPerSecond?: number
  floorRatio?: number
  /** The best rate of the connections sweep (lib/sweep.ts), its connection count and ÷ floor there. */
  saturated?: { requestsPerSecond: number; connections: number; floorRatio: number }
  /**
   * CPU µs per answered request of the measured load: the API processes (all their threads),
   * PostgreSQL (the service's own backends: lib/measure.ts cpuMeter), the load generator (the
   * bench process) and the floor's processes during the floor's own run.
   */
  apiCpuUs?: number
  postgresCpuUs?: number
  loadCpuUs?: number
  floorCpuUs?: number
  target?: string
  /** Whether the target holds; absent when there is none. */
  met?: boolean
  peakRssMb: number
  audit: string
  note?: string
}

const HEADERS = [
  'scenario',
  'conns',
  'req/s',
  'items/s',
  'MB/s',
  'p50 ms',
  'p99 ms',
  'ceiling items/s',
  '÷ ceiling',
  'floor items/s',
  '÷ floor',
  'saturated req/s',
  'saturated ÷ floor',
  'target',
  'API µs/req',
  'PG µs/req',
  'load µs/req',
  'floor µs/req',
  'peak RSS MB',
  'audit',
]

const fixed = (value: number | undefined, digits: number) =>
  value === undefined || !Number.isFinite(value) ? '–' : value.toFixed(digits)
const whole = (value: number | undefined) =>
  value === undefined || !Number.isFinite(value) ? '–' : Math.round(value).toLocaleString('en-US')

const percent = (ratio: number | undefined) =>
  ratio === undefined || !Number.isFinite(ratio) ? '–' : `${(ratio * 100).toFixed(0)}%`

function cells(row: Row): Record<string, string> {
  const target = row.target ? `${row.target} ${row.met === undefined ? '' : row.met ? '✓' : '✗'}`.trim() : ''
  return {
    scenario: row.scenario,
    conns: row.connections === undefined ? '–' : String(row.connections),
    'req/s': whole(row.requestsPerSecond),
    'items/s': whole(row.itemsPerSecond),
    'MB/s': fixed(row.megabytesPerSecond, 1),
    'p50 ms': fixed(row.p50Ms, 2),
    'p99 ms': fixed(row.p99Ms, 2),
    'ceiling items/s': whole(row.ceilingItemsPerSecond),
    '÷ ceiling': percent(row.ratio),
    'floor items/s': whole(row.floorItemsPerSecond),
    '÷ floor': percent(row.floorRatio),
    'saturated req/s': row.saturated
      ? `${whole(row.saturated.requestsPerSecond)} @${row.saturated.connections}`
      : '–',
    'saturated ÷ floor': percent(row.saturated?.floorRatio),
    target,
    'API µs/req': whole(row.apiCpuUs),
    'PG µs/req': whole(row.postgresCpuUs),
    'load µs/req': whole(row.loadCpuUs),
    'floor µs/req': whole(row.floorCpuUs),
    'peak RSS MB': whole(row.peakRssMb),
    audit: row.audit,
  }
}

/** The connections sweep: one row per scenario and connection count. */
const SWEEP_HEADERS = [
  'scenario',
  'conns',
  'req/s',
  'floor req/s',
  '÷ floor',
  'p50 ms',
  'p99 ms',
  'floor p50 ms',
  'floor p99 ms',
  'API µs/req',
  'PG µs/req',
  'load µs/req',
  'floor µs/req',
  'floor processes',
  'target',
  'audit',
]

export interface SweepRow {
  scenario: string
  connections: number
  requestsPerSecond: number
  floorRequestsPerSecond: number
  p50Ms: number
  p99Ms: number
  floorP50Ms: number
  floorP99Ms: number
  apiCpuUs: number
  postgresCpuUs: number | undefined
  loadCpuUs: number
  floorCpuUs: number
  floorProcesses: number
  target?: string
  met?: boolean
  audit: string
}

function sweepCells(row: SweepRow): Record<string, string> {
  return {
    scenario: row.scenario,
    conns: String(row.connections),
    'req/s': whole(row.requestsPerSecond),
    'floor req/s': whole(row.floorRequestsPerSecond),
    '÷ floor': percent(row.requestsPerSecond / row.floorRequestsPerSecond),
    'p50 ms': fixed(row.p50Ms, 2),
    'p99 ms': fixed(row.p99Ms, 2),
    'floor p50 ms': fixed(row.floorP50Ms, 2),
    'floor p99 ms': fixed(row.floorP99Ms, 2),
    'API µs/req': whole(row.apiCpuUs),
    'PG µs/req': whole(row.postgresCpuUs),
    'load µs/req': whole(row.loadCpuUs),
    'floor µs/req': whole(row.floorCpuUs),
    'floor processes': String(row.floorProcesses),
    target: row.target ? `${row.target} ${row.met ? '✓' : '✗'}` : '',
    audit: row.audit,
  }
}

export function sweepMarkdownTable(rows: readonly SweepRow[]): string {
  return markdown(SWEEP_HEADERS, grid(rows, SWEEP_HEADERS, sweepCells))
}

export function sweepTextTable(rows: readonly SweepRow[]): string {
  return text(SWEEP_HEADERS, grid(rows, SWEEP_HEADERS, sweepCells))
}

/** The floor-only table (`npm run bench:floor`): the service's columns stay out. */
const FLOOR_HEADERS = [
  'scenario',
  'ceiling items/s',
  'floor items/s',
  'floor ÷ ceiling',
  'floor p50 ms',
  'floor p99 ms',
  'floor µs/req',
  'load µs/req',
  'floor processes',
]

export interface FloorOnlyRow {
  scenario: string
  ceilingItemsPerSecond: number
  floorItemsPerSecond: number
  p50Ms: number
  p99Ms: number
  floorCpuUs: number
  loadCpuUs: number
  processes: number
}

function floorCells(row: FloorOnlyRow): Record<string, string> {
  return {
    scenario: row.scenario,
    'ceiling items/s': whole(row.ceilingItemsPerSecond),
    'floor items/s': whole(row.floorItemsPerSecond),
    'floor ÷ ceiling': percent(row.floorItemsPerSecond / row.ceilingItemsPerSecond),
    'floor p50 ms': fixed(row.p50Ms, 2),
    'floor p99 ms': fixed(row.p99Ms, 2),
    'floor µs/req': whole(row.floorCpuUs),
    'load µs/req': whole(row.loadCpuUs),
    'floor processes': String(row.processes),
  }
}

function grid<R>(
  rows: readonly R[],
  headers: readonly string[],
  toCells: (row: R) => Record<string, string>,
) {
  return rows.map((row) => {
    const all = toCells(row)
    return headers.map((h) => all[h] ?? '')
  })
}

export function markdownTable(rows: readonly Row[]): string {
  return markdown(HEADERS, grid(rows, HEADERS, cells))
}

export function floorMarkdownTable(rows: readonly FloorOnlyRow[]): string {
  return markdown(FLOOR_HEADERS, grid(rows, FLOOR_HEADERS, floorCells))
}

function markdown(headers: readonly string[], body: string[][]): string {
  const lines = [
    `| ${headers.join(' | ')} |`,
    `|${headers.map((_, i) => (i === 0 ? '---' : '--:')).join('|')}|`,
  ]
  for (const row of body) lines.push(`| ${row.join(' | ')} |`)
  return `${lines.join('\n')}\n`
}

/** Fixed-width text for the terminal. */
export function textTable(rows: readonly Row[]): string {
  return text(HEADERS, grid(rows, HEADERS, cells))
}

export function floorTextTable(rows: readonly FloorOnlyRow[]): string {
  return text(FLOOR_HEADERS, grid(rows, FLOOR_HEADERS, floorCells))
}

function text(headers: readonly string[], body: string[][]): string {
  const table = [[...headers], ...body]
  const widths = headers.map((_, i) => Math.max(...table.map((r) => [...r[i]!].length)))
  return `${table
    .map((r) =>
      r.map((cell, i) => (i === 0 ? cell.padEnd(widths[i]!) : cell.padStart(widths[i]!))).join('  '),
    )
    .join('\n')}\n`
}

export interface Machine {
  date: string
  cpu: string
  cores: number
  memoryGb: number
  node: string
  openssl: string
  postgres: string
  redis: string
}

function commandOutput(command: string, args: string[]): string {
  try {
    return execFileSync(command, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim()
  } catch {
    return 'unknown'
  }
}

export function describeMachine(postgresVersion: string): Machine {
  const redis = /v=(\S+)/.exec(commandOutput('redis-server', ['--version']))?.[1] ?? 'unknown'
  let kernel = 'unknown'
  try {
    kernel = readFileSync('/proc/sys/kernel/osrelease', 'utf8').trim()
  } catch {}
  return {
    date: new Date().toISOString(),
    cpu: `${cpus()[0]?.model ?? 'unknown'} (Linux ${kernel})`,
    cores: availableParallelism(),
    memoryGb: Math.round(totalmem() / 2 ** 30),
    node: process.version,
    openssl: process.versions.openssl,
    postgres: postgresVersion,
    redis,
  }
}

export function machineMarkdown(m: Machine, mode: string): string {
  return [
    `- Date: ${m.date} (${mode})`,
    `- Machine: ${m.cores} cores, ${m.memoryGb} GiB, ${m.cpu}`,
    `- Node.js ${m.node}, OpenSSL ${m.openssl}, PostgreSQL ${m.postgres}, Redis ${m.redis}`,
    '',
  ].join('\n')
}
