import type { FastifyReply, FastifyRequest } from 'fastify'
import type { Interaction } from 'oidc-provider'
import { CSRF_COOKIE, CSRF_FIELD, cookieOf, csrfField } from '../../../web/csrf.ts'
import {
  type PageContext,
  pageContext,
  pageHeaders,
  renderErrorPage,
  withPanel,
} from '../../../web/layout.ts'
import { PARTNER_REALM, TEAM_REALM, tenantRealm } from '../../accounts/account-service.ts'
import {
  isServiceClient,
  PARTNER_PORTAL_CLIENT_ID,
  type TenantClient,
  tenantOfResource,
} from '../../oidc/oidc-provider.ts'
import type { SecondFactor, Step } from '../authorization-gate.ts'
import type { SignInKind } from '../sign-in-events.ts'
import type { SignInDeps } from '../sign-in-types.ts'

/*
 * Shared by every step: reading the interaction a page belongs to (and the sign-in kept in it),
 * whose sign-in it is, and answering with a page.
 */

/** A posted form (the pages' surface parses only url-encoded forms). */
export type Form = Record<string, string>

/**
 * Kept in the interaction (server side, bound to the browser's interaction cookie) between the
 * password and the last factor: the steps still to pass, what has been passed, and for SMS
 * enrolment the number a code was sent to.
 */
export interface PendingLogin {
  accountId: string
  steps: Step[]
  amr: string[]
  /** The second factors proven in this interaction (recorded on the session when it ends). */
  proven: SecondFactor[]
  /** A remembered login asked for more (step-up), not a new sign-in. */
  stepUp?: boolean
  phone?: string
  /** Every factor passed; an access request waits for a team member's decision. */
  approvalRequestId?: string
}

/** Who has proven who they are, before the gate has had its say. */
export type ProvenLogin = Pick<PendingLogin, 'accountId' | 'amr' | 'proven' | 'stepUp'>

/** The interaction, its application (none for the console) and the page context, as most routes start. */
export interface OpenedInteraction {
  interaction: Interaction
  client: TenantClient | undefined
  ctx: PageContext
}

const UID = /^[A-Za-z0-9_-]{1,64}$/

export const pendingOf = (interaction: Interaction): PendingLogin | undefined => {
  const pending = (interaction.result as { pendingLogin?: PendingLogin } | undefined)?.pendingLogin
  return pending && typeof pending.accountId === 'string' && Array.isArray(pending.steps)
    ? pending
    : undefined
}

/** The console's sign-in is for a tenant named by the resource; an application's, for its own tenant. */
export const tenantOf = (interaction: Interaction, app: TenantClient | undefined): string | undefined => {
  if (app) return app.tenantId
  const resource = interaction.params['resource']
  return typeof resource === 'string' ? tenantOfResource(resource) : undefined
}

const isPartnerPortal = (interaction: Interaction) =>
  interaction.params['client_id'] === PARTNER_PORTAL_CLIENT_ID

/** Whose accounts sign in here: the application's tenant's, the partners', or the team's (the console). */
export const realmOf = (interaction: Interaction, app: TenantClient | undefined): string =>
  app ? tenantRealm(app.tenantId) : isPartnerPortal(interaction) ? PARTNER_REALM : TEAM_REALM

/** Whose sign-in this is, for the records. */
export const kindOf = (interaction: Interaction, app: TenantClient | undefined): SignInKind =>
  app ? 'enduser' : isPartnerPortal(interaction) ? 'partner' : 'member'

/** Back to the interaction's page, which shows wherever it now is (a form answered out of turn). */
export const backToStep = (reply: FastifyReply, interaction: Interaction) =>
  reply.redirect(`/sign-in/${interaction.uid}`, 303)

/** The page of a step the interaction is at (current-step.ts shows it on GET /sign-in/:uid). */
export type ShowStep = (
  request: FastifyRequest,
  reply: FastifyReply,
  ctx: PageContext,
  interaction: Interaction,
  client: TenantClient | undefined,
) => Promise<unknown>

