import { createHash } from 'node:crypto'
import { REASON_CODES, type RevocationReason } from './crl.ts'
import {
  contextTag,
  DerError,
  type DerNode,
  DerReader,
  explicit,
  integer,
  octetString,
  oid,
  parseDer,
  readOctetString,
  readSmallUnsigned,
  readUnsigned,
  sequence,
  TAG,
  tlv,
} from './der.ts'
import { type IssuerAlgorithm, readExtensions, readSignatureAlgorithm, signed } from './x509.ts'

/**
 * OCSP (RFC 6960) in DER: reading an OCSPRequest and writing an OCSPResponse, either an unsigned
 * error status or a BasicOCSPResponse signed through a callback (as buildCrl is). The request
 * reader is strict and bounded: a request is at most OCSP_LIMITS.requestBytes and asks about at
 * most OCSP_LIMITS.requests certificates, and anything else is malformed.
 */

export const OCSP_LIMITS = {
  /** An OCSPRequest for ten certificates with a nonce is well under 1 KiB. */
  requestBytes: 8192,
  /** Certificates asked about in one request (each is a SingleResponse under one signature). */
  requests: 10,
} as const

/** The unsigned statuses (RFC 6960 4.2.1); `successful` comes with a signed BasicOCSPResponse. */
type OcspErrorStatus = 'malformedRequest' | 'internalError' | 'tryLater' | 'sigRequired' | 'unauthorized'

const RESPONSE_STATUS_CODES: Record<OcspErrorStatus | 'successful', number> = {
  successful: 0,
  malformedRequest: 1,
  internalError: 2,
  tryLater: 3,
  // 4 is not used
  sigRequired: 5,
  unauthorized: 6,
}

const ID_PKIX_OCSP_BASIC = '1.3.6.1.5.5.7.48.1.1'

/** The hash algorithms a CertID may name, by OID, as node:crypto digests. */
const CERT_ID_HASHES: ReadonlyMap<string, 'sha1' | 'sha256' | 'sha384' | 'sha512'> = new Map([
  ['1.3.14.3.2.26', 'sha1'],
  ['2.16.840.1.101.3.4.2.1', 'sha256'],
  ['2.16.840.1.101.3.4.2.2', 'sha384'],
  ['2.16.840.1.101.3.4.2.3', 'sha512'],
] as const)

/** A malformed or over-large OCSPRequest: the responder answers `malformedRequest`. */
export class OcspRequestError extends Error {}

/** One certificate asked about: RFC 6960 4.1.1 CertID. */
export interface OcspCertId {
  /** The CertID's DER, answered back as it came (SingleResponse certID). */
  raw: Buffer
  /** The OID of hashAlgorithm. */
  hashAlgorithm: string
  issuerNameHash: Buffer
  issuerKeyHash: Buffer
  /** The serial's unsigned magnitude (no sign octet). */
  serial: Buffer
}

interface OcspRequest {
  certIds: OcspCertId[]
}

/** The single element an EXPLICIT tag wraps. */
function explicitContent(node: DerNode, what: string): DerNode {
  if (node.children.length !== 1) throw new DerError(`${what} must hold exactly one element`)
  return node.children[0]!
}

function readCertId(node: DerNode): OcspCertId {
  const reader = new DerReader(node, 'CertID')
  const { oid: hashAlgorithm } = readSignatureAlgorithm(
    reader.next(TAG.SEQUENCE, 'hashAlgorithm'),
    'CertID hashAlgorithm',
  )
  const issuerNameHash = readOctetString(reader.next(TAG.OCTET_STRING, 'issuerNameHash'), 'issuerNameHash')
  const issuerKeyHash = readOctetString(reader.next(TAG.OCTET_STRING, 'issuerKeyHash'), 'issuerKeyHash')
  const serial = readUnsigned(reader.next(TAG.INTEGER, 'serialNumber'), 'serialNumber')
  reader.end()
  return { raw: node.raw, hashAlgorithm, issuerNameHash, issuerKeyHash, serial }
}

