import { createHmac, type KeyObject, timingSafeEqual } from 'node:crypto'
import type { AuditLog } from '../audit/audit-log.ts'
import type { Actor } from '../auth/request-context.ts'
import type { CryptoPool } from '../crypto-pool/crypto-pool.ts'
import type { RandomSource } from '../entropy/random-source.ts'
import type { NodeKeySpec } from '../keys/algorithms.ts'
import { DECRYPT_STATES, ENCRYPT_STATES } from '../keys/key-state.ts'
import type { KeyRow } from '../keys/key-store.ts'
import { AppError, invalidField } from '../platform/errors.ts'
import type { OpenedKeyVersion } from './key-object-cache.ts'
import { type KeyResolver, namingKeyIn, requireSecretKey } from './key-resolver.ts'
import { type AuditTarget, auditedOperation } from './operation-audit.ts'
import {
  checkOptions,
  createSignature,
  MIN_MAC_BYTES,
  matchingMacIndex,
  type SignatureOptions,
  schemeName,
  verifySignature,
} from './signing.ts'

interface SignResult {
  signature: Buffer
  keyId: string
  keyVersion: number
  algorithm: string
  signingScheme: string
}

interface VerifyResult {
  valid: boolean
  keyId: string
  keyVersion: number
}

interface MacResult {
  mac: Buffer
  keyId: string
  keyVersion: number
  algorithm: string
}

interface KeyChoice {
  keyId?: string | undefined
  /**
   * Verify and MAC verify: the version to check against. Absent: the current version, then (when
   * that does not match) the older ones, newest first, up to MAX_VERSIONS_TRIED in all.
   */
  keyVersion?: number | undefined
}

/**
 * Verification without a key version tries at most this many versions, the most recent ones
 * (docs/crypto-operations.md): a key rotated daily has the last three months covered; older
 * signatures name their version.
 */
export const MAX_VERSIONS_TRIED = 100
/**
 * Older versions checked per crypto-pool task. The first older version is checked inline (one
 * more verification, the common case: a signature from before the last rotation); past it a
 * search may cost up to 99 verifications (P-521: ~2.8 ms each), which the event loop must not pay.
 */
const VERSIONS_PER_TASK = 16
/** Bytes of HMAC input a MAC search may hash on the event loop (~0.25 ms); more go to the pool. */
const INLINE_MAC_BYTES = 256 * 1024

export interface SigningService {
  sign(actor: Actor, input: KeyChoice & { message: Buffer; options: SignatureOptions }): Promise<SignResult>
  verify(
    actor: Actor,
    input: KeyChoice & { message: Buffer; signature: Buffer; options: SignatureOptions },
  ): Promise<VerifyResult>
  /** `macLength`: truncate to that many leftmost bytes (RFC 2104 §5); absent: the full MAC. */
  mac(
    actor: Actor,
    input: { keyId: string; data: Buffer; macLength?: number | undefined },
  ): Promise<MacResult>
  verifyMac(
    actor: Actor,
    /** `bodyKeyId`: the body's cross-check of the path's key (400 when it names another key). */
    input: KeyChoice & {
      keyId: string
      bodyKeyId?: string | undefined
      data: Buffer
      mac: Buffer
      /** The MAC is truncated to this many bytes; absent: the full length. */
      macLength?: number | undefined
    },
  ): Promise<VerifyResult>
}

/**
 * Operations that cost a millisecond or more go to the crypto pool, so that a burst of them cannot
 * hold the event loop (bench: event-loop delay p99 of the mixed workload): SLH-DSA signing
 * (~0.25 s), ML-DSA signing (1-2.5 ms measured), RSA-3072/4096 signing (1.3/2.7 ms) and ECDSA
 * over a given digest (pure JS, tens of milliseconds cold). The hop costs ~0.1 ms. The rest (verify,
 * Ed25519, ECDSA, RSA-2048 signing) takes well under a millisecond and stays inline.
 */
export function runsInPool(
  spec: NodeKeySpec,
  options: SignatureOptions,
  operation: 'sign' | 'verify',
): boolean {
  if (spec.kind === 'ec') return options.messageType === 'DIGEST'
  if (operation === 'verify') return false
  switch (spec.kind) {
    case 'slh-dsa-sha2-128s':
    case 'ml-dsa-44':
    case 'ml-dsa-65':
    case 'ml-dsa-87':
      return true
    case 'rsa':
      return spec.modulusLength >= 3072
    default:
      return false
  }
}

