import { createHash } from 'node:crypto'
import { AppError, invalidField } from '../platform/errors.ts'
import {
  bitString,
  booleanTrue,
  contextTag,
  DerError,
  type DerNode,
  DerReader,
  explicit,
  integer,
  namedBits,
  nullValue,
  octetString,
  oid,
  parseDer,
  readBitStringBytes,
  readBoolean,
  readNull,
  readOctetString,
  readOid,
  readSmallUnsigned,
  readTime,
  readUnsigned,
  sequence,
  TAG,
  time,
  tlv,
} from './der.ts'
import {
  type AltNames,
  encodeAltNames,
  encodeSubtrees,
  isEmptyName,
  readName,
  uriName,
} from './x509-names.ts'

/**
 * X.509 v3 certificates (RFC 5280): the issuer's signature algorithms, building a certificate
 * from a template and a signing callback, PEM, and a strict parser for certificates presented to
 * the service.
 */

export { encodeName } from './x509-names.ts'

export type IssuerAlgorithm =
  | 'ML-DSA-44'
  | 'ML-DSA-65'
  | 'ML-DSA-87'
  | 'SLH-DSA-128s'
  | 'EC-P256'
  | 'EC-P384'
  | 'EC-P521'
  | 'RSA-2048'
  | 'RSA-3072'
  | 'RSA-4096'
  | 'Ed25519'

/** A certificate (or CRL) presented to the service that cannot be read: a 400. */
export class CertificateFormatError extends AppError {
  constructor(message: string) {
    super(400, 'invalid_certificate', message)
  }
}

// ---- signature algorithms ---------------------------------------------------------------------

interface SignatureScheme {
  /** node:crypto's asymmetricKeyType of the keys that make it. */
  keyType: string
  /** The digest for node:crypto.sign/verify; null for the algorithms that take the message itself. */
  hash: 'sha256' | 'sha384' | 'sha512' | null
  /** RFC 4055 writes NULL parameters for the RSA PKCS#1 v1.5 algorithms; all others have none. */
  nullParameters: boolean
}

const scheme = (keyType: string, hash: SignatureScheme['hash'] = null): SignatureScheme => ({
  keyType,
  hash,
  nullParameters: keyType === 'rsa',
})

/** The signature AlgorithmIdentifiers the CA domain writes and accepts, by OID. */
export const SIGNATURE_SCHEMES: ReadonlyMap<string, SignatureScheme> = new Map([
  ['1.2.840.113549.1.1.11', scheme('rsa', 'sha256')], // sha256WithRSAEncryption
  ['1.2.840.113549.1.1.12', scheme('rsa', 'sha384')],
  ['1.2.840.113549.1.1.13', scheme('rsa', 'sha512')],
  ['1.2.840.10045.4.3.2', scheme('ec', 'sha256')], // ecdsa-with-SHA256 (RFC 5758)
  ['1.2.840.10045.4.3.3', scheme('ec', 'sha384')],
  ['1.2.840.10045.4.3.4', scheme('ec', 'sha512')],
  ['1.3.101.112', scheme('ed25519')], // RFC 8410
  ['2.16.840.1.101.3.4.3.17', scheme('ml-dsa-44')], // RFC 9881
  ['2.16.840.1.101.3.4.3.18', scheme('ml-dsa-65')],
  ['2.16.840.1.101.3.4.3.19', scheme('ml-dsa-87')],
  ['2.16.840.1.101.3.4.3.20', scheme('slh-dsa-sha2-128s')], // RFC 9909
])

/** What the service's signer produces for each issuer key (see src/crypto/issuer-signer.ts). */
const ISSUER_SIGNATURE_OID: Record<IssuerAlgorithm, string> = {
  'RSA-2048': '1.2.840.113549.1.1.11',
  'RSA-3072': '1.2.840.113549.1.1.11',
  'RSA-4096': '1.2.840.113549.1.1.11',
  'EC-P256': '1.2.840.10045.4.3.2',
  'EC-P384': '1.2.840.10045.4.3.3',
  'EC-P521': '1.2.840.10045.4.3.4',
  Ed25519: '1.3.101.112',
  'ML-DSA-44': '2.16.840.1.101.3.4.3.17',
  'ML-DSA-65': '2.16.840.1.101.3.4.3.18',
  'ML-DSA-87': '2.16.840.1.101.3.4.3.19',
  'SLH-DSA-128s': '2.16.840.1.101.3.4.3.20',
}

