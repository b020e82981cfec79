import type { ModuleJobs } from '../platform/module.ts'
import { ACCOUNT_LINK_EMAIL, type AccountLinkEmail, accountLinkEmailId } from './accounts/account-links.ts'
import { ONE_TIME_CODE, type OneTimeCodeMessage } from './accounts/one-time-codes.ts'
import type { Identity } from './identity-service.ts'

/**
 * - `identity-sweep` (maintenance): the provider's expired rows, sign-in throttle windows, the
 *   token signing key's rotation;
 * - the `account-link-email` mail (a reset or set-up link), queued again when its job was lost;
 * - the `one-time-code` mail (a sign-in code by e-mail or SMS: short-lived, never re-sent).
 */
export function identityJobs(deps: { identity: Pick<Identity, 'sweep' | 'links' | 'codes'> }): ModuleJobs {
  const { identity } = deps
  return {
    sweeps: [
      {
        name: 'identity-sweep',
        queue: 'maintenance',
        async run() {
          const swept = await identity.sweep()
          return {
            worked: swept.expiredModels > 0 || swept.rotatedToVersion !== null,
            message: 'identity sweep',
            details: swept,
          }
        },
      },
    ],
    mail: [
      {
        kind: ACCOUNT_LINK_EMAIL,
        deliver: (job: AccountLinkEmail, final) => identity.links.deliver(job.linkId, final),
        async overdue(graceMs) {
          const linkIds = await identity.links.overdue(graceMs)
          return linkIds.map((linkId) => ({ payload: { linkId }, id: accountLinkEmailId(linkId) }))
        },
      },
      {
        kind: ONE_TIME_CODE,
        deliver: (job: OneTimeCodeMessage, final) => identity.codes.deliver(job.otpId, final),
      },
    ],
  }
}
