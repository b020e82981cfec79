import 'reflect-metadata'
import assert from 'node:assert/strict'
import { generateKeyPairSync, type KeyObject, sign as nodeSign, type webcrypto } from 'node:crypto'
import { before, describe, test } from 'node:test'
import * as x509 from '@peculiar/x509'
import { buildCsr, CsrError, parseCsr } from '../../src/pki/csr.ts'
import {
  buildCertificate,
  CertificateFormatError,
  encodeName,
  keyIdentifierOf,
  parseCertificate,
  toPem,
} from '../../src/pki/x509.ts'
import { int, seq, tlv } from '../helpers/der.ts'
import { Rng } from '../helpers/rng.ts'

/**
 * Deterministic fuzzing (seeded, so a failure reproduces) of the two parsers that read what
 * clients send: parseCsr and parseCertificate. Whatever the bytes (random, truncated, bit-flipped,
 * with huge length fields, nested 10,000 deep), the only errors are CsrError and
 * CertificateFormatError (a 400), never a TypeError, RangeError or node:crypto error (a 500), and
 * every case returns (the test timeout catches a hang).
 */

x509.cryptoProvider.set(globalThis.crypto)

const spkiOf = (key: KeyObject) => key.export({ type: 'spki', format: 'der' })

interface Parser {
  name: string
  parse: (input: Buffer) => unknown
  error: typeof CsrError | typeof CertificateFormatError
}
const PARSERS: readonly Parser[] = [
  { name: 'parseCsr', parse: parseCsr, error: CsrError },
  { name: 'parseCertificate', parse: parseCertificate, error: CertificateFormatError },
]

/** Runs one case: it returns or throws the parser's own error; anything else fails with the case. */
function attempt(parser: Parser, input: Buffer, label: string): 'parsed' | 'refused' {
  try {
    parser.parse(input)
    return 'parsed'
  } catch (error) {
    if (error instanceof parser.error && error.statusCode === 400 && error.message.length < 500)
      return 'refused'
    assert.fail(
      `${parser.name} threw ${String(error)} on ${label}: ${input.subarray(0, 96).toString('hex')}…`,
    )
  }
}

/** Valid inputs to mutate: CSRs (EC with a SAN request, RSA, ML-DSA) and certificates (EC leaf, ML-DSA root). */
const samples: Record<'csr' | 'certificate', Buffer[]> = { csr: [], certificate: [] }

before(async () => {
  const ec = generateKeyPairSync('ec', { namedCurve: 'P-256' })
  const mlDsa = generateKeyPairSync('ml-dsa-65')
  const rsa = generateKeyPairSync('rsa', { modulusLength: 2048 })
  const subject = encodeName({ commonName: 'fuzz.example.com', organization: 'Fuzz', country: 'NL' })
  samples.csr.push(
    await buildCsr(subject, spkiOf(mlDsa.publicKey), 'ML-DSA-65', async (info) =>
      nodeSign(null, info, mlDsa.privateKey),
    ),
    await buildCsr(subject, spkiOf(rsa.publicKey), 'RSA-2048', async (info) =>
      nodeSign('sha256', info, rsa.privateKey),
    ),
  )
  const webKeys = (await crypto.subtle.generateKey({ name: 'ECDSA', namedCurve: 'P-384' }, true, [
    'sign',
    'verify',
  ])) as webcrypto.CryptoKeyPair
  const withSan = await x509.Pkcs10CertificateRequestGenerator.create({
    name: 'CN=san.example.com',
    keys: webKeys,
    signingAlgorithm: { name: 'ECDSA', hash: 'SHA-384' },
    extensions: [
      new x509.SubjectAlternativeNameExtension([
        { type: 'dns', value: 'san.example.com' },
        { type: 'ip', value: '2001:db8::7' },
        { type: 'url', value: 'https://example.com/' },
      ]),
    ],
  })
  samples.csr.push(Buffer.from(withSan.rawData))

  const rootSpki = spkiOf(mlDsa.publicKey)
  const root = await buildCertificate(
    {
      serial: Buffer.of(1),
      issuer: subject,
      subject,
      notBefore: new Date('2026-01-01T00:00:00Z'),
      notAfter: new Date('2056-01-01T00:00:00Z'),
      subjectPublicKeyInfo: rootSpki,
      signatureAlgorithm: 'ML-DSA-65',
      basicConstraints: { ca: true, pathLength: 2 },
      keyUsage: ['keyCertSign', 'cRLSign'],
      nameConstraints: { permittedDns: ['example.com'], excludedIp: ['10.0.0.0/8'] },
      subjectKeyIdentifier: keyIdentifierOf(rootSpki),
    },
    async (tbs) => nodeSign(null, tbs, mlDsa.privateKey),
  )
  const leafSpki = spkiOf(ec.publicKey)
  const leaf = await buildCertificate(
    {
      serial: Buffer.from('00ff00ff00ff00ff', 'hex'),
      issuer: subject,
      subject: encodeName({ commonName: 'leaf.example.com' }),
      notBefore: new Date('2026-01-01T00:00:00Z'),
      notAfter: new Date('2027-01-01T00:00:00Z'),
      subjectPublicKeyInfo: leafSpki,
      signatureAlgorithm: 'ML-DSA-65',
      basicConstraints: { ca: false },
      keyUsage: ['digitalSignature'],
      extendedKeyUsage: ['serverAuth', 'clientAuth'],
      subjectAltNames: {
        dns: ['leaf.example.com'],
        ip: ['192.0.2.1'],
        email: ['a@example.com'],
        uri: ['urn:x:y'],
      },
      authorityKeyIdentifier: keyIdentifierOf(rootSpki),
      subjectKeyIdentifier: keyIdentifierOf(leafSpki),
      crlDistributionPoints: ['http://pki.example.com/crl'],
      authorityInfoAccess: { ocsp: ['http://ocsp.example.com'] },
    },
    async (tbs) => nodeSign(null, tbs, mlDsa.privateKey),
  )
  samples.certificate.push(root, leaf)
})

