import assert from 'node:assert/strict'
import { createHash, createHmac, createPublicKey, verify as nodeVerify, randomBytes } from 'node:crypto'
import { after, before, describe, test } from 'node:test'
import { ml_dsa65 } from '@noble/post-quantum/ml-dsa.js'
import { MAX_VERSIONS_TRIED } from '../../src/crypto/signing-service.ts'
import { apiClient, b64, unb64, uniqueName } from '../helpers/api-client.ts'
import {
  type HttpResult,
  startTestService,
  type TenantWithKey,
  type TestService,
} from '../helpers/service.ts'

/**
 * Signatures that name their key version, and verification without a version
 * (docs/crypto-operations.md "Signatures" and "MACs"):
 * - `signatureEncoding: "versioned"` answers `kms:v<version>:<Base64>`; verify takes the version
 *   from it across rotations (no keyVersion), refuses a keyVersion that contradicts it and a
 *   malformed prefix (400 naming the field), answers 404 for a version the key does not have,
 *   and {valid: false} for a prefix moved to another existing version; the Base64 part is the
 *   plain signature (node:crypto and @noble/post-quantum verify it with the exported key);
 * - a plain signature without keyVersion is checked against every version, newest first (the
 *   current one inline, the next inline, the rest in crypto-pool tasks), and the answer names the
 *   one that matched; past the most recent MAX_VERSIONS_TRIED versions a signature needs its
 *   keyVersion; the audit record names the matched version and how many were tried;
 * - MAC verify without keyVersion likewise (checked against an HMAC computed by node:crypto with
 *   the imported key bytes), inline and in the pool.
 */

