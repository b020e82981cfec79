import assert from 'node:assert/strict'
import { createCipheriv, createHash, randomBytes } from 'node:crypto'
import { createReadStream, createWriteStream } from 'node:fs'
import { mkdtemp, open, readdir, readFile, rm, stat } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { pipeline } from 'node:stream/promises'
import { after, before, test } from 'node:test'
import { runKms } from '../helpers/kms-cli.ts'
import { startTestService, type TestService } from '../helpers/service.ts'

/**
 * The acceptance test of `kms encrypt-file` / `kms decrypt-file`: a 1 GiB file round trips with
 * the CLI's memory bounded. Each CLI process runs under GNU time (/usr/bin/time, on this machine),
 * which reads the peak resident set size from the kernel (wait4's ru_maxrss) when the process
 * ends: a measure independent of the CLI. The bound is 100 MB per process. Throughput is printed
 * as a diagnostic, never asserted.
 *
 * The CLI runs as installed: bin/kms.js through its shebang (Node 24 with the CLI's V8 flags;
 * test/helpers/kms-cli.ts, here under GNU time), with Node's compile cache where the launcher keeps
 * it for its user ($XDG_CACHE_HOME/kms/node-compile-cache, XDG_CACHE_HOME in this test's
 * directory), filled by one start before the measured runs as any earlier use of the CLI fills it
 * (the cold start's own peak is printed too).
 */

const GNU_TIME = '/usr/bin/time'
const SIZE = 1024 * 1024 * 1024
const CHUNK = 1024 * 1024
const MAX_PEAK_RSS_BYTES = 100 * 1000 * 1000
const MB = 1_000_000

let svc: TestService
let dir: string
/** The test's variables for the CLI. */
let env: Record<string, string>
let keyId: string

before(async () => {
  svc = await startTestService()
  const tenant = await svc.createTenant()
  const key = await svc.request('POST', '/api/v1/keys', {
    key: tenant.key,
    body: { name: 'one-gigabyte', keyType: 'Encryption' },
  })
  assert.equal(key.status, 201, key.text)
  keyId = key.body.id
  dir = await mkdtemp(join(tmpdir(), 'kms-1gb-'))
  env = {
    KMS_ADDR: svc.baseUrl,
    KMS_API_KEY: tenant.key,
    KMS_CONFIG_DIR: join(dir, 'config'),
    XDG_CACHE_HOME: join(dir, 'cache'),
    // Node's own variable would win over the launcher's directory.
    NODE_COMPILE_CACHE: '',
  }
})

after(async () => {
  if (dir) await rm(dir, { recursive: true, force: true })
  await svc?.stop()
})

/** 1 GiB of AES-CTR keystream (pseudo-random, fast), written in 1 MiB pieces; its SHA-256 on the way. */
async function writePseudoRandomFile(path: string): Promise<string> {
  const keystream = createCipheriv('aes-256-ctr', randomBytes(32), randomBytes(16))
  const hash = createHash('sha256')
  const zeros = Buffer.alloc(CHUNK)
  async function* pieces() {
    for (let done = 0; done < SIZE; done += CHUNK) {
      const piece = keystream.update(zeros)
      hash.update(piece)
      yield piece
    }
  }
  await pipeline(pieces(), createWriteStream(path))
  return hash.digest('hex')
}

async function sha256Of(path: string): Promise<string> {
  const hash = createHash('sha256')
  await pipeline(createReadStream(path), hash)
  return hash.digest('hex')
}

interface Measured {
  code: number | null
  stderr: string
  peakRssBytes: number
  seconds: number
}

/** Runs kms under GNU time: its exit code, stderr, and the kernel's figures for the process. */
async function measured(args: string[]): Promise<Measured> {
  const report = join(dir, `time-${randomBytes(4).toString('hex')}.txt`)
  const run = await runKms(args, { cwd: dir, env, wrapper: [GNU_TIME, '-f', '%M %e', '-o', report] })
  const [maxRssKiB, elapsed] = (await readFile(report, 'utf8')).trim().split(/\s+/).slice(-2).map(Number)
  return { code: run.code, stderr: run.stderr, peakRssBytes: maxRssKiB! * 1024, seconds: elapsed! }
}

const describeRun = (what: string, run: Measured) =>
  `${what}: peak RSS ${(run.peakRssBytes / MB).toFixed(1)} MB, ${(SIZE / MB).toFixed(0)} MB in ` +
  `${run.seconds.toFixed(1)} s = ${(SIZE / MB / run.seconds).toFixed(1)} MB/s`

test('a 1 GiB file: encrypt-file then decrypt-file round trip, each CLI process at most 100 MB peak RSS', {
  timeout: 15 * 60_000,
}, async (t) => {
  const plainPath = join(dir, 'one-gigabyte.bin')
  const plainSha = await writePseudoRandomFile(plainPath)
  assert.equal((await stat(plainPath)).size, SIZE)

  // The first start of this CLI fills the compile cache (the TypeScript stripped once).
  const cold = await measured(['--version'])
  assert.equal(cold.code, 0, cold.stderr)
  assert.ok(
    (await readdir(join(dir, 'cache', 'kms', 'node-compile-cache'))).length > 0,
    'the cache was filled',
  )
  t.diagnostic(`cold start (fills the compile cache): peak RSS ${(cold.peakRssBytes / MB).toFixed(1)} MB`)

  const encrypted = await measured([
    'encrypt-file',
    'one-gigabyte.bin',
    '-o',
    'one-gigabyte.kms',
    '--key',
    keyId,
  ])
  assert.equal(encrypted.code, 0, encrypted.stderr)
  t.diagnostic(describeRun('encrypt-file', encrypted))
  const messagePath = join(dir, 'one-gigabyte.kms')
  // 1 GiB in 262,144 frames of 4 KiB, each 32 bytes longer, and a header.
  const messageSize = (await stat(messagePath)).size
  assert.ok(messageSize > SIZE + 262_144 * 32, `the message has ${messageSize} bytes`)
  const head = await open(messagePath, 'r')
  const { buffer } = await head.read({ buffer: Buffer.alloc(1), position: 0 })
  await head.close()
  assert.equal(buffer[0], 0x01, 'a message of format version 1')

  const decrypted = await measured(['decrypt-file', 'one-gigabyte.kms', '-o', 'one-gigabyte.out'])
  assert.equal(decrypted.code, 0, decrypted.stderr)
  t.diagnostic(describeRun('decrypt-file', decrypted))

  assert.equal(await sha256Of(join(dir, 'one-gigabyte.out')), plainSha, 'the decrypted file is the original')
  assert.ok(
    encrypted.peakRssBytes <= MAX_PEAK_RSS_BYTES,
    `encrypt-file peaked at ${(encrypted.peakRssBytes / MB).toFixed(1)} MB`,
  )
  assert.ok(
    decrypted.peakRssBytes <= MAX_PEAK_RSS_BYTES,
    `decrypt-file peaked at ${(decrypted.peakRssBytes / MB).toFixed(1)} MB`,
  )
})
