import { explicit, integer, sequence, TAG, time } from './der.ts'
import {
  authorityKeyIdentifierExtension,
  checkDer,
  checkSerial,
  checkValidity,
  EXTENSION_OID,
  extension,
  type IssuerAlgorithm,
  signatureAlgorithmOf,
  signed,
} from './x509.ts'
import { readName } from './x509-names.ts'

/** Version 2 certificate revocation lists (RFC 5280 section 5). */

export type RevocationReason =
  | 'unspecified'
  | 'keyCompromise'
  | 'caCompromise'
  | 'affiliationChanged'
  | 'superseded'
  | 'cessationOfOperation'
  | 'certificateHold'
  | 'privilegeWithdrawn'
  | 'aACompromise'

/**
 * CRLReason codes (RFC 5280 5.3.1), OCSP's too (RFC 6960 4.2.1); 7 is unused and removeFromCRL
 * (8) belongs to delta CRLs only.
 */
export const REASON_CODES: Record<RevocationReason, number> = {
  unspecified: 0,
  keyCompromise: 1,
  caCompromise: 2,
  affiliationChanged: 3,
  superseded: 4,
  cessationOfOperation: 5,
  certificateHold: 6,
  privilegeWithdrawn: 9,
  aACompromise: 10,
}

export interface CrlTemplate {
  /** The issuer's Name DER: the CA certificate's subject bytes. */
  issuer: Buffer
  signatureAlgorithm: IssuerAlgorithm
  thisUpdate: Date
  nextUpdate: Date
  /** Monotonically increasing, at most 20 octets (RFC 5280 5.2.3). */
  crlNumber: bigint
  authorityKeyIdentifier: Buffer
  entries: Array<{ serial: Buffer; revokedAt: Date; reason: RevocationReason }>
}

function revokedCertificate(entry: CrlTemplate['entries'][number]): Buffer {
  checkSerial(entry.serial)
  const code = REASON_CODES[entry.reason]
  if (code === undefined) throw new Error(`Unknown revocation reason ${entry.reason}`)
  // RFC 5280 5.3.1: the reasonCode is left out rather than written as unspecified.
  const extensions =
    code === 0
      ? []
      : [sequence(extension(EXTENSION_OID.reasonCode, false, integer(BigInt(code), TAG.ENUMERATED)))]
  return sequence(integer(entry.serial), time(entry.revokedAt), ...extensions)
}

export async function buildCrl(
  template: CrlTemplate,
  sign: (tbs: Buffer) => Promise<Buffer>,
): Promise<Buffer> {
  checkValidity(template.thisUpdate, template.nextUpdate, ['thisUpdate', 'nextUpdate'])
  checkDer(template.issuer, 'The issuer name', (n) => readName(n, 'issuer'))
  if (template.crlNumber < 0n || template.crlNumber >= 2n ** 159n)
    throw new Error('A CRL number is 0..2^159-1')
  const entries = template.entries.map(revokedCertificate)
  const tbs = sequence(
    integer(1n), // v2
    signatureAlgorithmOf(template.signatureAlgorithm),
    template.issuer,
    time(template.thisUpdate),
    time(template.nextUpdate),
    // An empty revokedCertificates is left out, never written as an empty SEQUENCE.
    ...(entries.length > 0 ? [sequence(...entries)] : []),
    explicit(
      0,
      sequence(
        authorityKeyIdentifierExtension(template.authorityKeyIdentifier),
        extension(EXTENSION_OID.cRLNumber, false, integer(template.crlNumber)),
      ),
    ),
  )
  return signed(tbs, template.signatureAlgorithm, sign)
}
