import type { FastifyReply, FastifyRequest } from 'fastify'
import type { Interaction } from 'oidc-provider'
import { type PageContext, renderErrorPage } from '../../../web/layout.ts'
import {
  authorizationTarget,
  type OidcRuntime,
  type ProvenFactors,
  type TenantClient,
} from '../../oidc/oidc-provider.ts'
import type { GateDecision } from '../authorization-gate.ts'
import type { SignInFailure } from '../sign-in-events.ts'
import type { SignInDeps } from '../sign-in-types.ts'
import { renderApprovalPage, renderContinuePage, renderRefusalPage } from '../views/outcome-views.ts'
import {
  backToStep,
  type InteractionKit,
  kindOf,
  type PendingLogin,
  type ProvenLogin,
  tenantOf,
} from './interaction.ts'

/*
 * Shared by every step: ending the sign-in. Whatever proved the person (a password, an external
 * IdP, a factor, a remembered login, an approval), the same gate decides what comes next.
 */

type InteractionResult = Parameters<Awaited<ReturnType<OidcRuntime['provider']>>['interactionResult']>[2]

/** Sends the code the pending login's current step asks for (e-mail, SMS); the others send none. */
export type SendCode = (pending: PendingLogin) => Promise<'queued' | 'rate_limited' | 'none'>

export interface FinishDeps extends Pick<SignInDeps, 'oidc' | 'clients' | 'gate' | 'signIns'> {
  kit: Pick<InteractionKit, 'send' | 'applicationOf' | 'savePending'>
  sendCode: SendCode
}

export type SignInFinish = ReturnType<typeof signInFinish>

/** `mfa` joins the methods when more than one was used (RFC 8176). */
const amrOf = (methods: string[]): string[] => {
  const used = [...new Set(methods.filter((method) => method !== 'mfa'))]
  return used.length > 1 ? [...used, 'mfa'] : used
}

