import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import type { Interaction } from 'oidc-provider'
import type { LoginPanel } from '../../branding/login-panel.ts'
import { isUuid } from '../../platform/ids.ts'
import { CSRF_COOKIE, CSRF_FIELD, type Csrf, cookieOf, csrfField } from '../../web/csrf.ts'
import {
  esc,
  fill,
  type PageContext,
  type PageSettings,
  pageContext,
  pageHeaders,
  renderErrorPage,
  renderPage,
  withPanel,
} from '../../web/layout.ts'
import {
  type AccountService,
  isPlausibleEmail,
  normalizeEmail,
  PARTNER_REALM,
  TEAM_REALM,
  tenantRealm,
} from '../accounts/account-service.ts'
import type { OneTimeCodes } from '../accounts/one-time-codes.ts'
import {
  authorizationTarget,
  type ClientDirectory,
  GATE_REASON,
  isServiceClient,
  type OidcRuntime,
  PARTNER_PORTAL_CLIENT_ID,
  type ProvenFactors,
  type TenantClient,
  tenantOfResource,
} from '../oidc/oidc-provider.ts'
import {
  type AuthorizationGate,
  factorOfStep,
  type GateDecision,
  type SecondFactor,
  STEPS,
  type Step,
} from './authorization-gate.ts'
import type { SignInEvents, SignInFailure, SignInKind } from './sign-in-events.ts'

/** The tenant's login panel (src/settings), the fallback of applications that set none. */
export interface TenantBranding {
  panelOf(tenantId: string): Promise<LoginPanel>
}

/** What the sign-in pages need of the end-users module (joining an application's list is the gate's). */
export interface EndUserSignIns {
  /** Sign-up: the same outcome on the page whether the address is new, known or blocked. */
  signUp(input: { tenantId: string; applicationId: string; email: string; clientIp: string }): Promise<void>
  /** Sign-up's bound per client address (429 page), asked before `signUp`. */
  admitSignUp(clientIp: string): Promise<{ admitted: true } | { admitted: false; retryAfterSeconds: number }>
}

/**
 * Access policies (src/access-policies): the gate decides; the waiting page reads the access
 * request a policy opened, until a team member decides.
 */
export interface SignInAccessPolicy {
  requestFor(
    tenantId: string,
    requestId: string,
    accountId: string,
  ): Promise<{ status: 'pending' | 'approved' | 'rejected' | 'expired' } | undefined>
}

/** External identity providers (src/federation) an application's sign-in page offers. */
export interface SignInFederation {
  providersFor(tenantId: string, applicationId: string): Promise<Array<{ id: string; name: string }>>
  /** The IdP's URL carrying a new AuthnRequest bound to this sign-in; undefined: not offered here. */
  startUrl(input: {
    idpId: string
    tenantId: string
    applicationId: string
    interactionUid: string
  }): Promise<string | undefined>
  /** The account an accepted response signed in, taken once by the sign-in that asked. */
  takeResult(requestId: string, interactionUid: string): Promise<{ accountId: string } | undefined>
}

export interface SignInDeps {
  oidc: OidcRuntime
  clients: ClientDirectory
  endUsers: EndUserSignIns
  accounts: AccountService
  codes: OneTimeCodes
  csrf: Csrf
  pageSettings: PageSettings
  /** What every authorization checks (src/identity/sign-in/authorization-gate.ts). */
  gate: AuthorizationGate
  signIns: SignInEvents
  branding?: TenantBranding
  accessPolicy?: SignInAccessPolicy
  federation?: SignInFederation
  /** The name shown in authenticator apps. */
  issuerName: string
}

/**
 * Kept in the interaction (server side, bound to the browser's interaction cookie) between the
 * password and the last factor: the steps still to pass, what has been passed, and for SMS
 * enrolment the number a code was sent to.
 */
