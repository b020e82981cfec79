import assert from 'node:assert/strict'
import { createPrivateKey, createPublicKey, generateKeyPairSync } from 'node:crypto'
import { readFile } from 'node:fs/promises'
import { after, before, describe, test } from 'node:test'
import type { Download, Page } from 'playwright-core'
import {
  assertAccessible,
  assertOffsetBetween,
  type ConsoleHarness,
  type ConsoleMember,
  screenshotBothThemes,
  startConsoleHarness,
} from '../helpers/console.ts'
import { waitFor } from '../helpers/service.ts'

const DAY_MS = 24 * 60 * 60 * 1000
const UUID = '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}'

/** axe in the light and the dark theme (the theme a person picks), then the theme as it was. */
async function accessibleInBothThemes(page: Page, what: string): Promise<void> {
  for (const theme of ['light', 'dark']) {
    await page.evaluate(`document.documentElement.dataset.theme = '${theme}'`)
    await assertAccessible(page, `${what} (${theme})`)
  }
  await page.evaluate('delete document.documentElement.dataset.theme')
}

/** Picks a radio button as a person does, by clicking its label; answers once it is checked. */
async function choose(page: Page, group: string, option: string): Promise<void> {
  const radio = page.getByRole('radio', { name: option, exact: true })
  await page.getByRole('radiogroup', { name: group }).locator('label').filter({ has: radio }).click()
  assert.equal(await radio.isChecked(), true, `${group}: ${option}`)
}

/** The text of a downloaded file. */
async function downloaded(download: Download): Promise<string> {
  const path = await download.path()
  return readFile(path, 'utf8')
}

