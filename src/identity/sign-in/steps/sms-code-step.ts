import type { AccountService } from '../../accounts/account-service.ts'
import type { OneTimeCodes } from '../../accounts/one-time-codes.ts'
import type { FactorStep } from './factor-step.ts'
import { codeOf } from './factor-step.ts'

export interface SmsCodeStepDeps {
  accounts: Pick<AccountService, 'get'>
  codes: Pick<OneTimeCodes, 'send' | 'verify'>
}

/** A code texted to the account's verified number (an account without one enrols first: mfa-enrolment-steps.ts). */
export function smsCodeStep(deps: SmsCodeStepDeps): FactorStep {
  return {
    method: 'sms',
    async prompt(pending) {
      const account = await deps.accounts.get(pending.accountId)
      return { kind: 'code', channel: 'sms', destination: account?.phoneNumber ?? '' }
    },
    async answer(pending, form) {
      const check = await deps.codes.verify({
        accountId: pending.accountId,
        channel: 'sms',
        code: codeOf(form),
      })
      return check === 'ok' ? { outcome: 'proven' } : { outcome: 'refused', check }
    },
    async sendCode(pending) {
      const phone = (await deps.accounts.get(pending.accountId))?.phoneNumber
      if (!phone) return 'none'
      return deps.codes.send({ accountId: pending.accountId, channel: 'sms', destination: phone })
    },
  }
}
