import assert from 'node:assert/strict'
import { createHmac, createPublicKey, verify as nodeVerify, randomBytes, randomUUID } from 'node:crypto'
import { after, before, describe, test } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { DAY_MS } from '../../src/platform/clock.ts'
import { apiClient, b64, unb64, uniqueName } from '../helpers/api-client.ts'
import { type ManualClock, manualClock } from '../helpers/manual-clock.ts'
import {
  type HttpResult,
  httpRequest,
  type SpawnedService,
  spawnService,
  startTestService,
  type TenantWithKey,
  type TestService,
} from '../helpers/service.ts'

/**
 * Key aliases (docs/keys.md "Key aliases") over real HTTP, PostgreSQL and Redis: the /aliases
 * routes; an alias wherever a key id is (path, body keyId, X-Key-Id; management and crypto
 * routes), answers always carrying the key id; the cross-checks; rotation by alias and moving an
 * alias (AWS KMS's manual rotation), also while the alias is in use; the naming rules and the
 * attacks on them (another tenant's alias, traversal-like names, the reserved prefix, long
 * names); the audit records; destruction; scopes; and a move followed by a second API process
 * that caches key rows and aliases for 600 s (only the invalidation bus can explain it).
 *
 * Signatures and MACs made through an alias are checked with node:crypto.
 */

let svc: TestService
let other: SpawnedService
let clock: ManualClock
let tenant: TenantWithKey
const { call, createKey } = apiClient(() => ({ svc, tenant }))

/** An alias in a path: URL-encoded, `/` as %2F. */
const inPath = (alias: string) => encodeURIComponent(alias)
const newAlias = (prefix = 'app') => `alias/${uniqueName(prefix)}`

async function createAlias(alias: string, keyId: string, by?: TenantWithKey): Promise<HttpResult> {
  const res = await call('POST', '/aliases', { alias, keyId }, by)
  assert.equal(res.status, 201, res.text)
  return res
}

const envelopeOf = (body: Record<string, unknown>) => ({
  ciphertext: body['ciphertext'],
  encapsulatedKey: body['encapsulatedKey'],
  nonce: body['nonce'],
  tag: body['tag'],
})

async function encrypt(keyId: string | undefined, plaintext = 'hello', by?: TenantWithKey) {
  return call('POST', '/encrypt', { ...(keyId ? { keyId } : {}), plaintext: b64(plaintext) }, by)
}

function assertError(res: HttpResult, status: number, error: string, what: string): void {
  assert.equal(res.status, status, `${what}: ${res.text}`)
  assert.equal(res.body?.error, error, `${what}: ${res.text}`)
}

before(async () => {
  clock = manualClock()
  svc = await startTestService({ KMS_KEY_CACHE_TTL_MS: '600000' }, { clock })
  other = await spawnService({ ...svc.env, KMS_KEY_CACHE_TTL_MS: '600000' })
  tenant = await svc.createTenant()
})
after(async () => {
  await other?.stop()
  await svc?.stop()
})

