import assert from 'node:assert/strict'
import { mkdtempSync, readFileSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'node:test'
import { buildConsole } from '../../scripts/console-build.ts'
import { httpRequest, PROJECT_ROOT, REDIS_URL, spawnService } from '../helpers/service.ts'

/** `npm start` on a fresh machine: no DATABASE_URL, no master key, nothing configured. */
test('a start with no configuration runs the embedded database, bootstraps a key into a file, never the log, and keeps data', async () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'kms-embedded-'))
  const env = {
    DATABASE_URL: '',
    KMS_MASTER_KEY: '',
    KMS_MASTER_KEY_FILE: '',
    NODE_ENV: '',
    KMS_DATA_DIR: dataDir,
    PORT: '0',
    REDIS_URL,
    KMS_REDIS_PREFIX: `embedded-${process.pid}:`,
  }
  // `npm start` builds the console first (when its sources changed), then starts the service.
  const start = JSON.parse(readFileSync(join(PROJECT_ROOT, 'package.json'), 'utf8')).scripts.start as string
  assert.equal(start, 'node scripts/console-build.ts && node src/main.ts')
  await buildConsole()
  const first = await spawnService(env)
  let key: string
  try {
    const health = await httpRequest(first.baseUrl, 'GET', '/api/v1/health')
    assert.equal(health.status, 200)
    assert.equal(health.body.status, 'ok')
    assert.equal(health.body.database.status, 'up')
    const consolePage = await fetch(new URL('/console/', first.baseUrl))
    assert.equal(consolePage.status, 200)
    assert.match(await consolePage.text(), /<div id="root"><\/div>/)

    // The key is handed over in a file only its owner reads, named by the log; the log (not a
    // terminal here) never carries it.
    const keyFile = join(dataDir, 'bootstrap-api-key')
    assert.equal(statSync(keyFile).mode & 0o777, 0o600)
    key = readFileSync(keyFile, 'utf8').trim()
    assert.match(key, /^kms_[A-Za-z0-9]{52}$/)
    const lines = first.output().split('\n')
    assert.deepEqual(
      lines.filter((l) => l.includes(key) || /kms_[A-Za-z0-9]{52}/.test(l)),
      [],
      'no output line carries the key',
    )
    assert.ok(lines.some((l) => l.includes(keyFile) && l.includes('created the tenant')))
    assert.match(first.output(), /NO MASTER KEY CONFIGURED/)
    assert.equal(statSync(join(dataDir, 'master.key')).mode & 0o777, 0o600)

    const me = await httpRequest(first.baseUrl, 'GET', '/api/v1/tenant', { key })
    assert.equal(me.status, 200)
    assert.equal(me.body.name, 'default')
    const created = await httpRequest(first.baseUrl, 'POST', '/api/v1/api-keys', {
      key,
      body: { name: 'persisted', scopes: ['audit:read'] },
    })
    assert.equal(created.status, 201)
  } finally {
    assert.equal(await first.stop('SIGTERM'), 0, 'graceful shutdown exits 0')
  }

  // Second start on the same data directory: same data, no second bootstrap key.
  const second = await spawnService(env)
  try {
    assert.equal(/kms_[A-Za-z0-9]{52}/.exec(second.output()), null, 'no new key is printed')
    const keys = await httpRequest(second.baseUrl, 'GET', '/api/v1/api-keys', { key })
    assert.equal(keys.status, 200)
    assert.deepEqual(keys.body.data.map((k: { name: string }) => k.name).sort(), [
      'initial full-scope key',
      'persisted',
    ])
  } finally {
    assert.equal(await second.stop('SIGTERM'), 0)
  }
})