/** The offsets of every length field in a valid DER sample, walked by hand, so mutations hit headers. */
function lengthFieldsOf(der: Buffer, start = 0, end = der.length, found: number[] = []): number[] {
  for (let at = start; at < end; ) {
    const first = der[at + 1]!
    const header = first < 0x80 ? 2 : 2 + (first & 0x7f)
    const length = first < 0x80 ? first : der.readUIntBE(at + 2, first & 0x7f)
    found.push(at + 1)
    if (der[at]! & 0x20) lengthFieldsOf(der, at + header, at + header + length, found)
    at += header + length
  }
  return found
}

const nestedByTag = new Map<number, Buffer>()
/** 10,000 elements with `tag`, each holding the next. */
function nested(tag: number): Buffer {
  let deep = nestedByTag.get(tag)
  if (!deep) {
    // With nothing else inside, the encoding is the headers alone, outermost first.
    const headers: number[][] = []
    let size = 0
    for (let depth = 0; depth < 10_000; depth++) {
      const header =
        size < 0x80 ? [tag, size] : size < 0x100 ? [tag, 0x81, size] : [tag, 0x82, size >> 8, size & 0xff]
      headers.push(header)
      size += header.length
    }
    deep = Buffer.from(headers.reverse().flat())
    nestedByTag.set(tag, deep)
  }
  return deep
}

const kindOf = (parser: Parser) => (parser.name === 'parseCsr' ? 'csr' : 'certificate')

