import { type KeyObject, sign } from 'node:crypto'
import { KeyManagementServiceClient } from '@google-cloud/kms'
import { OAuth2Client } from 'google-auth-library'
import {
  type OutboundClient,
  OutboundError,
  type OutboundRequest,
  type OutboundResponse,
} from '../../outbound/outbound-client.ts'
import { CloudProviderError } from '../provider.ts'
import { guardedFetch, MAX_CLOUD_RESPONSE_BYTES } from './guarded-fetch.ts'

/**
 * Cloud KMS through the official SDK (@google-cloud/kms) in its REST transport, with every
 * request on the guarded outbound client (src/outbound):
 *
 * - google-gax's REST stub (fallbackServiceStub) sends each call as `authClient.fetch(url, init)`.
 *   The auth client given to the SDK is google-auth-library's OAuth2Client, whose transporter (a
 *   Gaxios) has a `fetchImplementation` over src/outbound: no global fetch, and the keep-alive
 *   agent the stub passes along is ignored (the guarded client never pools connections).
 * - The access token comes from the OAuth2Client's `refreshHandler`: the service account's
 *   JWT-bearer grant (RFC 7523), posted to the token URI through src/outbound as well. The SDK's
 *   own service-account client (JWT + gtoken) is not used for it: gtoken posts to, and signs its
 *   assertion for, a fixed https://oauth2.googleapis.com/token, so neither a key's own token_uri
 *   nor a test's fake could be honoured.
 *
 * Each exchange is noted in a journal: the adapter explains a failure from it (which endpoint
 * answered, its status and Google's error code, or the transport's reason), not from the SDK's
 * errors, which carry the server's own text. Only codes are kept, never a body, a header or a URL.
 */

/** Google's OAuth token endpoint or the Cloud KMS API. */
type GoogleService = 'oauth' | 'kms'

export interface Exchange {
  service: GoogleService
  /** Absent when no answer came (see `failure`). */
  status?: number
  /** Google's canonical error status (`error.status`, e.g. PERMISSION_DENIED) or the OAuth `error` (e.g. invalid_grant). */
  errorCode?: string
  failure?: OutboundError
}

export interface ExchangeJournal {
  last: Exchange | undefined
}

/** What a session needs, as the adapter validated it. */
export interface GcpAccount {
  /** An origin: https://cloudkms.googleapis.com unless a regional or private endpoint (or a test's fake). */
  apiEndpoint: string
  tokenUri: string
  clientEmail: string
  privateKey: KeyObject
}

export interface KmsSession {
  client: KeyManagementServiceClient
  /** The SDK's auth client (its token comes from the JWT-bearer grant). */
  auth: OAuth2Client
  journal: ExchangeJournal
  close(): Promise<void>
}

interface ExchangeOptions {
  outbound: OutboundClient
  timeoutMs: number
  journal: ExchangeJournal
}

/** What an OAuth2Client's refreshHandler returns. */
interface AccessToken {
  access_token: string
  expiry_date: number
}

const KMS_SCOPE = 'https://www.googleapis.com/auth/cloudkms'
const JWT_BEARER_GRANT = 'urn:ietf:params:oauth:grant-type:jwt-bearer'
/** Google accepts assertions valid for at most an hour. */
const ASSERTION_LIFETIME_SECONDS = 3600
/** Cloud KMS answers are small JSON documents (a key, an import job, a PEM); this bounds a hostile one. */
/** Error codes may be shown to the tenant: anything else a server puts there is dropped. */
const SAFE_CODE = /^[A-Za-z0-9_.-]{1,64}$/
/** An access token goes into a header: printable ASCII only. */
const ACCESS_TOKEN = /^[\x21-\x7e]{1,4096}$/

/**
 * A Cloud KMS client for one call of the adapter. One per call: no token or connection is shared
 * between tenants' connections, and rotated credentials take effect at once.
 */
export function openKmsSession(outbound: OutboundClient, timeoutMs: number, account: GcpAccount): KmsSession {
  const journal: ExchangeJournal = { last: undefined }
  const exchange: ExchangeOptions = { outbound, timeoutMs, journal }
  const auth = new OAuth2Client({
    transporterOptions: {
      fetchImplementation: createGuardedFetch(exchange),
      // Every answer reaches the REST stub, which decodes Google's error body into a GoogleError
      // as it does in a browser; Gaxios would otherwise throw its own error first, and the
      // OAuth2Client would resend a 401/403 with a fresh token (a refused token stays refused).
      validateStatus: () => true,
    },
    // No request/response logging interceptors (they would log answers when
    // GOOGLE_SDK_NODE_LOGGING is set) and no extra User-Agent.
    useAuthRequestParameters: false,
  })
  auth.refreshHandler = () => grantAccessToken(exchange, account)
  const endpoint = new URL(account.apiEndpoint)
  const client = new KeyManagementServiceClient({
    // The REST (HTTP/1.1 + JSON) transport: the only one whose requests go through `auth.fetch`.
    fallback: true,
    authClient: auth,
    // google-gax builds `${protocol}://${servicePath}:${port}/v1/...` from these.
    apiEndpoint: endpoint.hostname,
    port: Number(endpoint.port) || (endpoint.protocol === 'https:' ? 443 : 80),
    protocol: endpoint.protocol.slice(0, -1),
    // Fixed, so that GOOGLE_CLOUD_UNIVERSE_DOMAIN in the environment changes nothing.
    universeDomain: 'googleapis.com',
  })
  // The client logs each request (importCryptoKeyVersion's wrapped key included) when
  // GOOGLE_SDK_NODE_LOGGING names it: this one never logs, whatever the environment says.
  const silent = () => {}
  ;(client as unknown as { _log: unknown })._log = {
    info: silent,
    debug: silent,
    warn: silent,
    error: silent,
  }
  return {
    client,
    auth,
    journal,
    close: () => client.close(),
  }
}

