import { connect as netConnect, type Socket } from 'node:net'
import type { Logger } from 'pino'
import postgres from 'postgres'
import { isConnectionLost, isDatabaseUnavailable, markDatabaseError } from '../platform/errors.ts'

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
  /** Where the pool reports what it does about a lost connection (its replacement). */
  logger?: Pick<Logger, 'warn'>
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

/**
 * Seconds before a connection is tried again after a failed one: postgres.js's default grows to
 * 20 s, which kept the service refusing requests long after the database was back. Capped at 1 s.
 */
const reconnectDelaySeconds = (retries: number) =>
  Math.min(0.05 * 2 ** retries, 1) * (0.5 + Math.random() / 2)

/** What postgres.js passes its `socket` option: the parsed connection options. */
interface SocketTarget {
  host: string[]
  port: number[]
  path: string | false
}

/**
 * The socket of one connection (postgres.js's `socket` option), closed as soon as it fails.
 *
 * An established socket that fails emits 'error' at once but 'close' only once its handle has
 * closed, a turn of the event loop later; postgres.js fails the statements in flight on 'error'
 * but keeps the connection in its pool until 'close'. A statement sent in between is never
 * answered nor failed, and a BEGIN sent then is taken as answered by the next start-up of that
 * connection: the transaction's statements then run outside any transaction, and answers go to
 * the wrong statements. So once the socket was up, 'close' follows 'error' (or the server's end
 * of the stream) before anything else can run, and `lost` is told of an error (the pool is then
 * replaced, connectDatabase). A socket that never came up (refused, unreachable) is left to postgres.js: its
 * own 'close' comes after the start-up message it wrote is flushed, which leaves it clean.
 *
 * With TLS (sslmode), postgres.js wraps this socket in its own TLS socket, which this does not
 * reach; the other defences (connectDatabase) still hold.
 */
function closingSocket(target: SocketTarget, index: number, lost: () => void): Socket {
  const host = target.host[index % target.host.length] ?? 'localhost'
  const port = target.port[index % target.port.length] ?? 5432
  const socket = target.path ? netConnect(target.path) : netConnect({ host, port })
  // postgres.js names the address in its errors and uses the host name for TLS.
  Object.assign(socket, { host, port })
  let up = false
  let closed = false
  const closeNow = (hadError: boolean) => {
    if (!up) return
    // A network failure may leave the connection object unusable (a half-written message): the
    // pool is replaced. The server's orderly end leaves it clean, unless statements were in
    // flight, which then fail with CONNECTION_CLOSED and replace it (connectDatabase).
    if (hadError) lost()
    // A microtask: after postgres.js's own 'error' listener (added after this one) has failed the
    // statements in flight, before any other code runs.
    queueMicrotask(() => {
      if (closed) return
      closed = true
      socket.destroy()
      socket.emit('close', hadError)
      // postgres.js removed every listener on 'close': a late error must not go unhandled.
      socket.on('error', () => {})
    })
  }
  socket.once('connect', () => {
    up = true
  })
  socket.once('close', () => {
    closed = true
  })
  socket.on('error', () => closeNow(true))
  socket.once('end', () => {
    // The server ended the session (shutdown, terminated backend); not the end of our own Terminate.
    if (!socket.writableEnded) closeNow(false)
  })
  return socket
}

/** Pool replacements (see connectDatabase) at most this often; one more follows a burst. */
const REPLACE_INTERVAL_MS = 1000
/** A replaced pool's healthy connections get this long to finish their statements. */
const REPLACED_POOL_GRACE_SECONDS = 1

/**
 * Errors of a connection that was up and went: its postgres.js connection object may keep a
 * half-written message or a transaction that still writes to it (see connectDatabase). The
 * errors of a connection that never came up (refused, timed out, server starting) are not here.
 */
function lostAfterConnecting(error: unknown): boolean {
  const code = (error as { code?: unknown }).code
  return (
    code === 'ECONNRESET' ||
    code === 'EPIPE' ||
    code === 'ETIMEDOUT' ||
    code === 'ECONNABORTED' ||
    code === 'CONNECTION_CLOSED' ||
    code === '57P01' ||
    code === '57P02' ||
    (typeof code === 'string' && code.startsWith('08'))
  )
}

/** The parts of postgres.js's parsed options that hold the array types it fetched. */
interface TypeInfo {
  parsers: Record<string, unknown>
  serializers: Record<string, unknown>
  shared?: { typeArrayMap: Record<string, unknown> }
}

interface QueryInternals {
  handler: ((query: QueryInternals) => unknown) & { debug?: unknown }
  reject(error: unknown): void
}

function isQuery(value: unknown): value is Promise<unknown> & QueryInternals {
  return value instanceof Promise && typeof (value as { handler?: unknown }).handler === 'function'
}

/**
 * Wraps a postgres.js query (not yet run: its handler runs on its first `then`) so that its
 * failure is seen first: `refuse` says it must not run at all, `failed` hears every rejection.
 * Fragments (a query used inside another) never run their handler and are unaffected.
 */
