import * as oidc from 'openid-client'

/** A cookie jar for driving the sign-in pages over HTTP, as a browser would. */
export class CookieJar {
  readonly cookies = new Map<string, string>()
  store(response: Response): void {
    for (const line of response.headers.getSetCookie()) {
      const [pair = ''] = line.split(';')
      const eq = pair.indexOf('=')
      const name = pair.slice(0, eq).trim()
      const value = pair.slice(eq + 1).trim()
      if (/expires=Thu, 01 Jan 1970/i.test(line) || value === '') this.cookies.delete(name)
      else this.cookies.set(name, value)
    }
  }
  header(): string {
    return [...this.cookies].map(([name, value]) => `${name}=${value}`).join('; ')
  }
}

export interface PageResponse {
  status: number
  url: string
  location: string | null
  headers: Headers
  html: string
}

/** One request with the jar's cookies, redirects not followed. */
export async function page(
  jar: CookieJar,
  url: string | URL,
  init: { method?: string; form?: Record<string, string>; headers?: Record<string, string> } = {},
): Promise<PageResponse> {
  const headers: Record<string, string> = { cookie: jar.header(), ...init.headers }
  let body: string | undefined
  if (init.form) {
    body = new URLSearchParams(init.form).toString()
    headers['content-type'] = 'application/x-www-form-urlencoded'
  }
  const response = await fetch(url, {
    method: init.method ?? (init.form ? 'POST' : 'GET'),
    headers,
    body,
    redirect: 'manual',
  })
  jar.store(response)
  return {
    status: response.status,
    url: String(url),
    location: response.headers.get('location'),
    headers: response.headers,
    html: await response.text(),
  }
}

export const csrfOf = (html: string): string => {
  const match = /name="csrf" value="([^"]+)"/.exec(html)
  if (!match) throw new Error(`no CSRF field in the page:\n${html.slice(0, 500)}`)
  return match[1]!
}

export const formActionOf = (html: string): string => {
  const match = /<form method="post" action="([^"]+)"/.exec(html)
  if (!match)
    throw new Error(`no form in the page: ${/role="alert">([^<]*)/.exec(html)?.[1] ?? html.slice(0, 500)}`)
  return match[1]!.replace(/&amp;/g, '&')
}

/** The URL a "continuing" page moves on to (meta refresh). */
export const refreshTargetOf = (html: string): string | undefined =>
  /http-equiv="refresh" content="0;url=([^"]+)"/.exec(html)?.[1]?.replace(/&amp;/g, '&')

/**
 * Follows redirects and "continuing" pages from `start` until the browser would leave for
 * `redirectUri`, or a page that needs input is shown. Returns that URL or page.
 */
export async function follow(
  jar: CookieJar,
  base: string,
  start: string,
  redirectUri: string,
): Promise<{ callback?: URL; page?: PageResponse }> {
  let url = start
  for (let hops = 0; hops < 20; hops++) {
    if (url.startsWith(redirectUri)) return { callback: new URL(url) }
    const response = await page(jar, new URL(url, base))
    if (response.status >= 300 && response.status < 400 && response.location) {
      url = new URL(response.location, new URL(url, base)).toString()
      continue
    }
    const next = response.status === 200 ? refreshTargetOf(response.html) : undefined
    if (next) {
      url = new URL(next, base).toString()
      continue
    }
    return { page: response }
  }
  throw new Error('too many redirects')
}

export interface ConsoleClient {
  config: oidc.Configuration
  redirectUri: string
}

export async function consoleClient(baseUrl: string, redirectUri: string): Promise<ConsoleClient> {
  const config = await oidc.discovery(new URL(baseUrl), 'kms-console', undefined, oidc.None(), {
    execute: [oidc.allowInsecureRequests],
  })
  return { config, redirectUri }
}

export interface SignedIn {
  tokens: Awaited<ReturnType<typeof oidc.authorizationCodeGrant>>
  jar: CookieJar
}

