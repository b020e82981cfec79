import assert from 'node:assert/strict'
import { createHmac, timingSafeEqual } from 'node:crypto'
import { mkdtempSync, readFileSync, statSync } from 'node:fs'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import type { Sql } from '../../src/data/database.ts'
import { generateMasterKey, keyringFromRaw, readKeyFile, writeKeyFile } from '../../src/keyring/master-key.ts'
import { createTenantKeks } from '../../src/keyring/tenant-kek.ts'
import {
  httpRequest,
  runCli,
  type SpawnedService,
  spawnService,
  startTestService,
  type TenantWithKey,
  type TestService,
  waitFor,
} from '../helpers/service.ts'
import { consoleClient, type MemberSession, memberSession, signIn } from '../helpers/sign-in.ts'
import { startSmtp, type TestSmtp } from '../helpers/smtp.ts'

/**
 * Issue 31, defect 2: a master key rotation re-wraps everything sealed under the master keyring
 * (tenant KEKs, ID-token signing keys, client and partner webhook secrets, TOTP secrets, unsent
 * codes and links), so processes started afterwards with only the new key sign people in, accept
 * confidential clients, sign partner events and decrypt old data; health reports each dependency.
 */

const REDIRECT = 'http://127.0.0.1:9/console'
const RESOURCE = 'https://orders-api.example.com'

const masterKeyIdOf = (raw: Buffer) => keyringFromRaw([raw]).primary.id

/** The tables the key-file test puts something sealed in before rotating. */
const SEALED_HERE = ['tenants', 'signingKeys', 'applications', 'partners', 'totp', 'invitations'] as const

/**
 * Every master key id a sealed blob is stored under, per table: after a rotation there is only
 * the new one. (The test reads the tables directly, as an auditor of the database would.)
 */
async function masterKeysInUse(sql: Sql): Promise<Record<string, string[]>> {
  const ids = async (query: Promise<{ id: string | null }[]>) =>
    [...new Set((await query).map((row) => row.id ?? 'null'))].sort()
  return {
    tenants: await ids(sql`SELECT kek_master_key_id AS id FROM tenants`),
    signingKeys: await ids(sql`SELECT master_key_id AS id FROM oidc_signing_keys`),
    applications: await ids(
      sql`SELECT client_secret_master_key_id AS id FROM applications WHERE client_secret_sealed IS NOT NULL`,
    ),
    partners: await ids(
      sql`SELECT webhook_secret_key_id AS id FROM partners WHERE webhook_secret_sealed IS NOT NULL`,
    ),
    totp: await ids(sql`SELECT totp_master_key_id AS id FROM accounts WHERE totp_secret_sealed IS NOT NULL`),
    codes: await ids(sql`SELECT master_key_id AS id FROM account_otps WHERE code_sealed IS NOT NULL`),
    invitations: await ids(
      sql`SELECT token_master_key_id AS id FROM team_invitations WHERE token_sealed IS NOT NULL`,
    ),
  }
}

