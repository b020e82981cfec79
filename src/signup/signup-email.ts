import { esc } from '../web/layout.ts'
import type { SignupRow } from './signup-store.ts'

type SignupKind = SignupRow['kind']

/** The confirmation e-mail of a sign-up: plain text and simple HTML, the same words. */
export function signupEmail(input: {
  kind: SignupKind
  organizationName: string
  link: string
  expiresAt: Date
}): { subject: string; text: string; html: string } {
  const until = input.expiresAt.toISOString().slice(0, 16).replace('T', ' ')
  const subject =
    input.kind === 'tenant'
      ? `Confirm your e-mail address to create ${input.organizationName}`
      : `Confirm your e-mail address to apply as a partner`
  const action =
    input.kind === 'tenant'
      ? `Confirm the address and create ${input.organizationName}`
      : `Confirm the address and send the partner application of ${input.organizationName}`
  const text = `${action}: ${input.link}

The link works once and until ${until} UTC. If you did not sign up, ignore this e-mail: nothing is created without it.
`
  const html = `<p><a href="${esc(input.link)}">${esc(action)}</a></p>
<p>The link works once and until ${esc(until)} UTC. If you did not sign up, ignore this e-mail: nothing is created without it.</p>
`
  return { subject, text, html }
}
