import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import type { Page } from 'playwright-core'
import { assertOffsetBetween, type ConsoleHarness, startConsoleHarness } from '../helpers/console.ts'

/**
 * One flow end to end with the keyboard only (issue 34, acceptance 2): sign in, create an
 * ML-KEM-768 key with the 90-day preset, rotate it, encrypt and decrypt text in "Try it", find
 * the rotation in the audit log. No
 * click, no mouse: every step is Tab, Shift+Tab, arrows, typing, Enter or Space, and the page
 * counts pointer events to prove none happened.
 */

const DAY_MS = 24 * 60 * 60_000
const MAX_TABS = 120

/** What has the focus: its role and accessible name, as far as a test needs them. */
async function focused(page: Page): Promise<{ role: string; name: string; checked: boolean }> {
  return (await page.evaluate(`(() => {
    const el = document.activeElement
    if (!el || el === document.body) return { role: 'body', name: '', checked: false }
    const byIds = (ids) => ids.split(/\\s+/).map((id) => document.getElementById(id)?.textContent ?? '').join(' ')
    const name = el.getAttribute('aria-label')
      ?? (el.getAttribute('aria-labelledby') ? byIds(el.getAttribute('aria-labelledby')) : null)
      ?? (el.labels && el.labels[0] ? el.labels[0].textContent : null)
      ?? el.textContent ?? ''
    const role = el.getAttribute('role') ?? el.tagName.toLowerCase()
    return { role, name: name.replace(/\\s+/g, ' ').trim(), checked: el.checked === true }
  })()`)) as { role: string; name: string; checked: boolean }
}

/** Presses Tab (or Shift+Tab) until the focused element's name matches; fails after MAX_TABS. */
async function tabTo(
  page: Page,
  name: RegExp,
  options: { back?: boolean; role?: string } = {},
): Promise<void> {
  const seen: string[] = []
  for (let i = 0; i < MAX_TABS; i++) {
    await page.keyboard.press(options.back ? 'Shift+Tab' : 'Tab')
    const now = await focused(page)
    seen.push(`${now.role}:${now.name.slice(0, 40)}`)
    if (name.test(now.name) && (!options.role || now.role === options.role)) return
  }
  throw new Error(
    `no focusable element named ${name} within ${MAX_TABS} tabs; seen: ${seen.slice(-25).join(' | ')}`,
  )
}

