import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { after, before, test } from 'node:test'
import { type FakeScalewayKms, startFakeScalewayKms } from '../helpers/fake-scaleway-kms.ts'
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
 * Cloud credentials never leave the seal: not in answers, not in the audit log, not in the logs
 * of the API and job processes (at debug level, access log on), whether the cloud accepts them,
 * refuses them, or is down. Run as `npm start` runs (the job process pushes).
 */
let db: TestDatabase
let env: Record<string, string>
let svc: SpawnedService
let fake: FakeScalewayKms
const secretKey = randomUUID()
const wrongSecret = randomUUID()
const rotatedSecret = randomUUID()
const projectId = randomUUID()

before(async () => {
  db = await createTestDatabase()
  fake = await startFakeScalewayKms({ secretKey, projectId })
  // One environment (one master key) for the service and the CLI.
  env = testEnv(db, {
    LOG_LEVEL: 'debug',
    KMS_ACCESS_LOG: 'true',
    KMS_OUTBOUND_ALLOW: '127.0.0.1',
    KMS_CLOUD_EXPORT_CUSTOM_ENDPOINTS: fake.url,
    KMS_JOB_SWEEP_MS: '200',
  })
  svc = await spawnService(env)
})
after(async () => {
  await svc?.stop()
  await fake?.stop()
  await db?.drop()
})

test('cloud credentials appear in no response, no audit record and no log line', async () => {
  const created = await runCli(['create-tenant', '--name', 'cloud-secrets'], env)
  assert.equal(created.code, 0, created.stderr)
  const apiKey = JSON.parse(created.stdout).apiKey.key as string
  const call = (method: string, path: string, body?: unknown) =>
    httpRequest(svc.baseUrl, method, `/api/v1${path}`, {
      key: apiKey,
      ...(body === undefined ? {} : { body }),
    })
  const answers: string[] = []
  const keep = <T extends { text: string }>(answer: T) => {
    answers.push(answer.text)
    return answer
  }

  const settings = { region: 'fr-par', projectId, apiUrl: fake.url }
  const accessKey = 'SCWABCDEFGHIJ0123456'
  const good = keep(
    await call('POST', '/cloud-connections', {
      name: 'good',
      provider: 'scaleway',
      settings,
      credentials: { accessKey, secretKey },
    }),
  )
  assert.equal(good.status, 201, good.text)
  const bad = keep(
    await call('POST', '/cloud-connections', {
      name: 'bad',
      provider: 'scaleway',
      settings,
      credentials: { accessKey, secretKey: wrongSecret },
    }),
  )
  assert.equal(bad.status, 201, bad.text)
  // A secret where a setting belongs is refused, and the refusal does not repeat it.
  const misplaced = keep(
    await call('POST', '/cloud-connections', {
      name: 'misplaced',
      provider: 'scaleway',
      settings: { ...settings, secretKey },
      credentials: { accessKey, secretKey },
    }),
  )
  assert.equal(misplaced.status, 400, misplaced.text)
  keep(await call('POST', `/cloud-connections/${good.body.id}/test`))
  keep(await call('POST', `/cloud-connections/${bad.body.id}/test`))
  keep(await call('GET', '/cloud-connections'))
  keep(await call('GET', `/cloud-connections/${good.body.id}`))

  const key = keep(
    await call('POST', '/keys', {
      name: 'exported',
      keyType: 'Signing',
      algorithm: 'EC-P256',
      exportable: true,
    }),
  )
  for (const connection of [good, bad]) {
    const made = keep(
      await call('POST', `/keys/${key.body.id}/cloud-exports`, {
        connectionId: connection.body.id,
        target: { keyName: `secrets-${connection.body.id.slice(0, 8)}` },
      }),
    )
    assert.equal(made.status, 201, made.text)
    await waitFor(async () => {
      const state = await call('GET', `/keys/${key.body.id}/cloud-exports/${made.body.id}`)
      return state.body.syncStatus !== 'pending'
    }, 'the push settled')
  }
  // The credentials are rotated; the old and new secrets stay out of everything.
  keep(
    await call('PUT', `/cloud-connections/${good.body.id}/credentials`, {
      credentials: { accessKey, secretKey: rotatedSecret },
    }),
  )
  keep(await call('GET', `/keys/${key.body.id}/cloud-exports`))
  const audit = keep(await call('GET', '/audit?limit=500'))
  assert.ok(
    (audit.body.data as Array<{ action: string }>).some((r) => r.action === 'keys.cloud_export.sync'),
    'the pushes are audited',
  )
  await call('GET', '/tenant')
  await waitFor(() => svc.output().includes('"url":"/api/v1/tenant"'), 'the last request log')

  const output = svc.output()
  for (const secret of [secretKey, wrongSecret, rotatedSecret]) {
    assert.ok(!output.includes(secret), 'no secret in the logs')
    for (const text of answers) assert.ok(!text.includes(secret), 'no secret in an answer')
  }
  // Nor the parts of one (a UUID's groups are long enough to be telling).
  for (const part of secretKey.split('-').filter((p) => p.length >= 8))
    assert.ok(!output.includes(part), 'no part of the secret in the logs')
})