function readRequest(node: DerNode): OcspCertId {
  const reader = new DerReader(node, 'Request')
  const certId = readCertId(reader.next(TAG.SEQUENCE, 'reqCert'))
  const extensions = reader.optional(contextTag(0, true))
  if (extensions)
    readExtensions(explicitContent(extensions, 'singleRequestExtensions'), 'singleRequestExtensions')
  reader.end()
  return certId
}

function readOcspRequest(der: Buffer): OcspRequest {
  const request = new DerReader(parseDer(der), 'OCSPRequest')
  const tbs = new DerReader(request.next(TAG.SEQUENCE, 'tbsRequest'), 'TBSRequest')
  // A signed request is accepted and its signature ignored: the responder requires none
  // (sigRequired is never answered), so checking it would only cost.
  const signature = request.optional(contextTag(0, true))
  if (signature && explicitContent(signature, 'optionalSignature').tag !== TAG.SEQUENCE)
    throw new DerError('optionalSignature is not a Signature')
  request.end()

  const version = tbs.optional(contextTag(0, true))
  if (version && readSmallUnsigned(explicitContent(version, 'version'), 'version') !== 0)
    throw new DerError('only version 1 requests exist')
  const requestor = tbs.optional(contextTag(1, true))
  if (requestor) explicitContent(requestor, 'requestorName')
  const list = tbs.next(TAG.SEQUENCE, 'requestList')
  // Read for their shape only: a nonce (RFC 8954) is not echoed (docs/pki.md, "OCSP").
  const extensions = tbs.optional(contextTag(2, true))
  if (extensions) readExtensions(explicitContent(extensions, 'requestExtensions'), 'requestExtensions')
  tbs.end()

  if (list.children.length === 0) throw new DerError('the requestList is empty')
  if (list.children.length > OCSP_LIMITS.requests)
    throw new OcspRequestError(`a request asks about more than ${OCSP_LIMITS.requests} certificates`)
  return { certIds: list.children.map(readRequest) }
}

/** Reads an OCSPRequest strictly; anything malformed or over the limits is an OcspRequestError. */
export function parseOcspRequest(der: Buffer): OcspRequest {
  if (!Buffer.isBuffer(der) || der.length === 0) throw new OcspRequestError('the request is empty')
  if (der.length > OCSP_LIMITS.requestBytes)
    throw new OcspRequestError(`the request is larger than ${OCSP_LIMITS.requestBytes} bytes`)
  try {
    return readOcspRequest(der)
  } catch (error) {
    if (error instanceof DerError) throw new OcspRequestError(`the request is malformed: ${error.message}`)
    throw error
  }
}

/**
 * Whether a CertID names the CA: its hashes of the CA certificate's subject Name (DER) and of
 * its subjectPublicKey (the BIT STRING's value) under the CertID's own hash algorithm. An
 * unsupported hash algorithm matches nothing.
 */
export function certIdNamesIssuer(
  certId: OcspCertId,
  issuer: { subject: Buffer; subjectPublicKey: Buffer },
): boolean {
  const hash = CERT_ID_HASHES.get(certId.hashAlgorithm)
  if (!hash) return false
  const digest = (bytes: Buffer) => createHash(hash).update(bytes).digest()
  return (
    certId.issuerNameHash.equals(digest(issuer.subject)) &&
    certId.issuerKeyHash.equals(digest(issuer.subjectPublicKey))
  )
}

/** ResponderID byKey (RFC 6960 4.2.1): the SHA-1 of the responder's subjectPublicKey value. */
export const responderKeyHash = (subjectPublicKey: Buffer): Buffer =>
  createHash('sha1').update(subjectPublicKey).digest()

