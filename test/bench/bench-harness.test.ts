import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'node:test'
import { floorRoutes, startFloor } from '../../bench/lib/floor.ts'
import { freePort } from '../../bench/lib/service-under-test.ts'
import { ADMIN_DATABASE_URL, NODE_BIN, PROJECT_ROOT, REDIS_URL } from '../helpers/service.ts'

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
  '÷ ceiling',
  'floor items/s',
  '÷ floor',
  'target',
  'API µs/req',
  'PG µs/req',
  'load µs/req',
  'floor µs/req',
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

    const ratio = /^(\d+)%$/.exec(cell['÷ ceiling']!)
    assert.ok(ratio, `the ratio is a percentage: ${cell['÷ ceiling']}`)
    // Each of the three figures is rounded to a whole number; the percentage by at most 0.5.
    const expected = (100 * requests) / ceiling
    assert.ok(
      Math.abs(Number(ratio[1]) - expected) <= 0.5 + (100 * 1) / ceiling,
      `ratio ${ratio[1]}% is req/s ÷ ceiling = ${expected.toFixed(2)}%`,
    )

    // The floor's row, in the same run: its own rate, service ÷ floor, and CPU per request.
    const floor = wholeNumber(cell['floor items/s']!, 'floor items/s')
    assert.ok(floor > 0, `the floor's rate is positive: ${floor}`)
    const floorRatio = /^(\d+)%$/.exec(cell['÷ floor']!)
    assert.ok(floorRatio, `service ÷ floor is a percentage: ${cell['÷ floor']}`)
    assert.ok(
      Math.abs(Number(floorRatio[1]) - (100 * requests) / floor) <= 0.5 + (100 * 1) / floor,
      `÷ floor ${floorRatio[1]}% is req/s ÷ floor = ${((100 * requests) / floor).toFixed(2)}%`,
    )
    for (const name of ['API µs/req', 'PG µs/req', 'load µs/req', 'floor µs/req']) {
      assert.ok(wholeNumber(cell[name]!, name) > 0, `${name} is positive: ${cell[name]}`)
    }
    assert.match(
      run.stdout,
      /^HTTP floor: the faster of 1 and \d+ processes; /m,
      'the floor processes are named',
    )
    assert.match(block, /^- HTTP floor: /m, 'and written under the table')

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

test('the HTTP floor answers each route with the configured status, content type and size', {
  timeout: 60_000,
}, async () => {
  const floor = await startFloor({ processes: 1, port: await freePort() })
  try {
    const cycle = [
      { method: 'POST', path: '/api/v1/keys/k/mac' },
      { method: 'POST', path: '/api/v1/encrypt' },
      { method: 'POST', path: '/api/v1/encrypt' },
      { method: 'GET', path: '/api/v1/keys?limit=20' },
    ]
    const routes = floorRoutes(
      cycle,
      [{ kind: 'mac' }, { kind: 'encrypt', bytes: 64 }, { kind: 'encrypt', bytes: 64 }, undefined],
      1,
      [
        { status: 200, contentType: 'application/json; charset=utf-8', bytes: 1234 },
        { status: 201, contentType: 'application/octet-stream', bytes: 4000 },
        { status: 201, contentType: 'application/octet-stream', bytes: 5000 },
        { status: 200, contentType: 'application/json; charset=utf-8', bytes: 300 },
      ],
    )
    assert.equal(routes.length, 3, 'one route per method and path')
    assert.equal(routes[1]!.answer.bytes, 4500, 'requests sharing a path share the mean answer size')
    assert.equal(routes[2]!.work, undefined, 'a read does no crypto')
    await floor.configure(routes)

    const json = await fetch(`${floor.baseUrl}/api/v1/keys/k/mac`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ data: 'AAAA' }),
    })
    assert.equal(json.status, 200)
    assert.equal(json.headers.get('content-type'), 'application/json; charset=utf-8')
    const text = await json.text()
    assert.equal(Buffer.byteLength(text), 1234, "the JSON answer has the service answer's size")
    assert.equal(typeof JSON.parse(text).r, 'string', 'and is JSON')

    const binary = await fetch(`${floor.baseUrl}/api/v1/encrypt`, {
      method: 'POST',
      headers: { 'content-type': 'application/octet-stream' },
      body: new Uint8Array(64),
    })
    assert.equal(binary.status, 201)
    assert.equal(binary.headers.get('content-type'), 'application/octet-stream')
    assert.equal((await binary.arrayBuffer()).byteLength, 4500)

    // The floor parses a JSON body as the service must: a broken one is not answered as good.
    const broken = await fetch(`${floor.baseUrl}/api/v1/keys/k/mac`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"data":',
    })
    assert.equal(broken.status, 500)
    await broken.arrayBuffer()

    const unknown = await fetch(`${floor.baseUrl}/api/v1/other`, { method: 'POST', body: '{}' })
    assert.equal(unknown.status, 404, 'a request outside the configured cycle is not served')
    await unknown.arrayBuffer()
  } finally {
    await floor.stop()
  }
})

test('the bench harness runs a quick scenario against the zero-configuration start', {
  timeout: 240_000,
}, async () => {
  const dir = mkdtempSync(join(tmpdir(), 'kms-bench-zero-'))
  const out = join(dir, 'results.md')
  try {
    const run = await runBench(
      ['--quick', '--zero-config', '--only=mac-hmac-sha256', '--floor-processes=1', `--out=${out}`],
      180_000,
    )
    assert.equal(run.signal, null, `the bench was killed after ${Math.round(run.ms)} ms:\n${run.stdout}`)
    assert.equal(run.code, 0, `stdout:\n${run.stdout}\nstderr:\n${run.stderr}`)
    assert.match(run.stdout, /API processes: 1;/, 'the embedded database means one process')
    const text = readFileSync(out, 'utf8')
    assert.equal(text.indexOf('<!-- bench:begin -->'), -1, 'the main block is not written')
    const begin = text.indexOf('<!-- bench:zero-config:begin -->')
    const end = text.indexOf('<!-- bench:zero-config:end -->')
    assert.ok(begin >= 0 && end > begin, `its own block:\n${text}`)
    const block = text.slice(begin, end)
    assert.match(block, /\(embedded PGlite\)/)
    const row = block.split('\n').find((line) => line.startsWith('| MAC HMAC-SHA256 |'))
    assert.ok(row, `the scenario row:\n${block}`)
    const cell = Object.fromEntries(HEADERS.map((name, i) => [name, cellsOf(row)[i]!]))
    assert.equal(cell['PG µs/req'], '–', "no PostgreSQL server process: its CPU is the service's")
    assert.match(cell['audit']!, /^✓ \d/, 'the audit count is exact on the embedded database too')
    assert.match(cell['÷ floor']!, /^\d+%$/)
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
})
