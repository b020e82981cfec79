import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { after, before, describe, test } from 'node:test'
import { ml_kem768 } from '@noble/post-quantum/ml-kem.js'
import { apiClient, b64, unb64 } from '../helpers/api-client.ts'
import {
  type DekRecovery,
  kemRecovery,
  openEnvelope,
  partsOf,
  SCHEMES,
  toCompact,
} from '../helpers/envelope-parts.ts'
import { startTestService, type TenantWithKey, type TestService } from '../helpers/service.ts'

/**
 * Encryption context as a map (docs/crypto-operations.md, "Encryption context"): a map binds as
 * its canonical JSON (RFC 8785: keys sorted by UTF-16 code units, no whitespace), so it is
 * interchangeable with that string on every route that takes a context, and in the binary
 * transport as the Base64 of those bytes. The canonical form is checked against RFC 8785's own
 * sorting example and literal strings written here, and an envelope sealed with a map is opened
 * by an independent implementation (noble) with the AAD built from the literal canonical string.
 */

/**
 * RFC 8785 section 3.2.3's sorting example: the input object, and the canonical form the RFC
 * gives for it (U+0080 and the others written raw, the carriage return escaped).
 */
const RFC8785_SORTING_INPUT: Record<string, string> = {
  '\u20ac': 'Euro Sign',
  '\r': 'Carriage Return',
  '\ufb33': 'Hebrew Letter Dalet With Dagesh',
  '1': 'One',
  '\ud83d\ude00': 'Emoji: Grinning Face',
  '\u0080': 'Control',
  '\u00f6': 'Latin Small Letter O With Diaeresis',
}
const RFC8785_SORTING_OUTPUT =
  '{"\\r":"Carriage Return","1":"One","\u0080":"Control","\u00f6":"Latin Small Letter O With Diaeresis",' +
  '"\u20ac":"Euro Sign","\ud83d\ude00":"Emoji: Grinning Face","\ufb33":"Hebrew Letter Dalet With Dagesh"}'

interface Envelope {
  ciphertext: string
  encapsulatedKey: string
  nonce: string
  tag: string
  keyId: string
  keyVersion: number
}

