import type { FastifyInstance } from 'fastify'
import type { Step } from './authorization-gate.ts'
import type { SignInDeps } from './sign-in-types.ts'
import { approvalStep } from './steps/approval-step.ts'
import { codeStep } from './steps/code-step.ts'
import { consentStep } from './steps/consent-step.ts'
import { currentStep } from './steps/current-step.ts'
import { factorRoutes } from './steps/factor-routes.ts'
import { codeSender, type FactorStep } from './steps/factor-step.ts'
import { federationStep } from './steps/federation-step.ts'
import { signInFinish } from './steps/finish.ts'
import { interactionKit } from './steps/interaction.ts'
import { smsEnrolmentStep, totpEnrolmentStep } from './steps/mfa-enrolment-steps.ts'
import { passwordStep } from './steps/password-step.ts'
import { signUpStep } from './steps/sign-up-step.ts'
import { totpStep } from './steps/totp-step.ts'

/**
 * The provider's interaction pages under /sign-in/:uid: the password (or an external IdP, or
 * sign-up), then the factors the gate asks for, an access request's approval, and consent for
 * third-party clients. Each step is a file of steps/, its HTML one of views/; this wires them.
 */
export function signInRoutes(deps: SignInDeps) {
  const kit = interactionKit(deps)
  const factors: Record<Step, FactorStep> = {
    totp: totpStep(deps),
    'totp-enrol': totpEnrolmentStep(deps),
    'email-otp': codeStep(deps, 'email'),
    'sms-enrol': smsEnrolmentStep(deps),
    'sms-otp': codeStep(deps, 'sms'),
  }
  const sendCode = codeSender(factors)
  const finishing = signInFinish({ ...deps, kit, sendCode })
  const password = passwordStep({ ...deps, kit, finishing })
  const factorSteps = factorRoutes({ factors, kit, finishing, sendCode })
  const consent = consentStep({ ...deps, kit, finishing })
  const steps = [
    currentStep({
      kit,
      finishing,
      consent,
      approval: approvalStep({ ...deps, finishing }),
      factors: factorSteps,
      password,
    }),
    federationStep({ ...deps, kit, finishing }),
    signUpStep({ ...deps, kit }),
    password,
    factorSteps,
    consent,
  ]

  return async (app: FastifyInstance) => {
    for (const step of steps) step.routes(app)
  }
}