function watchQuery<T>(value: T, failed: (error: unknown) => void, refuse?: () => Error | undefined): T {
  if (!isQuery(value)) return value
  const original = value.handler
  const handler = Object.assign(
    (query: QueryInternals) => {
      const refusal = refuse?.()
      if (refusal) {
        failed(refusal)
        return query.reject(refusal)
      }
      const reject = query.reject
      query.reject = (error: unknown) => {
        failed(error)
        reject(error)
      }
      return original(query)
    },
    { debug: original.debug },
  )
  value.handler = handler
  return value
}

/** The error of a statement a transaction tried after its connection was lost. */
function transactionConnectionLost(): Error {
  const error = Object.assign(new Error('write CONNECTION_CLOSED: the transaction’s connection was lost'), {
    code: 'CONNECTION_CLOSED',
  })
  markDatabaseError(error)
  return error
}

/**
 * A transaction handle that runs nothing more once its connection is lost: postgres.js 3.4.9 would
 * write the statement on the closed connection (see connectDatabase).
 */
function guardTransaction<T extends object>(
  tx: T,
  state: { lost: boolean },
  failed: (error: unknown) => void,
): T {
  const watch = <Q>(query: Q): Q =>
    watchQuery(query, failed, () => (state.lost ? transactionConnectionLost() : undefined))
  return new Proxy(tx, {
    apply: (target, thisArg, args) => watch(Reflect.apply(target as () => unknown, thisArg, args)),
    get(target, property, receiver) {
      const value = Reflect.get(target, property, receiver) as unknown
      if (typeof value !== 'function') return value
      if (property === 'unsafe' || property === 'file')
        return (...args: unknown[]) => watch((value as (...a: unknown[]) => unknown).apply(target, args))
      if (property === 'savepoint')
        return (...args: unknown[]) => {
          if (state.lost) return Promise.reject(transactionConnectionLost())
          const last = args.length - 1
          const fn = args[last]
          if (typeof fn === 'function')
            args[last] = (inner: object) => fn(guardTransaction(inner, state, failed))
          return (value as (...a: unknown[]) => unknown).apply(target, args)
        }
      return value
    },
  })
}

/**
 * A pool of connections to PostgreSQL (postgres.js), made safe against connections that drop.
 *
 * postgres.js 3.4.9 (the latest release) keeps a connection object per pool slot and reuses it
 * after its socket closes, and under a database outage that shows (docs/decisions.md, "Database
 * outages"): a transaction whose connection dropped still sends its ROLLBACK (or its next
 * statement) on it, and with the socket gone the write throws a TypeError in a timer
 * (connection.js nextWrite: "Cannot read properties of null (reading 'write')") that ends the
 * process; a message still buffered when the socket closed stays buffered, so the slot's next
 * start-up is never sent and hangs until its connect timeout; a statement sent between the
 * socket's error and its close is never answered (closingSocket); and the reconnection delay
 * grows to 20 s.
 *
 * So: the socket closes as soon as it fails (closingSocket); a transaction's handle refuses
 * statements once its connection is lost, and the transaction then ends without ROLLBACK or
 * COMMIT (PostgreSQL rolls it back with the session); a connection lost after it was up replaces
 * the whole pool with a fresh one (fresh connection objects; the old pool's healthy connections
 * get REPLACED_POOL_GRACE_SECONDS to finish); reconnections are at most a second apart. The
 * returned `sql` is one object throughout: it forwards to the current pool.
 *
 * Every error of a query through it is marked as the database's (errors.ts isDatabaseUnavailable).
 * `reserve()`, `listen()` and `subscribe()` are postgres.js's own, without these guards.
 */
