import { SIGNATURE_HEADER } from './webhook-signature.ts'

export interface SendResult {
  statusCode: number | null
  error: string | null
  durationMs: number
  responseExcerpt: string | null
}

/** Only this much of a receiver's answer is kept, for the tenant to see why a delivery failed. */
export const EXCERPT_BYTES = 256

/**
 * One HTTP attempt: POST the exact body with its signature, no redirects followed (a 3xx is a
 * failure: the signed body must reach the URL the tenant configured, not wherever it points),
 * a hard timeout, and at most EXCERPT_BYTES of the answer read.
 */
export async function sendWebhook(input: {
  url: string
  body: string
  signature: string
  eventId: string
  eventType: string
  timeoutMs: number
  userAgent: string
}): Promise<SendResult> {
  const started = performance.now()
  const elapsed = () => Math.round(performance.now() - started)
  try {
    const response = await fetch(input.url, {
      method: 'POST',
      redirect: 'manual',
      signal: AbortSignal.timeout(input.timeoutMs),
      headers: {
        'content-type': 'application/json',
        'user-agent': input.userAgent,
        [SIGNATURE_HEADER]: input.signature,
        'x-service-event-id': input.eventId,
        'x-service-event-type': input.eventType,
      },
      body: input.body,
    })
    const excerpt = await readExcerpt(response)
    const ok = response.status >= 200 && response.status < 300
    return {
      statusCode: response.status,
      error: ok
        ? null
        : response.status >= 300 && response.status < 400
          ? 'redirect_not_followed'
          : 'http_error',
      durationMs: elapsed(),
      responseExcerpt: excerpt,
    }
  } catch (error) {
    const name = (error as { name?: string }).name
    const timedOut = name === 'TimeoutError' || name === 'AbortError'
    return {
      statusCode: null,
      error: timedOut ? 'timeout' : 'connection_failed',
      durationMs: elapsed(),
      responseExcerpt: null,
    }
  }
}

async function readExcerpt(response: Response): Promise<string | null> {
  if (!response.body) return null
  const reader = response.body.getReader()
  const chunks: Uint8Array[] = []
  let length = 0
  try {
    while (length < EXCERPT_BYTES) {
      const { done, value } = await reader.read()
      if (done) break
      chunks.push(value)
      length += value.length
    }
  } catch {
    // A body that breaks off still leaves its status code, which is what counts.
  } finally {
    reader.cancel().catch(() => {})
  }
  if (length === 0) return null
  // `stream: true` holds back a character cut at the limit instead of turning it into U+FFFD
  // (3 bytes), so the excerpt never exceeds EXCERPT_BYTES.
  return new TextDecoder().decode(Buffer.concat(chunks).subarray(0, EXCERPT_BYTES), { stream: true })
}
