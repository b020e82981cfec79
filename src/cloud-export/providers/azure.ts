import { ClientSecretCredential, type GetTokenOptions, type TokenCredential } from '@azure/identity'
import { type JsonWebKey, KeyClient } from '@azure/keyvault-keys'
import type { AlgorithmName } from '../../keys/algorithms.ts'
import { DestinationRefused, DestinationUnresolved } from '../../outbound/destination.ts'
import type { OutboundClient } from '../../outbound/outbound-client.ts'
import { onOfficialHost } from '../custom-endpoints.ts'
import {
  CloudFieldError,
  type CloudProviderAdapter,
  CloudProviderError,
  type ConnectionContext,
  cloudErrorOfOutbound,
  type ExportMaterial,
  type PushResult,
} from '../provider.ts'
import {
  type AzureService,
  createOutboundHttpClient,
  type Exchange,
  type ExchangeJournal,
} from './azure-transport.ts'

/**
 * Azure Key Vault: a connection is an Entra ID app registration (tenant, client id, client
 * secret); a target is a vault and a key name in it. A push imports the version's private key as
 * a JWK ("bring your own key" without an HSM key-exchange key, so a software-protected key);
 * each import adds a version to the named key, which is how Key Vault rotates.
 *
 * The official SDKs do the protocol (MSAL's client-credentials flow, Key Vault's bearer
 * challenge, the JWK serialisation); their only transport is src/outbound (azure-transport.ts).
 */

interface AzureSettings {
  tenantId: string
  clientId: string
  /** An origin: `https://login.microsoftonline.com` unless the tenant lives in another cloud. */
  authorityHost: string
}

interface AzureCredentials {
  clientSecret: string
}

interface AzureTarget {
  /** An origin: `https://<name>.vault.azure.net` in production. */
  vaultUrl: string
  keyName: string
}

/**
 * Spec 2.2: "RSA-2048 and larger, ECDSA, Ed25519". Ed25519 is listed although Key Vault has no
 * such key type (see toAzureJwk).
 */
const AZURE_ALGORITHMS: readonly AlgorithmName[] = [
  'RSA-2048',
  'RSA-3072',
  'RSA-4096',
  'EC-P256',
  'EC-P384',
  'EC-P521',
  'Ed25519',
]

const DEFAULT_AUTHORITY_HOST = 'https://login.microsoftonline.com'
const GUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i
/** A verified domain of the tenant, e.g. contoso.onmicrosoft.com (at least one dot, so never `common`). */
const TENANT_DOMAIN =
  /^(?=.{1,253}$)[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)+$/i
/** Key Vault's own rule for object names. */
const KEY_NAME = /^[0-9a-zA-Z-]{1,127}$/
const MAX_SECRET_LENGTH = 1024

// ---------------------------------------------------------------------------------------------
// Validation

function readSettings(input: Record<string, unknown>): AzureSettings {
  // caCertificate is every provider's, checked and applied by the service (`outbound.withExtraCa`
  // before the adapter runs); it is in a stored connection's settings, so it is let through.
  refuseUnknown('settings', input, ['tenantId', 'clientId', 'authorityHost', 'caCertificate'])
  const tenantId = input['tenantId']
  if (typeof tenantId !== 'string' || !(GUID.test(tenantId) || TENANT_DOMAIN.test(tenantId))) {
    throw new CloudFieldError(
      'settings.tenantId',
      'must be the Microsoft Entra tenant id (a GUID) or one of its domain names',
    )
  }
  const clientId = input['clientId']
  if (typeof clientId !== 'string' || !GUID.test(clientId)) {
    throw new CloudFieldError('settings.clientId', 'must be the application (client) id, a GUID')
  }
  const authorityHost =
    input['authorityHost'] === undefined
      ? DEFAULT_AUTHORITY_HOST
      : httpsOrigin('settings.authorityHost', input['authorityHost'])
  return { tenantId, clientId, authorityHost }
}

function readCredentials(input: Record<string, unknown>): AzureCredentials {
  refuseUnknown('credentials', input, ['clientSecret'])
  const clientSecret = input['clientSecret']
  // The message never quotes the value: it is a secret even when malformed.
  if (
    typeof clientSecret !== 'string' ||
    clientSecret.length === 0 ||
    clientSecret.length > MAX_SECRET_LENGTH ||
    !/^[\x21-\x7e]+$/.test(clientSecret)
  ) {
    throw new CloudFieldError(
      'credentials.clientSecret',
      `must be the client secret's value: printable characters without spaces, at most ${MAX_SECRET_LENGTH}`,
    )
  }
  return { clientSecret }
}