export function connectDatabase(options: DatabaseOptions): Sql {
  const { url, path } = unixSocketPath(options.url)
  let current: Sql
  const replaced = new Set<Sql>()
  let ended = false
  let lastReplacedAt = 0
  let pendingReplace: NodeJS.Timeout | undefined

  function openPool(previous?: Sql): Sql {
    // The array types (postgres.js fetches them on every new connection) carry over once known: a
    // connection lost during that fetch is an unhandled rejection inside postgres.js.
    const known = previous?.options as TypeInfo | undefined
    const typesKnown = Object.keys(known?.shared?.typeArrayMap ?? {}).length > 0
    let sockets = 0
    const pool: Sql = postgres(url, {
      ...(path ? { path } : {}),
      ...({
        socket: (target: SocketTarget) => closingSocket(target, sockets++, () => connectionLost(pool)),
      } as object),
      max: options.poolSize,
      idle_timeout: 30,
      connect_timeout: 10,
      backoff: reconnectDelaySeconds,
      fetch_types: !typesKnown,
      onnotice: () => {},
      connection: {
        application_name: options.applicationName,
        statement_timeout: options.statementTimeoutMs,
        lock_timeout: options.statementTimeoutMs,
      },
      // Timestamps come back as Date; bigint ids as strings (they are opaque cursors to callers).
      types: {},
    })
    if (typesKnown && known) {
      const next = pool.options as TypeInfo
      Object.assign(next.parsers, known.parsers)
      Object.assign(next.serializers, known.serializers)
      if (next.shared) Object.assign(next.shared.typeArrayMap, known.shared?.typeArrayMap)
    }
    return pool
  }
  current = openPool()

  function replace(): void {
    if (ended) return
    clearTimeout(pendingReplace)
    pendingReplace = undefined
    const old = current
    current = openPool(old)
    lastReplacedAt = Date.now()
    replaced.add(old)
    options.logger?.warn(
      { application: options.applicationName },
      'a database connection was lost: the connection pool is replaced',
    )
    void old
      .end({ timeout: REPLACED_POOL_GRACE_SECONDS })
      .catch(() => {})
      .finally(() => replaced.delete(old))
  }

  /** A connection of `pool` that was up went away: replace the pool (at most once a second). */
  function connectionLost(pool: Sql): void {
    if (ended || pool !== current) return
    const wait = lastReplacedAt + REPLACE_INTERVAL_MS - Date.now()
    if (wait <= 0) {
      replace()
      return
    }
    // A burst of failures replaces once now and once after it, not once per failure.
    pendingReplace ??= setTimeout(() => {
      pendingReplace = undefined
      if (pool === current) replace()
    }, wait).unref()
  }

  function failed(pool: Sql, error: unknown): void {
    markDatabaseError(error)
    if (lostAfterConnecting(error)) connectionLost(pool)
  }

  async function begin(...args: unknown[]): Promise<unknown> {
    const pool = current
    const fn = args.pop() as (tx: Tx) => unknown
    const state = { lost: false }
    const onFailure = (error: unknown) => {
      if (isConnectionLost(error)) state.lost = true
      failed(pool, error)
    }
    let beginSettled: () => void = () => {}
    const settled = new Promise<void>((resolve) => {
      beginSettled = resolve
    })
    /**
     * The transaction's function ended, but its connection is lost: it must not send ROLLBACK or
     * COMMIT. postgres.js ends the transaction with the connection's error as soon as the socket
     * closes; this then stays pending and is collected. Should the socket not close (an error
     * taken for a lost connection), the error is passed on after a while and the transaction
     * rolls back as usual.
     */
    const abandon = async (error: unknown): Promise<never> => {
      let timer: NodeJS.Timeout | undefined
      const closed = await Promise.race([
        settled.then(() => true),
        new Promise<false>((resolve) => {
          timer = setTimeout(() => resolve(false), 5000).unref()
        }),
      ])
      clearTimeout(timer)
      if (closed) return new Promise<never>(() => {})
      throw error ?? transactionConnectionLost()
    }
    const run = async (tx: Tx) => {
      let result: unknown
      try {
        result = await fn(guardTransaction(tx, state, onFailure))
      } catch (error) {
        if (isConnectionLost(error)) state.lost = true
        if (state.lost) return abandon(error)
        throw error
      }
      if (state.lost) return abandon(undefined)
      return result
    }
    try {
      return await (pool.begin as (...a: unknown[]) => Promise<unknown>)(...args, run)
    } catch (error) {
      onFailure(error)
      throw error
    } finally {
      beginSettled()
    }
  }

  async function end(endOptions?: { timeout?: number }): Promise<void> {
    ended = true
    clearTimeout(pendingReplace)
    await Promise.all([current, ...replaced].map((pool) => pool.end(endOptions)))
  }

  const target = (() => {}) as unknown as Sql
  return new Proxy(target, {
    apply: (_target, _this, args) => {
      const pool = current
      return watchQuery(
        Reflect.apply(pool as unknown as (...a: unknown[]) => unknown, undefined, args),
        (error) => failed(pool, error),
      )
    },
    get(_target, property) {
      if (property === 'begin') return begin
      if (property === 'end' || property === 'close') return end
      const pool = current
      const value = Reflect.get(pool, property) as unknown
      if (property === 'unsafe' || property === 'file')
        return (...args: unknown[]) =>
          watchQuery((value as (...a: unknown[]) => unknown)(...args), (error) => failed(pool, error))
      return value
    },
    has: (_target, property) => property in current,
  })
}

/**
 * The process-level guard against the one postgres.js fault no wrapping reaches (main.ts installs
 * it in every process): a connection lost while it fetches the array types on connecting rejects a
 * promise nobody awaits (connection.js fetchArrayTypes), which would end the process. That
 * rejection is logged instead; any other unhandled rejection still ends the process as Node's
 * default does.
 */
export function installDatabaseFaultGuard(logger: Pick<Logger, 'warn' | 'error'>): void {
  process.on('unhandledRejection', (reason) => {
    if (isDatabaseUnavailable(reason)) {
      logger.warn(
        { err: { message: (reason as Error).message, code: (reason as { code?: unknown }).code } },
        'the database driver dropped a connection error (the database is unavailable)',
      )
      return
    }
    // Node's default for an unhandled rejection (--unhandled-rejections=throw): the process ends.
    throw reason
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
