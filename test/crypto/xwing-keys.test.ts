import assert from 'node:assert/strict'
import { createDecipheriv, pbkdf2Sync, randomBytes } from 'node:crypto'
import { after, before, describe, test } from 'node:test'
import { ml_kem768_x25519 } from '@noble/post-quantum/hybrid.js'
import { ml_kem768 } from '@noble/post-quantum/ml-kem.js'
import { apiClient, b64, unb64, uniqueName } from '../helpers/api-client.ts'
import { int, octets, oid, oidContent, seq, tlv, toPem } from '../helpers/der.ts'
import {
  bodyOf,
  dekFromSharedSecret,
  type Expected,
  fromCompact,
  HEADER_BYTES,
  headerBytes,
  kemRecovery,
  openEnvelope,
  type Parts,
  type Purpose,
  partsOf,
  SCHEMES,
  sealEnvelope,
} from '../helpers/envelope-parts.ts'
import {
  type AuditView,
  type HttpResult,
  startTestService,
  type TenantWithKey,
  type TestService,
} from '../helpers/service.ts'

/**
 * X-Wing keys over HTTP (issue 35 item 8; docs/keys.md, docs/envelope-format.md scheme 0x04):
 * created, imported (private and public-only), exported, rotated, and used by /encrypt, /decrypt,
 * wrap, unwrap, data keys, batches (inline and in the crypto pool's threads) and re-encrypt.
 *
 * Independent checks: every envelope the service seals under an X-Wing key is opened here with
 * @noble/post-quantum's ml_kem768_x25519 (decapsulation with the RAW-exported seed, or with the
 * seed noble itself made for an imported key) and the HKDF-Expand and AES-256-GCM steps of
 * docs/envelope-format.md (noble's HMAC-SHA256 and AES-GCM); the key encodings are rebuilt with a
 * DER writer from the draft's OID; and envelopes sealed here, outside the service, open through
 * /decrypt. Tampering, a scheme byte that names another scheme and malformed key material are
 * refused with stable codes.
 */

const CT_BYTES = 1120
const CT_M_BYTES = 1088
const PK_BYTES = 1216

/** id-XWing (draft-connolly-cfrg-xwing-kem, "Use in X.509"), parameters absent. */
const XWING_ALGORITHM = seq(oid(oidContent('1.3.6.1.4.1.62253.25722')))
const spkiOf = (publicKey: Uint8Array) =>
  seq(XWING_ALGORITHM, tlv(0x03, Buffer.of(0), Buffer.from(publicKey)))
const pkcs8Of = (seed: Uint8Array) => seq(int(0), XWING_ALGORITHM, octets(Buffer.from(seed)))
const pemToDer = (text: string) =>
  Buffer.from(text.replace(/-----[A-Z0-9 ]+-----/g, '').replace(/\s+/g, ''), 'base64')

/**
 * Opens an X-Wing envelope outside the service (docs/envelope-format.md, test/helpers/envelope-parts.ts):
 * noble's X-Wing decapsulation with the seed, HKDF-Expand-SHA256 (one HMAC) for the DEK, AES-256-GCM.
 */
const openOutside = (
  parts: Parts,
  seed: Uint8Array,
  context: string,
  expected: Expected,
  purpose: Purpose = 'encrypt',
): Buffer =>
  openEnvelope(
    parts,
    kemRecovery(SCHEMES.xWing, (cipherText) => ml_kem768_x25519.decapsulate(cipherText, seed), CT_BYTES),
    { purpose, context, expected },
  )

/** An envelope sealed here, outside the service, to a KEM public key, under the header given. */
function sealOutside(
  encapsulate: () => { sharedSecret: Uint8Array; cipherText: Uint8Array },
  header: Buffer,
  plaintext: Buffer,
  context: string,
): Parts {
  const { sharedSecret, cipherText } = encapsulate()
  const dek = dekFromSharedSecret(sharedSecret, header)
  return sealEnvelope({ header, protectedDek: cipherText, dek, plaintext, context })
}

/** The TLV elements of a DER constructed value's content. */
function elements(content: Buffer): { tag: number; content: Buffer }[] {
  const out: { tag: number; content: Buffer }[] = []
  for (let at = 0; at < content.length; ) {
    const tag = content[at]!
    let length = content[at + 1]!
    let start = at + 2
    if (length & 0x80) {
      const n = length & 0x7f
      length = content.readUIntBE(start, n)
      start += n
    }
    out.push({ tag, content: content.subarray(start, start + length) })
    at = start + length
  }
  return out
}

