import type { ModuleJobs } from '../platform/module.ts'
import {
  ENDUSER_SIGNUP_EMAIL,
  type EndUserService,
  type EndUserSignUpEmail,
  enduserSignUpEmailId,
} from './enduser-service.ts'

/**
 * The `enduser-signup-email` mail: the link of a sign-up on an application's pages, queued again
 * when its job was lost.
 */
export function endusersJobs(deps: {
  endusers: Pick<EndUserService, 'deliverSignUp' | 'overdueSignUps'>
}): ModuleJobs {
  return {
    mail: [
      {
        kind: ENDUSER_SIGNUP_EMAIL,
        deliver: (job: EndUserSignUpEmail, final) => deps.endusers.deliverSignUp(job.requestId, final),
        async overdue(graceMs) {
          const requestIds = await deps.endusers.overdueSignUps(graceMs)
          return requestIds.map((requestId) => ({
            payload: { requestId },
            id: enduserSignUpEmailId(requestId),
          }))
        },
      },
    ],
  }
}
