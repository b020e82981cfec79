import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { existsSync, readFileSync, rmSync, statSync } from 'node:fs'
import { createServer, type Server } from 'node:net'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { parse as parseOpenApi, validate as validateOpenApi } from '@readme/openapi-parser'
import postgres from 'postgres'
import {
  createTestDatabase,
  httpRequest,
  NODE_BIN,
  PROJECT_ROOT,
  spawnService,
  startTestService,
  type TestDatabase,
  type TestService,
  testEnv,
  waitFor,
} from '../helpers/service.ts'

/** Flattens Fastify's printRoutes tree into `METHOD /path/{param}` entries. */
function registeredRoutes(tree: string): string[] {
  const prefixes: string[] = []
  const out: string[] = []
  for (const line of tree.split('\n')) {
    const match = /^(.*?)[├└]── (\S+) \(([^)]+)\)$/.exec(line)
    if (!match) continue
    const depth = match[1]!.length / 4
    const path = (prefixes[depth - 1] ?? '') + match[2]!
    prefixes[depth] = path
    // A parameter's regex (`:request(.+)`) is not part of the documented template.
    for (const method of match[3]!.split(', '))
      out.push(`${method} ${path.replace(/:(\w+)(\([^/]*?\))?/g, '{$1}')}`)
  }
  return out
}

describe('OpenAPI document', () => {
  let svc: TestService
  before(async () => {
    svc = await startTestService()
  })
  after(async () => svc?.stop())

  test('is served without a key, validates as OpenAPI 3 and lists every route', async () => {
    const res = await svc.request('GET', '/api/v1/openapi.json')
    assert.equal(res.status, 200)
    assert.match(res.body.openapi, /^3\./)
    const result = await validateOpenApi(structuredClone(res.body))
    assert.equal(result.valid, true, JSON.stringify(result))
    await parseOpenApi(structuredClone(res.body))

    const documented = new Set<string>()
    for (const [path, item] of Object.entries(res.body.paths as Record<string, Record<string, unknown>>)) {
      for (const method of Object.keys(item)) documented.add(`${method.toUpperCase()} ${path}`)
    }
    // Every route the server really has under /api/v1 (bar the document itself) is in the document.
    const registered = registeredRoutes(svc.api.app.printRoutes({ commonPrefix: false })).filter((r) =>
      r.includes(' /api/v1/'),
    )
    const undocumented = registered.filter(
      (r) => !r.startsWith('HEAD ') && !r.endsWith('/openapi.json') && !documented.has(r),
    )
    assert.ok(registered.length >= 7)
    assert.deepEqual(undocumented, [])
    assert.equal(res.body.components.securitySchemes.ApiKey.name, 'X-Api-Key')
  })

  test('the browsable reference is served at /docs', async () => {
    const res = await svc.request('GET', '/docs/')
    assert.equal(res.status, 200)
    assert.match(res.headers.get('content-type') ?? '', /text\/html/)
  })
})

describe('Redis unreachable', () => {
  let svc: TestService
  before(async () => {
    // Nothing listens on port 1: the service must start and serve without Redis.
    svc = await startTestService({ REDIS_URL: 'redis://127.0.0.1:1' })
  })
  after(async () => svc?.stop())

  test('the API keeps serving, health says degraded, and revocation still applies locally', async () => {
    const health = await svc.request('GET', '/api/v1/health')
    assert.equal(health.status, 200)
    assert.equal(health.body.status, 'degraded')
    assert.equal(health.body.redis.status, 'down')
    assert.equal(health.body.database.status, 'up')

    const admin = await svc.createTenant()
    const made = await svc.request('POST', '/api/v1/api-keys', {
      key: admin.key,
      body: { name: 'k', scopes: ['audit:read'] },
    })
    assert.equal(made.status, 201)
    assert.equal((await svc.request('GET', '/api/v1/audit', { key: made.body.key })).status, 200)
    assert.equal(
      (await svc.request('POST', `/api/v1/api-keys/${made.body.id}/revoke`, { key: admin.key })).status,
      200,
    )
    assert.equal((await svc.request('GET', '/api/v1/audit', { key: made.body.key })).status, 401)
  })
})

