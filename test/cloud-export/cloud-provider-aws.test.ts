import assert from 'node:assert/strict'
import {
  constants,
  createPublicKey,
  generateKeyPairSync,
  type KeyObject,
  publicEncrypt,
  randomBytes,
  sign,
  verify,
} from 'node:crypto'
import { after, before, describe, test } from 'node:test'
import {
  DecryptCommand,
  GetPublicKeyCommand,
  type KMSClient,
  SignCommand,
  type SigningAlgorithmSpec,
} from '@aws-sdk/client-kms'
import {
  CloudFieldError,
  CloudProviderError,
  type ConnectionContext,
  type ExportMaterial,
  type PushResult,
} from '../../src/cloud-export/provider.ts'
import { awsProvider } from '../../src/cloud-export/providers/aws.ts'
import { createKmsClient } from '../../src/cloud-export/providers/aws-transport.ts'
import type { AlgorithmName, KeyType } from '../../src/keys/algorithms.ts'
import { createAllowList } from '../../src/outbound/allow-list.ts'
import { createOutboundClient, type OutboundClient } from '../../src/outbound/outbound-client.ts'
import { type FakeAwsCredentials, type FakeAwsKms, startFakeAwsKms } from '../helpers/fake-aws-kms.ts'

/**
 * The AWS KMS cloud-export provider (src/cloud-export/providers/aws.ts) against a local fake of
 * AWS KMS (test/helpers/fake-aws-kms.ts) that checks every request's SigV4 signature itself and
 * unwraps imported material the way AWS documents it. Pushed keys are cross-checked both ways:
 * the service's signatures verify under the public key the fake returns through the SDK, and
 * the fake's signatures (and decryptions) work with the service's keys.
 */

const REGION = 'eu-west-1'
const CREDENTIALS = {
  accessKeyId: 'AKIAIOSFODNN7EXAMPLE',
  secretAccessKey: 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY',
  sessionToken: 'IQoJb3JpZ2luX2VjEXAMPLESESSIONTOKENzQxNjE2MzIyNTk1MSJHMEUCIQDexampletokenvalue',
} satisfies FakeAwsCredentials
const SIGNING_ALGORITHM: Record<string, SigningAlgorithmSpec> = {
  'RSA-2048': 'RSASSA_PSS_SHA_256',
  'EC-P256': 'ECDSA_SHA_256',
  Ed25519: 'ED25519_SHA_512',
}

const loopbackOutbound = () => createOutboundClient({ allow: createAllowList(['127.0.0.1']) })

function connectionTo(
  fake: FakeAwsKms,
  overrides: { credentials?: Record<string, unknown>; outbound?: OutboundClient; timeoutMs?: number } = {},
): ConnectionContext {
  return {
    settings: awsProvider.parseSettings({ region: REGION, endpoint: fake.url }),
    credentials: awsProvider.parseCredentials(overrides.credentials ?? CREDENTIALS),
    outbound: overrides.outbound ?? loopbackOutbound(),
    timeoutMs: overrides.timeoutMs ?? 30_000,
  }
}

/** A key version as the service would hand it over, made with node:crypto. */
function materialOf(algorithm: AlgorithmName, keyType: KeyType = 'Signing', version = 1): ExportMaterial {
  const pair = (() => {
    switch (algorithm) {
      case 'RSA-2048':
        return generateKeyPairSync('rsa', { modulusLength: 2048 })
      case 'RSA-3072':
        return generateKeyPairSync('rsa', { modulusLength: 3072 })
      case 'EC-P256':
        return generateKeyPairSync('ec', { namedCurve: 'P-256' })
      case 'Ed25519':
        return generateKeyPairSync('ed25519')
      case 'ML-DSA-65':
        return generateKeyPairSync('ml-dsa-65')
      default:
        throw new Error(`no generator for ${algorithm} in this test`)
    }
  })()
  return {
    algorithm,
    keyType,
    keyId: '0b7e8a8e-6f4e-4c1e-9a57-3f1d2c9b8a10',
    version,
    privateKey: pair.privateKey,
    publicKey: pair.publicKey,
  }
}

