import assert from 'node:assert/strict'
import { createHmac, createPublicKey, verify as nodeVerify, randomBytes, randomUUID } from 'node:crypto'
import { after, before, describe, test } from 'node:test'
import { apiClient, b64, unb64, uniqueName } from '../helpers/api-client.ts'
import {
  type HttpResult,
  startTestService,
  type TenantWithKey,
  type TestService,
} from '../helpers/service.ts'

/**
 * The enforcement of API keys restricted to keys and operations (issue 35 item 6; docs/keys.md
 * "Key aliases" and docs/api-keys.md): the key resolver refuses a key outside the list with 403
 * key_not_allowed and an operation outside it with 403 operation_not_allowed, recorded as
 * failures, whichever way the key is reached: path, body keyId, X-Key-Id, the default key, the
 * key an envelope names, batch items, and an alias, also one that moves onto another key. The
 * management routes show a restricted key its own keys and aliases only. Restricted keys are
 * made through POST /api-keys (keys, operations), as a client makes them.
 *
 * Operations that are allowed are checked as well, their results with node:crypto.
 */

let svc: TestService
let tenant: TenantWithKey
const { call, createKey } = apiClient(() => ({ svc, tenant }))

const inPath = (alias: string) => encodeURIComponent(alias)
const ALL_CRYPTO_SCOPES = ['encryption:write', 'encrypt:invoke', 'keys:read', 'keys:write']

/** A restricted API key of the tenant, made through the API; its secret. */
async function restrictedKey(
  keys: string[] | null,
  operations: string[] | null = null,
  scopes: string[] = ALL_CRYPTO_SCOPES,
): Promise<{ key: string; id: string }> {
  const res = await call('POST', '/api-keys', {
    name: uniqueName('restricted'),
    scopes,
    ...(keys ? { keys } : {}),
    ...(operations ? { operations } : {}),
  })
  assert.equal(res.status, 201, res.text)
  return { key: res.body.key, id: res.body.id }
}

async function createAlias(alias: string, keyId: string): Promise<void> {
  const res = await call('POST', '/aliases', { alias, keyId })
  assert.equal(res.status, 201, res.text)
}

function assertRefused(res: HttpResult, error: 'key_not_allowed' | 'operation_not_allowed', what: string) {
  assert.equal(res.status, 403, `${what}: ${res.text}`)
  assert.equal(res.body?.error, error, `${what}: ${res.text}`)
}

const envelopeOf = (body: Record<string, unknown>) => ({
  ciphertext: body['ciphertext'],
  encapsulatedKey: body['encapsulatedKey'],
  nonce: body['nonce'],
  tag: body['tag'],
})

const binary = (path: string, key: string, body: Buffer, headers: Record<string, string> = {}) =>
  fetch(new URL(`/api/v1${path}`, svc.baseUrl), {
    method: 'POST',
    headers: { 'x-api-key': key, 'content-type': 'application/octet-stream', ...headers },
    body,
  })

before(async () => {
  svc = await startTestService()
  tenant = await svc.createTenant()
})
after(async () => {
  await svc?.stop()
})

