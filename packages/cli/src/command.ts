import type { Readable, Writable } from 'node:stream'
import { parseArgs } from 'node:util'
import type { KmsClient } from '@kms/sdk'

/**
 * The contract every `kms` command is written against (packages/cli): the settings resolved by
 * precedence (flag > environment > profile file), the process's streams and a way to get an
 * authenticated SDK client. Commands return the process's exit code or throw a CliError.
 */

export type OutputFormat = 'json' | 'table' | 'raw'

export const OUTPUT_FORMATS: readonly OutputFormat[] = ['json', 'table', 'raw']

export interface Settings {
  /** The service's base URL: --addr, KMS_ADDR, the profile's `addr`, else http://127.0.0.1:8080. */
  addr: string
  /** The tenant (id): --tenant, KMS_TENANT, the profile's `tenant`. Chooses the signed-in credentials. */
  tenant: string | undefined
  /** An API key: KMS_API_KEY (or --api-key, discouraged: other users see a process's arguments). Wins over a sign-in. */
  apiKey: string | undefined
  /** The profile: --profile, KMS_PROFILE, else `default`. */
  profile: string
  /** --output, KMS_OUTPUT, the profile's `output`, else table on a terminal and json otherwise. */
  output: OutputFormat
  /** --field a.b: print only this field of the answer (raw, no quotes for a string). */
  field: string | undefined
  /** --output-curl-string: print the equivalent curl command instead of calling the service. */
  curl: boolean
  /** Where the profile file and (without an OS keyring) the credentials live: $KMS_CONFIG_DIR, else $XDG_CONFIG_HOME/kms, else ~/.config/kms. */
  configDir: string
}

export interface Io {
  stdin: Readable
  stdout: Writable
  stderr: Writable
  env: Readonly<Record<string, string | undefined>>
  /** Whether stderr is a terminal (progress bars and prompts only then). */
  interactive: boolean
  /** Whether stdout is a terminal (the default output is a table then, JSON otherwise). */
  stdoutIsTerminal: boolean
  /** Whether stdin is a terminal (nothing is piped in: `kms secrets set` will not wait on it). */
  stdinIsTerminal: boolean
}

export interface ClientOptions {
  /**
   * For `--output-curl-string` with a binary body: how curl gets the bytes (`@/path/to/file` or
   * `@-` for stdin), so the printed command reads the same input instead of carrying the bytes.
   */
  curlBody?: string | undefined
}

export interface CommandContext {
  settings: Settings
  io: Io
  /**
   * The SDK client with the credentials of the settings: the API key, else the signed-in token
   * (auth/credentials.ts bearerFor), else a CliError `not_signed_in` (exit 3). With
   * --output-curl-string its first request is printed as a curl command and not sent (the
   * call then rejects with CurlPrinted, which main turns into exit 0).
   */
  client(options?: ClientOptions): Promise<KmsClient>
}

/** `args` are what follows the command's words (`kms keys get <args…>`), global flags removed. */
export type CommandHandler = (args: string[], ctx: CommandContext) => Promise<number>

/** Exit codes (docs/cli.md "Exit codes"). */
export const EXIT = {
  ok: 0,
  /** The service answered with an error (4xx other than below), or a check failed (verify: invalid). */
  failed: 1,
  /** Bad usage: unknown command or flag, missing argument (nothing was sent). */
  usage: 2,
  /** Not signed in, or the credentials were refused (401), or forbidden (403). */
  auth: 3,
  /** Not found (404). */
  notFound: 4,
  /** The service could not be reached, timed out, or answered 5xx / 429 after the retries. */
  unavailable: 5,
  /** Local data failed: a file could not be read or written, a message failed to decrypt or verify. */
  data: 6,
} as const

/** An error the CLI prints as `kms: <code>: <message>` on stderr and exits with `exitCode`. */
export class CliError extends Error {
  readonly code: string
  readonly exitCode: number
  /** Further lines printed under the first one (e.g. a 400's failing fields). */
  readonly details: readonly string[]
  constructor(
    code: string,
    message: string,
    exitCode: number = EXIT.failed,
    details: readonly string[] = [],
  ) {
    super(message)
    this.name = 'CliError'
    this.code = code
    this.exitCode = exitCode
    this.details = details
  }
}