describe('the /aliases routes', () => {
  test('an alias names its key: created (201), read back, in the key view, and the key found by it', async () => {
    const key = await createKey('Encryption', 'ML-KEM-768')
    const alias = newAlias('payments')
    const created = await createAlias(alias, key.id)
    assert.equal(created.body.alias, alias)
    assert.equal(created.body.keyId, key.id)
    assert.equal(created.body.createdAt, created.body.updatedAt)

    const read = await call('GET', `/aliases/${inPath(alias)}`)
    assert.equal(read.status, 200, read.text)
    assert.deepEqual(read.body, created.body)

    const view = await call('GET', `/keys/${inPath(alias)}`)
    assert.equal(view.status, 200, view.text)
    assert.equal(view.body.id, key.id, 'the answer carries the key id, not the alias')
    assert.deepEqual(view.body.aliases, [alias])
    const byId = await call('GET', `/keys/${key.id}`)
    assert.deepEqual(byId.body.aliases, [alias])
    const listed = await call('GET', `/keys?search=${key.name}`)
    assert.deepEqual(
      listed.body.data.map((k: { aliases: string[] }) => k.aliases),
      [[alias]],
    )
  })

  test('the list is in alias order, filtered by key (by id or alias), paginated by cursor', async () => {
    const key = await createKey('Signing', 'Ed25519')
    const otherKey = await createKey('Signing', 'Ed25519')
    const base = `alias/${uniqueName('list')}`
    // Byte order: upper case before lower case, '-' before digits.
    const names = [`${base}/b`, `${base}/A`, `${base}/a`, `${base}/-z`, `${base}/0`]
    for (const name of names) await createAlias(name, key.id)
    await createAlias(`${base}/other`, otherKey.id)
    const expected = [...names].sort((x, y) => (Buffer.from(x) < Buffer.from(y) ? -1 : 1))

    for (const filter of [key.id, names[0]!]) {
      const seen: string[] = []
      let cursor: string | null = null
      let pages = 0
      do {
        const query: string = `keyId=${encodeURIComponent(filter)}&limit=2${cursor ? `&cursor=${cursor}` : ''}`
        const page = await call('GET', `/aliases?${query}`)
        assert.equal(page.status, 200, page.text)
        assert.ok(page.body.data.length <= 2)
        for (const item of page.body.data) assert.equal(item.keyId, key.id)
        seen.push(...page.body.data.map((a: { alias: string }) => a.alias))
        cursor = page.body.nextCursor
        pages++
      } while (cursor && pages < 10)
      assert.deepEqual(seen, expected, `filtered by ${filter}`)
      assert.equal(pages, 3)
    }
    const all = await call('GET', '/aliases?limit=1000')
    assert.ok(all.body.data.some((a: { alias: string }) => a.alias === `${base}/other`))
    assertError(await call('GET', '/aliases?cursor=bm90LWFuLWFsaWFz'), 400, 'invalid_cursor', 'forged cursor')
  })

  test('names: the character set, 1 to 250 characters, case-sensitive, unique, alias/kms/ reserved', async () => {
    const key = await createKey('Encryption', 'ML-KEM-768')
    for (const bad of [
      'alias/../x',
      'alias/a.b',
      'alias/',
      'payments',
      'alias/a b',
      'alias/a%2Fb',
      'alias/é',
      'ALIAS/x',
      `alias/${'a'.repeat(251)}`,
    ]) {
      const res = await call('POST', '/aliases', { alias: bad, keyId: key.id })
      assertError(res, 400, 'validation_failed', bad)
      assert.equal(res.body.fields[0].path, 'body/alias', bad)
    }
    assertError(
      await call('POST', '/aliases', { alias: 'alias/kms/default', keyId: key.id }),
      400,
      'alias_reserved',
      'reserved prefix',
    )
    const longest = `alias/${uniqueName('l')}${'x'.repeat(250 - 10)}`
    assert.equal(longest.length, 256)
    await createAlias(longest, key.id)
    assert.equal((await call('GET', `/aliases/${inPath(longest)}`)).status, 200)
    assert.equal((await encrypt(longest)).body.keyId, key.id)

    const name = uniqueName('Case')
    const upper = `alias/${name}`
    const lower = `alias/${name.toLowerCase()}`
    const second = await createKey('Encryption', 'ML-KEM-768')
    await createAlias(upper, key.id)
    await createAlias(lower, second.id)
    assert.equal((await encrypt(upper)).body.keyId, key.id, 'case-sensitive: the upper-case alias')
    assert.equal((await encrypt(lower)).body.keyId, second.id, 'case-sensitive: the lower-case alias')
    assertError(
      await call('POST', '/aliases', { alias: upper, keyId: second.id }),
      409,
      'alias_exists',
      'dup',
    )
    assertError(
      await call('POST', '/aliases', { alias: newAlias(), keyId: randomUUID() }),
      404,
      'key_not_found',
      'unknown key',
    )
    assertError(
      await call('POST', '/aliases', { alias: newAlias(), keyId: 'alias/nothing-here' }),
      404,
      'key_not_found',
      'an alias naming nothing as the target',
    )
  })

  test('paths: an alias is URL-encoded; a traversal or a double encoding names nothing', async () => {
    const key = await createKey('Encryption', 'ML-KEM-768')
    const alias = newAlias('path')
    await createAlias(alias, key.id)
    const name = alias.slice('alias/'.length)
    // Unencoded, the alias is more path segments: no such route.
    assert.equal((await call('GET', `/keys/${alias}`)).status, 404)
    assert.equal((await call('GET', `/keys/alias%2F${name}`)).body.id, key.id)
    assert.equal((await call('GET', `/keys/alias%2f${name}`)).body.id, key.id, 'lower-case percent-encoding')
    for (const path of [
      `/keys/alias%252F${name}`,
      `/keys/alias%2F..%2F${name}`,
      `/keys/alias%2F%2E%2E`,
      `/aliases/alias%2F..%2F${name}`,
      `/aliases/${name}`,
    ]) {
      const res = await call('GET', path)
      assertError(res, 400, 'validation_failed', path)
    }
    const traversal = await call('POST', `/keys/alias%2F..%2F${name}/mac`, { data: b64('x') })
    assertError(traversal, 400, 'validation_failed', 'traversal on a crypto route')
  })

  test('a key carries at most 50 aliases (409 too_many_aliases)', async () => {
    const key = await createKey('HMAC', 'HMAC-SHA256')
    const base = `alias/${uniqueName('many')}`
    for (let i = 0; i < 50; i++) await createAlias(`${base}/${i}`, key.id)
    assertError(
      await call('POST', '/aliases', { alias: `${base}/50`, keyId: key.id }),
      409,
      'too_many_aliases',
      '51st',
    )
    const view = await call('GET', `/keys/${key.id}`)
    assert.equal(view.body.aliases.length, 50)
    // Moving another alias onto the full key is refused alike.
    const spare = await createKey('HMAC', 'HMAC-SHA256')
    await createAlias(`${base}-spare`, spare.id)
    assertError(
      await call('PATCH', `/aliases/${inPath(`${base}-spare`)}`, { keyId: key.id }),
      409,
      'too_many_aliases',
      'move onto a full key',
    )
  })

  test('deleting an alias (204) leaves its key; the alias then names nothing anywhere', async () => {
    const key = await createKey('Encryption', 'ML-KEM-768')
    const alias = newAlias('gone')
    await createAlias(alias, key.id)
    const deleted = await call('DELETE', `/aliases/${inPath(alias)}`)
    assert.equal(deleted.status, 204, deleted.text)
    assertError(await call('GET', `/aliases/${inPath(alias)}`), 404, 'alias_not_found', 'read')
    assertError(await call('DELETE', `/aliases/${inPath(alias)}`), 404, 'alias_not_found', 'again')
    assertError(await call('GET', `/keys/${inPath(alias)}`), 404, 'key_not_found', 'path')
    assertError(await encrypt(alias), 404, 'key_not_found', 'body')
    const view = await call('GET', `/keys/${key.id}`)
    assert.equal(view.body.state, 'Active')
    assert.deepEqual(view.body.aliases, [])
  })
})

