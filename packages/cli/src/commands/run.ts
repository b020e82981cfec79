import { spawn } from 'node:child_process'
import { constants } from 'node:os'
import { dataOf, type KmsClient, KmsError } from '@kms/sdk'
import { CliError, type CommandHandler, EXIT, parseCommandArgs, usageError } from '../command.ts'

/**
 * `kms run --secret NAME=<secret>[@version] ... -- command args...`: reads the secrets, then
 * runs the command with them added to its environment (never on its command line, which other
 * users of the machine can read), and exits as the command did. Every secret is read before
 * anything is started: a missing one starts nothing.
 */

export const RUN_HELP = `Usage: kms run --secret NAME=<secret>[@version] [--secret ...] -- <command> [args...]

Runs <command> with secrets from the service in its environment: NAME=<the secret's value>.
Nothing of the secrets goes on the command line, which other users can read.

  --secret NAME=<secret>[@version]
      NAME: the environment variable (letters, digits, _; not starting with a digit)
      <secret>: the secret's name (exact; when folders hold several of that name, its id)
      @version: that version of the value (default: the current one)

Every secret is read first: if one is missing or unreadable, the command is not started.
The command does not get kms's own KMS_API_KEY (give it one as a --secret if it needs one).
The command's stdin, stdout and stderr are kms's own; Ctrl-C (SIGINT), SIGTERM and SIGHUP are
passed on to it. kms exits with the command's exit code, or 128 + the signal's number when a
signal ended it (127: command not found, 126: not executable).`

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i
/** The list endpoint's largest page. */
const PAGE = 1000
const FORWARDED_SIGNALS: readonly NodeJS.Signals[] = ['SIGINT', 'SIGTERM', 'SIGHUP']

interface SecretRequest {
  envName: string
  /** The secret's name, or its id. */
  secret: string
  version: number | undefined
  /** The flag as given, for error messages (it holds no secret). */
  flag: string
}

/** `NAME=secret[@version]`; a trailing `@<digits>` is a version, any other `@` belongs to the name. */
function parseSecretFlag(flag: string): SecretRequest {
  const eq = flag.indexOf('=')
  if (eq < 0) throw usageError(`--secret takes NAME=<secret>[@version] (got "${flag}")`)
  const envName = flag.slice(0, eq)
  if (!ENV_NAME.test(envName))
    throw usageError(
      `--secret ${flag}: "${envName}" is not a valid environment variable name (letters, digits and _, not starting with a digit)`,
    )
  let secret = flag.slice(eq + 1)
  let version: number | undefined
  const versioned = /^(.*)@(\d+)$/s.exec(secret)
  if (versioned) {
    secret = versioned[1]!
    version = Number(versioned[2])
    if (!Number.isSafeInteger(version) || version < 1)
      throw usageError(`--secret ${flag}: the version must be a positive integer`)
  }
  if (secret === '') throw usageError(`--secret ${flag}: the secret's name is missing`)
  return { envName, secret, version, flag }
}

/** The secret's id and current version: by id directly, else the one secret of exactly that name. */
async function findSecret(
  client: KmsClient,
  request: SecretRequest,
): Promise<{ id: string; version: number }> {
  if (UUID.test(request.secret)) {
    try {
      const found = await dataOf(
        client.api.GET('/api/v1/secrets/{id}', { params: { path: { id: request.secret } } }),
      )
      return { id: found.id, version: found.version }
    } catch (error) {
      // Not a secret's id: it may still be a secret's name that looks like one.
      if (!(error instanceof KmsError && error.status === 404)) throw error
    }
  }
  const matches: { id: string; version: number }[] = []
  for (let offset = 0; ; offset += PAGE) {
    // `search` matches a substring of the name or description: the exact name is picked here.
    const page = await dataOf(
      client.api.GET('/api/v1/secrets', {
        params: { query: { search: request.secret, deleted: false, limit: PAGE, offset } },
      }),
    )
    for (const s of page.data) if (s.name === request.secret) matches.push({ id: s.id, version: s.version })
    if (page.data.length < PAGE || offset + PAGE >= page.total) break
  }
  if (matches.length === 0)
    throw new CliError(
      'secret_not_found',
      `--secret ${request.flag}: there is no secret named "${request.secret}"`,
      EXIT.notFound,
    )
  if (matches.length > 1)
    throw new CliError(
      'ambiguous_secret',
      `--secret ${request.flag}: ${matches.length} secrets (in different folders) are named "${request.secret}"; give the id of one instead: ${matches.map((m) => m.id).join(', ')}`,
      EXIT.usage,
    )
  return matches[0]!
}