describe('the console with the keyboard only', () => {
  let h: ConsoleHarness
  before(async () => {
    h = await startConsoleHarness()
  })
  after(async () => {
    await h?.stop()
  })

  test('sign in, create an ML-KEM-768 key with the 90-day preset, rotate it, encrypt and decrypt in Try it, find the rotation in the audit log', async () => {
    const tenant = await h.service.createTenant()
    const person = await h.member(tenant.tenantId, 'tenant:admin')
    const page = await h.newPage()
    await page.addInitScript(
      "window.__pointerEvents = 0; for (const type of ['pointerdown', 'mousedown', 'click']) addEventListener(type, (e) => { if (e.isTrusted && (e.pointerType === 'mouse' || e.detail > 0)) window.__pointerEvents++ }, true)",
    )

    // The provider's sign-in page.
    await page.goto(`${h.service.baseUrl}/console/keys?tenant=${tenant.tenantId}`)
    await page.waitForSelector('#email')
    await tabTo(page, /E-mail/)
    await page.keyboard.type(person.email)
    await tabTo(page, /Password/)
    await page.keyboard.type(person.password)
    await Promise.all([page.waitForURL(/\/console\/keys/), page.keyboard.press('Enter')])
    await page.waitForSelector('nav[aria-label="Console"]')

    // The first Tab stop skips to the content.
    await page.keyboard.press('Tab')
    assert.equal((await focused(page)).name, 'Skip to content')
    await page.keyboard.press('Enter')

    // Keys → Create key.
    await tabTo(page, /^Create key$/)
    await Promise.all([page.waitForURL(/\/console\/keys\/new/), page.keyboard.press('Enter')])
    await page.locator('h1', { hasText: 'Create a key' }).waitFor()
    await tabTo(page, /^Name/, { role: 'input' })
    await page.keyboard.type('keyboard-key')
    // The algorithm: open the list, type its name, choose it.
    await tabTo(page, /Algorithm$/, { role: 'button' })
    await page.keyboard.press('Enter')
    await page.getByRole('listbox').waitFor()
    await page.keyboard.type('ML-KEM-1024')
    await page.keyboard.press('Enter')
    await page.getByRole('button', { name: /ML-KEM-1024.*Algorithm/ }).waitFor()
    await page.keyboard.press('ArrowDown') // reopens the list on the button (react-aria)
    await page.getByRole('listbox').waitFor()
    await page.keyboard.type('ML-KEM-768')
    await page.keyboard.press('Enter')
    await page.getByRole('button', { name: /ML-KEM-768.*Algorithm/ }).waitFor()
    // The expiry presets are radio buttons: arrows move the choice. The form fixes the expiry
    // between the choice and the submit: `expiry` brackets those moments.
    const expiry = { before: Date.now(), after: 0 }
    await tabTo(page, /days|year|Custom|No expiry/i, { role: 'input' })
    for (let i = 0; i < 6 && !/^90 days$/.test((await focused(page)).name); i++)
      await page.keyboard.press('ArrowDown')
    const preset = await focused(page)
    assert.equal(preset.name, '90 days')
    assert.ok(preset.checked, 'the 90-day preset is chosen')
    await tabTo(page, /^Create key$/)
    await Promise.all([page.waitForURL(/\/console\/keys\/[0-9a-f-]{36}$/), page.keyboard.press('Enter')])
    expiry.after = Date.now()
    const keyId = /\/keys\/([0-9a-f-]{36})$/.exec(page.url())![1]!

    // Rotate, confirming in the dialog; focus returns to the page.
    await tabTo(page, /^Rotate now/)
    await page.keyboard.press('Enter')
    await page.getByRole('dialog').waitFor()
    await tabTo(page, /^Rotate key$/)
    await page.keyboard.press('Enter')
    await page.getByRole('dialog').waitFor({ state: 'detached' })
    await page.getByText('version 2 is now current').waitFor()

    // Try it, from the navigation (behind the page's content: Shift+Tab).
    await tabTo(page, /^Try it$/, { back: true })
    await Promise.all([page.waitForURL(/\/console\/try/), page.keyboard.press('Enter')])
    await tabTo(page, /(^|\s)Key$/, { role: 'button' })
    await page.keyboard.press('Enter')
    await page.getByRole('listbox').waitFor()
    await page.keyboard.type('keyboard-key')
    await page.keyboard.press('Enter')
    await page.getByRole('tab', { name: 'Encrypt' }).waitFor()
    await tabTo(page, /^Text to encrypt/)
    await page.keyboard.type('typed without a mouse')
    await tabTo(page, /^Encrypt$/, { role: 'button' })
    await page.keyboard.press('Enter')
    await page.getByText(/Encrypted with keyboard-key, key version 2/).waitFor()
    await tabTo(page, /^Decrypt this$/)
    await page.keyboard.press('Enter')
    await tabTo(page, /^Decrypt$/, { role: 'button' })
    await page.keyboard.press('Enter')
    await page.getByText(/Decrypted with key version 2/).waitFor()
    assert.equal(await page.locator('pre.try-output code').last().textContent(), 'typed without a mouse')

    // The audit log, filtered to the rotation just made: the person's own record of it.
    await tabTo(page, /^Audit log$/, { back: true })
    await Promise.all([page.waitForURL(/\/console\/audit/), page.keyboard.press('Enter')])
    await tabTo(page, /^Action/, { role: 'input' })
    await page.keyboard.type('keys.rotate')
    await Promise.all([
      page.waitForURL((url) => url.searchParams.get('action') === 'keys.rotate'),
      page.keyboard.press('Enter'),
    ])
    const rows = page.locator('table tbody tr')
    await rows.filter({ hasText: keyId }).first().waitFor()
    const actions = await rows.locator('td:nth-child(3)').allTextContents()
    assert.deepEqual([...new Set(actions.map((text) => text.trim()))], ['keys.rotate'])
    assert.equal(actions.length, 1, 'one rotation in this tenant')

    assert.equal(await page.evaluate('window.__pointerEvents'), 0, 'no pointer event on the console page')
    // The effect, through the API.
    const key = await h.service.request('GET', `/api/v1/keys/${keyId}`, { key: tenant.key })
    assert.equal(key.status, 200)
    assert.equal(key.body.algorithm, 'ML-KEM-768')
    assert.equal(key.body.version, 2)
    assertOffsetBetween(key.body.expiresAt, 90 * DAY_MS, expiry, 'expiresAt')
  })

  test('no Content Security Policy refusal and no uncaught error', () => {
    assert.deepEqual(h.violations, [])
  })
})
