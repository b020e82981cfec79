import { mkdirSync } from 'node:fs'
import { join } from 'node:path'
import { type Browser, chromium, type Page, type Response } from 'playwright-core'
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
