import type { FastifyInstance } from 'fastify'
import { isUuid } from '../../../platform/ids.ts'
import { renderErrorPage } from '../../../web/layout.ts'
import type { SignInFederation } from '../sign-in-types.ts'
import type { SignInFinish } from './finish.ts'
import type { InteractionKit } from './interaction.ts'

export interface FederationStepDeps {
  federation?: Pick<SignInFederation, 'startUrl' | 'takeResult'> | undefined
  kit: Pick<InteractionKit, 'open' | 'send'>
  finishing: Pick<SignInFinish, 'completeLogin'>
}

/** A result id as src/federation issues it; anything else is not looked up. */
const REQUEST_ID = /^[A-Za-z0-9_-]{1,100}$/

/**
 * Sign-in through an external identity provider (SAML) an application offers: off to the IdP,
 * and back once src/federation's ACS has accepted its response. Both need an application's
 * sign-in still at its login prompt.
 */
export function federationStep(deps: FederationStepDeps) {
  const { kit } = deps

  return {
    routes(app: FastifyInstance) {
      // To the IdP with a new AuthnRequest bound to this sign-in.
      app.get('/sign-in/:uid/federated/:idpId', async (request, reply) => {
        const opened = await kit.open(request, reply)
        if (!opened) return reply
        const { interaction, client, ctx } = opened
        const { idpId } = request.params as { idpId: string }
        const url =
          client && interaction.prompt.name === 'login' && isUuid(idpId)
            ? await deps.federation?.startUrl({
                idpId,
                tenantId: client.tenantId,
                applicationId: client.applicationId,
                interactionUid: interaction.uid,
              })
            : undefined
        if (!url)
          return kit.send(
            reply,
            404,
            renderErrorPage(ctx, 'This page does not exist.', `/sign-in/${interaction.uid}`),
          )
        return reply.redirect(url, 303)
      })

      // Back from the IdP: the account it signed in, taken once, by this sign-in only.
      app.get('/sign-in/:uid/federated-return/:requestId', async (request, reply) => {
        const opened = await kit.open(request, reply)
        if (!opened) return reply
        const { interaction, client, ctx } = opened
        const { requestId } = request.params as { requestId: string }
        const result =
          client && interaction.prompt.name === 'login' && REQUEST_ID.test(requestId)
            ? await deps.federation?.takeResult(requestId, interaction.uid)
            : undefined
        if (!result)
          return kit.send(
            reply,
            400,
            renderErrorPage(ctx, ctx.t.federationFailed, `/sign-in/${interaction.uid}`),
          )
        // The IdP authenticated the person: `ext` (RFC 8176 allows values of its own). The factors
        // the application requires are still asked for: the IdP vouches for the person, not for them.
        return deps.finishing.completeLogin(request, reply, ctx, interaction, {
          accountId: result.accountId,
          amr: ['ext'],
          proven: [],
        })
      })
    },
  }
}
