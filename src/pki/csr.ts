import { createPublicKey, type KeyObject, verify } from 'node:crypto'
import { AppError } from '../platform/errors.ts'
import {
  contextTag,
  DerError,
  type DerNode,
  DerReader,
  integer,
  parseDer,
  readBitStringBytes,
  readOid,
  readSmallUnsigned,
  sequence,
  TAG,
  tlv,
} from './der.ts'
import {
  checkDer,
  EXTENSION_OID,
  fromPem,
  type IssuerAlgorithm,
  readExtensions,
  readSignatureAlgorithm,
  readSubjectPublicKeyInfo,
  SIGNATURE_SCHEMES,
  signed,
} from './x509.ts'
import { type AltNames, decodeAltNames, readName } from './x509-names.ts'

/** PKCS#10 certificate signing requests (RFC 2986): reading one with its proof of possession, and writing one. */

/** A CSR that cannot be accepted: a 400 whose message says what is wrong. */
export class CsrError extends AppError {
  constructor(message: string) {
    super(400, 'invalid_csr', message)
  }
}

export interface ParsedCsr {
  /** The subject Name DER, as requested. */
  subject: Buffer
  commonName: string | null
  subjectPublicKeyInfo: Buffer
  publicKey: KeyObject
  /** 'EC-P256' | 'EC-P384' | 'EC-P521' | 'RSA-<bits>' | 'Ed25519' | 'ML-DSA-44|65|87' | 'SLH-DSA-128s' */
  keyAlgorithm: string
  /** The subjectAltName of the extensionRequest attribute; names of other forms are left out. */
  requested: Required<AltNames>
}

const MAX_CSR_BYTES = 64 * 1024
const EXTENSION_REQUEST = '1.2.840.113549.1.9.14' // PKCS #9
const RSA_BITS = { min: 2048, max: 8192 }
const EC_CURVES: Record<string, string> = {
  prime256v1: 'EC-P256',
  secp384r1: 'EC-P384',
  secp521r1: 'EC-P521',
}
const OTHER_KEY_TYPES: Record<string, string> = {
  ed25519: 'Ed25519',
  'ml-dsa-44': 'ML-DSA-44',
  'ml-dsa-65': 'ML-DSA-65',
  'ml-dsa-87': 'ML-DSA-87',
  'slh-dsa-sha2-128s': 'SLH-DSA-128s',
}

function csrDer(input: Buffer | string): Buffer {
  if (typeof input !== 'string' && !Buffer.isBuffer(input))
    throw new CsrError('The CSR must be PEM text or DER bytes')
  if (input.length > MAX_CSR_BYTES) throw new CsrError(`The CSR is larger than ${MAX_CSR_BYTES / 1024} KiB`)
  // DER starts with a SEQUENCE tag; PEM (possibly after whitespace) with dashes.
  const text =
    typeof input === 'string'
      ? input
      : /^\s*-/.test(input.subarray(0, 64).toString('latin1'))
        ? input.toString('latin1')
        : null
  if (text === null) return input as Buffer
  const label = text.includes('-----BEGIN NEW CERTIFICATE REQUEST-----')
    ? 'NEW CERTIFICATE REQUEST'
    : 'CERTIFICATE REQUEST'
  try {
    return fromPem(text, label)
  } catch (error) {
    if (error instanceof AppError) throw new CsrError(error.message)
    throw error
  }
}

/** The key's algorithm name, refusing the kinds of keys the CA does not certify. */
function keyAlgorithmOf(key: KeyObject): string {
  const type = key.asymmetricKeyType ?? 'unknown'
  if (type === 'rsa') {
    const bits = key.asymmetricKeyDetails?.modulusLength ?? 0
    if (bits < RSA_BITS.min || bits > RSA_BITS.max) {
      throw new CsrError(
        `The CSR's RSA key has ${bits} bits; ${RSA_BITS.min} to ${RSA_BITS.max} are accepted`,
      )
    }
    return `RSA-${bits}`
  }
  const name = type === 'ec' ? EC_CURVES[key.asymmetricKeyDetails?.namedCurve ?? ''] : OTHER_KEY_TYPES[type]
  if (!name) {
    throw new CsrError(
      `The CSR's key (${type}${type === 'ec' ? ` ${key.asymmetricKeyDetails?.namedCurve}` : ''}) is not accepted; use RSA, EC P-256/P-384/P-521, Ed25519, ML-DSA or SLH-DSA-SHA2-128s`,
    )
  }
  return name
}

function importPublicKey(spki: Buffer): KeyObject {
  try {
    return createPublicKey({ key: spki, format: 'der', type: 'spki' })
  } catch {
    throw new CsrError('The CSR public key cannot be read')
  }
}

