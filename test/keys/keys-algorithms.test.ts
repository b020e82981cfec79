import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { createDecipheriv, createHmac, pbkdf2Sync, randomBytes } from 'node:crypto'
import { after, before, describe, test } from 'node:test'
import { ml_dsa44, ml_dsa65, ml_dsa87 } from '@noble/post-quantum/ml-dsa.js'
import { ml_kem512, ml_kem768, ml_kem1024 } from '@noble/post-quantum/ml-kem.js'
import { slh_dsa_sha2_128s } from '@noble/post-quantum/slh-dsa.js'
import { exportSPKI, importJWK } from 'jose'
import { startTestService, type TenantWithKey, type TestService } from '../helpers/service.ts'

/**
 * Every algorithm of the key table, over HTTP: generate, read, list, rotate and list versions;
 * export the public key in PEM, DER, RAW and JWK and check the four carry the same key, each
 * parsed by something other than the service (a DER reader here, the openssl CLI, jose and
 * @noble/post-quantum); the include fields, the download variant, and private key export with
 * its confirmation, password protection, no-store header and key-material-free audit record.
 */

type Family = 'ml-kem' | 'ml-dsa' | 'slh-dsa' | 'rsa' | 'ec' | 'ed25519' | 'hmac'

interface Case {
  algorithm: string
  keyType: 'Encryption' | 'Signing' | 'HMAC'
  family: Family
  /** SPKI algorithm OID. */
  oid?: string
  /** JOSE alg of the public JWK. */
  jwkAlg?: string
  /** Length of the RAW public key (not RSA). */
  rawLength?: number
  bits?: number
  curve?: { nist: string; openssl: string; oid: string; coordinate: number }
  hmac?: { hash: 'sha256' | 'sha384' | 'sha512'; bytes: number }
  kem?: typeof ml_kem512
  dsa?: typeof ml_dsa44
}

/** What jose's importJWK returns for an asymmetric JWK. */
type PublicOrPrivateKey = Parameters<typeof exportSPKI>[0]

const NIST = '2.16.840.1.101.3.4'
const RSA_OID = '1.2.840.113549.1.1.1'
const EC_OID = '1.2.840.10045.2.1'
const ED25519_OID = '1.3.101.112'

const CASES: Case[] = [
  ...(
    [
      ['512', 1, 800, ml_kem512],
      ['768', 2, 1184, ml_kem768],
      ['1024', 3, 1568, ml_kem1024],
    ] as const
  ).map(
    ([size, arc, rawLength, kem]): Case => ({
      algorithm: `ML-KEM-${size}`,
      keyType: 'Encryption',
      family: 'ml-kem',
      oid: `${NIST}.4.${arc}`,
      jwkAlg: `ML-KEM-${size}`,
      rawLength,
      kem,
    }),
  ),
  ...(
    [
      ['44', 17, 1312, ml_dsa44],
      ['65', 18, 1952, ml_dsa65],
      ['87', 19, 2592, ml_dsa87],
    ] as const
  ).map(
    ([level, arc, rawLength, dsa]): Case => ({
      algorithm: `ML-DSA-${level}`,
      keyType: 'Signing',
      family: 'ml-dsa',
      oid: `${NIST}.3.${arc}`,
      jwkAlg: `ML-DSA-${level}`,
      rawLength,
      dsa,
    }),
  ),
  {
    algorithm: 'SLH-DSA-128s',
    keyType: 'Signing',
    family: 'slh-dsa',
    oid: `${NIST}.3.20`,
    jwkAlg: 'SLH-DSA-SHA2-128s',
    rawLength: 32,
  },
  ...([2048, 3072, 4096] as const).map(
    (bits): Case => ({
      algorithm: `RSA-${bits}`,
      keyType: 'Encryption',
      family: 'rsa',
      oid: RSA_OID,
      jwkAlg: 'RSA-OAEP-256',
      bits,
    }),
  ),
  { algorithm: 'RSA-2048', keyType: 'Signing', family: 'rsa', oid: RSA_OID, jwkAlg: 'PS256', bits: 2048 },
  ...(
    [
      ['P256', 'P-256', 'prime256v1', '1.2.840.10045.3.1.7', 32, 'ES256'],
      ['P384', 'P-384', 'secp384r1', '1.3.132.0.34', 48, 'ES384'],
      ['P521', 'P-521', 'secp521r1', '1.3.132.0.35', 66, 'ES512'],
    ] as const
  ).map(
    ([suffix, nist, openssl, oid, coordinate, jwkAlg]): Case => ({
      algorithm: `EC-${suffix}`,
      keyType: 'Signing',
      family: 'ec',
      oid: EC_OID,
      jwkAlg,
      rawLength: 1 + 2 * coordinate,
      curve: { nist, openssl, oid, coordinate },
    }),
  ),
  {
    algorithm: 'Ed25519',
    keyType: 'Signing',
    family: 'ed25519',
    oid: ED25519_OID,
    jwkAlg: 'EdDSA',
    rawLength: 32,
  },
  ...(
    [
      ['256', 32],
      ['384', 48],
      ['512', 64],
    ] as const
  ).map(
    ([bits, bytes]): Case => ({
      algorithm: `HMAC-SHA${bits}`,
      keyType: 'HMAC',
      family: 'hmac',
      jwkAlg: `HS${bits}`,
      hmac: { hash: `sha${bits}`, bytes },
    }),
  ),
]

