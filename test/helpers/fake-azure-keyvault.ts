import 'reflect-metadata'
import {
  createHash,
  createPrivateKey,
  createPublicKey,
  constants as cryptoConstants,
  type KeyObject,
  type JsonWebKey as NodeJwk,
  privateEncrypt,
  randomBytes,
  randomUUID,
  webcrypto,
} from 'node:crypto'
import type { IncomingMessage, ServerResponse } from 'node:http'
import { createServer, type Server } from 'node:https'
import type { AddressInfo } from 'node:net'
import { p256, p384, p521 } from '@noble/curves/nist.js'
import * as x509 from '@peculiar/x509'

x509.cryptoProvider.set(webcrypto as unknown as Parameters<typeof x509.cryptoProvider.set>[0])

/**
 * A local stand-in for Microsoft Entra ID and one Azure Key Vault, over HTTPS with a certificate
 * it makes for 127.0.0.1, answering as the real services do for what the SDKs call:
 * - Entra ID v2: the tenant's OpenID configuration and the token endpoint's client-credentials
 *   grant (client id and secret checked; the errors carry `error`, `error_codes` as Entra's do);
 * - Key Vault: the bearer challenge to a request without a token, key import (`PUT /keys/{name}`,
 *   each a new version), `GET /keys/{name}[/{version}]` and `POST /keys/{name}/{version}/sign`
 *   over a digest, so that a test can check what it imported with signatures made here.
 * Like the real vault it refuses an Ed25519 (`OKP`) key: Key Vault has no such key type.
 */

export interface FakeAzureKeyVaultOptions {
  tenantId?: string
  /** A domain name of the tenant, which the token endpoint also takes (the challenge names the GUID). */
  tenantDomain?: string
  clientId?: string
  clientSecret?: string
}

export interface FakeKeyVersion {
  version: string
  privateKey: KeyObject
  keyOps: string[]
  hsm: boolean
  enabled: boolean
  tags: Record<string, string>
}

export interface FakeAzureKeyVault {
  /** `https://127.0.0.1:<port>`: both the authority host and the vault URL. */
  url: string
  /** The server's self-signed certificate: the CA to trust. */
  caPem: string
  tenantId: string
  tenantDomain: string
  clientId: string
  clientSecret: string
  /** Key name (as first imported) → its versions, oldest first. */
  keys(): Map<string, FakeKeyVersion[]>
  /** Every request received, in order (path without the query). */
  requests: { method: string; path: string }[]
  /** `true`: every request gets a 503 (`unavailable`) or its connection is dropped (`reset`). */
  setDown(down: boolean, how?: 'unavailable' | 'reset'): void
  /** The application lacks the keys/import permission: imports get Key Vault's 403. */
  denyImports(deny: boolean): void
  /** The audience the bearer challenge names (`https://vault.azure.net` unless a test changes it). */
  setChallengeResource(resource: string): void
  stop(): Promise<void>
}

/** The audience Key Vault's challenge names and its tokens must carry. */
const VAULT_RESOURCE = 'https://vault.azure.net'
const KEY_NAME = /^[0-9a-zA-Z-]{1,127}$/
const MAX_BODY_BYTES = 256 * 1024

interface IssuedToken {
  tenantId: string
  resource: string
  expiresAt: number
}