export type InteractionKitDeps = Pick<SignInDeps, 'oidc' | 'clients' | 'csrf' | 'pageSettings' | 'branding'>
export type InteractionKit = ReturnType<typeof interactionKit>

/**
 * Every answer is a full HTML page under the sign-in CSP; every form carries a CSRF token bound
 * to its purpose and interaction, so a token of one form or sign-in is not one for another.
 */
export function interactionKit(deps: InteractionKitDeps) {
  const send = (reply: FastifyReply, status: number, html: string) =>
    reply.code(status).headers(pageHeaders(deps.pageSettings)).send(html)

  const csrfFor = (request: FastifyRequest, reply: FastifyReply, purpose: string) =>
    csrfField(deps.csrf, request, reply, purpose)

  function contextOf(request: FastifyRequest, interaction?: Interaction): PageContext {
    const uiLocales =
      typeof interaction?.params['ui_locales'] === 'string' ? interaction.params['ui_locales'] : undefined
    return pageContext(uiLocales, request.headers['accept-language'])
  }

  /** The page context with the login panel: the application's for the locale, the tenant's, the defaults. */
  async function brandedContextOf(
    request: FastifyRequest,
    interaction: Interaction,
    app: TenantClient | undefined,
  ): Promise<PageContext> {
    const ctx = contextOf(request, interaction)
    const tenantId = tenantOf(interaction, app)
    const tenantPanel = tenantId ? await deps.branding?.panelOf(tenantId) : undefined
    return withPanel(ctx, app, tenantPanel)
  }

  /** The interaction this browser is in; undefined (and an error page sent) when it has none or another. */
  async function interactionOf(
    request: FastifyRequest,
    reply: FastifyReply,
  ): Promise<Interaction | undefined> {
    const uid = (request.params as { uid: string }).uid
    if (!UID.test(uid)) {
      send(reply, 400, renderErrorPage(contextOf(request), 'The sign-in link is malformed.'))
      return undefined
    }
    const provider = await deps.oidc.provider()
    try {
      const interaction = await provider.interactionDetails(request.raw, reply.raw)
      if (interaction.uid !== uid) throw new Error('interaction mismatch')
      return interaction
    } catch {
      send(
        reply,
        400,
        renderErrorPage(
          contextOf(request),
          'This sign-in has expired or belongs to another browser. Start again from the application.',
        ),
      )
      return undefined
    }
  }

  /** The tenant application the interaction is for; undefined for the console. */
  const applicationOf = async (interaction: Interaction): Promise<TenantClient | undefined> => {
    const clientId = String(interaction.params['client_id'] ?? '')
    return isServiceClient(clientId) ? undefined : deps.clients.clientOf(clientId)
  }

  /** The interaction, its application and the branded page context; undefined when a page was sent. */
  async function open(request: FastifyRequest, reply: FastifyReply): Promise<OpenedInteraction | undefined> {
    const interaction = await interactionOf(request, reply)
    if (!interaction) return undefined
    const client = await applicationOf(interaction)
    return { interaction, client, ctx: await brandedContextOf(request, interaction, client) }
  }

  /** The interaction's expiry stays the provider's: the pending login lives exactly as long. */
  async function savePending(interaction: Interaction, pending: PendingLogin): Promise<void> {
    interaction.result = { pendingLogin: pending } as never
    await interaction.save(Math.max(1, interaction.exp - Math.floor(Date.now() / 1000)))
  }

  /** The CSRF check of a form of this interaction; an error page (and false) when it fails. */
  function formChecked(
    request: FastifyRequest,
    reply: FastifyReply,
    ctx: PageContext,
    purpose: string,
    uid: string,
  ): boolean {
    if (
      deps.csrf.check(cookieOf(request, CSRF_COOKIE), `${purpose}:${uid}`, (request.body as Form)[CSRF_FIELD])
    )
      return true
    send(reply, 403, renderErrorPage(ctx, 'The form expired. Go back and try again.', `/sign-in/${uid}`))
    return false
  }

  return { send, csrfFor, contextOf, interactionOf, applicationOf, open, savePending, formChecked }
}
