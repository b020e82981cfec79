import assert from 'node:assert/strict'
import {
  constants,
  createHash,
  createPrivateKey,
  createPublicKey,
  generateKeyPairSync,
  privateDecrypt,
  publicEncrypt,
  randomBytes,
  randomUUID,
  verify,
} from 'node:crypto'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { after, before, describe, test } from 'node:test'
import {
  CloudFieldError,
  CloudProviderError,
  type ConnectionContext,
  type ExportMaterial,
} from '../../src/cloud-export/provider.ts'
import { gcpProvider } from '../../src/cloud-export/providers/gcp.ts'
import { openKmsSession } from '../../src/cloud-export/providers/gcp-transport.ts'
import type { KeyType } from '../../src/keys/algorithms.ts'
import { createAllowList } from '../../src/outbound/allow-list.ts'
import { createOutboundClient, type OutboundClient } from '../../src/outbound/outbound-client.ts'
import { type FakeGcpKms, startFakeGcpKms } from '../helpers/fake-gcp-kms.ts'

/**
 * The Google Cloud KMS adapter (src/cloud-export/providers/gcp.ts) against a local fake of Cloud
 * KMS and Google's token endpoint (test/helpers/fake-gcp-kms.ts), through the real guarded
 * outbound client allowed to reach 127.0.0.1: field validation, the connection test, imports of
 * each RSA size, rotation, and the failures a push must classify. Each import is cross-checked
 * with the key the fake unwrapped: its signatures verify with the service's public key, and what
 * is encrypted to its public key decrypts with the service's private key.
 */

const PROJECT = 'export-project'
const LOCATION = 'europe-west1'
const KEY_RING = 'exports'
const KEY_RING_NAME = `projects/${PROJECT}/locations/${LOCATION}/keyRings/${KEY_RING}`
const TIMEOUT_MS = 10_000

let fake: FakeGcpKms
let outbound: OutboundClient
let outboundRequests = 0

before(async () => {
  fake = await startFakeGcpKms({ keyRings: [KEY_RING_NAME] })
  const guarded = createOutboundClient({ allow: createAllowList(['127.0.0.1']) })
  // Counts what goes through the guarded client, to compare with what the fake received.
  outbound = {
    ...guarded,
    request: (request) => {
      outboundRequests++
      return guarded.request(request)
    },
  }
})

after(async () => {
  await fake.stop()
})

function connection(
  overrides: { credentials?: Record<string, unknown>; outbound?: OutboundClient } = {},
): ConnectionContext {
  return {
    settings: gcpProvider.parseSettings({
      apiEndpoint: fake.url,
      tokenUri: fake.tokenUri,
      project: PROJECT,
      location: LOCATION,
    }),
    credentials: gcpProvider.parseCredentials(overrides.credentials ?? fake.serviceAccount),
    outbound: overrides.outbound ?? outbound,
    timeoutMs: TIMEOUT_MS,
  }
}

function target(cryptoKey: string, keyRing = KEY_RING) {
  return gcpProvider.parseTarget({ project: PROJECT, location: LOCATION, keyRing, cryptoKey })
}

const BITS = { 'RSA-2048': 2048, 'RSA-3072': 3072, 'RSA-4096': 4096 } as const

function rsaMaterial(
  algorithm: keyof typeof BITS,
  keyType: KeyType,
  version = 1,
  keyId = randomUUID(),
): ExportMaterial {
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: BITS[algorithm] })
  return { algorithm, keyType, keyId, version, privateKey, publicKey }
}

/** A Cloud KMS client of the test's own, to use what was imported (the SDK over the guarded client). */
function fakeSession() {
  return openKmsSession(outbound, TIMEOUT_MS, {
    apiEndpoint: fake.url,
    tokenUri: fake.tokenUri,
    clientEmail: fake.serviceAccount.clientEmail,
    privateKey: createPrivateKey(fake.serviceAccount.privateKey),
  })
}

