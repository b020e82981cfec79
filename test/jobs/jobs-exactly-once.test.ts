import assert from 'node:assert/strict'
import { type ChildProcess, spawn } from 'node:child_process'
import { createConnection, createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { after, describe, test } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import postgres from 'postgres'
import { b64, mapConcurrently, uniqueName } from '../helpers/api-client.ts'
import {
  createTestDatabase,
  type HttpResult,
  httpRequest,
  NODE_BIN,
  PROJECT_ROOT,
  runCli,
  type SpawnedService,
  spawnService,
  type TestDatabase,
  testEnv,
  waitFor,
} from '../helpers/service.ts'

/**
 * Background jobs across real processes (docs/jobs.md): `node src/main.ts` with KMS_ROLE=api
 * and KMS_ROLE=worker, BullMQ on a private redis-server of this file (no persistence, so a
 * restart comes back empty, and restarting it disturbs no other test), PostgreSQL as the state.
 *
 * - Three worker processes rotate ~40 due keys, twice, with Redis restarted empty during the
 *   first round: every key gets exactly one version per round and one audit record per version.
 * - With Redis down the API keeps serving and refuses an expired key; the rotation and the
 *   expiry that fell due meanwhile happen once Redis is back, without restarting anything.
 * - SIGTERM stops a worker process with exit code 0.
 *
 * Due times are moved into the past in the database (arranging state); what is asserted is the
 * service's behaviour. No timing is asserted: every wait is a generous poll.
 */

const REDIS_SERVER = '/usr/bin/redis-server'
const WAIT_MS = 30_000

type Sql = ReturnType<typeof postgres>

// Everything started here, stopped in `after` whatever happened.
const cleanups: (() => Promise<unknown>)[] = []
after(async () => {
  for (const cleanup of cleanups.reverse()) {
    try {
      await cleanup()
    } catch {
      // Best effort: the rest must still be cleaned up.
    }
  }
})

async function freePort(): Promise<number> {
  const server = createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const address = server.address()
  await new Promise<void>((resolve) => server.close(() => resolve()))
  if (!address || typeof address === 'string') throw new Error('no port')
  return address.port
}

/** Whether a redis-server answers PING on the port. */
function redisPing(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createConnection({ host: '127.0.0.1', port })
    const done = (ok: boolean) => {
      socket.destroy()
      resolve(ok)
    }
    socket.setTimeout(1000, () => done(false))
    socket.once('error', () => done(false))
    socket.once('connect', () => socket.write('PING\r\n'))
    socket.once('data', (data) => done(data.toString().startsWith('+PONG')))
  })
}

/** A private, non-persistent redis-server on a fixed port: stopping and starting it again empties it. */
class PrivateRedis {
  readonly port: number
  private child: ChildProcess | undefined
  private exited: Promise<void> | undefined