describe('fuzzing parseCsr and parseCertificate', () => {
  for (const parser of PARSERS) {
    test(`${parser.name}: the unmutated samples parse`, () => {
      for (const sample of samples[kindOf(parser)]) assert.equal(attempt(parser, sample, 'sample'), 'parsed')
    })

    test(`${parser.name}: 3,000 random inputs are refused with ${parser.error.name} only`, () => {
      const rng = new Rng(0x5eed0001)
      for (let i = 0; i < 3000; i++) {
        const input = rng.bytes(rng.int(600))
        // Half start like a SEQUENCE with a plausible length so the parser gets past the first byte.
        if (input.length > 4 && rng.chance(0.5)) {
          input[0] = 0x30
          input[1] = 0x82
          input.writeUInt16BE(input.length - 4, 2)
        }
        assert.equal(attempt(parser, input, `random case ${i}`), 'refused')
      }
    })

    test(`${parser.name}: every truncation of the samples is refused with ${parser.error.name} only`, () => {
      let cases = 0
      for (const sample of samples[kindOf(parser)]) {
        for (let length = 0; length < sample.length; length += sample.length > 3000 ? 3 : 1) {
          assert.equal(attempt(parser, sample.subarray(0, length), `truncation to ${length}`), 'refused')
          cases++
        }
      }
      assert.ok(cases > 2000)
    })

    test(`${parser.name}: 4,000 bit-flipped samples give a result or ${parser.error.name}, nothing else`, () => {
      const rng = new Rng(0x5eed0002)
      const outcomes = { parsed: 0, refused: 0 }
      for (let i = 0; i < 4000; i++) {
        const input = Buffer.from(rng.pick(samples[kindOf(parser)]))
        for (let flips = rng.range(1, 4); flips > 0; flips--) input[rng.int(input.length)]! ^= 1 << rng.int(8)
        outcomes[attempt(parser, input, `bit flip case ${i}`)]++
      }
      assert.ok(outcomes.refused > 0)
      // A CSR is signed: a flipped bit anywhere in it is caught by the proof of possession or the parser.
      if (parser.name === 'parseCsr') assert.equal(outcomes.parsed, 0)
    })

    test(`${parser.name}: 3,000 huge, indefinite or overlong length fields are refused with ${parser.error.name} only`, () => {
      const rng = new Rng(0x5eed0003)
      const lengthFields = [
        [0x84, 0xff, 0xff, 0xff, 0xff],
        [0x84, 0x7f, 0xff, 0xff, 0xff],
        [0x88, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff],
        [0x80],
        [0xff],
        [0x83, 0x00, 0x00, 0x10],
        [0x81, 0x05],
      ]
      const outcomes = { parsed: 0, refused: 0 }
      for (let i = 0; i < 3000; i++) {
        const sample = rng.pick(samples[kindOf(parser)])
        // Replace the length field of one element of the sample (any depth).
        const at = rng.pick(lengthFieldsOf(sample))
        const first = sample[at]!
        const oldSize = first < 0x80 ? 1 : 1 + (first & 0x7f)
        const field = Buffer.from(rng.pick(lengthFields))
        const input = Buffer.concat([sample.subarray(0, at), field, sample.subarray(at + oldSize)])
        outcomes[attempt(parser, input, `length case ${i}`)]++
      }
      assert.deepEqual(outcomes, { parsed: 0, refused: 3000 })
    })

    test(`${parser.name}: nesting 10,000 deep, bare or inside a plausible structure, is refused with ${parser.error.name}`, () => {
      for (const tag of [0x30, 0x31, 0xa0, 0xa3]) {
        const deep = nested(tag)
        assert.ok(deep.length < 64 * 1024)
        assert.equal(attempt(parser, deep, `nested 0x${tag.toString(16)}`), 'refused')
        assert.throws(() => parser.parse(deep), /nested deeper than 32 levels/)
        const shaped = seq(
          seq(tlv(0xa0, int(2)), int(1), deep),
          seq(tlv(0x06, Buffer.of(0x2b, 0x65, 0x70))),
          tlv(0x03, Buffer.of(0)),
        )
        assert.equal(attempt(parser, shaped, `nested 0x${tag.toString(16)} inside a signed shape`), 'refused')
      }
    })

    test(`${parser.name}: 2,000 spliced samples give a result or ${parser.error.name}, nothing else`, () => {
      const rng = new Rng(0x5eed0004)
      const all = [...samples.csr, ...samples.certificate]
      for (let i = 0; i < 2000; i++) {
        const a = rng.pick(samples[kindOf(parser)])
        const b = rng.pick(all)
        const cut = rng.int(a.length)
        const from = rng.int(b.length)
        const input = Buffer.concat([
          a.subarray(0, cut),
          b.subarray(from, from + rng.int(200)),
          a.subarray(cut + rng.int(50)),
        ])
        attempt(parser, input, `splice case ${i}`)
      }
    })
  }

  test('parseCsr: 2,000 mangled PEM texts are refused with CsrError only', () => {
    const rng = new Rng(0x5eed0005)
    const parser = PARSERS[0]!
    const pems = samples.csr.map((der) => toPem(der, 'CERTIFICATE REQUEST'))
    for (let i = 0; i < 2000; i++) {
      const pem = rng.pick(pems)
      const at = rng.int(pem.length)
      const junk = rng.chance(0.5)
        ? rng.unicode(rng.range(1, 8))
        : rng.fromAlphabet(rng.range(1, 8), 'AZaz09+/=-\n ')
      const text = `${pem.slice(0, at)}${junk}${pem.slice(at + rng.int(8))}`
      try {
        parseCsr(rng.chance(0.5) ? text : Buffer.from(text, 'utf8'))
      } catch (error) {
        if (!(error instanceof CsrError)) assert.fail(`parseCsr threw ${String(error)} on PEM case ${i}`)
      }
    }
    assert.equal(attempt(parser, Buffer.from(pems[0]!), 'the PEM sample as bytes'), 'parsed')
  })
})