describe('a key outside the list, however it is reached', () => {
  let allowed: { id: string }
  let forbidden: { id: string }
  let restricted: string
  const forbiddenAlias = `alias/${uniqueName('forbidden')}`

  before(async () => {
    allowed = await createKey('Encryption', 'ML-KEM-768')
    forbidden = await createKey('Encryption', 'ML-KEM-768', { isDefault: true })
    await createAlias(forbiddenAlias, forbidden.id)
    restricted = (await restrictedKey([allowed.id])).key
  })

  test('the allowed key works: encrypt, decrypt, data keys, by id', async () => {
    const encrypted = await call('POST', '/encrypt', { keyId: allowed.id, plaintext: b64('ok') }, restricted)
    assert.equal(encrypted.status, 200, encrypted.text)
    const opened = await call('POST', '/decrypt', envelopeOf(encrypted.body), restricted)
    assert.equal(unb64(opened.body.plaintext).toString(), 'ok', opened.text)
    assert.equal((await call('POST', `/keys/${allowed.id}/data-key`, {}, restricted)).status, 200)
  })

  test('body keyId, by id and by alias', async () => {
    for (const keyId of [forbidden.id, forbiddenAlias]) {
      assertRefused(
        await call('POST', '/encrypt', { keyId, plaintext: b64('x') }, restricted),
        'key_not_allowed',
        `encrypt ${keyId}`,
      )
      assertRefused(
        await call('POST', '/generate-data-key', { keyId }, restricted),
        'key_not_allowed',
        `data key ${keyId}`,
      )
    }
  })

  test('path, on crypto and management routes, by id and by alias', async () => {
    for (const ref of [forbidden.id, inPath(forbiddenAlias)]) {
      for (const [method, path, body] of [
        ['POST', `/keys/${ref}/wrap`, { plaintext: b64(randomBytes(16)) }],
        ['POST', `/keys/${ref}/data-key`, {}],
        ['POST', `/keys/${ref}/unwrap`, { wrappedKey: b64(randomBytes(100)) }],
        ['GET', `/keys/${ref}`, undefined],
        ['GET', `/keys/${ref}/versions`, undefined],
        ['GET', `/keys/${ref}/public`, undefined],
        ['PATCH', `/keys/${ref}`, { description: 'mine now' }],
        ['POST', `/keys/${ref}/rotate`, undefined],
        ['DELETE', `/keys/${ref}`, undefined],
      ] as const) {
        assertRefused(await call(method, path, body, restricted), 'key_not_allowed', `${method} ${path}`)
      }
    }
    const view = await call('GET', `/keys/${forbidden.id}`)
    assert.equal(view.body.version, 1, 'not rotated')
    assert.equal(view.body.state, 'Active', 'not scheduled for deletion')
    assert.equal(view.body.description, '')
  })

  test('X-Key-Id on binary encrypt and binary batches', async () => {
    for (const keyId of [forbidden.id, forbiddenAlias]) {
      const res = await binary('/encrypt', restricted, Buffer.from('x'), { 'x-key-id': keyId })
      assert.equal(res.status, 403)
      assert.equal(((await res.json()) as { error: string }).error, 'key_not_allowed')
    }
    const body = Buffer.alloc(4 + 4 + 1 + 2)
    body.writeUInt32BE(1, 0)
    body.writeUInt32BE(1, 4)
    const batch = await binary('/encrypt/batch', restricted, body, { 'x-key-id': forbidden.id })
    assert.equal(batch.status, 200)
    const answer = Buffer.from(await batch.arrayBuffer())
    assert.equal(answer[4], 1, 'the item failed')
    const error = JSON.parse(answer.subarray(7, 7 + answer.readUInt16BE(5)).toString())
    assert.equal(error.error, 'key_not_allowed')
  })

  test('the default key, when no keyId is given', async () => {
    assertRefused(
      await call('POST', '/encrypt', { plaintext: b64('x') }, restricted),
      'key_not_allowed',
      'default key outside the list',
    )
    assertRefused(await call('POST', '/generate-data-key', {}, restricted), 'key_not_allowed', 'data key')
    const defaultAllowed = (await restrictedKey([forbidden.id])).key
    const res = await call('POST', '/encrypt', { plaintext: b64('x') }, defaultAllowed)
    assert.equal(res.status, 200, res.text)
    assert.equal(res.body.keyId, forbidden.id)
  })

  test('decrypt of an envelope of another key: the key the envelope names decides', async () => {
    const foreign = await call('POST', '/encrypt', { keyId: forbidden.id, plaintext: b64('secret') })
    assert.equal(foreign.status, 200)
    for (const keyId of [undefined, forbidden.id, allowed.id, forbiddenAlias]) {
      const res = await call(
        'POST',
        '/decrypt',
        { ...envelopeOf(foreign.body), ...(keyId ? { keyId } : {}) },
        restricted,
      )
      if (keyId === allowed.id) {
        // A cross-check naming another key than the envelope's fails first, as any mismatch.
        assert.equal(res.body.error, 'decryption_failed', res.text)
      } else assertRefused(res, 'key_not_allowed', `decrypt with keyId ${keyId}`)
      assert.ok(!res.text.includes(b64('secret')))
    }
    const compact = await binary('/encrypt', tenant.key, Buffer.from('binary secret'), {
      'x-key-id': forbidden.id,
    })
    const refused = await binary('/decrypt', restricted, Buffer.from(await compact.arrayBuffer()))
    assert.equal(refused.status, 403)
    // Wrapped material of another key cannot be unwrapped through an allowed path either.
    const wrapped = await call('POST', `/keys/${forbidden.id}/wrap`, { plaintext: b64(randomBytes(32)) })
    const unwrap = await call(
      'POST',
      `/keys/${allowed.id}/unwrap`,
      { wrappedKey: wrapped.body.wrappedKey },
      restricted,
    )
    assert.equal(unwrap.body.error, 'decryption_failed', unwrap.text)
  })

  test('batch items: each item is refused on its own, the allowed ones succeed', async () => {
    const batch = await call(
      'POST',
      '/encrypt/batch',
      {
        items: [
          { keyId: allowed.id, plaintext: b64('a') },
          { keyId: forbidden.id, plaintext: b64('b') },
          { keyId: forbiddenAlias, plaintext: b64('c') },
          { plaintext: b64('d') },
        ],
      },
      restricted,
    )
    assert.equal(batch.status, 200, batch.text)
    assert.deepEqual(
      batch.body.results.map((r: { ok: boolean; error?: string }) => (r.ok ? 'ok' : r.error)),
      ['ok', 'key_not_allowed', 'key_not_allowed', 'key_not_allowed'],
    )
    const foreign = await call('POST', '/encrypt', { keyId: forbidden.id, plaintext: b64('f') })
    const opened = await call(
      'POST',
      '/decrypt/batch',
      { items: [envelopeOf(batch.body.results[0]), envelopeOf(foreign.body)] },
      restricted,
    )
    assert.deepEqual(
      opened.body.results.map((r: { ok: boolean; error?: string; plaintext?: string }) =>
        r.ok ? unb64(r.plaintext!).toString() : r.error,
      ),
      ['a', 'key_not_allowed'],
    )
  })

  test('refusals are recorded as failures against the key refused, with the code', async () => {
    const audited = await restrictedKey([allowed.id])
    await call('POST', '/encrypt', { keyId: forbiddenAlias, plaintext: b64('x') }, audited.key)
    await call('POST', '/encrypt', { plaintext: b64('x') }, audited.key)
    const unknown = randomUUID()
    await call('POST', '/encrypt', { keyId: unknown, plaintext: b64('x') }, audited.key)
    const rows = await svc.sql<
      { resource: string | null; outcome: string; details: Record<string, unknown> }[]
    >`
      SELECT resource, outcome, details FROM audit_log
      WHERE tenant_id = ${tenant.tenantId} AND actor = ${`apikey:${audited.id}`} AND action = 'crypto.encrypt'
      ORDER BY id`
    assert.equal(rows.length, 3)
    assert.deepEqual(
      rows.map((r) => [r.outcome, r.details['error']]),
      [
        ['failure', 'key_not_allowed'],
        ['failure', 'key_not_allowed'],
        ['failure', 'key_not_allowed'],
      ],
    )
    assert.deepEqual(
      rows.map((r) => r.resource),
      // By alias, by the default rule (the key it resolved to), and an id that names no key.
      [`key:${forbidden.id}`, `key:${forbidden.id}`, `key:${unknown}`],
    )
    assert.equal(rows[0]!.details['alias'], forbiddenAlias)
  })

  test('an unknown key or alias is key_not_allowed too: nothing tells which keys exist', async () => {
    for (const keyId of [randomUUID(), `alias/${uniqueName('nothing')}`]) {
      assertRefused(
        await call('POST', '/encrypt', { keyId, plaintext: b64('x') }, restricted),
        'key_not_allowed',
        `encrypt ${keyId}`,
      )
      const path = keyId.startsWith('alias/') ? inPath(keyId) : keyId
      assertRefused(await call('GET', `/keys/${path}`, undefined, restricted), 'key_not_allowed', 'get')
    }
    assertRefused(
      await call('GET', `/aliases/${inPath(`alias/${uniqueName('nothing')}`)}`, undefined, restricted),
      'key_not_allowed',
      'alias read',
    )
  })
})

