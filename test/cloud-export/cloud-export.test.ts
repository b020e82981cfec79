import assert from 'node:assert/strict'
import {
  constants,
  createPublicKey,
  generateKeyPairSync,
  type KeyObject,
  randomUUID,
  sign,
  verify,
} from 'node:crypto'
import { after, before, describe, test } from 'node:test'
import type { CloudProvider } from '../../src/cloud-export/provider.ts'
import type { AlgorithmName } from '../../src/keys/algorithms.ts'
import { startFakeAwsKms } from '../helpers/fake-aws-kms.ts'
import { startFakeAzureKeyVault } from '../helpers/fake-azure-keyvault.ts'
import { startFakeGcpKms } from '../helpers/fake-gcp-kms.ts'
import { startFakeScalewayKms } from '../helpers/fake-scaleway-kms.ts'
import { type ManualClock, manualClock } from '../helpers/manual-clock.ts'
import { startTestService, type TestService, waitFor } from '../helpers/service.ts'

/** A local server speaking one cloud's real protocol, started by the test (test/helpers/fake-*.ts). */
interface RunningFake {
  /** The fake's origin: every endpoint field of the connection and target names it. */
  url: string
  setDown(down: boolean): void
  stop(): Promise<void>
  /** The CA of an HTTPS fake, for the connection's caCertificate. */
  caPem?: string
}

/**
 * What the end-to-end suite needs of each provider: how to start its fake, the connection's
 * fields (right and wrong credentials), a target, an algorithm it takes and one it refuses, and
 * the key the fake holds for a providerKeyId (what the cloud imported).
 */
interface ProviderSpec<F extends RunningFake> {
  provider: CloudProvider
  start(): Promise<F>
  settings(fake: F): Record<string, string>
  credentials(fake: F): Record<string, string>
  wrongCredentials(fake: F): Record<string, string>
  target(name: string, fake: F): Record<string, string>
  algorithm: AlgorithmName
  /** A classical algorithm the provider does not take, if there is one (besides post-quantum ones). */
  refusedClassical?: AlgorithmName
  heldKey(fake: F, providerKeyId: string): { privateKey: KeyObject } | undefined
}

const scaleway: ProviderSpec<Awaited<ReturnType<typeof startFakeScalewayKms>> & RunningFake> = (() => {
  const secretKey = randomUUID()
  const projectId = randomUUID()
  return {
    provider: 'scaleway',
    start: () => startFakeScalewayKms({ secretKey, projectId }),
    settings: (fake) => ({ region: 'fr-par', projectId, apiUrl: fake.url }),
    credentials: () => ({ accessKey: 'SCWABCDEFGHIJ0123456', secretKey }),
    wrongCredentials: () => ({ accessKey: 'SCWABCDEFGHIJ0123456', secretKey: randomUUID() }),
    target: (name) => ({ keyName: name }),
    algorithm: 'EC-P256',
    heldKey: (fake, providerKeyId) => {
      const held = fake.keys().get(providerKeyId)
      return held?.privateKey ? { privateKey: held.privateKey } : undefined
    },
  }
})()

const aws: ProviderSpec<Awaited<ReturnType<typeof startFakeAwsKms>> & RunningFake> = (() => {
  const credentials = {
    accessKeyId: 'AKIAIOSFODNN7EXAMPLE',
    secretAccessKey: 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY',
  }
  return {
    provider: 'aws',
    start: () => startFakeAwsKms({ region: 'eu-west-1', credentials }),
    settings: (fake) => ({ region: 'eu-west-1', endpoint: fake.url }),
    credentials: () => credentials,
    wrongCredentials: () => ({ ...credentials, secretAccessKey: 'wrongwrongwrongwrongwrongwrongwrongwrong' }),
    target: (name) => ({ alias: `alias/${name}` }),
    algorithm: 'RSA-2048',
    heldKey: (fake, providerKeyId) => {
      // The ARN ends in key/<key id>.
      const held = fake.keys().get(providerKeyId.split('/').at(-1) ?? '')
      return held?.privateKey ? { privateKey: held.privateKey } : undefined
    },
  }
})()

const azure: ProviderSpec<Awaited<ReturnType<typeof startFakeAzureKeyVault>> & RunningFake> = {
  provider: 'azure',
  start: () => startFakeAzureKeyVault(),
  settings: (fake) => ({ tenantId: fake.tenantId, clientId: fake.clientId, authorityHost: fake.url }),
  credentials: (fake) => ({ clientSecret: fake.clientSecret }),
  wrongCredentials: () => ({ clientSecret: 'not-the-client-secret-at-all' }),
  target: (name, fake) => ({ vaultUrl: fake.url, keyName: name }),
  algorithm: 'EC-P256',
  heldKey: (fake, providerKeyId) => {
    // The key id is {vault}/keys/{name}/{version}.
    const [, , name, version] = new URL(providerKeyId).pathname.split('/')
    const held = fake
      .keys()
      .get(name ?? '')
      ?.find((v) => v.version === version)
    return held ? { privateKey: held.privateKey } : undefined
  },
}

