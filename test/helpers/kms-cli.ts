import { type ChildProcess, spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { PROJECT_ROOT, type TestService } from './service.ts'

/**
 * The `kms` CLI (packages/cli) run as a user runs it: the installed bin executed directly, so its
 * shebang (`env -S node --max-semi-space-size=1`) picks the node on PATH and passes the CLI's V8
 * flag. Running it through process.execPath instead would skip that flag: not what a user runs.
 */

/** The CLI's launcher (JavaScript: it enables Node's compile cache, then imports the sources). */
export const KMS_BIN = join(PROJECT_ROOT, 'packages', 'cli', 'bin', 'kms.js')

/**
 * The environment of a CLI run: this process's, without the developer's own KMS_* settings (a stray
 * KMS_API_KEY would change what a test proves), with this Node 24 first on PATH (the shebang's
 * `node`; the system's may be older), plus the test's own variables.
 */
export function kmsEnv(extra: Record<string, string> = {}): Record<string, string> {
  const env: Record<string, string> = {}
  for (const [name, value] of Object.entries(process.env))
    if (value !== undefined && !name.startsWith('KMS_')) env[name] = value
  return { ...env, PATH: `${dirname(process.execPath)}:${process.env['PATH'] ?? ''}`, ...extra }
}

interface KmsOptions {
  /** The working directory (relative paths in the arguments are resolved from it). */
  cwd: string
  /** The test's variables (KMS_ADDR, KMS_API_KEY, …), added to kmsEnv()'s environment. */
  env?: Record<string, string>
  /** A command the CLI runs under, e.g. ['/usr/bin/time', '-f', '%M', '-o', report]. */
  wrapper?: string[]
}

interface KmsExit {
  code: number | null
  signal: NodeJS.Signals | null
}

interface KmsProcess {
  child: ChildProcess
  /** What the CLI printed so far. */
  stdout(): string
  stderr(): string
  /** Once the process has ended and its output is all read. */
  exited: Promise<KmsExit>
  /** The first match of `pattern` in stderr as it arrives; rejects if the CLI exits before printing it. */
  waitForStderr(pattern: RegExp): Promise<RegExpExecArray>
}

export interface KmsRun extends KmsExit {
  stdout: Buffer
  /** stdout as UTF-8 text. */
  out: string
  stderr: string
}

/**
 * CLIs still running when the test file's process ends (a test failed while one waited for a
 * browser, a poll or a signal): killed, so none outlives the run holding a port or a file.
 */
const running = new Set<ChildProcess>()
process.once('exit', () => {
  for (const child of running) child.kill('SIGKILL')
})

function launch(args: string[], options: KmsOptions, stdin: 'ignore' | 'pipe') {
  const [command, ...prefix] = options.wrapper ?? []
  const child = spawn(command ?? KMS_BIN, command ? [...prefix, KMS_BIN, ...args] : args, {
    cwd: options.cwd,
    env: kmsEnv(options.env),
    stdio: [stdin, 'pipe', 'pipe'],
  })
  running.add(child)
  child.once('exit', () => running.delete(child))
  const out: Buffer[] = []
  let stderr = ''
  const waiters: Array<{ pattern: RegExp; resolve(match: RegExpExecArray): void }> = []
  child.stdout!.on('data', (chunk: Buffer) => out.push(chunk))
  // Decoded as a stream, so a character split between two chunks stays whole.
  child.stderr!.setEncoding('utf8')
  child.stderr!.on('data', (chunk: string) => {
    stderr += chunk
    for (const waiter of [...waiters]) {
      const match = waiter.pattern.exec(stderr)
      if (match) {
        waiters.splice(waiters.indexOf(waiter), 1)
        waiter.resolve(match)
      }
    }
  })
  const exited = new Promise<KmsExit>((resolve, reject) => {
    child.once('error', reject)
    child.once('close', (code, signal) => resolve({ code, signal }))
  })
  // A test that fails before awaiting the exit gets its own error, not an unhandled rejection.
  exited.catch(() => {})
  const started: KmsProcess = {
    child,
    stdout: () => Buffer.concat(out).toString('utf8'),
    stderr: () => stderr,
    exited,
    waitForStderr(pattern) {
      const match = pattern.exec(stderr)
      if (match) return Promise.resolve(match)
      return Promise.race([
        new Promise<RegExpExecArray>((resolve) => waiters.push({ pattern, resolve })),
        exited.then(({ code, signal }) => {
          throw new Error(`kms exited (${code ?? signal}) before printing ${pattern}:\n${stderr}`)
        }),
      ])
    },
  }
  return { kms: started, stdoutBytes: () => Buffer.concat(out) }
}

/** Starts the CLI with stdin ignored, for a test that watches it run (signals, prompts, long polls). */
export function startKms(args: string[], options: KmsOptions): KmsProcess {
  return launch(args, options, 'ignore').kms
}

/**
 * Runs the CLI to its end. `stdin` is written to it and closed; without it stdin is ignored
 * (/dev/null: empty, and not a terminal).
 */
export async function runKms(
  args: string[],
  options: KmsOptions & { stdin?: Uint8Array | string },
): Promise<KmsRun> {
  const { kms, stdoutBytes } = launch(args, options, options.stdin === undefined ? 'ignore' : 'pipe')
  if (options.stdin !== undefined) {
    // The CLI may exit without reading all of it (a usage error): that is its answer, not a test error.
    kms.child.stdin!.on('error', () => {})
    kms.child.stdin!.end(options.stdin)
  }
  const { code, signal } = await kms.exited
  const stdout = stdoutBytes()
  return { code, signal, stdout, out: stdout.toString('utf8'), stderr: kms.stderr() }
}

/** GET on the CLI's loopback listener, as a browser coming back from the provider would. */
export async function getLoopback(url: string): Promise<{ status: number; body: string }> {
  const answer = await fetch(url, { redirect: 'manual' })
  return { status: answer.status, body: await answer.text() }
}

/** A developer of `tenantId`, a team member who can sign in with this email and password. */
export async function newCliMember(service: TestService, tenantId: string) {
  const email = `cli-${randomBytes(6).toString('hex')}@example.com`
  const password = `cli-password-${randomBytes(6).toString('hex')}`
  const account = await service.api.services.accounts.createTeamAccount({ email, password })
  await service.api.services.team.addMember(
    { tenantId, actor: 'test', requestId: null, clientIp: null },
    { accountId: account.id, role: 'tenant:developer' },
  )
  return { accountId: account.id, email, password }
}

/**
 * The variables of a CLI that signs in to `service` (for `tenantId`, when given), in a fresh
 * config directory that is also its HOME, with tokens in the file store. The directory is pushed
 * onto `dirs` for the test file to remove.
 */
export function signInEnv(
  service: TestService,
  tenantId: string | undefined,
  dirs: string[],
  extra: Record<string, string> = {},
) {
  const configDir = mkdtempSync(join(tmpdir(), 'kms-cli-login-'))
  dirs.push(configDir)
  const env: Record<string, string> = {
    HOME: configDir,
    KMS_ADDR: service.baseUrl,
    KMS_CONFIG_DIR: configDir,
    KMS_CREDENTIAL_STORE: 'file',
    ...(tenantId ? { KMS_TENANT: tenantId } : {}),
    ...extra,
  }
  return { env, configDir, credentialsPath: join(configDir, 'credentials.json') }
}
