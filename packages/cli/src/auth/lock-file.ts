import { randomBytes } from 'node:crypto'
import { closeSync, mkdirSync, openSync, readFileSync, statSync, unlinkSync, writeSync } from 'node:fs'
import { hostname } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { CliError, EXIT } from '../command.ts'

/*
 * One `kms` process at a time changes the stored credentials. This matters most for a refresh:
 * the provider rotates a public client's refresh token at each use and, when a rotated token is
 * used again, ends the whole sign-in (oidc-provider revokes the grant), so two processes that
 * refresh with the same token would sign the person out. The lock is a file created with O_EXCL
 * in the config directory; whoever holds it re-reads the credentials before refreshing.
 */

/** How long a process waits for the lock before giving up (a refresh takes well under this). */
const WAIT_MS = 60_000
/** A lock older than this is stale whoever wrote it (a holder's requests time out after 30 s). */
const STALE_MS = 120_000

interface LockOwner {
  pid: number
  host: string
  at: number
  nonce: string
}

const isAlive = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
    return true
  } catch (err) {
    // EPERM: it exists, under another user.
    return (err as NodeJS.ErrnoException).code === 'EPERM'
  }
}

function readOwner(path: string): { owner: LockOwner | undefined; mtimeMs: number } | undefined {
  try {
    const mtimeMs = statSync(path).mtimeMs
    try {
      return { owner: JSON.parse(readFileSync(path, 'utf8')) as LockOwner, mtimeMs }
    } catch {
      // Being written (created, not yet filled) or damaged: only its age can tell.
      return { owner: undefined, mtimeMs }
    }
  } catch {
    return undefined
  }
}

/** A lock whose holder is gone: a dead process on this host, or one older than any holder lives. */
function isStale(found: { owner: LockOwner | undefined; mtimeMs: number }): boolean {
  const { owner, mtimeMs } = found
  if (Date.now() - (owner?.at ?? mtimeMs) > STALE_MS) return true
  return owner !== undefined && owner.host === hostname() && !isAlive(owner.pid)
}

function tryCreate(path: string, owner: LockOwner): boolean {
  let fd: number
  try {
    fd = openSync(path, 'wx', 0o600)
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return false
    throw new CliError('data', `the lock ${path} could not be created: ${(err as Error).message}`, EXIT.data)
  }
  try {
    writeSync(fd, JSON.stringify(owner))
  } finally {
    closeSync(fd)
  }
  return true
}

/**
 * Runs `fn` holding `<dir>/credentials.lock`. A stale lock is removed once its content is seen
 * unchanged a second time (two waiters that both found it stale cannot remove the lock the
 * first of them has just taken, but in the instant between the read and the unlink).
 */
export async function withCredentialsLock<T>(dir: string, fn: () => Promise<T>): Promise<T> {
  mkdirSync(dir, { recursive: true, mode: 0o700 })
  const path = join(dir, 'credentials.lock')
  const me: LockOwner = {
    pid: process.pid,
    host: hostname(),
    at: Date.now(),
    nonce: randomBytes(12).toString('hex'),
  }
  const deadline = Date.now() + WAIT_MS
  while (!tryCreate(path, { ...me, at: Date.now() })) {
    const found = readOwner(path)
    if (found && isStale(found)) {
      const again = readOwner(path)
      if (again && again.mtimeMs === found.mtimeMs && again.owner?.nonce === found.owner?.nonce) {
        try {
          unlinkSync(path)
        } catch {}
      }
      continue
    }
    if (Date.now() > deadline)
      throw new CliError(
        'credentials_locked',
        `another kms process has held ${path} for over a minute; if none is running, delete that file`,
        EXIT.data,
      )
    await sleep(20 + Math.floor(Math.random() * 60))
  }
  try {
    return await fn()
  } finally {
    // Only our own lock: a holder that overran STALE_MS may have lost it to another process.
    if (readOwner(path)?.owner?.nonce === me.nonce) {
      try {
        unlinkSync(path)
      } catch {}
    }
  }
}
