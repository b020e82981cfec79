import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { after, before, describe, test } from 'node:test'
import { promisify } from 'node:util'
import type { Locator, Page } from 'playwright-core'
import {
  assertAccessible,
  assertOffsetBetween,
  type ConsoleHarness,
  type ConsoleMember,
  screenshotBothThemes,
  startConsoleHarness,
} from '../helpers/console.ts'
import { type TenantWithKey, waitFor } from '../helpers/service.ts'

const run = promisify(execFile)

/** A mail's text with its quoted-printable soft breaks and escapes undone. */
const decoded = (raw: string) => raw.replace(/=\r\n/g, '').replace(/=3D/g, '=')

/** The status curl gets for GET `path` with the API key, as a program using the key would. */
async function curlStatus(baseUrl: string, key: string, path: string): Promise<number> {
  const { stdout } = await run('curl', [
    '-s',
    '-o',
    '/dev/null',
    '-w',
    '%{http_code}',
    '-H',
    `X-Api-Key: ${key}`,
    `${baseUrl}${path}`,
  ])
  return Number(stdout)
}

/** A checkbox of react-aria (its input is visually hidden): a person clicks its label. */
async function tick(scope: Locator, name: RegExp): Promise<void> {
  const checkbox = scope.getByRole('checkbox', { name })
  await scope.locator('label', { has: scope.page().getByRole('checkbox', { name }) }).click()
  assert.equal(await checkbox.isChecked(), true, `${name} is checked`)
}

/**
 * The console's administration area: API keys (minted, used with curl, revoked with what they
 * created), the team (roles, invitations and their e-mails) and the tenant's security settings
 * (changed by an owner, read-only for a developer).
 */