/**
 * The authorization-code flow with PKCE through the real pages: the password form, then the TOTP
 * form when `totp` gives a code. `resource` names the tenant the access token is for.
 */
export async function signIn(
  baseUrl: string,
  client: ConsoleClient,
  input: {
    email: string
    password: string
    resource?: string
    totp?: () => string
    tokenResource?: boolean
    scope?: string
  },
): Promise<SignedIn> {
  const jar = new CookieJar()
  const verifier = oidc.randomPKCECodeVerifier()
  const state = oidc.randomState()
  const params: Record<string, string> = {
    redirect_uri: client.redirectUri,
    scope: input.scope ?? 'openid email profile api',
    code_challenge: await oidc.calculatePKCECodeChallenge(verifier),
    code_challenge_method: 'S256',
    state,
  }
  if (input.resource) params['resource'] = input.resource
  const authorize = oidc.buildAuthorizationUrl(client.config, params)
  let reached = await follow(jar, baseUrl, authorize.toString(), client.redirectUri)
  if (!reached.page) throw new Error('the sign-in page was not shown')
  let shown = reached.page
  shown = await page(jar, new URL(formActionOf(shown.html), baseUrl), {
    form: { csrf: csrfOf(shown.html), email: input.email, password: input.password },
  })
  if (shown.status === 303 && input.totp) {
    const totpPage = await page(jar, new URL(shown.location!, baseUrl))
    shown = await page(jar, new URL(formActionOf(totpPage.html), baseUrl), {
      form: { csrf: csrfOf(totpPage.html), code: input.totp() },
    })
  }
  const next = refreshTargetOf(shown.html)
  if (!next) throw new Error(`sign-in did not continue (${shown.status}):\n${shown.html.slice(0, 800)}`)
  reached = await follow(jar, baseUrl, new URL(next, baseUrl).toString(), client.redirectUri)
  if (!reached.callback)
    throw new Error(`the flow did not return to the client:\n${reached.page?.html.slice(0, 800)}`)
  const tokens = await oidc.authorizationCodeGrant(
    client.config,
    reached.callback,
    { pkceCodeVerifier: verifier, expectedState: state },
    input.tokenResource && input.resource ? { resource: input.resource } : undefined,
  )
  return { tokens, jar }
}

/** What a test needs of the service to make members (structurally: TestService and SpawnedService fit). */
export interface MemberFactoryTarget {
  baseUrl: string
  api: {
    services: {
      accounts: import('../../src/identity/accounts/account-service.ts').AccountService
      team: import('../../src/team/team-service.ts').TeamService
    }
  }
}

export interface MemberSession {
  accountId: string
  email: string
  password: string
  accessToken: string
  refreshToken: string
  headers: { authorization: string }
}

let memberCounter = 0

/**
 * A team member of `tenantId` with `role`, signed in through the real pages for that tenant: the
 * account and membership are made through the services, the token through the provider.
 */
export async function memberSession(
  target: MemberFactoryTarget,
  client: ConsoleClient,
  tenantId: string,
  role: import('../../src/auth/roles.ts').TenantRole,
): Promise<MemberSession> {
  const email = `member-${process.pid}-${++memberCounter}-${Date.now()}@example.com`
  const password = `password-${memberCounter}-long-enough`
  const account = await target.api.services.accounts.createTeamAccount({ email, password })
  await target.api.services.team.addMember(
    { tenantId, actor: 'test', requestId: null, clientIp: null },
    { accountId: account.id, role },
  )
  const resource = `urn:kms:tenant:${tenantId}`
  const { tokens } = await signIn(target.baseUrl, client, { email, password, resource, tokenResource: true })
  return {
    accountId: account.id,
    email,
    password,
    accessToken: tokens.access_token,
    refreshToken: tokens.refresh_token!,
    headers: { authorization: `Bearer ${tokens.access_token}` },
  }
}