/** A signature by the imported version must verify with the service's public key (PSS, SHA-256, salt 32). */
async function assertSignsAsService(versionName: string, material: ExportMaterial) {
  const message = Buffer.from(`signed at the fake by ${versionName}`)
  const session = fakeSession()
  try {
    const [answer] = await session.client.asymmetricSign({
      name: versionName,
      digest: { sha256: createHash('sha256').update(message).digest() },
    })
    const signature = Buffer.from(answer.signature as Uint8Array)
    const valid = verify(
      'sha256',
      message,
      { key: material.publicKey, padding: constants.RSA_PKCS1_PSS_PADDING, saltLength: 32 },
      signature,
    )
    assert.ok(valid, 'the signature made at Cloud KMS verifies with the service public key')
  } finally {
    await session.close()
  }
}

/** Both directions of OAEP-SHA256 between the imported version and the service's key. */
async function assertDecryptsAsService(versionName: string, material: ExportMaterial) {
  const session = fakeSession()
  try {
    const [publicKey] = await session.client.getPublicKey({ name: versionName })
    const secret = randomBytes(32)
    const toService = publicEncrypt(
      {
        key: createPublicKey(String(publicKey.pem)),
        padding: constants.RSA_PKCS1_OAEP_PADDING,
        oaepHash: 'sha256',
      },
      secret,
    )
    const opened = privateDecrypt(
      { key: material.privateKey, padding: constants.RSA_PKCS1_OAEP_PADDING, oaepHash: 'sha256' },
      toService,
    )
    assert.deepEqual(opened, secret, "the service's private key decrypts what the cloud public key encrypted")

    const toCloud = publicEncrypt(
      { key: material.publicKey, padding: constants.RSA_PKCS1_OAEP_PADDING, oaepHash: 'sha256' },
      secret,
    )
    const [decrypted] = await session.client.asymmetricDecrypt({ name: versionName, ciphertext: toCloud })
    assert.deepEqual(
      Buffer.from(decrypted.plaintext as Uint8Array),
      secret,
      'Cloud KMS decrypts what the service public key encrypted',
    )
  } finally {
    await session.close()
  }
}

function assertStoredKeyIs(versionName: string, material: ExportMaterial) {
  const stored = fake.versions().get(versionName)
  assert.ok(stored, `the fake holds ${versionName}`)
  const spki = (key: typeof material.publicKey) => key.export({ format: 'der', type: 'spki' })
  assert.deepEqual(spki(createPublicKey(stored.privateKey)), spki(material.publicKey))
}

async function assertCloudError(
  promise: Promise<unknown>,
  expected: { code: string; retryable: boolean },
  secrets: string[] = [],
): Promise<CloudProviderError> {
  const error = await promise.then(
    () => assert.fail('expected a CloudProviderError'),
    (e: unknown) => e,
  )
  assert.ok(error instanceof CloudProviderError, `a CloudProviderError, not ${String(error)}`)
  assert.equal(error.code, expected.code, error.message)
  assert.equal(error.retryable, expected.retryable, error.message)
  for (const secret of secrets) assert.ok(!error.message.includes(secret), 'the message holds no secret')
  return error
}

