import type { AccountService } from '../../accounts/account-service.ts'
import type { OneTimeCodes } from '../../accounts/one-time-codes.ts'
import type { SignInDeps } from '../sign-in-types.ts'
import type { FactorStep } from './factor-step.ts'
import { codeOf } from './factor-step.ts'

/*
 * A method the tenant requires and the account has not set up is set up during the sign-in,
 * proven by its first code: the account holds it only once that code is right.
 */

export interface TotpEnrolmentStepDeps extends Pick<SignInDeps, 'issuerName'> {
  accounts: Pick<AccountService, 'beginTotpEnrolment' | 'confirmTotpEnrolment'>
}

/** A new authenticator: the secret shown, then a code from the app confirms it. */
export function totpEnrolmentStep(deps: TotpEnrolmentStepDeps): FactorStep {
  return {
    method: 'otp',
    async prompt(pending) {
      const { secret, uri } = await deps.accounts.beginTotpEnrolment(pending.accountId, deps.issuerName)
      return { kind: 'totp-enrol', secret, uri }
    },
    async answer(pending, form, clientIp) {
      const check = await deps.accounts.confirmTotpEnrolment(pending.accountId, codeOf(form), clientIp)
      return check === 'ok' ? { outcome: 'proven' } : { outcome: 'refused', check }
    },
  }
}

/** A number in international (E.164) form: what an SMS provider accepts. */
const E164 = /^\+[1-9][0-9]{6,14}$/

export interface SmsEnrolmentStepDeps {
  accounts: Pick<AccountService, 'setVerifiedPhone'>
  codes: Pick<OneTimeCodes, 'send' | 'verify'>
}

/**
 * A phone number, in two halves on one page: the number (kept in the pending login, a code
 * texted to it), then the code, which makes it the account's verified number.
 */
export function smsEnrolmentStep(deps: SmsEnrolmentStepDeps): FactorStep {
  const sendCode: FactorStep['sendCode'] = async (pending) =>
    pending.phone
      ? deps.codes.send({ accountId: pending.accountId, channel: 'sms', destination: pending.phone })
      : 'none'
  return {
    method: 'sms',
    prompt: async (pending) =>
      pending.phone ? { kind: 'code', channel: 'sms', destination: pending.phone } : { kind: 'phone' },
    async answer(pending, form) {
      if (!pending.phone) {
        const phone = (form['phone'] ?? '').replace(/[\s()-]/g, '').slice(0, 32)
        if (!E164.test(phone)) return { outcome: 'again', status: 400, message: 'phoneInvalid' }
        pending.phone = phone
        // Not saved when no code could be sent: the next visit asks for the number again.
        if ((await sendCode(pending)) === 'rate_limited')
          return { outcome: 'again', status: 429, message: 'tooManyCodes' }
        return { outcome: 'saved' }
      }
      const check = await deps.codes.verify({
        accountId: pending.accountId,
        channel: 'sms',
        code: codeOf(form),
      })
      if (check !== 'ok') return { outcome: 'refused', check }
      await deps.accounts.setVerifiedPhone(pending.accountId, pending.phone)
      return { outcome: 'proven' }
    },
    sendCode,
  }
}
