import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import { redactUrl } from '../../src/platform/logger.ts'
import {
  createTestDatabase,
  httpRequest,
  runCli,
  type SpawnedService,
  spawnService,
  type TestDatabase,
  testEnv,
  waitFor,
} from '../helpers/service.ts'

/**
 * Issue 30: URLs are logged with their query (KMS_ACCESS_LOG=true), and a one-time link's token,
 * an authorization code or a token hint must not be in them; and every line a started service
 * prints is JSON (oidc-provider's own plain-text NOTICE lines included).
 */

let db: TestDatabase
let env: Record<string, string>
let svc: SpawnedService | undefined

before(async () => {
  db = await createTestDatabase()
  env = testEnv(db, { KMS_ACCESS_LOG: 'true' })
  svc = await spawnService(env)
})
after(async () => {
  await svc?.stop()
  await db?.drop()
})

test('redactUrl: the secret parameters’ values, whatever the case or encoding of the name; the rest kept', () => {
  assert.equal(redactUrl('/keys?limit=5'), '/keys?limit=5')
  assert.equal(redactUrl('/plain'), '/plain')
  assert.equal(
    redactUrl('/invitations/accept?token=abc&lang=en'),
    '/invitations/accept?token=[redacted]&lang=en',
  )
  assert.equal(
    redactUrl('/oidc/auth?client_id=c&Code=1&STATE=2&%74oken=3&id_token_hint=4&SAMLResponse=5&RelayState=6'),
    '/oidc/auth?client_id=c&Code=[redacted]&STATE=[redacted]&%74oken=[redacted]&id_token_hint=[redacted]&SAMLResponse=[redacted]&RelayState=[redacted]',
  )
  assert.equal(redactUrl('/x?password=a=b&otp=1#f'), '/x?password=[redacted]&otp=[redacted]#f')
})

test('with the access log on, no logged URL carries a token, a code or a token hint', async () => {
  const secrets = Array.from({ length: 9 }, (_, i) => `SECRET-${i}-${Date.now().toString(36)}`)
  const created = await runCli(['create-tenant', '--name', 'redaction'], env)
  assert.equal(created.code, 0, created.stderr)
  const key = JSON.parse(created.stdout).apiKey.key as string
  const get = (path: string, headers: Record<string, string> = {}) =>
    fetch(new URL(path, svc!.baseUrl), { headers, redirect: 'manual' }).then((r) => r.arrayBuffer())

  await get(`/invitations/accept?token=${secrets[0]}`)
  await get(`/signup/confirm?token=${secrets[1]}&lang=en`)
  await get(
    `/oidc/auth?client_id=kms-console&response_type=code&scope=openid&state=${secrets[2]}` +
      '&code_challenge=abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqr&code_challenge_method=S256',
  )
  await get(`/oidc/session/end?id_token_hint=${secrets[3]}`)
  await get(`/api/v1/tenant?token=${secrets[4]}&code=${secrets[5]}`, { 'x-api-key': key })
  await get(`/no-such-page?password=${secrets[6]}`)
  await get(`/reset-password?userId=u&applicationId=a&token=${secrets[7]}`)
  await get(`/invitations/accept?%74oken=${secrets[8]}`)
  await get('/api/v1/tenant', { 'x-api-key': key, 'x-request-id': 'last-redaction' })
  await waitFor(() => svc!.output().includes('last-redaction'), 'the last request’s log line')

  const output = svc!.output()
  assert.match(
    output,
    /"url":"\/invitations\/accept\?token=\[redacted\]"/,
    'the URL is logged, its token blanked',
  )
  assert.match(output, /"url":"\/signup\/confirm\?token=\[redacted\]&lang=en"/)
  for (const secret of secrets) assert.ok(!output.includes(secret), `${secret} is not logged`)
})

test('a client-credentials grant and the provider’s first requests print JSON lines only', async () => {
  const created = await runCli(['create-tenant', '--name', 'machine'], env)
  assert.equal(created.code, 0, created.stderr)
  const key = JSON.parse(created.stdout).apiKey.key as string
  const resource = 'https://reports.example.com'
  const app = await httpRequest(svc!.baseUrl, 'POST', '/api/v1/applications', {
    key,
    body: { name: 'Reports', applicationType: 'machine_to_machine', redirectUris: [], resources: [resource] },
  })
  assert.equal(app.status, 201, app.text)
  const granted = await fetch(new URL('/oidc/token', svc!.baseUrl), {
    method: 'POST',
    headers: {
      'content-type': 'application/x-www-form-urlencoded',
      authorization: `Basic ${Buffer.from(`${app.body.clientId}:${app.body.clientSecret}`).toString('base64')}`,
    },
    body: new URLSearchParams({ grant_type: 'client_credentials', resource }),
  })
  assert.equal(granted.status, 200, await granted.text())
  assert.equal((await fetch(new URL('/.well-known/openid-configuration', svc!.baseUrl))).status, 200)
  assert.equal(await svc!.stop('SIGTERM'), 0)

  const lines = svc!
    .output()
    .split('\n')
    .filter((line) => line.trim() !== '')
  const notJson = lines.filter((line) => {
    try {
      return typeof JSON.parse(line) !== 'object'
    } catch {
      return true
    }
  })
  assert.deepEqual(notJson, [], 'lines that are not JSON')
})
