import { createKmsClient, type KmsClient, KmsError } from '@kms/sdk'
import packageJson from '../package.json' with { type: 'json' }
import { bearerFor } from './auth/credentials.ts'
import {
  CliError,
  type ClientOptions,
  type CommandContext,
  type CommandNode,
  CurlPrinted,
  EXIT,
  type Io,
  type Settings,
  usageError,
} from './command.ts'
import { COMMANDS } from './commands/tree.ts'
import { curlCommand } from './curl.ts'
import { extractGlobalFlags, type GlobalFlags, resolveSettings } from './settings.ts'

/**
 * `kms`: the service's API from a terminal. Global flags are taken from anywhere on the line,
 * the command's words pick a node of the tree (commands/tree.ts), and its handler gets the rest.
 * Every failure ends as one line `kms: <code>: <message>` on stderr and an exit code (EXIT).
 */

const VERSION = packageJson.version

const GLOBAL_HELP = `Global flags (anywhere on the line):
  --addr URL               The service (KMS_ADDR, the profile's addr; default http://127.0.0.1:8080)
  --tenant ID              The tenant whose sign-in to use (KMS_TENANT, the profile's tenant)
  --profile NAME           A profile of <config dir>/config.json (KMS_PROFILE; default "default")
  --output json|table|raw  How to print the answer (KMS_OUTPUT, the profile's output; default: table
                           on a terminal, json otherwise); raw writes bytes and strings exactly
  --field PATH             Print one field of the answer (a.b.0.c), a string without quotes
  --output-curl-string     Print the equivalent curl command (the credential as "$KMS_API_KEY" or
                           "$KMS_TOKEN") and send nothing
  --api-key KEY            Discouraged: other users can see a process's arguments; set KMS_API_KEY
  -h, --help               Help for any command: kms keys --help, kms keys create -h
  --version                The CLI's version (before any command word)

Credentials: KMS_API_KEY when set, else the sign-in of kms login (for --tenant / KMS_TENANT).
Config dir: KMS_CONFIG_DIR, else $XDG_CONFIG_HOME/kms, else ~/.config/kms.
Exit codes: 0 done, 1 the service refused (4xx) or a check failed, 2 bad usage, 3 not signed in or
refused credentials (401/403), 4 not found (404), 5 unreachable, timeout, 429 or 5xx after retries,
6 local data (a file that cannot be read or written, a message that does not decrypt).`

const ROOT: CommandNode = {
  name: 'kms',
  summary: "The key management service's API from a terminal",
  help: `Usage: kms <command> [flags]

Examples:
  export KMS_ADDR=https://kms.example.com KMS_API_KEY=...   # or: kms login
  kms keys create --name payments --type Encryption
  kms encrypt --key alias/payments @card.json --output raw > card.enc
  kms decrypt @card.enc --output raw
  kms secrets set db-password @password.txt
  kms audit tail`,
  children: COMMANDS,
}

function processIo(): Io {
  return {
    stdin: process.stdin,
    stdout: process.stdout,
    stderr: process.stderr,
    env: process.env,
    interactive: process.stderr.isTTY === true,
    stdoutIsTerminal: process.stdout.isTTY === true,
    stdinIsTerminal: process.stdin.isTTY === true,
  }
}

function helpText(path: CommandNode[]): string {
  const node = path[path.length - 1]!
  const words = path.map((n) => n.name).join(' ')
  let text = `${words}: ${node.summary}\n\n${node.help}\n`
  if (node.children) {
    const width = Math.max(...node.children.map((c) => c.name.length))
    text += `\nCommands:\n${node.children.map((c) => `  ${c.name.padEnd(width)}  ${c.summary}`).join('\n')}\n`
    text += `\nRun '${words} <command> --help' for a command's flags.\n`
  }
  return `${text}\n${GLOBAL_HELP}\n`
}

/** The command's node and the arguments after its words. */
function findCommand(rest: string[]): { path: CommandNode[]; args: string[] } {
  const path = [ROOT]
  let i = 0
  for (; i < rest.length; i++) {
    const node = path[path.length - 1]!
    const child = node.children?.find((c) => c.name === rest[i])
    if (!child) break
    path.push(child)
  }
  return { path, args: rest.slice(i) }
}

function unknownCommand(path: CommandNode[], word: string | undefined): CliError {
  const node = path[path.length - 1]!
  const words = path.map((n) => n.name).join(' ')
  const allowed = node.children!.map((c) => c.name).join(', ')
  return usageError(
    word === undefined
      ? `${words} needs a command: ${allowed}`
      : `unknown command "${word}" for ${words}; allowed: ${allowed}`,
  )
}

