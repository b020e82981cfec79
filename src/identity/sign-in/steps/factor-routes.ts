import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import type { PageContext } from '../../../web/layout.ts'
import { factorOfStep, STEPS, type Step } from '../authorization-gate.ts'
import { renderFactorPage } from '../views/factor-views.ts'
import type { FactorStep } from './factor-step.ts'
import type { SendCode, SignInFinish } from './finish.ts'
import { backToStep, type Form, type InteractionKit, type PendingLogin, pendingOf } from './interaction.ts'

export interface FactorRoutesDeps {
  /** Every step the gate may ask for has one. */
  factors: Record<Step, FactorStep>
  kit: Pick<InteractionKit, 'open' | 'send' | 'csrfFor' | 'formChecked' | 'savePending'>
  finishing: Pick<SignInFinish, 'recordSignIn' | 'advance'>
  sendCode: SendCode
}

export type FactorRoutes = ReturnType<typeof factorRoutes>

/**
 * The second factors' pages and forms, in the order the gate listed them: a form is taken only
 * for the pending login's current step (anything else goes back to the current page).
 */
export function factorRoutes(deps: FactorRoutesDeps) {
  const { factors, kit, finishing } = deps

  /** The page of the pending login's current step. */
  async function show(
    request: FastifyRequest,
    reply: FastifyReply,
    ctx: PageContext,
    uid: string,
    pending: PendingLogin,
    status: number,
    error?: string,
  ) {
    const step = pending.steps[0]!
    const prompt = await factors[step].prompt(pending)
    // The "send again" field first: a browser without a CSRF cookie yet gets one per field and
    // keeps the last, which must be the step form's.
    const resendCsrf = prompt.kind === 'code' ? kit.csrfFor(request, reply, `resend:${uid}`) : undefined
    const csrf = kit.csrfFor(request, reply, `${step}:${uid}`)
    const page = { uid, step, prompt, stepUp: pending.stepUp ?? false, error, csrf, resendCsrf }
    return kit.send(reply, status, renderFactorPage(ctx, page))
  }

  return {
    show,
    routes(app: FastifyInstance) {
      for (const step of STEPS) {
        app.post(`/sign-in/:uid/${step}`, async (request, reply) => {
          const opened = await kit.open(request, reply)
          if (!opened) return reply
          const { interaction, client, ctx } = opened
          if (!kit.formChecked(request, reply, ctx, step, interaction.uid)) return reply
          const pending = pendingOf(interaction)
          if (!pending || pending.steps[0] !== step) return backToStep(reply, interaction)
          const answer = await factors[step].answer(pending, request.body as Form, request.ip)
          switch (answer.outcome) {
            case 'again':
              return show(request, reply, ctx, interaction.uid, pending, answer.status, ctx.t[answer.message])
            case 'saved':
              await kit.savePending(interaction, pending)
              return backToStep(reply, interaction)
            case 'refused': {
              const locked = answer.check === 'locked'
              await finishing.recordSignIn(request, interaction, client, {
                accountId: pending.accountId,
                methods: pending.amr,
                stepUp: pending.stepUp,
                reason: locked ? 'code_locked' : 'invalid_code',
              })
              const message = locked ? ctx.t.locked : ctx.t.invalidCode
              return show(request, reply, ctx, interaction.uid, pending, locked ? 429 : 401, message)
            }
            case 'proven': {
              // The number SMS enrolment was proving is the account's now, no longer the login's.
              const { phone: _phone, ...rest } = pending
              return finishing.advance(request, reply, ctx, interaction, {
                ...rest,
                steps: pending.steps.slice(1),
                amr: [...pending.amr, factors[step].method],
                proven: [...(pending.proven ?? []), factorOfStep(step)],
              })
            }
          }
        })
      }

      // "Send again" on a code's page: a new code for the current step, within the sending bound.
      app.post('/sign-in/:uid/resend', async (request, reply) => {
        const opened = await kit.open(request, reply)
        if (!opened) return reply
        const { interaction, ctx } = opened
        if (!kit.formChecked(request, reply, ctx, 'resend', interaction.uid)) return reply
        const pending = pendingOf(interaction)
        if (!pending || pending.steps.length === 0) return backToStep(reply, interaction)
        if ((await deps.sendCode(pending)) === 'rate_limited')
          return show(request, reply, ctx, interaction.uid, pending, 429, ctx.t.tooManyCodes)
        return backToStep(reply, interaction)
      })
    },
  }
}
