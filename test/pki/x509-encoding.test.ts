import 'reflect-metadata'
import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import {
  createPublicKey,
  generateKeyPairSync,
  type KeyObject,
  sign as nodeSign,
  verify as nodeVerify,
  randomBytes,
  type webcrypto,
  X509Certificate,
} from 'node:crypto'
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { promisify } from 'node:util'
import { ml_dsa44, ml_dsa65, ml_dsa87 } from '@noble/post-quantum/ml-dsa.js'
import { slh_dsa_sha2_128s } from '@noble/post-quantum/slh-dsa.js'
import * as x509 from '@peculiar/x509'
import { buildCrl } from '../../src/pki/crl.ts'
import { buildCsr, CsrError, parseCsr } from '../../src/pki/csr.ts'
import {
  buildCertificate,
  type CertificateTemplate,
  encodeName,
  fromPem,
  type IssuerAlgorithm,
  keyIdentifierOf,
  parseCertificate,
  signatureAlgorithmOf,
  toPem,
} from '../../src/pki/x509.ts'

/**
 * The X.509 encoding core (src/pki): certificates for every issuer key algorithm, CSRs and CRLs,
 * each checked by an independent implementation: node:crypto's X509Certificate (OpenSSL 3.5),
 * @peculiar/x509 over WebCrypto, @noble/post-quantum for ML-DSA and SLH-DSA signatures, and the
 * system `openssl` (3.0) for chains with name constraints, CSRs and CRLs.
 */

x509.cryptoProvider.set(globalThis.crypto)
const run = promisify(execFile)

const ALGORITHMS: readonly IssuerAlgorithm[] = [
  'ML-DSA-44',
  'ML-DSA-65',
  'ML-DSA-87',
  'SLH-DSA-128s',
  'EC-P256',
  'EC-P384',
  'EC-P521',
  'RSA-2048',
  'RSA-3072',
  'RSA-4096',
  'Ed25519',
]
const CLASSICAL = new Set<IssuerAlgorithm>([
  'EC-P256',
  'EC-P384',
  'EC-P521',
  'RSA-2048',
  'RSA-3072',
  'RSA-4096',
  'Ed25519',
])
const NOBLE_ML_DSA = { 'ML-DSA-44': ml_dsa44, 'ML-DSA-65': ml_dsa65, 'ML-DSA-87': ml_dsa87 } as const

/** The AlgorithmIdentifiers as RFC 9881 / RFC 9909 / RFC 8410 / RFC 5758 / RFC 4055 print them. */
const EXPECTED_ALGORITHM_IDENTIFIER: Record<IssuerAlgorithm, string> = {
  'ML-DSA-44': '300b0609608648016503040311',
  'ML-DSA-65': '300b0609608648016503040312',
  'ML-DSA-87': '300b0609608648016503040313',
  'SLH-DSA-128s': '300b0609608648016503040314',
  'EC-P256': '300a06082a8648ce3d040302',
  'EC-P384': '300a06082a8648ce3d040303',
  'EC-P521': '300a06082a8648ce3d040304',
  'RSA-2048': '300d06092a864886f70d01010b0500',
  'RSA-3072': '300d06092a864886f70d01010b0500',
  'RSA-4096': '300d06092a864886f70d01010b0500',
  Ed25519: '300506032b6570',
}

interface KeyPair {
  publicKey: KeyObject
  privateKey: KeyObject
}

function keyPairFor(algorithm: IssuerAlgorithm): KeyPair {
  switch (algorithm) {
    case 'EC-P256':
    case 'EC-P384':
    case 'EC-P521':
      return generateKeyPairSync('ec', { namedCurve: `P-${algorithm.slice(4)}` })
    case 'RSA-2048':
    case 'RSA-3072':
    case 'RSA-4096':
      return generateKeyPairSync('rsa', { modulusLength: Number(algorithm.slice(4)) })
    case 'Ed25519':
      return generateKeyPairSync('ed25519')
    case 'SLH-DSA-128s':
      return generateKeyPairSync('slh-dsa-sha2-128s')
    default:
      return generateKeyPairSync(algorithm.toLowerCase() as 'ml-dsa-44' | 'ml-dsa-65' | 'ml-dsa-87')
  }
}

const HASH: Partial<Record<IssuerAlgorithm, string>> = {
  'EC-P256': 'sha256',
  'EC-P384': 'sha384',
  'EC-P521': 'sha512',
  'RSA-2048': 'sha256',
  'RSA-3072': 'sha256',
  'RSA-4096': 'sha256',
}