/** Decrypts the PBES2 (PBKDF2-HMAC-SHA256, AES-256-CBC) EncryptedPrivateKeyInfo with node's primitives. */
function decryptPbes2(der: Buffer, password: string): Buffer {
  const [info] = elements(der)
  const [scheme, encrypted] = elements(info!.content)
  const [schemeOid, schemeParams] = elements(scheme!.content)
  assert.equal(schemeOid!.content.toString('hex'), '2a864886f70d01050d', 'PBES2')
  const [kdf, cipher] = elements(schemeParams!.content)
  const [kdfOid, kdfParams] = elements(kdf!.content)
  assert.equal(kdfOid!.content.toString('hex'), '2a864886f70d01050c', 'PBKDF2')
  const [salt, iterations, ...rest] = elements(kdfParams!.content)
  const prf = rest.find((e) => e.tag === 0x30)
  assert.equal(elements(prf!.content)[0]!.content.toString('hex'), '2a864886f70d0209', 'hmacWithSHA256')
  const [cipherOid, iv] = elements(cipher!.content)
  assert.equal(cipherOid!.content.toString('hex'), '60864801650304012a', 'aes-256-cbc')
  const count = iterations!.content.readUIntBE(0, iterations!.content.length)
  const key = pbkdf2Sync(password, salt!.content, count, 32, 'sha256')
  const decipher = createDecipheriv('aes-256-cbc', key, iv!.content)
  return Buffer.concat([decipher.update(encrypted!.content), decipher.final()])
}

const flipped = (bytes: Buffer, at: number) => {
  const copy = Buffer.from(bytes)
  copy[at]! ^= 0x01
  return copy
}

