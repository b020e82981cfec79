import { randomBytes } from 'node:crypto'
import { lstatSync, mkdirSync, type Stats, statSync } from 'node:fs'
import { readFile, rename, unlink, writeFile } from 'node:fs/promises'
import { homedir } from 'node:os'
import { join } from 'node:path'
import { CliError, EXIT, OUTPUT_FORMATS, type OutputFormat, type Settings, usageError } from './command.ts'

/**
 * The settings of one run: each from its flag, else its environment variable, else the profile
 * file, else its default. The profile file (`<configDir>/config.json`) holds only where and how
 * to talk to the service (addr, tenant, output): never a credential.
 */

const DEFAULT_ADDR = 'http://127.0.0.1:8080'
const DEFAULT_PROFILE = 'default'
const CONFIG_FILE = 'config.json'

/** What a profile may hold (`kms config set <name> <value>`). */
export const PROFILE_KEYS = ['addr', 'tenant', 'output'] as const
export type ProfileKey = (typeof PROFILE_KEYS)[number]
type Profile = Partial<Record<ProfileKey, string>>

export interface ConfigFile {
  profiles: Record<string, Profile>
}

/** The global flags, found anywhere on the command line before `--`. */
export interface GlobalFlags {
  addr?: string
  tenant?: string
  profile?: string
  output?: string
  field?: string
  apiKey?: string
  curl: boolean
  help: boolean
  version: boolean
}

const VALUE_FLAGS: Record<string, keyof GlobalFlags> = {
  '--addr': 'addr',
  '--tenant': 'tenant',
  '--profile': 'profile',
  '--output': 'output',
  '--field': 'field',
  '--api-key': 'apiKey',
}
const BOOLEAN_FLAGS: Record<string, 'curl' | 'help' | 'version'> = {
  '--output-curl-string': 'curl',
  '--help': 'help',
  '-h': 'help',
  '--version': 'version',
}

/**
 * Takes the global flags out of argv wherever they are (`kms --output json keys list` and
 * `kms keys list --output json` are the same); what follows `--` is left alone (`kms run -- cmd -h`).
 */
export function extractGlobalFlags(argv: readonly string[]): { flags: GlobalFlags; rest: string[] } {
  const flags: GlobalFlags = { curl: false, help: false, version: false }
  const rest: string[] = []
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!
    if (arg === '--') {
      rest.push(...argv.slice(i))
      break
    }
    const eq = arg.indexOf('=')
    const name = arg.startsWith('--') && eq > 0 ? arg.slice(0, eq) : arg
    const valueFlag = VALUE_FLAGS[name]
    if (valueFlag) {
      let value: string | undefined
      if (name !== arg) value = arg.slice(eq + 1)
      else {
        value = argv[i + 1]
        if (value === undefined || (value.startsWith('-') && value !== '-'))
          throw usageError(
            `${name} needs a value${name === '--output' ? ` (${OUTPUT_FORMATS.join(', ')})` : ''}`,
          )
        i++
      }
      ;(flags as unknown as Record<string, string>)[valueFlag] = value
      continue
    }
    const booleanFlag = BOOLEAN_FLAGS[arg]
    // `kms --version` is the CLI's; after a command word it is the command's (kms secrets get x --version 2).
    if (booleanFlag === 'version' && rest.length > 0) {
      rest.push(arg)
      continue
    }
    if (booleanFlag) {
      flags[booleanFlag] = true
      continue
    }
    if (name !== arg && BOOLEAN_FLAGS[name]) throw usageError(`${name} takes no value`)
    rest.push(arg)
  }
  return { flags, rest }
}

/** Where the profile file and the file credentials live. */
function configDirOf(env: Readonly<Record<string, string | undefined>>): string {
  if (env['KMS_CONFIG_DIR']) return env['KMS_CONFIG_DIR']
  if (env['XDG_CONFIG_HOME']) return join(env['XDG_CONFIG_HOME'], 'kms')
  return join(env['HOME'] || homedir(), '.config', 'kms')
}

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value)

const unsafeConfigDir = (message: string) => new CliError('config_dir_unsafe', message, EXIT.data)

function lstatOrUndefined(path: string): Stats | undefined {
  try {
    return lstatSync(path)
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined
    throw unsafeConfigDir(`the config directory ${path} cannot be examined: ${(error as Error).message}`)
  }
}

