import assert from 'node:assert/strict'
import { randomBytes, randomUUID } from 'node:crypto'
import { after, before, describe, test } from 'node:test'
import postgres from 'postgres'
import { createAuditLog } from '../../src/audit/audit-log.ts'
import type { AuditEntry } from '../../src/audit/audit-store.ts'
import { loadAwareWriteConcurrency, machineUtilization } from '../../src/audit/write-concurrency.ts'
import { createLogger } from '../../src/platform/logger.ts'
import { startTestService, type TenantWithKey, type TestService, waitFor } from '../helpers/service.ts'

/**
 * No operation is acknowledged before its audit record is durable, however the group commit
 * batches the records (issue 16 changed how many writes it keeps in flight): an answer that
 * arrived while the audit table is locked would be an operation without a committed record.
 * "Waited" is shown structurally: the database reports the service's INSERT waiting on the lock,
 * and the answer has not come; after the lock is released it comes, and its record is there.
 */

let svc: TestService
let tenant: TenantWithKey
let locker: postgres.Sql

before(async () => {
  svc = await startTestService()
  tenant = await svc.createTenant()
  locker = postgres(svc.db.url, { max: 1, onnotice: () => {} })
})
after(async () => {
  await locker?.end()
  await svc?.stop()
})

/** Backends of this database waiting for a lock (the service's audit INSERTs, here). */
async function waitingOnLocks(sql: postgres.Sql): Promise<number> {
  const [row] = await sql<{ n: number }[]>`
    SELECT count(*)::int AS n FROM pg_stat_activity
    WHERE datname = current_database() AND wait_event_type = 'Lock'`
  return row!.n
}

/** Runs `hold` with audit_log locked against writes (reads still work), then releases it. */
async function withAuditLocked<T>(hold: () => Promise<T>): Promise<T> {
  return locker.begin(async (tx) => {
    await tx`LOCK TABLE audit_log IN EXCLUSIVE MODE`
    return hold()
  }) as Promise<T>
}

describe('an operation is answered only once its audit record is committed', () => {
  test('encrypt: no answer while the record cannot be written; answer and record once it can', async () => {
    const created = await svc.request('POST', '/api/v1/keys', {
      key: tenant.key,
      body: { name: `durability-${randomUUID()}`, keyType: 'Encryption', algorithm: 'ML-KEM-768' },
    })
    assert.equal(created.status, 201, created.text)
    const keyId = created.body.id as string
    const requestId = `durability-${randomUUID()}`

    let answered = false
    let answer: Promise<{ status: number }> | undefined
    await withAuditLocked(async () => {
      answer = svc
        .request('POST', '/api/v1/encrypt', {
          key: tenant.key,
          headers: { 'x-request-id': requestId },
          body: { keyId, plaintext: randomBytes(64).toString('base64') },
        })
        .then((result) => {
          answered = true
          return result
        })
      await waitFor(async () => (await waitingOnLocks(svc.sql)) > 0, 'the audit INSERT to wait on the lock')
      // The encryption is done and its INSERT is blocked: the caller must still be waiting.
      assert.equal(answered, false, 'answered before its audit record was written')
      const [visible] = await svc.sql<{ n: number }[]>`
        SELECT count(*)::int AS n FROM audit_log WHERE request_id = ${requestId}`
      assert.equal(visible!.n, 0)
    })
    const result = await answer!
    assert.equal(result.status, 200)
    const [record] = await svc.sql<{ action: string; outcome: string }[]>`
      SELECT action, outcome FROM audit_log WHERE request_id = ${requestId}`
    assert.deepEqual({ ...record }, { action: 'crypto.encrypt', outcome: 'success' })
  })

  test('with one write in flight, records made meanwhile wait and go together in the next write', async () => {
    const written: number[] = []
    const audit = createAuditLog({
      sql: svc.sql,
      logger: createLogger('silent', 'test'),
      timeoutMs: 30_000,
      maxConcurrentWrites: () => 1,
      observer: { recorded: () => {}, written: (_s, records) => written.push(records) },
    })
    const tenantId = randomUUID()
    const entry = (i: number): AuditEntry => ({
      tenantId,
      actor: 'system',
      action: 'test.write_concurrency',
      resource: `item:${i}`,
      outcome: 'success',
    })
    const settled: Promise<void>[] = []
    await withAuditLocked(async () => {
      settled.push(audit.record(entry(0)))
      await waitFor(async () => (await waitingOnLocks(svc.sql)) === 1, 'the first write to wait on the lock')
      // Separate turns of the event loop: each would start a write of its own if the limit allowed.
      for (let i = 1; i <= 5; i++) {
        settled.push(audit.record(entry(i)))
        await new Promise((resolve) => setImmediate(resolve))
      }
      assert.equal(await waitingOnLocks(svc.sql), 1, 'one write in flight, the others queued')
      assert.deepEqual(audit.stats(), { queued: 5, writing: 1 })
    })
    await Promise.all(settled)
    assert.deepEqual(written, [1, 5])
    const [stored] = await svc.sql<{ n: number; transactions: number }[]>`
      SELECT count(*)::int AS n, count(DISTINCT xmin::text)::int AS transactions
      FROM audit_log WHERE tenant_id = ${tenantId}`
    assert.deepEqual({ ...stored }, { n: 6, transactions: 2 })
  })
})

describe('load-aware write concurrency', () => {
  test('idle until a window has passed; then busy while utilisation is at or above the threshold', () => {
    let clock = 0
    let reads = 0
    let load = 0.95
    const limit = loadAwareWriteConcurrency({
      idle: 4,
      busy: 1,
      threshold: 0.8,
      windowMs: 100,
      now: () => clock,
      utilization: () => {
        reads++
        return load
      },
    })
    assert.equal(limit(), 4, 'no reading yet: idle')
    clock = 50
    assert.equal(limit(), 4)
    assert.equal(reads, 0, 'read at most once per window')
    clock = 100
    assert.equal(limit(), 1, 'saturated')
    assert.equal(limit(), 1)
    assert.equal(reads, 1)
    load = 0.8
    clock = 199
    assert.equal(limit(), 1, 'kept until the next window')
    clock = 200
    assert.equal(limit(), 1, 'the threshold itself counts as saturated')
    load = 0.79
    clock = 300
    assert.equal(limit(), 4)
    assert.equal(reads, 3)
  })

  test("the machine's utilisation is a share between 0 and 1, above zero while a core is kept busy", () => {
    const read = machineUtilization()
    const spinUntil = performance.now() + 50
    while (performance.now() < spinUntil) {
      // Keep one core busy, so the share since the first reading cannot be zero.
    }
    const share = read()
    assert.ok(share > 0 && share <= 1, `utilisation ${share}`)
  })
})