export async function startFakeAzureKeyVault(
  options: FakeAzureKeyVaultOptions = {},
): Promise<FakeAzureKeyVault> {
  const tenantId = options.tenantId ?? '72f988bf-86f1-41af-91ab-2d7cd011db47'
  const tenantDomain = options.tenantDomain ?? 'contoso.onmicrosoft.com'
  const clientId = options.clientId ?? '0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d'
  const clientSecret = options.clientSecret ?? `fake~${randomBytes(18).toString('base64url')}`
  const certificate = await makeServerCertificate()
  const keys = new Map<string, { name: string; versions: FakeKeyVersion[] }>()
  const tokens = new Map<string, IssuedToken>()
  const requests: FakeAzureKeyVault['requests'] = []
  let down: false | 'unavailable' | 'reset' = false
  let importsDenied = false
  let challengeResource = VAULT_RESOURCE
  let base = ''

  const server: Server = createServer({ key: certificate.keyPem, cert: certificate.pem }, (req, res) => {
    const url = new URL(req.url ?? '/', base)
    requests.push({ method: req.method ?? '', path: url.pathname })
    if (down === 'reset') {
      req.socket.destroy()
      return
    }
    if (down === 'unavailable') {
      res.setHeader('retry-after', '1')
      return sendJson(res, 503, vaultError('ServiceUnavailable', 'The service is temporarily unavailable.'))
    }
    route(req, res, url).catch(() => {
      if (res.headersSent) res.destroy()
      else sendJson(res, 500, vaultError('InternalServerError', 'fake failure'))
    })
  })

  async function route(req: IncomingMessage, res: ServerResponse, url: URL) {
    const parts = url.pathname.split('/').filter(Boolean).map(decodeURIComponent)
    if (parts[0] === 'keys') return vault(req, res, url, parts.slice(1))
    if (
      req.method === 'GET' &&
      parts.length === 4 &&
      parts.slice(1).join('/') === 'v2.0/.well-known/openid-configuration'
    ) {
      return openIdConfiguration(res, parts[0]!)
    }
    if (req.method === 'POST' && parts.length === 4 && parts.slice(1).join('/') === 'oauth2/v2.0/token') {
      return token(req, res, parts[0]!)
    }
    sendJson(res, 404, vaultError('NotFound', 'No such resource.'))
  }

  // ---- Entra ID ------------------------------------------------------------------------------

  function openIdConfiguration(res: ServerResponse, tenant: string) {
    if (!isTenant(tenant))
      return sendJson(res, 400, entraError('invalid_tenant', 90002, `Tenant '${tenant}' not found.`))
    const authority = `${base}/${tenantId}`
    sendJson(res, 200, {
      token_endpoint: `${authority}/oauth2/v2.0/token`,
      token_endpoint_auth_methods_supported: ['client_secret_post', 'private_key_jwt', 'client_secret_basic'],
      jwks_uri: `${base}/${tenantId}/discovery/v2.0/keys`,
      response_modes_supported: ['query', 'fragment', 'form_post'],
      subject_types_supported: ['pairwise'],
      id_token_signing_alg_values_supported: ['RS256'],
      response_types_supported: ['code', 'id_token', 'code id_token', 'id_token token'],
      scopes_supported: ['openid', 'profile', 'email', 'offline_access'],
      issuer: `${base}/${tenantId}/v2.0`,
      request_uri_parameter_supported: false,
      authorization_endpoint: `${authority}/oauth2/v2.0/authorize`,
      device_authorization_endpoint: `${authority}/oauth2/v2.0/devicecode`,
      http_logout_supported: true,
      frontchannel_logout_supported: true,
      end_session_endpoint: `${authority}/oauth2/v2.0/logout`,
      claims_supported: ['sub', 'iss', 'aud', 'exp', 'iat', 'tid'],
      tenant_region_scope: 'EU',
      cloud_instance_name: 'microsoftonline.com',
      cloud_graph_host_name: 'graph.windows.net',
      msgraph_host: 'graph.microsoft.com',
    })
  }

  async function token(req: IncomingMessage, res: ServerResponse, tenant: string) {
    if (!isTenant(tenant))
      return sendJson(res, 400, entraError('invalid_request', 90002, `Tenant '${tenant}' not found.`))
    const form = new URLSearchParams((await readBody(req)).toString('utf8'))
    if (form.get('grant_type') !== 'client_credentials') {
      return sendJson(
        res,
        400,
        entraError('unsupported_grant_type', 70003, 'The grant type is not supported.'),
      )
    }
    if (form.get('client_id') !== clientId) {
      return sendJson(
        res,
        400,
        entraError(
          'unauthorized_client',
          700016,
          `Application with identifier '${form.get('client_id')}' was not found.`,
        ),
      )
    }
    if (form.get('client_secret') !== clientSecret) {
      return sendJson(res, 401, entraError('invalid_client', 7000215, 'Invalid client secret provided.'))
    }
    const scope = (form.get('scope') ?? '').split(' ').find((s) => s.endsWith('/.default'))
    if (!scope)
      return sendJson(
        res,
        400,
        entraError('invalid_scope', 1002012, 'The provided value for scope is not valid.'),
      )
    const accessToken = randomBytes(32).toString('base64url')
    tokens.set(accessToken, {
      tenantId,
      resource: scope.slice(0, -'/.default'.length),
      expiresAt: Date.now() + 3600_000,
    })
    sendJson(res, 200, {
      token_type: 'Bearer',
      expires_in: 3599,
      ext_expires_in: 3599,
      access_token: accessToken,
    })
  }

  const isTenant = (tenant: string) =>
    [tenantId, tenantDomain].some((t) => t.toLowerCase() === tenant.toLowerCase())

  // ---- Key Vault -----------------------------------------------------------------------------

  async function vault(req: IncomingMessage, res: ServerResponse, url: URL, parts: string[]) {
    const challenge = `Bearer authorization="${base}/${tenantId}", resource="${challengeResource}"`
    const bearer = /^Bearer (\S+)$/.exec(req.headers.authorization ?? '')?.[1]
    if (!bearer) {
      res.setHeader('www-authenticate', challenge)
      return sendJson(
        res,
        401,
        vaultError('Unauthorized', 'AKV10000: Request is missing a Bearer or PoP token.'),
      )
    }
    const issued = tokens.get(bearer)
    if (!issued || issued.expiresAt < Date.now() || issued.resource !== VAULT_RESOURCE) {
      res.setHeader('www-authenticate', challenge)
      return sendJson(res, 401, vaultError('Unauthorized', 'AKV10032: Invalid token.'))
    }
    if (!url.searchParams.get('api-version')) {
      return sendJson(
        res,
        400,
        vaultError('BadParameter', 'The request URI contains an invalid or missing api-version.'),
      )
    }
    const [name, version, operation] = parts
    if (!name || !KEY_NAME.test(name))
      return sendJson(res, 400, vaultError('BadParameter', 'Invalid key name.'))
    if (req.method === 'PUT' && parts.length === 1) return importKey(req, res, name)
    if (req.method === 'GET' && parts.length <= 2) return getKey(res, name, version)
    if (req.method === 'POST' && parts.length === 3 && operation === 'sign')
      return sign(req, res, name, version!)
    sendJson(res, 405, vaultError('MethodNotAllowed', 'The operation is not supported.'))
  }

  async function importKey(req: IncomingMessage, res: ServerResponse, name: string) {
    if (importsDenied) {
      return sendJson(res, 403, {
        error: {
          code: 'Forbidden',
          message: `The user, group or application does not have keys import permission on key vault.`,
          innererror: { code: 'ForbiddenByPolicy' },
        },
      })
    }
    const body = JSON.parse((await readBody(req)).toString('utf8')) as {
      key?: Record<string, unknown>
      /** The REST API spells it with a capital (KeyImportParameters.Hsm). */
      Hsm?: boolean
      attributes?: { enabled?: boolean }
      tags?: Record<string, string>
    }
    const jwk = body.key
    if (!jwk || typeof jwk !== 'object')
      return sendJson(res, 400, vaultError('BadParameter', 'Property key is required.'))
    if (jwk['kty'] !== 'RSA' && jwk['kty'] !== 'EC') {
      return sendJson(
        res,
        400,
        vaultError('BadParameter', `Invalid value for property kty: ${String(jwk['kty'])}.`),
      )
    }
    const fields = jwk['kty'] === 'RSA' ? ['n', 'e', 'd', 'p', 'q', 'dp', 'dq', 'qi'] : ['crv', 'x', 'y', 'd']
    const keyOps = Array.isArray(jwk['key_ops']) ? (jwk['key_ops'] as string[]) : []
    let privateKey: KeyObject
    try {
      privateKey = createPrivateKey({
        key: Object.fromEntries([['kty', jwk['kty']], ...fields.map((f) => [f, jwk[f]])]) as NodeJwk,
        format: 'jwk',
      })
    } catch {
      return sendJson(res, 400, vaultError('BadParameter', 'The key is not a valid private key.'))
    }
    const bits = privateKey.asymmetricKeyDetails?.modulusLength
    if (jwk['kty'] === 'RSA' && (bits === undefined || bits < 2048)) {
      return sendJson(res, 400, vaultError('BadParameter', 'RSA keys must be 2048 bits or larger.'))
    }
    const stored = keys.get(name.toLowerCase()) ?? { name, versions: [] }
    keys.set(name.toLowerCase(), stored)
    const entry: FakeKeyVersion = {
      version: randomBytes(16).toString('hex'),
      privateKey,
      keyOps,
      hsm: body.Hsm === true,
      enabled: body.attributes?.enabled !== false,
      tags: body.tags ?? {},
    }
    stored.versions.push(entry)
    sendJson(res, 200, keyBundle(stored.name, entry))
  }

  function getKey(res: ServerResponse, name: string, version: string | undefined) {
    const found = findVersion(name, version)
    if (!found) return sendJson(res, 404, keyNotFound(name))
    sendJson(res, 200, keyBundle(found.name, found.entry))
  }

  async function sign(req: IncomingMessage, res: ServerResponse, name: string, version: string) {
    const found = findVersion(name, version)
    if (!found) return sendJson(res, 404, keyNotFound(name))
    if (!found.entry.keyOps.includes('sign')) {
      return sendJson(res, 403, vaultError('Forbidden', 'Operation "sign" is not allowed on this key.'))
    }
    const { alg, value } = JSON.parse((await readBody(req)).toString('utf8')) as {
      alg?: string
      value?: string
    }
    const digest = Buffer.from(value ?? '', 'base64url')
    const signature = alg ? signDigest(found.entry.privateKey, alg, digest) : undefined
    if (!signature) return sendJson(res, 400, vaultError('BadParameter', 'Invalid algorithm or digest.'))
    sendJson(res, 200, {
      kid: kidOf(found.name, found.entry.version),
      value: signature.toString('base64url'),
    })
  }

  function findVersion(name: string, version: string | undefined) {
    const stored = keys.get(name.toLowerCase())
    const entry = version ? stored?.versions.find((v) => v.version === version) : stored?.versions.at(-1)
    return stored && entry ? { name: stored.name, entry } : undefined
  }

  const kidOf = (name: string, version: string) => `${base}/keys/${name}/${version}`

  function keyBundle(name: string, entry: FakeKeyVersion) {
    const { kty, n, e, crv, x, y } = createPublicKey(entry.privateKey).export({ format: 'jwk' })
    const created = Math.floor(Date.now() / 1000)
    return {
      key: {
        kid: kidOf(name, entry.version),
        kty,
        key_ops: entry.keyOps,
        ...(kty === 'RSA' ? { n, e } : { crv, x, y }),
      },
      attributes: {
        enabled: entry.enabled,
        created,
        updated: created,
        recoveryLevel: 'Recoverable+Purgeable',
        recoverableDays: 90,
        exportable: false,
      },
      tags: entry.tags,
    }
  }

  const keyNotFound = (name: string) =>
    vaultError('KeyNotFound', `A key with (name/id) ${name} was not found in this key vault.`)

  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  base = `https://127.0.0.1:${(server.address() as AddressInfo).port}`

  return {
    url: base,
    caPem: certificate.pem,
    tenantId,
    tenantDomain,
    clientId,
    clientSecret,
    keys: () => new Map([...keys.values()].map(({ name, versions }) => [name, [...versions]])),
    requests,
    setDown(value, how = 'unavailable') {
      down = value ? how : false
    },
    denyImports(deny) {
      importsDenied = deny
    },
    setChallengeResource(resource) {
      challengeResource = resource
    },
    stop: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      }),
  }
}

