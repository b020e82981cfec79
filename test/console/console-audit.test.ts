import assert from 'node:assert/strict'
import { readFile } from 'node:fs/promises'
import { after, before, describe, test } from 'node:test'
import type { Page } from 'playwright-core'
import { scopesOfRole } from '../../src/auth/roles.ts'
import {
  assertAccessible,
  type ConsoleHarness,
  type ConsoleMember,
  screenshotBothThemes,
  startConsoleHarness,
} from '../helpers/console.ts'
import { waitFor } from '../helpers/service.ts'

interface AuditRecord {
  id: string
  occurredAt: string
  actor: string
  action: string
  resource: string | null
  keyVersion: number | null
  outcome: 'success' | 'failure' | 'denied'
  requestId: string | null
  clientIp: string | null
  details: Record<string, unknown> | null
}

/** The console's Audit log page: the list, its filters in the URL, a record's details, the export. */
describe('console audit log', () => {
  let h: ConsoleHarness
  let tenant: { tenantId: string; apiKeyId: string; key: string }
  let owner: ConsoleMember
  let keyId: string

  /** Every record of the tenant matching the query, newest first, through the API's cursor. */
  const apiRecords = async (query: Record<string, string> = {}): Promise<AuditRecord[]> => {
    const records: AuditRecord[] = []
    let cursor: string | null = null
    do {
      const params = new URLSearchParams({ ...query, limit: '500', ...(cursor ? { cursor } : {}) })
      const res = await h.service.request('GET', `/api/v1/audit?${params}`, { key: tenant.key })
      assert.equal(res.status, 200, res.text)
      records.push(...res.body.data)
      cursor = res.body.nextCursor
    } while (cursor)
    return records
  }

  const table = (page: Page) => page.getByRole('table', { name: 'Audit records, newest first' })
  /**
   * A filter of the URL as the console reads it. The router writes a search value as JSON when it
   * would otherwise read back as something else: an actor filter `216413e3` (a number in JSON, as
   * the first 8 hex digits of an API key's id are about once in 30) is in the URL as
   * `actor=%22216413e3%22`. A value that reads as anything but text is no filter for the console.
   */
  const urlFilter = (url: URL, name: string): string | null => {
    const raw = url.searchParams.get(name)
    if (raw === null) return null
    try {
      const value: unknown = JSON.parse(raw)
      return typeof value === 'string' ? value : null
    } catch {
      return raw
    }
  }
  /**
   * Waits until the console shows who the actors are (the API key's name beside its id, read
   * beside the records): each row then has its final height, so a click below or on a row lands
   * where it was aimed instead of on a row that grew under the pointer.
   */
  const namesShown = (page: Page) =>
    table(page)
      .getByText(/^API key “/)
      .first()
      .waitFor()
  /**
   * Clears the filters: the URL loses them, and the page takes the empty filters (its Clear
   * button goes with them, and the form's fields are emptied in the same render) before the
   * test edits the form again.
   */
  const clearFilters = async (page: Page) => {
    const clear = page.getByRole('button', { name: 'Clear filters' })
    await clear.click()
    await page.waitForURL((url) =>
      ['action', 'actor', 'resource', 'outcome', 'from', 'to', 'page'].every(
        (name) => !url.searchParams.has(name),
      ),
    )
    await clear.waitFor({ state: 'hidden' })
  }
  /** The text of one column of the table's rows (1: time, 2: actor, 3: action, 4: resource, 5: outcome). */
  const column = (page: Page, n: number) =>
    table(page).locator(`tbody tr td:nth-child(${n})`).allTextContents()
  const waitForColumn = (page: Page, n: number, expected: string[], what: string) =>
    waitFor(
      async () => JSON.stringify(await column(page, n)) === JSON.stringify(expected),
      what,
      60_000,
    ).catch(async (error) => {
      assert.deepEqual(await column(page, n), expected, `${what}: ${String(error)}`)
    })

  before(async () => {
    h = await startConsoleHarness()
    tenant = await h.service.createTenant()
    owner = await h.member(tenant.tenantId, 'tenant:owner')
    // Records made with the tenant's API key: a key created and rotated, encryptions, a failing decrypt.
    const created = await h.service.request('POST', '/api/v1/keys', {
      key: tenant.key,
      body: { name: 'audit-console-key', keyType: 'Encryption', algorithm: 'ML-KEM-768' },
    })
    assert.equal(created.status, 201, created.text)
    keyId = created.body.id
    const rotated = await h.service.request('POST', `/api/v1/keys/${keyId}/rotate`, { key: tenant.key })
    assert.equal(rotated.status, 200, rotated.text)
    let envelope: Record<string, unknown> = {}
    // More than a page (50) of records, so the list has a second page.
    for (let i = 0; i < 55; i++) {
      const encrypted = await h.service.request('POST', '/api/v1/encrypt', {
        key: tenant.key,
        body: { keyId, plaintext: Buffer.from(`audit ${i}`).toString('base64'), context: 'audit' },
      })
      assert.equal(encrypted.status, 200, encrypted.text)
      envelope = encrypted.body
    }
    const failed = await h.service.request('POST', '/api/v1/decrypt', {
      key: tenant.key,
      body: { ...envelope, context: 'another context' },
    })
    assert.equal(failed.status, 400, failed.text)
    assert.equal(failed.body.error, 'decryption_failed')
  })
  after(async () => {
    await h?.stop()
  })

  test('an owner reads the log, pages through it, filters by action (in the URL, kept on reload), outcome, actor and time', async () => {
    const page = await h.newPage()
    await h.signIn(page, owner, { tenantId: tenant.tenantId, path: '/console/audit' })
    const all = await apiRecords()
    assert.ok(all.length > 50, `more than a page of records (${all.length})`)
    const creation = all.find((record) => record.resource?.includes(keyId) && /create/.test(record.action))
    assert.ok(creation, 'the key creation is recorded')
    const createAction = creation.action
    await page.getByRole('heading', { level: 1, name: 'Audit log' }).waitFor()
    // The newest page: 50 records, newest first, as the API lists them.
    await waitForColumn(
      page,
      3,
      all.slice(0, 50).map((record) => record.action),
      'the first page',
    )
    await page.getByText('Records 1–50, newest first.').waitFor()
    await assertAccessible(page, 'the audit log')
    await screenshotBothThemes(page, 'audit-list')

    // The second page: the rest, reached through the first page's cursor; the page is in the URL.
    await namesShown(page)
    await page.getByRole('navigation', { name: 'Pages' }).getByRole('button', { name: 'Next' }).click()
    await page.waitForURL(/[?&]page=2/)
    await waitForColumn(
      page,
      3,
      all.slice(50, 100).map((record) => record.action),
      'the second page',
    )
    await page.reload()
    await page.waitForSelector('nav[aria-label="Console"]')
    await waitForColumn(
      page,
      3,
      all.slice(50, 100).map((record) => record.action),
      'the second page after a reload',
    )
    assert.equal(
      await page
        .getByRole('navigation', { name: 'Pages' })
        .getByRole('button', { name: 'Next' })
        .isDisabled(),
      true,
    )

    // Filter by the key-creation action: Enter applies it, the URL carries it, the page resets.
    const action = page.getByLabel('Action', { exact: true })
    await action.fill(createAction)
    await action.press('Enter')
    await page.waitForURL((url) => urlFilter(url, 'action') === createAction)
    assert.equal(new URL(page.url()).searchParams.get('page'), null)
    const created = await apiRecords({ action: createAction })
    assert.equal(created.length, 1)
    await waitForColumn(page, 3, [createAction], 'only the key creation')
    assert.deepEqual(await column(page, 4), [creation.resource])
    await assertAccessible(page, 'the audit log filtered by action')
    await screenshotBothThemes(page, 'audit-filtered')
    await page.reload()
    await page.waitForSelector('nav[aria-label="Console"]')
    assert.equal(await page.getByLabel('Action', { exact: true }).inputValue(), createAction)
    await waitForColumn(page, 3, [createAction], 'the action filter after a reload')

    // Clear, then only the failures: the failed decrypt.
    await clearFilters(page)
    assert.equal(await page.getByLabel('Action', { exact: true }).inputValue(), '')
    const outcome = page.getByRole('button', { name: /Outcome/ })
    await outcome.click()
    await page.getByRole('option', { name: /^Failure/ }).click()
    // The choice is in the form (the select shows it) before it is applied.
    await outcome.filter({ hasText: /^Failure/ }).waitFor()
    await page.getByRole('button', { name: 'Apply filters' }).click()
    await page.waitForURL((url) => urlFilter(url, 'outcome') === 'failure')
    const failures = await apiRecords({ outcome: 'failure' })
    assert.ok(failures.length >= 1)
    assert.ok(failures.every((record) => record.outcome === 'failure'))
    assert.ok(failures.some((record) => record.action === 'crypto.decrypt'))
    await waitForColumn(
      page,
      3,
      failures.map((record) => record.action),
      'only the failures',
    )
    assert.deepEqual(
      await column(page, 5),
      failures.map(() => 'Failure'),
    )

    // Actor: the tenant's API key, matched on part of the actor by the console.
    await clearFilters(page)
    const actorPart = tenant.apiKeyId.slice(0, 8)
    await page.getByLabel('Actor', { exact: true }).fill(actorPart)
    await page.getByRole('button', { name: 'Apply filters' }).click()
    await page.waitForURL((url) => urlFilter(url, 'actor') === actorPart)
    const byKey = all.filter((record) => record.actor.includes(actorPart))
    assert.ok(byKey.length > 50)
    await waitForColumn(
      page,
      3,
      byKey.slice(0, 50).map((record) => record.action),
      'the API key’s records',
    )
    for (const actor of await column(page, 2)) assert.match(actor, new RegExp(tenant.apiKeyId))

    // A filter that would read back as a number (JSON-quoted in the URL by the router) stays the
    // text typed, whatever the API key's id above happened to be: no record has this resource.
    await clearFilters(page)
    await page.getByLabel('Resource', { exact: true }).fill('12345678')
    await page.getByRole('button', { name: 'Apply filters' }).click()
    await page.waitForURL((url) => urlFilter(url, 'resource') === '12345678')
    await page.getByText('No records match these filters.').waitFor()
    assert.equal(await page.getByLabel('Resource', { exact: true }).inputValue(), '12345678')
    // The same filter typed into the address bar, unquoted: still the text, not dropped.
    await page.goto(`${h.service.baseUrl}/console/audit?resource=12345678`)
    await page.waitForSelector('nav[aria-label="Console"]')
    assert.equal(await page.getByLabel('Resource', { exact: true }).inputValue(), '12345678')
    await page.getByText('No records match these filters.').waitFor()

    // Time: "To" before "From" is refused in the form; a range in the future has no records.
    await clearFilters(page)
    await page.getByLabel('From', { exact: true }).fill('2099-01-02T00:00')
    await page.getByLabel('To', { exact: true }).fill('2099-01-01T00:00')
    await page.getByRole('button', { name: 'Apply filters' }).click()
    await page.getByText('Must not be before “From”').waitFor()
    assert.equal(new URL(page.url()).searchParams.has('from'), false)
    await page.getByLabel('To', { exact: true }).fill('2099-01-03T00:00')
    await page.getByRole('button', { name: 'Apply filters' }).click()
    await page.waitForURL((url) => urlFilter(url, 'from') !== null && urlFilter(url, 'to') !== null)
    const from = urlFilter(new URL(page.url()), 'from')!
    const to = urlFilter(new URL(page.url()), 'to')!
    assert.equal(new Date(from).getTime(), new Date('2099-01-02T00:00').getTime())
    await page.getByText('No records match these filters.').waitFor()
    assert.deepEqual(await apiRecords({ from, to }), [])
    await assertAccessible(page, 'the audit log with no matching record')
    await screenshotBothThemes(page, 'audit-empty')
    // And a range that holds everything so far.
    await page.getByLabel('From', { exact: true }).fill('2000-01-01T00:00')
    await page.getByLabel('To', { exact: true }).fill('2098-01-01T00:00')
    await page.getByLabel('To', { exact: true }).press('Enter')
    await waitForColumn(
      page,
      3,
      all.slice(0, 50).map((record) => record.action),
      'a range holding every record',
    )
  })

  test('an owner opens a record’s details, and exports the filtered records as JSON lines matching the API', async () => {
    const failures = await apiRecords({ outcome: 'failure' })
    const decrypt = failures.find((record) => record.action === 'crypto.decrypt')
    assert.ok(decrypt)
    const page = await h.newPage()
    await h.signIn(page, owner, { tenantId: tenant.tenantId, path: '/console/audit?outcome=failure' })
    await waitForColumn(
      page,
      3,
      failures.map((record) => record.action),
      'the failures',
    )
    assert.match((await page.getByRole('button', { name: /Outcome/ }).textContent()) ?? '', /^Failure/)

    await namesShown(page)
    await page
      .getByRole('button', { name: /^Details of crypto\.decrypt/ })
      .first()
      .click()
    const dialog = page.getByRole('dialog', { name: `Audit record ${decrypt.id}` })
    await dialog.waitFor()
    const text = (await dialog.textContent()) ?? ''
    for (const value of [decrypt.id, decrypt.actor, decrypt.action, decrypt.occurredAt, 'Failure'])
      assert.ok(text.includes(value), `the details show ${value}`)
    for (const value of [decrypt.resource, decrypt.requestId, decrypt.clientIp])
      if (value) assert.ok(text.includes(value), `the details show ${value}`)
    if (decrypt.details && Object.keys(decrypt.details).length > 0)
      assert.deepEqual(JSON.parse((await dialog.locator('pre').textContent()) ?? ''), decrypt.details)
    await assertAccessible(page, 'a record’s details')
    await screenshotBothThemes(page, 'audit-details')
    // "Show only this action" closes the dialog and filters the list.
    await dialog.getByRole('button', { name: 'Show only this action' }).click()
    await dialog.waitFor({ state: 'hidden' })
    await page.waitForURL(
      (url) => urlFilter(url, 'action') === 'crypto.decrypt' && !url.searchParams.has('outcome'),
    )
    assert.equal(await page.getByLabel('Action', { exact: true }).inputValue(), 'crypto.decrypt')

    // Export of the failures: the file holds exactly what the API lists for the same filter.
    await page.goto(`${h.service.baseUrl}/console/audit?outcome=failure`)
    await waitForColumn(
      page,
      3,
      failures.map((record) => record.action),
      'the failures again',
    )
    const [download] = await Promise.all([
      page.waitForEvent('download'),
      page.getByRole('button', { name: 'Export JSON lines' }).click(),
    ])
    assert.match(download.suggestedFilename(), /^audit-\d{4}-\d{2}-\d{2}\.jsonl$/)
    const lines = (await readFile(await download.path(), 'utf8')).split('\n')
    assert.equal(lines.pop(), '', 'the file ends with a newline')
    const exported = lines.map((line) => JSON.parse(line) as AuditRecord)
    assert.ok(exported.every((record) => record.outcome === 'failure'))
    assert.deepEqual(exported, await apiRecords({ outcome: 'failure' }))
    await page
      .getByRole('status')
      .filter({ hasText: `Exported ${exported.length} ${exported.length === 1 ? 'record' : 'records'}` })
      .waitFor()
    await assertAccessible(page, 'the audit log after an export')
    await screenshotBothThemes(page, 'audit-exported')

    // The export of an action: the key's 55 encryptions.
    await page.goto(`${h.service.baseUrl}/console/audit?action=crypto.encrypt`)
    await page.getByText('Records 1–50 matching the filters, newest first.').waitFor()
    const [second] = await Promise.all([
      page.waitForEvent('download'),
      page.getByRole('button', { name: 'Export JSON lines' }).click(),
    ])
    const encryptions = (await readFile(await second.path(), 'utf8'))
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as AuditRecord)
    assert.equal(encryptions.length, 55)
    assert.ok(encryptions.every((record) => record.action === 'crypto.encrypt'))
    assert.deepEqual(encryptions, await apiRecords({ action: 'crypto.encrypt' }))
  })

  test('a viewer, whose role lacks audit:read, is told so with the API’s refusal', async () => {
    assert.equal(scopesOfRole('tenant:viewer').has('audit:read'), false)
    // The API refuses a caller without audit:read.
    const limited = await h.service.createTenant(['keys:read'])
    const refused = await h.service.request('GET', '/api/v1/audit', { key: limited.key })
    assert.equal(refused.status, 403, refused.text)

    const viewer = await h.member(tenant.tenantId, 'tenant:viewer')
    const page = await h.newPage()
    await h.signIn(page, viewer, { tenantId: tenant.tenantId, path: '/console/audit?action=keys.create' })
    await page.getByRole('heading', { level: 2, name: 'You cannot read the audit log' }).waitFor()
    const alert = await page.getByRole('alert').textContent()
    assert.match(alert ?? '', /audit:read/)
    assert.match(alert ?? '', new RegExp(`\\(${refused.body.error}\\)`))
    assert.equal(await page.getByRole('table').count(), 0)
    assert.equal(await page.getByRole('search').count(), 0)
    const exportButton = page.getByRole('button', { name: 'Export JSON lines' })
    assert.equal(await exportButton.isDisabled(), true)
    await page.getByText('Your role does not include audit:read').waitFor()
    await assertAccessible(page, 'the audit log refused to a viewer')
    await screenshotBothThemes(page, 'audit-no-access')
  })

  test('no Content Security Policy refusal and no uncaught error on any page', () => {
    assert.deepEqual(h.violations, [])
  })
})