const gcp: ProviderSpec<Awaited<ReturnType<typeof startFakeGcpKms>> & RunningFake> = (() => {
  const where = { project: 'export-project', location: 'europe-west1', keyRing: 'exports' }
  return {
    provider: 'gcp',
    start: () =>
      startFakeGcpKms({
        keyRings: [`projects/${where.project}/locations/${where.location}/keyRings/${where.keyRing}`],
      }),
    settings: (fake) => ({
      apiEndpoint: fake.url,
      tokenUri: fake.tokenUri,
      project: where.project,
      location: where.location,
    }),
    credentials: (fake) => ({ ...fake.serviceAccount }),
    // The same account, another private key: Google's token endpoint refuses the assertion.
    wrongCredentials: (fake) => ({
      clientEmail: fake.serviceAccount.clientEmail,
      privateKey: generateKeyPairSync('rsa', { modulusLength: 2048 })
        .privateKey.export({ format: 'pem', type: 'pkcs8' })
        .toString(),
    }),
    target: (name) => ({ ...where, cryptoKey: name }),
    algorithm: 'RSA-2048',
    refusedClassical: 'EC-P256',
    heldKey: (fake, providerKeyId) => {
      const held = fake.versions().get(providerKeyId)
      return held ? { privateKey: held.privateKey } : undefined
    },
  }
})()

/** How the service signs by default (DESIGN): RSA-PSS SHA-256 with a 32-byte salt; ECDSA DER; Ed25519. */
function signLikeTheService(algorithm: AlgorithmName, key: KeyObject, message: Buffer): Buffer {
  if (algorithm.startsWith('RSA'))
    return sign('sha256', message, { key, padding: constants.RSA_PKCS1_PSS_PADDING, saltLength: 32 })
  if (algorithm === 'Ed25519') return sign(null, message, key)
  const hash = { 'EC-P256': 'sha256', 'EC-P384': 'sha384', 'EC-P521': 'sha512' }[algorithm as 'EC-P256']
  return sign(hash, message, key)
}

function verifyLikeTheService(algorithm: AlgorithmName, key: KeyObject, message: Buffer, signature: Buffer) {
  if (algorithm.startsWith('RSA'))
    return verify(
      'sha256',
      message,
      { key, padding: constants.RSA_PKCS1_PSS_PADDING, saltLength: 32 },
      signature,
    )
  if (algorithm === 'Ed25519') return verify(null, message, key, signature)
  const hash = { 'EC-P256': 'sha256', 'EC-P384': 'sha384', 'EC-P521': 'sha512' }[algorithm as 'EC-P256']
  return verify(hash, message, key, signature)
}

