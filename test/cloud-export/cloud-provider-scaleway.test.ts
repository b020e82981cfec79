import assert from 'node:assert/strict'
import {
  constants,
  createHash,
  createPublicKey,
  generateKeyPairSync,
  type KeyObject,
  randomUUID,
  sign,
  verify,
} from 'node:crypto'
import { after, before, describe, test } from 'node:test'
import {
  CloudFieldError,
  CloudProviderError,
  type ConnectionContext,
  type ExportMaterial,
} from '../../src/cloud-export/provider.ts'
import { scalewayProvider } from '../../src/cloud-export/providers/scaleway.ts'
import {
  createKeyManagerApi,
  type ScalewayConnection,
} from '../../src/cloud-export/providers/scaleway-transport.ts'
import type { AlgorithmName, KeyType } from '../../src/keys/algorithms.ts'
import { createAllowList } from '../../src/outbound/allow-list.ts'
import { createOutboundClient, type OutboundClient } from '../../src/outbound/outbound-client.ts'
import { type FakeScalewayKms, startFakeScalewayKms } from '../helpers/fake-scaleway-kms.ts'

const SECRET_KEY = randomUUID()
const PROJECT_ID = randomUUID()
const ACCESS_KEY = 'SCWABCDEFGHIJ0123456'
const REGION = 'fr-par'

let fake: FakeScalewayKms
const outbound = createOutboundClient({ allow: createAllowList(['127.0.0.1']) })

before(async () => {
  fake = await startFakeScalewayKms({ secretKey: SECRET_KEY, projectId: PROJECT_ID })
})
after(() => fake.stop())

function connection(
  secretKey = SECRET_KEY,
  client: OutboundClient = outbound,
  projectId = PROJECT_ID,
): ConnectionContext {
  return {
    settings: scalewayProvider.parseSettings({ region: REGION, projectId, apiUrl: fake.url }),
    credentials: scalewayProvider.parseCredentials({ accessKey: ACCESS_KEY, secretKey }),
    outbound: client,
    timeoutMs: 30_000,
  }
}

const target = (keyName = 'payments-signing') => scalewayProvider.parseTarget({ keyName })

function keyPairFor(algorithm: AlgorithmName) {
  switch (algorithm) {
    case 'RSA-2048':
      return generateKeyPairSync('rsa', { modulusLength: 2048 })
    case 'EC-P256':
      return generateKeyPairSync('ec', { namedCurve: 'P-256' })
    case 'EC-P384':
      return generateKeyPairSync('ec', { namedCurve: 'P-384' })
    case 'Ed25519':
      return generateKeyPairSync('ed25519')
    default:
      throw new Error(`no test key pair for ${algorithm}`)
  }
}

function material(algorithm: AlgorithmName, keyType: KeyType = 'Signing', keyId = randomUUID(), version = 1) {
  const { privateKey, publicKey } = keyPairFor(algorithm)
  return { algorithm, keyType, keyId, version, privateKey, publicKey } satisfies ExportMaterial
}

/** How each algorithm signs at Scaleway: over a digest, RSA-PSS salted with the hash length, ECDSA in DER. */
function signingScheme(algorithm: AlgorithmName) {
  if (algorithm === 'Ed25519') return { hash: null, options: {} }
  if (algorithm.startsWith('RSA')) {
    return { hash: 'sha256', options: { padding: constants.RSA_PKCS1_PSS_PADDING, saltLength: 32 } }
  }
  return { hash: algorithm === 'EC-P384' ? 'sha384' : 'sha256', options: { dsaEncoding: 'der' as const } }
}

async function expectCloudError(promise: Promise<unknown>, code: string, retryable: boolean) {
  await assert.rejects(promise, (error: unknown) => {
    assert.ok(error instanceof CloudProviderError, `expected a CloudProviderError, got ${String(error)}`)
    assert.equal(error.code, code, error.message)
    assert.equal(error.retryable, retryable)
    assert.ok(!error.message.includes(SECRET_KEY), 'the secret key never appears in an error')
    return true
  })
}