  constructor(port: number) {
    this.port = port
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`
  }

  async start(): Promise<void> {
    if (this.child) throw new Error('redis-server already running')
    const child = spawn(
      REDIS_SERVER,
      [
        '--port',
        String(this.port),
        '--bind',
        '127.0.0.1',
        '--save',
        '',
        '--appendonly',
        'no',
        '--dir',
        tmpdir(),
        '--daemonize',
        'no',
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    )
    let output = ''
    child.stdout!.on('data', (c: Buffer) => {
      output += c.toString()
    })
    child.stderr!.on('data', (c: Buffer) => {
      output += c.toString()
    })
    this.child = child
    this.exited = new Promise((resolve) => child.once('exit', () => resolve()))
    await waitFor(
      async () => {
        if (child.exitCode !== null) throw new Error(`redis-server exited:\n${output}`)
        return redisPing(this.port)
      },
      `redis-server on port ${this.port}`,
      WAIT_MS,
    )
  }

  /** Kills the server (SIGKILL: a crash) and waits until it is gone and the port refuses. */
  async stop(signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
    const child = this.child
    if (!child) return
    if (child.exitCode === null && child.signalCode === null) child.kill(signal)
    await this.exited
    this.child = undefined
    await waitFor(
      async () => !(await redisPing(this.port)),
      `redis-server on port ${this.port} gone`,
      WAIT_MS,
    )
  }

  async restart(): Promise<void> {
    await this.stop()
    await this.start()
  }
}

async function startPrivateRedis(): Promise<PrivateRedis> {
  const redis = new PrivateRedis(await freePort())
  cleanups.push(() => redis.stop('SIGTERM'))
  await redis.start()
  return redis
}

interface WorkerProcess {
  name: string
  child: ChildProcess
  output(): string
  /** The JSON log lines printed so far. */
  // biome-ignore lint/suspicious/noExplicitAny: pino log lines; readers check the fields they use
  logs(): any[]
  stop(signal?: NodeJS.Signals): Promise<number | null>
}

/** `node src/main.ts` with KMS_ROLE=worker (no HTTP), waited on until its jobs have started. */
async function spawnWorker(env: Record<string, string>, name: string): Promise<WorkerProcess> {
  const child = spawn(NODE_BIN, ['src/main.ts'], {
    cwd: PROJECT_ROOT,
    env: { ...process.env, ...env, KMS_ROLE: 'worker', LOG_LEVEL: 'info' },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let output = ''
  child.stdout!.on('data', (c: Buffer) => {
    output += c.toString()
  })
  child.stderr!.on('data', (c: Buffer) => {
    output += c.toString()
  })
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)))
  const worker: WorkerProcess = {
    name,
    child,
    output: () => output,
    logs: () =>
      output
        .split('\n')
        .filter((line) => line.startsWith('{'))
        .flatMap((line) => {
          try {
            return [JSON.parse(line)]
          } catch {
            return []
          }
        }),
    async stop(signal = 'SIGTERM') {
      if (child.exitCode !== null || child.signalCode !== null) return child.exitCode
      child.kill(signal)
      return exited
    },
  }
  cleanups.push(() => worker.stop('SIGKILL'))
  await waitFor(
    () => {
      if (child.exitCode !== null) throw new Error(`worker ${name} exited with ${child.exitCode}:\n${output}`)
      return output.includes('background jobs started')
    },
    `worker ${name} to start its jobs`,
    60_000,
  )
  return worker
}

async function spawnApi(env: Record<string, string>): Promise<SpawnedService> {
  const api = await spawnService({ ...env, KMS_ROLE: 'api' })
  cleanups.push(() => api.stop('SIGKILL'))
  return api
}

interface Deployment {
  db: TestDatabase
  env: Record<string, string>
  sql: Sql
}

async function createDeployment(redis: PrivateRedis): Promise<Deployment> {
  const db = await createTestDatabase()
  cleanups.push(() => db.drop())
  const env = testEnv(db, { REDIS_URL: redis.url, KMS_JOB_SWEEP_MS: '100' })
  const sql = postgres(db.url, { max: 2, onnotice: () => {} })
  cleanups.push(() => sql.end({ timeout: 5 }))
  return { db, env, sql }
}

/** A tenant made the way an operator makes one: the CLI against the deployment's database. */
async function createTenantKey(env: Record<string, string>): Promise<string> {
  const result = await runCli(['create-tenant', '--name', uniqueName('jobs')], env)
  assert.equal(result.code, 0, result.stderr)
  return JSON.parse(result.stdout).apiKey.key as string
}

function tenantClient(baseUrl: string, apiKey: string) {
  const call = (method: string, path: string, body?: unknown): Promise<HttpResult> =>
    httpRequest(baseUrl, method, `/api/v1${path}`, {
      key: apiKey,
      ...(body === undefined ? {} : { body }),
    })
  const createKey = async (keyType: string, algorithm: string, extra: Record<string, unknown> = {}) => {
    const res = await call('POST', '/keys', {
      name: uniqueName(algorithm.toLowerCase()),
      keyType,
      algorithm,
      ...extra,
    })
    assert.equal(res.status, 201, res.text)
    return res.body.id as string
  }
  const setDaily = async (keyId: string) => {
    const res = await call('POST', `/keys/${keyId}/rotation-policy`, { frequency: 'Daily' })
    assert.equal(res.status, 200, res.text)
  }
  return { call, createKey, setDaily }
}

/** Arranging state: the keys' policies fall due now. */
async function makeDue(sql: Sql, keyIds: readonly string[]): Promise<void> {
  const updated = await sql`
    UPDATE keys SET next_rotation_at = now() - interval '1 minute' WHERE id IN ${sql(keyIds)}`
  assert.equal(updated.count, keyIds.length)
}

async function versionsOf(sql: Sql, keyIds: readonly string[]): Promise<Map<string, number[]>> {
  const rows = await sql<{ key_id: string; versions: number[] }[]>`
    SELECT key_id, array_agg(version ORDER BY version) AS versions
    FROM key_versions WHERE key_id IN ${sql(keyIds)} GROUP BY key_id`
  return new Map(rows.map((row) => [row.key_id, row.versions]))
}

async function totalVersions(sql: Sql, keyIds: readonly string[]): Promise<number> {
  const [row] = await sql<{ n: number }[]>`
    SELECT count(*)::int AS n FROM key_versions WHERE key_id IN ${sql(keyIds)}`
  return row!.n
}

/** Every key at `version`, with its next rotation in the future (the round is over). */
async function roundDone(sql: Sql, keyIds: readonly string[], version: number): Promise<boolean> {
  const [row] = await sql<{ n: number }[]>`
    SELECT count(*)::int AS n FROM keys
    WHERE id IN ${sql(keyIds)} AND current_version >= ${version} AND next_rotation_at > now()`
  return row!.n === keyIds.length
}

async function currentVersion(sql: Sql, keyId: string): Promise<number> {
  const [row] = await sql<{ current_version: number }[]>`SELECT current_version FROM keys WHERE id = ${keyId}`
  return row!.current_version
}

describe('rotation sweeps run exactly once across three worker processes and a Redis restart', () => {
  const KEYS = 42
  const ROUNDS = 2
  let redis: PrivateRedis
  let dep: Deployment
  let keyIds: string[]
  let workers: WorkerProcess[]

  test('every due key rotates once per round, audited once per version', async (t) => {
    redis = await startPrivateRedis()
    dep = await createDeployment(redis)
    const api = await spawnApi(dep.env)
    const client = tenantClient(api.baseUrl, await createTenantKey(dep.env))

    const kinds = [
      ['Encryption', 'ML-KEM-768'],
      ['HMAC', 'HMAC-SHA256'],
      ['Signing', 'Ed25519'],
    ] as const
    keyIds = await mapConcurrently(
      Array.from({ length: KEYS }, (_, i) => kinds[i % kinds.length]!),
      8,
      async ([keyType, algorithm]) => {
        const id = await client.createKey(keyType, algorithm)
        await client.setDaily(id)
        return id
      },
    )
    assert.equal(await totalVersions(dep.sql, keyIds), KEYS)

    workers = await Promise.all([1, 2, 3].map((n) => spawnWorker(dep.env, `w${n}`)))

    // Round 1: everything due; Redis restarted empty as soon as the first rotations land.
    await makeDue(dep.sql, keyIds)
    await waitFor(async () => (await totalVersions(dep.sql, keyIds)) > KEYS, 'the first rotations', WAIT_MS)
    const before = await totalVersions(dep.sql, keyIds)
    await redis.restart()
    t.diagnostic(`Redis restarted after ${before - KEYS} of ${KEYS} round-1 rotations`)
    await waitFor(() => roundDone(dep.sql, keyIds, 2), 'every key at version 2', WAIT_MS)

    // Round 2: only the schedulers the workers put back into the empty Redis can run it.
    await makeDue(dep.sql, keyIds)
    await waitFor(() => roundDone(dep.sql, keyIds, 3), 'every key at version 3', WAIT_MS)

    // Let many more sweeps run: nothing is due, so nothing may change.
    await sleep(1500)

    const expected = Array.from({ length: 1 + ROUNDS }, (_, i) => i + 1)
    const versions = await versionsOf(dep.sql, keyIds)
    assert.equal(versions.size, KEYS)
    for (const id of keyIds) assert.deepEqual(versions.get(id), expected, `versions of key ${id}`)

    const keys = await dep.sql<{ id: string; current_version: number; next_rotation_at: Date }[]>`
      SELECT id, current_version, next_rotation_at FROM keys WHERE id IN ${dep.sql(keyIds)}`
    assert.equal(keys.length, KEYS)
    for (const key of keys) {
      assert.equal(key.current_version, 1 + ROUNDS, `current_version of key ${key.id}`)
      assert.ok(key.next_rotation_at.getTime() > Date.now(), `key ${key.id} is scheduled in the future`)
    }

    const audit = await dep.sql<{ resource: string; key_version: number; actor: string; outcome: string }[]>`
      SELECT resource, key_version, actor, outcome FROM audit_log WHERE action = 'keys.rotate'`
    assert.equal(audit.length, KEYS * ROUNDS, 'one keys.rotate record per rotation, and no failures')
    const seen = new Set<string>()
    for (const row of audit) {
      assert.equal(row.outcome, 'success')
      assert.equal(row.actor, 'system:rotation-policy')
      const id = `${row.resource}#${row.key_version}`
      assert.ok(!seen.has(id), `one record for ${id}`)
      seen.add(id)
    }
    for (const keyId of keyIds) {
      for (const version of expected.slice(1)) assert.ok(seen.has(`key:${keyId}#${version}`))
    }