export function signInFinish(deps: FinishDeps) {
  const { kit } = deps

  /** Records a sign-in's end (success or refusal): audited in its tenant, counted in /metrics. */
  async function recordSignIn(
    request: FastifyRequest,
    interaction: Interaction,
    app: TenantClient | undefined,
    event: {
      accountId: string | undefined
      methods: string[]
      stepUp?: boolean | undefined
      reason?: SignInFailure | undefined
    },
  ) {
    await deps.signIns.record({
      kind: kindOf(interaction, app),
      clientId: String(interaction.params['client_id'] ?? ''),
      tenantId: tenantOf(interaction, app),
      applicationId: app?.applicationId,
      accountId: event.accountId,
      outcome: event.reason ? 'failure' : 'success',
      ...(event.reason ? { reason: event.reason } : {}),
      methods: event.methods,
      stepUp: event.stepUp ?? false,
      ip: request.ip,
    })
  }

  /** Ends the interaction with a result; the page moves on to where the provider sends the browser. */
  async function finish(
    request: FastifyRequest,
    reply: FastifyReply,
    ctx: PageContext,
    result: InteractionResult,
  ) {
    const provider = await deps.oidc.provider()
    const next = await provider.interactionResult(request.raw, reply.raw, result, {
      mergeWithLastSubmission: false,
    })
    return kit.send(reply, 200, renderContinuePage(ctx, next))
  }

  /**
   * A refusal the person must read: the page says so, and its link returns to the client with
   * the OpenID error `access_denied` (the interaction is finished with it now).
   */
  async function refuse(
    request: FastifyRequest,
    reply: FastifyReply,
    ctx: PageContext,
    message: string,
    description: string,
  ) {
    const provider = await deps.oidc.provider()
    const next = await provider.interactionResult(
      request.raw,
      reply.raw,
      { error: 'access_denied', error_description: description },
      { mergeWithLastSubmission: false },
    )
    return kit.send(reply, 403, renderRefusalPage(ctx, message, next))
  }

  /** What the person sees of a refusal: a page for a policy or the partner programme, else back to the client. */
  function refusal(
    request: FastifyRequest,
    reply: FastifyReply,
    ctx: PageContext,
    decision: Extract<GateDecision, { outcome: 'deny' }>,
  ) {
    switch (decision.reason) {
      case 'access_policy':
        return refuse(request, reply, ctx, ctx.t.accessDenied, 'Access denied by an access policy')
      case 'partner_pending':
        return refuse(request, reply, ctx, ctx.t.partnerPending, 'The partner account awaits approval')
      case 'partner_refused':
        return refuse(request, reply, ctx, ctx.t.partnerRefused, 'The account may not use the partner portal')
      case 'not_member':
        return finish(request, reply, ctx, {
          error: 'access_denied',
          error_description: 'The account is not a member of this tenant',
        })
      default:
        return finish(request, reply, ctx, {
          error: 'access_denied',
          error_description: 'The account may not sign in to this application',
        })
    }
  }

  /** Waiting for a team member's decision on the access request a policy opened. */
  const awaitApproval = (reply: FastifyReply, ctx: PageContext, uid: string) =>
    kit.send(reply, 200, renderApprovalPage(ctx, uid))

  /**
   * A person has proven who they are (a password, an external IdP, the factors so far, or a
   * remembered login): the gate says what this authorization still needs (docs/identity.md
   * "What every authorization checks"). Missing factors are asked for next (their code sent);
   * a refusal is said on a page or sent back to the client; an access request waits; else the
   * login ends with every factor proven here, which the provider's check records on the session.
   */
  async function completeLogin(
    request: FastifyRequest,
    reply: FastifyReply,
    ctx: PageContext,
    interaction: Interaction,
    login: ProvenLogin,
  ) {
    const app = await kit.applicationOf(interaction)
    const clientId = String(interaction.params['client_id'] ?? '')
    const target = await authorizationTarget(deps.clients, clientId, interaction.params['resource'])
    if (!target) return kit.send(reply, 400, renderErrorPage(ctx, 'This application is not known.'))
    // Factors this browser's session proved earlier count only for the same account.
    const sessionUid =
      interaction.session?.accountId === login.accountId ? interaction.session.uid : undefined
    const satisfied = new Set([
      ...(await deps.gate.satisfiedBy(sessionUid, login.accountId)),
      ...login.proven,
    ])
    const decision = await deps.gate.decide({
      target,
      accountId: login.accountId,
      satisfied,
      ip: request.ip,
      purpose: 'authorization',
    })
    const pending: PendingLogin = { ...login, steps: [] }
    if (decision.outcome === 'step-up') {
      pending.steps = decision.steps
      await deps.sendCode(pending)
      await kit.savePending(interaction, pending)
      return backToStep(reply, interaction)
    }
    if (decision.outcome === 'pending') {
      await kit.savePending(interaction, { ...pending, approvalRequestId: decision.requestId })
      return awaitApproval(reply, ctx, interaction.uid)
    }
    const amr = amrOf(login.amr)
    if (decision.outcome === 'deny') {
      await recordSignIn(request, interaction, app, {
        accountId: login.accountId,
        methods: amr,
        stepUp: login.stepUp,
        reason: decision.reason === 'factor_missing' ? 'account_unavailable' : decision.reason,
      })
      return refusal(request, reply, ctx, decision)
    }
    await recordSignIn(request, interaction, app, {
      accountId: login.accountId,
      methods: amr,
      stepUp: login.stepUp,
    })
    const proven: ProvenFactors = { kmsProven: [...new Set(login.proven)] }
    return finish(request, reply, ctx, {
      login: { accountId: login.accountId, amr, remember: true },
      ...proven,
    })
  }

  /** Moves to the next step (sending its code), or ends the sign-in when none is left. */
  async function advance(
    request: FastifyRequest,
    reply: FastifyReply,
    ctx: PageContext,
    interaction: Interaction,
    pending: PendingLogin,
  ) {
    if (pending.steps.length === 0) return completeLogin(request, reply, ctx, interaction, pending)
    await deps.sendCode(pending)
    await kit.savePending(interaction, pending)
    return backToStep(reply, interaction)
  }

  return { recordSignIn, finish, refuse, awaitApproval, completeLogin, advance }
}
