import { esc, type PageContext, renderPage } from '../../../web/layout.ts'

/** Sign-up asks for the address only: the e-mailed link sets the password. */
export function renderSignUpPage(ctx: PageContext, page: { uid: string; csrf: string }): string {
  const uid = esc(page.uid)
  const body = `<p>${esc(ctx.t.signUpPrompt)}</p><form method="post" action="/sign-in/${uid}/sign-up">
${page.csrf}
<label for="email">${esc(ctx.t.email)}</label>
<input id="email" name="email" type="email" autocomplete="email" required maxlength="254">
<button type="submit">${esc(ctx.t.createAccount)}</button>
</form><p><a class="link" href="/sign-in/${uid}">${esc(ctx.t.backToSignIn)}</a></p>`
  return renderPage(ctx, { title: ctx.t.createAccount, body })
}

/** The same words whatever became of the address: the page says nothing of who has an account. */
export function renderSignUpSent(ctx: PageContext, uid: string): string {
  const body = `<p>${esc(ctx.t.signUpSent)}</p><p><a class="link" href="/sign-in/${esc(uid)}">${esc(ctx.t.backToSignIn)}</a></p>`
  return renderPage(ctx, { title: ctx.t.createAccount, body })
}