const POST_QUANTUM: readonly Family[] = ['ml-kem', 'ml-dsa', 'slh-dsa']
const CLASSICAL: readonly Family[] = ['rsa', 'ec', 'ed25519']

/** The record fields `include=metadata` / `include=all` add to the public key body. */
const INCLUDE_FIELDS = [
  'name',
  'description',
  'keyType',
  'isPostQuantum',
  'isActive',
  'isDefault',
  'isFavorite',
  'createdAt',
  'expiresAt',
  'lastRotatedAt',
  'labels',
  'state',
  'scheduledDeletionDate',
]
const BASE_FIELDS = ['algorithm', 'format', 'publicKey', 'version']
const PASSWORD = 'correct horse battery staple'

// ---------------------------------------------------------------------------------------------
// Encodings and a minimal ASN.1 DER reader
// ---------------------------------------------------------------------------------------------

/** Strict standard Base64 (what the API promises), decoded. */
function b64(text: unknown): Buffer {
  assert.equal(typeof text, 'string')
  assert.match(text as string, /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/)
  return Buffer.from(text as string, 'base64')
}

function b64url(text: unknown): Buffer {
  assert.equal(typeof text, 'string')
  assert.match(text as string, /^[A-Za-z0-9_-]+$/)
  return Buffer.from(text as string, 'base64url')
}

/** The DER inside a PEM armour with exactly this label. */
function pemBody(text: unknown, label: string): Buffer {
  assert.equal(typeof text, 'string')
  const match = /^-----BEGIN ([A-Z ]+)-----\n([A-Za-z0-9+/=\n]+)\n-----END ([A-Z ]+)-----\n?$/.exec(
    text as string,
  )
  assert.ok(match, `not PEM: ${String(text).slice(0, 60)}`)
  assert.equal(match[1], label)
  assert.equal(match[3], label)
  return b64(match[2]!.replace(/\n/g, ''))
}

interface Tlv {
  tag: number
  start: number
  end: number
}

function tlvAt(der: Buffer, offset: number): Tlv {
  assert.ok(offset + 2 <= der.length, 'DER: truncated header')
  const tag = der[offset]!
  let length = der[offset + 1]!
  let start = offset + 2
  if (length & 0x80) {
    const count = length & 0x7f
    assert.ok(count >= 1 && count <= 3, 'DER: unsupported length form')
    length = 0
    for (let i = 0; i < count; i++) length = length * 256 + der[start + i]!
    start += count
  }
  assert.ok(start + length <= der.length, 'DER: length runs past the data')
  return { tag, start, end: start + length }
}

function rootOf(der: Buffer): Tlv {
  const root = tlvAt(der, 0)
  assert.equal(root.end, der.length, 'DER: trailing bytes')
  return root
}

function childrenOf(der: Buffer, parent: Tlv): Tlv[] {
  const children: Tlv[] = []
  for (let pos = parent.start; pos < parent.end; ) {
    const child = tlvAt(der, pos)
    assert.ok(child.end <= parent.end, 'DER: child runs past its parent')
    children.push(child)
    pos = child.end
  }
  return children
}

const bytesOf = (der: Buffer, tlv: Tlv) => der.subarray(tlv.start, tlv.end)

function oidOf(der: Buffer, tlv: Tlv | undefined): string {
  assert.ok(tlv, 'DER: missing OID')
  assert.equal(tlv.tag, 0x06, 'DER: expected an OBJECT IDENTIFIER')
  const bytes = bytesOf(der, tlv)
  const first = bytes[0]! < 80 ? Math.floor(bytes[0]! / 40) : 2
  const arcs = [first, bytes[0]! - 40 * first]
  let value = 0
  for (const byte of bytes.subarray(1)) {
    value = value * 128 + (byte & 0x7f)
    if (!(byte & 0x80)) {
      arcs.push(value)
      value = 0
    }
  }
  return arcs.join('.')
}

