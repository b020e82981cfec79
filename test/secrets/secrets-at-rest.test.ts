import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { randomBytes, randomInt } from 'node:crypto'
import { after, before, describe, test } from 'node:test'
import { promisify } from 'node:util'
import { Secret, TOTP } from 'otpauth'
import { type ManualClock, manualClock } from '../helpers/manual-clock.ts'
import {
  type HttpResult,
  startTestService,
  type TenantWithKey,
  type TestService,
} from '../helpers/service.ts'

/**
 * Secrets at rest, over real HTTP on the real PostgreSQL, with a manual clock.
 *
 * TOTP: the codes of GET /secrets/{id}/totp against the RFC 6238 Appendix B vectors and against
 * an independent implementation (otpauth) for random seeds, every algorithm, digit count and a
 * range of periods; the validity window; the otpauth:// URI form and its overrides; the Base32
 * spellings accepted and the inputs refused; hasTotp, removal, inactive secrets, the audit record
 * of each code read, and the seed never shown again.
 *
 * Encryption at rest: every table of the database (and a pg_dump of it) holds no value, note,
 * sensitive custom-field value or TOTP seed given to the service in this file, in any encoding,
 * while the fields stored in clear by design are found by the same scan; sealed blobs copied to
 * another secret, version, field or tenant do not open (and leak nothing); audit records and
 * error answers carry no content; another tenant sees nothing.
 */

const run = promisify(execFile)
const START = new Date('2030-01-01T00:00:00.000Z')

let svc: TestService
let clock: ManualClock
let tenant: TenantWithKey

before(async () => {
  clock = manualClock(START)
  svc = await startTestService({}, { clock })
  tenant = await svc.createTenant()
})
after(async () => svc?.stop())

const call = (method: string, path: string, body?: unknown, key = tenant.key) =>
  svc.request(method, `/api/v1${path}`, { key, ...(body === undefined ? {} : { body }) })

const uniqueName = (prefix: string) => `${prefix}-${randomBytes(6).toString('hex')}`

// ---------------------------------------------------------------------------------------------
// What the file gave the service to seal: at the end, no table may hold any of it.

interface Needle {
  label: string
  form: string
  text: string
  caseInsensitive: boolean
}
const sealedNeedles: Needle[] = []
/** Stored in clear by design: the scan must find each of these (so it provably sees the data). */
const clearMarkers: string[] = []

/**
 * Base64 of `bytes` wherever they sit in a larger buffer: one form per alignment (0, 1 or 2
 * bytes before them), without the characters that depend on the neighbouring bytes.
 */
function base64Forms(bytes: Buffer): string[] {
  const forms: string[] = []
  for (let k = 0; k < 3; k++) {
    const encoded = Buffer.concat([Buffer.alloc(k), bytes]).toString('base64')
    forms.push(encoded.slice(k === 0 ? 0 : 4, -4))
  }
  return forms.flatMap((f) => [f, f.replaceAll('+', '-').replaceAll('/', '_')])
}

function bytesNeedles(label: string, bytes: Buffer): Needle[] {
  return [
    { label, form: 'hex', text: bytes.toString('hex'), caseInsensitive: true },
    ...base64Forms(bytes).map((text) => ({ label, form: 'base64', text, caseInsensitive: false })),
  ]
}

/** A text the service must seal: never stored as UTF-8 text, hex or Base64. */
function sealedText(label: string): string {
  const text = `${label}-${randomBytes(12).toString('hex')}`
  rememberSealedText(label, text)
  return text
}
function rememberSealedText(label: string, text: string): void {
  sealedNeedles.push(
    { label, form: 'text', text, caseInsensitive: true },
    ...bytesNeedles(label, Buffer.from(text, 'utf8')),
  )
}
/** A TOTP seed: never stored as its bytes in hex, Base64 or Base32. */
function rememberSeed(label: string, seed: Buffer): void {
  sealedNeedles.push(...bytesNeedles(label, seed), {
    label,
    form: 'base32',
    text: base32(seed),
    caseInsensitive: true,
  })
}
function clearText(label: string): string {
  const text = `${label}-${randomBytes(12).toString('hex')}`
  clearMarkers.push(text)
  return text
}

function needlesIn(haystack: string, needles: readonly Needle[]): string[] {
  const lower = haystack.toLowerCase()
  return needles
    .filter((n) => (n.caseInsensitive ? lower.includes(n.text.toLowerCase()) : haystack.includes(n.text)))
    .map((n) => `${n.label} (${n.form})`)
}

function assertNoNeedles(haystack: string, needles: readonly Needle[], where: string): void {
  assert.deepEqual(needlesIn(haystack, needles), [], `sealed content found in ${where}`)
}

// ---------------------------------------------------------------------------------------------
// TOTP helpers

/** RFC 4648 Base32, no padding: written here so the RFC seeds are encoded independently. */
function base32(bytes: Uint8Array): string {
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567'
  let out = ''
  let buffer = 0
  let bits = 0
  for (const byte of bytes) {
    buffer = (buffer << 8) | byte
    bits += 8
    while (bits >= 5) {
      bits -= 5
      out += alphabet[(buffer >> bits) & 31]
    }
    buffer &= (1 << bits) - 1
  }
  if (bits > 0) out += alphabet[(buffer << (5 - bits)) & 31]
  return out
}

type Algorithm = 'SHA1' | 'SHA256' | 'SHA512'
const ALGORITHMS: readonly Algorithm[] = ['SHA1', 'SHA256', 'SHA512']

/** A random seed as otpauth makes it, remembered as content no table may hold. */
function randomSeed(label: string, size = 20): Secret {
  const secret = new Secret({ size })
  rememberSeed(label, Buffer.from(secret.bytes))
  return secret
}

function expectedCode(
  secret: Secret,
  options: { algorithm: Algorithm; digits: number; period: number },
  at: Date,
): string {
  return TOTP.generate({ secret, ...options, timestamp: at.getTime() })
}

async function createSecret(body: Record<string, unknown>, key = tenant.key): Promise<string> {
  const res = await call('POST', '/secrets', { name: uniqueName('s'), value: 'v', ...body }, key)
  assert.equal(res.status, 201, res.text)
  return res.body.id as string
}

const createTotpSecret = (totp: Record<string, unknown>, extra: Record<string, unknown> = {}) =>
  createSecret({ totp, ...extra })

const totpOf = (id: string) => call('GET', `/secrets/${id}/totp`)

