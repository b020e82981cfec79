import assert from 'node:assert/strict'
import { generateKeyPairSync } from 'node:crypto'
import { after, before, test } from 'node:test'
import {
  httpRequest,
  runCli,
  type SpawnedService,
  spawnService,
  startTestService,
  type TestService,
  waitFor,
} from '../helpers/service.ts'

let owner: TestService
let svc: SpawnedService

before(async () => {
  owner = await startTestService()
  // The access log is opt-in at info level: on here, so every request leaves a line to inspect.
  svc = await spawnService({ ...owner.env, LOG_LEVEL: 'debug', KMS_ACCESS_LOG: 'true' })
})
after(async () => {
  await svc?.stop()
  await owner?.stop()
})

test('logs carry request ids but never an API key, a created key or a request body', async () => {
  const created = await runCli(['create-tenant', '--name', 'logged'], owner.env)
  assert.equal(created.code, 0, created.stderr)
  const key = JSON.parse(created.stdout).apiKey.key as string

  const ok = await httpRequest(svc.baseUrl, 'POST', '/api/v1/api-keys', {
    key,
    body: { name: 'secret-marker-name', scopes: ['audit:read'] },
    headers: { 'x-request-id': 'trace-logging-1', authorization: 'Bearer should-not-appear' },
  })
  assert.equal(ok.status, 201)
  const minted = ok.body.key as string
  await httpRequest(svc.baseUrl, 'POST', '/api/v1/api-keys', {
    key: `${key.slice(0, -1)}X`,
    rawBody: `{"name": "${minted}"`,
    headers: { 'content-type': 'application/json' },
  })
  await httpRequest(svc.baseUrl, 'GET', '/api/v1/tenant', { key })
  // The second GET is the last request: once its log line is out, all earlier ones are too.
  await waitFor(() => svc.output().includes(`"url":"/api/v1/tenant"`), 'the last request log')

  const output = svc.output()
  assert.match(output, /trace-logging-1/, 'request ids are logged')
  assert.ok(!output.includes(key), 'the caller API key is not logged')
  assert.ok(!output.includes(key.slice(4, 16)), 'not even its lookup part')
  assert.ok(!output.includes(minted), 'a created API key is not logged')
  assert.ok(!output.includes('should-not-appear'), 'authorization headers are not logged')
  assert.ok(!output.includes('secret-marker-name'), 'request bodies are not logged')
})

test('key material, passwords and exported private keys never reach the logs', async () => {
  const created = await runCli(['create-tenant', '--name', 'logged-keys'], owner.env)
  assert.equal(created.code, 0, created.stderr)
  const key = JSON.parse(created.stdout).apiKey.key as string
  const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' })
  const password = 'logged-password-marker'
  const pem = privateKey.export({ format: 'pem', type: 'pkcs8', cipher: 'aes-256-cbc', passphrase: password })
  const body = {
    name: 'logged-key',
    exportable: true,
    keyType: 'Signing',
    algorithm: 'EC-P256',
    format: 'PEM',
    keyMaterial: pem,
  }

  const wrong = await httpRequest(svc.baseUrl, 'POST', '/api/v1/keys/import', {
    key,
    body: { ...body, password: 'wrong-password-marker' },
  })
  assert.equal(wrong.status, 400)
  const imported = await httpRequest(svc.baseUrl, 'POST', '/api/v1/keys/import', {
    key,
    body: { ...body, password },
  })
  assert.equal(imported.status, 201, imported.text)
  const exported = await httpRequest(svc.baseUrl, 'POST', `/api/v1/keys/${imported.body.id}/export-private`, {
    key,
    body: { confirm: 'logged-key', format: 'JWK' },
  })
  assert.equal(exported.status, 200, exported.text)
  await httpRequest(svc.baseUrl, 'GET', '/api/v1/tenant', { key, headers: { 'x-request-id': 'last-keys' } })
  await waitFor(() => svc.output().includes('last-keys'), 'the last request log')

  const output = svc.output()
  const pemLines = String(pem)
    .split('\n')
    .filter((line) => line.length > 40)
  assert.ok(pemLines.length > 3)
  for (const line of pemLines) assert.ok(!output.includes(line), 'no line of the imported PEM is logged')
  assert.ok(!output.includes(password), 'the import password is not logged')
  assert.ok(!output.includes('wrong-password-marker'), 'a wrong password is not logged')
  assert.ok(!output.includes(exported.body.privateKey.d), 'the exported private scalar is not logged')
})

test('secret values, notes, sensitive fields, TOTP seeds and codes never reach the logs', async () => {
  const created = await runCli(['create-tenant', '--name', 'logged-secrets'], owner.env)
  assert.equal(created.code, 0, created.stderr)
  const key = JSON.parse(created.stdout).apiKey.key as string
  const seed = 'KRSXG5CTMVRXEZLUKN2XAZLSKNSWG4TFOQ'
  const markers = ['value-marker-7d1f', 'notes-marker-3a9c', 'sensitive-marker-55e2', seed]
  const call = (method: string, path: string, body?: unknown, id = 'secrets-log') =>
    httpRequest(svc.baseUrl, method, `/api/v1${path}`, {
      key,
      ...(body === undefined ? {} : { body }),
      headers: { 'x-request-id': id },
    })
  const secret = await call('POST', '/secrets', {
    name: 'logged-secret',
    value: markers[0],
    notes: markers[1],
    customFields: [{ name: 'pin', value: markers[2], sensitive: true }],
    totp: { secret: seed },
  })
  assert.equal(secret.status, 201, secret.text)
  const id = secret.body.id as string
  assert.equal((await call('GET', `/secrets/${id}?include=all`)).body.value, markers[0])
  const code = await call('GET', `/secrets/${id}/totp`)
  assert.equal(code.status, 200, code.text)
  assert.equal((await call('PATCH', `/secrets/${id}`, { value: 'value-marker-second' })).status, 200)
  assert.equal((await call('GET', `/secrets/${id}/versions/1?include=all`)).body.value, markers[0])
  // Refused writes carrying sensitive content: a bad custom field, a bad seed, a taken name.
  const refused = [
    await call('POST', '/secrets', {
      name: 'x',
      value: 'refused-marker-1',
      customFields: [{ name: 'n', type: 'number', value: 'refused-marker-2' }],
    }),
    await call('PATCH', `/secrets/${id}`, { totp: { secret: 'refused-marker-3!' } }),
    await call('POST', '/secrets', { name: 'logged-secret', value: 'refused-marker-4' }),
  ]
  assert.deepEqual(
    refused.map((r) => r.status),
    [400, 400, 409],
  )
  await call('GET', '/tenant', undefined, 'last-secrets')
  await waitFor(() => svc.output().includes('last-secrets'), 'the last request log')

  const output = svc.output()
  assert.match(output, /secrets-log/, 'the secret requests were logged')
  for (const marker of [...markers, 'value-marker-second', 'refused-marker']) {
    assert.ok(!output.includes(marker), `${marker} is not logged`)
  }
  assert.ok(!output.includes(`"${code.body.code}"`), 'the TOTP code is not logged')
})
