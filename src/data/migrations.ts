import { createHash } from 'node:crypto'
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import type { Sql } from './database.ts'

const MIGRATIONS_DIR = join(import.meta.dirname, 'migrations')
/** Arbitrary constant: serialises concurrent starts so each migration runs once. */
const MIGRATION_LOCK_ID = 7_301_952_210

export interface Migration {
  version: number
  name: string
  sql: string
  checksum: string
}

export function loadMigrations(dir = MIGRATIONS_DIR): Migration[] {
  return readdirSync(dir)
    .filter((file) => /^\d{4}_[a-z0-9_]+\.sql$/.test(file))
    .sort()
    .map((file) => {
      const sql = readFileSync(join(dir, file), 'utf8')
      return {
        version: Number(file.slice(0, 4)),
        name: file.slice(5, -4),
        sql,
        checksum: createHash('sha256').update(sql).digest('hex'),
      }
    })
}

/**
 * Applies pending migrations, each in its own transaction, under an advisory lock. A landed
 * migration whose file changed afterwards stops the start: migrations are never edited.
 */
export async function migrate(sql: Sql, migrations = loadMigrations()): Promise<Migration[]> {
  return sql.begin(async (tx) => {
    await tx`SELECT pg_advisory_xact_lock(${MIGRATION_LOCK_ID})`
    await tx`
      CREATE TABLE IF NOT EXISTS schema_migrations (
        version integer PRIMARY KEY,
        name text NOT NULL,
        checksum text NOT NULL,
        applied_at timestamptz NOT NULL DEFAULT now()
      )`
    const applied = new Map(
      (
        await tx<{ version: number; checksum: string }[]>`SELECT version, checksum FROM schema_migrations`
      ).map((row) => [row.version, row.checksum]),
    )
    const done: Migration[] = []
    for (const migration of migrations) {
      const checksum = applied.get(migration.version)
      if (checksum !== undefined) {
        if (checksum !== migration.checksum) {
          throw new Error(
            `Migration ${migration.version}_${migration.name} was edited after it was applied; add a new migration instead`,
          )
        }
        continue
      }
      await tx.unsafe(migration.sql)
      await tx`INSERT INTO schema_migrations (version, name, checksum)
               VALUES (${migration.version}, ${migration.name}, ${migration.checksum})`
      done.push(migration)
    }
    return done
  })
}
