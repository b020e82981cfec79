import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import type { Interaction } from 'oidc-provider'
import type { MembershipRoles } from '../../auth/bearer-authenticator.ts'
import { type AccountService, TEAM_REALM, tenantRealm } from '../account-service.ts'
import {
  type ClientDirectory,
  CONSOLE_CLIENT_ID,
  type OidcRuntime,
  type TenantClient,
  tenantOfResource,
} from '../oidc-provider.ts'
import { CSRF_COOKIE, CSRF_FIELD, type Csrf, cookieOf } from './csrf.ts'
import {
  esc,
  type PageContext,
  type PageSettings,
  pageContext,
  pageHeaders,
  renderErrorPage,
  renderPage,
} from './layout.ts'

/** What the sign-in needs of tenant settings (src/settings); absent, TOTP is required only once enrolled. */
export interface MfaPolicy {
  totpRequiredFor(tenantId: string): Promise<boolean>
}

/** What the sign-in needs of the end-users module: a user signing in joins the application's list. */
export interface EndUserSignIns {
  /** false: the account has no end-user record of the tenant, or it is blocked. */
  recordSignIn(tenantId: string, accountId: string, applicationId: string): Promise<boolean>
}

export interface SignInDeps {
  oidc: OidcRuntime
  clients: ClientDirectory
  endUsers: EndUserSignIns
  accounts: AccountService
  memberships: MembershipRoles
  csrf: Csrf
  pageSettings: PageSettings
  mfaPolicy?: MfaPolicy
  /** The name shown in authenticator apps. */
  issuerName: string
}

