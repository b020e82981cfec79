import type { KeyObject } from 'node:crypto'
import { toCompact } from '../crypto/envelope.ts'
import {
  type OpenItem,
  openMany,
  type PackedBuffers,
  packBuffers,
  type SealItem,
  sealMany,
} from '../crypto/envelope-batch.ts'
import { createSignature, type SignatureOptions, verifySignature } from '../crypto/signing.ts'
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
  | {
      kind: 'exportPrivate'
      secret: Uint8Array
      algorithm: AlgorithmName
      format: PrivateFormat
      password: string
    }
  | { kind: 'sealMany'; keys: KeyObject[]; items: SealItem[] }
  | { kind: 'openMany'; keys: KeyObject[]; items: OpenItem[] }

type MaterialResult =
  | { ok: true; secret: Uint8Array; publicKey: Uint8Array | null }
  | { ok: false; code: string; message: string }

export type TaskResult =
  | MaterialResult
  | { ok: true; value: string | Record<string, unknown>; encrypted: boolean }
  | { ok: true; signature: Uint8Array }
  | { ok: true; valid: boolean }
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
    case 'sealMany':
      return { ok: true, ...packBuffers(sealMany(task.keys, task.items).map(toCompact)) }
    case 'openMany':
      return { ok: true, ...packBuffers(openMany(task.keys, task.items)) }
  }
}
