import assert from 'node:assert/strict'
import { type ChildProcess, execFileSync, spawn } from 'node:child_process'
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join, posix } from 'node:path'
import { after, test } from 'node:test'
import { dockerignore, parseDockerfile } from '../helpers/dockerfile.ts'
import {
  createTestDatabase,
  httpRequest,
  PROJECT_ROOT,
  type TestDatabase,
  testEnv,
  waitFor,
} from '../helpers/service.ts'

/**
 * The production image's install and start, without Docker (not available where the tests run):
 * the files the Dockerfile copies from the build context go to a scratch folder, the Dockerfile's
 * own `npm ci` (dev dependencies left out) installs there, and `node src/main.ts` must start from
 * it and answer the health check. A runtime import of a devDependency passes every other test
 * (they run on the full install) and stops only this start, with ERR_MODULE_NOT_FOUND.
 */

const dockerfile = parseDockerfile(readFileSync(join(PROJECT_ROOT, 'Dockerfile'), 'utf8'))
const ignoreFile = join(PROJECT_ROOT, '.dockerignore')
const ignored = existsSync(ignoreFile) ? dockerignore(readFileSync(ignoreFile, 'utf8')) : () => false

/** The Dockerfile's install command (the `npm ci …` of its RUN line, up to the next `&&`). */
function dockerfileInstall(): string[] {
  for (const ins of dockerfile.flat()) {
    if (ins.keyword !== 'RUN') continue
    const start = ins.args.findIndex((a, i) => a === 'npm' && ins.args[i + 1] === 'ci')
    if (start === -1) continue
    const end = ins.args.indexOf('&&', start)
    return ins.args.slice(start, end === -1 ? undefined : end)
  }
  throw new Error('the Dockerfile has no `RUN npm ci` line')
}

/**
 * The build context's files that the Dockerfile copies: what git holds (tracked, or new and not
 * ignored: what a CI checkout has), less .dockerignore, under a COPY/ADD source of any stage.
 * Each keeps its path (the Dockerfile copies `package.json` to `./` and `src` to `./src`).
 */
function copiedFiles(): string[] {
  const sources = dockerfile
    .flat()
    .filter((i) => (i.keyword === 'COPY' || i.keyword === 'ADD') && i.flags['from'] === undefined)
    .flatMap((i) => i.args.slice(0, -1))
    .map((s) => posix.normalize(s).replace(/\/$/, ''))
  const listed = execFileSync('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], {
    cwd: PROJECT_ROOT,
    encoding: 'utf8',
  })
    .split('\0')
    .filter((f) => f !== '')
  return [...new Set(listed)].filter(
    (f) =>
      !ignored(f) &&
      sources.some((s) => f === s || f.startsWith(`${s}/`)) &&
      // A tracked file another change deletes is not in the context either.
      existsSync(join(PROJECT_ROOT, f)),
  )
}

/**
 * Whatever ends the test (a failure, a timeout, Ctrl-C, the runner's SIGTERM), the scratch folder
 * (some hundred MB of node_modules), the child processes and the database go. Synchronous steps
 * run on 'exit' too, where nothing asynchronous can.
 */
const cleanups: (() => void)[] = []
let database: TestDatabase | undefined
function cleanUpNow(): void {
  for (const step of cleanups.splice(0).reverse()) {
    try {
      step()
    } catch {
      // Best effort: one failed step must not leave the others undone.
    }
  }
}
process.once('exit', cleanUpNow)
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
  process.once(signal, () => {
    cleanUpNow()
    const drop = database?.drop().catch(() => {}) ?? Promise.resolve()
    // Bounded: an unreachable database must not keep an interrupted run alive.
    void Promise.race([drop, new Promise((resolve) => setTimeout(resolve, 3000))]).finally(() =>
      process.kill(process.pid, signal),
    )
  })
}
after(async () => {
  cleanUpNow()
  await database?.drop()
  database = undefined
})

/** Kills the child when the test is interrupted or fails before it ended. */
function track(child: ChildProcess): void {
  const kill = () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
  }
  cleanups.push(kill)
}

/**
 * Deleting the install's tens of thousands of files can take as long as the test on a busy disk:
 * a detached `rm` does it while the run goes on, and outlives this process when it is
 * interrupted. Where `rm` cannot start, the folder is removed here and now.
 */