/** One provider, end to end through the service: export, sync, rotate, refusals, failures, recovery. */
function providerSuite<F extends RunningFake>(spec: ProviderSpec<F>) {
  describe(`cloud export to ${spec.provider}, end to end`, () => {
    let service: TestService
    let clock: ManualClock
    let fake: F
    let tenant: { tenantId: string; key: string }

    before(async () => {
      clock = manualClock()
      fake = await spec.start()
      service = await startTestService(
        {
          KMS_OUTBOUND_ALLOW: '127.0.0.1',
          // The fake is a custom endpoint: the operator allows its origin (every fake has one).
          KMS_CLOUD_EXPORT_CUSTOM_ENDPOINTS: fake.url,
          KMS_JOB_SWEEP_MS: '200',
          KMS_CLOUD_EXPORT_TIMEOUT_MS: '20000',
        },
        { clock, jobs: true },
      )
      tenant = await service.createTenant()
    })
    after(async () => {
      await service?.stop()
      await fake?.stop()
    })

    const api = (method: string, path: string, body?: unknown) =>
      service.request(method, `/api/v1${path}`, { key: tenant.key, ...(body === undefined ? {} : { body }) })

    async function connection(credentials = spec.credentials(fake)) {
      const made = await api('POST', '/cloud-connections', {
        name: `${spec.provider}-${randomUUID().slice(0, 8)}`,
        provider: spec.provider,
        settings: { ...spec.settings(fake), ...(fake.caPem ? { caCertificate: fake.caPem } : {}) },
        credentials,
      })
      assert.equal(made.status, 201, made.text)
      return made.body as { id: string }
    }

    async function signingKey(algorithm: AlgorithmName = spec.algorithm) {
      const made = await api('POST', '/keys', {
        name: `k-${randomUUID()}`,
        keyType: 'Signing',
        algorithm,
        exportable: true,
      })
      assert.equal(made.status, 201, made.text)
      return made.body as { id: string }
    }

    /** Waits until the job process has settled the export (synced at `version`, or failed). */
    async function settled(keyId: string, exportId: string, until: (e: ExportBody) => boolean, what: string) {
      let last: ExportBody | undefined
      try {
        await waitFor(async () => {
          last = (await api('GET', `/keys/${keyId}/cloud-exports/${exportId}`)).body as ExportBody
          return until(last)
        }, `${spec.provider}: ${what}`)
      } catch (err) {
        throw new Error(`${(err as Error).message}; the export: ${JSON.stringify(last)}`)
      }
      return last!
    }

    test('export, sync, cross-check, rotation re-exports, a manual sync', async () => {
      const conn = await connection()
      const tested = await api('POST', `/cloud-connections/${conn.id}/test`)
      assert.deepEqual(tested.body, { status: 'ok', error: null })
      const key = await signingKey()
      const created = await api('POST', `/keys/${key.id}/cloud-exports`, {
        connectionId: conn.id,
        target: spec.target(`e2e-${randomUUID().slice(0, 8)}`, fake),
      })
      assert.equal(created.status, 201, created.text)
      assert.equal(created.body.syncStatus, 'pending')
      assert.equal(created.body.desiredVersion, 1)
      const synced = await settled(key.id, created.body.id, (e) => e.syncStatus === 'synced', 'first sync')
      assert.equal(synced.lastSyncVersion, 1)
      assert.equal(synced.lastSyncError, null)
      assert.ok(synced.providerKeyId)

      // The cloud holds the service's key: each side's signature verifies on the other.
      const held = spec.heldKey(fake, synced.providerKeyId!)
      assert.ok(held, 'the fake holds the imported key')
      const message = Buffer.from(`cross-check ${spec.provider}`)
      const byCloud = signLikeTheService(spec.algorithm, held.privateKey, message)
      const checked = await api('POST', '/verify', {
        keyId: key.id,
        keyVersion: 1,
        message: message.toString('base64'),
        signature: byCloud.toString('base64'),
      })
      assert.equal(checked.status, 200, checked.text)
      assert.equal(checked.body.valid, true, 'the service verifies what the cloud signed')
      const byService = await api('POST', '/sign', { keyId: key.id, message: message.toString('base64') })
      assert.equal(byService.status, 200, byService.text)
      assert.ok(
        verifyLikeTheService(
          spec.algorithm,
          createPublicKey(held.privateKey),
          message,
          Buffer.from(byService.body.signature, 'base64'),
        ),
        'the cloud’s key verifies what the service signed',
      )

      // A rotation marks the export due; the job process pushes version 2.
      const rotated = await api('POST', `/keys/${key.id}/rotate`)
      assert.equal(rotated.status, 200, rotated.text)
      const resynced = await settled(
        key.id,
        created.body.id,
        (e) => e.syncStatus === 'synced' && e.lastSyncVersion === 2,
        'sync of version 2',
      )
      const heldV2 = spec.heldKey(fake, resynced.providerKeyId!)
      assert.ok(heldV2, 'the fake holds version 2')
      const v2 = await api('POST', '/sign', { keyId: key.id, message: message.toString('base64') })
      assert.equal(v2.body.keyVersion, 2)
      assert.ok(
        verifyLikeTheService(
          spec.algorithm,
          createPublicKey(heldV2.privateKey),
          message,
          Buffer.from(v2.body.signature, 'base64'),
        ),
        'the cloud now holds version 2',
      )

      // A manual sync is 202 and pending at once; the job process settles it.
      const manual = await api('POST', `/keys/${key.id}/cloud-exports/${created.body.id}/sync`)
      assert.equal(manual.status, 202, manual.text)
      assert.equal(manual.body.syncStatus, 'pending')
      await settled(key.id, created.body.id, (e) => e.syncStatus === 'synced', 'manual sync')

      const audit = await api('GET', `/audit?action=keys.cloud_export.sync`)
      assert.ok(
        (audit.body.data as Array<{ outcome: string; resource: string }>).some(
          (r) => r.outcome === 'success' && r.resource === `key:${key.id}`,
        ),
      )
    })

    test('algorithms the provider does not take are refused with its list', async () => {
      const conn = await connection()
      const refused = [
        'ML-DSA-65' as AlgorithmName,
        ...(spec.refusedClassical ? [spec.refusedClassical] : []),
      ]
      for (const algorithm of refused) {
        const key = await signingKey(algorithm)
        const answer = await api('POST', `/keys/${key.id}/cloud-exports`, {
          connectionId: conn.id,
          target: spec.target('refused', fake),
        })
        assert.equal(answer.status, 400, `${algorithm}: ${answer.text}`)
        assert.equal(answer.body.error, 'algorithm_not_supported')
        assert.equal(answer.body.provider, spec.provider)
        assert.ok(answer.body.supportedAlgorithms.includes(spec.algorithm))
        assert.ok(!answer.body.supportedAlgorithms.includes(algorithm))
      }
      const hmac = await api('POST', '/keys', {
        name: `h-${randomUUID()}`,
        keyType: 'HMAC',
        algorithm: 'HMAC-SHA256',
        exportable: true,
      })
      const answer = await api('POST', `/keys/${hmac.body.id}/cloud-exports`, {
        connectionId: conn.id,
        target: spec.target('refused', fake),
      })
      assert.equal(answer.status, 400, answer.text)
      assert.equal(answer.body.error, 'algorithm_not_supported')
    })

    test('wrong credentials: the error is recorded on the export, the rotation is unaffected', async () => {
      const conn = await connection(spec.wrongCredentials(fake))
      const tested = await api('POST', `/cloud-connections/${conn.id}/test`)
      assert.equal(tested.status, 200)
      assert.equal(tested.body.status, 'failed')
      assert.equal(tested.body.error.code, 'cloud_credentials_refused')
      const key = await signingKey()
      const created = await api('POST', `/keys/${key.id}/cloud-exports`, {
        connectionId: conn.id,
        target: spec.target(`wrong-${randomUUID().slice(0, 8)}`, fake),
      })
      const failed = await settled(key.id, created.body.id, (e) => e.syncStatus === 'failed', 'refused sync')
      assert.equal(failed.lastSyncError?.code, 'cloud_credentials_refused')
      assert.equal(failed.attempts, 1, 'credentials refused: not retried')
      // The rotation succeeds whatever the cloud says, and makes the export due again.
      const rotated = await api('POST', `/keys/${key.id}/rotate`)
      assert.equal(rotated.status, 200, rotated.text)
      assert.equal(rotated.body.version, 2)
      const due = await api('GET', `/keys/${key.id}/cloud-exports/${created.body.id}`)
      assert.equal(due.body.desiredVersion, 2, 'the rotation made version 2 due')
      // That push may run (and be refused again) before the credentials change: whichever, once
      // they are fixed (rotation of the connection's secret), a sync takes version 2 there.
      await settled(
        key.id,
        created.body.id,
        (e) => e.syncStatus === 'failed',
        'the push with the old credentials',
      )
      const fixed = await api('PUT', `/cloud-connections/${conn.id}/credentials`, {
        credentials: spec.credentials(fake),
      })
      assert.equal(fixed.status, 200, fixed.text)
      assert.equal((await api('POST', `/keys/${key.id}/cloud-exports/${created.body.id}/sync`)).status, 202)
      const synced = await settled(
        key.id,
        created.body.id,
        (e) => e.syncStatus === 'synced' && e.lastSyncVersion === 2,
        'sync after the credentials were fixed',
      )
      assert.equal(synced.lastSyncError, null)
    })

    test('the cloud down: retried with backoff, then recovered', async () => {
      const conn = await connection()
      const key = await signingKey()
      fake.setDown(true)
      try {
        const created = await api('POST', `/keys/${key.id}/cloud-exports`, {
          connectionId: conn.id,
          target: spec.target(`down-${randomUUID().slice(0, 8)}`, fake),
        })
        const retrying = await settled(
          key.id,
          created.body.id,
          (e) => e.attempts >= 1 && e.lastSyncError !== null,
          'a failed attempt',
        )
        assert.equal(retrying.syncStatus, 'pending', 'a passing failure is retried')
        assert.ok(retrying.nextAttemptAt && Date.parse(retrying.nextAttemptAt) > clock.now().getTime())
        // The second attempt is due after the backoff: time moves on, and it fails again.
        clock.advance(11_000)
        // Settled: claimed (attempts counts it) and its failure recorded (due again later).
        await settled(
          key.id,
          created.body.id,
          (e) =>
            e.attempts >= 2 &&
            e.nextAttemptAt !== null &&
            Date.parse(e.nextAttemptAt) > clock.now().getTime(),
          'a second failed attempt',
        )
        fake.setDown(false)
        clock.advance(61_000)
        const recovered = await settled(key.id, created.body.id, (e) => e.syncStatus === 'synced', 'recovery')
        assert.equal(recovered.lastSyncVersion, 1)
        assert.equal(recovered.lastSyncError, null)
      } finally {
        fake.setDown(false)
        clock.set(new Date())
      }
    })
  })
}

interface ExportBody {
  id: string
  syncStatus: 'pending' | 'synced' | 'failed'
  attempts: number
  nextAttemptAt: string | null
  lastSyncVersion: number | null
  lastSyncError: { code: string; message: string } | null
  providerKeyId: string | null
}

providerSuite(aws)
providerSuite(azure)
providerSuite(gcp)
providerSuite(scaleway)