/** SubjectPublicKeyInfo: SEQUENCE { SEQUENCE { OID, params? }, BIT STRING }. */
function parseSpki(der: Buffer): { oid: string; params: Tlv | undefined; key: Buffer } {
  const root = rootOf(der)
  assert.equal(root.tag, 0x30)
  const [algorithm, bits, ...rest] = childrenOf(der, root)
  assert.ok(algorithm && bits && rest.length === 0, 'SPKI has two elements')
  assert.equal(algorithm.tag, 0x30)
  const [oid, params, ...more] = childrenOf(der, algorithm)
  assert.equal(more.length, 0)
  assert.equal(bits.tag, 0x03, 'subjectPublicKey is a BIT STRING')
  assert.equal(der[bits.start], 0, 'no unused bits')
  return { oid: oidOf(der, oid), params, key: der.subarray(bits.start + 1, bits.end) }
}

/** A DER INTEGER as unsigned big-endian bytes without the sign padding. */
function unsigned(der: Buffer, tlv: Tlv | undefined): Buffer {
  assert.ok(tlv)
  assert.equal(tlv.tag, 0x02, 'expected an INTEGER')
  const bytes = bytesOf(der, tlv)
  return bytes.length > 1 && bytes[0] === 0 ? bytes.subarray(1) : bytes
}

/** PKCS#1 RSAPublicKey: SEQUENCE { INTEGER n, INTEGER e }. */
function parsePkcs1Public(der: Buffer): { n: Buffer; e: Buffer } {
  const root = rootOf(der)
  assert.equal(root.tag, 0x30)
  const [n, e, ...rest] = childrenOf(der, root)
  assert.equal(rest.length, 0)
  return { n: unsigned(der, n), e: unsigned(der, e) }
}

/** The algorithm OID of a PKCS#8 PrivateKeyInfo: SEQUENCE { INTEGER, SEQUENCE { OID, ... }, OCTET STRING }. */
function pkcs8Oid(der: Buffer): string {
  const root = rootOf(der)
  const [version, algorithm, key] = childrenOf(der, root)
  assert.equal(version?.tag, 0x02)
  assert.equal(algorithm?.tag, 0x30)
  assert.equal(key?.tag, 0x04)
  return oidOf(der, childrenOf(der, algorithm!)[0])
}

/** Decrypts a PBES2 (PBKDF2-HMAC-SHA256, AES-256-CBC) EncryptedPrivateKeyInfo with node's primitives. */
function decryptPbes2(der: Buffer, password: string): Buffer {
  const [scheme, encrypted] = childrenOf(der, rootOf(der))
  assert.ok(scheme && encrypted?.tag === 0x04)
  const [schemeOid, schemeParams] = childrenOf(der, scheme)
  assert.equal(oidOf(der, schemeOid), '1.2.840.113549.1.5.13', 'PBES2')
  const [kdf, cipher] = childrenOf(der, schemeParams!)
  const [kdfOid, kdfParams] = childrenOf(der, kdf!)
  assert.equal(oidOf(der, kdfOid), '1.2.840.113549.1.5.12', 'PBKDF2')
  const [salt, iterations, ...kdfRest] = childrenOf(der, kdfParams!)
  const prf = kdfRest.find((t) => t.tag === 0x30)
  assert.ok(prf, 'PBKDF2 names its PRF')
  assert.equal(oidOf(der, childrenOf(der, prf)[0]), '1.2.840.113549.2.9', 'hmacWithSHA256')
  const [cipherOid, iv] = childrenOf(der, cipher!)
  assert.equal(oidOf(der, cipherOid), `${NIST}.1.42`, 'aes-256-cbc')
  const count = unsigned(der, iterations)
  const key = pbkdf2Sync(password, bytesOf(der, salt!), count.readUIntBE(0, count.length), 32, 'sha256')
  const decipher = createDecipheriv('aes-256-cbc', key, bytesOf(der, iv!))
  return Buffer.concat([decipher.update(bytesOf(der, encrypted)), decipher.final()])
}

// ---------------------------------------------------------------------------------------------
// openssl CLI
// ---------------------------------------------------------------------------------------------

function openssl(args: string[], input: Buffer | string): string {
  return execFileSync('openssl', args, { input, stdio: ['pipe', 'pipe', 'pipe'] }).toString()
}

function opensslRefuses(args: string[], input: Buffer | string): boolean {
  try {
    openssl(args, input)
    return false
  } catch {
    return true
  }
}

