import assert from 'node:assert/strict'
import { rmSync } from 'node:fs'
import { after, before, describe, test } from 'node:test'
import type { Browser, Page } from 'playwright-core'
import { launchChromium, pageWatchingCsp, screenshot } from '../helpers/browser.ts'
import { axeFindings } from '../helpers/console.ts'
import { newCliMember, signInEnv, startKms } from '../helpers/kms-cli.ts'
import { PROJECT_ROOT, startTestService, type TestService } from '../helpers/service.ts'

/*
 * The pages `kms login` brings up, used as a person at a keyboard would (Tab to a field or button,
 * type, Enter; no clicks): the device flow's code, confirmation and success pages, and the browser
 * flow's sign-in, confirmation and the CLI's own "return to your terminal" page. Each page is
 * scanned by axe (no serious or critical finding), photographed
 * (test-results/screenshots/kms-login-*.png) and loaded under the CSP without a violation.
 */

/** Presses Tab until `selector` has the focus (at most `limit` times); fails if it never does. */
async function tabTo(page: Page, selector: string, limit = 20): Promise<void> {
  for (let presses = 0; presses < limit; presses++) {
    await page.keyboard.press('Tab')
    if (await page.locator(selector).evaluate((element) => element === element.ownerDocument.activeElement))
      return
  }
  assert.fail(`Tab never reached ${selector} on ${page.url()}`)
}

/** The page as it is: accessible, photographed. */
async function look(page: Page, name: string): Promise<void> {
  await page.waitForLoadState('load')
  assert.deepEqual(await axeFindings(page), [], `${name}: axe`)
  await screenshot(page, `kms-login-${name}`)
}

describe('the pages of kms login, keyboard only', { timeout: 240_000 }, () => {
  let service: TestService
  let browser: Browser
  const dirs: string[] = []
  const violations: string[] = []

  before(async () => {
    service = await startTestService()
    browser = await launchChromium()
  })
  after(async () => {
    await browser?.close()
    await service?.stop()
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true })
  })

  async function memberOfNewTenant() {
    const tenant = await service.createTenant()
    const member = await newCliMember(service, tenant.tenantId)
    return { ...member, env: signInEnv(service, tenant.tenantId, dirs).env }
  }

  async function signInByKeyboard(page: Page, member: { email: string; password: string }) {
    await page.waitForSelector('#email')
    await look(page, `${page.url().includes('device') ? 'device' : 'browser'}-sign-in`)
    await tabTo(page, '#email')
    await page.keyboard.type(member.email)
    await tabTo(page, '#password')
    await page.keyboard.type(member.password)
    await page.keyboard.press('Enter')
  }

  test('kms login --device: code, confirmation, sign-in and success pages by keyboard, accessible, no CSP violation', async () => {
    const member = await memberOfNewTenant()
    const run = startKms(['login', '--device'], { cwd: PROJECT_ROOT, env: member.env })
    const [, verificationUri] = await run.waitForStderr(/open (http:\/\/\S+\/oidc\/device) in a browser/)
    const [, userCode] = await run.waitForStderr(/\n {4}([B-Z]{4}-[B-Z]{4})\n/)
    const { page, context } = await pageWatchingCsp(browser, violations)

    await page.goto(verificationUri!)
    await look(page, 'device-code')
    await tabTo(page, '#user_code')
    await page.keyboard.type(userCode!)
    await page.keyboard.press('Enter')

    await page.waitForSelector('#user-code')
    await look(page, 'device-confirm')
    await tabTo(page, 'button[name=confirm]')
    await page.keyboard.press('Enter')

    await signInByKeyboard(page, member)
    await page.waitForSelector('#success', { timeout: 30_000 })
    await look(page, 'device-success')
    await context.close()

    assert.equal((await run.exited).code, 0, run.stderr())
    assert.deepEqual(violations, [], 'no CSP violation')
  })

  test('kms login (browser): sign-in, the confirmation page and the CLI’s own page by keyboard, accessible, no CSP violation', async () => {
    const member = await memberOfNewTenant()
    const run = startKms(['login', '--no-browser'], { cwd: PROJECT_ROOT, env: member.env })
    const [, url] = await run.waitForStderr(/(http:\/\/\S+\/oidc\/auth\?\S+)/)
    const { page, context } = await pageWatchingCsp(browser, violations)

    await page.goto(url!)
    await signInByKeyboard(page, member)
    await page.waitForSelector('button[name=decision][value=allow]')
    await look(page, 'browser-confirm')
    await tabTo(page, 'button[name=decision][value=allow]')
    await page.keyboard.press('Enter')

    await page.waitForURL((at) => at.hostname === '127.0.0.1' && at.pathname === '/callback', {
      timeout: 30_000,
    })
    await look(page, 'browser-back-in-terminal')
    assert.match((await page.textContent('body')) ?? '', /return to your terminal/)
    await context.close()

    assert.equal((await run.exited).code, 0, run.stderr())
    assert.deepEqual(violations, [], 'no CSP violation')
  })
})
