import type { ModuleJobs } from '../platform/module.ts'
import { INVITATION_EMAIL, type InvitationSend, invitationEmailId, type TeamService } from './team-service.ts'

/**
 * The `invitation-email` mail: one send of an invitation's e-mail per job; a queued send whose
 * job was lost (Redis restarted empty) is queued again under its (invitation, send count) id.
 */
export function teamJobs(deps: {
  team: Pick<TeamService, 'deliverInvitation' | 'overdueInvitations'>
}): ModuleJobs {
  return {
    mail: [
      {
        kind: INVITATION_EMAIL,
        deliver: (job: InvitationSend, final) => deps.team.deliverInvitation(job, final),
        async overdue(graceMs) {
          const sends = await deps.team.overdueInvitations(graceMs)
          return sends.map((send) => ({
            payload: { invitationId: send.invitationId, sendCount: send.sendCount },
            id: invitationEmailId(send),
          }))
        },
      },
    ],
  }
}