describe('an alias wherever a key id is', () => {
  test('body keyId: encrypt, decrypt, data keys and batches answer with the key id', async () => {
    const key = await createKey('Encryption', 'ML-KEM-768')
    const alias = newAlias('enc')
    await createAlias(alias, key.id)

    const encrypted = await encrypt(alias, 'by alias')
    assert.equal(encrypted.status, 200, encrypted.text)
    assert.equal(encrypted.body.keyId, key.id)
    for (const keyId of [undefined, key.id, key.id.toUpperCase(), alias]) {
      const opened = await call('POST', '/decrypt', {
        ...envelopeOf(encrypted.body),
        ...(keyId ? { keyId } : {}),
      })
      assert.equal(opened.status, 200, `${keyId}: ${opened.text}`)
      assert.equal(unb64(opened.body.plaintext).toString(), 'by alias')
      assert.equal(opened.body.keyId, key.id)
    }

    const dataKey = await call('POST', '/generate-data-key', { keyId: alias })
    assert.equal(dataKey.status, 200, dataKey.text)
    assert.equal(dataKey.body.keyId, key.id)
    const unwrapped = await call('POST', `/keys/${inPath(alias)}/unwrap`, dataKey.body)
    assert.equal(unwrapped.status, 200, unwrapped.text)
    assert.equal(unwrapped.body.plaintext, dataKey.body.plaintextDek)

    const batch = await call('POST', '/encrypt/batch', {
      items: [
        { keyId: alias, plaintext: b64('one') },
        { keyId: key.id, plaintext: b64('two') },
      ],
    })
    assert.equal(batch.status, 200, batch.text)
    assert.deepEqual(
      batch.body.results.map((r: { ok: boolean; keyId: string }) => [r.ok, r.keyId]),
      [
        [true, key.id],
        [true, key.id],
      ],
    )
    const opened = await call('POST', '/decrypt/batch', {
      items: batch.body.results.map((r: Record<string, unknown>) => ({ ...envelopeOf(r), keyId: alias })),
    })
    assert.deepEqual(
      opened.body.results.map((r: { plaintext: string }) => unb64(r.plaintext).toString()),
      ['one', 'two'],
    )
  })

  test('sign and verify by alias; the signature checks out with node:crypto', async () => {
    const key = await createKey('Signing', 'Ed25519')
    const alias = newAlias('sig')
    await createAlias(alias, key.id)
    const message = randomBytes(64)
    const signed = await call('POST', '/sign', { keyId: alias, message: b64(message) })
    assert.equal(signed.status, 200, signed.text)
    assert.equal(signed.body.keyId, key.id)
    const verified = await call('POST', '/verify', {
      keyId: alias,
      message: b64(message),
      signature: signed.body.signature,
    })
    assert.equal(verified.body.valid, true, verified.text)
    assert.equal(verified.body.keyId, key.id)
    const pem = await call('GET', `/keys/${inPath(alias)}/public?format=PEM`)
    assert.equal(pem.status, 200, pem.text)
    assert.ok(nodeVerify(null, message, createPublicKey(pem.body.publicKey), unb64(signed.body.signature)))
  })

  test('path: MAC and MAC verify by alias (checked with node:crypto), wrap, unwrap and data keys', async () => {
    const secret = randomBytes(32)
    const imported = await call('POST', '/keys/import', {
      name: uniqueName('hmac'),
      keyType: 'HMAC',
      algorithm: 'HMAC-SHA256',
      format: 'RAW',
      keyMaterial: b64(secret),
    })
    assert.equal(imported.status, 201, imported.text)
    const hmacAlias = newAlias('mac')
    await createAlias(hmacAlias, imported.body.id)
    const data = randomBytes(100)
    const mac = await call('POST', `/keys/${inPath(hmacAlias)}/mac`, { data: b64(data) })
    assert.equal(mac.status, 200, mac.text)
    assert.equal(mac.body.keyId, imported.body.id)
    assert.deepEqual(unb64(mac.body.mac), createHmac('sha256', secret).update(data).digest())
    const checked = await call('POST', `/keys/${inPath(hmacAlias)}/mac/verify`, {
      ...mac.body,
      data: b64(data),
    })
    assert.equal(checked.body.valid, true, checked.text)

    const key = await createKey('Encryption', 'RSA-3072')
    const alias = newAlias('wrap')
    await createAlias(alias, key.id)
    const material = randomBytes(48)
    const wrapped = await call('POST', `/keys/${inPath(alias)}/wrap`, { plaintext: b64(material) })
    assert.equal(wrapped.status, 200, wrapped.text)
    assert.equal(wrapped.body.keyId, key.id)
    // The wrap answer (key id in it) passed back to the alias path: both name the key.
    const unwrapped = await call('POST', `/keys/${inPath(alias)}/unwrap`, wrapped.body)
    assert.equal(unwrapped.status, 200, unwrapped.text)
    assert.deepEqual(unb64(unwrapped.body.plaintext), material)
    const dataKey = await call('POST', `/keys/${inPath(alias)}/data-key`, { keyBytes: 16 })
    assert.equal(dataKey.body.keyId, key.id)
    assert.equal(unb64(dataKey.body.plaintextDek).length, 16)
  })

  test('management by alias: read, update, versions, public key, rotate, schedule and cancel deletion', async () => {
    const key = await createKey('Signing', 'EC-P256')
    const alias = newAlias('mgmt')
    await createAlias(alias, key.id)
    const path = `/keys/${inPath(alias)}`
    const patched = await call('PATCH', path, { description: 'named by alias' })
    assert.equal(patched.status, 200, patched.text)
    assert.equal(patched.body.id, key.id)
    assert.equal(patched.body.description, 'named by alias')
    assert.deepEqual(patched.body.aliases, [alias])
    const versions = await call('GET', `${path}/versions`)
    assert.equal(versions.status, 200, versions.text)
    assert.equal(versions.body.data.length, 1)
    const download = await svc.request('GET', `/api/v1${path}/public/download?format=PEM`, {
      key: tenant.key,
    })
    assert.equal(download.status, 200, download.text)
    assert.match(download.text, /BEGIN PUBLIC KEY/)
    const scheduled = await call('DELETE', `${path}?pendingWindowDays=7`)
    assert.equal(scheduled.body.state, 'Pending Deletion', scheduled.text)
    const cancelled = await call('POST', `${path}/cancel-deletion`)
    assert.equal(cancelled.body.state, 'Active', cancelled.text)
    const rows = await svc.sql<{ action: string; resource: string; details: Record<string, unknown> }[]>`
      SELECT action, resource, details FROM audit_log
      WHERE tenant_id = ${tenant.tenantId} AND action IN ('keys.update', 'keys.schedule_deletion')
        AND resource = ${`key:${key.id}`} ORDER BY id`
    assert.deepEqual(
      rows.map((r) => [r.action, r.resource, r.details['alias']]),
      [
        ['keys.update', `key:${key.id}`, alias],
        ['keys.schedule_deletion', `key:${key.id}`, alias],
      ],
    )
  })

  test('X-Key-Id: binary encrypt, decrypt and encrypt batches take an alias and answer with the key id', async () => {
    const key = await createKey('Encryption', 'ML-KEM-512')
    const alias = newAlias('bin')
    await createAlias(alias, key.id)
    const binary = (path: string, body: Buffer, headers: Record<string, string>) =>
      fetch(new URL(`/api/v1${path}`, svc.baseUrl), {
        method: 'POST',
        headers: { 'x-api-key': tenant.key, 'content-type': 'application/octet-stream', ...headers },
        body,
      })
    const sealed = await binary('/encrypt', Buffer.from('raw bytes'), { 'x-key-id': alias })
    assert.equal(sealed.status, 200, await sealed.clone().text())
    assert.equal(sealed.headers.get('x-key-id'), key.id)
    const envelope = Buffer.from(await sealed.arrayBuffer())
    const opened = await binary('/decrypt', envelope, { 'x-key-id': alias })
    assert.equal(opened.status, 200)
    assert.equal(opened.headers.get('x-key-id'), key.id)
    assert.equal(Buffer.from(await opened.arrayBuffer()).toString(), 'raw bytes')

    // count, then per item: data length, data, context length, context.
    const item = Buffer.from('batched')
    const body = Buffer.alloc(4 + 4 + item.length + 2)
    body.writeUInt32BE(1, 0)
    body.writeUInt32BE(item.length, 4)
    item.copy(body, 8)
    const batch = await binary('/encrypt/batch', body, { 'x-key-id': alias })
    assert.equal(batch.status, 200)
    const answer = Buffer.from(await batch.arrayBuffer())
    assert.equal(answer.readUInt32BE(0), 1)
    assert.equal(answer[4], 0, 'item ok')
    assert.equal(answer.subarray(5, 21).toString('hex'), key.id.replaceAll('-', ''))
  })

  test('cross-checks: a second reference naming another key is refused, naming the same key passes', async () => {
    const key = await createKey('Encryption', 'ML-KEM-768')
    const otherKey = await createKey('Encryption', 'ML-KEM-768')
    const alias = newAlias('x')
    const otherAlias = newAlias('y')
    await createAlias(alias, key.id)
    await createAlias(otherAlias, otherKey.id)
    const encrypted = await encrypt(key.id)
    for (const keyId of [otherAlias, 'alias/names-nothing']) {
      assertError(
        await call('POST', '/decrypt', { ...envelopeOf(encrypted.body), keyId }),
        400,
        'decryption_failed',
        `decrypt cross-check ${keyId}`,
      )
    }
    const wrapped = await call('POST', `/keys/${key.id}/wrap`, { plaintext: b64(randomBytes(16)) })
    for (const [path, keyId] of [
      [`/keys/${inPath(alias)}/unwrap`, otherKey.id],
      [`/keys/${key.id}/unwrap`, otherAlias],
    ] as const) {
      const res = await call('POST', path, { ...wrapped.body, keyId })
      assertError(res, 400, 'validation_failed', `${path} with ${keyId}`)
      assert.equal(res.body.fields[0].path, 'body/keyId')
    }
    const sameKey = await call('POST', `/keys/${key.id}/unwrap`, { ...wrapped.body, keyId: alias })
    assert.equal(sameKey.status, 200, sameKey.text)

    const hmac = await createKey('HMAC', 'HMAC-SHA256')
    const hmacAlias = newAlias('h')
    await createAlias(hmacAlias, hmac.id)
    const mac = await call('POST', `/keys/${hmac.id}/mac`, { data: b64('d') })
    const mismatch = await call('POST', `/keys/${inPath(hmacAlias)}/mac/verify`, {
      ...mac.body,
      data: b64('d'),
      keyId: otherAlias,
    })
    assertError(mismatch, 400, 'validation_failed', 'mac verify cross-check')
    const matching = await call('POST', `/keys/${inPath(hmacAlias)}/mac/verify`, {
      ...mac.body,
      data: b64('d'),
    })
    assert.equal(matching.body.valid, true, matching.text)
  })

  test('an alias of a key of another type is refused as the key id would be', async () => {
    const signing = await createKey('Signing', 'Ed25519')
    const alias = newAlias('wrongtype')
    await createAlias(alias, signing.id)
    assertError(await encrypt(alias), 400, 'key_type_mismatch', 'encrypt with a signing alias')
    assertError(
      await call('POST', `/keys/${inPath(alias)}/mac`, { data: b64('x') }),
      400,
      'key_type_mismatch',
      'mac with a signing alias',
    )
  })

  test('a key id in upper case still names the key (path and body)', async () => {
    const key = await createKey('Encryption', 'ML-KEM-768')
    const upper = key.id.toUpperCase()
    assert.equal((await call('GET', `/keys/${upper}`)).body.id, key.id)
    assert.equal((await encrypt(upper)).body.keyId, key.id)
    assert.equal((await call('POST', `/keys/${upper}/data-key`, {})).body.keyId, key.id)
  })
})

