import type { KeyObject } from 'node:crypto'
import type { Actor } from '../auth/request-context.ts'
import type { CryptoPool } from '../crypto-pool/crypto-pool.ts'
import type { RandomSource } from '../entropy/random-source.ts'
import type { AlgorithmName, NodeKeySpec } from '../keys/algorithms.ts'
import { ENCRYPT_STATES } from '../keys/key-state.ts'
import type { KeyIssuer } from '../keys/key-store.ts'
import { AppError } from '../platform/errors.ts'
import { type KeyResolver, requireSecretKey } from './key-resolver.ts'
import { createSignature, type SignatureOptions } from './signing.ts'
import { runsInPool } from './signing-service.ts'

/**
 * A key version an issuer (an X.509 or SSH certificate authority) signs with. `sign` produces what
 * `node:crypto.sign` does for the key: RSA PKCS#1 v1.5 over SHA-256, ECDSA over the curve's hash
 * (P-256: SHA-256, P-384: SHA-384, P-521: SHA-512) in the requested encoding, Ed25519, ML-DSA and
 * SLH-DSA pure with the empty context.
 */
export interface IssuerKey {
  keyId: string
  keyVersion: number
  algorithm: AlgorithmName
  spec: NodeKeySpec
  publicKey: KeyObject
  sign(message: Buffer): Promise<Buffer>
}

/**
 * How other domains (pki, ssh) sign with a key the service holds: the key is reached through the
 * key resolver for the caller (tenant, API-key restriction, Signing type, the Active state, the
 * pinned version), so an issuer can do no more with a key than its caller could. The caller
 * records the operation itself (operation-audit.ts), naming the key.
 */
export interface IssuerSigner {
  open(
    actor: Actor,
    key: {
      keyId: string
      keyVersion?: number | undefined
      signatureFormat?: 'DER' | 'P1363'
      /** The issuer the key is reserved for (keys/key-service.ts reserve). */
      issuer: KeyIssuer
    },
  ): Promise<IssuerKey>
}

/**
 * 403 before an issuer changes anything when the caller's API key may not sign at all (its
 * restriction names other operations): issuing and revoking are operations of the CA's key.
 */
export function requireSignAllowed(actor: Actor): void {
  const operations = actor.keyRestriction?.operations
  if (operations && !operations.includes('sign'))
    throw new AppError(
      403,
      'operation_not_allowed',
      'This API key is restricted to other operations than sign',
      {
        operation: 'sign',
      },
    )
}

export function createIssuerSigner(deps: {
  keys: KeyResolver
  pool: CryptoPool
  random: RandomSource
}): IssuerSigner {
  return {
    async open(actor, input) {
      const key = await deps.keys.resolve(actor, {
        keyId: input.keyId,
        keyType: 'Signing',
        keyOperation: 'sign',
        states: ENCRYPT_STATES,
        operation: 'sign',
        version: input.keyVersion,
        issuer: input.issuer,
      })
      const secretKey = requireSecretKey(key.opened)
      const publicKey = key.opened.publicKey
      if (!publicKey) throw new AppError(409, 'key_state_conflict', 'The key has no public key')
      const options: SignatureOptions = {
        messageType: 'RAW',
        rsaPadding: 'PKCS1',
        signatureFormat: input.signatureFormat ?? 'DER',
      }
      const inPool = runsInPool(key.spec, options, 'sign')
      return {
        keyId: key.row.id,
        keyVersion: key.version,
        algorithm: key.row.algorithm as AlgorithmName,
        spec: key.spec,
        publicKey,
        async sign(message) {
          const random = deps.random.bytes(32)
          return inPool
            ? deps.pool.sign(actor.tenantId, { spec: key.spec, key: secretKey, message, options, random })
            : createSignature(key.spec, secretKey, message, options, (length) => random.subarray(0, length))
        },
      }
    },
  }
}