/** What the service's issuer signer returns: node:crypto.sign with the key's hash (DER ECDSA). */
const signerFor = (algorithm: IssuerAlgorithm, privateKey: KeyObject) => async (tbs: Buffer) =>
  nodeSign(HASH[algorithm] ?? null, tbs, privateKey)

const spkiOf = (key: KeyObject) => key.export({ type: 'spki', format: 'der' })

/** The first element inside a DER SEQUENCE (the signed part of a certificate or CRL), read by hand. */
function signedPart(der: Buffer): Buffer {
  const header = (at: number) => (der[at + 1]! < 0x80 ? 2 : 2 + (der[at + 1]! & 0x7f))
  const length = (at: number) => {
    if (der[at + 1]! < 0x80) return der[at + 1]!
    let n = 0
    for (let i = 0; i < (der[at + 1]! & 0x7f); i++) n = n * 256 + der[at + 2 + i]!
    return n
  }
  const start = header(0)
  return der.subarray(start, start + header(start) + length(start))
}

/** The raw public key of an ML-DSA / SLH-DSA SPKI: the BIT STRING's tail, of the algorithm's fixed size. */
const rawPublicKey = (spki: Buffer, size: number) => spki.subarray(spki.length - size)
const ML_DSA_PUBLIC_KEY_BYTES = { 'ML-DSA-44': 1312, 'ML-DSA-65': 1952, 'ML-DSA-87': 2592 } as const

const NOT_BEFORE = new Date('2026-01-01T00:00:00Z')
const NOT_AFTER = new Date('2036-01-01T00:00:00Z')

interface Issuer {
  algorithm: IssuerAlgorithm
  keys: KeyPair
  der: Buffer
  subject: Buffer
  keyIdentifier: Buffer
}

async function makeRoot(algorithm: IssuerAlgorithm, keys = keyPairFor(algorithm)): Promise<Issuer> {
  const spki = spkiOf(keys.publicKey)
  const subject = encodeName({ commonName: `Root ${algorithm}`, organization: 'Example Org', country: 'FR' })
  const keyIdentifier = keyIdentifierOf(spki)
  const der = await buildCertificate(
    {
      serial: Buffer.from('0badc0ffee', 'hex'),
      issuer: subject,
      subject,
      notBefore: NOT_BEFORE,
      notAfter: NOT_AFTER,
      subjectPublicKeyInfo: spki,
      signatureAlgorithm: algorithm,
      basicConstraints: { ca: true, pathLength: 1 },
      keyUsage: ['keyCertSign', 'cRLSign'],
      subjectKeyIdentifier: keyIdentifier,
      authorityKeyIdentifier: keyIdentifier,
    },
    signerFor(algorithm, keys.privateKey),
  )
  return { algorithm, keys, der, subject, keyIdentifier }
}

function issuedBy(
  issuer: Issuer,
  spki: Buffer,
  fields: Partial<CertificateTemplate> & Pick<CertificateTemplate, 'subject'>,
): Promise<Buffer> {
  return buildCertificate(
    {
      serial: randomBytes(16).fill(0x7f, 0, 1),
      issuer: issuer.subject,
      notBefore: NOT_BEFORE,
      notAfter: NOT_AFTER,
      subjectPublicKeyInfo: spki,
      signatureAlgorithm: issuer.algorithm,
      subjectKeyIdentifier: keyIdentifierOf(spki),
      authorityKeyIdentifier: issuer.keyIdentifier,
      ...fields,
    },
    signerFor(issuer.algorithm, issuer.keys.privateKey),
  )
}

let workDir: string
before(async () => {
  workDir = await mkdtemp(join(tmpdir(), 'pki-x509-'))
})
after(async () => {
  await rm(workDir, { recursive: true, force: true })
})

async function writeTemp(name: string, content: string | Buffer): Promise<string> {
  const path = join(workDir, name)
  await writeFile(path, content)
  return path
}

