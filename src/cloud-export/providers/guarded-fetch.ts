import type { IncomingHttpHeaders } from 'node:http'
import type { OutboundRequest, OutboundResponse } from '../../outbound/outbound-client.ts'
import { CloudProviderError } from '../provider.ts'

/** What an SDK that speaks `fetch` may send (the guarded client takes these methods). */
const METHODS: readonly OutboundRequest['method'][] = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'HEAD']
/** Statuses whose Response must have no body (the Fetch standard refuses one). */
const NULL_BODY_STATUSES = new Set([204, 205, 304])
/** What one answer of a cloud API may weigh. */
export const MAX_CLOUD_RESPONSE_BYTES = 1024 * 1024

/**
 * A `fetch` for SDKs that take one (Scaleway's, Google's Gaxios), whose every request goes through
 * `send` (the guarded client, with the provider's own bookkeeping). Transport failures are thrown
 * as the OutboundError they are. The request body is wiped once sent: an import's holds the key
 * (the JSON string the SDK built it from is immutable and left to the garbage collector).
 */
export function guardedFetch(
  send: (
    request: Pick<OutboundRequest, 'url' | 'method' | 'headers' | 'body' | 'signal'>,
  ) => Promise<OutboundResponse>,
  where: string,
): typeof fetch {
  return async (input, init) => {
    // Request normalises what the SDK passes (a URL, Headers, a string body) and drops the rest.
    const request = new Request(input, init)
    const method = request.method.toUpperCase() as OutboundRequest['method']
    if (!METHODS.includes(method)) throw new TypeError('unsupported HTTP method')
    const body = method === 'GET' || method === 'HEAD' ? undefined : Buffer.from(await request.arrayBuffer())
    try {
      const answer = await send({
        url: new URL(request.url),
        method,
        headers: Object.fromEntries(request.headers),
        ...(body && body.length > 0 ? { body } : {}),
        signal: request.signal,
      })
      if (answer.status < 200 || answer.status > 599)
        throw new CloudProviderError(
          'cloud_unexpected_response',
          `${where} answered with HTTP status ${answer.status}`,
          false,
        )
      return new Response(NULL_BODY_STATUSES.has(answer.status) ? null : answer.body, {
        status: answer.status,
        headers: toHeaders(answer.headers),
      })
    } finally {
      body?.fill(0)
    }
  }
}

function toHeaders(incoming: IncomingHttpHeaders): Headers {
  const headers = new Headers()
  for (const [name, value] of Object.entries(incoming)) {
    if (value === undefined) continue
    for (const one of Array.isArray(value) ? value : [value]) headers.append(name, one)
  }
  return headers
}
