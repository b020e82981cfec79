import type { ModuleJobs } from '../platform/module.ts'
import { SIGNUP_EMAIL, type SignupEmail, type SignupService, signupEmailId } from './signup-service.ts'

/** The `signup-email` mail: a sign-up's confirmation link, queued again when its job was lost. */
export function signupJobs(deps: { signups: Pick<SignupService, 'deliver' | 'overdue'> }): ModuleJobs {
  return {
    mail: [
      {
        kind: SIGNUP_EMAIL,
        deliver: (job: SignupEmail, final) => deps.signups.deliver(job.signupId, final),
        async overdue(graceMs) {
          const signupIds = await deps.signups.overdue(graceMs)
          return signupIds.map((signupId) => ({ payload: { signupId }, id: signupEmailId(signupId) }))
        },
      },
    ],
  }
}