describe('aliases in and out of a restriction', () => {
  test('an alias that moved onto a forbidden key is refused (the list names the key by id)', async () => {
    const mine = await createKey('Signing', 'Ed25519')
    const notMine = await createKey('Signing', 'Ed25519')
    const alias = `alias/${uniqueName('moving')}`
    await createAlias(alias, mine.id)
    const restricted = (await restrictedKey([mine.id])).key
    const message = randomBytes(32)
    const signed = await call('POST', '/sign', { keyId: alias, message: b64(message) }, restricted)
    assert.equal(signed.status, 200, signed.text)
    assert.equal(signed.body.keyId, mine.id)
    const pem = await call('GET', `/keys/${mine.id}/public?format=PEM`, undefined, restricted)
    assert.ok(nodeVerify(null, message, createPublicKey(pem.body.publicKey), unb64(signed.body.signature)))

    const moved = await call('PATCH', `/aliases/${inPath(alias)}`, { keyId: notMine.id })
    assert.equal(moved.status, 200, moved.text)
    assertRefused(
      await call('POST', '/sign', { keyId: alias, message: b64(message) }, restricted),
      'key_not_allowed',
      'the alias now names another key',
    )
    assertRefused(
      await call(
        'POST',
        '/verify',
        { keyId: alias, message: b64(message), signature: signed.body.signature },
        restricted,
      ),
      'key_not_allowed',
      'verify through the moved alias',
    )
    assert.equal((await call('POST', '/sign', { keyId: mine.id, message: b64('m') }, restricted)).status, 200)
  })

  test('an alias in the list follows the alias (AWS KMS alias conditions): the key it names now', async () => {
    const first = await createKey('HMAC', 'HMAC-SHA256')
    const secret = randomBytes(32)
    const second = await call('POST', '/keys/import', {
      name: uniqueName('hmac'),
      keyType: 'HMAC',
      algorithm: 'HMAC-SHA256',
      format: 'RAW',
      keyMaterial: b64(secret),
    })
    assert.equal(second.status, 201, second.text)
    const alias = `alias/${uniqueName('follow')}`
    await createAlias(alias, first.id)
    const restricted = (await restrictedKey([alias], ['mac', 'mac_verify'])).key
    assert.equal((await call('POST', `/keys/${first.id}/mac`, { data: b64('d') }, restricted)).status, 200)
    assert.equal((await call('PATCH', `/aliases/${inPath(alias)}`, { keyId: second.body.id })).status, 200)
    assertRefused(
      await call('POST', `/keys/${first.id}/mac`, { data: b64('d') }, restricted),
      'key_not_allowed',
      'the key the alias no longer names',
    )
    const data = randomBytes(40)
    const mac = await call('POST', `/keys/${second.body.id}/mac`, { data: b64(data) }, restricted)
    assert.equal(mac.status, 200, mac.text)
    assert.deepEqual(unb64(mac.body.mac), createHmac('sha256', secret).update(data).digest())
  })

  test('a restricted key cannot move an alias of its key onto another key, nor alias a key outside its list', async () => {
    const mine = await createKey('Encryption', 'ML-KEM-768')
    const notMine = await createKey('Encryption', 'ML-KEM-768')
    const alias = `alias/${uniqueName('pinned')}`
    await createAlias(alias, mine.id)
    const restricted = (await restrictedKey([alias])).key
    assertRefused(
      await call('PATCH', `/aliases/${inPath(alias)}`, { keyId: notMine.id }, restricted),
      'key_not_allowed',
      'move out of the list',
    )
    assertRefused(
      await call('POST', '/aliases', { alias: `alias/${uniqueName('mine')}`, keyId: notMine.id }, restricted),
      'key_not_allowed',
      'alias a key outside the list',
    )
    const own = await call(
      'POST',
      '/aliases',
      { alias: `alias/${uniqueName('mine')}`, keyId: mine.id },
      restricted,
    )
    assert.equal(own.status, 201, own.text)
    assert.equal((await call('GET', `/aliases/${inPath(alias)}`)).body.keyId, mine.id)
  })
})