function readTarget(input: Record<string, unknown>): AzureTarget {
  refuseUnknown('target', input, ['vaultUrl', 'keyName'])
  // Any https origin, not only *.vault.azure.net: a private endpoint, another cloud, a test's fake
  // (the service lets one that is not Microsoft's through only if the operator allowed it).
  const vaultUrl = httpsOrigin('target.vaultUrl', input['vaultUrl'])
  const keyName = input['keyName']
  if (typeof keyName !== 'string' || !KEY_NAME.test(keyName)) {
    throw new CloudFieldError('target.keyName', 'must be 1-127 letters, digits and hyphens (Key Vault names)')
  }
  return { vaultUrl, keyName }
}

/**
 * Reads a stored connection or target. They were validated when saved, so a refusal here means
 * the stored value no longer fits (a rule changed): retrying cannot help, editing it can.
 */
function stored<T>(read: () => T): T {
  try {
    return read()
  } catch (error) {
    if (error instanceof CloudFieldError) {
      throw new CloudProviderError('cloud_configuration_invalid', error.message, false)
    }
    throw error
  }
}

function refuseUnknown(prefix: string, input: Record<string, unknown>, known: readonly string[]) {
  for (const name of Object.keys(input)) {
    if (!known.includes(name))
      throw new CloudFieldError(`${prefix}.${name}`, 'is not a field of Azure Key Vault')
  }
}

/** An https URL that is only an origin (the SDKs append their own paths), returned as that origin. */
function httpsOrigin(field: string, value: unknown): string {
  const url = typeof value === 'string' ? URL.parse(value) : null
  if (
    url?.protocol !== 'https:' ||
    url.username !== '' ||
    url.password !== '' ||
    url.pathname !== '/' ||
    url.search !== '' ||
    url.hash !== ''
  ) {
    throw new CloudFieldError(field, 'must be an https URL without a path, query or credentials')
  }
  return url.origin
}

// ---------------------------------------------------------------------------------------------
// Tokens

/** Key Vault and Managed HSM token audiences, by the host suffix of the vaults they serve. */
const VAULT_RESOURCES: readonly (readonly [hostSuffix: string, resource: string])[] = [
  ['vault.azure.net', 'https://vault.azure.net'],
  ['managedhsm.azure.net', 'https://managedhsm.azure.net'],
  ['vault.azure.cn', 'https://vault.azure.cn'],
  ['managedhsm.azure.cn', 'https://managedhsm.azure.cn'],
  ['vault.usgovcloudapi.net', 'https://vault.usgovcloudapi.net'],
  ['managedhsm.usgovcloudapi.net', 'https://managedhsm.usgovcloudapi.net'],
]

/** Each cloud's Entra ID host and its Key Vault audience (the connection test's scope). */
const CLOUD_VAULT_RESOURCE: Record<string, string> = {
  'login.microsoftonline.com': 'https://vault.azure.net',
  'login.chinacloudapi.cn': 'https://vault.azure.cn',
  'login.microsoftonline.us': 'https://vault.usgovcloudapi.net',
}

const scopeOf = (resource: string) => `${resource}/.default`

/**
 * The scopes a token may be asked for when talking to this vault: its own cloud's audience for
 * a real Key Vault host, any Key Vault audience for another host (a private name, a test's fake).
 */
function vaultScopes(vaultUrl: string): ReadonlySet<string> {
  const host = new URL(vaultUrl).hostname
  const own = VAULT_RESOURCES.find(([suffix]) => host.endsWith(`.${suffix}`))
  return new Set((own ? [own] : VAULT_RESOURCES).map(([, resource]) => scopeOf(resource)))
}

/**
 * Pipeline options of both clients. A failed push is retried by the export's own schedule, not
 * inside one call; and the pipeline's redirect policy (same-origin redirects, by default) is
 * off, so a 3xx stays what the outbound client makes it: an answer, not a second request.
 */
const ONE_ATTEMPT = { retryOptions: { maxRetries: 0 }, redirectOptions: { maxRetries: 0 } }