describe('moving an alias (rotation by alias)', () => {
  test('rotating by alias rotates the key the alias names', async () => {
    const key = await createKey('Encryption', 'ML-KEM-768')
    const alias = newAlias('rot')
    await createAlias(alias, key.id)
    const before = await encrypt(alias)
    const rotated = await call('POST', `/keys/${inPath(alias)}/rotate`)
    assert.equal(rotated.status, 200, rotated.text)
    assert.equal(rotated.body.id, key.id)
    assert.equal(rotated.body.version, 2)
    const afterwards = await encrypt(alias)
    assert.deepEqual([afterwards.body.keyId, afterwards.body.keyVersion], [key.id, 2])
    const opened = await call('POST', '/decrypt', { ...envelopeOf(before.body), keyId: alias })
    assert.equal(opened.status, 200, 'version 1 still decrypts through the alias')
    const [record] = await svc.sql<{ details: Record<string, unknown> }[]>`
      SELECT details FROM audit_log WHERE tenant_id = ${tenant.tenantId} AND action = 'keys.rotate'
        AND resource = ${`key:${key.id}`}`
    assert.equal(record?.details['alias'], alias)
  })

  test('moving the alias is the manual rotation: new operations use the new key, old envelopes still open', async () => {
    const oldKey = await createKey('Encryption', 'ML-KEM-768')
    const newKey = await createKey('Encryption', 'RSA-2048')
    const alias = newAlias('manual')
    await createAlias(alias, oldKey.id)
    const before = await encrypt(alias, 'before the move')
    assert.equal(before.body.keyId, oldKey.id)
    clock.advance(1000)
    const moved = await call('PATCH', `/aliases/${inPath(alias)}`, { keyId: newKey.id })
    assert.equal(moved.status, 200, moved.text)
    assert.equal(moved.body.keyId, newKey.id)
    assert.notEqual(moved.body.updatedAt, moved.body.createdAt)
    const afterwards = await encrypt(alias, 'after the move')
    assert.equal(afterwards.body.keyId, newKey.id)
    // The envelope names its key: it opens without keyId, or with the old key's id...
    for (const keyId of [undefined, oldKey.id]) {
      const opened = await call('POST', '/decrypt', {
        ...envelopeOf(before.body),
        ...(keyId ? { keyId } : {}),
      })
      assert.equal(unb64(opened.body.plaintext).toString(), 'before the move', opened.text)
    }
    // ...but the alias now names another key: as a cross-check it no longer matches.
    assertError(
      await call('POST', '/decrypt', { ...envelopeOf(before.body), keyId: alias }),
      400,
      'decryption_failed',
      'the moved alias as a cross-check of an old envelope',
    )
    assert.deepEqual((await call('GET', `/keys/${oldKey.id}`)).body.aliases, [])
    assert.deepEqual((await call('GET', `/keys/${newKey.id}`)).body.aliases, [alias])
    const again = await call('PATCH', `/aliases/${inPath(alias)}`, { keyId: alias })
    assert.equal(again.status, 200, 'moving onto the key it names is a no-op')
    assert.equal(again.body.updatedAt, moved.body.updatedAt)
  })

  test('an alias moves only between keys of one type, to an existing, undestroyed key', async () => {
    const encryption = await createKey('Encryption', 'ML-KEM-768')
    const signing = await createKey('Signing', 'Ed25519')
    const hmac = await createKey('HMAC', 'HMAC-SHA256')
    const alias = newAlias('typed')
    await createAlias(alias, encryption.id)
    for (const target of [signing.id, hmac.id]) {
      const res = await call('PATCH', `/aliases/${inPath(alias)}`, { keyId: target })
      assertError(res, 400, 'key_type_mismatch', target)
      assert.match(res.body.message, /type Encryption/)
    }
    assertError(
      await call('PATCH', `/aliases/${inPath(alias)}`, { keyId: randomUUID() }),
      404,
      'key_not_found',
      'unknown key',
    )
    assertError(
      await call('PATCH', `/aliases/${inPath(newAlias('none'))}`, { keyId: encryption.id }),
      404,
      'alias_not_found',
      'unknown alias',
    )
    assert.equal((await encrypt(alias)).body.keyId, encryption.id, 'the alias stayed')
  })

  test('an alias moved while in use: every answer names the old or the new key, and each envelope opens', async () => {
    const first = await createKey('Encryption', 'ML-KEM-768')
    const second = await createKey('Encryption', 'ML-KEM-768')
    const alias = newAlias('busy')
    await createAlias(alias, first.id)
    let moving = true
    const answers: HttpResult[] = []
    const load = (async () => {
      while (moving || answers.length < 20) answers.push(await encrypt(alias, `n${answers.length}`))
    })()
    await sleep(20)
    const moved = await call('PATCH', `/aliases/${inPath(alias)}`, { keyId: second.id })
    assert.equal(moved.status, 200, moved.text)
    // After the move is acknowledged, this process's cache already names the new key.
    assert.equal((await encrypt(alias)).body.keyId, second.id)
    moving = false
    await load
    for (const [i, res] of answers.entries()) {
      assert.equal(res.status, 200, res.text)
      assert.ok([first.id, second.id].includes(res.body.keyId), res.body.keyId)
      const opened = await call('POST', '/decrypt', envelopeOf(res.body))
      assert.equal(unb64(opened.body.plaintext).toString(), `n${i}`)
    }
  })

  test('a move through one process is followed by another that caches aliases for 600 s', async () => {
    const first = await createKey('Encryption', 'ML-KEM-768')
    const second = await createKey('Encryption', 'ML-KEM-768')
    const alias = newAlias('bus')
    await createAlias(alias, first.id)
    const viaOther = () =>
      httpRequest(other.baseUrl, 'POST', '/api/v1/encrypt', {
        key: tenant.key,
        body: { keyId: alias, plaintext: b64('x') },
      })
    assert.equal((await viaOther()).body.keyId, first.id)
    assert.equal((await viaOther()).body.keyId, first.id, 'now from the other process cache')
    const moved = await call('PATCH', `/aliases/${inPath(alias)}`, { keyId: second.id })
    assert.equal(moved.status, 200)
    const since = Date.now()
    let res = await viaOther()
    while (res.body.keyId !== second.id && Date.now() - since < 1500) {
      await sleep(20)
      res = await viaOther()
    }
    assert.equal(res.body.keyId, second.id, 'the other process followed the move')
    const deleted = await call('DELETE', `/aliases/${inPath(alias)}`)
    assert.equal(deleted.status, 204)
    const deletedAt = Date.now()
    res = await viaOther()
    while (res.status === 200 && Date.now() - deletedAt < 1500) {
      await sleep(20)
      res = await viaOther()
    }
    assertError(res, 404, 'key_not_found', 'the other process followed the deletion')
  })
})