export function signatureAlgorithmOf(algorithm: IssuerAlgorithm): Buffer {
  const id = ISSUER_SIGNATURE_OID[algorithm]
  if (!id) throw new Error(`No signature algorithm for the issuer key algorithm ${algorithm}`)
  return SIGNATURE_SCHEMES.get(id)!.nullParameters ? sequence(oid(id), nullValue()) : sequence(oid(id))
}

/** Reads an AlgorithmIdentifier whose parameters are NULL or absent (all signature algorithms here). */
export function readSignatureAlgorithm(
  node: DerNode,
  what: string,
): { oid: string; nullParameters: boolean } {
  const reader = new DerReader(node, what)
  const id = readOid(reader.next(TAG.OID, 'algorithm'), what)
  const parameters = reader.optional(TAG.NULL)
  if (parameters) readNull(parameters, `${what} parameters`)
  reader.end()
  return { oid: id, nullParameters: parameters !== undefined }
}

/** The signed envelope shared by certificates, CRLs and CSRs: SEQUENCE { tbs, algorithm, BIT STRING }. */
export async function signed(
  tbs: Buffer,
  algorithm: IssuerAlgorithm,
  sign: (tbs: Buffer) => Promise<Buffer>,
): Promise<Buffer> {
  const algorithmIdentifier = signatureAlgorithmOf(algorithm)
  const signature = await sign(tbs)
  if (!Buffer.isBuffer(signature) || signature.length === 0)
    throw new Error('The signer returned no signature')
  return sequence(tbs, algorithmIdentifier, bitString(signature))
}

// ---- building ---------------------------------------------------------------------------

export type KeyUsageName =
  | 'digitalSignature'
  | 'contentCommitment'
  | 'keyEncipherment'
  | 'dataEncipherment'
  | 'keyAgreement'
  | 'keyCertSign'
  | 'cRLSign'
  | 'encipherOnly'
  | 'decipherOnly'

type ExtKeyUsageName =
  | 'serverAuth'
  | 'clientAuth'
  | 'codeSigning'
  | 'emailProtection'
  | 'timeStamping'
  | 'ocspSigning'

/** Bit positions of KeyUsage (RFC 5280 4.2.1.3). */
const KEY_USAGE_BITS: Record<KeyUsageName, number> = {
  digitalSignature: 0,
  contentCommitment: 1,
  keyEncipherment: 2,
  dataEncipherment: 3,
  keyAgreement: 4,
  keyCertSign: 5,
  cRLSign: 6,
  encipherOnly: 7,
  decipherOnly: 8,
}

/** id-kp purposes (RFC 5280 4.2.1.12). */
const EXT_KEY_USAGE_OIDS: Record<ExtKeyUsageName, string> = {
  serverAuth: '1.3.6.1.5.5.7.3.1',
  clientAuth: '1.3.6.1.5.5.7.3.2',
  codeSigning: '1.3.6.1.5.5.7.3.3',
  emailProtection: '1.3.6.1.5.5.7.3.4',
  timeStamping: '1.3.6.1.5.5.7.3.8',
  ocspSigning: '1.3.6.1.5.5.7.3.9',
}

export const EXTENSION_OID = {
  subjectKeyIdentifier: '2.5.29.14',
  keyUsage: '2.5.29.15',
  subjectAltName: '2.5.29.17',
  basicConstraints: '2.5.29.19',
  cRLNumber: '2.5.29.20',
  reasonCode: '2.5.29.21',
  nameConstraints: '2.5.29.30',
  cRLDistributionPoints: '2.5.29.31',
  authorityKeyIdentifier: '2.5.29.35',
  extKeyUsage: '2.5.29.37',
  authorityInfoAccess: '1.3.6.1.5.5.7.1.1',
} as const

export interface CertificateTemplate {
  /** Positive big-endian, 1..20 bytes. */
  serial: Buffer
  /** The issuer's Name DER: the issuer certificate's subject bytes, copied exactly. */
  issuer: Buffer
  /** Name DER (encodeName); may be the empty Name when subjectAltNames is given (the SAN is then critical). */
  subject: Buffer
  notBefore: Date
  notAfter: Date
  subjectPublicKeyInfo: Buffer
  /** The algorithm of the ISSUER's key. */
  signatureAlgorithm: IssuerAlgorithm
  basicConstraints?: { ca: boolean; pathLength?: number }
  keyUsage?: KeyUsageName[]
  extendedKeyUsage?: ExtKeyUsageName[]
  subjectAltNames?: AltNames
  /** DNS suffixes and IP ranges in CIDR notation ("10.0.0.0/8"). */
  nameConstraints?: {
    permittedDns?: string[]
    excludedDns?: string[]
    permittedIp?: string[]
    excludedIp?: string[]
  }
  authorityKeyIdentifier?: Buffer
  /** keyIdentifierOf(subjectPublicKeyInfo) */
  subjectKeyIdentifier: Buffer
  crlDistributionPoints?: string[]
  authorityInfoAccess?: { caIssuers?: string[]; ocsp?: string[] }
}