const spki = (key: KeyObject) => key.export({ format: 'der', type: 'spki' })

/** A signature verified as KMS's algorithm defines it: PSS salt as long as the digest, ECDSA in DER, pure Ed25519. */
function verifyAs(
  algorithm: SigningAlgorithmSpec,
  publicKey: KeyObject,
  message: Buffer,
  signature: Uint8Array,
) {
  if (algorithm === 'ED25519_SHA_512') return verify(null, message, publicKey, signature)
  if (algorithm === 'RSASSA_PSS_SHA_256')
    return verify(
      'sha256',
      message,
      { key: publicKey, padding: constants.RSA_PKCS1_PSS_PADDING, saltLength: 32 },
      signature,
    )
  return verify('sha256', message, { key: publicKey, dsaEncoding: 'der' }, signature)
}

function signAs(algorithm: SigningAlgorithmSpec, privateKey: KeyObject, message: Buffer): Buffer {
  if (algorithm === 'ED25519_SHA_512') return sign(null, message, privateKey)
  if (algorithm === 'RSASSA_PSS_SHA_256')
    return sign('sha256', message, {
      key: privateKey,
      padding: constants.RSA_PKCS1_PSS_PADDING,
      saltLength: 32,
    })
  return sign('sha256', message, { key: privateKey, dsaEncoding: 'der' })
}

/** Runs `call` and returns the CloudProviderError it must fail with. */
async function providerError(call: () => Promise<unknown>): Promise<CloudProviderError> {
  try {
    await call()
  } catch (error) {
    assert.ok(error instanceof CloudProviderError, `expected a CloudProviderError, got ${String(error)}`)
    return error
  }
  assert.fail('expected the call to fail')
}

function fieldError(call: () => unknown): CloudFieldError {
  try {
    call()
  } catch (error) {
    assert.ok(error instanceof CloudFieldError, `expected a CloudFieldError, got ${String(error)}`)
    return error
  }
  assert.fail('expected the call to fail')
}

function assertNoSecret(message: string) {
  for (const secret of Object.values(CREDENTIALS))
    assert.ok(!message.includes(secret), `message leaks a credential: ${message}`)
}

