import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { copyFile, mkdir, mkdtemp, readdir, readFile, rm, stat, truncate, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { createKmsClient, createServiceKeyring, decrypt } from '@kms/sdk'
import { KMS_BIN, type KmsRun, kmsEnv, runKms, startKms } from '../helpers/kms-cli.ts'
import { startTestService, type TenantWithKey, type TestService } from '../helpers/service.ts'
import { type Edk, FormatError, independentDecrypt } from '../sdk/independent-decryptor.ts'

/**
 * `kms encrypt-file` / `kms decrypt-file` as a user runs them: the installed bin (its shebang
 * runs Node 24 with the CLI's V8 flags, test/helpers/kms-cli.ts) as a child process against a
 * real service. Every
 * message is also decrypted by the SDK directly and by a decoder written from the format alone
 * (@noble, test/sdk/independent-decryptor.ts) with the data key from the service's unwrap route.
 * Tampered messages fail with exit 6 and the format's error code, leave no file behind, and to
 * stdout never release a byte of the failed frame or of anything after it.
 */

const SMALL_FRAME = 128

let svc: TestService
let tenant: TenantWithKey
let dir: string
/** The test's variables for the CLI (KMS_ADDR, KMS_API_KEY, KMS_CONFIG_DIR). */
let env: Record<string, string>
let mlKemKey: string
let aesKey: string

/** kms in the test's directory, `stdin` piped in when given. */
const kms = (args: string[], stdin?: Uint8Array) => runKms(args, { cwd: dir, env, stdin })

async function ok(args: string[], stdin?: Uint8Array): Promise<KmsRun> {
  const run = await kms(args, stdin)
  assert.equal(run.code, 0, `kms ${args.join(' ')} failed: ${run.stderr}`)
  return run
}

/** Exit `code` and the error line `kms: <errorCode>: …` first on stderr. */
async function fails(args: string[], exitCode: number, errorCode: string, stdin?: Uint8Array) {
  const run = await kms(args, stdin)
  assert.equal(run.code, exitCode, `kms ${args.join(' ')}: ${run.stderr}`)
  assert.match(run.stderr.split('\n')[0]!, new RegExp(`^kms: ${errorCode}: \\S`), run.stderr)
  return run
}

const exists = (path: string) =>
  stat(path).then(
    () => true,
    () => false,
  )

/** Nothing but the expected names in the directory: no output and no temporary file. */
async function assertOnly(directory: string, names: string[]) {
  assert.deepEqual((await readdir(directory)).sort(), [...names].sort())
}

/** Where the parts of a message are (format.md): the header's fields and each frame's. */
interface Frame {
  start: number
  end: number
  sequenceNumber: number
  final: boolean
  /** Offsets of the frame's fields. */
  iv: number
  ciphertext: number
  contentLength: number
  tag: number
}

function layout(message: Uint8Array) {
  const view = new DataView(message.buffer, message.byteOffset, message.byteLength)
  let at = 1 + 2 + 32
  const contextLength = view.getUint16(at)
  const context = new TextDecoder().decode(message.subarray(at + 2, at + 2 + contextLength))
  at += 2 + contextLength
  const edkCount = view.getUint16(at)
  at += 2
  const edks: Edk[] = []
  for (let i = 0; i < edkCount; i++) {
    const field = () => {
      const length = view.getUint16(at)
      const bytes = message.subarray(at + 2, at + 2 + length)
      at += 2 + length
      return bytes
    }
    const providerId = new TextDecoder().decode(field())
    const providerInfo = new TextDecoder().decode(field())
    edks.push({ providerId, providerInfo, encryptedDataKey: field().slice() })
  }
  const edkEnd = at
  at += 1
  const frameLength = view.getUint32(at)
  at += 4
  const commitment = at
  const headerTag = at + 32
  at = headerTag + 16
  const frames: Frame[] = []
  while (at < message.length) {
    const final = view.getUint32(at) === 0xffffffff
    const sequenceNumber = view.getUint32(final ? at + 4 : at)
    const iv = at + (final ? 8 : 4)
    const contentLength = final ? view.getUint32(iv + 12) : frameLength
    const ciphertext = iv + 12 + (final ? 4 : 0)
    const tag = ciphertext + contentLength
    frames.push({ start: at, end: tag + 16, sequenceNumber, final, iv, ciphertext, contentLength, tag })
    at = tag + 16
  }
  return { context, edks, edkEnd, frameLength, commitment, headerTag, frames }
}

/** The data key of a message, from the service's own unwrap route (not the SDK). */
async function unwrapDataKeys(message: Uint8Array): Promise<Map<string, Uint8Array>> {
  const { context, edks } = layout(message)
  const keys = new Map<string, Uint8Array>()
  for (const edk of edks) {
    const answer = await svc.request('POST', `/api/v1/keys/${edk.providerInfo}/unwrap`, {
      key: tenant.key,
      body: { encryptedDek: Buffer.from(edk.encryptedDataKey).toString('base64'), context },
    })
    assert.equal(answer.status, 200, answer.text)
    keys.set(edk.providerInfo, Buffer.from(answer.body.plaintext, 'base64'))
  }
  return keys
}

/** Decrypted by @noble only, with data keys the service unwrapped: what it yields, or its error code. */
async function independently(message: Uint8Array, keys?: Map<string, Uint8Array>) {
  const dataKeys = keys ?? (await unwrapDataKeys(message))
  try {
    return { plaintext: independentDecrypt(message, (edk) => dataKeys.get(edk.providerInfo)).plaintext }
  } catch (error) {
    if (error instanceof FormatError) return { code: error.code }
    throw error
  }
}

async function sdkDecrypt(message: Uint8Array) {
  const client = createKmsClient({ baseUrl: svc.baseUrl, apiKey: tenant.key })
  const keyring = createServiceKeyring(client, { keyIds: [mlKemKey, aesKey] })
  return decrypt(keyring, message)
}

before(async () => {
  svc = await startTestService()
  tenant = await svc.createTenant()
  const create = async (body: Record<string, string>) => {
    const made = await svc.request('POST', '/api/v1/keys', { key: tenant.key, body })
    assert.equal(made.status, 201, made.text)
    return made.body.id as string
  }
  mlKemKey = await create({ name: 'files-ml-kem', keyType: 'Encryption' })
  aesKey = await create({ name: 'files-aes', keyType: 'Encryption', algorithm: 'AES-256-GCM' })
  const alias = await svc.request('POST', '/api/v1/aliases', {
    key: tenant.key,
    body: { alias: 'alias/files-aes', keyId: aesKey },
  })
  assert.equal(alias.status, 201, alias.text)
  dir = await mkdtemp(join(tmpdir(), 'kms-files-'))
  env = { KMS_ADDR: svc.baseUrl, KMS_API_KEY: tenant.key, KMS_CONFIG_DIR: join(dir, '.config') }
})

after(async () => {
  if (dir) await rm(dir, { recursive: true, force: true })
  await svc?.stop()
})

/** Frames a plaintext of `size` bytes makes (format.md): regular ones, then one final of 0..frame bytes. */
function expectedFrames(size: number, frameLength: number) {
  const regular = size === 0 ? 0 : Math.ceil(size / frameLength) - 1
  return { regular, finalLength: size - regular * frameLength }
}

describe('kms encrypt-file and decrypt-file', () => {
  test('round trips sizes around frame multiples; the SDK and an independent decoder read every message', async () => {
    const cases = [
      ...[0, 1, 127, 128, 129, 256, 1000].map((size) => ({ size, frameLength: SMALL_FRAME })),
      ...[4095, 4096, 4097, 8192, 12_289].map((size) => ({ size, frameLength: undefined })),
    ]
    for (const { size, frameLength } of cases) {
      const name = `plain-${size}-${frameLength ?? 'default'}`
      const plaintext = randomBytes(size)
      await writeFile(join(dir, name), plaintext)
      const frameFlag = frameLength ? ['--frame-length', String(frameLength)] : []
      const encrypted = await ok(['encrypt-file', name, '-o', `${name}.kms`, '--key', mlKemKey, ...frameFlag])
      assert.equal(encrypted.stdout.length, 0)
      assert.equal(encrypted.stderr, '', 'no progress bar when stderr is not a terminal')
      const message = await readFile(join(dir, `${name}.kms`))

      const parts = layout(message)
      const expected = expectedFrames(size, frameLength ?? 4096)
      assert.equal(parts.frameLength, frameLength ?? 4096)
      assert.equal(parts.frames.length, expected.regular + 1, `${name}: frame count`)
      assert.ok(parts.frames.at(-1)!.final)
      assert.equal(parts.frames.at(-1)!.contentLength, expected.finalLength, `${name}: final frame length`)
      assert.deepEqual(
        parts.edks.map((e) => [e.providerId, e.providerInfo]),
        [['kms', mlKemKey]],
      )

      await ok(['decrypt-file', `${name}.kms`, '-o', `${name}.out`])
      assert.deepEqual(await readFile(join(dir, `${name}.out`)), plaintext, `${name}: kms round trip`)
      assert.deepEqual(Buffer.from((await sdkDecrypt(message)).plaintext), plaintext, `${name}: SDK`)
      assert.deepEqual(Buffer.from((await independently(message)).plaintext!), plaintext, `${name}: @noble`)
    }
  })

  test('two keys: the header names both and either alone decrypts (by id or alias)', async () => {
    const plaintext = randomBytes(5000)
    await writeFile(join(dir, 'two-keys'), plaintext)
    await ok(['encrypt-file', 'two-keys', '--key', 'alias/files-aes', '--key', mlKemKey])
    const message = await readFile(join(dir, 'two-keys.kms'))
    assert.deepEqual(
      layout(message).edks.map((e) => e.providerInfo),
      [aesKey, mlKemKey],
    )
    // Each encrypted data key unwraps (at the service) to the same data key.
    const keys = await unwrapDataKeys(message)
    assert.deepEqual(keys.get(aesKey), keys.get(mlKemKey))
    for (const key of [mlKemKey, 'alias/files-aes']) {
      await ok(['decrypt-file', 'two-keys.kms', '-o', 'two-keys.out', '--key', key, '--force'])
      assert.deepEqual(await readFile(join(dir, 'two-keys.out')), plaintext, `decrypted with ${key} only`)
    }
    const onlySecond = new Map([[mlKemKey, keys.get(mlKemKey)!]])
    assert.deepEqual(Buffer.from((await independently(message, onlySecond)).plaintext!), plaintext)
  })

  test('the context is stored canonically and bound at the service; decrypt checks the pairs it is given', async () => {
    const plaintext = randomBytes(700)
    await mkdir(join(dir, 'ctx'))
    await writeFile(join(dir, 'ctx', 'doc'), plaintext)
    await ok(['encrypt-file', 'ctx/doc', '--key', aesKey, '--context', 'b=2', '--context', 'a=x=1'])
    const message = await readFile(join(dir, 'ctx', 'doc.kms'))
    assert.equal(layout(message).context, '{"a":"x=1","b":"2"}')
    assert.deepEqual(Buffer.from((await independently(message)).plaintext!), plaintext)

    // The service bound the data key to that context: another one does not unwrap it.
    const edk = layout(message).edks[0]!
    const otherContext = await svc.request('POST', `/api/v1/keys/${aesKey}/unwrap`, {
      key: tenant.key,
      body: { encryptedDek: Buffer.from(edk.encryptedDataKey).toString('base64'), context: { a: 'x=1' } },
    })
    assert.equal(otherContext.status, 400)
    assert.equal(otherContext.body.error, 'decryption_failed')

    await ok(['decrypt-file', 'ctx/doc.kms', '-o', 'ctx/doc.out', '--context', 'a=x=1'])
    assert.deepEqual(await readFile(join(dir, 'ctx', 'doc.out')), plaintext)
    const wrong = await fails(
      ['decrypt-file', 'ctx/doc.kms', '-o', 'ctx/wrong', '--context', 'a=1'],
      6,
      'context_mismatch',
    )
    assert.match(wrong.stderr, /context/)
    await fails(['decrypt-file', 'ctx/doc.kms', '-o', 'ctx/wrong', '--context', 'c=3'], 6, 'context_mismatch')
    await assertOnly(join(dir, 'ctx'), ['doc', 'doc.kms', 'doc.out'])
  })

  test('stdin to stdout both ways, binary-safe', async () => {
    const plaintext = Buffer.concat([randomBytes(10_000), Buffer.from([0, 0xff, 0x0a, 0x0d])])
    const encrypted = await ok(['encrypt-file', '-', '--key', mlKemKey], plaintext)
    assert.ok(encrypted.stdout.length > plaintext.length)
    assert.deepEqual(Buffer.from((await independently(encrypted.stdout)).plaintext!), plaintext)
    const decrypted = await ok(['decrypt-file', '-', '-o', '-'], encrypted.stdout)
    assert.deepEqual(decrypted.stdout, plaintext)
    // A file in, stdout out, and the reverse.
    await writeFile(join(dir, 'pipe.kms'), encrypted.stdout)
    assert.deepEqual((await ok(['decrypt-file', 'pipe.kms', '-o', '-'])).stdout, plaintext)
    await ok(['decrypt-file', '-', '-o', 'pipe.out'], encrypted.stdout)
    assert.deepEqual(await readFile(join(dir, 'pipe.out')), plaintext)
  })

  test('default names, mode 0600, no overwrite without --force', async () => {
    const sub = join(dir, 'names')
    await mkdir(sub)
    const plaintext = randomBytes(300)
    await writeFile(join(sub, 'report.pdf'), plaintext)
    await ok(['encrypt-file', 'names/report.pdf', '--key', mlKemKey])
    const first = await readFile(join(sub, 'report.pdf.kms'))
    assert.equal((await stat(join(sub, 'report.pdf.kms'))).mode & 0o777, 0o600)

    await fails(['encrypt-file', 'names/report.pdf', '--key', mlKemKey], 6, 'output_exists')
    assert.deepEqual(await readFile(join(sub, 'report.pdf.kms')), first, 'the refused run left it alone')
    await ok(['encrypt-file', 'names/report.pdf', '--key', mlKemKey, '--force'])
    assert.notDeepEqual(await readFile(join(sub, 'report.pdf.kms')), first, 'replaced by a new message')

    // decrypt-file strips .kms: the plaintext is there, so it refuses until --force.
    await fails(['decrypt-file', 'names/report.pdf.kms'], 6, 'output_exists')
    await rm(join(sub, 'report.pdf'))
    await ok(['decrypt-file', 'names/report.pdf.kms'])
    assert.deepEqual(await readFile(join(sub, 'report.pdf')), plaintext)
    assert.equal((await stat(join(sub, 'report.pdf'))).mode & 0o777, 0o600)
    await ok(['decrypt-file', 'names/report.pdf.kms', '--force'])
    await assertOnly(sub, ['report.pdf', 'report.pdf.kms'])
  })

  test('bad usage exits 2 before any call; unreadable input and unknown keys fail without output', async () => {
    await writeFile(join(dir, 'usage.txt'), 'hello')
    await fails(['encrypt-file', 'usage.txt'], 2, 'usage')
    await fails(['encrypt-file', 'usage.txt', '--key', mlKemKey, '--frame-length', '64'], 2, 'usage')
    await fails(['encrypt-file', 'usage.txt', '--key', mlKemKey, '--context', '=v'], 2, 'usage')
    await fails(
      ['encrypt-file', 'usage.txt', '--key', mlKemKey, '--context', 'a=1', '--context', 'a=2'],
      2,
      'usage',
    )
    await fails(['encrypt-file', 'usage.txt', 'second', '--key', mlKemKey], 2, 'usage')
    await fails(['decrypt-file', 'usage.txt'], 2, 'usage')
    await fails(['encrypt-file', 'missing.txt', '--key', mlKemKey], 6, 'file_unreadable')
    await fails(['encrypt-file', '.', '-o', 'dir.kms', '--key', mlKemKey], 6, 'file_unreadable')
    await fails(
      ['encrypt-file', 'usage.txt', '-o', 'usage.txt', '--key', mlKemKey, '--force'],
      6,
      'output_is_input',
    )
    await fails(['decrypt-file', 'usage.txt', '-o', 'usage.out'], 6, 'unsupported_version')
    await fails(['encrypt-file', 'usage.txt', '--key', 'alias/no-such-key'], 4, 'key_not_found')
    assert.equal(await exists(join(dir, 'usage.txt.kms')), false)
    assert.equal(await exists(join(dir, 'usage.out')), false)
    assert.deepEqual(
      (await readdir(dir)).filter((n) => n.endsWith('.partial')),
      [],
      'no temporary file left',
    )
  })
})

describe('interrupted', () => {
  test('SIGTERM during encrypt-file and decrypt-file: exit 143, the temporary file removed, no output', async () => {
    const sub = join(dir, 'interrupt')
    await mkdir(sub)
    // Sparse zeros: big enough to be still running when the signal comes, no disk write to make it.
    await writeFile(join(sub, 'large'), '')
    await truncate(join(sub, 'large'), 256 * 1024 * 1024)
    await ok(['encrypt-file', 'interrupt/large', '--key', mlKemKey, '--frame-length', '1048576'])
    for (const args of [
      ['encrypt-file', 'interrupt/large', '-o', 'interrupt/stopped', '--key', mlKemKey],
      ['decrypt-file', 'interrupt/large.kms', '-o', 'interrupt/stopped'],
    ]) {
      const running = startKms(args, { cwd: dir, env })
      // Signalled once its temporary file exists, i.e. while it is writing.
      const deadline = Date.now() + 60_000
      while (!(await readdir(sub)).some((n) => n.endsWith('.partial'))) {
        if (Date.now() > deadline) throw new Error(`no temporary file appeared: ${running.stderr()}`)
        await new Promise((resolve) => setTimeout(resolve, 5))
      }
      running.child.kill('SIGTERM')
      assert.equal((await running.exited).code, 128 + 15, running.stderr())
      assert.match(running.stderr(), /^kms: interrupted: .* stopped by SIGTERM; no output file was left/m)
      await assertOnly(sub, ['large', 'large.kms'])
    }
    await rm(sub, { recursive: true })
  })
})

describe('tampered messages', () => {
  // Five regular frames of 128 bytes and a final one of 50.
  const plaintext = randomBytes(5 * SMALL_FRAME + 50)
  let message: Buffer
  let parts: ReturnType<typeof layout>
  let dataKeys: Map<string, Uint8Array>
  let tamperDir: string

  before(async () => {
    tamperDir = join(dir, 'tamper')
    await mkdir(tamperDir)
    await writeFile(join(tamperDir, 'original'), plaintext)
    await ok(['encrypt-file', 'tamper/original', '--key', mlKemKey, '--frame-length', String(SMALL_FRAME)])
    message = await readFile(join(tamperDir, 'original.kms'))
    parts = layout(message)
    assert.deepEqual(
      parts.frames.map((f) => [f.sequenceNumber, f.final, f.contentLength]),
      [1, 2, 3, 4, 5].map((n) => [n, false, SMALL_FRAME]).concat([[6, true, 50]]),
    )
    dataKeys = await unwrapDataKeys(message)
  })

  const flip =
    (at: number, mask = 0x01) =>
    (m: Buffer) => {
      const copy = Buffer.from(m)
      copy[at] = copy[at]! ^ mask
      return copy
    }
  const frame = (n: number) => parts.frames[n - 1]!
  const withoutFrame = (n: number) => (m: Buffer) =>
    Buffer.concat([m.subarray(0, frame(n).start), m.subarray(frame(n).end)])

  interface Case {
    name: string
    tamper: () => (m: Buffer) => Buffer
    code: string
    /** The first frame that must not be released (no byte of it or after it reaches stdout). */
    firstBad: number
  }

  const frameFieldCases = (n: number, where: string): Case[] => [
    {
      name: `${where} frame (${n}): a flipped ciphertext byte`,
      tamper: () => flip(frame(n).ciphertext + 5),
      code: 'frame_authentication_failed',
      firstBad: n,
    },
    {
      name: `${where} frame (${n}): a flipped tag byte`,
      tamper: () => flip(frame(n).tag + 15),
      code: 'frame_authentication_failed',
      firstBad: n,
    },
    {
      name: `${where} frame (${n}): a flipped IV byte`,
      tamper: () => flip(frame(n).iv + 3),
      code: 'frame_authentication_failed',
      firstBad: n,
    },
    {
      name: `${where} frame (${n}): a flipped sequence number (or final marker)`,
      tamper: () => flip(frame(n).start + 3),
      code: 'frame_out_of_order',
      firstBad: n,
    },
  ]

  const cases: Case[] = [
    ...frameFieldCases(1, 'first'),
    ...frameFieldCases(3, 'middle'),
    ...frameFieldCases(5, 'last regular'),
    ...frameFieldCases(6, 'final'),
    {
      name: "final frame: a content length over the frame's",
      tamper: () => flip(frame(6).iv + 12 + 3, 0x80),
      code: 'frame_authentication_failed',
      firstBad: 6,
    },
    { name: 'the final frame dropped', tamper: () => withoutFrame(6), code: 'truncated', firstBad: 6 },
    {
      name: 'a middle frame dropped',
      tamper: () => withoutFrame(3),
      code: 'frame_out_of_order',
      firstBad: 3,
    },
    {
      name: 'frames 2 and 3 swapped',
      tamper: () => (m) =>
        Buffer.concat([
          m.subarray(0, frame(2).start),
          m.subarray(frame(3).start, frame(3).end),
          m.subarray(frame(2).start, frame(2).end),
          m.subarray(frame(3).end),
        ]),
      code: 'frame_out_of_order',
      firstBad: 2,
    },
    {
      name: 'cut inside the last regular frame',
      tamper: () => (m) => m.subarray(0, frame(5).start + 40),
      code: 'truncated',
      firstBad: 5,
    },
    {
      name: 'bytes after the final frame',
      tamper: () => (m) => Buffer.concat([m, Buffer.from([0])]),
      code: 'trailing_data',
      firstBad: 7,
    },
    { name: 'header: the version', tamper: () => flip(0, 0x02), code: 'unsupported_version', firstBad: 1 },
    {
      name: 'header: a byte of the encrypted data key',
      tamper: () => flip(parts.edkEnd - 10),
      code: 'no_decryptable_data_key',
      firstBad: 1,
    },
    {
      name: 'header: the commitment',
      tamper: () => flip(parts.commitment + 7),
      code: 'commitment_mismatch',
      firstBad: 1,
    },
    {
      name: 'header: the header tag',
      tamper: () => flip(parts.headerTag),
      code: 'header_authentication_failed',
      firstBad: 1,
    },
    {
      name: 'header: cut short',
      tamper: () => (m) => m.subarray(0, parts.commitment),
      code: 'truncated',
      firstBad: 1,
    },
  ]

  for (const c of cases)
    test(`${c.name}: exit 6 with ${c.code}, no file left, nothing of the bad frame on stdout`, async () => {
      const bad = c.tamper()(message)
      await writeFile(join(tamperDir, 'bad.kms'), bad)
      // The decoder written from the format alone finds the same fault (the SDK's cross-check).
      const expectedByFormat = await independently(bad, dataKeys)
      if (c.code !== 'no_decryptable_data_key') assert.equal(expectedByFormat.code, c.code)

      const toFile = await fails(['decrypt-file', 'tamper/bad.kms', '-o', 'tamper/bad.out'], 6, c.code)
      assert.equal(toFile.stdout.length, 0)
      await assertOnly(tamperDir, ['original', 'original.kms', 'bad.kms'])

      const toStdout = await fails(['decrypt-file', 'tamper/bad.kms', '-o', '-'], 6, c.code)
      const released = toStdout.stdout
      assert.ok(
        released.length <= (c.firstBad - 1) * SMALL_FRAME,
        `${released.length} bytes released; frame ${c.firstBad} starts at byte ${(c.firstBad - 1) * SMALL_FRAME}`,
      )
      assert.deepEqual(released, plaintext.subarray(0, released.length), 'only authenticated plaintext')
      if (released.length > 0) assert.match(toStdout.stderr, /bytes written to stdout/)
    })

  test('damage late in a long message: to stdout the frames before it are released, exit 6 says so', async () => {
    // 3,000 frames: the input arrives in many reads, so frames before the damage are released first.
    const long = randomBytes(3000 * SMALL_FRAME)
    await writeFile(join(tamperDir, 'long'), long)
    await ok(['encrypt-file', 'tamper/long', '--key', mlKemKey, '--frame-length', String(SMALL_FRAME)])
    const longMessage = await readFile(join(tamperDir, 'long.kms'))
    const badFrame = layout(longMessage).frames[2499]!
    assert.equal(badFrame.sequenceNumber, 2500)
    await writeFile(join(tamperDir, 'long-bad.kms'), flip(badFrame.ciphertext)(longMessage))

    const run = await fails(
      ['decrypt-file', 'tamper/long-bad.kms', '-o', '-'],
      6,
      'frame_authentication_failed',
    )
    assert.match(run.stderr, /Frame 2500/)
    assert.ok(run.stdout.length > 0, 'the authenticated frames before the damage were written')
    assert.ok(run.stdout.length <= 2499 * SMALL_FRAME, 'nothing of frame 2500 or after it')
    assert.equal(run.stdout.length % SMALL_FRAME, 0, 'whole frames only')
    assert.deepEqual(run.stdout, long.subarray(0, run.stdout.length))
    assert.match(
      run.stderr,
      new RegExp(`the ${run.stdout.length} bytes written to stdout are the frames that authenticated`),
    )

    await fails(
      ['decrypt-file', 'tamper/long-bad.kms', '-o', 'tamper/long.out'],
      6,
      'frame_authentication_failed',
    )
    assert.equal(await exists(join(tamperDir, 'long.out')), false)
    for (const name of ['long', 'long.kms', 'long-bad.kms']) await rm(join(tamperDir, name))
    assert.deepEqual(
      (await readdir(tamperDir)).filter((n) => n.startsWith('long') || n.startsWith('.')),
      [],
      'no output and no temporary file',
    )
  })

  test('the untouched message still decrypts (the cases above tamper with copies)', async () => {
    await writeFile(join(tamperDir, 'bad.kms'), message)
    assert.deepEqual((await ok(['decrypt-file', 'tamper/bad.kms', '-o', '-'])).stdout, plaintext)
  })
})

describe('progress bar', () => {
  const big = 9 * 1024 * 1024

  /** Runs kms under script(1), so stdin, stdout and stderr are a terminal: what the terminal showed. */
  function onTerminal(args: string[]): Promise<{ code: number | null; screen: string }> {
    const command = [KMS_BIN, ...args].map((a) => `'${a}'`).join(' ')
    return new Promise((resolve, reject) => {
      const child = spawn('script', ['-qec', command, '/dev/null'], {
        cwd: dir,
        env: kmsEnv(env),
        stdio: ['ignore', 'pipe', 'pipe'],
      })
      let screen = ''
      child.stdout.on('data', (c: Buffer) => {
        screen += c.toString()
      })
      child.stderr.on('data', (c: Buffer) => {
        screen += c.toString()
      })
      child.once('error', reject)
      child.once('close', (code) => resolve({ code, screen }))
    })
  }

  before(async () => {
    await writeFile(join(dir, 'big.bin'), randomBytes(big))
    await writeFile(join(dir, 'small.bin'), randomBytes(1000))
  })

  test('on a terminal a large input shows bytes done of the total, percent and MB/s; --quiet and small inputs none', async () => {
    const shown = await onTerminal(['encrypt-file', 'big.bin', '-o', 'big.kms', '--key', mlKemKey])
    assert.equal(shown.code, 0, shown.screen)
    assert.match(shown.screen, /encrypting big\.bin {2}9\.4 MB \/ 9\.4 MB {2}100% {2}\d+\.\d MB\/s/)

    const decrypted = await onTerminal(['decrypt-file', 'big.kms', '-o', 'big.out'])
    assert.equal(decrypted.code, 0, decrypted.screen)
    assert.match(decrypted.screen, /decrypting big\.kms .* 100% {2}\d+\.\d MB\/s/)
    assert.deepEqual(await readFile(join(dir, 'big.out')), await readFile(join(dir, 'big.bin')))

    const quiet = await onTerminal([
      'encrypt-file',
      'big.bin',
      '-o',
      'quiet.kms',
      '--key',
      mlKemKey,
      '--quiet',
    ])
    assert.equal(quiet.code, 0, quiet.screen)
    assert.doesNotMatch(quiet.screen, /MB\/s/)
    const small = await onTerminal(['encrypt-file', 'small.bin', '-o', 'small.kms', '--key', mlKemKey])
    assert.equal(small.code, 0, small.screen)
    assert.doesNotMatch(small.screen, /MB\/s/)
  })

  test('encrypt-file refuses to write the binary message to a terminal', async () => {
    const shown = await onTerminal(['encrypt-file', 'small.bin', '-o', '-', '--key', mlKemKey])
    assert.equal(shown.code, 2, shown.screen)
    assert.match(shown.screen, /kms: usage: the encrypted message is binary/)
  })

  test('not on a terminal: no bar, stderr stays empty', async () => {
    const run = await ok(['encrypt-file', 'big.bin', '-o', 'piped.kms', '--key', mlKemKey])
    assert.equal(run.stderr, '')
    await copyFile(join(dir, 'piped.kms'), join(dir, 'piped-copy.kms'))
    assert.equal((await ok(['decrypt-file', 'piped-copy.kms'])).stderr, '')
  })
})
