import type { FastifyInstance } from 'fastify'
import type { ApprovalStep } from './approval-step.ts'
import type { ConsentStep } from './consent-step.ts'
import type { FactorRoutes } from './factor-routes.ts'
import type { SignInFinish } from './finish.ts'
import { type InteractionKit, pendingOf } from './interaction.ts'
import type { PasswordStep } from './password-step.ts'
import { rememberedLogin } from './step-up.ts'

export interface CurrentStepDeps {
  kit: Pick<InteractionKit, 'open'>
  finishing: Pick<SignInFinish, 'completeLogin'>
  consent: Pick<ConsentStep, 'show'>
  approval: Pick<ApprovalStep, 'check'>
  factors: Pick<FactorRoutes, 'show'>
  password: Pick<PasswordStep, 'show'>
}

/**
 * The interaction's one address (the provider sends the browser there, and every step comes
 * back to it): the page of wherever the sign-in is.
 */
export function currentStep(deps: CurrentStepDeps) {
  return {
    routes(app: FastifyInstance) {
      app.get('/sign-in/:uid', async (request, reply) => {
        const opened = await deps.kit.open(request, reply)
        if (!opened) return reply
        const { interaction, client, ctx } = opened
        if (interaction.prompt.name === 'consent')
          return deps.consent.show(request, reply, ctx, interaction, client)
        const pending = pendingOf(interaction)
        if (pending?.approvalRequestId && interaction.prompt.name === 'login')
          return deps.approval.check(request, reply, ctx, interaction, client, {
            ...pending,
            approvalRequestId: pending.approvalRequestId,
          })
        if (pending && pending.steps.length > 0)
          return deps.factors.show(request, reply, ctx, interaction.uid, pending, 200)
        const remembered = pending ? undefined : rememberedLogin(interaction)
        if (remembered) return deps.finishing.completeLogin(request, reply, ctx, interaction, remembered)
        return deps.password.show(request, reply, ctx, interaction, client)
      })
    },
  }
}