/** Bad usage (exit 2): `kms: usage: <message>`. */
export function usageError(message: string): CliError {
  return new CliError('usage', message, EXIT.usage)
}

/** The rejection of a call made under --output-curl-string: the command was printed, nothing was sent. */
export class CurlPrinted extends Error {
  constructor() {
    super('printed as a curl command, not sent')
    this.name = 'CurlPrinted'
  }
}

export interface FlagSpec {
  type: 'string' | 'boolean'
  /** Repeatable: the value is an array. */
  multiple?: boolean
  short?: string
  /** Allowed values (strings only): anything else is a usage error naming them. */
  choices?: readonly string[]
}

export type FlagValues = Record<string, string | boolean | string[] | boolean[] | undefined>

/**
 * A command's own flags and positionals (node:util parseArgs, strict): an unknown flag, a
 * missing value or a value outside `choices` is a usage error naming what is allowed.
 * `positionals` bounds how many positionals the command takes.
 */
export function parseCommandArgs(
  args: string[],
  flags: Record<string, FlagSpec>,
  positionals: { min: number; max: number; names: string },
): { values: FlagValues; positionals: string[] } {
  let parsed: ReturnType<typeof parseArgs>
  try {
    parsed = parseArgs({
      args,
      options: Object.fromEntries(
        Object.entries(flags).map(([name, spec]) => [
          name,
          { type: spec.type, multiple: spec.multiple ?? false, ...(spec.short ? { short: spec.short } : {}) },
        ]),
      ),
      allowPositionals: true,
      allowNegative: false,
      strict: true,
    })
  } catch (error) {
    const allowed = Object.keys(flags).map((name) => `--${name}`)
    const known =
      allowed.length > 0 ? `this command's flags: ${allowed.join(', ')}` : 'this command has no flags'
    const message = error instanceof Error ? error.message : String(error)
    const unknown = /^Unknown option '([^']+)'/.exec(message)
    const missing = /^Option '(?:-\w, )?(--[^ ]+) <value>' argument missing/.exec(message)
    const what = unknown
      ? `unknown flag ${unknown[1]}`
      : missing
        ? `${missing[1]} needs a value`
        : message.split('\n')[0]!.replace(/\.$/, '')
    throw usageError(`${what}; ${known} (and the global ones: kms --help)`)
  }
  for (const [name, spec] of Object.entries(flags)) {
    if (!spec.choices) continue
    const value = parsed.values[name]
    const given = Array.isArray(value) ? value : value === undefined ? [] : [value]
    for (const v of given)
      if (typeof v === 'string' && !spec.choices.includes(v))
        throw usageError(`--${name} must be one of ${spec.choices.join(', ')} (got "${v}")`)
  }
  const count = parsed.positionals.length
  if (count < positionals.min) throw usageError(`missing argument: expected ${positionals.names}`)
  if (count > positionals.max) {
    const extra = parsed.positionals.slice(positionals.max).map((p) => JSON.stringify(p))
    throw usageError(`unexpected argument ${extra.join(' ')}: expected ${positionals.names}`)
  }
  return { values: parsed.values as FlagValues, positionals: parsed.positionals }
}

/** A flag that must be a positive integer (or absent). */
export function integerFlag(value: unknown, name: string, min = 1, max = 2_147_483_647): number | undefined {
  if (value === undefined) return undefined
  const text = String(value)
  if (!/^\d+$/.test(text) || Number(text) < min || Number(text) > max)
    throw usageError(`--${name} must be an integer from ${min} to ${max} (got "${text}")`)
  return Number(text)
}

/** One word of the command tree: a group (`kms keys`) has children, a command (`kms keys get`) runs. */
export interface CommandNode {
  name: string
  /** One line for the parent's list. */
  summary: string
  /** The rest of `--help`: usage, flags, examples (the summary is printed above it). */
  help: string
  run?: CommandHandler
  children?: readonly CommandNode[]
  /** The handler prints its own help: --help is passed on to it (as its only argument). */
  ownHelp?: boolean
}
