import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import type { AccountService, PasswordPolicy } from '../identity/accounts/account-service.ts'
import type { ClientDirectory } from '../identity/oidc/oidc-provider.ts'
import type { TenantBranding } from '../identity/sign-in/sign-in-types.ts'
import { CSRF_COOKIE, CSRF_FIELD, type Csrf, cookieOf, csrfField } from '../web/csrf.ts'
import {
  esc,
  type PageContext,
  type PageSettings,
  pageContext,
  pageHeaders,
  renderErrorPage,
  renderPage,
  withPanel,
} from '../web/layout.ts'
import { type EndUserService, SIGN_UP_CONFIRM_PATH, type SignUpRequestView } from './enduser-service.ts'

const PURPOSE = 'confirm-sign-up'

type Form = Record<string, string | undefined>

/**
 * The page of a sign-up link (an application's "Create an account"): the person chooses a
 * password, and only then do the account and the end-user record exist. GET shows the form and
 * changes nothing (a mail scanner opening the link creates nothing); POST uses the link once.
 * An unknown, used or expired link reads the same; a link whose address has an end-user by now
 * says so and creates nothing.
 */
export function endUserSignUpPages(deps: {
  endusers: Pick<EndUserService, 'signUpRequest' | 'completeSignUp'>
  accounts: Pick<AccountService, 'preparePassword'>
  clients: Pick<ClientDirectory, 'applicationOf'>
  branding?: TenantBranding
  /** The tenant's password policy for its end-users (src/settings). */
  passwordPolicyOf(tenantId: string): Promise<PasswordPolicy>
  csrf: Csrf
  pageSettings: PageSettings
}) {
  const { csrf, endusers } = deps
  const send = (reply: FastifyReply, status: number, html: string) =>
    reply.code(status).headers(pageHeaders(deps.pageSettings)).send(html)

  /** The application's panel, else its tenant's, else the defaults (as the other link pages). */
  async function contextOf(
    request: FastifyRequest,
    asked: SignUpRequestView | undefined,
  ): Promise<PageContext> {
    const ctx = pageContext(undefined, request.headers['accept-language'])
    if (!asked) return ctx
    const app = await deps.clients.applicationOf(asked.applicationId)
    const tenantPanel = await deps.branding?.panelOf(asked.tenantId)
    return withPanel(ctx, app, tenantPanel)
  }

  function form(
    request: FastifyRequest,
    reply: FastifyReply,
    ctx: PageContext,
    token: string,
    asked: SignUpRequestView,
    policy: PasswordPolicy,
    status: number,
    error?: string,
  ) {
    const alert = error ? `<p class="error" role="alert">${esc(error)}</p>` : ''
    const body = `${alert}<form method="post" action="${SIGN_UP_CONFIRM_PATH}">
${csrfField(csrf, request, reply, PURPOSE)}
<input type="hidden" name="token" value="${esc(token)}">
<label for="email">${esc(ctx.t.email)}</label>
<input id="email" type="email" value="${esc(asked.email)}" readonly autocomplete="username">
<label for="password">${esc(ctx.t.newPassword.replace('{min}', String(policy.minLength)))}</label>
<input id="password" name="password" type="password" autocomplete="new-password" required maxlength="256">
<label for="repeat">${esc(ctx.t.repeatPassword)}</label>
<input id="repeat" name="repeat" type="password" autocomplete="new-password" required maxlength="256">
<button type="submit">${esc(ctx.t.savePassword)}</button>
</form>`
    return send(reply, status, renderPage(ctx, { title: ctx.t.setupTitle, body }))
  }

  const invalid = (reply: FastifyReply, ctx: PageContext) =>
    send(reply, 400, renderErrorPage(ctx, ctx.t.linkInvalid))

  return async (app: FastifyInstance) => {
    app.get(SIGN_UP_CONFIRM_PATH, async (request, reply) => {
      const token = (request.query as Form)['token']
      const asked = typeof token === 'string' ? await endusers.signUpRequest(token) : undefined
      const ctx = await contextOf(request, asked)
      if (!asked || typeof token !== 'string') return invalid(reply, ctx)
      return form(request, reply, ctx, token, asked, await deps.passwordPolicyOf(asked.tenantId), 200)
    })

    app.post(SIGN_UP_CONFIRM_PATH, async (request, reply) => {
      const fields = request.body as Form
      const token = fields['token'] ?? ''
      const asked = await endusers.signUpRequest(token)
      const ctx = await contextOf(request, asked)
      if (!asked) return invalid(reply, ctx)
      if (!csrf.check(cookieOf(request, CSRF_COOKIE), PURPOSE, fields[CSRF_FIELD]))
        return send(reply, 403, renderErrorPage(ctx, ctx.t.formExpired))
      const policy = await deps.passwordPolicyOf(asked.tenantId)
      const password = fields['password'] ?? ''
      if (password !== (fields['repeat'] ?? ''))
        return form(request, reply, ctx, token, asked, policy, 400, ctx.t.passwordsDiffer)
      // Hashed before the transaction that uses the link: argon2id is slow, and nothing is locked meanwhile.
      const prepared = await deps.accounts.preparePassword(password, policy)
      if (prepared.problems)
        return form(
          request,
          reply,
          ctx,
          token,
          asked,
          policy,
          400,
          ctx.t.passwordWeak.replace('{problems}', prepared.problems.join(', ')),
        )
      // Checked again as it is used: a second submission of the same link finds it used.
      const done = await endusers.completeSignUp(token, prepared.hash, {
        requestId: request.id,
        clientIp: request.ip,
      })
      if (done.outcome === 'invalid') return invalid(reply, ctx)
      const text = done.outcome === 'created' ? ctx.t.passwordSaved : ctx.t.signUpExists
      return send(
        reply,
        done.outcome === 'created' ? 200 : 409,
        renderPage(ctx, { title: ctx.t.setupTitle, body: `<p role="status">${esc(text)}</p>` }),
      )
    })
  }
}
