import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { mkdtempSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { promisify } from 'node:util'
import { Redis } from 'ioredis'
import postgres from 'postgres'
import { connectDatabase, type Sql } from '../../src/data/database.ts'
import { loadMigrations, migrate } from '../../src/data/migrations.ts'
import { generateMasterKey, masterKeyId, readKeyFile, writeKeyFile } from '../../src/keyring/master-key.ts'
import { b64, unb64, uniqueName } from '../helpers/api-client.ts'
import {
  ADMIN_DATABASE_URL,
  createTestDatabase,
  type HttpResult,
  httpRequest,
  REDIS_URL,
  runCli,
  type SpawnedService,
  spawnService,
  type TestDatabase,
  testEnv,
} from '../helpers/service.ts'

/**
 * The restore drill of docs/operations.md ("Backup and restore"), as an operator runs it:
 * `npm start` with a master key file; a tenant (`npm run kms-admin -- create-tenant`), an ML-KEM, an
 * Ed25519 and an HMAC key, a ciphertext, a signature, a MAC, a secret and a second API key;
 * `pg_dump --format=custom` while the service serves; changes made after the backup (an API key
 * revoked, a key rotated and used, a key created); the service stopped, the database dropped and
 * created empty, `pg_restore` into it; `npm start` again with the SAME key file opens everything
 * made before the backup, and what came after it is undone. Then the restored database with
 * ANOTHER master key: the service starts, /api/v1/health answers 503, every operation that needs
 * key material fails and the log names the master key the data needs; started again with the
 * right key, nothing was harmed. Last, the rollback case of "Upgrade and rollback": a previous
 * release against a database with newer migrations.
 *
 * pg_dump and pg_restore of the server's major version are used (Debian installs them in
 * /usr/lib/postgresql/<major>/bin). The database, the key file, the dump, the processes and any
 * Redis keys of the test are removed afterwards, also on SIGINT and SIGTERM. The tests of a
 * describe run in order, each on what the one before left.
 */

const run = promisify(execFile)

async function serverMajor(): Promise<number> {
  const admin = postgres(ADMIN_DATABASE_URL, { max: 1, onnotice: () => {} })
  try {
    const [row] = await admin<{ v: string }[]>`SELECT current_setting('server_version_num') AS v`
    return Math.floor(Number(row!.v) / 10_000)
  } finally {
    await admin.end()
  }
}

async function clientMajor(bin: string): Promise<number | undefined> {
  try {
    const { stdout } = await run(bin, ['--version'])
    const match = /\(PostgreSQL\) (\d+)/.exec(stdout)
    return match ? Number(match[1]) : undefined
  } catch {
    return undefined
  }
}

/**
 * pg_dump and pg_restore of the server's major version; else the ones on PATH if they are newer
 * (pg_dump reads older servers); else the test fails naming what to install.
 */
async function pgTools(major: number): Promise<{ pgDump: string; pgRestore: string }> {
  const found: string[] = []
  const dirs = [join('/usr/lib/postgresql', String(major), 'bin'), '']
  for (const exact of [true, false]) {
    for (const dir of dirs) {
      const pgDump = dir ? join(dir, 'pg_dump') : 'pg_dump'
      const pgRestore = dir ? join(dir, 'pg_restore') : 'pg_restore'
      const [d, r] = [await clientMajor(pgDump), await clientMajor(pgRestore)]
      if (exact) found.push(`${pgDump} ${d ?? 'missing'}, ${pgRestore} ${r ?? 'missing'}`)
      if (d === undefined || r === undefined) continue
      if (exact ? d === major && r === major : d >= major && r >= major) return { pgDump, pgRestore }
    }
  }
  throw new Error(
    `the restore drill needs pg_dump and pg_restore of PostgreSQL ${major} or newer ` +
      `(Debian: postgresql-client-${major}); found: ${found.join('; ')}`,
  )
}

/** One statement on the server's admin database (DROP DATABASE and CREATE DATABASE). */
async function onAdminDatabase(statement: string): Promise<void> {
  const sql = postgres(ADMIN_DATABASE_URL, { max: 1, onnotice: () => {} })
  try {
    await sql.unsafe(statement)
  } finally {
    await sql.end()
  }
}

interface Envelope {
  ciphertext: string
  encapsulatedKey: string
  nonce: string
  tag: string
  keyId: string
  keyVersion: number
}

const envelopeBody = (e: Envelope) => ({
  ciphertext: e.ciphertext,
  encapsulatedKey: e.encapsulatedKey,
  nonce: e.nonce,
  tag: e.tag,
})

describe('restore drill: pg_dump, drop, pg_restore, then the same master key and another one', () => {
  let db: TestDatabase | undefined
  let env: Record<string, string>
  let workDir: string | undefined
  let keyFile: string
  let dumpFile: string
  let tools: { pgDump: string; pgRestore: string }
  const running = new Set<SpawnedService>()
  let svc: SpawnedService | undefined

  let cleaned: Promise<void> | undefined
  const cleanup = () => {
    cleaned ??= (async () => {
      await Promise.allSettled([...running].map((s) => s.stop('SIGKILL')))
      running.clear()
      await db?.drop().catch(() => {})
      if (workDir) rmSync(workDir, { recursive: true, force: true })
      if (env) rmSync(env['KMS_DATA_DIR']!, { recursive: true, force: true })
      // The service ran no jobs (KMS_ROLE=api), so nothing is expected under its prefix; in case.
      if (!db) return
      const redis = new Redis(REDIS_URL, { lazyConnect: true, maxRetriesPerRequest: 1 })
      try {
        await redis.connect()
        const keys = await redis.keys(`${db.name}:*`)
        if (keys.length > 0) await redis.del(...keys)
      } catch {
        // Redis is not there: nothing of ours to remove.
      } finally {
        redis.disconnect()
      }
    })()
    return cleaned
  }
  const interrupted = (signal: NodeJS.Signals) => {
    void cleanup().finally(() => process.exit(signal === 'SIGINT' ? 130 : 143))
  }

  /** `npm start` on the test's database; `extra` replaces settings (another master key). */
  async function start(extra: Record<string, string> = {}): Promise<SpawnedService> {
    svc = await spawnService({ ...env, ...extra })
    running.add(svc)
    return svc
  }
  /** SIGTERM, as an operator stops it: a clean exit. */
  async function stop(): Promise<void> {
    const stopping = svc!
    const code = await stopping.stop('SIGTERM')
    running.delete(stopping)
    svc = undefined
    assert.equal(code, 0, stopping.output().slice(-3000))
  }

  const call = (method: string, path: string, key: string, body?: unknown): Promise<HttpResult> =>
    httpRequest(svc!.baseUrl, method, `/api/v1${path}`, { key, ...(body === undefined ? {} : { body }) })
  async function expect(res: Promise<HttpResult>, status: number): Promise<HttpResult> {
    const answer = await res
    assert.equal(answer.status, status, answer.text)
    return answer
  }

  before(async () => {
    process.once('SIGINT', interrupted)
    process.once('SIGTERM', interrupted)
    tools = await pgTools(await serverMajor())
    db = await createTestDatabase()
    workDir = mkdtempSync(join(tmpdir(), 'kms-restore-drill-'))
    keyFile = join(workDir, 'master.key')
    dumpFile = join(workDir, 'kms.dump')
    writeKeyFile(keyFile, [generateMasterKey()])
    // A key file, as a production deployment may have; one API process and no background jobs.
    env = testEnv(db, {
      KMS_MASTER_KEY: '',
      KMS_MASTER_KEY_FILE: keyFile,
      KMS_API_PROCESSES: '1',
      KMS_ROLE: 'api',
    })
  })
  after(async () => {
    process.off('SIGINT', interrupted)
    process.off('SIGTERM', interrupted)
    await cleanup()
  })

  // Made before the backup ...
  let adminKey: string
  let reader: { id: string; key: string }
  const ids = { kem: '', sig: '', hmac: '', secret: '', late: '' }
  const plaintext = randomBytes(300)
  const message = b64('signed before the backup')
  const macData = b64('authenticated before the backup')
  let envelope: Envelope
  let signature: string
  let mac: string
  // ... and after it.
  let envelopeAfterBackup: Envelope

  test('a tenant, made by the operator command on the empty database', async () => {
    const made = await runCli(['create-tenant', '--name', uniqueName('drill')], env)
    assert.equal(made.code, 0, made.stderr)
    adminKey = JSON.parse(made.stdout).apiKey.key
  })

  test('the backup: pg_dump while the service serves; then changes the backup does not hold', async () => {
    await start()

    const createKey = async (keyType: string, algorithm: string) =>
      (
        await expect(
          call('POST', '/keys', adminKey, { name: uniqueName(algorithm.toLowerCase()), keyType, algorithm }),
          201,
        )
      ).body.id as string
    ids.kem = await createKey('Encryption', 'ML-KEM-768')
    ids.sig = await createKey('Signing', 'Ed25519')
    ids.hmac = await createKey('HMAC', 'HMAC-SHA256')
    envelope = (
      await expect(call('POST', '/encrypt', adminKey, { keyId: ids.kem, plaintext: b64(plaintext) }), 200)
    ).body
    signature = (await expect(call('POST', '/sign', adminKey, { keyId: ids.sig, message }), 200)).body
      .signature
    mac = (await expect(call('POST', `/keys/${ids.hmac}/mac`, adminKey, { data: macData }), 200)).body.mac
    ids.secret = (
      await expect(call('POST', '/secrets', adminKey, { name: 'db-password', value: 'correct horse' }), 201)
    ).body.id
    const minted = await expect(
      call('POST', '/api-keys', adminKey, { name: 'reader', scopes: ['keys:read'] }),
      201,
    )
    reader = { id: minted.body.id, key: minted.body.key }
    // A deployment that signs people in has its token signing key (sealed by the master key).
    await expect(httpRequest(svc!.baseUrl, 'GET', '/.well-known/openid-configuration'), 200)

    // Online: pg_dump reads one consistent snapshot while requests go on.
    await run(tools.pgDump, ['--format=custom', `--file=${dumpFile}`, `--dbname=${db!.url}`])
    assert.ok(statSync(dumpFile).size > 0)

    await expect(call('POST', `/api-keys/${reader.id}/revoke`, adminKey), 200)
    await expect(call('GET', `/keys/${ids.kem}`, reader.key), 401)
    await expect(call('POST', `/keys/${ids.kem}/rotate`, adminKey), 200)
    envelopeAfterBackup = (
      await expect(
        call('POST', '/encrypt', adminKey, { keyId: ids.kem, plaintext: b64('after the backup') }),
        200,
      )
    ).body
    assert.equal(envelopeAfterBackup.keyVersion, 2)
    ids.late = (
      await expect(
        call('POST', '/keys', adminKey, { name: 'late', keyType: 'Signing', algorithm: 'Ed25519' }),
        201,
      )
    ).body.id
    await stop()
  })

  test('the disaster and the restore: drop the database, create it empty, pg_restore', async () => {
    await onAdminDatabase(`DROP DATABASE ${db!.name} WITH (FORCE)`)
    await onAdminDatabase(`CREATE DATABASE ${db!.name}`)
    await run(tools.pgRestore, [
      '--single-transaction',
      '--exit-on-error',
      '--no-owner',
      `--dbname=${db!.url}`,
      dumpFile,
    ])
  })

  test('with the same master key everything made before the backup opens', async () => {
    await start()
    const health = await expect(httpRequest(svc!.baseUrl, 'GET', '/api/v1/health'), 200)
    assert.equal(health.body.status, 'ok')

    const opened = await expect(call('POST', '/decrypt', adminKey, envelopeBody(envelope)), 200)
    assert.ok(unb64(opened.body.plaintext).equals(plaintext))
    assert.equal(opened.body.keyId, ids.kem)
    assert.equal(opened.body.keyVersion, 1)
    const verified = await expect(
      call('POST', '/verify', adminKey, { keyId: ids.sig, message, signature }),
      200,
    )
    assert.equal(verified.body.valid, true)
    const macChecked = await expect(
      call('POST', `/keys/${ids.hmac}/mac/verify`, adminKey, { data: macData, mac }),
      200,
    )
    assert.equal(macChecked.body.valid, true)
    const secret = await expect(call('GET', `/secrets/${ids.secret}?include=all`, adminKey), 200)
    assert.equal(secret.body.value, 'correct horse')
    await expect(httpRequest(svc!.baseUrl, 'GET', '/.well-known/openid-configuration'), 200)
  })

  test('a restore to an older point undoes what came after the backup', async () => {
    // The API key revoked after the backup works again: revoke it again.
    await expect(call('GET', `/keys/${ids.kem}`, reader.key), 200)
    // The rotation is undone: the key is at version 1 again, and what version 2 encrypted is lost.
    const kem = await expect(call('GET', `/keys/${ids.kem}`, adminKey), 200)
    assert.equal(kem.body.version, 1)
    const lost = await expect(call('POST', '/decrypt', adminKey, envelopeBody(envelopeAfterBackup)), 400)
    assert.equal(lost.body.error, 'decryption_failed')
    // A key created after the backup does not exist.
    const late = await expect(call('GET', `/keys/${ids.late}`, adminKey), 404)
    assert.equal(late.body.error, 'key_not_found')
    await stop()
  })

  test('with another master key: it starts, health says 503, nothing sealed opens, the log names the key needed', async () => {
    const needed = masterKeyId(readKeyFile(keyFile)[0]!)
    const wrong = await start({
      KMS_MASTER_KEY: generateMasterKey().toString('base64'),
      KMS_MASTER_KEY_FILE: '',
    })

    const health = await expect(httpRequest(wrong.baseUrl, 'GET', '/api/v1/health'), 503)
    assert.equal(health.body.status, 'unavailable')
    assert.equal(health.body.checks.database.status, 'ok')
    assert.deepEqual(health.body.checks.identitySigningKeys, {
      status: 'failed',
      reason: 'the current signing key is sealed by a master key this process does not hold',
    })
    // API keys are stored as hashes, not sealed: callers authenticate, and reads of metadata answer.
    await expect(call('GET', `/keys/${ids.kem}`, adminKey), 200)
    // Everything under a tenant KEK fails with a 503 naming the cause (never a 500), saying when to retry.
    for (const [what, res] of [
      ['decrypt', call('POST', '/decrypt', adminKey, envelopeBody(envelope))],
      ['verify', call('POST', '/verify', adminKey, { keyId: ids.sig, message, signature })],
      ['encrypt', call('POST', '/encrypt', adminKey, { keyId: ids.kem, plaintext: b64('x') })],
      ['mac', call('POST', `/keys/${ids.hmac}/mac/verify`, adminKey, { data: macData, mac })],
      ['secret', call('GET', `/secrets/${ids.secret}?include=all`, adminKey)],
    ] as const) {
      const answer = await res
      assert.equal(answer.status, 503, `${what}: ${answer.text}`)
      assert.equal(answer.body.error, 'master_key_unavailable', what)
      assert.ok(Number(answer.headers.get('retry-after')) > 0, `${what}: Retry-After`)
      assert.doesNotMatch(answer.text, new RegExp(needed), `${what}: the key's id is for the log only`)
    }
    // Sign-in is down: the token signing key is sealed by the master key too.
    const discovery = await expect(
      httpRequest(wrong.baseUrl, 'GET', '/.well-known/openid-configuration'),
      503,
    )
    assert.equal(discovery.body.error, 'identity_unavailable')
    await stop()
    // The log says which master key the data needs (the id of the key file's key).
    assert.match(
      wrong.output(),
      new RegExp(`the KEK is wrapped by master key ${needed}, which this process does not have`),
    )
  })

  test('started again with the right key, nothing was harmed by the wrong one', async () => {
    await start()
    const health = await expect(httpRequest(svc!.baseUrl, 'GET', '/api/v1/health'), 200)
    assert.equal(health.body.status, 'ok')
    const opened = await expect(call('POST', '/decrypt', adminKey, envelopeBody(envelope)), 200)
    assert.ok(unb64(opened.body.plaintext).equals(plaintext))
    await stop()
  })
})

describe('rollback: a previous release against a database with newer migrations', () => {
  let db: TestDatabase | undefined
  let sql: Sql | undefined
  before(async () => {
    db = await createTestDatabase()
    sql = connectDatabase({
      url: db.url,
      poolSize: 1,
      statementTimeoutMs: 10_000,
      applicationName: 'kms-test',
    })
  })
  after(async () => {
    await sql?.end({ timeout: 5 })
    await db?.drop()
  })

  test('its start applies nothing and does not refuse: migrations it does not ship are ignored', async () => {
    const all = loadMigrations()
    assert.ok(all.length > 1)
    await migrate(sql!, all)
    // The previous release ships every migration but the newest.
    assert.deepEqual(await migrate(sql!, all.slice(0, -1)), [])
    const [row] = await sql!<
      { version: number }[]
    >`SELECT max(version)::int AS version FROM schema_migrations`
    assert.equal(
      row!.version,
      all.at(-1)!.version,
      'the newer migration stays applied: there is no down migration',
    )
  })
})
