import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import {
  type AccountService,
  TEAM_PASSWORD_POLICY,
  TEAM_REALM,
} from '../identity/accounts/account-service.ts'
import { AppError } from '../platform/errors.ts'
import { CSRF_COOKIE, CSRF_FIELD, type Csrf, cookieOf, csrfField } from '../web/csrf.ts'
import {
  esc,
  fill,
  type PageContext,
  type PageSettings,
  pageContext,
  pageHeaders,
  renderErrorPage,
  renderPage,
} from '../web/layout.ts'
import type { InvitationPreview, TeamService } from './team-service.ts'

const PURPOSE = 'accept-invitation'

/**
 * The accept-invitation page (the link of the e-mail): the invitee sets a password (new account)
 * or confirms theirs (existing account), and becomes a member with the invited role. The link is
 * single use and expires (team-service.ts); an unknown, used, revoked or expired link reads the
 * same. The page shows only what the link's holder was sent: the tenant, the role, the address.
 */
export function invitationPages(deps: {
  team: TeamService
  accounts: AccountService
  csrf: Csrf
  pageSettings: PageSettings
}) {
  const { team, accounts, csrf } = deps
  const send = (reply: FastifyReply, status: number, html: string) =>
    reply.code(status).headers(pageHeaders(deps.pageSettings)).send(html)

  function form(
    request: FastifyRequest,
    reply: FastifyReply,
    ctx: PageContext,
    token: string,
    invitation: InvitationPreview,
    status: number,
    error?: string,
  ) {
    const alert = error ? `<p class="error" role="alert">${esc(error)}</p>` : ''
    const label = invitation.accountExists
      ? ctx.t.yourPassword
      : ctx.t.choosePassword.replace('{min}', String(TEAM_PASSWORD_POLICY.minLength))
    const body = `${alert}<p>${fill(ctx.t.inviteText, { tenant: invitation.tenantName, role: invitation.role.replace('tenant:', '') })}</p>
<form method="post" action="/invitations/accept">
${csrfField(csrf, request, reply, PURPOSE)}
<input type="hidden" name="token" value="${esc(token)}">
<label for="email">${esc(ctx.t.email)}</label>
<input id="email" type="email" value="${esc(invitation.email)}" readonly autocomplete="username">
<label for="password">${esc(label)}</label>
<input id="password" name="password" type="password" required maxlength="256" autocomplete="${invitation.accountExists ? 'current-password' : 'new-password'}">
<button type="submit">${esc(ctx.t.accept)}</button>
</form>`
    return send(reply, status, renderPage(ctx, { title: ctx.t.inviteTitle, body }))
  }

  return async (app: FastifyInstance) => {
    app.get('/invitations/accept', async (request, reply) => {
      const ctx = pageContext(undefined, request.headers['accept-language'])
      const token = (request.query as Record<string, unknown>)['token']
      const invitation = typeof token === 'string' ? await team.previewInvitation(token) : undefined
      if (!invitation || typeof token !== 'string')
        return send(reply, 400, renderErrorPage(ctx, ctx.t.inviteInvalid))
      return form(request, reply, ctx, token, invitation, 200)
    })

    app.post('/invitations/accept', async (request, reply) => {
      const ctx = pageContext(undefined, request.headers['accept-language'])
      const body = request.body as Record<string, string>
      if (!csrf.check(cookieOf(request, CSRF_COOKIE), PURPOSE, body[CSRF_FIELD])) {
        return send(
          reply,
          403,
          renderErrorPage(ctx, 'The form expired. Open the link from the e-mail again.'),
        )
      }
      const token = body['token'] ?? ''
      const password = body['password'] ?? ''
      const invitation = await team.previewInvitation(token)
      if (!invitation) return send(reply, 400, renderErrorPage(ctx, ctx.t.inviteInvalid))
      let accountId: string
      const existing = await accounts.findTeamAccount(invitation.email)
      if (existing) {
        const checked = await accounts.checkPassword(existing.id, password, request.ip)
        if (checked.outcome === 'locked')
          return form(request, reply, ctx, token, { ...invitation, accountExists: true }, 429, ctx.t.locked)
        if (checked.outcome !== 'ok')
          return form(
            request,
            reply,
            ctx,
            token,
            { ...invitation, accountExists: true },
            401,
            ctx.t.invalidCredentials,
          )
        accountId = existing.id
      } else {
        // The policy's shortfalls in the page's own words (as the reset page says them), not the
        // API's message for a field.
        const prepared = await accounts.preparePassword(password, TEAM_PASSWORD_POLICY)
        if (prepared.problems)
          return form(
            request,
            reply,
            ctx,
            token,
            invitation,
            400,
            ctx.t.passwordWeak.replace('{problems}', prepared.problems.join(', ')),
          )
        try {
          accountId = (
            await accounts.createAccount(TEAM_REALM, { email: invitation.email, passwordHash: prepared.hash })
          ).id
        } catch (err) {
          if (err instanceof AppError && err.code === 'account_exists') {
            return form(
              request,
              reply,
              ctx,
              token,
              { ...invitation, accountExists: true },
              409,
              ctx.t.invalidCredentials,
            )
          }
          throw err
        }
      }
      try {
        const accepted = await team.acceptInvitation(token, accountId, {
          requestId: request.id,
          clientIp: request.ip,
        })
        return send(
          reply,
          200,
          renderPage(ctx, {
            title: ctx.t.inviteTitle,
            body: `<p>${fill(ctx.t.inviteDone, { tenant: accepted.tenantName })}</p>`,
          }),
        )
      } catch (err) {
        if (err instanceof AppError && err.statusCode < 500)
          return send(reply, 400, renderErrorPage(ctx, ctx.t.inviteInvalid))
        throw err
      }
    })
  }
}