/**
 * The JWT-bearer grant of a service account (RFC 7523, Google's "OAuth 2.0 for server to server
 * applications"): an assertion signed RS256 with the service account key, exchanged at the token
 * URI for an access token to Cloud KMS.
 */
async function grantAccessToken(
  exchange: ExchangeOptions,
  account: Pick<GcpAccount, 'tokenUri' | 'clientEmail' | 'privateKey'>,
): Promise<AccessToken> {
  const issuedAt = Math.floor(Date.now() / 1000)
  const assertion = signAssertion(account.privateKey, {
    iss: account.clientEmail,
    scope: KMS_SCOPE,
    aud: account.tokenUri,
    iat: issuedAt,
    exp: issuedAt + ASSERTION_LIFETIME_SECONDS,
  })
  const answer = await send(exchange, 'oauth', {
    url: new URL(account.tokenUri),
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' },
    body: new URLSearchParams({ grant_type: JWT_BEARER_GRANT, assertion }).toString(),
  })
  // A refusal is explained from the journal (status and OAuth error code) by the adapter.
  if (answer.status !== 200) throw new Error('the token request was not granted')
  const token = parseJson(answer.body)
  const accessToken = token?.['access_token']
  const expiresIn = token?.['expires_in']
  if (typeof accessToken !== 'string' || !ACCESS_TOKEN.test(accessToken)) {
    throw new CloudProviderError(
      'cloud_unexpected_response',
      "Google's token endpoint answered without an access token",
      false,
    )
  }
  const lifetimeSeconds =
    typeof expiresIn === 'number' && expiresIn > 0 ? expiresIn : ASSERTION_LIFETIME_SECONDS
  return { access_token: accessToken, expiry_date: Date.now() + lifetimeSeconds * 1000 }
}

function signAssertion(privateKey: KeyObject, claims: Record<string, string | number>): string {
  const encode = (value: object) => Buffer.from(JSON.stringify(value)).toString('base64url')
  const signingInput = `${encode({ alg: 'RS256', typ: 'JWT' })}.${encode(claims)}`
  const signature = sign('sha256', Buffer.from(signingInput), privateKey)
  return `${signingInput}.${signature.toString('base64url')}`
}

/**
 * A fetch for Gaxios over the guarded client (guarded-fetch.ts). Transport failures are thrown as
 * the OutboundError they are and noted in the journal; the SDK wraps them, the adapter reads the
 * journal.
 */
function createGuardedFetch(exchange: ExchangeOptions): typeof fetch {
  return guardedFetch((request) => send(exchange, 'kms', request), 'Cloud KMS')
}

async function send(
  exchange: ExchangeOptions,
  service: GoogleService,
  request: Pick<OutboundRequest, 'url' | 'method' | 'headers' | 'body' | 'signal'>,
): Promise<OutboundResponse> {
  try {
    const answer = await exchange.outbound.request({
      ...request,
      timeoutMs: exchange.timeoutMs,
      maxResponseBytes: MAX_CLOUD_RESPONSE_BYTES,
      oversize: 'fail',
    })
    exchange.journal.last = {
      service,
      status: answer.status,
      ...(answer.status >= 400 ? errorCodeOf(answer.body) : {}),
    }
    return answer
  } catch (error) {
    if (error instanceof OutboundError) exchange.journal.last = { service, failure: error }
    throw error
  }
}

/** The code of a Google API error (`{error: {code, status}}`) or an OAuth error (`{error: "invalid_grant"}`). */
function errorCodeOf(body: Buffer): Pick<Exchange, 'errorCode'> {
  const error = parseJson(body)?.['error']
  const code = typeof error === 'string' ? error : isRecord(error) ? error['status'] : undefined
  return typeof code === 'string' && SAFE_CODE.test(code) ? { errorCode: code } : {}
}

function parseJson(body: Buffer): Record<string, unknown> | undefined {
  try {
    const parsed: unknown = JSON.parse(body.toString('utf8'))
    return isRecord(parsed) ? parsed : undefined
  } catch {
    return undefined
  }
}

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value)
