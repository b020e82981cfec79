import type { AccountService } from '../../accounts/account-service.ts'
import type { FactorStep } from './factor-step.ts'
import { codeOf } from './factor-step.ts'

export interface TotpStepDeps {
  accounts: Pick<AccountService, 'verifyTotp'>
}

/** A code of the authenticator app the account enrolled; wrong tries lock it (the account service counts). */
export function totpStep(deps: TotpStepDeps): FactorStep {
  return {
    method: 'otp',
    prompt: async () => ({ kind: 'totp' }),
    async answer(pending, form, clientIp) {
      const check = await deps.accounts.verifyTotp(pending.accountId, codeOf(form), clientIp)
      return check === 'ok' ? { outcome: 'proven' } : { outcome: 'refused', check }
    },
  }
}
