import assert from 'node:assert/strict'
import { mkdirSync } from 'node:fs'
import { join } from 'node:path'
import AxeBuilder from '@axe-core/playwright'
import type { Browser, Page } from 'playwright-core'
import { buildConsole } from '../../scripts/console-build.ts'
import type { TenantRole } from '../../src/auth/roles.ts'
import { launchChromium } from './browser.ts'
import { PROJECT_ROOT, startTestService, type TestService } from './service.ts'
import { startSmtp, type TestSmtp } from './smtp.ts'

/** Screenshots of the console, each page in both themes: test-results/console/<name>-<theme>.png. */
export const CONSOLE_SCREENSHOTS = join(PROJECT_ROOT, 'test-results', 'console')

export interface ConsoleMember {
  accountId: string
  email: string
  password: string
}

/**
 * The console under test: its production build (made once, shared by the test files that run
 * side by side), a service with its jobs and an SMTP sink, and Debian's Chromium. Every page a
 * test opens records Content Security Policy refusals and uncaught errors in `violations`, which
 * each suite asserts empty at its end.
 */
export interface ConsoleHarness {
  service: TestService
  smtp: TestSmtp
  browser: Browser
  violations: string[]
  /** A team account with a membership of `tenantId` (made through the services). */
  member(tenantId: string, role: TenantRole, email?: string): Promise<ConsoleMember>
  /** A fresh browser context (no cookies) with its page, watched for CSP refusals and errors. */
  newPage(options?: {
    colorScheme?: 'light' | 'dark'
    viewport?: { width: number; height: number }
  }): Promise<Page>
  /**
   * Opens `path` of the console, signs in on the provider's page and waits for the console's
   * shell; with `tenantId`, for that tenant (`?tenant=`).
   */
  signIn(page: Page, member: ConsoleMember, options?: { tenantId?: string; path?: string }): Promise<void>
  stop(): Promise<void>
}

let memberCount = 0

export async function startConsoleHarness(env: Record<string, string> = {}): Promise<ConsoleHarness> {
  await buildConsole()
  const smtp = await startSmtp('accept')
  let service: TestService | undefined
  let browser: Browser
  try {
    service = await startTestService(
      { KMS_SMTP_URL: smtp.url, KMS_SMTP_ATTEMPTS: '1', ...env },
      { jobs: true },
    )
    browser = await launchChromium()
  } catch (error) {
    // What started is stopped, or the test process would never end.
    await service?.stop()
    await smtp.stop()
    throw error
  }
  return harness(service, smtp, browser)
}

function harness(service: TestService, smtp: TestSmtp, browser: Browser): ConsoleHarness {
  const violations: string[] = []
  return {
    service,
    smtp,
    browser,
    violations,
    async member(tenantId, role, email) {
      const address = email ?? `person-${process.pid}-${++memberCount}@example.com`
      const password = `console-password-${memberCount}-long`
      const account = await service.api.services.accounts.createTeamAccount({ email: address, password })
      await service.api.services.team.addMember(
        { tenantId, actor: 'test', requestId: null, clientIp: null },
        { accountId: account.id, role },
      )
      return { accountId: account.id, email: address, password }
    },
    async newPage(options = {}) {
      const context = await browser.newContext({
        locale: 'en-US',
        colorScheme: options.colorScheme ?? 'light',
        viewport: options.viewport ?? { width: 1280, height: 860 },
        permissions: ['clipboard-read', 'clipboard-write'],
      })
      const page = await context.newPage()
      page.on('console', (message) => {
        if (/Content.Security.Policy|Refused to/i.test(message.text())) violations.push(message.text())
      })
      page.on('pageerror', (error) => violations.push(`uncaught: ${error.message}`))
      // Chromium reports CSP refusals as events too (securitypolicyviolation), also for styles.
      await page.addInitScript(
        "document.addEventListener('securitypolicyviolation', (e) => console.error('Refused to load (CSP): ' + e.violatedDirective + ' ' + e.blockedURI))",
      )
      return page
    },
    async signIn(page, member, options = {}) {
      const path = options.path ?? '/console/keys'
      const url = new URL(path, service.baseUrl)
      if (options.tenantId) url.searchParams.set('tenant', options.tenantId)
      await page.goto(url.toString())
      await page.waitForSelector('#email')
      await page.fill('#email', member.email)
      await page.fill('#password', member.password)
      await Promise.all([page.waitForURL(/\/console\//), page.click('button[type=submit]')])
      await page.waitForSelector('nav[aria-label="Console"]')
    },
    async stop() {
      await browser.close().catch(() => {})
      await service.stop()
      await smtp.stop()
    },
  }
}

/** Every serious or critical axe finding on the page as it is now (WCAG 2.1 A and AA rules). */
export async function axeFindings(page: Page): Promise<string[]> {
  const results = await new AxeBuilder({ page } as never)
    .withTags(['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa'])
    .analyze()
  return results.violations
    .filter((violation) => violation.impact === 'serious' || violation.impact === 'critical')
    .map(
      (violation) =>
        `${violation.id} (${violation.impact}): ${violation.help} at ${violation.nodes
          .slice(0, 3)
          .map((node) => node.target.join(' '))
          .join(', ')}`,
    )
}

/** Asserts axe finds nothing serious or critical on the page. */
export async function assertAccessible(page: Page, what: string): Promise<void> {
  const findings = await axeFindings(page)
  assert.deepEqual(findings, [], `axe on ${what}`)
}

/**
 * Screenshots the page as it is in both themes (the console's theme setting, as a person would
 * choose it), then puts the theme back. Answers the two paths.
 */
export async function screenshotBothThemes(page: Page, name: string): Promise<string[]> {
  mkdirSync(CONSOLE_SCREENSHOTS, { recursive: true })
  const paths: string[] = []
  const before = (await page.evaluate("document.documentElement.dataset.theme ?? 'system'")) as string
  for (const theme of ['light', 'dark'] as const) {
    await page.evaluate(`document.documentElement.dataset.theme = '${theme}'`)
    const path = join(CONSOLE_SCREENSHOTS, `${name}-${theme}.png`)
    await page.screenshot({ path, fullPage: true })
    paths.push(path)
  }
  await page.evaluate(
    before === 'light' || before === 'dark'
      ? `document.documentElement.dataset.theme = '${before}'`
      : 'delete document.documentElement.dataset.theme',
  )
  return paths
}

/**
 * Asserts that the instant `at` is `offsetMs` after some moment between `before` and `after`
 * (test clock readings taken around the action that fixed it): an ordering bound that holds
 * however slow the machine is, instead of "about N days from now".
 */
export function assertOffsetBetween(
  at: string,
  offsetMs: number,
  window: { before: number; after: number },
  what: string,
): void {
  const time = Date.parse(at)
  assert.ok(
    time >= window.before + offsetMs && time <= window.after + offsetMs,
    `${what}: ${at} is not ${offsetMs} ms after a moment between ${new Date(window.before).toISOString()} and ${new Date(window.after).toISOString()}`,
  )
}