describe('X-Wing keys', () => {
  let svc: TestService
  let tenant: TenantWithKey
  /** An exportable X-Wing key and its seed, as exported RAW. */
  let xw: { id: string; name: string }
  let seed: Buffer
  /** An exportable ML-KEM-768 key and its FIPS 203 seed, for re-encryption and the scheme checks. */
  let mlKem: { id: string; name: string }
  let mlKemSecret: Uint8Array

  const api = apiClient(() => ({ svc, tenant }))
  const { call } = api

  async function exportPrivate(key: { id: string; name: string }, body: Record<string, unknown>) {
    const res = await call('POST', `/keys/${key.id}/export-private`, { confirm: key.name, ...body })
    assert.equal(res.status, 200, res.text)
    return res.body
  }

  async function encrypt(keyId: string, plaintext: Buffer, context?: string) {
    const res = await call('POST', '/encrypt', {
      keyId,
      plaintext: b64(plaintext),
      ...(context === undefined ? {} : { context }),
    })
    assert.equal(res.status, 200, res.text)
    return res.body as Record<string, string> & { keyId: string; keyVersion: number }
  }

  async function decrypt(parts: Parts, context?: string): Promise<HttpResult> {
    return call('POST', '/decrypt', { ...bodyOf(parts), ...(context === undefined ? {} : { context }) })
  }

  function assertRefused(res: HttpResult, status: number, code: string, what: string) {
    assert.equal(res.status, status, `${what}: ${res.text}`)
    assert.equal(res.body?.error, code, `${what}: ${res.text}`)
  }

  async function keyCount(): Promise<number> {
    const [row] = await svc.sql<{ n: number }[]>`
      SELECT count(*)::int AS n FROM keys WHERE tenant_id = ${tenant.tenantId}`
    return row!.n
  }

  before(async () => {
    svc = await startTestService()
    tenant = await svc.createTenant()
    xw = await api.createKey('Encryption', 'X-Wing', { exportable: true })
    seed = unb64((await exportPrivate(xw, { format: 'RAW' })).privateKey)
    mlKem = await api.createKey('Encryption', 'ML-KEM-768', { exportable: true })
    const mlKemSeed = unb64((await exportPrivate(mlKem, { format: 'RAW' })).privateKey)
    mlKemSecret = ml_kem768.keygen(new Uint8Array(mlKemSeed)).secretKey
  })

  after(async () => {
    await svc?.stop()
  })

  // -------------------------------------------------------------------------------------------
  // The key and its encodings
  // -------------------------------------------------------------------------------------------

  test('an X-Wing key is an Encryption key, post-quantum, and not the Encryption default', async () => {
    const view = await call('GET', `/keys/${xw.id}`)
    assert.equal(view.status, 200, view.text)
    assert.equal(view.body.algorithm, 'X-Wing')
    assert.equal(view.body.keyType, 'Encryption')
    assert.equal(view.body.isPostQuantum, true)
    assert.equal(view.body.publicOnly, false)
    // A key created without an algorithm is ML-KEM-768, as before.
    const plain = await call('POST', '/keys', { name: uniqueName('default-alg'), keyType: 'Encryption' })
    assert.equal(plain.status, 201, plain.text)
    assert.equal(plain.body.algorithm, 'ML-KEM-768')
    // X-Wing is for encryption only.
    const signing = await call('POST', '/keys', {
      name: uniqueName('xw-sign'),
      keyType: 'Signing',
      algorithm: 'X-Wing',
    })
    assert.equal(signing.status, 400, signing.text)
  })

  test("the exports are the draft's encodings of the key noble derives from the exported 32-byte seed", async () => {
    assert.equal(seed.length, 32)
    const noble = ml_kem768_x25519.keygen(seed)
    assert.equal(noble.publicKey.length, PK_BYTES)
    const exportPublic = async (format: string) => {
      const res = await call('GET', `/keys/${xw.id}/public?format=${format}`)
      assert.equal(res.status, 200, res.text)
      assert.equal(res.body.algorithm, 'X-Wing')
      assert.equal(res.body.format, format)
      return res.body.publicKey as string
    }
    const spki = spkiOf(noble.publicKey)
    assert.equal(spki.length, 1240)
    assert.ok(
      unb64(await exportPublic('RAW')).equals(Buffer.from(noble.publicKey)),
      'RAW is the 1216-byte key',
    )
    assert.ok(unb64(await exportPublic('DER')).equals(spki), 'DER is the SPKI with id-XWing')
    const pemText = await exportPublic('PEM')
    assert.match(pemText, /^-----BEGIN PUBLIC KEY-----\n/)
    assert.ok(pemToDer(pemText).equals(spki), 'PEM is the same SPKI')

    const pkcs8 = pkcs8Of(seed)
    assert.equal(pkcs8.length, 54)
    const privatePem = (await exportPrivate(xw, { format: 'PEM' })).privateKey as string
    assert.match(privatePem, /^-----BEGIN PRIVATE KEY-----\n/)
    assert.ok(pemToDer(privatePem).equals(pkcs8), 'PEM is the PKCS#8 of the seed, publicKey absent')
    assert.ok(unb64((await exportPrivate(xw, { format: 'DER' })).privateKey).equals(pkcs8))

    // The public PEM download is the same file.
    const file = await fetch(new URL(`/api/v1/keys/${xw.id}/public/download?format=DER`, svc.baseUrl), {
      headers: { 'x-api-key': tenant.key },
    })
    assert.equal(file.status, 200)
    assert.ok(Buffer.from(await file.arrayBuffer()).equals(spki))
  })

  test('password-protected private export is PBES2 around the same PKCS#8, opened here with node', async () => {
    const password = 'correct horse battery staple'
    const encryptedPem = await exportPrivate(xw, { format: 'PEM', password })
    assert.equal(encryptedPem.encrypted, true)
    assert.match(encryptedPem.privateKey, /^-----BEGIN ENCRYPTED PRIVATE KEY-----\n/)
    assert.ok(decryptPbes2(pemToDer(encryptedPem.privateKey), password).equals(pkcs8Of(seed)))
    const encryptedDer = await exportPrivate(xw, { format: 'DER', password })
    assert.ok(decryptPbes2(unb64(encryptedDer.privateKey), password).equals(pkcs8Of(seed)))
    assert.throws(() => decryptPbes2(unb64(encryptedDer.privateKey), `${password}!`))
  })

  test('JWK is refused both ways: 400 format_not_supported (no JOSE registration for X-Wing)', async () => {
    assertRefused(
      await call('GET', `/keys/${xw.id}/public?format=JWK`),
      400,
      'format_not_supported',
      'public JWK',
    )
    assertRefused(
      await call('GET', `/keys/${xw.id}/public/download?format=JWK`),
      400,
      'format_not_supported',
      'public JWK download',
    )
    const res = await call('POST', `/keys/${xw.id}/export-private`, { confirm: xw.name, format: 'JWK' })
    assertRefused(res, 400, 'format_not_supported', 'private JWK')
    assert.doesNotMatch(res.text, new RegExp(seed.toString('base64url').slice(0, 16)))
  })

  // -------------------------------------------------------------------------------------------
  // Envelopes
  // -------------------------------------------------------------------------------------------

  test('/encrypt then /decrypt round trips, and each envelope opens outside with noble and the documented steps', async () => {
    const expected = { keyId: xw.id, keyVersion: 1 }
    for (const [plaintext, context] of [
      [Buffer.alloc(0), undefined],
      [Buffer.from('x'), 'order=1'],
      [randomBytes(70_000), 'tenant=a;region=eu'],
    ] as const) {
      const answer = await encrypt(xw.id, plaintext, context)
      assert.equal(answer.keyId, xw.id)
      assert.equal(answer.keyVersion, 1)
      const parts = partsOf(answer)
      assert.equal(parts.encapsulatedKey.length, HEADER_BYTES + CT_BYTES)
      const opened = await decrypt(parts, context)
      assert.equal(opened.status, 200, opened.text)
      assert.ok(unb64(opened.body.plaintext).equals(plaintext), '/decrypt gives the plaintext back')
      assert.equal(opened.body.keyId, xw.id)
      assert.ok(openOutside(parts, seed, context ?? '', expected).equals(plaintext), 'opens outside')
      // The context is bound, outside and in the service.
      assert.throws(() => openOutside(parts, seed, `${context ?? ''}x`, expected))
      assertRefused(await decrypt(parts, `${context ?? ''}x`), 400, 'decryption_failed', 'another context')
    }
    // Two encryptions of one plaintext share nothing: fresh X-Wing ciphertext, fresh nonce.
    const a = partsOf(await encrypt(xw.id, Buffer.from('same')))
    const b = partsOf(await encrypt(xw.id, Buffer.from('same')))
    assert.ok(!a.encapsulatedKey.equals(b.encapsulatedKey))
    assert.ok(
      !a.encapsulatedKey
        .subarray(HEADER_BYTES + CT_M_BYTES)
        .equals(b.encapsulatedKey.subarray(HEADER_BYTES + CT_M_BYTES)),
      'fresh ct_X',
    )
    assert.ok(!a.nonce.equals(b.nonce))
    // Legacy mode: the compact envelope in one string.
    const legacy = await call('POST', '/encrypt', { keyId: xw.id, plaintext: b64('legacy'), mode: 'legacy' })
    assert.equal(legacy.status, 200, legacy.text)
    assert.ok(
      openOutside(fromCompact(unb64(legacy.body.ciphertext)), seed, '', expected).equals(
        Buffer.from('legacy'),
      ),
    )
    const back = await call('POST', '/decrypt', { ciphertext: legacy.body.ciphertext, mode: 'legacy' })
    assert.equal(back.status, 200, back.text)
    assert.equal(unb64(back.body.plaintext).toString(), 'legacy')
  })

  test('tampering with any part of an X-Wing envelope is 400 decryption_failed', async () => {
    const plaintext = randomBytes(64)
    const parts = partsOf(await encrypt(xw.id, plaintext, 'ctx'))
    const ek = parts.encapsulatedKey
    const lowOrderCtX = Buffer.concat([ek.subarray(0, HEADER_BYTES + CT_M_BYTES), Buffer.alloc(32)])
    const cases: [string, Parts][] = [
      [
        'the scheme byte 0x04 → 0x01',
        { ...parts, encapsulatedKey: Buffer.concat([Buffer.of(1, 1), ek.subarray(2)]) },
      ],
      [
        'the scheme byte 0x04 → 0x02',
        { ...parts, encapsulatedKey: Buffer.concat([Buffer.of(1, 2), ek.subarray(2)]) },
      ],
      [
        'the scheme byte 0x04 → 0x03',
        { ...parts, encapsulatedKey: Buffer.concat([Buffer.of(1, 3), ek.subarray(2)]) },
      ],
      ['the key version', { ...parts, encapsulatedKey: flipped(ek, 21) }],
      ['the ML-KEM half of the ciphertext', { ...parts, encapsulatedKey: flipped(ek, HEADER_BYTES + 500) }],
      [
        'the X25519 half of the ciphertext',
        { ...parts, encapsulatedKey: flipped(ek, HEADER_BYTES + CT_M_BYTES + 5) },
      ],
      ['a low-order (zero) X25519 half', { ...parts, encapsulatedKey: lowOrderCtX }],
      ['the ciphertext cut by one byte', { ...parts, encapsulatedKey: ek.subarray(0, ek.length - 1) }],
      ['the ciphertext one byte longer', { ...parts, encapsulatedKey: Buffer.concat([ek, Buffer.of(0)]) }],
      ['the nonce', { ...parts, nonce: flipped(parts.nonce, 3) }],
      ['the tag', { ...parts, tag: flipped(parts.tag, 15) }],
      ['the AES-GCM ciphertext', { ...parts, ciphertext: flipped(parts.ciphertext, 10) }],
    ]
    for (const [what, tampered] of cases) {
      assertRefused(await decrypt(tampered, 'ctx'), 400, 'decryption_failed', what)
    }
    const intact = await decrypt(parts, 'ctx')
    assert.equal(intact.status, 200, intact.text)
    assert.ok(unb64(intact.body.plaintext).equals(plaintext))
  })

  test('envelopes sealed outside: scheme 0x04 to the X-Wing key opens; the same made with scheme 0x01, or an ML-KEM envelope made with 0x04, is refused', async () => {
    const pk = ml_kem768_x25519.keygen(seed).publicKey
    const plaintext = Buffer.from('sealed outside the service')
    const good = sealOutside(
      () => ml_kem768_x25519.encapsulate(pk),
      headerBytes(0x04, xw.id, 1),
      plaintext,
      'c',
    )
    const opened = await decrypt(good, 'c')
    assert.equal(opened.status, 200, opened.text)
    assert.ok(unb64(opened.body.plaintext).equals(plaintext), 'the service opens what noble sealed')
    // Consistent in every other way (DEK and AAD over the header as sent): only the scheme lies.
    const asMlKem = sealOutside(
      () => ml_kem768_x25519.encapsulate(pk),
      headerBytes(0x01, xw.id, 1),
      plaintext,
      'c',
    )
    assertRefused(
      await decrypt(asMlKem, 'c'),
      400,
      'decryption_failed',
      'an X-Wing ciphertext under scheme 0x01',
    )

    const mlKemPk = ml_kem768.getPublicKey(mlKemSecret)
    const mlKemGood = sealOutside(
      () => ml_kem768.encapsulate(mlKemPk),
      headerBytes(0x01, mlKem.id, 1),
      plaintext,
      'c',
    )
    const mlKemOpened = await decrypt(mlKemGood, 'c')
    assert.equal(mlKemOpened.status, 200, mlKemOpened.text)
    const asXWing = sealOutside(
      () => ml_kem768.encapsulate(mlKemPk),
      headerBytes(0x04, mlKem.id, 1),
      plaintext,
      'c',
    )
    assertRefused(
      await decrypt(asXWing, 'c'),
      400,
      'decryption_failed',
      'an ML-KEM ciphertext under scheme 0x04',
    )
  })

  test('wrap, unwrap and data keys: round trips through the service, and each opens outside with the wrap label', async () => {
    const expected = { keyId: xw.id, keyVersion: 1 }
    const material = randomBytes(48)
    const wrapped = await call('POST', `/keys/${xw.id}/wrap`, {
      plaintext: b64(material),
      context: 'bucket=a',
    })
    assert.equal(wrapped.status, 200, wrapped.text)
    const wrappedParts = fromCompact(unb64(wrapped.body.wrappedKey))
    assert.ok(openOutside(wrappedParts, seed, 'bucket=a', expected, 'wrap').equals(material))
    assert.throws(
      () => openOutside(wrappedParts, seed, 'bucket=a', expected, 'encrypt'),
      'the wrap label binds',
    )
    const unwrapped = await call('POST', `/keys/${xw.id}/unwrap`, {
      wrappedKey: wrapped.body.wrappedKey,
      context: 'bucket=a',
    })
    assert.equal(unwrapped.status, 200, unwrapped.text)
    assert.ok(unb64(unwrapped.body.plaintext).equals(material))
    const tampered = Buffer.from(unb64(wrapped.body.wrappedKey))
    tampered[2 + HEADER_BYTES + 600]! ^= 0x01
    assertRefused(
      await call('POST', `/keys/${xw.id}/unwrap`, { wrappedKey: b64(tampered), context: 'bucket=a' }),
      400,
      'decryption_failed',
      'a tampered wrapped key',
    )

    const dataKey = await call('POST', `/keys/${xw.id}/data-key`, { keyBytes: 24, context: 'bucket=b' })
    assert.equal(dataKey.status, 200, dataKey.text)
    const dek = unb64(dataKey.body.plaintextDek)
    assert.equal(dek.length, 24)
    assert.ok(
      openOutside(fromCompact(unb64(dataKey.body.encryptedDek)), seed, 'bucket=b', expected, 'wrap').equals(
        dek,
      ),
    )
    const recovered = await call('POST', `/keys/${xw.id}/unwrap`, {
      encryptedDek: dataKey.body.encryptedDek,
      context: 'bucket=b',
    })
    assert.equal(recovered.status, 200, recovered.text)
    assert.ok(unb64(recovered.body.plaintext).equals(dek))

    const generic = await call('POST', '/generate-data-key', { keyId: xw.id })
    assert.equal(generic.status, 200, generic.text)
    assert.ok(
      openOutside(fromCompact(unb64(generic.body.encryptedDek)), seed, '', expected, 'wrap').equals(
        unb64(generic.body.plaintextDek),
      ),
    )
  })

  test('batches: encrypt and decrypt batches of 3 (inline) and 12 (crypto pool threads) items beside ML-KEM items; a tampered item fails alone', async () => {
    const expected = { keyId: xw.id, keyVersion: 1 }
    for (const size of [3, 12]) {
      const plaintexts = Array.from({ length: size }, () => randomBytes(40))
      // Every third item under the ML-KEM key: one batch, one key list, two kinds of key.
      const keyOf = (i: number) => (i % 3 === 2 ? mlKem.id : xw.id)
      const sealed = await call('POST', '/encrypt/batch', {
        items: plaintexts.map((p, i) => ({ keyId: keyOf(i), plaintext: b64(p), context: `item=${i}` })),
      })
      assert.equal(sealed.status, 200, sealed.text)
      const results = sealed.body.results as Record<string, string>[]
      for (const [i, r] of results.entries()) {
        assert.equal(r['ok'], true, JSON.stringify(r))
        assert.equal(r['keyId'], keyOf(i))
        const parts = partsOf(r)
        assert.equal(
          parts.encapsulatedKey[1],
          keyOf(i) === xw.id ? 0x04 : 0x01,
          `item ${i}: its key's scheme`,
        )
        if (keyOf(i) === xw.id) {
          assert.ok(
            openOutside(parts, seed, `item=${i}`, expected).equals(plaintexts[i]!),
            `${size}: item ${i} outside`,
          )
        }
      }
      const items = results.map((r, i) => ({ ...bodyOf(partsOf(r)), context: `item=${i}` }))
      items[0] = { ...items[0]!, tag: b64(flipped(unb64(items[0]!.tag), 0)) }
      const opened = await call('POST', '/decrypt/batch', { items })
      assert.equal(opened.status, 200, opened.text)
      for (const [i, r] of (opened.body.results as Record<string, unknown>[]).entries()) {
        if (i === 0) {
          assert.equal(r['ok'], false)
          assert.equal(r['error'], 'decryption_failed')
          continue
        }
        assert.equal(r['ok'], true, `${size}: item ${i}: ${JSON.stringify(r)}`)
        assert.ok(unb64(r['plaintext'] as string).equals(plaintexts[i]!), `${size}: item ${i}`)
      }
    }
  })

  test('re-encrypt: ML-KEM-768 to X-Wing and back, single and batch; each result opens outside', async () => {
    const plaintext = randomBytes(100)
    const original = await encrypt(mlKem.id, plaintext, 'move')
    const toXWing = await call('POST', '/re-encrypt', {
      ...original,
      context: 'move',
      destinationKeyId: xw.id,
    })
    assert.equal(toXWing.status, 200, toXWing.text)
    assert.equal(toXWing.body.keyId, xw.id)
    assert.equal(toXWing.body.sourceKeyId, mlKem.id)
    const xwParts = partsOf(toXWing.body)
    assert.ok(openOutside(xwParts, seed, 'move', { keyId: xw.id, keyVersion: 1 }).equals(plaintext))

    const back = await call('POST', '/re-encrypt', {
      ...bodyOf(xwParts),
      context: 'move',
      destinationKeyId: mlKem.id,
    })
    assert.equal(back.status, 200, back.text)
    assert.equal(back.body.sourceKeyId, xw.id)
    const mlParts = partsOf(back.body)
    assert.equal(mlParts.encapsulatedKey[1], 0x01)
    const mlKemRecovery = kemRecovery(SCHEMES.mlKem, (cipherText) =>
      ml_kem768.decapsulate(cipherText, mlKemSecret),
    )
    assert.ok(
      openEnvelope(mlParts, mlKemRecovery, {
        context: 'move',
        expected: { keyId: mlKem.id, keyVersion: 1 },
      }).equals(plaintext),
      'the ML-KEM result opens outside',
    )

    // A batch of 10 (crypto pool threads): X-Wing sources to the ML-KEM key, and the reverse.
    const plaintexts = Array.from({ length: 10 }, () => randomBytes(20))
    const sources = await Promise.all(plaintexts.map((p, i) => encrypt(i % 2 ? mlKem.id : xw.id, p, 'b')))
    const batch = await call('POST', '/re-encrypt/batch', {
      items: sources.map((s, i) => ({
        ...bodyOf(partsOf(s)),
        context: 'b',
        destinationKeyId: i % 2 ? xw.id : mlKem.id,
      })),
    })
    assert.equal(batch.status, 200, batch.text)
    for (const [i, r] of (batch.body.results as Record<string, string>[]).entries()) {
      assert.equal(r['ok'], true, JSON.stringify(r))
      if (i % 2) {
        assert.ok(openOutside(partsOf(r), seed, 'b', { keyId: xw.id, keyVersion: 1 }).equals(plaintexts[i]!))
      } else {
        const opened = await decrypt(partsOf(r), 'b')
        assert.equal(opened.status, 200, opened.text)
        assert.ok(unb64(opened.body.plaintext).equals(plaintexts[i]!))
      }
    }
  })

  test('rotation: version 2 has its own seed; version 1 envelopes still open; new ones name version 2', async () => {
    const key = await api.createKey('Encryption', 'X-Wing', { exportable: true })
    const seed1 = unb64((await exportPrivate(key, { format: 'RAW' })).privateKey)
    const old = partsOf(await encrypt(key.id, Buffer.from('before'), 'r'))
    const rotated = await call('POST', `/keys/${key.id}/rotate`)
    assert.equal(rotated.status, 200, rotated.text)
    assert.equal(rotated.body.version, 2)
    const seed2 = unb64((await exportPrivate(key, { format: 'RAW', version: 2 })).privateKey)
    assert.ok(!seed1.equals(seed2), 'a fresh seed')
    const v1 = await call('GET', `/keys/${key.id}/public?format=RAW&version=1`)
    const v2 = await call('GET', `/keys/${key.id}/public?format=RAW`)
    assert.ok(unb64(v1.body.publicKey).equals(Buffer.from(ml_kem768_x25519.keygen(seed1).publicKey)))
    assert.ok(unb64(v2.body.publicKey).equals(Buffer.from(ml_kem768_x25519.keygen(seed2).publicKey)))

    const opened = await decrypt(old, 'r')
    assert.equal(opened.status, 200, opened.text)
    assert.equal(opened.body.keyVersion, 1)
    assert.equal(unb64(opened.body.plaintext).toString(), 'before')
    const fresh = await encrypt(key.id, Buffer.from('after'), 'r')
    assert.equal(fresh.keyVersion, 2)
    assert.equal(
      openOutside(partsOf(fresh), seed2, 'r', { keyId: key.id, keyVersion: 2 }).toString(),
      'after',
    )
    assert.throws(
      () => openOutside(partsOf(fresh), seed1, 'r', { keyId: key.id, keyVersion: 2 }),
      'not with v1',
    )
  })

  // -------------------------------------------------------------------------------------------
  // Import
  // -------------------------------------------------------------------------------------------

  const importBody = (format: string, keyMaterial: unknown, extra: Record<string, unknown> = {}) => ({
    name: uniqueName('xw-import'),
    keyType: 'Encryption',
    algorithm: 'X-Wing',
    format,
    keyMaterial,
    ...extra,
  })

  test("a seed made by noble, imported as RAW, PEM, PKCS#8 and DER: the public key is noble's; envelopes open outside with noble's seed", async () => {
    const nobleSeed = randomBytes(32)
    const noble = ml_kem768_x25519.keygen(nobleSeed)
    const pkcs8 = pkcs8Of(nobleSeed)
    for (const [format, material] of [
      ['RAW', b64(nobleSeed)],
      ['PEM', toPem(pkcs8, 'PRIVATE KEY')],
      ['PKCS#8', toPem(pkcs8, 'PRIVATE KEY')],
      ['PKCS#8', b64(pkcs8)],
      ['DER', b64(pkcs8)],
    ] as const) {
      const res = await call('POST', '/keys/import', importBody(format, material, { exportable: true }))
      assert.equal(res.status, 201, `${format}: ${res.text}`)
      assert.equal(res.body.algorithm, 'X-Wing')
      assert.equal(res.body.origin, 'Imported')
      assert.equal(res.body.publicOnly, false)
      const id = res.body.id as string
      const raw = await call('GET', `/keys/${id}/public?format=RAW`)
      assert.ok(
        unb64(raw.body.publicKey).equals(Buffer.from(noble.publicKey)),
        `${format}: noble's public key`,
      )
      const answer = await encrypt(id, Buffer.from(format), 'imp')
      assert.equal(
        openOutside(partsOf(answer), nobleSeed, 'imp', { keyId: id, keyVersion: 1 }).toString(),
        format,
      )
      const opened = await decrypt(partsOf(answer), 'imp')
      assert.equal(opened.status, 200, opened.text)
      // The seed comes back as it went in.
      const exported = await exportPrivate({ id, name: res.body.name }, { format: 'RAW' })
      assert.ok(unb64(exported.privateKey).equals(nobleSeed))
    }
  })

  test('public-only import of a noble public key (RAW, DER, PEM): envelopes, wrapped keys and data keys open outside; what needs the seed is 409 public_key_only', async () => {
    const nobleSeed = randomBytes(32)
    const pk = Buffer.from(ml_kem768_x25519.keygen(nobleSeed).publicKey)
    const spki = spkiOf(pk)
    for (const [format, material] of [
      ['RAW', b64(pk)],
      ['DER', b64(spki)],
      ['PEM', toPem(spki, 'PUBLIC KEY')],
    ] as const) {
      const res = await call('POST', '/keys/import', importBody(format, material, { publicOnly: true }))
      assert.equal(res.status, 201, `${format}: ${res.text}`)
      assert.equal(res.body.publicOnly, true)
      const key = { id: res.body.id as string, name: res.body.name as string }
      const expected = { keyId: key.id, keyVersion: 1 }
      const der = await call('GET', `/keys/${key.id}/public?format=DER`)
      assert.ok(unb64(der.body.publicKey).equals(spki), `${format}: the same SPKI back`)

      const plaintext = randomBytes(33)
      const answer = await encrypt(key.id, plaintext, 'po')
      assert.ok(
        openOutside(partsOf(answer), nobleSeed, 'po', expected).equals(plaintext),
        `${format}: outside`,
      )
      assertRefused(await decrypt(partsOf(answer), 'po'), 409, 'public_key_only', `${format}: /decrypt`)

      const wrapped = await call('POST', `/keys/${key.id}/wrap`, { plaintext: b64('material') })
      assert.equal(wrapped.status, 200, wrapped.text)
      assert.equal(
        openOutside(fromCompact(unb64(wrapped.body.wrappedKey)), nobleSeed, '', expected, 'wrap').toString(),
        'material',
      )
      assertRefused(
        await call('POST', `/keys/${key.id}/unwrap`, { wrappedKey: wrapped.body.wrappedKey }),
        409,
        'public_key_only',
        `${format}: unwrap`,
      )
      const dataKey = await call('POST', `/keys/${key.id}/data-key`, { keyBytes: 32 })
      assert.equal(dataKey.status, 200, dataKey.text)
      assert.ok(
        openOutside(fromCompact(unb64(dataKey.body.encryptedDek)), nobleSeed, '', expected, 'wrap').equals(
          unb64(dataKey.body.plaintextDek),
        ),
      )
      const batch = await call('POST', '/decrypt/batch', {
        items: [{ ...bodyOf(partsOf(answer)), context: 'po' }],
      })
      assert.equal(batch.status, 200, batch.text)
      assert.equal(batch.body.results[0].error, 'public_key_only')
      assertRefused(
        await call('POST', '/re-encrypt', {
          ...bodyOf(partsOf(answer)),
          context: 'po',
          destinationKeyId: xw.id,
        }),
        409,
        'public_key_only',
        `${format}: re-encrypt from it`,
      )
      assertRefused(
        await call('POST', `/keys/${key.id}/export-private`, { confirm: key.name, format: 'RAW' }),
        409,
        'public_key_only',
        `${format}: export-private`,
      )
      assertRefused(await call('POST', `/keys/${key.id}/rotate`), 409, 'public_key_only', `${format}: rotate`)
    }
  })

  test('refused imports: a stable code, no secret echoed, and no row left behind', async () => {
    const nobleSeed = randomBytes(32)
    const pk = Buffer.from(ml_kem768_x25519.keygen(nobleSeed).publicKey)
    const pkcs8 = pkcs8Of(nobleSeed)
    const lowOrder = Buffer.concat([pk.subarray(0, 1184), Buffer.alloc(32)])
    const notCanonical = Buffer.from(pk)
    notCanonical[0] = 0xff
    notCanonical[1] = 0xff // the first 12-bit coefficient 4095 ≥ q = 3329: fails FIPS 203's check
    const mlKemPkcs8 = (await exportPrivate(mlKem, { format: 'DER' })).privateKey as string
    const mlKemSpki = (await call('GET', `/keys/${mlKem.id}/public?format=DER`)).body.publicKey as string
    const encryptedPem = (
      await exportPrivate(xw, { format: 'PEM', password: 'correct horse battery staple' })
    ).privateKey as string
    const cases: [string, Record<string, unknown>, string][] = [
      ['a JWK', importBody('JWK', { kty: 'OKP', crv: 'X25519', x: 'AA', d: 'AA' }), 'format_not_supported'],
      [
        'a public JWK',
        importBody('JWK', { kty: 'OKP', crv: 'X25519', x: 'AA' }, { publicOnly: true }),
        'format_not_supported',
      ],
      [
        'an encrypted PKCS#8 with its password',
        importBody('PEM', encryptedPem, { password: 'correct horse battery staple' }),
        'format_not_supported',
      ],
      ['an encrypted PKCS#8 without a password', importBody('PEM', encryptedPem), 'format_not_supported'],
      [
        'a public key without publicOnly',
        importBody('PEM', toPem(spkiOf(pk), 'PUBLIC KEY')),
        'private_key_required',
      ],
      ['a public DER without publicOnly', importBody('DER', b64(spkiOf(pk))), 'private_key_required'],
      [
        'a private key with publicOnly',
        importBody('DER', b64(pkcs8), { publicOnly: true }),
        'public_key_expected',
      ],
      [
        'a private PEM with publicOnly',
        importBody('PEM', toPem(pkcs8, 'PRIVATE KEY'), { publicOnly: true }),
        'public_key_expected',
      ],
      ['a 31-byte seed', importBody('RAW', b64(nobleSeed.subarray(1))), 'key_size_mismatch'],
      ['a 64-byte seed', importBody('RAW', b64(Buffer.concat([nobleSeed, nobleSeed]))), 'key_size_mismatch'],
      [
        'a 1215-byte public key',
        importBody('RAW', b64(pk.subarray(1)), { publicOnly: true }),
        'key_size_mismatch',
      ],
      ['an ML-KEM-768 PKCS#8', importBody('DER', mlKemPkcs8), 'algorithm_mismatch'],
      ['an ML-KEM-768 SPKI', importBody('DER', mlKemSpki, { publicOnly: true }), 'algorithm_mismatch'],
      [
        'a low-order X25519 half',
        importBody('RAW', b64(lowOrder), { publicOnly: true }),
        'invalid_key_material',
      ],
      [
        'an SPKI with a low-order X25519 half',
        importBody('DER', b64(spkiOf(lowOrder)), { publicOnly: true }),
        'invalid_key_material',
      ],
      [
        'a non-canonical ML-KEM half',
        importBody('RAW', b64(notCanonical), { publicOnly: true }),
        'invalid_key_material',
      ],
      ['a PKCS#8 cut short', importBody('DER', b64(pkcs8.subarray(0, 53))), 'invalid_key_material'],
      [
        'a PKCS#8 with a NULL parameter',
        importBody(
          'DER',
          b64(
            seq(int(0), seq(oid(oidContent('1.3.6.1.4.1.62253.25722')), Buffer.of(5, 0)), octets(nobleSeed)),
          ),
        ),
        'invalid_key_material',
      ],
      [
        'two PEM blocks',
        importBody('PEM', toPem(pkcs8, 'PRIVATE KEY') + toPem(pkcs8, 'PRIVATE KEY')),
        'invalid_key_material',
      ],
      [
        'a public key as PKCS#8',
        importBody('PKCS#8', b64(spkiOf(pk)), { publicOnly: true }),
        'format_not_supported',
      ],
    ]
    const before = await keyCount()
    for (const [what, body, code] of cases) {
      const res = await call('POST', '/keys/import', body)
      assertRefused(res, 400, code, what)
      assert.doesNotMatch(
        res.text,
        new RegExp(nobleSeed.toString('base64').slice(0, 12).replace(/[+/]/g, '.')),
        `${what}: no seed`,
      )
    }
    assert.equal(await keyCount(), before, 'no key was stored')
    // Each refusal is audited with its reason, never the material.
    const audit = await call(
      'GET',
      `/audit?${new URLSearchParams({ action: 'keys.import', outcome: 'failure', limit: '100' })}`,
    )
    assert.equal(audit.status, 200, audit.text)
    const reasons = (audit.body.data as AuditView[]).filter((r) => r.details?.['algorithm'] === 'X-Wing')
    assert.ok(reasons.length >= cases.length, `every refusal recorded (${reasons.length})`)
    assert.doesNotMatch(audit.text, new RegExp(b64(nobleSeed).slice(0, 12).replace(/[+/]/g, '.')))
  })
})
