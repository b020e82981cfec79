import assert from 'node:assert/strict'
import {
  createHash,
  createPublicKey,
  constants as cryptoConstants,
  generateKeyPairSync,
  type JsonWebKey as NodeJwk,
  sign,
  verify,
} from 'node:crypto'
import { after, before, describe, test } from 'node:test'
import { ClientSecretCredential } from '@azure/identity'
import { CryptographyClient, KeyClient, type SignatureAlgorithm } from '@azure/keyvault-keys'
import {
  CloudFieldError,
  CloudProviderError,
  type ConnectionContext,
  type ExportMaterial,
} from '../../src/cloud-export/provider.ts'
import { azureProvider } from '../../src/cloud-export/providers/azure.ts'
import { createOutboundHttpClient } from '../../src/cloud-export/providers/azure-transport.ts'
import type { AlgorithmName, KeyType } from '../../src/keys/algorithms.ts'
import { createAllowList } from '../../src/outbound/allow-list.ts'
import { createOutboundClient, type OutboundClient } from '../../src/outbound/outbound-client.ts'
import { type FakeAzureKeyVault, startFakeAzureKeyVault } from '../helpers/fake-azure-keyvault.ts'

/**
 * The Azure Key Vault adapter (src/cloud-export/providers/azure.ts) against a local fake of Entra
 * ID and Key Vault (test/helpers/fake-azure-keyvault.ts), through the guarded outbound client:
 * field validation, the connection test, imports of each key kind, a rotation into the same key
 * name, refusals and outages. What was imported is cross-checked with signatures both ways: made
 * by the vault (through the SDK's CryptographyClient) and verified with node:crypto, and made
 * with the service's private key and verified under the public key the vault returns.
 */

const TIMEOUT_MS = 20_000

let fake: FakeAzureKeyVault
let outbound: OutboundClient

before(async () => {
  fake = await startFakeAzureKeyVault()
  outbound = createOutboundClient({ allow: createAllowList(['127.0.0.1']) }).withExtraCa(fake.caPem)
})
after(() => fake.stop())

function connection(
  overrides: { tenantId?: string; clientSecret?: string; clientId?: string; outbound?: OutboundClient } = {},
) {
  return {
    settings: azureProvider.parseSettings({
      tenantId: overrides.tenantId ?? fake.tenantId,
      clientId: overrides.clientId ?? fake.clientId,
      authorityHost: fake.url,
    }),
    credentials: azureProvider.parseCredentials({
      clientSecret: overrides.clientSecret ?? fake.clientSecret,
    }),
    outbound: overrides.outbound ?? outbound,
    timeoutMs: TIMEOUT_MS,
  } satisfies ConnectionContext
}

const target = (keyName: string) => azureProvider.parseTarget({ vaultUrl: fake.url, keyName })

let nextKeyId = 1
function material(algorithm: AlgorithmName, keyType: KeyType, version = 1, keyId = `key-${nextKeyId++}`) {
  const pair =
    algorithm === 'Ed25519'
      ? generateKeyPairSync('ed25519')
      : algorithm.startsWith('EC-')
        ? generateKeyPairSync('ec', { namedCurve: `P-${algorithm.slice(4)}` })
        : generateKeyPairSync('rsa', { modulusLength: Number(algorithm.slice(4)) })
  return { algorithm, keyType, keyId, version, ...pair } satisfies ExportMaterial
}

/** A refusal with this code and retryability whose message holds no secret. */
async function assertRefused(
  promise: Promise<unknown>,
  code: string,
  retryable: boolean,
  secrets: string[] = [],
) {
  const error = await promise.then(
    () => assert.fail(`expected ${code}`),
    (e: unknown) => e,
  )
  assert.ok(error instanceof CloudProviderError, `not a CloudProviderError: ${String(error)}`)
  assert.equal(error.code, code, error.message)
  assert.equal(error.retryable, retryable, error.message)
  for (const secret of [fake.clientSecret, ...secrets])
    assert.ok(!error.message.includes(secret), error.message)
  return error
}

function assertFieldError(run: () => unknown, field: string, secret?: string) {
  assert.throws(run, (error: unknown) => {
    assert.ok(error instanceof CloudFieldError, String(error))
    assert.equal(error.field, field)
    if (secret) assert.ok(!error.message.includes(secret), error.message)
    return true
  })
}

