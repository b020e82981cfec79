import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { createPublicKey, verify as nodeVerify } from 'node:crypto'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { createServer } from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { hmac } from '@noble/hashes/hmac.js'
import { sha256 } from '@noble/hashes/sha2.js'
import { type KmsRun, kmsEnv, runKms, startKms } from '../helpers/kms-cli.ts'
import {
  PROJECT_ROOT,
  startTestService,
  type TenantWithKey,
  type TestService,
  waitFor,
} from '../helpers/service.ts'

/**
 * The `kms` CLI (packages/cli) as a user runs it: the installed bin as a child process
 * (test/helpers/kms-cli.ts) with KMS_ADDR, KMS_API_KEY and KMS_CONFIG_DIR, against a real service.
 * Every command's answer is checked against the API itself, crypto also by node:crypto / @noble.
 */

/** The first line of every CLI error. */
const ERROR_LINE = /^kms: [a-z0-9_]+: \S.*$/

/** kms with these variables (the test's KMS_* settings), `stdin` piped in when given. */
const kms = (args: string[], env: Record<string, string>, stdin?: Uint8Array | string) =>
  runKms(args, { cwd: PROJECT_ROOT, env, stdin })

/** Runs kms and expects exit 0. */
async function ok(args: string[], env: Record<string, string>, stdin?: Uint8Array | string): Promise<KmsRun> {
  const run = await kms(args, env, stdin)
  assert.equal(run.code, 0, `kms ${args.join(' ')} failed: ${run.stderr}`)
  return run
}

const json = (run: KmsRun) => JSON.parse(run.out)

/** Every byte value, twice over in two orders: binary-safety input. */
const ALL_BYTES = Buffer.concat([
  Buffer.from(Array.from({ length: 256 }, (_, i) => i)),
  Buffer.from(Array.from({ length: 256 }, (_, i) => 255 - i)),
])