// ---- Signing a digest, as the vault does ---------------------------------------------------

const HASHES: Record<string, { name: 'sha256' | 'sha384' | 'sha512'; length: number; digestInfo: string }> = {
  '256': { name: 'sha256', length: 32, digestInfo: '3031300d060960864801650304020105000420' },
  '384': { name: 'sha384', length: 48, digestInfo: '3041300d060960864801650304020205000430' },
  '512': { name: 'sha512', length: 64, digestInfo: '3051300d060960864801650304020305000440' },
}

/** RS*, PS* and ES* over a digest the caller made (node:crypto signs only whole messages). */
function signDigest(privateKey: KeyObject, alg: string, digest: Buffer): Buffer | undefined {
  const hash = HASHES[alg.slice(2)]
  if (!hash || digest.length !== hash.length) return undefined
  const family = alg.slice(0, 2)
  if (family === 'RS' && privateKey.asymmetricKeyType === 'rsa') {
    // PKCS #1 v1.5 signing is type-1 padding of DigestInfo: what privateEncrypt does.
    const digestInfo = Buffer.concat([Buffer.from(hash.digestInfo, 'hex'), digest])
    return privateEncrypt({ key: privateKey, padding: cryptoConstants.RSA_PKCS1_PADDING }, digestInfo)
  }
  if (family === 'PS' && privateKey.asymmetricKeyType === 'rsa') {
    const modulusBits = privateKey.asymmetricKeyDetails!.modulusLength!
    const encoded = emsaPssEncode(digest, modulusBits - 1, hash.name)
    const padded = Buffer.concat([Buffer.alloc(Math.ceil(modulusBits / 8) - encoded.length), encoded])
    return privateEncrypt({ key: privateKey, padding: cryptoConstants.RSA_NO_PADDING }, padded)
  }
  if (family === 'ES' && privateKey.asymmetricKeyType === 'ec') {
    const jwk = privateKey.export({ format: 'jwk' })
    const curve = { 'P-256': p256, 'P-384': p384, 'P-521': p521 }[jwk.crv ?? '']
    if (!curve) return undefined
    // Key Vault's ECDSA signatures are r || s (IEEE P1363), as JOSE's.
    return Buffer.from(curve.sign(digest, Buffer.from(jwk.d!, 'base64url'), { prehash: false }))
  }
  return undefined
}

