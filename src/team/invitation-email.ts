import type { TenantRole } from '../auth/roles.ts'
import { esc } from '../identity/pages/layout.ts'

/** The invitation e-mail: plain text and simple HTML, the same words. */
export function invitationEmail(input: {
  tenantName: string
  role: TenantRole
  link: string
  expiresAt: Date
}): {
  subject: string
  text: string
  html: string
} {
  const role = input.role.replace('tenant:', '')
  const until = input.expiresAt.toISOString().slice(0, 16).replace('T', ' ')
  const subject = `You are invited to join ${input.tenantName}`
  const text = `You are invited to join ${input.tenantName} as ${role}.

Accept the invitation: ${input.link}

The link works once and until ${until} UTC. If you did not expect this e-mail, ignore it.
`
  const html = `<p>You are invited to join <strong>${esc(input.tenantName)}</strong> as <strong>${esc(role)}</strong>.</p>
<p><a href="${esc(input.link)}">Accept the invitation</a></p>
<p>The link works once and until ${esc(until)} UTC. If you did not expect this e-mail, ignore it.</p>
`
  return { subject, text, html }
}
