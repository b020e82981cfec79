import assert from 'node:assert/strict'
import * as oidc from 'openid-client'
import type { TestService } from './service.ts'
import { waitFor } from './service.ts'
import { type ConsoleClient, CookieJar, csrfOf, formActionOf, page } from './sign-in.ts'
import { type TestSmtp, textOf } from './smtp.ts'

/** An openid-client configuration for a tenant's application (public: PKCE only; else its secret). */
export async function applicationClient(
  baseUrl: string,
  clientId: string,
  redirectUri: string,
  clientSecret?: string,
): Promise<ConsoleClient> {
  const config = await oidc.discovery(
    new URL(baseUrl),
    clientId,
    clientSecret,
    clientSecret ? oidc.ClientSecretBasic(clientSecret) : oidc.None(),
    { execute: [oidc.allowInsecureRequests] },
  )
  return { config, redirectUri }
}

const LINK = /(http:\/\/[^\s"<>]+\/(?:reset-password|set-up-account|confirm-sign-up)\?[^\s"<>]+)/

/** The newest reset, set-up or sign-up (`/confirm-sign-up`) link e-mailed to `email` after `seen` messages. */
export async function linkMailedTo(smtp: TestSmtp, email: string, seen = 0): Promise<URL> {
  const mine = () => smtp.messages.filter((m) => m.to.some((to) => to.toLowerCase() === email.toLowerCase()))
  await waitFor(() => mine().length > seen, `an e-mail to ${email}`)
  const text = textOf(mine().at(-1)!)
  const match = LINK.exec(text)
  assert.ok(match, `a link in the e-mail:\n${text}`)
  return new URL(match[1]!.replace(/&amp;/g, '&'))
}

/** Opens a link's page and chooses the password there, as a person would. Returns the last page. */
export async function choosePassword(link: URL, password: string, repeat = password) {
  const jar = new CookieJar()
  const shown = await page(jar, link)
  if (shown.status !== 200) return shown
  const form: Record<string, string> = { csrf: csrfOf(shown.html), password, repeat }
  for (const name of ['userId', 'applicationId', 'token']) {
    const value = new RegExp(`name="${name}" value="([^"]+)"`).exec(shown.html)?.[1]
    if (value) form[name] = value
  }
  return page(jar, new URL(formActionOf(shown.html), link), { form })
}

let counter = 0

/**
 * An end-user of the application with a password, made the way a tenant does: create without
 * password (the set-up link e-mailed), then the set-up page.
 */
export async function endUserWithPassword(
  service: TestService,
  smtp: TestSmtp,
  key: string,
  applicationId: string,
): Promise<{ id: string; email: string; password: string }> {
  const email = `user-${process.pid}-${++counter}-${Date.now()}@example.com`
  const password = `end-user password ${counter}`
  const created = await service.request('POST', '/api/v1/endusers/create-without-password', {
    key,
    body: { email, applicationId },
  })
  assert.equal(created.status, 201, created.text)
  const saved = await choosePassword(await linkMailedTo(smtp, email), password)
  assert.equal(saved.status, 200, saved.html.slice(0, 500))
  return { id: created.body.id as string, email, password }
}
