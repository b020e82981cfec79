import assert from 'node:assert/strict'
import { randomBytes, randomUUID } from 'node:crypto'
import { after, before, describe, test } from 'node:test'
import { DAY_MS } from '../../src/platform/clock.ts'
import { apiClient, b64, unb64, uniqueName } from '../helpers/api-client.ts'
import { type ManualClock, manualClock } from '../helpers/manual-clock.ts'
import {
  type HttpResult,
  startTestService,
  type TenantWithKey,
  type TestService,
} from '../helpers/service.ts'

/**
 * POST /api/v1/encrypt/batch and /decrypt/batch over real HTTP (docs/crypto-operations.md,
 * "Batches"): per-item results in request order where one bad item fails alone, every tampering
 * the same decryption_failed, 1,000-item batches spread over the crypto pool, the item and body
 * limits, legacy mode, scopes, audit records per (key, version, outcome), and concurrent batches.
 *
 * One service and one manual clock for the file. The clock only moves forward, once, in the
 * decrypt test (to destroy a key); nothing else here depends on the time.
 */

const MIB = 1024 * 1024
const ENCRYPT_BATCH_LIMIT = 10 * MIB
const DECRYPT_BATCH_LIMIT = 13 * MIB
const MAX_ITEMS = 1000

interface Envelope {
  ciphertext: string
  encapsulatedKey: string
  nonce: string
  tag: string
  keyId: string
  keyVersion: number
}

/** An ok item of an encrypt batch (standard mode). */
type EncryptOk = { ok: true } & Envelope

interface EncryptItem {
  keyId?: string
  plaintext: string
  context?: string
}

/** The decrypt-batch item for an envelope: its four binary fields, plus whatever `extra` adds. */
function decryptItem(envelope: Envelope, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    ciphertext: envelope.ciphertext,
    encapsulatedKey: envelope.encapsulatedKey,
    nonce: envelope.nonce,
    tag: envelope.tag,
    ...extra,
  }
}

/** The same bytes with one bit flipped. */
function flipBit(text: string, bit: number): string {
  const bytes = unb64(text)
  bytes[bit >> 3]! ^= 1 << (bit & 7)
  return b64(bytes)
}