/** The Keys area: list, create, detail and its actions, import, export, and a viewer's view. */
describe('console keys', () => {
  let h: ConsoleHarness
  let tenant: { tenantId: string; key: string }
  let owner: ConsoleMember
  let page: Page
  const created = { id: '', name: 'orders-encryption' }

  const api = async (method: string, path: string, body?: unknown) => {
    const result = await h.service.request(method, path, { key: tenant.key, ...(body ? { body } : {}) })
    assert.ok(result.status < 300, `${method} ${path}: ${result.status} ${result.text}`)
    return result.body
  }
  /** The names in the list's table, top to bottom. */
  const listedNames = () => page.locator('.keys-table tbody tr .keys-name').allTextContents()

  before(async () => {
    h = await startConsoleHarness()
    tenant = await h.service.createTenant()
    owner = await h.member(tenant.tenantId, 'tenant:owner')
    // Keys the list shows beside the ones the person makes: one expires within the alert window.
    await api('POST', '/api/v1/keys', {
      name: 'partner-signing',
      keyType: 'Signing',
      algorithm: 'ML-DSA-65',
      labels: ['partners'],
      expiresAt: new Date(Date.now() + 10 * DAY_MS).toISOString(),
    })
    await api('POST', '/api/v1/keys', { name: 'webhook-hmac', keyType: 'HMAC', algorithm: 'HMAC-SHA256' })
  })
  after(async () => {
    await h?.stop()
  })

  test('an owner sees the list with its expiry banner, creates an ML-KEM-768 key expiring in 90 days, and filters by algorithm', async () => {
    page = await h.newPage()
    await h.signIn(page, owner, { tenantId: tenant.tenantId, path: '/console/keys' })
    await page.locator('.keys-table').waitFor()
    const banner = page.getByRole('status').filter({ hasText: 'Keys expire soon' })
    await banner.waitFor()
    assert.match((await banner.textContent()) ?? '', /1 active key\(s\) expire within 30 days/)
    assert.match(
      (await page.getByRole('row', { name: /partner-signing/ }).textContent()) ?? '',
      /in (9|10) days/,
      'the expiring key is marked in its row',
    )
    await accessibleInBothThemes(page, 'the key list')
    await screenshotBothThemes(page, 'keys-list')

    await page.getByRole('button', { name: 'Create key' }).click()
    await page.waitForURL(/\/console\/keys\/new$/)
    await page.getByRole('heading', { level: 1, name: 'Create a key' }).waitFor()
    // Submitting without a name says what is missing; nothing is sent.
    await page.getByRole('button', { name: 'Create key' }).click()
    await page.getByText('Give the key a name').waitFor()

    await page.getByRole('textbox', { name: 'Name' }).fill(created.name)
    await page.getByRole('textbox', { name: 'Description' }).fill('Encrypts order exports')
    // Each type offers its own algorithms: Signing lists ML-DSA-65 and Ed25519, not ML-KEM-768.
    await page.getByRole('button', { name: /Type/ }).click()
    await page.getByRole('option', { name: /^Signing/ }).click()
    await page.getByRole('button', { name: /Algorithm/ }).click()
    await page.getByRole('option', { name: /^Ed25519/ }).waitFor()
    assert.equal(await page.getByRole('option', { name: /^ML-KEM-768/ }).count(), 0)
    await page.keyboard.press('Escape')
    await page.getByRole('button', { name: /Type/ }).click()
    await page.getByRole('option', { name: /^Encryption/ }).click()
    await page.getByRole('button', { name: /Algorithm/ }).click()
    assert.deepEqual(await page.locator('[role=option] > span:first-child').allTextContents(), [
      'ML-KEM-512',
      'ML-KEM-768',
      'ML-KEM-1024',
      'RSA-2048',
      'RSA-3072',
      'RSA-4096',
      'AES-128-GCM',
      'AES-192-GCM',
      'AES-256-GCM',
      'X-Wing',
    ])
    await page.getByRole('option', { name: /^ML-KEM-768/ }).click()
    const labels = page.getByRole('textbox', { name: 'Labels' })
    await labels.fill('orders')
    await labels.press('Enter')
    await page.getByRole('button', { name: 'Remove orders' }).waitFor()
    const chosen = { before: Date.now(), after: 0 }
    await choose(page, 'Expiry', '90 days')
    await page.getByText(`Expires on`).waitFor()
    // The equivalent request shows what the form sends.
    await page.getByText('Equivalent request', { exact: true }).click()
    const curl = (await page.locator('.equivalent-request pre').textContent()) ?? ''
    assert.match(curl, /-X POST '.*\/api\/v1\/keys'/)
    assert.match(curl, /"name":"orders-encryption","keyType":"Encryption","algorithm":"ML-KEM-768"/)
    // The form computed the expiry when the preset was chosen: 90 days after that moment.
    chosen.after = Date.now()
    const shown = /"expiresAt":"([^"]+)"/.exec(curl)?.[1]
    assert.ok(shown, 'the request carries expiresAt')
    assertOffsetBetween(shown, 90 * DAY_MS, chosen, 'the expiry in the equivalent request')
    await accessibleInBothThemes(page, 'the create form')
    await screenshotBothThemes(page, 'keys-create')

    const submitted = { before: Date.now(), after: 0 }
    await page.getByRole('button', { name: 'Create key' }).click()
    await page.waitForURL(new RegExp(`/console/keys/${UUID}$`))
    submitted.after = Date.now()
    created.id = /\/keys\/([0-9a-f-]{36})$/.exec(page.url())![1]!
    await page.getByRole('heading', { level: 1, name: created.name }).waitFor()
    await page.getByRole('status').filter({ hasText: 'Key orders-encryption created' }).waitFor()
    const key = await api('GET', `/api/v1/keys/${created.id}`)
    assert.equal(key.keyType, 'Encryption')
    assert.equal(key.algorithm, 'ML-KEM-768')
    assert.equal(key.description, 'Encrypts order exports')
    assert.deepEqual(key.labels, ['orders'])
    assert.equal(key.exportable, false)
    // Computed by the form at the preset's choice or at the submit (whichever it used last).
    assertOffsetBetween(
      key.expiresAt,
      90 * DAY_MS,
      { before: chosen.before, after: submitted.after },
      'expiresAt',
    )

    // The list: the new key is there; the algorithm filter goes into the URL and survives a reload.
    await page.getByRole('link', { name: 'All keys' }).click()
    await page.waitForURL(/\/console\/keys$/)
    await page.getByRole('link', { name: created.name }).waitFor()
    assert.equal((await listedNames()).length, 3)
    await page
      .locator('.keys-filters')
      .getByRole('button', { name: /Algorithm/ })
      .click()
    await page.getByRole('option', { name: 'ML-KEM-768' }).click()
    await page.waitForURL(/[?&]algorithm=ML-KEM-768/)
    await waitFor(async () => (await listedNames()).length === 1, 'the filtered list')
    assert.deepEqual(await listedNames(), [created.name])
    await page.reload()
    await page.locator('.keys-table').waitFor()
    assert.match(page.url(), /[?&]algorithm=ML-KEM-768/)
    assert.deepEqual(await listedNames(), [created.name])
    assert.match(
      (await page
        .locator('.keys-filters')
        .getByRole('button', { name: /Algorithm/ })
        .textContent()) ?? '',
      /ML-KEM-768/,
    )
    // Sorting by name is in the URL too; a search narrows the list.
    await page.getByRole('button', { name: 'Clear filters' }).click()
    await waitFor(async () => (await listedNames()).length === 3, 'the whole list again')
    await page.getByRole('button', { name: 'Name', exact: true }).click()
    await page.waitForURL(/[?&]sort=name%3Aasc|[?&]sort=name:asc/)
    await waitFor(
      async () =>
        JSON.stringify(await listedNames()) ===
        JSON.stringify(['orders-encryption', 'partner-signing', 'webhook-hmac']),
      'the list sorted by name',
    )
    await page.getByRole('searchbox', { name: 'Search' }).fill('webhook')
    await page.waitForURL(/[?&]q=webhook/)
    await waitFor(async () => (await listedNames()).join() === 'webhook-hmac', 'the search result')
  })

  test('on the detail page the owner rotates, edits labels, marks a favourite, downloads the public key, and schedules then cancels deletion', async () => {
    await page.goto(`${h.service.baseUrl}/console/keys/${created.id}`)
    await page.getByRole('heading', { level: 1, name: created.name }).waitFor()
    await page.getByRole('heading', { name: 'Versions' }).waitFor()
    await page.locator('.keys-versions-table').waitFor()
    await accessibleInBothThemes(page, 'the key detail')
    await screenshotBothThemes(page, 'keys-detail')

    // Rotate, confirmed in a dialog.
    await page.getByRole('button', { name: 'Rotate now…' }).click()
    const dialog = page.getByRole('dialog')
    await dialog.getByText('A new version, v2').waitFor()
    await assertAccessible(page, 'the rotate dialog')
    await dialog.getByRole('button', { name: 'Rotate key' }).click()
    await page.getByRole('status').filter({ hasText: 'Rotated: version 2 is now current' }).waitFor()
    await waitFor(
      async () => (await page.locator('.keys-versions-table tbody tr').count()) === 2,
      'two versions listed',
    )
    const rows = await page.locator('.keys-versions-table tbody tr td:first-child').allTextContents()
    assert.deepEqual(rows, ['v2Current', 'v1'])
    const versions = await api('GET', `/api/v1/keys/${created.id}/versions`)
    assert.deepEqual(
      versions.data.map((v: { version: number; isCurrent: boolean }) => [v.version, v.isCurrent]).sort(),
      [
        [1, false],
        [2, true],
      ],
    )

    // Labels: add two, remove one.
    await page.getByRole('button', { name: 'Edit labels' }).click()
    const labels = page.getByRole('textbox', { name: 'Labels' })
    for (const label of ['payments', 'prod', 'typo']) {
      await labels.fill(label)
      await labels.press('Enter')
    }
    await page.getByRole('button', { name: 'Remove typo' }).click()
    await page.getByRole('button', { name: 'Save labels' }).click()
    await page.getByRole('status').filter({ hasText: 'Labels saved: orders, payments, prod' }).waitFor()
    assert.deepEqual((await api('GET', `/api/v1/keys/${created.id}`)).labels, ['orders', 'payments', 'prod'])

    // Favourite: the toggle, then the list puts it first although a newer key exists.
    await page.getByRole('button', { name: 'Favourite', pressed: false }).click()
    await page.getByRole('button', { name: 'Favourite', pressed: true }).waitFor()
    assert.equal((await api('GET', `/api/v1/keys/${created.id}`)).isFavorite, true)
    await api('POST', '/api/v1/keys', { name: 'newest-key', keyType: 'Signing', algorithm: 'Ed25519' })
    await page.getByRole('link', { name: 'All keys' }).click()
    await page.getByRole('link', { name: 'newest-key' }).waitFor()
    const names = await listedNames()
    assert.deepEqual(names.slice(0, 2), [created.name, 'newest-key'], 'the favourite first, then the newest')
    assert.match((await page.locator('.keys-table tbody tr').first().textContent()) ?? '', /Favourite/)
    await page.getByRole('link', { name: created.name }).click()
    await page.getByRole('heading', { level: 1, name: created.name }).waitFor()

    // Edit details: only what changed is sent.
    await page.getByRole('button', { name: 'Edit details…' }).click()
    const edit = page.getByRole('dialog')
    await edit.getByRole('textbox', { name: 'Description' }).fill('Encrypts order exports and refunds')
    await edit.getByText('Equivalent request', { exact: true }).click()
    assert.match(
      (await edit.locator('.equivalent-request pre').textContent()) ?? '',
      /-X PATCH .* -d '\{"description":"Encrypts order exports and refunds"\}'/,
    )
    await assertAccessible(page, 'the edit dialog')
    await edit.getByRole('button', { name: 'Save details' }).click()
    await page
      .getByRole('status')
      .filter({ hasText: `Saved the details of ${created.name}` })
      .waitFor()
    assert.equal(
      (await api('GET', `/api/v1/keys/${created.id}`)).description,
      'Encrypts order exports and refunds',
    )

    // The public key as PEM: the file is the API's public key of the current version.
    const [download] = await Promise.all([
      page.waitForEvent('download'),
      page.getByRole('button', { name: 'Download public key' }).click(),
    ])
    assert.equal(download.suggestedFilename(), `${created.name}-v2.pem`)
    const pem = await downloaded(download)
    const fromApi = await api('GET', `/api/v1/keys/${created.id}/public?format=PEM`)
    assert.equal(fromApi.version, 2)
    assert.equal(pem.trim(), fromApi.publicKey.trim())
    assert.equal(createPublicKey(pem).asymmetricKeyType, 'ml-kem-768')
    await page
      .getByRole('status')
      .filter({ hasText: `Downloaded ${created.name}-v2.pem` })
      .waitFor()

    // Schedule deletion with a 7-day wait, then cancel it.
    await page.getByRole('button', { name: 'Schedule deletion…' }).click()
    const deletion = page.getByRole('dialog')
    const waiting = deletion.getByRole('spinbutton', { name: 'Waiting period (days)' })
    await waiting.fill('3')
    await deletion.getByText('Choose a whole number of days from 7 to 30').first().waitFor()
    assert.equal(await deletion.getByRole('button', { name: 'Schedule deletion' }).isDisabled(), true)
    await waiting.fill('7')
    await assertAccessible(page, 'the deletion dialog')
    await screenshotBothThemes(page, 'keys-delete-dialog')
    const scheduling = { before: Date.now(), after: 0 }
    await deletion.getByRole('button', { name: 'Schedule deletion' }).click()
    await page.getByRole('status').filter({ hasText: 'Deletion scheduled' }).waitFor()
    scheduling.after = Date.now()
    const pending = await api('GET', `/api/v1/keys/${created.id}`)
    assert.equal(pending.state, 'Pending Deletion')
    assertOffsetBetween(pending.scheduledDeletionDate, 7 * DAY_MS, scheduling, 'the deletion date')
    await page.getByText('Scheduled for destruction on').waitFor()
    await page.getByRole('button', { name: 'Cancel deletion' }).click()
    await page.getByRole('status').filter({ hasText: 'Deletion cancelled' }).waitFor()
    assert.equal((await api('GET', `/api/v1/keys/${created.id}`)).state, 'Active')
  })

  test('the owner sets a rotation policy and removes it', async () => {
    await page.getByRole('heading', { name: 'Rotation policy' }).waitFor()
    await page.getByText('No policy: the key is rotated only by hand.').waitFor()
    await page.getByRole('textbox', { name: 'Webhook URL' }).fill('ftp://example.com/hook')
    await page.getByRole('button', { name: 'Set policy' }).click()
    await page.getByText('Use an http:// or https:// URL').waitFor()
    await page.getByRole('textbox', { name: 'Webhook URL' }).fill('')
    await page.getByRole('button', { name: /Frequency/ }).click()
    await page.getByRole('option', { name: /^Monthly/ }).click()
    await page.getByRole('button', { name: 'Set policy' }).click()
    await page.getByRole('status').filter({ hasText: 'Rotation policy saved: monthly' }).waitFor()
    const policy = await api('GET', `/api/v1/keys/${created.id}/rotation-policy`)
    assert.equal(policy.frequency, 'Monthly')
    assert.equal(policy.webhookUrl, null)
    await page.getByRole('button', { name: 'Pause policy' }).click()
    await page.getByRole('status').filter({ hasText: 'Rotation policy paused' }).waitFor()
    assert.equal((await api('GET', `/api/v1/keys/${created.id}/rotation-policy`)).paused, true)
    await page.getByRole('button', { name: 'Remove policy…' }).click()
    await page.getByRole('dialog').getByRole('button', { name: 'Remove policy' }).click()
    await page.getByRole('status').filter({ hasText: 'Rotation policy removed' }).waitFor()
    const gone = await h.service.request('GET', `/api/v1/keys/${created.id}/rotation-policy`, {
      key: tenant.key,
    })
    assert.equal(gone.status, 404)
  })

  test('the owner revokes a second key after confirming', async () => {
    const second = await api('POST', '/api/v1/keys', {
      name: 'to-revoke',
      keyType: 'Signing',
      algorithm: 'EC-P256',
    })
    await page.goto(`${h.service.baseUrl}/console/keys?q=to-revoke`)
    await page.getByRole('link', { name: 'to-revoke' }).click()
    await page.getByRole('heading', { level: 1, name: 'to-revoke' }).waitFor()
    await page.getByRole('button', { name: 'Revoke…' }).click()
    const dialog = page.getByRole('dialog')
    await dialog.getByText('This cannot be undone.').waitFor()
    await assertAccessible(page, 'the revoke dialog')
    // Cancel leaves the key as it was.
    await dialog.getByRole('button', { name: 'Cancel' }).click()
    await dialog.waitFor({ state: 'detached' })
    assert.equal((await api('GET', `/api/v1/keys/${second.id}`)).state, 'Active')
    await page.getByRole('button', { name: 'Revoke…' }).click()
    await page.getByRole('dialog').getByRole('button', { name: 'Revoke key' }).click()
    await page.getByRole('status').filter({ hasText: 'to-revoke is revoked' }).waitFor()
    assert.equal((await api('GET', `/api/v1/keys/${second.id}`)).state, 'Revoked')
    await page.getByText('Only an Active key can be revoked (this one is Revoked)').waitFor()
    assert.equal(await page.getByRole('button', { name: 'Revoke…' }).isDisabled(), true)
    assert.equal(await page.getByRole('button', { name: 'Rotate now…' }).isDisabled(), true)
  })

  test('the owner imports a P-256 key from PKCS#8 PEM and exports it back only after typing its name', async () => {
    const pair = generateKeyPairSync('ec', { namedCurve: 'P-256' })
    const pkcs8 = pair.privateKey.export({ format: 'pem', type: 'pkcs8' }) as string
    const name = 'imported-p256'

    await page.goto(`${h.service.baseUrl}/console/keys`)
    await page.getByRole('button', { name: 'Import key' }).click()
    await page.waitForURL(/\/console\/keys\/import$/)
    await page.getByRole('textbox', { name: 'Name' }).fill(name)
    await page.getByRole('button', { name: /Algorithm/ }).click()
    await page.getByRole('option', { name: /^EC-P256/ }).click()
    await choose(page, 'Format', 'RAW (Base64)')
    await page.getByText('Base64 of the raw bytes').waitFor()
    await choose(page, 'Format', 'PEM')
    await page.getByText('Allow private key export').click()
    assert.equal(await page.getByRole('checkbox', { name: 'Allow private key export' }).isChecked(), true)
    await accessibleInBothThemes(page, 'the import form')
    await screenshotBothThemes(page, 'keys-import')
    await page.getByRole('textbox', { name: 'Private key' }).fill(pkcs8)
    // The equivalent request never carries the material.
    await page.getByText('Equivalent request', { exact: true }).click()
    const curl = (await page.locator('.equivalent-request pre').textContent()) ?? ''
    assert.match(curl, /"format":"PEM","keyMaterial":"<key material>"/)
    assert.doesNotMatch(curl, /PRIVATE KEY/)
    await page.getByRole('button', { name: 'Import key' }).click()
    await page.waitForURL(new RegExp(`/console/keys/${UUID}$`))
    await page
      .getByRole('status')
      .filter({ hasText: `Key ${name} imported` })
      .waitFor()
    const keyId = /\/keys\/([0-9a-f-]{36})$/.exec(page.url())![1]!
    const imported = await api('GET', `/api/v1/keys/${keyId}`)
    assert.equal(imported.origin, 'Imported')
    assert.equal(imported.algorithm, 'EC-P256')
    assert.equal(imported.exportable, true)
    const publicPem = (await api('GET', `/api/v1/keys/${keyId}/public?format=PEM`)).publicKey
    assert.equal(publicPem.trim(), (pair.publicKey.export({ format: 'pem', type: 'spki' }) as string).trim())

    // Listed.
    await page.getByRole('link', { name: 'All keys' }).click()
    await page.getByRole('link', { name }).waitFor()
    await page.getByRole('link', { name }).click()
    await page.getByRole('heading', { level: 1, name }).waitFor()

    // Export: the confirm button stays disabled until the name is typed exactly.
    await page.getByRole('button', { name: 'Export private key…' }).click()
    const dialog = page.getByRole('dialog')
    const confirmButton = dialog.getByRole('button', { name: 'Export private key' })
    const confirmName = dialog.getByRole('textbox', { name: "Type the key's name to confirm" })
    assert.equal(await confirmButton.isDisabled(), true)
    await confirmName.fill('imported-p25')
    assert.equal(await confirmButton.isDisabled(), true)
    await dialog.getByText('Type the key’s name exactly to enable the export').waitFor()
    await assertAccessible(page, 'the export dialog')
    await screenshotBothThemes(page, 'keys-export')
    await confirmName.fill(name)
    await waitFor(async () => !(await confirmButton.isDisabled()), 'the export button enabled')
    await confirmButton.click()
    await dialog.getByText('The private key of version 1 is exported as PEM, unencrypted').waitFor()
    // Not shown until asked.
    const secretLine = pkcs8.split('\n')[1]!
    assert.ok(!(await page.content()).includes(secretLine), 'the private key is hidden')
    const [download] = await Promise.all([
      page.waitForEvent('download'),
      dialog.getByRole('button', { name: 'Download file' }).click(),
    ])
    assert.equal(download.suggestedFilename(), `${name}-v1-private.pem`)
    const exported = createPrivateKey(await downloaded(download))
    assert.equal(exported.export({ format: 'jwk' }).d, pair.privateKey.export({ format: 'jwk' }).d)
    await dialog.getByRole('button', { name: 'Show private key' }).click()
    await dialog.locator('.keys-secret').waitFor()
    assert.ok((await page.content()).includes(secretLine))
    await assertAccessible(page, 'the export result')
    await dialog.getByRole('button', { name: 'Done' }).click()
    await dialog.waitFor({ state: 'detached' })
    const audit = await api('GET', '/api/v1/audit?action=keys.export_private')
    assert.ok(
      audit.data.some((record: { resource: string }) => record.resource === `key:${keyId}`),
      'the export is in the audit log',
    )

    // A key made without "Allow private key export" says why it cannot be exported.
    await page.goto(`${h.service.baseUrl}/console/keys/${created.id}`)
    await page.getByRole('heading', { level: 1, name: created.name }).waitFor()
    assert.equal(await page.getByRole('button', { name: 'Export private key…' }).isDisabled(), true)
    await page.getByText('This key was made without “Allow private key export”').waitFor()
  })

  test('a long list pages by number in the URL, also when a page is opened directly, and filters by label', async () => {
    for (let i = 1; i <= 20; i++)
      await api('POST', '/api/v1/keys', {
        name: `bulk-${String(i).padStart(2, '0')}`,
        keyType: 'HMAC',
        algorithm: 'HMAC-SHA256',
        labels: ['bulk'],
      })
    const lastPage = [
      'bulk-20',
      'imported-p256',
      'newest-key',
      'partner-signing',
      'to-revoke',
      'webhook-hmac',
    ]
    await page.goto(`${h.service.baseUrl}/console/keys?sort=name:asc&page=2`)
    await waitFor(async () => (await listedNames()).join() === lastPage.join(), 'page 2 opened directly')
    await page.getByText('Page 2 of 2 · 26 in all').waitFor()
    await accessibleInBothThemes(page, 'page 2 of the list')
    await page.getByRole('button', { name: 'Previous' }).click()
    await waitFor(async () => (await listedNames()).length === 20, 'page 1')
    assert.doesNotMatch(page.url(), /page=/)
    const first = await listedNames()
    assert.deepEqual(
      first.slice(0, 3),
      [created.name, 'bulk-01', 'bulk-02'],
      'the favourite first, then by name',
    )
    await page.getByRole('button', { name: 'Next' }).click()
    await page.waitForURL(/[?&]page=2/)
    await waitFor(async () => (await listedNames()).join() === lastPage.join(), 'page 2 after Next')

    // A label filter goes back to page 1 and keeps only the keys with that label.
    const labels = page.getByRole('textbox', { name: 'Labels' })
    await labels.fill('bulk')
    await labels.press('Enter')
    await waitFor(() => decodeURIComponent(page.url()).includes('labels=["bulk"]'), 'the label in the URL')
    assert.doesNotMatch(page.url(), /page=/)
    await page.getByText('20 keys match the filters').waitFor()
    assert.ok((await listedNames()).every((name) => name.startsWith('bulk-')))
    await screenshotBothThemes(page, 'keys-list-filtered')
  })

  test('a viewer cannot create keys or change one, and is told why', async () => {
    const viewer = await h.member(tenant.tenantId, 'tenant:viewer')
    const viewerPage = await h.newPage()
    await h.signIn(viewerPage, viewer, { tenantId: tenant.tenantId, path: '/console/keys' })
    await viewerPage.locator('.keys-table').waitFor()
    const create = viewerPage.getByRole('button', { name: 'Create key' })
    assert.equal(await create.isDisabled(), true)
    assert.equal(await viewerPage.getByRole('button', { name: 'Import key' }).isDisabled(), true)
    await viewerPage.getByText('Your role does not include keys:write').first().waitFor()
    await viewerPage.getByRole('link', { name: created.name }).click()
    await viewerPage.getByRole('heading', { level: 1, name: created.name }).waitFor()
    await viewerPage.locator('.keys-versions-table').waitFor()
    for (const action of [
      'Favourite',
      'Edit details…',
      'Edit labels',
      'Rotate now…',
      'Set policy',
      'Revoke…',
      'Schedule deletion…',
      'Export private key…',
    ]) {
      const button = viewerPage.getByRole('button', { name: action, exact: true })
      assert.equal(await button.isDisabled(), true, `${action} is disabled`)
      const reason = await button.getAttribute('aria-describedby')
      assert.ok(reason, `${action} names its reason`)
      const text = await viewerPage.locator(`[id="${reason}"]`).textContent()
      assert.match(
        text ?? '',
        action === 'Export private key…' ? /keys:export/ : /keys:write/,
        `${action}: ${text}`,
      )
    }
    // Reading stays open: the public key downloads.
    assert.equal(await viewerPage.getByRole('button', { name: 'Download public key' }).isDisabled(), false)
    await accessibleInBothThemes(viewerPage, 'the key detail as a viewer')
    await screenshotBothThemes(viewerPage, 'keys-detail-viewer')
  })

  test('no Content Security Policy refusal and no uncaught error on any page', () => {
    assert.deepEqual(h.violations, [])
  })
})