/** RFC 8017 9.1.1 with a salt as long as the hash (Key Vault's PS* algorithms). */
function emsaPssEncode(mHash: Buffer, emBits: number, hash: 'sha256' | 'sha384' | 'sha512'): Buffer {
  const hLen = mHash.length
  const emLen = Math.ceil(emBits / 8)
  const salt = randomBytes(hLen)
  const h = createHash(hash)
    .update(Buffer.concat([Buffer.alloc(8), mHash, salt]))
    .digest()
  const db = Buffer.concat([Buffer.alloc(emLen - 2 * hLen - 2), Buffer.from([1]), salt])
  const mask = mgf1(h, emLen - hLen - 1, hash)
  for (let i = 0; i < db.length; i++) db[i]! ^= mask[i]!
  db[0]! &= 0xff >> (8 * emLen - emBits)
  return Buffer.concat([db, h, Buffer.from([0xbc])])
}

function mgf1(seed: Buffer, length: number, hash: string): Buffer {
  const blocks: Buffer[] = []
  for (let counter = 0; blocks.length * seed.length < length; counter++) {
    const c = Buffer.alloc(4)
    c.writeUInt32BE(counter)
    blocks.push(createHash(hash).update(seed).update(c).digest())
  }
  return Buffer.concat(blocks).subarray(0, length)
}

