import { createHmac, timingSafeEqual } from 'node:crypto'

/** Spec 6: `X-Service-Signature: sha256=<lowercase hex HMAC-SHA256 of the raw body>`. */
export const SIGNATURE_HEADER = 'x-service-signature'

export function signatureOf(secret: Uint8Array, body: string): string {
  return `sha256=${createHmac('sha256', secret).update(body, 'utf8').digest('hex')}`
}

/** What a receiver does: recompute and compare in constant time. */
export function verifySignature(secret: Uint8Array, body: string, header: string | undefined): boolean {
  if (header === undefined) return false
  const expected = Buffer.from(signatureOf(secret, body))
  const given = Buffer.from(header)
  return given.length === expected.length && timingSafeEqual(given, expected)
}
