import type { ModuleJobs } from '../platform/module.ts'
import {
  ACCESS_DECISION_EMAIL,
  type AccessDecisionEmail,
  type AccessPolicyService,
} from './access-policy-service.ts'

/** The `access-decision-email` mail: the decision on an access request, to the end-user who asked. */
export function accessPoliciesJobs(deps: {
  accessPolicies: Pick<AccessPolicyService, 'deliverDecision'>
}): ModuleJobs {
  return {
    mail: [
      {
        kind: ACCESS_DECISION_EMAIL,
        deliver: (job: AccessDecisionEmail, final) =>
          deps.accessPolicies.deliverDecision(job.requestId, final),
      },
    ],
  }
}
