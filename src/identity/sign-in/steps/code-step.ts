import type { AccountService } from '../../accounts/account-service.ts'
import type { OneTimeCodes } from '../../accounts/one-time-codes.ts'
import type { FactorStep } from './factor-step.ts'
import { codeOf } from './factor-step.ts'

export interface CodeStepDeps {
  accounts: Pick<AccountService, 'get'>
  codes: Pick<OneTimeCodes, 'send' | 'verify'>
}

/**
 * A one-time code sent by e-mail, to the address the account signs in with (so always known), or
 * by SMS, to the account's verified number (an account without one enrols first:
 * mfa-enrolment-steps.ts).
 */
export function codeStep(deps: CodeStepDeps, channel: 'email' | 'sms'): FactorStep {
  const destinationOf = async (accountId: string) => {
    const account = await deps.accounts.get(accountId)
    return channel === 'email' ? account?.email : (account?.phoneNumber ?? undefined)
  }
  return {
    method: channel === 'email' ? 'otp' : 'sms',
    async prompt(pending) {
      return { kind: 'code', channel, destination: (await destinationOf(pending.accountId)) ?? '' }
    },
    async answer(pending, form) {
      const check = await deps.codes.verify({ accountId: pending.accountId, channel, code: codeOf(form) })
      return check === 'ok' ? { outcome: 'proven' } : { outcome: 'refused', check }
    },
    async sendCode(pending) {
      const destination = await destinationOf(pending.accountId)
      if (!destination) return 'none'
      return deps.codes.send({ accountId: pending.accountId, channel, destination })
    },
  }
}