/** Reads the code at `at` and checks the window the answer states. */
async function codeAt(
  id: string,
  at: Date,
  expected: { algorithm: Algorithm; digits: number; period: number },
): Promise<string> {
  clock.set(at)
  const res = await totpOf(id)
  assert.equal(res.status, 200, res.text)
  assert.equal(res.headers.get('cache-control'), 'no-store')
  const { algorithm, digits, period } = res.body
  assert.deepEqual({ algorithm, digits, period }, expected)
  const stepMs = expected.period * 1000
  const from = Math.floor(at.getTime() / stepMs) * stepMs
  assert.equal(res.body.validFrom, new Date(from).toISOString(), `validFrom at ${at.toISOString()}`)
  assert.equal(
    res.body.validUntil,
    new Date(from + stepMs).toISOString(),
    `validUntil at ${at.toISOString()}`,
  )
  assert.equal(res.body.remainingSeconds, Math.ceil((from + stepMs - at.getTime()) / 1000))
  assert.match(res.body.code, new RegExp(`^\\d{${expected.digits}}$`))
  return res.body.code as string
}

async function valueReads(id: string) {
  return svc.sql<
    {
      tenant_id: string
      actor: string
      action: string
      resource: string
      key_version: number | null
      outcome: string
      details: Record<string, unknown> | null
    }[]
  >`
    SELECT tenant_id, actor, action, resource, key_version, outcome, details FROM audit_log
    WHERE resource = ${`secret:${id}`} AND action = 'secrets.value.read' ORDER BY id`
}

function assertValidationFailed(res: HttpResult, what: string): void {
  assert.equal(res.status, 400, `${what}: ${res.text}`)
  assert.equal(res.body.error, 'validation_failed', `${what}: ${res.text}`)
}

// ---------------------------------------------------------------------------------------------

