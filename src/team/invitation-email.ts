import type { TenantRole } from '../auth/roles.ts'
import { esc } from '../web/layout.ts'

/**
 * How the e-mail names who invited: their display name and address, or the address alone. The
 * name is the member's own words: control characters (a line break in the subject) become spaces.
 */
export function inviterName(inviter: { email: string; displayName: string | null }): string {
  const name = inviter.displayName?.replace(/[\p{Cc}\p{Zl}\p{Zp}]+/gu, ' ').trim()
  return name ? `${name} (${inviter.email})` : inviter.email
}

/**
 * The invitation e-mail: plain text and simple HTML, the same words. It says who invited (the
 * invitee can tell an expected invitation from an unexpected one) and to which tenant; `inviter`
 * is null when no member made it.
 */
export function invitationEmail(input: {
  tenantName: string
  role: TenantRole
  link: string
  expiresAt: Date
  inviter: string | null
}): {
  subject: string
  text: string
  html: string
} {
  const role = input.role.replace('tenant:', '')
  const until = input.expiresAt.toISOString().slice(0, 16).replace('T', ' ')
  const subject = input.inviter
    ? `${input.inviter} invited you to join ${input.tenantName}`
    : `You are invited to join ${input.tenantName}`
  const who = input.inviter ? `${input.inviter} invited you` : 'You are invited'
  const text = `${who} to join ${input.tenantName} as ${role}.

Accept the invitation: ${input.link}

The link works once and until ${until} UTC. If you did not expect this e-mail, ignore it.
`
  const whoHtml = input.inviter ? `<strong>${esc(input.inviter)}</strong> invited you` : 'You are invited'
  const html = `<p>${whoHtml} to join <strong>${esc(input.tenantName)}</strong> as <strong>${esc(role)}</strong>.</p>
<p><a href="${esc(input.link)}">Accept the invitation</a></p>
<p>The link works once and until ${esc(until)} UTC. If you did not expect this e-mail, ignore it.</p>
`
  return { subject, text, html }
}
