import { type OutboundClient, OutboundError } from '../outbound/outbound-client.ts'
import { SIGNATURE_HEADER } from './webhook-signature.ts'

export interface SendResult {
  statusCode: number | null
  error: string | null
  durationMs: number
  responseExcerpt: string | null
}

/**
 * Only this much of a receiver's answer is kept, for the tenant to see why a delivery failed,
 * and only from a receiver the operator allowed (KMS_OUTBOUND_ALLOW): from anywhere else the
 * status code alone, so a webhook cannot be used to read what some server answers.
 */
const EXCERPT_BYTES = 256

/**
 * One HTTP attempt through the service's outbound client (src/outbound/): the destination is
 * resolved and checked first (`destination_not_allowed`: no request made), then the exact body
 * is POSTed with its signature, no redirects followed (a 3xx is a failure: the signed body must
 * reach the URL the tenant configured, not wherever it points), within a hard timeout, and at
 * most EXCERPT_BYTES of the answer read.
 */
export async function sendWebhook(
  outbound: OutboundClient,
  input: {
    url: string
    body: string
    signature: string
    eventId: string
    eventType: string
    timeoutMs: number
    userAgent: string
  },
): Promise<SendResult> {
  const started = performance.now()
  const elapsed = () => Math.round(performance.now() - started)
  try {
    const response = await outbound.request({
      url: new URL(input.url),
      method: 'POST',
      timeoutMs: input.timeoutMs,
      maxResponseBytes: EXCERPT_BYTES,
      oversize: 'truncate',
      headers: {
        'content-type': 'application/json',
        'user-agent': input.userAgent,
        [SIGNATURE_HEADER]: input.signature,
        'x-service-event-id': input.eventId,
        'x-service-event-type': input.eventType,
      },
      body: input.body,
    })
    const ok = response.status >= 200 && response.status < 300
    return {
      statusCode: response.status,
      error: ok
        ? null
        : response.status >= 300 && response.status < 400
          ? 'redirect_not_followed'
          : 'http_error',
      durationMs: elapsed(),
      responseExcerpt: response.operatorAllowed ? excerpt(response.body) : null,
    }
  } catch (error) {
    const code = error instanceof OutboundError ? error.code : 'connection_failed'
    return {
      statusCode: null,
      // An unresolvable host is a connection that could not be made, as before.
      error: code === 'destination_not_allowed' || code === 'timeout' ? code : 'connection_failed',
      durationMs: elapsed(),
      responseExcerpt: null,
    }
  }
}

function excerpt(body: Buffer): string | null {
  if (body.length === 0) return null
  // `stream: true` holds back a character cut at the limit instead of turning it into U+FFFD
  // (3 bytes), so the excerpt never exceeds EXCERPT_BYTES.
  return new TextDecoder().decode(body.subarray(0, EXCERPT_BYTES), { stream: true })
}