describe('tenants', () => {
  test('the same alias in two tenants names each its own key; neither reaches the other', async () => {
    const second = await svc.createTenant()
    const mine = await createKey('Encryption', 'ML-KEM-768')
    const theirs = await createKey('Encryption', 'ML-KEM-768', {}, second)
    const alias = newAlias('shared')
    await createAlias(alias, mine.id)
    await createAlias(alias, theirs.id, second)
    assert.equal((await encrypt(alias)).body.keyId, mine.id)
    assert.equal((await encrypt(alias, 'x', second)).body.keyId, theirs.id)

    const onlyTheirs = newAlias('theirs')
    await createAlias(onlyTheirs, theirs.id, second)
    assertError(await encrypt(onlyTheirs), 404, 'key_not_found', 'another tenant alias in the body')
    assertError(await call('GET', `/keys/${inPath(onlyTheirs)}`), 404, 'key_not_found', 'in the path')
    assertError(await call('GET', `/aliases/${inPath(onlyTheirs)}`), 404, 'alias_not_found', 'read')
    assertError(
      await call('PATCH', `/aliases/${inPath(onlyTheirs)}`, { keyId: mine.id }),
      404,
      'alias_not_found',
      'move',
    )
    assertError(await call('DELETE', `/aliases/${inPath(onlyTheirs)}`), 404, 'alias_not_found', 'delete')
    // An alias of mine cannot be pointed at their key, nor theirs created on mine.
    assertError(
      await call('POST', '/aliases', { alias: newAlias(), keyId: theirs.id }),
      404,
      'key_not_found',
      'create on their key',
    )
    assertError(
      await call('PATCH', `/aliases/${inPath(alias)}`, { keyId: theirs.id }),
      404,
      'key_not_found',
      'move onto their key',
    )
    const listed = await call('GET', '/aliases?limit=1000')
    assert.ok(!listed.body.data.some((a: { keyId: string }) => a.keyId === theirs.id))
    assert.equal(
      (await encrypt(onlyTheirs, 'x', second)).body.keyId,
      theirs.id,
      'theirs still works for them',
    )
  })
})

