import { createHash } from 'node:crypto'
import type { Queryable } from '../data/database.ts'

/**
 * The namespace of this deployment's job queues in Redis: a hash of the PostgreSQL cluster's
 * system identifier, the database name and the database's own random id (deployment_identity).
 * Every process of one deployment reads the same database, so they share the queues; two
 * deployments on one Redis with the same KMS_REDIS_PREFIX get different queues, so neither runs
 * the other's sweeps against its own database. Each part covers a way two databases can look
 * alike: another cluster (system identifier), another database in the same cluster (name), a
 * cluster where pg_control_system() is not granted (the random id).
 */
export async function jobNamespace(db: Queryable): Promise<string> {
  let system = ''
  try {
    const [row] = await db<{ id: string }[]>`SELECT system_identifier::text AS id FROM pg_control_system()`
    system = row?.id ?? ''
  } catch {
    // Not granted on some managed services: the database name and random id still separate them.
  }
  const [row] = await db<{ database: string; deployment: string | null }[]>`
    SELECT current_database() AS database, (SELECT id::text FROM deployment_identity) AS deployment`
  return createHash('sha256')
    .update(`${system}\0${row!.database}\0${row!.deployment ?? ''}`)
    .digest('hex')
    .slice(0, 16)
}