describe('processes and shutdown', () => {
  let db: TestDatabase
  before(async () => {
    db = await createTestDatabase()
  })
  after(async () => db?.drop())

  test('a SIGTERM as soon as the one process listens (its jobs still starting) still shuts down gracefully', async () => {
    // One process runs the API and, once it listens, starts the background jobs beside it. A
    // SIGTERM sent the moment the log says it listens used to find no handler yet: killed, not stopped.
    const svc = await spawnService(testEnv(db, { KMS_API_PROCESSES: '1', KMS_ROLE: 'all' }))
    const code = await svc.stop('SIGTERM')
    assert.equal(code, 0, svc.output().slice(-3000))
    assert.match(svc.output(), /shutting down: finishing in-flight requests/)
  })

  test('npm start runs the configured number of API processes on one port and stops cleanly on SIGTERM', async () => {
    const env = testEnv(db, { KMS_API_PROCESSES: '2', KMS_BOOTSTRAP: 'true' })
    const svc = await spawnService(env)
    const key = readFileSync(join(env['KMS_DATA_DIR']!, 'bootstrap-api-key'), 'utf8').trim()
    assert.match(key, /^kms_[A-Za-z0-9]{52}$/, 'bootstrap key written on the first start')
    assert.ok(!svc.output().includes(key), 'the key is not in the log')
    // Both API processes answer on the shared port; each reports its pid in the logs.
    const results = await Promise.all(
      Array.from({ length: 40 }, () => httpRequest(svc.baseUrl, 'GET', '/api/v1/tenant', { key })),
    )
    assert.ok(results.every((r) => r.status === 200))
    const listeners = () =>
      new Set([...svc.output().matchAll(/"pid":(\d+),[^\n]*"msg":"Server listening/g)].map((m) => m[1]))
    await waitFor(() => listeners().size >= 2, 'both API processes to log that they listen')
    assert.equal(listeners().size, 2, 'two API processes listen')

    // A request in flight when SIGTERM arrives still gets its answer. A table lock holds the
    // request inside its transaction until both API processes have begun shutting down.
    const blocker = postgres(db.url, { max: 1, onnotice: () => {} })
    const lock = await blocker.reserve()
    await lock`BEGIN`
    await lock`LOCK TABLE audit_log IN ACCESS EXCLUSIVE MODE`
    const inflight = httpRequest(svc.baseUrl, 'POST', '/api/v1/api-keys', {
      key,
      body: { name: 'during-shutdown', scopes: ['audit:read'] },
    })
    await waitFor(async () => {
      const [waiting] = await lock`
        SELECT count(*)::int AS n FROM pg_stat_activity
        WHERE datname = current_database() AND wait_event_type = 'Lock'`
      return waiting!['n'] > 0
    }, 'the request to wait on the audit table lock')
    const exited = svc.stop('SIGTERM')
    await waitFor(
      () => (svc.output().match(/finishing in-flight requests/g) ?? []).length >= 2,
      'both API processes to start shutting down',
    )
    await lock`COMMIT`
    lock.release()
    await blocker.end()

    const answered = await inflight
    assert.equal(answered.status, 201, 'the in-flight request completed')
    assert.equal(await exited, 0, svc.output().slice(-2000))
    const check = postgres(db.url, { max: 1, onnotice: () => {} })
    const [row] = await check`SELECT count(*)::int AS n FROM api_keys WHERE name = 'during-shutdown'`
    await check.end()
    assert.equal(row!['n'], 1)
    assert.match(svc.output(), /shutting down/)
    rmSync(env['KMS_DATA_DIR']!, { recursive: true, force: true })
  })
})

/** Runs `node src/main.ts` as `npm start` does, until it exits by itself. */
function runUntilExit(env: Record<string, string>): Promise<{ code: number | null; lines: string[] }> {
  return new Promise((resolve) => {
    const child = spawn(NODE_BIN, ['src/main.ts'], {
      cwd: PROJECT_ROOT,
      env: { ...process.env, ...env, LOG_LEVEL: 'info' },
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let output = ''
    child.stdout.on('data', (c: Buffer) => {
      output += c.toString()
    })
    child.stderr.on('data', (c: Buffer) => {
      output += c.toString()
    })
    child.once('close', (code) => resolve({ code, lines: output.split('\n').filter((l) => l !== '') }))
  })
}

/** The log lines at error level or above: a failed start has exactly one, naming the cause. */
function errorLines(lines: string[]): { level: number; msg: string; code?: string }[] {
  return lines
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as { level: number; msg: string; code?: string })
    .filter((l) => l.level >= 50)
}

describe('start-up failures: one JSON log line with the cause and the fix, no stack, exit 1', () => {
  let db: TestDatabase
  let occupied: Server
  let port: number
  before(async () => {
    db = await createTestDatabase()
    occupied = createServer()
    await new Promise<void>((resolve) => occupied.listen(0, '127.0.0.1', resolve))
    port = (occupied.address() as { port: number }).port
  })
  after(async () => {
    await new Promise((resolve) => occupied?.close(resolve))
    await db?.drop()
  })

  const assertOneLine = (result: { code: number | null; lines: string[] }, msg: string, code?: string) => {
    assert.equal(result.code, 1, result.lines.join('\n'))
    const errors = errorLines(result.lines)
    assert.equal(errors.length, 1, result.lines.join('\n'))
    assert.equal(errors[0]!.level, 60)
    assert.equal(errors[0]!.msg, msg)
    assert.equal(errors[0]!.code, code)
    // A plain stack line, or one inside a JSON line (an escaped newline before "at").
    const stack = result.lines.filter((l) => /^\s+at /.test(l) || /\\n\s+at /.test(l))
    assert.deepEqual(stack, [], 'no stack trace')
  }

  test('the port is in use (one API process)', async () => {
    const result = await runUntilExit(testEnv(db, { PORT: String(port) }))
    assertOneLine(
      result,
      `port ${port} is in use on 127.0.0.1: set PORT to a free port or stop the other process`,
      'EADDRINUSE',
    )
  })

  test('the port is in use (two API processes and the job process): reported once, nothing restarted', async () => {
    const result = await runUntilExit(testEnv(db, { PORT: String(port), KMS_API_PROCESSES: '2' }))
    assertOneLine(
      result,
      `port ${port} is in use on 127.0.0.1: set PORT to a free port or stop the other process`,
      'EADDRINUSE',
    )
    assert.ok(!result.lines.some((l) => l.includes('starting a replacement')))
  })

  test('the database is unreachable: its address is named, its password is not', async () => {
    const result = await runUntilExit(
      testEnv(db, { DATABASE_URL: 'postgres://kms:hunter2-secret@127.0.0.1:1/kms' }),
    )
    assertOneLine(
      result,
      'cannot reach the database at 127.0.0.1:1 (ECONNREFUSED): check DATABASE_URL and that PostgreSQL is running',
      'ECONNREFUSED',
    )
    assert.ok(!result.lines.some((l) => l.includes('hunter2')))
  })

  test('a bad setting', async () => {
    const result = await runUntilExit(testEnv(db, { KMS_ROLE: 'everything' }))
    assertOneLine(result, 'configuration error: KMS_ROLE must be one of all, api, worker, got "everything"')
  })

  test('no master key in production', async () => {
    const result = await runUntilExit(
      testEnv(db, { NODE_ENV: 'production', KMS_MASTER_KEY: '', KMS_MASTER_KEY_FILE: '' }),
    )
    assertOneLine(
      result,
      'configuration error: NODE_ENV=production needs KMS_MASTER_KEY or KMS_MASTER_KEY_FILE; refusing to generate one',
    )
  })
})

describe('bootstrap on a terminal', () => {
  let db: TestDatabase
  before(async () => {
    db = await createTestDatabase()
  })
  after(async () => db?.drop())

  test('when stdout is a TTY the key is shown on it, outside every JSON log line, and is the one in the file', async () => {
    const env = testEnv(db, { KMS_BOOTSTRAP: 'true', LOG_LEVEL: 'info' })
    const keyFile = join(env['KMS_DATA_DIR']!, 'bootstrap-api-key')
    // util-linux `script` runs the service on a pseudo-terminal, as an operator's shell would.
    const child = spawn('script', ['-qefc', `${NODE_BIN} src/main.ts`, '/dev/null'], {
      cwd: PROJECT_ROOT,
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let output = ''
    child.stdout.on('data', (c: Buffer) => {
      output += c.toString()
    })
    const closed = new Promise<number | null>((resolve) => child.once('close', resolve))
    try {
      await waitFor(() => output.includes('Server listening at'), 'the service to listen', 60_000)
      const key = readFileSync(keyFile, 'utf8').trim()
      const lines = output.split(/\r?\n/)
      const withKey = lines.filter((l) => l.includes(key))
      assert.equal(withKey.length, 1, 'shown once')
      assert.ok(!withKey[0]!.trimStart().startsWith('{'), 'not inside a log line')
      assert.ok(lines.some((l) => l.includes('Its full-scope API key, shown this once')))
    } finally {
      const pid = /"pid":(\d+)/.exec(output)?.[1]
      if (pid) process.kill(Number(pid), 'SIGTERM')
      else child.kill('SIGKILL')
      await closed
      rmSync(env['KMS_DATA_DIR']!, { recursive: true, force: true })
    }
  })
})

describe('production bootstrap: off unless asked for, and the key never enters the log', () => {
  let db: TestDatabase
  before(async () => {
    db = await createTestDatabase()
  })
  after(async () => db?.drop())

  test('without KMS_BOOTSTRAP no tenant is created and no key file written', async () => {
    // testEnv turns bootstrapping off; '' restores the default, which production must keep off.
    const env = testEnv(db, { NODE_ENV: 'production', KMS_BOOTSTRAP: '' })
    const keyFile = join(env['KMS_DATA_DIR']!, 'bootstrap-api-key')
    const svc = await spawnService(env)
    try {
      const check = postgres(db.url, { max: 1, onnotice: () => {} })
      const [row] = await check`SELECT count(*)::int AS n FROM tenants`
      await check.end()
      assert.equal(row!['n'], 0)
      assert.equal(existsSync(keyFile), false)
      assert.match(svc.output(), /no tenant and KMS_BOOTSTRAP is off/)
    } finally {
      const code = await svc.stop('SIGTERM')
      assert.equal(code, 0, svc.output().slice(-3000))
    }
  })

  test('with KMS_BOOTSTRAP=true the key goes to a mode-0600 file that the log names, and into no log line', async () => {
    const keyFile = join(PROJECT_ROOT, 'data', 'test', `${db.name}-keys`, 'first-key')
    const env = testEnv(db, {
      NODE_ENV: 'production',
      KMS_BOOTSTRAP: 'true',
      KMS_BOOTSTRAP_KEY_FILE: keyFile,
    })
    const svc = await spawnService(env)
    try {
      assert.equal(statSync(keyFile).mode & 0o777, 0o600)
      const key = readFileSync(keyFile, 'utf8').trim()
      assert.match(key, /^kms_[A-Za-z0-9]{52}$/)
      const me = await httpRequest(svc.baseUrl, 'GET', '/api/v1/tenant', { key })
      assert.equal(me.status, 200)
      assert.equal(me.body.name, 'default')

      const lines = svc.output().split('\n')
      assert.deepEqual(
        lines.filter((l) => l.includes(key) || /kms_[A-Za-z0-9]{52}/.test(l)),
        [],
        'no output line carries the key',
      )
      const announced = lines.filter((l) => l.includes('created the tenant'))
      assert.equal(announced.length, 1)
      assert.equal(JSON.parse(announced[0]!).keyFile, keyFile)
    } finally {
      assert.equal(await svc.stop('SIGTERM'), 0)
      rmSync(join(PROJECT_ROOT, 'data', 'test', `${db.name}-keys`), { recursive: true, force: true })
    }
  })
})
