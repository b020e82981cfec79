import {
  constants,
  createDecipheriv,
  createHash,
  createHmac,
  createPrivateKey,
  createPublicKey,
  generateKeyPair,
  type KeyObject,
  privateDecrypt,
  randomBytes,
  randomUUID,
  sign,
  timingSafeEqual,
} from 'node:crypto'
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { promisify } from 'node:util'

/**
 * A local stand-in for AWS KMS that speaks its JSON 1.1 protocol as the AWS SDK sends it
 * (POST /, `X-Amz-Target: TrentService.<Operation>`, `application/x-amz-json-1.1`), checks
 * every request's SigV4 signature with its own implementation of the algorithm, and implements
 * what the cloud export uses of KMS's import protocol the way AWS documents it: the wrapped
 * material is unwrapped exactly as AWS does (RSA-OAEP-SHA256 of the AES key, then AES key wrap
 * with padding), parsed as PKCS#8 and checked against the key's KeySpec. GetPublicKey, Sign and
 * Decrypt let a test check that the key it holds is the one pushed.
 *
 * Only RSA_AES_KEY_WRAP_SHA_256 with an RSA_4096 wrapping key is implemented (what the adapter
 * uses); Sign takes RAW messages only; ED25519_PH_SHA_512 is not implemented.
 */

export interface FakeAwsCredentials {
  accessKeyId: string
  secretAccessKey: string
  sessionToken?: string
}

export interface FakeAwsKmsOptions {
  region: string
  credentials: FakeAwsCredentials
}

export interface FakeKeyView {
  keyId: string
  arn: string
  keySpec: string
  keyUsage: string
  keyState: string
  description: string
  /** Undefined until material was imported. */
  privateKey: KeyObject | undefined
  aliases: string[]
}

/** How the next request for an operation fails: an HTTP status, a reset connection, no answer at all. */
export type FakeFailure = number | 'reset' | 'hang'

export interface FakeAwsKms {
  /** The endpoint to give the SDK (http://127.0.0.1:<port>). */
  readonly url: string
  readonly region: string
  /** Every request received, authenticated or not. */
  readonly requests: number
  /** The operation of each request received, in order. */
  readonly operations: readonly string[]
  keys(): Map<string, FakeKeyView>
  /** The key id an alias names, undefined when it does not exist. */
  aliasTarget(alias: string): string | undefined
  /** While down, every request gets a 503. */
  setDown(down: boolean): void
  /** The next request for `operation` fails this way (once). */
  failNext(operation: string, failure: FakeFailure): void
  /** Requests for `operation` are answered AccessDeniedException, as an IAM policy without it would. */
  deny(operation: string): void
  stop(): Promise<void>
}

const ACCOUNT = '111122223333'
const JSON_CONTENT_TYPE = 'application/x-amz-json-1.1'
const MAX_BODY = 1024 * 1024
/** AWS refuses a request signed more than 15 minutes away from its clock. */
const MAX_SKEW_MS = 15 * 60_000
const RSA_OAEP_BYTES = 512
const MAX_RAW_MESSAGE = 4096

const generateKeyPairAsync = promisify(generateKeyPair)

/** An AWS error answer: `__type` and `message`, HTTP 400 unless said otherwise. */
class KmsFault extends Error {
  readonly type: string
  readonly status: number
  constructor(type: string, message: string, status = 400) {
    super(message)
    this.type = type
    this.status = status
  }
}

interface StoredKey {
  keyId: string
  arn: string
  keySpec: string
  keyUsage: string
  keyState: 'PendingImport' | 'Enabled' | 'PendingDeletion'
  description: string
  creationDate: number
  privateKey: KeyObject | undefined
}

interface StoredAlias {
  targetKeyId: string
  creationDate: number
  lastUpdatedDate: number
}

interface ImportParameters {
  keyId: string
  wrappingPrivateKey: KeyObject
}

type Json = Record<string, unknown>

