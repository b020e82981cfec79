import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { createPrivateKey, randomBytes } from 'node:crypto'
import { after, before, describe, test } from 'node:test'
import { ml_dsa44, ml_dsa65, ml_dsa87 } from '@noble/post-quantum/ml-dsa.js'
import { ml_kem512, ml_kem768, ml_kem1024 } from '@noble/post-quantum/ml-kem.js'
import { exportJWK, type JWK } from 'jose'
import {
  type HttpResult,
  startTestService,
  type TenantWithKey,
  type TestService,
} from '../helpers/service.ts'

/**
 * BYOK import (docs/keys.md, "Import (BYOK)"): keys made outside the service (the openssl CLI,
 * @noble/post-quantum, random HMAC secrets) are accepted in every format that fits them, the
 * service derives the same public key as the outside tools, material that does not fit is refused
 * with a stable code and leaves no row, and no secret is stored in clear, echoed or audited.
 */

const IMPORT = '/api/v1/keys/import'
const PASSWORD = 'Imp0rt-pass-phrase-7f3c9a'

type KeyType = 'Encryption' | 'Signing' | 'HMAC'

interface ImportBody {
  name: string
  keyType: KeyType
  algorithm: string
  format: 'PEM' | 'PKCS#8' | 'JWK' | 'DER' | 'RAW'
  keyMaterial: string | Record<string, unknown>
  password?: string
  isDefault?: boolean
  exportable?: boolean
}

/** A key pair made with the openssl CLI, in every encoding openssl writes. */
interface OpensslFixture {
  label: string
  algorithm: string
  keyType: 'Encryption' | 'Signing'
  pkcs8Pem: string
  pkcs8Der: Buffer
  encryptedPem: string
  encryptedDer: Buffer
  /** PKCS#1 (RSA) or SEC1 (EC); Ed25519 has no traditional form. */
  traditionalPem: string | null
  traditionalDer: Buffer | null
  jwk: JWK
  /** EC private scalar or Ed25519 private key; RSA has none. */
  raw: Buffer | null
  /** `openssl pkey -pubout -outform DER`. */
  spkiDer: Buffer
  /** The SPKI subjectPublicKey content, as openssl wrote it. */
  rawPublic: Buffer
  /** Byte strings that must never be found in clear in the database. */
  privateBytes: Buffer[]
}

interface Variant {
  label: string
  format: ImportBody['format']
  keyMaterial: ImportBody['keyMaterial']
  password?: string
}

function openssl(args: string[], input?: string | Buffer): Buffer {
  return execFileSync('openssl', args, { input: input ?? '', stdio: ['pipe', 'pipe', 'pipe'] })
}

const b64 = (bytes: Uint8Array) => Buffer.from(bytes).toString('base64')
const b64url = (bytes: Uint8Array) => Buffer.from(bytes).toString('base64url')
const derToPem = (der: Buffer, label: string) =>
  `-----BEGIN ${label}-----\n${b64(der).replace(/(.{64})/g, '$1\n')}\n-----END ${label}-----\n`
const pemToDer = (pem: string) =>
  Buffer.from(pem.replace(/-----[A-Z0-9 ]+-----/g, '').replace(/\s+/g, ''), 'base64')

/** The private scalar of a SEC1 ECPrivateKey DER: version INTEGER 1, then the OCTET STRING. */
function sec1Scalar(der: Buffer): Buffer {
  const at = der.indexOf(Buffer.from([0x02, 0x01, 0x01, 0x04]))
  assert.ok(at > 0, 'SEC1 DER has its version and private key')
  const length = der[at + 4]!
  return der.subarray(at + 5, at + 5 + length)
}

/** A wrong password that openssl itself reports as "bad decrypt" for this encrypted key. */
function wrongPasswordFor(encryptedPem: string): string {
  // CBC padding accepts about 1 wrong key in 256; such a password is refused later, by the
  // ASN.1 parser. Pick one openssl rejects at decryption, so the expected code is certain.
  for (let i = 0; i < 20; i++) {
    const candidate = `wrong-password-${i}-${randomBytes(4).toString('hex')}`
    try {
      openssl(['pkcs8', '-passin', `pass:${candidate}`], encryptedPem)
    } catch (error) {
      if (/bad decrypt/i.test(String((error as { stderr?: Buffer }).stderr ?? ''))) return candidate
    }
  }
  throw new Error('no wrong password found that openssl reports as bad decrypt')
}

