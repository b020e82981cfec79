import { CliError, EXIT, type Io, type Settings } from '../command.ts'
import { type CredentialStore, openCredentialStore, type StoredCredentials } from './credential-store.ts'
import { withCredentialsLock } from './lock-file.ts'
import { normalizeAddr, OAuthError, tenantResource, tokenRequest } from './oauth.ts'

/** An access token this close to its end is refreshed first: it could lapse on the way. */
const REFRESH_MARGIN_MS = 60_000

/** The entry of a profile, service address and tenant: nothing else finds it. */
const credentialKey = (settings: Settings, tenant: string): string =>
  `${settings.profile} ${normalizeAddr(settings.addr)} ${tenant}`

interface SignedInCredentials {
  store: CredentialStore
  key: string
  credentials: StoredCredentials
}

/** The stored sign-in for settings.addr + tenant (+ profile), or undefined. */
export async function storedSignIn(
  settings: Settings,
  io: Io,
  tenant: string,
): Promise<SignedInCredentials | undefined> {
  const store = await openCredentialStore(settings.configDir, io.env)
  const key = credentialKey(settings, tenant)
  const credentials = await store.read(key)
  // The key says it already; the entry must say the same (a hand-edited file cannot cross tenants).
  if (!credentials || credentials.tenant !== tenant || credentials.addr !== normalizeAddr(settings.addr))
    return undefined
  return { store, key, credentials }
}

/** Keeps a new sign-in (replacing one of the same key); says where it went. */
export async function saveSignIn(
  settings: Settings,
  io: Io,
  credentials: StoredCredentials,
): Promise<'keyring' | 'file'> {
  const store = await openCredentialStore(settings.configDir, io.env)
  const key = credentialKey(settings, credentials.tenant)
  return withCredentialsLock(settings.configDir, () => store.write(key, credentials))
}

export async function forgetSignIn(settings: Settings, io: Io, tenant: string): Promise<void> {
  const store = await openCredentialStore(settings.configDir, io.env)
  await withCredentialsLock(settings.configDir, () => store.remove(credentialKey(settings, tenant)))
}

const isFresh = (credentials: StoredCredentials, now: number) =>
  credentials.accessTokenExpiresAt - REFRESH_MARGIN_MS > now

const signInEnded = (settings: Settings, tenant: string, why: string) =>
  new CliError(
    'not_signed_in',
    `the sign-in to tenant ${tenant} at ${normalizeAddr(settings.addr)} has ended (${why}); sign in again: kms login`,
    EXIT.auth,
  )

/**
 * A valid access token for settings.addr + settings.tenant (+ profile), refreshed when it is about
 * to expire; undefined when not signed in there (no tenant, or no sign-in stored for it). Refreshes
 * are serialized across processes by the credentials lock, and whoever takes it reads the stored
 * tokens again first: a token another process refreshed meanwhile is used as it is, so a rotated
 * refresh token is never sent twice (the provider would end the sign-in). A refresh the provider
 * refuses (the sign-in ended, the member was removed, the tenant now asks for a factor) deletes
 * the stored tokens and throws `not_signed_in`.
 */
export async function bearerFor(settings: Settings, io: Io): Promise<string | undefined> {
  const tenant = settings.tenant
  if (!tenant) return undefined
  const found = await storedSignIn(settings, io, tenant)
  if (!found) return undefined
  if (isFresh(found.credentials, Date.now())) return found.credentials.accessToken
  const { store, key } = found
  return withCredentialsLock(settings.configDir, async () => {
    const current = await store.read(key)
    if (!current || current.tenant !== tenant) return undefined
    if (isFresh(current, Date.now())) return current.accessToken
    if (!current.refreshToken) {
      await store.remove(key)
      throw signInEnded(settings, tenant, 'the access token expired and there is no refresh token')
    }
    let answer: Awaited<ReturnType<typeof tokenRequest>>
    const startedAt = Date.now()
    try {
      answer = await tokenRequest(current.tokenEndpoint, {
        grant_type: 'refresh_token',
        refresh_token: current.refreshToken,
        resource: tenantResource(tenant),
      })
    } catch (err) {
      if (err instanceof OAuthError && err.error === 'invalid_grant') {
        await store.remove(key)
        throw signInEnded(settings, tenant, err.description ?? err.error)
      }
      if (err instanceof OAuthError)
        throw new CliError(err.error, `the refresh was refused: ${err.message}`, EXIT.auth)
      throw err
    }
    const refreshed: StoredCredentials = {
      ...current,
      accessToken: answer.access_token,
      accessTokenExpiresAt: startedAt + answer.expires_in * 1000,
      refreshToken: answer.refresh_token ?? current.refreshToken,
    }
    await store.write(key, refreshed)
    return refreshed.accessToken
  })
}