describe('audit', () => {
  test('create, move and delete are recorded with the key ids before and after', async () => {
    const first = await createKey('Signing', 'Ed25519')
    const second = await createKey('Signing', 'Ed25519')
    const alias = newAlias('audited')
    await createAlias(alias, first.id)
    await call('PATCH', `/aliases/${inPath(alias)}`, { keyId: second.id })
    await call('DELETE', `/aliases/${inPath(alias)}`)
    const rows = await svc.sql<
      { actor: string; action: string; resource: string; outcome: string; details: Record<string, unknown> }[]
    >`
      SELECT actor, action, resource, outcome, details FROM audit_log
      WHERE tenant_id = ${tenant.tenantId} AND action LIKE 'keys.alias_%' AND details->>'alias' = ${alias}
      ORDER BY id`
    const actor = `apikey:${tenant.apiKeyId}`
    assert.deepEqual(
      [...rows],
      [
        {
          actor,
          action: 'keys.alias_create',
          resource: `key:${first.id}`,
          outcome: 'success',
          details: { alias, keyId: first.id },
        },
        {
          actor,
          action: 'keys.alias_move',
          resource: `key:${second.id}`,
          outcome: 'success',
          details: { alias, previousKeyId: first.id, keyId: second.id },
        },
        {
          actor,
          action: 'keys.alias_delete',
          resource: `key:${second.id}`,
          outcome: 'success',
          details: { alias, previousKeyId: second.id },
        },
      ],
    )
  })

  test('operations by alias name the key id, with the alias in the details; unknown aliases name no key', async () => {
    const key = await createKey('Signing', 'Ed25519')
    const alias = newAlias('opaudit')
    await createAlias(alias, key.id)
    await call('POST', '/sign', { keyId: alias, message: b64('m') })
    await call('POST', '/sign', { keyId: key.id, message: b64('m') })
    assert.equal((await call('POST', `/keys/${inPath(alias)}/revoke`)).status, 200)
    assert.equal((await call('POST', '/sign', { keyId: alias, message: b64('m') })).status, 409)
    const missing = newAlias('missing')
    assert.equal((await call('POST', '/sign', { keyId: missing, message: b64('m') })).status, 404)
    const rows = await svc.sql<
      { resource: string | null; outcome: string; details: Record<string, unknown> }[]
    >`
      SELECT resource, outcome, details FROM audit_log
      WHERE tenant_id = ${tenant.tenantId} AND action = 'crypto.sign'
        AND (resource = ${`key:${key.id}`} OR details->>'alias' = ${missing})
      ORDER BY id`
    assert.deepEqual(
      rows.map((r) => [r.resource, r.outcome, r.details['alias'] ?? null, r.details['error'] ?? null]),
      [
        [`key:${key.id}`, 'success', alias, null],
        [`key:${key.id}`, 'success', null, null],
        [`key:${key.id}`, 'failure', alias, 'key_state_conflict'],
        [null, 'failure', missing, 'key_not_found'],
      ],
    )
  })
})