describe('AWS KMS provider: fields', () => {
  test('supports RSA-2048 and larger, ECDSA and Ed25519, and nothing else', () => {
    assert.deepEqual(
      [...awsProvider.supportedAlgorithms].sort(),
      ['EC-P256', 'EC-P384', 'EC-P521', 'Ed25519', 'RSA-2048', 'RSA-3072', 'RSA-4096'].sort(),
    )
    assert.equal(awsProvider.provider, 'aws')
  })

  test('settings: a region is required and checked, an endpoint must be https (http on loopback only)', () => {
    assert.deepEqual(awsProvider.parseSettings({ region: 'eu-west-1' }), { region: 'eu-west-1' })
    assert.deepEqual(
      awsProvider.parseSettings({ region: 'us-gov-west-1', endpoint: 'https://kms.example.com' }),
      {
        region: 'us-gov-west-1',
        endpoint: 'https://kms.example.com/',
      },
    )
    for (const region of [undefined, '', 'EU-WEST-1', 'eu_west_1', 'eu-west', 'eu-west-1.evil.com', 42])
      assert.equal(fieldError(() => awsProvider.parseSettings({ region })).field, 'settings.region')
    assert.equal(
      awsProvider.parseSettings({ region: REGION, endpoint: 'http://127.0.0.1:4566' }).endpoint,
      'http://127.0.0.1:4566/',
    )
    for (const endpoint of [
      'kms.example.com',
      // In clear on a network, whoever answers would pick the key the private key is wrapped to.
      'http://kms.example.com',
      'http://10.0.0.5:4566',
      'ftp://kms.example.com',
      'https://user:pass@kms.example.com',
      'https://kms.example.com/?a=b',
      'https://kms.example.com/#x',
      `https://kms.example.com/${'a'.repeat(3000)}`,
      7,
    ])
      assert.equal(
        fieldError(() => awsProvider.parseSettings({ region: REGION, endpoint })).field,
        'settings.endpoint',
      )
  })

  test('settings: a field AWS connections do not have is refused without repeating its value', () => {
    const error = fieldError(() =>
      awsProvider.parseSettings({ region: REGION, secretAccessKey: CREDENTIALS.secretAccessKey }),
    )
    assert.equal(error.field, 'settings.secretAccessKey')
    assertNoSecret(error.message)
  })

  test('credentials: each field is checked and named, and no secret value is repeated', () => {
    assert.deepEqual(awsProvider.parseCredentials(CREDENTIALS), CREDENTIALS)
    const { sessionToken: _, ...longTerm } = CREDENTIALS
    assert.deepEqual(awsProvider.parseCredentials(longTerm), longTerm)
    const cases: [Record<string, unknown>, string][] = [
      [{ ...CREDENTIALS, accessKeyId: undefined }, 'credentials.accessKeyId'],
      [{ ...CREDENTIALS, accessKeyId: 'AKIA-not valid!' }, 'credentials.accessKeyId'],
      [{ ...CREDENTIALS, secretAccessKey: undefined }, 'credentials.secretAccessKey'],
      [
        { ...CREDENTIALS, secretAccessKey: `${CREDENTIALS.secretAccessKey} with spaces` },
        'credentials.secretAccessKey',
      ],
      [
        { ...CREDENTIALS, secretAccessKey: CREDENTIALS.secretAccessKey.repeat(10) },
        'credentials.secretAccessKey',
      ],
      [{ ...CREDENTIALS, sessionToken: `${CREDENTIALS.sessionToken}\n` }, 'credentials.sessionToken'],
      [{ ...CREDENTIALS, sessionToken: 12 }, 'credentials.sessionToken'],
      [{ ...CREDENTIALS, region: REGION }, 'credentials.region'],
    ]
    for (const [input, field] of cases) {
      const error = fieldError(() => awsProvider.parseCredentials(input))
      assert.equal(error.field, field)
      assertNoSecret(error.message)
    }
  })

  test('target: an alias by AWS rules, not alias/aws/, and an optional bounded description', () => {
    assert.deepEqual(awsProvider.parseTarget({ alias: 'alias/payments/signing_key-1' }), {
      alias: 'alias/payments/signing_key-1',
    })
    assert.deepEqual(awsProvider.parseTarget({ alias: 'alias/x', description: 'Payments' }), {
      alias: 'alias/x',
      description: 'Payments',
    })
    for (const alias of [
      undefined,
      'payments',
      'alias/',
      'alias/has space',
      'alias/é',
      `alias/${'a'.repeat(251)}`,
    ])
      assert.equal(fieldError(() => awsProvider.parseTarget({ alias })).field, 'target.alias')
    for (const alias of ['alias/aws/kms', 'alias/AWS/kms'])
      assert.match(fieldError(() => awsProvider.parseTarget({ alias })).message, /reserves/)
    assert.equal(
      fieldError(() => awsProvider.parseTarget({ alias: 'alias/x', description: 'd'.repeat(1025) })).field,
      'target.description',
    )
    assert.equal(
      fieldError(() => awsProvider.parseTarget({ alias: 'alias/x', keyId: 'k' })).field,
      'target.keyId',
    )
  })
})

