import { type ModuleJobs, sweep } from '../platform/module.ts'
import { PARTNER_DECISION_EMAIL, type PartnerDecisionEmail, type PartnerService } from './partner-service.ts'

/**
 * - `commission-sweep` (maintenance): last month's partner commissions, once per referral;
 * - the `partner-decision-email` mail: the operator's decision to a partner who signed up (a
 *   failure to queue it leaves it `queued` in the partner's view: no overdue re-send).
 */
export function partnersJobs(deps: {
  partners: Pick<PartnerService, 'calculateCommissions' | 'deliverDecision'>
}): ModuleJobs {
  return {
    sweeps: [
      sweep(
        'commission-sweep',
        'maintenance',
        'commissions calculated',
        () => deps.partners.calculateCommissions(),
        (commissions) => (commissions['calculated'] as number) > 0,
      ),
    ],
    mail: [
      {
        kind: PARTNER_DECISION_EMAIL,
        deliver: (job: PartnerDecisionEmail, final) => deps.partners.deliverDecision(job.partnerId, final),
      },
    ],
  }
}