describe('operations outside the list', () => {
  test('operation_not_allowed, before any key lookup; the listed operations work', async () => {
    const key = await createKey('Encryption', 'ML-KEM-768')
    const signing = await createKey('Signing', 'Ed25519')
    const encryptOnly = (await restrictedKey(null, ['encrypt'])).key
    const encrypted = await call('POST', '/encrypt', { keyId: key.id, plaintext: b64('x') }, encryptOnly)
    assert.equal(encrypted.status, 200, encrypted.text)
    assertRefused(
      await call('POST', '/decrypt', envelopeOf(encrypted.body), encryptOnly),
      'operation_not_allowed',
      'decrypt',
    )
    for (const [path, body] of [
      ['/sign', { keyId: signing.id, message: b64('m') }],
      ['/generate-data-key', { keyId: key.id }],
      [`/keys/${key.id}/wrap`, { plaintext: b64(randomBytes(16)) }],
      [`/keys/${randomUUID()}/data-key`, {}],
    ] as const) {
      assertRefused(await call('POST', path, body, encryptOnly), 'operation_not_allowed', path)
    }
    const [record] = await svc.sql<{ details: Record<string, unknown> }[]>`
      SELECT details FROM audit_log WHERE tenant_id = ${tenant.tenantId} AND action = 'crypto.sign'
        AND resource = ${`key:${signing.id}`} AND outcome = 'failure' AND details->>'error' = 'operation_not_allowed'`
    assert.ok(record, 'the refusal is recorded')
  })
})