describe('TOTP codes', () => {
  before(() => clock.set(START))

  test('the Base32 encoder used for the RFC seeds agrees with RFC 4648 and with otpauth', () => {
    // RFC 4648 section 10, without padding.
    const vectors: [string, string][] = [
      ['f', 'MY'],
      ['fo', 'MZXQ'],
      ['foo', 'MZXW6'],
      ['foob', 'MZXW6YQ'],
      ['fooba', 'MZXW6YTB'],
      ['foobar', 'MZXW6YTBOI'],
    ]
    for (const [plain, encoded] of vectors) assert.equal(base32(Buffer.from(plain)), encoded)
    for (let i = 0; i < 20; i++) {
      const bytes = randomBytes(randomInt(1, 70))
      assert.equal(base32(bytes), Secret.fromHex(bytes.toString('hex')).base32)
    }
  })

  test('RFC 6238 Appendix B test vectors: SHA1, SHA256 and SHA512, 8 digits, 30 s, T0 = 0', async () => {
    const seeds: Record<Algorithm, string> = {
      SHA1: '12345678901234567890',
      SHA256: '12345678901234567890123456789012',
      SHA512: '1234567890123456789012345678901234567890123456789012345678901234',
    }
    // [unix seconds, SHA1, SHA256, SHA512], from RFC 6238 Appendix B.
    const vectors: [number, string, string, string][] = [
      [59, '94287082', '46119246', '90693936'],
      [1111111109, '07081804', '68084774', '25091201'],
      [1111111111, '14050471', '67062674', '99943326'],
      [1234567890, '89005924', '91819424', '93441116'],
      [2000000000, '69279037', '90698825', '38618901'],
      // Year 2603: past 32-bit time, still a Date and a 64-bit counter.
      [20000000000, '65353130', '77737706', '47863826'],
    ]
    const ids = {} as Record<Algorithm, string>
    for (const algorithm of ALGORITHMS) {
      rememberSeed(`rfc6238-${algorithm}`, Buffer.from(seeds[algorithm], 'ascii'))
      ids[algorithm] = await createTotpSecret({
        secret: base32(Buffer.from(seeds[algorithm], 'ascii')),
        algorithm,
        digits: 8,
        period: 30,
      })
    }
    for (const [seconds, ...codes] of vectors) {
      for (const [i, algorithm] of ALGORITHMS.entries()) {
        const code = await codeAt(ids[algorithm], new Date(seconds * 1000), {
          algorithm,
          digits: 8,
          period: 30,
        })
        assert.equal(code, codes[i], `${algorithm} at T = ${seconds}`)
      }
    }
    // The window of the first vector, spelled out: T = 59 is the last second of the step [30, 60).
    clock.set(new Date(59_000))
    const first = await totpOf(ids.SHA1)
    assert.equal(first.body.validFrom, '1970-01-01T00:00:30.000Z')
    assert.equal(first.body.validUntil, '1970-01-01T00:01:00.000Z')
    assert.equal(first.body.remainingSeconds, 1)
    // And of the last one, in 2603.
    clock.set(new Date(20_000_000_000_000))
    const last = await totpOf(ids.SHA512)
    assert.equal(last.body.validFrom, '2603-10-11T11:33:00.000Z')
    assert.equal(last.body.validUntil, '2603-10-11T11:33:30.000Z')
    assert.equal(last.body.remainingSeconds, 10)
  })

  test('random seeds match otpauth for every algorithm, 6/7/8 digits and 15/30/60/300 s periods', async () => {
    const cases: {
      id: string
      secret: Secret
      options: { algorithm: Algorithm; digits: number; period: number }
    }[] = []
    for (const algorithm of ALGORITHMS) {
      for (const digits of [6, 7, 8]) {
        for (const period of [15, 30, 60, 300]) {
          const secret = randomSeed(`random-${algorithm}-${digits}-${period}`, randomInt(10, 65))
          const options = { algorithm, digits, period }
          cases.push({ id: await createTotpSecret({ secret: secret.base32, ...options }), secret, options })
        }
      }
    }
    const times = [
      START,
      new Date(1_700_000_000_123),
      new Date(1_799_999_999_999),
      new Date(2_000_000_000_000 - 1),
      new Date(2_000_000_000_000),
      new Date(randomInt(1_000_000_000_000, 4_000_000_000_000)),
    ]
    for (const at of times) {
      for (const { id, secret, options } of cases) {
        const code = await codeAt(id, at, options)
        assert.equal(
          code,
          expectedCode(secret, options, at),
          `${JSON.stringify(options)} at ${at.toISOString()}`,
        )
      }
    }
  })

  test('a code holds for its whole time step and the next step has the next code', async () => {
    const secret = randomSeed('window')
    const options = { algorithm: 'SHA1' as const, digits: 6, period: 30 }
    const id = await createTotpSecret({ secret: secret.base32 })
    const stepStart = Date.UTC(2031, 5, 1, 12, 0, 0)
    const at = (offsetMs: number) => new Date(stepStart + offsetMs)

    clock.set(at(0))
    const start = (await totpOf(id)).body
    assert.equal(start.validFrom, at(0).toISOString())
    assert.equal(start.validUntil, at(30_000).toISOString())
    assert.equal(start.remainingSeconds, 30)
    assert.equal(start.code, expectedCode(secret, options, at(0)))

    clock.set(at(12_500))
    const middle = (await totpOf(id)).body
    assert.equal(middle.code, start.code)
    assert.equal(middle.validFrom, start.validFrom)
    assert.equal(middle.remainingSeconds, 18)

    clock.set(at(29_999))
    const end = (await totpOf(id)).body
    assert.equal(end.code, start.code)
    assert.equal(end.remainingSeconds, 1)

    clock.set(at(30_000))
    const next = (await totpOf(id)).body
    assert.equal(next.validFrom, at(30_000).toISOString())
    assert.equal(next.validUntil, at(60_000).toISOString())
    assert.equal(next.remainingSeconds, 30)
    assert.equal(next.code, expectedCode(secret, options, at(30_000)))
    clock.set(START)
  })

  test('the otpauth:// URI form sets algorithm, digits and period; defaults apply when it has none', async () => {
    const secret = randomSeed('uri')
    const at = new Date(Date.UTC(2032, 0, 2, 3, 4, 5, 678))

    const withOptions = await createTotpSecret({
      uri: `otpauth://totp/Label?secret=${secret.base32}&algorithm=SHA256&digits=8&period=60`,
    })
    const sha256 = { algorithm: 'SHA256' as const, digits: 8, period: 60 }
    assert.equal(await codeAt(withOptions, at, sha256), expectedCode(secret, sha256, at))

    // The URI an authenticator set-up screen shows (made by otpauth: issuer, label with @ and :).
    const generated = new TOTP({
      issuer: 'ACME Co',
      label: 'alice@example.com',
      secret,
      algorithm: 'SHA512',
      digits: 7,
      period: 15,
    }).toString()
    const fromOtpauth = await createTotpSecret({ uri: generated })
    const sha512 = { algorithm: 'SHA512' as const, digits: 7, period: 15 }
    assert.equal(await codeAt(fromOtpauth, at, sha512), expectedCode(secret, sha512, at))

    const bare = await createTotpSecret({ uri: `otpauth://totp/Bare?secret=${secret.base32.toLowerCase()}` })
    const defaults = { algorithm: 'SHA1' as const, digits: 6, period: 30 }
    assert.equal(await codeAt(bare, at, defaults), expectedCode(secret, defaults, at))

    // URI schemes and the otpauth type are case-insensitive.
    const shouted = await createTotpSecret({ uri: `OTPAUTH://TOTP/Loud?secret=${secret.base32}` })
    assert.equal(await codeAt(shouted, at, defaults), expectedCode(secret, defaults, at))
    clock.set(START)
  })

  test("explicit options override the URI's", async () => {
    const secret = randomSeed('override')
    const uri = `otpauth://totp/Label?secret=${secret.base32}&algorithm=SHA256&digits=8&period=60`
    const at = new Date(Date.UTC(2032, 6, 7, 8, 9, 10, 11))

    const all = await createTotpSecret({ uri, algorithm: 'SHA512', digits: 7, period: 15 })
    const allOptions = { algorithm: 'SHA512' as const, digits: 7, period: 15 }
    assert.equal(await codeAt(all, at, allOptions), expectedCode(secret, allOptions, at))

    const some = await createTotpSecret({ uri, digits: 6 })
    const someOptions = { algorithm: 'SHA256' as const, digits: 6, period: 60 }
    assert.equal(await codeAt(some, at, someOptions), expectedCode(secret, someOptions, at))

    const algorithmOnly = await createTotpSecret({ uri, algorithm: 'SHA1' })
    const algorithmOptions = { algorithm: 'SHA1' as const, digits: 8, period: 60 }
    assert.equal(
      await codeAt(algorithmOnly, at, algorithmOptions),
      expectedCode(secret, algorithmOptions, at),
    )
    clock.set(START)
  })

  test('lower-case, space- or hyphen-separated and padded Base32 give the same seed', async () => {
    // 11 bytes: 18 Base32 characters, padded to 24 with "=".
    const secret = randomSeed('spellings', 11)
    const canonical = secret.base32
    assert.equal(canonical.length, 18)
    const groups = canonical.match(/.{1,4}/g)!
    const spellings = [
      canonical,
      canonical.toLowerCase(),
      groups.join(' '),
      groups.join(' ').toLowerCase(),
      groups.join('-'),
      `${canonical}======`,
      `${groups.join(' ').toLowerCase()}======`,
    ]
    const options = { algorithm: 'SHA1' as const, digits: 6, period: 30 }
    const at = new Date(Date.UTC(2033, 1, 2, 3, 4, 5))
    const expected = expectedCode(secret, options, at)
    for (const spelling of spellings) {
      const id = await createTotpSecret({ secret: spelling })
      assert.equal(await codeAt(id, at, options), expected, `seed spelled ${JSON.stringify(spelling)}`)
    }
    clock.set(START)
  })

  test('the seed length bounds: 10 and 128 bytes are accepted', async () => {
    const at = new Date(Date.UTC(2033, 3, 4, 5, 6, 7))
    for (const size of [10, 128]) {
      const secret = randomSeed(`bounds-${size}`, size)
      const options = { algorithm: 'SHA256' as const, digits: 6, period: 30 }
      const id = await createTotpSecret({ secret: secret.base32, algorithm: 'SHA256' })
      assert.equal(await codeAt(id, at, options), expectedCode(secret, options, at), `${size}-byte seed`)
    }
    clock.set(START)
  })

  test('invalid TOTP inputs are 400 validation_failed on create and update, and change nothing', async () => {
    const good = randomSeed('invalid-good').base32
    const short = randomBytes(9)
    rememberSeed('invalid-short', short)
    const long = randomBytes(129)
    rememberSeed('invalid-long', long)
    const cases: [string, Record<string, unknown>][] = [
      ['not Base32 (1, 8, 9, 0)', { secret: 'ABC1DEF8GHIJ9KLM0NOP' }],
      ['not Base32 (punctuation)', { secret: `${good}!` }],
      ['padding in the middle', { secret: `${good.slice(0, 8)}=${good.slice(8)}` }],
      ['an empty seed', { secret: '' }],
      ['only spaces', { secret: '    ' }],
      ['a seed of 9 bytes', { secret: base32(short) }],
      ['a seed of 129 bytes', { secret: base32(long) }],
      ['both secret and uri', { secret: good, uri: `otpauth://totp/L?secret=${good}` }],
      ['neither secret nor uri', {}],
      ['options without a seed', { algorithm: 'SHA256', digits: 8 }],
      ['a URI that is not otpauth', { uri: `https://example.com/totp?secret=${good}` }],
      ['an hotp URI', { uri: `otpauth://hotp/L?secret=${good}&counter=1` }],
      ['a URI without a secret', { uri: 'otpauth://totp/L?digits=6' }],
      ['a URI with a short seed', { uri: `otpauth://totp/L?secret=${base32(short)}` }],
      ['a URI with bad Base32', { uri: 'otpauth://totp/L?secret=ABC1DEF8GHIJ9KLM0NOP' }],
      ['a URI with 5 digits', { uri: `otpauth://totp/L?secret=${good}&digits=5` }],
      ['a URI with 9 digits', { uri: `otpauth://totp/L?secret=${good}&digits=9` }],
      ['a URI with a 10 s period', { uri: `otpauth://totp/L?secret=${good}&period=10` }],
      ['a URI with a 301 s period', { uri: `otpauth://totp/L?secret=${good}&period=301` }],
      ['a URI with algorithm MD5', { uri: `otpauth://totp/L?secret=${good}&algorithm=MD5` }],
      ['5 digits', { secret: good, digits: 5 }],
      ['9 digits', { secret: good, digits: 9 }],
      ['a 10 s period', { secret: good, period: 10 }],
      ['a 14 s period', { secret: good, period: 14 }],
      ['a 301 s period', { secret: good, period: 301 }],
      ['a fractional period', { secret: good, period: 30.5 }],
      ['algorithm MD5', { secret: good, algorithm: 'MD5' }],
      ['algorithm SHA3-256', { secret: good, algorithm: 'SHA3-256' }],
      ['an unknown option', { secret: good, issuer: 'ACME' }],
    ]

    const options = { algorithm: 'SHA1' as const, digits: 6, period: 30 }
    const existingSeed = randomSeed('invalid-existing')
    const existing = await createTotpSecret({ secret: existingSeed.base32 })
    for (const [what, totp] of cases) {
      const name = uniqueName('invalid-totp')
      const created = await call('POST', '/secrets', { name, value: 'v', totp })
      assertValidationFailed(created, `create with ${what}`)
      assert.ok(!created.text.includes(good) && !created.text.includes(base32(short)), 'no seed echoed')
      const listed = await call('GET', `/secrets?search=${name}`)
      assert.equal(listed.body.total, 0, `nothing created with ${what}`)

      const updated = await call('PATCH', `/secrets/${existing}`, { totp })
      assertValidationFailed(updated, `update with ${what}`)
    }
    // The existing seed is untouched.
    const at = new Date(Date.UTC(2034, 0, 1, 0, 0, 1))
    assert.equal(await codeAt(existing, at, options), expectedCode(existingSeed, options, at))
    clock.set(START)
  })

  test('hasTotp follows the seed; a new seed replaces it; totp: null removes it (404 totp_not_configured)', async () => {
    const options = { algorithm: 'SHA1' as const, digits: 6, period: 30 }
    const at = new Date(Date.UTC(2034, 2, 3, 4, 5, 6))
    const created = await call('POST', '/secrets', { name: uniqueName('has-totp'), value: 'v' })
    assert.equal(created.status, 201, created.text)
    assert.equal(created.body.hasTotp, false)
    const id = created.body.id as string
    const hasTotp = async () => {
      const res = await call('GET', `/secrets/${id}?include=hasTotp`)
      assert.equal(res.status, 200, res.text)
      return res.body.hasTotp as boolean
    }
    assert.equal(await hasTotp(), false)
    const none = await totpOf(id)
    assert.equal(none.status, 404, none.text)
    assert.equal(none.body.error, 'totp_not_configured')

    const first = randomSeed('has-totp-first')
    const added = await call('PATCH', `/secrets/${id}`, { totp: { secret: first.base32 } })
    assert.equal(added.status, 200, added.text)
    assert.equal(added.body.hasTotp, true)
    assert.equal(await hasTotp(), true)
    assert.equal(await codeAt(id, at, options), expectedCode(first, options, at))

    const second = randomSeed('has-totp-second')
    const sha512 = { algorithm: 'SHA512' as const, digits: 8, period: 60 }
    await call('PATCH', `/secrets/${id}`, { totp: { secret: second.base32, ...sha512 } })
    assert.equal(await codeAt(id, at, sha512), expectedCode(second, sha512, at))

    // Other changes leave the seed alone.
    const other = await call('PATCH', `/secrets/${id}`, { description: 'still has a seed', value: 'v2' })
    assert.equal(other.status, 200, other.text)
    assert.equal(await codeAt(id, at, sha512), expectedCode(second, sha512, at))

    const listed = await call('GET', `/secrets?include=hasTotp&search=${created.body.name}`)
    assert.deepEqual(
      listed.body.data.map((s: { id: string; hasTotp: boolean }) => [s.id, s.hasTotp]),
      [[id, true]],
    )

    const removed = await call('PATCH', `/secrets/${id}`, { totp: null })
    assert.equal(removed.status, 200, removed.text)
    assert.equal(removed.body.hasTotp, false)
    assert.equal(await hasTotp(), false)
    const gone = await totpOf(id)
    assert.equal(gone.status, 404, gone.text)
    assert.equal(gone.body.error, 'totp_not_configured')
    const [row] = await svc.sql<
      { sealed_totp: Buffer | null }[]
    >`SELECT sealed_totp FROM secrets WHERE id = ${id}`
    assert.equal(row!.sealed_totp, null, 'the sealed seed is erased')
    clock.set(START)
  })

  test('an inactive secret refuses its code (409 secret_inactive) until activated; a deleted one is 404', async () => {
    const secret = randomSeed('inactive')
    const options = { algorithm: 'SHA1' as const, digits: 6, period: 30 }
    const id = await createTotpSecret({ secret: secret.base32 }, { isActive: false })
    const refused = await totpOf(id)
    assert.equal(refused.status, 409, refused.text)
    assert.equal(refused.body.error, 'secret_inactive')
    assert.equal((await valueReads(id)).length, 0, 'a refused read is not a value read')

    const metadata = await call('GET', `/secrets/${id}?include=metadata`)
    assert.equal(metadata.status, 200, metadata.text)
    assert.equal(metadata.body.isActive, false)
    assert.equal(metadata.body.hasTotp, true)

    await call('PATCH', `/secrets/${id}`, { isActive: true })
    const at = new Date(Date.UTC(2034, 4, 5, 6, 7, 8))
    assert.equal(await codeAt(id, at, options), expectedCode(secret, options, at))

    await call('PATCH', `/secrets/${id}`, { isActive: false })
    assert.equal((await totpOf(id)).status, 409)

    const deleted = await call('DELETE', `/secrets/${id}`)
    assert.equal(deleted.status, 200, deleted.text)
    const afterDelete = await totpOf(id)
    assert.equal(afterDelete.status, 404, afterDelete.text)
    assert.equal(afterDelete.body.error, 'secret_not_found')
    clock.set(START)
  })

  test('every code read writes one secrets.value.read record (fields "totp"); refusals write none', async () => {
    const secret = randomSeed('audit')
    const id = await createTotpSecret({ secret: secret.base32 })
    assert.equal((await valueReads(id)).length, 0)
    const reads = 4
    for (let i = 0; i < reads; i++) {
      clock.set(new Date(START.getTime() + i * 45_000))
      assert.equal((await totpOf(id)).status, 200)
    }
    const records = await valueReads(id)
    assert.equal(records.length, reads)
    for (const record of records) {
      assert.deepEqual(record, {
        tenant_id: tenant.tenantId,
        actor: `apikey:${tenant.apiKeyId}`,
        action: 'secrets.value.read',
        resource: `secret:${id}`,
        key_version: null,
        outcome: 'success',
        details: { fields: 'totp' },
      })
    }
    await call('PATCH', `/secrets/${id}`, { isActive: false })
    assert.equal((await totpOf(id)).status, 409)
    await call('PATCH', `/secrets/${id}`, { totp: null })
    assert.equal((await totpOf(id)).status, 404)
    assert.equal((await valueReads(id)).length, reads, 'refused reads are not recorded as reads')
    clock.set(START)
  })

  test('the seed never appears in any answer or audit record', async () => {
    const plain = randomSeed('never-shown')
    const viaUri = randomSeed('never-shown-uri')
    const seedNeedles = sealedNeedles.filter(
      (n) => n.label === 'never-shown' || n.label === 'never-shown-uri',
    )
    const uri = `otpauth://totp/ACME:bob?secret=${viaUri.base32}&issuer=ACME`
    const texts: [string, string][] = []
    const keep = (what: string, res: HttpResult) => {
      assert.ok(res.status < 300, `${what}: ${res.status} ${res.text}`)
      texts.push([what, res.text])
      return res
    }

    const a = keep(
      'create',
      await call('POST', '/secrets', { name: uniqueName('nv'), value: 'x', totp: { secret: plain.base32 } }),
    ).body.id as string
    const b = keep(
      'create (uri)',
      await call('POST', '/secrets', { name: uniqueName('nv'), value: 'x', totp: { uri } }),
    ).body.id as string
    for (const id of [a, b]) {
      keep('get all', await call('GET', `/secrets/${id}?include=all`))
      keep('get metadata', await call('GET', `/secrets/${id}?include=metadata,notes,customFields`))
      keep('update', await call('PATCH', `/secrets/${id}`, { value: 'y', notes: 'n' }))
      keep('versions', await call('GET', `/secrets/${id}/versions`))
      keep('version 1', await call('GET', `/secrets/${id}/versions/1?include=all`))
      keep('totp', await totpOf(id))
      keep('update totp', await call('PATCH', `/secrets/${id}`, { totp: { uri } }))
    }
    keep('list all', await call('GET', '/secrets?include=all&limit=1000'))
    keep('audit', await call('GET', '/audit?limit=500'))
    for (const [what, text] of texts) {
      assertNoNeedles(text, seedNeedles, what)
      assert.ok(!text.includes(uri), `${what} does not echo the URI`)
    }
    const audit = await svc.sql<{ row: string }[]>`
      SELECT a::text AS row FROM audit_log a WHERE tenant_id = ${tenant.tenantId}`
    assert.ok(audit.length > 0)
    assertNoNeedles(audit.map((r) => r.row).join('\n'), seedNeedles, 'audit_log')
  })
})

