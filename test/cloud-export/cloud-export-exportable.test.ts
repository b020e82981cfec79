import assert from 'node:assert/strict'
import { createPublicKey, type KeyObject, randomBytes, randomUUID } from 'node:crypto'
import { after, before, describe, test } from 'node:test'
import type { CloudProvider } from '../../src/cloud-export/provider.ts'
import { loadConfig } from '../../src/config.ts'
import { connectDatabase, type Sql } from '../../src/data/database.ts'
import { loadMigrations, migrate } from '../../src/data/migrations.ts'
import { startFakeAwsKms } from '../helpers/fake-aws-kms.ts'
import { startFakeAzureKeyVault } from '../helpers/fake-azure-keyvault.ts'
import { startFakeGcpKms } from '../helpers/fake-gcp-kms.ts'
import { startFakeScalewayKms } from '../helpers/fake-scaleway-kms.ts'
import {
  type AuditView,
  createTestDatabase,
  startTestService,
  type TestDatabase,
  type TestService,
  waitFor,
} from '../helpers/service.ts'

/**
 * Issue 31, defect 1: a key not created `exportable` never reaches a cloud. Creating an export of
 * one is 409 key_not_exportable (as POST /keys/{id}/export-private is); an export that exists for
 * one (made before the check) is refused at every push, a rotation's included, with the error
 * recorded and audited, and no request reaches the cloud; migration 0029 stops those that exist.
 * And a custom endpoint (not the provider's own host) is taken only if the operator listed its
 * origin in KMS_CLOUD_EXPORT_CUSTOM_ENDPOINTS.
 */

/** One provider's local fake: its origin, what reached it, and the private keys it holds. */
interface Cloud {
  provider: CloudProvider
  origin: string
  settings: Record<string, string>
  credentials: Record<string, string>
  target(name: string): Record<string, string>
  /** Requests received so far (every kind: tokens, lookups, imports). */
  requests(): number
  /** The private keys imported into it. */
  held(): KeyObject[]
  stop(): Promise<void>
}

const REGION = 'eu-west-1'
const AWS_CREDENTIALS = {
  accessKeyId: 'AKIAIOSFODNN7EXAMPLE',
  secretAccessKey: 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY',
}
const GCP_WHERE = { project: 'export-project', location: 'europe-west1', keyRing: 'exports' }

async function startClouds(): Promise<Cloud[]> {
  const aws = await startFakeAwsKms({ region: REGION, credentials: AWS_CREDENTIALS })
  const azure = await startFakeAzureKeyVault()
  const gcp = await startFakeGcpKms({
    keyRings: [`projects/${GCP_WHERE.project}/locations/${GCP_WHERE.location}/keyRings/${GCP_WHERE.keyRing}`],
  })
  const scalewaySecret = randomUUID()
  const scalewayProject = randomUUID()
  const scaleway = await startFakeScalewayKms({ secretKey: scalewaySecret, projectId: scalewayProject })
  return [
    {
      provider: 'aws',
      origin: aws.url,
      settings: { region: REGION, endpoint: aws.url },
      credentials: AWS_CREDENTIALS,
      target: (name) => ({ alias: `alias/${name}` }),
      requests: () => aws.requests,
      held: () => [...aws.keys().values()].flatMap((k) => (k.privateKey ? [k.privateKey] : [])),
      stop: () => aws.stop(),
    },
    {
      provider: 'azure',
      origin: azure.url,
      settings: {
        tenantId: azure.tenantId,
        clientId: azure.clientId,
        authorityHost: azure.url,
        caCertificate: azure.caPem,
      },
      credentials: { clientSecret: azure.clientSecret },
      target: (name) => ({ vaultUrl: azure.url, keyName: name }),
      requests: () => azure.requests.length,
      held: () => [...azure.keys().values()].flat().map((v) => v.privateKey),
      stop: () => azure.stop(),
    },
    {
      provider: 'gcp',
      origin: gcp.url,
      settings: { apiEndpoint: gcp.url, tokenUri: gcp.tokenUri },
      credentials: { ...gcp.serviceAccount },
      target: (name) => ({ ...GCP_WHERE, cryptoKey: name }),
      requests: () => gcp.requestCount(),
      held: () => [...gcp.versions().values()].map((v) => v.privateKey),
      stop: () => gcp.stop(),
    },
    {
      provider: 'scaleway',
      origin: scaleway.url,
      settings: { region: 'fr-par', projectId: scalewayProject, apiUrl: scaleway.url },
      credentials: { accessKey: 'SCWABCDEFGHIJ0123456', secretKey: scalewaySecret },
      target: (name) => ({ keyName: name }),
      requests: () => scaleway.requests().length,
      held: () => [...scaleway.keys().values()].flatMap((k) => (k.privateKey ? [k.privateKey] : [])),
      stop: () => scaleway.stop(),
    },
  ]
}