function createCredential(
  connection: ConnectionContext,
  settings: AzureSettings,
  credentials: AzureCredentials,
  journal: ExchangeJournal,
): TokenCredential {
  // One credential (and so one MSAL application with its token cache) per call: no token is
  // shared between connections, and a rotated secret takes effect at once.
  return new ClientSecretCredential(settings.tenantId, settings.clientId, credentials.clientSecret, {
    authorityHost: settings.authorityHost,
    // Instance discovery would ask login.microsoftonline.com whether the authority is genuine;
    // the authority is the connection's own setting, so MSAL takes it as configured (and a
    // sovereign cloud or a test's fake is not asked about to the public cloud).
    disableInstanceDiscovery: true,
    // IdentityClient (MSAL's network module) is built from these options: MSAL's metadata and
    // token requests go through the guarded transport too.
    httpClient: createOutboundHttpClient({ ...exchangeOptions(connection, journal), service: 'identity' }),
    ...ONE_ATTEMPT,
  })
}

/**
 * The Key Vault client asks for a token for whatever resource the vault's 401 challenge names,
 * in whatever tenant it names. The SDK's own check (the resource must be a suffix of the vault
 * host) cannot hold for a vault reached by another name, so it is off and this takes its place:
 * only Key Vault audiences, and always the connection's tenant (a vault in another tenant then
 * refuses the token, which reads as refused credentials).
 */
function vaultOnly(credential: TokenCredential, allowedScopes: ReadonlySet<string>): TokenCredential {
  return {
    async getToken(scopes: string | string[], options?: GetTokenOptions) {
      const asked = Array.isArray(scopes) ? scopes : [scopes]
      if (asked.length === 0 || !asked.every((scope) => allowedScopes.has(scope))) {
        throw new CloudProviderError(
          'cloud_unexpected_response',
          'the vault asked for a token for an audience other than Azure Key Vault',
          false,
        )
      }
      const { tenantId: _challengeTenant, ...rest } = options ?? {}
      return credential.getToken(asked, rest)
    },
  }
}

// ---------------------------------------------------------------------------------------------
// Keys

type AzureJwk = JsonWebKey & Required<Pick<JsonWebKey, 'kty' | 'keyOps'>>

const SIGN_OPS = ['sign', 'verify']
const ENCRYPT_OPS = ['encrypt', 'decrypt', 'wrapKey', 'unwrapKey']
const RSA_FIELDS = ['n', 'e', 'd', 'p', 'q', 'dp', 'dq', 'qi'] as const
const EC_FIELDS = ['x', 'y', 'd'] as const
const OKP_FIELDS = ['x', 'd'] as const

/** The private key as the SDK's JWK (byte fields; it base64url-encodes them itself). */
function toAzureJwk(material: ExportMaterial): AzureJwk {
  if (!AZURE_ALGORITHMS.includes(material.algorithm) || material.keyType === 'HMAC') {
    throw new CloudProviderError(
      'cloud_algorithm_unsupported',
      `Azure Key Vault does not take ${material.algorithm} keys`,
      false,
    )
  }
  const exported = material.privateKey.export({ format: 'jwk' })
  const bytes = (name: string) => {
    const value = (exported as Record<string, unknown>)[name]
    if (typeof value !== 'string') throw new Error(`the private JWK has no ${name}`)
    return Buffer.from(value, 'base64url')
  }
  const take = (fields: readonly string[]) => Object.fromEntries(fields.map((name) => [name, bytes(name)]))
  if (exported.kty === 'RSA') {
    return {
      kty: 'RSA',
      keyOps: material.keyType === 'Encryption' ? ENCRYPT_OPS : SIGN_OPS,
      ...take(RSA_FIELDS),
    }
  }
  if (exported.kty === 'EC') return { kty: 'EC', crv: exported.crv!, keyOps: SIGN_OPS, ...take(EC_FIELDS) }
  // Key Vault has no Ed25519 keys: a real vault refuses this import (400), and the refusal is
  // recorded like any refused import. It is sent anyway, in the JOSE form (RFC 8037), so that a
  // vault that learns the key type takes it without a change here.
  return { kty: 'OKP', crv: exported.crv!, keyOps: SIGN_OPS, ...take(OKP_FIELDS) }
}

/**
 * Overwrites the private key's bytes. Node's JWK export and the SDK's serialised request hold
 * them as strings too, which cannot be overwritten: this shortens what can.
 */
function wipe(jwk: AzureJwk) {
  for (const value of Object.values(jwk)) if (value instanceof Uint8Array) value.fill(0)
}

