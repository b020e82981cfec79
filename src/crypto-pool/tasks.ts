import type { KeyObject } from 'node:crypto'
import { type EnvelopeKey, toCompact } from '../crypto/envelope.ts'
import {
  type OpenItem,
  openMany,
  type PackedBuffers,
  packBuffers,
  type SealItem,
  sealMany,
} from '../crypto/envelope-batch.ts'
import { type ReEncryptItem, reEncryptMany } from '../crypto/re-encrypt-many.ts'
import {
  createSignature,
  matchingMacIndex,
  type SignatureOptions,
  verifyingKeyIndex,
  verifySignature,
} from '../crypto/signing.ts'
import type { AlgorithmName, NodeKeySpec } from '../keys/algorithms.ts'
import { algorithmByName } from '../keys/algorithms.ts'
import {
  exportPrivate,
  generateMaterial,
  type ImportRequest,
  importMaterial,
  KeyMaterialError,
  type PrivateFormat,
} from '../keys/key-material.ts'

/**
 * The work the crypto pool does, shared by the worker (which runs it) and the pool (which types
 * it). Inputs and results cross the thread boundary by structured clone (KeyObjects included),
 * so errors travel as data: a thrown error would lose its code.
 */
export type CryptoTask =
  | { kind: 'generateKey'; algorithm: AlgorithmName }
  | { kind: 'importKey'; request: ImportRequest }
  | {
      kind: 'sign'
      spec: NodeKeySpec
      key: KeyObject
      message: Uint8Array
      options: SignatureOptions
      /** Random bytes the scheme may need (a PSS salt), drawn on the main thread. */
      random: Uint8Array
    }
  | {
      kind: 'verify'
      spec: NodeKeySpec
      key: KeyObject
      message: Uint8Array
      signature: Uint8Array
      options: SignatureOptions
    }
  /** Verification without a key version: the versions to try, newest first. */
  | {
      kind: 'verifyAny'
      spec: NodeKeySpec
      keys: KeyObject[]
      message: Uint8Array
      signature: Uint8Array
      options: SignatureOptions
    }
  /** MAC verification without a key version: the versions' secret keys, newest first. */
  | {
      kind: 'macAny'
      hash: string
      keys: KeyObject[]
      data: Uint8Array
      mac: Uint8Array
      length: number
    }
  | {
      kind: 'exportPrivate'
      secret: Uint8Array
      algorithm: AlgorithmName
      format: PrivateFormat
      password: string
    }
  | { kind: 'sealMany'; keys: EnvelopeKey[]; items: SealItem[] }
  | { kind: 'openMany'; keys: EnvelopeKey[]; items: OpenItem[] }
  /** Open and seal again in one task: the plaintext stays on the thread (re-encrypt-many.ts). */
  | { kind: 'reEncryptMany'; keys: EnvelopeKey[]; items: ReEncryptItem[] }

type MaterialResult =
  | { ok: true; secret: Uint8Array | null; publicKey: Uint8Array | null }
  | { ok: false; code: string; message: string }

export type TaskResult =
  | MaterialResult
  | { ok: true; value: string | Record<string, unknown>; encrypted: boolean }
  | { ok: true; signature: Uint8Array }
  | { ok: true; valid: boolean }
  /** verifyAny, macAny: the index of the key that matched, -1 for none. */
  | { ok: true; index: number }
  /** sealMany: compact envelopes; openMany: plaintexts, -1 for items that failed. */
  | ({ ok: true } & PackedBuffers)

const asBuffer = (bytes: Uint8Array) => Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)

export function runTask(task: CryptoTask): TaskResult {
  switch (task.kind) {
    case 'generateKey':
    case 'importKey':
      try {
        const material =
          task.kind === 'generateKey' ? generateMaterial(task.algorithm) : importMaterial(task.request)
        return { ok: true, secret: material.secret, publicKey: material.publicKey }
      } catch (error) {
        if (error instanceof KeyMaterialError) return { ok: false, code: error.code, message: error.message }
        throw error
      }
    case 'exportPrivate': {
      const secret = asBuffer(task.secret)
      try {
        const exported = exportPrivate(secret, algorithmByName(task.algorithm), task.format, task.password)
        return { ok: true, value: exported.value, encrypted: exported.encrypted }
      } catch (error) {
        if (error instanceof KeyMaterialError) return { ok: false, code: error.code, message: error.message }
        throw error
      } finally {
        // This thread's copy of the private key.
        secret.fill(0)
      }
    }
    case 'sign': {
      const random = asBuffer(task.random)
      const signature = createSignature(task.spec, task.key, asBuffer(task.message), task.options, (length) =>
        random.subarray(0, length),
      )
      return { ok: true, signature }
    }
    case 'verify':
      return {
        ok: true,
        valid: verifySignature(
          task.spec,
          task.key,
          asBuffer(task.message),
          asBuffer(task.signature),
          task.options,
        ),
      }
    case 'verifyAny':
      return {
        ok: true,
        index: verifyingKeyIndex(
          task.spec,
          task.keys,
          asBuffer(task.message),
          asBuffer(task.signature),
          task.options,
        ),
      }
    case 'macAny':
      return {
        ok: true,
        index: matchingMacIndex(task.hash, task.keys, asBuffer(task.data), asBuffer(task.mac), task.length),
      }
    case 'sealMany':
      return { ok: true, ...packBuffers(sealMany(task.keys, task.items).map(toCompact)) }
    case 'openMany':
      return { ok: true, ...packBuffers(openMany(task.keys, task.items)) }
    case 'reEncryptMany':
      return {
        ok: true,
        ...packBuffers(reEncryptMany(task.keys, task.items).map((sealed) => sealed && toCompact(sealed))),
      }
  }
}