describe('certificates for every issuer key algorithm', () => {
  for (const algorithm of ALGORITHMS) {
    test(`${algorithm}: a root and a server leaf verify with node:crypto${CLASSICAL.has(algorithm) ? ' and @peculiar/x509' : ' and @noble/post-quantum'}`, async () => {
      const root = await makeRoot(algorithm)
      const leafKeys = generateKeyPairSync('ec', { namedCurve: 'P-256' })
      const serial = Buffer.from('8001020304050607', 'hex') // high bit set: written with a 0x00 sign octet
      const leafDer = await issuedBy(root, spkiOf(leafKeys.publicKey), {
        serial,
        subject: encodeName({
          commonName: 'www.example.com',
          organizationalUnit: 'Web',
          locality: 'Paris',
          state: 'IDF',
        }),
        basicConstraints: { ca: false },
        keyUsage: ['digitalSignature'],
        extendedKeyUsage: ['serverAuth'],
        subjectAltNames: { dns: ['www.example.com'], ip: ['192.0.2.10', '2001:db8::1'] },
        crlDistributionPoints: ['http://pki.example.com/root.crl'],
        authorityInfoAccess: {
          caIssuers: ['http://pki.example.com/root.cer'],
          ocsp: ['http://ocsp.example.com'],
        },
      })

      const rootCert = new X509Certificate(root.der)
      const leaf = new X509Certificate(leafDer)
      assert.ok(rootCert.verify(root.keys.publicKey), 'the root is self-signed')
      assert.ok(leaf.verify(root.keys.publicKey), 'the leaf is signed by the root key')
      assert.ok(leaf.checkIssued(rootCert))
      assert.ok(rootCert.checkIssued(rootCert))
      assert.equal(rootCert.ca, true)
      assert.equal(leaf.ca, false)
      assert.equal(
        leaf.subjectAltName,
        'DNS:www.example.com, IP Address:192.0.2.10, IP Address:2001:DB8:0:0:0:0:0:1',
      )
      assert.deepEqual(leaf.keyUsage, ['1.3.6.1.5.5.7.3.1'])
      assert.equal(leaf.validFromDate.getTime(), NOT_BEFORE.getTime())
      assert.equal(leaf.validToDate.getTime(), NOT_AFTER.getTime())
      assert.equal(leaf.serialNumber, '8001020304050607')
      assert.ok(leafDer.includes(Buffer.from('0209008001020304050607', 'hex')), 'a positive INTEGER')
      assert.equal(rootCert.serialNumber, '0BADC0FFEE')
      assert.equal(rootCert.subject, `C=FR\nO=Example Org\nCN=Root ${algorithm}`)
      assert.equal(leaf.issuer, rootCert.subject)
      assert.match(leaf.infoAccess ?? '', /CA Issuers - URI:http:\/\/pki\.example\.com\/root\.cer/)
      assert.match(leaf.infoAccess ?? '', /OCSP - URI:http:\/\/ocsp\.example\.com/)

      // The signature algorithm, as the RFCs write it, inside and outside the signed part.
      const algorithmIdentifier = Buffer.from(EXPECTED_ALGORITHM_IDENTIFIER[algorithm], 'hex')
      assert.deepEqual(signatureAlgorithmOf(algorithm), algorithmIdentifier)
      const tbs = signedPart(leafDer)
      assert.deepEqual(
        leafDer.subarray(4 + tbs.length, 4 + tbs.length + algorithmIdentifier.length),
        algorithmIdentifier,
      )
      assert.ok(tbs.includes(algorithmIdentifier))

      const parsed = parseCertificate(leafDer)
      assert.deepEqual(parsed.serial, serial)
      assert.deepEqual(parsed.tbs, tbs)
      assert.deepEqual(parsed.issuer, root.subject)
      assert.equal(parsed.commonName, 'www.example.com')
      assert.deepEqual(parsed.basicConstraints, { ca: false })
      assert.deepEqual(parsed.subjectKeyIdentifier, keyIdentifierOf(spkiOf(leafKeys.publicKey)))
      assert.deepEqual(parseCertificate(root.der).basicConstraints, { ca: true, pathLength: 1 })

      const peculiarRoot = new x509.X509Certificate(root.der)
      const peculiarLeaf = new x509.X509Certificate(leafDer)
      assert.deepEqual(Buffer.from(peculiarLeaf.signature), parsed.signature)
      if (CLASSICAL.has(algorithm)) {
        assert.ok(await peculiarRoot.verify({ signatureOnly: true }))
        assert.ok(await peculiarLeaf.verify({ publicKey: peculiarRoot.publicKey, signatureOnly: true }))
        const constraints = peculiarRoot.getExtension(x509.BasicConstraintsExtension)
        assert.equal(constraints?.ca, true)
        assert.equal(constraints?.pathLength, 1)
        assert.equal(constraints?.critical, true)
        const usages = peculiarRoot.getExtension(x509.KeyUsagesExtension)
        assert.equal(usages?.usages, x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign)
        const san = peculiarLeaf.getExtension(x509.SubjectAlternativeNameExtension)
        assert.deepEqual(
          san?.names.toJSON().map((n) => [n.type, n.value]),
          [
            ['dns', 'www.example.com'],
            ['ip', '192.0.2.10'],
            ['ip', '2001:db8::1'],
          ],
        )
        assert.equal(san?.critical, false)
      } else if (algorithm === 'SLH-DSA-128s') {
        const publicKey = rawPublicKey(spkiOf(root.keys.publicKey), 32)
        assert.ok(slh_dsa_sha2_128s.verify(parsed.signature, tbs, publicKey))
      } else {
        const mlDsa = NOBLE_ML_DSA[algorithm as keyof typeof NOBLE_ML_DSA]
        const size = ML_DSA_PUBLIC_KEY_BYTES[algorithm as keyof typeof ML_DSA_PUBLIC_KEY_BYTES]
        const publicKey = rawPublicKey(spkiOf(root.keys.publicKey), size)
        assert.ok(mlDsa.verify(Buffer.from(peculiarLeaf.signature), tbs, publicKey))
        assert.ok(
          !mlDsa.verify(Buffer.from(peculiarLeaf.signature), Buffer.concat([tbs, Buffer.of(0)]), publicKey),
        )
        // RFC 9881: the parameters are absent (not NULL): the identifier is the OID alone.
        assert.equal(algorithmIdentifier.length, 2 + 11)
      }
    })
  }

  test('an ML-KEM-768 leaf (keyEncipherment only) under an ML-DSA-65 root verifies with node:crypto', async () => {
    const root = await makeRoot('ML-DSA-65')
    const kem = generateKeyPairSync('ml-kem-768')
    const spki = spkiOf(kem.publicKey)
    const der = await issuedBy(root, spki, {
      subject: encodeName({ commonName: 'kem.example.com' }),
      keyUsage: ['keyEncipherment'],
      subjectAltNames: { dns: ['kem.example.com'] },
    })
    const leaf = new X509Certificate(der)
    assert.ok(leaf.verify(root.keys.publicKey))
    assert.ok(leaf.checkIssued(new X509Certificate(root.der)))
    assert.equal(leaf.publicKey.asymmetricKeyType, 'ml-kem-768')
    assert.deepEqual(spkiOf(leaf.publicKey), spki)
    const tbs = signedPart(der)
    assert.ok(
      ml_dsa65.verify(parseCertificate(der).signature, tbs, rawPublicKey(spkiOf(root.keys.publicKey), 1952)),
    )
    // KeyUsage with only bit 2: BIT STRING 05 (unused bits) 20.
    assert.ok(der.includes(Buffer.from('0603551d0f0101ff040403020520', 'hex')))
  })
})

