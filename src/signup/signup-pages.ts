import rateLimit, { type RateLimitPluginOptions } from '@fastify/rate-limit'
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import type { Redis } from 'ioredis'
import { TEAM_PASSWORD_POLICY } from '../identity/accounts/account-service.ts'
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
import {
  type SignupKind,
  type SignupPreview,
  type SignupService,
  signupIpRateLimited,
} from './signup-service.ts'

type Form = Record<string, string>

/** Where each kind of sign-up lives. */
const SIGNUP_PAGES: Record<SignupKind, string> = { tenant: '/signup', partner: '/partners/signup' }

/** The sign-up forms of one address (per client IP), shared by every process. */
export interface SignupRateLimit {
  redis: Redis
  prefix: string
  perHour: number
}

/**
 * @fastify/rate-limit over the asking routes (API and pages alike): one counter per client IP
 * and hour in Redis, whichever process and route gets the request. Registered globally inside a
 * plugin that holds only those routes; without Redis the limit is skipped rather than refusing all.
 */
export function signupRateLimitOptions(limit: SignupRateLimit): RateLimitPluginOptions {
  return {
    global: true,
    // After parsing and validation: malformed requests are refused without being counted.
    hook: 'preHandler',
    max: limit.perHour,
    timeWindow: 3600_000,
    redis: limit.redis,
    nameSpace: `${limit.prefix}signup-rate:`,
    skipOnError: true,
    enableDraftSpec: true,
    errorResponseBuilder: () => signupIpRateLimited(limit.perHour),
  }
}

/**
 * The sign-up pages (docs/signup.md): `/signup` (a tenant; `?ref=CODE` carries a partner's
 * referral) and `/partners/signup` (a partner, approved later by an operator), each with its
 * confirmation page, the link of the e-mail. Asking answers the same page whether or not the
 * address has an account; the confirmation asks for a new password, or the existing account's.
 */