describe('kms CLI commands against the service', () => {
  let svc: TestService
  let tenantA: TenantWithKey
  let tenantB: TenantWithKey
  let dir: string
  let env: Record<string, string>
  let envB: Record<string, string>
  const api = (method: string, path: string, body?: unknown, key = tenantA.key) =>
    svc.request(method, `/api/v1${path}`, { key, ...(body === undefined ? {} : { body }) })
  const createKey = async (body: Record<string, unknown>) => {
    const made = await api('POST', '/keys', body)
    assert.equal(made.status, 201, made.text)
    return made.body as { id: string; name: string }
  }

  before(async () => {
    svc = await startTestService()
    tenantA = await svc.createTenant()
    tenantB = await svc.createTenant()
    dir = await mkdtemp(join(tmpdir(), 'kms-cli-'))
    env = { KMS_ADDR: svc.baseUrl, KMS_API_KEY: tenantA.key, KMS_CONFIG_DIR: join(dir, 'config') }
    envB = { ...env, KMS_API_KEY: tenantB.key }
  })
  after(async () => {
    await svc?.stop()
    if (dir) await rm(dir, { recursive: true, force: true })
  })

  test('keys: create, get, list, update, rotate, versions, public-key, revoke, delete, cancel-deletion match the API', async () => {
    const created = json(await ok(['keys', 'create', '--name', 'payments', '--type', 'Encryption'], env))
    const stored = await api('GET', `/keys/${created.id}`)
    assert.equal(stored.status, 200)
    assert.equal(stored.body.name, 'payments')
    assert.equal(stored.body.keyType, 'Encryption')

    const signing = json(
      await ok(
        [
          'keys',
          'create',
          '--name',
          'releases',
          '--type',
          'Signing',
          '--algorithm',
          'Ed25519',
          '--label',
          'team:build',
        ],
        env,
      ),
    )
    assert.deepEqual((await api('GET', `/keys/${signing.id}`)).body.labels, ['team:build'])

    const listed = await ok(['keys', 'list', '--type', 'Signing', '--field', 'data.0.id'], env)
    assert.equal(listed.out, `${signing.id}\n`)
    assert.equal(json(await ok(['keys', 'get', created.id], env)).name, 'payments')

    const updated = json(
      await ok(['keys', 'update', created.id, '--description', 'card data', '--favorite', 'true'], env),
    )
    assert.equal(updated.description, 'card data')
    const afterUpdate = (await api('GET', `/keys/${created.id}`)).body
    assert.equal(afterUpdate.description, 'card data')
    assert.equal(afterUpdate.isFavorite, true)

    assert.equal(json(await ok(['keys', 'rotate', created.id], env)).version, 2)
    assert.equal((await api('GET', `/keys/${created.id}`)).body.version, 2)
    const versions = json(await ok(['keys', 'versions', created.id], env))
    assert.deepEqual(
      versions.data.map((v: { version: number }) => v.version).sort(),
      (await api('GET', `/keys/${created.id}/versions`)).body.data
        .map((v: { version: number }) => v.version)
        .sort(),
    )

    const pem = await ok(['keys', 'public-key', signing.id, '--output', 'raw'], env)
    assert.equal(pem.out, (await api('GET', `/keys/${signing.id}/public?format=PEM`)).body.publicKey)
    const der = await ok(['keys', 'public-key', signing.id, '--format', 'DER', '--output', 'raw'], env)
    assert.deepEqual(der.stdout, createPublicKey(pem.out).export({ format: 'der', type: 'spki' }))

    assert.equal(json(await ok(['keys', 'revoke', signing.id], env)).state, 'Revoked')
    assert.equal((await api('GET', `/keys/${signing.id}`)).body.state, 'Revoked')

    const scheduled = json(await ok(['keys', 'delete', created.id, '--days', '7'], env))
    assert.equal(scheduled.state, 'Pending Deletion')
    const deletion = (await api('GET', `/keys/${created.id}`)).body
    assert.equal(deletion.state, 'Pending Deletion')
    const days = (Date.parse(deletion.scheduledDeletionDate) - Date.now()) / 86_400_000
    assert.ok(days > 6 && days <= 7, `deletion in ${days} days`)
    const cancelled = json(await ok(['keys', 'cancel-deletion', created.id], env))
    assert.equal((await api('GET', `/keys/${created.id}`)).body.state, cancelled.state)
    assert.notEqual(cancelled.state, 'Pending Deletion')
  })

  test('aliases: create, get, list, move and delete; an alias names its key wherever a key id goes', async () => {
    const first = await createKey({ name: 'alias-1', keyType: 'Encryption' })
    const second = await createKey({ name: 'alias-2', keyType: 'Encryption' })
    assert.equal(
      json(await ok(['aliases', 'create', 'orders', '--key', first.id], env)).alias,
      'alias/orders',
    )
    assert.equal((await api('GET', `/aliases/${encodeURIComponent('alias/orders')}`)).body.keyId, first.id)
    assert.equal((await ok(['keys', 'get', 'alias/orders', '--field', 'id'], env)).out, `${first.id}\n`)
    assert.equal(
      (await ok(['encrypt', '--key', 'alias/orders', 'x', '--field', 'keyId'], env)).out,
      `${first.id}\n`,
    )
    assert.equal(
      (await ok(['aliases', 'list', '--key', first.id, '--field', 'data.0.alias'], env)).out,
      'alias/orders\n',
    )

    assert.equal(
      json(await ok(['aliases', 'move', 'alias/orders', '--key', second.id], env)).keyId,
      second.id,
    )
    assert.equal((await ok(['aliases', 'get', 'orders', '--field', 'keyId'], env)).out, `${second.id}\n`)
    await ok(['aliases', 'delete', 'orders'], env)
    assert.equal((await api('GET', `/aliases/${encodeURIComponent('alias/orders')}`)).status, 404)
    assert.equal((await kms(['aliases', 'get', 'orders'], env)).code, 4)
  })

  test('encrypt and decrypt: every byte value through @file and stdin, checked against the API both ways', async () => {
    const key = await createKey({ name: 'files', keyType: 'Encryption' })
    const plainFile = join(dir, 'all-bytes.bin')
    await writeFile(plainFile, ALL_BYTES)

    // CLI encrypt (binary transport) -> API decrypt (JSON, legacy mode: the same compact envelope).
    const envelope = (await ok(['encrypt', '--key', key.id, `@${plainFile}`, '--output', 'raw'], env)).stdout
    const opened = await api('POST', '/decrypt', { ciphertext: envelope.toString('base64'), mode: 'legacy' })
    assert.equal(opened.status, 200, opened.text)
    assert.deepEqual(Buffer.from(opened.body.plaintext, 'base64'), ALL_BYTES)

    // stdin, a map context (typed in another key order than the API gets it), JSON output.
    const fromStdin = json(
      await ok(['encrypt', '--key', key.id, '--context', '{"b":"2","a":"1"}', '-'], env, ALL_BYTES),
    )
    assert.equal(fromStdin.keyId, key.id)
    assert.equal(fromStdin.keyVersion, 1)
    const withContext = await api('POST', '/decrypt', {
      ciphertext: fromStdin.ciphertext,
      mode: 'legacy',
      context: { a: '1', b: '2' },
    })
    assert.equal(withContext.status, 200, withContext.text)
    assert.deepEqual(Buffer.from(withContext.body.plaintext, 'base64'), ALL_BYTES)

    // API encrypt (standard JSON answer) -> CLI decrypt of that JSON from a file, raw bytes out.
    const sealed = await api('POST', '/encrypt', { keyId: key.id, plaintext: ALL_BYTES.toString('base64') })
    assert.equal(sealed.status, 200, sealed.text)
    const answerFile = join(dir, 'answer.json')
    await writeFile(answerFile, sealed.text)
    assert.deepEqual((await ok(['decrypt', `@${answerFile}`, '--output', 'raw'], env)).stdout, ALL_BYTES)

    // API binary encrypt -> CLI decrypt of the raw envelope on stdin.
    const binary = await fetch(new URL('/api/v1/encrypt', svc.baseUrl), {
      method: 'POST',
      headers: { 'x-api-key': tenantA.key, 'x-key-id': key.id, 'content-type': 'application/octet-stream' },
      body: ALL_BYTES,
    })
    assert.equal(binary.status, 200)
    const rawEnvelope = Buffer.from(await binary.arrayBuffer())
    assert.deepEqual((await ok(['decrypt', '-', '--output', 'raw'], env, rawEnvelope)).stdout, ALL_BYTES)

    // The Base64 text of --field ciphertext decrypts too; the JSON answer carries the plaintext in Base64.
    const decrypted = json(await ok(['decrypt', fromStdin.ciphertext, '--context', '{"a":"1","b":"2"}'], env))
    assert.deepEqual(Buffer.from(decrypted.plaintext, 'base64'), ALL_BYTES)
    assert.equal(decrypted.keyId, key.id)

    // The wrong context is the service's decryption_failed (a 4xx: exit 1).
    const wrong = await kms(['decrypt', fromStdin.ciphertext, '--context', 'other', '--output', 'raw'], env)
    assert.equal(wrong.code, 1)
    assert.match(wrong.stderr.split('\n')[0]!, /^kms: decryption_failed: /)
    assert.equal(wrong.stdout.length, 0)
  })

  test('sign verifies with node:crypto; verify and mac-verify exit 0 when valid, 1 when not; mac matches @noble HMAC', async () => {
    const signing = await createKey({ name: 'sig', keyType: 'Signing', algorithm: 'Ed25519' })
    const message = join(dir, 'message.bin')
    await writeFile(message, ALL_BYTES)
    const signature = (await ok(['sign', '--key', signing.id, `@${message}`, '--output', 'raw'], env)).stdout
    const publicPem = (await api('GET', `/keys/${signing.id}/public?format=PEM`)).body.publicKey
    assert.ok(
      nodeVerify(null, ALL_BYTES, createPublicKey(publicPem), signature),
      'node:crypto accepts the signature',
    )
    assert.ok(!nodeVerify(null, Buffer.from('other'), createPublicKey(publicPem), signature))

    const signatureFile = join(dir, 'message.sig')
    await writeFile(signatureFile, signature)
    const valid = await kms(
      ['verify', '--key', signing.id, '--signature', `@${signatureFile}`, '-'],
      env,
      ALL_BYTES,
    )
    assert.equal(valid.code, 0, valid.stderr)
    assert.equal(JSON.parse(valid.out).valid, true)
    const base64Signature = json(await ok(['sign', '--key', signing.id, 'tampered?'], env)).signature
    const invalid = await kms(
      ['verify', '--key', signing.id, '--signature', base64Signature, 'tampered!'],
      env,
    )
    assert.equal(invalid.code, 1)
    assert.equal(JSON.parse(invalid.out).valid, false)
    assert.equal(invalid.stderr, 'kms: invalid_signature: the signature does not match the data and key\n')

    const hmacKey = await createKey({
      name: 'mac',
      keyType: 'HMAC',
      algorithm: 'HMAC-SHA256',
      exportable: true,
    })
    const exported = await api('POST', `/keys/${hmacKey.id}/export-private`, {
      confirm: 'mac',
      format: 'RAW',
    })
    assert.equal(exported.status, 200, exported.text)
    const secret = Buffer.from(exported.body.privateKey, 'base64')
    const mac = (await ok(['mac', '--key', hmacKey.id, '-', '--output', 'raw'], env, ALL_BYTES)).stdout
    assert.deepEqual(new Uint8Array(mac), hmac(sha256, secret, ALL_BYTES))
    const macValid = await kms(
      ['mac-verify', '--key', hmacKey.id, '--mac', mac.toString('base64'), `@${message}`],
      env,
    )
    assert.equal(macValid.code, 0, macValid.stderr)
    const macInvalid = await kms(
      ['mac-verify', '--key', hmacKey.id, '--mac', mac.toString('base64'), 'x'],
      env,
    )
    assert.equal(macInvalid.code, 1)
    assert.match(macInvalid.stderr, /^kms: invalid_mac: /)
  })

  test('data-key: the plaintext key is what the API unwraps from encryptedDek; the tenant default key is used without --key', async () => {
    const key = await createKey({ name: 'dek', keyType: 'Encryption', isDefault: true })
    const made = json(await ok(['data-key', '--key', key.id, '--bytes', '16', '--context', 'orders'], env))
    assert.equal(made.keyBytes, 16)
    assert.equal(Buffer.from(made.plaintextDek, 'base64').length, 16)
    const unwrapped = await api('POST', `/keys/${key.id}/unwrap`, {
      encryptedDek: made.encryptedDek,
      context: 'orders',
    })
    assert.equal(unwrapped.status, 200, unwrapped.text)
    assert.equal(unwrapped.body.plaintext, made.plaintextDek)

    const wrappedOnly = json(await ok(['data-key', '--key', key.id, '--wrapped-only'], env))
    assert.equal(wrappedOnly.plaintextDek, undefined)
    const byDefault = json(await ok(['data-key'], env))
    assert.equal(byDefault.keyId, key.id)
    assert.equal(Buffer.from(byDefault.plaintextDek, 'base64').length, 32)
  })

  test('secrets: set from stdin and @file, get (also an old version), history, list; never from the command line', async () => {
    const first = 'pässwörd "quoted" \\ $HOME\nsecond line\n'
    const created = json(await ok(['secrets', 'set', 'db-password', '--description', 'primary'], env, first))
    assert.equal(created.version, 1)
    assert.equal(created.value, undefined, 'set does not echo the value')
    const stored = await api('GET', `/secrets/${created.id}?include=all`)
    assert.equal(stored.body.value, first)
    assert.equal(stored.body.description, 'primary')

    const valueFile = join(dir, 'value.txt')
    await writeFile(valueFile, 'second value')
    assert.equal(json(await ok(['secrets', 'set', 'db-password', `@${valueFile}`], env)).version, 2)
    assert.equal((await api('GET', `/secrets/${created.id}?include=all`)).body.value, 'second value')

    assert.equal((await ok(['secrets', 'get', 'db-password', '--output', 'raw'], env)).out, 'second value')
    assert.equal(
      (await ok(['secrets', 'get', created.id, '--version', '1', '--output', 'raw'], env)).out,
      first,
    )
    assert.equal(json(await ok(['secrets', 'get', 'db-password'], env)).value, 'second value')
    const history = json(await ok(['secrets', 'history', 'db-password'], env))
    assert.deepEqual(
      history.data.map((v: { version: number; isCurrent: boolean }) => [v.version, v.isCurrent]),
      [
        [2, true],
        [1, false],
      ],
    )
    assert.equal(
      (await ok(['secrets', 'list', '--search', 'db-', '--field', 'data.0.name'], env)).out,
      'db-password\n',
    )

    const onCommandLine = await kms(['secrets', 'set', 'db-password', 'hunter2'], env)
    assert.equal(onCommandLine.code, 2)
    assert.match(onCommandLine.stderr, /^kms: usage: the value is read from @file or stdin/)
    assert.ok(!onCommandLine.stderr.includes('hunter2'))
    const notText = await kms(['secrets', 'set', 'binary', '-'], env, Buffer.from([0xff, 0xfe, 0x00]))
    assert.equal(notText.code, 6)
    assert.match(notText.stderr, /^kms: not_utf8: /)
    const missing = await kms(['secrets', 'get', 'no-such-secret'], env)
    assert.equal(missing.code, 4)
    assert.equal(missing.stderr, 'kms: not_found: no secret named "no-such-secret"\n')
    assert.equal(
      (await api('GET', `/secrets/${created.id}`)).body.version,
      2,
      'the refused set changed nothing',
    )
  })

  test('audit list filters; audit tail prints each new record once, oldest first, until SIGINT (exit 0)', async () => {
    await createKey({ name: 'audited', keyType: 'Encryption' })
    assert.equal(
      (
        await ok(
          ['audit', 'list', '--action', 'keys.create', '--limit', '1', '--field', 'data.0.action'],
          env,
        )
      ).out,
      'keys.create\n',
    )

    const tail = startKms(['audit', 'tail', '--lines', '1', '--interval', '0.2', '--action', 'keys.create'], {
      cwd: PROJECT_ROOT,
      env,
    })
    try {
      const lines = () =>
        tail
          .stdout()
          .split('\n')
          .filter((l) => l.length > 0)
          .map((l) => JSON.parse(l))
      // The first line (the newest record before the start) means tail has its starting point.
      await waitFor(() => lines().length >= 1, 'the first record of audit tail')
      const made = [] as string[]
      for (const name of ['tail-1', 'tail-2', 'tail-3'])
        made.push((await createKey({ name, keyType: 'Signing' })).id)
      await waitFor(() => lines().length >= 4, 'three new records')
      // One more record, after several polls have seen the first three: they are not printed again.
      made.push((await createKey({ name: 'tail-4', keyType: 'HMAC', algorithm: 'HMAC-SHA256' })).id)
      await waitFor(() => lines().some((r) => r.resource === `key:${made[3]}`), 'the fourth record')
      tail.child.kill('SIGINT')
      assert.equal((await tail.exited).code, 0, tail.stderr())
      const records = lines()
      assert.equal(records.length, 5, tail.stdout())
      assert.deepEqual(
        records.slice(1).map((r) => r.resource),
        made.map((id) => `key:${id}`),
      )
      const ids = records.map((r) => BigInt(r.id))
      assert.deepEqual(
        ids,
        [...ids].sort((a, b) => (a < b ? -1 : 1)),
        'oldest first',
      )
      assert.ok(records.every((r) => r.action === 'keys.create'))
    } finally {
      if (tail.child.exitCode === null) tail.child.kill('SIGKILL')
    }
  })

  test('api-keys: create prints the key once and it works with its scope only; list, get, revoke (then 401: exit 3)', async () => {
    const key = (
      await ok(['api-keys', 'create', '--name', 'reader', '--scope', 'keys:read', '--output', 'raw'], env)
    ).out
    assert.match(key, /^kms_[A-Za-z0-9]+$/)
    assert.equal((await api('GET', '/keys', undefined, key)).status, 200)

    const listed = json(await ok(['api-keys', 'list'], env))
    const reader = listed.data.find((k: { name: string }) => k.name === 'reader')
    assert.deepEqual(reader.scopes, ['keys:read'])
    assert.ok(!JSON.stringify(listed).includes(key), 'a listing never shows a key')
    assert.equal(json(await ok(['api-keys', 'get', reader.id], env)).name, 'reader')

    // 403: the reader's key may not create keys.
    const readerEnv = { ...env, KMS_API_KEY: key }
    const forbidden = await kms(['keys', 'create', '--name', 'nope', '--type', 'Encryption'], readerEnv)
    assert.equal(forbidden.code, 3)
    assert.match(forbidden.stderr.split('\n')[0]!, ERROR_LINE)
    assert.ok(!forbidden.stderr.includes(key))

    assert.ok(json(await ok(['api-keys', 'revoke', reader.id], env)).revokedAt)
    assert.ok((await api('GET', `/api-keys/${reader.id}`)).body.revokedAt)
    await waitFor(
      async () => (await api('GET', '/keys', undefined, key)).status === 401,
      'the revoked key refused',
    )
    const refused = await kms(['keys', 'list'], readerEnv)
    assert.equal(refused.code, 3)
    assert.match(refused.stderr.split('\n')[0]!, ERROR_LINE)
    assert.ok(!refused.stderr.includes(key), 'the key is never printed')
  })

  test('whoami and tenant name the API key and its tenant', async () => {
    const me = json(await ok(['whoami'], env))
    assert.equal(me.callerKind, 'apiKey')
    assert.equal(me.tenantId, tenantA.tenantId)
    assert.equal(me.apiKeyId, tenantA.apiKeyId)
    assert.equal((await ok(['tenant', '--field', 'id'], env)).out, `${tenantA.tenantId}\n`)
  })

  test('output: json by default off a terminal, aligned tables with cut cells, raw, and --field', async () => {
    const long = 'x'.repeat(120)
    const key = await createKey({
      name: 'shown',
      keyType: 'Encryption',
      description: long,
      labels: ['a', 'b'],
    })
    const asJson = json(await ok(['keys', 'get', key.id], env))
    assert.equal(asJson.description, long)

    const table = (await ok(['keys', 'get', key.id, '--output', 'table'], env)).out.split('\n')
    const row = (field: string) => table.find((l) => l.startsWith(`${field} `))
    assert.match(row('name')!, /^name +shown$/)
    assert.match(row('labels')!, /^labels +a,b$/)
    assert.ok(row('description')!.endsWith('…'), 'a long cell is cut')
    assert.ok(row('description')!.length < long.length)
    const valueColumn = row('name')!.indexOf('shown')
    assert.equal(row('id')!.indexOf(key.id), valueColumn, 'values start in one column')

    const list = (await ok(['keys', 'list', '--search', 'shown', '--output', 'table'], env)).out.split('\n')
    assert.match(list[0]!, /^ID +NAME +KEYTYPE +ALGORITHM +STATE +VERSION +ALIASES +CREATEDAT$/)
    assert.equal(list[1]!.indexOf('shown'), list[0]!.indexOf('NAME'))

    assert.equal((await ok(['keys', 'get', key.id, '--field', 'labels.1'], env)).out, 'b\n')
    assert.equal((await ok(['keys', 'get', key.id, '--field', 'labels'], env)).out, '["a","b"]\n')
    assert.equal(
      (await ok(['keys', 'get', key.id, '--output', 'raw'], env)).out,
      `${JSON.stringify(asJson)}\n`,
    )
    // A table never cuts what is only useful whole, and shows a printable plaintext as its text.
    const sealed = (await ok(['encrypt', '--key', key.id, 'a line of text', '--output', 'table'], env)).out
    const ciphertext = /^ciphertext +(\S+)$/m.exec(sealed)![1]!
    assert.equal((await ok(['decrypt', ciphertext, '--output', 'table'], env)).out, 'a line of text\n')
    const binary = (await ok(['encrypt', '--key', key.id, '-', '--field', 'ciphertext'], env, ALL_BYTES)).out
    const binaryTable = (await ok(['decrypt', binary.trim(), '--output', 'table'], env)).out
    assert.equal(/^plaintext +(\S+)$/m.exec(binaryTable)![1], ALL_BYTES.toString('base64'))

    const noField = await kms(['keys', 'get', key.id, '--field', 'nope'], env)
    assert.equal(noField.code, 2)
    assert.match(noField.stderr, /^kms: usage: --field nope: no "nope" \(fields of the answer: id, name, /)
  })

  test('--output-curl-string prints a curl command that sends nothing itself and works with the key from the environment', async () => {
    const before = (await api('GET', '/keys?limit=100')).body.total
    const create = await ok(
      ['keys', 'create', '--name', "o'brien", '--type', 'Encryption', '--output-curl-string'],
      env,
    )
    assert.equal((await api('GET', '/keys?limit=100')).body.total, before, 'nothing was sent')
    assert.ok(!create.out.includes(tenantA.key), 'the key is not in the command')
    assert.match(create.out, /^curl .* -X POST .*\/api\/v1\/keys .*"x-api-key: \$KMS_API_KEY"/)
    const made = await runShell(create.out, { KMS_API_KEY: tenantA.key })
    const answer = JSON.parse(made.toString())
    assert.equal((await api('GET', `/keys/${answer.id}`)).body.name, "o'brien")

    // A binary body stays in its file: --data-binary @path; the answer is the raw envelope.
    const plainFile = join(dir, 'curl-plain.bin')
    await writeFile(plainFile, ALL_BYTES)
    const encrypt = await ok(['encrypt', '--key', answer.id, `@${plainFile}`, '--output-curl-string'], env)
    assert.match(
      encrypt.out,
      new RegExp(`--data-binary @${plainFile.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}\\n$`),
    )
    const envelope = await runShell(encrypt.out, { KMS_API_KEY: tenantA.key })
    const opened = await api('POST', '/decrypt', { ciphertext: envelope.toString('base64'), mode: 'legacy' })
    assert.deepEqual(Buffer.from(opened.body.plaintext, 'base64'), ALL_BYTES)

    // A secret's name would need a lookup first: the curl command needs its id.
    const byName = await kms(['secrets', 'get', 'db-password', '--output-curl-string'], env)
    assert.equal(byName.code, 2)
    assert.match(byName.stderr, /^kms: usage: with --output-curl-string, name the secret by its id/)

    // Without an API key the placeholder is the sign-in's token.
    const { KMS_API_KEY: _, ...signedIn } = env
    const list = await ok(['keys', 'list', '--output-curl-string'], signedIn)
    assert.match(list.out, /"authorization: Bearer \$KMS_TOKEN"/)
  })

  test('errors: 400 with its fields, 401, 404 as one `kms: <code>: <message>` line and exit 1, 3, 4; never the key', async () => {
    const invalid = await kms(['keys', 'create', '--name', 'n'.repeat(300), '--type', 'Encryption'], env)
    assert.equal(invalid.code, 1)
    const [first, ...rest] = invalid.stderr.trimEnd().split('\n')
    assert.match(first!, /^kms: validation_failed: /)
    assert.ok(
      rest.some((line) => /^ {2}body\/name: /.test(line)),
      invalid.stderr,
    )

    const badKey = `kms_${'A'.repeat(52)}`
    const unauthorized = await kms(['keys', 'list'], { ...env, KMS_API_KEY: badKey })
    assert.equal(unauthorized.code, 3)
    assert.match(unauthorized.stderr.split('\n')[0]!, ERROR_LINE)
    assert.ok(!unauthorized.stderr.includes(badKey))

    const notFound = await kms(['keys', 'get', '00000000-0000-4000-8000-000000000000'], env)
    assert.equal(notFound.code, 4)
    assert.match(notFound.stderr.split('\n')[0]!, /^kms: key_not_found: /)
    assert.equal(notFound.out, '')
  })

  test("429 and 503 after the retries, and 500, are exit 5 with the answer's code and message", async () => {
    // A stand-in for a load balancer in front of the service: it answers every request with `status`.
    let status = 503
    const seen: string[] = []
    const balancer = createServer((request, response) => {
      seen.push(`${request.method} ${request.url}`)
      response.writeHead(status, { 'content-type': 'application/json', 'retry-after': '0' })
      response.end(
        JSON.stringify({
          error: status === 500 ? 'internal_error' : 'overloaded',
          message: `answered ${status}`,
        }),
      )
    })
    await new Promise<void>((resolve) => balancer.listen(0, '127.0.0.1', resolve))
    try {
      const { port } = balancer.address() as { port: number }
      const vars = { KMS_ADDR: `http://127.0.0.1:${port}`, KMS_API_KEY: 'kms_unused' }
      const run = () => {
        seen.length = 0
        return kms(['keys', 'get', '00000000-0000-4000-8000-000000000000'], { ...env, ...vars })
      }
      for (const retried of [503, 429]) {
        status = retried
        const answer = await run()
        assert.equal(answer.code, 5)
        assert.match(answer.stderr, new RegExp(`^kms: overloaded: answered ${retried}\n`))
        assert.equal(seen.length, 4, "the first attempt and the SDK's 3 retries")
      }
      status = 500
      const failed = await run()
      assert.equal(failed.code, 5)
      assert.match(failed.stderr, /^kms: internal_error: answered 500\n/)
      assert.deepEqual(seen, ['GET /api/v1/keys/00000000-0000-4000-8000-000000000000'])
    } finally {
      await new Promise<void>((resolve) => balancer.close(() => resolve()))
    }
  })

  test("tenant isolation: tenant B's key cannot read tenant A's key or secret (404: exit 4)", async () => {
    const key = await createKey({ name: 'a-only', keyType: 'Encryption' })
    const secret = await api('POST', '/secrets', { name: 'a-secret', value: 'a' })
    assert.equal(secret.status, 201)
    const getKey = await kms(['keys', 'get', key.id], envB)
    assert.equal(getKey.code, 4)
    assert.match(getKey.stderr, /^kms: key_not_found: /)
    const getSecret = await kms(['secrets', 'get', secret.body.id, '--output', 'raw'], envB)
    assert.equal(getSecret.code, 4)
    assert.equal(getSecret.out, '')
    const byName = await kms(['secrets', 'get', 'a-secret'], envB)
    assert.equal(byName.code, 4)
  })
})

/** Runs a printed command line with bash (curl's answer on stdout), the given variables set. */
function runShell(line: string, vars: Record<string, string>): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const child = spawn('bash', ['-c', line], {
      env: kmsEnv(vars),
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    const out: Buffer[] = []
    let stderr = ''
    child.stdout.on('data', (c: Buffer) => out.push(c))
    child.stderr.on('data', (c: Buffer) => {
      stderr += c.toString()
    })
    child.once('error', reject)
    child.once('close', (code) =>
      code === 0 ? resolve(Buffer.concat(out)) : reject(new Error(`${line}: ${stderr}`)),
    )
  })
}
