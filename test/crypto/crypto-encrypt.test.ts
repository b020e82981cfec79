import assert from 'node:assert/strict'
import { randomBytes, randomUUID } from 'node:crypto'
import { after, before, describe, test } from 'node:test'
import {
  DECRYPT_JSON_BODY_LIMIT_BYTES,
  ENCRYPT_JSON_BODY_LIMIT_BYTES,
} from '../../src/crypto/crypto-schemas.ts'
import { DAY_MS } from '../../src/platform/clock.ts'
import { apiClient, b64, mapConcurrently, unb64, uniqueName } from '../helpers/api-client.ts'
import { type ManualClock, manualClock } from '../helpers/manual-clock.ts'
import {
  type AuditView,
  type HttpResult,
  startTestService,
  type TenantWithKey,
  type TestService,
} from '../helpers/service.ts'

/**
 * POST /api/v1/encrypt and /decrypt over real HTTP (docs/envelope-format.md): round trips for
 * every Encryption algorithm across a rotation, the default key, plaintext sizes and contexts;
 * one identical 400 decryption_failed for every single-bit flip and every other mismatch; the
 * key states of spec section 3 (a manual clock drives expiry and destruction); the 10 MiB body
 * limit and malformed input; scopes; and audit records that name the key but carry no data.
 *
 * One service and one clock for the file. The clock only moves forward and only the state
 * tests move it; every time is taken from `clock.now()` when it is needed.
 */

const MIB = 1024 * 1024
const BODY_LIMIT = 10 * MIB
const HEADER_BYTES = 22
const TAMPER_CONCURRENCY = 8

interface Envelope {
  ciphertext: string
  encapsulatedKey: string
  nonce: string
  tag: string
  keyId: string
  keyVersion: number
}

type EnvelopeField = 'ciphertext' | 'encapsulatedKey' | 'nonce' | 'tag'
const ENVELOPE_FIELDS: readonly EnvelopeField[] = ['ciphertext', 'encapsulatedKey', 'nonce', 'tag']

/** Scheme byte and protected-DEK length of each algorithm (docs/envelope-format.md). */
const ALGORITHMS = [
  { algorithm: 'ML-KEM-512', scheme: 0x01, protectedBytes: 768 },
  { algorithm: 'ML-KEM-768', scheme: 0x01, protectedBytes: 1088 },
  { algorithm: 'ML-KEM-1024', scheme: 0x01, protectedBytes: 1568 },
  { algorithm: 'RSA-2048', scheme: 0x02, protectedBytes: 256 },
  { algorithm: 'RSA-3072', scheme: 0x02, protectedBytes: 384 },
  { algorithm: 'RSA-4096', scheme: 0x02, protectedBytes: 512 },
] as const

/** The decrypt request for an envelope: its four binary fields, plus whatever `extra` adds. */
function decryptBody(envelope: Envelope, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    ciphertext: envelope.ciphertext,
    encapsulatedKey: envelope.encapsulatedKey,
    nonce: envelope.nonce,
    tag: envelope.tag,
    ...extra,
  }
}

/** Runs `work` over `items` with at most `limit` in flight; results in input order. */

