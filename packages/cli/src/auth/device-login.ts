import { setTimeout as sleep } from 'node:timers/promises'
import { CliError, EXIT, type Io } from '../command.ts'
import {
  DEVICE_CODE_GRANT,
  deviceAuthorization,
  OAuthError,
  type ProviderMetadata,
  type TokenAnswer,
  tenantResource,
  tokenRequest,
} from './oauth.ts'

/** RFC 8628 3.5: each slow_down adds five seconds to the polling interval, for good. */
const SLOW_DOWN_SECONDS = 5

/**
 * `kms login --device` (RFC 8628): for a terminal with no browser (SSH, a container). The person
 * opens the printed URL on any device, types the code, confirms, signs in; meanwhile the command
 * polls the token endpoint at the provider's interval, slowing down when told to, and stops when
 * the code expires or the person refuses.
 */
export async function deviceLogin(metadata: ProviderMetadata, io: Io, tenant: string): Promise<TokenAnswer> {
  const resource = tenantResource(tenant)
  const authorization = await deviceAuthorization(metadata, resource)
  io.stderr.write(
    `To sign in, open ${authorization.verificationUri} in a browser on any device and enter the code\n\n` +
      `    ${authorization.userCode}\n\n` +
      (authorization.verificationUriComplete ? `or open ${authorization.verificationUriComplete}\n` : '') +
      `The code works for ${Math.round(authorization.expiresIn / 60)} minutes. Waiting for the sign-in…\n`,
  )
  const deadline = Date.now() + authorization.expiresIn * 1000
  let interval = authorization.interval
  for (;;) {
    await sleep(interval * 1000)
    if (Date.now() > deadline) throw expired()
    try {
      return await tokenRequest(metadata.tokenEndpoint, {
        grant_type: DEVICE_CODE_GRANT,
        device_code: authorization.deviceCode,
        resource,
      })
    } catch (err) {
      if (!(err instanceof OAuthError)) throw err
      if (err.error === 'authorization_pending') continue
      if (err.error === 'slow_down') {
        interval += SLOW_DOWN_SECONDS
        continue
      }
      if (err.error === 'expired_token') throw expired()
      if (err.error === 'access_denied')
        throw new CliError(
          'access_denied',
          `the sign-in was refused${err.description ? `: ${err.description}` : ''}`,
          EXIT.auth,
        )
      throw new CliError(err.error, `the sign-in failed: ${err.message}`, EXIT.auth)
    }
  }
}

const expired = () =>
  new CliError(
    'expired_token',
    'the code expired before the sign-in was confirmed: run kms login --device again',
    EXIT.auth,
  )