describe('management views of a restricted key', () => {
  test('GET /keys and GET /aliases list the keys of the list and their aliases only', async () => {
    const a = await createKey('Encryption', 'ML-KEM-768')
    const b = await createKey('Signing', 'Ed25519')
    const hidden = await createKey('Encryption', 'ML-KEM-768')
    const aliasOfB = `alias/${uniqueName('b')}`
    const aliasOfHidden = `alias/${uniqueName('hidden')}`
    await createAlias(aliasOfB, b.id)
    await createAlias(aliasOfHidden, hidden.id)
    const restricted = (await restrictedKey([a.id, aliasOfB])).key
    const listed = await call('GET', '/keys?limit=1000', undefined, restricted)
    assert.equal(listed.status, 200, listed.text)
    assert.deepEqual(listed.body.data.map((k: { id: string }) => k.id).sort(), [a.id, b.id].sort())
    assert.equal(listed.body.total, 2)
    const aliases = await call('GET', '/aliases?limit=1000', undefined, restricted)
    assert.deepEqual(
      aliases.body.data.map((x: { alias: string }) => x.alias),
      [aliasOfB],
    )
    assertRefused(
      await call('GET', `/aliases?keyId=${hidden.id}`, undefined, restricted),
      'key_not_allowed',
      'aliases of a hidden key',
    )
    assertRefused(
      await call('GET', `/aliases/${inPath(aliasOfHidden)}`, undefined, restricted),
      'key_not_allowed',
      'a hidden alias',
    )
    const unrestricted = await call('GET', '/keys?limit=1000')
    assert.ok(unrestricted.body.data.some((k: { id: string }) => k.id === hidden.id))
  })
})
