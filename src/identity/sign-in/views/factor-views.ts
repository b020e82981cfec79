import { esc, fill, type PageContext, renderPage } from '../../../web/layout.ts'
import type { Step } from '../authorization-gate.ts'
import { alertOf } from './alert.ts'

/** What a second factor's page asks for; each step (../steps/) says which, from the pending login. */
export type FactorPrompt =
  | { kind: 'totp' }
  /** A new authenticator: the secret to type, and the otpauth URI an app on this device opens. */
  | { kind: 'totp-enrol'; secret: string; uri: string }
  /** SMS enrolment's first half: the number a code goes to. */
  | { kind: 'phone' }
  /** A code sent to the address or number (shown masked), which can be sent again. */
  | { kind: 'code'; channel: 'email' | 'sms'; destination: string }

export interface FactorPage {
  uid: string
  step: Step
  prompt: FactorPrompt
  /** A remembered login asked for more. */
  stepUp: boolean
  error?: string | undefined
  /** The step form's CSRF field (purpose: the step). */
  csrf: string
  /** The "send again" form's CSRF field; code prompts only. */
  resendCsrf?: string | undefined
}

/** Enough of an address or number to recognise it, not to learn it. */
const mask = (destination: string) =>
  destination.includes('@')
    ? destination.replace(/^(.)[^@]*(@.*)$/, '$1•••$2')
    : `${destination.slice(0, 3)}•••${destination.slice(-2)}`

const codeField = (ctx: PageContext) => `<label for="code">${esc(ctx.t.code)}</label>
<input id="code" name="code" type="text" inputmode="numeric" autocomplete="one-time-code" pattern="[0-9]{6}" maxlength="6" required>
<button type="submit">${esc(ctx.t.verify)}</button>`

const phoneField = (ctx: PageContext) => `<label for="phone">${esc(ctx.t.phoneNumber)}</label>
<input id="phone" name="phone" type="tel" autocomplete="tel" required maxlength="16" placeholder="+14155550100">
<button type="submit">${esc(ctx.t.sendCode)}</button>`

/** The page of the current step: one form posted to the step, and for codes one to send it again. */
export function renderFactorPage(ctx: PageContext, page: FactorPage): string {
  const uid = esc(page.uid)
  // A remembered login asked for more: say why the page appears although the person is signed in.
  const notice = page.stepUp ? `<p role="status" id="step-up">${esc(ctx.t.stepUp)}</p>` : ''
  const form = (prompt: string, fields: string) =>
    `${alertOf(page.error)}${notice}<p>${prompt}</p><form method="post" action="/sign-in/${uid}/${page.step}">
${page.csrf}
${fields}
</form>`
  const { prompt } = page
  switch (prompt.kind) {
    case 'totp':
      return renderPage(ctx, { title: ctx.t.totpTitle, body: form(esc(ctx.t.totpPrompt), codeField(ctx)) })
    case 'totp-enrol': {
      const text = `${esc(ctx.t.enrolPrompt)}</p>
<p>${esc(ctx.t.secretKey)}:</p><p class="secret" id="totp-secret">${esc(prompt.secret)}</p>
<p><a class="link" href="${esc(prompt.uri)}">${esc(ctx.t.openInApp)}</a>`
      return renderPage(ctx, { title: ctx.t.enrolTitle, body: form(text, codeField(ctx)) })
    }
    case 'phone':
      return renderPage(ctx, {
        title: ctx.t.smsEnrolTitle,
        body: form(esc(ctx.t.smsEnrolPrompt), phoneField(ctx)),
      })
    case 'code': {
      const byEmail = prompt.channel === 'email'
      const text = fill(byEmail ? ctx.t.emailCodePrompt : ctx.t.smsCodePrompt, {
        destination: mask(prompt.destination),
      })
      const resend = `<form method="post" action="/sign-in/${uid}/resend">
${page.resendCsrf ?? ''}
<button type="submit" class="secondary">${esc(ctx.t.resendCode)}</button>
</form>`
      return renderPage(ctx, {
        title: byEmail ? ctx.t.emailCodeTitle : ctx.t.smsCodeTitle,
        body: `${form(text, codeField(ctx))}${resend}`,
      })
    }
  }
}