// ---------------------------------------------------------------------------------------------

interface RichSecret {
  id: string
  name: string
  values: string[]
  notes: string
  sensitiveText: string
  sensitiveNumber: number
  sensitiveEmail: string
  seed: Secret
}

/**
 * A secret with every kind of sealed content, each a distinctive marker, and its value changed
 * several times; superseded notes and custom values are remembered too.
 */
async function richSecret(label: string, key = tenant.key): Promise<RichSecret> {
  const name = clearText(`${label}-name`)
  const sensitiveNumber = Number(`${randomInt(1_000_000, 9_999_999)}.${randomInt(100_000, 999_999)}7`)
  rememberSealedText(`${label}-sensitive-number`, String(sensitiveNumber))
  const seed = randomSeed(`${label}-totp-seed`)
  const values = [sealedText(`${label}-value-1`)]
  const oldNotes = sealedText(`${label}-notes-old`)
  const oldCustom = sealedText(`${label}-custom-old`)
  const created = await call(
    'POST',
    '/secrets',
    {
      name,
      value: values[0],
      description: clearText(`${label}-description`),
      notes: oldNotes,
      labels: [clearText(`${label}-label`)],
      customFields: [{ name: 'old', type: 'text', value: oldCustom, sensitive: true }],
      totp: { secret: seed.base32, algorithm: 'SHA256' },
    },
    key,
  )
  assert.equal(created.status, 201, created.text)
  const id = created.body.id as string
  for (let i = 2; i <= 4; i++) {
    const value = sealedText(`${label}-value-${i}`)
    values.push(value)
    const res = await call('PATCH', `/secrets/${id}`, { value }, key)
    assert.equal(res.status, 200, res.text)
    assert.equal(res.body.version, i)
  }
  const notes = sealedText(`${label}-notes`)
  const sensitiveText = sealedText(`${label}-custom-text`)
  // The local part is the marker: an email is a sensitive field type like any other.
  const sensitiveEmail = `${sealedText(`${label}-custom-email`)}@example.com`
  const updated = await call(
    'PATCH',
    `/secrets/${id}`,
    {
      notes,
      customFields: [
        { name: clearText(`${label}-custom-name`), type: 'text', value: sensitiveText, sensitive: true },
        { name: 'pin', type: 'number', value: sensitiveNumber, sensitive: true },
        { name: 'recovery', type: 'email', value: sensitiveEmail, sensitive: true },
        { name: 'username', type: 'text', value: clearText(`${label}-custom-clear`), sensitive: false },
      ],
    },
    key,
  )
  assert.equal(updated.status, 200, updated.text)
  return { id, name, values, notes, sensitiveText, sensitiveNumber, sensitiveEmail, seed }
}