    // The sweeps' own account agrees: the rotations they logged add up to the versions added.
    const sweepsOf = (w: WorkerProcess) => w.logs().filter((l) => l.msg === 'rotation sweep')
    const rotatedBy = (w: WorkerProcess) => sweepsOf(w).reduce((sum, l) => sum + (l.rotated as number), 0)
    await waitFor(
      () => workers.reduce((sum, w) => sum + rotatedBy(w), 0) >= KEYS * ROUNDS,
      'the sweep logs',
      WAIT_MS,
    )
    assert.equal(
      workers.reduce((sum, w) => sum + rotatedBy(w), 0),
      KEYS * ROUNDS,
    )
    const busy = workers.filter((w) => rotatedBy(w) > 0)
    t.diagnostic(
      `rotations per worker: ${workers.map((w) => `${w.name}=${rotatedBy(w)} (${sweepsOf(w).length} sweeps)`).join(', ')}; ` +
        `${busy.length} of ${workers.length} workers rotated keys`,
    )
    for (const w of workers)
      assert.equal(w.child.exitCode, null, `worker ${w.name} still running:\n${w.output()}`)
  })

  test('SIGTERM stops each worker process with exit code 0', async () => {
    assert.ok(workers, 'the previous test started the workers')
    const codes = await Promise.all(workers.map((w) => w.stop('SIGTERM')))
    assert.deepEqual(codes, [0, 0, 0], workers.map((w) => w.output().slice(-2000)).join('\n---\n'))
  })
})

