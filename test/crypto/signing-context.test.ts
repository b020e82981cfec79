import assert from 'node:assert/strict'
import { createPublicKey, verify as nodeVerify, randomBytes } from 'node:crypto'
import { after, before, describe, test } from 'node:test'
import { ml_dsa44, ml_dsa65, ml_dsa87 } from '@noble/post-quantum/ml-dsa.js'
import { slh_dsa_sha2_128s } from '@noble/post-quantum/slh-dsa.js'
import { apiClient, b64, unb64, uniqueName } from '../helpers/api-client.ts'
import {
  type HttpResult,
  startTestService,
  type TenantWithKey,
  type TestService,
} from '../helpers/service.ts'

/**
 * Context strings of ML-DSA (FIPS 204 §5.2) and SLH-DSA (FIPS 205 §10.2) on /sign and /verify
 * (`signatureContext`, docs/crypto-operations.md "Signatures"): signatures made with a context
 * checked by @noble/post-quantum and node:crypto outside the service (with the context, and
 * refused without it or with another one); the service's verify with the same, no, another
 * context; the empty context is the absent one; 255 bytes accepted, 256 refused; algorithms
 * without contexts (Ed25519, ECDSA, RSA) refused naming the field; a noble signature with a
 * context verified by the service against an imported key; the context kept out of the audit log.
 *
 * ML-DSA and SLH-DSA signing runs in the crypto pool's worker threads (signing-service.ts
 * runsInPool): a signature that noble accepts only with the context proves the context reached
 * the worker.
 */

interface PqLib {
  verify(sig: Uint8Array, msg: Uint8Array, publicKey: Uint8Array, opts?: { context?: Uint8Array }): boolean
}

const CONTEXT_ALGORITHMS: readonly { algorithm: string; lib: PqLib; nodeName: string }[] = [
  { algorithm: 'ML-DSA-44', lib: ml_dsa44, nodeName: 'ml-dsa-44' },
  { algorithm: 'ML-DSA-65', lib: ml_dsa65, nodeName: 'ml-dsa-65' },
  { algorithm: 'ML-DSA-87', lib: ml_dsa87, nodeName: 'ml-dsa-87' },
  { algorithm: 'SLH-DSA-128s', lib: slh_dsa_sha2_128s, nodeName: 'slh-dsa-sha2-128s' },
]
const NO_CONTEXT_ALGORITHMS = ['Ed25519', 'EC-P256', 'RSA-2048'] as const