/** The SDK's own clients, on the same transport, to read and use what the adapter imported. */
function sdkCredential() {
  return new ClientSecretCredential(fake.tenantId, fake.clientId, fake.clientSecret, {
    authorityHost: fake.url,
    disableInstanceDiscovery: true,
    httpClient: createOutboundHttpClient({
      outbound,
      timeoutMs: TIMEOUT_MS,
      service: 'identity',
      journal: { last: undefined },
    }),
  })
}
const sdkOptions = () => ({
  httpClient: createOutboundHttpClient({
    outbound,
    timeoutMs: TIMEOUT_MS,
    service: 'vault',
    journal: { last: undefined },
  }),
  disableChallengeResourceVerification: true,
})

/** The public key Key Vault answers for a key version, as node:crypto takes it. */
async function vaultPublicKey(keyName: string, version: string) {
  const { key } = await new KeyClient(fake.url, sdkCredential(), sdkOptions()).getKey(keyName, { version })
  assert.ok(key)
  const b64 = (bytes: Uint8Array | undefined) => Buffer.from(bytes!).toString('base64url')
  const jwk: NodeJwk =
    key.kty === 'RSA'
      ? { kty: 'RSA', n: b64(key.n), e: b64(key.e) }
      : { kty: 'EC', crv: key.crv!, x: b64(key.x), y: b64(key.y) }
  return { publicKey: createPublicKey({ key: jwk, format: 'jwk' }), keyOps: key.keyOps }
}

/** A signature over `message` made by the vault with the imported key. */
async function vaultSignature(providerKeyId: string, algorithm: SignatureAlgorithm, message: Buffer) {
  const hash = { '256': 'sha256', '384': 'sha384', '512': 'sha512' }[algorithm.slice(2)]!
  const digest = createHash(hash).update(message).digest()
  const client = new CryptographyClient(providerKeyId, sdkCredential(), sdkOptions())
  const { result } = await client.sign(algorithm, digest)
  return Buffer.from(result)
}

const storedVersions = (keyName: string) => fake.keys().get(keyName) ?? []

function assertSameKey(stored: { privateKey: import('node:crypto').KeyObject }, pushed: ExportMaterial) {
  assert.deepEqual(
    createPublicKey(stored.privateKey).export({ format: 'jwk' }),
    pushed.publicKey.export({ format: 'jwk' }),
  )
  assert.equal(stored.privateKey.export({ format: 'jwk' }).d, pushed.privateKey.export({ format: 'jwk' }).d)
}

describe('validation', () => {
  const clientId = '11111111-2222-4333-8444-555555555555'

  test('settings: tenant (GUID or domain), client id, optional https authority host', () => {
    assert.deepEqual(azureProvider.parseSettings({ tenantId: 'contoso.onmicrosoft.com', clientId }), {
      tenantId: 'contoso.onmicrosoft.com',
      clientId,
      authorityHost: 'https://login.microsoftonline.com',
    })
    assert.equal(
      azureProvider.parseSettings({
        tenantId: clientId,
        clientId,
        authorityHost: 'https://login.chinacloudapi.cn/',
      })['authorityHost'],
      'https://login.chinacloudapi.cn',
    )
    assertFieldError(() => azureProvider.parseSettings({ clientId }), 'settings.tenantId')
    assertFieldError(() => azureProvider.parseSettings({ tenantId: 'common', clientId }), 'settings.tenantId')
    assertFieldError(
      () => azureProvider.parseSettings({ tenantId: clientId, clientId: 'app' }),
      'settings.clientId',
    )
    for (const authorityHost of [
      'http://login.microsoftonline.com',
      'https://login.microsoftonline.com/tenant',
      7,
    ]) {
      assertFieldError(
        () => azureProvider.parseSettings({ tenantId: clientId, clientId, authorityHost }),
        'settings.authorityHost',
      )
    }
    assertFieldError(
      () => azureProvider.parseSettings({ tenantId: clientId, clientId, region: 'x' }),
      'settings.region',
    )
  })

  test('credentials: the client secret, never quoted back', () => {
    assert.deepEqual(azureProvider.parseCredentials({ clientSecret: 'Abc8Q~x.y_z-1' }), {
      clientSecret: 'Abc8Q~x.y_z-1',
    })
    const malformed = 'not a valid secret: s3cr3t-value'
    assertFieldError(
      () => azureProvider.parseCredentials({ clientSecret: malformed }),
      'credentials.clientSecret',
      's3cr3t',
    )
    assertFieldError(() => azureProvider.parseCredentials({}), 'credentials.clientSecret')
    assertFieldError(() => azureProvider.parseCredentials({ clientSecret: '' }), 'credentials.clientSecret')
    assertFieldError(
      () => azureProvider.parseCredentials({ clientSecret: 'ok', password: 'hunter2-secret' }),
      'credentials.password',
      'hunter2',
    )
  })

  test('target: an https vault URL (as its origin) and a Key Vault key name', () => {
    assert.deepEqual(
      azureProvider.parseTarget({ vaultUrl: 'https://my-vault.vault.azure.net/', keyName: 'kms-key-1' }),
      {
        vaultUrl: 'https://my-vault.vault.azure.net',
        keyName: 'kms-key-1',
      },
    )
    for (const vaultUrl of [
      'http://my-vault.vault.azure.net',
      'https://my-vault.vault.azure.net/keys',
      'https://user:pw@my-vault.vault.azure.net',
      'my-vault',
    ]) {
      assertFieldError(() => azureProvider.parseTarget({ vaultUrl, keyName: 'k' }), 'target.vaultUrl')
    }
    for (const keyName of ['my_key', '', 'a'.repeat(128), 'ké']) {
      assertFieldError(() => azureProvider.parseTarget({ vaultUrl: fake.url, keyName }), 'target.keyName')
    }
  })

  test('the supported algorithms are spec 2.2 row for Azure', () => {
    assert.deepEqual(
      [...azureProvider.supportedAlgorithms],
      ['RSA-2048', 'RSA-3072', 'RSA-4096', 'EC-P256', 'EC-P384', 'EC-P521', 'Ed25519'],
    )
  })
})