export const extension = (id: string, critical: boolean, value: Buffer) =>
  sequence(oid(id), ...(critical ? [booleanTrue()] : []), octetString(value))

/** AuthorityKeyIdentifier in the keyIdentifier form: SEQUENCE { [0] IMPLICIT OCTET STRING }. */
export const authorityKeyIdentifierExtension = (keyIdentifier: Buffer) =>
  extension(EXTENSION_OID.authorityKeyIdentifier, false, sequence(tlv(contextTag(0, false), keyIdentifier)))

function checkKeyIdentifier(value: Buffer | undefined, field: string): void {
  if (value !== undefined && (!Buffer.isBuffer(value) || value.length === 0 || value.length > 64)) {
    throw new Error(`${field} must be 1..64 bytes`)
  }
}

/** The validity bounds, checked where the template is built from a request. */
export function checkValidity(notBefore: Date, notAfter: Date, fields = ['notBefore', 'notAfter']): void {
  for (const [i, date] of [notBefore, notAfter].entries()) {
    const year = date instanceof Date ? date.getUTCFullYear() : Number.NaN
    if (!(year >= 1950 && year <= 9999)) throw invalidField(fields[i]!, 'must be a date from 1950 to 9999')
  }
  if (notAfter.getTime() < notBefore.getTime())
    throw invalidField(fields[1]!, `must not be before ${fields[0]}`)
}

export function checkSerial(serial: Buffer): void {
  const firstSignificant = Buffer.isBuffer(serial) ? serial.findIndex((b) => b !== 0) : -1
  if (firstSignificant < 0 || serial.length - firstSignificant > 20) {
    throw new Error('A certificate serial number is a positive integer of 1..20 bytes')
  }
}

/** Checks bytes the template copies verbatim, so a mix-up fails here rather than in a relying party. */
export function checkDer(bytes: Buffer, what: string, check: (node: DerNode) => void): void {
  try {
    check(parseDer(bytes))
  } catch (error) {
    if (error instanceof DerError) throw new Error(`${what} is not valid DER: ${error.message}`)
    throw error
  }
}

