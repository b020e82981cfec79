import { type LoginPanel, type PanelContent, resolvePanel } from '../branding/login-panel.ts'
import { type Locale, type Messages, messagesOf, pickLocale } from './i18n.ts'

/** What every page needs to know of the deployment. */
export interface PageSettings {
  /** KMS_CDN_HOST: the only other host styles and fonts may come from. */
  cdnHost: string
}

/**
 * Spec 4.4, exactly: the sign-in pages' Content-Security-Policy. No inline script anywhere (the
 * pages have no script at all); inline styles are allowed by the spec but the pages use a file.
 */
function signInPageCsp(cdnHost: string): string {
  return (
    `default-src 'self'; style-src 'self' 'unsafe-inline' https://${cdnHost}; font-src 'self' https://${cdnHost}; ` +
    "img-src 'self' data: blob: https:; script-src 'self'; frame-ancestors 'none'; form-action 'self'"
  )
}

export function pageHeaders(settings: PageSettings): Record<string, string> {
  return {
    'content-type': 'text/html; charset=utf-8',
    'content-security-policy': signInPageCsp(settings.cdnHost),
    'x-frame-options': 'DENY',
    'referrer-policy': 'no-referrer',
    'cache-control': 'no-store',
    'x-content-type-options': 'nosniff',
  }
}

const ESCAPES: Record<string, string> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  "'": '&#39;',
}
/** Every value that reaches a page goes through this (attribute or text). */
export const esc = (value: string): string => value.replace(/[&<>"']/g, (c) => ESCAPES[c]!)

/** `{name}` placeholders, each value escaped. */
export const fill = (template: string, values: Record<string, string>): string =>
  esc(template).replace(/\{(\w+)\}/g, (_, name: string) => `<strong>${esc(values[name] ?? '')}</strong>`)

export interface PageContext {
  locale: Locale
  t: Messages
  /** The login panel (branding); absent, the service's own words for the locale. */
  panel?: PanelContent
}

export function pageContext(uiLocales: string | undefined, acceptLanguage: string | undefined): PageContext {
  const locale = pickLocale(uiLocales, acceptLanguage)
  return { locale, t: messagesOf(locale) }
}

/**
 * The login panel of a page for a tenant's application or its tenant: the application's words
 * for the locale, else the tenant's, else the application's name (a tenant's end-users never see
 * the service's own words); the image likewise. Without either, the service's panel.
 */
export function withPanel(
  ctx: PageContext,
  app: { name: string; branding: { loginPanel: LoginPanel } | null } | undefined,
  tenantPanel: LoginPanel | undefined,
): PageContext {
  if (!app && !tenantPanel) return ctx
  const defaults = app
    ? { title: app.name, text: ctx.t.appPanelText.replace('{name}', app.name) }
    : { title: ctx.t.panelTitle, text: ctx.t.panelText }
  return { ...ctx, panel: resolvePanel(ctx.locale, defaults, app?.branding?.loginPanel, tenantPanel) }
}

/** The split-screen frame: the login panel (the application's or tenant's branding) and the form side. */
export function renderPage(
  ctx: PageContext,
  page: { title: string; body: string; refreshTo?: string; refreshAfterSeconds?: number },
): string {
  const refresh = page.refreshTo
    ? `<meta http-equiv="refresh" content="${page.refreshAfterSeconds ?? 0};url=${esc(page.refreshTo)}">`
    : ''
  return `<!DOCTYPE html>
<html lang="${ctx.locale}">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
${refresh}<title>${esc(page.title)}</title>
<link rel="stylesheet" href="/assets/identity.css">
</head>
<body>
<div class="split">
<aside class="panel">
${ctx.panel?.imageUrl ? `<img class="panel-image" src="${esc(ctx.panel.imageUrl)}" alt="">` : ''}<div class="panel-text"><h2>${esc(ctx.panel?.title ?? ctx.t.panelTitle)}</h2><p>${esc(ctx.panel?.text ?? ctx.t.panelText)}</p></div>
</aside>
<main class="form-side">
<div class="card">
<h1>${esc(page.title)}</h1>
${page.body}
</div>
</main>
</div>
</body>
</html>
`
}

export function renderErrorPage(ctx: PageContext, message: string, back?: string): string {
  const link = back ? `<p><a class="link" href="${esc(back)}">${esc(ctx.t.back)}</a></p>` : ''
  return renderPage(ctx, {
    title: ctx.t.errorTitle,
    body: `<p class="error" role="alert">${esc(message)}</p>${link}`,
  })
}

export const IDENTITY_CSS = `*{box-sizing:border-box}
body{margin:0;font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1d2330;background:#f5f6f8}
.split{display:flex;min-height:100vh}
.panel{flex:1;background:linear-gradient(150deg,#1f3a8a,#0f766e);color:#fff;display:flex;flex-direction:column;justify-content:flex-end;padding:48px;position:relative;overflow:hidden}
.panel-image{position:absolute;inset:0;width:100%;height:100%;object-fit:cover;opacity:.35}
.panel-text{position:relative}
.panel-text{max-width:460px}.panel h2{font-size:2rem;margin:0 0 12px}.panel p{opacity:.9;line-height:1.5}
.form-side{flex:1;display:flex;align-items:center;justify-content:center;padding:32px}
.card{width:100%;max-width:380px;background:#fff;border-radius:12px;box-shadow:0 4px 24px rgba(15,23,42,.08);padding:32px}
h1{font-size:1.5rem;margin:0 0 24px}
label{display:block;font-size:.875rem;font-weight:600;margin:16px 0 6px}
input[type=email],input[type=password],input[type=text],input[type=tel]{width:100%;padding:10px 12px;border:1px solid #cbd2dc;border-radius:8px;font-size:1rem}
button{margin-top:24px;width:100%;padding:11px;border:0;border-radius:8px;background:#1f3a8a;color:#fff;font-size:1rem;font-weight:600;cursor:pointer}
button.secondary{background:#e5e7eb;color:#1d2330;margin-top:12px}
a.button{display:block;box-sizing:border-box;margin-top:12px;width:100%;padding:11px;border-radius:8px;background:#e5e7eb;color:#1d2330;text-align:center;text-decoration:none;font-weight:600}
.error{background:#fef2f2;color:#991b1b;border-radius:8px;padding:10px 12px}
.secret{font-family:ui-monospace,monospace;word-break:break-all;background:#f1f5f9;padding:8px;border-radius:6px}
.link{color:#1f3a8a}
@media (max-width:800px){.panel{display:none}}
`
