import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import type { Logger } from 'pino'
import { isUuid } from '../../platform/ids.ts'
import { CSRF_COOKIE, CSRF_FIELD, type Csrf, cookieOf, csrfField } from '../../web/csrf.ts'
import {
  esc,
  type PageContext,
  type PageSettings,
  pageContext,
  pageHeaders,
  renderErrorPage,
  renderPage,
  withPanel,
} from '../../web/layout.ts'
import type { ClientDirectory } from '../oidc/oidc-provider.ts'
import type { TenantBranding } from '../sign-in/sign-in-types.ts'
import { type AccountLinks, LINK_PATHS, type LinkKind } from './account-links.ts'
import {
  type AccountService,
  type PasswordPolicy,
  TEAM_PASSWORD_POLICY,
  TEAM_REALM,
  tenantOfRealm,
  tenantRealm,
} from './account-service.ts'

export interface AccountLinkPagesDeps {
  accounts: AccountService
  links: AccountLinks
  clients: ClientDirectory
  csrf: Csrf
  pageSettings: PageSettings
  /** The tenant's password policy for its end-users (src/settings). */
  passwordPolicyOf(tenantId: string): Promise<PasswordPolicy>
  /** A new password ends the account's sessions everywhere. */
  endSessionsOf(accountId: string): Promise<void>
  branding?: TenantBranding
  logger: Logger
}

/** The error a link page answers when userId and token do not belong together (spec 7). */
const INVALID_LINK_CODE: Record<LinkKind, string> = {
  reset: 'invalid_reset_token',
  setup: 'invalid_setup_token',
}

const SIGN_IN_RETURN = /^\/sign-in\/[A-Za-z0-9_-]{1,64}$/

type Fields = Record<string, string | undefined>
const field = (fields: unknown, name: string): string | undefined => {
  const value = (fields as Fields | undefined)?.[name]
  return typeof value === 'string' ? value : undefined
}

/**
 * Self-service pages of end-user and team member accounts: forgot password (`POST
 * /forgot-password` answers the same whether or not the account exists), and the pages of the
 * e-mailed links, reset and account set-up, which take `userId`, `applicationId` and `token` and
 * validate the user and the token together (400 `invalid_reset_token` when they do not match, a
 * link used, expired or replaced). An application's sign-in page links to
 * `/forgot-password?applicationId=…` (its tenant's end-users); the console's to
 * `/forgot-password?realm=team` (team members, who have the team's fixed password policy).
 */