describe('AWS KMS provider against a fake AWS KMS', () => {
  let fake: FakeAwsKms
  /** The SDK client a test uses to look at what was pushed, as any AWS user would. */
  let inspector: KMSClient

  before(async () => {
    fake = await startFakeAwsKms({ region: REGION, credentials: CREDENTIALS })
    inspector = createKmsClient(
      { region: REGION, endpoint: fake.url, ...CREDENTIALS },
      loopbackOutbound(),
      30_000,
    )
  })
  after(async () => {
    inspector.destroy()
    await fake.stop()
  })

  test('testConnection succeeds with the right credentials, through one signed ListAliases', async () => {
    const before = fake.operations.length
    await awsProvider.testConnection(connectionTo(fake))
    assert.deepEqual(fake.operations.slice(before), ['ListAliases'])
  })

  test('a wrong secret is cloud_credentials_refused, not retryable, and its message holds no secret', async () => {
    const credentials = { ...CREDENTIALS, secretAccessKey: 'wrongSecretKeyEXAMPLEwrongSecretKeyEXAMPL' }
    const error = await providerError(() => awsProvider.testConnection(connectionTo(fake, { credentials })))
    assert.equal(error.code, 'cloud_credentials_refused')
    assert.equal(error.retryable, false)
    assert.match(error.message, /InvalidSignatureException/)
    // The fake's message quotes the canonical request, session token included, as AWS may.
    assert.ok(!error.message.includes('Canonical'), error.message)
    assertNoSecret(error.message)
    assert.ok(!error.message.includes(credentials.secretAccessKey))
  })

  test('an unknown access key is cloud_credentials_refused, not retryable', async () => {
    const credentials = { ...CREDENTIALS, accessKeyId: 'AKIAUNKNOWNEXAMPLE00' }
    const error = await providerError(() => awsProvider.testConnection(connectionTo(fake, { credentials })))
    assert.equal(error.code, 'cloud_credentials_refused')
    assert.equal(error.retryable, false)
    assert.match(error.message, /UnrecognizedClientException/)
    assertNoSecret(error.message)
  })

  for (const algorithm of ['RSA-2048', 'EC-P256', 'Ed25519'] as const) {
    test(`push ${algorithm} Signing: an imported key under the alias, whose signatures check out both ways`, async () => {
      const material = materialOf(algorithm)
      const alias = `alias/sign-${algorithm.toLowerCase()}`
      const before = fake.operations.length
      const result = await awsProvider.push(connectionTo(fake), { alias }, material, null)

      assert.deepEqual(fake.operations.slice(before), [
        'CreateKey',
        'GetParametersForImport',
        'ImportKeyMaterial',
        'CreateAlias',
      ])
      const held = [...fake.keys().values()].find((key) => key.arn === result.providerKeyId)
      assert.ok(held, 'the fake holds a key with the returned ARN')
      assert.deepEqual(result.state, { keyId: held.keyId, alias, version: 1 })
      assert.equal(held.keyUsage, 'SIGN_VERIFY')
      assert.equal(held.keyState, 'Enabled')
      assert.match(held.description, new RegExp(`${material.keyId} version 1`))
      assert.equal(fake.aliasTarget(alias), held.keyId)

      // The service's signature verifies under the public key AWS gives out for the alias.
      const signingAlgorithm = SIGNING_ALGORITHM[algorithm]!
      const published = await inspector.send(new GetPublicKeyCommand({ KeyId: alias }))
      assert.ok(published.PublicKey)
      const awsPublicKey = createPublicKey({
        key: Buffer.from(published.PublicKey),
        format: 'der',
        type: 'spki',
      })
      assert.deepEqual(spki(awsPublicKey), spki(material.publicKey))
      const message = randomBytes(64)
      assert.ok(
        verifyAs(
          signingAlgorithm,
          awsPublicKey,
          message,
          signAs(signingAlgorithm, material.privateKey, message),
        ),
      )

      // AWS's signature verifies under the service's public key.
      const signed = await inspector.send(
        new SignCommand({
          KeyId: alias,
          Message: message,
          MessageType: 'RAW',
          SigningAlgorithm: signingAlgorithm,
        }),
      )
      assert.ok(signed.Signature)
      assert.ok(verifyAs(signingAlgorithm, material.publicKey, message, signed.Signature))
    })
  }

  test('push RSA-3072 Encryption: an ENCRYPT_DECRYPT key that decrypts what the service public key encrypted', async () => {
    const material = materialOf('RSA-3072', 'Encryption')
    const alias = 'alias/encrypt-rsa-3072'
    const result = await awsProvider.push(
      connectionTo(fake),
      { alias, description: 'Invoices' },
      material,
      null,
    )
    const held = fake.keys().get(String(result.state['keyId']))
    assert.ok(held)
    assert.equal(held.keySpec, 'RSA_3072')
    assert.equal(held.keyUsage, 'ENCRYPT_DECRYPT')
    assert.match(held.description, /^Invoices \(/)

    const plaintext = randomBytes(48)
    const ciphertext = publicEncrypt(
      { key: material.publicKey, padding: constants.RSA_PKCS1_OAEP_PADDING, oaepHash: 'sha256' },
      plaintext,
    )
    const decrypted = await inspector.send(
      new DecryptCommand({
        KeyId: alias,
        CiphertextBlob: ciphertext,
        EncryptionAlgorithm: 'RSAES_OAEP_SHA_256',
      }),
    )
    assert.ok(decrypted.Plaintext)
    assert.deepEqual(Buffer.from(decrypted.Plaintext), plaintext)
  })

  test('rotation: the next version is a new key, the alias moves to it, the old key stays', async () => {
    const alias = 'alias/rotating'
    const first = await awsProvider.push(
      connectionTo(fake),
      { alias },
      materialOf('EC-P256', 'Signing', 1),
      null,
    )
    const before = fake.operations.length
    const second = await awsProvider.push(
      connectionTo(fake),
      { alias },
      materialOf('EC-P256', 'Signing', 2),
      first,
    )

    assert.notEqual(second.providerKeyId, first.providerKeyId)
    assert.equal(second.state['version'], 2)
    assert.equal(fake.operations.slice(before).at(-1), 'UpdateAlias')
    assert.equal(fake.aliasTarget(alias), second.state['keyId'])
    const old = fake.keys().get(String(first.state['keyId']))
    assert.ok(old, 'the first version key still exists')
    assert.equal(old.keyState, 'Enabled')
  })

  test('a first push onto an alias that exists already moves it (UpdateAlias)', async () => {
    const alias = 'alias/taken-before'
    const earlier = await awsProvider.push(connectionTo(fake), { alias }, materialOf('Ed25519'), null)
    const before = fake.operations.length
    const result = await awsProvider.push(connectionTo(fake), { alias }, materialOf('Ed25519'), null)
    assert.deepEqual(fake.operations.slice(before).slice(-2), ['CreateAlias', 'UpdateAlias'])
    assert.equal(fake.aliasTarget(alias), result.state['keyId'])
    assert.notEqual(result.state['keyId'], earlier.state['keyId'])
  })

  test('a rotation whose alias was removed at AWS creates it again (CreateAlias)', async () => {
    const previous: PushResult = {
      providerKeyId: 'arn:aws:kms:eu-west-1:111122223333:key/gone',
      state: { keyId: 'gone', alias: 'alias/deleted-meanwhile', version: 1 },
    }
    const before = fake.operations.length
    const result = await awsProvider.push(
      connectionTo(fake),
      { alias: 'alias/deleted-meanwhile' },
      materialOf('Ed25519', 'Signing', 2),
      previous,
    )
    assert.deepEqual(fake.operations.slice(before).slice(-2), ['UpdateAlias', 'CreateAlias'])
    assert.equal(fake.aliasTarget('alias/deleted-meanwhile'), result.state['keyId'])
  })

  test('AWS down: the push fails retryable, and the same push succeeds once AWS is back', async () => {
    const alias = 'alias/outage'
    const material = materialOf('EC-P256')
    const keysBefore = fake.keys().size
    fake.setDown(true)
    try {
      const error = await providerError(() => awsProvider.push(connectionTo(fake), { alias }, material, null))
      assert.equal(error.retryable, true)
      assert.equal(error.code, 'cloud_unavailable')
      assert.equal(fake.keys().size, keysBefore)
    } finally {
      fake.setDown(false)
    }
    const result = await awsProvider.push(connectionTo(fake), { alias }, material, null)
    assert.equal(fake.aliasTarget(alias), result.state['keyId'])
  })

  test('a connection lost mid-import: retryable, the half-made key is scheduled for deletion, a rerun succeeds', async () => {
    const alias = 'alias/interrupted'
    const material = materialOf('EC-P256')
    const keysBefore = new Set(fake.keys().keys())
    fake.failNext('ImportKeyMaterial', 'reset')
    const error = await providerError(() => awsProvider.push(connectionTo(fake), { alias }, material, null))
    assert.equal(error.code, 'cloud_unreachable')
    assert.equal(error.retryable, true)
    const halfMade = [...fake.keys().values()].filter((key) => !keysBefore.has(key.keyId))
    assert.deepEqual(
      halfMade.map((key) => key.keyState),
      ['PendingDeletion'],
    )
    assert.equal(fake.aliasTarget(alias), undefined)

    const result = await awsProvider.push(connectionTo(fake), { alias }, material, null)
    assert.equal(fake.aliasTarget(alias), result.state['keyId'])
    assert.equal(fake.keys().get(String(result.state['keyId']))?.keyState, 'Enabled')
  })

  test('no answer in time is cloud_unreachable, retryable', async () => {
    fake.failNext('ListAliases', 'hang')
    const error = await providerError(() =>
      awsProvider.testConnection(connectionTo(fake, { timeoutMs: 500 })),
    )
    assert.equal(error.code, 'cloud_unreachable')
    assert.equal(error.retryable, true)
  })

  test('an AWS 500 is cloud_unavailable, retryable', async () => {
    fake.failNext('ListAliases', 500)
    const error = await providerError(() => awsProvider.testConnection(connectionTo(fake)))
    assert.equal(error.code, 'cloud_unavailable')
    assert.equal(error.retryable, true)
  })

  test('an endpoint the outbound policy refuses is cloud_destination_refused, not retryable, and never called', async () => {
    const requests = fake.requests
    const outbound = createOutboundClient({ allow: createAllowList([]) })
    const error = await providerError(() => awsProvider.testConnection(connectionTo(fake, { outbound })))
    assert.equal(error.code, 'cloud_destination_refused')
    assert.equal(error.retryable, false)
    assert.equal(fake.requests, requests)
  })

  test('an algorithm AWS cannot import, or material that is not its algorithm, is refused before any request', async () => {
    const requests = fake.requests
    const pq = await providerError(() =>
      awsProvider.push(connectionTo(fake), { alias: 'alias/pq' }, materialOf('ML-DSA-65'), null),
    )
    assert.equal(pq.code, 'cloud_algorithm_unsupported')
    assert.equal(pq.retryable, false)
    const mismatched = { ...materialOf('RSA-3072'), algorithm: 'RSA-2048' as const }
    const wrong = await providerError(() =>
      awsProvider.push(connectionTo(fake), { alias: 'alias/x' }, mismatched, null),
    )
    assert.equal(wrong.code, 'cloud_import_refused')
    assert.equal(fake.requests, requests)
  })

  test('a stored connection or target that no longer passes validation is refused, not retried', async () => {
    const requests = fake.requests
    const badRegion = { ...connectionTo(fake), settings: { region: 'nowhere', endpoint: fake.url } }
    const settings = await providerError(() => awsProvider.testConnection(badRegion))
    assert.equal(settings.code, 'cloud_configuration_invalid')
    assert.equal(settings.retryable, false)
    assert.match(settings.message, /^settings\.region /)
    const target = await providerError(() =>
      awsProvider.push(connectionTo(fake), { alias: 'not-an-alias' }, materialOf('Ed25519'), null),
    )
    assert.equal(target.code, 'cloud_configuration_invalid')
    assert.match(target.message, /^target\.alias /)
    assert.equal(fake.requests, requests)
  })

  test('a permission the IAM policy lacks is cloud_credentials_refused, naming the action', async () => {
    const denying = await startFakeAwsKms({ region: REGION, credentials: CREDENTIALS })
    try {
      denying.deny('CreateKey')
      const error = await providerError(() =>
        awsProvider.push(connectionTo(denying), { alias: 'alias/denied' }, materialOf('Ed25519'), null),
      )
      assert.equal(error.code, 'cloud_credentials_refused')
      assert.equal(error.retryable, false)
      assert.match(error.message, /kms:CreateKey/)
      assertNoSecret(error.message)
    } finally {
      await denying.stop()
    }
  })
})
