import assert from 'node:assert/strict'
import { createHash } from 'node:crypto'
import { mkdtemp, rm, stat } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, test } from 'node:test'
import { runKms, startKms } from '../helpers/kms-cli.ts'
import { startTestService, type TenantWithKey, type TestService } from '../helpers/service.ts'

/**
 * `kms run --secret NAME=<secret>[@version] -- cmd`: the installed CLI as a child process
 * (test/helpers/kms-cli.ts) against a real service, running real child commands (node -e). The
 * child gets each value in its environment and nowhere else; exit codes and signals pass through;
 * bad names and missing secrets stop everything before a child is started (a marker file the
 * child would write proves it did not run).
 */

const NODE = process.execPath

let svc: TestService
let tenant: TenantWithKey
let dir: string
/** The test's variables for the CLI. */
let env: Record<string, string>

const DB_PASSWORD = 'correct horse "battery" $staple\n\\ü 🔑'
const API_TOKEN = 'tok_0123456789abcdef'
const sha256 = (text: string) => createHash('sha256').update(text, 'utf8').digest('hex')

async function createSecret(name: string, value: string, folderId?: string): Promise<string> {
  const made = await svc.request('POST', '/api/v1/secrets', {
    key: tenant.key,
    body: { name, value, ...(folderId ? { folderId } : {}) },
  })
  assert.equal(made.status, 201, made.text)
  return made.body.id
}

before(async () => {
  svc = await startTestService()
  tenant = await svc.createTenant()
  await createSecret('db-password', DB_PASSWORD)
  await createSecret('api-token', API_TOKEN)
  dir = await mkdtemp(join(tmpdir(), 'kms-run-'))
  env = {
    KMS_ADDR: svc.baseUrl,
    KMS_API_KEY: tenant.key,
    KMS_CONFIG_DIR: join(dir, 'config'),
  }
})

after(async () => {
  if (dir) await rm(dir, { recursive: true, force: true })
  await svc?.stop()
})

const kms = (args: string[]) => runKms(args, { cwd: dir, env })

const markerExists = (name: string) =>
  stat(join(dir, name)).then(
    () => true,
    () => false,
  )

/** A child that would leave a marker file if it ran. */
const touch = (name: string) => [
  NODE,
  '-e',
  `require('node:fs').writeFileSync(${JSON.stringify(name)}, 'ran')`,
]

test("the child gets each secret in its environment, not on its command line, and not kms's API key; kms prints nothing of it", async () => {
  const script = `
    const { createHash } = require('node:crypto')
    const h = (v) => v === undefined ? null : createHash('sha256').update(v, 'utf8').digest('hex')
    console.log(JSON.stringify({ db: h(process.env.DB_PASSWORD), token: h(process.env.TOKEN),
      argv: process.argv, addr: process.env.KMS_ADDR, apiKey: process.env.KMS_API_KEY ?? null }))`
  const run = await kms([
    'run',
    '--secret',
    'DB_PASSWORD=db-password',
    '--secret',
    'TOKEN=api-token',
    '--',
    NODE,
    '-e',
    script,
  ])
  assert.equal(run.code, 0, run.stderr)
  assert.equal(run.stderr, '')
  const seen = JSON.parse(run.out)
  assert.equal(seen.db, sha256(DB_PASSWORD))
  assert.equal(seen.token, sha256(API_TOKEN))
  assert.equal(seen.addr, svc.baseUrl, 'the rest of the environment is kept')
  assert.equal(seen.apiKey, null, "kms's own API key (which reads every secret) stays with kms")
  for (const arg of seen.argv as string[]) {
    assert.ok(!arg.includes('battery'), 'no secret on the command line')
    assert.ok(!arg.includes(API_TOKEN), 'no secret on the command line')
  }
  assert.ok(!run.out.includes(API_TOKEN) && !run.out.includes('battery'), 'only hashes printed')
})

test('NAME=secret@version picks that version; without it the current one', async () => {
  const id = await createSecret('rotating', 'first value')
  const patched = await svc.request('PATCH', `/api/v1/secrets/${id}`, {
    key: tenant.key,
    body: { value: 'second value' },
  })
  assert.equal(patched.status, 200, patched.text)
  const printValue = [NODE, '-e', 'process.stdout.write(process.env.V)']
  assert.equal((await kms(['run', '--secret', 'V=rotating@1', '--', ...printValue])).out, 'first value')
  assert.equal((await kms(['run', '--secret', 'V=rotating', '--', ...printValue])).out, 'second value')
  assert.equal((await kms(['run', '--secret', `V=${id}`, '--', ...printValue])).out, 'second value', 'by id')
  const missing = await kms(['run', '--secret', 'V=rotating@9', '--', ...touch('marker-version')])
  assert.equal(missing.code, 4, missing.stderr)
  assert.match(missing.stderr, /^kms: secret_not_found: .*version 9/)
  assert.equal(await markerExists('marker-version'), false, 'nothing was started')
})