/**
 * The config directory holds what decides where credentials go (the profiles' addr) and the
 * credentials themselves, so it must be its user's alone: another user who could write to it could
 * point the CLI at their server or swap the stored tokens. Checked before the settings or the
 * credentials are read or written; created owner-only (0700) when missing and `create` is set.
 * Returns whether the directory exists. A symbolic link (a dotfiles setup) counts when the link
 * and the directory it names are both the user's.
 */
export function checkConfigDir(dir: string, options: { create: boolean }): boolean {
  let stats = lstatOrUndefined(dir)
  if (!stats) {
    if (!options.create) return false
    try {
      mkdirSync(dir, { recursive: true, mode: 0o700 })
    } catch (error) {
      throw new CliError(
        'config_unwritable',
        `cannot create the config directory ${dir}: ${(error as Error).message}`,
        EXIT.data,
      )
    }
    stats = lstatSync(dir)
  }
  // Windows has neither owners as numbers nor these mode bits: its ACLs are the user profile's.
  const uid = process.getuid?.()
  if (uid === undefined) return true
  const notMine = (owner: number, what: string) =>
    unsafeConfigDir(
      `${what} belongs to another user (uid ${owner}, you are ${uid}): kms keeps settings and credentials only in a directory of your own; chown it, or set KMS_CONFIG_DIR`,
    )
  if (stats.isSymbolicLink()) {
    if (stats.uid !== uid) throw notMine(stats.uid, `the config directory ${dir} is a symbolic link that`)
    stats = statSync(dir)
  }
  if (!stats.isDirectory()) throw unsafeConfigDir(`the config directory ${dir} is not a directory`)
  if (stats.uid !== uid) throw notMine(stats.uid, `the config directory ${dir}`)
  if ((stats.mode & 0o022) !== 0)
    throw unsafeConfigDir(
      `the config directory ${dir} can be written by other users (mode ${(stats.mode & 0o777).toString(8)}): they could change its settings or credentials; chmod 700 ${dir}`,
    )
  return true
}

/** The profile file, or no profiles when there is none yet. */
export async function readConfigFile(configDir: string): Promise<ConfigFile> {
  const path = join(configDir, CONFIG_FILE)
  if (!checkConfigDir(configDir, { create: false })) return { profiles: {} }
  let text: string
  try {
    text = await readFile(path, 'utf8')
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return { profiles: {} }
    throw new CliError('config_unreadable', `cannot read ${path}: ${(error as Error).message}`, EXIT.data)
  }
  let parsed: unknown
  try {
    parsed = JSON.parse(text)
  } catch (error) {
    throw new CliError('config_invalid', `${path} is not JSON: ${(error as Error).message}`, EXIT.data)
  }
  const profiles = isRecord(parsed) ? (parsed['profiles'] ?? {}) : undefined
  if (!isRecord(profiles))
    throw new CliError(
      'config_invalid',
      `${path} must be {"profiles": {"<name>": {addr, tenant, output}}}`,
      EXIT.data,
    )
  const result: ConfigFile = { profiles: {} }
  for (const [name, profile] of Object.entries(profiles)) {
    if (!isRecord(profile))
      throw new CliError('config_invalid', `${path}: profile "${name}" is not an object`, EXIT.data)
    const kept: Profile = {}
    // Anything else in a profile (a credential someone put there) is not read.
    for (const key of PROFILE_KEYS) {
      const value = profile[key]
      if (value === undefined) continue
      if (typeof value !== 'string')
        throw new CliError('config_invalid', `${path}: profiles.${name}.${key} must be a string`, EXIT.data)
      kept[key] = value
    }
    result.profiles[name] = kept
  }
  return result
}

/**
 * Writes the profile file atomically (a reader never sees half of it), readable by its owner only.
 * The temporary file has a name nobody can guess and is created exclusively, so a file or link
 * planted beside config.json is never written through.
 */
export async function writeConfigFile(configDir: string, config: ConfigFile): Promise<string> {
  checkConfigDir(configDir, { create: true })
  const path = join(configDir, CONFIG_FILE)
  const temporary = `${path}.${process.pid}.${randomBytes(8).toString('hex')}.tmp`
  try {
    await writeFile(temporary, `${JSON.stringify(config, null, 2)}\n`, { mode: 0o600, flag: 'wx' })
    await rename(temporary, path)
  } catch (error) {
    await unlink(temporary).catch(() => {})
    throw new CliError('config_unwritable', `cannot write ${path}: ${(error as Error).message}`, EXIT.data)
  }
  return path
}

