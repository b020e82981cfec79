import { X509Certificate } from 'node:crypto'
import { AppError } from '../platform/errors.ts'

/** A registered IdP's signing certificate, checked (docs/identity.md "SAML federation"). */
export interface SigningCertificate {
  /** One PEM block, as node:crypto writes it. */
  pem: string
  /** SHA-256 fingerprint, colon-separated hex (what IdP consoles show). */
  sha256: string
  notBefore: Date
  notAfter: Date
}

/** A PEM certificate is one block; headers of other types (keys, CSRs) are not certificates. */
const PEM = /^-----BEGIN CERTIFICATE-----\r?\n([A-Za-z0-9+/=\r\n\t ]+)-----END CERTIFICATE-----$/
const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/
/** Larger than any certificate an IdP signs with (a 16384-bit RSA certificate is about 4 KB of DER). */
export const CERTIFICATE_MAX_CHARS = 16_384

const invalid = (why: string) =>
  new AppError(
    400,
    'invalid_certificate',
    `The certificate must be a Base64 X.509 body without headers, or a full PEM (-----BEGIN CERTIFICATE-----): ${why}`,
    { field: 'body/certificate' },
  )

/**
 * Spec section 7: a Base64 X.509 body without headers, or a full PEM; anything else is
 * `invalid_certificate`. A notAfter not in the future is `certificate_expired`; a notBefore not
 * in the past is `certificate_not_yet_valid`. Only RSA and EC keys sign SAML messages.
 */
export function parseSigningCertificate(text: string, now: Date): SigningCertificate {
  const trimmed = text.trim()
  let body = trimmed
  if (trimmed.startsWith('-----')) {
    const match = PEM.exec(trimmed)
    if (!match) throw invalid('the PEM is not a single CERTIFICATE block')
    body = match[1]!
  }
  const compact = body.replace(/\s+/g, '')
  if (!compact || !BASE64.test(compact) || compact.length % 4 !== 0) throw invalid('the body is not Base64')
  const der = Buffer.from(compact, 'base64')
  let certificate: X509Certificate
  try {
    certificate = new X509Certificate(der)
  } catch {
    throw invalid('the body is not a DER-encoded X.509 certificate')
  }
  // Trailing bytes after the certificate are not one certificate.
  if (!certificate.raw.equals(der)) throw invalid('the body holds more than one certificate')
  const keyType = certificate.publicKey.asymmetricKeyType
  if (keyType !== 'rsa' && keyType !== 'ec')
    throw invalid(`its key is ${keyType}; SAML signatures use RSA or EC`)
  const notBefore = certificate.validFromDate
  const notAfter = certificate.validToDate
  if (notAfter.getTime() <= now.getTime())
    throw new AppError(400, 'certificate_expired', `The certificate expired at ${notAfter.toISOString()}`, {
      notAfter: notAfter.toISOString(),
    })
  if (notBefore.getTime() >= now.getTime())
    throw new AppError(
      400,
      'certificate_not_yet_valid',
      `The certificate is valid from ${notBefore.toISOString()} only`,
      { notBefore: notBefore.toISOString() },
    )
  return { pem: certificate.toString(), sha256: certificate.fingerprint256, notBefore, notAfter }
}
