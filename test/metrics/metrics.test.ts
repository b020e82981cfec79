import assert from 'node:assert/strict'
import { randomBytes, randomUUID } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { request as httpGet } from 'node:http'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { apiClient } from '../helpers/api-client.ts'
import { checkExposition, has, type Sample, total } from '../helpers/prometheus.ts'
import {
  createTestDatabase,
  spawnService,
  startTestService,
  type TenantWithKey,
  type TestDatabase,
  type TestService,
  testEnv,
  waitFor,
} from '../helpers/service.ts'

/**
 * GET /metrics (docs/metrics.md): a valid Prometheus exposition whose series count what the
 * service did, and in a cluster the sum over every process whichever process answers.
 */

const b64 = (text: string) => Buffer.from(text).toString('base64')

describe('one process', () => {
  let svc: TestService
  let tenant: TenantWithKey
  const api = apiClient(() => ({ svc, tenant }))

  before(async () => {
    // The jobs run in the process, sweeping every 200 ms, so job outcomes show up quickly.
    svc = await startTestService({ KMS_JOB_SWEEP_MS: '200' }, { jobs: true })
    tenant = await svc.createTenant()
  })
  after(async () => {
    await svc?.stop()
  })

  async function scrape(): Promise<Sample[]> {
    const res = await svc.request('GET', '/metrics')
    assert.equal(res.status, 200)
    assert.equal(res.headers.get('content-type'), 'text/plain; version=0.0.4; charset=utf-8')
    return checkExposition(res.text).samples
  }

  test('the exposition is valid: HELP and TYPE for every family, valid names, no quantile label on a gauge', async () => {
    await svc.request('GET', '/api/v1/tenant', { key: tenant.key })
    const res = await svc.request('GET', '/metrics')
    const { types } = checkExposition(res.text)
    // The gauge with a quantile label of the hand-written exposition is gone; its successor is a histogram.
    assert.equal(types.get('nodejs_eventloop_delay_seconds'), undefined)
    assert.equal(types.get('kms_eventloop_delay_seconds'), 'histogram')
    assert.equal(types.get('kms_http_requests_total'), 'counter')
    assert.equal(types.get('kms_http_request_duration_seconds'), 'histogram')
    // The entropy series stay (docs/entropy.md).
    for (const name of [
      'kms_entropy_source_in_use',
      'kms_entropy_bytes_served_total',
      'kms_entropy_rejections_total',
    ])
      assert.ok(types.has(name), name)
    // Per-process resource series name their process.
    const memory = checkExposition(res.text).samples.find((s) => s.name === 'process_resident_memory_bytes')
    assert.deepEqual(memory?.labels, { pid: String(process.pid), process_kind: 'api' })
    assert.ok(memory.value > 0)
  })

  test('counts requests by route template and method, with durations and errors by API error code', async () => {
    const before = await scrape()
    const route = { route: '/api/v1/tenant', method: 'GET' }
    for (let i = 0; i < 7; i++)
      assert.equal((await svc.request('GET', '/api/v1/tenant', { key: tenant.key })).status, 200)
    const unknownKey = randomUUID()
    assert.equal((await api.call('GET', `/keys/${unknownKey}`)).status, 404)
    assert.equal((await api.call('GET', '/keys/not-a-uuid')).status, 400)
    assert.equal((await svc.request('GET', `/no/such/${randomUUID()}`)).status, 404)
    const after = await scrape()
    const delta = (name: string, labels: Record<string, string>) =>
      total(after, name, labels) - total(before, name, labels)

    assert.equal(delta('kms_http_requests_total', { ...route, status: '200' }), 7)
    assert.equal(delta('kms_http_request_duration_seconds_count', route), 7)
    assert.ok(delta('kms_http_request_duration_seconds_sum', route) > 0)
    const keyRoute = { route: '/api/v1/keys/:keyId', method: 'GET' }
    assert.equal(delta('kms_http_requests_total', { ...keyRoute, status: '404' }), 1)
    assert.equal(delta('kms_http_errors_total', { ...keyRoute, status: '404', error: 'key_not_found' }), 1)
    assert.equal(
      delta('kms_http_errors_total', { ...keyRoute, status: '400', error: 'validation_failed' }),
      1,
    )
    // A URL no route matches is counted under one label, never its path.
    assert.equal(delta('kms_http_requests_total', { route: 'unmatched', method: 'GET', status: '404' }), 1)
    assert.equal(delta('kms_http_errors_total', { route: 'unmatched', status: '404', error: 'not_found' }), 1)
    const labelValues = after.flatMap((s) => Object.values(s.labels))
    assert.ok(
      !labelValues.some((v) => v.includes(unknownKey) || v.includes('/no/such')),
      'no raw URL in a label',
    )
    // Successes are not errors.
    assert.equal(delta('kms_http_errors_total', route), 0)
  })

  test('counts cryptographic operations by operation and outcome, and audit writes', async () => {
    const keyId = (await api.createKey('Encryption', 'ML-KEM-768')).id
    const before = await scrape()
    const envelopes = []
    for (let i = 0; i < 3; i++) {
      const res = await api.call('POST', '/encrypt', { keyId, plaintext: b64(`secret ${i}`) })
      assert.equal(res.status, 200, res.text)
      envelopes.push(res.body)
    }
    for (const envelope of envelopes.slice(0, 2)) {
      const { ciphertext, encapsulatedKey, nonce, tag } = envelope
      const res = await api.call('POST', '/decrypt', { keyId, ciphertext, encapsulatedKey, nonce, tag })
      assert.equal(res.status, 200, res.text)
    }
    const { ciphertext, encapsulatedKey, nonce } = envelopes[2]
    const tampered = await api.call('POST', '/decrypt', {
      keyId,
      ciphertext,
      encapsulatedKey,
      nonce,
      tag: randomBytes(16).toString('base64'),
    })
    assert.equal(tampered.status, 400, tampered.text)
    const after = await scrape()
    const delta = (name: string, labels: Record<string, string>) =>
      total(after, name, labels) - total(before, name, labels)

    assert.equal(delta('kms_crypto_operations_total', { operation: 'encrypt', outcome: 'success' }), 3)
    assert.equal(delta('kms_crypto_operations_total', { operation: 'decrypt', outcome: 'success' }), 2)
    assert.equal(delta('kms_crypto_operations_total', { operation: 'decrypt', outcome: 'failure' }), 1)
    assert.equal(delta('kms_audit_records_total', { action: 'crypto.encrypt', outcome: 'success' }), 3)
    // Six records written by group commit, in at least one write that took some time.
    assert.ok(delta('kms_audit_written_records_total', { result: 'ok' }) >= 6)
    assert.ok(delta('kms_audit_write_duration_seconds_count', { result: 'ok' }) >= 1)
    assert.ok(delta('kms_audit_write_duration_seconds_sum', { result: 'ok' }) > 0)
    assert.equal(total(after, 'kms_audit_written_records_total', { result: 'failed' }), 0)
    // Nothing is waiting once every answer has come back.
    assert.equal(total(after, 'kms_audit_queued_records'), 0)
    assert.equal(total(after, 'kms_audit_writing_records'), 0)
  })

  test('crypto pool, database and job series are present and plausible', async () => {
    const before = await scrape()
    const pool = svc.api.services.cryptoPool
    const tasksBefore = pool.completedTasks()
    await api.createKey('Signing', 'ML-DSA-44')
    const after = await scrape()
    const ran = pool.completedTasks() - tasksBefore
    assert.ok(ran >= 1, 'key generation ran on the pool')

    const generated = { kind: 'generateKey', outcome: 'ok' }
    assert.equal(
      total(after, 'kms_crypto_pool_task_duration_seconds_count', generated) -
        total(before, 'kms_crypto_pool_task_duration_seconds_count', generated),
      1,
    )
    assert.equal(
      total(after, 'kms_crypto_pool_tasks_completed_total') -
        total(before, 'kms_crypto_pool_tasks_completed_total'),
      ran,
    )
    assert.equal(total(after, 'kms_crypto_pool_queued_tasks'), 0)
    assert.equal(total(after, 'kms_crypto_pool_running_tasks'), 0)
    assert.equal(total(after, 'kms_crypto_pool_max_threads'), pool.threads)

    // The database: the configured pool size, and this process's connections as PostgreSQL sees
    // them (the scrape's own query is running on one of them).
    assert.equal(
      total(after, 'kms_db_pool_max_connections', { process_kind: 'api' }),
      svc.config.databasePoolSize,
    )
    assert.ok(total(after, 'kms_db_connections', { process_kind: 'api', state: 'active' }) >= 1)
    assert.ok(
      total(after, 'kms_db_connections', { process_kind: 'api' }) <= svc.config.databasePoolSize,
      'no more connections than the pool allows',
    )

    // Job outcomes: the sweeps complete every 200 ms.
    const sweep = { queue: 'maintenance', job: 'rotation-sweep', outcome: 'completed' }
    let latest: Sample[] = after
    await waitFor(async () => {
      latest = await scrape()
      return total(latest, 'kms_jobs_total', sweep) >= 2
    }, 'rotation sweeps to complete')
    assert.ok(
      total(latest, 'kms_job_duration_seconds_count', { queue: 'maintenance', job: 'rotation-sweep' }) >= 2,
    )
    assert.equal(total(latest, 'kms_jobs_total', { outcome: 'failed' }), 0)
  })

  test('the event-loop delay histogram shows a loop that was held', async () => {
    // Observations later than 100 ms: the +Inf bucket minus the 0.1 one.
    const late = (list: Sample[]) =>
      total(list, 'kms_eventloop_delay_seconds_bucket', { le: '+Inf' }) -
      total(list, 'kms_eventloop_delay_seconds_bucket', { le: '0.1' })
    const before = late(await scrape())
    // Hold this process's event loop (the service's too) for 200 ms.
    const until = Date.now() + 200
    while (Date.now() < until) {}
    await waitFor(async () => late(await scrape()) > before, 'the held loop to show as a late timer')
  })
})