function certificateExtensions(t: CertificateTemplate): Buffer[] {
  const extensions: Buffer[] = []
  if (t.basicConstraints) {
    const { ca, pathLength } = t.basicConstraints
    if (
      pathLength !== undefined &&
      (!ca || !Number.isInteger(pathLength) || pathLength < 0 || pathLength > 255)
    ) {
      throw invalidField('basicConstraints.pathLength', 'must be an integer from 0 to 255, for a CA only')
    }
    const value = sequence(
      ...(ca ? [booleanTrue()] : []),
      ...(pathLength !== undefined ? [integer(BigInt(pathLength))] : []),
    )
    extensions.push(extension(EXTENSION_OID.basicConstraints, true, value))
  }
  if (t.keyUsage?.length) {
    const bits = [...new Set(t.keyUsage)].map((name) => {
      const bit = KEY_USAGE_BITS[name]
      if (bit === undefined)
        throw invalidField('keyUsage', `must be among ${Object.keys(KEY_USAGE_BITS).join(', ')}`)
      return bit
    })
    extensions.push(extension(EXTENSION_OID.keyUsage, true, namedBits(bits)))
  }
  if (t.extendedKeyUsage?.length) {
    const purposes = [...new Set(t.extendedKeyUsage)].map((name) => {
      const id = EXT_KEY_USAGE_OIDS[name]
      if (id === undefined) {
        throw invalidField('extendedKeyUsage', `must be among ${Object.keys(EXT_KEY_USAGE_OIDS).join(', ')}`)
      }
      return oid(id)
    })
    extensions.push(extension(EXTENSION_OID.extKeyUsage, false, sequence(...purposes)))
  }
  const altNames = t.subjectAltNames ? encodeAltNames(t.subjectAltNames) : []
  const emptySubject = isEmptyName(t.subject)
  if (emptySubject && altNames.length === 0) {
    throw invalidField('subjectAltNames', 'must name the subject when the subject name is empty')
  }
  if (altNames.length > 0) {
    // RFC 5280 4.2.1.6: the SAN is critical when it is the only identity.
    extensions.push(extension(EXTENSION_OID.subjectAltName, emptySubject, sequence(...altNames)))
  }
  if (t.nameConstraints) {
    const c = t.nameConstraints
    const permitted = encodeSubtrees(c.permittedDns, c.permittedIp, 'nameConstraints.permitted')
    const excluded = encodeSubtrees(c.excludedDns, c.excludedIp, 'nameConstraints.excluded')
    if (permitted.length + excluded.length > 0) {
      const value = sequence(
        ...(permitted.length ? [tlv(contextTag(0, true), ...permitted)] : []),
        ...(excluded.length ? [tlv(contextTag(1, true), ...excluded)] : []),
      )
      extensions.push(extension(EXTENSION_OID.nameConstraints, true, value))
    }
  }
  extensions.push(extension(EXTENSION_OID.subjectKeyIdentifier, false, octetString(t.subjectKeyIdentifier)))
  if (t.authorityKeyIdentifier) extensions.push(authorityKeyIdentifierExtension(t.authorityKeyIdentifier))
  if (t.crlDistributionPoints?.length) {
    // One DistributionPoint whose fullName lists every URI: [0] { [0] GeneralNames }.
    const uris = t.crlDistributionPoints.map((u) => uriName(u, 'crlDistributionPoints'))
    const point = sequence(explicit(0, tlv(contextTag(0, true), ...uris)))
    extensions.push(extension(EXTENSION_OID.cRLDistributionPoints, false, sequence(point)))
  }
  const aia = t.authorityInfoAccess
  if (aia?.ocsp?.length || aia?.caIssuers?.length) {
    const describe = (method: string, uris: string[] | undefined, field: string) =>
      (uris ?? []).map((u) => sequence(oid(method), uriName(u, `authorityInfoAccess.${field}`)))
    const value = sequence(
      ...describe('1.3.6.1.5.5.7.48.1', aia.ocsp, 'ocsp'),
      ...describe('1.3.6.1.5.5.7.48.2', aia.caIssuers, 'caIssuers'),
    )
    extensions.push(extension(EXTENSION_OID.authorityInfoAccess, false, value))
  }
  return extensions
}

export async function buildCertificate(
  template: CertificateTemplate,
  sign: (tbs: Buffer) => Promise<Buffer>,
): Promise<Buffer> {
  checkSerial(template.serial)
  checkValidity(template.notBefore, template.notAfter)
  checkKeyIdentifier(template.subjectKeyIdentifier, 'subjectKeyIdentifier')
  checkKeyIdentifier(template.authorityKeyIdentifier, 'authorityKeyIdentifier')
  checkDer(template.issuer, 'The issuer name', (n) => readName(n, 'issuer'))
  checkDer(template.subject, 'The subject name', (n) => readName(n, 'subject'))
  checkDer(template.subjectPublicKeyInfo, 'The subject public key info', readSubjectPublicKeyInfo)
  const tbs = sequence(
    explicit(0, integer(2n)), // v3
    integer(template.serial),
    signatureAlgorithmOf(template.signatureAlgorithm),
    template.issuer,
    sequence(time(template.notBefore), time(template.notAfter)),
    template.subject,
    template.subjectPublicKeyInfo,
    explicit(3, sequence(...certificateExtensions(template))),
  )
  return signed(tbs, template.signatureAlgorithm, sign)
}

// ---- key identifiers ----------------------------------------------------------------------

/** Checks a SubjectPublicKeyInfo's shape and returns the subjectPublicKey bytes. */
export function readSubjectPublicKeyInfo(node: DerNode): Buffer {
  const reader = new DerReader(node, 'SubjectPublicKeyInfo')
  const algorithm = new DerReader(reader.next(TAG.SEQUENCE, 'algorithm'), 'SubjectPublicKeyInfo algorithm')
  readOid(algorithm.next(TAG.OID, 'algorithm'), 'public key algorithm')
  if (!algorithm.done) algorithm.any('parameters') // EC: the curve; RSA: NULL; RSA-PSS: a SEQUENCE
  algorithm.end()
  const key = readBitStringBytes(reader.next(TAG.BIT_STRING, 'subjectPublicKey'), 'subjectPublicKey')
  reader.end()
  return key
}

