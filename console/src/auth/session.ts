/**
 * Signing in through the service's own OpenID provider as the public client `kms-console`:
 * authorization code with PKCE (S256), `resource=urn:kms:tenant:<id>` for a token of one tenant.
 * The tokens live in this module's memory only (never in storage a script injected elsewhere could
 * read); a reload signs in again, silently while the provider's session lasts. What must survive
 * the redirect (the PKCE verifier, the state, where to go back) is in sessionStorage for that one
 * round trip and removed when the code comes back.
 */

const CLIENT_ID = 'kms-console'
const SCOPE = 'openid email profile api'
const PENDING_KEY = 'kms-console.pending'
/** The tenant used last (an id, not a secret): a reload or a new tab opens it again. */
const LAST_TENANT_KEY = 'kms-console.tenant'
/** A token is renewed this long before it expires. */
const RENEW_BEFORE_MS = 30_000
const TENANT_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/

export interface Session {
  accessToken: string
  refreshToken: string | undefined
  idToken: string | undefined
  /** When the access token expires (ms since the epoch). */
  expiresAt: number
  /** The tenant the access token is for; undefined for a sign-in without one. */
  tenantId: string | undefined
}

interface Pending {
  state: string
  verifier: string
  tenantId: string | undefined
  returnTo: string
}

interface TokenAnswer {
  access_token: string
  refresh_token?: string
  id_token?: string
  expires_in: number
}

/** A sign-in the provider or the person refused: shown as a page, with a way back. */
export class SignInError extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message)
  }
}

let current: Session | undefined
let renewing: Promise<Session> | undefined

const origin = () => window.location.origin
const redirectUri = () => `${origin()}/console/callback`
const tenantResource = (tenantId: string) => `urn:kms:tenant:${tenantId}`
export const isTenantId = (value: unknown): value is string =>
  typeof value === 'string' && TENANT_ID.test(value)

