import { createHmac, createSecretKey, type KeyObject, randomBytes } from 'node:crypto'
import { chmodSync, existsSync, mkdirSync, readFileSync, renameSync, statSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import type { Logger } from 'pino'
import { ConfigError } from '../config.ts'

/**
 * The root of the key hierarchy. A keyring holds the primary master key (wraps new and re-wrapped
 * KEKs) and earlier ones (still unwrap KEKs not yet re-wrapped), so a master key rotation never
 * needs downtime. Keys are identified by a fingerprint that reveals nothing of the key.
 */
export interface MasterKey {
  id: string
  key: KeyObject
}

export interface MasterKeyring {
  readonly primary: MasterKey
  /**
   * Every key, the primary first: what is derived rather than sealed (cookie and CSRF keys) is
   * made with the primary and checked against each, so it survives a rotation until the old key
   * is dropped.
   */
  readonly all: readonly MasterKey[]
  find(id: string): MasterKey | undefined
}

const MASTER_KEY_BYTES = 32

export function masterKeyId(raw: Uint8Array): string {
  return `mk_${createHmac('sha256', raw).update('kms master key id v1').digest('hex').slice(0, 16)}`
}

function parseMasterKey(text: string, origin: string): Buffer {
  const trimmed = text.trim()
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(trimmed))
    throw new ConfigError(`${origin}: the master key is not base64`)
  const raw = Buffer.from(trimmed, 'base64')
  if (raw.length !== MASTER_KEY_BYTES) {
    throw new ConfigError(
      `${origin}: the master key must decode to ${MASTER_KEY_BYTES} bytes, got ${raw.length}`,
    )
  }
  return raw
}

export function generateMasterKey(): Buffer {
  return randomBytes(MASTER_KEY_BYTES)
}

/** A key file holds one base64 key per line, the primary first. */
export function readKeyFile(path: string): Buffer[] {
  const lines = readFileSync(path, 'utf8')
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l.length > 0 && !l.startsWith('#'))
  if (lines.length === 0) throw new ConfigError(`${path}: the master key file holds no key`)
  return lines.map((line, i) => parseMasterKey(line, `${path} line ${i + 1}`))
}

/** Written to a temporary file and renamed, so a reader never sees half a file. */
export function writeKeyFile(path: string, keys: Uint8Array[]): void {
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 })
  const tmp = `${path}.${process.pid}.tmp`
  writeFileSync(tmp, `${keys.map((k) => Buffer.from(k).toString('base64')).join('\n')}\n`, { mode: 0o600 })
  chmodSync(tmp, 0o600)
  renameSync(tmp, path)
}

export function keyringFromRaw(raws: Uint8Array[]): MasterKeyring {
  const all = raws.map((raw) => ({ id: masterKeyId(raw), key: createSecretKey(raw) }))
  if (all.length === 0) throw new ConfigError('no master key')
  const byId = new Map(all.map((k) => [k.id, k]))
  return { primary: all[0]!, all, find: (id) => byId.get(id) }
}

/**
 * A keyring read from a file follows the file: `kms rotate-master-key`, run by another process,
 * puts the new primary key first there. The file is re-read when its modification time changes
 * (checked when the primary key is needed, which is rare) or when an unknown key id turns up.
 */
function fileKeyring(path: string): MasterKeyring {
  const stamp = () => {
    const st = statSync(path)
    return `${st.mtimeMs}:${st.size}:${st.ino}`
  }
  let loadedStamp = stamp()
  let current = keyringFromRaw(readKeyFile(path))
  const reload = () => {
    loadedStamp = stamp()
    current = keyringFromRaw(readKeyFile(path))
  }
  return {
    get primary() {
      if (stamp() !== loadedStamp) reload()
      return current.primary
    },
    get all() {
      if (stamp() !== loadedStamp) reload()
      return current.all
    },
    find(id) {
      const known = current.find(id)
      if (known) return known
      reload()
      return current.find(id)
    },
  }
}

export function defaultKeyFilePath(dataDir: string): string {
  return join(dataDir, 'master.key')
}

export interface MasterKeySettings {
  masterKey: string | undefined
  previousMasterKeys: string[]
  masterKeyFile: string | undefined
  dataDir: string
  production: boolean
}

export type MasterKeySource = 'environment' | 'file' | 'generated-development-file'

export function loadMasterKeyring(
  settings: MasterKeySettings,
  logger: Pick<Logger, 'warn'>,
): { keyring: MasterKeyring; source: MasterKeySource; path?: string } {
  if (settings.masterKey) {
    const raws = [
      parseMasterKey(settings.masterKey, 'KMS_MASTER_KEY'),
      ...settings.previousMasterKeys.map((k, i) => parseMasterKey(k, `KMS_MASTER_KEY_PREVIOUS[${i}]`)),
    ]
    return { keyring: keyringFromRaw(raws), source: 'environment' }
  }
  const path = settings.masterKeyFile ?? defaultKeyFilePath(settings.dataDir)
  if (existsSync(path)) {
    const mode = statSync(path).mode & 0o777
    if (mode & 0o077)
      logger.warn({ path }, `master key file is readable by others (mode ${mode.toString(8)})`)
    return { keyring: fileKeyring(path), source: 'file', path }
  }
  if (settings.masterKeyFile) throw new ConfigError(`KMS_MASTER_KEY_FILE ${path} does not exist`)
  if (settings.production) {
    throw new ConfigError(
      'NODE_ENV=production needs KMS_MASTER_KEY or KMS_MASTER_KEY_FILE; refusing to generate one',
    )
  }
  writeKeyFile(path, [generateMasterKey()])
  logger.warn(
    { path },
    'NO MASTER KEY CONFIGURED: generated a development master key file. Anyone who can read it can decrypt ' +
      'every tenant key. Set KMS_MASTER_KEY or KMS_MASTER_KEY_FILE for any real deployment.',
  )
  return { keyring: fileKeyring(path), source: 'generated-development-file', path }
}