async function opensslFixture(
  label: string,
  algorithm: string,
  keyType: 'Encryption' | 'Signing',
  genpkey: string[],
): Promise<OpensslFixture> {
  const pkcs8Pem = openssl(['genpkey', ...genpkey]).toString()
  assert.match(pkcs8Pem, /^-----BEGIN PRIVATE KEY-----/)
  const pkcs8Der = openssl(['pkcs8', '-topk8', '-nocrypt', '-outform', 'DER'], pkcs8Pem)
  const encrypt = ['pkcs8', '-topk8', '-v2', 'aes-256-cbc', '-passout', `pass:${PASSWORD}`]
  const encryptedPem = openssl(encrypt, pkcs8Pem).toString()
  assert.match(encryptedPem, /^-----BEGIN ENCRYPTED PRIVATE KEY-----/)
  const encryptedDer = openssl([...encrypt, '-outform', 'DER'], pkcs8Pem)
  const spkiDer = openssl(['pkey', '-pubout', '-outform', 'DER'], pkcs8Pem)
  const jwk = await exportJWK(createPrivateKey(pkcs8Pem))
  const nodePkcs8 = createPrivateKey(pkcs8Pem).export({ format: 'der', type: 'pkcs8' })
  const privateBytes = [pkcs8Der, nodePkcs8, Buffer.from(jwk.d!, 'base64url')]
  let traditionalPem: string | null = null
  let traditionalDer: Buffer | null = null
  let raw: Buffer | null = null
  let rawPublic: Buffer
  if (algorithm.startsWith('RSA')) {
    traditionalPem = openssl(['rsa', '-traditional'], pkcs8Pem).toString()
    assert.match(traditionalPem, /^-----BEGIN RSA PRIVATE KEY-----/)
    traditionalDer = openssl(['rsa', '-traditional', '-outform', 'DER'], pkcs8Pem)
    rawPublic = openssl(['rsa', '-RSAPublicKey_out', '-outform', 'DER'], pkcs8Pem)
    privateBytes.push(traditionalDer, Buffer.from(jwk.p!, 'base64url'), Buffer.from(jwk.q!, 'base64url'))
  } else if (algorithm.startsWith('EC')) {
    traditionalPem = openssl(['ec'], pkcs8Pem).toString()
    assert.match(traditionalPem, /^-----BEGIN EC PRIVATE KEY-----/)
    traditionalDer = openssl(['ec', '-outform', 'DER'], pkcs8Pem)
    raw = sec1Scalar(traditionalDer)
    // Two independent readings of the scalar agree (openssl's SEC1 and jose's JWK d).
    assert.deepEqual(raw, Buffer.from(jwk.d!, 'base64url'))
    const coordinate = { 'EC-P256': 32, 'EC-P384': 48, 'EC-P521': 66 }[algorithm]!
    assert.equal(raw.length, coordinate)
    rawPublic = spkiDer.subarray(spkiDer.length - (1 + 2 * coordinate))
    assert.equal(rawPublic[0], 0x04, 'uncompressed point')
    privateBytes.push(traditionalDer, raw)
  } else {
    assert.equal(pkcs8Der.length, 48, 'Ed25519 PKCS#8 is 16 bytes of header and the 32-byte key')
    raw = pkcs8Der.subarray(16)
    rawPublic = spkiDer.subarray(spkiDer.length - 32)
    privateBytes.push(raw)
  }
  return {
    label,
    algorithm,
    keyType,
    pkcs8Pem,
    pkcs8Der,
    encryptedPem,
    encryptedDer,
    traditionalPem,
    traditionalDer,
    jwk,
    raw,
    spkiDer,
    rawPublic,
    privateBytes,
  }
}

/** Every import format that fits the fixture (docs/keys.md, the Import table). */
function variantsOf(f: OpensslFixture): Variant[] {
  const variants: Variant[] = [
    { label: 'PEM (PKCS#8)', format: 'PEM', keyMaterial: f.pkcs8Pem },
    { label: 'PEM (encrypted PKCS#8)', format: 'PEM', keyMaterial: f.encryptedPem, password: PASSWORD },
    { label: 'PKCS#8 as PEM', format: 'PKCS#8', keyMaterial: f.pkcs8Pem },
    { label: 'PKCS#8 as Base64 DER', format: 'PKCS#8', keyMaterial: b64(f.pkcs8Der) },
    {
      label: 'PKCS#8 encrypted PEM',
      format: 'PKCS#8',
      keyMaterial: f.encryptedPem,
      password: PASSWORD,
    },
    {
      label: 'PKCS#8 encrypted Base64 DER',
      format: 'PKCS#8',
      keyMaterial: b64(f.encryptedDer),
      password: PASSWORD,
    },
    { label: 'DER (PKCS#8)', format: 'DER', keyMaterial: b64(f.pkcs8Der) },
    {
      label: 'DER (encrypted PKCS#8)',
      format: 'DER',
      keyMaterial: b64(f.encryptedDer),
      password: PASSWORD,
    },
    { label: 'JWK (jose)', format: 'JWK', keyMaterial: f.jwk as Record<string, unknown> },
  ]
  if (f.traditionalPem)
    variants.push({ label: 'PEM (traditional)', format: 'PEM', keyMaterial: f.traditionalPem })
  if (f.traditionalDer) {
    variants.push({ label: 'DER (traditional)', format: 'DER', keyMaterial: b64(f.traditionalDer) })
  }
  if (f.raw) variants.push({ label: 'RAW', format: 'RAW', keyMaterial: b64(f.raw) })
  return variants
}

/** Substrings of submitted material (16 chars each) that a response or a record must never contain. */
function materialFragments(material: unknown): string[] {
  const pieces: string[] = []
  if (typeof material === 'string') {
    for (const line of material.split(/\r?\n/)) {
      if (!line.startsWith('-----')) pieces.push(line.trim())
    }
  } else if (material && typeof material === 'object') {
    for (const value of Object.values(material)) if (typeof value === 'string') pieces.push(value)
  }
  const fragments = new Set<string>()
  for (const piece of pieces) {
    for (let i = 0; i + 16 <= piece.length; i++) fragments.add(piece.slice(i, i + 16))
  }
  return [...fragments]
}

/** A checker for one text (a response, a record): it holds no password and no 16-char piece of material. */
function noEchoIn(text: string): (body: { keyMaterial: unknown; password?: string }, label: string) => void {
  const windows = new Set<string>()
  for (let i = 0; i + 16 <= text.length; i++) windows.add(text.slice(i, i + 16))
  return (body, label) => {
    if (body.password !== undefined) {
      assert.ok(!text.includes(body.password), `${label}: the password is echoed`)
    }
    const echoed = materialFragments(body.keyMaterial).find((fragment) => windows.has(fragment))
    assert.equal(echoed, undefined, `${label}: key material is echoed`)
  }
}

function assertNoEcho(text: string, body: { keyMaterial: unknown; password?: string }, label: string): void {
  noEchoIn(text)(body, label)
}