describe('encrypt and decrypt batches', () => {
  let svc: TestService
  let clock: ManualClock
  let tenant: TenantWithKey
  let otherTenant: TenantWithKey
  /** The tenant's default Encryption key. */
  let mlkem: string
  let rsa: string
  let signing: string
  let revoked: string
  /** An Encryption key of the other tenant. */
  let foreign: string

  before(async () => {
    clock = manualClock(new Date('2030-01-01T00:00:00Z'))
    svc = await startTestService({}, { clock })
    tenant = await svc.createTenant()
    otherTenant = await svc.createTenant()
    ;[mlkem, rsa, signing, revoked, foreign] = await Promise.all([
      createKey('ML-KEM-768', { isDefault: true }),
      createKey('RSA-2048'),
      createKey('Ed25519', {}, tenant, 'Signing'),
      createKey('ML-KEM-512'),
      createKey('ML-KEM-768', {}, otherTenant),
    ])
    const res = await call('POST', `/keys/${revoked}/revoke`)
    assert.equal(res.status, 200, res.text)
  })

  after(async () => {
    await svc?.stop()
  })

  const api = apiClient(() => ({ svc, tenant }))
  const call = api.call
  const createKey = async (
    algorithm: string,
    extra: Record<string, unknown> = {},
    by = tenant,
    keyType = 'Encryption',
  ) => (await api.createKey(keyType, algorithm, extra, by)).id

  async function createApiKey(scopes: string[]): Promise<string> {
    const res = await call('POST', '/api-keys', { name: uniqueName('scoped'), scopes })
    assert.equal(res.status, 201, res.text)
    return res.body.key
  }

  /** POST /encrypt/batch, asserting 200 and one result per item. */
  async function encryptBatch(
    items: readonly EncryptItem[],
    extra: Record<string, unknown> = {},
    by: TenantWithKey | string = tenant,
    // biome-ignore lint/suspicious/noExplicitAny: per-item results of either shape; each test asserts the fields it reads
  ): Promise<any[]> {
    const res = await call('POST', '/encrypt/batch', { items, ...extra }, by)
    assert.equal(res.status, 200, res.text.slice(0, 500))
    assert.equal(res.body.results.length, items.length, 'one result per item')
    return res.body.results
  }

  /** POST /decrypt/batch, asserting 200 and one result per item. */
  async function decryptBatch(
    items: readonly Record<string, unknown>[],
    extra: Record<string, unknown> = {},
    by: TenantWithKey | string = tenant,
    // biome-ignore lint/suspicious/noExplicitAny: per-item results of either shape; each test asserts the fields it reads
  ): Promise<any[]> {
    const res = await call('POST', '/decrypt/batch', { items, ...extra }, by)
    assert.equal(res.status, 200, res.text.slice(0, 500))
    assert.equal(res.body.results.length, items.length, 'one result per item')
    return res.body.results
  }

  async function encryptOne(body: Record<string, unknown>, by: TenantWithKey = tenant): Promise<Envelope> {
    const res = await call('POST', '/encrypt', body, by)
    assert.equal(res.status, 200, res.text)
    return res.body
  }

  /** Single /decrypt of an envelope, asserting it opens to `plaintext` with the key and version. */
  async function assertOpens(
    envelope: Envelope,
    expected: { plaintext: Buffer; keyId: string; keyVersion: number; context?: string | undefined },
  ): Promise<void> {
    const extra = expected.context !== undefined ? { context: expected.context } : {}
    const res = await call('POST', '/decrypt', decryptItem(envelope, extra))
    assert.equal(res.status, 200, res.text)
    assert.ok(unb64(res.body.plaintext).equals(expected.plaintext), 'the plaintext comes back unchanged')
    assert.equal(res.body.keyId, expected.keyId)
    assert.equal(res.body.keyVersion, expected.keyVersion)
  }

  /** A failed item: exactly {ok: false, error, message}. */
  // biome-ignore lint/suspicious/noExplicitAny: one parsed result
  function assertItemFailed(result: any, error: string, what: string): void {
    assert.deepEqual(
      Object.keys(result).sort(),
      ['error', 'message', 'ok'],
      `${what}: ${JSON.stringify(result)}`,
    )
    assert.equal(result.ok, false, what)
    assert.equal(result.error, error, `${what}: ${JSON.stringify(result)}`)
    assert.equal(typeof result.message, 'string', what)
    assert.ok(result.message.length > 0, what)
  }

  /** An ok standard-mode encrypt item: exactly the envelope fields, the key and the version. */
  // biome-ignore lint/suspicious/noExplicitAny: one parsed result
  function assertSealed(result: any, keyId: string, keyVersion: number, what: string): void {
    assert.deepEqual(
      Object.keys(result).sort(),
      ['ciphertext', 'encapsulatedKey', 'keyId', 'keyVersion', 'nonce', 'ok', 'tag'],
      `${what}: ${JSON.stringify(result).slice(0, 300)}`,
    )
    assert.equal(result.ok, true, what)
    assert.equal(result.keyId, keyId, what)
    assert.equal(result.keyVersion, keyVersion, what)
    assert.equal(unb64(result.nonce).length, 12, what)
    assert.equal(unb64(result.tag).length, 16, what)
  }

  async function stateOf(keyId: string): Promise<string> {
    const res = await call('GET', `/keys/${keyId}`)
    assert.equal(res.status, 200, res.text)
    return res.body.state
  }

  function assertTooLarge(res: HttpResult, what: string): void {
    assert.equal(res.status, 413, `${what}: ${res.text.slice(0, 300)}`)
    assert.equal(res.body.error, 'payload_too_large', what)
  }

  /** A raw JSON body of exactly `size` bytes: one item whose Base64 field fills the room. */
  function rawBodyOfSize(size: number, prefix: string, suffix: string): string {
    const room = size - prefix.length - suffix.length
    const filler = 'A'.repeat(room - (room % 4))
    const body = `${prefix}${filler}${suffix}`
    // JSON allows whitespace after the value: pad to the exact size.
    const padded = body.padEnd(size, ' ')
    assert.equal(Buffer.byteLength(padded), size)
    return padded
  }

  test('encrypt/batch: mixed valid and invalid items fail alone, results in request order, ok items decrypt', async () => {
    const plain = (i: number) => Buffer.from(`item ${i}: ${randomBytes(6).toString('hex')}`)

    type Case =
      | { item: EncryptItem; fails: string; what: string }
      | { item: EncryptItem; keyId: string; plaintext: Buffer; context?: string; what: string }
    const cases = (): Case[] => {
      const p = Array.from({ length: 8 }, (_, i) => plain(i))
      return [
        { what: 'ML-KEM key', item: { keyId: mlkem, plaintext: b64(p[0]!) }, keyId: mlkem, plaintext: p[0]! },
        { what: 'not Base64', item: { keyId: mlkem, plaintext: 'not base64!' }, fails: 'validation_failed' },
        {
          what: 'RSA key with context',
          item: { keyId: rsa, plaintext: b64(p[1]!), context: 'ctx=rsa · Zoë' },
          keyId: rsa,
          plaintext: p[1]!,
          context: 'ctx=rsa · Zoë',
        },
        { what: 'unknown key', item: { keyId: randomUUID(), plaintext: b64(p[2]!) }, fails: 'key_not_found' },
        { what: 'default key', item: { plaintext: b64(p[3]!) }, keyId: mlkem, plaintext: p[3]! },
        {
          what: "another tenant's key",
          item: { keyId: foreign, plaintext: b64(p[2]!) },
          fails: 'key_not_found',
        },
        {
          what: 'default key with context',
          item: { plaintext: b64(p[4]!), context: 'ctx=default' },
          keyId: mlkem,
          plaintext: p[4]!,
          context: 'ctx=default',
        },
        { what: 'Signing key', item: { keyId: signing, plaintext: b64(p[2]!) }, fails: 'key_type_mismatch' },
        { what: 'revoked key', item: { keyId: revoked, plaintext: b64(p[2]!) }, fails: 'key_state_conflict' },
        { what: 'RSA key', item: { keyId: rsa, plaintext: b64(p[5]!) }, keyId: rsa, plaintext: p[5]! },
        {
          what: 'empty plaintext',
          item: { keyId: rsa, plaintext: '' },
          keyId: rsa,
          plaintext: Buffer.alloc(0),
        },
        {
          what: 'ML-KEM key with context',
          item: { keyId: mlkem, plaintext: b64(p[6]!), context: 'ctx=mlkem' },
          keyId: mlkem,
          plaintext: p[6]!,
          context: 'ctx=mlkem',
        },
      ]
    }

    // As is (7 valid items: worked inline) and with 20 more valid items (worked in the pool).
    for (const padding of [0, 20]) {
      const list = cases()
      for (let i = 0; i < padding; i++) {
        const p = plain(100 + i)
        const keyId = i % 2 === 0 ? mlkem : rsa
        list.splice(2 * i, 0, {
          what: `padding ${i}`,
          item: { keyId, plaintext: b64(p) },
          keyId,
          plaintext: p,
        })
      }
      const tasksBefore = svc.api.services.cryptoPool.completedTasks()
      const results = await encryptBatch(list.map((c) => c.item))
      const tasks = svc.api.services.cryptoPool.completedTasks() - tasksBefore
      if (padding === 0) assert.equal(tasks, 0, 'a batch of 7 valid items is worked inline')
      else assert.ok(tasks > 0, 'a batch of 27 valid items is worked in the pool')
      const nonces = new Set<string>()
      for (const [i, c] of list.entries()) {
        const what = `${padding} padded, item ${i} (${c.what})`
        const result = results[i]
        if ('fails' in c) {
          assertItemFailed(result, c.fails, what)
          continue
        }
        assertSealed(result, c.keyId, 1, what)
        nonces.add(result.nonce)
        await assertOpens(result, {
          plaintext: c.plaintext,
          keyId: c.keyId,
          keyVersion: 1,
          context: c.context,
        })
      }
      assert.equal(nonces.size, list.filter((c) => !('fails' in c)).length, 'every item has its own nonce')
    }

    // Each failure is the error code the single request has.
    for (const [item, code] of [
      [{ keyId: mlkem, plaintext: 'not base64!' }, 'validation_failed'],
      [{ keyId: randomUUID(), plaintext: b64('x') }, 'key_not_found'],
      [{ keyId: foreign, plaintext: b64('x') }, 'key_not_found'],
      [{ keyId: signing, plaintext: b64('x') }, 'key_type_mismatch'],
      [{ keyId: revoked, plaintext: b64('x') }, 'key_state_conflict'],
    ] as const) {
      const res = await call('POST', '/encrypt', item)
      assert.ok(res.status >= 400 && res.status < 500, res.text)
      assert.equal(res.body.error, code, JSON.stringify(item))
    }
  })

  test('decrypt/batch: valid items open in order, every tampering is the same decryption_failed, Destroyed is key_state_conflict', async () => {
    const plaintexts = Array.from({ length: 6 }, (_, i) =>
      Buffer.from(`decrypt batch ${i} ${uniqueName('p')}`),
    )
    const context = 'ctx=decrypt-batch'

    // A key that is rotated: v1 envelopes from /encrypt and from /encrypt/batch.
    const rotating = await createKey('ML-KEM-768')
    const v1Single = await encryptOne({ keyId: rotating, plaintext: b64(plaintexts[0]!), context })
    const [v1Batch] = (await encryptBatch([
      { keyId: rotating, plaintext: b64(plaintexts[1]!) },
    ])) as EncryptOk[]
    assert.equal(v1Single.keyVersion, 1)
    assert.equal(v1Batch!.keyVersion, 1)
    const rotated = await call('POST', `/keys/${rotating}/rotate`)
    assert.equal(rotated.status, 200, rotated.text)
    const [v2Batch] = (await encryptBatch([
      { keyId: rotating, plaintext: b64(plaintexts[2]!), context },
    ])) as EncryptOk[]
    assert.equal(v2Batch!.keyVersion, 2)

    const rsaSingle = await encryptOne({ keyId: rsa, plaintext: b64(plaintexts[3]!) })
    const [mlkemBatch] = (await encryptBatch([
      { plaintext: b64(plaintexts[4]!), context: 'ctx=default' },
    ])) as EncryptOk[]
    assert.equal(mlkemBatch!.keyId, mlkem)
    const foreignEnvelope = await encryptOne({ keyId: foreign, plaintext: b64('foreign') }, otherTenant)

    // A key destroyed after it encrypted.
    const doomed = await createKey('ML-KEM-768')
    const doomedEnvelope = await encryptOne({ keyId: doomed, plaintext: b64(plaintexts[5]!) })
    const deleted = await call('DELETE', `/keys/${doomed}?pendingWindowDays=7`)
    assert.equal(deleted.status, 200, deleted.text)
    assert.equal(await stateOf(doomed), 'Pending Deletion')
    clock.advance(8 * DAY_MS)
    assert.equal(await stateOf(doomed), 'Destroyed')

    const reference = await call('POST', '/decrypt', decryptItem(v1Single, { context: 'not the context' }))
    assert.equal(reference.status, 400, reference.text)
    assert.equal(reference.body.error, 'decryption_failed')
    const failed = { ok: false, error: 'decryption_failed', message: reference.body.message }

    const ek = unb64(v1Single.encapsulatedKey)
    type Case =
      | { what: string; item: Record<string, unknown>; plaintext: Buffer; keyId: string; keyVersion: number }
      | { what: string; item: Record<string, unknown>; tamper: true }
      | { what: string; item: Record<string, unknown>; fails: string }
    const cases: Case[] = [
      {
        what: 'v1 from /encrypt, after the rotation',
        item: decryptItem(v1Single, { context }),
        plaintext: plaintexts[0]!,
        keyId: rotating,
        keyVersion: 1,
      },
      {
        what: 'flipped ciphertext bit',
        item: decryptItem(v1Single, { context, ciphertext: flipBit(v1Single.ciphertext, 5) }),
        tamper: true,
      },
      {
        what: 'v1 from /encrypt/batch with its keyId and keyVersion, after the rotation',
        item: decryptItem(v1Batch!, { keyId: rotating, keyVersion: 1 }),
        plaintext: plaintexts[1]!,
        keyId: rotating,
        keyVersion: 1,
      },
      { what: 'wrong context', item: decryptItem(v1Single, { context: `${context}!` }), tamper: true },
      { what: 'context missing', item: decryptItem(v1Single), tamper: true },
      {
        what: 'flipped tag bit',
        item: decryptItem(v1Single, { context, tag: flipBit(v1Single.tag, 100) }),
        tamper: true,
      },
      {
        what: 'v2 from /encrypt/batch',
        item: decryptItem(v2Batch!, { context }),
        plaintext: plaintexts[2]!,
        keyId: rotating,
        keyVersion: 2,
      },
      {
        what: 'encapsulatedKey truncated by one byte',
        item: decryptItem(v1Single, { context, encapsulatedKey: b64(ek.subarray(0, -1)) }),
        tamper: true,
      },
      {
        what: 'encapsulatedKey truncated inside the header',
        item: decryptItem(v1Single, { context, encapsulatedKey: b64(ek.subarray(0, 10)) }),
        tamper: true,
      },
      { what: "another tenant's envelope", item: decryptItem(foreignEnvelope), tamper: true },
      {
        what: 'keyId cross-check naming another key',
        item: decryptItem(v1Single, { context, keyId: rsa }),
        tamper: true,
      },
      {
        what: 'keyVersion cross-check naming another version',
        item: decryptItem(v1Single, { context, keyVersion: 2 }),
        tamper: true,
      },
      {
        what: 'RSA from /encrypt',
        item: decryptItem(rsaSingle, { keyId: rsa }),
        plaintext: plaintexts[3]!,
        keyId: rsa,
        keyVersion: 1,
      },
      {
        what: 'nonce not Base64',
        item: decryptItem(v1Single, { context, nonce: 'not base64!' }),
        fails: 'validation_failed',
      },
      { what: 'Destroyed key', item: decryptItem(doomedEnvelope), fails: 'key_state_conflict' },
      {
        what: 'default key from /encrypt/batch',
        item: decryptItem(mlkemBatch!, { context: 'ctx=default' }),
        plaintext: plaintexts[4]!,
        keyId: mlkem,
        keyVersion: 1,
      },
    ]

    const results = await decryptBatch(cases.map((c) => c.item))
    for (const [i, c] of cases.entries()) {
      const what = `item ${i} (${c.what})`
      const result = results[i]
      if ('tamper' in c) assert.deepEqual(result, failed, what)
      else if ('fails' in c) assertItemFailed(result, c.fails, what)
      else {
        assert.deepEqual(Object.keys(result).sort(), ['keyId', 'keyVersion', 'ok', 'plaintext'], what)
        assert.equal(result.ok, true, what)
        assert.ok(unb64(result.plaintext).equals(c.plaintext), `${what}: the plaintext comes back`)
        assert.equal(result.keyId, c.keyId, what)
        assert.equal(result.keyVersion, c.keyVersion, what)
      }
    }

    // The single route says the same of the Destroyed key's envelope.
    const destroyed = await call('POST', '/decrypt', decryptItem(doomedEnvelope))
    assert.equal(destroyed.status, 409, destroyed.text)
    assert.equal(destroyed.body.error, 'key_state_conflict')
    assert.equal(destroyed.body.state, 'Destroyed')
  })

  test('1,000 items: one ok result per item in order, all distinct nonces, spread over the worker pool; 5 items run inline', async () => {
    const pool = svc.api.services.cryptoPool
    const plaintexts = Array.from({ length: MAX_ITEMS }, (_, i) =>
      Buffer.from(`${i}:${randomBytes(8).toString('hex')}`),
    )
    const keyFor = (i: number) => (i % 3 === 0 ? rsa : mlkem)

    const beforeEncrypt = pool.completedTasks()
    const sealed = await encryptBatch(plaintexts.map((p, i) => ({ keyId: keyFor(i), plaintext: b64(p) })))
    const afterEncrypt = pool.completedTasks()
    assert.ok(
      afterEncrypt > beforeEncrypt,
      `the pool ran the batch (${beforeEncrypt} → ${afterEncrypt} tasks)`,
    )
    for (const [i, result] of sealed.entries()) assertSealed(result, keyFor(i), 1, `item ${i}`)
    assert.equal(new Set(sealed.map((r) => r.nonce)).size, MAX_ITEMS, 'every nonce is distinct')
    assert.equal(new Set(sealed.map((r) => r.encapsulatedKey)).size, MAX_ITEMS, 'every DEK is fresh')

    const opened = await decryptBatch(sealed.map((r) => decryptItem(r)))
    assert.ok(pool.completedTasks() > afterEncrypt, 'the pool ran the decrypt batch')
    for (const [i, result] of opened.entries()) {
      assert.equal(result.ok, true, `item ${i}: ${JSON.stringify(result)}`)
      assert.ok(unb64(result.plaintext).equals(plaintexts[i]!), `item ${i} comes back in its place`)
      assert.equal(result.keyId, keyFor(i))
    }

    // Five items: below the pooling threshold, the work runs on the request's thread.
    const few = plaintexts.slice(0, 5)
    const beforeFew = pool.completedTasks()
    const fewSealed = await encryptBatch(few.map((p, i) => ({ keyId: keyFor(i), plaintext: b64(p) })))
    for (const [i, result] of fewSealed.entries()) assertSealed(result, keyFor(i), 1, `small batch item ${i}`)
    const fewOpened = await decryptBatch(fewSealed.map((r) => decryptItem(r)))
    assert.deepEqual(
      fewOpened.map((r) => r.plaintext),
      few.map((p) => b64(p)),
    )
    assert.equal(pool.completedTasks(), beforeFew, 'no pool task for a batch below 10 items')
  })

  test('limits: 1,001 and 0 items are 400; encrypt/batch takes 10 MiB, decrypt/batch 13 MiB; a ~9 MiB item works', async () => {
    const tooMany = Array.from({ length: MAX_ITEMS + 1 }, () => ({ keyId: mlkem, plaintext: b64('x') }))
    const [envelope] = (await encryptBatch([{ keyId: mlkem, plaintext: b64('x') }])) as EncryptOk[]
    for (const [path, items] of [
      ['/encrypt/batch', tooMany],
      ['/decrypt/batch', tooMany.map(() => decryptItem(envelope!))],
      ['/encrypt/batch', []],
      ['/decrypt/batch', []],
    ] as const) {
      const res = await call('POST', path, { items })
      assert.equal(res.status, 400, `${path} with ${items.length} items: ${res.text.slice(0, 300)}`)
      assert.equal(res.body.error, 'validation_failed', `${path} with ${items.length} items`)
    }
    const missing = await call('POST', '/encrypt/batch', {})
    assert.equal(missing.status, 400, missing.text)
    assert.equal(missing.body.error, 'validation_failed')

    const headers = { 'content-type': 'application/json' }
    const post = (path: string, rawBody: string) =>
      svc.request('POST', `/api/v1${path}`, { key: tenant.key, rawBody, headers })

    // Over 10 MiB on encrypt/batch.
    const encryptPrefix = `{"items":[{"keyId":"${mlkem}","plaintext":"`
    assertTooLarge(
      await post('/encrypt/batch', rawBodyOfSize(ENCRYPT_BATCH_LIMIT + 1, encryptPrefix, '"}]}')),
      'encrypt/batch at 10 MiB + 1',
    )

    // One item of ~9 MiB of JSON (6.75 MiB of plaintext, as Base64) is under the limit.
    const big = randomBytes(Math.floor(6.75 * MIB))
    const bigBody = { items: [{ keyId: rsa, plaintext: b64(big) }] }
    const bigSize = Buffer.byteLength(JSON.stringify(bigBody))
    assert.ok(bigSize > 8.9 * MIB && bigSize < ENCRYPT_BATCH_LIMIT, `body of ${bigSize} bytes`)
    const [bigSealed] = await encryptBatch(bigBody.items)
    assertSealed(bigSealed, rsa, 1, 'the ~9 MiB item')
    const [bigOpened] = await decryptBatch([decryptItem(bigSealed)])
    assert.equal(bigOpened.ok, true, bigOpened.message)
    assert.ok(unb64(bigOpened.plaintext).equals(big), 'the ~9 MiB item comes back')

    // decrypt/batch: two 4 MiB plaintexts sealed one by one make a body over 10 MiB: accepted.
    const halves = [randomBytes(4 * MIB), randomBytes(4 * MIB)]
    const halvesSealed = await Promise.all(halves.map((p) => encryptOne({ keyId: mlkem, plaintext: b64(p) })))
    const overTen = { items: halvesSealed.map((e) => decryptItem(e)) }
    const overTenSize = Buffer.byteLength(JSON.stringify(overTen))
    assert.ok(
      overTenSize > ENCRYPT_BATCH_LIMIT && overTenSize < DECRYPT_BATCH_LIMIT,
      `body of ${overTenSize} bytes`,
    )
    const halvesOpened = await decryptBatch(overTen.items)
    for (const [i, result] of halvesOpened.entries()) {
      assert.equal(result.ok, true, result.message)
      assert.ok(unb64(result.plaintext).equals(halves[i]!), `half ${i} comes back`)
    }

    // Over 13 MiB on decrypt/batch.
    const parts = { encapsulatedKey: envelope!.encapsulatedKey, nonce: envelope!.nonce, tag: envelope!.tag }
    const decryptPrefix = `{"items":[${JSON.stringify(parts).slice(0, -1)},"ciphertext":"`
    assertTooLarge(
      await post('/decrypt/batch', rawBodyOfSize(DECRYPT_BATCH_LIMIT + 1, decryptPrefix, '"}]}')),
      'decrypt/batch at 13 MiB + 1',
    )
  })

  test('legacy mode: encrypt/batch returns only the compact ciphertext per item; decrypt/batch takes it back', async () => {
    const plaintexts = Array.from({ length: 4 }, (_, i) => Buffer.from(`legacy ${i} ${uniqueName('p')}`))
    const items: EncryptItem[] = [
      { keyId: mlkem, plaintext: b64(plaintexts[0]!) },
      { keyId: rsa, plaintext: b64(plaintexts[1]!), context: 'ctx=legacy' },
      { keyId: randomUUID(), plaintext: b64('x') },
      { plaintext: b64(plaintexts[2]!) },
      { keyId: rsa, plaintext: b64(plaintexts[3]!) },
    ]
    const keyIds = [mlkem, rsa, undefined, mlkem, rsa]
    const results = await encryptBatch(items, { mode: 'legacy' })
    assertItemFailed(results[2], 'key_not_found', 'unknown key in legacy mode')
    for (const i of [0, 1, 3, 4]) {
      assert.deepEqual(
        Object.keys(results[i]).sort(),
        ['ciphertext', 'keyId', 'keyVersion', 'mode', 'ok'],
        `item ${i}: ${JSON.stringify(results[i])}`,
      )
      assert.equal(results[i].ok, true)
      assert.equal(results[i].mode, 'legacy')
      assert.equal(results[i].keyId, keyIds[i])
      assert.equal(results[i].keyVersion, 1)
    }

    const legacyItem = (i: number, extra: Record<string, unknown> = {}) => ({
      ciphertext: results[i].ciphertext,
      ...(i === 1 ? { context: 'ctx=legacy' } : {}),
      ...extra,
    })
    const opened = await decryptBatch(
      [
        legacyItem(0),
        legacyItem(1),
        legacyItem(3, { keyId: mlkem, keyVersion: 1 }),
        // A legacy item carrying a standard-mode field.
        legacyItem(4, { encapsulatedKey: 'AAAA' }),
        legacyItem(4),
        legacyItem(1, { context: 'ctx=other' }),
      ],
      { mode: 'legacy' },
    )
    for (const [at, i] of [
      [0, 0],
      [1, 1],
      [2, 2],
      [4, 3],
    ] as const) {
      assert.equal(opened[at].ok, true, `item ${at}: ${JSON.stringify(opened[at])}`)
      assert.ok(unb64(opened[at].plaintext).equals(plaintexts[i]!), `item ${at} comes back`)
      assert.equal(opened[at].keyVersion, 1)
    }
    assertItemFailed(opened[3], 'validation_failed', 'legacy item with encapsulatedKey')
    assertItemFailed(opened[5], 'decryption_failed', 'legacy item with another context')

    // Compact ciphertexts in a standard-mode batch lack the parts: each item fails validation.
    const standard = await decryptBatch([legacyItem(0), legacyItem(4)])
    for (const result of standard)
      assertItemFailed(result, 'validation_failed', 'legacy item in standard mode')

    // A legacy single /decrypt opens a batch's compact ciphertext too.
    const single = await call('POST', '/decrypt', { ...legacyItem(0), mode: 'legacy' })
    assert.equal(single.status, 200, single.text)
    assert.equal(single.body.plaintext, b64(plaintexts[0]!))
  })

  test('scopes: encrypt:invoke alone is 403 on both batch routes; encryption:write may use them', async () => {
    const [envelope] = (await encryptBatch([{ keyId: mlkem, plaintext: b64('scoped') }])) as EncryptOk[]
    const invoker = await createApiKey(['encrypt:invoke'])
    const enc = await call(
      'POST',
      '/encrypt/batch',
      { items: [{ keyId: mlkem, plaintext: b64('x') }] },
      invoker,
    )
    assert.equal(enc.status, 403, enc.text)
    assert.equal(enc.body.error, 'insufficient_scope')
    const dec = await call('POST', '/decrypt/batch', { items: [decryptItem(envelope!)] }, invoker)
    assert.equal(dec.status, 403, dec.text)
    assert.equal(dec.body.error, 'insufficient_scope')
    assert.equal(dec.text.includes(b64('scoped')), false)

    const writer = await createApiKey(['encryption:write'])
    const [sealed] = await encryptBatch([{ keyId: mlkem, plaintext: b64('written') }], {}, writer)
    assertSealed(sealed, mlkem, 1, 'encryption:write')
    const opened = await decryptBatch([decryptItem(sealed), decryptItem(envelope!)], {}, writer)
    assert.deepEqual(
      opened.map((r) => r.plaintext),
      [b64('written'), b64('scoped')],
    )
  })

  test('audit: one record per (key, version, outcome) with item counts, failures with the error, never the data', async () => {
    const own = await svc.createTenant()
    const [k1, k2, sig] = await Promise.all([
      createKey('ML-KEM-768', { isDefault: true }, own),
      createKey('RSA-2048', {}, own),
      createKey('Ed25519', {}, own, 'Signing'),
    ])
    const marker = () => Buffer.from(`PLAINTEXT-MARKER-${randomBytes(8).toString('hex')}`)
    const context = `CONTEXT-MARKER-${randomBytes(8).toString('hex')}`
    const unknown = randomUUID()
    const firstPlaintexts = Array.from({ length: 5 }, marker)
    const first: EncryptItem[] = [
      { keyId: k1, plaintext: b64(firstPlaintexts[0]!), context },
      { keyId: k2, plaintext: b64(firstPlaintexts[1]!), context },
      { keyId: unknown, plaintext: b64(marker()), context },
      { keyId: k1, plaintext: b64(firstPlaintexts[2]!), context },
      { keyId: k1, plaintext: 'not base64!', context },
      { plaintext: b64(firstPlaintexts[3]!), context },
      { keyId: sig, plaintext: b64(marker()), context },
      { keyId: k2, plaintext: b64(firstPlaintexts[4]!), context },
    ]
    const sealedFirst = await encryptBatch(first, {}, own)
    const rotated = await call('POST', `/keys/${k1}/rotate`, undefined, own)
    assert.equal(rotated.status, 200, rotated.text)
    const secondPlaintexts = Array.from({ length: 3 }, marker)
    const sealedSecond = await encryptBatch(
      secondPlaintexts.map((p) => ({ keyId: k1, plaintext: b64(p), context })),
      {},
      own,
    )
    const ok = (results: { ok: boolean }[]) => results.filter((r): r is EncryptOk => r.ok)
    const [a, b, c, d, e] = ok(sealedFirst)
    assert.deepEqual(
      [a, b, c, d, e].map((r) => [r!.keyId, r!.keyVersion]),
      [
        [k1, 1],
        [k2, 1],
        [k1, 1],
        [k1, 1],
        [k2, 1],
      ],
    )
    const decryptItems = [
      ...[a, b, c, d, e, ...ok(sealedSecond)].map((r) => decryptItem(r!, { context })),
      decryptItem(a!, { context: `${context}-wrong` }),
      decryptItem(c!, { context, nonce: '!!!!' }),
      decryptItem(d!, { context, keyId: k2 }),
    ]
    const opened = await decryptBatch(decryptItems, {}, own)
    assert.deepEqual(
      opened.map((r) => r.ok),
      [true, true, true, true, true, true, true, true, false, false, false],
    )

    const rows = async (action: string) =>
      (
        await svc.sql<
          {
            actor: string
            resource: string | null
            key_version: number | null
            outcome: string
            details: { items: number; error?: string }
          }[]
        >`
          SELECT actor, resource, key_version, outcome, details FROM audit_log
          WHERE tenant_id = ${own.tenantId} AND action = ${action}`
      ).map((r) => ({ ...r }))
    /** A row as one comparable string (jsonb reorders an object's keys: they are spelled out here). */
    const sortKey = (r: {
      resource: string | null
      key_version: number | null
      outcome: string
      details: { items: number; error?: string }
    }) => JSON.stringify([r.resource, r.key_version, r.outcome, r.details.items, r.details.error ?? null])
    const expectRows = async (
      action: string,
      items: number,
      expected: [string | null, number | null, { items: number; error?: string }][],
    ) => {
      const found = await rows(action)
      for (const r of found) assert.equal(r.actor, `apikey:${own.apiKeyId}`, action)
      assert.equal(
        found.reduce((sum, r) => sum + r.details.items, 0),
        items,
        `${action}: the counts add up to the items`,
      )
      for (const r of found) {
        if (r.outcome === 'failure')
          assert.equal(typeof r.details.error, 'string', `${action}: ${sortKey(r)}`)
        else assert.equal(r.outcome, 'success')
      }
      assert.deepEqual(
        found.map(sortKey).sort(),
        expected
          .map(([keyId, keyVersion, details]) =>
            sortKey({
              resource: keyId ? `key:${keyId}` : null,
              key_version: keyVersion,
              outcome: details.error ? 'failure' : 'success',
              details,
            }),
          )
          .sort(),
        action,
      )
    }
    await expectRows('crypto.encrypt_batch', first.length + secondPlaintexts.length, [
      [k1, 1, { items: 3 }],
      [k2, 1, { items: 2 }],
      [k1, 2, { items: 3 }],
      [unknown, null, { items: 1, error: 'key_not_found' }],
      [null, null, { items: 1, error: 'validation_failed' }],
      [sig, null, { items: 1, error: 'key_type_mismatch' }],
    ])
    await expectRows('crypto.decrypt_batch', decryptItems.length, [
      [k1, 1, { items: 3 }],
      [k2, 1, { items: 2 }],
      [k1, 2, { items: 3 }],
      [k1, 1, { items: 1, error: 'decryption_failed' }],
      [null, null, { items: 1, error: 'validation_failed' }],
      [k2, null, { items: 1, error: 'decryption_failed' }],
    ])

    const [stored] = await svc.sql<{ text: string }[]>`
      SELECT coalesce(string_agg(a::text, E'\n'), '') AS text FROM audit_log a WHERE tenant_id = ${own.tenantId}`
    const secrets = [
      context,
      b64(context),
      ...[...firstPlaintexts, ...secondPlaintexts].flatMap((p) => [
        p.toString('utf8'),
        b64(p),
        p.toString('hex'),
      ]),
      'PLAINTEXT-MARKER',
      // The first 15 bytes of every marker plaintext, as Base64 (refused items' plaintexts included).
      b64('PLAINTEXT-MARKE'),
    ]
    for (const secret of secrets) {
      assert.equal(stored!.text.includes(secret), false, `audit_log holds ${secret}`)
    }
  })

  test('10 concurrent batches of 200 items all succeed and round-trip', async () => {
    const batches = Array.from({ length: 10 }, (_, b) =>
      Array.from({ length: 200 }, (_, i) =>
        Buffer.from(`batch ${b} item ${i} ${randomBytes(4).toString('hex')}`),
      ),
    )
    const keyFor = (b: number) => (b % 2 === 0 ? mlkem : rsa)
    const sealed = await Promise.all(
      batches.map((plaintexts, b) =>
        encryptBatch(plaintexts.map((p) => ({ keyId: keyFor(b), plaintext: b64(p), context: `batch ${b}` }))),
      ),
    )
    for (const [b, results] of sealed.entries()) {
      for (const [i, result] of results.entries()) assertSealed(result, keyFor(b), 1, `batch ${b} item ${i}`)
    }
    const opened = await Promise.all(
      sealed.map((results, b) => decryptBatch(results.map((r) => decryptItem(r, { context: `batch ${b}` })))),
    )
    for (const [b, results] of opened.entries()) {
      assert.deepEqual(
        results.map((r) => r.plaintext),
        batches[b]!.map((p) => b64(p)),
        `batch ${b} comes back in order`,
      )
    }
  })
})