export function signupPages(deps: {
  signups: SignupService
  csrf: Csrf
  pageSettings: PageSettings
  limit: SignupRateLimit
}) {
  const { signups, csrf } = deps
  const send = (reply: FastifyReply, status: number, html: string) =>
    reply.code(status).headers(pageHeaders(deps.pageSettings)).send(html)
  const contextOf = (request: FastifyRequest) => pageContext(undefined, request.headers['accept-language'])
  const formChecked = (request: FastifyRequest, purpose: string) =>
    csrf.check(cookieOf(request, CSRF_COOKIE), purpose, (request.body as Form)[CSRF_FIELD])

  function askForm(
    request: FastifyRequest,
    reply: FastifyReply,
    ctx: PageContext,
    kind: SignupKind,
    input: {
      status: number
      organizationName?: string
      email?: string
      ref?: string
      notice?: string
      error?: string
    },
  ) {
    const t = ctx.t
    const alert = input.error ? `<p class="error" role="alert">${esc(input.error)}</p>` : ''
    // `notice` is page HTML (made by fill, which escapes what it inserts).
    const notice = input.notice ? `<p role="status">${input.notice}</p>` : ''
    const referred = input.ref ? `<p>${fill(t.signupReferred, { code: input.ref })}</p>` : ''
    const body = `${alert}${notice}<p>${esc(kind === 'tenant' ? t.signupIntro : t.partnerSignupIntro)}</p>${referred}
<form method="post" action="${SIGNUP_PAGES[kind]}">
${csrfField(csrf, request, reply, `signup:${kind}`)}
${input.ref ? `<input type="hidden" name="ref" value="${esc(input.ref)}">` : ''}
<label for="organizationName">${esc(kind === 'tenant' ? t.organizationName : t.companyName)}</label>
<input id="organizationName" name="organizationName" type="text" required maxlength="200" value="${esc(input.organizationName ?? '')}" autocomplete="organization">
<label for="email">${esc(t.email)}</label>
<input id="email" name="email" type="email" required maxlength="254" value="${esc(input.email ?? '')}" autocomplete="email">
<button type="submit">${esc(t.signupSubmit)}</button>
</form>`
    const title = kind === 'tenant' ? t.signupTitle : t.partnerSignupTitle
    return send(reply, input.status, renderPage(ctx, { title, body }))
  }

  function confirmForm(
    request: FastifyRequest,
    reply: FastifyReply,
    ctx: PageContext,
    token: string,
    preview: SignupPreview,
    status: number,
    error?: string,
    organizationName = preview.organizationName,
  ) {
    const t = ctx.t
    const alert = error ? `<p class="error" role="alert">${esc(error)}</p>` : ''
    const text = fill(preview.kind === 'tenant' ? t.signupConfirmText : t.partnerConfirmText, {
      organization: organizationName,
      email: preview.email,
    })
    const passwordLabel = preview.accountExists
      ? t.yourPassword
      : t.choosePassword.replace('{min}', String(TEAM_PASSWORD_POLICY.minLength))
    const body = `${alert}<p>${text}</p>
<form method="post" action="${SIGNUP_PAGES[preview.kind]}/confirm">
${csrfField(csrf, request, reply, `signup-confirm:${preview.kind}`)}
<input type="hidden" name="token" value="${esc(token)}">
<label for="organizationName">${esc(preview.kind === 'tenant' ? t.organizationName : t.companyName)}</label>
<input id="organizationName" name="organizationName" type="text" required maxlength="200" value="${esc(organizationName)}">
<label for="email">${esc(t.email)}</label>
<input id="email" type="email" value="${esc(preview.email)}" readonly autocomplete="username">
<label for="password">${esc(passwordLabel)}</label>
<input id="password" name="password" type="password" required maxlength="256" autocomplete="${preview.accountExists ? 'current-password' : 'new-password'}">
<button type="submit">${esc(preview.kind === 'tenant' ? t.signupCreate : t.partnerApply)}</button>
</form>`
    return send(reply, status, renderPage(ctx, { title: t.signupConfirmTitle, body }))
  }

  async function ask(kind: SignupKind, request: FastifyRequest, reply: FastifyReply) {
    const ctx = contextOf(request)
    const form = request.body as Form
    const fields = {
      // A person's stray spaces are not a mistake worth a refusal (the API is strict).
      organizationName: (form['organizationName'] ?? '').trim(),
      email: (form['email'] ?? '').trim(),
      ...(form['ref'] ? { ref: form['ref'] } : {}),
    }
    if (!formChecked(request, `signup:${kind}`))
      return askForm(request, reply, ctx, kind, { status: 403, ...fields, error: ctx.t.formExpired })
    try {
      const requested = await signups.request(kind, {
        organizationName: fields.organizationName,
        email: fields.email,
        referralCode: fields.ref ?? null,
      })
      const body = `<p role="status">${fill(ctx.t.signupSent, { email: requested.email })}</p>`
      const title = kind === 'tenant' ? ctx.t.signupTitle : ctx.t.partnerSignupTitle
      return send(reply, 200, renderPage(ctx, { title, body }))
    } catch (err) {
      if (!(err instanceof AppError) || err.statusCode >= 500) throw err
      const error =
        err.statusCode === 429
          ? ctx.t.signupTooMany
          : (err.details?.['fields'] as Array<{ path: string }> | undefined)?.[0]?.path === 'body/email'
            ? ctx.t.emailInvalid
            : err.message
      return askForm(request, reply, ctx, kind, { status: err.statusCode, ...fields, error })
    }
  }

  /** The live link of this kind; an unknown, used, expired or other kind's link reads the same. */
  async function previewOf(kind: SignupKind, token: unknown): Promise<SignupPreview | undefined> {
    const preview = typeof token === 'string' ? await signups.preview(token) : undefined
    return preview?.kind === kind ? preview : undefined
  }

  return async (app: FastifyInstance) => {
    // Asking sends an e-mail: bounded per client IP and hour, across every process (Redis).
    await app.register(async (asking) => {
      await asking.register(rateLimit, signupRateLimitOptions(deps.limit))
      for (const kind of ['tenant', 'partner'] as const)
        asking.post(SIGNUP_PAGES[kind], (request, reply) => ask(kind, request, reply))
    })

    for (const kind of ['tenant', 'partner'] as const) {
      const path = SIGNUP_PAGES[kind]
      app.get(path, async (request, reply) => {
        const ctx = contextOf(request)
        const ref = kind === 'tenant' ? (request.query as Record<string, unknown>)['ref'] : undefined
        if (typeof ref !== 'string' || ref === '') return askForm(request, reply, ctx, kind, { status: 200 })
        const code = ref.length <= 64 ? await signups.referralCode(ref) : undefined
        // A wrong code does not stop anyone signing up: the page says so and drops it.
        if (!code)
          return askForm(request, reply, ctx, kind, {
            status: 200,
            notice: fill(ctx.t.signupReferralUnknown, { code: ref.slice(0, 64) }),
          })
        return askForm(request, reply, ctx, kind, { status: 200, ref: code })
      })

      app.get(`${path}/confirm`, async (request, reply) => {
        const ctx = contextOf(request)
        const token = (request.query as Record<string, unknown>)['token']
        const preview = await previewOf(kind, token)
        if (!preview || typeof token !== 'string')
          return send(reply, 400, renderErrorPage(ctx, ctx.t.signupInvalid))
        return confirmForm(request, reply, ctx, token, preview, 200)
      })

      app.post(`${path}/confirm`, async (request, reply) => {
        const ctx = contextOf(request)
        const form = request.body as Form
        const token = form['token'] ?? ''
        const preview = await previewOf(kind, token)
        if (!preview) return send(reply, 400, renderErrorPage(ctx, ctx.t.signupInvalid))
        const organizationName = (form['organizationName'] ?? preview.organizationName).trim()
        if (!formChecked(request, `signup-confirm:${kind}`))
          return confirmForm(request, reply, ctx, token, preview, 403, ctx.t.formExpired, organizationName)
        try {
          const confirmed = await signups.confirm(
            token,
            { password: form['password'] ?? '', organizationName },
            { requestId: request.id, clientIp: request.ip },
          )
          const text = fill(confirmed.kind === 'tenant' ? ctx.t.signupDone : ctx.t.partnerDone, {
            organization: confirmed.organizationName,
          })
          const id =
            confirmed.kind === 'tenant'
              ? `<p>Tenant: <code id="tenant-id">${esc(confirmed.tenantId)}</code></p>`
              : `<p>Partner: <code id="partner-id">${esc(confirmed.partnerId)}</code></p>`
          return send(
            reply,
            201,
            renderPage(ctx, {
              title: ctx.t.signupConfirmTitle,
              body: `<p role="status">${text}</p>${id}`,
            }),
          )
        } catch (err) {
          if (!(err instanceof AppError) || err.statusCode >= 500) throw err
          if (err.code === 'signup_link_invalid')
            return send(reply, 400, renderErrorPage(ctx, ctx.t.signupInvalid))
          const error =
            err.code === 'locked'
              ? ctx.t.locked
              : err.code === 'invalid_credentials'
                ? ctx.t.invalidCredentials
                : err.code === 'tenant_name_taken'
                  ? ctx.t.signupNameTaken
                  : err.message.replace(/^password /, 'The password ')
          return confirmForm(request, reply, ctx, token, preview, err.statusCode, error, organizationName)
        }
      })
    }
  }
}