const uniqueName = (prefix: string) => `${prefix}-${randomBytes(4).toString('hex')}`

describe('key import (BYOK)', () => {
  let svc: TestService
  let tenant: TenantWithKey
  const fixtures = new Map<string, OpensslFixture>()
  let rsa3072Pem: string
  let wrongPasswordPem: string
  let wrongPasswordDer: string
  /** Every password and material submitted by this file, to look for in the audit log. */
  const submitted: { keyMaterial: unknown; password?: string }[] = []

  before(async () => {
    svc = await startTestService()
    tenant = await svc.createTenant()
    const specs: [string, string, 'Encryption' | 'Signing', string[]][] = [
      ['rsa-enc', 'RSA-2048', 'Encryption', ['-algorithm', 'RSA', '-pkeyopt', 'rsa_keygen_bits:2048']],
      ['rsa-sig', 'RSA-2048', 'Signing', ['-algorithm', 'RSA', '-pkeyopt', 'rsa_keygen_bits:2048']],
      ['p256', 'EC-P256', 'Signing', ['-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-256']],
      ['p384', 'EC-P384', 'Signing', ['-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-384']],
      ['p521', 'EC-P521', 'Signing', ['-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-521']],
      ['ed25519', 'Ed25519', 'Signing', ['-algorithm', 'ED25519']],
      ['ed25519-b', 'Ed25519', 'Signing', ['-algorithm', 'ED25519']],
      ['p256-b', 'EC-P256', 'Signing', ['-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-256']],
    ]
    for (const [label, algorithm, keyType, genpkey] of specs) {
      fixtures.set(label, await opensslFixture(label, algorithm, keyType, genpkey))
    }
    rsa3072Pem = openssl(['genpkey', '-algorithm', 'RSA', '-pkeyopt', 'rsa_keygen_bits:3072']).toString()
    wrongPasswordPem = wrongPasswordFor(fixtures.get('rsa-enc')!.encryptedPem)
    wrongPasswordDer = wrongPasswordFor(
      derToPem(fixtures.get('ed25519')!.encryptedDer, 'ENCRYPTED PRIVATE KEY'),
    )
  })

  after(async () => {
    await svc?.stop()
  })

  const fixture = (label: string) => fixtures.get(label)!

  async function importKey(body: ImportBody, key = tenant.key): Promise<HttpResult> {
    submitted.push({ keyMaterial: body.keyMaterial, ...(body.password ? { password: body.password } : {}) })
    return svc.request('POST', IMPORT, { key, body })
  }

  function assertImported(res: HttpResult, body: ImportBody, label: string): string {
    assert.equal(res.status, 201, `${label}: ${res.text}`)
    assert.equal(res.body.origin, 'Imported', label)
    assert.equal(res.body.state, 'Active', label)
    assert.equal(res.body.isActive, true, label)
    assert.equal(res.body.version, 1, label)
    assert.equal(res.body.algorithm, body.algorithm, label)
    assert.equal(res.body.keyType, body.keyType, label)
    assert.equal(res.body.name, body.name, label)
    assert.match(res.body.id, /^[0-9a-f-]{36}$/, label)
    assertNoEcho(res.text, body, label)
    return res.body.id as string
  }

  async function publicKey(keyId: string, format: 'PEM' | 'RAW' | 'DER' | 'JWK'): Promise<HttpResult> {
    const res = await svc.request('GET', `/api/v1/keys/${keyId}/public?format=${format}`, { key: tenant.key })
    assert.equal(res.status, 200, res.text)
    return res
  }

  async function counts(tenantId: string): Promise<{ keys: number; versions: number }> {
    const [row] = await svc.sql<{ keys: number; versions: number }[]>`
      SELECT (SELECT count(*)::int FROM keys WHERE tenant_id = ${tenantId}) AS keys,
             (SELECT count(*)::int FROM key_versions WHERE tenant_id = ${tenantId}) AS versions`
    return row!
  }

  /** The stored rows hold the material sealed: none of the plaintext bytes appear in them. */
  async function assertSealedAtRest(keyId: string, secrets: Buffer[], label: string, minLength: number) {
    const rows = await svc.sql<{ public_key: Buffer | null; sealed_material: Buffer | null }[]>`
      SELECT public_key, sealed_material FROM key_versions WHERE key_id = ${keyId}`
    assert.equal(rows.length, 1, `${label}: one version row`)
    const { public_key: stored, sealed_material: sealed } = rows[0]!
    assert.ok(Buffer.isBuffer(sealed), `${label}: material is stored`)
    assert.ok(sealed.length >= minLength, `${label}: sealed material is shorter than the plaintext`)
    const [keyRow] = await svc.sql<
      { text: string }[]
    >`SELECT row_to_json(k)::text AS text FROM keys k WHERE id = ${keyId}`
    for (const secret of secrets) {
      assert.equal(sealed.indexOf(secret), -1, `${label}: sealed_material contains plaintext private bytes`)
      if (stored) assert.equal(stored.indexOf(secret), -1, `${label}: public_key contains private bytes`)
      for (const encoding of ['hex', 'base64', 'base64url'] as const) {
        assert.ok(!keyRow!.text.includes(secret.toString(encoding)), `${label}: keys row contains the secret`)
      }
    }
  }

  async function expectRefused(
    body: ImportBody,
    status: number,
    codes: readonly string[],
    label: string,
  ): Promise<HttpResult> {
    const before = await counts(tenant.tenantId)
    const res = await importKey(body)
    assert.equal(res.status, status, `${label}: ${res.text}`)
    assert.ok(codes.includes(res.body?.error), `${label}: expected ${codes.join('|')}, got ${res.text}`)
    assert.equal(typeof res.body.message, 'string', label)
    assert.deepEqual(await counts(tenant.tenantId), before, `${label}: a refused import wrote a row`)
    assertNoEcho(res.text, body, label)
    return res
  }

  // -------------------------------------------------------------------------------------------
  // Keys made by openssl, in every format that fits them
  // -------------------------------------------------------------------------------------------

  for (const label of ['rsa-enc', 'rsa-sig', 'p256', 'p384', 'p521', 'ed25519']) {
    test(`openssl ${label}: imported in every format, the service derives openssl's public key`, async () => {
      const f = fixture(label)
      const variants = variantsOf(f)
      const minimum = f.algorithm.startsWith('RSA') ? 11 : f.algorithm.startsWith('EC') ? 12 : 10
      assert.equal(variants.length, minimum, 'every format that fits the key is exercised')
      const ids = await Promise.all(
        variants.map(async (variant) => {
          const what = `${f.label} ${variant.label}`
          const body: ImportBody = {
            name: uniqueName(`${f.label}-${variant.format}`),
            keyType: f.keyType,
            algorithm: f.algorithm,
            format: variant.format,
            keyMaterial: variant.keyMaterial,
            ...(variant.password ? { password: variant.password } : {}),
          }
          const id = assertImported(await importKey(body), body, what)

          const pem = await publicKey(id, 'PEM')
          assert.equal(pem.body.format, 'PEM', what)
          assert.match(pem.body.publicKey, /^-----BEGIN PUBLIC KEY-----/, what)
          assert.deepEqual(
            pemToDer(pem.body.publicKey),
            f.spkiDer,
            `${what}: PEM public key differs from openssl's`,
          )
          const raw = await publicKey(id, 'RAW')
          assert.deepEqual(
            Buffer.from(raw.body.publicKey, 'base64'),
            f.rawPublic,
            `${what}: RAW public key differs from openssl's`,
          )
          await assertSealedAtRest(id, f.privateBytes, what, f.pkcs8Der.length)
          return id
        }),
      )
      assert.equal(new Set(ids).size, variants.length)

      // The public JWK agrees with jose's reading of the openssl key.
      const jwk = (await publicKey(ids[0]!, 'JWK')).body
      assert.equal(jwk.kty, f.jwk.kty)
      assert.equal(jwk.d, undefined, 'a public JWK has no private part')
      for (const member of ['n', 'e', 'crv', 'x', 'y'] as const) {
        assert.equal(jwk[member], f.jwk[member], `${f.label}: public JWK ${member}`)
      }
      assert.equal(jwk.kid, `${ids[0]}:1`)
    })
  }

  // -------------------------------------------------------------------------------------------
  // Post-quantum keys from @noble/post-quantum seeds
  // -------------------------------------------------------------------------------------------

  const pqSets = [
    { algorithm: 'ML-KEM-512', keyType: 'Encryption', seedBytes: 64, lib: ml_kem512 },
    { algorithm: 'ML-KEM-768', keyType: 'Encryption', seedBytes: 64, lib: ml_kem768 },
    { algorithm: 'ML-KEM-1024', keyType: 'Encryption', seedBytes: 64, lib: ml_kem1024 },
    { algorithm: 'ML-DSA-44', keyType: 'Signing', seedBytes: 32, lib: ml_dsa44 },
    { algorithm: 'ML-DSA-65', keyType: 'Signing', seedBytes: 32, lib: ml_dsa65 },
    { algorithm: 'ML-DSA-87', keyType: 'Signing', seedBytes: 32, lib: ml_dsa87 },
  ] as const

  for (const set of pqSets) {
    test(`${set.algorithm}: RAW seed and AKP JWK from noble, the service derives noble's public key`, async () => {
      const cases = ['RAW', 'JWK'] as const
      await Promise.all(
        cases.map(async (format) => {
          const seed = randomBytes(set.seedBytes)
          const { publicKey: noblePublic, secretKey: nobleSecret } = set.lib.keygen(seed)
          const body: ImportBody = {
            name: uniqueName(`${set.algorithm}-${format}`),
            exportable: true,
            keyType: set.keyType,
            algorithm: set.algorithm,
            format,
            keyMaterial:
              format === 'RAW'
                ? b64(seed)
                : { kty: 'AKP', alg: set.algorithm, priv: b64url(seed), pub: b64url(noblePublic) },
          }
          const what = `${set.algorithm} ${format}`
          const res = await importKey(body)
          const id = assertImported(res, body, what)
          assert.equal(res.body.isPostQuantum, true, what)

          const raw = await publicKey(id, 'RAW')
          assert.deepEqual(
            Buffer.from(raw.body.publicKey, 'base64'),
            Buffer.from(noblePublic),
            `${what}: RAW public key differs from noble's`,
          )
          const der = Buffer.from((await publicKey(id, 'DER')).body.publicKey, 'base64')
          assert.deepEqual(der.subarray(der.length - noblePublic.length), Buffer.from(noblePublic), what)
          const jwk = (await publicKey(id, 'JWK')).body
          assert.equal(jwk.kty, 'AKP', what)
          assert.equal(jwk.pub, b64url(noblePublic), what)
          assert.equal(jwk.priv, undefined, what)

          // The service keeps the seed, so RAW export gives it back.
          const exported = await svc.request('POST', `/api/v1/keys/${id}/export-private`, {
            key: tenant.key,
            body: { confirm: body.name, format: 'RAW' },
          })
          assert.equal(exported.status, 200, exported.text)
          assert.deepEqual(Buffer.from(exported.body.privateKey, 'base64'), seed, `${what}: exported seed`)

          await assertSealedAtRest(id, [seed, Buffer.from(nobleSecret)], what, seed.length)
        }),
      )
    })
  }

  // -------------------------------------------------------------------------------------------
  // HMAC secrets
  // -------------------------------------------------------------------------------------------

  for (const [algorithm, hashBytes, blockBytes] of [
    ['HMAC-SHA256', 32, 64],
    ['HMAC-SHA384', 48, 128],
    ['HMAC-SHA512', 64, 128],
  ] as const) {
    test(`${algorithm}: RAW and JWK secrets are imported and export back unchanged`, async () => {
      const cases: { format: 'RAW' | 'JWK'; secret: Buffer; withAlg: boolean }[] = [
        { format: 'RAW', secret: randomBytes(hashBytes), withAlg: false },
        { format: 'RAW', secret: randomBytes(blockBytes), withAlg: false },
        { format: 'JWK', secret: randomBytes(hashBytes), withAlg: false },
        { format: 'JWK', secret: randomBytes(blockBytes), withAlg: true },
      ]
      await Promise.all(
        cases.map(async ({ format, secret, withAlg }) => {
          const what = `${algorithm} ${format} ${secret.length} bytes`
          const body: ImportBody = {
            name: uniqueName(`${algorithm}-${format}`),
            exportable: true,
            keyType: 'HMAC',
            algorithm,
            format,
            keyMaterial:
              format === 'RAW'
                ? b64(secret)
                : { kty: 'oct', k: b64url(secret), ...(withAlg ? { alg: `HS${hashBytes * 8}` } : {}) },
          }
          const id = assertImported(await importKey(body), body, what)
          const exported = await svc.request('POST', `/api/v1/keys/${id}/export-private`, {
            key: tenant.key,
            body: { confirm: body.name, format: 'RAW' },
          })
          assert.equal(exported.status, 200, exported.text)
          assert.deepEqual(
            Buffer.from(exported.body.privateKey, 'base64'),
            secret,
            `${what}: exported secret`,
          )
          const noPublic = await svc.request('GET', `/api/v1/keys/${id}/public`, { key: tenant.key })
          assert.equal(noPublic.status, 409, noPublic.text)
          assert.equal(noPublic.body.error, 'no_public_key')
          await assertSealedAtRest(id, [secret], what, secret.length)
        }),
      )
    })
  }

  // -------------------------------------------------------------------------------------------
  // Refusals
  // -------------------------------------------------------------------------------------------

  const base = (overrides: Partial<ImportBody> & Pick<ImportBody, 'format' | 'keyMaterial'>): ImportBody => ({
    name: uniqueName('refused'),
    keyType: 'Signing',
    algorithm: 'EC-P256',
    ...overrides,
  })

  test('an RSA-2048 key declared as EC-P256 is 400 algorithm_mismatch', async () => {
    const f = fixture('rsa-sig')
    await expectRefused(
      base({ format: 'PEM', keyMaterial: f.pkcs8Pem }),
      400,
      ['algorithm_mismatch'],
      'RSA PEM as EC',
    )
    await expectRefused(
      base({ format: 'JWK', keyMaterial: f.jwk as Record<string, unknown> }),
      400,
      ['algorithm_mismatch'],
      'RSA JWK as EC',
    )
  })

  test('an RSA-3072 key declared as RSA-2048 is 400 key_size_mismatch', async () => {
    await expectRefused(
      base({ algorithm: 'RSA-2048', format: 'PEM', keyMaterial: rsa3072Pem }),
      400,
      ['key_size_mismatch'],
      'RSA-3072 as RSA-2048',
    )
    await expectRefused(
      base({ keyType: 'Encryption', algorithm: 'RSA-4096', format: 'PKCS#8', keyMaterial: rsa3072Pem }),
      400,
      ['key_size_mismatch'],
      'RSA-3072 as RSA-4096',
    )
  })

  test('an EC P-384 key declared as EC-P256 is 400 algorithm_mismatch', async () => {
    const f = fixture('p384')
    await expectRefused(
      base({ format: 'PEM', keyMaterial: f.traditionalPem! }),
      400,
      ['algorithm_mismatch'],
      'P-384 SEC1 PEM as P-256',
    )
    await expectRefused(
      base({ format: 'DER', keyMaterial: b64(f.pkcs8Der) }),
      400,
      ['algorithm_mismatch'],
      'P-384 DER as P-256',
    )
    await expectRefused(
      base({ algorithm: 'EC-P521', format: 'JWK', keyMaterial: f.jwk as Record<string, unknown> }),
      400,
      ['algorithm_mismatch'],
      'P-384 JWK as P-521',
    )
  })

  test('an ML-DSA-44 seed of the wrong length is 400 key_size_mismatch', async () => {
    for (const length of [31, 33, 64]) {
      await expectRefused(
        base({ algorithm: 'ML-DSA-44', format: 'RAW', keyMaterial: b64(randomBytes(length)) }),
        400,
        ['key_size_mismatch'],
        `ML-DSA-44 seed of ${length} bytes`,
      )
    }
    await expectRefused(
      base({
        keyType: 'Encryption',
        algorithm: 'ML-KEM-768',
        format: 'RAW',
        keyMaterial: b64(randomBytes(32)),
      }),
      400,
      ['key_size_mismatch'],
      'ML-KEM-768 seed of 32 bytes',
    )
  })

  test('an ML-KEM-768 JWK declared as ML-KEM-512 is 400 algorithm_mismatch', async () => {
    const seed = randomBytes(64)
    const { publicKey: pub } = ml_kem768.keygen(seed)
    await expectRefused(
      base({
        keyType: 'Encryption',
        algorithm: 'ML-KEM-512',
        format: 'JWK',
        keyMaterial: { kty: 'AKP', alg: 'ML-KEM-768', priv: b64url(seed), pub: b64url(pub) },
      }),
      400,
      ['algorithm_mismatch'],
      'ML-KEM-768 JWK as ML-KEM-512',
    )
  })

  test('a public key is 400 private_key_required', async () => {
    const f = fixture('p256')
    const publicPem = openssl(['pkey', '-pubout'], f.pkcs8Pem).toString()
    assert.match(publicPem, /^-----BEGIN PUBLIC KEY-----/)
    await expectRefused(
      base({ format: 'PEM', keyMaterial: publicPem }),
      400,
      ['private_key_required'],
      'public PEM',
    )
    await expectRefused(
      base({ format: 'PKCS#8', keyMaterial: publicPem }),
      400,
      ['private_key_required'],
      'public PEM as PKCS#8',
    )
    const { d: _d, ...publicJwk } = f.jwk
    await expectRefused(
      base({ format: 'JWK', keyMaterial: publicJwk as Record<string, unknown> }),
      400,
      ['private_key_required'],
      'public JWK',
    )
  })

  test('encrypted PKCS#8 without its password is 400 password_required', async () => {
    const f = fixture('rsa-sig')
    const rsa = { keyType: 'Signing', algorithm: 'RSA-2048' } as const
    await expectRefused(
      base({ ...rsa, format: 'PEM', keyMaterial: f.encryptedPem }),
      400,
      ['password_required'],
      'encrypted PEM',
    )
    await expectRefused(
      base({ ...rsa, format: 'PKCS#8', keyMaterial: f.encryptedPem }),
      400,
      ['password_required'],
      'encrypted PKCS#8 PEM',
    )
    await expectRefused(
      base({ ...rsa, format: 'PKCS#8', keyMaterial: b64(f.encryptedDer) }),
      400,
      ['password_required'],
      'encrypted PKCS#8 DER',
    )
    await expectRefused(
      base({ ...rsa, format: 'DER', keyMaterial: b64(f.encryptedDer) }),
      400,
      ['password_required'],
      'encrypted DER',
    )
  })

  test('encrypted PKCS#8 with a wrong password is 400 incorrect_password', async () => {
    const rsa = fixture('rsa-enc')
    const ed = fixture('ed25519')
    await expectRefused(
      base({
        keyType: 'Encryption',
        algorithm: 'RSA-2048',
        format: 'PEM',
        keyMaterial: rsa.encryptedPem,
        password: wrongPasswordPem,
      }),
      400,
      ['incorrect_password'],
      'encrypted PEM, wrong password',
    )
    await expectRefused(
      base({
        algorithm: 'Ed25519',
        format: 'DER',
        keyMaterial: b64(ed.encryptedDer),
        password: wrongPasswordDer,
      }),
      400,
      ['incorrect_password'],
      'encrypted DER, wrong password',
    )
    await expectRefused(
      base({
        algorithm: 'Ed25519',
        format: 'PKCS#8',
        keyMaterial: b64(ed.encryptedDer),
        password: wrongPasswordDer,
      }),
      400,
      ['incorrect_password'],
      'encrypted PKCS#8 DER, wrong password',
    )
    // The right password is never among what was refused: it still imports.
    const body = base({
      algorithm: 'Ed25519',
      format: 'DER',
      keyMaterial: b64(ed.encryptedDer),
      password: PASSWORD,
    })
    assertImported(await importKey(body), body, 'encrypted DER, right password')
  })

  test('garbage, non-Base64 and truncated material is 400 invalid_key_material', async () => {
    const f = fixture('rsa-sig')
    const rsa = { keyType: 'Signing', algorithm: 'RSA-2048' } as const
    const garbage = b64(randomBytes(300))
    const cases: [string, ImportBody][] = [
      ['random Base64 as DER', base({ ...rsa, format: 'DER', keyMaterial: garbage })],
      ['random Base64 as PKCS#8', base({ ...rsa, format: 'PKCS#8', keyMaterial: garbage })],
      ['not Base64 as DER', base({ ...rsa, format: 'DER', keyMaterial: 'this is *not* base64 at all!' })],
      ['not Base64 as RAW', base({ algorithm: 'Ed25519', format: 'RAW', keyMaterial: '%%%%not~base64%%%%' })],
      [
        'truncated PKCS#8 DER',
        base({ ...rsa, format: 'DER', keyMaterial: b64(f.pkcs8Der.subarray(0, f.pkcs8Der.length - 40)) }),
      ],
      [
        'truncated PKCS#1 DER',
        base({ ...rsa, format: 'DER', keyMaterial: b64(f.traditionalDer!.subarray(0, 600)) }),
      ],
      [
        'truncated PEM body',
        base({
          ...rsa,
          format: 'PEM',
          keyMaterial: `${f.pkcs8Pem.split('\n').slice(0, 10).join('\n')}\n-----END PRIVATE KEY-----\n`,
        }),
      ],
      ['PEM without armor', base({ ...rsa, format: 'PEM', keyMaterial: b64(f.pkcs8Der) })],
    ]
    for (const [label, body] of cases) await expectRefused(body, 400, ['invalid_key_material'], label)
  })

  test('RAW for an RSA key is 400 format_not_supported', async () => {
    const f = fixture('rsa-enc')
    for (const material of [f.traditionalDer!, f.pkcs8Der]) {
      await expectRefused(
        base({ keyType: 'Encryption', algorithm: 'RSA-2048', format: 'RAW', keyMaterial: b64(material) }),
        400,
        ['format_not_supported'],
        'RSA as RAW',
      )
    }
  })

  test('an HMAC secret shorter than 16 bytes or longer than 1,024 is 400 key_size_mismatch', async () => {
    const hmac = (algorithm: string, overrides: Pick<ImportBody, 'format' | 'keyMaterial'>) =>
      base({ keyType: 'HMAC', algorithm, ...overrides })
    const cases: [string, ImportBody][] = [
      ['15-byte RAW HMAC-SHA256', hmac('HMAC-SHA256', { format: 'RAW', keyMaterial: b64(randomBytes(15)) })],
      [
        '15-byte JWK HMAC-SHA256',
        hmac('HMAC-SHA256', { format: 'JWK', keyMaterial: { kty: 'oct', k: b64url(randomBytes(15)) } }),
      ],
      ['8-byte RAW HMAC-SHA384', hmac('HMAC-SHA384', { format: 'RAW', keyMaterial: b64(randomBytes(8)) })],
      [
        '1,025-byte RAW HMAC-SHA512',
        hmac('HMAC-SHA512', { format: 'RAW', keyMaterial: b64(randomBytes(1025)) }),
      ],
    ]
    for (const [label, body] of cases) await expectRefused(body, 400, ['key_size_mismatch'], label)
  })

  test('an HMAC secret as PEM is 400 format_not_supported', async () => {
    for (const format of ['PEM', 'DER', 'PKCS#8'] as const) {
      await expectRefused(
        base({
          keyType: 'HMAC',
          algorithm: 'HMAC-SHA256',
          format,
          keyMaterial: format === 'PEM' ? fixture('p256').pkcs8Pem : b64(randomBytes(32)),
        }),
        400,
        ['format_not_supported'],
        `HMAC as ${format}`,
      )
    }
  })

  test('keyType Encryption with algorithm Ed25519 is 400 invalid_algorithm', async () => {
    const res = await expectRefused(
      base({
        keyType: 'Encryption',
        algorithm: 'Ed25519',
        format: 'PEM',
        keyMaterial: fixture('ed25519').pkcs8Pem,
      }),
      400,
      ['invalid_algorithm'],
      'Ed25519 for Encryption',
    )
    assert.ok(Array.isArray(res.body.allowedAlgorithms))
    assert.ok(!res.body.allowedAlgorithms.includes('Ed25519'))
    assert.ok(res.body.allowedAlgorithms.includes('RSA-2048'))
  })

  test('an EC JWK whose x/y belong to another key is refused', async () => {
    const own = fixture('p256')
    const other = fixture('p256-b')
    await expectRefused(
      base({ format: 'JWK', keyMaterial: { ...own.jwk, x: other.jwk.x, y: other.jwk.y } }),
      400,
      ['invalid_key_material', 'algorithm_mismatch'],
      'EC JWK with foreign x/y',
    )
  })

  test('an RSA JWK whose modulus belongs to another key is refused', async () => {
    const own = fixture('rsa-sig')
    const other = fixture('rsa-enc')
    await expectRefused(
      base({ algorithm: 'RSA-2048', format: 'JWK', keyMaterial: { ...own.jwk, n: other.jwk.n } }),
      400,
      ['invalid_key_material', 'algorithm_mismatch'],
      'RSA JWK with foreign n',
    )
  })

  test('an Ed25519 JWK whose x belongs to another key is refused', async () => {
    const own = fixture('ed25519')
    const other = fixture('ed25519-b')
    assert.notEqual(own.jwk.x, other.jwk.x)
    await expectRefused(
      base({ algorithm: 'Ed25519', format: 'JWK', keyMaterial: { ...own.jwk, x: other.jwk.x } }),
      400,
      ['invalid_key_material', 'algorithm_mismatch'],
      'Ed25519 JWK with foreign x',
    )
  })

  test('an ML-DSA JWK whose pub belongs to another key is refused', async () => {
    const dsaSeed = randomBytes(32)
    const otherDsa = ml_dsa65.keygen(randomBytes(32)).publicKey
    await expectRefused(
      base({
        algorithm: 'ML-DSA-65',
        format: 'JWK',
        keyMaterial: { kty: 'AKP', alg: 'ML-DSA-65', priv: b64url(dsaSeed), pub: b64url(otherDsa) },
      }),
      400,
      ['invalid_key_material', 'algorithm_mismatch'],
      'ML-DSA-65 JWK with foreign pub',
    )
  })

  test('an ML-KEM JWK whose pub belongs to another key is refused', async () => {
    const kemSeed = randomBytes(64)
    const otherKem = ml_kem768.keygen(randomBytes(64)).publicKey
    await expectRefused(
      base({
        keyType: 'Encryption',
        algorithm: 'ML-KEM-768',
        format: 'JWK',
        keyMaterial: { kty: 'AKP', alg: 'ML-KEM-768', priv: b64url(kemSeed), pub: b64url(otherKem) },
      }),
      400,
      ['invalid_key_material', 'algorithm_mismatch'],
      'ML-KEM-768 JWK with foreign pub',
    )
  })

  // -------------------------------------------------------------------------------------------
  // Names, defaults and the audit trail
  // -------------------------------------------------------------------------------------------

  test('a name already taken is 409 key_name_taken and leaves the first key as it was', async () => {
    const name = uniqueName('taken')
    const first: ImportBody = {
      name,
      keyType: 'Signing',
      algorithm: 'Ed25519',
      format: 'PEM',
      keyMaterial: fixture('ed25519').pkcs8Pem,
    }
    const id = assertImported(await importKey(first), first, 'first import')
    const second = { ...first, keyMaterial: fixture('ed25519-b').pkcs8Pem }
    const res = await expectRefused(second, 409, ['key_name_taken'], 'second import, same name')
    assert.equal(res.body.error, 'key_name_taken')
    const raw = await publicKey(id, 'RAW')
    assert.deepEqual(Buffer.from(raw.body.publicKey, 'base64'), fixture('ed25519').rawPublic)

    const generated = await svc.request('POST', '/api/v1/keys', {
      key: tenant.key,
      body: { name: uniqueName('generated'), keyType: 'HMAC', algorithm: 'HMAC-SHA256' },
    })
    assert.equal(generated.status, 201, generated.text)
    await expectRefused(
      {
        name: generated.body.name,
        keyType: 'HMAC',
        algorithm: 'HMAC-SHA256',
        format: 'RAW',
        keyMaterial: b64(randomBytes(32)),
      },
      409,
      ['key_name_taken'],
      'import over a generated key name',
    )
  })

  test('importing with isDefault true makes the key the default of its type', async () => {
    const owner = await svc.createTenant()
    const generated = await svc.request('POST', '/api/v1/keys', {
      key: owner.key,
      body: { name: 'generated-default', keyType: 'Signing', algorithm: 'Ed25519', isDefault: true },
    })
    assert.equal(generated.status, 201, generated.text)
    assert.equal(generated.body.isDefault, true)

    const body: ImportBody = {
      name: 'imported-default',
      keyType: 'Signing',
      algorithm: 'EC-P384',
      format: 'PEM',
      keyMaterial: fixture('p384').traditionalPem!,
      isDefault: true,
    }
    const res = await importKey(body, owner.key)
    const id = assertImported(res, body, 'default import')
    assert.equal(res.body.isDefault, true)

    const imported = await svc.request('GET', `/api/v1/keys/${id}`, { key: owner.key })
    assert.equal(imported.body.isDefault, true)
    const previous = await svc.request('GET', `/api/v1/keys/${generated.body.id}`, { key: owner.key })
    assert.equal(previous.body.isDefault, false, 'the previous default is cleared')
    const defaults = await svc.sql<{ id: string }[]>`
      SELECT id FROM keys WHERE tenant_id = ${owner.tenantId} AND key_type = 'Signing' AND is_default`
    assert.deepEqual(
      defaults.map((row) => row.id),
      [id],
    )

    // Without isDefault an import does not take the slot.
    const { isDefault: _isDefault, ...rest } = body
    const plain: ImportBody = { ...rest, name: 'imported-plain' }
    const plainRes = await importKey(plain, owner.key)
    assertImported(plainRes, plain, 'plain import')
    assert.equal(plainRes.body.isDefault, false)
    assert.equal((await svc.request('GET', `/api/v1/keys/${id}`, { key: owner.key })).body.isDefault, true)
  })

  test('each import has a successful keys.import audit record that holds no material', async () => {
    const owner = await svc.createTenant()
    const f = fixture('p521')
    const bodies: ImportBody[] = [
      {
        name: 'audited-encrypted',
        keyType: 'Signing',
        algorithm: 'EC-P521',
        format: 'PKCS#8',
        keyMaterial: f.encryptedPem,
        password: PASSWORD,
      },
      {
        name: 'audited-hmac',
        keyType: 'HMAC',
        algorithm: 'HMAC-SHA384',
        format: 'JWK',
        keyMaterial: { kty: 'oct', k: b64url(randomBytes(48)) },
      },
    ]
    const ids: string[] = []
    for (const body of bodies) ids.push(assertImported(await importKey(body, owner.key), body, body.name))
    // A refusal is not a key: it adds no keys.import success record.
    const { password: _password, ...withoutPassword } = bodies[0]!
    const refused = await importKey({ ...withoutPassword, name: 'audited-refused' }, owner.key)
    assert.equal(refused.status, 400, refused.text)

    const res = await svc.request('GET', '/api/v1/audit?action=keys.import&limit=500', { key: owner.key })
    assert.equal(res.status, 200, res.text)
    const records = res.body.data as {
      resource: string
      outcome: string
      keyVersion: number
      action: string
    }[]
    assert.equal(records.filter((r) => r.outcome === 'success').length, bodies.length)
    for (const [i, id] of ids.entries()) {
      const record = records.find((r) => r.resource === `key:${id}`)
      assert.ok(record, `audit record for ${bodies[i]!.name}`)
      assert.equal(record.action, 'keys.import')
      assert.equal(record.outcome, 'success')
      assert.equal(record.keyVersion, 1)
      assertNoEcho(res.text, bodies[i]!, `audit listing of ${bodies[i]!.name}`)
    }
  })

  test('no submitted material or password appears anywhere in the audit log', async () => {
    const own: ImportBody = {
      name: uniqueName('audit-scan'),
      keyType: 'Signing',
      algorithm: 'RSA-2048',
      format: 'DER',
      keyMaterial: b64(fixture('rsa-sig').encryptedDer),
      password: PASSWORD,
    }
    assertImported(await importKey(own), own, 'audit scan import')
    // Every import of this file (main tenant) is audited once, as a success.
    const [imported] = await svc.sql<{ n: number }[]>`
      SELECT count(*)::int AS n FROM keys WHERE tenant_id = ${tenant.tenantId} AND origin = 'Imported'`
    const listing = await svc.request('GET', '/api/v1/audit?action=keys.import&outcome=success&limit=500', {
      key: tenant.key,
    })
    assert.equal(listing.status, 200, listing.text)
    assert.ok(imported!.n > 0)
    assert.equal(listing.body.data.length, imported!.n)

    const rows = await svc.sql<{ text: string }[]>`SELECT row_to_json(a)::text AS text FROM audit_log a`
    const log = rows.map((row) => row.text).join('\n')
    const check = noEchoIn(log)
    for (const [i, body] of submitted.entries()) check(body, `audit log (submission ${i})`)
  })
})
