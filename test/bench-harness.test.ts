import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'node:test'
import { ADMIN_DATABASE_URL, NODE_BIN, PROJECT_ROOT, REDIS_URL } from './helpers/service.ts'

/**
 * The benchmark harness (`npm run bench`) is not part of `npm test`, but it must keep working:
 * one short scenario end to end, and the table it writes must be well formed.
 */

interface BenchResult {
  code: number | null
  signal: NodeJS.Signals | null
  stdout: string
  stderr: string
  ms: number
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

/** `node bench/bench.ts <args>`, killed (with the service it started) after timeoutMs. */
function runBench(args: string[], timeoutMs: number): Promise<BenchResult> {
  const started = performance.now()
  return new Promise((resolve) => {
    const child = spawn(NODE_BIN, ['bench/bench.ts', ...args], {
      cwd: PROJECT_ROOT,
      // The bench reaches the same PostgreSQL and Redis as the tests.
      env: { ...process.env, BENCH_DATABASE_URL: ADMIN_DATABASE_URL, BENCH_REDIS_URL: REDIS_URL },
      stdio: ['ignore', 'pipe', 'pipe'],
      // Its own process group: a timeout kills the service under test along with it.
      detached: true,
    })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (c: Buffer) => {
      stdout += c.toString()
    })
    child.stderr.on('data', (c: Buffer) => {
      stderr += c.toString()
    })
    const timer = setTimeout(() => {
      try {
        process.kill(-child.pid!, 'SIGKILL')
      } catch {}
    }, timeoutMs)
    child.once('close', (code, signal) => {
      clearTimeout(timer)
      resolve({ code, signal, stdout, stderr, ms: performance.now() - started })
    })
  })
}

/** The cells of a markdown table line `| a | b |`, trimmed. */
const cellsOf = (line: string) =>
  line
    .trim()
    .split('|')
    .slice(1, -1)
    .map((cell) => cell.trim())

/** A whole number as report.ts prints it: `1,234,567`. */
function wholeNumber(cell: string, name: string): number {
  assert.match(cell, /^\d{1,3}(,\d{3})*$/, `${name} is a whole number with thousands separators: ${cell}`)
  return Number(cell.replaceAll(',', ''))
}

/** Milliseconds as report.ts prints them: two decimals. */
function milliseconds(cell: string, name: string): number {
  assert.match(cell, /^\d+\.\d{2}$/, `${name} has two decimals: ${cell}`)
  return Number(cell)
}

test('npm test does not run the benchmark', () => {
  const pkg = JSON.parse(readFileSync(join(PROJECT_ROOT, 'package.json'), 'utf8'))
  assert.doesNotMatch(pkg.scripts.test, /bench/)
})

test('the bench harness runs one quick scenario and writes a well-formed results table', {
  timeout: 240_000,
}, async () => {
  const dir = mkdtempSync(join(tmpdir(), 'kms-bench-harness-'))
  const out = join(dir, 'results.md')
  try {
    const run = await runBench(
      ['--quick', '--only=mac-hmac-sha256', '--processes=1', `--out=${out}`],
      180_000,
    )
    assert.equal(run.signal, null, `the bench was killed after ${Math.round(run.ms)} ms:\n${run.stdout}`)
    assert.equal(run.code, 0, `stdout:\n${run.stdout}\nstderr:\n${run.stderr}`)

    // The terminal table: its fixed-width header, then the scenario row.
    const header = run.stdout.split('\n').find((line) => line.startsWith('scenario '))
    assert.ok(header, `the fixed-width table header is printed:\n${run.stdout}`)
    assert.deepEqual(header.trim().split(/\s{2,}/), HEADERS)
    assert.match(run.stdout, /^MAC HMAC-SHA256 +\d/m, 'the scenario row follows')

    const text = readFileSync(out, 'utf8')
    const begin = text.indexOf('<!-- bench:begin -->')
    const end = text.indexOf('<!-- bench:end -->')
    assert.ok(begin >= 0, 'the begin marker is written')
    assert.ok(end > begin, 'the end marker follows it')
    assert.equal(text.indexOf('<!-- bench:begin -->', begin + 1), -1, 'one begin marker')
    assert.equal(text.indexOf('<!-- bench:end -->', end + 1), -1, 'one end marker')
    const block = text.slice(begin, end)

    assert.ok(block.includes(`Node.js ${process.version},`), `the block names Node ${process.version}`)
    assert.ok(
      block.includes(`OpenSSL ${process.versions.openssl},`),
      `the block names OpenSSL ${process.versions.openssl}`,
    )
    assert.match(block, /\(quick run\)/)

    const table = block.split('\n').filter((line) => line.startsWith('|'))
    assert.equal(table.length, 3, `header, separator and one row:\n${table.join('\n')}`)
    const [headerLine, separatorLine, rowLine] = table as [string, string, string]
    assert.deepEqual(cellsOf(headerLine), HEADERS)
    const separator = cellsOf(separatorLine)
    assert.equal(separator.length, HEADERS.length)
    for (const cell of separator) assert.match(cell, /^:?-{3,}:?$|^-+:$/, `a separator cell: ${cell}`)

    const row = cellsOf(rowLine)
    assert.equal(row.length, HEADERS.length, `one cell per column: ${rowLine}`)
    const cell = Object.fromEntries(HEADERS.map((name, i) => [name, row[i]!])) as Record<string, string>
    assert.equal(cell['scenario'], 'MAC HMAC-SHA256')

    const requests = wholeNumber(cell['req/s']!, 'req/s')
    const items = wholeNumber(cell['items/s']!, 'items/s')
    const p50 = milliseconds(cell['p50 ms']!, 'p50')
    const p99 = milliseconds(cell['p99 ms']!, 'p99')
    const ceiling = wholeNumber(cell['ceiling items/s']!, 'ceiling items/s')
    const rss = wholeNumber(cell['peak RSS MB']!, 'peak RSS MB')
    for (const [name, value] of Object.entries({ requests, items, p50, p99, ceiling, rss })) {
      assert.ok(value > 0, `${name} is positive: ${value}`)
    }
    assert.equal(items, requests, 'one item per MAC request')
    assert.ok(p99 >= p50, `p99 ${p99} is not below p50 ${p50}`)
    assert.match(cell['MB/s']!, /^(–|\d[\d,]*\.\d)$/)

    const ratio = /^(\d+)%$/.exec(cell['ratio']!)
    assert.ok(ratio, `the ratio is a percentage: ${cell['ratio']}`)
    // Each of the three figures is rounded to a whole number; the percentage by at most 0.5.
    const expected = (100 * requests) / ceiling
    assert.ok(
      Math.abs(Number(ratio[1]) - expected) <= 0.5 + (100 * 1) / ceiling,
      `ratio ${ratio[1]}% is req/s ÷ ceiling = ${expected.toFixed(2)}%`,
    )

    const audit = /^✓ (\d{1,3}(?:,\d{3})*)$/.exec(cell['audit']!)
    assert.ok(audit, `the audit check passed with a count: ${cell['audit']}`)
    const records = Number(audit[1]!.replaceAll(',', ''))
    assert.ok(Number.isInteger(records) && records > 0, `a positive audit count: ${records}`)
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
})

test('the bench harness rejects an unknown argument with status 2 before starting anything', {
  timeout: 30_000,
}, async () => {
  const run = await runBench(['--bogus'], 20_000)
  assert.equal(run.code, 2, `stdout:\n${run.stdout}\nstderr:\n${run.stderr}`)
  assert.match(run.stderr, /--bogus/, 'the message names the argument')
  assert.doesNotMatch(run.stdout, /starting the service/, 'no service was started')
})
