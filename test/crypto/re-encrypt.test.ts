import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { after, before, describe, test } from 'node:test'
import { ml_kem768 } from '@noble/post-quantum/ml-kem.js'
import { apiClient, b64, unb64, uniqueName } from '../helpers/api-client.ts'
import {
  bodyOf,
  type DekRecovery,
  fromCompact,
  headerOf,
  kemRecovery,
  openEnvelope,
  type Parts,
  type Purpose,
  partsOf,
  rsaOaepRecovery,
  SCHEMES,
} from '../helpers/envelope-parts.ts'
import { type AuditView, startTestService, type TenantWithKey, type TestService } from '../helpers/service.ts'

/**
 * POST /api/v1/re-encrypt and /re-encrypt/batch (docs/crypto-operations.md, "Re-encrypt"): an
 * envelope under one key moved to another without the plaintext leaving the service. Round trips
 * across key types (ML-KEM to RSA and back), each result opened through /decrypt (or unwrap) AND
 * by an independent implementation from the exported private key (node:crypto for RSA-OAEP,
 * noble for ML-KEM, HMAC and AES-GCM, written from docs/envelope-format.md); an old version after
 * rotation; the source and destination key states; tampered input; another tenant's keys; wrapped
 * keys and data keys; batches with good and bad items; scopes; and the audit records.
 */

interface Envelope {
  ciphertext: string
  encapsulatedKey: string
  nonce: string
  tag: string
}

/**
 * Opens an envelope without the service (test/helpers/envelope-parts.ts): RSA-OAEP-SHA256 by
 * node:crypto, ML-KEM by noble, then HMAC-SHA256 and AES-GCM by noble.
 */
const openIndependently = (parts: Parts, key: DekRecovery, context: string, purpose: Purpose = 'encrypt') =>
  openEnvelope(parts, key, { purpose, context })

/** A re-encrypt answer has exactly its form's own fields, the destination key and version, and the source's. */
function assertAnswerFields(answer: Record<string, unknown>, own: string[]): void {
  const fields = [...own, 'keyId', 'keyVersion', 'sourceKeyId', 'sourceKeyVersion']
  assert.deepEqual(Object.keys(answer).sort(), fields.sort())
}

