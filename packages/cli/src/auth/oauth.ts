import { CliError, EXIT } from '../command.ts'
import { checkServiceAddress } from '../settings.ts'

/*
 * The service's OpenID provider as the `kms` command sees it: its discovery document and the
 * few requests a native public client makes (docs/identity.md "The command line").
 */

export const CLIENT_ID = 'kms-cli'
/** `api` is the tenant API's scope; openid and email give the ID token that says who signed in. */
export const SCOPE = 'openid email profile api'
export const DEVICE_CODE_GRANT = 'urn:ietf:params:oauth:grant-type:device_code'
/** What one request to the provider may take before the service counts as unreachable. */
const REQUEST_TIMEOUT_MS = 30_000
const USER_AGENT = `kms-cli node/${process.versions.node} ${process.platform}`

export const tenantResource = (tenantId: string): string => `urn:kms:tenant:${tenantId}`

/**
 * The service's base URL in one spelling (no trailing slash), so credentials are found again;
 * https, or http to this machine only (settings.ts checkServiceAddress).
 */
export function normalizeAddr(addr: string): string {
  const url = checkServiceAddress(addr, '--addr')
  return `${url.origin}${url.pathname.replace(/\/+$/, '')}`
}

export interface ProviderMetadata {
  issuer: string
  authorizationEndpoint: string
  tokenEndpoint: string
  jwksUri: string
  revocationEndpoint: string | undefined
  deviceAuthorizationEndpoint: string | undefined
}

/** The provider's answer to a token request. */
export interface TokenAnswer {
  access_token: string
  token_type: string
  expires_in: number
  refresh_token?: string
  id_token?: string
}

/** An OAuth error answer (RFC 6749 5.2): `error` is the provider's code. */
export class OAuthError extends Error {
  readonly error: string
  readonly description: string | undefined
  constructor(error: string, description: string | undefined) {
    super(description ? `${error}: ${description}` : error)
    this.name = 'OAuthError'
    this.error = error
    this.description = description
  }
}

const unreachable = (url: string, cause: unknown) =>
  new CliError(
    'unavailable',
    `the service could not be reached at ${new URL(url).origin}: ${(cause as Error).message ?? String(cause)}`,
    EXIT.unavailable,
  )

async function send(url: string, init: RequestInit): Promise<Response> {
  try {
    return await fetch(url, {
      ...init,
      headers: { 'user-agent': USER_AGENT, accept: 'application/json', ...init.headers },
      signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
      redirect: 'error',
    })
  } catch (err) {
    throw unreachable(url, err)
  }
}

async function jsonOf(response: Response, url: string): Promise<Record<string, unknown>> {
  const text = await response.text()
  // Revocation answers 200 with nothing.
  if (response.ok && text === '') return {}
  try {
    const value = JSON.parse(text) as unknown
    if (value && typeof value === 'object' && !Array.isArray(value)) return value as Record<string, unknown>
  } catch {}
  if (response.status >= 500)
    throw new CliError('unavailable', `the service answered ${response.status} at ${url}`, EXIT.unavailable)
  throw new CliError('bad_response', `the service did not answer JSON at ${url} (${response.status})`)
}

const stringField = (body: Record<string, unknown>, name: string): string | undefined =>
  typeof body[name] === 'string' ? (body[name] as string) : undefined

const originOf = (value: string): string | undefined => {
  try {
    return new URL(value).origin
  } catch {
    return undefined
  }
}

const mixUp = (message: string) => new CliError('issuer_mismatch', message, EXIT.auth)

/**
 * The provider at --addr, trusted only as the provider of that address (the mix-up defence of
 * RFC 9207 / OAuth 2.0 Security BCP 4.4): its issuer must have --addr's origin, and every endpoint
 * the CLI uses the issuer's origin. Otherwise a server at --addr could copy the real service's
 * document with its own token endpoint: the person would sign in on the real pages and the code
 * with its PKCE verifier, then the tokens, would go to that server. Nothing is sent before this
 * check. A service whose ID_URL differs from the address it is reached at is used with
 * --addr set to the issuer.
 */
