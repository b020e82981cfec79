import { join } from 'node:path'
import {
  CliError,
  type CommandHandler,
  EXIT,
  integerFlag,
  parseCommandArgs,
  type Settings,
  usageError,
} from '../command.ts'
import { browserLogin } from './browser-login.ts'
import type { StoredCredentials } from './credential-store.ts'
import { forgetSignIn, saveSignIn, storedSignIn } from './credentials.ts'
import { deviceLogin } from './device-login.ts'
import { verifyIdToken } from './id-token.ts'
import { discover, normalizeAddr, OAuthError, revokeRefreshToken } from './oauth.ts'

const TENANT_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/
const DEFAULT_TIMEOUT_SECONDS = 300

const LOGIN_HELP = `kms login: sign in to a tenant (browser or device code)

Usage: kms login [--device] [--no-browser] [--timeout <seconds>]

Signs in to the tenant (--tenant, KMS_TENANT or the profile's tenant) at the service (--addr) and
keeps the tokens in the OS keyring, else in <config dir>/credentials.json (owner-only). Later
commands use them for that service and tenant only, refreshing them as needed.
  (default)            opens the browser; the sign-in comes back to a port on 127.0.0.1
  --no-browser         only prints the URL to open (on this machine)
  --device             for a terminal without a browser (SSH, a container): open the printed URL
                       on any device and enter the code shown here
  --timeout <seconds>  how long the browser sign-in may take (default ${DEFAULT_TIMEOUT_SECONDS})
KMS_CREDENTIAL_STORE=file keeps the tokens in the file even when a keyring is there.
`
const LOGOUT_HELP = `kms logout: end the sign-in to the tenant

Usage: kms logout

The service revokes the sign-in (its refresh and access tokens stop working) and the stored
tokens for this service and tenant are deleted.
`

/**
 * The tenant a sign-in is for. Without one nothing is sent: a sign-in is always for one tenant's
 * API, and the CLI cannot list a person's tenants before they have signed in.
 */
function tenantOf(settings: Settings, command: string): string {
  const tenant = settings.tenant
  if (!tenant)
    throw new CliError(
      'tenant_required',
      `kms ${command} needs a tenant: pass --tenant <tenant id>, set KMS_TENANT, or put tenant in the profile. ` +
        "Your tenants' ids are in the console (the tenant switcher; a console link's ?tenant=<id>) and in GET /api/v1/me",
      EXIT.usage,
    )
  if (!TENANT_ID.test(tenant))
    throw usageError(`--tenant must be a tenant id (a UUID), got ${JSON.stringify(tenant)}`)
  return tenant
}

interface LoginOptions {
  device: boolean
  openBrowser: boolean
  timeoutSeconds: number
}

function parseLoginArgs(args: string[]): LoginOptions {
  const { values } = parseCommandArgs(
    args,
    { device: { type: 'boolean' }, 'no-browser': { type: 'boolean' }, timeout: { type: 'string' } },
    { min: 0, max: 0, names: 'no arguments' },
  )
  return {
    device: values['device'] === true,
    openBrowser: values['no-browser'] !== true,
    timeoutSeconds: integerFlag(values['timeout'], 'timeout', 1, 3600) ?? DEFAULT_TIMEOUT_SECONDS,
  }
}

/** An OAuth refusal during the sign-in, as the CLI reports it (not signed in: exit 3). */
const asCliError = (err: unknown): unknown =>
  err instanceof OAuthError ? new CliError(err.error, `the sign-in failed: ${err.message}`, EXIT.auth) : err

export const loginCommand: CommandHandler = async (args, { settings, io }) => {
  if (args.length === 1 && args[0] === '--help') {
    io.stdout.write(LOGIN_HELP)
    return EXIT.ok
  }
  const options = parseLoginArgs(args)
  const tenant = tenantOf(settings, 'login')
  const addr = normalizeAddr(settings.addr)
  const metadata = await discover(addr)
  let signedIn: { answer: Awaited<ReturnType<typeof deviceLogin>>; nonce: string | undefined }
  try {
    signedIn = options.device
      ? { answer: await deviceLogin(metadata, io, tenant), nonce: undefined }
      : await browserLogin(metadata, io, {
          tenant,
          openBrowser: options.openBrowser,
          timeoutMs: options.timeoutSeconds * 1000,
        })
  } catch (err) {
    throw asCliError(err)
  }
  const { answer, nonce } = signedIn
  if (!answer.id_token) throw new CliError('bad_response', 'the provider answered without an ID token')
  const who = await verifyIdToken(answer.id_token, metadata, { nonce })
  const credentials: StoredCredentials = {
    version: 1,
    profile: settings.profile,
    addr,
    tenant,
    issuer: metadata.issuer,
    tokenEndpoint: metadata.tokenEndpoint,
    revocationEndpoint: metadata.revocationEndpoint,
    subject: who.sub,
    email: who.email,
    accessToken: answer.access_token,
    accessTokenExpiresAt: Date.now() + answer.expires_in * 1000,
    refreshToken: answer.refresh_token,
  }
  const store = await saveSignIn(settings, io, credentials)
  const kept = store === 'keyring' ? 'the OS keyring' : join(settings.configDir, 'credentials.json')
  io.stderr.write(`Signed in to tenant ${tenant} at ${addr} as ${who.email ?? who.sub} (kept in ${kept}).\n`)
  return EXIT.ok
}

export const logoutCommand: CommandHandler = async (args, { settings, io }) => {
  if (args.length === 1 && args[0] === '--help') {
    io.stdout.write(LOGOUT_HELP)
    return EXIT.ok
  }
  parseCommandArgs(args, {}, { min: 0, max: 0, names: 'no arguments' })
  const tenant = tenantOf(settings, 'logout')
  const addr = normalizeAddr(settings.addr)
  const found = await storedSignIn(settings, io, tenant)
  if (!found) {
    io.stderr.write(`Not signed in to tenant ${tenant} at ${addr}: nothing to do.\n`)
    return EXIT.ok
  }
  const { refreshToken, revocationEndpoint } = found.credentials
  let revocationFailure: unknown
  if (refreshToken && revocationEndpoint) {
    try {
      await revokeRefreshToken(revocationEndpoint, refreshToken)
    } catch (err) {
      revocationFailure = err
    }
  }
  // Deleted in any case: the person asked to be signed out here.
  await forgetSignIn(settings, io, tenant)
  if (revocationFailure !== undefined) {
    const reason = (revocationFailure as Error).message
    throw new CliError(
      'revocation_failed',
      `the stored tokens were deleted, but the service did not revoke the sign-in (${reason}); it ends with its session`,
      revocationFailure instanceof CliError ? revocationFailure.exitCode : EXIT.failed,
    )
  }
  io.stderr.write(`Signed out of tenant ${tenant} at ${addr}.\n`)
  return EXIT.ok
}
