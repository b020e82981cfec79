import assert from 'node:assert/strict'
import {
  constants,
  createPrivateKey,
  generateKeyPairSync,
  type KeyObject,
  randomBytes,
  sign,
} from 'node:crypto'
import { after, before, describe, test } from 'node:test'
import { ml_dsa44, ml_dsa65, ml_dsa87 } from '@noble/post-quantum/ml-dsa.js'
import { ml_kem512, ml_kem768, ml_kem1024 } from '@noble/post-quantum/ml-kem.js'
import { apiClient, b64, unb64, uniqueName } from '../helpers/api-client.ts'
import { oid, seq, tlv } from '../helpers/der.ts'
import {
  type DekRecovery,
  type Expected,
  fromCompact,
  kemRecovery,
  openEnvelope,
  type Parts,
  type Purpose,
  partsOf,
  rsaOaepRecovery,
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
 * Public-key-only keys (issue 35, item 1; docs/keys.md): a key pair made outside the service
 * (node:crypto, @noble/post-quantum) has its public key imported with `publicOnly: true` in every
 * format that fits (PEM, DER, JWK, RAW); the service gives back the same public key, verifies
 * signatures made outside with the private key (and refuses tampered ones), and encrypts to the
 * key: the envelopes, wrapped keys and data keys it returns are opened here, outside the service,
 * with the private key it never saw (docs/envelope-format.md; noble for ML-KEM, HMAC-SHA256 and
 * AES-256-GCM, node:crypto for RSA-OAEP-SHA256). Everything that needs the private key answers
 * 409 public_key_only; material that does not fit is refused with a stable code and leaves no row.
 */

const IMPORT = '/keys/import'

type Format = 'PEM' | 'DER' | 'JWK' | 'RAW'
type KeyType = 'Signing' | 'Encryption'

interface Variant {
  label: string
  format: Format
  keyMaterial: string | Record<string, unknown>
}

/** A signature made outside the service, and the /verify options that name its scheme. */
interface OutsideSignature {
  label: string
  signature: Buffer
  options: Record<string, unknown>
}

interface Fixture {
  label: string
  algorithm: string
  keyType: KeyType
  /** SPKI DER of the public key, as the outside tool (or the DER writer below) encodes it. */
  spki: Buffer
  /** The RAW public export: the point / key bytes; RSA's PKCS#1 RSAPublicKey. */
  raw: Buffer
  variants: Variant[]
  /** Signing keys: sign outside with the private key. */
  signOutside?: (message: Buffer) => OutsideSignature[]
  /** Encryption keys: how the DEK of an envelope comes back outside, with the private key. */
  opener?: DekRecovery
  /** Encodings of the private key, which must never reach the service's rows. */
  privateBytes: Buffer[]
  /** The private key as PEM (PKCS#8) and as a private JWK: what a caller might send by mistake. */
  privatePem: string
  privateJwk: Record<string, unknown>
}

const derToPem = (der: Buffer, label: string) =>
  `-----BEGIN ${label}-----\n${b64(der).replace(/(.{64})/g, '$1\n')}\n-----END ${label}-----\n`
const pemToDer = (pem: string) =>
  Buffer.from(pem.replace(/-----[A-Z0-9 ]+-----/g, '').replace(/\s+/g, ''), 'base64')

/** SubjectPublicKeyInfo with no algorithm parameters (FIPS 203/204 OIDs, RFC 9881 / 9935 style). */
const spkiOf = (oidHex: string, raw: Uint8Array) =>
  seq(seq(oid(oidHex)), tlv(0x03, Buffer.of(0), Buffer.from(raw)))

/** id-ml-dsa-44/65/87: 2.16.840.1.101.3.4.3.17/18/19; id-alg-ml-kem-512/768/1024: ...4.4.1/2/3. */
const OID = {
  'ML-DSA-44': '608648016503040311',
  'ML-DSA-65': '608648016503040312',
  'ML-DSA-87': '608648016503040313',
  'ML-KEM-512': '608648016503040401',
  'ML-KEM-768': '608648016503040402',
  'ML-KEM-1024': '608648016503040403',
} as const

const flipped = (bytes: Buffer, at = bytes.length >> 1) => {
  const copy = Buffer.from(bytes)
  copy[at]! ^= 0x01
  return copy
}

/** The SEC 1 compressed form of an uncompressed point 0x04 || X || Y. */
function compressed(point: Buffer): Buffer {
  const half = (point.length - 1) / 2
  const y = point.subarray(1 + half)
  return Buffer.concat([Buffer.of(0x02 + (y[y.length - 1]! & 1)), point.subarray(1, 1 + half)])
}

function privateOf(privateKey: KeyObject) {
  const pkcs8 = privateKey.export({ format: 'der', type: 'pkcs8' })
  return {
    privatePem: privateKey.export({ format: 'pem', type: 'pkcs8' }) as string,
    privateJwk: privateKey.export({ format: 'jwk' }) as Record<string, unknown>,
    pkcs8,
  }
}

/** The four formats of a node:crypto public key (RAW as the service exports it). */
function nodeVariants(publicKey: KeyObject, raw: Buffer): Variant[] {
  return [
    {
      label: 'PEM (SPKI)',
      format: 'PEM',
      keyMaterial: publicKey.export({ format: 'pem', type: 'spki' }) as string,
    },
    {
      label: 'DER (SPKI)',
      format: 'DER',
      keyMaterial: b64(publicKey.export({ format: 'der', type: 'spki' })),
    },
    {
      label: 'JWK',
      format: 'JWK',
      keyMaterial: publicKey.export({ format: 'jwk' }) as Record<string, unknown>,
    },
    { label: 'RAW', format: 'RAW', keyMaterial: b64(raw) },
  ]
}

const EC_CURVES = {
  'EC-P256': { curve: 'prime256v1', hash: 'sha256' },
  'EC-P384': { curve: 'secp384r1', hash: 'sha384' },
  'EC-P521': { curve: 'secp521r1', hash: 'sha512' },
} as const

function ecFixture(algorithm: keyof typeof EC_CURVES): Fixture {
  const { curve, hash } = EC_CURVES[algorithm]
  const { publicKey, privateKey } = generateKeyPairSync('ec', { namedCurve: curve })
  const spki = publicKey.export({ format: 'der', type: 'spki' })
  const jwk = publicKey.export({ format: 'jwk' })
  const point = Buffer.concat([
    Buffer.of(0x04),
    Buffer.from(jwk.x!, 'base64url'),
    Buffer.from(jwk.y!, 'base64url'),
  ])
  assert.ok(spki.subarray(spki.length - point.length).equals(point), 'the SPKI ends with the point')
  const priv = privateOf(privateKey)
  return {
    label: algorithm,
    algorithm,
    keyType: 'Signing',
    spki,
    raw: point,
    variants: [
      ...nodeVariants(publicKey, point),
      { label: 'RAW (compressed point)', format: 'RAW', keyMaterial: b64(compressed(point)) },
    ],
    signOutside: (message) => [
      {
        label: 'ECDSA DER',
        signature: sign(hash, message, { key: privateKey, dsaEncoding: 'der' }),
        options: {},
      },
      {
        label: 'ECDSA P1363',
        signature: sign(hash, message, { key: privateKey, dsaEncoding: 'ieee-p1363' }),
        options: { signatureFormat: 'P1363' },
      },
    ],
    privateBytes: [priv.pkcs8, Buffer.from(priv.privateJwk['d'] as string, 'base64url')],
    privatePem: priv.privatePem,
    privateJwk: priv.privateJwk,
  }
}

function ed25519Fixture(): Fixture {
  const { publicKey, privateKey } = generateKeyPairSync('ed25519')
  const spki = publicKey.export({ format: 'der', type: 'spki' })
  const raw = spki.subarray(spki.length - 32)
  const priv = privateOf(privateKey)
  return {
    label: 'Ed25519',
    algorithm: 'Ed25519',
    keyType: 'Signing',
    spki,
    raw,
    variants: nodeVariants(publicKey, raw),
    signOutside: (message) => [{ label: 'Ed25519', signature: sign(null, message, privateKey), options: {} }],
    privateBytes: [priv.pkcs8, Buffer.from(priv.privateJwk['d'] as string, 'base64url')],
    privatePem: priv.privatePem,
    privateJwk: priv.privateJwk,
  }
}

function rsaFixture(bits: 2048 | 3072, keyType: KeyType, allFormats: boolean): Fixture {
  const { publicKey, privateKey } = generateKeyPairSync('rsa', {
    modulusLength: bits,
    publicExponent: 0x10001,
  })
  const spki = publicKey.export({ format: 'der', type: 'spki' })
  const pkcs1 = publicKey.export({ format: 'der', type: 'pkcs1' })
  const priv = privateOf(privateKey)
  const variants: Variant[] = allFormats
    ? [
        ...nodeVariants(publicKey, pkcs1),
        {
          label: 'PEM (RSA PUBLIC KEY)',
          format: 'PEM',
          keyMaterial: publicKey.export({ format: 'pem', type: 'pkcs1' }) as string,
        },
        { label: 'DER (PKCS#1)', format: 'DER', keyMaterial: b64(pkcs1) },
      ]
    : nodeVariants(publicKey, pkcs1).slice(0, 1)
  return {
    label: `RSA-${bits} ${keyType}`,
    algorithm: `RSA-${bits}`,
    keyType,
    spki,
    raw: pkcs1,
    variants,
    ...(keyType === 'Signing'
      ? {
          signOutside: (message: Buffer) => [
            {
              label: 'RSASSA-PSS-SHA256 (salt 32)',
              signature: sign('sha256', message, {
                key: privateKey,
                padding: constants.RSA_PKCS1_PSS_PADDING,
                saltLength: 32,
              }),
              options: { rsaPadding: 'PSS' },
            },
            {
              label: 'RSASSA-PKCS1-v1_5-SHA256',
              signature: sign('sha256', message, { key: privateKey, padding: constants.RSA_PKCS1_PADDING }),
              options: { rsaPadding: 'PKCS1' },
            },
          ],
        }
      : { opener: rsaOaepRecovery(privateKey, bits / 8) }),
    privateBytes: [
      priv.pkcs8,
      Buffer.from(priv.privateJwk['d'] as string, 'base64url'),
      Buffer.from(priv.privateJwk['p'] as string, 'base64url'),
    ],
    privatePem: priv.privatePem,
    privateJwk: priv.privateJwk,
  }
}

/** The AKP JWK of a post-quantum public key (draft-ietf-cose-dilithium / -kyber). */
const akp = (alg: string, raw: Uint8Array) => ({
  kty: 'AKP',
  alg,
  pub: Buffer.from(raw).toString('base64url'),
})

function pqVariants(algorithm: keyof typeof OID, raw: Uint8Array): { spki: Buffer; variants: Variant[] } {
  const spki = spkiOf(OID[algorithm], raw)
  return {
    spki,
    variants: [
      { label: 'PEM (SPKI)', format: 'PEM', keyMaterial: derToPem(spki, 'PUBLIC KEY') },
      { label: 'DER (SPKI)', format: 'DER', keyMaterial: b64(spki) },
      { label: 'JWK (AKP)', format: 'JWK', keyMaterial: akp(algorithm, raw) },
      { label: 'RAW', format: 'RAW', keyMaterial: b64(raw) },
    ],
  }
}

const ML_DSA = { 'ML-DSA-44': ml_dsa44, 'ML-DSA-65': ml_dsa65, 'ML-DSA-87': ml_dsa87 } as const

/** An ML-DSA key pair from noble: the service never sees the noble secret key. */
function mlDsaFixture(algorithm: keyof typeof ML_DSA): Fixture {
  const lib = ML_DSA[algorithm]
  const { publicKey, secretKey } = lib.keygen(randomBytes(32))
  const { spki, variants } = pqVariants(algorithm, publicKey)
  return {
    label: algorithm,
    algorithm,
    keyType: 'Signing',
    spki,
    raw: Buffer.from(publicKey),
    variants,
    signOutside: (message) => {
      const signature = Buffer.from(lib.sign(message, secretKey))
      assert.ok(lib.verify(signature, message, publicKey), 'noble verifies its own signature')
      return [{ label: 'ML-DSA (pure, empty context)', signature, options: {} }]
    },
    // FIPS 204 sk = rho || K || tr || ...: rho is also the public key's start, K onwards is private.
    privateBytes: [Buffer.from(secretKey.subarray(32))],
    // noble's keys as a caller would send them by mistake: node:crypto's private key of the same kind.
    ...(() => {
      const other = privateOf(generateKeyPairSync(algorithm.toLowerCase() as 'ml-dsa-44').privateKey)
      return { privatePem: other.privatePem, privateJwk: other.privateJwk }
    })(),
  }
}

function slhDsaFixture(): Fixture {
  const { publicKey, privateKey } = generateKeyPairSync('slh-dsa-sha2-128s' as 'ed25519')
  const spki = publicKey.export({ format: 'der', type: 'spki' })
  const raw = spki.subarray(spki.length - 32)
  const priv = privateOf(privateKey)
  return {
    label: 'SLH-DSA-128s',
    algorithm: 'SLH-DSA-128s',
    keyType: 'Signing',
    spki,
    raw,
    variants: nodeVariants(publicKey, raw),
    signOutside: (message) => [
      { label: 'SLH-DSA (pure)', signature: sign(null, message, privateKey), options: {} },
    ],
    privateBytes: [priv.pkcs8],
    privatePem: priv.privatePem,
    privateJwk: priv.privateJwk,
  }
}

const ML_KEM = { 'ML-KEM-512': ml_kem512, 'ML-KEM-768': ml_kem768, 'ML-KEM-1024': ml_kem1024 } as const
const ML_KEM_CIPHERTEXT_BYTES = { 'ML-KEM-512': 768, 'ML-KEM-768': 1088, 'ML-KEM-1024': 1568 } as const

/** An ML-KEM key pair from noble: decapsulation outside the service, with noble's secret key. */
function mlKemFixture(algorithm: keyof typeof ML_KEM): Fixture {
  const lib = ML_KEM[algorithm]
  const { publicKey, secretKey } = lib.keygen(randomBytes(64))
  const { spki, variants } = pqVariants(algorithm, publicKey)
  const other = privateOf(generateKeyPairSync(algorithm.toLowerCase() as 'ml-kem-512' as never).privateKey)
  return {
    label: algorithm,
    algorithm,
    keyType: 'Encryption',
    spki,
    raw: Buffer.from(publicKey),
    variants,
    opener: kemRecovery(
      SCHEMES.mlKem,
      (cipherText) => lib.decapsulate(cipherText, secretKey),
      ML_KEM_CIPHERTEXT_BYTES[algorithm],
    ),
    privateBytes: [Buffer.from(secretKey)],
    privatePem: other.privatePem,
    privateJwk: other.privateJwk,
  }
}

// ---- Opening envelopes outside the service (docs/envelope-format.md) ------------------------

/** The plaintext of an envelope sealed to `expected`, opened with the private key (envelope-parts.ts). */
const openOutside = (
  parts: Parts,
  purpose: Purpose,
  context: string,
  opener: DekRecovery,
  expected: Expected,
) => openEnvelope(parts, opener, { purpose, context, expected })

describe('public-key-only keys', () => {
  let svc: TestService
  let tenant: TenantWithKey
  const fixtures: Fixture[] = []
  /** One key per fixture (its first variant), for the refusal and audit tests. */
  const firstKeys = new Map<string, { id: string; name: string }>()

  before(async () => {
    svc = await startTestService()
    tenant = await svc.createTenant()
    fixtures.push(
      ecFixture('EC-P256'),
      ecFixture('EC-P384'),
      ecFixture('EC-P521'),
      ed25519Fixture(),
      rsaFixture(2048, 'Signing', true),
      rsaFixture(2048, 'Encryption', true),
      rsaFixture(3072, 'Encryption', false),
      mlDsaFixture('ML-DSA-44'),
      mlDsaFixture('ML-DSA-65'),
      mlDsaFixture('ML-DSA-87'),
      slhDsaFixture(),
      mlKemFixture('ML-KEM-512'),
      mlKemFixture('ML-KEM-768'),
      mlKemFixture('ML-KEM-1024'),
    )
  })

  after(async () => {
    await svc?.stop()
  })

  const { call } = apiClient(() => ({ svc, tenant }))
  const fixture = (label: string) => {
    const found = fixtures.find((f) => f.label === label)
    assert.ok(found, label)
    return found
  }

  async function countRows(): Promise<{ keys: number; versions: number }> {
    const [row] = await svc.sql<{ keys: number; versions: number }[]>`
      SELECT (SELECT count(*)::int FROM keys WHERE tenant_id = ${tenant.tenantId}) AS keys,
             (SELECT count(*)::int FROM key_versions WHERE tenant_id = ${tenant.tenantId}) AS versions`
    return row!
  }

  const importBody = (f: { algorithm: string; keyType: string }, v: Omit<Variant, 'label'>, extra = {}) => ({
    name: uniqueName(`po-${f.algorithm.toLowerCase()}`),
    keyType: f.keyType,
    algorithm: f.algorithm,
    format: v.format,
    keyMaterial: v.keyMaterial,
    publicOnly: true,
    ...extra,
  })

  /** Imports one variant public-only and checks the view; the key's id and name. */
  async function importPublic(f: Fixture, v: Variant, extra: Record<string, unknown> = {}) {
    const body = importBody(f, v, extra)
    const res = await call('POST', IMPORT, body)
    const what = `${f.label} ${v.label}`
    assert.equal(res.status, 201, `${what}: ${res.text}`)
    assert.equal(res.body.publicOnly, true, `${what}: the view says publicOnly`)
    assert.equal(res.body.origin, 'Imported', what)
    assert.equal(res.body.algorithm, f.algorithm, what)
    assert.equal(res.body.keyType, f.keyType, what)
    assert.equal(res.body.state, 'Active', what)
    assert.equal(res.body.version, 1, what)
    return { id: res.body.id as string, name: body.name }
  }

  async function publicExport(keyId: string, format: Format): Promise<HttpResult> {
    const res = await call('GET', `/keys/${keyId}/public?format=${format}`)
    assert.equal(res.status, 200, res.text)
    return res
  }

  /** The service's PEM, DER and RAW exports are the outside key's bytes. */
  async function assertSamePublicKey(keyId: string, f: Fixture, what: string) {
    const [pem, der, raw] = await Promise.all([
      publicExport(keyId, 'PEM'),
      publicExport(keyId, 'DER'),
      publicExport(keyId, 'RAW'),
    ])
    assert.match(pem.body.publicKey, /^-----BEGIN PUBLIC KEY-----/, what)
    assert.ok(pemToDer(pem.body.publicKey).equals(f.spki), `${what}: PEM export is the outside SPKI`)
    assert.ok(unb64(der.body.publicKey).equals(f.spki), `${what}: DER export is the outside SPKI`)
    assert.ok(unb64(raw.body.publicKey).equals(f.raw), `${what}: RAW export is the outside public key`)
  }

  const verify = (keyId: string, message: Buffer, signature: Buffer, options: Record<string, unknown>) =>
    call('POST', '/verify', { keyId, message: b64(message), signature: b64(signature), ...options })

  async function assertVerdict(res: HttpResult, valid: boolean, keyId: string, what: string) {
    assert.equal(res.status, 200, `${what}: ${res.text}`)
    assert.equal(res.body.valid, valid, `${what}: valid should be ${valid}`)
    assert.equal(res.body.keyId, keyId, what)
    assert.equal(res.body.keyVersion, 1, what)
  }

  function assertRefused(res: HttpResult, status: number, code: string, what: string) {
    assert.equal(res.status, status, `${what}: ${res.text}`)
    assert.equal(res.body?.error, code, `${what}: ${res.text}`)
    assert.equal(typeof res.body.message, 'string', what)
  }

  // -------------------------------------------------------------------------------------------
  // Imported in every format; the same public key back; outside signatures verify
  // -------------------------------------------------------------------------------------------

  const SIGNING = [
    'EC-P256',
    'EC-P384',
    'EC-P521',
    'Ed25519',
    'RSA-2048 Signing',
    'ML-DSA-44',
    'ML-DSA-65',
    'ML-DSA-87',
    'SLH-DSA-128s',
  ]
  for (const label of SIGNING) {
    test(`${label}: the public key imported in every format verifies signatures made outside, not tampered ones`, async () => {
      const f = fixture(label)
      const expectedFormats = label.startsWith('RSA') ? 6 : label.startsWith('EC') ? 5 : 4
      assert.equal(f.variants.length, expectedFormats, 'every format that fits the key is exercised')
      const message = Buffer.from(`signed outside the service: ${label} ${randomBytes(8).toString('hex')}`)
      const signatures = f.signOutside!(message)
      const other = Buffer.from(`${message.toString()}!`)
      const ids = await Promise.all(
        f.variants.map(async (v) => {
          const what = `${label} ${v.label}`
          const key = await importPublic(f, v)
          if (!firstKeys.has(label)) firstKeys.set(label, key)
          await assertSamePublicKey(key.id, f, what)
          for (const s of signatures) {
            await assertVerdict(
              await verify(key.id, message, s.signature, s.options),
              true,
              key.id,
              `${what} ${s.label}`,
            )
            await assertVerdict(
              await verify(key.id, message, flipped(s.signature), s.options),
              false,
              key.id,
              `${what} ${s.label}, one bit of the signature flipped`,
            )
            await assertVerdict(
              await verify(key.id, other, s.signature, s.options),
              false,
              key.id,
              `${what} ${s.label}, another message`,
            )
          }
          return key.id
        }),
      )
      assert.equal(new Set(ids).size, f.variants.length)
      // The JWK export agrees with the outside key's JWK members.
      const jwk = (await publicExport(ids[0]!, 'JWK')).body
      const given = f.variants.find((v) => v.format === 'JWK')!.keyMaterial as Record<string, unknown>
      for (const member of ['kty', 'crv', 'x', 'y', 'n', 'e', 'pub'] as const) {
        assert.equal(jwk[member], given[member], `${label}: JWK ${member}`)
      }
      assert.equal(jwk.d, undefined)
      assert.equal(jwk.priv, undefined)
    })
  }

  // -------------------------------------------------------------------------------------------
  // Encryption to a public-only key, opened outside with the private key
  // -------------------------------------------------------------------------------------------

  const ENCRYPTION = ['RSA-2048 Encryption', 'RSA-3072 Encryption', 'ML-KEM-512', 'ML-KEM-768', 'ML-KEM-1024']
  for (const label of ENCRYPTION) {
    test(`${label}: /encrypt, wrap and data keys to the public-only key open outside with the private key`, async () => {
      const f = fixture(label)
      const opener = f.opener!
      const expectedFormats = label === 'RSA-2048 Encryption' ? 6 : label.startsWith('RSA') ? 1 : 4
      assert.equal(f.variants.length, expectedFormats, 'every format that fits the key is exercised')
      await Promise.all(
        f.variants.map(async (v) => {
          const what = `${label} ${v.label}`
          const key = await importPublic(f, v)
          if (!firstKeys.has(label)) firstKeys.set(label, key)
          await assertSamePublicKey(key.id, f, what)
          const plaintext = randomBytes(100)
          const context = `order=${randomBytes(4).toString('hex')}`
          const res = await call('POST', '/encrypt', { keyId: key.id, plaintext: b64(plaintext), context })
          assert.equal(res.status, 200, `${what}: ${res.text}`)
          assert.equal(res.body.keyId, key.id)
          assert.equal(res.body.keyVersion, 1)
          const parts = partsOf(res.body)
          const expected = { keyId: key.id, keyVersion: 1 }
          assert.ok(
            openOutside(parts, 'encrypt', context, opener, expected).equals(plaintext),
            `${what}: opens outside`,
          )
          // The context is bound: the same envelope does not open outside under another one.
          assert.throws(
            () => openOutside(parts, 'encrypt', `${context}x`, opener, expected),
            `${what}: wrong context`,
          )
        }),
      )

      const key = firstKeys.get(label)!
      const expected = { keyId: key.id, keyVersion: 1 }
      // Wrap: a compact envelope with the wrap label.
      const material = randomBytes(48)
      const wrapped = await call('POST', `/keys/${key.id}/wrap`, {
        plaintext: b64(material),
        context: 'bucket=a',
      })
      assert.equal(wrapped.status, 200, wrapped.text)
      const wrappedParts = fromCompact(unb64(wrapped.body.wrappedKey))
      assert.ok(
        openOutside(wrappedParts, 'wrap', 'bucket=a', opener, expected).equals(material),
        'wrap opens outside',
      )
      assert.throws(
        () => openOutside(wrappedParts, 'encrypt', 'bucket=a', opener, expected),
        'the wrap label binds',
      )

      // Data keys (per-key and the generic endpoint): encryptedDek opens outside to plaintextDek.
      const dataKey = await call('POST', `/keys/${key.id}/data-key`, { keyBytes: 24, context: 'bucket=b' })
      assert.equal(dataKey.status, 200, dataKey.text)
      const dek = unb64(dataKey.body.plaintextDek)
      assert.equal(dek.length, 24)
      assert.ok(
        openOutside(
          fromCompact(unb64(dataKey.body.encryptedDek)),
          'wrap',
          'bucket=b',
          opener,
          expected,
        ).equals(dek),
        'the per-key data key opens outside',
      )
      const generic = await call('POST', '/generate-data-key', { keyId: key.id })
      assert.equal(generic.status, 200, generic.text)
      assert.ok(
        openOutside(fromCompact(unb64(generic.body.encryptedDek)), 'wrap', '', opener, expected).equals(
          unb64(generic.body.plaintextDek),
        ),
        'generate-data-key opens outside',
      )

      // Batches seal to the public key too.
      const items = [randomBytes(10), randomBytes(20)]
      const batch = await call('POST', '/encrypt/batch', {
        items: items.map((p) => ({ keyId: key.id, plaintext: b64(p), context: 'batch' })),
      })
      assert.equal(batch.status, 200, batch.text)
      for (const [i, result] of (batch.body.results as Record<string, string>[]).entries()) {
        assert.equal(result['ok'], true, JSON.stringify(result))
        assert.ok(
          openOutside(partsOf(result), 'encrypt', 'batch', opener, expected).equals(items[i]!),
          `batch item ${i}`,
        )
      }
    })
  }

  // -------------------------------------------------------------------------------------------
  // What needs the private key: 409 public_key_only
  // -------------------------------------------------------------------------------------------

  /** The refusals common to every public-only key: export, rotation, rotation policy. */
  async function assertKeyLifecycleRefused(key: { id: string; name: string }, what: string) {
    const exported = await call('POST', `/keys/${key.id}/export-private`, {
      confirm: key.name,
      format: 'PEM',
    })
    assertRefused(exported, 409, 'public_key_only', `${what}: export-private`)
    assert.doesNotMatch(exported.text, /PRIVATE KEY/)
    assertRefused(await call('POST', `/keys/${key.id}/rotate`), 409, 'public_key_only', `${what}: rotate`)
    assertRefused(
      await call('POST', `/keys/${key.id}/rotation-policy`, { frequency: 'Daily' }),
      409,
      'public_key_only',
      `${what}: rotation policy`,
    )
    // Nothing changed: still one version, no policy.
    const view = await call('GET', `/keys/${key.id}`)
    assert.equal(view.status, 200, view.text)
    assert.equal(view.body.version, 1, `${what}: no version was added`)
    assert.equal(view.body.publicOnly, true)
    const versions = await svc.sql<{ version: number; sealed: boolean; public_key: Buffer | null }[]>`
      SELECT version, sealed_material IS NOT NULL AS sealed, public_key FROM key_versions WHERE key_id = ${key.id}`
    assert.deepEqual(
      versions.map((v) => [v.version, v.sealed]),
      [[1, false]],
      `${what}: one version, with no sealed material`,
    )
    assert.equal((await call('GET', `/keys/${key.id}/rotation-policy`)).status, 404, `${what}: no policy`)
  }

  test('signing keys: /sign, private export, rotation and rotation policies answer 409 public_key_only', async () => {
    for (const label of SIGNING) {
      const f = fixture(label)
      const key = firstKeys.get(label) ?? (await importPublic(f, f.variants[0]!))
      const signed = await call('POST', '/sign', { keyId: key.id, message: b64('a message') })
      assertRefused(signed, 409, 'public_key_only', `${label}: sign`)
      assert.equal(signed.body.signature, undefined)
      await assertKeyLifecycleRefused(key, label)
    }
  })

  test('an exportable public-only key still has no private key to export (409 public_key_only)', async () => {
    const f = fixture('EC-P256')
    const key = await importPublic(f, f.variants[0]!, { exportable: true })
    const res = await call('POST', `/keys/${key.id}/export-private`, { confirm: key.name, format: 'JWK' })
    assertRefused(res, 409, 'public_key_only', 'exportable public-only key')
    assert.equal(res.body.privateKey, undefined)
  })

  test('encryption keys: /decrypt, unwrap, data-key unwrap, batch decrypt, export and rotation answer 409 public_key_only', async () => {
    for (const label of ENCRYPTION) {
      const f = fixture(label)
      const key = firstKeys.get(label) ?? (await importPublic(f, f.variants[0]!))
      const enc = await call('POST', '/encrypt', { keyId: key.id, plaintext: b64('secret'), context: 'c' })
      assert.equal(enc.status, 200, enc.text)
      const envelope = {
        ciphertext: enc.body.ciphertext,
        encapsulatedKey: enc.body.encapsulatedKey,
        nonce: enc.body.nonce,
        tag: enc.body.tag,
        context: 'c',
      }
      const decrypted = await call('POST', '/decrypt', envelope)
      assertRefused(decrypted, 409, 'public_key_only', `${label}: decrypt`)
      assert.equal(decrypted.body.plaintext, undefined)
      assertRefused(
        await call('POST', '/decrypt', { ...envelope, keyId: key.id }),
        409,
        'public_key_only',
        `${label}: decrypt naming the key`,
      )

      const batch = await call('POST', '/decrypt/batch', { items: [envelope] })
      assert.equal(batch.status, 200, batch.text)
      assert.equal(batch.body.results[0].ok, false, batch.text)
      assert.equal(batch.body.results[0].error, 'public_key_only', batch.text)

      const wrapped = await call('POST', `/keys/${key.id}/wrap`, { plaintext: b64(randomBytes(32)) })
      assert.equal(wrapped.status, 200, wrapped.text)
      assertRefused(
        await call('POST', `/keys/${key.id}/unwrap`, { wrappedKey: wrapped.body.wrappedKey }),
        409,
        'public_key_only',
        `${label}: unwrap`,
      )
      const dataKey = await call('POST', `/keys/${key.id}/data-key`, { withPlaintext: false })
      assert.equal(dataKey.status, 200, dataKey.text)
      assert.equal(dataKey.body.plaintextDek, undefined)
      assertRefused(
        await call('POST', `/keys/${key.id}/unwrap`, { encryptedDek: dataKey.body.encryptedDek }),
        409,
        'public_key_only',
        `${label}: data-key unwrap`,
      )
      await assertKeyLifecycleRefused(key, label)
    }
  })

  test('a key imported with its private key is not publicOnly, and signs', async () => {
    const f = fixture('Ed25519')
    const res = await call('POST', IMPORT, {
      name: uniqueName('po-private'),
      keyType: 'Signing',
      algorithm: 'Ed25519',
      format: 'PEM',
      keyMaterial: f.privatePem,
    })
    assert.equal(res.status, 201, res.text)
    assert.equal(res.body.publicOnly, false)
    const signed = await call('POST', '/sign', { keyId: res.body.id, message: b64('m') })
    assert.equal(signed.status, 200, signed.text)
    const generated = await call('POST', '/keys', {
      name: uniqueName('po-gen'),
      keyType: 'Signing',
      algorithm: 'EC-P256',
    })
    assert.equal(generated.status, 201, generated.text)
    assert.equal(generated.body.publicOnly, false)
    const listed = await call('GET', `/keys/${generated.body.id}`)
    assert.equal(listed.body.publicOnly, false)
  })

  // -------------------------------------------------------------------------------------------
  // Material that does not fit: 400, no row
  // -------------------------------------------------------------------------------------------

  async function expectImportRefused(body: Record<string, unknown>, code: string, what: string) {
    const before = await countRows()
    const res = await call('POST', IMPORT, body)
    assertRefused(res, 400, code, what)
    assert.deepEqual(await countRows(), before, `${what}: a refused import wrote a row`)
    return res
  }

  test('a private key sent with publicOnly: 400 public_key_expected', async () => {
    for (const label of ['EC-P256', 'Ed25519', 'RSA-2048 Signing', 'ML-DSA-44', 'ML-KEM-768']) {
      const f = fixture(label)
      await expectImportRefused(
        importBody(f, { format: 'PEM', keyMaterial: f.privatePem }),
        'public_key_expected',
        `${label}: private PEM`,
      )
      await expectImportRefused(
        importBody(f, { format: 'JWK', keyMaterial: f.privateJwk }),
        'public_key_expected',
        `${label}: private JWK`,
      )
      await expectImportRefused(
        importBody(f, { format: 'DER', keyMaterial: b64(pemToDer(f.privatePem)) }),
        'public_key_expected',
        `${label}: private DER (PKCS#8)`,
      )
    }
    // The traditional private encodings, as DER (and RSA's as RAW, which is PKCS#1 for RSA).
    const ec = fixture('EC-P256')
    const sec1 = createPrivateKey(ec.privatePem).export({ format: 'der', type: 'sec1' })
    await expectImportRefused(
      importBody(ec, { format: 'DER', keyMaterial: b64(sec1) }),
      'public_key_expected',
      'EC-P256: private DER (SEC 1)',
    )
    // Encrypted PKCS#8: the PEM label says private; the DER cannot be read without its password.
    const passphrase = 'a-password-of-some-length'
    const encryptedPem = createPrivateKey(ec.privatePem).export({
      format: 'pem',
      type: 'pkcs8',
      cipher: 'aes-256-cbc',
      passphrase,
    }) as string
    await expectImportRefused(
      importBody(ec, { format: 'PEM', keyMaterial: encryptedPem }),
      'public_key_expected',
      'EC-P256: encrypted private PEM',
    )
    await expectImportRefused(
      importBody(ec, { format: 'DER', keyMaterial: b64(pemToDer(encryptedPem)) }),
      'invalid_key_material',
      'EC-P256: encrypted private DER',
    )
    const rsa = fixture('RSA-2048 Signing')
    const pkcs1 = createPrivateKey(rsa.privatePem).export({ format: 'der', type: 'pkcs1' })
    for (const format of ['DER', 'RAW'] as const) {
      await expectImportRefused(
        importBody(rsa, { format, keyMaterial: b64(pkcs1) }),
        'public_key_expected',
        `RSA-2048: private ${format} (PKCS#1 RSAPrivateKey)`,
      )
    }
  })

  test('a public key sent without publicOnly: 400 private_key_required', async () => {
    for (const label of ['EC-P384', 'Ed25519', 'RSA-2048 Encryption', 'ML-DSA-65', 'ML-KEM-512']) {
      const f = fixture(label)
      for (const format of ['PEM', 'DER', 'JWK'] as const) {
        const v = f.variants.find((x) => x.format === format)!
        const body = importBody(f, v, { publicOnly: false })
        await expectImportRefused(body, 'private_key_required', `${label} ${format}, publicOnly false`)
        const { publicOnly: _, ...absent } = body
        await expectImportRefused(absent, 'private_key_required', `${label} ${format}, publicOnly absent`)
      }
    }
  })

  test('a public key of another algorithm than declared: 400', async () => {
    const p384 = fixture('EC-P384')
    const p256 = { algorithm: 'EC-P256', keyType: 'Signing' }
    for (const format of ['PEM', 'DER', 'JWK'] as const) {
      const v = p384.variants.find((x) => x.format === format)!
      await expectImportRefused(importBody(p256, v), 'algorithm_mismatch', `P-384 ${format} declared EC-P256`)
    }
    // A P-384 point is not a P-256 point's length.
    await expectImportRefused(
      importBody(p256, { format: 'RAW', keyMaterial: b64(p384.raw) }),
      'key_size_mismatch',
      'P-384 RAW declared EC-P256',
    )
    const mlDsa44 = fixture('ML-DSA-44')
    const as65 = { algorithm: 'ML-DSA-65', keyType: 'Signing' }
    for (const format of ['PEM', 'DER', 'JWK'] as const) {
      const v = mlDsa44.variants.find((x) => x.format === format)!
      await expectImportRefused(
        importBody(as65, v),
        'algorithm_mismatch',
        `ML-DSA-44 ${format} declared ML-DSA-65`,
      )
    }
    await expectImportRefused(
      importBody(as65, { format: 'RAW', keyMaterial: b64(mlDsa44.raw) }),
      'key_size_mismatch',
      'ML-DSA-44 RAW declared ML-DSA-65',
    )
    // Other families: Ed25519 as EC-P256, ML-KEM-768 as ML-KEM-512, RSA-2048 as RSA-3072.
    const ed = fixture('Ed25519').variants[0]!
    await expectImportRefused(importBody(p256, ed), 'algorithm_mismatch', 'Ed25519 declared EC-P256')
    const kem = fixture('ML-KEM-768').variants[0]!
    await expectImportRefused(
      importBody({ algorithm: 'ML-KEM-512', keyType: 'Encryption' }, kem),
      'algorithm_mismatch',
      'ML-KEM-768 declared ML-KEM-512',
    )
    const rsa = fixture('RSA-2048 Encryption').variants[0]!
    await expectImportRefused(
      importBody({ algorithm: 'RSA-3072', keyType: 'Encryption' }, rsa),
      'key_size_mismatch',
      'RSA-2048 declared RSA-3072',
    )
  })

  test('RAW public keys of the wrong length: 400 key_size_mismatch', async () => {
    const cases: [string, Buffer][] = []
    for (const label of [
      'Ed25519',
      'ML-DSA-44',
      'ML-DSA-87',
      'SLH-DSA-128s',
      'ML-KEM-512',
      'ML-KEM-1024',
      'EC-P256',
      'EC-P521',
    ]) {
      const raw = fixture(label).raw
      cases.push([`${label} one byte short`, raw.subarray(0, raw.length - 1)])
      cases.push([`${label} one byte long`, Buffer.concat([raw, Buffer.of(0)])])
    }
    for (const [what, bytes] of cases) {
      const label = what.split(' ')[0]!
      const f = fixture(label)
      await expectImportRefused(
        importBody(f, { format: 'RAW', keyMaterial: b64(bytes) }),
        'key_size_mismatch',
        what,
      )
    }
  })

  test('an ML-KEM encapsulation key with a coefficient of q or more: 400 (FIPS 203 §7.2)', async () => {
    for (const label of ['ML-KEM-512', 'ML-KEM-768', 'ML-KEM-1024'] as const) {
      const f = fixture(label)
      // The first coefficient is the low 12 bits of bytes 0..1 (ByteEncode12): 0xfff = 4095 ≥ 3329.
      for (const value of [3329, 4095]) {
        const bad = Buffer.from(f.raw)
        bad[0] = value & 0xff
        bad[1] = (bad[1]! & 0xf0) | (value >> 8)
        // Sanity, outside the service: noble refuses the same key (its modulus check).
        assert.throws(() => ML_KEM[label].encapsulate(bad), `${label}: noble refuses coefficient ${value}`)
        await expectImportRefused(
          importBody(f, { format: 'RAW', keyMaterial: b64(bad) }),
          'invalid_key_material',
          `${label} RAW, coefficient ${value}`,
        )
        const spki = spkiOf(OID[label], bad)
        await expectImportRefused(
          importBody(f, { format: 'DER', keyMaterial: b64(spki) }),
          'invalid_key_material',
          `${label} DER, coefficient ${value}`,
        )
        await expectImportRefused(
          importBody(f, { format: 'JWK', keyMaterial: akp(label, bad) }),
          'invalid_key_material',
          `${label} JWK, coefficient ${value}`,
        )
      }
      // The largest valid coefficient, q - 1, is accepted: the check is not stricter than FIPS 203.
      const edge = Buffer.from(f.raw)
      edge[0] = 3328 & 0xff
      edge[1] = (edge[1]! & 0xf0) | (3328 >> 8)
      const res = await call('POST', IMPORT, importBody(f, { format: 'RAW', keyMaterial: b64(edge) }))
      assert.equal(res.status, 201, `${label}: coefficient q - 1: ${res.text}`)
    }
  })

  test('an EC point not on its curve: 400 invalid_key_material', async () => {
    const f = fixture('EC-P256')
    const off = Buffer.from(f.raw)
    off[off.length - 1]! ^= 0x01
    await expectImportRefused(
      importBody(f, { format: 'RAW', keyMaterial: b64(off) }),
      'invalid_key_material',
      'RAW off the curve',
    )
    const jwk = { ...(f.variants.find((v) => v.format === 'JWK')!.keyMaterial as Record<string, unknown>) }
    jwk['y'] = off.subarray(33).toString('base64url')
    await expectImportRefused(
      importBody(f, { format: 'JWK', keyMaterial: jwk }),
      'invalid_key_material',
      'JWK off the curve',
    )
  })

  test('a symmetric algorithm with publicOnly: 400 no_public_key', async () => {
    for (const [algorithm, keyType, bytes] of [
      ['HMAC-SHA256', 'HMAC', 32],
      ['AES-256-GCM', 'Encryption', 32],
      ['AES-128-GCM', 'Encryption', 16],
    ] as const) {
      const secret = randomBytes(bytes)
      await expectImportRefused(
        importBody({ algorithm, keyType }, { format: 'RAW', keyMaterial: b64(secret) }),
        'no_public_key',
        `${algorithm} RAW`,
      )
      await expectImportRefused(
        importBody(
          { algorithm, keyType },
          { format: 'JWK', keyMaterial: { kty: 'oct', k: secret.toString('base64url') } },
        ),
        'no_public_key',
        `${algorithm} JWK`,
      )
    }
  })

  test('PKCS#8 is not a public key format: 400', async () => {
    const f = fixture('EC-P256')
    await expectImportRefused(
      importBody(f, { format: 'PKCS#8' as Format, keyMaterial: f.variants[0]!.keyMaterial }),
      'format_not_supported',
      'PKCS#8 with publicOnly',
    )
  })

  // -------------------------------------------------------------------------------------------
  // Audit and storage
  // -------------------------------------------------------------------------------------------

  test('the import record says publicOnly; no private material is stored, echoed or audited', async () => {
    const f = fixture('ML-KEM-768')
    const key = await importPublic(f, f.variants[0]!)
    const audit = await call(
      'GET',
      `/audit?${new URLSearchParams({ action: 'keys.import', resource: `key:${key.id}` })}`,
    )
    assert.equal(audit.status, 200, audit.text)
    const records = audit.body.data as AuditView[]
    assert.equal(records.length, 1, audit.text)
    assert.equal(records[0]!.outcome, 'success')
    assert.equal(records[0]!.details?.['publicOnly'], true, 'the import record says publicOnly')
    assert.equal(records[0]!.details?.['algorithm'], 'ML-KEM-768')

    // A private import's record does not say publicOnly.
    const priv = await call('POST', IMPORT, {
      name: uniqueName('po-priv'),
      keyType: 'Signing',
      algorithm: 'EC-P256',
      format: 'PEM',
      keyMaterial: fixture('EC-P256').privatePem,
    })
    assert.equal(priv.status, 201, priv.text)
    const privAudit = await call(
      'GET',
      `/audit?${new URLSearchParams({ action: 'keys.import', resource: `key:${priv.body.id}` })}`,
    )
    assert.equal(privAudit.body.data.length, 1)
    assert.equal(privAudit.body.data[0].details?.publicOnly, undefined)

    // The version keeps the public key alone.
    const [version] = await svc.sql<{ public_key: Buffer; sealed_material: Buffer | null }[]>`
      SELECT public_key, sealed_material FROM key_versions WHERE key_id = ${key.id}`
    assert.ok(version!.public_key.equals(f.spki), 'the stored public key is the SPKI')
    assert.equal(version!.sealed_material, null, 'no sealed material')
    const [row] = await svc.sql<{ public_only: boolean }[]>`SELECT public_only FROM keys WHERE id = ${key.id}`
    assert.equal(row!.public_only, true)

    // A refused attempt with a private key is recorded, without the material.
    const refused = await call('POST', IMPORT, importBody(f, { format: 'PEM', keyMaterial: f.privatePem }))
    assertRefused(refused, 400, 'public_key_expected', 'private PEM with publicOnly')
    const failures = await call('GET', '/audit?action=keys.import&outcome=failure&limit=500')
    assert.ok(
      (failures.body.data as AuditView[]).some((r) => r.details?.['reason'] === 'public_key_expected'),
      'the refusal is recorded with its reason',
    )

    // No private bytes of any fixture, in any encoding, in the tenant's keys, versions or audit.
    const [stored] = await svc.sql<{ text: string }[]>`
      SELECT concat_ws(E'\n',
        (SELECT string_agg(k::text, E'\n') FROM keys k WHERE tenant_id = ${tenant.tenantId}),
        (SELECT string_agg(encode(coalesce(v.sealed_material, ''::bytea), 'hex') || ' ' || encode(coalesce(v.public_key, ''::bytea), 'hex'), E'\n')
           FROM key_versions v WHERE tenant_id = ${tenant.tenantId}),
        (SELECT string_agg(a::text, E'\n') FROM audit_log a WHERE tenant_id = ${tenant.tenantId})) AS text`
    const text = stored!.text
    assert.ok(text.length > 0)
    for (const fx of fixtures) {
      const pemBody = fx.privatePem
        .split('\n')
        .filter((l) => l && !l.startsWith('-----'))
        .join('')
      for (let i = 48; i + 24 <= pemBody.length; i += 24) {
        assert.ok(
          !text.includes(pemBody.slice(i, i + 24)),
          `${fx.label}: a piece of the private PEM is stored`,
        )
      }
      for (const secret of fx.privateBytes) {
        const piece = secret.subarray(0, 32)
        for (const encoding of ['hex', 'base64', 'base64url'] as const) {
          assert.ok(
            !text.includes(piece.toString(encoding)),
            `${fx.label}: private bytes stored (${encoding})`,
          )
        }
      }
    }
  })
})