export function createSigningService(deps: {
  audit: AuditLog
  keys: KeyResolver
  pool: CryptoPool
  random: RandomSource
}): SigningService {
  const { audit, keys, pool } = deps

  return {
    sign(actor, input) {
      const action = 'crypto.sign'
      const target: AuditTarget = { action, keyId: input.keyId ?? null }
      return auditedOperation(audit, actor, target, async () => {
        const key = await keys.resolve(actor, {
          keyId: input.keyId,
          keyType: 'Signing',
          keyOperation: 'sign',
          found: namingKeyIn(target),
          states: ENCRYPT_STATES,
          operation: 'sign',
        })
        // A PSS salt may be longer than 32 bytes when the caller names its length.
        const random = deps.random.bytes(Math.max(32, input.options.saltLength ?? 0))
        checkOptions(key.spec, input.options, input.message)
        const signature = runsInPool(key.spec, input.options, 'sign')
          ? await pool.sign(actor.tenantId, {
              spec: key.spec,
              key: requireSecretKey(key.opened),
              message: input.message,
              options: input.options,
              random,
            })
          : createSignature(key.spec, requireSecretKey(key.opened), input.message, input.options, (length) =>
              random.subarray(0, length),
            )
        const signingScheme = schemeName(key.spec, input.options)
        return {
          result: {
            signature,
            keyId: key.row.id,
            keyVersion: key.version,
            algorithm: key.row.algorithm,
            signingScheme,
          },
          record: {
            action,
            keyId: key.row.id,
            keyVersion: key.version,
            details: { signingScheme, messageType: input.options.messageType },
          },
        }
      })
    },

    verify(actor, input) {
      const action = 'crypto.verify'
      const target: AuditTarget = { action, keyId: input.keyId ?? null }
      return auditedOperation(audit, actor, target, async () => {
        const key = await keys.resolve(actor, {
          keyId: input.keyId,
          keyType: 'Signing',
          keyOperation: 'verify',
          found: namingKeyIn(target),
          states: DECRYPT_STATES,
          operation: 'verify',
          version: input.keyVersion,
        })
        const publicKey = key.opened.publicKey!
        checkOptions(key.spec, input.options, input.message)
        const inPool = runsInPool(key.spec, input.options, 'verify')
        const valid = inPool
          ? await pool.verify(actor.tenantId, {
              spec: key.spec,
              key: publicKey,
              message: input.message,
              signature: input.signature,
              options: input.options,
            })
          : verifySignature(key.spec, publicKey, input.message, input.signature, input.options)
        if (valid || input.keyVersion !== undefined || key.version === 1) {
          return {
            result: { valid, keyId: key.row.id, keyVersion: key.version },
            record: { action, keyId: key.row.id, keyVersion: key.version, details: { valid } },
          }
        }
        // No version named and the current one does not verify: the older ones, newest first.
        const search = await searchOlderVersions(
          actor.tenantId,
          key.row,
          key.version,
          (opened) => opened.publicKey,
          async (publicKeys, first) => {
            if (first && !inPool) {
              const one = verifySignature(
                key.spec,
                publicKeys[0]!,
                input.message,
                input.signature,
                input.options,
              )
              return one ? 0 : -1
            }
            return pool.verifyAny(actor.tenantId, {
              spec: key.spec,
              keys: publicKeys,
              message: input.message,
              signature: input.signature,
              options: input.options,
            })
          },
        )
        return searchAnswer(action, key.row.id, key.version, search)
      })
    },

    mac(actor, input) {
      const action = 'crypto.mac'
      const target: AuditTarget = { action, keyId: input.keyId }
      return auditedOperation(audit, actor, target, async () => {
        const key = await keys.resolve(actor, {
          keyId: input.keyId,
          keyType: 'HMAC',
          keyOperation: 'mac',
          found: namingKeyIn(target),
          states: ENCRYPT_STATES,
          operation: 'compute MACs',
        })
        const full = hmac(key.spec, requireSecretKey(key.opened), input.data)
        const mac = full.subarray(0, macLengthFor(full, input.macLength))
        return {
          result: { mac, keyId: key.row.id, keyVersion: key.version, algorithm: key.row.algorithm },
          record: { action, keyId: key.row.id, keyVersion: key.version },
        }
      })
    },

    verifyMac(actor, input) {
      const action = 'crypto.mac_verify'
      const target: AuditTarget = { action, keyId: input.keyId }
      return auditedOperation(audit, actor, target, async () => {
        const key = await keys.resolve(actor, {
          keyId: input.keyId,
          keyType: 'HMAC',
          keyOperation: 'mac_verify',
          found: namingKeyIn(target),
          sameKeyAs: { ref: input.bodyKeyId, field: 'body/keyId' },
          states: DECRYPT_STATES,
          operation: 'verify MACs',
          version: input.keyVersion,
        })
        const full = hmac(key.spec, requireSecretKey(key.opened), input.data)
        const expected = full.subarray(0, macLengthFor(full, input.macLength))
        // The length of a MAC is public (it follows from the algorithm and macLength); its bytes
        // are compared in constant time.
        const valid = input.mac.length === expected.length && timingSafeEqual(input.mac, expected)
        if (valid || input.keyVersion !== undefined || key.version === 1) {
          return {
            result: { valid, keyId: key.row.id, keyVersion: key.version },
            record: { action, keyId: key.row.id, keyVersion: key.version, details: { valid } },
          }
        }
        // No version named and the current one does not match: the older ones, newest first.
        const hash = (key.spec as Extract<NodeKeySpec, { kind: 'hmac' }>).hash
        const length = expected.length
        const search = await searchOlderVersions(
          actor.tenantId,
          key.row,
          key.version,
          (opened) => opened.secretKey,
          (secretKeys) =>
            secretKeys.length * (input.data.length + 1024) <= INLINE_MAC_BYTES
              ? Promise.resolve(matchingMacIndex(hash, secretKeys, input.data, input.mac, length))
              : pool.macAny(actor.tenantId, {
                  hash,
                  keys: secretKeys,
                  data: input.data,
                  mac: input.mac,
                  length,
                }),
        )
        return searchAnswer(action, key.row.id, key.version, search)
      })
    },
  }

  /**
   * Checks the versions below `current` (newest first, MAX_VERSIONS_TRIED in all with the
   * current one) in chunks, until one matches: the first chunk is one version, the next ones
   * VERSIONS_PER_TASK. A version whose material is gone is skipped. Versions are opened one at
   * a time (a cold search holds one database connection at a time) and only as far as needed.
   */
  async function searchOlderVersions(
    tenantId: string,
    row: KeyRow,
    current: number,
    keyOf: (opened: OpenedKeyVersion) => KeyObject | null,
    /** `first`: the first chunk, the one version before the current one. */
    match: (keys: KeyObject[], first: boolean) => Promise<number>,
  ): Promise<VersionSearch> {
    const oldest = Math.max(1, current - MAX_VERSIONS_TRIED + 1)
    let tried = 1
    let first = true
    for (let version = current - 1; version >= oldest; ) {
      const size = first ? 1 : VERSIONS_PER_TASK
      const versions: number[] = []
      const chunk: KeyObject[] = []
      for (; version >= oldest && chunk.length < size; version--) {
        const opened = await keys.open(tenantId, row, version)
        const key = opened && keyOf(opened)
        if (!key) continue
        versions.push(version)
        chunk.push(key)
      }
      if (chunk.length === 0) break
      tried += chunk.length
      const index = await match(chunk, first)
      if (index >= 0) return { matched: versions[index]!, tried }
      first = false
    }
    return { matched: null, tried }
  }
}