describe('encrypt and decrypt', () => {
  let svc: TestService
  let clock: ManualClock
  let tenant: TenantWithKey
  let otherTenant: TenantWithKey
  /** One key per Encryption algorithm (RSA-4096 generated once, here), for the round trips. */
  const keys = new Map<string, string>()

  before(async () => {
    clock = manualClock(new Date('2030-01-01T00:00:00Z'))
    svc = await startTestService({}, { clock })
    tenant = await svc.createTenant()
    otherTenant = await svc.createTenant()
    const created = await Promise.all(ALGORITHMS.map(({ algorithm }) => createKey(algorithm)))
    for (const [i, { algorithm }] of ALGORITHMS.entries()) keys.set(algorithm, created[i]!)
  })

  after(async () => {
    await svc?.stop()
  })

  const api = apiClient(() => ({ svc, tenant }))
  const call = api.call
  const createKey = async (algorithm: string, extra: Record<string, unknown> = {}, by = tenant) =>
    (await api.createKey('Encryption', algorithm, extra, by)).id

  async function encrypt(
    body: Record<string, unknown>,
    by: TenantWithKey | string = tenant,
  ): Promise<Envelope> {
    const res = await call('POST', '/encrypt', body, by)
    assert.equal(res.status, 200, res.text)
    return res.body
  }

  const decrypt = (body: Record<string, unknown>, by: TenantWithKey | string = tenant) =>
    call('POST', '/decrypt', body, by)

  /** Decrypts and asserts success: the plaintext bytes, the key and the version. */
  async function assertOpens(
    envelope: Envelope,
    expected: { plaintext: Buffer; keyId: string; keyVersion: number },
    extra: Record<string, unknown> = {},
    by: TenantWithKey | string = tenant,
  ): Promise<void> {
    const res = await decrypt(decryptBody(envelope, extra), by)
    assert.equal(res.status, 200, res.text)
    assert.deepEqual(Object.keys(res.body).sort(), ['keyId', 'keyVersion', 'plaintext'])
    assert.ok(unb64(res.body.plaintext).equals(expected.plaintext), 'the plaintext comes back unchanged')
    assert.equal(res.body.keyId, expected.keyId)
    assert.equal(res.body.keyVersion, expected.keyVersion)
  }

  function assertConflict(res: HttpResult, state: string, what: string): void {
    assert.equal(res.status, 409, `${what}: ${res.text}`)
    assert.equal(res.body.error, 'key_state_conflict', what)
    assert.equal(res.body.state, state, what)
  }

  async function audit(action: string, keyId: string, by: TenantWithKey = tenant) {
    const params = new URLSearchParams({ action, resource: `key:${keyId}` })
    const res = await call('GET', `/audit?${params}`, undefined, by)
    assert.equal(res.status, 200, res.text)
    return { records: res.body.data as AuditView[], text: res.text }
  }

  async function createApiKey(scopes: string[]): Promise<string> {
    const res = await call('POST', '/api-keys', { name: uniqueName('scoped'), scopes })
    assert.equal(res.status, 201, res.text)
    return res.body.key
  }

  describe('round trips', () => {
    for (const { algorithm, scheme, protectedBytes } of ALGORITHMS) {
      test(`${algorithm}: v1 envelopes still open after a rotation; new ones use v2`, async () => {
        const keyId = keys.get(algorithm)!
        const plaintext = Buffer.from(`secret for ${algorithm}`)
        const v1 = await encrypt({ keyId, plaintext: b64(plaintext) })
        assert.equal(v1.keyId, keyId)
        assert.equal(v1.keyVersion, 1)

        // The envelope as docs/envelope-format.md spells it.
        const ek = unb64(v1.encapsulatedKey)
        assert.equal(ek.length, HEADER_BYTES + protectedBytes)
        assert.equal(ek[0], 0x01, 'format version')
        assert.equal(ek[1], scheme, 'scheme')
        assert.equal(ek.subarray(2, 18).toString('hex'), keyId.replaceAll('-', ''), 'key id')
        assert.equal(ek.readUInt32BE(18), 1, 'key version')
        assert.equal(unb64(v1.nonce).length, 12)
        assert.equal(unb64(v1.tag).length, 16)
        assert.equal(unb64(v1.ciphertext).length, plaintext.length)
        assert.notEqual(v1.ciphertext, b64(plaintext))

        // Each encryption is fresh: another nonce, another protected DEK, another ciphertext.
        const again = await encrypt({ keyId, plaintext: b64(plaintext) })
        assert.notEqual(again.nonce, v1.nonce)
        assert.notEqual(again.encapsulatedKey, v1.encapsulatedKey)
        assert.notEqual(again.ciphertext, v1.ciphertext)

        await assertOpens(v1, { plaintext, keyId, keyVersion: 1 })

        const rotated = await call('POST', `/keys/${keyId}/rotate`)
        assert.equal(rotated.status, 200, rotated.text)
        assert.equal(rotated.body.version, 2)

        await assertOpens(v1, { plaintext, keyId, keyVersion: 1 })
        await assertOpens(v1, { plaintext, keyId, keyVersion: 1 }, { keyId, keyVersion: 1 })

        const v2 = await encrypt({ keyId, plaintext: b64(plaintext) })
        assert.equal(v2.keyId, keyId)
        assert.equal(v2.keyVersion, 2)
        assert.equal(unb64(v2.encapsulatedKey).readUInt32BE(18), 2, 'the header names version 2')
        await assertOpens(v2, { plaintext, keyId, keyVersion: 2 })
        await assertOpens(v2, { plaintext, keyId, keyVersion: 2 }, { keyId, keyVersion: 2 })
      })
    }

    test('without keyId the tenant default Encryption key is used, and a new default takes over', async () => {
      const own = await svc.createTenant()
      const none = await call('POST', '/encrypt', { plaintext: b64('x') }, own)
      assert.equal(none.status, 409, none.text)
      assert.equal(none.body.error, 'no_default_key')

      const first = await createKey('ML-KEM-768', { isDefault: true }, own)
      const second = await createKey('RSA-2048', {}, own)
      const plaintext = Buffer.from('to the default key')

      const byFirst = await encrypt({ plaintext: b64(plaintext) }, own)
      assert.equal(byFirst.keyId, first)
      assert.equal(byFirst.keyVersion, 1)
      assert.equal(unb64(byFirst.encapsulatedKey)[1], 0x01, 'ML-KEM scheme')

      const patched = await call('PATCH', `/keys/${second}`, { isDefault: true }, own)
      assert.equal(patched.status, 200, patched.text)
      const bySecond = await encrypt({ plaintext: b64(plaintext) }, own)
      assert.equal(bySecond.keyId, second)
      assert.equal(unb64(bySecond.encapsulatedKey)[1], 0x02, 'RSA-OAEP scheme')

      // Decryption follows the envelope's header, whichever key is the default now.
      await assertOpens(byFirst, { plaintext, keyId: first, keyVersion: 1 }, {}, own)
      await assertOpens(bySecond, { plaintext, keyId: second, keyVersion: 1 }, {}, own)
    })

    test('keyId must name an Encryption key of the tenant', async () => {
      const signing = await call('POST', '/keys', {
        name: uniqueName('sig'),
        keyType: 'Signing',
        algorithm: 'Ed25519',
      })
      assert.equal(signing.status, 201, signing.text)
      const mismatch = await call('POST', '/encrypt', { keyId: signing.body.id, plaintext: b64('x') })
      assert.equal(mismatch.status, 400, mismatch.text)
      assert.equal(mismatch.body.error, 'key_type_mismatch')

      const unknown = await call('POST', '/encrypt', { keyId: randomUUID(), plaintext: b64('x') })
      assert.equal(unknown.status, 404, unknown.text)
      assert.equal(unknown.body.error, 'key_not_found')

      const foreignKey = await createKey('ML-KEM-512', {}, otherTenant)
      const foreign = await call('POST', '/encrypt', { keyId: foreignKey, plaintext: b64('x') })
      assert.equal(foreign.status, 404, foreign.text)
      assert.equal(foreign.body.error, 'key_not_found')
      assert.deepEqual(foreign.body, unknown.body, "another tenant's key is indistinguishable from none")
    })

    test('plaintexts of 0 bytes, 1 byte and 64 KiB of random data round-trip', async () => {
      for (const algorithm of ['ML-KEM-768', 'RSA-2048']) {
        const keyId = keys.get(algorithm)!
        for (const plaintext of [Buffer.alloc(0), Buffer.of(0x00), randomBytes(64 * 1024)]) {
          const envelope = await encrypt({ keyId, plaintext: b64(plaintext) })
          assert.equal(
            unb64(envelope.ciphertext).length,
            plaintext.length,
            `${algorithm} ${plaintext.length}`,
          )
          await assertOpens(envelope, { plaintext, keyId, keyVersion: envelope.keyVersion })
        }
      }
    })

    test('a context (non-ASCII included) round-trips and only the identical bytes open the envelope', async () => {
      const keyId = keys.get('ML-KEM-1024')!
      const plaintext = Buffer.from('bound to a context')
      const context = 'tenant=Zoë · ordre=№42 · 日本語 · 🔐 · café'
      const envelope = await encrypt({ keyId, plaintext: b64(plaintext), context })
      await assertOpens(envelope, { plaintext, keyId, keyVersion: envelope.keyVersion }, { context })

      // The same text in another Unicode normalisation is other bytes: not the same context.
      const decomposed = context.normalize('NFD')
      assert.notEqual(decomposed, context)
      const res = await decrypt(decryptBody(envelope, { context: decomposed }))
      assert.equal(res.status, 400, res.text)
      assert.equal(res.body.error, 'decryption_failed')
    })
  })

  describe('every tampering fails with one identical error', () => {
    for (const algorithm of ['ML-KEM-512', 'RSA-2048']) {
      test(`${algorithm}: every bit flip and every mismatch is the same 400 decryption_failed`, async () => {
        const keyId = await createKey(algorithm)
        const sibling = await createKey(algorithm)
        const foreignKey = await createKey(algorithm, {}, otherTenant)
        const plaintext = randomBytes(16)
        const context = 'tamper-test'
        const envelope = await encrypt({ keyId, plaintext: b64(plaintext), context })
        const noContext = await encrypt({ keyId, plaintext: b64(plaintext) })
        const siblingEnvelope = await encrypt({ keyId: sibling, plaintext: b64(plaintext), context })

        // Untouched, both open: every failure below is the tampering's doing.
        await assertOpens(envelope, { plaintext, keyId, keyVersion: 1 }, { context })
        await assertOpens(noContext, { plaintext, keyId, keyVersion: 1 })

        const cases: { what: string; body: Record<string, unknown>; by?: TenantWithKey }[] = []
        for (const field of ENVELOPE_FIELDS) {
          const bytes = unb64(envelope[field])
          for (let bit = 0; bit < bytes.length * 8; bit++) {
            const flipped = Buffer.from(bytes)
            flipped[bit >> 3]! ^= 1 << (bit & 7)
            cases.push({
              what: `${field} bit ${bit}`,
              body: decryptBody(envelope, { context, [field]: b64(flipped) }),
            })
          }
          cases.push(
            {
              what: `${field} truncated by one byte`,
              body: decryptBody(envelope, { context, [field]: b64(bytes.subarray(0, -1)) }),
            },
            {
              what: `${field} extended by one byte`,
              body: decryptBody(envelope, { context, [field]: b64(Buffer.concat([bytes, Buffer.of(0)])) }),
            },
            { what: `${field} empty`, body: decryptBody(envelope, { context, [field]: '' }) },
            {
              what: `${field} from another envelope of another key`,
              body: decryptBody(envelope, { context, [field]: siblingEnvelope[field] }),
            },
          )
        }
        // The ML-KEM ciphertext or wrapped DEK cut short, header intact.
        const ek = unb64(envelope.encapsulatedKey)
        cases.push(
          {
            what: 'encapsulatedKey: header only',
            body: decryptBody(envelope, { context, encapsulatedKey: b64(ek.subarray(0, HEADER_BYTES)) }),
          },
          {
            what: 'encapsulatedKey: header shorter than 22 bytes',
            body: decryptBody(envelope, { context, encapsulatedKey: b64(ek.subarray(0, HEADER_BYTES - 1)) }),
          },
        )
        // The header rewritten to name another key of the tenant, or the key's next version.
        const renamed = Buffer.from(ek)
        Buffer.from(sibling.replaceAll('-', ''), 'hex').copy(renamed, 2)
        const nextVersion = Buffer.from(ek)
        nextVersion.writeUInt32BE(2, 18)
        cases.push(
          {
            what: 'header names another key of the tenant',
            body: decryptBody(envelope, { context, encapsulatedKey: b64(renamed) }),
          },
          {
            what: 'header names version 2',
            body: decryptBody(envelope, { context, encapsulatedKey: b64(nextVersion) }),
          },
          { what: 'another context', body: decryptBody(envelope, { context: 'tamper-tesT' }) },
          { what: 'the context missing', body: decryptBody(envelope) },
          { what: 'an empty context', body: decryptBody(envelope, { context: '' }) },
          { what: 'a context added', body: decryptBody(noContext, { context }) },
          {
            what: 'keyId of another key of the tenant',
            body: decryptBody(envelope, { context, keyId: sibling }),
          },
          {
            what: "keyId of another tenant's key",
            body: decryptBody(envelope, { context, keyId: foreignKey }),
          },
          { what: 'an unknown keyId', body: decryptBody(envelope, { context, keyId: randomUUID() }) },
          {
            what: 'keyVersion 2 for a version-1 envelope',
            body: decryptBody(envelope, { context, keyVersion: 2 }),
          },
          {
            what: 'keyId right, keyVersion wrong',
            body: decryptBody(envelope, { context, keyId, keyVersion: 3 }),
          },
          { what: "another tenant's API key", body: decryptBody(envelope, { context }), by: otherTenant },
          {
            what: "another tenant's API key naming the key",
            body: decryptBody(envelope, { context, keyId, keyVersion: 1 }),
            by: otherTenant,
          },
        )

        const reference = await decrypt(decryptBody(envelope, { context: 'reference-mismatch' }))
        assert.equal(reference.status, 400, reference.text)
        assert.deepEqual(Object.keys(reference.body).sort(), ['error', 'message'])
        assert.equal(reference.body.error, 'decryption_failed')
        assert.equal(typeof reference.body.message, 'string')
        assert.ok(reference.body.message.length > 0)

        const outcomes = await mapConcurrently(cases, TAMPER_CONCURRENCY, async (c) => {
          const res = await decrypt(c.body, c.by ?? tenant)
          return { what: c.what, status: res.status, text: res.text }
        })
        const deviations = outcomes.filter((o) => o.status !== 400 || o.text !== reference.text)
        assert.deepEqual(
          deviations.slice(0, 10),
          [],
          `${deviations.length} of ${outcomes.length} tamperings answered differently from ${reference.text}`,
        )
        assert.ok(outcomes.length > (ek.length + 16 + 12 + 16) * 8, 'every bit was flipped')

        // The untouched envelope still opens afterwards.
        await assertOpens(envelope, { plaintext, keyId, keyVersion: 1 }, { context })
      })
    }

    test('a header naming a version of 2^31 or more is an ordinary failure and harms no other request', async () => {
      const own = await svc.createTenant()
      const keyId = await createKey('ML-KEM-512', {}, own)
      const envelope = await encrypt({ keyId, plaintext: b64(randomBytes(16)) }, own)
      const reference = await decrypt(decryptBody(envelope, { context: 'not the context' }), own)
      assert.equal(reference.status, 400, reference.text)
      assert.equal(reference.body.error, 'decryption_failed')

      const withVersion = (version: number) => {
        const ek = unb64(envelope.encapsulatedKey)
        ek.writeUInt32BE(version, 18)
        return decryptBody(envelope, { encapsulatedKey: b64(ek) })
      }
      for (const version of [2 ** 31, 2 ** 31 + 1, 2 ** 32 - 1]) {
        const res = await decrypt(withVersion(version), own)
        assert.equal(res.status, 400, `header version ${version}: ${res.text}`)
        assert.equal(res.text, reference.text, `header version ${version}`)
      }
      const failures = await call('GET', '/audit?action=crypto.decrypt&outcome=failure', undefined, own)
      assert.equal(failures.status, 200, failures.text)
      assert.equal(failures.body.data.length, 4, 'each failure is recorded')

      // Another tenant's operations running at the same time are untouched by these failures.
      const victimKey = await createKey('ML-KEM-512', {}, otherTenant)
      const victimEnvelope = await encrypt({ keyId: victimKey, plaintext: b64('victim') }, otherTenant)
      for (let round = 0; round < 3; round++) {
        const results = await Promise.all(
          Array.from({ length: 40 }, (_, i) => {
            if (i % 4 === 0) return decrypt(withVersion(2 ** 31 + i), own).then((res) => ({ bad: true, res }))
            const res =
              i % 2 === 0
                ? call('POST', '/encrypt', { keyId: victimKey, plaintext: b64('victim') }, otherTenant)
                : decrypt(decryptBody(victimEnvelope), otherTenant)
            return res.then((r) => ({ bad: false, res: r }))
          }),
        )
        for (const { bad, res } of results) {
          if (bad) assert.equal(res.text, reference.text, `round ${round}: the tampered request`)
          else assert.equal(res.status, 200, `round ${round}: another tenant's request: ${res.text}`)
        }
      }
    })
  })

  describe('key states (spec section 3)', () => {
    const plaintext = Buffer.from('made while the key was Active')
    const made = new Map<string, { keyId: string; envelope: Envelope }>()

    async function prepare(label: string): Promise<{ keyId: string; envelope: Envelope }> {
      const keyId = await createKey(label === 'Destroyed' ? 'RSA-2048' : 'ML-KEM-768')
      const envelope = await encrypt({ keyId, plaintext: b64(plaintext) })
      const entry = { keyId, envelope }
      made.set(label, entry)
      return entry
    }

    async function assertState(keyId: string, state: string): Promise<void> {
      const res = await call('GET', `/keys/${keyId}`)
      assert.equal(res.status, 200, res.text)
      assert.equal(res.body.state, state)
    }

    async function expectEncryptRefused(label: string, state: string): Promise<void> {
      const { keyId } = made.get(label)!
      const res = await call('POST', '/encrypt', { keyId, plaintext: b64(plaintext) })
      assertConflict(res, state, `encrypt with a ${label} key`)
    }

    before(async () => {
      for (const label of ['Active', 'Expired', 'Revoked', 'Pending Deletion', 'Destroyed'])
        await prepare(label)
      const expiresAt = new Date(clock.now().getTime() + DAY_MS).toISOString()
      const patched = await call('PATCH', `/keys/${made.get('Expired')!.keyId}`, { expiresAt })
      assert.equal(patched.status, 200, patched.text)
      const revoked = await call('POST', `/keys/${made.get('Revoked')!.keyId}/revoke`)
      assert.equal(revoked.status, 200, revoked.text)
      for (const label of ['Pending Deletion', 'Destroyed']) {
        const deleted = await call('DELETE', `/keys/${made.get(label)!.keyId}`)
        assert.equal(deleted.status, 200, deleted.text)
      }
      clock.advance(2 * DAY_MS)
    })

    test('Active: encrypt and decrypt work', async () => {
      const { keyId, envelope } = made.get('Active')!
      await assertState(keyId, 'Active')
      const fresh = await encrypt({ keyId, plaintext: b64(plaintext) })
      await assertOpens(fresh, { plaintext, keyId, keyVersion: 1 })
      await assertOpens(envelope, { plaintext, keyId, keyVersion: 1 })
    })

    for (const state of ['Expired', 'Revoked', 'Pending Deletion']) {
      test(`${state}: encrypt is 409 key_state_conflict, decrypt still works`, async () => {
        const { keyId, envelope } = made.get(state)!
        await assertState(keyId, state)
        await expectEncryptRefused(state, state)
        await assertOpens(envelope, { plaintext, keyId, keyVersion: 1 })
      })
    }

    test('Destroyed: encrypt and decrypt are both 409 key_state_conflict', async () => {
      const { keyId, envelope } = made.get('Destroyed')!
      // Still decryptable the day before the deletion date.
      clock.advance(27 * DAY_MS)
      await assertState(keyId, 'Pending Deletion')
      await assertOpens(envelope, { plaintext, keyId, keyVersion: 1 })

      clock.advance(2 * DAY_MS)
      await assertState(keyId, 'Destroyed')
      await expectEncryptRefused('Destroyed', 'Destroyed')
      const res = await decrypt(decryptBody(envelope))
      assertConflict(res, 'Destroyed', 'decrypt with a Destroyed key')
      const named = await decrypt(decryptBody(envelope, { keyId, keyVersion: 1 }))
      assertConflict(named, 'Destroyed', 'decrypt naming a Destroyed key')
    })
  })

  describe('limits and malformed input', () => {
    test('a body over the route limit is 413 payload_too_large (the Base64 of 10 MiB, and of 64 KiB more for decrypt)', async () => {
      const keyId = keys.get('ML-KEM-768')!
      const prefix = `{"keyId":"${keyId}","plaintext":"`
      const suffix = '"}'
      // Decrypt takes back what encrypt returned: the ciphertext plus up to ~2 KiB of envelope.
      for (const [path, limit] of [
        ['/encrypt', ENCRYPT_JSON_BODY_LIMIT_BYTES],
        ['/decrypt', DECRYPT_JSON_BODY_LIMIT_BYTES],
      ] as const) {
        const filler = 'A'.repeat(limit + 1 - prefix.length - suffix.length)
        const rawBody = `${prefix}${filler}${suffix}`
        assert.equal(Buffer.byteLength(rawBody), limit + 1)
        const res = await svc.request('POST', `/api/v1${path}`, {
          key: tenant.key,
          rawBody,
          headers: { 'content-type': 'application/json' },
        })
        assert.equal(res.status, 413, `${path}: ${res.text.slice(0, 300)}`)
        assert.equal(res.body.error, 'payload_too_large', path)
        assert.match(res.body.message, new RegExp(`exceeds the limit of ${limit} bytes`), path)
      }
    })

    test('a body of exactly 10 MiB is accepted', async () => {
      const keyId = keys.get('ML-KEM-768')!
      const prefix = `{"keyId":"${keyId}","plaintext":"`
      const suffix = '"}'
      const room = BODY_LIMIT - prefix.length - suffix.length
      const encoded = 'A'.repeat(room - (room % 4))
      const rawBody = `${prefix}${encoded}${suffix}`.padEnd(BODY_LIMIT, ' ')
      assert.equal(Buffer.byteLength(rawBody), BODY_LIMIT)
      const res = await svc.request('POST', '/api/v1/encrypt', {
        key: tenant.key,
        rawBody,
        headers: { 'content-type': 'application/json' },
      })
      assert.equal(res.status, 200, res.text.slice(0, 300))
      assert.equal(unb64(res.body.ciphertext).length, (encoded.length / 4) * 3)
    })

    test('a body of about 9 MiB is encrypted and decrypts back', async () => {
      const keyId = keys.get('RSA-2048')!
      const plaintext = randomBytes(Math.floor(6.5 * MIB))
      const body = { keyId, plaintext: b64(plaintext) }
      const size = Buffer.byteLength(JSON.stringify(body))
      assert.ok(size > 8.5 * MIB && size < 9.5 * MIB, `body of ${size} bytes`)
      const envelope = await encrypt(body)
      await assertOpens(envelope, { plaintext, keyId, keyVersion: envelope.keyVersion })
    })

    test('plaintext that is not standard Base64 is 400 validation_failed', async () => {
      const keyId = keys.get('ML-KEM-512')!
      for (const plaintext of [
        'not base64!',
        'QQ',
        'QQ=',
        'QUJD=',
        'ab-_',
        'QUJD\n',
        ' QUJD',
        'Q===',
        'éé==',
      ]) {
        const res = await call('POST', '/encrypt', { keyId, plaintext })
        assert.equal(res.status, 400, `${JSON.stringify(plaintext)}: ${res.text}`)
        assert.equal(res.body.error, 'validation_failed', JSON.stringify(plaintext))
      }
      const wrongType = await call('POST', '/encrypt', { keyId, plaintext: 42 })
      assert.equal(wrongType.status, 400, wrongType.text)
      assert.equal(wrongType.body.error, 'validation_failed')
      const missing = await call('POST', '/encrypt', { keyId })
      assert.equal(missing.status, 400, missing.text)
      assert.equal(missing.body.error, 'validation_failed')
    })

    test('an unknown field is 400 validation_failed naming it, on both routes', async () => {
      const keyId = keys.get('ML-KEM-512')!
      const enc = await call('POST', '/encrypt', { keyId, plaintext: b64('x'), algorithm: 'AES' })
      assert.equal(enc.status, 400, enc.text)
      assert.equal(enc.body.error, 'validation_failed')
      assert.match(enc.text, /body\/algorithm/)

      const envelope = await encrypt({ keyId, plaintext: b64('x') })
      const dec = await decrypt(decryptBody(envelope, { aad: 'x' }))
      assert.equal(dec.status, 400, dec.text)
      assert.equal(dec.body.error, 'validation_failed')
      assert.match(dec.text, /body\/aad/)
    })
  })

  describe('scopes', () => {
    test('encrypt:invoke and encryption:write may encrypt and decrypt; keys:read may not', async () => {
      const keyId = keys.get('ML-KEM-768')!
      const plaintext = Buffer.from('scoped')
      for (const scope of ['encrypt:invoke', 'encryption:write']) {
        const key = await createApiKey([scope])
        const envelope = await encrypt({ keyId, plaintext: b64(plaintext) }, key)
        await assertOpens(envelope, { plaintext, keyId, keyVersion: envelope.keyVersion }, {}, key)
      }

      const reader = await createApiKey(['keys:read'])
      const envelope = await encrypt({ keyId, plaintext: b64(plaintext) })
      const enc = await call('POST', '/encrypt', { keyId, plaintext: b64(plaintext) }, reader)
      assert.equal(enc.status, 403, enc.text)
      assert.equal(enc.body.error, 'insufficient_scope')
      const dec = await decrypt(decryptBody(envelope), reader)
      assert.equal(dec.status, 403, dec.text)
      assert.equal(dec.body.error, 'insufficient_scope')
      assert.equal(dec.text.includes(b64(plaintext)), false)
    })
  })

  describe('audit', () => {
    test('each encrypt and decrypt is recorded with the key and version, never the data', async () => {
      const keyId = await createKey('ML-KEM-768')
      const marker = `PLAINTEXT-MARKER-${randomBytes(8).toString('hex')}`
      const context = `CONTEXT-MARKER-${randomBytes(8).toString('hex')}`
      const plaintext = Buffer.from(marker)
      const actor = `apikey:${tenant.apiKeyId}`

      const v1 = await encrypt({ keyId, plaintext: b64(plaintext), context })
      await assertOpens(v1, { plaintext, keyId, keyVersion: 1 }, { context })
      const failed = await decrypt(decryptBody(v1, { context: `${context}-wrong` }))
      assert.equal(failed.status, 400, failed.text)
      assert.equal((await call('POST', `/keys/${keyId}/rotate`)).status, 200)
      const v2 = await encrypt({ keyId, plaintext: b64(plaintext), context })
      assert.equal(v2.keyVersion, 2)
      await assertOpens(v2, { plaintext, keyId, keyVersion: 2 }, { context })

      const encrypts = await audit('crypto.encrypt', keyId)
      assert.deepEqual(
        encrypts.records.map((r) => [r.action, r.resource, r.keyVersion, r.outcome, r.actor]).reverse(),
        [
          ['crypto.encrypt', `key:${keyId}`, 1, 'success', actor],
          ['crypto.encrypt', `key:${keyId}`, 2, 'success', actor],
        ],
      )
      const decrypts = await audit('crypto.decrypt', keyId)
      assert.deepEqual(
        decrypts.records.map((r) => [r.action, r.resource, r.keyVersion, r.outcome, r.actor]).reverse(),
        [
          ['crypto.decrypt', `key:${keyId}`, 1, 'success', actor],
          ['crypto.decrypt', `key:${keyId}`, 1, 'failure', actor],
          ['crypto.decrypt', `key:${keyId}`, 2, 'success', actor],
        ],
      )

      // Neither the API's view nor the stored rows hold the data, the context or the envelope.
      const [stored] = await svc.sql<{ text: string }[]>`
        SELECT coalesce(string_agg(a::text, E'\n'), '') AS text FROM audit_log a
        WHERE tenant_id = ${tenant.tenantId} AND resource = ${`key:${keyId}`}`
      const secrets = [
        marker,
        b64(plaintext),
        plaintext.toString('hex'),
        context,
        b64(context),
        ...[v1, v2].flatMap((e) => ENVELOPE_FIELDS.map((f) => e[f])),
      ]
      for (const [where, text] of [
        ['GET /audit?action=crypto.encrypt', encrypts.text],
        ['GET /audit?action=crypto.decrypt', decrypts.text],
        ['audit_log rows', stored!.text],
      ] as const) {
        for (const secret of secrets) {
          assert.equal(text.includes(secret), false, `${where} contains ${secret.slice(0, 40)}`)
        }
      }
    })
  })
})
