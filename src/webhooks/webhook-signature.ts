import { createHmac } from 'node:crypto'

/** Spec 6: `X-Service-Signature: sha256=<lowercase hex HMAC-SHA256 of the raw body>`. */
export const SIGNATURE_HEADER = 'x-service-signature'

export function signatureOf(secret: Uint8Array, body: string): string {
  return `sha256=${createHmac('sha256', secret).update(body, 'utf8').digest('hex')}`
}