describe('connection test', () => {
  test('gets a Key Vault token from Entra ID, through the outbound client', async () => {
    const seen: string[] = []
    const spy: OutboundClient = {
      ...outbound,
      request: (request) => {
        seen.push(`${request.method} ${request.url.pathname}`)
        return outbound.request(request)
      },
    }
    await azureProvider.testConnection(connection({ outbound: spy }))
    // MSAL's metadata and token requests both went through the guarded client.
    assert.deepEqual(seen, [
      `GET /${fake.tenantId}/v2.0/.well-known/openid-configuration`,
      `POST /${fake.tenantId}/oauth2/v2.0/token`,
    ])
  })

  test('a wrong secret is refused credentials, not retryable, and not quoted', async () => {
    const wrong = 'Wrong8Q~secret-value-123'
    const error = await assertRefused(
      azureProvider.testConnection(connection({ clientSecret: wrong })),
      'cloud_credentials_refused',
      false,
      [wrong],
    )
    assert.match(error.message, /invalid_client/)
  })

  test('an unknown application is refused credentials', async () => {
    await assertRefused(
      azureProvider.testConnection(connection({ clientId: '99999999-2222-4333-8444-555555555555' })),
      'cloud_credentials_refused',
      false,
    )
  })

  test('a destination the outbound policy refuses is not retried', async () => {
    const strict = createOutboundClient({ allow: createAllowList([]) }).withExtraCa(fake.caPem)
    await assertRefused(
      azureProvider.testConnection(connection({ outbound: strict })),
      'cloud_destination_refused',
      false,
    )
  })
})

