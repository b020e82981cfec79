import assert from 'node:assert/strict'
import { type CipherGCMTypes, createCipheriv, createDecipheriv, createHmac, randomBytes } from 'node:crypto'
import { after, before, describe, test } from 'node:test'
import { gcm } from '@noble/ciphers/aes.js'
import { apiClient, b64, unb64, uniqueName } from '../helpers/api-client.ts'
import {
  bodyOf,
  DEK_INFO,
  type DekRecovery,
  type Expected,
  fromCompact,
  openEnvelope,
  type Parts,
  type Purpose,
  partsOf,
  SCHEMES,
} from '../helpers/envelope-parts.ts'
import {
  type AuditView,
  type HttpResult,
  startTestService,
  type TenantWithKey,
  type TestService,
} from '../helpers/service.ts'

/**
 * AES-GCM keys (issue 35; docs/crypto-operations.md "Raw AES-GCM"): AES-128/192/256-GCM keys,
 * created or imported (RAW and JWK), with POST /keys/{keyId}/raw-encrypt and /raw-decrypt; every
 * result is checked outside the service with the imported (or exported) key by node:crypto and by
 * @noble/ciphers, and AES-GCM made outside (IVs of 1 to 128 bytes) decrypts inside.
 * Any authentication failure is the one 400 decryption_failed; bad field sizes are 400s naming the
 * field. The same keys work with /encrypt, /decrypt, wrap, unwrap, data keys and batches (envelope
 * scheme 0x03, opened here from docs/envelope-format.md alone, with test/helpers/envelope-parts.ts).
 * Also: HMAC imports take 16 to 1,024 bytes.
 */

const SIZES = [
  { algorithm: 'AES-128-GCM', bytes: 16, jwkAlg: 'A128GCM' },
  { algorithm: 'AES-192-GCM', bytes: 24, jwkAlg: 'A192GCM' },
  { algorithm: 'AES-256-GCM', bytes: 32, jwkAlg: 'A256GCM' },
] as const

const cipherName = (key: Buffer) => `aes-${key.length * 8}-gcm` as CipherGCMTypes

/** node:crypto's AES-GCM with any IV length and a 16-byte tag. */
function nodeSeal(key: Buffer, iv: Buffer, plaintext: Buffer, aad: Buffer) {
  const cipher = createCipheriv(cipherName(key), key, iv, { authTagLength: 16 })
  cipher.setAAD(aad)
  const ciphertext = Buffer.concat([cipher.update(plaintext), cipher.final()])
  return { ciphertext, tag: cipher.getAuthTag() }
}

function nodeOpen(key: Buffer, iv: Buffer, ciphertext: Buffer, tag: Buffer, aad: Buffer): Buffer {
  const decipher = createDecipheriv(cipherName(key), key, iv, { authTagLength: 16 })
  decipher.setAAD(aad)
  decipher.setAuthTag(tag)
  return Buffer.concat([decipher.update(ciphertext), decipher.final()])
}

/** @noble/ciphers' GCM takes and returns ciphertext || tag. */
const nobleOpen = (key: Buffer, iv: Buffer, ciphertext: Buffer, tag: Buffer, aad: Buffer) =>
  Buffer.from(gcm(key, iv, aad).decrypt(Buffer.concat([ciphertext, tag])))

function nobleSeal(key: Buffer, iv: Buffer, plaintext: Buffer, aad: Buffer) {
  const sealed = Buffer.from(gcm(key, iv, aad).encrypt(plaintext))
  return { ciphertext: sealed.subarray(0, sealed.length - 16), tag: sealed.subarray(sealed.length - 16) }
}

// ---- The envelope (docs/envelope-format.md; test/helpers/envelope-parts.ts) ---------------------

/**
 * Scheme 0x03: protected DEK = DEK nonce (12) || AES-GCM(key, DEK nonce, AAD = "kms/envelope/v1/dek"
 * || header, DEK (32)) || its tag (16). node:crypto opens the DEK here, noble the data (the helper).
 */
const aesGcmRecovery = (key: Buffer): DekRecovery => ({
  scheme: SCHEMES.aesGcm,
  protectedDekBytes: 12 + 32 + 16,
  recover: (protectedDek, header) =>
    nodeOpen(
      key,
      protectedDek.subarray(0, 12),
      protectedDek.subarray(12, 44),
      protectedDek.subarray(44),
      Buffer.concat([DEK_INFO, header]),
    ),
})

const openOutside = (parts: Parts, purpose: Purpose, context: string, key: Buffer, expected: Expected) =>
  openEnvelope(parts, aesGcmRecovery(key), { purpose, context, expected })