/**
 * The value, read through the version endpoint: it reveals (and audits) the value alone, where
 * the secret's own include=all would also reveal its notes and custom fields.
 */
async function readSecretValue(client: KmsClient, request: SecretRequest): Promise<string> {
  const { id, version } = await findSecret(client, request)
  const wanted = request.version ?? version
  let value: string | undefined
  try {
    const answer = await dataOf(
      client.api.GET('/api/v1/secrets/{id}/versions/{version}', {
        params: { path: { id, version: wanted }, query: { include: 'all' } },
      }),
    )
    value = answer.value
  } catch (error) {
    if (error instanceof KmsError && error.status === 404)
      throw new CliError(
        'secret_not_found',
        `--secret ${request.flag}: secret "${request.secret}" has no version ${wanted} (${error.message})`,
        EXIT.notFound,
      )
    throw error
  }
  if (value === undefined)
    throw new CliError(
      'secret_unreadable',
      `--secret ${request.flag}: the service sent no value`,
      EXIT.failed,
    )
  // The OS takes environment strings up to the first NUL: the value would arrive cut.
  if (value.includes('\0'))
    throw new CliError(
      'invalid_env_value',
      `--secret ${request.flag}: the value holds a NUL character, which an environment variable cannot carry`,
      EXIT.data,
    )
  return value
}

/**
 * kms's own credential stays with kms: the command gets the secrets it was given, not the API key
 * that could read every other secret (a command that needs one gets it as a --secret).
 */
const KMS_CREDENTIALS = new Set(['KMS_API_KEY'])

function childEnvironment(base: Readonly<Record<string, string | undefined>>, secrets: Map<string, string>) {
  const env: Record<string, string> = {}
  for (const [name, value] of Object.entries(base))
    if (value !== undefined && !KMS_CREDENTIALS.has(name)) env[name] = value
  for (const [name, value] of secrets) env[name] = value
  return env
}

/** Runs the command with kms's own stdio and resolves to its exit code (128 + n for signal n). */
function runChild(
  command: string,
  args: string[],
  env: Record<string, string>,
  stderr: NodeJS.WritableStream,
) {
  return new Promise<number>((resolve) => {
    // stdio is the process's own (fds 0-2): an interactive command keeps the terminal.
    const child = spawn(command, args, { stdio: 'inherit', env })
    const forward = (signal: NodeJS.Signals) => {
      child.kill(signal)
    }
    for (const signal of FORWARDED_SIGNALS) process.on(signal, forward)
    const done = (code: number) => {
      for (const signal of FORWARDED_SIGNALS) process.off(signal, forward)
      resolve(code)
    }
    child.once('error', (error: NodeJS.ErrnoException) => {
      const notFound = error.code === 'ENOENT'
      stderr.write(
        `kms: ${notFound ? 'command_not_found' : 'command_not_executable'}: ${command}: ${notFound ? 'not found' : (error.code ?? error.message)}\n`,
      )
      done(notFound ? 127 : 126)
    })
    child.once('exit', (code, signal) => {
      if (code !== null) done(code)
      else done(128 + (signal ? (constants.signals[signal] ?? 0) : 0))
    })
  })
}

export const runCommand: CommandHandler = async (args, ctx) => {
  const separator = args.indexOf('--')
  if (separator < 0 || separator === args.length - 1)
    throw usageError(
      'give the command to run after --: kms run --secret NAME=<secret> -- <command> [args...]',
    )
  const [command, ...commandArgs] = args.slice(separator + 1) as [string, ...string[]]
  const { values } = parseCommandArgs(
    args.slice(0, separator),
    { secret: { type: 'string', multiple: true } },
    { min: 0, max: 0, names: 'no arguments before -- (the command comes after it)' },
  )
  const requests = (Array.isArray(values['secret']) ? values['secret'] : []).map((f) =>
    parseSecretFlag(String(f)),
  )
  if (requests.length === 0) throw usageError('--secret NAME=<secret> is required (at least one)')
  const names = new Set<string>()
  for (const r of requests) {
    if (names.has(r.envName)) throw usageError(`--secret gives ${r.envName} twice`)
    names.add(r.envName)
  }

  const client = await ctx.client()
  const secrets = new Map<string, string>()
  // One after another: a handful of reads, and the first failure stops before the rest are revealed.
  for (const request of requests) secrets.set(request.envName, await readSecretValue(client, request))
  return runChild(command, commandArgs, childEnvironment(ctx.io.env, secrets), ctx.io.stderr)
}
