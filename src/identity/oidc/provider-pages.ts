import { esc, type PageSettings, pageContext, renderErrorPage, renderPage } from '../../web/layout.ts'

/**
 * Pages oidc-provider renders itself (sign-out question, signed out, its errors), in the same
 * frame as the others. The provider answers them without Fastify, so the sign-in pages' headers
 * are set on the response before the provider takes it (identity-surface.ts).
 */
export function renderSignOut(
  _settings: PageSettings,
  acceptLanguage: string | undefined,
  providerForm: string,
): string {
  const ctx = pageContext(undefined, acceptLanguage)
  // providerForm is the provider's own hidden form (action and xsrf field), made by it.
  const body = `${providerForm}<p>${esc(ctx.t.signOutPrompt)}</p>
<button type="submit" form="op.logoutForm" name="logout" value="yes">${esc(ctx.t.signOut)}</button>
<button type="submit" form="op.logoutForm" class="secondary">${esc(ctx.t.stay)}</button>`
  return renderPage(ctx, { title: ctx.t.signOutTitle, body })
}

export function renderSignedOut(_settings: PageSettings, acceptLanguage: string | undefined): string {
  const ctx = pageContext(undefined, acceptLanguage)
  return renderPage(ctx, { title: ctx.t.signedOutTitle, body: `<p>${esc(ctx.t.signedOutText)}</p>` })
}

export function renderProviderError(
  _settings: PageSettings,
  acceptLanguage: string | undefined,
  out: { error: string; error_description?: string },
): string {
  const ctx = pageContext(undefined, acceptLanguage)
  const detail = out.error_description ? `${out.error}: ${out.error_description}` : out.error
  return renderErrorPage(ctx, detail)
}