describe('chains and validity encoding', () => {
  test('a 3-level chain through a name-constrained intermediate: node:crypto checkIssued, openssl verify enforces the constraints', async () => {
    const root = await makeRoot('EC-P384')
    const intermediateKeys = keyPairFor('EC-P256')
    const intermediateSpki = spkiOf(intermediateKeys.publicKey)
    const intermediateSubject = encodeName({ commonName: 'Issuing CA', organization: 'Example Org' })
    const intermediateDer = await issuedBy(root, intermediateSpki, {
      subject: intermediateSubject,
      basicConstraints: { ca: true, pathLength: 0 },
      keyUsage: ['keyCertSign', 'cRLSign', 'digitalSignature'],
      nameConstraints: {
        permittedDns: ['example.com'],
        excludedDns: ['secret.example.com'],
        permittedIp: ['10.0.0.0/8', '2001:db8::/32'],
        excludedIp: ['10.66.0.0/16'],
      },
    })
    const intermediate: Issuer = {
      algorithm: 'EC-P256',
      keys: intermediateKeys,
      der: intermediateDer,
      subject: intermediateSubject,
      keyIdentifier: keyIdentifierOf(intermediateSpki),
    }
    const leafFor = (dns: string, ip: string) =>
      issuedBy(intermediate, spkiOf(keyPairFor('EC-P256').publicKey), {
        subject: Buffer.from('3000', 'hex'), // empty subject: the SAN is critical
        extendedKeyUsage: ['serverAuth', 'clientAuth'],
        subjectAltNames: { dns: [dns], ip: [ip] },
      })
    const goodLeaf = await leafFor('api.example.com', '10.1.2.3')

    const rootCert = new X509Certificate(root.der)
    const intermediateCert = new X509Certificate(intermediateDer)
    const leaf = new X509Certificate(goodLeaf)
    assert.ok(intermediateCert.checkIssued(rootCert))
    assert.ok(intermediateCert.verify(root.keys.publicKey))
    assert.ok(leaf.checkIssued(intermediateCert))
    assert.ok(leaf.verify(intermediateKeys.publicKey))
    assert.equal(leaf.subject, undefined, 'an empty subject')
    assert.ok(goodLeaf.includes(Buffer.from('0603551d110101ff', 'hex')), 'the SAN is critical')
    assert.equal(parseCertificate(goodLeaf).commonName, null)

    const rootPath = await writeTemp('chain-root.pem', toPem(root.der, 'CERTIFICATE'))
    const intermediatePath = await writeTemp('chain-intermediate.pem', toPem(intermediateDer, 'CERTIFICATE'))
    const verifyWithOpenssl = async (der: Buffer, name: string) => {
      const path = await writeTemp(name, toPem(der, 'CERTIFICATE'))
      try {
        const { stdout } = await run('openssl', [
          'verify',
          '-CAfile',
          rootPath,
          '-untrusted',
          intermediatePath,
          path,
        ])
        return stdout
      } catch (error) {
        return String((error as { stdout?: string; stderr?: string }).stderr ?? error)
      }
    }
    assert.match(await verifyWithOpenssl(goodLeaf, 'good.pem'), /good\.pem: OK/)
    const text = (await run('openssl', ['x509', '-in', intermediatePath, '-noout', '-text'])).stdout
    assert.match(text, /X509v3 Name Constraints: critical/)
    assert.match(
      text,
      /Permitted:\s+DNS:example\.com\s+IP:10\.0\.0\.0\/255\.0\.0\.0\s+IP:2001:DB8:0:0:0:0:0:0\/FFFF:FFFF:0:0:0:0:0:0/,
    )
    assert.match(text, /Excluded:\s+DNS:secret\.example\.com\s+IP:10\.66\.0\.0\/255\.255\.0\.0/)
    assert.match(
      await verifyWithOpenssl(await leafFor('www.example.org', '10.1.2.3'), 'outside.pem'),
      /permitted subtree violation/,
    )
    assert.match(
      await verifyWithOpenssl(await leafFor('db.secret.example.com', '10.1.2.3'), 'excluded.pem'),
      /excluded subtree violation/,
    )
    assert.match(
      await verifyWithOpenssl(await leafFor('api.example.com', '10.66.1.1'), 'excluded-ip.pem'),
      /excluded subtree violation/,
    )
  })

  test('validity: 2049-12-31 as UTCTime, 2050-01-01 as GeneralizedTime, read back right by X509Certificate', async () => {
    const keys = keyPairFor('Ed25519')
    const spki = spkiOf(keys.publicKey)
    const subject = encodeName({ commonName: 'Boundary' })
    const notBefore = new Date('2049-12-31T23:59:59Z')
    const notAfter = new Date('2050-01-01T00:00:00Z')
    const der = await buildCertificate(
      {
        serial: Buffer.of(1),
        issuer: subject,
        subject,
        notBefore,
        notAfter,
        subjectPublicKeyInfo: spki,
        signatureAlgorithm: 'Ed25519',
        subjectKeyIdentifier: keyIdentifierOf(spki),
      },
      signerFor('Ed25519', keys.privateKey),
    )
    assert.ok(der.includes(Buffer.concat([Buffer.of(0x17, 13), Buffer.from('491231235959Z')])))
    assert.ok(der.includes(Buffer.concat([Buffer.of(0x18, 15), Buffer.from('20500101000000Z')])))
    const cert = new X509Certificate(der)
    assert.equal(cert.validFromDate.toISOString(), '2049-12-31T23:59:59.000Z')
    assert.equal(cert.validToDate.toISOString(), '2050-01-01T00:00:00.000Z')
    const peculiar = new x509.X509Certificate(der)
    assert.equal(peculiar.notBefore.toISOString(), '2049-12-31T23:59:59.000Z')
    assert.equal(peculiar.notAfter.toISOString(), '2050-01-01T00:00:00.000Z')
    const parsed = parseCertificate(der)
    assert.equal(parsed.notBefore.toISOString(), '2049-12-31T23:59:59.000Z')
    assert.equal(parsed.notAfter.toISOString(), '2050-01-01T00:00:00.000Z')
  })

  test('PEM: toPem output is read by node:crypto and fromPem; fromPem refuses a missing or malformed block', async () => {
    const root = await makeRoot('EC-P256')
    const pem = toPem(root.der, 'CERTIFICATE')
    assert.ok(pem.split('\n').every((line) => line.length <= 64))
    assert.equal(new X509Certificate(pem).fingerprint256, new X509Certificate(root.der).fingerprint256)
    assert.deepEqual(fromPem(`\r\n  ${pem.replaceAll('\n', '\r\n')}\n\n`, 'CERTIFICATE'), root.der)
    assert.throws(() => fromPem(pem, 'X509 CRL'), /X509 CRL PEM must be one block/)
    assert.throws(() => fromPem(`junk\n${pem}`, 'CERTIFICATE'), /must be one block/)
    assert.throws(() => fromPem(pem.replace('M', '*'), 'CERTIFICATE'), /not valid base64/)
    assert.throws(() => fromPem(`${pem}${pem}`, 'CERTIFICATE'), /not valid base64/)
    assert.throws(() => fromPem('x'.repeat(300_000), 'CERTIFICATE'), /longer than/)
  })
})