/** The key version an import created: its id must be `<vaultUrl>/keys/<keyName>/<version>`. */
function importedVersion(id: string | undefined, target: AzureTarget): { id: string; version: string } {
  const url = id ? URL.parse(id) : null
  const [, keys, name, version, ...rest] = url?.pathname.split('/') ?? []
  if (
    !url ||
    url.origin !== target.vaultUrl ||
    keys !== 'keys' ||
    name?.toLowerCase() !== target.keyName.toLowerCase() ||
    !version ||
    !/^[0-9a-zA-Z]{1,64}$/.test(version) ||
    rest.length > 0
  ) {
    throw new CloudProviderError(
      'cloud_unexpected_response',
      'Key Vault answered the import without a key id of this vault and key',
      false,
    )
  }
  return { id: url.href, version }
}

// ---------------------------------------------------------------------------------------------
// Failures

function exchangeOptions(connection: ConnectionContext, journal: ExchangeJournal) {
  return { outbound: connection.outbound, timeoutMs: connection.timeoutMs, journal }
}

/**
 * Resolves and checks a host before the SDKs call it: a name that does not exist is a vault (or
 * authority) that does not exist, which no retry fixes; a request would only say "unresolved".
 */
async function preflight(outbound: OutboundClient, url: string, what: string) {
  try {
    await outbound.check(new URL(url))
  } catch (error) {
    if (error instanceof DestinationRefused) throw cloudErrorOfOutbound(what, 'destination_not_allowed')
    if (error instanceof DestinationUnresolved && error.definite) {
      throw new CloudProviderError('cloud_not_found', `${what}: ${error.host} does not exist (DNS)`, false)
    }
    if (error instanceof DestinationUnresolved) {
      throw new CloudProviderError('cloud_unreachable', `${what}: ${error.host} could not be resolved`, true)
    }
    throw error
  }
}

/**
 * Explains a failure from the last exchange the transport saw. The SDKs' own errors are not
 * used: they carry server text and request details; this message holds only a status, error
 * codes and the transport's reason.
 */
function explain(error: unknown, journal: ExchangeJournal): CloudProviderError {
  const known = findCause(error, (e): e is CloudProviderError => e instanceof CloudProviderError)
  if (known) return known
  const last = journal.last
  if (last?.failure) {
    return cloudErrorOfOutbound(SERVICE_NAME[last.service], last.failure.code)
  }
  if (last?.status !== undefined && last.status >= 300 && !isChallenge(last))
    return fromStatus(last, last.status)
  const name = error instanceof Error && /^[A-Za-z]{1,64}$/.test(error.name) ? error.name : 'an error'
  return new CloudProviderError('cloud_request_failed', `the Azure SDK failed with ${name}`, false)
}

/** A vault's 401 to a request without a token is its bearer challenge, not a refusal. */
const isChallenge = (exchange: Exchange) =>
  exchange.service === 'vault' && exchange.status === 401 && !exchange.authorized

const SERVICE_NAME: Record<AzureService, string> = { identity: 'Entra ID', vault: 'Key Vault' }

function fromStatus(exchange: Exchange, status: number): CloudProviderError {
  const where = SERVICE_NAME[exchange.service]
  const codes = [
    exchange.errorCode,
    exchange.innerErrorCode,
    ...(exchange.aadstsCodes ?? []).map((n) => `AADSTS${n}`),
  ].filter(Boolean)
  const detail = `HTTP ${status}${codes.length > 0 ? `, ${codes.join(', ')}` : ''}`
  if (status === 408 || status === 429 || status >= 500) {
    return new CloudProviderError('cloud_unavailable', `${where} is unavailable (${detail})`, true)
  }
  if (status < 400) {
    return new CloudProviderError('cloud_unexpected_response', `${where} redirected (${detail})`, false)
  }
  if (exchange.service === 'identity') {
    // Every refusal of the token request: wrong secret, unknown application or tenant.
    return new CloudProviderError(
      'cloud_credentials_refused',
      `Entra ID refused the credentials (${detail})`,
      false,
    )
  }
  if (status === 401 || status === 403) {
    return new CloudProviderError(
      'cloud_credentials_refused',
      `Key Vault refused the application's token or permissions (${detail})`,
      false,
    )
  }
  if (status === 404) {
    return new CloudProviderError(
      'cloud_not_found',
      `Key Vault found no vault at this URL (${detail})`,
      false,
    )
  }
  return new CloudProviderError('cloud_import_refused', `Key Vault refused the import (${detail})`, false)
}

