import type { PartnerAuthenticator } from '../auth/auth-hook.ts'
import { partnerPrincipal } from '../auth/principal.ts'
import { PARTNER_KEY_PREFIX } from './partner-key-format.ts'
import type { PartnerService } from './partner-service.ts'

/**
 * The credentials of /api/v1/partners/*: a partner API key (`kmsp_…`), or an access token of the
 * partner portal client (a person of the partner, signed in through the provider in the partners'
 * realm). Either way the partner must be active now: a suspended partner's keys and sessions stop
 * at once. The caller is the request's principal (auth/principal.ts, kind `partner`).
 */
export function createPartnerAuthenticator(deps: {
  partners: Pick<PartnerService, 'authenticate' | 'sessionCaller'>
  /** The identity module's verifier of portal access tokens. */
  portalTokens: { verifyPartnerPortal(token: string): Promise<{ accountId: string } | undefined> }
}): PartnerAuthenticator {
  return {
    async authenticate(presented) {
      if (presented.startsWith(PARTNER_KEY_PREFIX)) {
        const caller = await deps.partners.authenticate(presented)
        return caller?.keyId ? partnerPrincipal(caller.partnerId, { keyId: caller.keyId }) : undefined
      }
      if (presented.length > 8192) return undefined
      const verified = await deps.portalTokens.verifyPartnerPortal(presented)
      const caller = verified && (await deps.partners.sessionCaller(verified.accountId))
      return caller ? partnerPrincipal(caller.partnerId, { accountId: verified!.accountId }) : undefined
    },
  }
}