function clientFactory(settings: Settings, io: Io): (options?: ClientOptions) => Promise<KmsClient> {
  return async (options = {}) => {
    const base = { baseUrl: settings.addr, userAgent: `kms-cli/${VERSION}` }
    if (settings.curl) {
      const intercept = async (request: Request): Promise<Response> => {
        io.stdout.write(`${await curlCommand(request, options.curlBody)}\n`)
        throw new CurlPrinted()
      }
      // The printed command names the credential by variable: the value itself is never needed.
      return settings.apiKey !== undefined
        ? createKmsClient({ ...base, apiKey: 'KMS_API_KEY', intercept })
        : createKmsClient({ ...base, token: 'KMS_TOKEN', intercept })
    }
    if (settings.apiKey !== undefined) return createKmsClient({ ...base, apiKey: settings.apiKey })
    const token = await bearerFor(settings, io)
    if (token === undefined)
      throw new CliError(
        'not_signed_in',
        settings.tenant === undefined
          ? `no credentials for ${settings.addr}: set KMS_API_KEY, or sign in with kms login --tenant <tenant id>`
          : `no credentials for tenant ${settings.tenant} at ${settings.addr}: set KMS_API_KEY, or sign in with kms login`,
        EXIT.auth,
      )
    return createKmsClient({ ...base, token })
  }
}

function exitCodeOf(error: KmsError): number {
  if (error.status === 0) return error.code === 'invalid_response' ? EXIT.failed : EXIT.unavailable
  if (error.status === 401 || error.status === 403) return EXIT.auth
  if (error.status === 404) return EXIT.notFound
  if (error.status === 429 || error.status >= 500) return EXIT.unavailable
  return EXIT.failed
}

/** `kms: <code>: <message>`, then indented details; returns the exit code. */
function report(error: unknown, io: Io): number {
  const line = (text: string) => io.stderr.write(`${text}\n`)
  if (error instanceof CliError) {
    line(`kms: ${error.code}: ${error.message}`)
    for (const detail of error.details) line(`  ${detail}`)
    return error.exitCode
  }
  if (error instanceof KmsError) {
    line(`kms: ${error.code}: ${error.message}`)
    for (const field of error.fields) {
      const allowed = field.allowedValues ? ` (allowed: ${field.allowedValues.map(String).join(', ')})` : ''
      line(`  ${field.path}: ${field.message}${allowed}`)
    }
    if (error.retryAfterSeconds !== undefined && (error.status === 429 || error.status === 503))
      line(`  retry after ${error.retryAfterSeconds} s`)
    if (error.requestId !== undefined) line(`  request id: ${error.requestId}`)
    return exitCodeOf(error)
  }
  const message = error instanceof Error ? error.message : String(error)
  line(`kms: internal_error: ${message}`)
  return EXIT.failed
}

async function contextFor(flags: GlobalFlags, io: Io, path: CommandNode[]): Promise<CommandContext> {
  const settings = await resolveSettings(flags, io.env, {
    stdoutIsTerminal: io.stdoutIsTerminal,
    allowNewProfile: path[1]?.name === 'config',
  })
  return { settings, io, client: clientFactory(settings, io) }
}

export async function main(argv: string[], io: Io = processIo()): Promise<number> {
  // A reader that went away (kms keys list | head) is not an error worth a stack trace.
  io.stdout.on('error', (error: NodeJS.ErrnoException) => {
    if (error.code === 'EPIPE') process.exit(process.exitCode ?? 0)
  })
  try {
    const { flags, rest } = extractGlobalFlags(argv)
    if (flags.version) {
      io.stdout.write(`kms ${VERSION}\n`)
      return EXIT.ok
    }
    const { path, args } = findCommand(rest)
    const node = path[path.length - 1]!
    if (flags.help && node.ownHelp && node.run)
      return await node.run(['--help'], await contextFor(flags, io, path))
    if (flags.help || (path.length === 1 && args.length === 0)) {
      io.stdout.write(helpText(path))
      return EXIT.ok
    }
    if (!node.run) throw unknownCommand(path, args[0])
    return await node.run(args, await contextFor(flags, io, path))
  } catch (error) {
    if (error instanceof CurlPrinted) return EXIT.ok
    return report(error, io)
  }
}
