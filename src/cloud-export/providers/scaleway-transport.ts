import type { IncomingHttpHeaders } from 'node:http'
import { createAdvancedClient, withHTTPClient, withProfile } from '@scaleway/sdk-client'
import { API as KeyManagerApi } from '@scaleway/sdk-key-manager/v1alpha1'
import type { OutboundClient, OutboundRequest } from '../../outbound/outbound-client.ts'
import { CloudProviderError, type ConnectionContext } from '../provider.ts'

/**
 * The Scaleway SDK with its HTTP transport replaced: the client's `httpClient` setting (any
 * fetch-compatible function) performs every request the Key Manager API class builds, so each
 * one passes the guarded outbound client (address policy, pinned connection, deadline, bounded
 * answer) instead of the global fetch. It must be set with `withHTTPClient` on
 * `createAdvancedClient`: `createClient` reads only the profile fields and silently keeps the
 * global fetch.
 */

/** A Key Manager answer is a key, a key list or a PEM: far below this. */
const MAX_RESPONSE_BYTES = 1024 * 1024

const METHODS: readonly OutboundRequest['method'][] = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'HEAD']

/** Statuses whose Response must have no body (the Fetch standard refuses one). */
const NULL_BODY_STATUSES = new Set([204, 205, 304])

/** The settings and credentials a Key Manager client needs, as parseSettings/parseCredentials return them. */
export interface ScalewayConnection {
  region: string
  projectId: string
  apiUrl: string
  caCertificate?: string
  accessKey: string
  secretKey: string
}

/** The Key Manager API of the installed SDK, talking through `connection.outbound`. */
export function createKeyManagerApi(
  connection: ConnectionContext,
  scaleway: ScalewayConnection,
): KeyManagerApi {
  const outbound = scaleway.caCertificate
    ? connection.outbound.withExtraCa(scaleway.caCertificate)
    : connection.outbound
  let client: ReturnType<typeof createAdvancedClient>
  try {
    client = createAdvancedClient(
      withProfile({
        accessKey: scaleway.accessKey,
        secretKey: scaleway.secretKey,
        defaultRegion: scaleway.region,
        defaultProjectId: scaleway.projectId,
        apiURL: scaleway.apiUrl,
      }),
      withHTTPClient(createGuardedFetch(outbound, connection.timeoutMs)),
    )
  } catch {
    // The SDK's own validation messages quote the values they refuse, the secret key included:
    // none of it is passed on (parseCredentials applies the same patterns, so this is a backstop).
    throw new CloudProviderError(
      'cloud_configuration_invalid',
      'the Scaleway connection is not usable',
      false,
    )
  }
  return new KeyManagerApi(client)
}

/**
 * A fetch for the SDK over the guarded client. Transport failures are thrown as the
 * OutboundError they are (the SDK has no error interceptor here, so they reach the caller as is).
 */
export function createGuardedFetch(outbound: OutboundClient, timeoutMs: number): typeof fetch {
  return async (input, init) => {
    const request = new Request(input, init)
    const method = request.method.toUpperCase() as OutboundRequest['method']
    if (!METHODS.includes(method)) throw new TypeError('unsupported HTTP method')
    const body = method === 'GET' || method === 'HEAD' ? undefined : Buffer.from(await request.arrayBuffer())
    try {
      const response = await outbound.request({
        url: new URL(request.url),
        method,
        headers: Object.fromEntries(request.headers),
        ...(body && body.length > 0 ? { body } : {}),
        timeoutMs,
        maxResponseBytes: MAX_RESPONSE_BYTES,
        oversize: 'fail',
        signal: request.signal,
      })
      if (response.status < 200 || response.status > 599) {
        throw new CloudProviderError(
          'cloud_unexpected_response',
          `Scaleway answered with HTTP status ${response.status}`,
          false,
        )
      }
      return new Response(NULL_BODY_STATUSES.has(response.status) ? null : response.body, {
        status: response.status,
        headers: toHeaders(response.headers),
      })
    } finally {
      // An import request's body holds the key material: wiped once sent (the JSON string the
      // SDK built it from is immutable and left to the garbage collector).
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