describe('re-encrypt', () => {
  let svc: TestService
  let tenant: TenantWithKey
  let otherTenant: TenantWithKey
  let mlKem: { id: string; name: string }
  let rsa: { id: string; name: string }
  let mlKemKey: DekRecovery
  let rsaKey: DekRecovery

  const api = apiClient(() => ({ svc, tenant }))
  const call = api.call

  async function exportPrivate(
    key: { id: string; name: string },
    format: 'PEM' | 'RAW',
  ): Promise<DekRecovery> {
    const res = await call('POST', `/keys/${key.id}/export-private`, {
      confirm: key.name,
      format,
      version: 1,
    })
    assert.equal(res.status, 200, res.text)
    if (format === 'PEM') return rsaOaepRecovery(res.body.privateKey)
    // The 64-byte seed FIPS 203 ML-KEM.KeyGen_internal(d, z) expands.
    const { secretKey } = ml_kem768.keygen(new Uint8Array(unb64(res.body.privateKey)))
    return kemRecovery(SCHEMES.mlKem, (cipherText) => ml_kem768.decapsulate(cipherText, secretKey))
  }

  before(async () => {
    svc = await startTestService()
    tenant = await svc.createTenant()
    otherTenant = await svc.createTenant()
    mlKem = await api.createKey('Encryption', 'ML-KEM-768', { exportable: true })
    rsa = await api.createKey('Encryption', 'RSA-2048', { exportable: true })
    mlKemKey = await exportPrivate(mlKem, 'RAW')
    rsaKey = await exportPrivate(rsa, 'PEM')
  })

  after(async () => {
    await svc?.stop()
  })

  async function encrypt(keyId: string, plaintext: Buffer, extra: Record<string, unknown> = {}, by = tenant) {
    const res = await call('POST', '/encrypt', { keyId, plaintext: b64(plaintext), ...extra }, by)
    assert.equal(res.status, 200, res.text)
    return res.body
  }

  const reEncrypt = (body: Record<string, unknown>, by: TenantWithKey | string = tenant) =>
    call('POST', '/re-encrypt', body, by)

  async function assertDecrypts(answer: Record<string, unknown>, plaintext: Buffer, extra = {}) {
    const res = await call('POST', '/decrypt', { ...answer, ...extra })
    assert.equal(res.status, 200, res.text)
    assert.ok(unb64(res.body.plaintext).equals(plaintext), '/decrypt gives the plaintext back')
  }

  async function audit(action: string, keyId: string) {
    const params = new URLSearchParams({ action, resource: `key:${keyId}` })
    const res = await call('GET', `/audit?${params}`)
    assert.equal(res.status, 200, res.text)
    return { records: res.body.data as AuditView[], text: res.text }
  }

  describe('across key types', () => {
    test('ML-KEM to RSA and back: /decrypt opens each answer, and so does an independent implementation', async () => {
      const plaintext = randomBytes(300)
      const context = 'order=1042'
      const original = await encrypt(mlKem.id, plaintext, { context })

      const toRsa = await reEncrypt({ ...original, context, destinationKeyId: rsa.id })
      assert.equal(toRsa.status, 200, toRsa.text)
      assertAnswerFields(toRsa.body, ['ciphertext', 'encapsulatedKey', 'nonce', 'tag'])
      assert.equal(toRsa.body.keyId, rsa.id)
      assert.equal(toRsa.body.keyVersion, 1)
      assert.equal(toRsa.body.sourceKeyId, mlKem.id)
      assert.equal(toRsa.body.sourceKeyVersion, 1)
      const rsaEnvelope = partsOf(toRsa.body)
      assert.deepEqual(headerOf(rsaEnvelope.encapsulatedKey), { scheme: 0x02, keyId: rsa.id, keyVersion: 1 })
      await assertDecrypts(toRsa.body, plaintext, { context })
      assert.ok(openIndependently(rsaEnvelope, rsaKey, context).equals(plaintext))

      // The answer passes back as it came (sourceKeyId and sourceKeyVersion included).
      const back = await reEncrypt({ ...toRsa.body, context, destinationKeyId: mlKem.id })
      assert.equal(back.status, 200, back.text)
      assert.equal(back.body.keyId, mlKem.id)
      assert.equal(back.body.sourceKeyId, rsa.id)
      const mlKemEnvelope = partsOf(back.body)
      assert.deepEqual(headerOf(mlKemEnvelope.encapsulatedKey), {
        scheme: 0x01,
        keyId: mlKem.id,
        keyVersion: 1,
      })
      await assertDecrypts(back.body, plaintext, { context })
      assert.ok(openIndependently(mlKemEnvelope, mlKemKey, context).equals(plaintext))
      // A fresh envelope, not the original: new encapsulation, new nonce.
      assert.notEqual(back.body.encapsulatedKey, original.encapsulatedKey)
    })

    test('a new destination context binds the new envelope; the old one no longer opens it', async () => {
      const plaintext = Buffer.from('moved to a new context')
      const original = await encrypt(mlKem.id, plaintext, { context: 'tenant=a' })
      const res = await reEncrypt({
        ...original,
        context: 'tenant=a',
        destinationKeyId: rsa.id,
        destinationContext: 'tenant=b',
      })
      assert.equal(res.status, 200, res.text)
      await assertDecrypts(res.body, plaintext, { context: 'tenant=b' })
      const stale = await call('POST', '/decrypt', { ...res.body, context: 'tenant=a' })
      assert.equal(stale.status, 400, stale.text)
      assert.equal(stale.body.error, 'decryption_failed')
      assert.ok(openIndependently(partsOf(res.body), rsaKey, 'tenant=b').equals(plaintext))
    })

    test('legacy mode in, legacy mode out', async () => {
      const plaintext = Buffer.from('legacy')
      const original = await encrypt(rsa.id, plaintext, { mode: 'legacy' })
      assert.equal(original.mode, 'legacy')
      const res = await reEncrypt({ ...original, destinationKeyId: mlKem.id })
      assert.equal(res.status, 200, res.text)
      assertAnswerFields(res.body, ['ciphertext', 'mode'])
      assert.equal(res.body.mode, 'legacy')
      await assertDecrypts(res.body, plaintext)
      assert.ok(openIndependently(fromCompact(unb64(res.body.ciphertext)), mlKemKey, '').equals(plaintext))
    })

    test('the destination defaults to the tenant default Encryption key', async () => {
      const own = await svc.createTenant()
      const source = await api.createKey('Encryption', 'ML-KEM-768', {}, own)
      const fallback = await api.createKey('Encryption', 'RSA-2048', { isDefault: true }, own)
      const plaintext = Buffer.from('to the default')
      const original = await encrypt(source.id, plaintext, {}, own)
      const res = await reEncrypt({ ...original }, own)
      assert.equal(res.status, 200, res.text)
      assert.equal(res.body.keyId, fallback.id)
      assert.equal(res.body.sourceKeyId, source.id)
      const opened = await call('POST', '/decrypt', res.body, own)
      assert.equal(opened.status, 200, opened.text)
      assert.ok(unb64(opened.body.plaintext).equals(plaintext))
    })
  })

  describe('versions and key states', () => {
    test('an envelope of an old version moves to the current version of the same key', async () => {
      const key = await api.createKey('Encryption', 'ML-KEM-768')
      const plaintext = Buffer.from('written under version 1')
      const v1 = await encrypt(key.id, plaintext)
      assert.equal((await call('POST', `/keys/${key.id}/rotate`)).status, 200)
      const res = await reEncrypt({ ...v1, destinationKeyId: key.id })
      assert.equal(res.status, 200, res.text)
      assert.equal(res.body.keyId, key.id)
      assert.equal(res.body.keyVersion, 2)
      assert.equal(res.body.sourceKeyVersion, 1)
      assert.equal(headerOf(partsOf(res.body).encapsulatedKey).keyVersion, 2)
      await assertDecrypts(res.body, plaintext)
    })

    test('a revoked or pending-deletion source re-encrypts; such a destination is 409', async () => {
      const plaintext = Buffer.from('off a compromised key')
      const revoked = await api.createKey('Encryption', 'ML-KEM-768')
      const pending = await api.createKey('Encryption', 'RSA-2048')
      const fromRevoked = await encrypt(revoked.id, plaintext)
      const fromPending = await encrypt(pending.id, plaintext)
      assert.equal((await call('POST', `/keys/${revoked.id}/revoke`)).status, 200)
      assert.equal((await call('DELETE', `/keys/${pending.id}`)).status, 200)

      for (const [what, envelope] of [
        ['revoked', fromRevoked],
        ['pending deletion', fromPending],
      ] as const) {
        const res = await reEncrypt({ ...envelope, destinationKeyId: mlKem.id })
        assert.equal(res.status, 200, `${what}: ${res.text}`)
        await assertDecrypts(res.body, plaintext)
      }
      const good = await encrypt(mlKem.id, plaintext)
      for (const [state, key] of [
        ['Revoked', revoked],
        ['Pending Deletion', pending],
      ] as const) {
        const res = await reEncrypt({ ...good, destinationKeyId: key.id })
        assert.equal(res.status, 409, res.text)
        assert.equal(res.body.error, 'key_state_conflict')
        assert.equal(res.body.state, state)
      }
    })
    test('a public-key-only key is a destination (encrypt-to), never a source (409 public_key_only)', async () => {
      // The RSA key's public half, imported alone: what re-encrypts to it opens with the private key.
      const publicKey = await call('GET', `/keys/${rsa.id}/public?format=PEM`)
      assert.equal(publicKey.status, 200, publicKey.text)
      const imported = await call('POST', '/keys/import', {
        name: uniqueName('public-only'),
        keyType: 'Encryption',
        algorithm: 'RSA-2048',
        format: 'PEM',
        publicOnly: true,
        keyMaterial: publicKey.body.publicKey,
      })
      assert.equal(imported.status, 201, imported.text)
      const plaintext = Buffer.from('to a partner')
      const original = await encrypt(mlKem.id, plaintext)
      const res = await reEncrypt({ ...original, destinationKeyId: imported.body.id })
      assert.equal(res.status, 200, res.text)
      assert.equal(res.body.keyId, imported.body.id)
      assert.ok(openIndependently(partsOf(res.body), rsaKey, '').equals(plaintext))
      const fromPublic = await reEncrypt({ ...res.body, destinationKeyId: mlKem.id })
      assert.equal(fromPublic.status, 409, fromPublic.text)
      assert.equal(fromPublic.body.error, 'public_key_only')
    })
  })

  describe('refusals', () => {
    test('tampered input is 400 decryption_failed and produces nothing', async () => {
      const key = await api.createKey('Encryption', 'ML-KEM-768')
      const plaintext = Buffer.from('do not move me')
      const original = await encrypt(key.id, plaintext, { context: 'c' })
      const flip = (field: keyof Envelope) => {
        const bytes = unb64(original[field])
        bytes[bytes.length - 1]! ^= 0x01
        return { ...original, [field]: b64(bytes), context: 'c' }
      }
      const cases: [string, Record<string, unknown>][] = [
        ['a flipped ciphertext bit', flip('ciphertext')],
        ['a flipped tag bit', flip('tag')],
        ['a flipped nonce bit', flip('nonce')],
        ['a flipped encapsulated-key bit', flip('encapsulatedKey')],
        ['the wrong context', { ...original, context: 'd' }],
        ['no context', { ...original }],
        ['another key as the cross-check', { ...original, context: 'c', keyId: rsa.id }],
        ['another version as the cross-check', { ...original, context: 'c', keyVersion: 2 }],
      ]
      for (const [what, body] of cases) {
        const res = await reEncrypt({ ...body, destinationKeyId: rsa.id })
        assert.equal(res.status, 400, `${what}: ${res.text}`)
        assert.deepEqual(
          { error: res.body.error, fields: Object.keys(res.body).sort() },
          { error: 'decryption_failed', fields: ['error', 'message'] },
          what,
        )
      }
      const records = (await audit('crypto.re_encrypt', key.id)).records
      assert.equal(records.filter((r) => r.outcome === 'success').length, 0, 'nothing was re-encrypted')
      // The flips and context mismatches reach the source key: each is recorded against it.
      assert.ok(records.filter((r) => r.outcome === 'failure').length >= 6)
    })

    test("another tenant's destination key is 404; another tenant's envelope is decryption_failed", async () => {
      const theirs = await api.createKey('Encryption', 'ML-KEM-768', {}, otherTenant)
      const mine = await encrypt(mlKem.id, Buffer.from('mine'))
      const toTheirs = await reEncrypt({ ...mine, destinationKeyId: theirs.id })
      assert.equal(toTheirs.status, 404, toTheirs.text)
      assert.equal(toTheirs.body.error, 'key_not_found')

      const theirEnvelope = await encrypt(theirs.id, Buffer.from('theirs'), {}, otherTenant)
      const fromTheirs = await reEncrypt({ ...theirEnvelope, destinationKeyId: mlKem.id })
      assert.equal(fromTheirs.status, 400, fromTheirs.text)
      assert.equal(fromTheirs.body.error, 'decryption_failed')
    })

    test('a body that is none of the three answers, or mixes them, is 400 naming the field', async () => {
      const envelope = await encrypt(mlKem.id, Buffer.from('x'))
      const data = await call('POST', `/keys/${mlKem.id}/data-key`, { keyBytes: 16 })
      assert.equal(data.status, 200, data.text)
      const cases: [string, Record<string, unknown>, string][] = [
        ['nothing', {}, 'body/ciphertext'],
        [
          'a wrapped key beside the ciphertext',
          { ...envelope, wrappedKey: data.body.encryptedDek },
          'body/ciphertext',
        ],
        [
          'both wrapped forms',
          { wrappedKey: data.body.encryptedDek, encryptedDek: data.body.encryptedDek },
          'body/encryptedDek',
        ],
        ['keyBytes with an /encrypt answer', { ...envelope, keyBytes: 16 }, 'body/keyBytes'],
        ['a keyBytes that is not the data key length', { ...data.body, keyBytes: 32 }, 'body/keyBytes'],
        ['standard mode without its fields', { ciphertext: envelope.ciphertext }, 'body/encapsulatedKey'],
        [
          'a destination that is not a key id',
          { ...envelope, destinationKeyId: 'nope' },
          'body/destinationKeyId',
        ],
      ]
      for (const [what, body, path] of cases) {
        const res = await reEncrypt(body)
        assert.equal(res.status, 400, `${what}: ${res.text}`)
        assert.equal(res.body.error, 'validation_failed', what)
        assert.ok(
          res.body.fields.some((f: { path: string }) => f.path === path),
          `${what}: names ${path} (${res.text})`,
        )
      }
    })

    test('the scope is encryption:write; encrypt:invoke alone is not enough', async () => {
      const envelope = await encrypt(mlKem.id, Buffer.from('scoped'))
      const keyWith = async (scopes: string[]) => {
        const res = await call('POST', '/api-keys', { name: uniqueName('re-encrypt'), scopes })
        assert.equal(res.status, 201, res.text)
        return res.body.key as string
      }
      const invokeOnly = await keyWith(['encrypt:invoke'])
      for (const url of ['/re-encrypt', '/re-encrypt/batch']) {
        const body = url === '/re-encrypt' ? { ...envelope } : { items: [envelope] }
        const refused = await call('POST', url, body, invokeOnly)
        assert.equal(refused.status, 403, refused.text)
        assert.equal(refused.body.error, 'insufficient_scope')
        assert.equal(refused.body.requiredScope, 'encryption:write')
      }
      const writer = await keyWith(['encryption:write'])
      const res = await call('POST', '/re-encrypt', { ...envelope, destinationKeyId: rsa.id }, writer)
      assert.equal(res.status, 200, res.text)
    })
  })

  describe('restricted API keys', () => {
    test('re_encrypt must be among the operations, and both keys among the keys', async () => {
      const [a, b, c] = await Promise.all([
        api.createKey('Encryption', 'ML-KEM-768'),
        api.createKey('Encryption', 'ML-KEM-768'),
        api.createKey('Encryption', 'RSA-2048'),
      ])
      const restricted = async (operations: string[], keys: string[]) => {
        const res = await call('POST', '/api-keys', {
          name: uniqueName('restricted'),
          scopes: ['encryption:write'],
          keys,
          operations,
        })
        assert.equal(res.status, 201, res.text)
        return res.body.key as string
      }
      const mover = await restricted(['re_encrypt'], [a.id, b.id])
      const plaintext = Buffer.from('restricted')
      const underA = await encrypt(a.id, plaintext)
      const underC = await encrypt(c.id, plaintext)

      const moved = await call('POST', '/re-encrypt', { ...underA, destinationKeyId: b.id }, mover)
      assert.equal(moved.status, 200, moved.text)
      await assertDecrypts(moved.body, plaintext)
      for (const [what, body] of [
        ['a destination outside the list', { ...underA, destinationKeyId: c.id }],
        ['a source outside the list', { ...underC, destinationKeyId: b.id }],
      ] as const) {
        const res = await call('POST', '/re-encrypt', body, mover)
        assert.equal(res.status, 403, `${what}: ${res.text}`)
        assert.equal(res.body.error, 'key_not_allowed', what)
      }
      const batch = await call(
        'POST',
        '/re-encrypt/batch',
        { items: [{ ...underA }, { ...underA, destinationKeyId: c.id }], destinationKeyId: b.id },
        mover,
      )
      assert.equal(batch.status, 200, batch.text)
      assert.deepEqual(
        batch.body.results.map((r: { ok: boolean; error?: string }) => (r.ok ? 'ok' : r.error)),
        ['ok', 'key_not_allowed'],
      )

      // Decrypt and encrypt do not add up to re_encrypt.
      const decryptEncrypt = await restricted(['decrypt', 'encrypt'], [a.id, b.id])
      const refused = await call('POST', '/re-encrypt', { ...underA, destinationKeyId: b.id }, decryptEncrypt)
      assert.equal(refused.status, 403, refused.text)
      assert.equal(refused.body.error, 'operation_not_allowed')
    })
  })

  describe('wrapped keys and data keys', () => {
    test("a data key's encryptedDek is re-wrapped under another key: unwrap there gives the same data key", async () => {
      const context = 'bucket=invoices'
      const data = await call('POST', `/keys/${mlKem.id}/data-key`, { keyBytes: 32, context })
      assert.equal(data.status, 200, data.text)
      const res = await reEncrypt({ ...data.body, context, destinationKeyId: rsa.id })
      assert.equal(res.status, 200, res.text)
      assertAnswerFields(res.body, ['encryptedDek', 'keyBytes'])
      assert.equal(res.body.keyBytes, 32)
      const unwrapped = await call('POST', `/keys/${rsa.id}/unwrap`, { ...res.body, context })
      assert.equal(unwrapped.status, 200, unwrapped.text)
      assert.equal(unwrapped.body.plaintext, data.body.plaintextDek)
      const independent = openIndependently(
        fromCompact(unb64(res.body.encryptedDek)),
        rsaKey,
        context,
        'wrap',
      )
      assert.equal(b64(independent), data.body.plaintextDek)
      // Still a wrapped key: /decrypt does not open it (its own AAD label).
      const asEnvelope = { ...bodyOf(fromCompact(unb64(res.body.encryptedDek))), context }
      const decrypt = await call('POST', '/decrypt', asEnvelope)
      assert.equal(decrypt.status, 400, decrypt.text)
      assert.equal(decrypt.body.error, 'decryption_failed')
    })

    test('a wrappedKey comes back as a wrappedKey, to the ML-KEM key', async () => {
      const material = randomBytes(48)
      const wrapped = await call('POST', `/keys/${rsa.id}/wrap`, { plaintext: b64(material) })
      assert.equal(wrapped.status, 200, wrapped.text)
      const res = await reEncrypt({ ...wrapped.body, destinationKeyId: mlKem.id })
      assert.equal(res.status, 200, res.text)
      assertAnswerFields(res.body, ['wrappedKey'])
      const unwrapped = await call('POST', `/keys/${mlKem.id}/unwrap`, res.body)
      assert.equal(unwrapped.status, 200, unwrapped.text)
      assert.ok(unb64(unwrapped.body.plaintext).equals(material))
      const independent = openIndependently(fromCompact(unb64(res.body.wrappedKey)), mlKemKey, '', 'wrap')
      assert.ok(independent.equals(material))
    })
  })

  describe('batch', () => {
    test('independent items: good ones move, bad ones fail alone, in order; the results decrypt as they are', async () => {
      const plaintexts = Array.from({ length: 30 }, (_, i) =>
        Buffer.from(`item ${i} ${randomBytes(4).toString('hex')}`),
      )
      const envelopes = await Promise.all(plaintexts.map((p) => encrypt(mlKem.id, p, { context: 'batch' })))
      const revoked = await api.createKey('Encryption', 'ML-KEM-768')
      assert.equal((await call('POST', `/keys/${revoked.id}/revoke`)).status, 200)
      const theirs = await api.createKey('Encryption', 'ML-KEM-768', {}, otherTenant)
      const theirEnvelope = await encrypt(theirs.id, Buffer.from('theirs'), {}, otherTenant)
      const tampered = { ...envelopes[1]!, tag: b64(Buffer.alloc(16)) }
      const legacy = await encrypt(rsa.id, plaintexts[7]!, { mode: 'legacy' })
      const data = await call('POST', `/keys/${rsa.id}/data-key`, { keyBytes: 16 })
      assert.equal(data.status, 200, data.text)

      const items: Record<string, unknown>[] = envelopes.map((e) => ({ ...e, context: 'batch' }))
      items[1] = { ...tampered, context: 'batch' }
      items[2] = { ...items[2], destinationKeyId: mlKem.id, destinationContext: { batch: 'moved' } }
      items[3] = { ...items[3], nonce: 'not base64!' }
      items[4] = { ...theirEnvelope }
      items[5] = { ...items[5], destinationKeyId: revoked.id }
      items[6] = { ...data.body }
      items[7] = { ...legacy }
      const res = await call('POST', '/re-encrypt/batch', { items, destinationKeyId: rsa.id })
      assert.equal(res.status, 200, res.text)
      const results = res.body.results as Record<string, unknown>[]
      assert.equal(results.length, items.length)
      assert.deepEqual(
        results.slice(0, 8).map((r) => (r['ok'] ? 'ok' : r['error'])),
        [
          'ok',
          'decryption_failed',
          'ok',
          'validation_failed',
          'decryption_failed',
          'key_state_conflict',
          'ok',
          'ok',
        ],
      )
      assert.match(String(results[3]!['message']), /body\/items\/3\/nonce/)
      for (const [i, r] of results.entries()) {
        if (!r['ok']) continue
        const expectedKey = i === 2 ? mlKem.id : rsa.id
        assert.equal(r['keyId'], expectedKey, `item ${i}`)
        assert.equal(r['sourceKeyId'], i === 6 || i === 7 ? rsa.id : mlKem.id, `item ${i}`)
      }
      assert.equal(results[7]!['mode'], 'legacy')
      assert.equal(results[6]!['keyBytes'], 16)

      // The /encrypt-form results pass to /decrypt/batch as they came.
      const decryptable = [0, 2, 7, ...Array.from({ length: 22 }, (_, k) => k + 8)]
      const opened = await call('POST', '/decrypt/batch', {
        items: decryptable.map((i) => ({
          ...results[i],
          context: i === 2 ? { batch: 'moved' } : i === 7 ? undefined : 'batch',
        })),
      })
      assert.equal(opened.status, 200, opened.text)
      for (const [k, i] of decryptable.entries()) {
        const r = opened.body.results[k]
        assert.equal(r.ok, true, `item ${i}: ${JSON.stringify(r)}`)
        assert.ok(unb64(r.plaintext).equals(plaintexts[i]!), `item ${i} decrypts to its plaintext`)
      }
      // One independently, from the exported RSA key.
      assert.ok(openIndependently(partsOf(results[0]!), rsaKey, 'batch').equals(plaintexts[0]!))
      // A batch result has `ok`, which the single unwrap does not take.
      const { ok: _, ...wrappedResult } = results[6]!
      const unwrapped = await call('POST', `/keys/${rsa.id}/unwrap`, wrappedResult)
      assert.equal(unwrapped.status, 200, unwrapped.text)
      assert.equal(unwrapped.body.plaintext, data.body.plaintextDek)

      // Audit: one record per (source, destination, outcome) with its count.
      const records = (await audit('crypto.re_encrypt_batch', mlKem.id)).records
      const moved = records.find((r) => r.outcome === 'success' && r.details?.['destinationKeyId'] === rsa.id)
      assert.deepEqual(moved?.details, {
        items: 23,
        sourceKeyId: mlKem.id,
        sourceKeyVersion: 1,
        destinationKeyId: rsa.id,
        destinationKeyVersion: 1,
      })
      const failed = records.find(
        (r) => r.outcome === 'failure' && r.details?.['error'] === 'decryption_failed',
      )
      assert.equal(failed?.details?.['items'], 1)
    })

    test('a batch over the item limit is refused whole', async () => {
      const envelope = await encrypt(mlKem.id, Buffer.from('x'))
      const res = await call('POST', '/re-encrypt/batch', {
        items: Array.from({ length: 1001 }, () => envelope),
      })
      assert.equal(res.status, 400, res.text)
      assert.equal(res.body.error, 'validation_failed')
      assert.equal(res.body.fields[0].path, 'body/items')
    })
  })

  describe('audit', () => {
    test('one crypto.re_encrypt record names both keys and versions, never the data or the context', async () => {
      const marker = `PLAINTEXT-MARKER-${randomBytes(8).toString('hex')}`
      const context = `CONTEXT-MARKER-${randomBytes(8).toString('hex')}`
      const source = await api.createKey('Encryption', 'ML-KEM-768')
      const envelope = await encrypt(source.id, Buffer.from(marker), { context })
      const res = await reEncrypt({ ...envelope, context, destinationKeyId: rsa.id })
      assert.equal(res.status, 200, res.text)

      const { records, text } = await audit('crypto.re_encrypt', source.id)
      assert.equal(records.length, 1)
      const [record] = records
      assert.equal(record!.resource, `key:${source.id}`)
      assert.equal(record!.keyVersion, 1)
      assert.equal(record!.outcome, 'success')
      assert.equal(record!.actor, `apikey:${tenant.apiKeyId}`)
      assert.deepEqual(record!.details, {
        purpose: 'encrypt',
        sourceKeyId: source.id,
        sourceKeyVersion: 1,
        destinationKeyId: rsa.id,
        destinationKeyVersion: 1,
      })
      const [stored] = await svc.sql<{ text: string }[]>`
        SELECT coalesce(string_agg(a::text, E'\n'), '') AS text FROM audit_log a
        WHERE tenant_id = ${tenant.tenantId} AND action LIKE 'crypto.re_encrypt%'`
      for (const secret of [
        marker,
        b64(marker),
        context,
        b64(context),
        envelope.ciphertext,
        res.body.ciphertext,
      ]) {
        assert.equal(text.includes(secret), false, 'the audit view holds no data')
        assert.equal(stored!.text.includes(secret), false, 'the stored rows hold no data')
      }
    })

    test('a refused destination is recorded against the destination', async () => {
      const revoked = await api.createKey('Encryption', 'RSA-2048')
      assert.equal((await call('POST', `/keys/${revoked.id}/revoke`)).status, 200)
      const envelope = await encrypt(mlKem.id, Buffer.from('x'))
      const res = await reEncrypt({ ...envelope, destinationKeyId: revoked.id })
      assert.equal(res.status, 409, res.text)
      const { records } = await audit('crypto.re_encrypt', revoked.id)
      assert.deepEqual(
        records.map((r) => [r.outcome, r.details?.['error']]),
        [['failure', 'key_state_conflict']],
      )
    })
  })
})
