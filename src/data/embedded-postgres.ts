import { existsSync, mkdirSync, rmSync } from 'node:fs'
import { connect } from 'node:net'
import { join } from 'node:path'
import { PGlite } from '@electric-sql/pglite'
import { pg_trgm } from '@electric-sql/pglite/contrib/pg_trgm'
import { PGLiteSocketServer } from '@electric-sql/pglite-socket'

/**
 * PostgreSQL compiled to WASM (PGlite), served on a Unix socket in the data directory, so a
 * first start needs nothing installed. It is a development convenience: production points
 * DATABASE_URL at a real PostgreSQL.
 */
export interface EmbeddedPostgres {
  url: string
  stop(): Promise<void>
}

/** Connections the multiplexing socket server accepts; API processes size their pools to fit. */
const EMBEDDED_MAX_CONNECTIONS = 32

const socketDirOf = (dataDir: string) => join(dataDir, 'run')
const socketPathOf = (dataDir: string) => join(socketDirOf(dataDir), '.s.PGSQL.5432')
// libpq-style URL: a `host` parameter naming a directory means the Unix socket in it.
const urlOf = (dataDir: string) =>
  `postgres://postgres@localhost/postgres?host=${encodeURIComponent(socketDirOf(dataDir))}`

/** The URL of an embedded database another process is already serving from `dataDir`, if any. */
export async function runningEmbeddedPostgres(dataDir: string): Promise<string | undefined> {
  const path = socketPathOf(dataDir)
  if (!existsSync(path)) return undefined
  const live = await new Promise<boolean>((resolve) => {
    const socket = connect(path)
    socket.once('connect', () => {
      socket.destroy()
      resolve(true)
    })
    socket.once('error', () => resolve(false))
  })
  return live ? urlOf(dataDir) : undefined
}

export async function startEmbeddedPostgres(dataDir: string): Promise<EmbeddedPostgres> {
  if (await runningEmbeddedPostgres(dataDir)) {
    throw new Error(`another process already serves the embedded database in ${dataDir}`)
  }
  const dbDir = join(dataDir, 'pglite')
  mkdirSync(dbDir, { recursive: true, mode: 0o700 })
  mkdirSync(socketDirOf(dataDir), { recursive: true, mode: 0o700 })
  const socketPath = socketPathOf(dataDir)
  // A socket file left by a crashed run would make listen() fail.
  rmSync(socketPath, { force: true })

  // The extensions the migrations create must be compiled in: PGlite cannot load them later.
  const db = await PGlite.create(dbDir, { extensions: { pg_trgm } })
  const server = new PGLiteSocketServer({ db, path: socketPath, maxConnections: EMBEDDED_MAX_CONNECTIONS })
  await server.start()
  return {
    url: urlOf(dataDir),
    async stop() {
      await server.stop()
      await db.close()
    },
  }
}
