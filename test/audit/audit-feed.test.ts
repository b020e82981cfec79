import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { after, before, describe, test } from 'node:test'
import postgres from 'postgres'
import type { AuditEntry } from '../../src/audit/audit-store.ts'
import { insertAuditEntries } from '../../src/audit/audit-store.ts'
import { startTestService, type TenantWithKey, type TestService, waitFor } from '../helpers/service.ts'

const DAY_MS = 24 * 60 * 60_000

/**
 * The audit feed (docs/audit.md): usage and keys' last use are folded from audit_log by their
 * sweeps, each record exactly once, whatever order the writes commit in and whatever happens to
 * a sweep; and the time map that turns GET /audit's time range into id bounds answers exactly
 * what a plain filter would.
 */
describe('audit feed', () => {
  let svc: TestService
  /** A connection of its own, for transactions held open across the service's work. */
  let other: postgres.Sql

  before(async () => {
    svc = await startTestService()
    other = postgres(svc.db.url, { max: 2, onnotice: () => {} })
  })
  after(async () => {
    await other?.end({ timeout: 5 })
    await svc?.stop()
  })

  const mac = (tenantId: string, keyId: string, extra: Partial<AuditEntry> = {}): AuditEntry => ({
    tenantId,
    actor: 'test',
    action: 'crypto.mac',
    resource: `key:${keyId}`,
    outcome: 'success',
    ...extra,
  })

  const lastId = async () => {
    const [row] = await svc.sql<{ id: string }[]>`SELECT coalesce(max(id), 0)::text AS id FROM audit_log`
    return BigInt(row!.id)
  }
  const positionOf = async (consumer: string) => {
    const [row] = await svc.sql<{ position: string }[]>`
      SELECT position::text FROM audit_feed_cursors WHERE consumer = ${consumer}`
    return BigInt(row?.position ?? '0')
  }
  /** Runs a fold until its consumer has folded every record written so far. */
  const foldAll = async (consumer: string, fold: () => Promise<unknown>) => {
    const last = await lastId()
    await waitFor(
      async () => {
        await fold()
        return (await positionOf(consumer)) >= last
      },
      `the ${consumer} fold`,
      60_000,
    )
  }
  const foldUsage = () => foldAll('billing.usage', () => svc.api.services.billing.foldUsage())
  const foldKeyUse = () => foldAll('intelligence.key_use', () => svc.api.services.intelligence.foldKeyUse())

  /** MACs in the tenant's usage report, over the months around now (records here are stamped ±2 min). */
  const usageOf = async (tenant: TenantWithKey) => {
    const month = (offsetMs: number) => new Date(Date.now() + offsetMs).toISOString().slice(0, 7)
    const res = await svc.request('GET', `/api/v1/billing/usage?from=${month(-DAY_MS)}&to=${month(DAY_MS)}`, {
      key: tenant.key,
    })
    assert.equal(res.status, 200, res.text)
    return (res.body.data as Array<{ operations: { mac: number } }>).reduce(
      (sum, m) => sum + m.operations.mac,
      0,
    )
  }
  /** MACs folded into the tenant's usage totals, every month. */
  const foldedUsageOf = async (tenantId: string) => {
    const [row] = await svc.sql<{ total: string | null }[]>`
      SELECT sum(count)::text AS total FROM usage_totals WHERE tenant_id = ${tenantId} AND kind = 'mac'`
    return Number(row!.total ?? 0)
  }
  const lastUseOf = async (keyId: string) => {
    const [row] = await svc.sql<{ last_attempt_at: Date; last_success_at: Date | null }[]>`
      SELECT last_attempt_at, last_success_at FROM key_last_use WHERE key_id = ${keyId}`
    return row
  }

  test('the audit insert has its transaction id before it draws a record id', async () => {
    // What lets a fold tell that every record up to an id is settled (audit-feed.ts). A row
    // trigger runs after the row's id is drawn and before the row is stored, which is where a
    // transaction gets its id otherwise.
    await svc.sql.unsafe(`
      CREATE FUNCTION test_xid_first() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF pg_current_xact_id_if_assigned() IS NULL THEN RAISE EXCEPTION 'record id drawn before the transaction id'; END IF;
        RETURN NEW;
      END $$`)
    await svc.sql.unsafe(`
      CREATE TRIGGER test_xid_first BEFORE INSERT ON audit_log FOR EACH ROW
      WHEN (NEW.action = 'test.xid_first') EXECUTE FUNCTION test_xid_first()`)
    try {
      const entry: AuditEntry = {
        tenantId: randomUUID(),
        actor: 'test',
        action: 'test.xid_first',
        outcome: 'success',
      }
      // The trigger does catch a statement without the condition (where drawing the id does not
      // give the transaction its id: the sequence logs one id in 32 ahead, and that one does).
      let caught = 0
      for (let i = 0; i < 3; i++)
        await svc.sql
          .begin(
            (tx) => tx`
              INSERT INTO audit_log (tenant_id, actor, action, outcome)
              VALUES (${entry.tenantId}, ${entry.actor}, ${entry.action}, ${entry.outcome})`,
          )
          .catch((err: Error) => {
            assert.match(err.message, /record id drawn before the transaction id/)
            caught++
          })
      assert.ok(caught > 0)
      await svc.sql.begin((tx) => insertAuditEntries(tx, [entry, entry]))
      await svc.api.services.audit.record(entry)
    } finally {
      await svc.sql.unsafe('DROP TRIGGER test_xid_first ON audit_log')
      await svc.sql.unsafe('DROP FUNCTION test_xid_first()')
    }
  })

  test('usage and last use are exact after the sweep when writes commit out of id order', async () => {
    const tenant = await svc.createTenant()
    const keyId = randomUUID()
    const base = Date.now()
    // A write draws its id and stays uncommitted; its record is the key's latest use.
    let commit: () => void = () => {}
    const released = new Promise<void>((resolve) => {
      commit = resolve
    })
    let drewId: (id: bigint) => void = () => {}
    const drawn = new Promise<bigint>((resolve) => {
      drewId = resolve
    })
    const held = other.begin(async (tx) => {
      await insertAuditEntries(tx, [mac(tenant.tenantId, keyId, { occurredAt: new Date(base + 60_000) })])
      const [row] = await tx<
        { id: string }[]
      >`SELECT max(id)::text AS id FROM audit_log WHERE resource = ${`key:${keyId}`}`
      drewId(BigInt(row!.id))
      await released
    })
    const heldId = await drawn
    // A later write commits, and the sweeps run.
    await svc.api.services.audit.record(mac(tenant.tenantId, keyId, { occurredAt: new Date(base) }))
    assert.ok((await lastId()) > heldId, 'the committed record has the higher id')
    await svc.api.services.billing.foldUsage()
    await svc.api.services.intelligence.foldKeyUse()
    // Nothing at or above the uncommitted id is folded; the report counts what is committed.
    assert.ok((await positionOf('billing.usage')) < heldId)
    assert.ok((await positionOf('intelligence.key_use')) < heldId)
    assert.equal(await usageOf(tenant), 1)

    commit()
    await held
    assert.equal(await usageOf(tenant), 2, 'the report counts the late commit at once')
    await foldUsage()
    await foldKeyUse()
    assert.equal(await foldedUsageOf(tenant.tenantId), 2, 'both folded, each once')
    assert.equal(await usageOf(tenant), 2)
    const use = await lastUseOf(keyId)
    assert.equal(use?.last_attempt_at.getTime(), base + 60_000, 'the late record is the last use')
    // More sweeps change nothing.
    await foldUsage()
    await foldKeyUse()
    assert.equal(await foldedUsageOf(tenant.tenantId), 2)
    assert.equal(await usageOf(tenant), 2)
  })

  test('a sweep that dies before it commits folds nothing: no operation is counted twice', async () => {
    const tenant = await svc.createTenant()
    const keyId = randomUUID()
    for (let i = 0; i < 3; i++) await svc.api.services.audit.record(mac(tenant.tenantId, keyId))
    await foldUsage()
    await foldKeyUse()
    assert.equal(await foldedUsageOf(tenant.tenantId), 3)

    const base = Date.now() + 120_000
    for (let i = 0; i < 4; i++)
      await svc.api.services.audit.record(mac(tenant.tenantId, keyId, { occurredAt: new Date(base + i) }))
    // The sweeps' session ends as they move their position, after they wrote what they folded:
    // their transaction never commits, as when the job process is killed there.
    await svc.sql.unsafe(`
      CREATE FUNCTION test_sweep_dies() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN PERFORM pg_terminate_backend(pg_backend_pid()); RETURN NEW; END $$`)
    await svc.sql.unsafe(`
      CREATE TRIGGER test_sweep_dies BEFORE UPDATE ON audit_feed_cursors FOR EACH ROW
      WHEN (NEW.position > OLD.position AND NEW.consumer IN ('billing.usage', 'intelligence.key_use'))
      EXECUTE FUNCTION test_sweep_dies()`)
    try {
      // Transaction ids are the cluster's: a transaction of another database (a suite running
      // beside this one) can keep the new records unsettled for a while, and a sweep that finds
      // nothing settled moves no position and ends normally. Each sweep either dies or moves
      // nothing; sweep until each has died once.
      for (const [name, fold] of [
        ['usage', () => svc.api.services.billing.foldUsage()],
        ['key use', () => svc.api.services.intelligence.foldKeyUse()],
      ] as const)
        await waitFor(
          () =>
            fold().then(
              () => false,
              () => true,
            ),
          `the ${name} sweep to die`,
          60_000,
        )
      assert.equal(await foldedUsageOf(tenant.tenantId), 3, 'nothing of the dead sweeps is kept')
      assert.ok((await lastUseOf(keyId))!.last_attempt_at.getTime() < base)
      assert.equal(await usageOf(tenant), 7, 'the report is exact meanwhile')
    } finally {
      await svc.sql.unsafe('DROP TRIGGER test_sweep_dies ON audit_feed_cursors')
      await svc.sql.unsafe('DROP FUNCTION test_sweep_dies()')
    }
    await foldUsage()
    await foldKeyUse()
    assert.equal(await foldedUsageOf(tenant.tenantId), 7, 'each operation once')
    assert.equal(await usageOf(tenant), 7)
    assert.equal((await lastUseOf(keyId))!.last_attempt_at.getTime(), base + 3)
  })

  test('a mark from another history (a database restored from a dump) does not hold a fold back', async () => {
    const tenant = await svc.createTenant()
    await foldUsage()
    await svc.api.services.audit.record(mac(tenant.tenantId, randomUUID()))
    const last = await lastId()
    // A transaction id above any of this database's: its transaction ran in the dumped database.
    await svc.sql`
      UPDATE audit_feed_cursors SET pending_position = ${String(last)},
        pending_xid = (pg_current_xact_id()::text::bigint + 1000000)::text::xid8
      WHERE consumer = 'billing.usage'`
    await svc.api.services.billing.foldUsage()
    assert.ok((await positionOf('billing.usage')) >= last)
    assert.equal(await foldedUsageOf(tenant.tenantId), 1)
  })

  describe('time ranges (GET /api/v1/audit?from=&to=) with the time map', () => {
    let tenant: TenantWithKey
    // After every other record of the file (written now), so that the map's bounds are tight.
    const start = Math.ceil(Date.now() / DAY_MS) * DAY_MS + 100 * DAY_MS

    const listed = async (query: string) => {
      const ids: string[] = []
      let cursor: string | null = null
      do {
        const res = await svc.request(
          'GET',
          `/api/v1/audit?action=test.timed&limit=7&${query}${cursor ? `&cursor=${cursor}` : ''}`,
          { key: tenant.key },
        )
        assert.equal(res.status, 200, res.text)
        ids.push(...(res.body.data as Array<{ id: string }>).map((r) => r.id))
        cursor = res.body.nextCursor
      } while (cursor)
      return ids
    }
    const expected = async (from?: Date, to?: Date) =>
      (
        await svc.sql<{ id: string }[]>`
          SELECT id::text AS id FROM audit_log
          WHERE tenant_id = ${tenant.tenantId} AND action = 'test.timed'
            ${from ? svc.sql`AND occurred_at >= ${from}` : svc.sql``} ${to ? svc.sql`AND occurred_at < ${to}` : svc.sql``}
          ORDER BY audit_log.id DESC`
      ).map((r) => r.id)

    /** Records at these days after `start`, written in this order, then ids jump a map range ahead. */
    const write = async (days: number[]) => {
      for (const day of days)
        await svc.api.services.audit.record({
          tenantId: tenant.tenantId,
          actor: 'test',
          action: 'test.timed',
          resource: `day:${day}`,
          outcome: 'success',
          occurredAt: new Date(start + day * DAY_MS),
        })
      await svc.sql`
        SELECT setval(pg_get_serial_sequence('audit_log', 'id'),
          (SELECT last_value FROM audit_log_id_seq) + 25000)`
    }
    const windows = [
      [undefined, undefined],
      [0, 10],
      [3, 4],
      [5, undefined],
      [undefined, 5],
      [12, 40],
      [20, 21],
      [-5, 0],
      [2.5, 7.5],
      [15, 16],
      [16, 18],
    ] as const
    const checkAll = async (label: string) => {
      for (const [from, to] of windows) {
        const f = from === undefined ? undefined : new Date(start + from * DAY_MS)
        const t = to === undefined ? undefined : new Date(start + to * DAY_MS)
        const query = [f ? `from=${f.toISOString()}` : '', t ? `to=${t.toISOString()}` : '']
          .filter(Boolean)
          .join('&')
        assert.deepEqual(await listed(query), await expected(f, t), `${label}: [${from}, ${to})`)
      }
    }

    before(async () => {
      tenant = await svc.createTenant()
    })

    test('exact whatever order the times were written in, before and after the map is folded', async () => {
      // Mostly increasing, with records written late (days 1 and 3 after day 9) and early (day 30).
      await write([0, 1, 2, 3])
      await write([4, 5, 6, 30, 7])
      await write([8, 9, 1, 3])
      await checkAll('nothing mapped')
      await foldAll('audit.time_map', () => svc.api.services.audit.feed.foldTimeMap())
      await checkAll('mapped')
      // Written after the map: above it, and among them times long before what is mapped.
      await write([20, 2, 10, 11])
      await checkAll('partly mapped')
      await foldAll('audit.time_map', () => svc.api.services.audit.feed.foldTimeMap())
      await checkAll('mapped again')
      const [ranges] = await svc.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM audit_time_map`
      assert.ok(ranges!.n >= 4, `${ranges!.n} ranges`)
    })

    test('a record committed late below the mapped ids is found: the map waits for it', async () => {
      let commit: () => void = () => {}
      const released = new Promise<void>((resolve) => {
        commit = resolve
      })
      let drew: () => void = () => {}
      const drawn = new Promise<void>((resolve) => {
        drew = resolve
      })
      const held = other.begin(async (tx) => {
        await insertAuditEntries(tx, [
          {
            tenantId: tenant.tenantId,
            actor: 'test',
            action: 'test.timed',
            resource: 'day:late',
            outcome: 'success',
            occurredAt: new Date(start + 15 * DAY_MS),
          },
        ])
        drew()
        await released
      })
      await drawn
      await write([16, 17])
      await svc.api.services.audit.feed.foldTimeMap()
      commit()
      await held
      await checkAll('late commit')
      await foldAll('audit.time_map', () => svc.api.services.audit.feed.foldTimeMap())
      await checkAll('late commit, mapped')
      assert.ok((await listed(`from=${new Date(start + 15 * DAY_MS).toISOString()}`)).length > 0)
    })
  })
})
