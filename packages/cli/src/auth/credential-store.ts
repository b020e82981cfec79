import { randomBytes } from 'node:crypto'
import { chmodSync, mkdirSync, readFileSync, renameSync, unlinkSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { CliError, EXIT } from '../command.ts'
import { checkConfigDir } from '../settings.ts'

/*
 * Where a sign-in's tokens are kept: the OS keyring (@napi-rs/keyring: macOS Keychain, Windows
 * Credential Manager, the Secret Service on Linux) when it takes them, else
 * `<configDir>/credentials.json`, owner-only (0600, the directory 0700 and checked to be the
 * user's alone before anything is read or written there). One entry per profile,
 * service address and tenant: a tenant's tokens are never looked up for another.
 * KMS_CREDENTIAL_STORE=file skips the keyring (a headless machine whose keyring prompts).
 */

const KEYRING_SERVICE = 'kms-cli'
const FILE_NAME = 'credentials.json'

export interface StoredCredentials {
  version: 1
  profile: string
  /** The service's address as normalizeAddr spells it. */
  addr: string
  tenant: string
  issuer: string
  tokenEndpoint: string
  revocationEndpoint: string | undefined
  /** Who signed in (the ID token's sub and email). */
  subject: string
  email: string | undefined
  accessToken: string
  /** Epoch milliseconds. */
  accessTokenExpiresAt: number
  refreshToken: string | undefined
}

export interface CredentialStore {
  read(key: string): Promise<StoredCredentials | undefined>
  /** Called holding the credentials lock (lock-file.ts); says where the entry went. */
  write(key: string, value: StoredCredentials): Promise<'keyring' | 'file'>
  /** Called holding the credentials lock; false when there was nothing. */
  remove(key: string): Promise<boolean>
}

const isString = (value: unknown): value is string => typeof value === 'string'

/** A stored entry as this version writes it, else nothing (a damaged entry is not a sign-in). */
function parseEntry(value: unknown): StoredCredentials | undefined {
  const entry = value as Partial<StoredCredentials> | null
  if (!entry || typeof entry !== 'object' || entry.version !== 1) return undefined
  const ok =
    [
      entry.profile,
      entry.addr,
      entry.tenant,
      entry.issuer,
      entry.tokenEndpoint,
      entry.subject,
      entry.accessToken,
    ].every(isString) &&
    typeof entry.accessTokenExpiresAt === 'number' &&
    (entry.refreshToken === undefined || isString(entry.refreshToken))
  return ok ? (entry as StoredCredentials) : undefined
}

interface CredentialsFile {
  version: 1
  credentials: Record<string, StoredCredentials>
}

function fileStore(configDir: string): CredentialStore {
  const path = join(configDir, FILE_NAME)
  const readAll = (): CredentialsFile => {
    let text: string
    try {
      text = readFileSync(path, 'utf8')
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { version: 1, credentials: {} }
      throw new CliError('data', `${path} could not be read: ${(err as Error).message}`, EXIT.data)
    }
    try {
      const parsed = JSON.parse(text) as Partial<CredentialsFile>
      if (parsed.version === 1 && parsed.credentials && typeof parsed.credentials === 'object')
        return { version: 1, credentials: parsed.credentials }
    } catch {}
    throw new CliError('data', `${path} is damaged: delete it and sign in again (kms login)`, EXIT.data)
  }
  // A new file beside the old, then renamed over it: a reader sees the old or the new whole,
  // and the file is created owner-only (never a moment with wider permissions).
  const writeAll = (data: CredentialsFile) => {
    mkdirSync(configDir, { recursive: true, mode: 0o700 })
    const temporary = `${path}.${process.pid}.${randomBytes(6).toString('hex')}.tmp`
    try {
      writeFileSync(temporary, `${JSON.stringify(data, null, 2)}\n`, { mode: 0o600, flag: 'wx' })
      chmodSync(temporary, 0o600)
      renameSync(temporary, path)
    } catch (err) {
      try {
        unlinkSync(temporary)
      } catch {}
      throw new CliError('data', `${path} could not be written: ${(err as Error).message}`, EXIT.data)
    }
  }
  return {
    async read(key) {
      return parseEntry(readAll().credentials[key])
    },
    async write(key, value) {
      const data = readAll()
      data.credentials[key] = value
      writeAll(data)
      return 'file'
    },
    async remove(key) {
      const data = readAll()
      if (!(key in data.credentials)) return false
      delete data.credentials[key]
      writeAll(data)
      return true
    },
  }
}

interface KeyringEntry {
  getPassword(): string | null
  setPassword(password: string): void
  deletePassword(): boolean
}
type EntryClass = new (
  service: string,
  account: string,
  options?: { linux?: { store?: 'secret-service' | 'keyutils' } },
) => KeyringEntry

/** The keyring module, when installed (an optional dependency with a native part per platform). */
async function keyringModule(): Promise<EntryClass | undefined> {
  try {
    return ((await import('@napi-rs/keyring')) as unknown as { Entry: EntryClass }).Entry
  } catch {
    return undefined
  }
}

/**
 * The keyring when it takes the entry, else the file. Each operation tries the keyring and falls
 * back on any failure: a platform store may read (nothing there) yet refuse to write, as in a
 * container without one. On Linux only the Secret Service counts: the kernel keyring (the
 * module's fallback) forgets its keys with the login session, so a sign-in would not last.
 */
export async function openCredentialStore(
  configDir: string,
  env: Readonly<Record<string, string | undefined>>,
): Promise<CredentialStore> {
  const choice = env['KMS_CREDENTIAL_STORE']
  if (choice !== undefined && choice !== 'file' && choice !== 'keyring')
    throw new CliError('usage', 'KMS_CREDENTIAL_STORE must be keyring or file', EXIT.usage)
  // The file, the lock and the profiles that decide where tokens go all live there: its user's alone.
  checkConfigDir(configDir, { create: true })
  const file = fileStore(configDir)
  const Entry = choice === 'file' ? undefined : await keyringModule()
  if (!Entry) return file
  const entry = (key: string) => new Entry(KEYRING_SERVICE, key, { linux: { store: 'secret-service' } })
  return {
    async read(key) {
      let text: string | null = null
      try {
        text = entry(key).getPassword()
      } catch {}
      if (text === null) return file.read(key)
      try {
        return parseEntry(JSON.parse(text))
      } catch {
        return undefined
      }
    },
    async write(key, value) {
      try {
        entry(key).setPassword(JSON.stringify(value))
      } catch {
        return file.write(key, value)
      }
      // Moved to the keyring: no copy stays in the file.
      await file.remove(key)
      return 'keyring'
    },
    async remove(key) {
      let fromKeyring = false
      try {
        fromKeyring = entry(key).deletePassword()
      } catch {}
      const fromFile = await file.remove(key)
      return fromKeyring || fromFile
    },
  }
}
