import { mkdirSync } from 'node:fs'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { join } from 'node:path'
import { type Browser, type BrowserContext, chromium, type Page, type Response } from 'playwright-core'
import { PROJECT_ROOT } from './service.ts'

/** Debian's Chromium (scripts/ensure-chromium.sh installs it; KMS_CHROMIUM overrides the path). */
export const CHROMIUM = process.env['KMS_CHROMIUM'] ?? '/usr/bin/chromium'
export const SCREENSHOT_DIR = join(PROJECT_ROOT, 'test-results', 'screenshots')

/** Headless, no background network (this machine's network is closed; Chromium would retry forever). */
export async function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--disable-dev-shm-usage',
    ],
  })
}

/** Saves a full-page screenshot as test-results/screenshots/<name>.png and returns its path. */
export async function screenshot(page: Page, name: string): Promise<string> {
  mkdirSync(SCREENSHOT_DIR, { recursive: true })
  const path = join(SCREENSHOT_DIR, `${name}.png`)
  await page.screenshot({ path, fullPage: true })
  return path
}

/** Every HTML document the page loads from `origin`, with its headers, in order. */
export function recordDocuments(
  page: Page,
  origin: string,
): Array<{ url: string; status: number; headers: Record<string, string> }> {
  const documents: Array<{ url: string; status: number; headers: Record<string, string> }> = []
  page.on('response', (response: Response) => {
    if (response.request().resourceType() !== 'document' || !response.url().startsWith(origin)) return
    documents.push({ url: response.url(), status: response.status(), headers: response.headers() })
  })
  return documents
}

/**
 * A page in a fresh browser context (no cookies shared with other pages) whose Content Security
 * Policy refusals are collected in `violations`: each suite asserts it stays empty.
 */
export async function pageWatchingCsp(
  browser: Browser,
  violations: string[],
  locale = 'en-US',
): Promise<{ page: Page; context: BrowserContext }> {
  const context = await browser.newContext({ locale })
  const page = await context.newPage()
  page.on('console', (message) => {
    if (/Content.Security.Policy|Refused to/i.test(message.text())) violations.push(message.text())
  })
  return { page, context }
}

/** A client's own site on another origin than the service: its redirect URIs land here. */
export async function startClientSite(title: string): Promise<{ origin: string; close(): Promise<void> }> {
  const server = createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/html' })
    res.end(`<!DOCTYPE html><title>${title}</title><p>Back at ${title}.</p>`)
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()))
  return {
    origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  }
}
