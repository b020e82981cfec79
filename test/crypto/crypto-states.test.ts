import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { after, before, describe, test } from 'node:test'
import { DAY_MS } from '../../src/platform/clock.ts'
import { b64, unb64 } from '../helpers/api-client.ts'
import { type ManualClock, manualClock } from '../helpers/manual-clock.ts'
import {
  type HttpResult,
  startTestService,
  type TenantWithKey,
  type TestService,
} from '../helpers/service.ts'

/**
 * The key-state matrix of spec section 3 (docs/crypto-operations.md, "Key states") for every
 * cryptographic operation, table-driven: each state (Active, Expired, Revoked, Pending Deletion,
 * Destroyed) against each operation. Encrypt-side operations (encrypt, an encrypt-batch item,
 * sign, both data-key routes, wrap, MAC) need an Active key; decrypt-side operations (decrypt, a
 * decrypt-batch item, verify, unwrap, MAC verify) also work on Expired, Revoked and Pending
 * Deletion keys; a Destroyed key does nothing. Refusals are 409 key_state_conflict naming the
 * state (batch items: {ok: false, error: 'key_state_conflict'}).
 *
 * Each (state, key type) has its own key. Everything the decrypt side needs (an envelope, a
 * signature, wrapped material, a MAC) is made while every key is still Active; then the keys are
 * moved to their states, and a manual clock moved forward once (8 days) expires the Expired keys
 * and destroys the Destroyed ones (7-day window) while the Pending Deletion ones (30 days) wait.
 */

const STATES = ['Active', 'Expired', 'Revoked', 'Pending Deletion', 'Destroyed'] as const
type State = (typeof STATES)[number]

const unique = (prefix: string) => `${prefix}-${randomBytes(4).toString('hex')}`

interface Envelope {
  ciphertext: string
  encapsulatedKey: string
  nonce: string
  tag: string
}

const envelopeOf = (e: Envelope) => ({
  ciphertext: e.ciphertext,
  encapsulatedKey: e.encapsulatedKey,
  nonce: e.nonce,
  tag: e.tag,
})

/** What one state's keys made while they were Active. */
interface Made {
  encryption: string
  signing: string
  hmac: string
  plaintext: Buffer
  context: string
  envelope: Envelope
  signature: { signature: string; keyVersion: number }
  message: Buffer
  wrapped: { wrappedKey: string; material: Buffer }
  data: Buffer
  mac: { mac: string; keyVersion: number }
}

type Side = 'encrypt' | 'decrypt'

interface Op {
  name: string
  side: Side
  /** A batch route: the operation is the first item; the second is a control on an Active key. */
  batch?: true
  send(made: Made): Promise<HttpResult>
  /** Asserts that a successful answer (the body, or the batch item) is right. */
  // biome-ignore lint/suspicious/noExplicitAny: parsed JSON; each check asserts the fields it reads
  check(answer: any, made: Made): Promise<void>
}

/** Spec section 3: may a key in `state` perform an operation of `side`? */
const permitted = (state: State, side: Side) =>
  state === 'Active' || (side === 'decrypt' && state !== 'Destroyed')