/** What a partner runs: an HTTP receiver that keeps each request's raw body and signature. */
async function receiver(): Promise<{
  url: string
  received: Array<{ body: string; signature: string | undefined }>
  server: Server
}> {
  const received: Array<{ body: string; signature: string | undefined }> = []
  const server = createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (chunk: Buffer) => chunks.push(chunk))
    req.on('end', () => {
      const signature = req.headers['x-service-signature']
      received.push({
        body: Buffer.concat(chunks).toString('utf8'),
        signature: typeof signature === 'string' ? signature : undefined,
      })
      res.writeHead(200).end()
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()))
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/events`, received, server }
}

const basic = (id: string, secret: string) =>
  `Basic ${Buffer.from(`${encodeURIComponent(id)}:${encodeURIComponent(secret)}`).toString('base64')}`

function clientCredentials(baseUrl: string, client: { clientId: string; clientSecret: string }) {
  return fetch(new URL('/oidc/token', baseUrl), {
    method: 'POST',
    headers: {
      'content-type': 'application/x-www-form-urlencoded',
      authorization: basic(client.clientId, client.clientSecret),
    },
    body: new URLSearchParams({ grant_type: 'client_credentials', resource: RESOURCE }),
  })
}

describe('master key rotation with a key file: two rotations, two restarted processes, everything still works', () => {
  let svc: TestService
  let keyFile: string
  let oldKey: Buffer
  let env: Record<string, string>
  let smtp: TestSmtp
  let events: Awaited<ReturnType<typeof receiver>>
  let first: SpawnedService | undefined
  let second: SpawnedService | undefined
  // Made before the rotations.
  let tenant: TenantWithKey
  let member: MemberSession
  let machine: { clientId: string; clientSecret: string }
  let envelope: Record<string, unknown>
  let kekSealed: Buffer
  let partner: { id: string; secret: string }

  before(async () => {
    keyFile = join(mkdtempSync(join(tmpdir(), 'kms-mk-')), 'master.key')
    oldKey = generateMasterKey()
    writeKeyFile(keyFile, [oldKey])
    smtp = await startSmtp('accept')
    events = await receiver()
    svc = await startTestService({
      KMS_MASTER_KEY: '',
      KMS_MASTER_KEY_FILE: keyFile,
      KMS_CONSOLE_REDIRECT_URIS: REDIRECT,
      KMS_SMTP_URL: smtp.url,
      // Partner events go through the webhook outbox to the receiver on this machine.
      KMS_OUTBOUND_ALLOW: '127.0.0.1',
      KMS_JOB_SWEEP_MS: '200',
    })
    env = { ...svc.env, KMS_MASTER_KEY: '', KMS_MASTER_KEY_FILE: keyFile }
  })
  after(async () => {
    await second?.stop()
    await first?.stop()
    // The in-process service was stopped for the restart: its database goes here.
    await svc?.api.stop()
    await svc?.sql.end({ timeout: 5 })
    await svc?.db.drop()
    await smtp?.stop()
    events?.server.close()
  })

  test('before: data, a member, a confidential client, a partner and its event, all under the first key', async () => {
    assert.equal(statSync(keyFile).mode & 0o777, 0o600)
    tenant = await svc.createTenant()
    const client = await consoleClient(svc.baseUrl, REDIRECT)
    // A member signs in: the first ID-token signing key is made, sealed under the first key.
    member = await memberSession(svc, client, tenant.tenantId, 'tenant:owner')

    const key = await svc.request('POST', '/api/v1/keys', {
      key: tenant.key,
      body: { name: 'before-rotation', keyType: 'Encryption', algorithm: 'ML-KEM-768' },
    })
    assert.equal(key.status, 201, key.text)
    const encrypted = await svc.request('POST', '/api/v1/encrypt', {
      key: tenant.key,
      body: { keyId: key.body.id, plaintext: Buffer.from('sealed before').toString('base64'), context: 'mk' },
    })
    assert.equal(encrypted.status, 200, encrypted.text)
    envelope = encrypted.body
    kekSealed = await svc.api.services.tenantKeks.seal(tenant.tenantId, Buffer.from('kek payload'), 'mk-test')

    const app = await svc.request('POST', '/api/v1/applications', {
      key: tenant.key,
      body: { name: 'Batch', applicationType: 'machine_to_machine', redirectUris: [], resources: [RESOURCE] },
    })
    assert.equal(app.status, 201, app.text)
    machine = { clientId: app.body.clientId, clientSecret: app.body.clientSecret }
    assert.equal((await clientCredentials(svc.baseUrl, machine)).status, 200)

    // An authenticator being enrolled (its secret sealed) and an invitation not yet e-mailed
    // (this process runs no jobs: the link stays sealed until a restarted process sends it).
    const enrolling = await svc.api.services.accounts.createTeamAccount({
      email: `totp-${process.pid}@example.com`,
      password: 'a-password-long-enough',
    })
    await svc.api.services.accounts.beginTotpEnrolment(enrolling.id, 'KMS')
    const invited = await svc.request('POST', '/api/v1/team/invitations', {
      headers: member.headers,
      body: { email: `invitee-${process.pid}@example.com`, role: 'tenant:viewer' },
    })
    assert.equal(invited.status, 201, invited.text)

    // A partner with an endpoint and its secret (made on first read, under the first key), and
    // an event for it in the outbox.
    const partners = svc.api.services.partners
    const created = await partners.createPartner(
      { name: 'Rotating partner', email: 'p@partner.example' },
      'test',
    )
    const { key: partnerKey } = await partners.createKey(created.id, 'main', 'test')
    const headers = { authorization: `Bearer ${partnerKey}` }
    const endpoint = await svc.request('POST', '/api/v1/partners/webhook-endpoints', {
      headers,
      body: { url: events.url },
    })
    assert.equal(endpoint.status, 201, endpoint.text)
    const secret = await svc.request('GET', '/api/v1/partners/webhook-secret', { headers })
    assert.equal(secret.status, 200, secret.text)
    partner = { id: created.id, secret: secret.body.secret }
    const code = await svc.request('POST', '/api/v1/partners/codes', { headers, body: { label: 'rotation' } })
    assert.equal(code.status, 201, code.text)
    const referred = await svc.createTenant()
    assert.equal(
      await partners.attribute({
        tenantId: referred.tenantId,
        code: code.body.code,
        signerEmail: `owner-${process.pid}@customer.example`,
      }),
      true,
    )

    const firstId = masterKeyIdOf(oldKey)
    const inUse = await masterKeysInUse(svc.sql)
    for (const table of SEALED_HERE)
      assert.deepEqual(inUse[table], [firstId], `${table} sealed under the first key`)
  })

  test('two rotations re-wrap everything under the newest key and drop the others from the file', async () => {
    const keys: Buffer[] = [oldKey]
    for (const round of [1, 2]) {
      const result = await runCli(['rotate-master-key'], env)
      assert.equal(result.code, 0, result.stderr)
      const summary = JSON.parse(result.stdout)
      assert.equal(summary.unreadable, 0, result.stderr)
      // Two tenants, a signing key, a client secret, a partner secret, a TOTP secret, an
      // invitation link.
      assert.ok(summary.rewrapped >= 7, `round ${round}: ${result.stdout}\n${result.stderr}`)
      assert.match(result.stderr, /re-wrapped 2\/2 tenant KEKs/)
      assert.match(result.stderr, /re-wrapped 1 ID-token signing keys/)
      assert.match(result.stderr, /re-wrapped 1 application client secrets/)
      assert.match(result.stderr, /re-wrapped 1 partner webhook secrets/)
      const inFile = readKeyFile(keyFile)
      assert.equal(inFile.length, 1, 'the retired keys are removed from the file')
      assert.ok(!keys.some((k) => k.equals(inFile[0]!)), 'a new key each time')
      keys.push(inFile[0]!)
      assert.equal(summary.masterKeyId, masterKeyIdOf(inFile[0]!))
    }
    assert.equal(statSync(keyFile).mode & 0o777, 0o600)
    const text = readFileSync(keyFile, 'utf8')
    for (const retired of keys.slice(0, -1)) assert.ok(!text.includes(retired.toString('base64')))
    const newest = masterKeyIdOf(keys.at(-1)!)
    const inUse = await masterKeysInUse(svc.sql)
    for (const table of SEALED_HERE)
      assert.deepEqual(inUse[table], [newest], `${table} sealed under the newest key`)
    // No one-time code was sent here: nothing else is sealed at all.
    assert.deepEqual(inUse['codes'], [])

    // Run again with nothing to do (the key changes, nothing else does).
    const again = await runCli(['rotate-master-key'], env)
    assert.equal(again.code, 0, again.stderr)
    const summary = JSON.parse(again.stdout)
    assert.equal(summary.unreadable, 0)
    // A process that knows only the newest key opens what a tenant KEK sealed before.
    const onlyNewest = createTenantKeks({ sql: svc.sql, masterKeys: keyringFromRaw(readKeyFile(keyFile)) })
    assert.equal((await onlyNewest.open(tenant.tenantId, kekSealed, 'mk-test')).toString(), 'kek payload')
  })

  test('after a restart of two processes with only the newest key: sign-in, client_credentials, a partner event, decrypt, health', async () => {
    await svc.api.stop()
    first = await spawnService(env)
    // One deployment: the second process names the first's issuer.
    second = await spawnService({ ...env, ID_URL: first.baseUrl })

    // The full authorization-code flow through the pages of the first process; its access
    // token is accepted by the second.
    const client = await consoleClient(first.baseUrl, REDIRECT)
    const { tokens } = await signIn(first.baseUrl, client, {
      email: member.email,
      password: member.password,
      resource: `urn:kms:tenant:${tenant.tenantId}`,
      tokenResource: true,
    })
    assert.ok(tokens.id_token, 'an ID token, its signature checked by openid-client')
    const team = await httpRequest(second.baseUrl, 'GET', '/api/v1/team/members', {
      headers: { authorization: `Bearer ${tokens.access_token}` },
    })
    assert.equal(team.status, 200, team.text)

    // The confidential client registered before the rotations.
    const granted = await clientCredentials(second.baseUrl, machine)
    assert.equal(granted.status, 200, await granted.clone().text())
    assert.equal(((await granted.json()) as { token_type: string }).token_type, 'Bearer')

    // Data encrypted before the rotations.
    const decrypted = await httpRequest(second.baseUrl, 'POST', '/api/v1/decrypt', {
      key: tenant.key,
      body: { ...envelope, context: 'mk' },
    })
    assert.equal(decrypted.status, 200, decrypted.text)
    assert.equal(Buffer.from(decrypted.body.plaintext, 'base64').toString(), 'sealed before')

    // The partner's event, delivered by a restarted process's jobs, signed with the secret the
    // partner read before the rotations.
    await waitFor(() => events.received.length >= 1, 'the partner event')
    const [event] = events.received
    const expected = Buffer.from(
      `sha256=${createHmac('sha256', partner.secret).update(event!.body).digest('hex')}`,
    )
    assert.ok(
      event!.signature !== undefined &&
        event!.signature.length === expected.length &&
        timingSafeEqual(Buffer.from(event!.signature), expected),
      'signed with the partner secret',
    )
    assert.equal(JSON.parse(event!.body).type, 'referral.created')
    assert.equal(JSON.parse(event!.body).partnerId, partner.id)

    // The invitation link sealed before the rotations is e-mailed by a restarted process.
    await waitFor(
      () => smtp.messages.some((m) => m.to.some((to) => to.startsWith(`invitee-${process.pid}@`))),
      'the invitation e-mail',
    )

    // Health checks each dependency, the signing key included.
    for (const started of [first, second]) {
      const health = await httpRequest(started.baseUrl, 'GET', '/api/v1/health')
      assert.equal(health.status, 200, health.text)
      assert.equal(health.body.status, 'ok')
      assert.deepEqual(health.body.checks, {
        database: { status: 'ok' },
        redis: { status: 'ok' },
        identitySigningKeys: { status: 'ok' },
      })
    }
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
    await svc.api.services.identity.signingKeys.current()
    const oldKey = svc.env['KMS_MASTER_KEY']!
    const newKey = generateMasterKey().toString('base64')
    const env = { ...svc.env, KMS_MASTER_KEY: newKey, KMS_MASTER_KEY_PREVIOUS: oldKey }
    const result = await runCli(['rotate-master-key'], env)
    assert.equal(result.code, 0, result.stderr)
    assert.deepEqual(
      { ...JSON.parse(result.stdout), masterKeyId: undefined },
      { masterKeyId: undefined, rewrapped: 2, unreadable: 0 },
    )
    const newId = masterKeyIdOf(Buffer.from(newKey, 'base64'))
    for (const [table, ids] of Object.entries(await masterKeysInUse(svc.sql))) {
      if (ids.length > 0) assert.deepEqual(ids, [newId], table)
    }
    const onlyNew = createTenantKeks({
      sql: svc.sql,
      masterKeys: keyringFromRaw([Buffer.from(newKey, 'base64')]),
    })
    assert.equal((await onlyNew.open(tenant.tenantId, sealed, 'aad')).toString(), 'payload')
    // Running it again has nothing left to do.
    const again = await runCli(['rotate-master-key'], env)
    assert.equal(again.code, 0, again.stderr)
    assert.equal(JSON.parse(again.stdout).rewrapped, 0)

    // Without the key things are sealed under, nothing is lost: they are counted, left as they
    // are, and the command fails saying what to do.
    const stranger = generateMasterKey().toString('base64')
    const without = await runCli(['rotate-master-key'], { ...svc.env, KMS_MASTER_KEY: stranger })
    assert.equal(without.code, 1, without.stderr)
    assert.equal(JSON.parse(without.stdout).unreadable, 2)
    assert.match(
      without.stderr,
      /1 tenant KEKs, 1 ID-token signing keys are sealed by master keys this command was not given/,
    )
    assert.match(without.stderr, /KMS_MASTER_KEY_PREVIOUS/)
    assert.deepEqual((await masterKeysInUse(svc.sql)).tenants, [newId])
  })

  test('a malformed master key is refused with a clear message and exit code 2', async () => {
    const result = await runCli(['rotate-master-key'], { ...svc.env, KMS_MASTER_KEY: 'dG9vIHNob3J0' })
    assert.equal(result.code, 2)
    assert.match(result.stderr, /must decode to 32 bytes/)
  })
})

describe('health while the signing key does not open', () => {
  let svc: TestService
  let restarted: SpawnedService | undefined
  before(async () => {
    svc = await startTestService()
  })
  after(async () => {
    await restarted?.stop()
    await svc?.stop()
  })

  test('a process without the master key the signing key is sealed under answers 503, naming the check', async () => {
    await svc.api.services.identity.signingKeys.current()
    const tenant = await svc.createTenant()
    const created = await svc.request('POST', '/api/v1/keys', {
      key: tenant.key,
      body: { name: 'under-the-old-master-key', keyType: 'Encryption', algorithm: 'ML-KEM-768' },
    })
    assert.equal(created.status, 201, created.text)
    const healthy = await svc.request('GET', '/api/v1/health')
    assert.equal(healthy.status, 200, healthy.text)
    assert.equal(healthy.body.checks.identitySigningKeys.status, 'ok')
    // The key file or KMS_MASTER_KEY lost the key the signing key is under (what a rotation that
    // skipped the signing keys left behind).
    restarted = await spawnService({ ...svc.env, KMS_MASTER_KEY: generateMasterKey().toString('base64') })
    const health = await httpRequest(restarted.baseUrl, 'GET', '/api/v1/health')
    assert.equal(health.status, 503, health.text)
    assert.equal(health.body.status, 'unavailable')
    assert.ok(Number(health.headers.get('retry-after')) > 0, 'Retry-After')
    assert.deepEqual(health.body.checks.database, { status: 'ok' })
    assert.equal(health.body.checks.identitySigningKeys.status, 'failed')
    assert.match(
      health.body.checks.identitySigningKeys.reason,
      /sealed by a master key this process does not hold/,
    )
    assert.equal(health.body.database.status, 'up')
    // The provider says the same; its log says which key.
    const discovery = await httpRequest(restarted.baseUrl, 'GET', '/.well-known/openid-configuration')
    assert.equal(discovery.status, 503)
    assert.equal(discovery.body.error, 'identity_unavailable')
    assert.ok(Number(discovery.headers.get('retry-after')) > 0, 'the provider’s 503 says when to retry')
    // The data plane names the cause too: a 503 with Retry-After, not a 500.
    const encrypt = await httpRequest(restarted.baseUrl, 'POST', '/api/v1/encrypt', {
      key: tenant.key,
      body: { keyId: created.body.id, plaintext: Buffer.from('hello').toString('base64') },
    })
    assert.equal(encrypt.status, 503, encrypt.text)
    assert.equal(encrypt.body.error, 'master_key_unavailable')
    assert.ok(Number(encrypt.headers.get('retry-after')) > 0, 'Retry-After')
    assert.doesNotMatch(encrypt.text, new RegExp(tenant.key), 'no credential in the answer')
    await waitFor(
      () => /sealed by an unknown master key/.test(restarted!.output()),
      'the log line naming the key',
    )
  })
})