/** GET over a fresh connection, so the cluster's round robin spreads the requests over the processes. */
function getFresh(
  baseUrl: string,
  path: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = httpGet(new URL(path, baseUrl), { agent: false, headers }, (res) => {
      let text = ''
      res.setEncoding('utf8')
      res.on('data', (chunk: string) => {
        text += chunk
      })
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text }))
    })
    req.on('error', reject)
    req.end()
  })
}

describe('cluster: two API processes and the job process under npm start', () => {
  let db: TestDatabase
  before(async () => {
    db = await createTestDatabase()
  })
  after(async () => db?.drop())

  test('every scrape shows the cluster total, which never decreases, whichever process answers', async () => {
    const env = testEnv(db, { KMS_API_PROCESSES: '2', KMS_BOOTSTRAP: 'true', KMS_JOB_SWEEP_MS: '200' })
    const svc = await spawnService(env)
    try {
      // The first start hands its full-scope key over in a file, never in the log stream.
      const key = readFileSync(join(env['KMS_DATA_DIR']!, 'bootstrap-api-key'), 'utf8').trim()
      assert.match(key, /^kms_[A-Za-z0-9]{52}$/, 'bootstrap key written on the first start')
      // Until each process has its services, it answers the primary with an empty registry.
      const processKinds = (samples: Sample[]) =>
        samples
          .filter((s) => s.name === 'process_resident_memory_bytes')
          .map((s) => s.labels['process_kind'])
          .sort()
          .join(',')
      await waitFor(async () => {
        const res = await getFresh(svc.baseUrl, '/metrics')
        return res.status === 200 && processKinds(checkExposition(res.text).samples) === 'api,api,jobs'
      }, 'every process to report its metrics')

      const route = { route: '/api/v1/tenant', method: 'GET', status: '200' }
      let sent = 0
      let previous = -1
      const pids = new Set<string>()
      for (let i = 0; i < 20; i++) {
        const n = (i % 3) + 1
        for (let j = 0; j < n; j++) {
          const res = await getFresh(svc.baseUrl, '/api/v1/tenant', { 'x-api-key': key })
          assert.equal(res.status, 200, res.text)
          sent++
        }
        const res = await getFresh(svc.baseUrl, '/metrics')
        assert.equal(res.status, 200, res.text)
        const { samples } = checkExposition(res.text)
        const counted = total(samples, 'kms_http_requests_total', route)
        assert.equal(counted, sent, `scrape ${i}: the cluster's total of the requests sent`)
        assert.ok(counted > previous, `scrape ${i}: the total went forward`)
        previous = counted
        // Every process contributes: two API processes and the job process, each with its pid.
        assert.equal(processKinds(samples), 'api,api,jobs', `scrape ${i}`)
        for (const s of samples) if (s.name === 'process_resident_memory_bytes') pids.add(s.labels['pid']!)
      }
      assert.equal(pids.size, 3, 'the same three processes throughout')

      // The job process's outcomes are in the cluster view.
      await waitFor(async () => {
        const res = await getFresh(svc.baseUrl, '/metrics')
        const { samples } = checkExposition(res.text)
        return (
          has(samples, 'kms_jobs_total', { job: 'rotation-sweep', outcome: 'completed' }) &&
          total(samples, 'kms_jobs_total', { job: 'rotation-sweep', outcome: 'completed' }) >= 1
        )
      }, 'the job process to report completed sweeps')
    } finally {
      assert.equal(await svc.stop('SIGTERM'), 0, svc.output().slice(-2000))
    }
  })
})
