import type { Step } from '../authorization-gate.ts'
import type { FactorPrompt } from '../views/factor-views.ts'
import type { SendCode } from './finish.ts'
import type { Form, PendingLogin } from './interaction.ts'

/** What became of a step's form; factor-routes.ts turns it into the answer. */
type FactorAnswer =
  /** The factor is proven: on to the next step, or the end of the sign-in. */
  | { outcome: 'proven' }
  /** A wrong code, or too many: a failed sign-in for the records, and the page again. */
  | { outcome: 'refused'; check: 'invalid' | 'locked' }
  /** A form that cannot be used yet (a malformed number, too many codes): the page again. */
  | { outcome: 'again'; status: 400 | 429; message: 'phoneInvalid' | 'tooManyCodes' }
  /** The pending login took something in (SMS enrolment's number): kept, then its page again. */
  | { outcome: 'saved' }

/**
 * One second factor the gate may ask for (authorization-gate.ts's Step): what its page asks, how
 * its form is checked, and for codes how one is sent. No HTTP here: factor-routes.ts serves them all
 * alike, so the CSRF checks, the records and the moves between steps cannot differ between factors.
 */
export interface FactorStep {
  /** The RFC 8176 method the step adds to `amr`. */
  method: 'otp' | 'sms'
  prompt(pending: PendingLogin): Promise<FactorPrompt>
  /** The step's form; may change `pending` (then 'saved' or 'again' show the change). */
  answer(pending: PendingLogin, form: Form, clientIp: string): Promise<FactorAnswer>
  /** Sends the step's code on entering it or on "send again"; steps without a code have none. */
  sendCode?: SendCode
}

/** The code typed: spaces around it forgiven, never more than a code could be. */
export const codeOf = (form: Form) => (form['code'] ?? '').trim().slice(0, 16)

/** The step a pending login is at says which code to send; a login with no step left sends none. */
export const codeSender =
  (factors: Record<Step, FactorStep>): SendCode =>
  async (pending) => {
    const step = pending.steps[0]
    return (step && (await factors[step].sendCode?.(pending))) ?? 'none'
  }
