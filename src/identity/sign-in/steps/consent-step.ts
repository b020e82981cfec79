import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import type { Interaction } from 'oidc-provider'
import { renderErrorPage } from '../../../web/layout.ts'
import {
  CLI_CONFIRMATION_REASON,
  type CliConfirmation,
  isServiceClient,
  tenantOfResource,
} from '../../oidc/oidc-provider.ts'
import type { SignInDeps } from '../sign-in-types.ts'
import { renderCliConfirmationPage } from '../views/cli-confirmation-view.ts'
import { renderConsentPage } from '../views/consent-view.ts'
import type { SignInFinish } from './finish.ts'
import { backToStep, type Form, type InteractionKit, type ShowStep } from './interaction.ts'

export interface ConsentStepDeps extends Pick<SignInDeps, 'oidc' | 'tenants' | 'memberships'> {
  kit: Pick<InteractionKit, 'interactionOf' | 'contextOf' | 'send' | 'csrfFor' | 'formChecked'>
  finishing: Pick<SignInFinish, 'finish'>
}

export type ConsentStep = ReturnType<typeof consentStep>

/** The command line's authorization-code sign-in, which the person confirms every time (oidc-provider.ts). */
const isCliConfirmation = (interaction: Interaction) =>
  interaction.prompt.reasons.includes(CLI_CONFIRMATION_REASON)

/**
 * The provider's consent prompt, after the login: the console and the tenant's own applications
 * are first-party and get what they asked for; a third-party client's scopes are put to the person;
 * the command line's loopback sign-in is put to the person as well (who asks, for which tenant,
 * where the code goes), even with a live session.
 */
export function consentStep(deps: ConsentStepDeps) {
  const { kit } = deps

  /** "Name (id)" of the tenant the sign-in is for; the id alone to someone not a member of it. */
  async function tenantLabel(interaction: Interaction): Promise<string> {
    const resource = interaction.params['resource']
    const tenantId = typeof resource === 'string' ? tenantOfResource(resource) : undefined
    if (!tenantId) return String(resource ?? '')
    const accountId = interaction.session?.accountId
    const member = accountId !== undefined && (await deps.memberships.roleOf(tenantId, accountId))
    const tenant = member ? await deps.tenants.get(tenantId) : undefined
    return tenant ? `${tenant.name} (${tenantId})` : tenantId
  }

  /** Where the code would go: the loopback redirect and its port (the provider accepts any port). */
  function loopbackOf(interaction: Interaction): { address: string; port: string } {
    const address = String(interaction.params['redirect_uri'] ?? '')
    let port = ''
    try {
      const url = new URL(address)
      port = url.port || (url.protocol === 'https:' ? '443' : '80')
    } catch {
      // The provider validated the redirect before the interaction began; shown as it is.
    }
    return { address, port }
  }

  /** Grants what the client asked for (the person agreed, or the client is first-party). */
  async function grantConsent(interaction: Interaction): Promise<{ consent: { grantId: string } }> {
    const provider = await deps.oidc.provider()
    const accountId = interaction.session?.accountId
    if (!accountId) throw new Error('consent without a signed-in account')
    const clientId = String(interaction.params['client_id'])
    const grant = interaction.grantId
      ? ((await provider.Grant.find(interaction.grantId)) ?? new provider.Grant({ accountId, clientId }))
      : new provider.Grant({ accountId, clientId })
    const details = interaction.prompt.details as {
      missingOIDCScope?: string[]
      missingOIDCClaims?: string[]
      missingResourceScopes?: Record<string, string[]>
    }
    if (details.missingOIDCScope) grant.addOIDCScope(details.missingOIDCScope.join(' '))
    if (details.missingOIDCClaims) grant.addOIDCClaims(details.missingOIDCClaims)
    for (const [indicator, scopes] of Object.entries(details.missingResourceScopes ?? {}))
      grant.addResourceScope(indicator, scopes.join(' '))
    return { consent: { grantId: await grant.save() } }
  }

  /** What both consent pages show and post: the interaction, its form token and the client's name. */
  async function pageBasics(request: FastifyRequest, reply: FastifyReply, interaction: Interaction) {
    const provider = await deps.oidc.provider()
    const found = await provider.Client.find(String(interaction.params['client_id']))
    return {
      uid: interaction.uid,
      csrf: kit.csrfFor(request, reply, `consent:${interaction.uid}`),
      clientName: found?.clientName ?? String(interaction.params['client_id']),
    }
  }

  return {
    /** The interaction's page while the provider's prompt is consent. */
    show: (async (request, reply, ctx, interaction, client) => {
      if (isCliConfirmation(interaction)) {
        return kit.send(
          reply,
          200,
          renderCliConfirmationPage(ctx, {
            ...(await pageBasics(request, reply, interaction)),
            tenant: await tenantLabel(interaction),
            ...loopbackOf(interaction),
          }),
        )
      }
      if (isServiceClient(interaction.params['client_id']) || client) {
        // Answering a GET, the redirect chain is not a form's: no page in between is needed.
        const provider = await deps.oidc.provider()
        const next = await provider.interactionResult(
          request.raw,
          reply.raw,
          await grantConsent(interaction),
          {
            mergeWithLastSubmission: true,
          },
        )
        return reply.redirect(next, 303)
      }
      return kit.send(
        reply,
        200,
        renderConsentPage(ctx, {
          ...(await pageBasics(request, reply, interaction)),
          scopes: String(interaction.params['scope'] ?? '')
            .split(' ')
            .filter(Boolean),
        }),
      )
    }) satisfies ShowStep,

    routes(app: FastifyInstance) {
      app.post('/sign-in/:uid/consent', async (request, reply) => {
        const interaction = await kit.interactionOf(request, reply)
        if (!interaction) return reply
        const ctx = kit.contextOf(request, interaction)
        if (!kit.formChecked(request, reply, ctx, 'consent', interaction.uid)) return reply
        if (interaction.prompt.name !== 'consent') return backToStep(reply, interaction)
        const decision = (request.body as Form)['decision']
        if (decision === 'allow') {
          const confirmed: CliConfirmation = isCliConfirmation(interaction) ? { kmsCliConfirmed: true } : {}
          return deps.finishing.finish(request, reply, ctx, {
            ...(await grantConsent(interaction)),
            ...confirmed,
          })
        }
        if (decision === 'deny')
          return deps.finishing.finish(request, reply, ctx, {
            error: 'access_denied',
            error_description: 'The user denied access',
          })
        return kit.send(
          reply,
          400,
          renderErrorPage(ctx, 'decision must be allow or deny', `/sign-in/${interaction.uid}`),
        )
      })
    },
  }
}
