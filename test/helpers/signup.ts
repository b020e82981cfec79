import assert from 'node:assert/strict'
import { waitFor } from './service.ts'
import { CookieJar, csrfOf, formActionOf, type PageResponse, page } from './sign-in.ts'
import { type TestSmtp, textOf } from './smtp.ts'

const SIGNUP_LINK = /(http:\/\/[^\s"<>]+\/(?:partners\/)?signup\/confirm\?token=[A-Za-z0-9_-]{43})/

/** The newest sign-up confirmation link e-mailed to `email`, after `seen` earlier messages to it. */
export async function signupLinkMailedTo(smtp: TestSmtp, email: string, seen = 0): Promise<URL> {
  const mine = () => smtp.messages.filter((m) => m.to.some((to) => to.toLowerCase() === email.toLowerCase()))
  await waitFor(() => mine().length > seen, `a sign-up e-mail to ${email}`)
  const text = textOf(mine().at(-1)!)
  const match = SIGNUP_LINK.exec(text)
  assert.ok(match, `a confirmation link in the e-mail:\n${text}`)
  return new URL(match[1]!)
}

/** Opens a sign-up page (a partner's code URL, say) and sends its form, as a person would. */
export async function askToSignUp(
  url: string | URL,
  input: { organizationName: string; email: string },
): Promise<{ form: PageResponse; answer: PageResponse }> {
  const jar = new CookieJar()
  const form = await page(jar, url)
  assert.equal(form.status, 200, form.html)
  const fields: Record<string, string> = { csrf: csrfOf(form.html), ...input }
  const ref = /name="ref" value="([^"]+)"/.exec(form.html)?.[1]
  if (ref) fields['ref'] = ref
  const answer = await page(jar, new URL(formActionOf(form.html), url), { form: fields })
  return { form, answer }
}

/** Opens the e-mailed link and sends the confirmation form with a password (and maybe another name). */
export async function confirmSignup(
  link: URL,
  input: { password: string; organizationName?: string },
): Promise<PageResponse> {
  const jar = new CookieJar()
  const shown = await page(jar, link)
  if (shown.status !== 200) return shown
  const token = /name="token" value="([^"]+)"/.exec(shown.html)?.[1]
  const name = /name="organizationName"[^>]* value="([^"]*)"/.exec(shown.html)?.[1]
  assert.ok(token && name !== undefined, shown.html)
  return page(jar, new URL(formActionOf(shown.html), link), {
    form: {
      csrf: csrfOf(shown.html),
      token,
      organizationName: input.organizationName ?? name.replace(/&amp;/g, '&'),
      password: input.password,
    },
  })
}

/** The id a successful confirmation page shows. */
export const createdIdOf = (html: string, what: 'tenant' | 'partner'): string => {
  const match = new RegExp(`id="${what}-id">([0-9a-f-]{36})<`).exec(html)
  assert.ok(match, html)
  return match[1]!
}
