import assert from 'node:assert/strict'
import { randomBytes, randomUUID } from 'node:crypto'
import { after, before, test } from 'node:test'
import { SCOPES } from '../../src/auth/scopes.ts'
import { connectDatabase, type Sql } from '../../src/data/database.ts'
import { loadMigrations, migrate } from '../../src/data/migrations.ts'
import { createTestDatabase, type TestDatabase } from '../helpers/service.ts'

/**
 * Migration 0005 on a database that already has API keys and keys (issue 15, defects 4 and 5):
 * lineage from created_by, keys:export for the full-scope keys of tenant creation only, and
 * existing keys not exportable.
 */

let db: TestDatabase
let sql: Sql

before(async () => {
  db = await createTestDatabase()
  sql = connectDatabase({ url: db.url, poolSize: 2, statementTimeoutMs: 10_000, applicationName: 'kms-test' })
})
after(async () => {
  await sql?.end({ timeout: 5 })
  await db?.drop()
})

test('0005 backfills parents from created_by, grants keys:export to full-scope root keys only, keys stay unexportable', async () => {
  const all = loadMigrations()
  await migrate(
    sql,
    all.filter((m) => m.version < 5),
  )
  const tenant = randomUUID()
  await sql`INSERT INTO tenants (id, name, kek_wrapped, kek_master_key_id) VALUES (${tenant}, 'acme', ${randomBytes(60)}, 'm1')`
  const before = SCOPES.filter((s) => s !== 'keys:export')
  const insert = async (id: string, scopes: readonly string[], createdBy: string) => {
    await sql`
      INSERT INTO api_keys (id, tenant_id, lookup_id, secret_hash, name, scopes, created_by)
      VALUES (${id}, ${tenant}, ${randomBytes(6).toString('hex')}, ${randomBytes(32)}, ${id},
              ${sql.array([...scopes])}, ${createdBy})`
  }
  const root = randomUUID()
  const child = randomUUID()
  const grandchild = randomUUID()
  const cliKey = randomUUID()
  await insert(root, before, 'system:bootstrap')
  await insert(child, before, `apikey:${root}`)
  await insert(grandchild, ['audit:read'], `apikey:${child}`)
  await insert(cliKey, ['keys:read'], 'cli')
  const keyId = randomUUID()
  await sql`
    INSERT INTO keys (id, tenant_id, name, key_type, algorithm, origin, created_at, created_by, updated_at)
    VALUES (${keyId}, ${tenant}, 'old', 'Signing', 'Ed25519', 'Generated', now(), 'test', now())`

  await migrate(sql, all)

  const rows = await sql<{ id: string; parent_id: string | null; scopes: string[] }[]>`
    SELECT id, parent_id, scopes FROM api_keys WHERE tenant_id = ${tenant}`
  const byId = new Map(rows.map((r) => [r.id, r]))
  assert.equal(byId.get(root)!.parent_id, null)
  assert.equal(byId.get(child)!.parent_id, root)
  assert.equal(byId.get(grandchild)!.parent_id, child)
  assert.equal(byId.get(cliKey)!.parent_id, null)
  assert.ok(byId.get(root)!.scopes.includes('keys:export'), 'the full-scope root key gets keys:export')
  assert.ok(!byId.get(child)!.scopes.includes('keys:export'), 'a full-scope child does not')
  assert.deepEqual(byId.get(cliKey)!.scopes, ['keys:read'])
  const [key] = await sql<{ exportable: boolean }[]>`SELECT exportable FROM keys WHERE id = ${keyId}`
  assert.equal(key!.exportable, false)
})