// ---- HTTP plumbing -------------------------------------------------------------------------

const vaultError = (code: string, message: string) => ({ error: { code, message } })

/** Entra ID's error document (the description starts with the AADSTS number, as Entra's do). */
function entraError(error: string, code: number, description: string) {
  return {
    error,
    error_description: `AADSTS${code}: ${description} Trace ID: ${randomBytes(8).toString('hex')}`,
    error_codes: [code],
    timestamp: `${new Date().toISOString().replace('T', ' ').slice(0, 19)}Z`,
    trace_id: randomUUID(),
    correlation_id: randomUUID(),
  }
}

function sendJson(res: ServerResponse, status: number, body: unknown) {
  const text = JSON.stringify(body)
  res.writeHead(status, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(text),
  })
  res.end(text)
}

function readBody(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = []
    let length = 0
    req.on('data', (chunk: Buffer) => {
      length += chunk.length
      if (length > MAX_BODY_BYTES) req.destroy(new Error('body too large'))
      else chunks.push(chunk)
    })
    req.once('end', () => resolve(Buffer.concat(chunks)))
    req.once('error', reject)
  })
}

/** A self-signed ECDSA certificate for 127.0.0.1 and localhost (its own CA for the client). */
async function makeServerCertificate(): Promise<{ pem: string; keyPem: string }> {
  const algorithm = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' }
  const keys = (await webcrypto.subtle.generateKey(algorithm, true, [
    'sign',
    'verify',
  ])) as webcrypto.CryptoKeyPair
  const now = Date.now()
  const certificate = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: randomBytes(8).toString('hex'),
    name: 'CN=fake-azure-keyvault',
    notBefore: new Date(now - 3600_000),
    notAfter: new Date(now + 24 * 3600_000),
    signingAlgorithm: algorithm,
    keys,
    extensions: [
      new x509.SubjectAlternativeNameExtension([
        { type: 'ip', value: '127.0.0.1' },
        { type: 'dns', value: 'localhost' },
      ]),
      new x509.BasicConstraintsExtension(false),
    ],
  })
  const pkcs8 = Buffer.from(await webcrypto.subtle.exportKey('pkcs8', keys.privateKey))
  const keyPem = createPrivateKey({ key: pkcs8, format: 'der', type: 'pkcs8' }).export({
    format: 'pem',
    type: 'pkcs8',
  })
  return { pem: certificate.toString('pem'), keyPem: String(keyPem) }
}