interface ExportBody {
  id: string
  syncStatus: 'pending' | 'synced' | 'failed'
  desiredVersion: number
  attempts: number
  nextAttemptAt: string | null
  lastSyncVersion: number | null
  lastSyncError: { code: string; message: string } | null
}

/** A private or public key's public half, comparable across the service and a fake. */
const spki = (key: KeyObject) =>
  (key.type === 'public' ? key : createPublicKey(key))
    .export({ format: 'der', type: 'spki' })
    .toString('base64')

describe('cloud export of keys not created exportable', () => {
  let service: TestService
  let clouds: Cloud[]
  let tenant: { tenantId: string; key: string }
  const connections = new Map<CloudProvider, string>()

  before(async () => {
    clouds = await startClouds()
    service = await startTestService(
      {
        KMS_OUTBOUND_ALLOW: '127.0.0.1',
        // The fakes are custom endpoints: the operator allows exactly their origins.
        KMS_CLOUD_EXPORT_CUSTOM_ENDPOINTS: clouds.map((c) => c.origin).join(','),
        KMS_JOB_SWEEP_MS: '200',
        KMS_CLOUD_EXPORT_TIMEOUT_MS: '20000',
      },
      { jobs: true },
    )
    tenant = await service.createTenant()
    for (const cloud of clouds) {
      const made = await api('POST', '/cloud-connections', {
        name: `${cloud.provider}-${randomUUID().slice(0, 8)}`,
        provider: cloud.provider,
        settings: cloud.settings,
        credentials: cloud.credentials,
      })
      assert.equal(made.status, 201, made.text)
      connections.set(cloud.provider, made.body.id)
    }
  })
  after(async () => {
    await service?.stop()
    for (const cloud of clouds ?? []) await cloud.stop()
  })

  const api = (method: string, path: string, body?: unknown) =>
    service.request(method, `/api/v1${path}`, { key: tenant.key, ...(body === undefined ? {} : { body }) })

  /** RSA-2048: every provider takes it (GCP takes only RSA). */
  async function signingKey(exportable: boolean) {
    const made = await api('POST', '/keys', {
      name: `k-${randomUUID()}`,
      keyType: 'Signing',
      algorithm: 'RSA-2048',
      exportable,
    })
    assert.equal(made.status, 201, made.text)
    assert.equal(made.body.exportable, exportable)
    return made.body.id as string
  }

  /** The SPKI of each version of the key, as the service publishes it. */
  async function publicKeys(keyId: string, versions: number) {
    const out: string[] = []
    for (let version = 1; version <= versions; version++) {
      const answer = await api('GET', `/keys/${keyId}/public?format=PEM&version=${version}`)
      assert.equal(answer.status, 200, answer.text)
      out.push(spki(createPublicKey(answer.body.publicKey)))
    }
    return out
  }

  async function exportState(keyId: string, exportId: string): Promise<ExportBody> {
    const answer = await api('GET', `/keys/${keyId}/cloud-exports/${exportId}`)
    assert.equal(answer.status, 200, answer.text)
    return answer.body
  }

  async function settled(keyId: string, exportId: string, until: (e: ExportBody) => boolean, what: string) {
    let last: ExportBody | undefined
    try {
      await waitFor(async () => {
        last = await exportState(keyId, exportId)
        return until(last)
      }, what)
    } catch (err) {
      throw new Error(`${(err as Error).message}; the export: ${JSON.stringify(last)}`)
    }
    return last!
  }

  const audited = async (action: string, keyId: string) =>
    (await api('GET', `/audit?action=${action}&limit=500`)).body.data.filter(
      (r: AuditView) => r.resource === `key:${keyId}`,
    ) as AuditView[]

  test('creating an export is 409 key_not_exportable for every provider, audited; nothing reaches the cloud', async () => {
    for (const cloud of clouds) {
      const connectionId = connections.get(cloud.provider)!
      const locked = await signingKey(false)
      const refused = await api('POST', `/keys/${locked}/cloud-exports`, {
        connectionId,
        target: cloud.target(`locked-${randomUUID().slice(0, 8)}`),
      })
      assert.equal(refused.status, 409, `${cloud.provider}: ${refused.text}`)
      assert.equal(refused.body.error, 'key_not_exportable')
      assert.match(refused.body.message, /exportable: true/)
      assert.equal((await api('GET', `/keys/${locked}/cloud-exports`)).body.total, 0, 'no export was made')
      const [attempt] = await audited('keys.cloud_export.create', locked)
      assert.equal(attempt?.outcome, 'failure')
      assert.equal(attempt?.details?.['reason'], 'key_not_exportable')
      assert.equal(attempt?.details?.['level'], 'warning')

      // The same connection exports an exportable key: the job process is running and pushes,
      // and what the cloud holds is that key alone.
      const open = await signingKey(true)
      const created = await api('POST', `/keys/${open}/cloud-exports`, {
        connectionId,
        target: cloud.target(`open-${randomUUID().slice(0, 8)}`),
      })
      assert.equal(created.status, 201, `${cloud.provider}: ${created.text}`)
      await settled(open, created.body.id, (e) => e.syncStatus === 'synced', `${cloud.provider}: the push`)
      const held = new Set(cloud.held().map(spki))
      const [openKey] = await publicKeys(open, 1)
      const [lockedKey] = await publicKeys(locked, 1)
      assert.ok(held.has(openKey!), `${cloud.provider} holds the exportable key`)
      assert.ok(!held.has(lockedKey!), `${cloud.provider} never received the key that is not exportable`)
    }
  })

  test('an existing export of such a key: every push (the first, a rotation, a manual sync) is refused, recorded and audited; the cloud gets no request', async () => {
    for (const cloud of clouds) {
      const connectionId = connections.get(cloud.provider)!
      const locked = await signingKey(false)
      const seen = cloud.requests()
      // Such an export cannot be made through the API anymore, and a key's exportable flag never
      // changes: the row an earlier release created is written directly, due now, as it was left.
      const exportId = randomUUID()
      await service.sql`
        INSERT INTO cloud_exports (id, tenant_id, key_id, connection_id, provider, target, created_at,
          created_by, desired_version, sync_status, next_attempt_at)
        VALUES (${exportId}, ${tenant.tenantId}, ${locked}, ${connectionId}, ${cloud.provider},
          ${service.sql.json(cloud.target(`old-${randomUUID().slice(0, 8)}`))}, now(), 'test', 1, 'pending', now())`

      const first = await settled(
        locked,
        exportId,
        (e) => e.syncStatus !== 'pending',
        `${cloud.provider}: push`,
      )
      assert.equal(first.syncStatus, 'failed', `${cloud.provider}: ${JSON.stringify(first)}`)
      assert.equal(first.lastSyncError?.code, 'key_not_exportable')
      assert.equal(first.lastSyncVersion, null)
      assert.equal(first.attempts, 1, 'not retried: retrying cannot make the key exportable')
      assert.equal(first.nextAttemptAt, null)

      // A rotation still succeeds and makes the export due for version 2: that push is refused too.
      const rotated = await api('POST', `/keys/${locked}/rotate`)
      assert.equal(rotated.status, 200, rotated.text)
      const second = await settled(
        locked,
        exportId,
        (e) => e.desiredVersion === 2 && e.syncStatus !== 'pending',
        `${cloud.provider}: the rotation's push`,
      )
      assert.equal(second.syncStatus, 'failed')
      assert.equal(second.lastSyncError?.code, 'key_not_exportable')
      assert.equal(second.lastSyncVersion, null)

      // A manual sync is refused at once, and leaves the export stopped with the reason.
      const manual = await api('POST', `/keys/${locked}/cloud-exports/${exportId}/sync`)
      assert.equal(manual.status, 409, manual.text)
      assert.equal(manual.body.error, 'key_not_exportable')
      const after = await exportState(locked, exportId)
      assert.equal(after.syncStatus, 'failed')
      assert.equal(after.lastSyncError?.code, 'key_not_exportable')

      const pushes = await audited('keys.cloud_export.sync', locked)
      assert.equal(pushes.length, 2, 'both refused pushes are audited')
      for (const push of pushes) {
        assert.equal(push.outcome, 'failure')
        assert.equal(push.details?.['error'], 'key_not_exportable')
        assert.equal(push.details?.['willRetry'], false)
      }
      assert.deepEqual(
        (await audited('keys.cloud_export.sync_request', locked)).map((r) => [
          r.outcome,
          r.details?.['reason'],
        ]),
        [['failure', 'key_not_exportable']],
      )

      assert.equal(cloud.requests(), seen, `${cloud.provider}: no request reached the cloud`)
      const held = new Set(cloud.held().map(spki))
      for (const version of await publicKeys(locked, 2))
        assert.ok(!held.has(version), `${cloud.provider} holds no version of the key`)
    }
  })

  test('a custom endpoint the operator did not list is a 400 naming the field', async () => {
    const [aws, azure, gcp, scaleway] = clouds as [Cloud, Cloud, Cloud, Cloud]
    // Another port of the same loopback host: not listed, so refused (loopback is not implied).
    const unlisted = (origin: string) => {
      const url = new URL(origin)
      url.port = String(Number(url.port) === 65535 ? 1 : Number(url.port) + 1)
      return url.origin
    }
    const connection = (cloud: Cloud, settings: Record<string, string>, credentials = cloud.credentials) =>
      api('POST', '/cloud-connections', {
        name: `custom-${randomUUID().slice(0, 8)}`,
        provider: cloud.provider,
        settings,
        credentials,
      })
    const cases: [Cloud, Record<string, string>, Record<string, string>, string][] = [
      [
        aws,
        { ...aws.settings, endpoint: 'https://kms.attacker.example' },
        aws.credentials,
        'settings.endpoint',
      ],
      [aws, { ...aws.settings, endpoint: unlisted(aws.origin) }, aws.credentials, 'settings.endpoint'],
      // AWS's own host, but of another region than the connection's.
      [
        aws,
        { ...aws.settings, endpoint: 'https://kms.us-east-1.amazonaws.com' },
        aws.credentials,
        'settings.endpoint',
      ],
      [
        azure,
        { ...azure.settings, authorityHost: 'https://login.attacker.example' },
        azure.credentials,
        'settings.authorityHost',
      ],
      [
        gcp,
        { ...gcp.settings, apiEndpoint: 'https://cloudkms.attacker.example' },
        gcp.credentials,
        'settings.apiEndpoint',
      ],
      [
        gcp,
        { ...gcp.settings, tokenUri: 'https://attacker.example/token' },
        gcp.credentials,
        'settings.tokenUri',
      ],
      [
        gcp,
        gcp.settings,
        { ...gcp.credentials, tokenUri: 'https://attacker.example/token' },
        'credentials.tokenUri',
      ],
      [
        scaleway,
        { ...scaleway.settings, apiUrl: 'https://api.attacker.example' },
        scaleway.credentials,
        'settings.apiUrl',
      ],
      [
        scaleway,
        { ...scaleway.settings, apiUrl: unlisted(scaleway.origin) },
        scaleway.credentials,
        'settings.apiUrl',
      ],
    ]
    for (const [cloud, settings, credentials, field] of cases) {
      const refused = await connection(cloud, settings, credentials)
      assert.equal(refused.status, 400, `${cloud.provider} ${field}: ${refused.text}`)
      assert.equal(refused.body.error, 'validation_failed')
      assert.equal(refused.body.fields[0].path, `body/${field}`)
      assert.match(refused.body.message, /KMS_CLOUD_EXPORT_CUSTOM_ENDPOINTS/)
      assert.ok(!refused.text.includes('attacker.example'), 'the URL is not repeated')
    }

    // The providers' own hosts need no listing (creating a connection sends nothing).
    for (const [cloud, settings] of [
      [aws, { region: REGION, endpoint: `https://kms-fips.${REGION}.amazonaws.com` }],
      [azure, { tenantId: azure.settings['tenantId']!, clientId: azure.settings['clientId']! }],
      [gcp, { apiEndpoint: 'https://cloudkms.europe-west1.rep.googleapis.com' }],
      [scaleway, { region: 'fr-par', projectId: scaleway.settings['projectId']! }],
    ] as const) {
      const made = await connection(cloud, settings)
      assert.equal(made.status, 201, `${cloud.provider}: ${made.text}`)
    }

    // A rotation of credentials is checked the same way.
    const gcpConnection = connections.get('gcp')!
    const rotated = await api('PUT', `/cloud-connections/${gcpConnection}/credentials`, {
      credentials: { ...gcp.credentials, tokenUri: 'https://attacker.example/token' },
    })
    assert.equal(rotated.status, 400, rotated.text)
    assert.equal(rotated.body.fields[0].path, 'body/credentials.tokenUri')

    // An export's target: an Azure vault elsewhere than Microsoft's domains or the listed origin.
    const key = await signingKey(true)
    const target = await api('POST', `/keys/${key}/cloud-exports`, {
      connectionId: connections.get('azure'),
      target: { vaultUrl: 'https://vault.attacker.example', keyName: 'elsewhere' },
    })
    assert.equal(target.status, 400, target.text)
    assert.equal(target.body.fields[0].path, 'body/target.vaultUrl')
    assert.equal((await api('GET', `/keys/${key}/cloud-exports`)).body.total, 0)
  })
})