/** RFC 7093 section 2 method 1: the leftmost 160 bits of the SHA-256 of the subjectPublicKey bits. */
export function keyIdentifierOf(spki: Buffer): Buffer {
  let key: Buffer
  try {
    key = readSubjectPublicKeyInfo(parseDer(spki))
  } catch (error) {
    if (error instanceof DerError)
      throw new CertificateFormatError(`The public key is malformed: ${error.message}`)
    throw error
  }
  return createHash('sha256').update(key).digest().subarray(0, 20)
}

// ---- PEM ----------------------------------------------------------------------------------

const MAX_PEM_CHARS = 256 * 1024

export function toPem(
  der: Buffer,
  label: 'CERTIFICATE' | 'CERTIFICATE REQUEST' | 'X509 CRL' | 'PRIVATE KEY',
): string {
  const lines = der.toString('base64').match(/.{1,64}/g) ?? []
  return `-----BEGIN ${label}-----\n${lines.join('\n')}\n-----END ${label}-----\n`
}

/** The DER of the one PEM block with `label` that `text` holds (whitespace around it is allowed). */
export function fromPem(text: string, label: string): Buffer {
  if (!/^[A-Z0-9 ]{1,40}$/.test(label)) throw new Error(`Not a PEM label: ${label}`)
  const invalid = (why: string) => new AppError(400, 'invalid_pem', `The ${label} PEM ${why}`)
  if (typeof text !== 'string') throw invalid('is missing')
  if (text.length > MAX_PEM_CHARS) throw invalid(`is longer than ${MAX_PEM_CHARS} characters`)
  const begin = `-----BEGIN ${label}-----`
  const end = `-----END ${label}-----`
  const block = text.trim()
  if (!block.startsWith(begin) || !block.endsWith(end) || block.length < begin.length + end.length) {
    throw invalid(`must be one block: its first line ${begin}, its last ${end}`)
  }
  const body = block.slice(begin.length, block.length - end.length).replace(/\s+/g, '')
  const der = Buffer.from(body, 'base64')
  if (body.length === 0 || !/^[A-Za-z0-9+/]+={0,2}$/.test(body) || der.toString('base64') !== body) {
    throw invalid('body is not valid base64')
  }
  return der
}

// ---- parsing ------------------------------------------------------------------------------

const MAX_CERTIFICATE_BYTES = 64 * 1024

export interface ParsedCertificate {
  der: Buffer
  tbs: Buffer
  serial: Buffer
  issuer: Buffer
  subject: Buffer
  notBefore: Date
  notAfter: Date
  subjectPublicKeyInfo: Buffer
  signatureAlgorithmOid: string
  signature: Buffer
  basicConstraints: { ca: boolean; pathLength?: number } | null
  subjectKeyIdentifier: Buffer | null
  commonName: string | null
}

/** The single element an EXPLICIT tag wraps. */
function explicitContent(node: DerNode, what: string): DerNode {
  if (node.children.length !== 1) throw new DerError(`${what} must hold exactly one element`)
  return node.children[0]!
}

/** Extensions ::= SEQUENCE SIZE (1..MAX) OF Extension, by OID; a repeated extension is refused (RFC 5280 4.2). */
export function readExtensions(
  node: DerNode,
  what: string,
): Map<string, { critical: boolean; value: Buffer }> {
  if (node.tag !== TAG.SEQUENCE || node.children.length === 0)
    throw new DerError(`${what} is not a list of extensions`)
  const extensions = new Map<string, { critical: boolean; value: Buffer }>()
  for (const item of node.children) {
    const reader = new DerReader(item, 'extension')
    const id = readOid(reader.next(TAG.OID, 'extnID'), 'extension id')
    const criticalNode = reader.optional(TAG.BOOLEAN)
    const critical = criticalNode ? readBoolean(criticalNode, `extension ${id} critical flag`) : false
    const value = readOctetString(reader.next(TAG.OCTET_STRING, 'extnValue'), `extension ${id}`)
    reader.end()
    if (extensions.has(id)) throw new DerError(`the extension ${id} appears twice`)
    extensions.set(id, { critical, value })
  }
  return extensions
}

function readBasicConstraints(value: Buffer): { ca: boolean; pathLength?: number } {
  const reader = new DerReader(parseDer(value), 'basicConstraints')
  const caNode = reader.optional(TAG.BOOLEAN)
  const ca = caNode ? readBoolean(caNode, 'basicConstraints cA') : false
  const pathNode = reader.optional(TAG.INTEGER)
  reader.end()
  return pathNode
    ? { ca, pathLength: readSmallUnsigned(pathNode, 'basicConstraints pathLenConstraint') }
    : { ca }
}