/** The outcome of a search across versions: the version that matched, and how many were checked. */
interface VersionSearch {
  matched: number | null
  tried: number
}

/**
 * A search's answer and audit record: the version that matched, or (none did) the current
 * version with valid false; the record says how many versions were checked.
 */
function searchAnswer(action: string, keyId: string, current: number, search: VersionSearch) {
  const valid = search.matched !== null
  const keyVersion = search.matched ?? current
  return {
    result: { valid, keyId, keyVersion },
    record: { action, keyId, keyVersion, details: { valid, versionsTried: search.tried } },
  }
}

/** The MAC length asked for, within the algorithm's output: 400 naming body/macLength otherwise. */
function macLengthFor(full: Buffer, macLength: number | undefined): number {
  if (macLength === undefined) return full.length
  if (macLength < MIN_MAC_BYTES || macLength > full.length) {
    throw invalidField(
      'body/macLength',
      `must be ${MIN_MAC_BYTES} to ${full.length} bytes for this key's algorithm`,
    )
  }
  return macLength
}

function hmac(spec: NodeKeySpec, key: Parameters<typeof createHmac>[1], data: Buffer): Buffer {
  if (spec.kind !== 'hmac') throw new AppError(400, 'key_type_mismatch', 'This operation needs an HMAC key')
  return createHmac(spec.hash, key).update(data).digest()
}
