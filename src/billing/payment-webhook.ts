import { createHmac, timingSafeEqual } from 'node:crypto'
import { AppError } from '../platform/errors.ts'

/** What the service takes from a payment provider's webhook: an event, verified to be the provider's. */
interface PaymentEvent {
  provider: string
  id: string
  type: string
  /** The invoice of this service the event is about, when it names one. */
  invoiceId: string | undefined
}

/** A payment provider's signed webhook format (docs/billing.md "Paying invoices"). */
export interface PaymentWebhook {
  readonly provider: string
  /** The event of a request, or a 400 when its signature is missing, wrong or too old. */
  verify(rawBody: string, headers: Record<string, string | string[] | undefined>, now: Date): PaymentEvent
}

/** Stripe's replay tolerance: a signature older than five minutes is refused. */
const STRIPE_TOLERANCE_SECONDS = 300
/** The metadata key carrying this service's invoice id on the provider's invoice. */
const INVOICE_METADATA_KEY = 'kms_invoice_id'

const refused = (code: string, message: string) => new AppError(400, code, message)

/**
 * Stripe's webhook signature: `Stripe-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of
 * "<t>.<raw body>" under the endpoint secret>[,v1=…]` (several v1 while a secret is rolled). The
 * comparison is constant-time; a timestamp more than five minutes from now is refused, as
 * Stripe's libraries do.
 */
export function stripeWebhook(secret: string): PaymentWebhook {
  return {
    provider: 'stripe',
    verify(rawBody, headers, now) {
      const header = headers['stripe-signature']
      if (typeof header !== 'string' || header.length > 2048)
        throw refused('invalid_signature', 'The Stripe-Signature header is missing')
      let timestamp: number | undefined
      const signatures: Buffer[] = []
      for (const part of header.split(',')) {
        const [name, value = ''] = part.trim().split('=', 2)
        if (name === 't' && /^[0-9]{1,12}$/.test(value)) timestamp = Number(value)
        if (name === 'v1' && /^[0-9a-f]{64}$/.test(value)) signatures.push(Buffer.from(value, 'hex'))
      }
      if (timestamp === undefined || signatures.length === 0)
        throw refused('invalid_signature', 'The Stripe-Signature header has no timestamp or v1 signature')
      if (Math.abs(now.getTime() / 1000 - timestamp) > STRIPE_TOLERANCE_SECONDS)
        throw refused('signature_expired', 'The signature’s timestamp is more than five minutes from now')
      const expected = createHmac('sha256', secret).update(`${timestamp}.${rawBody}`).digest()
      if (!signatures.some((signature) => timingSafeEqual(signature, expected)))
        throw refused('invalid_signature', 'No signature matches the endpoint secret')
      let event: { id?: unknown; type?: unknown; data?: { object?: { metadata?: Record<string, unknown> } } }
      try {
        event = JSON.parse(rawBody)
      } catch {
        throw refused('invalid_json', 'The body is not valid JSON')
      }
      if (typeof event.id !== 'string' || typeof event.type !== 'string' || event.id.length > 255)
        throw refused('invalid_event', 'The event has no id or type')
      const invoiceId = event.data?.object?.metadata?.[INVOICE_METADATA_KEY]
      return {
        provider: 'stripe',
        id: event.id,
        type: event.type,
        invoiceId: typeof invoiceId === 'string' ? invoiceId : undefined,
      }
    },
  }
}
