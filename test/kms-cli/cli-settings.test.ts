import assert from 'node:assert/strict'
import {
  chmod,
  chown,
  lstat,
  mkdir,
  mkdtemp,
  readdir,
  readFile,
  rm,
  stat,
  symlink,
  writeFile,
} from 'node:fs/promises'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { writeConfigFile } from '../../packages/cli/src/settings.ts'
import { type KmsRun, runKms } from '../helpers/kms-cli.ts'
import { PROJECT_ROOT } from '../helpers/service.ts'

/**
 * The `kms` CLI's settings (flag > environment > profile file > default), its usage errors, help
 * and exit codes for what needs no service: each run is the installed bin as a child process
 * (test/helpers/kms-cli.ts), and --output-curl-string shows where a command would go without
 * sending it.
 */

const TENANT_FILE = '11111111-1111-4111-8111-111111111111'
const TENANT_ENV = '22222222-2222-4222-8222-222222222222'
const TENANT_FLAG = '33333333-3333-4333-8333-333333333333'

describe('kms CLI settings, usage and help', () => {
  let dir: string
  let emptyDir: string

  /** kms with only these KMS_* variables (the developer's own are left out). */
  const kms = (args: string[], vars: Record<string, string> = {}): Promise<KmsRun> =>
    runKms(args, {
      cwd: PROJECT_ROOT,
      env: { KMS_CONFIG_DIR: dir, KMS_CREDENTIAL_STORE: 'file', ...vars },
      stdin: '',
    })
  /** Where `kms keys list` would send its request. */
  const target = async (args: string[], vars: Record<string, string> = {}) => {
    const run = await kms(['keys', 'list', '--output-curl-string', ...args], {
      KMS_API_KEY: 'unused',
      ...vars,
    })
    assert.equal(run.code, 0, run.stderr)
    return /^curl -sS '?(https?:\/\/[^/]+)\/api\/v1\/keys/.exec(run.out)?.[1]
  }
  /** Exit 2, nothing on stdout, one line `kms: usage: …` on stderr. */
  const usage = (run: KmsRun): string => {
    assert.equal(run.code, 2, run.stderr)
    assert.equal(run.out, '')
    assert.match(run.stderr, /^kms: usage: [^\n]+\n$/)
    return run.stderr
  }

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'kms-cli-settings-'))
    emptyDir = await mkdtemp(join(tmpdir(), 'kms-cli-empty-'))
    await writeFile(
      join(dir, 'config.json'),
      JSON.stringify({
        profiles: {
          default: { addr: 'https://file-default.test:1001', tenant: TENANT_FILE, output: 'table' },
          staging: { addr: 'https://file-staging.test:1002/' },
          // Put there by hand: a profile's credential is never read.
          leaky: { addr: 'https://file-leaky.test:1003', apiKey: 'kms_from_the_file' },
        },
      }),
    )
  })
  after(async () => {
    await rm(dir, { recursive: true, force: true })
    await rm(emptyDir, { recursive: true, force: true })
  })

  test('addr: --addr > KMS_ADDR > the profile (--profile > KMS_PROFILE > default) > http://127.0.0.1:8080', async () => {
    assert.equal(await target([]), 'https://file-default.test:1001')
    assert.equal(await target([], { KMS_ADDR: 'https://env.test:2001' }), 'https://env.test:2001')
    assert.equal(
      await target(['--addr', 'https://flag.test:3001'], { KMS_ADDR: 'https://env.test:2001' }),
      'https://flag.test:3001',
    )
    assert.equal(await target([], { KMS_PROFILE: 'staging' }), 'https://file-staging.test:1002')
    assert.equal(
      await target(['--profile', 'default'], { KMS_PROFILE: 'staging' }),
      'https://file-default.test:1001',
    )
    assert.equal(await target(['--profile=staging']), 'https://file-staging.test:1002')
    assert.equal(await target([], { KMS_CONFIG_DIR: emptyDir }), 'http://127.0.0.1:8080')
  })

  test('output: --output > KMS_OUTPUT > the profile > json when stdout is not a terminal', async () => {
    // The default profile says table: a string is printed as it is, with a newline.
    assert.equal((await kms(['config', 'get', 'addr'])).out, 'https://file-default.test:1001\n')
    assert.equal(
      (await kms(['config', 'get', 'addr'], { KMS_OUTPUT: 'json' })).out,
      '"https://file-default.test:1001"\n',
    )
    assert.equal(
      (await kms(['config', 'get', 'addr', '--output', 'raw'], { KMS_OUTPUT: 'json' })).out,
      'https://file-default.test:1001',
    )
    // staging says nothing: stdout is a pipe here, so JSON.
    assert.equal(
      (await kms(['config', 'get', 'addr', '--profile', 'staging'])).out,
      '"https://file-staging.test:1002/"\n',
    )
  })

  test('tenant: --tenant > KMS_TENANT > the profile, the sign-in looked for without an API key (exit 3)', async () => {
    const signIn = async (args: string[], vars: Record<string, string> = {}) => {
      const run = await kms(['whoami', ...args], vars)
      assert.equal(run.code, 3)
      return run.stderr
    }
    const line = (tenant: string) =>
      `kms: not_signed_in: no credentials for tenant ${tenant} at https://file-default.test:1001: set KMS_API_KEY, or sign in with kms login\n`
    assert.equal(await signIn([]), line(TENANT_FILE))
    assert.equal(await signIn([], { KMS_TENANT: TENANT_ENV }), line(TENANT_ENV))
    assert.equal(await signIn(['--tenant', TENANT_FLAG], { KMS_TENANT: TENANT_ENV }), line(TENANT_FLAG))
    // An API key in the profile file is not a credential the CLI reads.
    const leaky = await kms(['keys', 'list', '--profile', 'leaky'])
    assert.equal(leaky.code, 3)
    assert.match(leaky.stderr, /^kms: not_signed_in: no credentials for https:\/\/file-leaky\.test:1003/)
  })

  test('config set, get and list keep addr, tenant and output per profile, and refuse anything else', async () => {
    const set = await kms(['config', 'set', 'addr', 'https://kms.new.test', '--profile', 'new'])
    assert.equal(set.code, 0, set.stderr)
    assert.equal((await kms(['config', 'set', '--profile', 'new', 'output', 'raw'])).code, 0)
    const file = JSON.parse(await readFile(join(dir, 'config.json'), 'utf8'))
    assert.deepEqual(file.profiles.new, { addr: 'https://kms.new.test', output: 'raw' })
    assert.equal(file.profiles.default.addr, 'https://file-default.test:1001', 'other profiles are kept')
    assert.equal((await kms(['config', 'get', 'output', '--profile', 'new'])).out, 'raw')
    const listed = JSON.parse((await kms(['config', 'list', '--output', 'json'])).out)
    assert.deepEqual(Object.keys(listed.profiles).sort(), ['default', 'leaky', 'new', 'staging'])
    assert.equal(listed.profiles.leaky.apiKey, undefined)

    assert.match(usage(await kms(['config', 'set', 'apiKey', 'kms_x'])), /settings: addr, tenant, output/)
    assert.match(usage(await kms(['config', 'set', 'output', 'xml'])), /must be one of json, table, raw/)
    assert.match(usage(await kms(['config', 'set', 'addr', 'ftp://x'])), /must be an http\(s\) URL/)
    const unset = await kms(['config', 'get', 'tenant', '--profile', 'new'])
    assert.equal(unset.code, 1)
    assert.equal(unset.stderr, 'kms: not_set: tenant is not set in profile "new"\n')
  })

  test('bad usage exits 2 with one line naming what is allowed, before anything is sent', async () => {
    const vars = { KMS_API_KEY: 'unused' }
    assert.match(
      usage(await kms(['frobnicate'], vars)),
      /unknown command "frobnicate" for kms; allowed: login, logout, whoami, .*keys, aliases, encrypt, decrypt, .*secrets, .*audit, api-keys/,
    )
    assert.match(
      usage(await kms(['keys', 'enable', 'x'], vars)),
      /unknown command "enable" for kms keys; allowed: list, create, get, update, rotate, revoke, delete, cancel-deletion, versions, public-key/,
    )
    assert.match(usage(await kms(['keys'], vars)), /kms keys needs a command: list, create/)
    assert.match(
      usage(await kms(['keys', 'list', '--colour', 'red'], vars)),
      /unknown flag --colour; this command's flags: --state, --type, .*--all/,
    )
    assert.match(
      usage(await kms(['keys', 'create', '--name', 'a', '--type', 'Symmetric'], vars)),
      /--type must be one of Encryption, Signing, HMAC \(got "Symmetric"\)/,
    )
    assert.match(
      usage(await kms(['keys', 'list', '--output', 'xml'], vars)),
      /--output must be one of json, table, raw \(got "xml"\)/,
    )
    assert.match(
      usage(await kms(['keys', 'list', '--output'], vars)),
      /--output needs a value \(json, table, raw\)/,
    )
    assert.match(usage(await kms(['keys', 'get'], vars)), /missing argument: expected <key>/)
    assert.match(
      usage(await kms(['keys', 'list', '--limit', '0'], vars)),
      /--limit must be an integer from 1 to 100/,
    )
    assert.match(
      usage(await kms(['keys', 'list', '--profile', 'nope'], vars)),
      /no profile "nope" in .*config\.json \(profiles: default, /,
    )
    assert.match(
      usage(await kms(['encrypt', '--context', '{"a":1}', 'x'], vars)),
      /--context as JSON must be an object whose values are strings/,
    )
  })

  test('help on every level with examples, and --version, on stdout with exit 0', async () => {
    const help = async (args: string[]) => {
      const run = await kms(args)
      assert.equal(run.code, 0, run.stderr)
      assert.equal(run.stderr, '')
      return run.out
    }
    const top = await help(['--help'])
    for (const command of [
      'keys',
      'aliases',
      'encrypt',
      'decrypt',
      'sign',
      'verify',
      'mac',
      'data-key',
      'secrets',
      'audit',
      'api-keys',
      'whoami',
      'login',
      'encrypt-file',
      'run',
      'config',
    ])
      assert.match(top, new RegExp(`^  ${command} +\\S`, 'm'), `kms --help lists ${command}`)
    assert.match(top, /--output-curl-string/)
    assert.match(top, /--api-key KEY +Discouraged/)
    assert.equal(await help([]), top)
    assert.match(await help(['keys', '-h']), /^Commands:\n {2}list +List keys/m)
    const create = await help(['keys', 'create', '--help'])
    assert.match(create, /^Usage: kms keys create --name NAME --type Encryption\|Signing\|HMAC/m)
    assert.match(create, /^Examples:\n {2}kms keys create/m)
    assert.match(await help(['secrets', 'set', '-h']), /never taken from the command line/)
    assert.match(await help(['audit', 'tail', '--help']), /until interrupted/)
    assert.equal(await help(['--version']), `kms 0.1.0\n`)
  })

  test('an unreachable service is exit 5: kms: unavailable', async () => {
    // A port that was just free: nothing listens there.
    const server = createServer()
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    const { port } = server.address() as { port: number }
    await new Promise<void>((resolve) => server.close(() => resolve()))
    const run = await kms(['keys', 'list'], {
      KMS_ADDR: `http://127.0.0.1:${port}`,
      KMS_API_KEY: 'kms_unused',
    })
    assert.equal(run.code, 5)
    assert.match(run.stderr, new RegExp(`^kms: unavailable: Could not reach http://127\\.0\\.0\\.1:${port}`))
    assert.ok(!run.stderr.includes('kms_unused'))
  })

  test('plain http only to this machine: any other host is a usage error naming https, from the flag, the environment, a profile or config set', async () => {
    for (const loopback of [
      'http://127.0.0.1:9',
      'http://127.8.9.10:9',
      'http://[::1]:9',
      'http://localhost:9',
    ])
      assert.equal(await target(['--addr', loopback]), loopback)
    assert.equal(await target(['--addr', 'https://kms.example.com']), 'https://kms.example.com')

    const refused = (source: string, value: string) =>
      new RegExp(
        `^kms: usage: ${source} must be an https URL: plain http is allowed only to this machine \\(127\\.0\\.0\\.1, ::1, localhost\\), got "${value.replace(/[.[\]]/g, '\\$&')}"\n$`,
      )
    const vars = { KMS_API_KEY: 'kms_unused' }
    for (const host of [
      'kms.example.com',
      '10.0.0.1:8080',
      '127.0.0.1.example.com',
      'localhost.example.com',
      '[::2]',
    ])
      assert.match(
        usage(await kms(['keys', 'list', '--addr', `http://${host}`], vars)),
        refused('--addr', `http://${host}`),
      )
    assert.match(
      usage(await kms(['whoami'], { ...vars, KMS_ADDR: 'http://kms.example.com' })),
      refused('KMS_ADDR', 'http://kms.example.com'),
    )
    // Sign-in is refused the same way, before anything is sent.
    assert.match(
      usage(await kms(['login', '--tenant', TENANT_FLAG, '--addr', 'http://kms.example.com'])),
      refused('--addr', 'http://kms.example.com'),
    )
    assert.match(
      usage(await kms(['config', 'set', 'addr', 'http://kms.example.com', '--profile', 'plain'])),
      refused('addr', 'http://kms.example.com'),
    )
    const plainDir = await mkdtemp(join(tmpdir(), 'kms-cli-plain-'))
    try {
      await writeFile(
        join(plainDir, 'config.json'),
        JSON.stringify({ profiles: { default: { addr: 'http://kms.example.com' } } }),
      )
      assert.match(
        usage(await kms(['keys', 'list'], { ...vars, KMS_CONFIG_DIR: plainDir })),
        refused('profile "default" addr', 'http://kms.example.com'),
      )
    } finally {
      await rm(plainDir, { recursive: true, force: true })
    }
  })

  describe("the config directory is its user's alone", () => {
    const scratch: string[] = []
    after(async () => {
      for (const path of scratch) await rm(path, { recursive: true, force: true })
    })
    const newDir = async () => {
      const path = await mkdtemp(join(tmpdir(), 'kms-cli-configdir-'))
      scratch.push(path)
      return path
    }
    const signedIn = (configDir: string) =>
      kms(['whoami', '--tenant', TENANT_FLAG], { KMS_CONFIG_DIR: configDir })
    /** Exit 6 and one line naming the directory. */
    const unsafe = (run: KmsRun, pattern: RegExp) => {
      assert.equal(run.code, 6, run.stderr)
      assert.equal(run.out, '')
      assert.match(run.stderr, /^kms: config_dir_unsafe: [^\n]+\n$/)
      assert.match(run.stderr, pattern)
    }

    test('writable by the group or others: refused (exit 6, naming chmod 700) before settings or credentials are read or written', async () => {
      for (const mode of [0o770, 0o702]) {
        const configDir = await newDir()
        await writeFile(join(configDir, 'config.json'), JSON.stringify({ profiles: { default: {} } }))
        await chmod(configDir, mode)
        const expected = new RegExp(
          `the config directory ${configDir} can be written by other users \\(mode ${mode.toString(8)}\\): .*; chmod 700 ${configDir}`,
        )
        unsafe(await signedIn(configDir), expected)
        unsafe(await kms(['config', 'list'], { KMS_CONFIG_DIR: configDir }), expected)
        unsafe(
          await kms(['config', 'set', 'addr', 'https://kms.example.com'], { KMS_CONFIG_DIR: configDir }),
          expected,
        )
        assert.deepEqual(JSON.parse(await readFile(join(configDir, 'config.json'), 'utf8')), {
          profiles: { default: {} },
        })
        assert.deepEqual(await readdir(configDir), ['config.json'], 'no credentials file, no lock')
      }
    })

    test('owned by another user: refused (exit 6)', async () => {
      // Root can give a directory away; anyone else finds one of root's.
      let configDir = '/'
      if (process.getuid?.() === 0) {
        configDir = await newDir()
        await chown(configDir, 65534, 65534)
      }
      const owner = (await stat(configDir)).uid
      unsafe(
        await signedIn(configDir),
        new RegExp(
          `the config directory ${configDir} belongs to another user \\(uid ${owner}, you are \\d+\\)`,
        ),
      )
    })

    test("missing: created owner-only (0700) when credentials are looked for; a link to a directory of one's own is followed", async () => {
      const configDir = join(await newDir(), 'nested', 'kms')
      const run = await signedIn(configDir)
      assert.equal(run.code, 3, run.stderr)
      assert.match(run.stderr, /^kms: not_signed_in: /)
      assert.equal((await stat(configDir)).mode & 0o777, 0o700)

      const linked = join(await newDir(), 'linked')
      await symlink(configDir, linked)
      const set = await kms(['config', 'set', 'addr', 'https://kms.example.com'], { KMS_CONFIG_DIR: linked })
      assert.equal(set.code, 0, set.stderr)
      assert.deepEqual(JSON.parse(await readFile(join(configDir, 'config.json'), 'utf8')), {
        profiles: { default: { addr: 'https://kms.example.com' } },
      })
    })

    test('the profile file is written through a fresh, unguessable temporary file: a link planted at a predictable name is not followed', async () => {
      const configDir = await newDir()
      const victim = join(await newDir(), 'victim.txt')
      await writeFile(victim, 'untouched')
      // The name the CLI used to write first (this process's pid: writeConfigFile runs in it here).
      const planted = join(configDir, `config.json.${process.pid}.tmp`)
      await symlink(victim, planted)
      const path = await writeConfigFile(configDir, { profiles: { default: { output: 'raw' } } })
      assert.equal(path, join(configDir, 'config.json'))
      assert.equal(await readFile(victim, 'utf8'), 'untouched')
      assert.ok((await lstat(path)).isFile(), 'config.json is a file of its own, not the planted link')
      assert.equal((await lstat(path)).mode & 0o777, 0o600)
      assert.deepEqual(JSON.parse(await readFile(path, 'utf8')), { profiles: { default: { output: 'raw' } } })
      assert.deepEqual((await readdir(configDir)).sort(), ['config.json', `config.json.${process.pid}.tmp`])
    })
  })

  test("Node's compile cache is kept in the user's own cache directory (0700), never a shared one", async () => {
    const cacheOf = (base: string) => join(base, 'kms', 'node-compile-cache')
    const version = async (vars: Record<string, string>) => {
      const run = await kms(['--version'], { NODE_COMPILE_CACHE: '', ...vars })
      assert.equal(run.code, 0, run.stderr)
    }
    const xdg = await mkdtemp(join(tmpdir(), 'kms-cli-xdg-cache-'))
    const home = await mkdtemp(join(tmpdir(), 'kms-cli-home-'))
    const shared = await mkdtemp(join(tmpdir(), 'kms-cli-shared-cache-'))
    try {
      await version({ XDG_CACHE_HOME: xdg })
      assert.equal((await stat(cacheOf(xdg))).mode & 0o777, 0o700)
      assert.ok((await readdir(cacheOf(xdg))).length > 0, 'the cache was filled')

      await version({ XDG_CACHE_HOME: '', HOME: home })
      assert.equal((await stat(cacheOf(join(home, '.cache')))).mode & 0o777, 0o700)
      assert.ok((await readdir(cacheOf(join(home, '.cache')))).length > 0)

      // A cache directory others can write to is not used (they could put code in it).
      await mkdir(cacheOf(shared), { recursive: true })
      await chmod(cacheOf(shared), 0o777)
      await version({ XDG_CACHE_HOME: shared })
      assert.deepEqual(await readdir(cacheOf(shared)), [])
    } finally {
      for (const path of [xdg, home, shared]) await rm(path, { recursive: true, force: true })
    }
  })
})
