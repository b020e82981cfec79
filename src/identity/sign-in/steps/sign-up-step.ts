import type { FastifyInstance, FastifyReply } from 'fastify'
import { type PageContext, renderErrorPage } from '../../../web/layout.ts'
import { isPlausibleEmail, normalizeEmail } from '../../accounts/account-service.ts'
import type { SignInDeps } from '../sign-in-types.ts'
import { renderSignUpPage, renderSignUpSent } from '../views/sign-up-view.ts'
import type { Form, InteractionKit } from './interaction.ts'

export interface SignUpStepDeps extends Pick<SignInDeps, 'endUsers'> {
  kit: Pick<InteractionKit, 'open' | 'send' | 'csrfFor' | 'formChecked'>
}

/**
 * Sign-up, where the application allows it: the address first; the e-mailed link sets the
 * password (src/endusers).
 */
export function signUpStep(deps: SignUpStepDeps) {
  const { kit } = deps
  // An application without sign-up has no such page.
  const notFound = (reply: FastifyReply, ctx: PageContext) =>
    kit.send(reply, 404, renderErrorPage(ctx, 'This page does not exist.'))

  return {
    routes(app: FastifyInstance) {
      app.get('/sign-in/:uid/sign-up', async (request, reply) => {
        const opened = await kit.open(request, reply)
        if (!opened) return reply
        const { interaction, client, ctx } = opened
        if (!client?.signUpEnabled) return notFound(reply, ctx)
        const csrf = kit.csrfFor(request, reply, `sign-up:${interaction.uid}`)
        return kit.send(reply, 200, renderSignUpPage(ctx, { uid: interaction.uid, csrf }))
      })

      app.post('/sign-in/:uid/sign-up', async (request, reply) => {
        const opened = await kit.open(request, reply)
        if (!opened) return reply
        const { interaction, client, ctx } = opened
        if (!client?.signUpEnabled) return notFound(reply, ctx)
        if (!kit.formChecked(request, reply, ctx, 'sign-up', interaction.uid)) return reply
        const email = ((request.body as Form)['email'] ?? '').trim()
        if (!isPlausibleEmail(normalizeEmail(email)))
          return kit.send(
            reply,
            400,
            renderErrorPage(ctx, ctx.t.emailInvalid, `/sign-in/${interaction.uid}/sign-up`),
          )
        // Each sign-up sends an e-mail: bounded per client address (the same answer for any address).
        const admission = await deps.endUsers.admitSignUp(request.ip)
        if (!admission.admitted)
          return kit.send(
            reply.header('retry-after', String(admission.retryAfterSeconds)),
            429,
            renderErrorPage(ctx, ctx.t.signupTooMany, `/sign-in/${interaction.uid}`),
          )
        // The answer never depends on the address: the work happens after it, off this request's path.
        void deps.endUsers
          .signUp({
            tenantId: client.tenantId,
            applicationId: client.applicationId,
            email,
            clientIp: request.ip,
          })
          .catch((err: unknown) =>
            request.log.error({ err: { message: (err as Error).message } }, 'sign-up failed'),
          )
        return kit.send(reply, 200, renderSignUpSent(ctx, interaction.uid))
      })
    },
  }
}