describe('key states for every operation (spec section 3)', () => {
  let svc: TestService
  let clock: ManualClock
  let tenant: TenantWithKey
  /** An Encryption key that stays Active: the control item of each batch. */
  let control: string
  let controlEnvelope: Envelope
  const made = new Map<State, Made>()

  function call(method: string, path: string, body?: unknown) {
    return svc.request(method, `/api/v1${path}`, { key: tenant.key, ...(body !== undefined ? { body } : {}) })
  }

  // biome-ignore lint/suspicious/noExplicitAny: parsed JSON of a 200 answer
  async function ok(method: string, path: string, body?: unknown): Promise<any> {
    const res = await call(method, path, body)
    assert.ok(res.status === 200 || res.status === 201, `${method} ${path}: ${res.text}`)
    return res.body
  }

  async function createKey(keyType: string, algorithm: string, extra: Record<string, unknown> = {}) {
    return (await ok('POST', '/keys', { name: unique(algorithm), keyType, algorithm, ...extra })).id as string
  }

  /** Keys for one state, and everything the decrypt side needs, made while they are Active. */
  async function prepare(state: State): Promise<Made> {
    // The Expired keys expire a day from now; the clock later moves past that.
    const expiry =
      state === 'Expired' ? { expiresAt: new Date(clock.now().getTime() + DAY_MS).toISOString() } : {}
    const [encryption, signing, hmac] = await Promise.all([
      createKey('Encryption', 'ML-KEM-768', expiry),
      createKey('Signing', 'Ed25519', expiry),
      createKey('HMAC', 'HMAC-SHA256', expiry),
    ])
    const plaintext = Buffer.from(`encrypted while ${state} was Active`)
    const context = `state=${state}`
    const message = Buffer.from(`signed while ${state} was Active`)
    const material = randomBytes(32)
    const data = Buffer.from(`MACed while ${state} was Active`)
    const envelope = await ok('POST', '/encrypt', { keyId: encryption, plaintext: b64(plaintext), context })
    const signed = await ok('POST', '/sign', { keyId: signing, message: b64(message) })
    const wrapped = await ok('POST', `/keys/${encryption}/wrap`, { plaintext: b64(material), context })
    const mac = await ok('POST', `/keys/${hmac}/mac`, { data: b64(data) })
    return {
      encryption,
      signing,
      hmac,
      plaintext,
      context,
      envelope,
      signature: { signature: signed.signature, keyVersion: signed.keyVersion },
      message,
      wrapped: { wrappedKey: wrapped.wrappedKey, material },
      data,
      mac: { mac: mac.mac, keyVersion: mac.keyVersion },
    }
  }

  before(async () => {
    clock = manualClock(new Date('2030-01-01T00:00:00Z'))
    svc = await startTestService({}, { clock })
    tenant = await svc.createTenant()
    control = await createKey('Encryption', 'ML-KEM-768')
    controlEnvelope = await ok('POST', '/encrypt', { keyId: control, plaintext: b64('control') })
    for (const state of STATES) made.set(state, await prepare(state))

    for (const state of STATES) {
      const m = made.get(state)!
      for (const keyId of [m.encryption, m.signing, m.hmac]) {
        if (state === 'Revoked') await ok('POST', `/keys/${keyId}/revoke`)
        if (state === 'Pending Deletion') await ok('DELETE', `/keys/${keyId}`)
        if (state === 'Destroyed') await ok('DELETE', `/keys/${keyId}?pendingWindowDays=7`)
      }
    }
    clock.advance(8 * DAY_MS)

    for (const state of STATES) {
      const m = made.get(state)!
      for (const keyId of [m.encryption, m.signing, m.hmac]) {
        const key = await ok('GET', `/keys/${keyId}`)
        assert.equal(key.state, state, `key ${keyId} (${key.keyType}) is ${state}`)
      }
    }
    assert.equal((await ok('GET', `/keys/${control}`)).state, 'Active')
  })

  after(async () => {
    await svc?.stop()
  })

  const OPS: Op[] = [
    {
      name: 'encrypt',
      side: 'encrypt',
      send: (m) => call('POST', '/encrypt', { keyId: m.encryption, plaintext: b64(m.plaintext) }),
      async check(body, m) {
        assert.equal(body.keyId, m.encryption)
        const opened = await ok('POST', '/decrypt', envelopeOf(body))
        assert.equal(opened.plaintext, b64(m.plaintext))
      },
    },
    {
      name: 'decrypt',
      side: 'decrypt',
      send: (m) => call('POST', '/decrypt', { ...envelopeOf(m.envelope), context: m.context }),
      async check(body, m) {
        assert.deepEqual(body, { plaintext: b64(m.plaintext), keyId: m.encryption, keyVersion: 1 })
      },
    },
    {
      name: 'encrypt/batch item',
      side: 'encrypt',
      batch: true,
      send: (m) =>
        call('POST', '/encrypt/batch', {
          items: [
            { keyId: m.encryption, plaintext: b64(m.plaintext) },
            { keyId: control, plaintext: b64('control') },
          ],
        }),
      async check(item, m) {
        assert.equal(item.ok, true)
        assert.equal(item.keyId, m.encryption)
        const opened = await ok('POST', '/decrypt', envelopeOf(item))
        assert.equal(opened.plaintext, b64(m.plaintext))
      },
    },
    {
      name: 'decrypt/batch item',
      side: 'decrypt',
      batch: true,
      send: (m) =>
        call('POST', '/decrypt/batch', {
          items: [{ ...envelopeOf(m.envelope), context: m.context }, envelopeOf(controlEnvelope)],
        }),
      async check(item, m) {
        assert.deepEqual(item, { ok: true, plaintext: b64(m.plaintext), keyId: m.encryption, keyVersion: 1 })
      },
    },
    {
      name: 'sign',
      side: 'encrypt',
      send: (m) => call('POST', '/sign', { keyId: m.signing, message: b64(m.message) }),
      async check(body, m) {
        assert.equal(body.keyId, m.signing)
        const verified = await ok('POST', '/verify', {
          keyId: m.signing,
          keyVersion: body.keyVersion,
          message: b64(m.message),
          signature: body.signature,
        })
        assert.equal(verified.valid, true)
      },
    },
    {
      name: 'verify',
      side: 'decrypt',
      send: (m) =>
        call('POST', '/verify', {
          keyId: m.signing,
          keyVersion: m.signature.keyVersion,
          message: b64(m.message),
          signature: m.signature.signature,
        }),
      async check(body, m) {
        assert.deepEqual(body, { valid: true, keyId: m.signing, keyVersion: m.signature.keyVersion })
      },
    },
    {
      name: 'generate-data-key',
      side: 'encrypt',
      send: (m) => call('POST', '/generate-data-key', { keyId: m.encryption }),
      async check(body, m) {
        assert.equal(body.keyId, m.encryption)
        assert.equal(body.keyBytes, 32)
        assert.equal(unb64(body.plaintextDek).length, 32)
        const unwrapped = await ok('POST', `/keys/${m.encryption}/unwrap`, { wrappedKey: body.encryptedDek })
        assert.equal(unwrapped.plaintext, body.plaintextDek)
      },
    },
    {
      name: 'keys/{id}/data-key',
      side: 'encrypt',
      send: (m) => call('POST', `/keys/${m.encryption}/data-key`, { keyBytes: 16, context: m.context }),
      async check(body, m) {
        assert.equal(body.keyId, m.encryption)
        assert.equal(body.keyBytes, 16)
        assert.equal(unb64(body.plaintextDek).length, 16)
        const unwrapped = await ok('POST', `/keys/${m.encryption}/unwrap`, {
          wrappedKey: body.encryptedDek,
          context: m.context,
        })
        assert.equal(unwrapped.plaintext, body.plaintextDek)
      },
    },
    {
      name: 'wrap',
      side: 'encrypt',
      send: (m) => call('POST', `/keys/${m.encryption}/wrap`, { plaintext: b64(m.wrapped.material) }),
      async check(body, m) {
        assert.equal(body.keyId, m.encryption)
        const unwrapped = await ok('POST', `/keys/${m.encryption}/unwrap`, { wrappedKey: body.wrappedKey })
        assert.equal(unwrapped.plaintext, b64(m.wrapped.material))
      },
    },
    {
      name: 'unwrap',
      side: 'decrypt',
      send: (m) =>
        call('POST', `/keys/${m.encryption}/unwrap`, {
          wrappedKey: m.wrapped.wrappedKey,
          context: m.context,
        }),
      async check(body, m) {
        assert.deepEqual(body, { plaintext: b64(m.wrapped.material), keyId: m.encryption, keyVersion: 1 })
      },
    },
    {
      name: 'mac',
      side: 'encrypt',
      send: (m) => call('POST', `/keys/${m.hmac}/mac`, { data: b64(m.data) }),
      async check(body, m) {
        assert.equal(body.keyId, m.hmac)
        assert.equal(body.mac, m.mac.mac, 'HMAC is deterministic: the same MAC as while Active')
      },
    },
    {
      name: 'mac/verify',
      side: 'decrypt',
      send: (m) =>
        call('POST', `/keys/${m.hmac}/mac/verify`, {
          data: b64(m.data),
          mac: m.mac.mac,
          keyVersion: m.mac.keyVersion,
        }),
      async check(body, m) {
        assert.deepEqual(body, { valid: true, keyId: m.hmac, keyVersion: m.mac.keyVersion })
      },
    },
  ]

  for (const state of STATES) {
    describe(state, () => {
      for (const op of OPS) {
        const allowed = permitted(state, op.side)
        const refusal = op.batch ? 'fails alone with key_state_conflict' : 'is 409 key_state_conflict'
        test(`${op.name} ${allowed ? 'succeeds' : refusal}`, async () => {
          const m = made.get(state)!
          const res = await op.send(m)
          if (op.batch) {
            assert.equal(res.status, 200, res.text)
            const [item, controlItem] = res.body.results
            assert.equal(
              controlItem.ok,
              true,
              `the control item on an Active key: ${JSON.stringify(controlItem)}`,
            )
            if (allowed) await op.check(item, m)
            else {
              assert.deepEqual(Object.keys(item).sort(), ['error', 'message', 'ok'], JSON.stringify(item))
              assert.equal(item.ok, false)
              assert.equal(item.error, 'key_state_conflict', JSON.stringify(item))
            }
            return
          }
          if (allowed) {
            assert.equal(res.status, 200, res.text)
            await op.check(res.body, m)
          } else {
            assert.equal(res.status, 409, res.text)
            assert.equal(res.body.error, 'key_state_conflict', res.text)
            assert.equal(res.body.state, state, res.text)
          }
        })
      }
    })
  }
})