describe('scopes', () => {
  test('keys:read lists and reads aliases; creating, moving and deleting need keys:write', async () => {
    const key = await createKey('Encryption', 'ML-KEM-768')
    const alias = newAlias('scoped')
    await createAlias(alias, key.id)
    const reader = await call('POST', '/api-keys', { name: uniqueName('reader'), scopes: ['keys:read'] })
    assert.equal(reader.status, 201, reader.text)
    const as = reader.body.key as string
    assert.equal((await call('GET', '/aliases', undefined, as)).status, 200)
    assert.equal((await call('GET', `/aliases/${inPath(alias)}`, undefined, as)).status, 200)
    assert.equal((await call('GET', `/keys/${inPath(alias)}`, undefined, as)).status, 200)
    for (const [method, path, body] of [
      ['POST', '/aliases', { alias: newAlias(), keyId: key.id }],
      ['PATCH', `/aliases/${inPath(alias)}`, { keyId: key.id }],
      ['DELETE', `/aliases/${inPath(alias)}`, undefined],
    ] as const) {
      assertError(await call(method, path, body, as), 403, 'insufficient_scope', `${method} ${path}`)
    }
  })
})

describe('destruction', () => {
  test('destroying a key deletes its aliases (recorded), and they name nothing afterwards', async () => {
    const key = await createKey('Encryption', 'ML-KEM-768')
    const alias = newAlias('doomed')
    await createAlias(alias, key.id)
    assert.equal((await call('DELETE', `/keys/${inPath(alias)}?pendingWindowDays=7`)).status, 200)
    // Until destruction the alias still names the key (a pending deletion can be cancelled).
    assert.equal((await call('GET', `/aliases/${inPath(alias)}`)).status, 200)
    clock.advance(8 * DAY_MS)
    const view = await call('GET', `/keys/${key.id}`)
    assert.equal(view.body.state, 'Destroyed', view.text)
    assert.deepEqual(view.body.aliases, [])
    assertError(await call('GET', `/aliases/${inPath(alias)}`), 404, 'alias_not_found', 'alias after')
    assertError(await encrypt(alias), 404, 'key_not_found', 'encrypt after')
    const [record] = await svc.sql<{ actor: string; resource: string; details: Record<string, unknown> }[]>`
      SELECT actor, resource, details FROM audit_log
      WHERE tenant_id = ${tenant.tenantId} AND action = 'keys.alias_delete' AND details->>'alias' = ${alias}`
    assert.deepEqual(record, {
      actor: 'system',
      resource: `key:${key.id}`,
      details: { alias, previousKeyId: key.id, reason: 'key destroyed' },
    })
    // A destroyed key takes no alias.
    assertError(
      await call('POST', '/aliases', { alias: newAlias(), keyId: key.id }),
      409,
      'key_state_conflict',
      'alias onto a destroyed key',
    )
  })
})
