import type { IncomingHttpHeaders } from 'node:http'
import { KMSClient, KMSServiceException } from '@aws-sdk/client-kms'
import {
  type HttpHandler,
  type HttpHandlerOptions,
  type HttpRequest,
  HttpResponse,
} from '@smithy/protocol-http'
import { type OutboundClient, OutboundError, type OutboundRequest } from '../../outbound/outbound-client.ts'
import { CloudProviderError, cloudErrorOfOutbound } from '../provider.ts'

/**
 * How the AWS SDK reaches AWS KMS here: the SDK builds, signs (SigV4) and parses every request,
 * and this module hands the signed request to the guarded outbound client, unchanged, instead of
 * letting the SDK open its own sockets. It also turns what can go wrong on the way (a refused
 * destination, a timeout, an AWS error) into CloudProviderErrors whose messages hold no secret.
 */

/** KMS answers are small JSON documents (a public key, an import token): anything bigger is not KMS. */
const MAX_RESPONSE_BYTES = 1024 * 1024

const METHODS = new Set<OutboundRequest['method']>(['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'HEAD'])

export interface AwsConnection {
  region: string
  endpoint: string | undefined
  accessKeyId: string
  secretAccessKey: string
  sessionToken: string | undefined
}

/**
 * A KMSClient that sends through `outbound`. Everything the SDK would otherwise read from the
 * machine's environment or ~/.aws files and that changes where or how requests go is given
 * here (credentials, region, FIPS/dual-stack endpoints, retries): a tenant's connection must
 * not pick up the host's AWS configuration.
 */
export function createKmsClient(
  connection: AwsConnection,
  outbound: OutboundClient,
  timeoutMs: number,
): KMSClient {
  return new KMSClient({
    region: connection.region,
    ...(connection.endpoint === undefined ? {} : { endpoint: connection.endpoint }),
    credentials: {
      accessKeyId: connection.accessKeyId,
      secretAccessKey: connection.secretAccessKey,
      ...(connection.sessionToken === undefined ? {} : { sessionToken: connection.sessionToken }),
    },
    // The export's own backoff retries a failed push; the SDK retrying inside it would multiply
    // the attempts and the time one push holds its lease.
    maxAttempts: 1,
    retryMode: 'standard',
    useFipsEndpoint: false,
    useDualstackEndpoint: false,
    // Never AWS_ENDPOINT_URL* or ~/.aws/config's endpoint_url: the host's configuration must not
    // send every tenant's signed requests and wrapped keys somewhere else.
    ignoreConfiguredEndpointUrls: true,
    requestHandler: new OutboundHttpHandler(outbound, timeoutMs),
  })
}

/**
 * The smithy HttpHandler the SDK calls with each signed request. The headers are passed on
 * exactly as signed (host, x-amz-date, x-amz-target, x-amz-security-token, content-type,
 * content-length ...): changing any of them would break the signature.
 */
class OutboundHttpHandler implements HttpHandler {
  readonly metadata = { handlerProtocol: 'http/1.1' }
  readonly #outbound: OutboundClient
  readonly #timeoutMs: number

  constructor(outbound: OutboundClient, timeoutMs: number) {
    this.#outbound = outbound
    this.#timeoutMs = timeoutMs
  }

  async handle(request: HttpRequest, options?: HttpHandlerOptions): Promise<{ response: HttpResponse }> {
    const method = request.method.toUpperCase() as OutboundRequest['method']
    if (!METHODS.has(method)) throw new Error(`The AWS SDK asked for an unsupported HTTP method ${method}`)
    const signal = options?.abortSignal
    const answer = await this.#outbound.request({
      url: urlOf(request),
      method,
      headers: { ...request.headers },
      ...bodyOf(request),
      timeoutMs: this.#timeoutMs,
      maxResponseBytes: MAX_RESPONSE_BYTES,
      oversize: 'fail',
      ...(signal instanceof AbortSignal ? { signal } : {}),
    })
    return {
      response: new HttpResponse({
        statusCode: answer.status,
        headers: flattenHeaders(answer.headers),
        // The SDK's body collector takes a Uint8Array as it is (a Node Readable would do too); a
        // plain view keeps it from re-prototyping the outbound client's Buffer.
        body: new Uint8Array(answer.body.buffer, answer.body.byteOffset, answer.body.byteLength),
      }),
    }
  }

  // The HttpHandler contract lets a client's extensions tune the handler (socket timeouts, a
  // logger); this one has nothing to tune: the outbound client owns connections and timeouts.
  updateHttpClientConfig(): void {}
  httpHandlerConfigs(): Record<string, never> {
    return {}
  }
  destroy(): void {}
}