describe('encryption context as a map', () => {
  let svc: TestService
  let tenant: TenantWithKey
  let key: { id: string; name: string }
  let privateKey: DekRecovery

  const api = apiClient(() => ({ svc, tenant }))
  const call = api.call

  before(async () => {
    svc = await startTestService()
    tenant = await svc.createTenant()
    key = await api.createKey('Encryption', 'ML-KEM-768', { exportable: true })
    const exported = await call('POST', `/keys/${key.id}/export-private`, {
      confirm: key.name,
      format: 'RAW',
      version: 1,
    })
    assert.equal(exported.status, 200, exported.text)
    const { secretKey } = ml_kem768.keygen(new Uint8Array(unb64(exported.body.privateKey)))
    privateKey = kemRecovery(SCHEMES.mlKem, (cipherText) => ml_kem768.decapsulate(cipherText, secretKey))
  })

  after(async () => {
    await svc?.stop()
  })

  async function encrypt(context: unknown, plaintext = Buffer.from('context test')): Promise<Envelope> {
    const res = await call('POST', '/encrypt', { keyId: key.id, plaintext: b64(plaintext), context })
    assert.equal(res.status, 200, res.text)
    return res.body
  }

  const decrypt = (envelope: Envelope, context: unknown) => call('POST', '/decrypt', { ...envelope, context })

  async function assertOpens(envelope: Envelope, context: unknown, what: string) {
    const res = await decrypt(envelope, context)
    assert.equal(res.status, 200, `${what}: ${res.text}`)
  }

  async function assertRefused(envelope: Envelope, context: unknown, what: string) {
    const res = await decrypt(envelope, context)
    assert.equal(res.status, 400, `${what}: ${res.text}`)
    assert.equal(res.body.error, 'decryption_failed', what)
  }

  /**
   * Opens without the service (test/helpers/envelope-parts.ts): noble ML-KEM, HMAC-SHA256 and
   * AES-256-GCM; AAD from `contextText`.
   */
  const openIndependently = (envelope: Envelope, contextText: string): Buffer =>
    openEnvelope(partsOf(envelope), privateKey, { context: contextText })

  describe('canonical form', () => {
    test('the order of the keys does not matter, and the map binds as its canonical JSON string', async () => {
      const plaintext = randomBytes(64)
      const envelope = await encrypt({ b: '2', a: '1' }, plaintext)
      await assertOpens(envelope, { a: '1', b: '2' }, 'the same map in another order')
      await assertOpens(envelope, '{"a":"1","b":"2"}', 'the canonical string')
      await assertRefused(envelope, '{"b":"2","a":"1"}', 'a string in another order is another string')
      await assertRefused(envelope, '{"a": "1", "b": "2"}', 'whitespace makes another string')
      await assertRefused(envelope, { a: '1' }, 'a pair missing')
      await assertRefused(envelope, { a: '1', b: '2', c: '3' }, 'a pair more')
      await assertRefused(envelope, undefined, 'no context')
      assert.ok(openIndependently(envelope, '{"a":"1","b":"2"}').equals(plaintext))

      // And the other way: a string that happens to be canonical opens with the map.
      const fromString = await encrypt('{"a":"1","b":"2"}', plaintext)
      await assertOpens(fromString, { b: '2', a: '1' }, 'the map for the canonical string')
    })

    test("RFC 8785's sorting example: keys in UTF-16 code unit order, escapes as JSON.stringify writes them", async () => {
      const plaintext = Buffer.from('unicode keys')
      const envelope = await encrypt(RFC8785_SORTING_INPUT, plaintext)
      await assertOpens(envelope, RFC8785_SORTING_OUTPUT, "the RFC's canonical output as a string")
      assert.ok(openIndependently(envelope, RFC8785_SORTING_OUTPUT).equals(plaintext))
      // U+FB33 sorts after U+1F600 by UTF-16 code units (0xFB33 > 0xD83D), before it by code points.
      const byCodePoint =
        '{"\\r":"Carriage Return","1":"One","\u0080":"Control","\u00f6":"Latin Small Letter O With Diaeresis",' +
        '"\u20ac":"Euro Sign","\ufb33":"Hebrew Letter Dalet With Dagesh","\ud83d\ude00":"Emoji: Grinning Face"}'
      await assertRefused(envelope, byCodePoint, 'code point order is not the canonical order')
    })

    test('values with quotes, backslashes and control characters are escaped as in JSON', async () => {
      const envelope = await encrypt({ 'path\\x': 'say "hi"\n\u0001', é: '' })
      await assertOpens(
        envelope,
        '{"path\\\\x":"say \\"hi\\"\\n\\u0001","é":""}',
        'the escaped canonical string',
      )
    })

    test('an empty map is no context', async () => {
      const envelope = await encrypt({})
      await assertOpens(envelope, undefined, 'no context')
      await assertOpens(envelope, '', 'the empty string')
      await assertRefused(envelope, '{}', 'the string {}')
      const none = await encrypt(undefined)
      await assertOpens(none, {}, 'an empty map for no context')
    })

    test('a key given twice in the JSON: the last one wins, as JSON.parse reads it', async () => {
      const res = await svc.request('POST', '/api/v1/encrypt', {
        key: tenant.key,
        rawBody: `{"keyId":"${key.id}","plaintext":"${b64('dup')}","context":{"a":"1","a":"2"}}`,
        headers: { 'content-type': 'application/json' },
      })
      assert.equal(res.status, 200, res.text)
      await assertOpens(res.body, { a: '2' }, 'the last value')
      await assertRefused(res.body, { a: '1' }, 'the first value')
    })
    test('a __proto__ key is refused by the JSON parser, as anywhere in a body', async () => {
      const res = await svc.request('POST', '/api/v1/encrypt', {
        key: tenant.key,
        rawBody: `{"keyId":"${key.id}","plaintext":"${b64('x')}","context":{"__proto__":"x"}}`,
        headers: { 'content-type': 'application/json' },
      })
      assert.equal(res.status, 400, res.text)
      assert.equal(res.body.error, 'invalid_json')
    })
  })

  describe('every route that takes a context', () => {
    test('encrypt and decrypt batches: map and canonical string interchangeable per item', async () => {
      const encrypted = await call('POST', '/encrypt/batch', {
        items: [
          { keyId: key.id, plaintext: b64('one'), context: { z: '1', y: '2' } },
          { keyId: key.id, plaintext: b64('two'), context: '{"k":"v"}' },
        ],
      })
      assert.equal(encrypted.status, 200, encrypted.text)
      const [first, second] = encrypted.body.results
      const decrypted = await call('POST', '/decrypt/batch', {
        items: [
          { ...first, context: '{"y":"2","z":"1"}' },
          { ...second, context: { k: 'v' } },
          { ...first, context: { z: '1' } },
        ],
      })
      assert.equal(decrypted.status, 200, decrypted.text)
      assert.deepEqual(
        decrypted.body.results.map((r: { ok: boolean; plaintext?: string; error?: string }) =>
          r.ok ? unb64(r.plaintext!).toString() : r.error,
        ),
        ['one', 'two', 'decryption_failed'],
      )
    })

    test('data keys, wrap and unwrap', async () => {
      const data = await call('POST', `/keys/${key.id}/data-key`, {
        context: { bucket: 'invoices', region: 'eu' },
      })
      assert.equal(data.status, 200, data.text)
      const unwrapped = await call('POST', `/keys/${key.id}/unwrap`, {
        encryptedDek: data.body.encryptedDek,
        context: '{"bucket":"invoices","region":"eu"}',
      })
      assert.equal(unwrapped.status, 200, unwrapped.text)
      assert.equal(unwrapped.body.plaintext, data.body.plaintextDek)

      const material = randomBytes(32)
      const wrapped = await call('POST', `/keys/${key.id}/wrap`, {
        plaintext: b64(material),
        context: '{"a":"b"}',
      })
      assert.equal(wrapped.status, 200, wrapped.text)
      const back = await call('POST', `/keys/${key.id}/unwrap`, { ...wrapped.body, context: { a: 'b' } })
      assert.equal(back.status, 200, back.text)
      assert.ok(unb64(back.body.plaintext).equals(material))
      const wrong = await call('POST', `/keys/${key.id}/unwrap`, { ...wrapped.body, context: { a: 'c' } })
      assert.equal(wrong.status, 400, wrong.text)
      assert.equal(wrong.body.error, 'decryption_failed')
    })

    test('re-encrypt: a map source context and a map destination context', async () => {
      const plaintext = Buffer.from('re-encrypted')
      const envelope = await encrypt({ tenant: 'a', kind: 'invoice' }, plaintext)
      const res = await call('POST', '/re-encrypt', {
        ...envelope,
        context: '{"kind":"invoice","tenant":"a"}',
        destinationKeyId: key.id,
        destinationContext: { tenant: 'b', kind: 'invoice' },
      })
      assert.equal(res.status, 200, res.text)
      await assertOpens(res.body, '{"kind":"invoice","tenant":"b"}', 'the destination context')
      assert.ok(openIndependently(res.body, '{"kind":"invoice","tenant":"b"}').equals(plaintext))
    })

    test('the binary transport: X-Encryption-Context is the Base64 of the canonical JSON', async () => {
      const plaintext = Buffer.from('binary')
      const envelope = await encrypt({ b: '2', a: '1' }, plaintext)
      // The compact form: u16 length of encapsulatedKey, encapsulatedKey, nonce, tag, ciphertext.
      const compact = toCompact(partsOf(envelope))
      const res = await fetch(new URL('/api/v1/decrypt', svc.baseUrl), {
        method: 'POST',
        headers: {
          'x-api-key': tenant.key,
          'content-type': 'application/octet-stream',
          'x-encryption-context': b64('{"a":"1","b":"2"}'),
        },
        body: compact,
      })
      assert.equal(res.status, 200, await res.clone().text())
      assert.ok(Buffer.from(await res.arrayBuffer()).equals(plaintext))
    })
  })

  describe('limits: a 400 naming the field', () => {
    const pairs = (n: number) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`k${i}`, 'v']))

    async function assertInvalid(body: Record<string, unknown>, path: string, message: RegExp, what: string) {
      const res = await call('POST', '/encrypt', { keyId: key.id, plaintext: b64('x'), ...body })
      assert.equal(res.status, 400, `${what}: ${res.text}`)
      assert.equal(res.body.error, 'validation_failed', what)
      const field = res.body.fields.find((f: { path: string }) => f.path === path)
      assert.ok(field, `${what}: names ${path} (${res.text})`)
      assert.match(field.message, message, `${what}: ${res.text}`)
    }

    test('at the limits: 64 pairs, keys of 256 characters, 8,192 characters in canonical form', async () => {
      await assertOpens(await encrypt(pairs(64)), pairs(64), '64 pairs')
      const longKey = { ['k'.repeat(256)]: 'v' }
      await assertOpens(await encrypt(longKey), longKey, 'a key of 256 characters')
      // {"k":"<value>"} is 8 characters around the value.
      const largest = { k: 'v'.repeat(8192 - 8) }
      await assertOpens(await encrypt(largest), largest, '8,192 characters in canonical form')
    })

    test('past them', async () => {
      await assertInvalid(
        { context: pairs(65) },
        'body/context',
        /must NOT have more than 64 properties|must have at most 64 keys and items in all/,
        '65 pairs',
      )
      await assertInvalid(
        { context: { ['k'.repeat(257)]: 'v' } },
        'body/context',
        /keys must be 1 to 256 characters/,
        'a key of 257 characters',
      )
      await assertInvalid({ context: { '': 'v' } }, 'body/context', /keys must be 1 to 256/, 'an empty key')
      await assertInvalid(
        { context: { k: 'v'.repeat(8192 - 7) } },
        'body/context',
        /at most 8192 characters in canonical form/,
        'one character over in canonical form',
      )
      await assertInvalid({ context: { k: 1 } }, 'body/context', /string/, 'a value that is not a string')
      await assertInvalid(
        { context: { k: { nested: 'v' } } },
        'body/context',
        /string|nested at most 1 levels/,
        'a nested map',
      )
      await assertInvalid({ context: ['a', 'b'] }, 'body/context', /string|object/, 'an array')
      await assertInvalid(
        { context: { k: '\ud800' } },
        'body/context',
        /well-formed Unicode/,
        'a lone surrogate',
      )
    })

    test('in a batch item the path names the item, and only that item fails', async () => {
      const res = await call('POST', '/encrypt/batch', {
        items: [
          { keyId: key.id, plaintext: b64('fine'), context: { a: 'b' } },
          { keyId: key.id, plaintext: b64('bad'), context: { ['k'.repeat(300)]: 'v' } },
        ],
      })
      assert.equal(res.status, 200, res.text)
      assert.equal(res.body.results[0].ok, true)
      assert.equal(res.body.results[1].ok, false)
      assert.equal(res.body.results[1].error, 'validation_failed')
      assert.match(res.body.results[1].message, /body\/items\/1\/context/)
    })

    test('re-encrypt names destinationContext', async () => {
      const envelope = await encrypt('x')
      const res = await call('POST', '/re-encrypt', {
        ...envelope,
        context: 'x',
        destinationContext: { ['k'.repeat(300)]: 'v' },
      })
      assert.equal(res.status, 400, res.text)
      assert.equal(res.body.fields[0].path, 'body/destinationContext')
    })
  })
})
