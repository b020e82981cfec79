import type { FastifyReply, FastifyRequest } from 'fastify'
import type { Interaction } from 'oidc-provider'
import type { PageContext } from '../../../web/layout.ts'
import type { TenantClient } from '../../oidc/oidc-provider.ts'
import type { SignInAccessPolicy } from '../sign-in-types.ts'
import type { SignInFinish } from './finish.ts'
import type { PendingLogin } from './interaction.ts'

export interface ApprovalStepDeps {
  accessPolicy?: Pick<SignInAccessPolicy, 'requestFor'> | undefined
  finishing: Pick<SignInFinish, 'recordSignIn' | 'refuse' | 'awaitApproval' | 'completeLogin'>
}

export type ApprovalStep = ReturnType<typeof approvalStep>

/**
 * Every factor passed but an access policy asked a team member to approve: the waiting page
 * comes back here until the access request is decided.
 */
export function approvalStep(deps: ApprovalStepDeps) {
  const { finishing } = deps

  return {
    /** A sign-in waiting for approval, looked at again: the decision so far. */
    async check(
      request: FastifyRequest,
      reply: FastifyReply,
      ctx: PageContext,
      interaction: Interaction,
      app: TenantClient | undefined,
      pending: PendingLogin & { approvalRequestId: string },
    ) {
      const decided =
        app &&
        (await deps.accessPolicy?.requestFor(app.tenantId, pending.approvalRequestId, pending.accountId))
      if (!decided || decided.status === 'rejected' || decided.status === 'expired') {
        const rejected = decided?.status !== 'expired'
        await finishing.recordSignIn(request, interaction, app, {
          accountId: pending.accountId,
          methods: pending.amr,
          reason: rejected ? 'approval_rejected' : 'approval_expired',
        })
        const message = rejected ? ctx.t.approvalRejected : ctx.t.approvalExpired
        return finishing.refuse(request, reply, ctx, message, 'Access denied by an access policy')
      }
      if (decided.status === 'pending') return finishing.awaitApproval(reply, ctx, interaction.uid)
      // Approved: the policies are asked again (they may have changed meanwhile) and find the approval.
      return finishing.completeLogin(request, reply, ctx, interaction, pending)
    },
  }
}