interface PendingLogin {
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

const E164 = /^\+[1-9][0-9]{6,14}$/
/** Enough of an address or number to recognise it, not to learn it. */
const mask = (destination: string) =>
  destination.includes('@')
    ? destination.replace(/^(.)[^@]*(@.*)$/, '$1•••$2')
    : `${destination.slice(0, 3)}•••${destination.slice(-2)}`

type Form = Record<string, string>
const UID = /^[A-Za-z0-9_-]{1,64}$/

/**
 * The provider's interaction pages: password, then TOTP (challenge, or enrolment when the tenant
 * requires it), consent for third-party clients (skipped for the console). Every answer is a full
 * HTML page under the sign-in CSP; every form carries a CSRF token; a wrong address and a wrong
 * password read the same.
 */
export function signInRoutes(deps: SignInDeps) {
  const { oidc, accounts, csrf } = deps

  const send = (reply: FastifyReply, status: number, html: string) =>
    reply.code(status).headers(pageHeaders(deps.pageSettings)).send(html)

  const csrfFor = (request: FastifyRequest, reply: FastifyReply, purpose: string) =>
    csrfField(csrf, request, reply, purpose)

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
    const provider = await oidc.provider()
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

  const pendingOf = (interaction: Interaction): PendingLogin | undefined => {
    const pending = (interaction.result as { pendingLogin?: PendingLogin } | undefined)?.pendingLogin
    return pending && typeof pending.accountId === 'string' && Array.isArray(pending.steps)
      ? pending
      : undefined
  }

  async function savePending(interaction: Interaction, pending: PendingLogin): Promise<void> {
    interaction.result = { pendingLogin: pending } as never
    await interaction.save(Math.max(1, interaction.exp - Math.floor(Date.now() / 1000)))
  }

  /** The console's sign-in is for a tenant named by the resource; an application's, for its own tenant. */
  const tenantOf = (interaction: Interaction, app: TenantClient | undefined): string | undefined => {
    if (app) return app.tenantId
    const resource = interaction.params['resource']
    return typeof resource === 'string' ? tenantOfResource(resource) : undefined
  }

  /** The tenant application the interaction is for; undefined for the console. */
  const applicationOf = async (interaction: Interaction): Promise<TenantClient | undefined> => {
    const clientId = String(interaction.params['client_id'] ?? '')
    return isServiceClient(clientId) ? undefined : deps.clients.clientOf(clientId)
  }

  const isPartnerPortal = (interaction: Interaction) =>
    interaction.params['client_id'] === PARTNER_PORTAL_CLIENT_ID

  /** Whose accounts sign in here: the application's tenant's, the partners', or the team's (the console). */
  const realmOf = (interaction: Interaction, app: TenantClient | undefined): string =>
    app ? tenantRealm(app.tenantId) : isPartnerPortal(interaction) ? PARTNER_REALM : TEAM_REALM

  /** Whose sign-in this is, for the records. */
  const kindOf = (interaction: Interaction, app: TenantClient | undefined): SignInKind =>
    app ? 'enduser' : isPartnerPortal(interaction) ? 'partner' : 'member'

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

  /**
   * The provider's next URL after a result, shown as a page that moves on by itself: a redirect
   * answering the form would make the browser apply `form-action 'self'` to the whole redirect
   * chain, which ends at the client's (other) origin.
   */
  async function finish(
    request: FastifyRequest,
    reply: FastifyReply,
    ctx: PageContext,
    result: Parameters<Awaited<ReturnType<OidcRuntime['provider']>>['interactionResult']>[2],
  ) {
    const provider = await oidc.provider()
    const next = await provider.interactionResult(request.raw, reply.raw, result, {
      mergeWithLastSubmission: false,
    })
    const body = `<p>${esc(ctx.t.continuing)}</p><p><a class="link" href="${esc(next)}">${esc(ctx.t.continue)}</a></p>`
    return send(reply, 200, renderPage(ctx, { title: ctx.t.signInTitle, body, refreshTo: next }))
  }

  const alertOf = (error: string | undefined) =>
    error ? `<p class="error" role="alert">${esc(error)}</p>` : ''

  function passwordPage(
    request: FastifyRequest,
    reply: FastifyReply,
    ctx: PageContext,
    uid: string,
    status: number,
    error?: string,
    email = '',
    forgotLink?: string,
    signUp = false,
    providers: Array<{ id: string; name: string }> = [],
  ) {
    const federated = providers
      .map(
        (idp) =>
          `<p><a class="button secondary" href="/sign-in/${esc(uid)}/federated/${esc(idp.id)}">${esc(ctx.t.signInWith.replace('{name}', idp.name))}</a></p>`,
      )
      .join('')
    const forgot = forgotLink
      ? `<p><a class="link" href="${esc(forgotLink)}">${esc(ctx.t.forgotPassword)}</a></p>`
      : ''
    const create = signUp
      ? `<p><a class="link" href="/sign-in/${esc(uid)}/sign-up">${esc(ctx.t.createAccount)}</a></p>`
      : ''
    const body = `${alertOf(error)}<form method="post" action="/sign-in/${esc(uid)}/password" autocomplete="on">
${csrfFor(request, reply, `sign-in:${uid}`)}
<label for="email">${esc(ctx.t.email)}</label>
<input id="email" name="email" type="email" autocomplete="username" required maxlength="254" value="${esc(email)}">
<label for="password">${esc(ctx.t.password)}</label>
<input id="password" name="password" type="password" autocomplete="current-password" required maxlength="256">
<button type="submit">${esc(ctx.t.signIn)}</button>
</form>${forgot}${create}${federated}`
    return send(reply, status, renderPage(ctx, { title: ctx.t.signInTitle, body }))
  }

  const codeField = (ctx: PageContext) => `<label for="code">${esc(ctx.t.code)}</label>
<input id="code" name="code" type="text" inputmode="numeric" autocomplete="one-time-code" pattern="[0-9]{6}" maxlength="6" required>
<button type="submit">${esc(ctx.t.verify)}</button>`

  /** The page of the current step. */
  async function stepPage(
    request: FastifyRequest,
    reply: FastifyReply,
    ctx: PageContext,
    uid: string,
    pending: PendingLogin,
    status: number,
    error?: string,
  ) {
    const step = pending.steps[0]!
    // A remembered login asked for more: say why the page appears although the person is signed in.
    const notice = pending.stepUp ? `<p role="status" id="step-up">${esc(ctx.t.stepUp)}</p>` : ''
    const form = (prompt: string, fields: string) =>
      `${alertOf(error)}${notice}<p>${prompt}</p><form method="post" action="/sign-in/${esc(uid)}/${step}">
${csrfFor(request, reply, `${step}:${uid}`)}
${fields}
</form>`
    const resend = `<form method="post" action="/sign-in/${esc(uid)}/resend">
${csrfFor(request, reply, `resend:${uid}`)}
<button type="submit" class="secondary">${esc(ctx.t.resendCode)}</button>
</form>`
    if (step === 'totp')
      return send(
        reply,
        status,
        renderPage(ctx, { title: ctx.t.totpTitle, body: form(esc(ctx.t.totpPrompt), codeField(ctx)) }),
      )
    if (step === 'totp-enrol') {
      const { secret, uri } = await accounts.beginTotpEnrolment(pending.accountId, deps.issuerName)
      const prompt = `${esc(ctx.t.enrolPrompt)}</p>
<p>${esc(ctx.t.secretKey)}:</p><p class="secret" id="totp-secret">${esc(secret)}</p>
<p><a class="link" href="${esc(uri)}">${esc(ctx.t.openInApp)}</a>`
      return send(
        reply,
        status,
        renderPage(ctx, { title: ctx.t.enrolTitle, body: form(prompt, codeField(ctx)) }),
      )
    }
    if (step === 'sms-enrol' && !pending.phone) {
      const fields = `<label for="phone">${esc(ctx.t.phoneNumber)}</label>
<input id="phone" name="phone" type="tel" autocomplete="tel" required maxlength="16" placeholder="+14155550100">
<button type="submit">${esc(ctx.t.sendCode)}</button>`
      return send(
        reply,
        status,
        renderPage(ctx, { title: ctx.t.smsEnrolTitle, body: form(esc(ctx.t.smsEnrolPrompt), fields) }),
      )
    }
    const account = await accounts.get(pending.accountId)
    const destination =
      step === 'email-otp'
        ? (account?.email ?? '')
        : step === 'sms-otp'
          ? (account?.phoneNumber ?? '')
          : (pending.phone ?? '')
    const prompt = fill(step === 'email-otp' ? ctx.t.emailCodePrompt : ctx.t.smsCodePrompt, {
      destination: mask(destination),
    })
    const title = step === 'email-otp' ? ctx.t.emailCodeTitle : ctx.t.smsCodeTitle
    return send(reply, status, renderPage(ctx, { title, body: `${form(prompt, codeField(ctx))}${resend}` }))
  }

  /** Sends the code of the current step when it is an e-mail or SMS code. */
  async function sendCode(pending: PendingLogin): Promise<'queued' | 'rate_limited' | 'none'> {
    const step = pending.steps[0]
    if (step === 'email-otp') {
      const account = await accounts.get(pending.accountId)
      if (!account) return 'none'
      return deps.codes.send({ accountId: account.id, channel: 'email', destination: account.email })
    }
    if (step === 'sms-otp' || (step === 'sms-enrol' && pending.phone)) {
      const phone = step === 'sms-otp' ? (await accounts.get(pending.accountId))?.phoneNumber : pending.phone
      if (!phone) return 'none'
      return deps.codes.send({ accountId: pending.accountId, channel: 'sms', destination: phone })
    }
    return 'none'
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
    await sendCode(pending)
    await savePending(interaction, pending)
    return reply.redirect(`/sign-in/${interaction.uid}`, 303)
  }

  async function consentPage(
    request: FastifyRequest,
    reply: FastifyReply,
    ctx: PageContext,
    interaction: Interaction,
  ) {
    const provider = await oidc.provider()
    const client = await provider.Client.find(String(interaction.params['client_id']))
    const name = client?.clientName ?? String(interaction.params['client_id'])
    const scopes = String(interaction.params['scope'] ?? '')
      .split(' ')
      .filter(Boolean)
    const body = `<p><strong>${esc(name)}</strong> ${esc(ctx.t.consentPrompt)}</p>
<ul>${scopes.map((scope) => `<li>${esc(scope)}</li>`).join('')}</ul>
<form method="post" action="/sign-in/${esc(interaction.uid)}/consent">
${csrfFor(request, reply, `consent:${interaction.uid}`)}
<button type="submit" name="decision" value="allow">${esc(ctx.t.allow)}</button>
<button type="submit" name="decision" value="deny" class="secondary">${esc(ctx.t.deny)}</button>
</form>`
    return send(reply, 200, renderPage(ctx, { title: ctx.t.consentTitle, body }))
  }

  /** Grants what the client asked for (the member agreed, or the client is first-party). */
  async function grantConsent(interaction: Interaction): Promise<{ consent: { grantId: string } }> {
    const provider = await oidc.provider()
    const accountId = interaction.session?.accountId
    if (!accountId) throw new Error('consent without a signed-in account')
    const grant = interaction.grantId
      ? ((await provider.Grant.find(interaction.grantId)) ??
        new provider.Grant({ accountId, clientId: String(interaction.params['client_id']) }))
      : new provider.Grant({ accountId, clientId: String(interaction.params['client_id']) })
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
    login: Pick<PendingLogin, 'accountId' | 'amr' | 'proven' | 'stepUp'>,
  ) {
    const app = await applicationOf(interaction)
    const clientId = String(interaction.params['client_id'] ?? '')
    const target = await authorizationTarget(deps.clients, clientId, interaction.params['resource'])
    if (!target) return send(reply, 400, renderErrorPage(ctx, 'This application is not known.'))
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
      await sendCode(pending)
      await savePending(interaction, pending)
      return reply.redirect(`/sign-in/${interaction.uid}`, 303)
    }
    if (decision.outcome === 'pending') {
      await savePending(interaction, { ...pending, approvalRequestId: decision.requestId })
      return approvalPage(reply, ctx, interaction.uid)
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

  /** `mfa` joins the methods when more than one was used (RFC 8176). */
  const amrOf = (methods: string[]): string[] => {
    const used = [...new Set(methods.filter((method) => method !== 'mfa'))]
    return used.length > 1 ? [...used, 'mfa'] : used
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
    const provider = await oidc.provider()
    const next = await provider.interactionResult(
      request.raw,
      reply.raw,
      { error: 'access_denied', error_description: description },
      { mergeWithLastSubmission: false },
    )
    const body = `<p class="error" role="alert">${esc(message)}</p><p><a class="link" id="return" href="${esc(next)}">${esc(ctx.t.returnToApp)}</a></p>`
    return send(reply, 403, renderPage(ctx, { title: ctx.t.accessDeniedTitle, body }))
  }

  /** Waiting for a decision: the page looks again by itself every 10 seconds. */
  function approvalPage(reply: FastifyReply, ctx: PageContext, uid: string) {
    const body = `<p role="status">${esc(ctx.t.approvalWaiting)}</p><p><a class="link" id="check-again" href="/sign-in/${esc(uid)}">${esc(ctx.t.checkAgain)}</a></p>`
    return send(
      reply,
      200,
      renderPage(ctx, {
        title: ctx.t.approvalTitle,
        body,
        refreshTo: `/sign-in/${uid}`,
        refreshAfterSeconds: 10,
      }),
    )
  }

  /** A sign-in waiting for approval, looked at again: the decision so far. */
  async function approvalCheck(
    request: FastifyRequest,
    reply: FastifyReply,
    ctx: PageContext,
    interaction: Interaction,
    app: TenantClient | undefined,
    pending: PendingLogin & { approvalRequestId: string },
  ) {
    const decided =
      app && (await deps.accessPolicy?.requestFor(app.tenantId, pending.approvalRequestId, pending.accountId))
    const refused = 'Access denied by an access policy'
    if (!decided || decided.status === 'rejected' || decided.status === 'expired') {
      const rejected = decided?.status !== 'expired'
      await recordSignIn(request, interaction, app, {
        accountId: pending.accountId,
        methods: pending.amr,
        reason: rejected ? 'approval_rejected' : 'approval_expired',
      })
      return refuse(request, reply, ctx, rejected ? ctx.t.approvalRejected : ctx.t.approvalExpired, refused)
    }
    if (decided.status === 'pending') return approvalPage(reply, ctx, interaction.uid)
    // Approved: the policies are asked again (they may have changed meanwhile) and find the approval.
    return completeLogin(request, reply, ctx, interaction, pending)
  }

  /**
   * An application's sign-in page offers its end-users a reset; the console's offers the team's
   * members theirs (`realm=team`, account-link-pages.ts). The partner portal's people have none.
   */
  const forgotLinkOf = (app: TenantClient | undefined, interaction: Interaction): string | undefined => {
    const back = `/sign-in/${interaction.uid}`
    if (app)
      return `/forgot-password?${new URLSearchParams({ applicationId: app.applicationId, return: back })}`
    return realmOf(interaction, app) === TEAM_REALM
      ? `/forgot-password?${new URLSearchParams({ realm: TEAM_REALM, return: back })}`
      : undefined
  }

  /** The CSRF check of a form of this interaction; an error page (and false) when it fails. */
  function formChecked(
    request: FastifyRequest,
    reply: FastifyReply,
    ctx: PageContext,
    purpose: string,
    uid: string,
  ): boolean {
    if (csrf.check(cookieOf(request, CSRF_COOKIE), `${purpose}:${uid}`, (request.body as Form)[CSRF_FIELD]))
      return true
    send(reply, 403, renderErrorPage(ctx, 'The form expired. Go back and try again.', `/sign-in/${uid}`))
    return false
  }

  return async (app: FastifyInstance) => {
    app.get('/sign-in/:uid', async (request, reply) => {
      const interaction = await interactionOf(request, reply)
      if (!interaction) return reply
      const client = await applicationOf(interaction)
      const ctx = await brandedContextOf(request, interaction, client)
      if (interaction.prompt.name === 'consent') {
        // The console and the tenant's own applications are first-party: no consent page.
        if (isServiceClient(interaction.params['client_id']) || client) {
          // A GET, so the redirect chain is not a form's.
          const provider = await oidc.provider()
          const next = await provider.interactionResult(
            request.raw,
            reply.raw,
            await grantConsent(interaction),
            { mergeWithLastSubmission: true },
          )
          return reply.redirect(next, 303)
        }
        return consentPage(request, reply, ctx, interaction)
      }
      const pending = pendingOf(interaction)
      if (pending?.approvalRequestId && interaction.prompt.name === 'login')
        return approvalCheck(request, reply, ctx, interaction, client, {
          ...pending,
          approvalRequestId: pending.approvalRequestId,
        })
      if (pending && pending.steps.length > 0)
        return stepPage(request, reply, ctx, interaction.uid, pending, 200)
      // A remembered login this authorization asks more of (a factor, a policy, a membership):
      // no password again, the gate's answer for this session's account.
      const remembered = interaction.session?.accountId
      const reasons = interaction.prompt.reasons
      if (!pending && remembered && reasons.length === 1 && reasons[0] === GATE_REASON)
        return completeLogin(request, reply, ctx, interaction, {
          accountId: remembered,
          amr: interaction.session?.amr ?? [],
          proven: [],
          stepUp: true,
        })
      return passwordPage(
        request,
        reply,
        ctx,
        interaction.uid,
        200,
        undefined,
        '',
        forgotLinkOf(client, interaction),
        client?.signUpEnabled ?? false,
        client ? ((await deps.federation?.providersFor(client.tenantId, client.applicationId)) ?? []) : [],
      )
    })

    // Sign-in through an external identity provider (SAML): to the IdP with a new AuthnRequest.
    app.get('/sign-in/:uid/federated/:idpId', async (request, reply) => {
      const interaction = await interactionOf(request, reply)
      if (!interaction) return reply
      const client = await applicationOf(interaction)
      const ctx = await brandedContextOf(request, interaction, client)
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
        return send(
          reply,
          404,
          renderErrorPage(ctx, 'This page does not exist.', `/sign-in/${interaction.uid}`),
        )
      return reply.redirect(url, 303)
    })

    // Back from the IdP (src/federation's ACS accepted the response): the account it signed in.
    app.get('/sign-in/:uid/federated-return/:requestId', async (request, reply) => {
      const interaction = await interactionOf(request, reply)
      if (!interaction) return reply
      const client = await applicationOf(interaction)
      const ctx = await brandedContextOf(request, interaction, client)
      const { requestId } = request.params as { requestId: string }
      const result =
        client && interaction.prompt.name === 'login' && /^[A-Za-z0-9_-]{1,100}$/.test(requestId)
          ? await deps.federation?.takeResult(requestId, interaction.uid)
          : undefined
      if (!result)
        return send(reply, 400, renderErrorPage(ctx, ctx.t.federationFailed, `/sign-in/${interaction.uid}`))
      // The IdP authenticated the person: `ext` (RFC 8176 allows values of its own). The factors
      // the application requires are still asked for: the IdP vouches for the person, not for them.
      return completeLogin(request, reply, ctx, interaction, {
        accountId: result.accountId,
        amr: ['ext'],
        proven: [],
      })
    })

    // Sign-up, where the application allows it: the address first; the e-mailed link sets the password.
    app.get('/sign-in/:uid/sign-up', async (request, reply) => {
      const interaction = await interactionOf(request, reply)
      if (!interaction) return reply
      const client = await applicationOf(interaction)
      const ctx = await brandedContextOf(request, interaction, client)
      if (!client?.signUpEnabled) return send(reply, 404, renderErrorPage(ctx, 'This page does not exist.'))
      const body = `<p>${esc(ctx.t.signUpPrompt)}</p><form method="post" action="/sign-in/${esc(interaction.uid)}/sign-up">
${csrfFor(request, reply, `sign-up:${interaction.uid}`)}
<label for="email">${esc(ctx.t.email)}</label>
<input id="email" name="email" type="email" autocomplete="email" required maxlength="254">
<button type="submit">${esc(ctx.t.createAccount)}</button>
</form><p><a class="link" href="/sign-in/${esc(interaction.uid)}">${esc(ctx.t.backToSignIn)}</a></p>`
      return send(reply, 200, renderPage(ctx, { title: ctx.t.createAccount, body }))
    })

    app.post('/sign-in/:uid/sign-up', async (request, reply) => {
      const interaction = await interactionOf(request, reply)
      if (!interaction) return reply
      const client = await applicationOf(interaction)
      const ctx = await brandedContextOf(request, interaction, client)
      if (!client?.signUpEnabled) return send(reply, 404, renderErrorPage(ctx, 'This page does not exist.'))
      if (!formChecked(request, reply, ctx, 'sign-up', interaction.uid)) return reply
      const email = ((request.body as Form)['email'] ?? '').trim()
      if (!isPlausibleEmail(normalizeEmail(email)))
        return send(
          reply,
          400,
          renderErrorPage(ctx, ctx.t.emailInvalid, `/sign-in/${interaction.uid}/sign-up`),
        )
      // Each sign-up sends an e-mail: bounded per client address (the same answer for any address).
      const admission = await deps.endUsers.admitSignUp(request.ip)
      if (!admission.admitted)
        return send(
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
      const body = `<p>${esc(ctx.t.signUpSent)}</p><p><a class="link" href="/sign-in/${esc(interaction.uid)}">${esc(ctx.t.backToSignIn)}</a></p>`
      return send(reply, 200, renderPage(ctx, { title: ctx.t.createAccount, body }))
    })

    app.post('/sign-in/:uid/password', async (request, reply) => {
      const interaction = await interactionOf(request, reply)
      if (!interaction) return reply
      const client = await applicationOf(interaction)
      const ctx = await brandedContextOf(request, interaction, client)
      if (!formChecked(request, reply, ctx, 'sign-in', interaction.uid)) return reply
      if (interaction.prompt.name !== 'login') return reply.redirect(`/sign-in/${interaction.uid}`, 303)
      const form = request.body as Form
      const email = form['email'] ?? ''
      const forgot = forgotLinkOf(client, interaction)
      const result = await accounts.signIn({
        realm: realmOf(interaction, client),
        email,
        password: form['password'] ?? '',
        clientIp: request.ip,
      })
      if (result.outcome !== 'ok') {
        const reason = result.outcome === 'invalid' ? 'invalid_credentials' : result.outcome
        await recordSignIn(request, interaction, client, { accountId: undefined, methods: ['pwd'], reason })
      }
      if (result.outcome === 'locked')
        return passwordPage(request, reply, ctx, interaction.uid, 429, ctx.t.locked, email, forgot)
      if (result.outcome === 'invalid')
        return passwordPage(
          request,
          reply,
          ctx,
          interaction.uid,
          401,
          ctx.t.invalidCredentials,
          email,
          forgot,
        )
      if (result.outcome === 'blocked') return send(reply, 403, renderErrorPage(ctx, ctx.t.blocked))
      return completeLogin(request, reply, ctx, interaction, {
        accountId: result.account.id,
        amr: ['pwd'],
        proven: [],
      })
    })

    for (const step of STEPS) {
      app.post(`/sign-in/:uid/${step}`, async (request, reply) => {
        const interaction = await interactionOf(request, reply)
        if (!interaction) return reply
        const ctx = await brandedContextOf(request, interaction, await applicationOf(interaction))
        if (!formChecked(request, reply, ctx, step, interaction.uid)) return reply
        const pending = pendingOf(interaction)
        if (!pending || pending.steps[0] !== step) return reply.redirect(`/sign-in/${interaction.uid}`, 303)
        const form = request.body as Form
        // SMS enrolment, first half: the number, to which a code is sent.
        if (step === 'sms-enrol' && !pending.phone) {
          const phone = (form['phone'] ?? '').replace(/[\s()-]/g, '').slice(0, 32)
          if (!E164.test(phone))
            return stepPage(request, reply, ctx, interaction.uid, pending, 400, ctx.t.phoneInvalid)
          pending.phone = phone
          if ((await sendCode(pending)) === 'rate_limited')
            return stepPage(request, reply, ctx, interaction.uid, pending, 429, ctx.t.tooManyCodes)
          await savePending(interaction, pending)
          return reply.redirect(`/sign-in/${interaction.uid}`, 303)
        }
        const code = (form['code'] ?? '').trim().slice(0, 16)
        const check =
          step === 'totp'
            ? await accounts.verifyTotp(pending.accountId, code, request.ip)
            : step === 'totp-enrol'
              ? await accounts.confirmTotpEnrolment(pending.accountId, code, request.ip)
              : await deps.codes.verify({
                  accountId: pending.accountId,
                  channel: step === 'email-otp' ? 'email' : 'sms',
                  code,
                })
        if (check !== 'ok') {
          await recordSignIn(request, interaction, await applicationOf(interaction), {
            accountId: pending.accountId,
            methods: pending.amr,
            stepUp: pending.stepUp,
            reason: check === 'locked' ? 'code_locked' : 'invalid_code',
          })
          const status = check === 'locked' ? 429 : 401
          const message = check === 'locked' ? ctx.t.locked : ctx.t.invalidCode
          return stepPage(request, reply, ctx, interaction.uid, pending, status, message)
        }
        if (step === 'sms-enrol' && pending.phone)
          await accounts.setVerifiedPhone(pending.accountId, pending.phone)
        const { phone: _phone, ...rest } = pending
        const next: PendingLogin = {
          ...rest,
          steps: pending.steps.slice(1),
          amr: [...pending.amr, step.startsWith('sms') ? 'sms' : 'otp'],
          proven: [...(pending.proven ?? []), factorOfStep(step)],
        }
        return advance(request, reply, ctx, interaction, next)
      })
    }

    app.post('/sign-in/:uid/resend', async (request, reply) => {
      const interaction = await interactionOf(request, reply)
      if (!interaction) return reply
      const ctx = await brandedContextOf(request, interaction, await applicationOf(interaction))
      if (!formChecked(request, reply, ctx, 'resend', interaction.uid)) return reply
      const pending = pendingOf(interaction)
      if (!pending || pending.steps.length === 0) return reply.redirect(`/sign-in/${interaction.uid}`, 303)
      if ((await sendCode(pending)) === 'rate_limited')
        return stepPage(request, reply, ctx, interaction.uid, pending, 429, ctx.t.tooManyCodes)
      return reply.redirect(`/sign-in/${interaction.uid}`, 303)
    })

    app.post('/sign-in/:uid/consent', async (request, reply) => {
      const interaction = await interactionOf(request, reply)
      if (!interaction) return reply
      const ctx = contextOf(request, interaction)
      if (!formChecked(request, reply, ctx, 'consent', interaction.uid)) return reply
      if (interaction.prompt.name !== 'consent') return reply.redirect(`/sign-in/${interaction.uid}`, 303)
      const form = request.body as Form
      if (form['decision'] === 'allow') return finish(request, reply, ctx, await grantConsent(interaction))
      if (form['decision'] === 'deny')
        return finish(request, reply, ctx, {
          error: 'access_denied',
          error_description: 'The user denied access',
        })
      return send(
        reply,
        400,
        renderErrorPage(ctx, 'decision must be allow or deny', `/sign-in/${interaction.uid}`),
      )
    })
  }
}