/** An OCSPResponse without responseBytes: every status but `successful`. */
export function unsignedOcspResponse(status: OcspErrorStatus): Buffer {
  const code = RESPONSE_STATUS_CODES[status]
  if (code === undefined || code === 0) throw new Error(`Not an unsigned OCSP status: ${status}`)
  return sequence(integer(BigInt(code), TAG.ENUMERATED))
}

/** OCSP times are GeneralizedTime in whole seconds, whatever the year (RFC 6960 4.2.2.1). */
function generalizedTime(date: Date): Buffer {
  const year = date.getUTCFullYear()
  if (!(year >= 1950 && year <= 9999)) throw new RangeError(`The year ${year} cannot be written`)
  const iso = date.toISOString()
  const digits = `${iso.slice(0, 4)}${iso.slice(5, 7)}${iso.slice(8, 10)}${iso.slice(11, 13)}${iso.slice(14, 16)}${iso.slice(17, 19)}Z`
  return tlv(TAG.GENERALIZED_TIME, Buffer.from(digits, 'latin1'))
}

export type OcspCertStatus =
  | { status: 'good' }
  | { status: 'revoked'; revokedAt: Date; reason: RevocationReason }
  | { status: 'unknown' }

interface OcspResponseTemplate {
  /** responderKeyHash of the signer's key. */
  responderKeyHash: Buffer
  producedAt: Date
  signatureAlgorithm: IssuerAlgorithm
  responses: Array<{ certId: Buffer; status: OcspCertStatus; thisUpdate: Date; nextUpdate: Date }>
}

/** CertStatus ::= CHOICE { good [0] IMPLICIT NULL, revoked [1] IMPLICIT RevokedInfo, unknown [2] IMPLICIT NULL } */
function certStatus(status: OcspCertStatus): Buffer {
  switch (status.status) {
    case 'good':
      return tlv(contextTag(0, false))
    case 'unknown':
      return tlv(contextTag(2, false))
    case 'revoked': {
      const code = REASON_CODES[status.reason]
      if (code === undefined) throw new Error(`Unknown revocation reason ${status.reason}`)
      // As on the CRL, an unspecified reason is left out rather than written.
      const reason = code === 0 ? [] : [explicit(0, integer(BigInt(code), TAG.ENUMERATED))]
      return tlv(contextTag(1, true), generalizedTime(status.revokedAt), ...reason)
    }
  }
}

/**
 * A successful OCSPResponse: a BasicOCSPResponse (v1, ResponderID byKey, no extensions and no
 * certificates: the CA signs it itself, and the client holds the CA certificate) whose
 * tbsResponseData `sign` signs.
 */
export async function buildOcspResponse(
  template: OcspResponseTemplate,
  sign: (tbs: Buffer) => Promise<Buffer>,
): Promise<Buffer> {
  if (template.responses.length === 0) throw new Error('An OCSP response answers one certificate at least')
  if (template.responderKeyHash.length !== 20) throw new Error('A responder key hash is a SHA-1 digest')
  const singleResponses = template.responses.map((response) => {
    if (response.nextUpdate < response.thisUpdate) throw new Error('nextUpdate is before thisUpdate')
    // The CertID goes back as the client wrote it, so it matches byte for byte.
    parseDer(response.certId)
    return sequence(
      response.certId,
      certStatus(response.status),
      generalizedTime(response.thisUpdate),
      explicit(0, generalizedTime(response.nextUpdate)),
    )
  })
  const tbsResponseData = sequence(
    // version v1 is the DEFAULT, so DER leaves it out
    explicit(2, octetString(template.responderKeyHash)),
    generalizedTime(template.producedAt),
    sequence(...singleResponses),
  )
  const basic = await signed(tbsResponseData, template.signatureAlgorithm, sign)
  return sequence(
    integer(0n, TAG.ENUMERATED),
    explicit(0, sequence(oid(ID_PKIX_OCSP_BASIC), octetString(basic))),
  )
}
