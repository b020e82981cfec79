import type { AlgorithmName } from '../keys/algorithms.ts'
import {
  generateMaterial,
  type ImportRequest,
  importMaterial,
  KeyMaterialError,
} from '../keys/key-material.ts'

/**
 * The work the crypto pool does, shared by the worker (which runs it) and the pool (which types
 * it). Results cross the thread boundary by structured clone, so errors travel as data: a
 * thrown error would lose its code.
 */
export type CryptoTask =
  | { kind: 'generateKey'; algorithm: AlgorithmName }
  | { kind: 'importKey'; request: ImportRequest }

export type MaterialResult =
  | { ok: true; secret: Uint8Array; publicKey: Uint8Array | null }
  | { ok: false; code: string; message: string }

export function runTask(task: CryptoTask): MaterialResult {
  try {
    const material =
      task.kind === 'generateKey' ? generateMaterial(task.algorithm) : importMaterial(task.request)
    return { ok: true, secret: material.secret, publicKey: material.publicKey }
  } catch (error) {
    if (error instanceof KeyMaterialError) return { ok: false, code: error.code, message: error.message }
    throw error
  }
}
