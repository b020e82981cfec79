import { createAdvancedClient, withHTTPClient, withProfile } from '@scaleway/sdk-client'
import { API as KeyManagerApi } from '@scaleway/sdk-key-manager/v1alpha1'
import type { OutboundClient } from '../../outbound/outbound-client.ts'
import { CloudProviderError, type ConnectionContext } from '../provider.ts'
import { guardedFetch, MAX_CLOUD_RESPONSE_BYTES } from './guarded-fetch.ts'

/**
 * The Scaleway SDK with its HTTP transport replaced: the client's `httpClient` setting (any
 * fetch-compatible function) performs every request the Key Manager API class builds, so each
 * one passes the guarded outbound client (address policy, pinned connection, deadline, bounded
 * answer) instead of the global fetch. It must be set with `withHTTPClient` on
 * `createAdvancedClient`: `createClient` reads only the profile fields and silently keeps the
 * global fetch.
 */

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

/** A fetch for the SDK over the guarded client (guarded-fetch.ts). */
function createGuardedFetch(outbound: OutboundClient, timeoutMs: number): typeof fetch {
  return guardedFetch(
    (request) =>
      outbound.request({
        ...request,
        timeoutMs,
        maxResponseBytes: MAX_CLOUD_RESPONSE_BYTES,
        oversize: 'fail',
      }),
    'Scaleway',
  )
}