/** The first OBJECT openssl asn1parse finds (the algorithm OID of SPKI and PKCS#8). */
function firstAsn1Object(der: Buffer): string {
  const line = openssl(['asn1parse', '-inform', 'DER'], der)
    .split('\n')
    .find((l) => l.includes('prim: OBJECT'))
  assert.ok(line, 'openssl asn1parse found an OBJECT')
  return line.slice(line.lastIndexOf(':') + 1).trim()
}

/** What openssl 3.0 may print for a post-quantum OID: the dotted form, or a name in later versions. */
function assertOpensslOid(printed: string, c: Case): void {
  const names = [c.oid, c.jwkAlg, `id-alg-${c.jwkAlg?.toLowerCase()}`, c.algorithm]
  assert.ok(names.includes(printed), `openssl printed ${printed}, expected ${c.oid}`)
}

/** Strings that must never appear in an audit record: the secret in each encoding it travels in. */
function secretForms(value: unknown): string[] {
  if (typeof value === 'string') {
    const forms = [value]
    const body = value.match(/^[A-Za-z0-9+/=]{40,}$/gm) ?? []
    forms.push(...body, body.join(''))
    if (/^[A-Za-z0-9+/=]+$/.test(value)) {
      const bytes = Buffer.from(value, 'base64')
      forms.push(bytes.toString('hex'), bytes.toString('base64url'))
    }
    return forms.filter((f) => f.length >= 16)
  }
  const jwk = value as Record<string, unknown>
  return ['d', 'p', 'q', 'dp', 'dq', 'qi', 'priv', 'k']
    .map((field) => jwk[field])
    .filter((v): v is string => typeof v === 'string' && v.length >= 16)
}

// ---------------------------------------------------------------------------------------------