export async function startFakeAwsKms(options: FakeAwsKmsOptions): Promise<FakeAwsKms> {
  const { region, credentials } = options
  const keys = new Map<string, StoredKey>()
  const aliases = new Map<string, StoredAlias>()
  const importTokens = new Map<string, ImportParameters>()
  const failures = new Map<string, FakeFailure>()
  const denied = new Set<string>()
  const operations: string[] = []
  let requests = 0
  let down = false

  const arnOfKey = (keyId: string) => `arn:aws:kms:${region}:${ACCOUNT}:key/${keyId}`
  const arnOfAlias = (alias: string) => `arn:aws:kms:${region}:${ACCOUNT}:${alias}`
  const now = () => Date.now() / 1000

  /** KeyId as KMS takes it: a key id, a key ARN, an alias name or an alias ARN. */
  function resolveKey(reference: unknown): StoredKey {
    if (typeof reference !== 'string' || reference === '')
      throw new KmsFault('ValidationException', '1 validation error detected: keyId must not be empty')
    let id = reference
    const aliasName = reference.startsWith('arn:') ? reference.split(':').slice(5).join(':') : reference
    if (aliasName.startsWith('alias/')) {
      const target = aliases.get(aliasName)
      if (!target) throw new KmsFault('NotFoundException', `Alias ${arnOfAlias(aliasName)} is not found.`)
      id = target.targetKeyId
    } else if (reference.startsWith('arn:')) id = reference.slice(reference.lastIndexOf('/') + 1)
    const key = keys.get(id)
    if (!key) throw new KmsFault('NotFoundException', `Key '${arnOfKey(id)}' does not exist`)
    return key
  }

  function requireState(key: StoredKey, state: StoredKey['keyState']) {
    if (key.keyState !== state)
      throw new KmsFault('KMSInvalidStateException', `${key.arn} is ${key.keyState}`)
  }

  const handlers: Record<string, (input: Json) => Json | Promise<Json>> = {
    CreateKey(input) {
      if (input['Origin'] !== 'EXTERNAL')
        throw new KmsFault(
          'UnsupportedOperationException',
          'This fake only creates keys with Origin EXTERNAL',
        )
      const keySpec = String(input['KeySpec'] ?? 'SYMMETRIC_DEFAULT')
      const keyUsage = String(input['KeyUsage'] ?? 'ENCRYPT_DECRYPT')
      const allowed = USAGES_BY_SPEC[keySpec]
      if (!allowed?.includes(keyUsage))
        throw new KmsFault(
          'ValidationException',
          `KeyUsage ${keyUsage} is not compatible with KeySpec ${keySpec}`,
        )
      const keyId = randomUUID()
      const key: StoredKey = {
        keyId,
        arn: arnOfKey(keyId),
        keySpec,
        keyUsage,
        keyState: 'PendingImport',
        description: typeof input['Description'] === 'string' ? input['Description'] : '',
        creationDate: now(),
        privateKey: undefined,
      }
      keys.set(keyId, key)
      return { KeyMetadata: metadataOf(key) }
    },

    async GetParametersForImport(input) {
      const key = resolveKey(input['KeyId'])
      if (
        input['WrappingAlgorithm'] !== 'RSA_AES_KEY_WRAP_SHA_256' ||
        input['WrappingKeySpec'] !== 'RSA_4096'
      )
        throw new KmsFault(
          'ValidationException',
          'This fake implements RSA_AES_KEY_WRAP_SHA_256 with RSA_4096 only',
        )
      requireState(key, 'PendingImport')
      const pair = await generateKeyPairAsync('rsa', { modulusLength: 4096 })
      const token = randomBytes(48).toString('base64')
      importTokens.set(token, { keyId: key.keyId, wrappingPrivateKey: pair.privateKey })
      return {
        KeyId: key.arn,
        ImportToken: token,
        PublicKey: pair.publicKey.export({ format: 'der', type: 'spki' }).toString('base64'),
        ParametersValidTo: now() + 24 * 3600,
      }
    },

    ImportKeyMaterial(input) {
      const key = resolveKey(input['KeyId'])
      const token = typeof input['ImportToken'] === 'string' ? input['ImportToken'] : ''
      const parameters = importTokens.get(token)
      if (!parameters || parameters.keyId !== key.keyId)
        throw new KmsFault('InvalidImportTokenException', 'The import token is not valid for this key')
      if (input['ExpirationModel'] !== 'KEY_MATERIAL_DOES_NOT_EXPIRE')
        throw new KmsFault(
          'ValidationException',
          'This fake takes ExpirationModel KEY_MATERIAL_DOES_NOT_EXPIRE only',
        )
      requireState(key, 'PendingImport')
      const encrypted = Buffer.from(String(input['EncryptedKeyMaterial'] ?? ''), 'base64')
      const privateKey = unwrapKeyMaterial(encrypted, parameters.wrappingPrivateKey)
      if (!matchesKeySpec(privateKey, key.keySpec))
        throw new KmsFault(
          'IncorrectKeyMaterialException',
          `The key material does not match KeySpec ${key.keySpec}`,
        )
      importTokens.delete(token)
      key.privateKey = privateKey
      key.keyState = 'Enabled'
      return { KeyId: key.arn }
    },

    CreateAlias(input) {
      const name = aliasNameOf(input['AliasName'])
      const key = resolveKey(input['TargetKeyId'])
      if (aliases.has(name))
        throw new KmsFault(
          'AlreadyExistsException',
          `An alias with the name ${arnOfAlias(name)} already exists`,
        )
      aliases.set(name, { targetKeyId: key.keyId, creationDate: now(), lastUpdatedDate: now() })
      return {}
    },

    UpdateAlias(input) {
      const name = aliasNameOf(input['AliasName'])
      const current = aliases.get(name)
      if (!current) throw new KmsFault('NotFoundException', `Alias ${arnOfAlias(name)} is not found.`)
      const key = resolveKey(input['TargetKeyId'])
      const old = keys.get(current.targetKeyId)
      // AWS moves an alias only between keys of the same type and usage.
      if (old && (old.keyUsage !== key.keyUsage || isSymmetric(old.keySpec) !== isSymmetric(key.keySpec)))
        throw new KmsFault('ValidationException', 'The new target key must have the same type and key usage')
      current.targetKeyId = key.keyId
      current.lastUpdatedDate = now()
      return {}
    },

    ListAliases(input) {
      const limit = typeof input['Limit'] === 'number' ? input['Limit'] : 50
      const start = typeof input['Marker'] === 'string' ? Number(input['Marker']) : 0
      const all = [...aliases.entries()]
      const page = all.slice(start, start + limit)
      const truncated = start + limit < all.length
      return {
        Aliases: page.map(([name, alias]) => ({
          AliasName: name,
          AliasArn: arnOfAlias(name),
          TargetKeyId: alias.targetKeyId,
          CreationDate: alias.creationDate,
          LastUpdatedDate: alias.lastUpdatedDate,
        })),
        Truncated: truncated,
        ...(truncated ? { NextMarker: String(start + limit) } : {}),
      }
    },

    DescribeKey(input) {
      return { KeyMetadata: metadataOf(resolveKey(input['KeyId'])) }
    },

    GetPublicKey(input) {
      const key = resolveKey(input['KeyId'])
      requireState(key, 'Enabled')
      return {
        KeyId: key.arn,
        KeySpec: key.keySpec,
        CustomerMasterKeySpec: key.keySpec,
        KeyUsage: key.keyUsage,
        PublicKey: createPublicKey(key.privateKey!)
          .export({ format: 'der', type: 'spki' })
          .toString('base64'),
        ...algorithmsOf(key),
      }
    },

    Sign(input) {
      const key = resolveKey(input['KeyId'])
      requireState(key, 'Enabled')
      if (key.keyUsage !== 'SIGN_VERIFY')
        throw new KmsFault('InvalidKeyUsageException', `${key.arn} key usage is ${key.keyUsage}`)
      if ((input['MessageType'] ?? 'RAW') !== 'RAW')
        throw new KmsFault('ValidationException', 'This fake signs RAW messages only')
      const message = Buffer.from(String(input['Message'] ?? ''), 'base64')
      if (message.length === 0 || message.length > MAX_RAW_MESSAGE)
        throw new KmsFault('ValidationException', 'Message must be 1 to 4096 bytes')
      const algorithm = String(input['SigningAlgorithm'])
      if (!SIGNING_ALGORITHMS[key.keySpec]?.includes(algorithm))
        throw new KmsFault('InvalidKeyUsageException', `${algorithm} is not valid for ${key.keySpec}`)
      return {
        KeyId: key.arn,
        SigningAlgorithm: algorithm,
        Signature: signWith(algorithm, key.privateKey!, message).toString('base64'),
      }
    },

    Decrypt(input) {
      const key = resolveKey(input['KeyId'])
      requireState(key, 'Enabled')
      if (key.keyUsage !== 'ENCRYPT_DECRYPT')
        throw new KmsFault('InvalidKeyUsageException', `${key.arn} key usage is ${key.keyUsage}`)
      const algorithm = input['EncryptionAlgorithm']
      const oaepHash =
        algorithm === 'RSAES_OAEP_SHA_256' ? 'sha256' : algorithm === 'RSAES_OAEP_SHA_1' ? 'sha1' : ''
      if (oaepHash === '')
        throw new KmsFault('InvalidKeyUsageException', `${String(algorithm)} is not valid here`)
      let plaintext: Buffer
      try {
        plaintext = privateDecrypt(
          { key: key.privateKey!, padding: constants.RSA_PKCS1_OAEP_PADDING, oaepHash },
          Buffer.from(String(input['CiphertextBlob'] ?? ''), 'base64'),
        )
      } catch {
        throw new KmsFault('InvalidCiphertextException', 'The ciphertext is not valid')
      }
      return { KeyId: key.arn, EncryptionAlgorithm: algorithm, Plaintext: plaintext.toString('base64') }
    },

    ScheduleKeyDeletion(input) {
      const key = resolveKey(input['KeyId'])
      const days = typeof input['PendingWindowInDays'] === 'number' ? input['PendingWindowInDays'] : 30
      if (days < 7 || days > 30)
        throw new KmsFault('ValidationException', 'PendingWindowInDays must be 7 to 30')
      key.keyState = 'PendingDeletion'
      return {
        KeyId: key.arn,
        KeyState: key.keyState,
        DeletionDate: now() + days * 86400,
        PendingWindowInDays: days,
      }
    },
  }

  function metadataOf(key: StoredKey): Json {
    return {
      AWSAccountId: ACCOUNT,
      KeyId: key.keyId,
      Arn: key.arn,
      CreationDate: key.creationDate,
      Enabled: key.keyState === 'Enabled',
      Description: key.description,
      KeyUsage: key.keyUsage,
      KeyState: key.keyState,
      Origin: 'EXTERNAL',
      KeyManager: 'CUSTOMER',
      KeySpec: key.keySpec,
      CustomerMasterKeySpec: key.keySpec,
      ...(key.keyState === 'Enabled' ? { ExpirationModel: 'KEY_MATERIAL_DOES_NOT_EXPIRE' } : {}),
      MultiRegion: false,
      ...algorithmsOf(key),
    }
  }

  async function answer(req: IncomingMessage, res: ServerResponse) {
    requests++
    const body = await readBody(req)
    const target = req.headers['x-amz-target']
    const operation = typeof target === 'string' && target.startsWith('TrentService.') ? target.slice(13) : ''
    operations.push(operation)
    if (down)
      return sendJson(res, 503, { __type: 'ServiceUnavailableException', message: 'Service Unavailable' })
    const failure = failures.get(operation)
    if (failure !== undefined) {
      failures.delete(operation)
      if (failure === 'reset') return req.socket.destroy()
      if (failure === 'hang') return
      return sendJson(res, failure, { __type: 'InternalFailure', message: 'The request failed (injected)' })
    }
    try {
      if (req.method !== 'POST' || req.url !== '/')
        throw new KmsFault('UnknownOperationException', 'KMS takes POST / only')
      const refusal = verifySigV4(req, body, credentials, region)
      if (refusal) throw refusal
      if (req.headers['content-type'] !== JSON_CONTENT_TYPE)
        throw new KmsFault('SerializationException', `Content-Type must be ${JSON_CONTENT_TYPE}`)
      const handler = Object.hasOwn(handlers, operation) ? handlers[operation] : undefined
      if (!handler) throw new KmsFault('UnknownOperationException', `Unknown operation ${operation}`)
      if (denied.has(operation))
        throw new KmsFault(
          'AccessDeniedException',
          `User: arn:aws:iam::${ACCOUNT}:user/cloud-export is not authorized to perform: kms:${operation} because no identity-based policy allows the kms:${operation} action`,
        )
      let input: Json
      try {
        input = JSON.parse(body.toString('utf8') || '{}') as Json
      } catch {
        throw new KmsFault('SerializationException', 'The body is not JSON')
      }
      sendJson(res, 200, await handler(input))
    } catch (error) {
      if (!(error instanceof KmsFault)) throw error
      sendJson(res, error.status, { __type: error.type, message: error.message })
    }
  }

  const server = createServer((req, res) => {
    answer(req, res).catch(() => {
      if (!res.headersSent) sendJson(res, 500, { __type: 'KMSInternalException', message: 'Internal error' })
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo

  return {
    url: `http://127.0.0.1:${port}`,
    region,
    get requests() {
      return requests
    },
    get operations() {
      return [...operations]
    },
    keys() {
      const view = new Map<string, FakeKeyView>()
      for (const key of keys.values())
        view.set(key.keyId, {
          keyId: key.keyId,
          arn: key.arn,
          keySpec: key.keySpec,
          keyUsage: key.keyUsage,
          keyState: key.keyState,
          description: key.description,
          privateKey: key.privateKey,
          aliases: [...aliases.entries()]
            .filter(([, a]) => a.targetKeyId === key.keyId)
            .map(([name]) => name),
        })
      return view
    },
    aliasTarget: (alias) => aliases.get(alias)?.targetKeyId,
    setDown(value) {
      down = value
    },
    failNext(operation, failure) {
      failures.set(operation, failure)
    },
    deny(operation) {
      denied.add(operation)
    },
    stop() {
      server.closeAllConnections()
      return new Promise<void>((resolve, reject) =>
        server.close((error) => (error ? reject(error) : resolve())),
      )
    },
  }
}

function aliasNameOf(value: unknown): string {
  if (typeof value !== 'string' || !/^alias\/[A-Za-z0-9/_-]+$/.test(value) || value.length > 256)
    throw new KmsFault(
      'ValidationException',
      'AliasName must be alias/ followed by letters, digits, /, _ or -',
    )
  if (value.startsWith('alias/aws/'))
    throw new KmsFault('NotAuthorizedException', 'alias/aws/ is reserved for AWS managed keys')
  return value
}

/**
 * RSA_AES_KEY_WRAP_SHA_256 undone as AWS does: the first 512 bytes are the AES key under
 * RSA-OAEP (SHA-256, MGF1-SHA-256), the rest the PKCS#8 material under AES key wrap with padding.
 */
function unwrapKeyMaterial(encrypted: Buffer, wrappingPrivateKey: KeyObject): KeyObject {
  let aesKey: Buffer
  try {
    aesKey = privateDecrypt(
      { key: wrappingPrivateKey, padding: constants.RSA_PKCS1_OAEP_PADDING, oaepHash: 'sha256' },
      encrypted.subarray(0, RSA_OAEP_BYTES),
    )
  } catch {
    throw new KmsFault('InvalidCiphertextException', 'The wrapped AES key could not be decrypted')
  }
  if (aesKey.length !== 32)
    throw new KmsFault('InvalidCiphertextException', 'The wrapped AES key is not AES-256')
  let pkcs8: Buffer
  try {
    const decipher = createDecipheriv('id-aes256-wrap-pad', aesKey, Buffer.from('A65959A6', 'hex'))
    pkcs8 = Buffer.concat([decipher.update(encrypted.subarray(RSA_OAEP_BYTES)), decipher.final()])
  } catch {
    throw new KmsFault('InvalidCiphertextException', 'The key material could not be unwrapped')
  }
  try {
    return createPrivateKey({ key: pkcs8, format: 'der', type: 'pkcs8' })
  } catch {
    throw new KmsFault('IncorrectKeyMaterialException', 'The key material is not a PKCS#8 private key')
  }
}

const USAGES_BY_SPEC: Record<string, string[]> = {
  RSA_2048: ['ENCRYPT_DECRYPT', 'SIGN_VERIFY'],
  RSA_3072: ['ENCRYPT_DECRYPT', 'SIGN_VERIFY'],
  RSA_4096: ['ENCRYPT_DECRYPT', 'SIGN_VERIFY'],
  ECC_NIST_P256: ['SIGN_VERIFY', 'KEY_AGREEMENT'],
  ECC_NIST_P384: ['SIGN_VERIFY', 'KEY_AGREEMENT'],
  ECC_NIST_P521: ['SIGN_VERIFY', 'KEY_AGREEMENT'],
  ECC_NIST_EDWARDS25519: ['SIGN_VERIFY'],
}

const RSA_SIGNING = [
  'RSASSA_PSS_SHA_256',
  'RSASSA_PSS_SHA_384',
  'RSASSA_PSS_SHA_512',
  'RSASSA_PKCS1_V1_5_SHA_256',
  'RSASSA_PKCS1_V1_5_SHA_384',
  'RSASSA_PKCS1_V1_5_SHA_512',
]
const SIGNING_ALGORITHMS: Record<string, string[]> = {
  RSA_2048: RSA_SIGNING,
  RSA_3072: RSA_SIGNING,
  RSA_4096: RSA_SIGNING,
  ECC_NIST_P256: ['ECDSA_SHA_256'],
  ECC_NIST_P384: ['ECDSA_SHA_384'],
  ECC_NIST_P521: ['ECDSA_SHA_512'],
  ECC_NIST_EDWARDS25519: ['ED25519_SHA_512'],
}

const isSymmetric = (keySpec: string) => keySpec === 'SYMMETRIC_DEFAULT'

function algorithmsOf(key: StoredKey): Json {
  if (key.keyUsage === 'SIGN_VERIFY') return { SigningAlgorithms: SIGNING_ALGORITHMS[key.keySpec] ?? [] }
  return { EncryptionAlgorithms: ['RSAES_OAEP_SHA_1', 'RSAES_OAEP_SHA_256'] }
}

function matchesKeySpec(privateKey: KeyObject, keySpec: string): boolean {
  const details = privateKey.asymmetricKeyDetails
  const rsa = /^RSA_(\d+)$/.exec(keySpec)
  if (rsa) return privateKey.asymmetricKeyType === 'rsa' && details?.modulusLength === Number(rsa[1])
  const curves: Record<string, string> = {
    ECC_NIST_P256: 'prime256v1',
    ECC_NIST_P384: 'secp384r1',
    ECC_NIST_P521: 'secp521r1',
  }
  if (keySpec in curves)
    return privateKey.asymmetricKeyType === 'ec' && details?.namedCurve === curves[keySpec]
  return keySpec === 'ECC_NIST_EDWARDS25519' && privateKey.asymmetricKeyType === 'ed25519'
}

/** KMS's signing algorithms: PSS with a salt as long as the digest; ECDSA in DER; pure Ed25519. */
function signWith(algorithm: string, privateKey: KeyObject, message: Buffer): Buffer {
  if (algorithm === 'ED25519_SHA_512') return sign(null, message, privateKey)
  const bits = /_SHA_(\d+)$/.exec(algorithm)?.[1] ?? '256'
  const hash = `sha${bits}`
  if (algorithm.startsWith('RSASSA_PSS'))
    return sign(hash, message, {
      key: privateKey,
      padding: constants.RSA_PKCS1_PSS_PADDING,
      saltLength: Number(bits) / 8,
    })
  if (algorithm.startsWith('RSASSA_PKCS1'))
    return sign(hash, message, { key: privateKey, padding: constants.RSA_PKCS1_PADDING })
  return sign(hash, message, { key: privateKey, dsaEncoding: 'der' })
}

// SigV4 (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_sigv-create-signed-request.html),
// written from the specification rather than with the SDK's signer, so that a transport which
// alters what the SDK signed is caught here.

const AUTHORIZATION =
  /^AWS4-HMAC-SHA256 Credential=([^,\s]+),\s*SignedHeaders=([^,\s]+),\s*Signature=([0-9a-f]{64})$/

function verifySigV4(
  req: IncomingMessage,
  body: Buffer,
  credentials: FakeAwsCredentials,
  region: string,
): KmsFault | undefined {
  const authorization = req.headers.authorization
  if (!authorization)
    return new KmsFault('MissingAuthenticationTokenException', 'Missing Authentication Token')
  const match = AUTHORIZATION.exec(authorization)
  if (!match) return new KmsFault('IncompleteSignatureException', 'The Authorization header is malformed')
  const [, credential = '', signedHeaderList = '', signature = ''] = match
  const [accessKeyId, date, scopeRegion, service, terminator, ...rest] = credential.split('/')
  if (accessKeyId !== credentials.accessKeyId)
    return new KmsFault(
      'UnrecognizedClientException',
      'The security token included in the request is invalid.',
    )
  const token = req.headers['x-amz-security-token']
  if (!sameSecret(credentials.sessionToken ?? '', typeof token === 'string' ? token : ''))
    return new KmsFault(
      'UnrecognizedClientException',
      'The security token included in the request is invalid.',
    )
  const amzDate = req.headers['x-amz-date']
  if (typeof amzDate !== 'string' || !/^\d{8}T\d{6}Z$/.test(amzDate) || date !== amzDate.slice(0, 8))
    return new KmsFault(
      'IncompleteSignatureException',
      'X-Amz-Date is missing or does not match the credential scope',
    )
  if (scopeRegion !== region || service !== 'kms' || terminator !== 'aws4_request' || rest.length > 0)
    return new KmsFault(
      'InvalidSignatureException',
      `Credential should be scoped to a valid region ('${region}') and service kms`,
    )
  const signedAt = Date.parse(
    `${amzDate.slice(0, 4)}-${amzDate.slice(4, 6)}-${amzDate.slice(6, 8)}T${amzDate.slice(9, 11)}:${amzDate.slice(11, 13)}:${amzDate.slice(13, 15)}Z`,
  )
  if (!(Math.abs(Date.now() - signedAt) <= MAX_SKEW_MS))
    return new KmsFault(
      'InvalidSignatureException',
      'Signature expired: the request time is too far from now',
    )
  const signedHeaders = signedHeaderList.split(';')
  // What the SDK always signs and what says which operation runs: unsigned, it could be changed.
  for (const required of ['host', 'x-amz-date', 'x-amz-target', 'content-type'])
    if (!signedHeaders.includes(required))
      return new KmsFault('IncompleteSignatureException', `The ${required} header must be signed`)
  if (credentials.sessionToken !== undefined && !signedHeaders.includes('x-amz-security-token'))
    return new KmsFault('IncompleteSignatureException', 'The x-amz-security-token header must be signed')

  const payloadHash = createHash('sha256').update(body).digest('hex')
  // The SDK also sends the payload's hash as a header; it must be the body's.
  const declaredHash = req.headers['x-amz-content-sha256']
  if (declaredHash !== undefined && declaredHash !== payloadHash)
    return new KmsFault('InvalidSignatureException', 'x-amz-content-sha256 does not match the body')
  const canonicalRequest = [
    req.method ?? '',
    canonicalUri(req.url ?? '/'),
    canonicalQuery(req.url ?? '/'),
    `${signedHeaders.map((name) => `${name}:${canonicalHeaderValue(req, name)}`).join('\n')}\n`,
    signedHeaderList,
    payloadHash,
  ].join('\n')
  const scope = `${date}/${region}/kms/aws4_request`
  const stringToSign = [
    'AWS4-HMAC-SHA256',
    amzDate,
    scope,
    createHash('sha256').update(canonicalRequest).digest('hex'),
  ].join('\n')
  const hmac = (key: Buffer | string, data: string) => createHmac('sha256', key).update(data).digest()
  const signingKey = hmac(
    hmac(hmac(hmac(`AWS4${credentials.secretAccessKey}`, date), region), 'kms'),
    'aws4_request',
  )
  const expected = createHmac('sha256', signingKey).update(stringToSign).digest()
  if (timingSafeEqual(expected, Buffer.from(signature, 'hex'))) return undefined
  // Like some AWS services, the message quotes what was expected: the canonical request holds
  // the signed headers, session token included, which is why the adapter must not repeat it.
  return new KmsFault(
    'InvalidSignatureException',
    'The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method. Consult the service documentation for details.\n\n' +
      `The Canonical String for this request should have been\n'${canonicalRequest}'\n\nThe String-to-Sign should have been\n'${stringToSign}'\n`,
  )
}

/** Compares two secrets in constant time (their digests, so that lengths leak nothing either). */
const sameSecret = (a: string, b: string) =>
  timingSafeEqual(createHash('sha256').update(a).digest(), createHash('sha256').update(b).digest())

const encodeRfc3986 = (text: string) =>
  encodeURIComponent(text).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`)

/** Services other than S3 encode each path segment twice: once on the wire, once here. */
function canonicalUri(url: string): string {
  const path = url.split('?')[0] || '/'
  return path
    .split('/')
    .map((segment) => encodeRfc3986(segment))
    .join('/')
}

function canonicalQuery(url: string): string {
  const query = url.includes('?') ? url.slice(url.indexOf('?') + 1) : ''
  if (query === '') return ''
  return query
    .split('&')
    .map((pair) => {
      const [name = '', value = ''] = pair.split('=')
      return [encodeRfc3986(decodeURIComponent(name)), encodeRfc3986(decodeURIComponent(value))] as const
    })
    .sort(([a, av], [b, bv]) => (a === b ? (av < bv ? -1 : 1) : a < b ? -1 : 1))
    .map(([name, value]) => `${name}=${value}`)
    .join('&')
}

/** A header's values, each trimmed with inner runs of spaces made one, joined by commas. */
function canonicalHeaderValue(req: IncomingMessage, name: string): string {
  const values = req.headersDistinct[name] ?? []
  return values.map((value) => value.trim().replace(/\s+/g, ' ')).join(',')
}

function readBody(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = []
    let length = 0
    req.on('data', (chunk: Buffer) => {
      length += chunk.length
      if (length > MAX_BODY) req.destroy()
      else chunks.push(chunk)
    })
    req.once('end', () => resolve(Buffer.concat(chunks)))
    req.once('error', reject)
  })
}

function sendJson(res: ServerResponse, status: number, body: Json) {
  const text = JSON.stringify(body)
  res.writeHead(status, {
    'content-type': JSON_CONTENT_TYPE,
    'content-length': Buffer.byteLength(text),
    'x-amzn-requestid': randomUUID(),
  })
  res.end(text)
}
