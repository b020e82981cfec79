import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import {
  createTestDatabase,
  httpRequest,
  runCli,
  type SpawnedService,
  spawnService,
  type TestDatabase,
  testEnv,
} from '../helpers/service.ts'

/**
 * A clean start as `npm start` runs it (two API processes and the job process), at info level,
 * then the first batch encrypt, the OpenID provider's first requests and a few others: every line the processes print is a
 * JSON log line (no deprecation notices from ajv or Fastify, no ajv warnings on the first use
 * of a serializer).
 */

let db: TestDatabase
let service: SpawnedService | undefined

before(async () => {
  db = await createTestDatabase()
})
after(async () => {
  await service?.stop('SIGTERM')
  await db?.drop()
})

test('a clean start and its first batch print only JSON lines', async () => {
  const env = testEnv(db, { KMS_API_PROCESSES: '2', KMS_ACCESS_LOG: 'true' })
  service = await spawnService(env)
  const created = await runCli(['create-tenant', '--name', 'logs'], env)
  assert.equal(created.code, 0, created.stderr)
  const key = JSON.parse(created.stdout).apiKey.key as string

  const made = await httpRequest(service.baseUrl, 'POST', '/api/v1/keys', {
    key,
    body: { name: 'default', keyType: 'Encryption', algorithm: 'ML-KEM-768', isDefault: true },
  })
  assert.equal(made.status, 201, made.text)
  // Each API process serves some of these: every process meets its first batch.
  for (let i = 0; i < 6; i++) {
    const items = Array.from({ length: 16 }, (_, n) => ({
      plaintext: Buffer.from(`item ${n}`).toString('base64'),
    }))
    const batch = await httpRequest(service.baseUrl, 'POST', '/api/v1/encrypt/batch', {
      key,
      body: { items },
    })
    assert.equal(batch.status, 200, batch.text)
    const decrypted = await httpRequest(service.baseUrl, 'POST', '/api/v1/decrypt/batch', {
      key,
      body: {
        items: [
          ...batch.body.results,
          { ciphertext: 'AAAA', encapsulatedKey: 'AAAA', nonce: 'AAAA', tag: 'AAAA' },
        ],
      },
    })
    assert.equal(decrypted.status, 200, decrypted.text)
    const bad = await httpRequest(service.baseUrl, 'GET', '/api/v1/keys?sort=bogus', { key })
    assert.equal(bad.status, 400)
    // The OpenID provider in each process: discovery, a sign-in page, a refused token request.
    assert.equal((await fetch(new URL('/.well-known/openid-configuration', service.baseUrl))).status, 200)
    const authorize = await fetch(
      new URL(
        '/oidc/auth?client_id=kms-console&response_type=code&scope=openid&code_challenge=abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqr&code_challenge_method=S256',
        service.baseUrl,
      ),
      { redirect: 'manual' },
    )
    assert.ok(authorize.status < 500)
    const token = await fetch(new URL('/oidc/token', service.baseUrl), {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: 'grant_type=authorization_code&code=nope&client_id=kms-console',
    })
    assert.equal(token.status, 400)
  }
  assert.equal(await service.stop('SIGTERM'), 0)

  const lines = service
    .output()
    .split('\n')
    .filter((line) => line.trim() !== '')
  assert.ok(lines.length > 10, 'the processes logged')
  const notJson = lines.filter((line) => {
    try {
      return typeof JSON.parse(line) !== 'object'
    } catch {
      return true
    }
  })
  assert.deepEqual(notJson, [], 'lines that are not JSON')
})
