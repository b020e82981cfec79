import assert from 'node:assert/strict'
import { randomBytes, randomUUID } from 'node:crypto'
import { after, before, describe, test } from 'node:test'
import { connectDatabase, type Sql } from '../../src/data/database.ts'
import { loadMigrations, migrate } from '../../src/data/migrations.ts'
import {
  createTestDatabase,
  startTestService,
  type TestDatabase,
  type TestService,
} from '../helpers/service.ts'

describe('migration 0006: unique tenant names on a database that already has duplicates', () => {
  let db: TestDatabase
  let sql: Sql
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

  test('the oldest keeps its name, later ones get the first free suffix, each rename is audited', async () => {
    await migrate(
      sql,
      loadMigrations().filter((m) => m.version < 6),
    )
    const insert = async (name: string, at: string) => {
      const id = randomUUID()
      await sql`INSERT INTO tenants (id, name, created_at, kek_wrapped, kek_master_key_id)
                VALUES (${id}, ${name}, ${at}, ${randomBytes(60)}, 'mk_test')`
      return id
    }
    const acme1 = await insert('acme', '2026-01-01T00:00:00Z')
    const acme2 = await insert('ACME', '2026-01-02T00:00:00Z')
    // "acme-2" is taken by someone else already: the second acme gets "-3".
    const taken = await insert('acme-2', '2026-01-03T00:00:00Z')
    const acme3 = await insert('acme', '2026-01-04T00:00:00Z')
    const solo = await insert('initech', '2026-01-05T00:00:00Z')

    const applied = await migrate(sql)
    assert.equal(applied[0]?.version, 6, 'migration 0006 is the first one applied')
    const rows = await sql<{ id: string; name: string }[]>`SELECT id, name FROM tenants`
    const byId = new Map(rows.map((r) => [r.id, r.name]))
    assert.equal(byId.get(acme1), 'acme')
    assert.equal(byId.get(acme2), 'ACME-3')
    assert.equal(byId.get(taken), 'acme-2')
    assert.equal(byId.get(acme3), 'acme-4')
    assert.equal(byId.get(solo), 'initech')

    const audit = await sql<{ tenant_id: string; actor: string; details: { from: string; to: string } }[]>`
      SELECT tenant_id, actor, details FROM audit_log WHERE action = 'tenants.rename' ORDER BY id`
    assert.deepEqual(
      audit.map((a) => [a.tenant_id, a.actor, a.details.from, a.details.to]),
      [
        [acme2, 'migration', 'ACME', 'ACME-3'],
        [acme3, 'migration', 'acme', 'acme-4'],
      ],
    )
    await assert.rejects(
      sql`INSERT INTO tenants (id, name, kek_wrapped, kek_master_key_id)
          VALUES (${randomUUID()}, 'Initech', ${randomBytes(60)}, 'mk_test')`,
      (err: { code?: string }) => err.code === '23505',
    )
  })
})

describe('tenant creation with a taken name', () => {
  let svc: TestService
  before(async () => {
    svc = await startTestService()
  })
  after(async () => svc?.stop())

  const tenants = () => svc.api.services.tenants

  test('two concurrent creations of one name: one tenant, the other gets tenant_name_taken (409)', async () => {
    const results = await Promise.allSettled([
      tenants().create({ name: 'Umbrella', actor: 'test' }),
      tenants().create({ name: 'umbrella', actor: 'test' }),
    ])
    const fulfilled = results.filter((r) => r.status === 'fulfilled')
    const rejected = results.filter((r) => r.status === 'rejected')
    assert.equal(fulfilled.length, 1)
    assert.equal(rejected.length, 1)
    const err = rejected[0]!.reason as { statusCode: number; code: string; message: string }
    assert.equal(err.statusCode, 409)
    assert.equal(err.code, 'tenant_name_taken')
    const [row] = await svc.sql`SELECT count(*)::int AS n FROM tenants WHERE lower(name) = 'umbrella'`
    assert.equal(row!['n'], 1)
    // The loser left nothing behind: no orphan API key or audit record of a tenant that was not made.
    const [orphans] = await svc.sql`
      SELECT count(*)::int AS n FROM api_keys WHERE tenant_id NOT IN (SELECT id FROM tenants)`
    assert.equal(orphans!['n'], 0)
  })

  test('a name that is empty, padded or holds control characters is refused with a 400 naming the field', async () => {
    for (const name of ['', ' acme', 'ac\u0000me', 'x'.repeat(201)]) {
      await assert.rejects(
        tenants().create({ name, actor: 'test' }),
        (err: { statusCode: number; message: string }) => {
          assert.equal(err.statusCode, 400)
          assert.match(err.message, /^name /)
          return true
        },
      )
    }
  })
})
