import { pino } from 'pino'
import { ConfigError } from '../config.ts'

/**
 * What a failed start says: one sentence naming the cause and what to do, never a stack trace
 * (operators read the first line; a stack hides it), never a credential (a database URL may hold
 * a password, so only its host and port are named).
 */
export interface StartupFailure {
  message: string
  /** The system or PostgreSQL error code, when there is one. */
  code?: string
}

export interface StartupContext {
  host?: string
  port?: number
  databaseUrl?: string
}

interface SystemError {
  code?: unknown
  syscall?: unknown
  address?: unknown
  port?: unknown
  hostname?: unknown
  errors?: unknown
  message?: unknown
}

/** Host and port of a database URL, without its user or password. */
function databaseAddress(url: string | undefined): string | undefined {
  if (!url) return undefined
  try {
    const u = new URL(url)
    return `${u.hostname}:${u.port || '5432'}`
  } catch {
    return undefined
  }
}

const PG_CONNECTION_CODES: Record<string, string> = {
  '28P01': 'the database rejected the password',
  '28000': 'the database rejected the user',
  '3D000': 'the database does not exist',
  '57P03': 'the database is starting up or shutting down',
  '53300': 'the database has no free connections',
}

export function describeStartupFailure(err: unknown, context: StartupContext = {}): StartupFailure {
  if (err instanceof ConfigError) return { message: `configuration error: ${err.message}` }
  // Node's happy-eyeballs connect reports every address tried; the first one speaks for all.
  let e = (typeof err === 'object' && err !== null ? err : {}) as SystemError
  if (Array.isArray(e.errors) && e.errors.length > 0 && typeof e.code !== 'string') {
    e = e.errors[0] as SystemError
  }
  const code = typeof e.code === 'string' ? e.code : undefined
  switch (code) {
    case 'EADDRINUSE':
      return {
        code,
        message: `port ${context.port} is in use${context.host ? ` on ${context.host}` : ''}: set PORT to a free port or stop the other process`,
      }
    case 'EACCES':
      if (e.syscall === 'listen' || e.syscall === 'bind')
        return {
          code,
          message: `not allowed to listen on port ${context.port}: set PORT to a port above 1023`,
        }
      break
    case 'EADDRNOTAVAIL':
      return {
        code,
        message: `HOST ${context.host} is not an address of this machine: set HOST (0.0.0.0 for all)`,
      }
  }
  if (code && (e.syscall === 'connect' || e.syscall === 'getaddrinfo' || code === 'ECONNREFUSED')) {
    const target =
      typeof e.address === 'string'
        ? `${e.address}:${e.port ?? ''}`
        : typeof e.hostname === 'string'
          ? e.hostname
          : databaseAddress(context.databaseUrl)
    return {
      code,
      message: `cannot reach the database at ${target ?? 'its address'} (${code}): check DATABASE_URL and that PostgreSQL is running`,
    }
  }
  if (code && PG_CONNECTION_CODES[code]) {
    const at = databaseAddress(context.databaseUrl)
    return { code, message: `${PG_CONNECTION_CODES[code]}${at ? ` at ${at}` : ''}: check DATABASE_URL` }
  }
  const message = typeof e.message === 'string' && e.message !== '' ? e.message : String(err)
  return { ...(code ? { code } : {}), message: `start failed: ${message.split('\n')[0]}` }
}

/**
 * Writes the failure as one JSON log line, synchronously (the process exits right after, and an
 * asynchronous log stream would lose it), in the shape of the service's other log lines.
 */
export function logStartupFailure(failure: StartupFailure, name = 'kms'): void {
  const logger = pino(
    { name, base: { pid: process.pid }, timestamp: pino.stdTimeFunctions.isoTime },
    pino.destination({ fd: 1, sync: true }),
  )
  logger.fatal(failure.code ? { code: failure.code } : {}, failure.message)
}

/** Sent by a forked process that failed to start, so that the primary reports it once and stops. */
export interface StartupFailureMessage {
  kind: 'kms:startup-failure'
  failure: StartupFailure
}

export function isStartupFailureMessage(value: unknown): value is StartupFailureMessage {
  return (
    typeof value === 'object' &&
    value !== null &&
    (value as { kind?: unknown }).kind === 'kms:startup-failure'
  )
}