test('KMS_CLOUD_EXPORT_CUSTOM_ENDPOINTS takes origins only', () => {
  assert.deepEqual(
    loadConfig({
      KMS_CLOUD_EXPORT_CUSTOM_ENDPOINTS: 'https://kms.internal.example:8443/, http://127.0.0.1:4566',
    }).cloudExportCustomEndpoints,
    ['https://kms.internal.example:8443', 'http://127.0.0.1:4566'],
  )
  assert.deepEqual(loadConfig({}).cloudExportCustomEndpoints, [])
  for (const entry of [
    'http://kms.internal.example',
    'https://kms.internal.example/path',
    'https://user:pw@kms.internal.example',
    'https://kms.internal.example?x=1',
    'kms.internal.example',
  ])
    assert.throws(
      () => loadConfig({ KMS_CLOUD_EXPORT_CUSTOM_ENDPOINTS: entry }),
      /KMS_CLOUD_EXPORT_CUSTOM_ENDPOINTS/,
      entry,
    )
})

describe('migration 0029 on a database with exports of keys that are not exportable', () => {
  let db: TestDatabase
  let sql: Sql
  before(async () => {
    db = await createTestDatabase()
    sql = connectDatabase({
      url: db.url,
      poolSize: 2,
      statementTimeoutMs: 10_000,
      applicationName: 'kms-test',
    })
  })
  after(async () => {
    await sql?.end({ timeout: 5 })
    await db?.drop()
  })

  test('their exports stop (failed, key_not_exportable, not due), audited; the others are untouched', async () => {
    const all = loadMigrations()
    await migrate(
      sql,
      all.filter((m) => m.version < 29),
    )
    const tenant = randomUUID()
    await sql`INSERT INTO tenants (id, name, kek_wrapped, kek_master_key_id) VALUES (${tenant}, 'acme', ${randomBytes(60)}, 'm1')`
    const key = async (exportable: boolean) => {
      const id = randomUUID()
      await sql`
        INSERT INTO keys (id, tenant_id, name, key_type, algorithm, origin, created_at, created_by, updated_at, exportable)
        VALUES (${id}, ${tenant}, ${id}, 'Signing', 'RSA-2048', 'Generated', now(), 'test', now(), ${exportable})`
      return id
    }
    const connection = randomUUID()
    await sql`
      INSERT INTO cloud_connections (id, tenant_id, name, provider, settings, credentials_sealed, created_at,
        created_by, updated_at, credentials_updated_at)
      VALUES (${connection}, ${tenant}, 'aws', 'aws', ${sql.json({ region: REGION })}, ${randomBytes(40)}, now(),
        'test', now(), now())`
    const cloudExport = async (keyId: string, status: 'pending' | 'synced') => {
      const id = randomUUID()
      await sql`
        INSERT INTO cloud_exports (id, tenant_id, key_id, connection_id, provider, target, created_at, created_by,
          desired_version, sync_status, next_attempt_at, last_sync_version, provider_key_id)
        VALUES (${id}, ${tenant}, ${keyId}, ${connection}, 'aws', ${sql.json({ alias: `alias/${id}` })}, now(),
          'test', 1, ${status}, ${status === 'pending' ? new Date() : null}, ${status === 'synced' ? 1 : null},
          ${status === 'synced' ? `arn:aws:kms:${REGION}:111122223333:key/${id}` : null})`
      return id
    }
    const locked = await key(false)
    const open = await key(true)
    const lockedSynced = await cloudExport(locked, 'synced')
    const lockedPending = await cloudExport(locked, 'pending')
    const openPending = await cloudExport(open, 'pending')

    await migrate(sql, all)

    const rows = await sql<
      {
        id: string
        sync_status: string
        last_sync_error_code: string | null
        next_attempt_at: Date | null
        provider_key_id: string | null
      }[]
    >`SELECT id, sync_status, last_sync_error_code, next_attempt_at, provider_key_id FROM cloud_exports`
    const byId = new Map(rows.map((r) => [r.id, r]))
    for (const id of [lockedSynced, lockedPending]) {
      assert.equal(byId.get(id)!.sync_status, 'failed')
      assert.equal(byId.get(id)!.last_sync_error_code, 'key_not_exportable')
      assert.equal(byId.get(id)!.next_attempt_at, null, 'not due again')
    }
    assert.ok(byId.get(lockedSynced)!.provider_key_id, 'what the cloud holds stays named')
    assert.equal(byId.get(openPending)!.sync_status, 'pending')
    assert.equal(byId.get(openPending)!.last_sync_error_code, null)

    const audit = await sql<{ resource: string; outcome: string; details: Record<string, unknown> }[]>`
      SELECT resource, outcome, details FROM audit_log
      WHERE tenant_id = ${tenant} AND action = 'keys.cloud_export.sync' ORDER BY id`
    assert.deepEqual(
      audit.map((r) => r.details['exportId']).sort(),
      [lockedSynced, lockedPending].sort(),
      'one audit record per stopped export',
    )
    for (const record of audit) {
      assert.equal(record.resource, `key:${locked}`)
      assert.equal(record.outcome, 'failure')
      assert.equal(record.details['error'], 'key_not_exportable')
    }
  })
})