describe('push', () => {
  test('an RSA-2048 signing key: imported, and signatures agree both ways', async () => {
    const pushed = material('RSA-2048', 'Signing')
    const result = await azureProvider.push(connection(), target('rsa-signing'), pushed, null)
    const [stored, ...more] = storedVersions('rsa-signing')
    assert.ok(stored)
    assert.equal(more.length, 0)
    assert.equal(result.providerKeyId, `${fake.url}/keys/rsa-signing/${stored.version}`)
    assert.deepEqual(result.state, { vaultUrl: fake.url, keyName: 'rsa-signing', version: stored.version })
    assertSameKey(stored, pushed)
    assert.deepEqual(stored.keyOps, ['sign', 'verify'])
    assert.equal(stored.hsm, false)
    assert.deepEqual(stored.tags, { kmsKeyId: pushed.keyId, kmsVersion: '1' })

    const message = Buffer.from('signed by the vault')
    const pss = { key: pushed.publicKey, padding: cryptoConstants.RSA_PKCS1_PSS_PADDING, saltLength: 32 }
    assert.ok(verify('sha256', message, pss, await vaultSignature(result.providerKeyId, 'PS256', message)))
    assert.ok(
      verify(
        'sha256',
        message,
        pushed.publicKey,
        await vaultSignature(result.providerKeyId, 'RS256', message),
      ),
    )

    const { publicKey } = await vaultPublicKey('rsa-signing', stored.version)
    const ours = sign('sha256', message, {
      key: pushed.privateKey,
      padding: cryptoConstants.RSA_PKCS1_PSS_PADDING,
      saltLength: 32,
    })
    assert.ok(verify('sha256', message, { ...pss, key: publicKey }, ours))
  })

  test('an EC-P256 key: imported, and ES256 signatures agree both ways', async () => {
    const pushed = material('EC-P256', 'Signing')
    const result = await azureProvider.push(connection(), target('ec-p256'), pushed, null)
    const [stored] = storedVersions('ec-p256')
    assert.ok(stored)
    assert.equal(result.providerKeyId, `${fake.url}/keys/ec-p256/${stored.version}`)
    assertSameKey(stored, pushed)

    const message = Buffer.from('signed by the vault, P-256')
    const p1363 = { key: pushed.publicKey, dsaEncoding: 'ieee-p1363' } as const
    assert.ok(verify('sha256', message, p1363, await vaultSignature(result.providerKeyId, 'ES256', message)))

    const { publicKey } = await vaultPublicKey('ec-p256', stored.version)
    const ours = sign('sha256', message, { key: pushed.privateKey, dsaEncoding: 'ieee-p1363' })
    assert.ok(verify('sha256', message, { key: publicKey, dsaEncoding: 'ieee-p1363' }, ours))
  })

  test('an RSA-3072 encryption key: imported for encrypt, decrypt, wrapKey and unwrapKey', async () => {
    const pushed = material('RSA-3072', 'Encryption')
    const result = await azureProvider.push(connection(), target('rsa-encryption'), pushed, null)
    const [stored] = storedVersions('rsa-encryption')
    assert.ok(stored)
    assert.equal(result.providerKeyId, `${fake.url}/keys/rsa-encryption/${stored.version}`)
    assertSameKey(stored, pushed)
    const { publicKey, keyOps } = await vaultPublicKey('rsa-encryption', stored.version)
    assert.deepEqual(keyOps, ['encrypt', 'decrypt', 'wrapKey', 'unwrapKey'])
    assert.deepEqual(publicKey.export({ format: 'jwk' }), pushed.publicKey.export({ format: 'jwk' }))
  })

  test('a rotation adds a version to the same key, and the result names it', async () => {
    const first = material('RSA-2048', 'Signing', 1, 'key-rotated')
    const second = material('RSA-2048', 'Signing', 2, 'key-rotated')
    const one = await azureProvider.push(connection(), target('rotated'), first, null)
    const two = await azureProvider.push(connection(), target('rotated'), second, one)
    const versions = storedVersions('rotated')
    assert.equal(versions.length, 2)
    assert.equal(one.providerKeyId, `${fake.url}/keys/rotated/${versions[0]!.version}`)
    assert.equal(two.providerKeyId, `${fake.url}/keys/rotated/${versions[1]!.version}`)
    assert.notEqual(one.providerKeyId, two.providerKeyId)
    assert.equal(two.state['version'], versions[1]!.version)
    assertSameKey(versions[1]!, second)
    assert.deepEqual(versions[1]!.tags, { kmsKeyId: 'key-rotated', kmsVersion: '2' })

    const message = Buffer.from('after the rotation')
    const signature = await vaultSignature(two.providerKeyId, 'RS256', message)
    assert.ok(verify('sha256', message, second.publicKey, signature))
    assert.ok(!verify('sha256', message, first.publicKey, signature))
  })

  test('a tenant named by its domain gets its token though the challenge names the tenant id', async () => {
    const pushed = material('EC-P384', 'Signing')
    const result = await azureProvider.push(
      connection({ tenantId: fake.tenantDomain }),
      target('by-domain'),
      pushed,
      null,
    )
    const [stored] = storedVersions('by-domain')
    assert.ok(stored)
    assert.equal(result.providerKeyId, `${fake.url}/keys/by-domain/${stored.version}`)
    assertSameKey(stored, pushed)
  })

  test('a challenge for an audience other than Key Vault gets no token', async () => {
    fake.setChallengeResource('https://management.azure.com')
    const tokenRequests = () => fake.requests.filter((r) => r.path.endsWith('/oauth2/v2.0/token')).length
    const before = tokenRequests()
    try {
      await assertRefused(
        azureProvider.push(connection(), target('other-audience'), material('EC-P256', 'Signing'), null),
        'cloud_unexpected_response',
        false,
      )
    } finally {
      fake.setChallengeResource('https://vault.azure.net')
    }
    assert.equal(tokenRequests(), before)
  })

  test('an Ed25519 key is refused by the vault, as a real one does: not retryable', async () => {
    const error = await assertRefused(
      azureProvider.push(connection(), target('ed25519'), material('Ed25519', 'Signing'), null),
      'cloud_import_refused',
      false,
    )
    assert.match(error.message, /HTTP 400, BadParameter/)
    assert.equal(storedVersions('ed25519').length, 0)
  })

  test('a wrong secret is refused credentials, not quoted', async () => {
    const wrong = 'Other8Q~wrong-secret-456'
    await assertRefused(
      azureProvider.push(
        connection({ clientSecret: wrong }),
        target('refused'),
        material('EC-P384', 'Signing'),
        null,
      ),
      'cloud_credentials_refused',
      false,
      [wrong],
    )
  })

  test('a vault that forbids the import is refused credentials (permissions)', async () => {
    fake.denyImports(true)
    try {
      const error = await assertRefused(
        azureProvider.push(connection(), target('forbidden'), material('EC-P521', 'Signing'), null),
        'cloud_credentials_refused',
        false,
      )
      assert.match(error.message, /HTTP 403, Forbidden, ForbiddenByPolicy/)
    } finally {
      fake.denyImports(false)
    }
  })

  test('an algorithm Azure does not take is refused before any request', async () => {
    const before = fake.requests.length
    const pushed = { ...material('RSA-2048', 'Signing'), algorithm: 'ML-DSA-65' as const }
    await assertRefused(
      azureProvider.push(connection(), target('pq'), pushed, null),
      'cloud_algorithm_unsupported',
      false,
    )
    assert.equal(fake.requests.length, before)
  })

  test('a vault that is down fails retryably, and the next push succeeds', async () => {
    const pushed = material('RSA-4096', 'Signing')
    fake.setDown(true)
    try {
      const unavailable = await assertRefused(
        azureProvider.push(connection(), target('outage'), pushed, null),
        'cloud_unavailable',
        true,
      )
      assert.match(unavailable.message, /HTTP 503/)
      fake.setDown(true, 'reset')
      await assertRefused(
        azureProvider.push(connection(), target('outage'), pushed, null),
        'cloud_unreachable',
        true,
      )
      await assertRefused(azureProvider.testConnection(connection()), 'cloud_unreachable', true)
    } finally {
      fake.setDown(false)
    }
    assert.equal(storedVersions('outage').length, 0)
    const result = await azureProvider.push(connection(), target('outage'), pushed, null)
    const [stored] = storedVersions('outage')
    assert.ok(stored)
    assert.equal(result.providerKeyId, `${fake.url}/keys/outage/${stored.version}`)
    assertSameKey(stored, pushed)
  })

  test('a stored connection: its caCertificate is let through, a field that no longer fits is not retried', async () => {
    const withCa = connection()
    withCa.settings = { ...withCa.settings, caCertificate: fake.caPem }
    await azureProvider.push(withCa, target('stored'), material('EC-P256', 'Signing'), null)
    assert.equal(storedVersions('stored').length, 1)

    const broken = connection()
    broken.settings = { ...broken.settings, tenantId: 'common' }
    const error = await assertRefused(
      azureProvider.push(broken, target('stored'), material('EC-P256', 'Signing'), null),
      'cloud_configuration_invalid',
      false,
    )
    assert.match(error.message, /settings\.tenantId/)
    await assertRefused(
      azureProvider.push(
        connection(),
        { vaultUrl: fake.url, keyName: 'no_underscores' },
        material('EC-P256', 'Signing'),
        null,
      ),
      'cloud_configuration_invalid',
      false,
    )
  })

  test('a vault the outbound policy refuses is not retried', async () => {
    const strict = createOutboundClient({ allow: createAllowList([]) }).withExtraCa(fake.caPem)
    const error = await assertRefused(
      azureProvider.push(
        connection({ outbound: strict }),
        target('refused'),
        material('EC-P256', 'Signing'),
        null,
      ),
      'cloud_destination_refused',
      false,
    )
    assert.match(error.message, /loopback/)
  })
})
