import assert from 'node:assert/strict'
import { mkdtempSync, readFileSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { generateMasterKey, keyringFromRaw, readKeyFile, writeKeyFile } from '../src/keyring/master-key.ts'
import { createTenantKeks } from '../src/keyring/tenant-kek.ts'
import { runCli, startTestService, type TestService } from './helpers/service.ts'

const kekMasterIds = async (svc: TestService) =>
  (await svc.sql<{ id: string; kek_master_key_id: string }[]>`SELECT id, kek_master_key_id FROM tenants`).map(
    (r) => r.kek_master_key_id,
  )

describe('master key rotation with a key file', () => {
  let svc: TestService
  let keyFile: string
  let oldKey: Buffer
  before(async () => {
    keyFile = join(mkdtempSync(join(tmpdir(), 'kms-mk-')), 'master.key')
    oldKey = generateMasterKey()
    writeKeyFile(keyFile, [oldKey])
    svc = await startTestService({ KMS_MASTER_KEY: '', KMS_MASTER_KEY_FILE: keyFile })
  })
  after(async () => svc?.stop())

  test('re-wraps every tenant KEK; sealed data stays readable, by the running service too', async () => {
    assert.equal(statSync(keyFile).mode & 0o777, 0o600)
    const tenants = [await svc.createTenant(), await svc.createTenant(), await svc.createTenant()]
    const keks = svc.api.services.tenantKeks
    const sealed = await Promise.all(
      tenants.map((t) => keks.seal(t.tenantId, Buffer.from(`secret of ${t.tenantId}`), `test:${t.tenantId}`)),
    )
    const oldId = keyringFromRaw([oldKey]).primary.id
    assert.deepEqual(new Set(await kekMasterIds(svc)), new Set([oldId]))

    const result = await runCli(['rotate-master-key'], {
      ...svc.env,
      KMS_MASTER_KEY: '',
      KMS_MASTER_KEY_FILE: keyFile,
    })
    assert.equal(result.code, 0, result.stderr)
    const summary = JSON.parse(result.stdout)
    assert.equal(summary.rewrapped, 3)
    assert.match(result.stderr, /re-wrapped 3\/3 KEKs/)

    const [newKey, ...rest] = readKeyFile(keyFile)
    assert.equal(rest.length, 0, 'the retired key is removed from the file')
    assert.ok(!newKey!.equals(oldKey))
    const newId = keyringFromRaw([newKey!]).primary.id
    assert.equal(summary.masterKeyId, newId)
    assert.deepEqual(new Set(await kekMasterIds(svc)), new Set([newId]))
    assert.equal(statSync(keyFile).mode & 0o777, 0o600)
    assert.ok(!readFileSync(keyFile, 'utf8').includes(oldKey.toString('base64')))

    // A process starting now knows only the new key and still opens what was sealed before.
    const fresh = createTenantKeks({ sql: svc.sql, masterKeys: keyringFromRaw([newKey!]) })
    for (const [i, t] of tenants.entries()) {
      assert.equal(
        (await fresh.open(t.tenantId, sealed[i]!, `test:${t.tenantId}`)).toString(),
        `secret of ${t.tenantId}`,
      )
    }
    // The running service follows the file: a tenant it creates now is wrapped by the new key.
    const later = await svc.createTenant()
    const [row] = await svc.sql<{ kek_master_key_id: string }[]>`
      SELECT kek_master_key_id FROM tenants WHERE id = ${later.tenantId}`
    assert.equal(row!.kek_master_key_id, newId)
    // A wrong AAD (another tenant's blob) does not open.
    await assert.rejects(fresh.open(tenants[0]!.tenantId, sealed[1]!, `test:${tenants[0]!.tenantId}`))
  })
})

describe('master key rotation with environment keys', () => {
  let svc: TestService
  before(async () => {
    svc = await startTestService()
  })
  after(async () => svc?.stop())

  test('KMS_MASTER_KEY=new with KMS_MASTER_KEY_PREVIOUS=old re-wraps everything under the new key', async () => {
    const tenant = await svc.createTenant()
    const sealed = await svc.api.services.tenantKeks.seal(tenant.tenantId, Buffer.from('payload'), 'aad')
    const oldKey = svc.env['KMS_MASTER_KEY']!
    const newKey = generateMasterKey().toString('base64')
    const env = { ...svc.env, KMS_MASTER_KEY: newKey, KMS_MASTER_KEY_PREVIOUS: oldKey }
    const result = await runCli(['rotate-master-key'], env)
    assert.equal(result.code, 0, result.stderr)
    const newId = keyringFromRaw([Buffer.from(newKey, 'base64')]).primary.id
    assert.deepEqual(new Set(await kekMasterIds(svc)), new Set([newId]))
    const onlyNew = createTenantKeks({
      sql: svc.sql,
      masterKeys: keyringFromRaw([Buffer.from(newKey, 'base64')]),
    })
    assert.equal((await onlyNew.open(tenant.tenantId, sealed, 'aad')).toString(), 'payload')
    // Running it again has nothing left to do.
    const again = await runCli(['rotate-master-key'], env)
    assert.equal(JSON.parse(again.stdout).rewrapped, 0)
  })

  test('a malformed master key is refused with a clear message and exit code 2', async () => {
    const result = await runCli(['rotate-master-key'], { ...svc.env, KMS_MASTER_KEY: 'dG9vIHNob3J0' })
    assert.equal(result.code, 2)
    assert.match(result.stderr, /must decode to 32 bytes/)
  })
})
