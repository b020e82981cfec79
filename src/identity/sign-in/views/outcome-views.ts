import { esc, type PageContext, renderPage } from '../../../web/layout.ts'

/**
 * The provider's next URL, on a page that moves on by itself: a redirect answering the form would
 * make the browser apply `form-action 'self'` to the whole redirect chain, which ends at the
 * client's (other) origin.
 */
export function renderContinuePage(ctx: PageContext, next: string): string {
  const body = `<p>${esc(ctx.t.continuing)}</p><p><a class="link" href="${esc(next)}">${esc(ctx.t.continue)}</a></p>`
  return renderPage(ctx, { title: ctx.t.signInTitle, body, refreshTo: next })
}

/** A refusal the person must read, with the way back to the client (which gets `access_denied`). */
export function renderRefusalPage(ctx: PageContext, message: string, next: string): string {
  const body = `<p class="error" role="alert">${esc(message)}</p><p><a class="link" id="return" href="${esc(next)}">${esc(ctx.t.returnToApp)}</a></p>`
  return renderPage(ctx, { title: ctx.t.accessDeniedTitle, body })
}

/** Waiting for a team member's decision: the page looks again by itself every 10 seconds. */
export function renderApprovalPage(ctx: PageContext, uid: string): string {
  const body = `<p role="status">${esc(ctx.t.approvalWaiting)}</p><p><a class="link" id="check-again" href="/sign-in/${esc(uid)}">${esc(ctx.t.checkAgain)}</a></p>`
  return renderPage(ctx, {
    title: ctx.t.approvalTitle,
    body,
    refreshTo: `/sign-in/${uid}`,
    refreshAfterSeconds: 10,
  })
}
