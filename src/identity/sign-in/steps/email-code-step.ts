import type { AccountService } from '../../accounts/account-service.ts'
import type { OneTimeCodes } from '../../accounts/one-time-codes.ts'
import type { FactorStep } from './factor-step.ts'
import { codeOf } from './factor-step.ts'

export interface EmailCodeStepDeps {
  accounts: Pick<AccountService, 'get'>
  codes: Pick<OneTimeCodes, 'send' | 'verify'>
}

/** A code e-mailed to the account's address (the one it signs in with, so always known). */
export function emailCodeStep(deps: EmailCodeStepDeps): FactorStep {
  return {
    method: 'otp',
    async prompt(pending) {
      const account = await deps.accounts.get(pending.accountId)
      return { kind: 'code', channel: 'email', destination: account?.email ?? '' }
    },
    async answer(pending, form) {
      const check = await deps.codes.verify({
        accountId: pending.accountId,
        channel: 'email',
        code: codeOf(form),
      })
      return check === 'ok' ? { outcome: 'proven' } : { outcome: 'refused', check }
    },
    async sendCode(pending) {
      const account = await deps.accounts.get(pending.accountId)
      if (!account) return 'none'
      return deps.codes.send({ accountId: account.id, channel: 'email', destination: account.email })
    },
  }
}