const base64url = (bytes: Uint8Array) =>
  btoa(String.fromCharCode(...bytes))
    .replace(/\+/g, '-')
    .replace(/\//g, '_')
    .replace(/=+$/, '')
const randomText = () => base64url(crypto.getRandomValues(new Uint8Array(32)))

/** This tab's tenant first (another tab may have switched), then the one used last anywhere. */
export function lastTenant(): string | undefined {
  const own = sessionStorage.getItem(LAST_TENANT_KEY)
  if (isTenantId(own)) return own
  const stored = localStorage.getItem(LAST_TENANT_KEY)
  return isTenantId(stored) ? stored : undefined
}

export const currentSession = (): Session | undefined => current

/** Sends the browser to the provider; the page is left, so this never resolves. */
export async function signIn(options: { tenantId?: string | undefined; returnTo: string }): Promise<never> {
  const verifier = randomText()
  const state = randomText()
  const challenge = base64url(
    new Uint8Array(await crypto.subtle.digest('SHA-256', new TextEncoder().encode(verifier))),
  )
  const pending: Pending = { state, verifier, tenantId: options.tenantId, returnTo: options.returnTo }
  sessionStorage.setItem(PENDING_KEY, JSON.stringify(pending))
  const url = new URL('/oidc/auth', origin())
  url.search = new URLSearchParams({
    client_id: CLIENT_ID,
    response_type: 'code',
    redirect_uri: redirectUri(),
    scope: SCOPE,
    code_challenge: challenge,
    code_challenge_method: 'S256',
    state,
    ...(options.tenantId ? { resource: tenantResource(options.tenantId) } : {}),
  }).toString()
  window.location.assign(url.toString())
  return new Promise<never>(() => {})
}

async function tokenRequest(form: Record<string, string>): Promise<TokenAnswer> {
  const response = await fetch('/oidc/token', {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' },
    body: new URLSearchParams({ client_id: CLIENT_ID, ...form }).toString(),
    credentials: 'same-origin',
  })
  const body = (await response.json().catch(() => ({}))) as Partial<TokenAnswer> & {
    error?: string
    error_description?: string
  }
  if (!response.ok || typeof body.access_token !== 'string')
    throw new SignInError(
      body.error ?? 'token_error',
      body.error_description ?? 'The sign-in could not be completed',
    )
  return body as TokenAnswer
}

const sessionOf = (answer: TokenAnswer, tenantId: string | undefined, previous?: Session): Session => ({
  accessToken: answer.access_token,
  refreshToken: answer.refresh_token ?? previous?.refreshToken,
  idToken: answer.id_token ?? previous?.idToken,
  expiresAt: Date.now() + answer.expires_in * 1000,
  tenantId,
})

/**
 * The provider sent the browser back to /console/callback: checks the state, exchanges the
 * code with the PKCE verifier and keeps the tokens. Answers where the person was going.
 */
export async function completeSignIn(url: URL): Promise<{ returnTo: string; session: Session }> {
  const pendingText = sessionStorage.getItem(PENDING_KEY)
  sessionStorage.removeItem(PENDING_KEY)
  const pending = pendingText ? (JSON.parse(pendingText) as Pending) : undefined
  const params = url.searchParams
  // Nothing of an answer to a sign-in this tab did not start is shown: a crafted link's text
  // would read as the console's own.
  if (!pending || params.get('state') !== pending.state)
    throw new SignInError('state_mismatch', 'This sign-in was not started here, or was already completed')
  if (params.get('iss') !== origin())
    throw new SignInError('issuer_mismatch', 'The answer came from another issuer')
  if (params.get('error'))
    throw new SignInError(params.get('error')!, params.get('error_description') ?? 'The sign-in was refused')
  const code = params.get('code')
  if (!code) throw new SignInError('no_code', 'The provider sent no authorization code')
  const answer = await tokenRequest({
    grant_type: 'authorization_code',
    code,
    redirect_uri: redirectUri(),
    code_verifier: pending.verifier,
    ...(pending.tenantId ? { resource: tenantResource(pending.tenantId) } : {}),
  })
  current = sessionOf(answer, pending.tenantId)
  if (pending.tenantId) {
    sessionStorage.setItem(LAST_TENANT_KEY, pending.tenantId)
    localStorage.setItem(LAST_TENANT_KEY, pending.tenantId)
  }
  const returnTo = pending.returnTo.startsWith('/console/') ? pending.returnTo : '/console/'
  return { returnTo, session: current }
}

/** Renews the access token with the refresh token (rotated at each use); one renewal at a time. */
export function renew(): Promise<Session> {
  const session = current
  if (!session?.refreshToken) return Promise.reject(new SignInError('no_session', 'Signed out'))
  renewing ??= tokenRequest({
    grant_type: 'refresh_token',
    refresh_token: session.refreshToken,
    ...(session.tenantId ? { resource: tenantResource(session.tenantId) } : {}),
  })
    .then((answer) => {
      current = sessionOf(answer, session.tenantId, session)
      return current
    })
    .finally(() => {
      renewing = undefined
    })
  return renewing
}

/** The access token, renewed first when it is about to expire. */
export async function accessToken(): Promise<string> {
  if (!current) throw new SignInError('no_session', 'Signed out')
  if (current.expiresAt - Date.now() < RENEW_BEFORE_MS && current.refreshToken)
    return (await renew()).accessToken
  return current.accessToken
}

/** The tenants the person belongs to, from userinfo (`kms_tenants`): for a sign-in without a tenant. */
export async function tenantsOfPerson(): Promise<string[]> {
  const response = await fetch('/oidc/me', { headers: { authorization: `Bearer ${await accessToken()}` } })
  if (!response.ok)
    throw new SignInError('userinfo_failed', 'The provider did not say which tenants you belong to')
  const claims = (await response.json()) as { kms_tenants?: unknown }
  return Array.isArray(claims.kms_tenants) ? claims.kms_tenants.filter(isTenantId) : []
}

/**
 * Signs out: the refresh token is revoked first (which ends the provider's grant, so every tab
 * and tenant of this session stops at once, even if the person never confirms the provider's
 * page), then the provider's session ends after its confirmation. No ID token in the URL: it
 * would land in history and proxies' logs.
 */
export async function signOut(): Promise<void> {
  const session = current
  current = undefined
  sessionStorage.removeItem(LAST_TENANT_KEY)
  if (session?.refreshToken)
    await fetch('/oidc/token/revocation', {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({
        client_id: CLIENT_ID,
        token: session.refreshToken,
        token_type_hint: 'refresh_token',
      }).toString(),
      credentials: 'same-origin',
    }).catch(() => undefined)
  const url = new URL('/oidc/session/end', origin())
  url.search = new URLSearchParams({
    client_id: CLIENT_ID,
    post_logout_redirect_uri: redirectUri(),
  }).toString()
  window.location.assign(url.toString())
}