/** The four envelope fields of an encrypt answer, as /decrypt takes them. */
const partsBody = (r: Record<string, string>) => bodyOf(partsOf(r))

describe('AES-GCM keys and raw AES-GCM', () => {
  let svc: TestService
  let tenant: TenantWithKey

  before(async () => {
    svc = await startTestService()
    tenant = await svc.createTenant()
  })

  after(async () => {
    await svc?.stop()
  })

  const { call } = apiClient(() => ({ svc, tenant }))

  async function importAes(
    algorithm: string,
    format: 'RAW' | 'JWK',
    secret: Buffer,
    extra: Record<string, unknown> = {},
  ): Promise<{ id: string; name: string }> {
    const size = SIZES.find((s) => s.algorithm === algorithm)!
    const name = uniqueName(`aes-${format.toLowerCase()}`)
    const keyMaterial =
      format === 'RAW' ? b64(secret) : { kty: 'oct', k: secret.toString('base64url'), alg: size.jwkAlg }
    const res = await call('POST', '/keys/import', {
      name,
      keyType: 'Encryption',
      algorithm,
      format,
      keyMaterial,
      ...extra,
    })
    assert.equal(res.status, 201, `${algorithm} ${format}: ${res.text}`)
    assert.equal(res.body.algorithm, algorithm)
    assert.equal(res.body.keyType, 'Encryption')
    assert.equal(res.body.origin, 'Imported')
    assert.equal(res.body.publicOnly, false)
    assert.equal(res.body.version, 1)
    return { id: res.body.id, name }
  }

  async function rawEncrypt(keyId: string, plaintext: Buffer, aad?: Buffer) {
    const res = await call('POST', `/keys/${keyId}/raw-encrypt`, {
      plaintext: b64(plaintext),
      ...(aad ? { aad: b64(aad) } : {}),
    })
    assert.equal(res.status, 200, res.text)
    assert.deepEqual(Object.keys(res.body).sort(), ['ciphertext', 'iv', 'keyId', 'keyVersion', 'tag'])
    const out = {
      ciphertext: unb64(res.body.ciphertext),
      iv: unb64(res.body.iv),
      tag: unb64(res.body.tag),
      keyId: res.body.keyId as string,
      keyVersion: res.body.keyVersion as number,
    }
    assert.equal(out.iv.length, 12, 'a 12-byte IV')
    assert.equal(out.tag.length, 16, 'a 16-byte tag')
    assert.equal(out.ciphertext.length, plaintext.length, 'GCM ciphertext is as long as the plaintext')
    return out
  }

  const rawDecrypt = (keyId: string, body: Record<string, unknown>) =>
    call('POST', `/keys/${keyId}/raw-decrypt`, body)

  const decryptBody = (
    sealed: { ciphertext: Buffer; iv: Buffer; tag: Buffer },
    aad?: Buffer,
    extra: Record<string, unknown> = {},
  ) => ({
    ciphertext: b64(sealed.ciphertext),
    iv: b64(sealed.iv),
    tag: b64(sealed.tag),
    ...(aad ? { aad: b64(aad) } : {}),
    ...extra,
  })

  async function assertRawOpens(
    keyId: string,
    body: Record<string, unknown>,
    plaintext: Buffer,
    keyVersion = 1,
  ) {
    const res = await rawDecrypt(keyId, body)
    assert.equal(res.status, 200, res.text)
    assert.ok(unb64(res.body.plaintext).equals(plaintext), 'the plaintext comes back')
    assert.equal(res.body.keyId, keyId)
    assert.equal(res.body.keyVersion, keyVersion)
  }

  function assertRefused(res: HttpResult, status: number, code: string, what: string) {
    assert.equal(res.status, status, `${what}: ${res.text}`)
    assert.equal(res.body?.error, code, `${what}: ${res.text}`)
  }

  async function exportPrivate(key: { id: string; name: string }, format: 'RAW' | 'JWK', version?: number) {
    const res = await call('POST', `/keys/${key.id}/export-private`, {
      confirm: key.name,
      format,
      ...(version ? { version } : {}),
    })
    assert.equal(res.status, 200, res.text)
    return res.body
  }

  // -------------------------------------------------------------------------------------------
  // raw-encrypt, checked outside
  // -------------------------------------------------------------------------------------------

  for (const size of SIZES) {
    test(`${size.algorithm} imported as RAW and JWK: raw-encrypt opens outside with node:crypto and noble`, async () => {
      for (const format of ['RAW', 'JWK'] as const) {
        const secret = randomBytes(size.bytes)
        const key = await importAes(size.algorithm, format, secret)
        const plaintext = randomBytes(1000)
        const aad = Buffer.from(`order=${randomBytes(4).toString('hex')}`)
        const sealed = await rawEncrypt(key.id, plaintext, aad)
        assert.equal(sealed.keyId, key.id)
        assert.equal(sealed.keyVersion, 1)
        assert.ok(
          nodeOpen(secret, sealed.iv, sealed.ciphertext, sealed.tag, aad).equals(plaintext),
          'node:crypto opens it',
        )
        assert.ok(
          nobleOpen(secret, sealed.iv, sealed.ciphertext, sealed.tag, aad).equals(plaintext),
          'noble opens it',
        )
        // The AAD is bound: outside, another AAD does not open it.
        assert.throws(() => nodeOpen(secret, sealed.iv, sealed.ciphertext, sealed.tag, Buffer.from('other')))

        // Without AAD: the empty AAD.
        const bare = await rawEncrypt(key.id, plaintext)
        assert.ok(nobleOpen(secret, bare.iv, bare.ciphertext, bare.tag, Buffer.alloc(0)).equals(plaintext))
        assert.ok(!bare.iv.equals(sealed.iv), 'a fresh IV per call')
        // And back through raw-decrypt, with and without the answer's keyId and version.
        await assertRawOpens(key.id, decryptBody(sealed, aad), plaintext)
        await assertRawOpens(key.id, decryptBody(sealed, aad, { keyId: key.id, keyVersion: 1 }), plaintext)
        await assertRawOpens(key.id, decryptBody(bare), plaintext)
      }
    })
  }

  test('created AES keys: raw-encrypt round trips, and the exported key opens the ciphertext outside', async () => {
    for (const size of SIZES) {
      const name = uniqueName('aes-created')
      const created = await call('POST', '/keys', {
        name,
        keyType: 'Encryption',
        algorithm: size.algorithm,
        exportable: true,
      })
      assert.equal(created.status, 201, created.text)
      assert.equal(created.body.publicOnly, false)
      const key = { id: created.body.id as string, name }
      const plaintext = Buffer.from(`created ${size.algorithm}`)
      const sealed = await rawEncrypt(key.id, plaintext, Buffer.from('aad'))
      await assertRawOpens(key.id, decryptBody(sealed, Buffer.from('aad')), plaintext)
      const exported = await exportPrivate(key, 'RAW')
      const secret = unb64(exported.privateKey)
      assert.equal(secret.length, size.bytes, 'the exported key has the algorithm size')
      assert.ok(
        nobleOpen(secret, sealed.iv, sealed.ciphertext, sealed.tag, Buffer.from('aad')).equals(plaintext),
      )
    }
  })

  test('AES-GCM made outside with 12-, 16-, 1- and 128-byte IVs decrypts through raw-decrypt', async () => {
    for (const size of SIZES) {
      const secret = randomBytes(size.bytes)
      const key = await importAes(size.algorithm, 'RAW', secret)
      const plaintext = randomBytes(333)
      const aad = randomBytes(20)
      for (const ivBytes of [12, 16, 1, 2, 64, 128]) {
        const iv = randomBytes(ivBytes)
        const sealed = nodeSeal(secret, iv, plaintext, aad)
        await assertRawOpens(key.id, decryptBody({ ...sealed, iv }, aad), plaintext)
      }
      // noble, as another outside implementation.
      for (const ivBytes of [12, 16, 128]) {
        const iv = randomBytes(ivBytes)
        const sealed = nobleSeal(secret, iv, plaintext, aad)
        await assertRawOpens(key.id, decryptBody({ ...sealed, iv }, aad), plaintext)
      }
      // An empty plaintext, with and without AAD.
      const iv = randomBytes(12)
      const empty = nodeSeal(secret, iv, Buffer.alloc(0), aad)
      await assertRawOpens(key.id, decryptBody({ ...empty, iv }, aad), Buffer.alloc(0))
    }
  })

  test('a tampered tag, AAD, ciphertext or IV, or another key: the one 400 decryption_failed', async () => {
    const secret = randomBytes(32)
    const key = await importAes('AES-256-GCM', 'RAW', secret)
    const other = await importAes('AES-256-GCM', 'RAW', randomBytes(32))
    const plaintext = randomBytes(64)
    const aad = Buffer.from('the-aad')
    const sealed = await rawEncrypt(key.id, plaintext, aad)
    const flip = (bytes: Buffer, at: number) => {
      const copy = Buffer.from(bytes)
      copy[at]! ^= 0x01
      return copy
    }
    const cases: [string, string, Record<string, unknown>][] = [
      ['tag, first bit', key.id, decryptBody({ ...sealed, tag: flip(sealed.tag, 0) }, aad)],
      ['tag, last byte', key.id, decryptBody({ ...sealed, tag: flip(sealed.tag, 15) }, aad)],
      ['ciphertext', key.id, decryptBody({ ...sealed, ciphertext: flip(sealed.ciphertext, 10) }, aad)],
      [
        'ciphertext truncated',
        key.id,
        decryptBody({ ...sealed, ciphertext: sealed.ciphertext.subarray(1) }, aad),
      ],
      ['iv', key.id, decryptBody({ ...sealed, iv: flip(sealed.iv, 5) }, aad)],
      ['iv longer', key.id, decryptBody({ ...sealed, iv: Buffer.concat([sealed.iv, Buffer.of(0)]) }, aad)],
      ['aad changed', key.id, decryptBody(sealed, flip(aad, 0))],
      ['aad missing', key.id, decryptBody(sealed)],
      ['aad given where none was', key.id, decryptBody(await rawEncrypt(key.id, plaintext), aad)],
      ['another key', other.id, decryptBody(sealed, aad)],
    ]
    const messages = new Set<string>()
    for (const [what, keyId, body] of cases) {
      const res = await rawDecrypt(keyId, body)
      assertRefused(res, 400, 'decryption_failed', what)
      assert.equal(res.body.plaintext, undefined)
      assert.ok(!res.text.includes(b64(plaintext)))
      messages.add(res.body.message)
    }
    assert.equal(messages.size, 1, 'one message for every failure: nothing tells them apart')
    // The untampered request still opens.
    await assertRawOpens(key.id, decryptBody(sealed, aad), plaintext)
  })

  test('iv empty or over 128 bytes, a tag not 16 bytes: 400 naming the field', async () => {
    const key = await importAes('AES-128-GCM', 'RAW', randomBytes(16))
    const sealed = await rawEncrypt(key.id, Buffer.from('x'))
    const cases: [string, string, Record<string, unknown>][] = [
      ['iv empty', 'body/iv', decryptBody({ ...sealed, iv: Buffer.alloc(0) })],
      ['iv 129 bytes', 'body/iv', decryptBody({ ...sealed, iv: randomBytes(129) })],
      ['iv 1,025 bytes', 'body/iv', decryptBody({ ...sealed, iv: randomBytes(1025) })],
      ['iv 2,000 bytes', 'body/iv', decryptBody({ ...sealed, iv: randomBytes(2000) })],
      ['tag 15 bytes', 'body/tag', decryptBody({ ...sealed, tag: sealed.tag.subarray(0, 15) })],
      [
        'tag 17 bytes',
        'body/tag',
        decryptBody({ ...sealed, tag: Buffer.concat([sealed.tag, Buffer.of(0)]) }),
      ],
      [
        'tag 12 bytes (truncated GCM tag)',
        'body/tag',
        decryptBody({ ...sealed, tag: sealed.tag.subarray(0, 12) }),
      ],
      ['tag empty', 'body/tag', decryptBody({ ...sealed, tag: Buffer.alloc(0) })],
      ['tag not Base64', 'body/tag', { ...decryptBody(sealed), tag: '!!!!' }],
      [
        'keyId of another key',
        'body/keyId',
        decryptBody(sealed, undefined, { keyId: '00000000-0000-4000-8000-000000000000' }),
      ],
    ]
    for (const [what, field, body] of cases) {
      const res = await rawDecrypt(key.id, body)
      assert.equal(res.status, 400, `${what}: ${res.text}`)
      assert.notEqual(
        res.body.error,
        'decryption_failed',
        `${what}: a size error is not an authentication failure`,
      )
      assert.ok(res.text.includes(field), `${what}: the answer names ${field}: ${res.text}`)
    }
    // raw-encrypt: an over-long plaintext and AAD are refused by the schema, naming the field.
    for (const field of ['plaintext', 'aad'] as const) {
      const res = await call('POST', `/keys/${key.id}/raw-encrypt`, {
        plaintext: b64('x'),
        [field]: b64(randomBytes(64 * 1024 + 3)),
      })
      assert.equal(res.status, 400, res.text)
      assert.ok(res.text.includes(`body/${field}`), res.text)
    }
  })

  test('raw-encrypt and raw-decrypt with a key that is not AES: 400 key_type_mismatch', async () => {
    const sealed = { ciphertext: randomBytes(4), iv: randomBytes(12), tag: randomBytes(16) }
    for (const [keyType, algorithm] of [
      ['Encryption', 'ML-KEM-768'],
      ['Encryption', 'RSA-2048'],
      ['Signing', 'EC-P256'],
      ['HMAC', 'HMAC-SHA256'],
    ] as const) {
      const created = await call('POST', '/keys', { name: uniqueName('not-aes'), keyType, algorithm })
      assert.equal(created.status, 201, created.text)
      const id = created.body.id
      const enc = await call('POST', `/keys/${id}/raw-encrypt`, { plaintext: b64('x') })
      assertRefused(enc, 400, 'key_type_mismatch', `${algorithm} raw-encrypt`)
      assertRefused(
        await rawDecrypt(id, decryptBody(sealed)),
        400,
        'key_type_mismatch',
        `${algorithm} raw-decrypt`,
      )
    }
  })

  test('after a rotation, raw-decrypt with keyVersion 1 still opens; without it, the current version is used', async () => {
    const secret = randomBytes(32)
    const key = await importAes('AES-256-GCM', 'JWK', secret, { exportable: true })
    const plaintext = Buffer.from('before the rotation')
    const v1 = await rawEncrypt(key.id, plaintext)
    const rotated = await call('POST', `/keys/${key.id}/rotate`)
    assert.equal(rotated.status, 200, rotated.text)
    assert.equal(rotated.body.version, 2)

    await assertRawOpens(key.id, decryptBody(v1, undefined, { keyVersion: 1 }), plaintext, 1)
    // Without keyVersion the current version (2) is used, under which v1's ciphertext fails.
    const current = await rawDecrypt(key.id, decryptBody(v1))
    assertRefused(current, 400, 'decryption_failed', 'a version-1 ciphertext under the current version')

    const after = Buffer.from('after the rotation')
    const v2 = await rawEncrypt(key.id, after)
    assert.equal(v2.keyVersion, 2)
    await assertRawOpens(key.id, decryptBody(v2), after, 2)
    assertRefused(
      await rawDecrypt(key.id, decryptBody(v2, undefined, { keyVersion: 1 })),
      400,
      'decryption_failed',
      'a version-2 ciphertext under version 1',
    )
    assertRefused(
      await rawDecrypt(key.id, decryptBody(v2, undefined, { keyVersion: 3 })),
      404,
      'key_version_not_found',
      'a version that does not exist',
    )
    // Outside: version 1 is the imported key, version 2 a new one the service generated.
    const exported2 = unb64((await exportPrivate(key, 'RAW', 2)).privateKey)
    assert.equal(exported2.length, 32)
    assert.ok(!exported2.equals(secret), 'the new version has new material')
    assert.ok(nobleOpen(exported2, v2.iv, v2.ciphertext, v2.tag, Buffer.alloc(0)).equals(after))
    assert.ok(nobleOpen(secret, v1.iv, v1.ciphertext, v1.tag, Buffer.alloc(0)).equals(plaintext))
  })

  // -------------------------------------------------------------------------------------------
  // The envelope operations with AES keys (scheme 0x03)
  // -------------------------------------------------------------------------------------------

  test('/encrypt and /decrypt with AES keys: scheme 0x03, opened outside with the imported key', async () => {
    for (const size of SIZES) {
      const secret = randomBytes(size.bytes)
      const key = await importAes(size.algorithm, 'RAW', secret)
      const expected = { keyId: key.id, keyVersion: 1 }
      const plaintext = randomBytes(500)
      const context = `tenant=${randomBytes(3).toString('hex')}`
      const enc = await call('POST', '/encrypt', { keyId: key.id, plaintext: b64(plaintext), context })
      assert.equal(enc.status, 200, enc.text)
      assert.equal(enc.body.keyId, key.id)
      assert.equal(enc.body.keyVersion, 1)
      const parts = partsOf(enc.body)
      assert.ok(
        openOutside(parts, 'encrypt', context, secret, expected).equals(plaintext),
        `${size.algorithm}: opens outside`,
      )
      assert.throws(
        () => openOutside(parts, 'encrypt', `${context}!`, secret, expected),
        'the context is bound',
      )
      assert.throws(() => openOutside(parts, 'wrap', context, secret, expected), 'the purpose label is bound')
      assert.throws(
        () => openOutside(parts, 'encrypt', context, randomBytes(size.bytes), expected),
        'another key fails',
      )

      const dec = await call('POST', '/decrypt', {
        ciphertext: enc.body.ciphertext,
        encapsulatedKey: enc.body.encapsulatedKey,
        nonce: enc.body.nonce,
        tag: enc.body.tag,
        context,
      })
      assert.equal(dec.status, 200, dec.text)
      assert.ok(unb64(dec.body.plaintext).equals(plaintext))
      assert.equal(dec.body.keyId, key.id)
      const wrongContext = await call('POST', '/decrypt', { ...partsBody(enc.body), context: 'other' })
      assertRefused(wrongContext, 400, 'decryption_failed', 'another context')

      // Legacy mode: the compact form, the same scheme.
      const legacy = await call('POST', '/encrypt', {
        keyId: key.id,
        plaintext: b64(plaintext),
        mode: 'legacy',
      })
      assert.equal(legacy.status, 200, legacy.text)
      assert.ok(
        openOutside(fromCompact(unb64(legacy.body.ciphertext)), 'encrypt', '', secret, expected).equals(
          plaintext,
        ),
      )
      const legacyDec = await call('POST', '/decrypt', { ciphertext: legacy.body.ciphertext, mode: 'legacy' })
      assert.equal(legacyDec.status, 200, legacyDec.text)
      assert.ok(unb64(legacyDec.body.plaintext).equals(plaintext))
    }
  })

  test('wrap, unwrap and data keys with an AES key; opened outside with the imported key', async () => {
    const secret = randomBytes(24)
    const key = await importAes('AES-192-GCM', 'JWK', secret)
    const expected = { keyId: key.id, keyVersion: 1 }
    const material = randomBytes(64)
    const wrapped = await call('POST', `/keys/${key.id}/wrap`, { plaintext: b64(material), context: 'w' })
    assert.equal(wrapped.status, 200, wrapped.text)
    assert.ok(
      openOutside(fromCompact(unb64(wrapped.body.wrappedKey)), 'wrap', 'w', secret, expected).equals(
        material,
      ),
    )
    const unwrapped = await call('POST', `/keys/${key.id}/unwrap`, {
      wrappedKey: wrapped.body.wrappedKey,
      context: 'w',
    })
    assert.equal(unwrapped.status, 200, unwrapped.text)
    assert.ok(unb64(unwrapped.body.plaintext).equals(material))
    assertRefused(
      await call('POST', `/keys/${key.id}/unwrap`, { wrappedKey: wrapped.body.wrappedKey, context: 'x' }),
      400,
      'decryption_failed',
      'unwrap with another context',
    )

    for (const keyBytes of [16, 32] as const) {
      const dataKey = await call('POST', `/keys/${key.id}/data-key`, { keyBytes, context: 'd' })
      assert.equal(dataKey.status, 200, dataKey.text)
      const dek = unb64(dataKey.body.plaintextDek)
      assert.equal(dek.length, keyBytes)
      assert.ok(
        openOutside(fromCompact(unb64(dataKey.body.encryptedDek)), 'wrap', 'd', secret, expected).equals(dek),
      )
      const back = await call('POST', `/keys/${key.id}/unwrap`, { ...dataKey.body, context: 'd' })
      assert.equal(back.status, 200, back.text)
      assert.ok(unb64(back.body.plaintext).equals(dek))
    }
    const generic = await call('POST', '/generate-data-key', { keyId: key.id })
    assert.equal(generic.status, 200, generic.text)
    assert.ok(
      openOutside(fromCompact(unb64(generic.body.encryptedDek)), 'wrap', '', secret, expected).equals(
        unb64(generic.body.plaintextDek),
      ),
    )
  })

  test('batches with an AES key: each item opens outside and through /decrypt/batch', async () => {
    const secret = randomBytes(16)
    const key = await importAes('AES-128-GCM', 'RAW', secret)
    const expected = { keyId: key.id, keyVersion: 1 }
    const items = [randomBytes(1), randomBytes(100), randomBytes(5000)]
    const enc = await call('POST', '/encrypt/batch', {
      items: items.map((p, i) => ({ keyId: key.id, plaintext: b64(p), context: `item-${i}` })),
    })
    assert.equal(enc.status, 200, enc.text)
    const results = enc.body.results as Record<string, string>[]
    assert.equal(results.length, items.length)
    for (const [i, r] of results.entries()) {
      assert.equal(r['ok'], true, JSON.stringify(r))
      assert.ok(
        openOutside(partsOf(r), 'encrypt', `item-${i}`, secret, expected).equals(items[i]!),
        `item ${i}`,
      )
    }
    const dec = await call('POST', '/decrypt/batch', {
      items: results.map((r, i) => ({ ...partsBody(r), context: `item-${i}` })),
    })
    assert.equal(dec.status, 200, dec.text)
    for (const [i, r] of (dec.body.results as Record<string, string>[]).entries()) {
      assert.equal(r['ok'], true, JSON.stringify(r))
      assert.ok(unb64(r['plaintext']!).equals(items[i]!), `item ${i} decrypts`)
    }
  })

  // -------------------------------------------------------------------------------------------
  // Export, import refusals
  // -------------------------------------------------------------------------------------------

  test('private export of an exportable AES key (RAW and JWK) is what was imported; no public key (409)', async () => {
    for (const size of SIZES) {
      const secret = randomBytes(size.bytes)
      const key = await importAes(size.algorithm, 'JWK', secret, { exportable: true })
      const raw = await exportPrivate(key, 'RAW')
      assert.ok(unb64(raw.privateKey).equals(secret), `${size.algorithm}: RAW export is the imported key`)
      const jwk = await exportPrivate(key, 'JWK')
      assert.deepEqual(jwk.privateKey, { kty: 'oct', k: secret.toString('base64url'), alg: size.jwkAlg })
      for (const format of ['PEM', 'DER', 'RAW', 'JWK']) {
        const pub = await call('GET', `/keys/${key.id}/public?format=${format}`)
        assertRefused(pub, 409, 'no_public_key', `${size.algorithm} public ${format}`)
      }
      // PEM/DER (PKCS#8) do not hold a secret key.
      const pem = await call('POST', `/keys/${key.id}/export-private`, { confirm: key.name, format: 'PEM' })
      assert.equal(pem.status, 400, pem.text)
    }
    // Not exportable: the existing refusal.
    const closed = await importAes('AES-256-GCM', 'RAW', randomBytes(32))
    const refused = await call('POST', `/keys/${closed.id}/export-private`, {
      confirm: closed.name,
      format: 'RAW',
    })
    assertRefused(refused, 409, 'key_not_exportable', 'not exportable')
  })

  test('AES imports that do not fit: wrong size, another JWK alg, a format without secret keys', async () => {
    const before = await svc.sql<
      { n: number }[]
    >`SELECT count(*)::int AS n FROM keys WHERE tenant_id = ${tenant.tenantId}`
    const cases: [string, Record<string, unknown>, string][] = [
      [
        'AES-256 of 16 bytes',
        { algorithm: 'AES-256-GCM', format: 'RAW', keyMaterial: b64(randomBytes(16)) },
        'key_size_mismatch',
      ],
      [
        'AES-128 of 17 bytes',
        { algorithm: 'AES-128-GCM', format: 'RAW', keyMaterial: b64(randomBytes(17)) },
        'key_size_mismatch',
      ],
      [
        'AES-192 of 32 bytes',
        { algorithm: 'AES-192-GCM', format: 'RAW', keyMaterial: b64(randomBytes(32)) },
        'key_size_mismatch',
      ],
      [
        'JWK A128GCM as AES-256',
        {
          algorithm: 'AES-256-GCM',
          format: 'JWK',
          keyMaterial: { kty: 'oct', k: randomBytes(32).toString('base64url'), alg: 'A128GCM' },
        },
        'algorithm_mismatch',
      ],
      [
        'JWK HS256 as AES-256',
        {
          algorithm: 'AES-256-GCM',
          format: 'JWK',
          keyMaterial: { kty: 'oct', k: randomBytes(32).toString('base64url'), alg: 'HS256' },
        },
        'algorithm_mismatch',
      ],
      [
        'JWK not oct',
        {
          algorithm: 'AES-256-GCM',
          format: 'JWK',
          keyMaterial: { kty: 'EC', k: randomBytes(32).toString('base64url') },
        },
        'invalid_key_material',
      ],
      [
        'PEM',
        { algorithm: 'AES-256-GCM', format: 'PEM', keyMaterial: b64(randomBytes(32)) },
        'format_not_supported',
      ],
    ]
    for (const [what, body, code] of cases) {
      const res = await call('POST', '/keys/import', {
        name: uniqueName('aes-bad'),
        keyType: 'Encryption',
        ...body,
      })
      assertRefused(res, 400, code, what)
    }
    // AES is an Encryption algorithm only.
    const asSigning = await call('POST', '/keys/import', {
      name: uniqueName('aes-signing'),
      keyType: 'Signing',
      algorithm: 'AES-256-GCM',
      format: 'RAW',
      keyMaterial: b64(randomBytes(32)),
    })
    assert.equal(asSigning.status, 400, asSigning.text)
    const after = await svc.sql<
      { n: number }[]
    >`SELECT count(*)::int AS n FROM keys WHERE tenant_id = ${tenant.tenantId}`
    assert.equal(after[0]!.n, before[0]!.n, 'no refused import wrote a key')
  })

  // -------------------------------------------------------------------------------------------
  // Audit
  // -------------------------------------------------------------------------------------------

  test('crypto.raw_encrypt and crypto.raw_decrypt are audited with the key and version, never the data or AAD', async () => {
    const secret = randomBytes(32)
    const key = await importAes('AES-256-GCM', 'RAW', secret)
    const marker = Buffer.from(`RAW-PLAINTEXT-${randomBytes(8).toString('hex')}`)
    const aad = Buffer.from(`RAW-AAD-${randomBytes(8).toString('hex')}`)
    const sealed = await rawEncrypt(key.id, marker, aad)
    await assertRawOpens(key.id, decryptBody(sealed, aad), marker)
    const failed = await rawDecrypt(key.id, decryptBody(sealed, Buffer.from('wrong')))
    assertRefused(failed, 400, 'decryption_failed', 'wrong AAD')
    const actor = `apikey:${tenant.apiKeyId}`

    const read = async (action: string) => {
      const res = await call('GET', `/audit?${new URLSearchParams({ action, resource: `key:${key.id}` })}`)
      assert.equal(res.status, 200, res.text)
      return { records: res.body.data as AuditView[], text: res.text }
    }
    const encrypts = await read('crypto.raw_encrypt')
    assert.deepEqual(
      encrypts.records.map((r) => [r.action, r.resource, r.keyVersion, r.outcome, r.actor]),
      [['crypto.raw_encrypt', `key:${key.id}`, 1, 'success', actor]],
    )
    const decrypts = await read('crypto.raw_decrypt')
    assert.deepEqual(
      decrypts.records.map((r) => [r.action, r.resource, r.keyVersion, r.outcome, r.actor]).reverse(),
      [
        ['crypto.raw_decrypt', `key:${key.id}`, 1, 'success', actor],
        ['crypto.raw_decrypt', `key:${key.id}`, 1, 'failure', actor],
      ],
    )
    const [stored] = await svc.sql<{ text: string }[]>`
      SELECT coalesce(string_agg(a::text, E'\n'), '') AS text FROM audit_log a
      WHERE tenant_id = ${tenant.tenantId} AND resource = ${`key:${key.id}`}`
    const secrets = [
      marker.toString(),
      b64(marker),
      marker.toString('hex'),
      aad.toString(),
      b64(aad),
      aad.toString('hex'),
      b64(sealed.ciphertext),
      b64(sealed.tag),
      b64(sealed.iv),
      b64(secret),
      secret.toString('hex'),
    ]
    for (const [where, text] of [
      ['GET /audit crypto.raw_encrypt', encrypts.text],
      ['GET /audit crypto.raw_decrypt', decrypts.text],
      ['audit_log rows', stored!.text],
    ] as const) {
      for (const secret of secrets) {
        assert.equal(text.includes(secret), false, `${where} contains ${secret.slice(0, 30)}`)
      }
    }
  })

  // -------------------------------------------------------------------------------------------
  // HMAC imports: 16 to 1,024 bytes
  // -------------------------------------------------------------------------------------------

  test('HMAC-SHA256 secrets of 16, 65 and 1,024 bytes import and MAC as node:crypto; 15 and 1,025 bytes are 400', async () => {
    const data = Buffer.from('the data to authenticate')
    for (const bytes of [16, 65, 1024]) {
      const secret = randomBytes(bytes)
      const imported = await call('POST', '/keys/import', {
        name: uniqueName(`hmac-${bytes}`),
        keyType: 'HMAC',
        algorithm: 'HMAC-SHA256',
        format: 'RAW',
        keyMaterial: b64(secret),
      })
      assert.equal(imported.status, 201, `${bytes} bytes: ${imported.text}`)
      const mac = await call('POST', `/keys/${imported.body.id}/mac`, { data: b64(data) })
      assert.equal(mac.status, 200, mac.text)
      const expected = createHmac('sha256', secret).update(data).digest()
      assert.ok(unb64(mac.body.mac).equals(expected), `${bytes} bytes: the MAC is node:crypto's`)
      const verified = await call('POST', `/keys/${imported.body.id}/mac/verify`, {
        data: b64(data),
        mac: b64(expected),
      })
      assert.equal(verified.status, 200, verified.text)
      assert.equal(verified.body.valid, true)
    }
    for (const bytes of [15, 1025]) {
      const res = await call('POST', '/keys/import', {
        name: uniqueName(`hmac-${bytes}`),
        keyType: 'HMAC',
        algorithm: 'HMAC-SHA256',
        format: 'RAW',
        keyMaterial: b64(randomBytes(bytes)),
      })
      assertRefused(res, 400, 'key_size_mismatch', `${bytes} bytes`)
      assert.match(res.body.message, /16 to 1024 bytes/)
    }
  })
})
