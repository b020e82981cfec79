import assert from 'node:assert/strict'
import { type CipherGCMTypes, createDecipheriv, randomBytes } from 'node:crypto'
import { mkdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { ml_kem768 } from '@noble/post-quantum/ml-kem.js'
import type { Scope } from '../../src/auth/scopes.ts'
import { RAW_IV_BYTES } from '../../src/crypto/raw-aes-service.ts'
import { apiClient, b64, mapConcurrently, unb64 } from '../helpers/api-client.ts'
import {
  type HttpResult,
  PROJECT_ROOT,
  startTestService,
  type TenantWithKey,
  type TestService,
} from '../helpers/service.ts'
import {
  CALLER_RANDOMNESS,
  Controls,
  describeError,
  type FileReport,
  fileReport,
  hex,
  loadVectorFile,
  markdown,
  type Outcome,
  openMlKemEnvelope,
  sealMlKemEnvelope,
  summarize,
  VECTOR_DIR,
  type VectorFile,
  type Verdict,
  vectorDirProblem,
  vectorFileNames,
  vectorSource,
  type WycheproofGroup,
  type WycheproofTest,
} from '../helpers/wycheproof.ts'

/**
 * Issue 35, acceptance 1: every C2SP Wycheproof vector file in test/vectors/wycheproof goes
 * through the service's public HTTP API (a test service on a real port, an API key with the
 * scopes the routes need): public keys are imported as public-only keys and signatures checked
 * with POST /verify, MACs with /keys/{id}/mac/verify, AES-GCM with /keys/{id}/raw-decrypt, and
 * ML-KEM decapsulation with POST /decrypt, around an envelope built from docs/envelope-format.md.
 * node:crypto never gives a verdict; it (and noble) only checks what the service returned.
 *
 * Per file: total, applicable, passed, how the service answered, and why each inapplicable group
 * is so; the table goes to test-results/wycheproof.json and .md and to the output. Asserted:
 * every applicable vector passes (`acceptable` ones count as passed either way), the applicable
 * vectors are at least 95% of the shipped ones not counting the valid ML-KEM encapsulation
 * vectors that need caller-chosen randomness, and those number 399.
 */

const SCOPES: Scope[] = ['keys:read', 'keys:write', 'encryption:write']
/** Requests in flight at once: enough to keep two cores busy, few enough not to queue in the pool. */
const CONCURRENCY = 8
const RESULTS_DIR = join(PROJECT_ROOT, 'test-results')
const MIN_COVERAGE_PERCENT = 95
const CALLER_RANDOMNESS_VECTORS = 399

let svc: TestService
let tenant: TenantWithKey
const { call } = apiClient(() => ({ svc, tenant }))

// ---- Keys -------------------------------------------------------------------------------------

interface ImportSpec {
  keyType: 'Signing' | 'Encryption' | 'HMAC'
  algorithm: string
  format: 'DER' | 'RAW' | 'PKCS#8'
  keyMaterial: string
  publicOnly?: true
}

/** An error answer, as far as a verdict needs it. */
interface Refusal {
  status: number
  code: string | undefined
  field: string | undefined
  how: string
}

const refusalOf = (res: HttpResult): Refusal => ({
  status: res.status,
  code: res.body?.error,
  field: Array.isArray(res.body?.fields) ? res.body.fields[0]?.path : undefined,
  how: describeError(res),
})

/**
 * A 400 rejects the vector, unless it is a validation error about a field that does not carry the
 * vector's data (an option the route does not take, say): that is the API refusing the request,
 * not the vector, and would let an invalid vector pass for the wrong reason.
 */
function rejection(refusal: Refusal, dataFields: readonly string[], prefix = ''): Outcome {
  if (refusal.status !== 400) return { kind: 'wrong', how: `${prefix}${refusal.how}` }
  if (refusal.code === 'validation_failed' && !dataFields.includes(refusal.field ?? '')) {
    return {
      kind: 'wrong',
      how: `${prefix}${refusal.how}: a refusal of the request, not of the vector's data`,
    }
  }
  return { kind: 'rejected', how: `${prefix}${refusal.how}` }
}

type Imported = { ok: true; id: string; version: number; publicOnly: unknown } | ({ ok: false } & Refusal)

/** One import per distinct key, however many vectors use it (each import is a database write). */
const imports = new Map<string, Promise<Imported>>()
let keyCounter = 0

function importKey(spec: ImportSpec): Promise<Imported> {
  const cacheKey = JSON.stringify(spec)
  let pending = imports.get(cacheKey)
  if (!pending) {
    const name = `wycheproof-${++keyCounter}-${randomBytes(3).toString('hex')}`
    pending = call('POST', '/keys/import', { name, ...spec }).then(
      (res): Imported =>
        res.status === 201
          ? { ok: true, id: res.body.id, version: res.body.version, publicOnly: res.body.publicOnly }
          : { ok: false, ...refusalOf(res) },
    )
    imports.set(cacheKey, pending)
  }
  return pending
}

/** A key the vector needs refused: a failure, not a rejection of the vector. */
const importRefused = (imported: Extract<Imported, { ok: false }>): Outcome => ({
  kind: 'wrong',
  how: `a valid key's import answered ${imported.how}`,
})

/** For vectors whose key itself is invalid: the import must be refused (400) for the key material. */
function invalidKeyImport(imported: Imported, what: string): Outcome {
  if (imported.ok) return { kind: 'wrong', how: `${what} accepted by the import` }
  return rejection(imported, ['body/keyMaterial'], 'import refused: ')
}

// ---- Answers ----------------------------------------------------------------------------------

/** The request fields of /verify and /mac/verify that carry a vector's data. */
const VERIFY_DATA = ['body/message', 'body/signature', 'body/signatureContext']
const MAC_DATA = ['body/data', 'body/mac']
const RAW_DECRYPT_DATA = ['body/ciphertext', 'body/iv', 'body/tag', 'body/aad']
const DECRYPT_DATA = ['body/ciphertext', 'body/encapsulatedKey', 'body/nonce', 'body/tag']

function verifyOutcome(res: HttpResult, dataFields: readonly string[]): Outcome {
  if (res.status === 200 && res.body?.valid === true) return { kind: 'accepted', how: 'valid:true' }
  if (res.status === 200 && res.body?.valid === false) return { kind: 'rejected', how: 'valid:false' }
  // A signature the API refuses to parse is rejected too.
  return rejection(refusalOf(res), dataFields)
}

function plaintextOutcome(res: HttpResult, expected: Buffer, dataFields: readonly string[]): Outcome {
  if (res.status === 200) {
    return unb64(res.body?.plaintext ?? '').equals(expected)
      ? { kind: 'accepted', how: 'the plaintext' }
      : { kind: 'wrong', how: '200 with another plaintext' }
  }
  return rejection(refusalOf(res), dataFields)
}

// ---- Files ------------------------------------------------------------------------------------

type Work = (group: WycheproofGroup, test: WycheproofTest, groupIndex: number) => Promise<Outcome>

/** Every vector of the file through `work`, CONCURRENCY at a time, in file order. */
async function runVectors(file: VectorFile, work: Work): Promise<Verdict[]> {
  const items = file.testGroups.flatMap((group, groupIndex) =>
    group.tests.map((t) => ({ group, groupIndex, t })),
  )
  return mapConcurrently(items, CONCURRENCY, async ({ group, groupIndex, t }) => ({
    group: groupIndex,
    tcId: t.tcId,
    expected: t.result,
    comment: t.comment ?? '',
    outcome: await work(group, t, groupIndex),
  }))
}

const inapplicable = (reason: string): Outcome => ({ kind: 'inapplicable', reason })

type Mapper = (file: VectorFile, controls: Controls) => Promise<Verdict[]>

// Signatures: a public-only key per group, then POST /verify per vector.

interface SignatureMapping {
  /** The key to import, or why the group cannot be sent. */
  key(group: WycheproofGroup): ImportSpec | { inapplicable: string }
  /** True when the group's public key itself is invalid: the import must be refused. */
  keyInvalid?(group: WycheproofGroup): boolean
  /** The scheme options of the verify request. */
  options(group: WycheproofGroup, test: WycheproofTest): Record<string, unknown>
}

function signatureMapper(mapping: SignatureMapping): Mapper {
  return (file, controls) => {
    const viewed = new Set<string>()
    return runVectors(file, async (group, t) => {
      const spec = mapping.key(group)
      if ('inapplicable' in spec) return inapplicable(spec.inapplicable)
      const imported = await importKey(spec)
      if (mapping.keyInvalid?.(group)) return invalidKeyImport(imported, 'an invalid public key')
      if (!imported.ok) return importRefused(imported)
      if (!viewed.has(imported.id)) {
        viewed.add(imported.id)
        controls.record(
          'the imported key view says publicOnly: true',
          imported.publicOnly === true,
          () => `the key of tcId ${t.tcId}: publicOnly is ${String(imported.publicOnly)}`,
        )
      }
      const res = await call('POST', '/verify', {
        keyId: imported.id,
        message: b64(hex(t['msg'])),
        signature: b64(hex(t['sig'])),
        ...mapping.options(group, t),
      })
      return verifyOutcome(res, VERIFY_DATA)
    })
  }
}

const EC_CURVES: Record<string, { algorithm: string; sha: string }> = {
  secp256r1: { algorithm: 'EC-P256', sha: 'SHA-256' },
  secp384r1: { algorithm: 'EC-P384', sha: 'SHA-384' },
  secp521r1: { algorithm: 'EC-P521', sha: 'SHA-512' },
}

const ecdsa = (signatureFormat: 'DER' | 'P1363') =>
  signatureMapper({
    key(group) {
      const curve = (group['publicKey'] as { curve?: string } | undefined)?.curve ?? 'unknown'
      const known = EC_CURVES[curve]
      if (!known) return { inapplicable: `ECDSA on ${curve}: the service offers P-256, P-384 and P-521` }
      if (group['sha'] !== known.sha) {
        return {
          inapplicable: `ECDSA ${known.algorithm} with ${String(group['sha'])}: the service pairs the curve with ${known.sha}`,
        }
      }
      return {
        keyType: 'Signing',
        algorithm: known.algorithm,
        format: 'DER',
        keyMaterial: b64(hex(group['publicKeyDer'])),
        publicOnly: true,
      }
    },
    options: () => ({ messageType: 'RAW', signatureFormat }),
  })

const eddsa = signatureMapper({
  key(group) {
    const publicKey = group['publicKey'] as { curve?: string; pk?: string }
    if (publicKey.curve !== 'edwards25519') {
      return { inapplicable: `EdDSA on ${String(publicKey.curve)}: the service offers Ed25519 only` }
    }
    return {
      keyType: 'Signing',
      algorithm: 'Ed25519',
      format: 'RAW',
      keyMaterial: b64(hex(publicKey.pk)),
      publicOnly: true,
    }
  },
  options: () => ({}),
})

const rsaPss = signatureMapper({
  key(group) {
    const size = group['keySize']
    if (size !== 2048 && size !== 3072 && size !== 4096) {
      return {
        inapplicable: `RSA-PSS with a ${String(size)}-bit key: the service offers 2048, 3072 and 4096`,
      }
    }
    if (group['sha'] !== 'SHA-256' || group['mgf'] !== 'MGF1' || group['mgfSha'] !== 'SHA-256') {
      return {
        inapplicable: `RSA-PSS with ${String(group['sha'])} and ${String(group['mgf'])}-${String(group['mgfSha'])}: the service uses SHA-256 with MGF1-SHA-256`,
      }
    }
    return {
      keyType: 'Signing',
      algorithm: `RSA-${size}`,
      format: 'DER',
      keyMaterial: b64(hex(group['publicKeyDer'])),
      publicOnly: true,
    }
  },
  options: (group) => ({ messageType: 'RAW', rsaPadding: 'PSS', saltLength: group['sLen'] }),
})

const ML_DSA_PUBLIC_BYTES: Record<string, number> = {
  'ML-DSA-44': 1312,
  'ML-DSA-65': 1952,
  'ML-DSA-87': 2592,
}

function mlDsa(file: VectorFile, controls: Controls): Promise<Verdict[]> {
  const algorithm = file.algorithm
  const publicBytes = ML_DSA_PUBLIC_BYTES[algorithm]
  return signatureMapper({
    key(group) {
      if (!publicBytes)
        return { inapplicable: `${algorithm}: not an ML-DSA parameter set the service offers` }
      return {
        keyType: 'Signing',
        algorithm,
        format: 'RAW',
        keyMaterial: b64(hex(group['publicKey'])),
        publicOnly: true,
      }
    },
    // The vectors mark a malformed public key by its length (IncorrectPublicKeyLength).
    keyInvalid: (group) => hex(group['publicKey']).length !== publicBytes,
    options: (_group, t) => ('ctx' in t ? { signatureContext: b64(hex(t['ctx'])) } : {}),
  })(file, controls)
}

// MACs: an HMAC key per distinct key, then /keys/{id}/mac/verify.

const HMAC_ALGORITHMS: Record<string, { algorithm: string; bytes: number }> = {
  HMACSHA256: { algorithm: 'HMAC-SHA256', bytes: 32 },
  HMACSHA384: { algorithm: 'HMAC-SHA384', bytes: 48 },
  HMACSHA512: { algorithm: 'HMAC-SHA512', bytes: 64 },
}
/** The shortest MAC /mac/verify takes (macLength), in bytes. */
const MIN_MAC_BYTES = 16

const hmacFile: Mapper = (file) => {
  const known = HMAC_ALGORITHMS[file.algorithm]
  return runVectors(file, async (group, t) => {
    if (!known) return inapplicable(`${file.algorithm}: the service offers HMAC-SHA256, -SHA384 and -SHA512`)
    const tagBytes = Number(group['tagSize']) / 8
    if (tagBytes < MIN_MAC_BYTES) {
      return inapplicable(
        `MAC truncated to ${tagBytes} bytes: macLength takes ${MIN_MAC_BYTES} bytes or more`,
      )
    }
    const imported = await importKey({
      keyType: 'HMAC',
      algorithm: known.algorithm,
      format: 'RAW',
      keyMaterial: b64(hex(t['key'])),
    })
    if (!imported.ok) return importRefused(imported)
    const res = await call('POST', `/keys/${imported.id}/mac/verify`, {
      data: b64(hex(t['msg'])),
      mac: b64(hex(t['tag'])),
      ...(tagBytes < known.bytes ? { macLength: tagBytes } : {}),
    })
    return verifyOutcome(res, MAC_DATA)
  })
}

// AES-GCM: an AES key per distinct key, then /keys/{id}/raw-decrypt; raw-encrypt round trips.

/** What is wrong with raw-encrypt's answer for (msg, aad), opened with node:crypto; undefined if nothing. */
async function rawEncryptProblem(
  keyId: string,
  keySize: number,
  key: Buffer,
  msg: Buffer,
  aad: Buffer,
): Promise<string | undefined> {
  const sealed = await call('POST', `/keys/${keyId}/raw-encrypt`, {
    plaintext: b64(msg),
    ...(aad.length > 0 ? { aad: b64(aad) } : {}),
  })
  if (sealed.status !== 200) return describeError(sealed)
  const iv = unb64(sealed.body.iv)
  if (iv.length !== 12) return `an IV of ${iv.length} bytes, not 12`
  try {
    const decipher = createDecipheriv(`aes-${keySize}-gcm` as CipherGCMTypes, key, iv)
    decipher.setAAD(aad)
    decipher.setAuthTag(unb64(sealed.body.tag))
    const plain = Buffer.concat([decipher.update(unb64(sealed.body.ciphertext)), decipher.final()])
    return plain.equals(msg) ? undefined : 'node:crypto opens it to another plaintext'
  } catch (error) {
    return `node:crypto does not open it (${(error as Error).message})`
  }
}

const aead: Mapper = (file, controls) =>
  runVectors(file, async (group, t) => {
    if (file.algorithm !== 'AES-GCM')
      return inapplicable(`${file.algorithm}: the service's raw AEAD is AES-GCM`)
    const keySize = Number(group['keySize'])
    if (![128, 192, 256].includes(keySize)) {
      return inapplicable(`AES-GCM with a ${keySize}-bit key: the service offers 128, 192 and 256`)
    }
    if (group['tagSize'] !== 128) {
      return inapplicable(`AES-GCM with ${String(group['tagSize'])}-bit tags: raw-decrypt takes 16-byte tags`)
    }
    const key = hex(t['key'])
    const imported = await importKey({
      keyType: 'Encryption',
      algorithm: `AES-${keySize}-GCM`,
      format: 'RAW',
      keyMaterial: b64(key),
    })
    if (!imported.ok) return importRefused(imported)
    const msg = hex(t['msg'])
    const aad = hex(t['aad'])
    const res = await call('POST', `/keys/${imported.id}/raw-decrypt`, {
      ciphertext: b64(hex(t['ct'])),
      iv: b64(hex(t['iv'])),
      tag: b64(hex(t['tag'])),
      ...(aad.length > 0 ? { aad: b64(aad) } : {}),
    })
    const iv = hex(t['iv'])
    if (t.result !== 'invalid' && iv.length > RAW_IV_BYTES.max) {
      // The route documents its IV range; a longer one must be refused naming body/iv, and the
      // vector, whose IV the API does not take, is not applicable.
      const refused = res.status === 400 && refusalOf(res).field === 'body/iv'
      controls.record(
        `an IV over ${RAW_IV_BYTES.max} bytes is refused naming body/iv`,
        refused,
        () => `tcId ${t.tcId}: ${describeError(res)}`,
      )
      return inapplicable(
        `IV of ${iv.length} bytes: raw-decrypt takes ${RAW_IV_BYTES.min} to ${RAW_IV_BYTES.max} bytes (OpenSSL's AES-GCM limit)`,
      )
    }
    const outcome = plaintextOutcome(res, msg, RAW_DECRYPT_DATA)
    // Encryption picks its own 12-byte IV, so the vector's ciphertext cannot be asked for: the
    // encryption direction is checked by a round trip opened with node:crypto and the vector's key.
    if (t.result === 'valid' && iv.length === 12) {
      const problem = await rawEncryptProblem(imported.id, keySize, key, msg, aad)
      controls.record(
        'raw-encrypt of the message opens with node:crypto under the vector key',
        problem === undefined,
        () => `tcId ${t.tcId}: ${problem}`,
      )
    }
    return outcome
  })

// ML-KEM: a key from the seed (or the expanded key as PKCS#8); decapsulation through /decrypt.

const ML_KEM_SIZES: Record<string, { oid: string; seed: number }> = {
  'ML-KEM-512': { oid: '608648016503040401', seed: 64 },
  'ML-KEM-768': { oid: '608648016503040402', seed: 64 },
  'ML-KEM-1024': { oid: '608648016503040403', seed: 64 },
}

/** A DER TLV. */
function tlv(tag: number, value: Buffer): Buffer {
  const length =
    value.length < 0x80
      ? Buffer.of(value.length)
      : value.length < 0x100
        ? Buffer.of(0x81, value.length)
        : Buffer.of(0x82, value.length >> 8, value.length & 0xff)
  return Buffer.concat([Buffer.of(tag), length, value])
}

/**
 * PKCS#8 OneAsymmetricKey around an ML-KEM expanded decapsulation key: RFC 9935's
 * ML-KEM-PrivateKey CHOICE, alternative `expandedKey OCTET STRING` (no seed).
 */
function expandedKeyPkcs8(algorithm: string, dk: Buffer): Buffer {
  const oid = Buffer.from(ML_KEM_SIZES[algorithm]!.oid, 'hex')
  return tlv(
    0x30,
    Buffer.concat([tlv(0x02, Buffer.of(0)), tlv(0x30, tlv(0x06, oid)), tlv(0x04, tlv(0x04, dk))]),
  )
}

/** The exported RAW public key must be the vector's ek (checked once per key). */
const publicKeyChecks = new Map<string, Promise<Buffer | string>>()

async function exportedPublicKey(keyId: string): Promise<Buffer | string> {
  let pending = publicKeyChecks.get(keyId)
  if (!pending) {
    pending = call('GET', `/keys/${keyId}/public?format=RAW`).then((res) =>
      res.status === 200 ? unb64(res.body.publicKey) : describeError(res),
    )
    publicKeyChecks.set(keyId, pending)
  }
  return pending
}

/** Sends (c, K) through /decrypt under the key: the service's decapsulation of c must give K. */
async function decapsulationOutcome(
  imported: Extract<Imported, { ok: true }>,
  t: WycheproofTest,
  controls: Controls,
): Promise<Outcome> {
  const ek = hex(t['ek'])
  if (ek.length > 0) {
    const exported = await exportedPublicKey(imported.id)
    const same = Buffer.isBuffer(exported) && exported.equals(ek)
    controls.record('the RAW public key the service exports equals ek', same, () =>
      Buffer.isBuffer(exported) ? `tcId ${t.tcId}: another public key` : `tcId ${t.tcId}: ${exported}`,
    )
    if (!same) return { kind: 'wrong', how: 'the key derived from the vector is not its ek' }
  }
  const sharedSecret = hex(t['K'])
  const plaintext = Buffer.from(`Wycheproof tcId ${t.tcId}`)
  const context = `wycheproof/${t.tcId}`
  const envelope = sealMlKemEnvelope({
    keyId: imported.id,
    keyVersion: imported.version,
    kemCiphertext: hex(t['c']),
    // An invalid vector has no K: any secret will do, the ciphertext must not open.
    sharedSecret: sharedSecret.length > 0 ? sharedSecret : randomBytes(32),
    plaintext,
    context,
    nonce: randomBytes(12),
  })
  return plaintextOutcome(await call('POST', '/decrypt', { ...envelope, context }), plaintext, DECRYPT_DATA)
}

/**
 * An ML-KEM file's vectors through `work`, with the group's parameter set as the algorithm and
 * its sizes; a parameter set the service does not offer is inapplicable.
 */
const mlKemVectors =
  (
    work: (
      algorithm: string,
      size: { oid: string; seed: number },
      t: WycheproofTest,
      controls: Controls,
    ) => Promise<Outcome>,
  ): Mapper =>
  (file, controls) =>
    runVectors(file, async (group, t) => {
      const algorithm = String(group['parameterSet'])
      const size = ML_KEM_SIZES[algorithm]
      if (!size) return inapplicable(`${algorithm}: not an ML-KEM parameter set the service offers`)
      return work(algorithm, size, t, controls)
    })

/** An ML-KEM key from a vector's material (a seed, an expanded PKCS#8 or a public ek). */
const importMlKem = (algorithm: string, format: 'RAW' | 'PKCS#8', material: Buffer, publicOnly?: true) =>
  importKey({
    keyType: 'Encryption',
    algorithm,
    format,
    keyMaterial: b64(material),
    ...(publicOnly ? { publicOnly } : {}),
  })

const mlKem = mlKemVectors(async (algorithm, size, t, controls) => {
  const seed = hex(t['seed'])
  const imported = await importMlKem(algorithm, 'RAW', seed)
  if (seed.length !== size.seed) return invalidKeyImport(imported, `a ${seed.length}-byte seed`)
  if (!imported.ok) return importRefused(imported)
  return decapsulationOutcome(imported, t, controls)
})

const mlKemSemiExpanded = mlKemVectors(async (algorithm, _size, t, controls) => {
  const imported = await importMlKem(algorithm, 'PKCS#8', expandedKeyPkcs8(algorithm, hex(t['dk'])))
  const flags = t.flags ?? []
  if (flags.includes('IncorrectDecapsulationKeyLength') || flags.includes('InvalidDecapsulationKey')) {
    return invalidKeyImport(imported, 'an invalid decapsulation key')
  }
  if (!imported.ok) return importRefused(imported)
  return decapsulationOutcome(imported, t, controls)
})

const mlKemEncaps = mlKemVectors(async (algorithm, _size, t, controls) => {
  const imported = await importMlKem(algorithm, 'RAW', hex(t['ek']), true)
  if (t.result === 'invalid') return invalidKeyImport(imported, 'an invalid encapsulation key')
  // Refusing every ek would pass the invalid vectors: the valid ones' ek must be accepted.
  controls.record(
    'a valid ek imports as a public-only key',
    imported.ok && imported.publicOnly === true,
    () =>
      imported.ok
        ? `tcId ${t.tcId}: publicOnly is ${String(imported.publicOnly)}`
        : `tcId ${t.tcId}: ${imported.how}`,
  )
  if ('m' in t) return inapplicable(CALLER_RANDOMNESS)
  return inapplicable('valid ML-KEM encapsulation vector without m: nothing the API could be asked')
})

const MAPPERS: Record<string, Mapper> = {
  'ecdsa_verify_schema_v1.json': ecdsa('DER'),
  'ecdsa_p1363_verify_schema_v1.json': ecdsa('P1363'),
  'eddsa_verify_schema_v1.json': eddsa,
  'rsassa_pss_verify_schema_v1.json': rsaPss,
  'mldsa_verify_schema.json': mlDsa,
  'mac_test_schema_v1.json': hmacFile,
  'aead_test_schema_v1.json': aead,
  'mlkem_test_schema.json': mlKem,
  'mlkem_semi_expanded_decaps_test_schema.json': mlKemSemiExpanded,
  'mlkem_encaps_test_schema.json': mlKemEncaps,
}

async function runFile(file: VectorFile): Promise<FileReport> {
  const controls = new Controls()
  const mapper = MAPPERS[file.schema]
  const verdicts = mapper
    ? await mapper(file, controls)
    : await runVectors(file, async () =>
        inapplicable(`no mapping of schema ${file.schema} (${file.algorithm}) onto the API`),
      )
  return fileReport(file, verdicts, controls.list())
}

// ---- The run ----------------------------------------------------------------------------------

const problem = vectorDirProblem()

describe('Wycheproof vectors through the public API', () => {
  if (problem) {
    test('the vector directory', () => assert.fail(problem))
    return
  }
  const names = vectorFileNames()
  const reports: FileReport[] = []

  before(async () => {
    svc = await startTestService()
    tenant = await svc.createTenant(SCOPES)
  })
  after(async () => {
    await svc?.stop()
  })

  test('the envelope builder agrees with the service: it opens an /encrypt envelope, and /decrypt opens one it built', async () => {
    const seed = randomBytes(64)
    const kem = ml_kem768.keygen(seed)
    const imported = await importMlKem('ML-KEM-768', 'RAW', seed)
    assert.ok(imported.ok, imported.ok ? '' : imported.how)
    // The seed means the same to the service as to noble (d || z): the same public key.
    assert.deepEqual(await exportedPublicKey(imported.id), Buffer.from(kem.publicKey))

    const plaintext = randomBytes(100)
    const context = 'wycheproof builder check'
    const encrypted = await call('POST', '/encrypt', {
      keyId: imported.id,
      plaintext: b64(plaintext),
      context,
    })
    assert.equal(encrypted.status, 200, encrypted.text)
    const opened = openMlKemEnvelope(encrypted.body, (c) => ml_kem768.decapsulate(c, kem.secretKey), context)
    assert.deepEqual(opened, plaintext, 'the builder opens what the service sealed')

    const { cipherText, sharedSecret } = ml_kem768.encapsulate(kem.publicKey)
    const sealed = (secret: Uint8Array) =>
      sealMlKemEnvelope({
        keyId: imported.id,
        keyVersion: imported.version,
        kemCiphertext: cipherText,
        sharedSecret: secret,
        plaintext,
        context,
        nonce: randomBytes(12),
      })
    const decrypted = await call('POST', '/decrypt', { ...sealed(sharedSecret), context })
    assert.equal(decrypted.status, 200, decrypted.text)
    assert.deepEqual(unb64(decrypted.body.plaintext), plaintext, 'the service opens what the builder sealed')
    const wrongSecret = await call('POST', '/decrypt', { ...sealed(randomBytes(32)), context })
    assert.equal(wrongSecret.status, 400, wrongSecret.text)
    assert.equal(wrongSecret.body.error, 'decryption_failed')
  })

  for (const name of names) {
    test(`${name}: every applicable vector passes`, async () => {
      const report = await runFile(loadVectorFile(name))
      reports.push(report)
      const failed = [
        ...report.failures.map((f) => `tcId ${f.tcId} (${f.expected}, ${f.comment}): ${f.got}`),
        ...report.controls.flatMap((c) => c.failures.map((f) => `${c.name}: ${f}`)),
      ]
      assert.deepEqual(failed.slice(0, 30), [], `${failed.length} failures in ${name}`)
      assert.equal(report.passed, report.applicable)
    })
  }

  test(`the table: every file reported, applicable ≥ ${MIN_COVERAGE_PERCENT}% of the vectors not needing caller randomness, and those are ${CALLER_RANDOMNESS_VECTORS}`, () => {
    reports.sort((a, b) => a.file.localeCompare(b.file))
    const summary = summarize(reports, vectorSource())
    mkdirSync(RESULTS_DIR, { recursive: true })
    writeFileSync(join(RESULTS_DIR, 'wycheproof.json'), `${JSON.stringify(summary, null, 2)}\n`)
    const table = markdown(summary)
    writeFileSync(join(RESULTS_DIR, 'wycheproof.md'), table)
    console.log(table)

    assert.deepEqual(
      reports.map((r) => r.file),
      names,
      `every file in ${VECTOR_DIR} has a report (a file whose test threw has none)`,
    )
    assert.equal(summary.callerRandomness, CALLER_RANDOMNESS_VECTORS)
    assert.ok(
      summary.coverage >= MIN_COVERAGE_PERCENT,
      `${summary.applicable} of ${summary.counted} vectors applicable (${summary.coverage.toFixed(1)}%)`,
    )
    assert.equal(summary.passed, summary.applicable, 'every applicable vector passes')
  })
})
