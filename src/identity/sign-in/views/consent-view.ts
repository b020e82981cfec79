import { esc, type PageContext, renderPage } from '../../../web/layout.ts'

/** A third-party client asks for scopes: who asks, for what, allow or deny. */
export function renderConsentPage(
  ctx: PageContext,
  page: { uid: string; csrf: string; clientName: string; scopes: string[] },
): string {
  const body = `<p><strong>${esc(page.clientName)}</strong> ${esc(ctx.t.consentPrompt)}</p>
<ul>${page.scopes.map((scope) => `<li>${esc(scope)}</li>`).join('')}</ul>
<form method="post" action="/sign-in/${esc(page.uid)}/consent">
${page.csrf}
<button type="submit" name="decision" value="allow">${esc(ctx.t.allow)}</button>
<button type="submit" name="decision" value="deny" class="secondary">${esc(ctx.t.deny)}</button>
</form>`
  return renderPage(ctx, { title: ctx.t.consentTitle, body })
}