export async function discover(addr: string): Promise<ProviderMetadata> {
  const base = normalizeAddr(addr)
  const url = `${base}/.well-known/openid-configuration`
  const response = await send(url, { method: 'GET' })
  if (!response.ok) {
    if (response.status >= 500 || response.status === 429)
      throw new CliError('unavailable', `the service answered ${response.status} at ${url}`, EXIT.unavailable)
    throw new CliError('bad_response', `no OpenID provider at ${url} (${response.status}): is --addr right?`)
  }
  const body = await jsonOf(response, url)
  const required = (name: string) => {
    const value = stringField(body, name)
    if (!value) throw new CliError('bad_response', `the discovery document at ${url} has no ${name}`)
    return value
  }
  const issuer = required('issuer')
  const origin = new URL(base).origin
  if (originOf(issuer) !== origin)
    throw mixUp(
      `the discovery document at ${url} names the issuer ${JSON.stringify(issuer)}, not one at ${origin}: ` +
        'kms signs in only with the provider of the address it talks to (--addr); if this service is ' +
        'published at its issuer address, use that as --addr',
    )
  const onIssuer = (name: string, value: string | undefined): string | undefined => {
    if (value !== undefined && originOf(value) !== origin)
      throw mixUp(
        `the discovery document at ${url} sends ${name} to ${JSON.stringify(value)}, away from its issuer ${issuer}: refused, nothing was sent`,
      )
    return value
  }
  return {
    issuer,
    authorizationEndpoint: onIssuer('authorization_endpoint', required('authorization_endpoint'))!,
    tokenEndpoint: onIssuer('token_endpoint', required('token_endpoint'))!,
    jwksUri: onIssuer('jwks_uri', required('jwks_uri'))!,
    revocationEndpoint: onIssuer('revocation_endpoint', stringField(body, 'revocation_endpoint')),
    deviceAuthorizationEndpoint: onIssuer(
      'device_authorization_endpoint',
      stringField(body, 'device_authorization_endpoint'),
    ),
  }
}

/** A form POST to one of the provider's endpoints; an OAuth error answer becomes an OAuthError. */
async function postForm(url: string, form: Record<string, string>): Promise<Record<string, unknown>> {
  const response = await send(url, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams(form).toString(),
  })
  if (response.status >= 500 || response.status === 429)
    throw new CliError('unavailable', `the service answered ${response.status} at ${url}`, EXIT.unavailable)
  const body = await jsonOf(response, url)
  const error = stringField(body, 'error')
  if (!response.ok || error)
    throw new OAuthError(error ?? `http_${response.status}`, stringField(body, 'error_description'))
  return body
}

/** A token request (code, refresh or device grant): the answer checked for what the CLI uses. */
export async function tokenRequest(
  tokenEndpoint: string,
  form: Record<string, string>,
): Promise<TokenAnswer> {
  const body = await postForm(tokenEndpoint, { client_id: CLIENT_ID, ...form })
  const accessToken = stringField(body, 'access_token')
  const expiresIn = body['expires_in']
  if (
    !accessToken ||
    typeof expiresIn !== 'number' ||
    stringField(body, 'token_type')?.toLowerCase() !== 'bearer'
  )
    throw new CliError('bad_response', 'the token endpoint did not answer a bearer access token')
  return {
    access_token: accessToken,
    token_type: 'Bearer',
    expires_in: expiresIn,
    ...(stringField(body, 'refresh_token') ? { refresh_token: stringField(body, 'refresh_token')! } : {}),
    ...(stringField(body, 'id_token') ? { id_token: stringField(body, 'id_token')! } : {}),
  }
}

/** Revokes a refresh token (RFC 7009): the provider ends its grant, and the access tokens with it. */
export async function revokeRefreshToken(revocationEndpoint: string, refreshToken: string): Promise<void> {
  await postForm(revocationEndpoint, {
    client_id: CLIENT_ID,
    token: refreshToken,
    token_type_hint: 'refresh_token',
  })
}

/** The device authorization answer (RFC 8628 3.2). */
export interface DeviceAuthorization {
  deviceCode: string
  userCode: string
  verificationUri: string
  verificationUriComplete: string | undefined
  expiresIn: number
  /** Seconds between polls; 5 when the provider does not say (RFC 8628 3.2). */
  interval: number
}

export async function deviceAuthorization(
  metadata: ProviderMetadata,
  resource: string,
): Promise<DeviceAuthorization> {
  if (!metadata.deviceAuthorizationEndpoint)
    throw new CliError(
      'device_flow_unavailable',
      'this service does not offer the device sign-in: use kms login',
    )
  const body = await postForm(metadata.deviceAuthorizationEndpoint, {
    client_id: CLIENT_ID,
    scope: SCOPE,
    resource,
  })
  const deviceCode = stringField(body, 'device_code')
  const userCode = stringField(body, 'user_code')
  const verificationUri = stringField(body, 'verification_uri')
  if (!deviceCode || !userCode || !verificationUri || typeof body['expires_in'] !== 'number')
    throw new CliError('bad_response', 'the device authorization endpoint answered without a code')
  return {
    deviceCode,
    userCode,
    verificationUri,
    verificationUriComplete: stringField(body, 'verification_uri_complete'),
    expiresIn: body['expires_in'],
    interval: typeof body['interval'] === 'number' && body['interval'] > 0 ? body['interval'] : 5,
  }
}
