import { esc, type PageContext, renderPage } from '../../../web/layout.ts'
import { alertOf } from './alert.ts'

export interface PasswordPage {
  uid: string
  /** The form's CSRF field (purpose `sign-in`). */
  csrf: string
  error?: string | undefined
  /** Typed again after a wrong password, so only the password is retyped. */
  email: string
  forgotLink?: string | undefined
  signUp: boolean
  /** External identity providers offered beside the password. */
  providers: Array<{ id: string; name: string }>
}

/** The first page of a sign-in: address and password, with the ways around them the application offers. */
export function renderPasswordPage(ctx: PageContext, page: PasswordPage): string {
  const uid = esc(page.uid)
  const federated = page.providers
    .map(
      (idp) =>
        `<p><a class="button secondary" href="/sign-in/${uid}/federated/${esc(idp.id)}">${esc(ctx.t.signInWith.replace('{name}', idp.name))}</a></p>`,
    )
    .join('')
  const forgot = page.forgotLink
    ? `<p><a class="link" href="${esc(page.forgotLink)}">${esc(ctx.t.forgotPassword)}</a></p>`
    : ''
  const create = page.signUp
    ? `<p><a class="link" href="/sign-in/${uid}/sign-up">${esc(ctx.t.createAccount)}</a></p>`
    : ''
  const body = `${alertOf(page.error)}<form method="post" action="/sign-in/${uid}/password" autocomplete="on">
${page.csrf}
<label for="email">${esc(ctx.t.email)}</label>
<input id="email" name="email" type="email" autocomplete="username" required maxlength="254" value="${esc(page.email)}">
<label for="password">${esc(ctx.t.password)}</label>
<input id="password" name="password" type="password" autocomplete="current-password" required maxlength="256">
<button type="submit">${esc(ctx.t.signIn)}</button>
</form>${forgot}${create}${federated}`
  return renderPage(ctx, { title: ctx.t.signInTitle, body })
}