function removeInBackground(dir: string): void {
  try {
    const rm = spawn('rm', ['-rf', dir], { detached: true, stdio: 'ignore' })
    rm.once('error', () => rmSync(dir, { recursive: true, force: true }))
    rm.unref()
  } catch {
    rmSync(dir, { recursive: true, force: true })
  }
}

function run(command: string, args: string[], cwd: string, timeoutMs: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd, env: process.env, stdio: ['ignore', 'pipe', 'pipe'] })
    track(child)
    let output = ''
    child.stdout.on('data', (c: Buffer) => {
      output += c.toString()
    })
    child.stderr.on('data', (c: Buffer) => {
      output += c.toString()
    })
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs)
    child.once('error', reject)
    child.once('exit', (code, signal) => {
      clearTimeout(timer)
      if (code === 0) resolve(output)
      else reject(new Error(`${command} ${args.join(' ')} ended with ${code ?? signal}:\n${output}`))
    })
  })
}

test('the service starts from the production install (dev dependencies left out) and answers the health check', {
  timeout: 600_000,
}, async () => {
  const install = dockerfileInstall()
  assert.ok(install.includes('--omit=dev'), `the Dockerfile installs without dev dependencies: ${install}`)
  const files = copiedFiles()
  assert.ok(files.includes('package-lock.json') && files.includes('src/main.ts'), 'the copied files')

  const scratch = mkdtempSync(join(tmpdir(), 'kms-production-install-'))
  cleanups.push(() => removeInBackground(scratch))
  for (const file of files) {
    mkdirSync(dirname(join(scratch, file)), { recursive: true })
    cpSync(join(PROJECT_ROOT, file), join(scratch, file))
  }

  // The Dockerfile's command as written (its --ignore-scripts: the image has Node 24 already, as
  // this test's process is), quiet. The npm cache makes it quick after the first run.
  const [npm, ...npmArgs] = install
  await run(npm!, [...npmArgs, '--no-audit', '--no-fund'], scratch, 540_000)
  // What --omit=dev left out is really absent: npm records every installed package here.
  const installed = JSON.parse(readFileSync(join(scratch, 'node_modules', '.package-lock.json'), 'utf8'))
  const devInstalled = Object.entries(installed.packages as Record<string, { dev?: boolean }>)
    .filter(([, p]) => p.dev === true)
    .map(([path]) => path)
  assert.deepEqual(devInstalled, [], 'no dev dependency in the production install')

  database = await createTestDatabase()
  // The image's environment, with a test database, Redis prefix and port; nothing of this
  // process's environment but PATH and HOME, as in a container.
  const env = {
    PATH: process.env['PATH'] ?? '',
    HOME: scratch,
    ...testEnv(database),
    NODE_ENV: 'production',
    KMS_DATA_DIR: join(scratch, 'data'),
    // The listening address is read from the log.
    LOG_LEVEL: 'info',
  }
  // process.execPath: the Node 24 running this test stands in for the image's node:24-slim.
  const service = spawn(process.execPath, ['src/main.ts'], {
    cwd: scratch,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  track(service)
  let output = ''
  service.stdout.on('data', (c: Buffer) => {
    output += c.toString()
  })
  service.stderr.on('data', (c: Buffer) => {
    output += c.toString()
  })
  const exited = new Promise<number | null>((resolve) => service.once('exit', (code) => resolve(code)))
  let baseUrl: string | undefined
  await waitFor(
    () => {
      if (service.exitCode !== null) throw new Error('the service exited before listening')
      baseUrl = /Server listening at (http:\/\/127\.0\.0\.1:\d+)/.exec(output)?.[1]
      return baseUrl !== undefined
    },
    'the service to listen',
    60_000,
  ).catch((err: Error) => {
    throw new Error(`${err.message}\n${output}`)
  })

  const health = await httpRequest(baseUrl!, 'GET', '/api/v1/health')
  assert.equal(health.status, 200, health.text)
  assert.equal(health.body.status, 'ok')
  assert.equal(health.body.database.status, 'up')
  assert.equal(health.body.redis.status, 'up')
  assert.equal(
    health.body.version,
    JSON.parse(readFileSync(join(PROJECT_ROOT, 'package.json'), 'utf8')).version,
  )

  service.kill('SIGTERM')
  assert.equal(await exited, 0, `graceful shutdown exits 0:\n${output}`)
})