function readCertificate(der: Buffer): ParsedCertificate {
  if (!Buffer.isBuffer(der) || der.length === 0) throw new DerError('the certificate is empty')
  if (der.length > MAX_CERTIFICATE_BYTES)
    throw new DerError(`the certificate is larger than ${MAX_CERTIFICATE_BYTES} bytes`)
  const certificate = new DerReader(parseDer(der), 'Certificate')
  const tbsNode = certificate.next(TAG.SEQUENCE, 'tbsCertificate')
  const outerAlgorithm = certificate.next(TAG.SEQUENCE, 'signatureAlgorithm')
  const signature = readBitStringBytes(certificate.next(TAG.BIT_STRING, 'signatureValue'), 'signature')
  certificate.end()

  const tbs = new DerReader(tbsNode, 'TBSCertificate')
  const versionNode = tbs.optional(contextTag(0, true))
  const version = versionNode ? readSmallUnsigned(explicitContent(versionNode, 'version'), 'version') : 0
  if (version > 2) throw new DerError(`unknown certificate version ${version + 1}`)
  const serial = readUnsigned(tbs.next(TAG.INTEGER, 'serialNumber'), 'serial number')
  if (serial.length > 20) throw new DerError('the serial number is longer than 20 octets')
  const innerAlgorithm = tbs.next(TAG.SEQUENCE, 'signature')
  // RFC 5280 4.1.1.2: the unsigned copy must match the signed one, or the signature is ambiguous.
  if (!innerAlgorithm.raw.equals(outerAlgorithm.raw)) {
    throw new DerError('the signature algorithm differs between the signed part and the certificate')
  }
  // Any parameters are accepted here (RSA-PSS has some): a parent outside the service may use them.
  const signatureAlgorithmOid = readOid(
    new DerReader(outerAlgorithm, 'signature algorithm').next(TAG.OID, 'algorithm'),
    'signature algorithm',
  )
  if (outerAlgorithm.children.length > 2) throw new DerError('the signature algorithm has extra elements')
  const issuer = tbs.next(TAG.SEQUENCE, 'issuer')
  readName(issuer, 'issuer')
  const validity = new DerReader(tbs.next(TAG.SEQUENCE, 'validity'), 'validity')
  const notBefore = readTime(validity.any('notBefore'), 'notBefore')
  const notAfter = readTime(validity.any('notAfter'), 'notAfter')
  validity.end()
  const subject = tbs.next(TAG.SEQUENCE, 'subject')
  const { commonName } = readName(subject, 'subject')
  const spki = tbs.next(TAG.SEQUENCE, 'subjectPublicKeyInfo')
  readSubjectPublicKeyInfo(spki)
  tbs.optional(contextTag(1, false)) // issuerUniqueID
  tbs.optional(contextTag(2, false)) // subjectUniqueID
  const extensionsNode = tbs.optional(contextTag(3, true))
  tbs.end()
  if (extensionsNode && version !== 2) throw new DerError('only a version 3 certificate has extensions')
  const extensions = extensionsNode
    ? readExtensions(explicitContent(extensionsNode, 'extensions'), 'extensions')
    : new Map<string, { critical: boolean; value: Buffer }>()
  const basicConstraints = extensions.get(EXTENSION_OID.basicConstraints)
  const keyIdentifier = extensions.get(EXTENSION_OID.subjectKeyIdentifier)

  return {
    der,
    tbs: tbsNode.raw,
    serial,
    issuer: issuer.raw,
    subject: subject.raw,
    notBefore,
    notAfter,
    subjectPublicKeyInfo: spki.raw,
    signatureAlgorithmOid,
    signature,
    basicConstraints: basicConstraints ? readBasicConstraints(basicConstraints.value) : null,
    subjectKeyIdentifier: keyIdentifier
      ? readOctetString(parseDer(keyIdentifier.value), 'subjectKeyIdentifier')
      : null,
    commonName,
  }
}

/** Reads a DER certificate strictly; anything malformed is a CertificateFormatError (a 400). */
export function parseCertificate(der: Buffer): ParsedCertificate {
  try {
    return readCertificate(der)
  } catch (error) {
    if (error instanceof DerError)
      throw new CertificateFormatError(`The certificate is malformed: ${error.message}`)
    throw error
  }
}
