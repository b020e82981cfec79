import type { AlgorithmName, KeyType } from '../keys/algorithms.ts'

/**
 * Tag suggestions for keys (docs/insights.md). An engine sees only what spec section 1 names:
 * the key's name, algorithm, type and description — never material, never secrets. The built-in
 * engine may also look at the labels the tenant already gives similar keys (local data that never
 * leaves the service); the model engine sends the four fields and nothing else.
 */
export interface KeyFacts {
  id: string
  name: string
  algorithm: AlgorithmName
  keyType: KeyType
  description: string
  /** The key's current labels (a suggestion never repeats one). */
  labels: readonly string[]
}

export interface TagSuggestion {
  /** A label as keys carry them: printable, 1-64 characters, lower-case words joined by hyphens. */
  label: string
  /** Why, in one sentence a person can check ("the name contains 'payments'"). */
  reason: string
  /** Which engine made it, when not the one asked (the model engine's fallback answers 'builtin'). */
  engine?: 'builtin' | 'model'
}

export interface SuggestionContext {
  /** Other keys of the same tenant (facts only), for the built-in engine's "similar keys" rule. */
  otherKeys: readonly KeyFacts[]
}

export interface TagEngine {
  readonly name: 'builtin' | 'model'
  /** At most MAX_SUGGESTIONS_PER_KEY suggestions, none a label the key already has, no duplicates. */
  suggest(key: KeyFacts, context: SuggestionContext): Promise<TagSuggestion[]>
}

export const MAX_SUGGESTIONS_PER_KEY = 8
export const LABEL_PATTERN = /^[a-z0-9]+(?:-[a-z0-9]+)*$/
export const MAX_LABEL_LENGTH = 64