function urlOf(request: HttpRequest): URL {
  const protocol = request.protocol.endsWith(':') ? request.protocol : `${request.protocol}:`
  const host =
    request.hostname.includes(':') && !request.hostname.startsWith('[')
      ? `[${request.hostname}]`
      : request.hostname
  const port = request.port === undefined ? '' : `:${request.port}`
  const query = queryStringOf(request.query)
  return new URL(`${protocol}//${host}${port}${request.path}${query === '' ? '' : `?${query}`}`)
}

/** The query as the SDK signed it: RFC 3986 encoded names and values, repeated for lists. */
function queryStringOf(query: HttpRequest['query']): string {
  const parts: string[] = []
  for (const [name, value] of Object.entries(query ?? {})) {
    const key = encodeRfc3986(name)
    if (value === null || value === undefined) parts.push(key)
    else for (const item of [value].flat()) parts.push(`${key}=${encodeRfc3986(item)}`)
  }
  return parts.join('&')
}

const encodeRfc3986 = (text: string) =>
  encodeURIComponent(text).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`)

function bodyOf(request: HttpRequest): { body?: string | Buffer } {
  const body: unknown = request.body
  if (body === undefined || body === null) return {}
  if (typeof body === 'string') return { body }
  if (body instanceof Uint8Array) return { body: Buffer.from(body.buffer, body.byteOffset, body.byteLength) }
  // KMS's JSON protocol always serialises to a string; a stream would mean another protocol.
  throw new Error('The AWS SDK produced a streaming request body, which this transport does not send')
}

function flattenHeaders(headers: IncomingHttpHeaders): Record<string, string> {
  const flat: Record<string, string> = {}
  for (const [name, value] of Object.entries(headers)) {
    if (value !== undefined) flat[name] = Array.isArray(value) ? value.join(', ') : value
  }
  return flat
}

/**
 * AWS error codes that say the credentials, or what they may do, were refused. Their AWS
 * messages are not repeated: a signature error's message can hold the canonical request,
 * session token included.
 */
const CREDENTIAL_ERRORS: Record<string, string> = {
  UnrecognizedClientException: 'AWS does not recognise the access key or session token',
  InvalidClientTokenId: 'AWS does not recognise the access key or session token',
  InvalidSignatureException: 'AWS refused the request signature: check the secret access key and the region',
  SignatureDoesNotMatch: 'AWS refused the request signature: check the secret access key and the region',
  IncompleteSignatureException: 'AWS refused the request signature',
  MissingAuthenticationTokenException: 'AWS found no credentials in the request',
  ExpiredTokenException: 'The session token has expired',
}

/** Errors a later attempt may not meet: AWS is busy or failing, not refusing this request. */
const PASSING_ERRORS = new Set([
  'ThrottlingException',
  'TooManyRequestsException',
  'RequestLimitExceeded',
  'KMSInternalException',
  'DependencyTimeoutException',
  'ServiceUnavailableException',
  'InternalFailure',
  // Each push asks for fresh import parameters: a token that expired on the way is not fatal.
  'ExpiredImportTokenException',
])

/** Errors of the import itself: the material or the wrapping was refused. */
const IMPORT_ERRORS = new Set([
  'IncorrectKeyMaterialException',
  'InvalidImportTokenException',
  'InvalidCiphertextException',
  'UnsupportedOperationException',
])

/**
 * Runs one SDK call, turning any failure of the exchange into a CloudProviderError. `secrets`
 * are struck out of whatever AWS text is quoted (belt and braces: AWS does not echo them).
 */
export async function callAws<T>(
  operation: string,
  secrets: readonly string[],
  call: () => Promise<T>,
): Promise<T> {
  try {
    return await call()
  } catch (error) {
    throw toCloudProviderError(operation, error, secrets)
  }
}

export function toCloudProviderError(operation: string, error: unknown, secrets: readonly string[]): Error {
  if (error instanceof CloudProviderError) return error
  if (error instanceof OutboundError) return fromOutboundError(operation, error)
  if (error instanceof KMSServiceException) return fromAwsError(operation, error, secrets)
  // Neither the transport nor an AWS error: the SDK could not read an answer (a proxy's HTML
  // error page, a truncated body). Its text may quote the answer, so only the status is kept.
  if (error instanceof Error && '$metadata' in error) {
    const status = statusOf(error.$metadata)
    if (isPassingStatus(status))
      return new CloudProviderError(
        'cloud_unavailable',
        `AWS KMS ${operation} failed for now (HTTP ${status})`,
        true,
      )
    return new CloudProviderError(
      'cloud_unexpected_response',
      `AWS KMS ${operation}: the answer could not be read${status ? ` (HTTP ${status})` : ''}`,
      true,
    )
  }
  return error instanceof Error ? error : new Error(String(error))
}

function fromOutboundError(operation: string, error: OutboundError): CloudProviderError {
  return cloudErrorOfOutbound(`AWS KMS (${operation})`, error.code)
}

function fromAwsError(
  operation: string,
  error: KMSServiceException,
  secrets: readonly string[],
): CloudProviderError {
  const name = safeName(error.name)
  const status = error.$metadata.httpStatusCode
  const fixed = CREDENTIAL_ERRORS[name]
  if (fixed !== undefined)
    return new CloudProviderError('cloud_credentials_refused', `${fixed} (${name})`, false)
  const said = quote(error.message, secrets)
  if (name === 'AccessDeniedException') {
    // AWS names the principal and the missing permission: what the tenant needs to fix its policy.
    return new CloudProviderError(
      'cloud_credentials_refused',
      `AWS KMS ${operation} was denied: ${said}`,
      false,
    )
  }
  if (PASSING_ERRORS.has(name) || error.$fault === 'server' || isPassingStatus(status)) {
    return new CloudProviderError(
      'cloud_unavailable',
      `AWS KMS ${operation} failed for now (${name}${status ? `, HTTP ${status}` : ''})`,
      true,
    )
  }
  if (name === 'LimitExceededException') {
    return new CloudProviderError(
      'cloud_quota_exceeded',
      `AWS KMS ${operation}: a quota is exhausted: ${said}`,
      false,
    )
  }
  const code = IMPORT_ERRORS.has(name) ? 'cloud_import_refused' : 'cloud_request_refused'
  return new CloudProviderError(code, `AWS KMS refused ${operation} (${name}): ${said}`, false)
}

const isPassingStatus = (status: number | undefined) =>
  status !== undefined && (status === 429 || status >= 500)

const statusOf = (metadata: unknown): number | undefined => {
  const status = (metadata as { httpStatusCode?: unknown } | null)?.httpStatusCode
  return typeof status === 'number' ? status : undefined
}

/** An error name as AWS sent it, reduced to what an error name can be. */
const safeName = (name: string) => name.replace(/[^A-Za-z0-9_.]/g, '').slice(0, 80) || 'UnknownError'

/**
 * AWS's own words, made safe to store: no credential value, no long base64 or hex run (a token,
 * a blob echoed back by a validation message), one line, bounded.
 */
function quote(message: string, secrets: readonly string[]): string {
  let text = message
  for (const secret of secrets) if (secret.length >= 4) text = text.split(secret).join('[redacted]')
  return (
    text
      .replace(/[A-Za-z0-9+/_=-]{64,}/g, '[redacted]')
      .replace(/\s+/g, ' ')
      .trim()
      .slice(0, 300) || 'no message'
  )
}