describe('fields', () => {
  const fieldOf = (run: () => unknown): CloudFieldError => {
    try {
      run()
    } catch (error) {
      assert.ok(error instanceof CloudFieldError, String(error))
      return error
    }
    return assert.fail('expected a CloudFieldError')
  }

  test('supports the RSA sizes of spec 2.2 only', () => {
    assert.equal(gcpProvider.provider, 'gcp')
    assert.deepEqual([...gcpProvider.supportedAlgorithms], ['RSA-2048', 'RSA-3072', 'RSA-4096'])
  })

  test('settings: all optional; endpoints https (http only to this machine), origins for the API', () => {
    assert.deepEqual(gcpProvider.parseSettings({}), {})
    assert.deepEqual(
      gcpProvider.parseSettings({
        apiEndpoint: 'https://cloudkms.europe-west1.rep.googleapis.com/',
        project: 'my-project-1',
      }),
      { apiEndpoint: 'https://cloudkms.europe-west1.rep.googleapis.com', project: 'my-project-1' },
    )
    assert.equal(
      fieldOf(() => gcpProvider.parseSettings({ apiEndpoint: 'http://cloudkms.example.com' })).field,
      'settings.apiEndpoint',
    )
    assert.equal(
      fieldOf(() => gcpProvider.parseSettings({ apiEndpoint: 'https://cloudkms.googleapis.com/v1' })).field,
      'settings.apiEndpoint',
    )
    assert.equal(
      fieldOf(() => gcpProvider.parseSettings({ tokenUri: 'https://u:p@oauth2.example.com/token' })).field,
      'settings.tokenUri',
    )
    assert.equal(fieldOf(() => gcpProvider.parseSettings({ project: 'No' })).field, 'settings.project')
    assert.equal(fieldOf(() => gcpProvider.parseSettings({ location: 'global' })).field, 'settings.location')
    assert.equal(
      fieldOf(() => gcpProvider.parseSettings({ region: 'europe-west1' })).field,
      'settings.region',
    )
  })

  test('credentials: a service account key, refused without echoing it', () => {
    const parsed = gcpProvider.parseCredentials(fake.serviceAccount)
    assert.deepEqual(parsed, fake.serviceAccount)

    const secret = 'SECRETSECRETSECRET'
    const garbled = `-----BEGIN PRIVATE KEY-----\n${secret}\n-----END PRIVATE KEY-----\n`
    for (const privateKey of [secret, garbled, 42]) {
      const error = fieldOf(() =>
        gcpProvider.parseCredentials({ clientEmail: fake.serviceAccount.clientEmail, privateKey }),
      )
      assert.equal(error.field, 'credentials.privateKey')
      assert.ok(!error.message.includes(secret))
    }
    const ecKey = String(
      generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ format: 'pem', type: 'pkcs8' }),
    )
    const ecError = fieldOf(() =>
      gcpProvider.parseCredentials({ clientEmail: fake.serviceAccount.clientEmail, privateKey: ecKey }),
    )
    assert.equal(ecError.field, 'credentials.privateKey')
    assert.ok(!ecError.message.includes('BEGIN PRIVATE KEY'))

    assert.equal(
      fieldOf(() => gcpProvider.parseCredentials({ ...fake.serviceAccount, clientEmail: 'not an email' }))
        .field,
      'credentials.clientEmail',
    )
    assert.equal(
      fieldOf(() =>
        gcpProvider.parseCredentials({ ...fake.serviceAccount, tokenUri: 'ftp://oauth2.example.com' }),
      ).field,
      'credentials.tokenUri',
    )
    const misplaced = fieldOf(() =>
      gcpProvider.parseCredentials({ ...fake.serviceAccount, private_key_id: secret }),
    )
    assert.equal(misplaced.field, 'credentials.private_key_id')
    assert.ok(!misplaced.message.includes(secret))
  })

  test("target: project, location, key ring and crypto key by Google's id rules", () => {
    const good = { project: PROJECT, location: LOCATION, keyRing: KEY_RING, cryptoKey: 'signing_key-1' }
    assert.deepEqual(gcpProvider.parseTarget(good), good)
    assert.deepEqual(gcpProvider.parseTarget({ ...good, project: '123456789012', location: 'global' }), {
      ...good,
      project: '123456789012',
      location: 'global',
    })
    const cases: [Record<string, unknown>, string][] = [
      [{ ...good, cryptoKey: 'with space' }, 'target.cryptoKey'],
      [{ ...good, cryptoKey: 'k'.repeat(64) }, 'target.cryptoKey'],
      [{ ...good, keyRing: 'a/b' }, 'target.keyRing'],
      [{ ...good, project: 'Upper-Case' }, 'target.project'],
      [{ ...good, location: undefined }, 'target.location'],
      [{ ...good, importJob: 'x' }, 'target.importJob'],
    ]
    for (const [input, field] of cases)
      assert.equal(fieldOf(() => gcpProvider.parseTarget(input)).field, field)
  })
})