describe('versioned signatures and verification across versions', () => {
  let svc: TestService
  let tenant: TenantWithKey

  before(async () => {
    svc = await startTestService()
    tenant = await svc.createTenant()
  })

  after(async () => {
    await svc?.stop()
  })

  const api = apiClient(() => ({ svc, tenant }))
  const call = api.call
  const createKey = async (algorithm: string, keyType = 'Signing') =>
    (await api.createKey(keyType, algorithm)).id

  async function rotate(keyId: string, times = 1): Promise<void> {
    for (let i = 0; i < times; i++) {
      const res = await call('POST', `/keys/${keyId}/rotate`)
      assert.equal(res.status, 200, res.text)
    }
  }

  async function sign(body: Record<string, unknown>): Promise<{ signature: string; keyVersion: number }> {
    const res = await call('POST', '/sign', body)
    assert.equal(res.status, 200, res.text)
    return res.body
  }

  async function assertVerify(
    body: Record<string, unknown>,
    expected: { valid: boolean; keyId: string; keyVersion: number },
    what: string,
    path = '/verify',
  ): Promise<void> {
    const res = await call('POST', path, body)
    assert.equal(res.status, 200, `${what}: ${res.text}`)
    assert.deepEqual(res.body, expected, what)
  }

  function assertFieldRefused(res: HttpResult, field: string, pattern: RegExp, what: string): void {
    assert.equal(res.status, 400, `${what}: ${res.text}`)
    assert.equal(res.body.error, 'validation_failed', what)
    assert.deepEqual(
      res.body.fields.map((f: { path: string }) => f.path),
      [field],
      what,
    )
    assert.match(res.body.message, pattern, what)
  }

  async function publicKeyOf(keyId: string, version: number, format: 'PEM' | 'RAW' = 'PEM'): Promise<string> {
    const res = await call('GET', `/keys/${keyId}/public?format=${format}&version=${version}`)
    assert.equal(res.status, 200, res.text)
    return res.body.publicKey
  }

  async function auditOf(keyId: string, action: string, last: number) {
    const rows = await svc.sql<
      { key_version: number | null; outcome: string; details: Record<string, unknown> }[]
    >`
      SELECT key_version, outcome, details FROM audit_log
      WHERE tenant_id = ${tenant.tenantId} AND resource = ${`key:${keyId}`} AND action = ${action}
      ORDER BY id DESC LIMIT ${last}`
    return rows.reverse().map((r) => ({ keyVersion: r.key_version, outcome: r.outcome, details: r.details }))
  }

  const poolTasks = () => svc.api.services.cryptoPool.completedTasks()

  // -------------------------------------------------------------------------------------------
  describe('versioned signatures', () => {
    test('Ed25519 across two rotations: kms:v<n>: signatures verify without keyVersion and name their version; the Base64 part verifies with node:crypto', async () => {
      const keyId = await createKey('Ed25519')
      const message = Buffer.from(`versioned ${randomBytes(6).toString('hex')}`)
      const signed: { signature: string; keyVersion: number }[] = []
      for (let version = 1; version <= 3; version++) {
        if (version > 1) await rotate(keyId)
        const s = await sign({ keyId, message: b64(message), signatureEncoding: 'versioned' })
        assert.equal(s.keyVersion, version)
        assert.match(s.signature, new RegExp(`^kms:v${version}:[A-Za-z0-9+/]+={0,2}$`))
        const raw = unb64(s.signature.slice(`kms:v${version}:`.length))
        assert.equal(raw.length, 64)
        const pem = await publicKeyOf(keyId, version)
        assert.equal(nodeVerify(null, message, createPublicKey(pem), raw), true, `v${version}: node:crypto`)
        signed.push(s)
      }
      for (const [i, s] of signed.entries()) {
        const version = i + 1
        const body = { keyId, message: b64(message), signature: s.signature }
        await assertVerify(body, { valid: true, keyId, keyVersion: version }, `v${version}, no keyVersion`)
        await assertVerify(
          { ...body, keyVersion: version },
          { valid: true, keyId, keyVersion: version },
          `v${version}, the same keyVersion`,
        )
        await assertVerify(
          { ...body, message: b64(Buffer.concat([message, Buffer.of(1)])) },
          { valid: false, keyId, keyVersion: version },
          `v${version}, another message: invalid, still naming its version`,
        )
      }
      // The sign answer passed back as it is (with the message) is accepted.
      const answer = await call('POST', '/sign', {
        keyId,
        message: b64(message),
        signatureEncoding: 'versioned',
      })
      assert.equal(answer.status, 200, answer.text)
      await assertVerify(
        { ...answer.body, message: b64(message) },
        { valid: true, keyId, keyVersion: 3 },
        'the sign answer as it is',
      )
      // A plain signature still verifies with the keyVersion given.
      const plain = unb64(signed[0]!.signature.slice('kms:v1:'.length))
      await assertVerify(
        { keyId, keyVersion: 1, message: b64(message), signature: b64(plain) },
        { valid: true, keyId, keyVersion: 1 },
        'the Base64 part as a plain signature with keyVersion 1',
      )
    })

    test('a keyVersion that contradicts the signature is 400 naming body/keyVersion', async () => {
      const keyId = await createKey('Ed25519')
      await rotate(keyId)
      const s = await sign({ keyId, message: b64('contradiction'), signatureEncoding: 'versioned' })
      assert.equal(s.keyVersion, 2)
      assertFieldRefused(
        await call('POST', '/verify', {
          keyId,
          keyVersion: 1,
          message: b64('contradiction'),
          signature: s.signature,
        }),
        'body/keyVersion',
        /is 1, but the signature names version 2/,
        'keyVersion 1 with a kms:v2: signature',
      )
    })

    test('tampered prefixes: another existing version is {valid: false}; a missing version is 404; malformed ones are 400 naming body/signature', async () => {
      const keyId = await createKey('Ed25519')
      await rotate(keyId)
      const message = b64('tampered prefix')
      const s = await sign({ keyId, message, signatureEncoding: 'versioned' })
      const body64 = s.signature.slice('kms:v2:'.length)

      await assertVerify(
        { keyId, message, signature: `kms:v1:${body64}` },
        { valid: false, keyId, keyVersion: 1 },
        'the prefix moved to version 1',
      )
      for (const version of [3, 2_147_483_647]) {
        const res = await call('POST', '/verify', { keyId, message, signature: `kms:v${version}:${body64}` })
        assert.equal(res.status, 404, res.text)
        assert.equal(res.body.error, 'key_version_not_found', `kms:v${version}:`)
      }
      for (const malformed of [
        `kms:v0:${body64}`,
        `kms:v01:${body64}`,
        `kms:v-1:${body64}`,
        `kms:vx:${body64}`,
        `kms:2:${body64}`,
        `kms:V2:${body64}`,
        `kms:v2147483648:${body64}`,
        `kms:v99999999999:${body64}`,
        `kms:v2${body64}`,
        'kms:',
        'kms:v2',
      ]) {
        assertFieldRefused(
          await call('POST', '/verify', { keyId, message, signature: malformed }),
          'body/signature',
          /versioned signature kms:v<version>:<Base64>/,
          malformed.slice(0, 24),
        )
      }
      // A well-formed prefix whose rest is not Base64.
      assertFieldRefused(
        await call('POST', '/verify', { keyId, message, signature: 'kms:v2:not base64!' }),
        'body/signature',
        /Base64/,
        'kms:v2: with a body that is not Base64',
      )
      // The Base64 part tampered with: an invalid signature of version 2.
      const raw = unb64(body64)
      raw[10]! ^= 0x01
      await assertVerify(
        { keyId, message, signature: `kms:v2:${b64(raw)}` },
        { valid: false, keyId, keyVersion: 2 },
        'one bit of the signature flipped',
      )
      // Without the prefix, the tampered signature matches no version either.
      await assertVerify(
        { keyId, message, signature: b64(raw) },
        { valid: false, keyId, keyVersion: 2 },
        'plain and tampered',
      )
    })

    test('ML-DSA-65 (signed in the crypto pool): a versioned signature with a context; noble verifies its Base64 part', async () => {
      const keyId = await createKey('ML-DSA-65')
      await rotate(keyId)
      const message = Buffer.from('versioned with a context')
      const context = Buffer.from('ctx')
      const s = await sign({
        keyId,
        message: b64(message),
        signatureEncoding: 'versioned',
        signatureContext: b64(context),
      })
      assert.match(s.signature, /^kms:v2:/)
      const raw = unb64(s.signature.slice('kms:v2:'.length))
      const publicKey = unb64(await publicKeyOf(keyId, 2, 'RAW'))
      assert.equal(ml_dsa65.verify(raw, message, publicKey, { context }), true, 'noble')
      await rotate(keyId)
      await assertVerify(
        { keyId, message: b64(message), signature: s.signature, signatureContext: b64(context) },
        { valid: true, keyId, keyVersion: 2 },
        'after another rotation, no keyVersion',
      )
      await assertVerify(
        { keyId, message: b64(message), signature: s.signature },
        { valid: false, keyId, keyVersion: 2 },
        'without the context',
      )
    })

    test('signatureEncoding outside plain/versioned is 400; plain is the default', async () => {
      const keyId = await createKey('Ed25519')
      const res = await call('POST', '/sign', { keyId, message: b64('x'), signatureEncoding: 'vault' })
      assert.equal(res.status, 400, res.text)
      assert.equal(res.body.error, 'validation_failed')
      const plain = await sign({ keyId, message: b64('x'), signatureEncoding: 'plain' })
      const byDefault = await sign({ keyId, message: b64('x') })
      for (const s of [plain, byDefault]) assert.equal(unb64(s.signature).length, 64, s.signature)
      assert.equal(b64(unb64(byDefault.signature)), byDefault.signature, 'plain Base64')
    })
  })

  // -------------------------------------------------------------------------------------------
  describe('plain signatures without keyVersion: every version, newest first', () => {
    test('Ed25519 rotated twice: a v1 signature verifies naming version 1 (the third version tried in a pool task); an invalid one names the current version; audit names the match and the count', async () => {
      const keyId = await createKey('Ed25519')
      const message = Buffer.from(`plain across versions ${randomBytes(6).toString('hex')}`)
      const v1 = await sign({ keyId, message: b64(message) })
      await rotate(keyId)
      const v2 = await sign({ keyId, message: b64(message) })
      await rotate(keyId)
      const v3 = await sign({ keyId, message: b64(message) })
      // Independent: each signature verifies with node:crypto under its own version's public key only.
      for (const [version, s] of [
        [1, v1],
        [2, v2],
        [3, v3],
      ] as const) {
        for (const other of [1, 2, 3]) {
          const pem = createPublicKey(await publicKeyOf(keyId, other))
          assert.equal(
            nodeVerify(null, message, pem, unb64(s.signature)),
            other === version,
            `v${version} under v${other}`,
          )
        }
      }

      let tasks = poolTasks()
      await assertVerify(
        { keyId, message: b64(message), signature: v3.signature },
        { valid: true, keyId, keyVersion: 3 },
        'current',
      )
      await assertVerify(
        { keyId, message: b64(message), signature: v2.signature },
        { valid: true, keyId, keyVersion: 2 },
        'previous',
      )
      assert.equal(poolTasks() - tasks, 0, 'the current and the previous version are checked inline')
      tasks = poolTasks()
      await assertVerify(
        { keyId, message: b64(message), signature: v1.signature },
        { valid: true, keyId, keyVersion: 1 },
        'the first version, after two rotations',
      )
      assert.equal(poolTasks() - tasks, 1, 'versions past the previous one: one pool task')
      await assertVerify(
        { keyId, message: b64('another message'), signature: v1.signature },
        { valid: false, keyId, keyVersion: 3 },
        'no version matches: the current version, valid false',
      )
      await assertVerify(
        { keyId, keyVersion: 2, message: b64(message), signature: v1.signature },
        { valid: false, keyId, keyVersion: 2 },
        'a keyVersion named: that version only',
      )

      assert.deepEqual(await auditOf(keyId, 'crypto.verify', 5), [
        { keyVersion: 3, outcome: 'success', details: { valid: true } },
        { keyVersion: 2, outcome: 'success', details: { valid: true, versionsTried: 2 } },
        { keyVersion: 1, outcome: 'success', details: { valid: true, versionsTried: 3 } },
        { keyVersion: 3, outcome: 'success', details: { valid: false, versionsTried: 3 } },
        { keyVersion: 2, outcome: 'success', details: { valid: false } },
      ])
    })

    test('EC-P256 pre-hashed (verified in the pool): a v1 DIGEST signature verifies without keyVersion after a rotation', async () => {
      const keyId = await createKey('EC-P256')
      const digest = createHash('sha256').update('pre-hashed across versions').digest()
      const v1 = await sign({ keyId, message: b64(digest), messageType: 'DIGEST' })
      await rotate(keyId)
      await assertVerify(
        { keyId, message: b64(digest), messageType: 'DIGEST', signature: v1.signature },
        { valid: true, keyId, keyVersion: 1 },
        'v1 digest signature, no keyVersion',
      )
      const pem = createPublicKey(await publicKeyOf(keyId, 1))
      assert.equal(
        nodeVerify('sha256', Buffer.from('pre-hashed across versions'), pem, unb64(v1.signature)),
        true,
        'node:crypto: the v1 key signed the message behind the digest',
      )
    })

    test(`only the ${MAX_VERSIONS_TRIED} most recent versions are tried: after ${MAX_VERSIONS_TRIED} rotations a v1 signature needs its keyVersion, a v2 one does not`, async () => {
      const keyId = await createKey('Ed25519')
      const message = b64('bounded search')
      const v1 = await sign({ keyId, message })
      await rotate(keyId)
      const v2 = await sign({ keyId, message })
      await rotate(keyId, MAX_VERSIONS_TRIED - 1)
      const current = MAX_VERSIONS_TRIED + 1
      await assertVerify(
        { keyId, message, signature: v2.signature },
        { valid: true, keyId, keyVersion: 2 },
        `v2 is the ${MAX_VERSIONS_TRIED}th most recent version`,
      )
      await assertVerify(
        { keyId, message, signature: v1.signature },
        { valid: false, keyId, keyVersion: current },
        'v1 is past the bound',
      )
      await assertVerify(
        { keyId, keyVersion: 1, message, signature: v1.signature },
        { valid: true, keyId, keyVersion: 1 },
        'v1 with keyVersion 1',
      )
      const [past] = await auditOf(keyId, 'crypto.verify', 2)
      assert.deepEqual(past!.details, { valid: false, versionsTried: MAX_VERSIONS_TRIED })
    })
  })

  // -------------------------------------------------------------------------------------------
  describe('MAC verify without keyVersion', () => {
    async function importHmac(material: Buffer): Promise<string> {
      const res = await call('POST', '/keys/import', {
        name: uniqueName('hmac-versions'),
        keyType: 'HMAC',
        algorithm: 'HMAC-SHA256',
        format: 'RAW',
        keyMaterial: b64(material),
      })
      assert.equal(res.status, 201, res.text)
      return res.body.id
    }

    for (const [what, dataBytes, inPool] of [
      ['small data, checked inline', 64, false],
      ['300 KiB of data, checked in the pool', 300 * 1024, true],
    ] as const) {
      test(`an HMAC by the v1 key bytes (node:crypto) verifies without keyVersion after two rotations, naming version 1 (${what})`, async () => {
        const material = randomBytes(32)
        const keyId = await importHmac(material)
        await rotate(keyId, 2)
        const data = randomBytes(dataBytes)
        const mac = createHmac('sha256', material).update(data).digest()
        const path = `/keys/${keyId}/mac/verify`

        const tasks = poolTasks()
        await assertVerify(
          { data: b64(data), mac: b64(mac) },
          { valid: true, keyId, keyVersion: 1 },
          'v1',
          path,
        )
        if (inPool) assert.ok(poolTasks() - tasks >= 1, 'checked by pool tasks')
        else assert.equal(poolTasks() - tasks, 0, 'checked inline')

        const current = await call('POST', `/keys/${keyId}/mac`, { data: b64(data) })
        assert.equal(current.status, 200, current.text)
        assert.equal(current.body.keyVersion, 3)
        await assertVerify(
          { data: b64(data), mac: current.body.mac },
          { valid: true, keyId, keyVersion: 3 },
          'v3 (current)',
          path,
        )
        await assertVerify(
          { data: b64(data), mac: b64(randomBytes(32)) },
          { valid: false, keyId, keyVersion: 3 },
          'no version matches',
          path,
        )
        await assertVerify(
          { data: b64(data), mac: b64(mac.subarray(0, 31)) },
          { valid: false, keyId, keyVersion: 3 },
          'the v1 MAC one byte short',
          path,
        )
        await assertVerify(
          { data: b64(data), mac: b64(mac), keyVersion: 2 },
          { valid: false, keyId, keyVersion: 2 },
          'keyVersion 2 named: that version only',
          path,
        )
        await assertVerify(
          { data: b64(data), mac: b64(mac), keyVersion: 1 },
          { valid: true, keyId, keyVersion: 1 },
          'keyVersion 1 named',
          path,
        )
        const audit = await auditOf(keyId, 'crypto.mac_verify', 6)
        assert.deepEqual(audit[0], {
          keyVersion: 1,
          outcome: 'success',
          details: { valid: true, versionsTried: 3 },
        })
        assert.deepEqual(audit[2], {
          keyVersion: 3,
          outcome: 'success',
          details: { valid: false, versionsTried: 3 },
        })
      })
    }
  })
})
