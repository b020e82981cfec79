import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { performance } from 'node:perf_hooks'
import { type TestContext, test } from 'node:test'
import postgres from 'postgres'
import { cpuBetween, pidsNamed, readCpu } from '../../bench/lib/cpu-usage.ts'
import { floorRoutes, startFloor } from '../../bench/lib/floor.ts'
import { type LoadResult, runLoad } from '../../bench/lib/load.ts'
import { SCENARIOS, SWEEP_CONNECTIONS, SWEEP_TARGETS } from '../../bench/lib/scenarios.ts'
import { freePort, serviceBackendPids } from '../../bench/lib/service-under-test.ts'
import {
  ADMIN_DATABASE_URL,
  createTestDatabase,
  NODE_BIN,
  PROJECT_ROOT,
  REDIS_URL,
} from '../helpers/service.ts'

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

test('the bench harness runs one quick scenario with a short sweep and writes well-formed results tables', {
  timeout: 240_000,
}, async () => {
  const dir = mkdtempSync(join(tmpdir(), 'kms-bench-harness-'))
  const out = join(dir, 'results.md')
  try {
    const run = await runBench(
      [
        '--quick',
        '--only=mac-hmac-sha256',
        '--processes=1',
        '--sweep=8,128',
        '--sweep-seconds=1',
        `--out=${out}`,
      ],
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
    assert.match(block, /\(quick run, with the connections sweep\)/)

    // Two tables, one after the other: the scenarios', then the sweep's.
    const tables = block
      .split(/\n(?!\|)/)
      .map((chunk) => chunk.split('\n').filter((line) => line.startsWith('|')))
      .filter((lines) => lines.length > 0)
    assert.equal(tables.length, 2, `the scenario table and the sweep table:\n${block}`)
    const [table, sweepTable] = tables as [string[], string[]]
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
    assert.equal(cell['conns'], '32', "the scenario's connections")

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

    // The sweep: one row per connection count, the floor at the same count, the target at 128.
    assert.match(run.stdout, /^connections sweep\nscenario +conns +req\/s/m, 'the sweep table is printed')
    assert.equal(sweepTable.length, 4, `header, separator and two rows:\n${sweepTable.join('\n')}`)
    assert.deepEqual(cellsOf(sweepTable[0]!), SWEEP_HEADERS)
    const sweep = sweepTable
      .slice(2)
      .map((line) => Object.fromEntries(SWEEP_HEADERS.map((name, i) => [name, cellsOf(line)[i]!])))
    assert.deepEqual(
      sweep.map((r) => [r['scenario'], r['conns']]),
      [
        ['MAC HMAC-SHA256', '8'],
        ['MAC HMAC-SHA256', '128'],
      ],
    )
    for (const r of sweep) {
      const rate = wholeNumber(r['req/s']!, 'sweep req/s')
      const floorRate = wholeNumber(r['floor req/s']!, 'sweep floor req/s')
      assert.ok(rate > 0 && floorRate > 0)
      const pct = /^(\d+)%$/.exec(r['÷ floor']!)
      assert.ok(pct, `÷ floor is a percentage: ${r['÷ floor']}`)
      assert.ok(Math.abs(Number(pct[1]) - (100 * rate) / floorRate) <= 0.5 + 100 / floorRate)
      milliseconds(r['p50 ms']!, 'p50')
      milliseconds(r['p99 ms']!, 'p99')
      for (const name of ['API µs/req', 'PG µs/req', 'load µs/req', 'floor µs/req']) {
        assert.ok(wholeNumber(r[name]!, name) > 0, `${name} is positive: ${r[name]}`)
      }
      assert.match(r['floor processes']!, /^\d+$/)
      assert.match(r['audit']!, /^✓ \d/, 'every sweep run leaves exactly one audit record per answer')
    }
    assert.equal(sweep[0]!['target'], '', 'no target at 8 connections')
    assert.match(sweep[1]!['target']!, /^≥ 60% of floor, API ≤ 35 µs [✓✗]$/, 'the target at 128')
    // The scenario row gives the sweep's best rate and its connection count.
    const best = sweep.reduce((a, b) =>
      wholeNumber(b['req/s']!, 'req/s') > wholeNumber(a['req/s']!, 'req/s') ? b : a,
    )
    assert.equal(cell['saturated req/s'], `${best['req/s']} @${best['conns']}`)
    assert.equal(cell['saturated ÷ floor'], best['÷ floor'])
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

/**
 * The load generator's timing. autocannon calls back on its 1-second sampling tick, well after
 * the last answer; runLoad once timed runs to that callback, so every run lasted a whole number of
 * seconds and rates were quantised (MAC: 4,032 answers ÷ 1.0055 s). These tests drive runLoad
 * against a local node:http server with an injected clock and check which clock readings its
 * figures come from: no assertion on how fast anything is.
 */

interface CountingServer {
  url: string
  /** Requests answered so far (any status). */
  answered(): number
  /** 2xx answers so far. */
  ok(): number
}

/** A node:http server that answers every request (status from `statusOf(n)`, n from 1), closed after the test. */
async function countingServer(
  t: TestContext,
  statusOf: (n: number) => number = () => 200,
): Promise<CountingServer> {
  let answered = 0
  let ok = 0
  const server = createServer((request, response) => {
    request.resume()
    request.on('end', () => {
      const status = statusOf(answered + 1)
      // Counted before the answer leaves: a client reading taken on its arrival sees it counted.
      answered++
      if (status >= 200 && status < 300) ok++
      response.writeHead(status, { 'content-type': 'application/json' })
      response.end('{"ok":true}')
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.after(
    () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      }),
  )
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    answered: () => answered,
    ok: () => ok,
  }
}

interface Reading {
  at: number
  /** What the server had answered when the reading was taken. */
  answered: number
}

/**
 * A manual clock for runLoad: each reading is one millisecond after the previous one, whatever
 * real time passed, and is recorded with the server's answer count at that moment. The figures
 * then depend only on which readings runLoad used (the start, the last answer, the callback),
 * never on how fast the machine was.
 */
function recordingClock(server: CountingServer): { now: () => number; readings: Reading[] } {
  const readings: Reading[] = []
  return {
    readings,
    now() {
      const at = readings.length + 1
      readings.push({ at, answered: server.answered() })
      return at
    },
  }
}

const cycle = [{ method: 'POST' as const, path: '/op', body: '{"data":"AAAA"}' }]

/** The figures come from the start and the last answer, not from the completion callback. */
function assertTimedToLastAnswer(result: LoadResult, readings: readonly Reading[]): Reading {
  assert.equal(result.startedAt, readings[0]!.at, 'the start is the first reading')
  assert.equal(readings[0]!.answered, 0, 'taken before the server answered anything')
  assert.equal(result.finishedAt, readings.at(-1)!.at, "the completion callback is runLoad's last reading")
  const last = readings.find((r) => r.at === result.lastAnswerAt)
  assert.ok(last, 'the last answer is recorded as a reading of the clock')
  assert.ok(
    result.lastAnswerAt < result.finishedAt,
    'the last answer came before the completion callback, which must not end the run',
  )
  assert.equal(
    result.elapsedS,
    (result.lastAnswerAt - result.startedAt) / 1000,
    'elapsed: start to last answer',
  )
  assert.notEqual(
    result.elapsedS,
    (result.finishedAt - result.startedAt) / 1000,
    'not start to the completion callback (the quantised figure)',
  )
  // Readings are numbered: the run spans the readings from the start to the last answer.
  const span = readings.indexOf(last) - readings.indexOf(readings[0]!)
  assert.ok(
    Math.abs(result.requestsPerSecond * span - result.ok * 1000) <= 1e-9 * result.ok * 1000,
    `answers per span of readings, in seconds: ${result.requestsPerSecond} × ${span} ms`,
  )
  return last
}

test('runLoad (amount) times a run to its last answer and counts every answer', {
  timeout: 60_000,
}, async (t) => {
  const server = await countingServer(t)
  const clock = recordingClock(server)
  const amount = 600
  const result = await runLoad({
    baseUrl: server.url,
    apiKey: 'k',
    connections: 4,
    cycle,
    amount,
    now: clock.now,
  })
  assert.equal(
    server.answered(),
    amount,
    'the server answered exactly the amount (whole cycles on every connection)',
  )
  assert.equal(result.ok, server.answered(), 'every answer was counted')
  assert.equal(result.non2xx, 0)
  assert.equal(result.errors, 0)
  const last = assertTimedToLastAnswer(result, clock.readings)
  assert.equal(
    last.answered,
    amount,
    'the last answer reading was taken after the server answered the last request',
  )
  // Every answer read the clock: the last answer is the latest reading but the completion's.
  assert.equal(
    clock.readings.at(-2)!.at,
    result.lastAnswerAt,
    'no reading between the last answer and the callback',
  )
  t.diagnostic(
    `${result.ok} answers within ${result.lastAnswerAt - result.startedAt} clock readings; autocannon called back ${result.finishedAt - result.lastAnswerAt} readings later`,
  )
})

test('runLoad counts an answer other than 2xx as the end of the run but not in the rate', {
  timeout: 60_000,
}, async (t) => {
  // Every third request is refused: the run lasts until its last answer, whatever its status.
  const server = await countingServer(t, (n) => (n % 3 === 0 ? 503 : 200))
  const clock = recordingClock(server)
  const result = await runLoad({
    baseUrl: server.url,
    apiKey: 'k',
    connections: 3,
    cycle,
    amount: 300,
    now: clock.now,
  })
  assert.equal(server.answered(), 300)
  assert.equal(result.ok, server.ok(), 'ok counts the 2xx answers')
  assert.equal(result.non2xx, server.answered() - server.ok(), 'non2xx the others')
  assert.equal(result.statusCodes['503'], result.non2xx)
  const last = assertTimedToLastAnswer(result, clock.readings)
  assert.equal(last.answered, 300)
})

test('runLoad (duration) rates the answers over the time to the last answer', {
  timeout: 60_000,
}, async (t) => {
  const server = await countingServer(t)
  const clock = recordingClock(server)
  const connections = 4
  const result = await runLoad({
    baseUrl: server.url,
    apiKey: 'k',
    connections,
    cycle,
    durationS: 1,
    now: clock.now,
  })
  assert.ok(result.ok > 0, 'something was answered')
  assert.equal(result.non2xx, 0)
  assert.ok(result.ok <= server.answered(), 'no answer counted that the server did not give')
  assert.ok(
    server.answered() - result.ok <= connections,
    `at most one request per connection abandoned in flight: ${server.answered()} answered, ${result.ok} counted`,
  )
  const last = assertTimedToLastAnswer(result, clock.readings)
  assert.ok(
    last.answered >= result.ok,
    'the last answer reading came after the server had given every counted answer',
  )
})

test('the connections sweep covers the small operations and MAC, and 128 connections', () => {
  const ids = new Set(SCENARIOS.map((s) => s.id))
  for (const id of Object.keys(SWEEP_TARGETS)) assert.ok(ids.has(id), `swept scenario ${id} exists`)
  for (const id of [
    'encrypt-64-b',
    'decrypt-64-b',
    'sign-ed25519',
    'verify-ed25519',
    'sign-ec-p256',
    'verify-ec-p256',
    'generate-data-key',
    'mac-hmac-sha256',
  ]) {
    assert.ok(id in SWEEP_TARGETS, `${id} is swept`)
  }
  assert.deepEqual([...SWEEP_CONNECTIONS], [8, 32, 128, 256])
})

test("PostgreSQL CPU is read from the service's own backends, not the bench's", {
  timeout: 60_000,
}, async (t) => {
  const db = await createTestDatabase()
  const service = postgres(db.url, {
    max: 1,
    onnotice: () => {},
    connection: { application_name: 'kms-api' },
  })
  const bench = postgres(db.url, {
    max: 1,
    onnotice: () => {},
    connection: { application_name: 'kms-bench' },
  })
  t.after(async () => {
    await Promise.all([service.end({ timeout: 5 }), bench.end({ timeout: 5 })])
    await db.drop()
  })
  const [own] = await service<{ pid: number }[]>`SELECT pg_backend_pid() AS pid`
  const [asking] = await bench<{ pid: number }[]>`SELECT pg_backend_pid() AS pid`
  const pids = await serviceBackendPids(bench, 'kms-bench')
  assert.deepEqual(pids, [own!.pid], "the database's one other client backend: the service's")
  assert.ok(!pids.includes(asking!.pid), "the bench's own connection is not counted")
  // The server runs on this machine (as the bench expects): its backend is a local `postgres` process.
  assert.deepEqual(pidsNamed(pids, 'postgres'), pids)
  assert.deepEqual(pidsNamed([process.pid], 'postgres'), [], 'a process of another name is left out')
  // A backend that appears between the readings counts from zero.
  assert.equal(
    cpuBetween(
      new Map([[1, 2]]),
      new Map([
        [1, 2.5],
        [2, 0.25],
      ]),
    ),
    0.75,
  )
  const before = readCpu(pids)
  await service`SELECT count(*) FROM generate_series(1, 3000000)`
  assert.ok(cpuBetween(before, readCpu(pids)) > 0, "the service's query is counted")
})
