import postgres from 'postgres'

export type Sql = postgres.Sql
/** A transaction handle: what the data-access functions take when they must join a caller's transaction. */
export type Tx = postgres.TransactionSql
/** Either a pool or a transaction: data-access functions accept both. */
export type Queryable = Sql | Tx

export interface DatabaseOptions {
  url: string
  poolSize: number
  /** Bounds every statement so a stuck database turns into an error, never a hung request. */
  statementTimeoutMs: number
  applicationName: string
}

/**
 * postgres.js does not read libpq's `?host=/socket/dir` form, which the embedded database's
 * URL uses; turn it into the socket path option.
 */
function unixSocketPath(url: string): { url: string; path: string | undefined } {
  const parsed = new URL(url)
  const host = parsed.searchParams.get('host')
  if (!host?.startsWith('/')) return { url, path: undefined }
  parsed.searchParams.delete('host')
  return { url: parsed.toString(), path: `${host}/.s.PGSQL.${parsed.port || 5432}` }
}

export function connectDatabase(options: DatabaseOptions): Sql {
  const { url, path } = unixSocketPath(options.url)
  return postgres(url, {
    ...(path ? { path } : {}),
    max: options.poolSize,
    idle_timeout: 30,
    connect_timeout: 10,
    onnotice: () => {},
    connection: {
      application_name: options.applicationName,
      statement_timeout: options.statementTimeoutMs,
      lock_timeout: options.statementTimeoutMs,
    },
    // Timestamps come back as Date; bigint ids as strings (they are opaque cursors to callers).
    types: {},
  })
}

export async function isDatabaseUp(sql: Sql, timeoutMs = 2000): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined
  try {
    await Promise.race([
      sql`SELECT 1`,
      new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error('timeout')), timeoutMs)
      }),
    ])
    return true
  } catch {
    return false
  } finally {
    clearTimeout(timer)
  }
}
