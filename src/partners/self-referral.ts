import { domainToASCII } from 'node:url'

/**
 * Mailbox providers anyone can get an address at: two addresses there share a domain and
 * nothing else, so for these only the address itself is compared (docs/partners.md
 * "Self-referral"). A provider missing from the list makes two strangers at it look like one
 * organisation, which costs a partner a commission, never pays one wrongly: the list is short
 * on purpose and covers the providers most people use.
 */
const PUBLIC_MAILBOX_DOMAINS: ReadonlySet<string> = new Set([
  'gmail.com',
  'googlemail.com',
  'outlook.com',
  'hotmail.com',
  'hotmail.co.uk',
  'hotmail.fr',
  'live.com',
  'msn.com',
  'yahoo.com',
  'yahoo.co.uk',
  'yahoo.fr',
  'ymail.com',
  'icloud.com',
  'me.com',
  'mac.com',
  'aol.com',
  'proton.me',
  'protonmail.com',
  'pm.me',
  'tutanota.com',
  'fastmail.com',
  'hey.com',
  'zoho.com',
  'mail.com',
  'gmx.com',
  'gmx.net',
  'gmx.de',
  'web.de',
  't-online.de',
  'orange.fr',
  'free.fr',
  'laposte.net',
  'libero.it',
  'yandex.com',
  'yandex.ru',
  'mail.ru',
  'qq.com',
  '163.com',
  '126.com',
])

/**
 * One mailbox's address: lower case, the domain in its ASCII form without a trailing dot, and
 * the local part's `+tag` removed, since most providers deliver `ada+kms@x` to `ada@x` (the
 * rule of the end-user sign-up limit, src/endusers). Dots are kept: only some providers ignore
 * them, and elsewhere they tell people apart.
 */
function mailboxOf(email: string): { local: string; domain: string } {
  const lower = email.trim().toLowerCase()
  const at = lower.lastIndexOf('@')
  const local = at < 0 ? lower : lower.slice(0, at)
  const rawDomain = at < 0 ? '' : lower.slice(at + 1).replace(/\.$/, '')
  const plus = local.indexOf('+')
  return {
    local: plus < 0 ? local : local.slice(0, plus),
    domain: domainToASCII(rawDomain) || rawDomain,
  }
}

/**
 * Whether a sign-up from `signerEmail` is the partner's own (its commission would pay the
 * partner for its own tenant): the same mailbox, or the same domain unless that domain is a
 * public mailbox provider's. Exact domains only: a subdomain may be another organisation's.
 */
export function isSelfReferral(partnerEmail: string, signerEmail: string): boolean {
  const partner = mailboxOf(partnerEmail)
  const signer = mailboxOf(signerEmail)
  if (partner.domain === '' || partner.domain !== signer.domain) return false
  if (partner.local === signer.local) return true
  return !PUBLIC_MAILBOX_DOMAINS.has(partner.domain)
}