/** The proof of possession: the request is signed by the key it asks a certificate for. */
function checkSignature(info: Buffer, algorithmNode: DerNode, signature: Buffer, key: KeyObject): void {
  const algorithm = readSignatureAlgorithm(algorithmNode, 'signature algorithm')
  const scheme = SIGNATURE_SCHEMES.get(algorithm.oid)
  if (!scheme) {
    throw new CsrError(
      `The CSR signature algorithm ${algorithm.oid} is not accepted; use ECDSA or RSA PKCS#1 v1.5 with SHA-256/384/512, Ed25519, ML-DSA or SLH-DSA-SHA2-128s`,
    )
  }
  // RSA parameters are NULL (some encoders leave them out); the others have none.
  if (algorithm.nullParameters && !scheme.nullParameters) {
    throw new CsrError(`The CSR signature algorithm ${algorithm.oid} must have no parameters`)
  }
  if (scheme.keyType !== key.asymmetricKeyType) {
    throw new CsrError(
      `The CSR signature algorithm ${algorithm.oid} does not match its ${key.asymmetricKeyType} key`,
    )
  }
  let valid: boolean
  try {
    valid = verify(scheme.hash, info, key, signature)
  } catch {
    valid = false
  }
  if (!valid)
    throw new CsrError('The CSR signature does not verify with its own public key (proof of possession)')
}

/** The SAN of the extensionRequest attribute; other attributes (challengePassword…) are ignored. */
function requestedNames(attributes: DerNode | undefined): Required<AltNames> {
  let names: Required<AltNames> = { dns: [], ip: [], email: [], uri: [] }
  let seen = false
  for (const attribute of attributes?.children ?? []) {
    const reader = new DerReader(attribute, 'CSR attribute')
    const type = readOid(reader.next(TAG.OID, 'type'), 'CSR attribute type')
    const values = reader.next(TAG.SET, 'values')
    reader.end()
    if (type !== EXTENSION_REQUEST) continue
    if (seen || values.children.length !== 1)
      throw new DerError('a CSR has at most one extensionRequest, of one value')
    seen = true
    const san = readExtensions(values.children[0]!, 'requested extensions').get(EXTENSION_OID.subjectAltName)
    if (san) names = decodeAltNames(parseDer(san.value), 'requested subjectAltName')
  }
  return names
}

function readCsr(der: Buffer): ParsedCsr {
  const request = new DerReader(parseDer(der), 'CertificationRequest')
  const infoNode = request.next(TAG.SEQUENCE, 'certificationRequestInfo')
  const algorithmNode = request.next(TAG.SEQUENCE, 'signatureAlgorithm')
  const signature = readBitStringBytes(request.next(TAG.BIT_STRING, 'signature'), 'signature')
  request.end()

  const info = new DerReader(infoNode, 'CertificationRequestInfo')
  if (readSmallUnsigned(info.next(TAG.INTEGER, 'version'), 'version') !== 0) {
    throw new DerError('the version must be 0 (v1)')
  }
  const subject = info.next(TAG.SEQUENCE, 'subject')
  const { commonName } = readName(subject, 'subject')
  const spki = info.next(TAG.SEQUENCE, 'subjectPKInfo')
  readSubjectPublicKeyInfo(spki)
  const attributes = info.optional(contextTag(0, true))
  info.end()

  const publicKey = importPublicKey(spki.raw)
  const keyAlgorithm = keyAlgorithmOf(publicKey)
  checkSignature(infoNode.raw, algorithmNode, signature, publicKey)
  return {
    subject: subject.raw,
    commonName,
    subjectPublicKeyInfo: spki.raw,
    publicKey,
    keyAlgorithm,
    requested: requestedNames(attributes),
  }
}

/** Reads a PEM or DER CSR and checks its proof of possession; anything unacceptable is a CsrError. */
export function parseCsr(input: Buffer | string): ParsedCsr {
  const der = csrDer(input)
  try {
    return readCsr(der)
  } catch (error) {
    if (error instanceof DerError) throw new CsrError(`The CSR is malformed: ${error.message}`)
    throw error
  }
}

/** A CSR for the service's own key (an intermediate CA whose parent is outside the service); no attributes. */
export async function buildCsr(
  subject: Buffer,
  spki: Buffer,
  algorithm: IssuerAlgorithm,
  sign: (info: Buffer) => Promise<Buffer>,
): Promise<Buffer> {
  checkDer(subject, 'The subject name', (n) => readName(n, 'subject'))
  checkDer(spki, 'The subject public key info', readSubjectPublicKeyInfo)
  const info = sequence(integer(0n), subject, spki, tlv(contextTag(0, true)))
  return signed(info, algorithm, sign)
}