describe('CSRs', () => {
  async function peculiarCsr(
    algorithm: webcrypto.AlgorithmIdentifier | webcrypto.RsaHashedKeyGenParams | webcrypto.EcKeyGenParams,
    signing: webcrypto.AlgorithmIdentifier,
  ) {
    const keys = (await crypto.subtle.generateKey(algorithm, true, [
      'sign',
      'verify',
    ])) as webcrypto.CryptoKeyPair
    const csr = await x509.Pkcs10CertificateRequestGenerator.create({
      name: 'CN=peculiar.example.com, O=Example Org',
      keys,
      signingAlgorithm: signing,
      extensions: [
        new x509.SubjectAlternativeNameExtension([
          { type: 'dns', value: 'peculiar.example.com' },
          { type: 'ip', value: '192.0.2.7' },
          { type: 'email', value: 'pki@example.com' },
        ]),
      ],
    })
    return { csr, spki: Buffer.from(await crypto.subtle.exportKey('spki', keys.publicKey)) }
  }

  const peculiarCases = [
    {
      name: 'EC P-256',
      keyAlgorithm: 'EC-P256',
      gen: { name: 'ECDSA', namedCurve: 'P-256' },
      sign: { name: 'ECDSA', hash: 'SHA-256' },
    },
    {
      name: 'EC P-521',
      keyAlgorithm: 'EC-P521',
      gen: { name: 'ECDSA', namedCurve: 'P-521' },
      sign: { name: 'ECDSA', hash: 'SHA-512' },
    },
    {
      name: 'RSA-2048',
      keyAlgorithm: 'RSA-2048',
      gen: {
        name: 'RSASSA-PKCS1-v1_5',
        modulusLength: 2048,
        publicExponent: new Uint8Array([1, 0, 1]),
        hash: 'SHA-256',
      },
      sign: { name: 'RSASSA-PKCS1-v1_5' },
    },
    { name: 'Ed25519', keyAlgorithm: 'Ed25519', gen: { name: 'Ed25519' }, sign: { name: 'Ed25519' } },
    { name: 'ML-DSA-65', keyAlgorithm: 'ML-DSA-65', gen: { name: 'ML-DSA-65' }, sign: { name: 'ML-DSA-65' } },
  ] as const

  for (const c of peculiarCases) {
    test(`a CSR made by @peculiar/x509 with ${c.name} is parsed, its names and key read`, async () => {
      const { csr, spki } = await peculiarCsr(
        c.gen as webcrypto.AlgorithmIdentifier,
        c.sign as webcrypto.AlgorithmIdentifier,
      )
      assert.ok(await csr.verify(), '@peculiar/x509 accepts its own CSR')
      for (const input of [csr.toString('pem'), Buffer.from(csr.rawData)]) {
        const parsed = parseCsr(input)
        assert.equal(parsed.keyAlgorithm, c.keyAlgorithm)
        assert.equal(parsed.commonName, 'peculiar.example.com')
        assert.deepEqual(parsed.subjectPublicKeyInfo, spki)
        assert.deepEqual(spkiOf(parsed.publicKey), spki)
        assert.deepEqual(parsed.requested, {
          dns: ['peculiar.example.com'],
          ip: ['192.0.2.7'],
          email: ['pki@example.com'],
          uri: [],
        })
        assert.deepEqual(parsed.subject, Buffer.from(csr.subjectName.toArrayBuffer()))
      }
    })
  }

  const opensslCases = [
    { name: 'RSA-2048 (SHA-384)', args: ['-newkey', 'rsa:2048', '-sha384'], keyAlgorithm: 'RSA-2048' },
    {
      name: 'EC P-384',
      args: ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-384'],
      keyAlgorithm: 'EC-P384',
    },
    { name: 'Ed25519', args: ['-newkey', 'ed25519'], keyAlgorithm: 'Ed25519' },
  ]
  async function opensslCsr(name: string, args: string[], san?: string): Promise<string> {
    const out = join(workDir, `${name}.csr`)
    await run('openssl', [
      'req',
      '-new',
      ...args,
      '-nodes',
      '-keyout',
      join(workDir, `${name}.key`),
      '-subj',
      '/C=DE/O=Example Org/CN=openssl.example.com',
      ...(san ? ['-addext', `subjectAltName=${san}`] : []),
      '-out',
      out,
    ])
    return readFile(out, 'utf8')
  }

  for (const c of opensslCases) {
    test(`a CSR made by openssl req with ${c.name} and a subjectAltName is parsed`, async () => {
      const pem = await opensslCsr(
        c.keyAlgorithm,
        c.args,
        'DNS:openssl.example.com,DNS:*.openssl.example.com,IP:198.51.100.4,IP:2001:db8::42,email:ops@example.com,URI:https://example.com/id',
      )
      const parsed = parseCsr(pem)
      assert.equal(parsed.keyAlgorithm, c.keyAlgorithm)
      assert.equal(parsed.commonName, 'openssl.example.com')
      assert.deepEqual(parsed.requested, {
        dns: ['openssl.example.com', '*.openssl.example.com'],
        ip: ['198.51.100.4', '2001:db8::42'],
        email: ['ops@example.com'],
        uri: ['https://example.com/id'],
      })
      const key = await readFile(join(workDir, `${c.keyAlgorithm}.key`), 'utf8')
      assert.deepEqual(parsed.subjectPublicKeyInfo, spkiOf(createPublicKey(key)))
    })
  }

  test('a CSR with one signature byte changed, or made with RSA-1024, is a CsrError', async () => {
    const pem = await opensslCsr('tamper', ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256'])
    const der = fromPem(pem, 'CERTIFICATE REQUEST')
    assert.equal(parseCsr(der).keyAlgorithm, 'EC-P256')
    const tampered = Buffer.from(der)
    tampered[tampered.length - 3]! ^= 0x01
    assert.throws(
      () => parseCsr(tampered),
      (e) => e instanceof CsrError && /proof of possession/.test(e.message),
    )
    const weak = await opensslCsr('weak', ['-newkey', 'rsa:1024'])
    assert.throws(
      () => parseCsr(weak),
      (e) => e instanceof CsrError && e.statusCode === 400 && /1024 bits; 2048 to 8192/.test(e.message),
    )
    assert.throws(() => parseCsr('not a csr'), CsrError)
    assert.throws(() => parseCsr(Buffer.alloc(70_000, 0x30)), /larger than 64 KiB/)
  })

  for (const algorithm of ['EC-P256', 'ML-DSA-65', 'RSA-2048'] as const) {
    test(`buildCsr (${algorithm}) is read back by parseCsr, @peculiar/x509 and openssl`, async () => {
      const keys = keyPairFor(algorithm)
      const spki = spkiOf(keys.publicKey)
      const subject = encodeName({
        commonName: `Intermediate ${algorithm}`,
        organization: 'Example Org',
        country: 'US',
      })
      const der = await buildCsr(subject, spki, algorithm, signerFor(algorithm, keys.privateKey))
      const parsed = parseCsr(der)
      assert.equal(parsed.keyAlgorithm, algorithm)
      assert.deepEqual(parsed.subject, subject)
      assert.equal(parsed.commonName, `Intermediate ${algorithm}`)
      assert.deepEqual(parsed.requested, { dns: [], ip: [], email: [], uri: [] })
      assert.ok(await new x509.Pkcs10CertificateRequest(der).verify())
      assert.equal(
        new x509.Pkcs10CertificateRequest(der).subject,
        `C=US, O=Example Org, CN=Intermediate ${algorithm}`,
      )
      if (algorithm !== 'ML-DSA-65') {
        const path = await writeTemp(`built-${algorithm}.csr`, toPem(der, 'CERTIFICATE REQUEST'))
        const { stderr, stdout } = await run('openssl', ['req', '-in', path, '-verify', '-noout'])
        assert.match(stderr + stdout, /verify OK/i)
      }
    })
  }
})

describe('CRLs', () => {
  for (const algorithm of ['EC-P256', 'RSA-2048', 'Ed25519', 'ML-DSA-65'] as const) {
    test(`buildCrl (${algorithm}): two entries, the reason and the CRL number read back, the signature verified`, async () => {
      const root = await makeRoot(algorithm)
      const thisUpdate = new Date('2026-03-01T12:00:00Z')
      const der = await buildCrl(
        {
          issuer: root.subject,
          signatureAlgorithm: algorithm,
          thisUpdate,
          nextUpdate: new Date('2026-03-08T12:00:00Z'),
          crlNumber: 42n,
          authorityKeyIdentifier: root.keyIdentifier,
          entries: [
            {
              serial: Buffer.from('01a2', 'hex'),
              revokedAt: new Date('2026-02-01T00:00:00Z'),
              reason: 'keyCompromise',
            },
            {
              serial: Buffer.from('ff', 'hex'),
              revokedAt: new Date('2026-02-02T00:00:00Z'),
              reason: 'unspecified',
            },
          ],
        },
        signerFor(algorithm, root.keys.privateKey),
      )
      const crl = new x509.X509Crl(der)
      assert.equal(crl.version, 1) // v2
      assert.equal(crl.thisUpdate.getTime(), thisUpdate.getTime())
      assert.equal(crl.issuer, new x509.X509Certificate(root.der).subject)
      assert.deepEqual(
        crl.entries.map((e) => [e.serialNumber, e.revocationDate.toISOString(), e.reason]),
        [
          ['01a2', '2026-02-01T00:00:00.000Z', x509.X509CrlReason.keyCompromise],
          ['ff', '2026-02-02T00:00:00.000Z', undefined],
        ],
      )
      assert.equal(crl.entries[1]!.extensions.length, 0, 'no reasonCode for unspecified')
      assert.ok(der.includes(Buffer.from('020200ff', 'hex')), 'a positive INTEGER')
      const crlNumber = crl.extensions.find((e) => e.type === '2.5.29.20')
      assert.deepEqual(Buffer.from(crlNumber!.value), Buffer.from('02012a', 'hex'))
      const aki = crl.getExtension(x509.AuthorityKeyIdentifierExtension)
      assert.equal(aki?.keyId, root.keyIdentifier.toString('hex'))
      const tbs = signedPart(der)
      if (algorithm === 'ML-DSA-65') {
        assert.ok(
          ml_dsa65.verify(Buffer.from(crl.signature), tbs, rawPublicKey(spkiOf(root.keys.publicKey), 1952)),
        )
      } else {
        assert.ok(await crl.verify({ publicKey: new x509.X509Certificate(root.der).publicKey }))
        assert.ok(nodeVerify(HASH[algorithm] ?? null, tbs, root.keys.publicKey, Buffer.from(crl.signature)))
        const crlPath = await writeTemp(`crl-${algorithm}.pem`, toPem(der, 'X509 CRL'))
        const caPath = await writeTemp(`crl-ca-${algorithm}.pem`, toPem(root.der, 'CERTIFICATE'))
        const { stdout, stderr } = await run('openssl', [
          'crl',
          '-in',
          crlPath,
          '-CAfile',
          caPath,
          '-noout',
          '-text',
        ])
        assert.match(stderr, /verify OK/)
        assert.match(stdout, /X509v3 CRL Number:\s+42/)
        assert.match(
          stdout,
          /Serial Number: 01A2\s+Revocation Date: Feb {2}1 00:00:00 2026 GMT\s+CRL entry extensions:\s+X509v3 CRL Reason Code:\s+Key Compromise/,
        )
      }
    })
  }
})