describe('connection test', () => {
  test('passes with the service account key (token grant, then one page of key rings)', async () => {
    await gcpProvider.testConnection(connection())
    // Without a project in the settings, the token grant alone.
    await gcpProvider.testConnection({
      ...connection(),
      settings: gcpProvider.parseSettings({ apiEndpoint: fake.url, tokenUri: fake.tokenUri }),
    })
  })

  test('another key for the same service account is refused, not retried', async () => {
    const otherKey = String(
      generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ format: 'pem', type: 'pkcs8' }),
    )
    const credentials = { clientEmail: fake.serviceAccount.clientEmail, privateKey: otherKey }
    const error = await assertCloudError(
      gcpProvider.testConnection(connection({ credentials })),
      { code: 'cloud_credentials_refused', retryable: false },
      [otherKey, otherKey.split('\n')[1]!],
    )
    assert.match(error.message, /invalid_grant/)
  })

  test('a destination the outbound policy refuses is not retried', async () => {
    const closed = createOutboundClient({ allow: createAllowList([]) })
    await assertCloudError(gcpProvider.testConnection(connection({ outbound: closed })), {
      code: 'cloud_destination_refused',
      retryable: false,
    })
  })

  test('an endpoint that does not answer is retryable', async () => {
    const server = createServer()
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    const { port } = server.address() as AddressInfo
    await new Promise<void>((resolve) => server.close(() => resolve()))
    const dead = `http://127.0.0.1:${port}`
    await assertCloudError(
      gcpProvider.testConnection({
        ...connection(),
        settings: gcpProvider.parseSettings({ apiEndpoint: dead, tokenUri: `${dead}/token` }),
      }),
      { code: 'cloud_unreachable', retryable: true },
    )
  })
})