/** What plain http may reach: this machine only (a service on the developer's own loopback). */
const isLoopbackHost = (hostname: string): boolean =>
  hostname === 'localhost' || hostname === '[::1]' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(hostname)

/**
 * The service's address as the CLI will use it: https, or http to this machine only. Over plain
 * http anyone on the path reads the API key or token, and the secrets and plaintexts, of every
 * command. `source` names where the value came from (--addr, KMS_ADDR, a profile).
 */
export function checkServiceAddress(value: string, source: string): URL {
  let url: URL | undefined
  try {
    url = new URL(value)
  } catch {}
  if (!url || (url.protocol !== 'http:' && url.protocol !== 'https:'))
    throw usageError(`${source} must be an http(s) URL such as https://kms.example.com (got "${value}")`)
  if (url.protocol === 'http:' && !isLoopbackHost(url.hostname))
    throw usageError(
      `${source} must be an https URL: plain http is allowed only to this machine (127.0.0.1, ::1, localhost), got "${value}"`,
    )
  return url
}

/** A profile value as it would be used: checked the same way whether it comes from a flag, the environment or the file. */
export function checkProfileValue(key: ProfileKey, value: string, source: string): string {
  if (key === 'addr') {
    checkServiceAddress(value, source)
    return value.replace(/\/+$/, '')
  }
  if (key === 'output' && !(OUTPUT_FORMATS as readonly string[]).includes(value))
    throw usageError(`${source} must be one of ${OUTPUT_FORMATS.join(', ')} (got "${value}")`)
  if (key === 'tenant' && value.trim() === '') throw usageError(`${source} must not be empty`)
  return value
}

export interface ResolveOptions {
  stdoutIsTerminal: boolean
  /** `kms config …` may name a profile that does not exist yet (it is about to create it). */
  allowNewProfile?: boolean
}

export async function resolveSettings(
  flags: GlobalFlags,
  env: Readonly<Record<string, string | undefined>>,
  options: ResolveOptions,
): Promise<Settings> {
  const configDir = configDirOf(env)
  const envValue = (name: string) => (env[name] === '' ? undefined : env[name])
  const namedProfile = flags.profile ?? envValue('KMS_PROFILE')
  const profileName = namedProfile ?? DEFAULT_PROFILE
  const config = await readConfigFile(configDir)
  const profile = config.profiles[profileName]
  if (
    !profile &&
    namedProfile !== undefined &&
    namedProfile !== DEFAULT_PROFILE &&
    !options.allowNewProfile
  ) {
    const known = Object.keys(config.profiles)
    throw usageError(
      `no profile "${namedProfile}" in ${join(configDir, CONFIG_FILE)} (profiles: ${known.length > 0 ? known.join(', ') : 'none'}; create one with kms config set --profile ${namedProfile} addr <url>)`,
    )
  }
  const pick = (key: ProfileKey, flag: string | undefined, variable: string): string | undefined => {
    if (flag !== undefined) return checkProfileValue(key, flag, `--${key}`)
    const fromEnv = envValue(variable)
    if (fromEnv !== undefined) return checkProfileValue(key, fromEnv, variable)
    const fromFile = profile?.[key]
    if (fromFile !== undefined) return checkProfileValue(key, fromFile, `profile "${profileName}" ${key}`)
    return undefined
  }
  const output = pick('output', flags.output, 'KMS_OUTPUT') as OutputFormat | undefined
  if (flags.field !== undefined && flags.field.trim() === '')
    throw usageError('--field needs a path such as data.0.id')
  return {
    addr: pick('addr', flags.addr, 'KMS_ADDR') ?? DEFAULT_ADDR,
    tenant: pick('tenant', flags.tenant, 'KMS_TENANT'),
    apiKey: flags.apiKey ?? envValue('KMS_API_KEY'),
    profile: profileName,
    output: output ?? (options.stdoutIsTerminal ? 'table' : 'json'),
    field: flags.field,
    curl: flags.curl,
    configDir,
  }
}