describe('signature context strings (ML-DSA, SLH-DSA)', () => {
  let svc: TestService
  let tenant: TenantWithKey
  const keys = new Map<string, string>()

  before(async () => {
    svc = await startTestService()
    tenant = await svc.createTenant()
    const algorithms = [...CONTEXT_ALGORITHMS.map((c) => c.algorithm), ...NO_CONTEXT_ALGORITHMS]
    const created = await Promise.all(algorithms.map((a) => api.createKey('Signing', a)))
    for (const [i, algorithm] of algorithms.entries()) keys.set(algorithm, created[i]!.id)
  })

  after(async () => {
    await svc?.stop()
  })

  const api = apiClient(() => ({ svc, tenant }))
  const call = api.call

  async function sign(body: Record<string, unknown>): Promise<{ signature: string; keyVersion: number }> {
    const res = await call('POST', '/sign', body)
    assert.equal(res.status, 200, res.text)
    return res.body
  }

  async function assertVerify(body: Record<string, unknown>, valid: boolean, what: string): Promise<void> {
    const res = await call('POST', '/verify', body)
    assert.equal(res.status, 200, `${what}: ${res.text}`)
    assert.deepEqual(res.body, { valid, keyId: body['keyId'], keyVersion: 1 }, what)
  }

  /** 400 validation_failed naming exactly body/signatureContext, its message matching `pattern`. */
  function assertContextRefused(res: HttpResult, pattern: RegExp, what: string): void {
    assert.equal(res.status, 400, `${what}: ${res.text}`)
    assert.equal(res.body.error, 'validation_failed', what)
    assert.deepEqual(
      res.body.fields.map((f: { path: string }) => f.path),
      ['body/signatureContext'],
      what,
    )
    assert.match(res.body.message, pattern, what)
  }

  async function rawPublicKey(keyId: string): Promise<Buffer> {
    const res = await call('GET', `/keys/${keyId}/public?format=RAW&version=1`)
    assert.equal(res.status, 200, res.text)
    return unb64(res.body.publicKey)
  }

  async function pemPublicKey(keyId: string): Promise<string> {
    const res = await call('GET', `/keys/${keyId}/public?format=PEM&version=1`)
    assert.equal(res.status, 200, res.text)
    return res.body.publicKey
  }

  for (const c of CONTEXT_ALGORITHMS) {
    test(`${c.algorithm}: a signature with a context verifies with that context only (service, noble, node:crypto)`, async () => {
      const keyId = keys.get(c.algorithm)!
      const message = Buffer.from(`contexts ${c.algorithm} ${randomBytes(6).toString('hex')}`)
      const context = Buffer.from('invoices/v1')
      const otherContext = Buffer.from('invoices/v2')
      const raw = await rawPublicKey(keyId)
      const publicKey = createPublicKey(await pemPublicKey(keyId))
      assert.equal(publicKey.asymmetricKeyType, c.nodeName)

      const withContext = await sign({ keyId, message: b64(message), signatureContext: b64(context) })
      const sig = unb64(withContext.signature)
      assert.equal(c.lib.verify(sig, message, raw, { context }), true, 'noble, same context')
      assert.equal(c.lib.verify(sig, message, raw), false, 'noble, no context')
      assert.equal(
        c.lib.verify(sig, message, raw, { context: otherContext }),
        false,
        'noble, another context',
      )
      assert.equal(
        nodeVerify(null, message, { key: publicKey, context }, sig),
        true,
        'node:crypto, same context',
      )
      assert.equal(nodeVerify(null, message, publicKey, sig), false, 'node:crypto, no context')

      const body = { keyId, message: b64(message), signature: withContext.signature }
      await assertVerify({ ...body, signatureContext: b64(context) }, true, 'same context')
      await assertVerify(body, false, 'no context')
      await assertVerify({ ...body, signatureContext: '' }, false, 'the empty context')
      await assertVerify({ ...body, signatureContext: b64(otherContext) }, false, 'another context')
      await assertVerify(
        { ...body, message: b64(Buffer.concat([message, Buffer.of(0)])), signatureContext: b64(context) },
        false,
        'same context, another message',
      )

      // No context and the empty context are one and the same (FIPS 204: ctx defaults to empty).
      const plain = await sign({ keyId, message: b64(message) })
      const empty = await sign({ keyId, message: b64(message), signatureContext: '' })
      for (const [what, signed] of [
        ['signed without a context', plain],
        ['signed with the empty context', empty],
      ] as const) {
        const s = unb64(signed.signature)
        assert.equal(c.lib.verify(s, message, raw), true, `${what}: noble, no context`)
        assert.equal(c.lib.verify(s, message, raw, { context }), false, `${what}: noble, a context`)
        const b = { keyId, message: b64(message), signature: signed.signature }
        await assertVerify(b, true, `${what}: verify without a context`)
        await assertVerify({ ...b, signatureContext: '' }, true, `${what}: verify with the empty context`)
        await assertVerify({ ...b, signatureContext: b64(context) }, false, `${what}: verify with a context`)
      }
    })
  }

  test('ML-DSA-65: a 255-byte context is the longest (noble agrees); 256 bytes is 400 naming body/signatureContext on sign and verify', async () => {
    const keyId = keys.get('ML-DSA-65')!
    const message = b64('longest context')
    const longest = randomBytes(255)
    const signed = await sign({ keyId, message, signatureContext: b64(longest) })
    const raw = await rawPublicKey(keyId)
    assert.equal(
      ml_dsa65.verify(unb64(signed.signature), Buffer.from('longest context'), raw, { context: longest }),
      true,
      'noble accepts the 255-byte context signature',
    )
    await assertVerify(
      { keyId, message, signature: signed.signature, signatureContext: b64(longest) },
      true,
      '255 bytes',
    )

    for (const bytes of [256, 258]) {
      const tooLong = b64(randomBytes(bytes))
      assertContextRefused(
        await call('POST', '/sign', { keyId, message, signatureContext: tooLong }),
        /at most 255 bytes.*got \d+/,
        `sign, ${bytes} bytes`,
      )
      assertContextRefused(
        await call('POST', '/verify', {
          keyId,
          message,
          signature: signed.signature,
          signatureContext: tooLong,
        }),
        /at most 255 bytes.*got \d+/,
        `verify, ${bytes} bytes`,
      )
    }
    // Past 258 bytes the schema's bound (344 characters) refuses the field before it is decoded.
    assertContextRefused(
      await call('POST', '/sign', { keyId, message, signatureContext: b64(randomBytes(1024)) }),
      /./,
      'sign, 1024 bytes',
    )
    assertContextRefused(
      await call('POST', '/sign', { keyId, message, signatureContext: 'not base64!' }),
      /Base64/,
      'sign, not Base64',
    )
  })

  for (const algorithm of NO_CONTEXT_ALGORITHMS) {
    test(`${algorithm}: signatureContext (even empty) is 400 naming body/signatureContext on sign and verify`, async () => {
      const keyId = keys.get(algorithm)!
      const message = b64(`no contexts for ${algorithm}`)
      const signed = await sign({ keyId, message })
      const pattern = algorithm === 'Ed25519' ? /Ed25519ctx.*ML-DSA and SLH-DSA/ : /ML-DSA and SLH-DSA/
      for (const signatureContext of [b64('ctx'), '']) {
        assertContextRefused(
          await call('POST', '/sign', { keyId, message, signatureContext }),
          pattern,
          `sign, context "${signatureContext}"`,
        )
        assertContextRefused(
          await call('POST', '/verify', { keyId, message, signature: signed.signature, signatureContext }),
          pattern,
          `verify, context "${signatureContext}"`,
        )
      }
      await assertVerify(
        { keyId, message, signature: signed.signature },
        true,
        'without the field it verifies',
      )
    })
  }

  test('ML-DSA-65 imported from a noble seed: a noble signature with a context verifies in the service with that context only', async () => {
    const seed = randomBytes(32)
    const { publicKey, secretKey } = ml_dsa65.keygen(seed)
    const res = await call('POST', '/keys/import', {
      name: uniqueName('noble-context'),
      keyType: 'Signing',
      algorithm: 'ML-DSA-65',
      format: 'RAW',
      keyMaterial: b64(seed),
    })
    assert.equal(res.status, 201, res.text)
    const keyId = res.body.id
    assert.deepEqual(
      await rawPublicKey(keyId),
      Buffer.from(publicKey),
      "the service derives noble's public key",
    )
    const message = Buffer.from('signed by noble with a context')
    const context = randomBytes(32)
    const sig = ml_dsa65.sign(message, secretKey, { context })
    const body = { keyId, message: b64(message), signature: b64(sig) }
    await assertVerify({ ...body, signatureContext: b64(context) }, true, 'same context')
    await assertVerify(body, false, 'no context')
    await assertVerify({ ...body, signatureContext: b64(randomBytes(32)) }, false, 'another context')
  })

  test('the audit log holds neither the context nor its Base64', async () => {
    const keyId = keys.get('ML-DSA-44')!
    const context = Buffer.from(`CONTEXT-MARKER-${randomBytes(8).toString('hex')}`)
    const signed = await sign({ keyId, message: b64('audited'), signatureContext: b64(context) })
    await assertVerify(
      { keyId, message: b64('audited'), signature: signed.signature, signatureContext: b64(context) },
      true,
      'verifies',
    )
    const rows = await svc.sql<{ action: string; outcome: string; key_version: number }[]>`
      SELECT action, outcome, key_version FROM audit_log
      WHERE tenant_id = ${tenant.tenantId} AND resource = ${`key:${keyId}`}
        AND action IN ('crypto.sign', 'crypto.verify')
      ORDER BY id DESC LIMIT 2`
    assert.deepEqual(
      rows.map((r) => [r.action, r.outcome, r.key_version]),
      [
        ['crypto.verify', 'success', 1],
        ['crypto.sign', 'success', 1],
      ],
    )
    const [stored] = await svc.sql<{ text: string }[]>`
      SELECT coalesce(string_agg(a::text, E'\n'), '') AS text FROM audit_log a
      WHERE tenant_id = ${tenant.tenantId}`
    for (const secret of [context.toString(), b64(context), context.toString('hex')]) {
      assert.equal(stored!.text.includes(secret), false, `audit_log contains ${secret}`)
    }
  })
})