describe('with Redis down the API serves and jobs wait; they resume when Redis is back', () => {
  test('health, key creation, policies and expiry refusals without Redis; rotation and expiry after', async (t) => {
    const redis = await startPrivateRedis()
    const dep = await createDeployment(redis)
    const api = await spawnApi(dep.env)
    const client = tenantClient(api.baseUrl, await createTenantKey(dep.env))
    const worker = await spawnWorker(dep.env, 'w')

    const before = await client.createKey('Encryption', 'ML-KEM-768')
    await client.setDaily(before)
    const health = () => httpRequest(api.baseUrl, 'GET', '/api/v1/health')
    assert.equal((await health()).body.redis.status, 'up')

    await redis.stop()
    let down: HttpResult | undefined
    await waitFor(
      async () => {
        down = await health()
        return down.body?.redis?.status === 'down'
      },
      'health to report Redis down',
      WAIT_MS,
    )
    assert.equal(down!.status, 200, down!.text)
    assert.equal(down!.body.status, 'degraded')
    assert.equal(down!.body.database.status, 'up')

    // Keys and policies are PostgreSQL state: made without Redis.
    const during = await client.createKey('Encryption', 'ML-KEM-768')
    await client.setDaily(during)
    const encrypted = await client.call('POST', '/encrypt', { keyId: during, plaintext: b64('hello') })
    assert.equal(encrypted.status, 200, encrypted.text)

    // Expiry is derived from expires_at at each use: no job is needed to refuse an expired key.
    const expiresAt = new Date(Date.now() + 3000)
    const expiring = await client.createKey('Encryption', 'ML-KEM-768', {
      expiresAt: expiresAt.toISOString(),
    })
    await makeDue(dep.sql, [before, during])
    await waitFor(() => Date.now() > expiresAt.getTime() + 200, 'the expiry to pass', WAIT_MS)
    const refused = await client.call('POST', '/encrypt', { keyId: expiring, plaintext: b64('hello') })
    assert.equal(refused.status, 409, refused.text)
    assert.equal(refused.body.error, 'key_state_conflict')

    // Without Redis no sweep runs: nothing rotates, the expiry is not acted on.
    await sleep(1500)
    assert.equal(await currentVersion(dep.sql, before), 1)
    assert.equal(await currentVersion(dep.sql, during), 1)
    const [notYet] = await dep.sql<
      { expired_at: Date | null }[]
    >`SELECT expired_at FROM keys WHERE id = ${expiring}`
    assert.equal(notYet!.expired_at, null)
    assert.equal(worker.child.exitCode, null, `the worker survives Redis being down:\n${worker.output()}`)

    // Redis back, empty: the worker puts its schedulers back and the missed work happens once.
    await redis.start()
    const restartedAt = Date.now()
    await waitFor(
      async () =>
        (await currentVersion(dep.sql, before)) === 2 && (await currentVersion(dep.sql, during)) === 2,
      'the rotations that fell due while Redis was down',
      WAIT_MS,
    )
    await waitFor(
      async () =>
        (await dep.sql`SELECT 1 FROM keys WHERE id = ${expiring} AND expired_at IS NOT NULL`).length === 1,
      'the lifecycle sweep to mark the expired key',
      WAIT_MS,
    )
    t.diagnostic(`missed rotations and expiry done ${Date.now() - restartedAt} ms after Redis was back`)
    await sleep(1000)
    assert.equal(await currentVersion(dep.sql, before), 2)
    assert.equal(await currentVersion(dep.sql, during), 2)
    const expireAudit = await dep.sql<{ actor: string; outcome: string }[]>`
      SELECT actor, outcome FROM audit_log WHERE action = 'keys.expire' AND resource = ${`key:${expiring}`}`
    assert.deepEqual(
      expireAudit.map((r) => `${r.actor} ${r.outcome}`),
      ['system:lifecycle success'],
    )
    const rotateAudit = await dep.sql<{ resource: string; key_version: number }[]>`
      SELECT resource, key_version FROM audit_log WHERE action = 'keys.rotate' ORDER BY resource`
    assert.deepEqual(
      rotateAudit.map((r) => `${r.resource}#${r.key_version}`).sort(),
      [`key:${before}#2`, `key:${during}#2`].sort(),
    )
    await waitFor(async () => (await health()).body?.status === 'ok', 'health to report ok again', WAIT_MS)

    assert.equal(await worker.stop('SIGTERM'), 0, worker.output().slice(-2000))
  })
})

describe('graceful shutdown of a worker process', () => {
  test('SIGTERM to an idle worker while Redis is down exits 0 within the grace period', async () => {
    const redis = await startPrivateRedis()
    const dep = await createDeployment(redis)
    // A short grace period: the process exits 1 by itself if the shutdown hangs.
    const worker = await spawnWorker({ ...dep.env, KMS_SHUTDOWN_GRACE_MS: '3000' }, 'idle')
    await redis.stop()
    await waitFor(
      () => worker.output().includes('Redis error'),
      'the worker to notice Redis is down',
      WAIT_MS,
    )
    const code = await worker.stop('SIGTERM')
    const last = worker
      .logs()
      .slice(-2)
      .map((l) => l.msg)
    assert.equal(code, 0, `exit code ${code}; last log lines: ${last.join(' / ')}`)
  })
})
