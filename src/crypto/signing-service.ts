import { createHmac, timingSafeEqual } from 'node:crypto'
import type { AuditLog } from '../audit/audit-log.ts'
import type { Actor } from '../auth/request-context.ts'
import type { CryptoPool } from '../crypto-pool/crypto-pool.ts'
import type { RandomSource } from '../entropy/random-source.ts'
import type { NodeKeySpec } from '../keys/algorithms.ts'
import { DECRYPT_STATES, ENCRYPT_STATES } from '../keys/key-state.ts'
import { AppError } from '../platform/errors.ts'
import type { KeyResolver } from './key-resolver.ts'
import { auditedOperation } from './operation-audit.ts'
import {
  checkDigest,
  createSignature,
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
  keyVersion?: number | undefined
}

export interface SigningService {
  sign(actor: Actor, input: KeyChoice & { message: Buffer; options: SignatureOptions }): Promise<SignResult>
  verify(
    actor: Actor,
    input: KeyChoice & { message: Buffer; signature: Buffer; options: SignatureOptions },
  ): Promise<VerifyResult>
  mac(actor: Actor, input: { keyId: string; data: Buffer }): Promise<MacResult>
  verifyMac(
    actor: Actor,
    input: KeyChoice & { keyId: string; data: Buffer; mac: Buffer },
  ): Promise<VerifyResult>
}

/**
 * Operations that cost a millisecond or more go to the crypto pool, so that a burst of them cannot
 * hold the event loop (bench: event-loop delay p99 of the mixed workload): SLH-DSA signing
 * (~0.25 s), ML-DSA signing (1-2.5 ms measured), RSA-3072/4096 signing (1.3/2.7 ms) and ECDSA
 * over a given digest (pure JS, tens of milliseconds cold). The hop costs ~0.1 ms. The rest (verify,
 * Ed25519, ECDSA, RSA-2048 signing) takes well under a millisecond and stays inline.
 */
function runsInPool(spec: NodeKeySpec, options: SignatureOptions, operation: 'sign' | 'verify'): boolean {
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
      return auditedOperation(audit, actor, { action, keyId: input.keyId ?? null }, async () => {
        const key = await keys.resolve(actor.tenantId, {
          keyId: input.keyId,
          keyType: 'Signing',
          states: ENCRYPT_STATES,
          operation: 'sign',
        })
        // A PSS salt may be longer than 32 bytes when the caller names its length.
        const random = deps.random.bytes(Math.max(32, input.options.saltLength ?? 0))
        checkDigest(key.spec, input.options, input.message)
        const signature = runsInPool(key.spec, input.options, 'sign')
          ? await pool.sign(actor.tenantId, {
              spec: key.spec,
              key: key.opened.secretKey,
              message: input.message,
              options: input.options,
              random,
            })
          : createSignature(key.spec, key.opened.secretKey, input.message, input.options, (length) =>
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
      return auditedOperation(audit, actor, { action, keyId: input.keyId ?? null }, async () => {
        const key = await keys.resolve(actor.tenantId, {
          keyId: input.keyId,
          keyType: 'Signing',
          states: DECRYPT_STATES,
          operation: 'verify',
          version: input.keyVersion,
        })
        const publicKey = key.opened.publicKey!
        checkDigest(key.spec, input.options, input.message)
        const valid = runsInPool(key.spec, input.options, 'verify')
          ? await pool.verify(actor.tenantId, {
              spec: key.spec,
              key: publicKey,
              message: input.message,
              signature: input.signature,
              options: input.options,
            })
          : verifySignature(key.spec, publicKey, input.message, input.signature, input.options)
        return {
          result: { valid, keyId: key.row.id, keyVersion: key.version },
          record: { action, keyId: key.row.id, keyVersion: key.version, details: { valid } },
        }
      })
    },

    mac(actor, input) {
      const action = 'crypto.mac'
      return auditedOperation(audit, actor, { action, keyId: input.keyId }, async () => {
        const key = await keys.resolve(actor.tenantId, {
          keyId: input.keyId,
          keyType: 'HMAC',
          states: ENCRYPT_STATES,
          operation: 'compute MACs',
        })
        const mac = hmac(key.spec, key.opened.secretKey, input.data)
        return {
          result: { mac, keyId: key.row.id, keyVersion: key.version, algorithm: key.row.algorithm },
          record: { action, keyId: key.row.id, keyVersion: key.version },
        }
      })
    },

    verifyMac(actor, input) {
      const action = 'crypto.mac_verify'
      return auditedOperation(audit, actor, { action, keyId: input.keyId }, async () => {
        const key = await keys.resolve(actor.tenantId, {
          keyId: input.keyId,
          keyType: 'HMAC',
          states: DECRYPT_STATES,
          operation: 'verify MACs',
          version: input.keyVersion,
        })
        const expected = hmac(key.spec, key.opened.secretKey, input.data)
        // The length of a MAC is public (it follows from the algorithm); its bytes are compared
        // in constant time.
        const valid = input.mac.length === expected.length && timingSafeEqual(input.mac, expected)
        return {
          result: { valid, keyId: key.row.id, keyVersion: key.version },
          record: { action, keyId: key.row.id, keyVersion: key.version, details: { valid } },
        }
      })
    },
  }
}

function hmac(spec: NodeKeySpec, key: Parameters<typeof createHmac>[1], data: Buffer): Buffer {
  if (spec.kind !== 'hmac') throw new AppError(400, 'key_type_mismatch', 'This operation needs an HMAC key')
  return createHmac(spec.hash, key).update(data).digest()
}