describe('push', () => {
  test('RSA-2048 Signing: imported through an import job, every request through the guarded client', async () => {
    const material = rsaMaterial('RSA-2048', 'Signing')
    const sentBefore = outboundRequests
    const receivedBefore = fake.requestCount()
    const result = await gcpProvider.push(connection(), target('sign-2048'), material, null)
    assert.ok(fake.requestCount() > receivedBefore)
    assert.equal(
      outboundRequests - sentBefore,
      fake.requestCount() - receivedBefore,
      'nothing bypassed src/outbound',
    )

    const cryptoKey = `${KEY_RING_NAME}/cryptoKeys/sign-2048`
    assert.equal(result.providerKeyId, `${cryptoKey}/cryptoKeyVersions/1`)
    assert.equal(result.state['cryptoKey'], cryptoKey)
    assert.equal(result.state['version'], '1')
    assert.match(String(result.state['importJob']), new RegExp(`^${KEY_RING_NAME}/importJobs/`))
    assert.equal(fake.versions().get(result.providerKeyId)?.algorithm, 'RSA_SIGN_PSS_2048_SHA256')
    assertStoredKeyIs(result.providerKeyId, material)
    await assertSignsAsService(result.providerKeyId, material)
  })

  test('RSA-3072 Encryption: an ASYMMETRIC_DECRYPT key, OAEP-SHA256 both ways', async () => {
    const material = rsaMaterial('RSA-3072', 'Encryption')
    const result = await gcpProvider.push(connection(), target('decrypt-3072'), material, null)
    assert.equal(fake.versions().get(result.providerKeyId)?.algorithm, 'RSA_DECRYPT_OAEP_3072_SHA256')
    assertStoredKeyIs(result.providerKeyId, material)
    await assertDecryptsAsService(result.providerKeyId, material)
  })

  test('RSA-4096 Signing', async () => {
    const material = rsaMaterial('RSA-4096', 'Signing')
    const result = await gcpProvider.push(connection(), target('sign-4096'), material, null)
    assert.equal(fake.versions().get(result.providerKeyId)?.algorithm, 'RSA_SIGN_PSS_4096_SHA256')
    assertStoredKeyIs(result.providerKeyId, material)
    await assertSignsAsService(result.providerKeyId, material)
  })

  test('a rotation adds version 2 to the same crypto key; version 1 stays', async () => {
    const keyId = randomUUID()
    const first = rsaMaterial('RSA-2048', 'Signing', 1, keyId)
    const firstResult = await gcpProvider.push(connection(), target('rotated'), first, null)
    const second = rsaMaterial('RSA-2048', 'Signing', 2, keyId)
    const secondResult = await gcpProvider.push(connection(), target('rotated'), second, firstResult)

    assert.equal(secondResult.state['cryptoKey'], firstResult.state['cryptoKey'])
    assert.equal(secondResult.providerKeyId, `${KEY_RING_NAME}/cryptoKeys/rotated/cryptoKeyVersions/2`)
    assert.equal(secondResult.state['version'], '2')
    assertStoredKeyIs(firstResult.providerKeyId, first)
    assertStoredKeyIs(secondResult.providerKeyId, second)
    await assertSignsAsService(secondResult.providerKeyId, second)
    await assertSignsAsService(firstResult.providerKeyId, first)
  })

  test('an existing crypto key of another purpose is not reused', async () => {
    await gcpProvider.push(connection(), target('purpose-bound'), rsaMaterial('RSA-2048', 'Signing'), null)
    const error = await assertCloudError(
      gcpProvider.push(connection(), target('purpose-bound'), rsaMaterial('RSA-2048', 'Encryption'), null),
      { code: 'cloud_key_mismatch', retryable: false },
    )
    assert.match(error.message, /ASYMMETRIC_SIGN/)
  })

  test('a key ring that does not exist is not retried', async () => {
    await assertCloudError(
      gcpProvider.push(
        connection(),
        target('anything', 'no-such-ring'),
        rsaMaterial('RSA-2048', 'Signing'),
        null,
      ),
      { code: 'cloud_not_found', retryable: false },
    )
  })

  test('an algorithm Cloud KMS does not import is refused before any request', async () => {
    const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' })
    const material: ExportMaterial = {
      algorithm: 'EC-P256',
      keyType: 'Signing',
      keyId: randomUUID(),
      version: 1,
      privateKey,
      publicKey,
    }
    const sentBefore = outboundRequests
    await assertCloudError(gcpProvider.push(connection(), target('ec'), material, null), {
      code: 'cloud_algorithm_unsupported',
      retryable: false,
    })
    assert.equal(outboundRequests, sentBefore)
  })

  test('Cloud KMS down behind a working token endpoint: retryable', async () => {
    fake.setDown(true, 'kms')
    try {
      const error = await assertCloudError(
        gcpProvider.push(connection(), target('kms-outage'), rsaMaterial('RSA-2048', 'Signing'), null),
        { code: 'cloud_unavailable', retryable: true },
      )
      assert.match(error.message, /Cloud KMS is unavailable \(HTTP 503, UNAVAILABLE\)/)
    } finally {
      fake.setDown(false)
    }
  })

  test('a service account without the IAM permission is refused, not retried', async () => {
    fake.setPermissionDenied(true)
    try {
      const error = await assertCloudError(
        gcpProvider.push(connection(), target('forbidden'), rsaMaterial('RSA-2048', 'Signing'), null),
        { code: 'cloud_credentials_refused', retryable: false },
      )
      assert.match(error.message, /PERMISSION_DENIED/)
      assert.ok(
        !error.message.includes('cloudkms.cryptoKeys.create'),
        "the server's own text is not passed on",
      )
    } finally {
      fake.setPermissionDenied(false)
    }
  })

  test('Google down: retryable; after recovery the same push succeeds', async () => {
    const material = rsaMaterial('RSA-2048', 'Signing')
    fake.setDown(true)
    try {
      await assertCloudError(gcpProvider.push(connection(), target('outage'), material, null), {
        code: 'cloud_unavailable',
        retryable: true,
      })
    } finally {
      fake.setDown(false)
    }
    const result = await gcpProvider.push(connection(), target('outage'), material, null)
    assertStoredKeyIs(result.providerKeyId, material)
    await assertSignsAsService(result.providerKeyId, material)
  })
})
