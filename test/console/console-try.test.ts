import assert from 'node:assert/strict'
import { verify as verifySignature } from 'node:crypto'
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

const b64 = (text: string) => Buffer.from(text, 'utf8').toString('base64')

/** Try it: a person picks a key and runs its operations; each answer is checked through the API. */
describe('console try it', () => {
  let h: ConsoleHarness
  let tenant: TenantWithKey
  let owner: ConsoleMember
  let page: Page
  const keys: Record<'kem' | 'dsa' | 'hmac', string> = { kem: '', dsa: '', hmac: '' }

  const call = async (method: string, path: string, body?: unknown) =>
    h.service.request(method, path, { key: tenant.key, ...(body !== undefined ? { body } : {}) })

  /** The key select of the page: opens it and picks the key by name. */
  async function chooseKey(name: string) {
    await page.locator('main').getByRole('button', { name: /Key/ }).first().click()
    await page.getByRole('option', { name: new RegExp(`^${name}`) }).click()
  }

  before(async () => {
    h = await startConsoleHarness()
    tenant = await h.service.createTenant()
    owner = await h.member(tenant.tenantId, 'tenant:owner')
    for (const [slot, keyType, algorithm] of [
      ['kem', 'Encryption', 'ML-KEM-768'],
      ['dsa', 'Signing', 'ML-DSA-65'],
      ['hmac', 'HMAC', 'HMAC-SHA256'],
    ] as const) {
      const created = await call('POST', '/api/v1/keys', { name: `try-${slot}`, keyType, algorithm })
      assert.equal(created.status, 201, created.text)
      keys[slot] = created.body.id
    }
    page = await h.newPage()
    await h.signIn(page, owner, { tenantId: tenant.tenantId, path: '/console/try' })
  })
  after(async () => {
    await h?.stop()
  })

  test('encrypt a text with an ML-KEM-768 key, decrypt it back, and a wrong context is the API error', async () => {
    await page.getByRole('heading', { level: 1, name: 'Try it' }).waitFor()
    await page.getByText('The operations offered follow').waitFor()
    await assertAccessible(page, 'Try it without a key')
    await screenshotBothThemes(page, 'try-choose-key')

    await chooseKey('try-kem')
    await page.waitForURL((url) => url.searchParams.get('keyId') === keys.kem)
    const encryptTab = page.getByRole('tab', { name: 'Encrypt' })
    await encryptTab.waitFor()
    assert.equal(await encryptTab.getAttribute('aria-selected'), 'true')
    // An Encryption key offers encrypt, decrypt and data keys; no signing.
    assert.equal(await page.getByRole('tab', { name: 'Sign' }).count(), 0)

    const text = 'Grüße aus dem Try-it: order 1042 ✓'
    await page.getByLabel('Text to encrypt').fill(text)
    await page.getByRole('tabpanel', { name: 'Encrypt' }).getByLabel('Context (optional)').fill('order=1042')
    // The equivalent request carries the real body: the text as Base64 and the context.
    const panel = page.getByRole('tabpanel', { name: 'Encrypt' })
    await panel.getByText('Equivalent request').click()
    const curl = await panel.locator('.equivalent-request code').textContent()
    assert.match(curl ?? '', /-X POST '.*\/api\/v1\/encrypt'/)
    assert.ok(curl?.includes(`"plaintext":"${b64(text)}"`), curl ?? '')
    assert.ok(curl?.includes('"context":"order=1042"'), curl ?? '')
    assert.ok(curl?.includes(`"keyId":"${keys.kem}"`), curl ?? '')

    await page.getByRole('button', { name: 'Encrypt', exact: true }).click()
    await page.getByRole('status').filter({ hasText: 'Encrypted with try-kem, key version 1' }).waitFor()
    const answer = JSON.parse((await panel.locator('.try-answer code').textContent()) ?? '')
    assert.equal(answer.keyId, keys.kem)
    assert.ok(answer.encapsulatedKey && answer.nonce && answer.tag && answer.ciphertext)
    // Independently: the API opens what the console made, with the context.
    const opened = await call('POST', '/api/v1/decrypt', { ...answer, context: 'order=1042' })
    assert.equal(opened.status, 200, opened.text)
    assert.equal(Buffer.from(opened.body.plaintext, 'base64').toString('utf8'), text)
    await assertAccessible(page, 'Try it: an encrypt answer')
    await screenshotBothThemes(page, 'try-encrypt')

    // "Decrypt this" carries the answer (and its context) over to the Decrypt tab.
    await page.getByRole('button', { name: 'Decrypt this' }).click()
    await page.waitForURL((url) => url.searchParams.get('op') === 'decrypt')
    const decrypt = page.getByRole('tabpanel', { name: 'Decrypt' })
    // The focus follows to the panel the answer went to (the one it was in is hidden).
    const heading = decrypt.getByRole('heading', { name: 'Decrypt' })
    await waitFor(
      async () => heading.evaluate((element) => element === element.ownerDocument.activeElement),
      'the focus on the Decrypt panel',
    )
    assert.deepEqual(JSON.parse(await decrypt.getByLabel('Encrypt answer (JSON)').inputValue()), answer)
    assert.equal(await decrypt.getByLabel('Context', { exact: true }).inputValue(), 'order=1042')
    await decrypt.getByRole('button', { name: 'Decrypt', exact: true }).click()
    await decrypt.getByRole('status').filter({ hasText: 'Decrypted with key version 1' }).waitFor()
    assert.equal(await decrypt.locator('.try-output code').textContent(), text)
    await assertAccessible(page, 'Try it: decrypted')
    await screenshotBothThemes(page, 'try-decrypt')

    // Another context: the API's one error for every mismatch, in an alert.
    const refused = await call('POST', '/api/v1/decrypt', { ...answer, context: 'order=9999' })
    assert.equal(refused.status, 400)
    assert.equal(refused.body.error, 'decryption_failed')
    await decrypt.getByLabel('Context', { exact: true }).fill('order=9999')
    // The earlier answer is gone once the form changes.
    assert.equal(await decrypt.locator('.try-output').count(), 0)
    await decrypt.getByRole('button', { name: 'Decrypt', exact: true }).click()
    const alert = decrypt.getByRole('alert')
    await alert.waitFor()
    const said = (await alert.textContent()) ?? ''
    assert.ok(said.includes(refused.body.message), said)
    assert.ok(said.includes('decryption_failed'), said)
    await assertAccessible(page, 'Try it: a decrypt error')
    await screenshotBothThemes(page, 'try-decrypt-error')

    // The tabs live in the URL: a reload opens the same key and operation.
    await page.reload()
    await page.getByRole('tabpanel', { name: 'Decrypt' }).waitFor()
    assert.equal(await page.getByRole('tab', { name: 'Decrypt' }).getAttribute('aria-selected'), 'true')
  })

  test('a data key: the plaintext key is shown only after Reveal, and unwraps to the same bytes', async () => {
    await page.getByRole('tab', { name: 'Data key' }).click()
    await page.waitForURL((url) => url.searchParams.get('op') === 'data-key')
    const panel = page.getByRole('tabpanel', { name: 'Data key' })
    await panel.getByRole('button', { name: 'Generate data key' }).click()
    await panel.getByRole('status').filter({ hasText: 'A 32-byte data key' }).waitFor()
    assert.equal(await panel.getByTestId('plaintext-dek').count(), 0, 'hidden before Reveal')
    await panel.getByText('Hidden', { exact: true }).waitFor()
    const encryptedDek = (await panel.locator('.try-output code').first().textContent()) ?? ''
    await assertAccessible(page, 'Try it: a data key, hidden')
    await screenshotBothThemes(page, 'try-data-key-hidden')

    await panel.getByRole('button', { name: 'Reveal data key' }).click()
    const plaintextDek = (await panel.getByTestId('plaintext-dek').textContent()) ?? ''
    assert.equal(Buffer.from(plaintextDek, 'base64').length, 32)
    const unwrapped = await call('POST', `/api/v1/keys/${keys.kem}/unwrap`, { encryptedDek })
    assert.equal(unwrapped.status, 200, unwrapped.text)
    assert.equal(unwrapped.body.plaintext, plaintextDek)
    await assertAccessible(page, 'Try it: a data key, revealed')
    await screenshotBothThemes(page, 'try-data-key-revealed')
    await panel.getByRole('button', { name: 'Hide data key' }).click()
    assert.equal(await panel.getByTestId('plaintext-dek').count(), 0, 'hidden again')
  })

  test('sign with an ML-DSA-65 key, check it through the API and node:crypto, verify in the console', async () => {
    await chooseKey('try-dsa')
    await page.waitForURL((url) => url.searchParams.get('keyId') === keys.dsa)
    const sign = page.getByRole('tabpanel', { name: 'Sign' })
    const message = 'Release 2.4.1 approved'
    await sign.getByLabel('Message').fill(message)
    await sign.getByRole('button', { name: 'Sign', exact: true }).click()
    await sign.getByRole('status').filter({ hasText: 'Signed with key version 1 (ML-DSA-65' }).waitFor()
    const signature = (await sign.getByTestId('signature').textContent()) ?? ''

    const checked = await call('POST', '/api/v1/verify', {
      keyId: keys.dsa,
      message: b64(message),
      signature,
    })
    assert.equal(checked.status, 200, checked.text)
    assert.equal(checked.body.valid, true)
    const pub = await call('GET', `/api/v1/keys/${keys.dsa}/public?format=PEM`)
    assert.equal(pub.status, 200, pub.text)
    assert.equal(
      verifySignature(null, Buffer.from(message), pub.body.publicKey, Buffer.from(signature, 'base64')),
      true,
    )
    await assertAccessible(page, 'Try it: a signature')
    await screenshotBothThemes(page, 'try-sign')

    await sign.getByRole('button', { name: 'Verify this' }).click()
    await page.waitForURL((url) => url.searchParams.get('op') === 'verify')
    const verify = page.getByRole('tabpanel', { name: 'Verify' })
    assert.equal(await verify.getByLabel('Message').inputValue(), message)
    await verify.getByRole('button', { name: 'Verify', exact: true }).click()
    await verify.getByRole('status').filter({ hasText: 'Valid.' }).waitFor()
    await screenshotBothThemes(page, 'try-verify-valid')

    await verify.getByLabel('Message').fill(`${message}!`)
    await verify.getByRole('button', { name: 'Verify', exact: true }).click()
    await verify.getByRole('status').filter({ hasText: 'Not valid.' }).waitFor()
    await assertAccessible(page, 'Try it: a signature that does not verify')
    await screenshotBothThemes(page, 'try-verify-invalid')
  })

  test('a MAC with an HMAC key: generated, checked through the API, verified in the console', async () => {
    await chooseKey('try-hmac')
    await page.waitForURL((url) => url.searchParams.get('keyId') === keys.hmac)
    const panel = page.getByRole('tabpanel', { name: 'MAC' })
    await panel.getByLabel('Data', { exact: true }).fill('invoice #77')
    const curl = async () => panel.locator('.equivalent-request code').first().textContent()
    await panel.getByText('Equivalent request').first().click()
    assert.ok((await curl())?.includes(`/api/v1/keys/${keys.hmac}/mac'`))
    assert.ok((await curl())?.includes(`"data":"${b64('invoice #77')}"`))
    await panel.getByRole('button', { name: 'Generate MAC' }).click()
    await panel.getByRole('status').filter({ hasText: 'HMAC-SHA256 computed with key version 1' }).waitFor()
    const mac = (await panel.getByTestId('mac').textContent()) ?? ''
    const checked = await call('POST', `/api/v1/keys/${keys.hmac}/mac/verify`, {
      data: b64('invoice #77'),
      mac,
    })
    assert.equal(checked.status, 200, checked.text)
    assert.equal(checked.body.valid, true)
    // HMAC is deterministic: the API's own MAC of the same data is the same.
    const again = await call('POST', `/api/v1/keys/${keys.hmac}/mac`, { data: b64('invoice #77') })
    assert.equal(again.body.mac, mac)

    await panel.getByRole('button', { name: 'Verify this' }).click()
    assert.equal(await panel.getByLabel('MAC (Base64)').inputValue(), mac)
    await panel.getByRole('button', { name: 'Verify MAC' }).click()
    await panel.getByRole('status').filter({ hasText: 'Valid.' }).waitFor()
    await assertAccessible(page, 'Try it: MAC')
    await screenshotBothThemes(page, 'try-mac')
  })

  test('a viewer sees the operations disabled, with the reason', async () => {
    const viewer = await h.member(tenant.tenantId, 'tenant:viewer')
    const viewerPage = await h.newPage()
    await h.signIn(viewerPage, viewer, {
      tenantId: tenant.tenantId,
      path: `/console/try?keyId=${keys.kem}&op=encrypt`,
    })
    const encrypt = viewerPage.getByRole('button', { name: 'Encrypt', exact: true })
    await encrypt.waitFor()
    assert.equal(await encrypt.isDisabled(), true)
    await viewerPage
      .getByRole('tabpanel', { name: 'Encrypt' })
      .getByText('Your role does not include encryption:write')
      .waitFor()
    await assertAccessible(viewerPage, 'Try it as a viewer')
    await screenshotBothThemes(viewerPage, 'try-viewer')
    await viewerPage.context().close()
  })

  test('no Content Security Policy refusal and no uncaught error on any page', () => {
    assert.deepEqual(h.violations, [])
  })
})
