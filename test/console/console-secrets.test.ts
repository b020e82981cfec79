import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import type { Page } from 'playwright-core'
import {
  assertAccessible,
  type ConsoleHarness,
  type ConsoleMember,
  screenshotBothThemes,
  startConsoleHarness,
} from '../helpers/console.ts'
import { type TenantWithKey, waitFor } from '../helpers/service.ts'

const FIRST_VALUE = 'correct-horse-battery-staple-4711'
const SECOND_VALUE = 'staple-battery-horse-correct-0815'

/**
 * Secrets: folders, a secret created, listed without its value, revealed only on demand, updated
 * to a second version, copied without being shown, trashed and restored; a viewer cannot write.
 */
describe('console secrets', () => {
  let h: ConsoleHarness
  let tenant: TenantWithKey
  let owner: ConsoleMember
  let page: Page
  /** Every URL the page requested, to prove what was (not) fetched. */
  const requested: string[] = []
  let folderId = ''
  let secretId = ''

  const call = async (method: string, path: string, body?: unknown) =>
    h.service.request(method, path, { key: tenant.key, ...(body !== undefined ? { body } : {}) })
  /** Requests that read a value: the secret with include=all, or a version with its value. */
  const valueReads = () => requested.filter((url) => /[?&]include=all/.test(url))
  const visibleText = async () => (await page.evaluate('document.body.innerText')) as string

  before(async () => {
    h = await startConsoleHarness()
    tenant = await h.service.createTenant()
    owner = await h.member(tenant.tenantId, 'tenant:owner')
    page = await h.newPage()
    page.on('request', (request) => requested.push(request.url()))
    await h.signIn(page, owner, { tenantId: tenant.tenantId, path: '/console/secrets' })
  })
  after(async () => {
    await h?.stop()
  })

  test('a folder and a secret in it, listed without its value, found by search', async () => {
    await page.getByRole('heading', { level: 1, name: 'Secrets' }).waitFor()
    await page.getByText('No secrets yet.').waitFor()
    await assertAccessible(page, 'Secrets, empty')
    await screenshotBothThemes(page, 'secrets-empty')

    await page.getByRole('button', { name: 'New folder' }).click()
    const folderDialog = page.getByRole('dialog', { name: 'New folder' })
    await folderDialog.getByLabel('Name').fill('production')
    await assertAccessible(page, 'Secrets, the new folder dialog')
    await screenshotBothThemes(page, 'secrets-new-folder')
    await folderDialog.getByRole('button', { name: 'Create folder' }).click()
    await page.getByRole('status').filter({ hasText: 'Folder production created.' }).waitFor()
    const folders = await call('GET', '/api/v1/folders')
    assert.equal(folders.status, 200, folders.text)
    assert.deepEqual(
      folders.body.data.map((folder: { path: string }) => folder.path),
      ['production'],
    )
    folderId = folders.body.data[0].id
    await page.waitForURL((url) => url.searchParams.get('folder') === folderId)
    await page
      .getByRole('navigation', { name: 'Folders' })
      .getByRole('link', { name: 'production' })
      .waitFor()
    assert.equal(
      await page
        .getByRole('navigation', { name: 'Folders' })
        .getByRole('link', { name: 'production' })
        .getAttribute('aria-current'),
      'page',
    )
    await page.getByText('No secrets in production yet.').waitFor()

    await page.getByRole('button', { name: 'New secret' }).click()
    const dialog = page.getByRole('dialog', { name: 'New secret' })
    await dialog.getByLabel('Name').fill('orders-db-password')
    await dialog.getByLabel('Value', { exact: true }).fill(FIRST_VALUE)
    // Masked while typed (the stylesheet), yet no password field a browser would offer to save.
    const valueField = dialog.getByLabel('Value', { exact: true })
    assert.equal(await valueField.getAttribute('type'), 'text')
    assert.equal(await valueField.getAttribute('autocomplete'), 'off')
    assert.equal(
      await valueField.evaluate((input) =>
        (globalThis as unknown as { getComputedStyle(el: unknown): { getPropertyValue(p: string): string } })
          .getComputedStyle(input)
          .getPropertyValue('-webkit-text-security'),
      ),
      'disc',
      'masked while typed',
    )
    await dialog.getByLabel('Description (optional)').fill('PostgreSQL password of the orders service')
    await dialog.getByLabel('Labels (optional)').fill('prod, database')
    // The folder being viewed is preselected.
    assert.match((await dialog.getByRole('button', { name: /Folder/ }).textContent()) ?? '', /production/)
    // The equivalent request shows the body, but not the value until the person shows it.
    await dialog.getByText('Equivalent request').click()
    const curl = (await dialog.locator('.equivalent-request code').textContent()) ?? ''
    assert.ok(curl.includes('"name":"orders-db-password"'), curl)
    assert.ok(curl.includes(`"folderId":"${folderId}"`), curl)
    assert.ok(curl.includes('"labels":["prod","database"]'), curl)
    assert.ok(!curl.includes(FIRST_VALUE), curl)
    await assertAccessible(page, 'Secrets, the new secret dialog')
    await screenshotBothThemes(page, 'secrets-new-secret')
    await dialog.getByRole('button', { name: 'Create secret' }).click()
    await page.getByRole('status').filter({ hasText: 'orders-db-password created (version 1).' }).waitFor()
    await dialog.waitFor({ state: 'detached' })

    const table = page.getByRole('table', { name: 'Secrets: production' })
    await table.getByRole('link', { name: 'orders-db-password' }).waitFor()
    await table.getByText('PostgreSQL password of the orders service').waitFor()
    const stored = await call('GET', `/api/v1/secrets?folderId=${folderId}&include=all`)
    assert.equal(stored.body.total, 1)
    assert.equal(stored.body.data[0].name, 'orders-db-password')
    assert.equal(stored.body.data[0].value, FIRST_VALUE)
    assert.deepEqual(stored.body.data[0].labels, ['prod', 'database'])
    secretId = stored.body.data[0].id
    // Listed without its value: not on the page, and never requested.
    assert.ok(!(await visibleText()).includes(FIRST_VALUE))
    assert.deepEqual(valueReads(), [])
    assert.ok(
      requested.some((url) => url.includes('/api/v1/secrets?') && url.includes('include=metadata')),
      'the list asks for the metadata projection',
    )
    await assertAccessible(page, 'Secrets, the list')
    await screenshotBothThemes(page, 'secrets-list')

    // Search (in the URL), with an empty result, then cleared.
    await page.getByRole('navigation', { name: 'Folders' }).getByRole('link', { name: 'All folders' }).click()
    await page.getByRole('table', { name: 'Secrets: All folders' }).waitFor()
    await page.getByLabel('Search').fill('orders')
    await page.getByLabel('Search').press('Enter')
    await page.waitForURL((url) => url.searchParams.get('q') === 'orders')
    await page.getByRole('table').getByRole('link', { name: 'orders-db-password' }).waitFor()
    await page.getByLabel('Search').fill('billing')
    await page.getByRole('button', { name: 'Search', exact: true }).click()
    await page.getByText('No secret matches “billing” in All folders.').waitFor()
    await screenshotBothThemes(page, 'secrets-search-empty')
    await page.getByRole('button', { name: 'Clear' }).click()
    await page.waitForURL((url) => !url.searchParams.has('q'))
    await page.getByRole('table').getByRole('link', { name: 'orders-db-password' }).waitFor()
  })

  test('the detail: the value is fetched only on Reveal, a new version, versions, history, copy', async () => {
    await page.getByRole('table').getByRole('link', { name: 'orders-db-password' }).click()
    await page.getByRole('heading', { level: 1, name: 'orders-db-password' }).waitFor()
    await page.getByRole('table', { name: 'Versions of the value' }).waitFor()
    await page.getByRole('table', { name: 'History of the secret' }).getByText('Created').waitFor()
    assert.ok(!(await visibleText()).includes(FIRST_VALUE), 'hidden on load')
    assert.deepEqual(valueReads(), [], 'not fetched on load')
    await assertAccessible(page, 'A secret, value hidden')
    await screenshotBothThemes(page, 'secret-detail-hidden')

    await page.getByRole('button', { name: 'Reveal', exact: true }).click()
    await page.getByText(FIRST_VALUE, { exact: true }).waitFor()
    assert.equal(valueReads().length, 1)
    assert.match(valueReads()[0]!, new RegExp(`/api/v1/secrets/${secretId}\\?include=all`))
    await assertAccessible(page, 'A secret, value revealed')
    await screenshotBothThemes(page, 'secret-detail-revealed')
    await page.getByRole('button', { name: 'Hide', exact: true }).click()
    await page.getByRole('button', { name: 'Reveal', exact: true }).waitFor()
    assert.ok(!(await visibleText()).includes(FIRST_VALUE), 'hidden again')

    // A new value is version 2.
    await page.getByLabel('New value').fill(SECOND_VALUE)
    await page.getByRole('button', { name: 'Save new version' }).click()
    await page.getByRole('status').filter({ hasText: 'Saved: the value is now version 2.' }).waitFor()
    const now = await call('GET', `/api/v1/secrets/${secretId}?include=all`)
    assert.equal(now.body.version, 2)
    assert.equal(now.body.value, SECOND_VALUE)
    const versions = page.getByRole('table', { name: 'Versions of the value' })
    await versions.getByRole('row').nth(2).waitFor()
    assert.equal(await versions.getByRole('row').count(), 3, 'a header and two versions')
    assert.match((await versions.getByRole('row').nth(1).textContent()) ?? '', /^2\s*Current/)
    // The history, from the audit log: created, changed, the value read.
    const history = page.getByRole('table', { name: 'History of the secret' })
    await history.getByText('Changed', { exact: true }).waitFor()
    await history.getByText('Value read', { exact: true }).first().waitFor()
    assert.ok(!(await visibleText()).includes(SECOND_VALUE))

    // Copy without revealing: the value reaches the clipboard, never the page.
    const before = valueReads().length
    await page.getByRole('button', { name: 'Copy value' }).click()
    await page.getByRole('status').filter({ hasText: 'Copied' }).waitFor()
    assert.equal(await page.evaluate('navigator.clipboard.readText()'), SECOND_VALUE)
    assert.equal(valueReads().length, before + 1)
    assert.ok(!(await visibleText()).includes(SECOND_VALUE), 'copied, not shown')

    // An older version, revealed on its own.
    await versions.getByRole('button', { name: 'Reveal version 1' }).click()
    await versions.getByText(FIRST_VALUE, { exact: true }).waitFor()
    assert.ok(requested.some((url) => url.includes(`/api/v1/secrets/${secretId}/versions/1?include=all`)))
    await assertAccessible(page, 'A secret, with version 1 revealed')
    await screenshotBothThemes(page, 'secret-detail-versions')
    await versions.getByRole('button', { name: 'Hide version 1' }).click()
    await versions.getByRole('button', { name: 'Reveal version 1' }).waitFor()

    // Details edited through the dialog: the API gets only what changed.
    await page.getByRole('button', { name: 'Edit details' }).click()
    const edit = page.getByRole('dialog', { name: 'Edit orders-db-password' })
    await edit.getByLabel('Description').fill('Orders database, primary')
    await edit.getByText('Equivalent request').click()
    assert.equal(
      (await edit.locator('.equivalent-request code').textContent())?.match(/-d '(.*)'$/)?.[1],
      JSON.stringify({ description: 'Orders database, primary' }),
    )
    await assertAccessible(page, 'A secret, the edit dialog')
    await screenshotBothThemes(page, 'secret-edit')
    await edit.getByRole('button', { name: 'Save changes' }).click()
    await page.getByRole('status').filter({ hasText: 'The details were saved.' }).waitFor()
    const edited = await call('GET', `/api/v1/secrets/${secretId}?include=metadata`)
    assert.equal(edited.body.description, 'Orders database, primary')
    assert.equal(edited.body.version, 2, 'no new version without a new value')
  })

  test('moved to the trash and restored, checked through the API each time', async () => {
    await page.getByRole('button', { name: 'Move to trash' }).click()
    const confirm = page.getByRole('dialog', { name: 'Move orders-db-password to the trash?' })
    await confirm.waitFor()
    await assertAccessible(page, 'A secret, the trash confirmation')
    await screenshotBothThemes(page, 'secret-trash-confirm')
    await confirm.getByRole('button', { name: 'Move to trash' }).click()
    await page.getByRole('status').filter({ hasText: 'orders-db-password was moved to the trash.' }).waitFor()
    assert.equal((await call('GET', `/api/v1/secrets/${secretId}`)).status, 404)
    const deleted = await call('GET', '/api/v1/secrets?deleted=true')
    assert.deepEqual(
      deleted.body.data.map((secret: { id: string }) => secret.id),
      [secretId],
    )
    await screenshotBothThemes(page, 'secret-trashed')

    await page.getByRole('link', { name: 'Open the trash' }).click()
    await page.waitForURL((url) => url.searchParams.get('trash') === 'true')
    const trash = page.getByRole('table', { name: 'Deleted secrets: All folders' })
    await trash.getByRole('cell', { name: 'orders-db-password', exact: true }).waitFor()
    await assertAccessible(page, 'Secrets, the trash')
    await screenshotBothThemes(page, 'secrets-trash')
    await trash.getByRole('button', { name: 'Restore orders-db-password' }).click()
    await page.getByRole('status').filter({ hasText: 'orders-db-password restored.' }).waitFor()
    await page.getByText('The trash is empty.').waitFor()
    const restored = await call('GET', `/api/v1/secrets/${secretId}?include=all`)
    assert.equal(restored.status, 200, restored.text)
    assert.equal(restored.body.value, SECOND_VALUE)
    assert.equal(restored.body.version, 2)
    await waitFor(
      async () => (await call('GET', '/api/v1/secrets?deleted=true')).body.total === 0,
      'the trash to be empty',
    )
  })

  test('a secret with a one-time code seed: the current code is shown when asked, as the API computes it', async () => {
    await page.getByRole('navigation', { name: 'Console' }).getByRole('link', { name: 'Secrets' }).click()
    await page.getByRole('heading', { level: 1, name: 'Secrets' }).waitFor()
    await page.getByRole('button', { name: 'New secret' }).click()
    const dialog = page.getByRole('dialog', { name: 'New secret' })
    await dialog.getByLabel('Name').fill('vpn-login')
    await dialog.getByLabel('Value', { exact: true }).fill('vpn-password-value')
    await dialog.getByLabel('One-time code seed (optional)').fill('not base32!')
    await dialog.getByRole('button', { name: 'Create secret' }).click()
    await dialog.getByText('A Base32 seed (letters A–Z, digits 2–7) or an otpauth:// URI').waitFor()
    await dialog.getByLabel('One-time code seed (optional)').fill('JBSWY3DPEHPK3PXP')
    await dialog.getByRole('button', { name: 'Create secret' }).click()
    await page.getByRole('status').filter({ hasText: 'vpn-login created (version 1).' }).waitFor()
    await page.getByRole('status').getByRole('link', { name: 'vpn-login' }).click()
    await page.getByRole('heading', { level: 1, name: 'vpn-login' }).waitFor()
    const id = new URL(page.url()).pathname.split('/').pop()!
    const code = async () => (await call('GET', `/api/v1/secrets/${id}/totp`)).body.code as string
    const before = await code()
    await page.getByRole('button', { name: 'Show code' }).click()
    const shown = (await page.locator('.secrets-totp-code').textContent()) ?? ''
    const after = await code()
    assert.match(shown, /^\d{6}$/)
    assert.ok([before, after].includes(shown), `${shown} is ${before} or ${after}`)
    await assertAccessible(page, 'A secret with a one-time code')
    await screenshotBothThemes(page, 'secret-detail-totp')
    await page.getByRole('button', { name: 'Hide code' }).click()
    await page.getByRole('button', { name: 'Show code' }).waitFor()
  })

  test('a folder of 21 secrets pages by 20, the page in the URL', async () => {
    const folder = await call('POST', '/api/v1/folders', { name: 'bulk' })
    assert.equal(folder.status, 201, folder.text)
    for (let i = 1; i <= 21; i++) {
      const name = `zz-bulk-${String(i).padStart(2, '0')}`
      const created = await call('POST', '/api/v1/secrets', {
        name,
        value: `v-${i}`,
        folderId: folder.body.id,
      })
      assert.equal(created.status, 201, created.text)
    }
    await page.goto(`${h.service.baseUrl}/console/secrets?folder=${folder.body.id}`)
    const table = page.getByRole('table', { name: 'Secrets: bulk' })
    await table.getByRole('link', { name: 'zz-bulk-01' }).waitFor()
    assert.equal(await table.getByRole('row').count(), 21, 'a header and 20 secrets')
    await page.getByText('Page 1 of 2 · 21 in all').waitFor()
    await page.getByRole('navigation', { name: 'Pages' }).getByRole('button', { name: 'Next' }).click()
    await page.waitForURL((url) => url.searchParams.get('page') === '2')
    await table.getByRole('link', { name: 'zz-bulk-21' }).waitFor()
    assert.equal(await table.getByRole('row').count(), 2)
    await screenshotBothThemes(page, 'secrets-page-2')
    await page.getByRole('navigation', { name: 'Pages' }).getByRole('button', { name: 'Previous' }).click()
    await page.waitForURL((url) => !url.searchParams.has('page'))
    await table.getByRole('link', { name: 'zz-bulk-01' }).waitFor()
  })

  test('a viewer reads but cannot write: every write is disabled with the reason', async () => {
    const viewer = await h.member(tenant.tenantId, 'tenant:viewer')
    const viewerPage = await h.newPage()
    await h.signIn(viewerPage, viewer, { tenantId: tenant.tenantId, path: '/console/secrets' })
    const reason = 'Your role does not include secrets:write'
    const newSecret = viewerPage.getByRole('button', { name: 'New secret' })
    await newSecret.waitFor()
    assert.equal(await newSecret.isDisabled(), true)
    assert.equal(await viewerPage.getByRole('button', { name: 'New folder' }).isDisabled(), true)
    assert.ok((await viewerPage.getByText(reason).count()) >= 2)
    await viewerPage.getByRole('table').getByRole('link', { name: 'orders-db-password' }).waitFor()
    await assertAccessible(viewerPage, 'Secrets as a viewer')
    await screenshotBothThemes(viewerPage, 'secrets-viewer')

    await viewerPage.getByRole('link', { name: 'orders-db-password' }).click()
    await viewerPage.getByRole('heading', { level: 1, name: 'orders-db-password' }).waitFor()
    for (const name of ['Edit details', 'Move to trash', 'Save new version']) {
      assert.equal(await viewerPage.getByRole('button', { name }).isDisabled(), true, name)
    }
    // Reading stays possible (secrets:read); the history needs audit:read.
    await viewerPage.getByRole('button', { name: 'Reveal', exact: true }).click()
    await viewerPage.getByText(SECOND_VALUE, { exact: true }).waitFor()
    await viewerPage.getByText('your role does not include audit:read').waitFor()
    await assertAccessible(viewerPage, 'A secret as a viewer')
    await screenshotBothThemes(viewerPage, 'secret-detail-viewer')
    await viewerPage.context().close()
  })

  test('no Content Security Policy refusal and no uncaught error on any page', () => {
    assert.deepEqual(h.violations, [])
  })
})