describe('Scaleway Key Manager: fields', () => {
  test('settings are validated field by field and normalised', () => {
    assert.deepEqual(
      scalewayProvider.parseSettings({ region: 'nl-ams', projectId: PROJECT_ID.toUpperCase() }),
      {
        region: 'nl-ams',
        projectId: PROJECT_ID,
        apiUrl: 'https://api.scaleway.com',
      },
    )
    const refused: [Record<string, unknown>, string][] = [
      [{ projectId: PROJECT_ID }, 'settings.region'],
      [{ region: 'Paris', projectId: PROJECT_ID }, 'settings.region'],
      [{ region: REGION, projectId: 'my-project' }, 'settings.projectId'],
      [{ region: REGION, projectId: PROJECT_ID, apiUrl: 'http://api.scaleway.com' }, 'settings.apiUrl'],
      [{ region: REGION, projectId: PROJECT_ID, apiUrl: 'https://u:p@api.scaleway.com' }, 'settings.apiUrl'],
      [{ region: REGION, projectId: PROJECT_ID, apiUrl: 'https://api.scaleway.com/x?y' }, 'settings.apiUrl'],
      [
        { region: REGION, projectId: PROJECT_ID, caCertificate: 'not a certificate' },
        'settings.caCertificate',
      ],
      [{ region: REGION, projectId: PROJECT_ID, secretKey: SECRET_KEY }, 'settings.secretKey'],
    ]
    for (const [input, field] of refused) {
      assert.throws(
        () => scalewayProvider.parseSettings(input),
        (error: unknown) =>
          error instanceof CloudFieldError && error.field === field && !error.message.includes(SECRET_KEY),
        field,
      )
    }
  })

  test('credential errors name the field and never echo the value', () => {
    assert.deepEqual(scalewayProvider.parseCredentials({ accessKey: ACCESS_KEY, secretKey: SECRET_KEY }), {
      accessKey: ACCESS_KEY,
      secretKey: SECRET_KEY,
    })
    const badSecret = 'hunter2-not-a-uuid-secret'
    const refused: [Record<string, unknown>, string, string][] = [
      [{ accessKey: 'SCW-short', secretKey: SECRET_KEY }, 'credentials.accessKey', 'SCW-short'],
      [{ accessKey: ACCESS_KEY, secretKey: badSecret }, 'credentials.secretKey', badSecret],
      [{ accessKey: ACCESS_KEY }, 'credentials.secretKey', ACCESS_KEY],
      [{ accessKey: ACCESS_KEY, secretKey: SECRET_KEY, token: badSecret }, 'credentials.token', badSecret],
    ]
    for (const [input, field, value] of refused) {
      assert.throws(
        () => scalewayProvider.parseCredentials(input),
        (error: unknown) =>
          error instanceof CloudFieldError &&
          error.field === field &&
          !error.message.includes(value) &&
          !error.message.includes(SECRET_KEY),
        field,
      )
    }
  })

  test('the target is a bounded key name and an optional description', () => {
    assert.deepEqual(
      scalewayProvider.parseTarget({ keyName: 'api-signing', description: 'Signs API tokens' }),
      {
        keyName: 'api-signing',
        description: 'Signs API tokens',
      },
    )
    for (const input of [
      {},
      { keyName: 'x'.repeat(101) },
      { keyName: '../etc' },
      { keyName: 'ok', description: 'a\nb' },
    ]) {
      assert.throws(
        () => scalewayProvider.parseTarget(input),
        (error: unknown) => error instanceof CloudFieldError && error.field.startsWith('target.'),
      )
    }
  })
})

describe('Scaleway Key Manager: connection test', () => {
  test('the right secret lists keys; a wrong one is refused for good', async () => {
    await scalewayProvider.testConnection(connection())
    assert.ok(fake.requests().includes(`GET /key-manager/v1alpha1/regions/${REGION}/keys`))
    await expectCloudError(
      scalewayProvider.testConnection(connection(randomUUID())),
      'cloud_credentials_refused',
      false,
    )
  })

  test('a project the credentials may not use is refused for good', async () => {
    await expectCloudError(
      scalewayProvider.testConnection(connection(SECRET_KEY, outbound, randomUUID())),
      'cloud_credentials_refused',
      false,
    )
  })

  test('a destination the guarded client refuses is not retried', async () => {
    const closed = createOutboundClient({ allow: createAllowList([]) })
    await expectCloudError(
      scalewayProvider.testConnection(connection(SECRET_KEY, closed)),
      'cloud_destination_refused',
      false,
    )
  })
})