describe('encryption at rest', () => {
  let rich: RichSecret
  let deleted: RichSecret

  before(async () => {
    clock.set(START)
    rich = await richSecret('rich')
    deleted = await richSecret('deleted')
    const res = await call('DELETE', `/secrets/${deleted.id}`)
    assert.equal(res.status, 200, res.text)
  })

  test('the API gives back every sealed content (the markers were really stored)', async () => {
    const res = await call('GET', `/secrets/${rich.id}?include=all`)
    assert.equal(res.status, 200, res.text)
    assert.equal(res.body.value, rich.values[3])
    assert.equal(res.body.version, 4)
    assert.equal(res.body.notes, rich.notes)
    const custom = Object.fromEntries(
      res.body.customFields.map((f: { name: string; value: unknown }) => [f.name, f.value]),
    )
    assert.equal(custom['pin'], rich.sensitiveNumber)
    assert.equal(custom['recovery'], rich.sensitiveEmail)
    assert.ok(Object.values(custom).includes(rich.sensitiveText))
    assert.equal(res.body.hasTotp, true)
    for (const [i, value] of rich.values.entries()) {
      const version = await call('GET', `/secrets/${rich.id}/versions/${i + 1}?include=all`)
      assert.equal(version.status, 200, version.text)
      assert.equal(version.body.value, value)
    }
    const options = { algorithm: 'SHA256' as const, digits: 6, period: 30 }
    assert.equal((await totpOf(rich.id)).body.code, expectedCode(rich.seed, options, clock.now()))
    // Without include=all the sensitive values stay hidden.
    const plain = await call('GET', `/secrets/${rich.id}?include=customFields`)
    for (const field of plain.body.customFields as { sensitive: boolean; value: unknown }[]) {
      if (field.sensitive) assert.equal(field.value, null)
    }
  })

  test('createdBy and updatedBy name the API key, on the secret and on its versions', async () => {
    const actor = `apikey:${tenant.apiKeyId}`
    const res = await call('GET', `/secrets/${rich.id}?include=metadata`)
    assert.equal(res.body.createdBy, actor)
    assert.equal(res.body.updatedBy, actor)
    const versions = await call('GET', `/secrets/${rich.id}/versions`)
    assert.deepEqual(
      versions.body.data.map((v: { version: number; createdBy: string; isCurrent: boolean }) => [
        v.version,
        v.createdBy,
        v.isCurrent,
      ]),
      [
        [4, actor, true],
        [3, actor, false],
        [2, actor, false],
        [1, actor, false],
      ],
    )
    const [row] = await svc.sql<{ created_by: string; updated_by: string }[]>`
      SELECT created_by, updated_by FROM secrets WHERE id = ${rich.id}`
    assert.deepEqual({ ...row }, { created_by: actor, updated_by: actor })
  })

  test('audit records and error answers never carry a value, note, custom value or seed', async () => {
    const errors: [string, HttpResult][] = []
    const expectError = async (what: string, status: number, res: Promise<HttpResult>) => {
      const answer = await res
      assert.equal(answer.status, status, `${what}: ${answer.text}`)
      errors.push([what, answer])
    }
    const value = sealedText('rejected-value')
    await expectError('name taken', 409, call('POST', '/secrets', { name: rich.name, value, notes: value }))
    await expectError(
      'number field with text',
      400,
      call('POST', '/secrets', {
        name: uniqueName('e'),
        value,
        customFields: [{ name: 'n', type: 'number', value: sealedText('rejected-number'), sensitive: true }],
      }),
    )
    await expectError(
      'not an email',
      400,
      call('POST', '/secrets', {
        name: uniqueName('e'),
        value,
        customFields: [{ name: 'e', type: 'email', value: sealedText('rejected-email'), sensitive: true }],
      }),
    )
    await expectError(
      'not a URL',
      400,
      call('PATCH', `/secrets/${rich.id}`, {
        customFields: [{ name: 'u', type: 'url', value: sealedText('rejected-url'), sensitive: true }],
      }),
    )
    await expectError(
      'not a date',
      400,
      call('PATCH', `/secrets/${rich.id}`, {
        customFields: [{ name: 'd', type: 'date', value: sealedText('rejected-date'), sensitive: true }],
      }),
    )
    const repeated = sealedText('rejected-repeated')
    await expectError(
      'repeated custom field',
      400,
      call('PATCH', `/secrets/${rich.id}`, {
        customFields: [
          { name: 'same', value: repeated, sensitive: true },
          { name: 'same', value: repeated, sensitive: true },
        ],
      }),
    )
    await expectError(
      'value too long',
      400,
      call('PATCH', `/secrets/${rich.id}`, { value: `${sealedText('rejected-long')}${'x'.repeat(65_536)}` }),
    )
    await expectError(
      'unknown field',
      400,
      call('PATCH', `/secrets/${rich.id}`, { value, secretValue: sealedText('rejected-unknown') }),
    )
    await expectError(
      'hotp URI',
      400,
      call('PATCH', `/secrets/${rich.id}`, { totp: { uri: `otpauth://hotp/x?secret=${rich.seed.base32}` } }),
    )
    await expectError(
      'invalid JSON',
      400,
      svc.request('PATCH', `/api/v1/secrets/${rich.id}`, {
        key: tenant.key,
        headers: { 'content-type': 'application/json' },
        rawBody: `{"value": "${sealedText('rejected-json')}"`,
      }),
    )
    await expectError('unknown include', 400, call('GET', `/secrets/${rich.id}?include=all,secret`))
    await expectError('unknown version', 404, call('GET', `/secrets/${rich.id}/versions/99?include=all`))
    await call('PATCH', `/secrets/${rich.id}`, { isActive: false })
    await expectError('inactive value', 409, call('GET', `/secrets/${rich.id}?include=all`))
    await expectError('inactive version', 409, call('GET', `/secrets/${rich.id}/versions/2?include=all`))
    await expectError('inactive totp', 409, totpOf(rich.id))
    await call('PATCH', `/secrets/${rich.id}`, { isActive: true })
    await expectError('deleted', 404, call('GET', `/secrets/${deleted.id}?include=all`))
    await expectError('deleted totp', 404, totpOf(deleted.id))

    for (const [what, res] of errors) {
      assert.ok(res.body?.error, `${what} answers with an error code`)
      assertNoNeedles(res.text, sealedNeedles, `the ${what} error answer`)
    }
    // Nothing of the refused changes was applied.
    const current = await call('GET', `/secrets/${rich.id}?include=all`)
    assert.equal(current.body.value, rich.values[3])
    assert.equal(current.body.customFields.length, 4)

    const audit = await svc.sql<{ row: string }[]>`SELECT a::text AS row FROM audit_log a`
    assert.ok(audit.length > 0)
    assertNoNeedles(audit.map((r) => r.row).join('\n'), sealedNeedles, 'audit_log')
    const listed = await call('GET', '/audit?limit=500')
    assert.equal(listed.status, 200, listed.text)
    assertNoNeedles(listed.text, sealedNeedles, 'GET /audit')
    // The records that do exist name the fields, not their contents.
    const updates = await svc.sql<{ details: { fields: string } }[]>`
      SELECT details FROM audit_log WHERE resource = ${`secret:${rich.id}`} AND action = 'secrets.update'
      ORDER BY id`
    assert.deepEqual(
      updates.map((u) => u.details.fields),
      ['value', 'value', 'value', 'customFields,notes', 'isActive', 'isActive'],
    )
  })

  describe('sealed blobs are bound to their secret, field, version and tenant', () => {
    let a: RichSecret
    let b: RichSecret

    before(async () => {
      a = await richSecret('tamper-a')
      b = await richSecret('tamper-b')
    })

    const health = async () => {
      const res = await svc.request('GET', '/api/v1/health')
      assert.equal(res.status, 200, res.text)
      assert.equal(res.body.database.status, 'up')
    }

    /** The answer to a read of tampered storage: a generic 500 that reveals nothing. */
    const assertRefused = (res: HttpResult, what: string) => {
      assert.equal(res.status, 500, `${what}: ${res.status} ${res.text}`)
      assert.deepEqual(res.body, { error: 'internal_error', message: 'Internal error' }, what)
      assertNoNeedles(res.text, sealedNeedles, what)
    }

    /** Runs `check` with a column of one row replaced, then puts the original bytes back. */
    async function withTampered(
      table: 'secrets' | 'secret_versions',
      column: string,
      where: { id: string; version?: number },
      replacement: Buffer,
      check: () => Promise<void>,
    ): Promise<void> {
      const filter =
        table === 'secrets'
          ? svc.sql`id = ${where.id}`
          : svc.sql`secret_id = ${where.id} AND version = ${where.version!}`
      const [original] = await svc.sql<{ blob: Buffer }[]>`
        SELECT ${svc.sql(column)} AS blob FROM ${svc.sql(table)} WHERE ${filter}`
      assert.ok(original?.blob, `${table}.${column} has a value to tamper with`)
      await svc.sql`UPDATE ${svc.sql(table)} SET ${svc.sql(column)} = ${replacement} WHERE ${filter}`
      try {
        await check()
      } finally {
        await svc.sql`UPDATE ${svc.sql(table)} SET ${svc.sql(column)} = ${original.blob} WHERE ${filter}`
      }
    }

    const blobOf = async (column: string, id: string) => {
      const [row] = await svc.sql<
        { blob: Buffer }[]
      >`SELECT ${svc.sql(column)} AS blob FROM secrets WHERE id = ${id}`
      return row!.blob
    }
    const valueBlob = async (id: string, version: number) => {
      const [row] = await svc.sql<{ blob: Buffer }[]>`
        SELECT sealed_value AS blob FROM secret_versions WHERE secret_id = ${id} AND version = ${version}`
      return row!.blob
    }

    /** B still reads as itself once the original bytes are back: the failures were the tampering. */
    async function assertIntact(s: RichSecret): Promise<void> {
      const res = await call('GET', `/secrets/${s.id}?include=all`)
      assert.equal(res.status, 200, res.text)
      assert.equal(res.body.value, s.values[3])
      assert.equal(res.body.notes, s.notes)
      assert.equal(res.body.version, 4)
      assert.equal((await totpOf(s.id)).status, 200)
    }

    test("A's value copied into B's version does not open; B's metadata still reads", async () => {
      const readsBefore = (await valueReads(b.id)).length
      await withTampered(
        'secret_versions',
        'sealed_value',
        { id: b.id, version: 4 },
        await valueBlob(a.id, 4),
        async () => {
          assertRefused(await call('GET', `/secrets/${b.id}?include=all`), 'get include=all')
          assertRefused(await call('GET', `/secrets/${b.id}/versions/4?include=all`), 'version 4')
          const list = await call('GET', `/secrets?include=all&search=${b.name}`)
          assertRefused(list, 'list include=all')
          const metadata = await call('GET', `/secrets/${b.id}?include=metadata`)
          assert.equal(metadata.status, 200, metadata.text)
          assert.equal(metadata.body.version, 4)
          // A new value needs the current one (to skip an unchanged value): the update fails whole.
          assertRefused(await call('PATCH', `/secrets/${b.id}`, { value: 'new value' }), 'update')
          await health()
        },
      )
      assert.equal((await valueReads(b.id)).length, readsBefore, 'no read recorded for what was not revealed')
      await assertIntact(b)
      const versions = await call('GET', `/secrets/${b.id}/versions`)
      assert.equal(versions.body.data.length, 4, 'the failed update added no version')
    })

    test('an older version copied over the current one does not open (the version is in the AAD)', async () => {
      await withTampered(
        'secret_versions',
        'sealed_value',
        { id: b.id, version: 4 },
        await valueBlob(b.id, 1),
        async () => {
          assertRefused(await call('GET', `/secrets/${b.id}?include=all`), 'get include=all')
          assertRefused(await call('GET', `/secrets/${b.id}/versions/4?include=all`), 'version 4')
          const older = await call('GET', `/secrets/${b.id}/versions/1?include=all`)
          assert.equal(older.status, 200, older.text)
          assert.equal(older.body.value, b.values[0])
          await health()
        },
      )
      await assertIntact(b)
    })

    test("A's notes, custom values and TOTP seed copied into B do not open", async () => {
      await withTampered(
        'secrets',
        'sealed_notes',
        { id: b.id },
        await blobOf('sealed_notes', a.id),
        async () => {
          const res = await call('GET', `/secrets/${b.id}?include=notes`)
          assertRefused(res, 'notes')
          assert.ok(!res.text.includes(a.notes))
          await health()
        },
      )
      await withTampered(
        'secrets',
        'sealed_custom_values',
        { id: b.id },
        await blobOf('sealed_custom_values', a.id),
        async () => {
          assertRefused(await call('GET', `/secrets/${b.id}?include=all`), 'custom values')
          // Without include=all the sealed values are not opened at all.
          const hidden = await call('GET', `/secrets/${b.id}?include=customFields`)
          assert.equal(hidden.status, 200, hidden.text)
          await health()
        },
      )
      await withTampered(
        'secrets',
        'sealed_totp',
        { id: b.id },
        await blobOf('sealed_totp', a.id),
        async () => {
          assertRefused(await totpOf(b.id), 'totp')
          await health()
        },
      )
      await assertIntact(b)
    })

    test("one field's blob moved to another field of the same secret does not open", async () => {
      await withTampered(
        'secrets',
        'sealed_totp',
        { id: b.id },
        await blobOf('sealed_notes', b.id),
        async () => {
          assertRefused(await totpOf(b.id), 'notes as totp')
        },
      )
      await withTampered('secrets', 'sealed_notes', { id: b.id }, await valueBlob(b.id, 4), async () => {
        const res = await call('GET', `/secrets/${b.id}?include=notes`)
        assertRefused(res, 'value as notes')
        assert.ok(!res.text.includes(b.values[3]!))
      })
      await withTampered(
        'secrets',
        'sealed_notes',
        { id: b.id },
        await blobOf('sealed_custom_values', b.id),
        async () => {
          assertRefused(await call('GET', `/secrets/${b.id}?include=notes`), 'custom values as notes')
        },
      )
      await health()
      await assertIntact(b)
    })

    test("A's data key and every blob copied into B (all but the id) still do not open", async () => {
      const [original] = await svc.sql<Record<string, Buffer | null>[]>`
        SELECT sealed_dek, sealed_notes, sealed_custom_values, sealed_totp FROM secrets WHERE id = ${b.id}`
      const [originalValue] = await svc.sql<{ sealed_value: Buffer }[]>`
        SELECT sealed_value FROM secret_versions WHERE secret_id = ${b.id} AND version = 4`
      await svc.sql`
        UPDATE secrets AS t SET sealed_dek = s.sealed_dek, sealed_notes = s.sealed_notes,
          sealed_custom_values = s.sealed_custom_values, sealed_totp = s.sealed_totp
        FROM secrets AS s WHERE s.id = ${a.id} AND t.id = ${b.id}`
      await svc.sql`
        UPDATE secret_versions AS t SET sealed_value = s.sealed_value FROM secret_versions AS s
        WHERE s.secret_id = ${a.id} AND s.version = 4 AND t.secret_id = ${b.id} AND t.version = 4`
      try {
        assertRefused(await call('GET', `/secrets/${b.id}?include=all`), 'value')
        assertRefused(await call('GET', `/secrets/${b.id}?include=notes`), 'notes')
        assertRefused(await totpOf(b.id), 'totp')
        assertRefused(await call('GET', `/secrets/${b.id}/versions/4?include=all`), 'version')
        await health()
      } finally {
        await svc.sql`UPDATE secrets SET ${svc.sql(original!)} WHERE id = ${b.id}`
        await svc.sql`
          UPDATE secret_versions SET sealed_value = ${originalValue!.sealed_value}
          WHERE secret_id = ${b.id} AND version = 4`
      }
      await assertIntact(b)
      await assertIntact(a)
    })

    test('a secret moved to another tenant in the database does not open there', async () => {
      const other = await svc.createTenant()
      await svc.sql`UPDATE secrets SET tenant_id = ${other.tenantId} WHERE id = ${b.id}`
      try {
        const res = await call('GET', `/secrets/${b.id}?include=all`, undefined, other.key)
        assertRefused(res, 'value under another tenant')
        assertRefused(
          await call('GET', `/secrets/${b.id}/totp`, undefined, other.key),
          'totp under another tenant',
        )
        const own = await call('GET', `/secrets/${b.id}?include=all`)
        assert.equal(own.status, 404, 'the first tenant no longer finds it')
        await health()
      } finally {
        await svc.sql`UPDATE secrets SET tenant_id = ${tenant.tenantId} WHERE id = ${b.id}`
      }
      await assertIntact(b)
    })
  })

  test("another tenant cannot read, change, list or find the first tenant's secret", async () => {
    const other = await svc.createTenant()
    const as = (method: string, path: string, body?: unknown) => call(method, path, body, other.key)
    const notFound = (res: HttpResult, what: string) => {
      assert.equal(res.status, 404, `${what}: ${res.text}`)
      assert.equal(res.body.error, 'secret_not_found', what)
      assertNoNeedles(res.text, sealedNeedles, what)
      assert.ok(!res.text.includes(rich.name), `${what} does not name the secret`)
    }
    notFound(await as('GET', `/secrets/${rich.id}`), 'get')
    notFound(await as('GET', `/secrets/${rich.id}?include=all`), 'get include=all')
    notFound(await as('GET', `/secrets/${rich.id}?include=notes`), 'get include=notes')
    notFound(await as('GET', `/secrets/${rich.id}/totp`), 'totp')
    notFound(await as('GET', `/secrets/${rich.id}/versions`), 'versions')
    notFound(await as('GET', `/secrets/${rich.id}/versions/1?include=all`), 'version 1')
    notFound(await as('PATCH', `/secrets/${rich.id}`, { value: 'overwritten' }), 'update')
    notFound(await as('DELETE', `/secrets/${rich.id}`), 'delete')
    notFound(await as('DELETE', `/secrets/${rich.id}?permanent=true`), 'purge')
    notFound(await as('POST', `/secrets/${deleted.id}/restore`), 'restore')
    notFound(await as('POST', '/secrets/move', { secretIds: [rich.id], folderId: null }), 'move')

    for (const query of ['include=all', `search=${rich.name}`, 'deleted=true&include=all']) {
      const list = await as('GET', `/secrets?${query}`)
      assert.equal(list.status, 200, list.text)
      assert.equal(list.body.total, 0, `the other tenant's list (${query}) is empty`)
      assert.ok(!list.text.includes(rich.id) && !list.text.includes(deleted.id))
    }
    // Its own secret of the same name is its own.
    const own = await as('POST', '/secrets', { name: rich.name, value: 'its own' })
    assert.equal(own.status, 201, own.text)
    assert.notEqual(own.body.id, rich.id)

    const stillThere = await call('GET', `/secrets/${rich.id}?include=all`)
    assert.equal(stillThere.status, 200, stillThere.text)
    assert.equal(stillThere.body.value, rich.values[3])
    assert.equal(stillThere.body.version, 4)
    const reads = await svc.sql`
      SELECT 1 FROM audit_log WHERE tenant_id = ${other.tenantId} AND resource = ${`secret:${rich.id}`}`
    assert.equal(reads.length, 0, 'nothing recorded against the secret for the other tenant')
  })

  test('no table of the database holds any sealed content given in this file; clear fields are found', async () => {
    assert.ok(sealedNeedles.length > 100, `${sealedNeedles.length} needles`)
    const tables = await svc.sql<{ schema: string; name: string }[]>`
      SELECT table_schema AS schema, table_name AS name FROM information_schema.tables
      WHERE table_type = 'BASE TABLE' AND table_schema NOT IN ('pg_catalog', 'information_schema')
      ORDER BY 1, 2`
    const names = tables.map((t) => `${t.schema}.${t.name}`)
    for (const required of [
      'public.secrets',
      'public.secret_versions',
      'public.audit_log',
      'public.tenants',
    ]) {
      assert.ok(names.includes(required), `${required} is scanned`)
    }
    const dumps: string[] = []
    for (const { schema, name } of tables) {
      const rows = await svc.sql<
        { row: string }[]
      >`SELECT t::text AS row FROM ${svc.sql(schema)}.${svc.sql(name)} t`
      const text = rows.map((r) => r.row).join('\n')
      assertNoNeedles(text, sealedNeedles, `table ${schema}.${name}`)
      dumps.push(text)
    }
    const all = dumps.join('\n')
    const sealedBlobs = await svc.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM secret_versions`
    assert.ok(sealedBlobs[0]!.n >= 8, 'the versions are in the scan')
    for (const marker of clearMarkers)
      assert.ok(all.includes(marker), `clear field ${marker} found by the table scan`)

    // The same through pg_dump: every schema, sequence and table as PostgreSQL itself exports it.
    const { stdout: dump } = await run('pg_dump', ['--no-owner', '--dbname', svc.db.url], {
      maxBuffer: 512 * 1024 * 1024,
    })
    assert.match(dump, /COPY public\.secret_versions/)
    assertNoNeedles(dump, sealedNeedles, 'pg_dump')
    for (const marker of clearMarkers)
      assert.ok(dump.includes(marker), `clear field ${marker} found in pg_dump`)
  })
})