export function accountLinkPages(deps: AccountLinkPagesDeps) {
  const { csrf, links } = deps
  const send = (reply: FastifyReply, status: number, html: string) =>
    reply.code(status).headers(pageHeaders(deps.pageSettings)).send(html)
  const plainContextOf = (request: FastifyRequest) =>
    pageContext(undefined, request.headers['accept-language'])

  /** These pages wear the application's panel (its id is in the link), else the tenant's, else the defaults. */
  async function contextOf(request: FastifyRequest, fields?: unknown): Promise<PageContext> {
    const ctx = plainContextOf(request)
    const applicationId = field(fields, 'applicationId')
    const userId = field(fields, 'userId')
    const app =
      applicationId && isUuid(applicationId) ? await deps.clients.applicationOf(applicationId) : undefined
    const account = !app && userId && isUuid(userId) ? await deps.accounts.get(userId) : undefined
    const tenantId = app?.tenantId ?? (account ? tenantOfRealm(account.realm) : undefined)
    const tenantPanel = tenantId ? await deps.branding?.panelOf(tenantId) : undefined
    return withPanel(ctx, app, tenantPanel)
  }

  const formField = (request: FastifyRequest, reply: FastifyReply, purpose: string) =>
    csrfField(csrf, request, reply, purpose)

  const expired = (request: FastifyRequest, reply: FastifyReply, ctx: PageContext) =>
    send(reply, 403, renderErrorPage(ctx, 'The form expired. Go back and try again.', request.url))

  function invalidLink(reply: FastifyReply, ctx: PageContext, kind: LinkKind) {
    const body = `<p class="error" role="alert">${esc(ctx.t.linkInvalid)}</p><p class="code">${INVALID_LINK_CODE[kind]}</p>`
    return send(reply, 400, renderPage(ctx, { title: ctx.t.errorTitle, body }))
  }

  /** Whose form: an application's end-users, or the team's members. */
  type ForgotTarget = { applicationId: string } | { realm: typeof TEAM_REALM }

  function forgotForm(
    request: FastifyRequest,
    reply: FastifyReply,
    ctx: PageContext,
    target: ForgotTarget,
    back: string | undefined,
  ) {
    const [name, value] =
      'realm' in target ? ['realm', target.realm] : ['applicationId', target.applicationId]
    const body = `<p>${esc(ctx.t.forgotPrompt)}</p><form method="post" action="/forgot-password">
${formField(request, reply, 'forgot-password')}
<input type="hidden" name="${name}" value="${esc(value)}">
${back ? `<input type="hidden" name="return" value="${esc(back)}">` : ''}
<label for="email">${esc(ctx.t.email)}</label>
<input id="email" name="email" type="email" autocomplete="username" required maxlength="254">
<button type="submit">${esc(ctx.t.sendLink)}</button>
</form>${backLink(ctx, back)}`
    return send(reply, 200, renderPage(ctx, { title: ctx.t.forgotTitle, body }))
  }

  const backLink = (ctx: PageContext, back: string | undefined) =>
    back ? `<p><a class="link" href="${esc(back)}">${esc(ctx.t.backToSignIn)}</a></p>` : ''

  function passwordForm(
    request: FastifyRequest,
    reply: FastifyReply,
    ctx: PageContext,
    kind: LinkKind,
    claim: { userId: string; applicationId: string | undefined; token: string },
    policy: PasswordPolicy,
    status: number,
    error?: string,
  ) {
    const alert = error ? `<p class="error" role="alert">${esc(error)}</p>` : ''
    const body = `${alert}<form method="post" action="${LINK_PATHS[kind]}">
${formField(request, reply, `${kind}:${claim.userId}`)}
<input type="hidden" name="userId" value="${esc(claim.userId)}">
${claim.applicationId ? `<input type="hidden" name="applicationId" value="${esc(claim.applicationId)}">` : ''}
<input type="hidden" name="token" value="${esc(claim.token)}">
<label for="password">${esc(ctx.t.newPassword.replace('{min}', String(policy.minLength)))}</label>
<input id="password" name="password" type="password" autocomplete="new-password" required maxlength="256">
<label for="repeat">${esc(ctx.t.repeatPassword)}</label>
<input id="repeat" name="repeat" type="password" autocomplete="new-password" required maxlength="256">
<button type="submit">${esc(ctx.t.savePassword)}</button>
</form>`
    return send(
      reply,
      status,
      renderPage(ctx, { title: kind === 'reset' ? ctx.t.resetTitle : ctx.t.setupTitle, body }),
    )
  }

  /** The claim of a link's query or form; undefined when a part is missing or malformed. */
  function claimOf(fields: unknown) {
    const userId = field(fields, 'userId')
    const token = field(fields, 'token')
    const applicationId = field(fields, 'applicationId')
    // Malformed ids never reach the database (a uuid column would refuse them with an error).
    if (!userId || !token || !isUuid(userId)) return undefined
    if (applicationId !== undefined && !isUuid(applicationId)) return undefined
    return { userId, token, applicationId }
  }

  async function policyFor(userId: string): Promise<PasswordPolicy | undefined> {
    const account = await deps.accounts.get(userId)
    if (account?.realm === TEAM_REALM) return TEAM_PASSWORD_POLICY
    const tenantId = account ? tenantOfRealm(account.realm) : undefined
    return tenantId ? deps.passwordPolicyOf(tenantId) : undefined
  }

  /** `realm=team`: the console's members; else the application the query or form names. */
  async function forgotTargetOf(
    fields: unknown,
  ): Promise<{ target: ForgotTarget; realm: string; applicationId: string | null } | undefined> {
    if (field(fields, 'realm') === TEAM_REALM)
      return { target: { realm: TEAM_REALM }, realm: TEAM_REALM, applicationId: null }
    const applicationId = field(fields, 'applicationId') ?? ''
    const application = isUuid(applicationId) ? await deps.clients.applicationOf(applicationId) : undefined
    return application
      ? { target: { applicationId }, realm: tenantRealm(application.tenantId), applicationId }
      : undefined
  }

  return async (app: FastifyInstance) => {
    app.get('/forgot-password', async (request, reply) => {
      const ctx = await contextOf(request, request.query)
      const back = field(request.query, 'return')
      const forgot = await forgotTargetOf(request.query)
      if (!forgot) return send(reply, 404, renderErrorPage(ctx, 'This page does not exist.'))
      return forgotForm(
        request,
        reply,
        ctx,
        forgot.target,
        back && SIGN_IN_RETURN.test(back) ? back : undefined,
      )
    })

    app.post('/forgot-password', async (request, reply) => {
      const ctx = await contextOf(request, request.body)
      if (!csrf.check(cookieOf(request, CSRF_COOKIE), 'forgot-password', field(request.body, CSRF_FIELD)))
        return expired(request, reply, ctx)
      const email = (field(request.body, 'email') ?? '').slice(0, 320)
      const back = field(request.body, 'return')
      const forgot = await forgotTargetOf(request.body)
      if (!forgot) return send(reply, 404, renderErrorPage(ctx, 'This page does not exist.'))
      // Each ask may send an e-mail: bounded per client address (the same answer for any address).
      const admission = await links.admitRequest(request.ip)
      if (!admission.admitted)
        return send(
          reply.header('retry-after', String(admission.retryAfterSeconds)),
          429,
          renderErrorPage(ctx, ctx.t.tooManyRequests, back && SIGN_IN_RETURN.test(back) ? back : undefined),
        )
      // The answer never depends on the account: the link is made after it, off this request's path.
      void links
        .requestReset({ realm: forgot.realm, email, applicationId: forgot.applicationId })
        .catch((err: unknown) =>
          deps.logger.error({ err: { message: (err as Error).message } }, 'password reset request failed'),
        )
      const body = `<p>${esc(ctx.t.forgotSent)}</p>${backLink(ctx, back && SIGN_IN_RETURN.test(back) ? back : undefined)}`
      return send(reply, 200, renderPage(ctx, { title: ctx.t.forgotTitle, body }))
    })

    for (const kind of ['reset', 'setup'] as const) {
      app.get(LINK_PATHS[kind], async (request, reply) => {
        const ctx = await contextOf(request, request.query)
        const claim = claimOf(request.query)
        const policy = claim ? await policyFor(claim.userId) : undefined
        if (!claim || !policy || !(await links.isLive({ ...claim, kind })))
          return invalidLink(reply, ctx, kind)
        return passwordForm(request, reply, ctx, kind, claim, policy, 200)
      })

      app.post(LINK_PATHS[kind], async (request, reply) => {
        const ctx = await contextOf(request, request.body)
        const claim = claimOf(request.body)
        if (!claim) return invalidLink(reply, ctx, kind)
        if (
          !csrf.check(
            cookieOf(request, CSRF_COOKIE),
            `${kind}:${claim.userId}`,
            field(request.body, CSRF_FIELD),
          )
        )
          return expired(request, reply, ctx)
        const policy = await policyFor(claim.userId)
        if (!policy || !(await links.isLive({ ...claim, kind }))) return invalidLink(reply, ctx, kind)
        const password = field(request.body, 'password') ?? ''
        if (password !== (field(request.body, 'repeat') ?? ''))
          return passwordForm(request, reply, ctx, kind, claim, policy, 400, ctx.t.passwordsDiffer)
        const prepared = await deps.accounts.preparePassword(password, policy)
        if (prepared.problems)
          return passwordForm(
            request,
            reply,
            ctx,
            kind,
            claim,
            policy,
            400,
            ctx.t.passwordWeak.replace('{problems}', prepared.problems.join(', ')),
          )
        // Checked again as it is used: a second submission of the same link finds it consumed.
        const done = await links.completeWithPassword({ ...claim, kind }, prepared.hash)
        if (!done) return invalidLink(reply, ctx, kind)
        await deps.endSessionsOf(done.accountId)
        return send(
          reply,
          200,
          renderPage(ctx, {
            title: kind === 'reset' ? ctx.t.resetTitle : ctx.t.setupTitle,
            body: `<p>${esc(ctx.t.passwordSaved)}</p>`,
          }),
        )
      })
    }
  }
}