test("the child's exit code is kms's; a signal death is 128 + its number; an unknown command 127", async () => {
  const secret = ['--secret', 'T=api-token', '--']
  assert.equal((await kms(['run', ...secret, NODE, '-e', 'process.exit(7)'])).code, 7)
  assert.equal((await kms(['run', ...secret, NODE, '-e', 'process.exit(0)'])).code, 0)
  const killed = await kms(['run', ...secret, NODE, '-e', "process.kill(process.pid, 'SIGKILL')"])
  assert.equal(killed.code, 128 + 9)
  const unknown = await kms(['run', ...secret, 'no-such-command-kms-test'])
  assert.equal(unknown.code, 127)
  assert.match(unknown.stderr, /^kms: command_not_found: no-such-command-kms-test/)
})

test('SIGTERM and SIGINT sent to kms reach the child, whose exit code kms returns', async () => {
  for (const [signal, exitCode] of [
    ['SIGTERM', 42],
    ['SIGINT', 43],
  ] as const) {
    const script = `process.on(${JSON.stringify(signal)}, () => { console.log('got ${signal}'); process.exit(${exitCode}) })
      console.log('ready'); setInterval(() => {}, 1000)`
    const running = startKms(['run', '--secret', 'T=api-token', '--', NODE, '-e', script], { cwd: dir, env })
    const deadline = Date.now() + 30_000
    while (!running.stdout().includes('ready')) {
      if (Date.now() > deadline) throw new Error(`the child never started: ${running.stdout()}`)
      await new Promise((resolve) => setTimeout(resolve, 20))
    }
    running.child.kill(signal)
    assert.equal((await running.exited).code, exitCode, running.stderr())
    assert.match(running.stdout(), new RegExp(`got ${signal}`))
  }
})

test('an invalid NAME is bad usage (exit 2) and starts nothing', async () => {
  for (const bad of ['1ABC=api-token', 'A-B=api-token', 'A B=api-token', '=api-token', 'NOEQUALS']) {
    const run = await kms(['run', '--secret', bad, '--', ...touch('marker-name')])
    assert.equal(run.code, 2, `${bad}: ${run.stderr}`)
    assert.match(run.stderr, /^kms: usage: --secret/)
  }
  const twice = await kms([
    'run',
    '--secret',
    'A=api-token',
    '--secret',
    'A=db-password',
    '--',
    ...touch('marker-name'),
  ])
  assert.equal(twice.code, 2, twice.stderr)
  const noSeparator = await kms(['run', '--secret', 'A=api-token', NODE, '-e', '1'])
  assert.equal(noSeparator.code, 2, noSeparator.stderr)
  assert.match(noSeparator.stderr, /after --/)
  assert.equal(await markerExists('marker-name'), false)
})

test('a missing secret fails before anything starts, even after secrets that were found', async () => {
  const run = await kms([
    'run',
    '--secret',
    'A=api-token',
    '--secret',
    'B=no-such-secret',
    '--',
    ...touch('marker-missing'),
  ])
  assert.equal(run.code, 4, run.stderr)
  assert.match(
    run.stderr,
    /^kms: secret_not_found: --secret B=no-such-secret: there is no secret named "no-such-secret"/,
  )
  assert.equal(await markerExists('marker-missing'), false, 'the child was not started')
  assert.ok(!run.stderr.includes(API_TOKEN), 'the secret read before is not shown')

  // The same command with secrets that exist does run the child (the marker proves it can appear).
  const control = await kms(['run', '--secret', 'A=api-token', '--', ...touch('marker-missing')])
  assert.equal(control.code, 0, control.stderr)
  assert.equal(await markerExists('marker-missing'), true)
})

test('a name held by secrets in two folders is ambiguous: kms asks for the id', async () => {
  const folder = await svc.request('POST', '/api/v1/folders', {
    key: tenant.key,
    body: { name: 'elsewhere' },
  })
  assert.equal(folder.status, 201, folder.text)
  await createSecret('shared-name', 'top level')
  const inFolder = await createSecret('shared-name', 'in the folder', folder.body.id)
  const run = await kms(['run', '--secret', 'S=shared-name', '--', ...touch('marker-ambiguous')])
  assert.equal(run.code, 2, run.stderr)
  assert.match(run.stderr, /^kms: ambiguous_secret: .*give the id/)
  assert.ok(run.stderr.includes(inFolder))
  assert.equal(await markerExists('marker-ambiguous'), false)
  const byId = await kms([
    'run',
    '--secret',
    `S=${inFolder}`,
    '--',
    NODE,
    '-e',
    'process.stdout.write(process.env.S)',
  ])
  assert.equal(byId.out, 'in the folder')
})