describe('console: API keys, team and tenant settings', () => {
  let h: ConsoleHarness
  let tenant: TenantWithKey
  let owner: ConsoleMember
  let page: Page
  const consoleMessages: string[] = []

  before(async () => {
    h = await startConsoleHarness()
    tenant = await h.service.createTenant()
    owner = await h.member(tenant.tenantId, 'tenant:owner')
    page = await h.newPage()
    page.on('console', (message) => consoleMessages.push(message.text()))
  })
  after(async () => {
    await h?.stop()
  })

  const keysOfTenant = async () => {
    const answer = await h.service.request('GET', '/api/v1/api-keys?includeRevoked=true', { key: tenant.key })
    assert.equal(answer.status, 200)
    return answer.body.data as Array<{
      id: string
      name: string
      scopes: string[]
      parentId: string | null
      expiresAt: string | null
      revokedAt: string | null
    }>
  }

  test('an owner mints an API key, sees it once, uses it with curl, and revokes it and a key with descendants', async () => {
    // A key that made another one (through the API): revoking it takes its child along.
    const parent = await h.service.request('POST', '/api/v1/api-keys', {
      key: tenant.key,
      body: { name: 'deploy-parent', scopes: ['keys:read', 'apikeys:read', 'apikeys:write'] },
    })
    assert.equal(parent.status, 201)
    const child = await h.service.request('POST', '/api/v1/api-keys', {
      key: parent.body.key,
      body: { name: 'deploy-child', scopes: ['keys:read'] },
    })
    assert.equal(child.status, 201)

    await h.signIn(page, owner, { tenantId: tenant.tenantId, path: '/console/api-keys' })
    await page.getByRole('heading', { level: 1, name: 'API keys' }).waitFor()
    const childRow = page.getByRole('row', { name: /^deploy-child/ })
    await childRow.waitFor()
    assert.match((await childRow.textContent()) ?? '', /deploy-parent/, 'the parent is named')
    assert.match((await childRow.textContent()) ?? '', /Active/)
    await assertAccessible(page, 'the API keys page')
    await screenshotBothThemes(page, 'api-keys')

    // The search lives in the URL.
    await page.getByLabel('Search').fill('deploy')
    await page.waitForURL(/q=deploy/)
    await page.getByRole('row', { name: /^deploy-parent/ }).waitFor()
    assert.equal(await page.locator('tbody tr').count(), 2)
    await page.getByLabel('Search').fill('')
    await page.waitForURL((url) => !url.search.includes('q='))

    // Create: name, one scope, the default expiry (fixed by the form between opening and answer).
    const creating = { before: Date.now(), after: 0 }
    await page.getByRole('button', { name: 'Create API key' }).click()
    const dialog = page.getByRole('dialog', { name: 'Create an API key' })
    await dialog.getByLabel('Name', { exact: true }).fill('ci-reader')
    await tick(dialog, /^keys:read\b/)
    await assertAccessible(page, 'the create API key dialog')
    await screenshotBothThemes(page, 'api-keys-create')
    await dialog.locator('summary', { hasText: 'Equivalent request' }).click()
    await dialog.locator('.equivalent-request code', { hasText: '"scopes":["keys:read"]' }).waitFor()
    await dialog.getByRole('button', { name: 'Create key' }).click()

    // Shown once: hidden until asked for, copyable without being shown.
    const panel = page.getByRole('region', { name: /Your new API key “ci-reader”/ })
    await panel.waitFor()
    creating.after = Date.now()
    await dialog.waitFor({ state: 'detached' })
    const secret = panel.locator('.api-keys-secret')
    assert.doesNotMatch((await secret.textContent()) ?? '', /^kms_[A-Za-z0-9]{52}$/, 'hidden at first')
    assert.match((await panel.textContent()) ?? '', /will not be shown again/)
    await assertAccessible(page, 'the one-time key display')
    await screenshotBothThemes(page, 'api-keys-new-key')
    await panel.getByRole('button', { name: 'Copy key' }).click()
    await panel.getByText('Copied').waitFor()
    const copied = (await page.evaluate('navigator.clipboard.readText()')) as string
    await panel.getByRole('button', { name: 'Show key' }).click()
    await panel.getByRole('button', { name: 'Hide key' }).waitFor()
    const key = ((await secret.textContent()) ?? '').trim()
    assert.match(key, /^kms_[A-Za-z0-9]{52}$/)
    assert.equal(copied, key, 'the copy is the key')

    // The key works for what it holds, and only that.
    assert.equal(await curlStatus(h.service.baseUrl, key, '/api/v1/keys'), 200)
    assert.equal(await curlStatus(h.service.baseUrl, key, '/api/v1/secrets'), 403)
    const minted = (await keysOfTenant()).find((k) => k.name === 'ci-reader')
    assert.ok(minted, 'the API lists the new key')
    assert.deepEqual(minted.scopes, ['keys:read'])
    assert.equal(minted.parentId, null, 'a member’s key has no parent')
    assertOffsetBetween(minted.expiresAt!, 90 * 86_400_000, creating, 'the default expiry: 90 days')

    // Once stored, it is gone from the page; it never went to the URL or the browser console.
    await panel.getByRole('button', { name: 'I have stored the key' }).click()
    await panel.waitFor({ state: 'detached' })
    assert.ok(!(await page.content()).includes(key), 'the key is no longer in the page')
    assert.ok(!page.url().includes(key))
    assert.ok(!consoleMessages.some((message) => message.includes(key)), 'never logged')

    // Revoke it: confirmed first; curl is refused at once.
    const row = page.getByRole('row', { name: /^ci-reader/ })
    assert.match((await row.textContent()) ?? '', /keys:read.*Active/s)
    await row.getByRole('button', { name: 'Revoke ci-reader' }).click()
    const confirm = page.getByRole('alertdialog', { name: 'Revoke “ci-reader”?' })
    await confirm.getByText('No active key was created with it.').waitFor()
    await assertAccessible(page, 'the revoke confirmation')
    await screenshotBothThemes(page, 'api-keys-revoke')
    await confirm.getByRole('button', { name: 'Revoke key' }).click()
    await page.getByRole('status').filter({ hasText: 'Revoked “ci-reader”' }).waitFor()
    await row.getByText('Revoked', { exact: true }).waitFor()
    assert.equal(await curlStatus(h.service.baseUrl, key, '/api/v1/keys'), 401)

    // Revoking a key revokes what it created: the dialog says so first, the notice after.
    await page.getByRole('button', { name: 'Revoke deploy-parent' }).click()
    const cascade = page.getByRole('alertdialog', { name: 'Revoke “deploy-parent”?' })
    await cascade.getByRole('listitem').filter({ hasText: 'deploy-child' }).waitFor()
    await cascade.getByRole('button', { name: 'Revoke key' }).click()
    await page
      .getByRole('status')
      .filter({ hasText: 'Also revoked, because it created them: deploy-child' })
      .waitFor()
    await childRow.getByText('Revoked', { exact: true }).waitFor()
    const afterwards = await keysOfTenant()
    assert.ok(afterwards.find((k) => k.name === 'deploy-child')?.revokedAt, 'the child is revoked')
    assert.ok(afterwards.find((k) => k.name === 'deploy-parent')?.revokedAt)
    assert.equal(await curlStatus(h.service.baseUrl, child.body.key, '/api/v1/keys'), 401)
    await screenshotBothThemes(page, 'api-keys-after-revoke')
  })

  test('an owner changes a role, meets the API’s refusal, invites, resends and revokes, and removes a member', async () => {
    const colleague = await h.member(tenant.tenantId, 'tenant:viewer')
    await page.getByRole('link', { name: 'Team' }).click()
    await page.getByRole('heading', { level: 1, name: 'Team' }).waitFor()
    const colleagueRow = page.getByRole('row', { name: new RegExp(colleague.email) })
    await colleagueRow.getByText('Viewer', { exact: true }).waitFor()

    // Change a role.
    await colleagueRow.getByRole('button', { name: `Change role of ${colleague.email}` }).click()
    const roleDialog = page.getByRole('alertdialog', { name: `Change the role of ${colleague.email}` })
    await roleDialog.getByRole('button', { name: /New role/ }).click()
    await page.getByRole('option', { name: /^Developer/ }).click()
    await assertAccessible(page, 'the change role dialog')
    await roleDialog.getByRole('button', { name: 'Save role' }).click()
    await page.getByRole('status').filter({ hasText: 'is now Developer' }).waitFor()
    await colleagueRow.getByText('Developer', { exact: true }).waitFor()
    const members = await h.service.api.services.team.listMembers(tenant.tenantId)
    assert.equal(members.data.find((m) => m.accountId === colleague.accountId)?.role, 'tenant:developer')

    // The last owner cannot step down: the API says so, in the dialog.
    const ownerRow = page.getByRole('row', { name: new RegExp(owner.email) })
    await ownerRow.getByRole('button', { name: `Change role of ${owner.email}` }).click()
    const selfDialog = page.getByRole('alertdialog', { name: `Change the role of ${owner.email}` })
    await selfDialog.getByRole('button', { name: /New role/ }).click()
    await page.getByRole('option', { name: /^Admin/ }).click()
    await selfDialog.getByRole('button', { name: 'Save role' }).click()
    await selfDialog.getByRole('alert').filter({ hasText: 'at least one owner' }).waitFor()
    await screenshotBothThemes(page, 'team-last-owner')
    await selfDialog.getByRole('button', { name: 'Cancel' }).click()
    await selfDialog.waitFor({ state: 'detached' })
    assert.equal(
      (await h.service.api.services.team.listMembers(tenant.tenantId)).data.find(
        (m) => m.accountId === owner.accountId,
      )?.role,
      'tenant:owner',
    )

    // Invite: the e-mail goes out through the job process; its delivery shows in the list.
    const invitee = `invitee-${process.pid}@example.com`
    await page.getByRole('button', { name: 'Invite member' }).click()
    const invite = page.getByRole('dialog', { name: 'Invite a member' })
    await invite.getByLabel('E-mail address').fill(invitee)
    await invite.getByRole('button', { name: /Role/ }).click()
    await page.getByRole('option', { name: /^Viewer/ }).click()
    await assertAccessible(page, 'the invite dialog')
    await screenshotBothThemes(page, 'team-invite')
    await invite.getByRole('button', { name: 'Send invitation' }).click()
    await page
      .getByRole('status')
      .filter({ hasText: `${invitee} is invited as Viewer` })
      .waitFor()
    const mailsTo = () => h.smtp.messages.filter((m) => m.to.includes(invitee))
    await waitFor(() => mailsTo().length === 1, 'the invitation e-mail', 60_000)
    assert.match(decoded(mailsTo()[0]!.raw), /invitations\/accept\?token=/)

    await page.reload()
    await page.getByRole('heading', { level: 1, name: 'Team' }).waitFor()
    const invitationRow = page.getByRole('row', { name: new RegExp(invitee) })
    await invitationRow.getByText('Sent', { exact: true }).waitFor()
    assert.match((await invitationRow.textContent()) ?? '', /Viewer.*Pending/s)
    await assertAccessible(page, 'the team page')
    await screenshotBothThemes(page, 'team')

    // Resend: a second e-mail with a new link.
    await invitationRow.getByRole('button', { name: `Resend the invitation to ${invitee}` }).click()
    await page.getByRole('status').filter({ hasText: 'no longer works' }).waitFor()
    await waitFor(() => mailsTo().length === 2, 'the second invitation e-mail', 60_000)
    assert.notEqual(
      /token=([\w-]+)/.exec(decoded(mailsTo()[0]!.raw))?.[1],
      /token=([\w-]+)/.exec(decoded(mailsTo()[1]!.raw))?.[1],
      'a new link',
    )

    // Revoke it.
    await invitationRow.getByRole('button', { name: `Revoke the invitation to ${invitee}` }).click()
    const revoke = page.getByRole('alertdialog', { name: `Revoke the invitation to ${invitee}?` })
    await revoke.getByRole('button', { name: 'Revoke invitation' }).click()
    await invitationRow.getByText('Revoked', { exact: true }).waitFor()
    const invitations = await h.service.api.services.team.listInvitations(tenant.tenantId)
    assert.equal(invitations.data.find((i) => i.email === invitee)?.status, 'revoked')
    assert.equal(await invitationRow.getByRole('button').count(), 0, 'nothing left to do with it')

    // Remove the colleague.
    await colleagueRow.getByRole('button', { name: `Remove ${colleague.email}` }).click()
    const remove = page.getByRole('alertdialog', { name: `Remove ${colleague.email} from the team?` })
    await assertAccessible(page, 'the remove member dialog')
    await remove.getByRole('button', { name: 'Remove member' }).click()
    await colleagueRow.waitFor({ state: 'detached' })
    const left = await h.service.api.services.team.listMembers(tenant.tenantId)
    assert.ok(!left.data.some((m) => m.accountId === colleague.accountId))
  })

  test('an owner changes the security settings; a developer sees them read-only and the API refuses them a change', async () => {
    await page.getByRole('link', { name: 'Settings' }).click()
    await page.getByRole('heading', { level: 1, name: 'Tenant settings' }).waitFor()
    const access = page.getByLabel('Access token lifetime (seconds)')
    assert.equal(await access.inputValue(), '900')
    await assertAccessible(page, 'the settings page')
    await screenshotBothThemes(page, 'settings')

    // Out of bounds: said at the field, nothing sent.
    await access.fill('30')
    await page.getByRole('button', { name: 'Save changes' }).click()
    await page.getByText('Enter a whole number from 60 to 3600').waitFor()
    const unchanged = await h.service.request('GET', '/api/v1/settings/security', { key: tenant.key })
    assert.equal(unchanged.body.sessionLifetimes.accessTokenSeconds, 900)

    await access.fill('600')
    await tick(page.locator('main'), /Limit the lifetime of new API keys/)
    await page.getByLabel('Longest lifetime (days)').fill('90')
    await page.locator('summary', { hasText: 'Equivalent request' }).click()
    await page
      .locator('.equivalent-request code', {
        hasText: '{"sessionLifetimes":{"accessTokenSeconds":600},"apiKeyPolicy":{"maxLifetimeDays":90}}',
      })
      .waitFor()
    await page.getByRole('button', { name: 'Save changes' }).click()
    await page
      .getByRole('status')
      .filter({ hasText: 'Settings saved: access token lifetime, longest API-key lifetime' })
      .waitFor()
    const saved = await h.service.request('GET', '/api/v1/settings/security', { key: tenant.key })
    assert.equal(saved.status, 200)
    assert.equal(saved.body.sessionLifetimes.accessTokenSeconds, 600)
    assert.equal(saved.body.apiKeyPolicy.maxLifetimeDays, 90)
    assert.equal(saved.body.sessionLifetimes.refreshTokenSeconds, 1_209_600, 'the rest kept')
    await screenshotBothThemes(page, 'settings-saved')

    // The API-key form follows the new policy: no "Never", and it says the bound.
    await page.getByRole('link', { name: 'API keys' }).click()
    await page.getByRole('button', { name: 'Create API key' }).click()
    const dialog = page.getByRole('dialog', { name: 'Create an API key' })
    await dialog.getByText('keys live at most 90 days').waitFor()
    await dialog.getByRole('button', { name: /Expires/ }).click()
    await page.getByRole('option', { name: /^In 90 days/ }).waitFor()
    assert.equal(await page.getByRole('option', { name: /^Never/ }).count(), 0)
    await page.keyboard.press('Escape')
    await dialog.getByRole('button', { name: 'Cancel' }).click()
    await dialog.waitFor({ state: 'detached' })

    // A developer: the settings read-only with the reason, and no way to change them.
    const developer = await h.member(tenant.tenantId, 'tenant:developer')
    const devPage = await h.newPage()
    let bearer: string | undefined
    devPage.on('request', (request) => {
      const authorization = request.headers()['authorization']
      if (authorization?.startsWith('Bearer ') && request.url().includes('/api/v1/')) bearer = authorization
    })
    await h.signIn(devPage, developer, { tenantId: tenant.tenantId, path: '/console/settings' })
    await devPage.getByRole('heading', { level: 1, name: 'Tenant settings' }).waitFor()
    await devPage.getByRole('status').filter({ hasText: 'Only Owner or Admin members can do this' }).waitFor()
    await devPage.getByText('10 minutes').waitFor()
    assert.equal(await devPage.getByRole('button', { name: 'Save changes' }).count(), 0)
    assert.equal(await devPage.locator('main input, main textarea').count(), 0, 'nothing to edit')
    await assertAccessible(devPage, 'the settings page, read-only')
    await screenshotBothThemes(devPage, 'settings-read-only')
    assert.ok(bearer, 'the console called the API with the developer’s token')
    const refused = await h.service.request('PATCH', '/api/v1/settings/security', {
      headers: { authorization: bearer },
      body: { sessionLifetimes: { accessTokenSeconds: 300 } },
    })
    assert.equal(refused.status, 403)
    assert.equal(refused.body.error, 'forbidden')

    // Elsewhere in the area the developer's disabled actions say why.
    await devPage.getByRole('link', { name: 'Team' }).click()
    const inviteButton = devPage.getByRole('button', { name: 'Invite member' })
    await inviteButton.waitFor()
    assert.equal(await inviteButton.isDisabled(), true)
    await devPage.getByText('Only Owner or Admin members can do this').first().waitFor()
    await assertAccessible(devPage, 'the team page, as a developer')
    await screenshotBothThemes(devPage, 'team-developer')
    await devPage.getByRole('link', { name: 'API keys' }).click()
    const createButton = devPage.getByRole('button', { name: 'Create API key' })
    await createButton.waitFor()
    assert.equal(await createButton.isDisabled(), true)
    await devPage.getByText('Your role does not include apikeys:write').first().waitFor()
    await assertAccessible(devPage, 'the API keys page, as a developer')
    await screenshotBothThemes(devPage, 'api-keys-developer')
    await devPage.context().close()
  })

  test('no Content Security Policy refusal and no uncaught error on any page', () => {
    assert.deepEqual(h.violations, [])
  })
})