function findCause<T>(error: unknown, match: (e: unknown) => e is T): T | undefined {
  for (let e: unknown = error, depth = 0; e !== undefined && depth < 8; depth++) {
    if (match(e)) return e
    e = e instanceof Error ? e.cause : undefined
  }
  return undefined
}

// ---------------------------------------------------------------------------------------------
// The adapter

export const azureProvider: CloudProviderAdapter = {
  provider: 'azure',
  supportedAlgorithms: AZURE_ALGORITHMS,
  parseSettings: (input) => ({ ...readSettings(input) }),
  parseCredentials: (input) => ({ ...readCredentials(input) }),
  parseTarget: (input) => ({ ...readTarget(input) }),

  /**
   * Official: Entra ID's hosts of the public and sovereign clouds, and vaults and managed HSMs
   * under Microsoft's Key Vault domains. A private-link name or an Azure Stack vault is custom.
   */
  endpoints(part, fields) {
    const { authorityHost, vaultUrl } = fields
    if (part === 'settings' && typeof authorityHost === 'string') {
      const official = onOfficialHost(authorityHost, (host) => Object.hasOwn(CLOUD_VAULT_RESOURCE, host))
      return [{ field: 'settings.authorityHost', url: authorityHost, official }]
    }
    if (part === 'target' && typeof vaultUrl === 'string') {
      const official = onOfficialHost(vaultUrl, (host) =>
        VAULT_RESOURCES.some(([suffix]) => host.endsWith(`.${suffix}`)),
      )
      return [{ field: 'target.vaultUrl', url: vaultUrl, official }]
    }
    return []
  },

  /**
   * A connection names no vault (targets do), so the test is the token: one client-credentials
   * grant for Key Vault's audience proves the tenant, the client id and the secret. Whether the
   * application may import into a given vault shows only at the first push.
   */
  async testConnection(connection) {
    const settings = stored(() => readSettings(connection.settings))
    const credentials = stored(() => readCredentials(connection.credentials))
    const journal: ExchangeJournal = { last: undefined }
    await preflight(connection.outbound, settings.authorityHost, 'the Entra ID authority host')
    const resource =
      CLOUD_VAULT_RESOURCE[new URL(settings.authorityHost).hostname] ?? 'https://vault.azure.net'
    try {
      await createCredential(connection, settings, credentials, journal).getToken(scopeOf(resource))
    } catch (error) {
      throw explain(error, journal)
    }
  },

  /**
   * Imports the version as a new version of `keyName` (created by the first import). `previous`
   * is not needed: Key Vault versions a key by itself. A rerun after an answer that was lost adds
   * one more version holding the same key, which is harmless.
   */
  async push(connection, targetInput, material): Promise<PushResult> {
    const settings = stored(() => readSettings(connection.settings))
    const credentials = stored(() => readCredentials(connection.credentials))
    const target = stored(() => readTarget(targetInput))
    const jwk = toAzureJwk(material)
    const journal: ExchangeJournal = { last: undefined }
    try {
      await preflight(connection.outbound, target.vaultUrl, 'the vault')
      const credential = vaultOnly(
        createCredential(connection, settings, credentials, journal),
        vaultScopes(target.vaultUrl),
      )
      const client = new KeyClient(target.vaultUrl, credential, {
        httpClient: createOutboundHttpClient({ ...exchangeOptions(connection, journal), service: 'vault' }),
        // Off because the SDK's check requires the host to end in the challenge's resource
        // (*.vault.azure.net); `vaultOnly` does the check in a form that holds for any host.
        disableChallengeResourceVerification: true,
        ...ONE_ATTEMPT,
      })
      const imported = await client.importKey(target.keyName, jwk, {
        // A software key: a plain JWK import works in Standard and Premium vaults alike (an HSM
        // import of a key that crossed the network in the clear would protect nothing more).
        hardwareProtected: false,
        enabled: true,
        tags: { kmsKeyId: material.keyId, kmsVersion: String(material.version) },
      })
      const { id, version } = importedVersion(imported.id, target)
      return { providerKeyId: id, state: { vaultUrl: target.vaultUrl, keyName: target.keyName, version } }
    } catch (error) {
      throw explain(error, journal)
    } finally {
      wipe(jwk)
    }
  },
}
