import { execFileSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { availableParallelism, cpus, totalmem } from 'node:os'

export interface Row {
  scenario: string
  requestsPerSecond: number
  itemsPerSecond: number
  /** Plaintext MB/s, for scenarios sized in bytes. */
  megabytesPerSecond?: number
  p50Ms: number
  p99Ms: number
  ceilingItemsPerSecond?: number
  ratio?: number
  target?: string
  /** Whether the target holds; absent when there is none. */
  met?: boolean
  peakRssMb: number
  audit: string
  note?: string
}

const HEADERS = [
  'scenario',
  'req/s',
  'items/s',
  'MB/s',
  'p50 ms',
  'p99 ms',
  'ceiling items/s',
  'ratio',
  'target',
  'peak RSS MB',
  'audit',
]

const fixed = (value: number | undefined, digits: number) =>
  value === undefined || !Number.isFinite(value) ? '–' : value.toFixed(digits)
const whole = (value: number | undefined) =>
  value === undefined || !Number.isFinite(value) ? '–' : Math.round(value).toLocaleString('en-US')

function cells(row: Row): string[] {
  const target = row.target ? `${row.target} ${row.met === undefined ? '' : row.met ? '✓' : '✗'}`.trim() : ''
  return [
    row.scenario,
    whole(row.requestsPerSecond),
    whole(row.itemsPerSecond),
    fixed(row.megabytesPerSecond, 1),
    fixed(row.p50Ms, 2),
    fixed(row.p99Ms, 2),
    whole(row.ceilingItemsPerSecond),
    row.ratio === undefined ? '–' : `${(row.ratio * 100).toFixed(0)}%`,
    target,
    whole(row.peakRssMb),
    row.audit,
  ]
}

export function markdownTable(rows: readonly Row[]): string {
  const lines = [
    `| ${HEADERS.join(' | ')} |`,
    `|${HEADERS.map((_, i) => (i === 0 ? '---' : '--:')).join('|')}|`,
  ]
  for (const row of rows) lines.push(`| ${cells(row).join(' | ')} |`)
  return `${lines.join('\n')}\n`
}

/** Fixed-width text for the terminal. */
export function textTable(rows: readonly Row[]): string {
  const table = [HEADERS, ...rows.map(cells)]
  const widths = HEADERS.map((_, i) => Math.max(...table.map((r) => [...r[i]!].length)))
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
    `- Date: ${m.date} (${mode} run)`,
    `- Machine: ${m.cores} cores, ${m.memoryGb} GiB, ${m.cpu}`,
    `- Node.js ${m.node}, OpenSSL ${m.openssl}, PostgreSQL ${m.postgres}, Redis ${m.redis}`,
    '',
  ].join('\n')
}