/** Kept in the interaction (server side, bound to the browser's interaction cookie) between password and TOTP. */
interface PendingLogin {
  accountId: string
  enrol: boolean
}

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

  function csrfFor(request: FastifyRequest, reply: FastifyReply, purpose: string): string {
    const issued = csrf.issue(cookieOf(request, CSRF_COOKIE), purpose)
    if (issued.fresh)
      reply.header(
        'set-cookie',
        `${CSRF_COOKIE}=${issued.cookieValue}; Path=/; HttpOnly; SameSite=Strict${request.protocol === 'https' ? '; Secure' : ''}`,
      )
    return `<input type="hidden" name="${CSRF_FIELD}" value="${esc(issued.token)}">`
  }

  function contextOf(request: FastifyRequest, interaction?: Interaction): PageContext {
    const uiLocales =
      typeof interaction?.params['ui_locales'] === 'string' ? interaction.params['ui_locales'] : undefined
    return pageContext(uiLocales, request.headers['accept-language'])
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
    return pending && typeof pending.accountId === 'string' ? pending : undefined
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
    return clientId === CONSOLE_CLIENT_ID ? undefined : deps.clients.clientOf(clientId)
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

  function passwordPage(
    request: FastifyRequest,
    reply: FastifyReply,
    ctx: PageContext,
    uid: string,
    status: number,
    error?: string,
    email = '',
    forgotLink?: string,
  ) {
    const alert = error ? `<p class="error" role="alert">${esc(error)}</p>` : ''
    const forgot = forgotLink
      ? `<p><a class="link" href="${esc(forgotLink)}">${esc(ctx.t.forgotPassword)}</a></p>`
      : ''
    const body = `${alert}<form method="post" action="/sign-in/${esc(uid)}/password" autocomplete="on">
${csrfFor(request, reply, `sign-in:${uid}`)}
<label for="email">${esc(ctx.t.email)}</label>
<input id="email" name="email" type="email" autocomplete="username" required maxlength="254" value="${esc(email)}">
<label for="password">${esc(ctx.t.password)}</label>
<input id="password" name="password" type="password" autocomplete="current-password" required maxlength="256">
<button type="submit">${esc(ctx.t.signIn)}</button>
</form>${forgot}`
    return send(reply, status, renderPage(ctx, { title: ctx.t.signInTitle, body }))
  }

  function totpPage(
    request: FastifyRequest,
    reply: FastifyReply,
    ctx: PageContext,
    uid: string,
    status: number,
    error?: string,
  ) {
    const alert = error ? `<p class="error" role="alert">${esc(error)}</p>` : ''
    const body = `${alert}<p>${esc(ctx.t.totpPrompt)}</p><form method="post" action="/sign-in/${esc(uid)}/totp">
${csrfFor(request, reply, `totp:${uid}`)}
<label for="code">${esc(ctx.t.code)}</label>
<input id="code" name="code" type="text" inputmode="numeric" autocomplete="one-time-code" pattern="[0-9]{6}" maxlength="6" required>
<button type="submit">${esc(ctx.t.verify)}</button>
</form>`
    return send(reply, status, renderPage(ctx, { title: ctx.t.totpTitle, body }))
  }

  async function enrolPage(
    request: FastifyRequest,
    reply: FastifyReply,
    ctx: PageContext,
    uid: string,
    accountId: string,
    status: number,
    error?: string,
  ) {
    const { secret, uri } = await accounts.beginTotpEnrolment(accountId, deps.issuerName)
    const alert = error ? `<p class="error" role="alert">${esc(error)}</p>` : ''
    const body = `${alert}<p>${esc(ctx.t.enrolPrompt)}</p>
<p>${esc(ctx.t.secretKey)}:</p><p class="secret" id="totp-secret">${esc(secret)}</p>
<p><a class="link" href="${esc(uri)}">${esc(ctx.t.openInApp)}</a></p>
<form method="post" action="/sign-in/${esc(uid)}/totp-enrol">
${csrfFor(request, reply, `totp-enrol:${uid}`)}
<label for="code">${esc(ctx.t.code)}</label>
<input id="code" name="code" type="text" inputmode="numeric" autocomplete="one-time-code" pattern="[0-9]{6}" maxlength="6" required>
<button type="submit">${esc(ctx.t.verify)}</button>
</form>`
    return send(reply, status, renderPage(ctx, { title: ctx.t.enrolTitle, body }))
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

  /** Grants what the client asked for (the member agreed, or the client is the first-party console). */
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
   * After the password (and TOTP when due): a member must belong to the tenant the console's token
   * is for; an end-user must have a record of the application's tenant, and joins its list.
   */
  async function completeLogin(
    request: FastifyRequest,
    reply: FastifyReply,
    ctx: PageContext,
    interaction: Interaction,
    accountId: string,
    amr: string[],
  ) {
    const app = await applicationOf(interaction)
    if (app) {
      if (!(await deps.endUsers.recordSignIn(app.tenantId, accountId, app.applicationId)))
        return finish(request, reply, ctx, {
          error: 'access_denied',
          error_description: 'The account may not sign in to this application',
        })
      return finish(request, reply, ctx, { login: { accountId, amr, remember: true } })
    }
    const tenantId = tenantOf(interaction, undefined)
    if (tenantId && !(await deps.memberships.roleOf(tenantId, accountId))) {
      return finish(request, reply, ctx, {
        error: 'access_denied',
        error_description: 'The account is not a member of this tenant',
      })
    }
    return finish(request, reply, ctx, { login: { accountId, amr, remember: true } })
  }

  /** An application's sign-in page offers a reset; the console's members use the CLI or an admin. */
  const forgotLinkOf = (app: TenantClient | undefined, interaction: Interaction): string | undefined =>
    app
      ? `/forgot-password?${new URLSearchParams({ applicationId: app.applicationId, return: `/sign-in/${interaction.uid}` })}`
      : undefined

  return async (app: FastifyInstance) => {
    app.get('/sign-in/:uid', async (request, reply) => {
      const interaction = await interactionOf(request, reply)
      if (!interaction) return reply
      const ctx = contextOf(request, interaction)
      const app = await applicationOf(interaction)
      if (interaction.prompt.name === 'consent') {
        // The console and the tenant's own applications are first-party: no consent page.
        if (interaction.params['client_id'] === CONSOLE_CLIENT_ID || app) {
          // First-party: no consent page. A GET, so the redirect chain is not a form's.
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
      if (pending?.enrol) return enrolPage(request, reply, ctx, interaction.uid, pending.accountId, 200)
      if (pending) return totpPage(request, reply, ctx, interaction.uid, 200)
      return passwordPage(
        request,
        reply,
        ctx,
        interaction.uid,
        200,
        undefined,
        '',
        forgotLinkOf(app, interaction),
      )
    })

    app.post('/sign-in/:uid/password', async (request, reply) => {
      const interaction = await interactionOf(request, reply)
      if (!interaction) return reply
      const ctx = contextOf(request, interaction)
      const form = request.body as Form
      if (!csrf.check(cookieOf(request, CSRF_COOKIE), `sign-in:${interaction.uid}`, form[CSRF_FIELD])) {
        return send(
          reply,
          403,
          renderErrorPage(ctx, 'The form expired. Go back and try again.', `/sign-in/${interaction.uid}`),
        )
      }
      if (interaction.prompt.name !== 'login') return reply.redirect(`/sign-in/${interaction.uid}`, 303)
      const email = form['email'] ?? ''
      const app = await applicationOf(interaction)
      const forgot = forgotLinkOf(app, interaction)
      const result = await accounts.signIn({
        realm: app ? tenantRealm(app.tenantId) : TEAM_REALM,
        email,
        password: form['password'] ?? '',
        clientIp: request.ip,
      })
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
      const { account } = result
      const tenantId = tenantOf(interaction, app)
      const required = tenantId ? ((await deps.mfaPolicy?.totpRequiredFor(tenantId)) ?? false) : false
      if (account.totpEnrolled || required) {
        interaction.result = {
          pendingLogin: { accountId: account.id, enrol: !account.totpEnrolled } satisfies PendingLogin,
        } as never
        await interaction.save(Math.max(1, interaction.exp - Math.floor(Date.now() / 1000)))
        return reply.redirect(`/sign-in/${interaction.uid}`, 303)
      }
      return completeLogin(request, reply, ctx, interaction, account.id, ['pwd'])
    })

    for (const step of ['totp', 'totp-enrol'] as const) {
      app.post(`/sign-in/:uid/${step}`, async (request, reply) => {
        const interaction = await interactionOf(request, reply)
        if (!interaction) return reply
        const ctx = contextOf(request, interaction)
        const form = request.body as Form
        if (!csrf.check(cookieOf(request, CSRF_COOKIE), `${step}:${interaction.uid}`, form[CSRF_FIELD])) {
          return send(
            reply,
            403,
            renderErrorPage(ctx, 'The form expired. Go back and try again.', `/sign-in/${interaction.uid}`),
          )
        }
        const pending = pendingOf(interaction)
        if (!pending || pending.enrol !== (step === 'totp-enrol'))
          return reply.redirect(`/sign-in/${interaction.uid}`, 303)
        const code = (form['code'] ?? '').slice(0, 16)
        const check =
          step === 'totp'
            ? await accounts.verifyTotp(pending.accountId, code, request.ip)
            : await accounts.confirmTotpEnrolment(pending.accountId, code, request.ip)
        if (check !== 'ok') {
          const status = check === 'locked' ? 429 : 401
          const message = check === 'locked' ? ctx.t.locked : ctx.t.invalidCode
          return step === 'totp'
            ? totpPage(request, reply, ctx, interaction.uid, status, message)
            : enrolPage(request, reply, ctx, interaction.uid, pending.accountId, status, message)
        }
        return completeLogin(request, reply, ctx, interaction, pending.accountId, ['pwd', 'otp'])
      })
    }

    app.post('/sign-in/:uid/consent', async (request, reply) => {
      const interaction = await interactionOf(request, reply)
      if (!interaction) return reply
      const ctx = contextOf(request, interaction)
      const form = request.body as Form
      if (!csrf.check(cookieOf(request, CSRF_COOKIE), `consent:${interaction.uid}`, form[CSRF_FIELD])) {
        return send(
          reply,
          403,
          renderErrorPage(ctx, 'The form expired. Go back and try again.', `/sign-in/${interaction.uid}`),
        )
      }
      if (interaction.prompt.name !== 'consent') return reply.redirect(`/sign-in/${interaction.uid}`, 303)
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