describe('keys: every algorithm over HTTP', () => {
  let svc: TestService
  let tenant: TenantWithKey

  before(async () => {
    svc = await startTestService()
    tenant = await svc.createTenant()
  })

  after(async () => {
    await svc?.stop()
  })

  const call = (method: string, path: string, body?: unknown) =>
    svc.request(method, `/api/v1${path}`, { key: tenant.key, ...(body !== undefined ? { body } : {}) })

  async function download(path: string) {
    const res = await fetch(new URL(`/api/v1${path}`, svc.baseUrl), { headers: { 'x-api-key': tenant.key } })
    return { status: res.status, headers: res.headers, bytes: Buffer.from(await res.arrayBuffer()) }
  }

  for (const c of CASES) {
    describe(`${c.algorithm} (${c.keyType})`, () => {
      const name = `algo-${c.algorithm}-${c.keyType}`
      // biome-ignore lint/suspicious/noExplicitAny: the created record, asserted field by field
      let key: any
      let createStatus = 0
      /** Version 1's public key, before any rotation. */
      const v1: { pem?: string; raw?: string; secret?: string } = {}

      async function exportPublic(format: string, query = '') {
        const res = await call('GET', `/keys/${key.id}/public?format=${format}${query}`)
        assert.equal(res.status, 200, res.text)
        return res.body
      }

      async function exportPrivate(body: Record<string, unknown>) {
        const res = await call('POST', `/keys/${key.id}/export-private`, { confirm: name, ...body })
        assert.equal(res.status, 200, res.text)
        assert.match(res.headers.get('cache-control') ?? '', /no-store/)
        assert.equal(res.body.keyId, key.id)
        assert.equal(res.body.algorithm, c.algorithm)
        assert.equal(res.body.format, body['format'])
        assert.equal(res.body.encrypted, body['password'] !== undefined)
        return res.body.privateKey
      }

      before(async () => {
        const res = await call('POST', '/keys', {
          name,
          keyType: c.keyType,
          algorithm: c.algorithm,
          exportable: true,
        })
        createStatus = res.status
        key = res.body
      })

      test('create, get and list return the record', async () => {
        assert.equal(createStatus, 201, JSON.stringify(key))
        assert.match(key.id, /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/)
        assert.equal(key.name, name)
        assert.equal(key.keyType, c.keyType)
        assert.equal(key.algorithm, c.algorithm)
        assert.equal(key.isPostQuantum, POST_QUANTUM.includes(c.family))
        assert.equal(key.state, 'Active')
        assert.equal(key.isActive, true)
        assert.equal(key.version, 1)
        assert.equal(key.origin, 'Generated')
        assert.equal(key.lastRotatedAt, null)
        assert.equal(key.scheduledDeletionDate, null)

        const got = await call('GET', `/keys/${key.id}`)
        assert.equal(got.status, 200, got.text)
        assert.deepEqual(got.body, key)

        const list = await call('GET', '/keys?limit=1000')
        assert.equal(list.status, 200, list.text)
        const listed = list.body.data.filter((k: { id: string }) => k.id === key.id)
        assert.equal(listed.length, 1)
        assert.deepEqual(listed[0], key)
      })

      if (c.family === 'hmac') {
        test('HMAC keys have no public key: 409 no_public_key', async () => {
          for (const format of ['PEM', 'DER', 'RAW', 'JWK']) {
            for (const path of ['public', 'public/download']) {
              const res = await call('GET', `/keys/${key.id}/${path}?format=${format}`)
              assert.equal(res.status, 409, `${path} ${format}: ${res.text}`)
              assert.equal(res.body.error, 'no_public_key')
            }
          }
        })

        test('private export: RAW and JWK carry the same secret of the hash length', async () => {
          const raw = b64(await exportPrivate({ format: 'RAW' }))
          assert.equal(raw.length, c.hmac!.bytes)
          const mac = createHmac(c.hmac!.hash, raw).update('message').digest()
          assert.equal(mac.length, c.hmac!.bytes)
          v1.secret = raw.toString('base64')

          const jwk = await exportPrivate({ format: 'JWK' })
          assert.equal(jwk.kty, 'oct')
          assert.equal(jwk.alg, c.jwkAlg)
          assert.ok(b64url(jwk.k).equals(raw), 'JWK k is the RAW secret')
          const imported = await importJWK(jwk, c.jwkAlg)
          assert.ok(imported instanceof Uint8Array && Buffer.from(imported).equals(raw))
          assert.ok(
            createHmac(c.hmac!.hash, Buffer.from(imported)).update('message').digest().equals(mac),
            'both exports compute the same MAC',
          )

          await assertExportAudited(2, [...secretForms(v1.secret), ...secretForms(jwk)])
        })
      } else {
        test('public key: PEM, DER, RAW and JWK carry the same key, parsed independently', async () => {
          const pem = await exportPublic('PEM')
          const der = await exportPublic('DER')
          const raw = await exportPublic('RAW')
          const jwk = await exportPublic('JWK')
          for (const [body, format] of [
            [pem, 'PEM'],
            [der, 'DER'],
            [raw, 'RAW'],
          ] as const) {
            assert.equal(body.format, format)
            assert.equal(body.algorithm, c.algorithm)
            assert.equal(body.version, 1)
          }
          v1.pem = pem.publicKey
          v1.raw = raw.publicKey

          const spkiFromPem = pemBody(pem.publicKey, 'PUBLIC KEY')
          const spki = b64(der.publicKey)
          assert.ok(spkiFromPem.equals(spki), 'PEM and DER are the same SPKI bytes')
          const parsed = parseSpki(spki)
          const rawBytes = b64(raw.publicKey)
          assert.ok(parsed.key.equals(rawBytes), 'RAW is the subjectPublicKey content')
          assert.equal(parsed.oid, c.oid)

          assert.equal(jwk.kid, `${key.id}:1`)
          assert.equal(jwk.use, c.keyType === 'Encryption' ? 'enc' : 'sig')
          assert.equal(jwk.alg, c.jwkAlg)
          for (const field of ['d', 'p', 'q', 'dp', 'dq', 'qi', 'priv']) assert.equal(jwk[field], undefined)

          if (POST_QUANTUM.includes(c.family)) {
            assert.equal(parsed.params, undefined, 'no algorithm parameters')
            assert.equal(rawBytes.length, c.rawLength)
            assertOpensslOid(firstAsn1Object(spki), c)
            assert.equal(jwk.kty, 'AKP')
            assert.ok(b64url(jwk.pub).equals(rawBytes), 'JWK pub is the RAW key')
            if (c.kem) {
              const { cipherText, sharedSecret } = c.kem.encapsulate(new Uint8Array(rawBytes))
              assert.equal(sharedSecret.length, 32)
              assert.ok(cipherText.length > 0)
            }
            if (c.dsa) {
              const signature = randomBytes(c.dsa.lengths.signature!)
              assert.equal(c.dsa.verify(signature, Buffer.from('message'), new Uint8Array(rawBytes)), false)
            }
            return
          }

          const text = openssl(['pkey', '-pubin', '-inform', 'DER', '-noout', '-text'], spki)
          const viaJose = await exportSPKI((await importJWK(jwk, c.jwkAlg)) as PublicOrPrivateKey)
          assert.equal(viaJose.trim(), pem.publicKey.trim(), 'jose reads the JWK as the same key')

          if (c.family === 'rsa') {
            assert.equal(parsed.params?.tag, 0x05, 'rsaEncryption has NULL parameters')
            assert.match(text, new RegExp(`Public-Key: \\(${c.bits} bit\\)`))
            assert.match(text, /Exponent: 65537 \(0x10001\)/)
            const { n, e } = parsePkcs1Public(rawBytes)
            assert.equal(n.length * 8, c.bits)
            assert.equal(jwk.kty, 'RSA')
            assert.ok(b64url(jwk.n).equals(n), 'JWK n is the modulus of RAW')
            assert.ok(b64url(jwk.e).equals(e), 'JWK e is the exponent of RAW')
          } else if (c.family === 'ec') {
            const curve = c.curve!
            assert.equal(oidOf(spki, parsed.params), curve.oid)
            assert.match(text, new RegExp(`ASN1 OID: ${curve.openssl}`))
            assert.match(text, new RegExp(`NIST CURVE: ${curve.nist}`))
            assert.equal(rawBytes.length, c.rawLength)
            assert.equal(rawBytes[0], 0x04, 'uncompressed point')
            assert.equal(jwk.kty, 'EC')
            assert.equal(jwk.crv, curve.nist)
            const x = b64url(jwk.x)
            const y = b64url(jwk.y)
            assert.equal(x.length, curve.coordinate)
            assert.ok(Buffer.concat([Buffer.of(4), x, y]).equals(rawBytes), '0x04||x||y is RAW')
          } else {
            assert.equal(parsed.params, undefined)
            assert.match(text, /ED25519 Public-Key:/)
            assert.equal(rawBytes.length, 32)
            assert.equal(jwk.kty, 'OKP')
            assert.equal(jwk.crv, 'Ed25519')
            assert.ok(b64url(jwk.x).equals(rawBytes), 'JWK x is RAW')
          }
        })

        test('include: default fields, named fields, metadata/all, unknown, ignored by JWK', async () => {
          const record = (await call('GET', `/keys/${key.id}`)).body
          assert.deepEqual(Object.keys(await exportPublic('PEM')).sort(), BASE_FIELDS)

          const named = await exportPublic('PEM', '&include=name,state')
          assert.deepEqual(Object.keys(named).sort(), [...BASE_FIELDS, 'name', 'state'].sort())
          assert.equal(named.name, name)
          assert.equal(named.state, 'Active')

          const rawNamed = await exportPublic('RAW', '&include=keyType')
          assert.deepEqual(Object.keys(rawNamed).sort(), [...BASE_FIELDS, 'keyType'].sort())
          assert.equal(rawNamed.keyType, c.keyType)

          for (const include of ['metadata', 'all']) {
            const body = await exportPublic('DER', `&include=${include}`)
            assert.deepEqual(Object.keys(body).sort(), [...BASE_FIELDS, ...INCLUDE_FIELDS].sort(), include)
            for (const field of INCLUDE_FIELDS) assert.deepEqual(body[field], record[field], field)
          }

          for (const include of ['bogus', 'name,bogus']) {
            const res = await call('GET', `/keys/${key.id}/public?format=PEM&include=${include}`)
            assert.equal(res.status, 400, res.text)
            assert.equal(res.body.error, 'validation_failed')
          }

          const jwk = await exportPublic('JWK')
          assert.deepEqual(await exportPublic('JWK', '&include=all'), jwk)
          assert.deepEqual(await exportPublic('JWK', '&include=name,state'), jwk)
        })

        test('download: attachment files with the export in each format', async () => {
          const disposition = (ext: string) => `attachment; filename="${name}-v1.${ext}"`

          const pem = await download(`/keys/${key.id}/public/download?format=PEM`)
          assert.equal(pem.status, 200)
          assert.equal(pem.headers.get('content-disposition'), disposition('pem'))
          assert.equal(pem.bytes.toString(), (await exportPublic('PEM')).publicKey)

          const der = await download(`/keys/${key.id}/public/download?format=DER`)
          assert.equal(der.status, 200)
          assert.equal(der.headers.get('content-disposition'), disposition('der'))
          assert.ok(der.bytes.equals(b64((await exportPublic('DER')).publicKey)), 'binary SPKI')
          assert.equal(parseSpki(der.bytes).oid, c.oid)

          const raw = await download(`/keys/${key.id}/public/download?format=RAW`)
          assert.equal(raw.status, 200)
          assert.equal(raw.headers.get('content-disposition'), disposition('txt'))
          assert.equal(raw.bytes.toString().trim(), (await exportPublic('RAW')).publicKey)

          const jwk = await download(`/keys/${key.id}/public/download?format=JWK`)
          assert.equal(jwk.status, 200)
          assert.equal(jwk.headers.get('content-disposition'), disposition('json'))
          assert.deepEqual(JSON.parse(jwk.bytes.toString()), await exportPublic('JWK'))
        })

        test('private export: confirmation, formats verified independently, no-store, audited', async () => {
          const mismatch = await call('POST', `/keys/${key.id}/export-private`, {
            confirm: `${name}-not`,
            format: 'PEM',
          })
          assert.equal(mismatch.status, 400, mismatch.text)
          assert.equal(mismatch.body.error, 'confirmation_mismatch')
          assert.equal(mismatch.body.privateKey, undefined)

          const secrets: string[] = [PASSWORD]
          let exports = 0
          const pem: string = await exportPrivate({ format: 'PEM' })
          exports++
          secrets.push(...secretForms(pem))
          const pkcs8 = pemBody(pem, 'PRIVATE KEY')
          assert.equal(pkcs8Oid(pkcs8), c.oid)
          const der = b64(await exportPrivate({ format: 'DER' }))
          exports++
          assert.ok(der.equals(pkcs8), 'DER is the PEM body')

          const encrypted: string = await exportPrivate({ format: 'PEM', password: PASSWORD })
          exports++
          secrets.push(...secretForms(encrypted))
          assert.ok(encrypted.startsWith('-----BEGIN ENCRYPTED PRIVATE KEY-----\n'))
          const encryptedDer = pemBody(encrypted, 'ENCRYPTED PRIVATE KEY')
          assert.ok(decryptPbes2(encryptedDer, PASSWORD).equals(pkcs8), 'decrypts to the same PKCS#8')

          if (CLASSICAL.includes(c.family)) {
            assert.equal(openssl(['pkey', '-noout'], pem), '')
            assert.equal(openssl(['pkey', '-pubout'], pem), v1.pem, 'openssl derives the exported public key')
            const fromEncrypted = openssl(['pkey', '-passin', `pass:${PASSWORD}`, '-pubout'], encrypted)
            assert.equal(fromEncrypted, v1.pem)
            assert.ok(opensslRefuses(['pkey', '-passin', 'pass:wrong password', '-pubout'], encrypted))
            if (c.family === 'ec') {
              assert.match(
                openssl(['pkey', '-noout', '-text'], pem),
                new RegExp(`ASN1 OID: ${c.curve!.openssl}`),
              )
            }

            const jwk = await exportPrivate({ format: 'JWK' })
            exports++
            secrets.push(...secretForms(jwk))
            const imported = (await importJWK(jwk, c.jwkAlg)) as PublicOrPrivateKey
            assert.equal(imported.type, 'private')
            const publicJwk = await exportPublic('JWK')
            for (const field of ['kty', 'n', 'e', 'crv', 'x', 'y'])
              assert.equal(jwk[field], publicJwk[field], field)

            if (c.family === 'rsa') {
              const res = await call('POST', `/keys/${key.id}/export-private`, {
                confirm: name,
                format: 'RAW',
              })
              assert.equal(res.status, 400, res.text)
            } else {
              const raw = await exportPrivate({ format: 'RAW' })
              exports++
              secrets.push(...secretForms(raw))
              assert.equal(b64(raw).length, c.family === 'ec' ? c.curve!.coordinate : 32)
              assert.ok(b64(raw).equals(b64url(jwk.d)), 'RAW is the JWK d')
            }
          } else {
            assertOpensslOid(firstAsn1Object(pkcs8), c)
            const raw = await exportPrivate({ format: 'RAW' })
            exports++
            secrets.push(...secretForms(raw))
            const seed = b64(raw)
            const publicRaw = b64(v1.raw)
            if (c.kem) {
              assert.equal(seed.length, 64)
              const pair = c.kem.keygen(new Uint8Array(seed))
              assert.ok(Buffer.from(pair.publicKey).equals(publicRaw), 'noble derives the RAW public key')
              const { cipherText, sharedSecret } = c.kem.encapsulate(new Uint8Array(publicRaw))
              assert.ok(Buffer.from(c.kem.decapsulate(cipherText, pair.secretKey)).equals(sharedSecret))
            } else if (c.dsa) {
              assert.equal(seed.length, 32)
              const pair = c.dsa.keygen(new Uint8Array(seed))
              assert.ok(Buffer.from(pair.publicKey).equals(publicRaw), 'noble derives the RAW public key')
              const message = Buffer.from('signed by noble')
              assert.ok(c.dsa.verify(c.dsa.sign(message, pair.secretKey), message, new Uint8Array(publicRaw)))
            } else {
              assert.equal(seed.length, 64)
              assert.ok(seed.subarray(32).equals(publicRaw), 'SLH-DSA sk ends with PK.seed||PK.root')
              const pair = slh_dsa_sha2_128s.keygen(new Uint8Array(seed.subarray(0, 48)))
              assert.ok(Buffer.from(pair.publicKey).equals(publicRaw), 'noble recomputes PK.root')
            }
          }

          await assertExportAudited(exports, secrets)
        })
      }

      /** Audit: `count` successful exports of version 1 and the failed confirmation, with no secret. */
      async function assertExportAudited(count: number, secrets: string[]) {
        const res = await call('GET', `/audit?action=keys.export_private&resource=key:${key.id}&limit=500`)
        assert.equal(res.status, 200, res.text)
        const records = res.body.data as { outcome: string; keyVersion: number | null; details: unknown }[]
        const succeeded = records.filter((r) => r.outcome === 'success')
        assert.equal(succeeded.length, count)
        for (const record of succeeded) {
          assert.equal(record.keyVersion, 1)
          // Key material leaving the service is recorded at warning level (issue 15).
          assert.equal((record.details as { level?: string }).level, 'warning')
        }
        if (c.family !== 'hmac') {
          const failed = records.filter((r) => r.outcome === 'failure')
          assert.equal(failed.length, 1)
          assert.deepEqual(failed[0]!.details, { level: 'warning', reason: 'confirmation_mismatch' })
        }
        assert.ok(secrets.length > 0)
        for (const secret of secrets) assert.ok(!res.text.includes(secret), 'audit holds no key material')
      }

      test('rotate twice: version 3, versions 1-3, older versions still served', async () => {
        const second = await call('POST', `/keys/${key.id}/rotate`)
        assert.equal(second.status, 200, second.text)
        assert.equal(second.body.version, 2)
        const third = await call('POST', `/keys/${key.id}/rotate`)
        assert.equal(third.status, 200, third.text)
        assert.equal(third.body.version, 3)
        assert.equal(third.body.state, 'Active')
        assert.notEqual(third.body.lastRotatedAt, null)
        assert.equal((await call('GET', `/keys/${key.id}`)).body.version, 3)

        const versions = await call('GET', `/keys/${key.id}/versions`)
        assert.equal(versions.status, 200, versions.text)
        const data = versions.body.data as { version: number; createdAt: string; isCurrent: boolean }[]
        assert.deepEqual(
          data.map((v) => v.version),
          [1, 2, 3],
        )
        assert.deepEqual(
          data.map((v) => v.isCurrent),
          [false, false, true],
        )
        for (const v of data) assert.ok(!Number.isNaN(Date.parse(v.createdAt)), v.createdAt)

        if (c.family === 'hmac') {
          const old = await exportPrivate({ format: 'RAW', version: 1 })
          assert.equal(old, v1.secret, 'version 1 keeps its secret')
          assert.notEqual(await exportPrivate({ format: 'RAW' }), v1.secret)
          return
        }

        const current = await exportPublic('PEM')
        assert.equal(current.version, 3)
        assert.notEqual(current.publicKey, v1.pem)
        const first = await exportPublic('PEM', '&version=1')
        assert.equal(first.version, 1)
        assert.equal(first.publicKey, v1.pem)
        const middle = await exportPublic('PEM', '&version=2')
        assert.ok(middle.publicKey !== v1.pem && middle.publicKey !== current.publicKey)
        assert.equal((await exportPublic('RAW', '&version=1')).publicKey, v1.raw)
        assert.equal((await exportPublic('JWK')).kid, `${key.id}:3`)
        assert.equal((await exportPublic('JWK', '&version=1')).kid, `${key.id}:1`)

        const missing = await call('GET', `/keys/${key.id}/public?format=PEM&version=4`)
        assert.equal(missing.status, 404, missing.text)
        assert.equal(missing.body.error, 'key_version_not_found')

        const file = await download(`/keys/${key.id}/public/download?format=PEM&version=1`)
        assert.equal(file.headers.get('content-disposition'), `attachment; filename="${name}-v1.pem"`)
        assert.equal(file.bytes.toString(), v1.pem)
        const latest = await download(`/keys/${key.id}/public/download?format=PEM`)
        assert.equal(latest.headers.get('content-disposition'), `attachment; filename="${name}-v3.pem"`)
      })
    })
  }
})