describe('Scaleway Key Manager: push', () => {
  for (const algorithm of ['RSA-2048', 'EC-P256', 'Ed25519'] as const) {
    test(`${algorithm}: imported, and signatures verify both ways`, async () => {
      const conn = connection()
      const pushed = material(algorithm)
      const result = await scalewayProvider.push(conn, target(), pushed, null)

      const held = fake.keys().get(result.providerKeyId)
      assert.ok(held?.privateKey, 'the fake holds the imported key')
      assert.equal(held.state, 'enabled')
      assert.equal(held.origin, 'external')
      assert.equal(held.name, 'payments-signing')
      assert.deepEqual(result.state, { keyId: result.providerKeyId, region: REGION, version: 1 })
      assert.deepEqual(spki(held.publicKey!), spki(pushed.publicKey))

      // The cloud signs (its sign endpoint, through the SDK): the service's public key verifies.
      const message = Buffer.from(`cross-check ${algorithm}`)
      const { hash, options } = signingScheme(algorithm)
      const digest = hash ? createHash(hash).update(message).digest() : message
      const api = createKeyManagerApi(conn, scalewayConnectionOf(conn))
      const signed = await api.sign({
        region: REGION,
        keyId: result.providerKeyId,
        digest: digest.toString('base64'),
      })
      assert.ok(
        verify(hash, message, { key: pushed.publicKey, ...options }, Buffer.from(signed.signature, 'base64')),
      )

      // The service signs: the public key the cloud holds (as its API serves it) verifies.
      const { pem } = await api.getPublicKey({ region: REGION, keyId: result.providerKeyId })
      const serviceSignature = sign(hash, message, { key: pushed.privateKey, ...options })
      assert.ok(verify(hash, message, { key: createPublicKey(pem), ...options }, serviceSignature))
      assert.ok(verify(hash, message, { key: held.publicKey!, ...options }, serviceSignature))
    })
  }

  test('every request goes through the guarded client, none through the global fetch', async () => {
    const seen: string[] = []
    const spying: OutboundClient = {
      ...outbound,
      request: (request) => {
        seen.push(`${request.method} ${request.url.pathname}`)
        assert.equal(request.maxResponseBytes, 1024 * 1024)
        assert.equal(request.oversize, 'fail')
        return outbound.request(request)
      },
    }
    const globalFetch = globalThis.fetch
    globalThis.fetch = () => Promise.reject(new Error('the global fetch must not be used'))
    const before = fake.requests().length
    try {
      await scalewayProvider.push(connection(SECRET_KEY, spying), target(), material('EC-P256'), null)
    } finally {
      globalThis.fetch = globalFetch
    }
    assert.deepEqual(seen, fake.requests().slice(before))
    assert.deepEqual(
      seen.map((r) => r.replace(/keys\/[0-9a-f-]{36}/, 'keys/{id}')),
      [
        `GET /key-manager/v1alpha1/regions/${REGION}/keys`,
        `POST /key-manager/v1alpha1/regions/${REGION}/keys`,
        `POST /key-manager/v1alpha1/regions/${REGION}/keys/{id}/import-key-material`,
        `GET /key-manager/v1alpha1/regions/${REGION}/keys/{id}/public-key`,
      ],
    )
  })

  test('an RSA encryption key gets the OAEP usage', async () => {
    const result = await scalewayProvider.push(
      connection(),
      target('payments-encryption'),
      material('RSA-2048', 'Encryption'),
      null,
    )
    const held = fake.keys().get(result.providerKeyId)!
    assert.equal(held.usage, 'asymmetric_encryption')
    assert.equal(held.algorithm, 'rsa_oaep_2048_sha256')
  })

  test('pushing the same version again changes nothing', async () => {
    const pushed = material('EC-P256')
    const first = await scalewayProvider.push(connection(), target(), pushed, null)
    const again = await scalewayProvider.push(connection(), target(), pushed, first)
    assert.equal(again.providerKeyId, first.providerKeyId)
    assert.equal(fake.keys().get(first.providerKeyId)!.imports, 1)
    assert.equal(keysTagged(pushed.keyId).length, 1)
  })

  test('a push that failed between create and import resumes with the key it created', async () => {
    const pushed = material('EC-P256')
    fake.failNext('import-key-material')
    await expectCloudError(
      scalewayProvider.push(connection(), target(), pushed, null),
      'cloud_unavailable',
      true,
    )
    assert.equal(keysTagged(pushed.keyId)[0]?.state, 'pending_key_material')

    const result = await scalewayProvider.push(connection(), target(), pushed, null)
    assert.equal(keysTagged(pushed.keyId).length, 1, 'no second key was created')
    assert.equal(fake.keys().get(result.providerKeyId)!.state, 'enabled')
  })

  test('rotation puts the new version in a new external key; the previous one stays', async () => {
    const keyId = randomUUID()
    const v1 = material('EC-P256', 'Signing', keyId, 1)
    const first = await scalewayProvider.push(connection(), target(), v1, null)
    const v2 = material('EC-P256', 'Signing', keyId, 2)
    const second = await scalewayProvider.push(connection(), target(), v2, first)

    assert.notEqual(second.providerKeyId, first.providerKeyId)
    assert.deepEqual(second.state, {
      keyId: second.providerKeyId,
      region: REGION,
      version: 2,
      previousKeyId: first.providerKeyId,
    })
    assert.deepEqual(spki(fake.keys().get(second.providerKeyId)!.publicKey!), spki(v2.publicKey))
    const repeated = await scalewayProvider.push(connection(), target(), v2, second)
    assert.deepEqual(repeated, second)
    const old = fake.keys().get(first.providerKeyId)!
    assert.equal(old.state, 'enabled')
    assert.deepEqual(spki(old.publicKey!), spki(v1.publicKey))
  })

  test('material that does not match the algorithm is refused for good', async () => {
    const pushed = { ...material('EC-P256'), ...keyPairFor('EC-P384') }
    const refusal = scalewayProvider.push(connection(), target(), pushed, null)
    await expectCloudError(refusal, 'cloud_import_refused', false)
    await assert.rejects(refusal, /HTTP 400, invalid_arguments: arguments key_material/)
  })

  test('an algorithm Scaleway does not take is refused before any request', async () => {
    const before = fake.requests().length
    const hmac = { ...material('Ed25519'), algorithm: 'HMAC-SHA256' as const, keyType: 'HMAC' as const }
    await expectCloudError(
      scalewayProvider.push(connection(), target(), hmac, null),
      'cloud_algorithm_unsupported',
      false,
    )
    assert.equal(fake.requests().length, before)
  })

  test('a service that is down is retryable, and the push succeeds once it is back', async () => {
    const pushed = material('Ed25519')
    fake.setDown(true)
    try {
      await expectCloudError(
        scalewayProvider.push(connection(), target(), pushed, null),
        'cloud_unavailable',
        true,
      )
      await expectCloudError(scalewayProvider.testConnection(connection()), 'cloud_unavailable', true)
    } finally {
      fake.setDown(false)
    }
    const result = await scalewayProvider.push(connection(), target(), pushed, null)
    assert.deepEqual(spki(fake.keys().get(result.providerKeyId)!.publicKey!), spki(pushed.publicKey))
  })
})

const spki = (key: KeyObject) => key.export({ format: 'der', type: 'spki' })

const keysTagged = (keyId: string) =>
  [...fake.keys().values()].filter((k) => k.tags.includes(`kms-key:${keyId}`))

function scalewayConnectionOf(conn: ConnectionContext): ScalewayConnection {
  return { ...conn.settings, ...conn.credentials } as unknown as ScalewayConnection
}
