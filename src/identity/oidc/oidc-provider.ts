import { hkdfSync } from 'node:crypto'
import type { IncomingMessage, ServerResponse } from 'node:http'
import Provider, {
  type AdapterPayload,
  type ClientMetadata,
  type Configuration,
  errors,
  interactionPolicy,
  type KoaContextWithOIDC,
  type ResourceServer,
} from 'oidc-provider'
import type { MembershipRoles } from '../../auth/bearer-authenticator.ts'
import type { LoginPanel } from '../../branding/login-panel.ts'
import type { IdentityConfig } from '../../config.ts'
import type { Sql } from '../../data/database.ts'
import type { MasterKeyring } from '../../keyring/master-key.ts'
import type { Clock } from '../../platform/clock.ts'
import type { TenantService } from '../../tenants/tenant-service.ts'
import type { PageSettings } from '../../web/layout.ts'
import { type AccountService, PARTNER_REALM, TEAM_REALM, tenantRealm } from '../accounts/account-service.ts'
import type {
  AuthorizationGate,
  AuthorizationTarget,
  MfaMethods,
  SecondFactor,
} from '../sign-in/authorization-gate.ts'
import { forgetOtherAccounts, recordSessionFactors } from '../sign-in/session-factor-store.ts'
import { CONSOLE_LIST, type CorsAllowlist } from './cors-allowlist.ts'
import { deviceFlow } from './device-flow.ts'
import type { Issuer } from './issuer.ts'
import { createOidcAdapterFactory } from './oidc-adapter.ts'
import { renderProviderError, renderSignedOut, renderSignOut } from './provider-pages.ts'
import type { SigningKeys } from './signing-keys.ts'

export const CONSOLE_CLIENT_ID = 'kms-console'
/** The `kms` command line: a native public client (loopback redirect, RFC 8252; device flow, RFC 8628). */
export const CLI_CLIENT_ID = 'kms-cli'
/** The partner portal's client: partners' people (their own realm) sign in for the partner API. */
export const PARTNER_PORTAL_CLIENT_ID = 'kms-partner-portal'
/** The partner portal's resource indicator: its access tokens carry it as `aud`. */
export const PARTNER_PORTAL_RESOURCE = 'urn:kms:partner-portal'
/** The service's own clients: first-party (no consent page), not a tenant's applications. */
export const isServiceClient = (clientId: unknown): boolean =>
  isTenantApiClient(clientId) || clientId === PARTNER_PORTAL_CLIENT_ID
/**
 * The service's clients a member signs in to for a tenant's API (`resource=urn:kms:tenant:<id>`):
 * the console and the command line, held to the same gate and given the same tokens.
 */
export const isTenantApiClient = (clientId: unknown): boolean =>
  clientId === CONSOLE_CLIENT_ID || clientId === CLI_CLIENT_ID
