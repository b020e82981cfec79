import { createPublicKey, type KeyObject } from 'node:crypto'
import type { AlgorithmName, KeyType } from '../keys/algorithms.ts'
import type { OutboundClient, OutboundErrorCode } from '../outbound/outbound-client.ts'

/**
 * One cloud KMS (docs/cloud-export.md): how a tenant's connection to it is described, what it
 * accepts, and how one version of a key is pushed to it through the provider's own import
 * protocol. Each provider lives in `providers/<name>.ts` and talks to the cloud only through the
 * guarded outbound client (the SDKs are given a transport built on it).
 */
export const CLOUD_PROVIDERS = ['aws', 'azure', 'gcp', 'scaleway'] as const
export type CloudProvider = (typeof CLOUD_PROVIDERS)[number]

/**
 * A connection as a provider uses it: `settings` are the non-secret, validated fields (region,
 * tenant and client ids, a custom endpoint, an extra CA) and `credentials` the secret ones
 * (opened from the tenant-KEK seal only for the call). Both are what the provider's own
 * `parseSettings` / `parseCredentials` returned.
 */
export interface ConnectionContext {
  settings: Record<string, unknown>
  credentials: Record<string, unknown>
  /** The guarded client (src/outbound): every request of the provider goes through it. */
  outbound: OutboundClient
  /** Bounds each HTTP exchange with the cloud. */
  timeoutMs: number
}

/** The key version being pushed: its private half, as node:crypto holds it. */
export interface ExportMaterial {
  algorithm: AlgorithmName
  keyType: KeyType
  /** The service's key id and version (names and descriptions at the cloud may carry them). */
  keyId: string
  version: number
  privateKey: KeyObject
  publicKey: KeyObject
}

/** What a push left at the cloud, stored on the export and handed to the next push. */
export interface PushResult {
  /** The provider's name of what now holds this version: an AWS key ARN, an Azure key id with its version, a GCP crypto key version name, a Scaleway key id. */
  providerKeyId: string
  /** Provider-specific facts the next push needs (e.g. the AWS alias target, the GCP crypto key). */
  state: Record<string, unknown>
}

/**
 * Why a push or a connection test failed, in words that may be stored and shown: never a
 * credential, a token, key material or a signed request. `retryable`: a transport failure or a
 * 5xx/429 (try again later); false for refused credentials, a missing vault, a refused import.
 */
export class CloudProviderError extends Error {
  readonly code: string
  readonly retryable: boolean
  constructor(code: string, message: string, retryable: boolean) {
    super(message)
    this.code = code
    this.retryable = retryable
  }
}

/**
 * A URL a connection's settings or credentials, or an export's target, name: the field (as a
 * CloudFieldError names it) and whether it is one of the provider's own public hosts.
 */
export interface EndpointField {
  field: string
  url: string
  official: boolean
}

/** A caller's field that a provider refuses: a 400 naming it (the service turns it into one). */
export class CloudFieldError extends Error {
  readonly field: string
  constructor(field: string, message: string) {
    super(`${field} ${message}`)
    this.field = field
  }
}

export interface CloudProviderAdapter {
  readonly provider: CloudProvider
  /** Spec 2.2's compatibility table for this provider, in the service's algorithm names. */
  readonly supportedAlgorithms: readonly AlgorithmName[]
  /** Validates a connection's non-secret fields (CloudFieldError naming `settings.<field>`). */
  parseSettings(input: Record<string, unknown>): Record<string, unknown>
  /** Validates a connection's secret fields (CloudFieldError naming `credentials.<field>`). */
  parseCredentials(input: Record<string, unknown>): Record<string, unknown>
  /** Validates an export's target at this provider (CloudFieldError naming `target.<field>`). */
  parseTarget(input: Record<string, unknown>): Record<string, unknown>
  /**
   * The URLs that the fields of one part name (as `parse*` returned them or as stored), each
   * judged official or not: the provider's public hosts (for the connection's region where the
   * host depends on it) are official; any other is a custom endpoint, which the service lets
   * through only when the operator allowed its origin (custom-endpoints.ts).
   */
  endpoints(part: 'settings' | 'credentials' | 'target', fields: Record<string, unknown>): EndpointField[]
  /** One cheap authenticated call that proves the credentials work (CloudProviderError otherwise). */
  testConnection(connection: ConnectionContext): Promise<void>
  /**
   * Makes `material` the key at `target`, by the provider's import protocol. `previous` is what
   * the last successful push of this export returned (null the first time): a rotation adds a
   * new version where the provider allows it, or a new key with the alias moved where it does
   * not (AWS asymmetric imports). Safe to run again after a failure.
   */
  push(
    connection: ConnectionContext,
    target: Record<string, unknown>,
    material: ExportMaterial,
    previous: PushResult | null,
  ): Promise<PushResult>
}

/**
 * A transport failure of the guarded client, the same way for every provider: a refused
 * destination is the operator's policy and a too-large answer will not shrink (no retry); the rest
 * passes. The refusal's reason (which may say what an internal name resolves to) is not repeated
 * to the tenant.
 */
export function cloudErrorOfOutbound(where: string, code: OutboundErrorCode): CloudProviderError {
  switch (code) {
    case 'destination_not_allowed':
      return new CloudProviderError(
        'cloud_destination_refused',
        `${where} is not an allowed destination (a private, loopback or otherwise non-public address)`,
        false,
      )
    case 'response_too_large':
      return new CloudProviderError('cloud_unexpected_response', `${where} answered too much`, false)
    case 'timeout':
      return new CloudProviderError('cloud_unreachable', `${where} did not answer in time`, true)
    case 'destination_unresolved':
      return new CloudProviderError('cloud_unreachable', `${where}: the host name did not resolve`, true)
    default:
      return new CloudProviderError('cloud_unreachable', `${where} could not be reached (${code})`, true)
  }
}

/**
 * The public key a cloud says it now holds (a PEM it returned) is this version's: a push proves
 * what it imported, rather than trusting that the import did what it said.
 */
export function checkHeldKey(pem: unknown, expected: KeyObject, where: string): void {
  let held: KeyObject
  try {
    held = createPublicKey(String(pem))
  } catch {
    throw new CloudProviderError(
      'cloud_unexpected_response',
      `${where} returned a public key that cannot be read`,
      false,
    )
  }
  const spki = (key: KeyObject) => key.export({ format: 'der', type: 'spki' })
  if (!spki(held).equals(spki(expected)))
    throw new CloudProviderError('cloud_key_mismatch', `${where} does not hold this key version`, false)
}