/** The resource indicator of a tenant's API: an access token for it carries it as `aud`. */
export const TENANT_RESOURCE_PREFIX = 'urn:kms:tenant:'
const TENANT_RESOURCE = /^urn:kms:tenant:([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$/
export const tenantOfResource = (resource: string): string | undefined => TENANT_RESOURCE.exec(resource)?.[1]

/** The provider's own paths; discovery and JWKS sit at the root, as the spec says. */
export const OIDC_ROUTES = {
  authorization: '/oidc/auth',
  token: '/oidc/token',
  userinfo: '/oidc/me',
  jwks: '/.well-known/jwks.json',
  end_session: '/oidc/session/end',
  revocation: '/oidc/token/revocation',
  introspection: '/oidc/token/introspection',
  device_authorization: '/oidc/device/auth',
  code_verification: '/oidc/device',
} as const

/** Lifetimes (seconds). An access token's own comes from the tenant's settings when they say. */
const TOKEN_TTL = {
  accessToken: 900,
  authorizationCode: 60,
  /** A device code (and its user code): long enough to open a browser elsewhere and sign in. */
  deviceCode: 600,
  idToken: 3600,
  interaction: 3600,
  refreshToken: 14 * 24 * 3600,
  session: 14 * 24 * 3600,
  grant: 14 * 24 * 3600,
} as const

/** A tenant's application as the provider needs it (src/applications), read on every use. */
export interface TenantClient {
  applicationId: string
  tenantId: string
  clientId: string
  name: string
  applicationType: 'spa' | 'traditional' | 'native' | 'machine_to_machine'
  clientSecret: string | undefined
  redirectUris: string[]
  postLogoutRedirectUris: string[]
  resources: string[]
  /** The application's MFA methods (null: the tenant's) and login panel (null: the tenant's). */
  mfaMethods: MfaMethods | null
  branding: { loginPanel: LoginPanel } | null
  signUpEnabled: boolean
}

export interface ClientDirectory {
  clientOf(clientId: string): Promise<TenantClient | undefined>
  /** By the application's id (the pages' links carry it). */
  applicationOf(applicationId: string): Promise<TenantClient | undefined>
}

/**
 * Who an authorization of this client, for these resource indicators, is for (the gate's target);
 * undefined for a client that is neither the service's nor a tenant's application.
 */
export async function authorizationTarget(
  clients: ClientDirectory,
  clientId: string,
  resources: unknown,
): Promise<AuthorizationTarget | undefined> {
  if (isTenantApiClient(clientId)) {
    const requested = (Array.isArray(resources) ? resources : [resources]).filter(
      (resource): resource is string => typeof resource === 'string',
    )
    const tenantIds = requested.map((resource) => tenantOfResource(resource))
    // An unknown resource is refused by getResourceServerInfo; the gate asks about tenants only.
    return { kind: 'console', tenantIds: [...new Set(tenantIds.filter((id) => id !== undefined))] }
  }
  if (clientId === PARTNER_PORTAL_CLIENT_ID) return { kind: 'partner-portal' }
  const application = await clients.clientOf(clientId)
  return application ? { kind: 'application', application } : undefined
}

/**
 * What the sign-in pages add to a login result: the second factors proven in that interaction.
 * The gate's check records them on the session the login lands in (its uid is known only there).
 */
export interface ProvenFactors {
  kmsProven?: SecondFactor[]
}

/** The roles an end-user holds in an application (src/roles): the tokens' `roles` claim. */
export interface RoleClaims {
  roleNamesFor(tenantId: string, accountId: string, applicationId: string): Promise<string[]>
}

/** Client metadata the service adds: which tenant and application a client is. */
const CLIENT_TENANT = 'kms_tenant_id'
const CLIENT_APPLICATION = 'kms_application_id'

/** The realm whose accounts may sign in to a client: the team's for the console and the CLI, the tenant's for its applications. */
function realmOfClient(client: { clientId: string; [key: string]: unknown }): string | undefined {
  if (isTenantApiClient(client.clientId)) return TEAM_REALM
  if (client.clientId === PARTNER_PORTAL_CLIENT_ID) return PARTNER_REALM
  const tenantId = client[CLIENT_TENANT]
  return typeof tenantId === 'string' ? tenantRealm(tenantId) : undefined
}

/** The provider's metadata for a tenant's application (docs/identity.md "Applications as clients"). */
function clientMetadata(app: TenantClient): ClientMetadata {
  const machine = app.applicationType === 'machine_to_machine'
  return {
    client_id: app.clientId,
    client_name: app.name,
    application_type: app.applicationType === 'native' ? 'native' : 'web',
    ...(app.clientSecret
      ? { client_secret: app.clientSecret, token_endpoint_auth_method: 'client_secret_basic' }
      : { token_endpoint_auth_method: 'none' }),
    id_token_signed_response_alg: 'ES256',
    grant_types: machine ? ['client_credentials'] : ['authorization_code', 'refresh_token'],
    response_types: machine ? [] : ['code'],
    redirect_uris: app.redirectUris,
    post_logout_redirect_uris: app.postLogoutRedirectUris,
    [CLIENT_TENANT]: app.tenantId,
    [CLIENT_APPLICATION]: app.applicationId,
  }
}

/** What the provider needs of tenant settings (src/settings); absent, the defaults above apply. */
export interface SessionPolicy {
  accessTokenSecondsOf(tenantId: string): Promise<number | undefined>
  refreshTokenSecondsOf(tenantId: string): Promise<number | undefined>
}

export interface OidcDeps {
  sql: Sql
  /** Now, for the tenants' session lifetimes (the provider keeps its own time otherwise). */
  clock: Clock
  config: IdentityConfig
  masterKeys: MasterKeyring
  signingKeys: SigningKeys
  accounts: AccountService
  memberships: MembershipRoles
  tenants: Pick<TenantService, 'get'>
  sessionPolicy?: SessionPolicy
  pageSettings: PageSettings
  /** ID_URL, or the listening URL once known (issuer.ts). */
  issuer: Issuer
  onGrantRevoked: (grantId: string) => Promise<void>
  clients: ClientDirectory
  roles: RoleClaims
  /** Asked before every code is issued and at every refresh (src/identity/sign-in/authorization-gate.ts). */
  gate: AuthorizationGate
  cors: CorsAllowlist
}

/**
 * The one OpenID provider (oidc-provider), built once the issuer is known (the URL the service
 * listens on unless ID_URL says) and rebuilt when the signing keys rotate, in every process. Its
 * state lives in PostgreSQL, so replacing the instance loses nothing.
 */
export interface OidcRuntime {
  setIssuer(url: string): void
  issuer(): string
  provider(): Promise<Provider>
  /** Hands a request on one of the provider's paths to it. */
  handle(req: IncomingMessage, res: ServerResponse): Promise<void>
}

export function createOidcRuntime(deps: OidcDeps): OidcRuntime {
  let current: Promise<Provider> | undefined
  let builtWith = ''
  deps.signingKeys.onChange(() => {
    current = undefined
  })
  const adapter = createOidcAdapterFactory({
    sql: deps.sql,
    onGrantRevoked: deps.onGrantRevoked,
    findClient: async (clientId) => {
      const app = await deps.clients.clientOf(clientId)
      return app ? (clientMetadata(app) as AdapterPayload) : undefined
    },
  })

  const runtime: OidcRuntime = {
    setIssuer(url) {
      deps.issuer.set(url)
      current = undefined
    },
    issuer: () => deps.issuer.url(),
    provider() {
      const at = runtime.issuer()
      // The cookie keys follow the keyring (a key file rotated under this running process).
      const keyring = keyringOf(deps.masterKeys)
      if (keyring !== builtWith) {
        current = undefined
        builtWith = keyring
      }
      current ??= build(deps, at, adapter).then(
        (provider) => pinnedToIssuer(provider, at),
        (err: unknown) => {
          current = undefined
          throw err
        },
      )
      return current
    },
    async handle(req, res) {
      const provider = await runtime.provider()
      await provider.callback()(req, res)
    },
  }
  return runtime
}

/**
 * oidc-provider builds every URL it advertises or sends a browser to (discovery's endpoints, the
 * resume URL after sign-in, the token endpoint a client assertion must name, DPoP's `htu`) from the
 * request's origin, which Koa reads from the Host header. So that no Host (`evil.example`, or
 * `localhost` when the issuer says 127.0.0.1) can move them, the provider's requests see the
 * issuer's scheme and host whatever was sent; a request line in absolute form is read as its path.
 * The issuer's scheme also makes cookies `Secure` behind a proxy that ends TLS.
 */
function pinnedToIssuer(provider: Provider, issuer: string): Provider {
  const { protocol, host } = new URL(issuer)
  const scheme = protocol.slice(0, -1)
  const origin = `${scheme}://${host}`
  Object.defineProperties(provider.request, {
    protocol: { get: () => scheme },
    host: { get: () => host },
    href: {
      get(this: { originalUrl: string }) {
        return `${origin}${this.originalUrl.replace(/^[a-z][a-z0-9+.-]*:\/\/[^/?#]*/i, '')}`
      },
    },
  })
  return provider
}

/**
 * Cookie signing keys derived from the master keyring: equal in every process, rotated with it.
 * One per key, the primary's first: cookies are signed with it and accepted under any of them
 * (and signed again with the primary when read), so a master key rotation ends no sign-in until
 * the old key leaves the keyring.
 */
function cookieKeys(masterKeys: MasterKeyring): string[] {
  const derive = (key: Buffer) =>
    Buffer.from(hkdfSync('sha256', key, Buffer.alloc(0), 'kms oidc cookie keys v1', 32)).toString('base64url')
  return masterKeys.all.map((master) => derive(master.key.export()))
}

/** Which master keys the provider was built with: a key file that changes means a new provider. */
const keyringOf = (masterKeys: MasterKeyring) => masterKeys.all.map((master) => master.id).join(',')

async function build(
  deps: OidcDeps,
  issuer: string,
  adapter: ReturnType<typeof createOidcAdapterFactory>,
): Promise<Provider> {
  const keys = await deps.signingKeys.current()
  const redirectUris =
    deps.config.consoleRedirectUris.length > 0
      ? deps.config.consoleRedirectUris
      : [`${issuer}/console/callback`]
  const portalRedirectUris =
    deps.config.partnerPortalRedirectUris.length > 0
      ? deps.config.partnerPortalRedirectUris
      : [`${issuer}/partner-portal/callback`]

  const accountIdOf = (ctx: KoaContextWithOIDC): string | undefined =>
    ctx.oidc.account?.accountId ??
    ctx.oidc.session?.accountId ??
    (ctx.oidc.entities.Grant?.accountId as string | undefined)

  const refreshLifetimes = refreshTokenLifetimes(deps)
  const device = deviceFlow({ ...deps, tenantOfResource })

  const configuration: Configuration = {
    adapter,
    clients: [
      {
        client_id: CONSOLE_CLIENT_ID,
        client_name: 'Console',
        application_type: 'web',
        token_endpoint_auth_method: 'none',
        id_token_signed_response_alg: 'ES256',
        grant_types: ['authorization_code', 'refresh_token'],
        response_types: ['code'],
        redirect_uris: redirectUris,
        post_logout_redirect_uris: redirectUris,
      },
      // The command line: a native app on the person's machine, redirected to a loopback port it
      // listens on (the provider ignores the port of a native client's loopback URI, RFC 8252
      // 7.3), or signed in from another device's browser with the device grant (RFC 8628).
      {
        client_id: CLI_CLIENT_ID,
        client_name: 'kms command line',
        application_type: 'native',
        token_endpoint_auth_method: 'none',
        id_token_signed_response_alg: 'ES256',
        grant_types: ['authorization_code', 'refresh_token', 'urn:ietf:params:oauth:grant-type:device_code'],
        response_types: ['code'],
        redirect_uris: ['http://127.0.0.1/callback', 'http://[::1]/callback'],
      },
      {
        client_id: PARTNER_PORTAL_CLIENT_ID,
        client_name: 'Partner portal',
        application_type: 'web',
        token_endpoint_auth_method: 'none',
        id_token_signed_response_alg: 'ES256',
        grant_types: ['authorization_code', 'refresh_token'],
        response_types: ['code'],
        redirect_uris: portalRedirectUris,
        post_logout_redirect_uris: portalRedirectUris,
      },
    ],
    jwks: { keys: keys.privateJwks as never },
    cookies: {
      keys: cookieKeys(deps.masterKeys),
      long: { signed: true, httpOnly: true, sameSite: 'lax' },
      short: { signed: true, httpOnly: true, sameSite: 'lax' },
    },
    // `roles` (an application's roles the end-user holds) and `amr` (how the person signed in:
    // pwd, otp, sms, mfa) come with openid: in the ID token too. `kms_tenants` (the console's
    // only: the tenants the member belongs to) lets the console, signed in without a tenant,
    // learn which `urn:kms:tenant:<id>` to ask for (docs/console.md "Signing in").
    claims: {
      openid: ['sub', 'roles', 'amr', 'kms_tenants'],
      email: ['email', 'email_verified'],
      profile: ['name'],
    },
    conformIdTokenClaims: false,
    extraClientMetadata: { properties: [CLIENT_TENANT, CLIENT_APPLICATION] },
    scopes: ['openid', 'offline_access', 'email', 'profile', 'api'],
    pkce: { required: () => true },
    // The authorization code flow only: no implicit grant, no ID token from the authorization
    // endpoint (discovery advertises `code` and no `implicit`).
    responseTypes: ['code'],
    // A confidential client authenticates as it registered: every secret is registered for
    // client_secret_basic, and without client_secret_post the provider does not read a secret
    // from the body at all, so a secret sent there authenticates nothing (invalid_client).
    clientAuthMethods: ['client_secret_basic', 'none'],
    routes: OIDC_ROUTES,
    interactions: {
      url: (_ctx, interaction) => `/sign-in/${interaction.uid}`,
      policy: loginPolicy(deps),
    },
    features: {
      devInteractions: { enabled: false },
      // A client may revoke and introspect its own tokens only (the console is public: no secret).
      revocation: {
        enabled: true,
        allowedPolicy: async (_ctx, client, token) => token.clientId === client.clientId,
      },
      introspection: {
        enabled: true,
        allowedPolicy: async (_ctx, client, token) => token.clientId === client.clientId,
      },
      userinfo: { enabled: true },
      clientCredentials: { enabled: true },
      // For the command line only: no other client has the device grant among its grant types,
      // so the provider refuses it to them (unauthorized_client) at both endpoints.
      deviceFlow: device.feature,
      rpInitiatedLogout: {
        enabled: true,
        logoutSource: async (ctx, form) => {
          ctx.type = 'html'
          ctx.body = renderSignOut(deps.pageSettings, ctx.get('accept-language'), form)
        },
        postLogoutSuccessSource: async (ctx) => {
          ctx.type = 'html'
          ctx.body = renderSignedOut(deps.pageSettings, ctx.get('accept-language'))
        },
      },
      resourceIndicators: {
        enabled: true,
        // A client_credentials grant without `resource` gets the application's one declared
        // resource; with none or several, invalid_target: never an opaque token no API accepts.
        defaultResource: async (ctx, client, oneOf) => {
          // The command line signs in for one tenant's API, never for no resource at all.
          if (client.clientId === CLI_CLIENT_ID && oneOf === undefined)
            throw new errors.InvalidTarget('resource is required: urn:kms:tenant:<tenant id>')
          if (oneOf !== undefined || ctx.oidc.params?.['grant_type'] !== 'client_credentials') return oneOf
          const app = await deps.clients.clientOf(client.clientId)
          if (app?.resources.length === 1) return app.resources[0]
          throw new errors.InvalidTarget('resource is required: name one of the application’s resources')
        },
        useGrantedResource: async () => false,
        getResourceServerInfo: async (ctx, resource, client) => {
          if (client.clientId === PARTNER_PORTAL_CLIENT_ID) {
            if (resource !== PARTNER_PORTAL_RESOURCE) throw new errors.InvalidTarget()
            return {
              scope: 'api',
              audience: resource,
              accessTokenTTL: TOKEN_TTL.accessToken,
              accessTokenFormat: 'jwt',
              jwt: { sign: { alg: 'ES256' } },
            }
          }
          if (!isTenantApiClient(client.clientId)) return applicationResource(deps, resource, client)
          const tenantId = tenantOfResource(resource)
          if (!tenantId) throw new errors.InvalidTarget()
          if (!(await deps.tenants.get(tenantId))) throw new errors.InvalidTarget()
          const accountId = accountIdOf(ctx)
          if (accountId && !(await deps.memberships.roleOf(tenantId, accountId)))
            throw new errors.InvalidTarget()
          const ttl = (await deps.sessionPolicy?.accessTokenSecondsOf(tenantId)) ?? TOKEN_TTL.accessToken
          return {
            scope: 'api',
            audience: resource,
            accessTokenTTL: ttl,
            accessTokenFormat: 'jwt',
            jwt: { sign: { alg: 'ES256' } },
          }
        },
      },
    },
    // Refresh tokens are bound to the session (no offline_access): signing out ends them. Their
    // lifetime is the tenant's (sessionLifetimes.refreshTokenSeconds); the provider asks for it
    // synchronously, so it is looked up here, before the token is made.
    issueRefreshToken: async (ctx, client) => {
      if (!client.grantTypeAllowed('refresh_token')) return false
      await refreshLifetimes.prepare(ctx, client)
      return true
    },
    // Public clients get a new refresh token at each use (the old one dies); confidential ones
    // when 70% of its life has passed, as oidc-provider does by default.
    rotateRefreshToken: async (ctx) => {
      const { RefreshToken: token, Client: client } = ctx.oidc.entities
      if (!token || !client) return false
      const rotate = client.clientAuthMethod === 'none' || token.ttlPercentagePassed() >= 70
      if (rotate) await refreshLifetimes.prepare(ctx, client)
      return rotate
    },
    extraTokenClaims: async (ctx, token) => {
      if (token.kind !== 'AccessToken') return undefined
      const client = ctx.oidc.client
      const roles =
        client && !isServiceClient(client.clientId) && token.accountId
          ? await rolesFor(deps, client, token.accountId)
          : undefined
      return { gid: token.grantId, ...(roles ? { roles } : {}) }
    },
    // An account signs in to the clients of its own realm only: a session of another realm (a
    // member's, another tenant's user) is not an account for this client, and the login prompt asks again.
    findAccount: async (ctx, sub, token) => {
      const account = await deps.accounts.get(sub)
      const client = ctx.oidc.client
      if (!account || account.disabled) return undefined
      if (client && account.realm !== realmOfClient(client as never)) return undefined
      // A refresh is an authorization like any other: the same gate, without a page to step up on.
      if (token?.kind === 'RefreshToken' && client) await refreshAllowed(deps, ctx, client, account.id, token)
      return {
        accountId: account.id,
        claims: async () => ({
          sub: account.id,
          email: account.email,
          email_verified: true,
          ...(account.displayName ? { name: account.displayName } : {}),
          ...(client && !isServiceClient(client.clientId)
            ? { roles: (await rolesFor(deps, client, account.id)) ?? [] }
            : {}),
          ...(client?.clientId === CONSOLE_CLIENT_ID
            ? { kms_tenants: (await deps.memberships.tenantsOf(account.id)).map((m) => m.tenantId) }
            : {}),
        }),
      }
    },
    ttl: {
      AccessToken: (_ctx, token) => token.resourceServer?.accessTokenTTL ?? TOKEN_TTL.accessToken,
      // Set, so the provider does not print its plain-text NOTICE about the default into the JSON log.
      ClientCredentials: (_ctx, token) => token.resourceServer?.accessTokenTTL ?? TOKEN_TTL.accessToken,
      AuthorizationCode: TOKEN_TTL.authorizationCode,
      DeviceCode: TOKEN_TTL.deviceCode,
      IdToken: TOKEN_TTL.idToken,
      Interaction: TOKEN_TTL.interaction,
      RefreshToken: (ctx, token, client) => refreshLifetimes.of(ctx, token, client),
      Session: TOKEN_TTL.session,
      Grant: TOKEN_TTL.grant,
    },
    renderError: async (ctx, out) => {
      ctx.type = 'html'
      ctx.body = renderProviderError(
        deps.pageSettings,
        ctx.get('accept-language'),
        out as { error: string; error_description?: string },
      )
    },
    // Spec 4.4: the tenant's allow-list (the surface made sure it is loaded: this must be synchronous).
    clientBasedCORS: (_ctx, origin, client) =>
      deps.cors.allows(
        isServiceClient(client.clientId) ? CONSOLE_LIST : String(client[CLIENT_TENANT] ?? ''),
        origin,
      ),
  }
  const provider = new Provider(issuer, configuration)
  provider.proxy = false
  provider.use((ctx, next) =>
    device.middleware(ctx as KoaContextWithOIDC, next, OIDC_ROUTES.code_verification),
  )
  return provider
}

/** Reason of the login prompt when a remembered login does not satisfy this authorization (step-up). */
export const GATE_REASON = 'authorization_gate'

/**
 * Reason of the consent prompt of every authorization-code request of the command line: the
 * person confirms it on a page (src/identity/sign-in/views/cli-confirmation-view.ts), even with a
 * live session and an earlier grant. Without it, any page could send a signed-in browser to
 * /oidc/auth?client_id=kms-cli with a loopback redirect, and whatever listens on that port would
 * get the member's tokens (RFC 8252 8.6: a native client's identity cannot be verified, so the
 * authorization server must not approve it without the person). The device flow has its own
 * confirmation page (device-flow.ts) and is not asked twice.
 */
export const CLI_CONFIRMATION_REASON = 'kms_cli_confirmation'

/** What the command line's confirmation page adds to the interaction's consent result. */
export interface CliConfirmation {
  kmsCliConfirmed?: boolean
}

/** The provider's routes of the device flow (the code page, and its resume after the sign-in pages). */
const isDeviceFlowRoute = (route: string | undefined): boolean => /^(code|device)_/.test(route ?? '')

/**
 * Reason of the login prompt when the session's sign-in is older than a tenant's session lifetime
 * (`sessionLifetimes.refreshTokenSeconds`): a refresh token cannot outlive it, and neither may a
 * silent authorization on the provider's (longer) session, or a reload of the console would
 * renew a session the tenant wants ended. The password is asked again.
 */
const SESSION_LIFETIME_REASON = 'tenant_session_lifetime'

/**
 * The login prompt also asks when the session's account is not of the client's realm, when the
 * sign-in is older than a tenant of the authorization allows, and when
 * the gate does not allow this authorization with the session as it is: a factor the client,
 * tenant or application requires is missing, a policy denies or awaits approval, the member or
 * end-user may not enter. The sign-in page then asks for what is missing or says why not.
 */
function loginPolicy(deps: OidcDeps) {
  const policy = interactionPolicy.base()
  const login = policy.get('login')!
  login.checks.add(
    new interactionPolicy.Check('realm', 'The session belongs to another realm', (ctx) =>
      ctx.oidc.session?.accountId && !ctx.oidc.account
        ? interactionPolicy.Check.REQUEST_PROMPT
        : interactionPolicy.Check.NO_NEED_TO_PROMPT,
    ),
  )
  login.checks.add(
    new interactionPolicy.Check(
      SESSION_LIFETIME_REASON,
      'The sign-in is older than a tenant of this authorization allows',
      'login_required',
      async (ctx) => {
        const { session, client } = ctx.oidc
        const signedInAt = session?.authTime()
        if (!session?.accountId || !client || typeof signedInAt !== 'number')
          return interactionPolicy.Check.NO_NEED_TO_PROMPT
        const target = await authorizationTarget(deps.clients, client.clientId, ctx.oidc.params?.['resource'])
        const tenantIds =
          target?.kind === 'console'
            ? target.tenantIds
            : target?.kind === 'application'
              ? [target.application.tenantId]
              : []
        const age = deps.clock.now().getTime() / 1000 - signedInAt
        for (const tenantId of tenantIds) {
          const lifetime = await deps.sessionPolicy?.refreshTokenSecondsOf(tenantId)
          if (lifetime !== undefined && age > lifetime) return interactionPolicy.Check.REQUEST_PROMPT
        }
        return interactionPolicy.Check.NO_NEED_TO_PROMPT
      },
    ),
  )
  login.checks.add(
    new interactionPolicy.Check(
      GATE_REASON,
      'The session does not satisfy what this authorization requires',
      'interaction_required',
      async (ctx) => {
        const { session, account, client, result } = ctx.oidc
        const accountId = session?.accountId
        if (!accountId || !account || !client) return interactionPolicy.Check.NO_NEED_TO_PROMPT
        // Back from the pages: the factors proven there belong to the session the login landed in.
        if (result?.login) {
          await forgetOtherAccounts(deps.sql, session.uid, accountId)
          const proven = (result as ProvenFactors).kmsProven
          if (Array.isArray(proven) && proven.length > 0)
            await recordSessionFactors(deps.sql, {
              sessionUid: session.uid,
              accountId,
              factors: proven,
              at: new Date(),
              expiresAt: new Date(Date.now() + TOKEN_TTL.session * 1000),
            })
        }
        const target = await authorizationTarget(deps.clients, client.clientId, ctx.oidc.params?.['resource'])
        if (!target) return interactionPolicy.Check.REQUEST_PROMPT
        const decision = await deps.gate.decide({
          target,
          accountId,
          satisfied: await deps.gate.satisfiedBy(session.uid, accountId),
          ip: ctx.ip,
          // Nothing recorded here: a refusal sends the person to the pages, which decide and record.
          purpose: 'probe',
        })
        return decision.outcome === 'allow'
          ? interactionPolicy.Check.NO_NEED_TO_PROMPT
          : interactionPolicy.Check.REQUEST_PROMPT
      },
    ),
  )
  const consent = policy.get('consent')!
  consent.checks.add(
    new interactionPolicy.Check(
      CLI_CONFIRMATION_REASON,
      'The command line’s sign-in is confirmed by the person each time',
      'consent_required',
      (ctx) =>
        ctx.oidc.client?.clientId === CLI_CLIENT_ID &&
        !isDeviceFlowRoute(ctx.oidc.route) &&
        (ctx.oidc.result as CliConfirmation | undefined)?.kmsCliConfirmed !== true
          ? interactionPolicy.Check.REQUEST_PROMPT
          : interactionPolicy.Check.NO_NEED_TO_PROMPT,
    ),
  )
  return policy
}

/**
 * The refresh grant: the gate with the session's satisfied factors, for the resource the new
 * access token will be for. A tenant that now requires a factor the session lacks, a policy that
 * refuses, a removed member or a blocked end-user end the token's use (invalid_grant).
 */
async function refreshAllowed(
  deps: OidcDeps,
  ctx: KoaContextWithOIDC,
  client: { clientId: string },
  accountId: string,
  token: {
    sessionUid?: string | undefined
    resource?: string | string[] | undefined
    iiat?: number | undefined
    iat?: number | undefined
  },
): Promise<void> {
  const resources = ctx.oidc.params?.['resource'] ?? token.resource
  const target = await authorizationTarget(deps.clients, client.clientId, resources)
  if (!target) throw new errors.InvalidGrant('the client may not refresh')
  // A sign-in older than the session lifetime of the tenant this refresh is for ends here, however
  // long the token was issued for (one issued without a tenant, or for a tenant that allows more).
  const tenantIds =
    target.kind === 'console'
      ? target.tenantIds
      : target.kind === 'application'
        ? [target.application.tenantId]
        : []
  const age = Math.floor(deps.clock.now().getTime() / 1000) - chainStartOf(token)
  for (const tenantId of tenantIds) {
    const lifetime = await deps.sessionPolicy?.refreshTokenSecondsOf(tenantId)
    if (lifetime !== undefined && age > lifetime)
      throw new errors.InvalidGrant('the sign-in is older than the tenant’s session lifetime; sign in again')
  }
  const decision = await deps.gate.decide({
    target,
    accountId,
    satisfied: await deps.gate.satisfiedBy(token.sessionUid, accountId),
    ip: ctx.ip,
    purpose: 'refresh',
  })
  if (decision.outcome === 'allow') return
  const why =
    decision.outcome === 'deny' && decision.reason === 'access_policy'
      ? 'access denied by an access policy'
      : 'the sign-in no longer satisfies what this client requires; sign in again'
  throw new errors.InvalidGrant(why)
}

async function rolesFor(
  deps: OidcDeps,
  client: { [key: string]: unknown },
  accountId: string,
): Promise<string[] | undefined> {
  const tenantId = client[CLIENT_TENANT]
  const applicationId = client[CLIENT_APPLICATION]
  if (typeof tenantId !== 'string' || typeof applicationId !== 'string') return undefined
  return deps.roles.roleNamesFor(tenantId, accountId, applicationId)
}

/**
 * RFC 8707 for a tenant's application: the resource must be one it declared (else
 * `invalid_target`); the access token is a JWT whose `aud` is that resource.
 */
async function applicationResource(
  deps: OidcDeps,
  resource: string,
  client: { clientId: string },
): Promise<ResourceServer> {
  const app = await deps.clients.clientOf(client.clientId)
  if (!app?.resources.includes(resource)) throw new errors.InvalidTarget()
  const ttl = (await deps.sessionPolicy?.accessTokenSecondsOf(app.tenantId)) ?? TOKEN_TTL.accessToken
  return {
    scope: '',
    audience: resource,
    accessTokenTTL: ttl,
    accessTokenFormat: 'jwt',
    jwt: { sign: { alg: 'ES256' } },
  }
}

/**
 * The lifetime of a refresh token: the tenant's setting, found before the token is made (the
 * provider's TTL callback is synchronous). A rotated token of a public client keeps the remaining
 * life of the one it replaces, so rotation never extends a session past the tenant's limit; and
 * a refresh for a tenant whose limit is shorter than that remaining life gets only what the
 * tenant's limit leaves since the first token of the chain (`iiat`).
 */
function refreshTokenLifetimes(deps: OidcDeps) {
  const prepared = new WeakMap<object, number>()
  /**
   * The tenant the token is for: the request's resource, else the one the code, device code or
   * refresh token being exchanged was issued for (a token request need not repeat `resource`).
   */
  const tenantOfRequest = (ctx: KoaContextWithOIDC, client: { clientId: string; [key: string]: unknown }) => {
    if (!isTenantApiClient(client.clientId)) {
      const tenantId = client[CLIENT_TENANT]
      return typeof tenantId === 'string' ? tenantId : undefined
    }
    const { AuthorizationCode: code, DeviceCode: device, RefreshToken: refresh } = ctx.oidc.entities
    const deviceParams = (device?.params ?? {}) as Record<string, unknown>
    const candidates = [
      ctx.oidc.params?.['resource'],
      code?.resource,
      device?.resource,
      deviceParams['resource'],
      refresh?.resource,
    ]
    for (const resource of candidates.flat()) {
      const tenantId = typeof resource === 'string' ? tenantOfResource(resource) : undefined
      if (tenantId) return tenantId
    }
    return undefined
  }
  /**
   * A console or CLI sign-in that names no tenant (the console may sign in before one is chosen)
   * can later be refreshed for any tenant of the account: it never gets the 14-day default while
   * one of them allows less, but the shortest of their lifetimes. (Refusing would end the
   * console's sign-in without a tenant; the CLI always names one, defaultResource insists.)
   */
  async function shortestOfAccount(ctx: KoaContextWithOIDC): Promise<number | undefined> {
    const accountId =
      ctx.oidc.account?.accountId ?? (ctx.oidc.entities.Grant?.accountId as string | undefined)
    if (!accountId) return undefined
    let shortest: number | undefined
    for (const { tenantId } of await deps.memberships.tenantsOf(accountId)) {
      const seconds = await deps.sessionPolicy?.refreshTokenSecondsOf(tenantId)
      if (seconds !== undefined && (shortest === undefined || seconds < shortest)) shortest = seconds
    }
    return shortest
  }
  return {
    async prepare(ctx: KoaContextWithOIDC, client: { clientId: string; [key: string]: unknown }) {
      const tenantId = tenantOfRequest(ctx, client)
      const seconds = tenantId
        ? await deps.sessionPolicy?.refreshTokenSecondsOf(tenantId)
        : isTenantApiClient(client.clientId)
          ? await shortestOfAccount(ctx)
          : undefined
      if (seconds) prepared.set(ctx, seconds)
    },
    of(
      ctx: KoaContextWithOIDC | undefined,
      token: { isSenderConstrained(): boolean },
      client: { clientAuthMethod?: string | undefined },
    ): number {
      const limit = ctx && prepared.get(ctx)
      const rotated = ctx?.oidc.entities.RotatedRefreshToken
      if (rotated && client.clientAuthMethod === 'none' && !token.isSenderConstrained()) {
        if (limit === undefined) return rotated.remainingTTL
        const age = Math.floor(deps.clock.now().getTime() / 1000) - chainStartOf(rotated)
        return Math.max(1, Math.min(rotated.remainingTTL, limit - age))
      }
      return limit ?? TOKEN_TTL.refreshToken
    },
  }
}

/** When the first refresh token of a rotation chain was issued (the provider carries `iiat` along). */
const chainStartOf = (token: { iiat?: unknown; iat?: unknown }): number =>
  typeof token.iiat === 'number' ? token.iiat : typeof token.iat === 'number' ? token.iat : 0
